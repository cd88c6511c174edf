//! Property tests of every parser a client can reach: paths, references, names, filters,
//! page tokens, token forms, and the JSON bodies of every insert. Whatever arrives, the
//! mock answers in Google's envelope without a 5xx or a panic, and a refused write leaves
//! nothing behind (the leak report is unchanged, no operation is recorded).

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::testing::{Mock, P};

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("compute".to_string()),
        Just("v1".to_string()),
        Just("beta".to_string()),
        Just("projects".to_string()),
        Just("ccm-conformance".to_string()),
        Just("global".to_string()),
        Just("regions".to_string()),
        Just("zones".to_string()),
        Just("us-central1".to_string()),
        Just("targetPools".to_string()),
        Just("operations".to_string()),
        Just("aggregated".to_string()),
        "[a-zA-Z0-9._%-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(RunnerConfig::with_cases(512))]

    #[test]
    fn paths_parse_or_refuse(segs in prop::collection::vec(segment(), 0..10), slash in any::<bool>()) {
        let p = format!("/{}{}", segs.join("/"), if slash { "/" } else { "" });
        if let Ok(parsed) = crate::path::parse(&p)
            && let crate::path::Target::Resource { name: Some(n), .. } = &parsed.target
        {
            prop_assert!(crate::path::valid_name(n) || crate::path::valid_id(n));
        }
        let _ = crate::path::parse_ref(&p);
        let _ = crate::gate::classify_path("GET", &p);
    }

    #[test]
    fn names_follow_rfc1035(s in "\\PC{0,70}") {
        let ok = crate::path::valid_name(&s);
        let re = regex::Regex::new("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$").expect("re");
        prop_assert_eq!(ok, re.is_match(&s));
    }

    #[test]
    fn filters_never_panic(f in "[ -~]{0,60}", field in "[a-z]{1,8}", v in "[ -~]{0,12}") {
        if let Ok(filter) = crate::filter::Filter::parse(&f) {
            let _ = filter.matches(&json!({field: v}));
        }
    }

    #[test]
    fn name_eq_filters_select_by_regex(name in "[a-z][a-z0-9-]{0,10}[a-z0-9]") {
        let f = crate::filter::Filter::parse(&format!("name eq {}", regex::escape(&name))).expect("parses");
        let v = json!({"name": name});
        prop_assert!(f.matches(&v));
        let quoted = format!("name = \"{name}\"");
        let g = crate::filter::Filter::parse(&quoted).expect("parses");
        prop_assert!(g.matches(&v));
    }

    #[test]
    fn page_tokens_never_panic(t in "\\PC{0,40}", fp in any::<u64>()) {
        let _ = crate::compute::decode_token(&t, fp);
    }

    #[test]
    fn page_tokens_round_trip(offset in 0usize..100_000, fp in any::<u64>()) {
        prop_assert_eq!(crate::compute::decode_token(&crate::compute::encode_token(offset, fp), fp), Some(offset));
    }

    #[test]
    fn paging_covers_every_item_once(n in 0usize..30, size in 1usize..6) {
        let items: Vec<Value> = (0..n).map(|i| json!({"name": format!("x{i}")})).collect();
        let mut seen = Vec::new();
        let mut query = format!("maxResults={size}");
        loop {
            let q = crate::compute::list_query(&query, "l").expect("query");
            let (page, next) = crate::compute::page(items.clone(), &q, "l");
            seen.extend(page);
            match next {
                Some(t) => query = format!("maxResults={size}&pageToken={t}"),
                None => break,
            }
        }
        prop_assert_eq!(seen, items);
    }

    #[test]
    fn list_queries_never_panic(q in "[ -~]{0,60}") {
        let _ = crate::compute::list_query(&q, "l");
    }

    #[test]
    fn token_forms_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = crate::auth::parse_token_form(&body);
    }

    #[test]
    fn port_ranges_never_panic(s in "[0-9-]{0,12}") {
        if let Some((a, b)) = crate::compute::parse_port_range(&s) {
            prop_assert!(a >= 1 && a <= b);
        }
    }
}

