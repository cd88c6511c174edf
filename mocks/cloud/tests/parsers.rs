//! Property tests of the parsers this crate owns — fault rules (JSON and values) and seed
//! files: whatever comes in, they never panic, a refused rule or file changes nothing, and
//! an accepted rule can be checked against any request.

use std::path::Path;

use mock_cloud::{Fault, FaultJson, FaultKind, Faults, RequestInfo, SeedFile};
use proptest::prelude::*;

fn json_fragment() -> impl Strategy<Value = String> {
    let keys = prop::sample::select(vec![
        "cloud",
        "service",
        "method",
        "path",
        "operation",
        "resource",
        "probability",
        "count",
        "kind",
        "status",
        "code",
        "message",
        "latency_ms",
        "jitter_ms",
        "window_ms",
        "window_reads",
        "bogus",
    ]);
    let values = prop::sample::select(vec![
        "null",
        "0",
        "1",
        "-1",
        "0.5",
        "1.5",
        "404",
        "503",
        "200",
        "99999999999",
        "\"GET\"",
        "\"(\"",
        "\"/servers\"",
        "\"throttle\"",
        "\"reset\"",
        "\"not_found_after_create\"",
        "\"error\"",
        "\"latency\"",
        "\"nope\"",
        "[]",
        "{}",
        "true",
        "1e400",
    ]);
    prop::collection::vec((keys, values), 0..8).prop_map(|pairs| {
        let body: Vec<String> = pairs
            .into_iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        format!("{{{}}}", body.join(", "))
    })
}

fn kind() -> impl Strategy<Value = Option<FaultKind>> {
    prop::option::of(prop::sample::select(vec![
        FaultKind::Error,
        FaultKind::Throttle,
        FaultKind::Latency,
        FaultKind::Reset,
        FaultKind::NotFoundAfterCreate,
    ]))
}

fn fault() -> impl Strategy<Value = FaultJson> {
    (
        prop::option::of("[a-z(\\[*+?.]{0,6}"),
        prop::option::of(prop::num::f64::ANY),
        prop::option::of(0u32..4),
        kind(),
        prop::sample::select(vec![0u16, 200, 404, 429, 500, 503, 700]),
        prop::option::of(0u64..3),
        prop::option::of(0u64..3),
        prop::option::of(0u64..50),
        prop::option::of(0u32..3),
    )
        .prop_map(
            |(
                path,
                probability,
                count,
                kind,
                status,
                latency_ms,
                jitter_ms,
                window_ms,
                window_reads,
            )| {
                FaultJson {
                    path,
                    probability,
                    count,
                    kind,
                    status,
                    latency_ms,
                    jitter_ms,
                    window_ms,
                    window_reads,
                    ..Default::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fault_json_never_panics_and_refusals_change_nothing(json in json_fragment()) {
        let faults = Faults::new();
        if let Ok(rule) = serde_json::from_str::<Fault>(&json) {
            match faults.try_add(rule) {
                Ok(_) => prop_assert_eq!(faults.list().len(), 1),
                Err(_) => prop_assert!(faults.list().is_empty()),
            }
        }
    }

    #[test]
    fn any_rule_is_refused_or_fires_sanely(rules in prop::collection::vec(fault(), 0..5),
                                           seed in any::<u64>(),
                                           paths in prop::collection::vec("[/a-z0-9]{0,12}", 1..6)) {
        let faults = Faults::new();
        faults.set_seed(seed);
        let before = faults.list().len();
        let all = faults.try_add_all(rules.clone());
        if all.is_err() {
            prop_assert_eq!(faults.list().len(), before);
        }
        faults.note_created("abc");
        for path in &paths {
            let req = RequestInfo {
                service: "compute",
                method: "GET",
                path,
                operation: None,
                resource: Some("abc"),
            };
            if let Some(status) = faults.check_request(&req).and_then(|f| f.status) {
                prop_assert!((400..=599).contains(&status), "{status}");
            }
        }
    }

    #[test]
    fn seed_files_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200),
                              faults in prop::collection::vec(json_fragment(), 0..3)) {
        let _ = SeedFile::<serde_json::Value>::parse(&bytes, Path::new("fuzz"));
        let json = format!("{{\"faults\": [{}], \"fault_seed\": 1}}", faults.join(","));
        if let Ok(seed) = SeedFile::<serde_json::Value>::parse(json.as_bytes(), Path::new("fuzz")) {
            // Parse checked the rules, so applying them cannot fail.
            let engine = Faults::new();
            prop_assert!(seed.apply_faults(&engine).is_ok());
            prop_assert_eq!(engine.list().len(), seed.faults.len());
        }
    }
}