const KEYS: &[&str] = &[
    "name",
    "description",
    "address",
    "addressType",
    "IPAddress",
    "IPProtocol",
    "portRange",
    "ports",
    "target",
    "loadBalancingScheme",
    "instances",
    "healthChecks",
    "sessionAffinity",
    "port",
    "requestPath",
    "checkIntervalSec",
    "timeoutSec",
    "network",
    "sourceRanges",
    "targetTags",
    "allowed",
    "denied",
    "ports",
    "destRange",
    "nextHopInstance",
    "nextHopIp",
    "priority",
    "type",
    "httpHealthCheck",
    "direction",
    "bogus",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![-1i64, 0, 1, 80, 1000, 65535, 65536]).prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "x",
            "fw-a",
            "TCP",
            "UDP",
            "tcp",
            "80",
            "80-90",
            "90-80",
            "0.0.0.0/0",
            "10.0.0.0/8",
            "127.71.0.99",
            "HTTP",
            "INGRESS",
            "EXTERNAL",
            "INTERNAL",
            "NONE",
            "/healthz",
            "global/networks/default",
            "zones/us-central1-a/instances/node-0",
            "regions/us-central1/targetPools/tp",
            "global/httpHealthChecks/hc",
            "not a url",
            "Bad_Name",
        ])
        .prop_map(Value::from),
    ]
}

fn body() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..7).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Any JSON body inserted, put, patched or sent to an action is answered 200 or 4xx in
/// Google's envelope; a refused one changes no resource and starts no operation.
#[test]
fn any_insert_body_is_answered_without_a_5xx() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let m = Mock::seeded(1);
    let token = rt.block_on(m.token());
    let targets = [
        ("POST", "regions/us-central1/addresses"),
        ("POST", "regions/us-central1/forwardingRules"),
        ("POST", "regions/us-central1/targetPools"),
        ("POST", "regions/us-central1/targetPools/tp/addInstance"),
        (
            "POST",
            "regions/us-central1/targetPools/tp/removeHealthCheck",
        ),
        ("POST", "global/httpHealthChecks"),
        ("POST", "global/healthChecks"),
        ("POST", "global/firewalls"),
        ("POST", "global/routes"),
        ("PUT", "global/httpHealthChecks/hc"),
        ("PATCH", "global/httpHealthChecks/hc"),
        ("PATCH", "global/firewalls/fw"),
    ];
    let mut runner = TestRunner::new(RunnerConfig::with_cases(256));
    runner
        .run(
            &(
                body(),
                prop::sample::select(targets.to_vec()),
                any::<bool>(),
            ),
            |(mut body, (method, target), named)| {
                rt.block_on(async {
                    // Seed a pool and a health check for references to hit.
                    let _ = m
                        .api(
                            "POST",
                            "global/httpHealthChecks",
                            &token,
                            Some(json!({"name": "hc"})),
                        )
                        .await;
                    let _ = m
                        .api(
                            "POST",
                            "regions/us-central1/targetPools",
                            &token,
                            Some(json!({"name": "tp"})),
                        )
                        .await;
                    let _ = m
                        .api(
                            "POST",
                            "global/firewalls",
                            &token,
                            Some(json!({"name": "fw", "allowed": [{"IPProtocol": "tcp"}]})),
                        )
                        .await;
                    if named && let Value::Object(o) = &mut body {
                        o.insert("name".into(), json!("prop"));
                    }
                    let before = m.shared.cloud().docs.clone();
                    let ops = m.shared.cloud().ops.len();
                    let r = m.api(method, target, &token, Some(body.clone())).await;
                    if r.status.is_server_error() {
                        return Err(TestCaseError::fail(format!(
                            "{target} {body}: {} {:?}",
                            r.status, r.body
                        )));
                    }
                    if r.status.is_client_error() {
                        if !r.body["error"]["errors"][0]["reason"].is_string() {
                            return Err(TestCaseError::fail(format!("no envelope: {:?}", r.body)));
                        }
                        if m.shared.cloud().docs != before || m.shared.cloud().ops.len() != ops {
                            return Err(TestCaseError::fail(format!(
                                "a refused write changed something: {body}"
                            )));
                        }
                    } else if r.body["kind"] != "compute#operation" {
                        return Err(TestCaseError::fail(format!(
                            "not an operation: {:?}",
                            r.body
                        )));
                    }
                    m.admin().reset();
                    Ok(())
                })
            },
        )
        .expect("property");
    let _ = P;
}
