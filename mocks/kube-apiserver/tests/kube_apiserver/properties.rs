//! Property tests of the parsers that take outside input: label and field selectors, the
//! three patch engines, server-side apply bodies and query parameters (through the router
//! with `oneshot`, no socket).
//!
//! Why this exists: a client (or a fuzzer) may send anything; the server must never panic
//! and a refused write must leave the stored object — resourceVersion included — exactly as
//! it was. Case counts are kept small enough that the file runs in well under 20 s in a
//! debug build; raise them with `PROPTEST_CASES=N` for a longer hunt.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::patch::{self, PatchType};
use mock_kube_apiserver::selector::{FieldSelector, LabelSelector};
use mock_kube_apiserver::{AppState, Config, router};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

const TOKEN: &str = "prop-token";

fn cases(n: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators

/// Selector-ish text: pieces that hit every lexer branch, glued together.
fn selector_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("app".to_string()),
        Just("example.com/".to_string()),
        Just("x.y/z-1".to_string()),
        Just("=".to_string()),
        Just("==".to_string()),
        Just("!=".to_string()),
        Just("!".to_string()),
        Just(",".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just(" in ".to_string()),
        Just(" notin ".to_string()),
        Just(">".to_string()),
        Just("<".to_string()),
        Just(" ".to_string()),
        Just("\\".to_string()),
        Just("\\,".to_string()),
        Just("12".to_string()),
        Just("-3".to_string()),
        Just("é".to_string()),
        Just("_".to_string()),
        Just(".".to_string()),
        "[a-z0-9]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

fn label_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop_oneof![Just("a".to_string()), Just("app".to_string()), "[a-c]"],
        prop_oneof![Just(String::new()), "[a-c0-9]{0,3}", Just("-3".to_string())],
        0..4,
    )
}

/// Object keys that collide with real fields and patch directives often.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("metadata"),
        Just("labels"),
        Just("annotations"),
        Just("finalizers"),
        Just("spec"),
        Just("status"),
        Just("taints"),
        Just("conditions"),
        Just("addresses"),
        Just("ports"),
        Just("port"),
        Just("protocol"),
        Just("type"),
        Just("key"),
        Just("name"),
        Just("value"),
        Just("effect"),
        Just("providerID"),
        Just("resourceVersion"),
        Just("managedFields"),
        Just("$patch"),
        Just("$retainKeys"),
        Just("$deleteFromPrimitiveList/finalizers"),
        Just("$setElementOrder/conditions"),
        Just("$setElementOrder/taints"),
        Just("a"),
    ]
    .prop_map(str::to_string)
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..100_000).prop_map(|n| json!(n)),
        Just(json!(1.5)),
        prop_oneof![
            Just("TCP"),
            Just("UDP"),
            Just("Ready"),
            Just("True"),
            Just("delete"),
            Just("replace"),
            Just("merge"),
            Just("retainKeys"),
            Just("NoSchedule"),
            Just("x"),
            Just(""),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), json_value()), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().collect()))
}

fn pointer() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("metadata"),
            Just("labels"),
            Just("spec"),
            Just("taints"),
            Just("0"),
            Just("1"),
            Just("-"),
            Just("01"),
            Just("~0"),
            Just("~1"),
            Just("~2"),
            Just(""),
            Just("a"),
        ],
        0..4,
    )
    .prop_map(|segs| segs.iter().map(|s| format!("/{s}")).collect())
}

fn json_patch_doc() -> impl Strategy<Value = Value> {
    let op = (
        prop_oneof![
            Just("add"),
            Just("remove"),
            Just("replace"),
            Just("move"),
            Just("copy"),
            Just("test"),
            Just("bogus"),
        ],
        pointer(),
        prop::option::of(json_value()),
        prop::option::of(pointer()),
        any::<bool>(),
    )
        .prop_map(|(op, path, value, from, drop_path)| {
            let mut m = Map::new();
            m.insert("op".into(), json!(op));
            if !drop_path {
                m.insert("path".into(), json!(path));
            }
            if let Some(v) = value {
                m.insert("value".into(), v);
            }
            if let Some(f) = from {
                m.insert("from".into(), json!(f));
            }
            Value::Object(m)
        });
    prop::collection::vec(op, 0..5).prop_map(Value::Array)
}

/// Bytes of a patch body: mostly structured, sometimes raw garbage.
fn patch_body(structured: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => structured.prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..40),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
    ]
}

fn node_like() -> impl Strategy<Value = Value> {
    (json_object(), json_object(), json_object()).prop_map(|(meta, spec, status)| {
        let mut meta = meta;
        if let Some(m) = meta.as_object_mut() {
            m.insert("name".into(), json!("n1"));
            m.insert(
                "labels".into(),
                json!({"app": "a", "kubernetes.io/hostname": "n1"}),
            );
        }
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": meta,
            "spec": spec,
            "status": status,
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Selectors

proptest! {
    #![proptest_config(cases(600))]

    #[test]
    fn label_selector_parse_display_parse(text in selector_text(), labels in label_map()) {
        if let Ok(sel) = LabelSelector::parse(&text) {
            let shown = sel.to_string();
            let again = LabelSelector::parse(&shown);
            prop_assert_eq!(again.as_ref(), Ok(&sel), "{:?} displayed as {:?}", text, shown);
            prop_assert_eq!(again.map(|s| s.matches(&labels)), Ok(sel.matches(&labels)));
        }
    }

    #[test]
    fn field_selector_parse_display_parse(text in selector_text(), value in "[a-c,=\\\\]{0,4}") {
        if let Ok(sel) = FieldSelector::parse(&text) {
            let shown = sel.to_string();
            let again = FieldSelector::parse(&shown).map(|s| {
                let mut t = s.terms().to_vec();
                t.sort_by(|a, b| (&a.field, &a.value).cmp(&(&b.field, &b.value)));
                t
            });
            let mut want = sel.terms().to_vec();
            want.sort_by(|a, b| (&a.field, &a.value).cmp(&(&b.field, &b.value)));
            prop_assert_eq!(again, Ok(want), "{:?} displayed as {:?}", text, shown);
            let get = |_: &str| Some(value.clone());
            let _ = sel.matches(&get);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Patch engines

proptest! {
    #![proptest_config(cases(400))]

    /// JSON merge patch: never panics, and agrees with RFC 7386 as implemented by the
    /// `json-patch` crate whenever the result is an object — except for nulls inside
    /// objects inside arrays, which upstream (evanphx/json-patch merge.go `pruneAryNulls`)
    /// prunes and the RFC keeps.
    #[test]
    fn merge_patch_matches_rfc7386(target in json_object(), body in patch_body(json_value())) {
        let ours = patch::apply_patch("Node", &target, PatchType::Merge, &body);
        if let (Ok(ours), Ok(p)) = (&ours, serde_json::from_slice::<Value>(&body))
            && !null_below_array(&p, false)
        {
            let mut theirs = target.clone();
            json_patch::merge(&mut theirs, &p);
            prop_assert_eq!(ours, &theirs);
        }
    }

    #[test]
    fn json_patch_never_panics(target in json_object(), body in patch_body(json_patch_doc())) {
        if let Ok(out) = patch::apply_patch("Node", &target, PatchType::Json, &body) {
            prop_assert!(out.is_object());
        }
    }

    #[test]
    fn strategic_patch_never_panics(
        kind in prop_oneof![Just("Node"), Just("Service"), Just("Pod"), Just("Other")],
        target in node_like(),
        body in patch_body(node_like()),
    ) {
        if let Ok(out) = patch::apply_patch(kind, &target, PatchType::Strategic, &body) {
            prop_assert!(out.is_object());
        }
    }
}

fn null_below_array(v: &Value, in_array: bool) -> bool {
    match v {
        Value::Null => in_array,
        Value::Array(items) => items.iter().any(|i| null_below_array(i, true)),
        Value::Object(m) => m.values().any(|i| null_below_array(i, in_array)),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Through the router: patches, applies and query strings

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn app() -> axum::Router {
    let config = Config {
        token: TOKEN.into(),
        max_body_bytes: 64 * 1024,
        ..Config::default()
    };
    router(AppState::new(&config))
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Option<(StatusCode, Value)> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    // A query string the `http` crate refuses never reaches a server.
    let req = b.body(Body::from(body)).ok()?;
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let is_stream = resp
        .headers()
        .get(header::TRANSFER_ENCODING)
        .is_some_and(|v| v == "chunked")
        || uri.contains("watch");
    if status.is_success() && is_stream {
        // An open watch: its head is the answer; dropping the body ends it.
        return Some((status, Value::Null));
    }
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Some((status, v))
}

async fn seeded() -> axum::Router {
    let app = app();
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"app": "a"}, "finalizers": ["f/a"]},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s1", "namespace": "default"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "a"}}});
    for (uri, body) in [
        ("/api/v1/nodes", node),
        ("/api/v1/namespaces/default/services", svc),
    ] {
        let (s, v) = send(
            &app,
            "POST",
            uri,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
        .expect("request");
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    app
}

async fn get(app: &axum::Router, uri: &str) -> Value {
    let (s, v) = send(app, "GET", uri, None, Vec::new())
        .await
        .expect("request");
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

/// Query strings built from the parameters the server reads, with arbitrary values.
fn query() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("labelSelector"),
        Just("fieldSelector"),
        Just("limit"),
        Just("continue"),
        Just("resourceVersion"),
        Just("resourceVersionMatch"),
        Just("watch"),
        Just("timeoutSeconds"),
        Just("allowWatchBookmarks"),
        Just("sendInitialEvents"),
        Just("fieldManager"),
        Just("force"),
        Just("dryRun"),
        Just("fieldValidation"),
        Just("pretty"),
        Just("propagationPolicy"),
        Just("x"),
    ];
    let value = prop_oneof![
        selector_text(),
        Just("0".to_string()),
        Just("1".to_string()),
        Just("-1".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("All".to_string()),
        Just("NotOlderThan".to_string()),
        Just("Exact".to_string()),
        Just("Strict".to_string()),
        Just("99999999999999999999".to_string()),
        Just("metadata.name=n1".to_string()),
        "[a-zA-Z0-9%+&=]{0,6}",
    ];
    prop::collection::vec((name, value, any::<bool>()), 0..5).prop_map(|kvs| {
        kvs.into_iter()
            .map(|(k, v, raw)| {
                if raw {
                    format!("{k}={v}")
                } else {
                    format!("{k}={}", percent_encode(&v))
                }
            })
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn assert_not_server_error(s: StatusCode, v: &Value, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(!s.is_server_error(), "{} answered {}: {}", what, s, v);
    if !s.is_success() {
        prop_assert_eq!(
            &v["kind"],
            "Status",
            "{} answered {} without a Status: {}",
            what,
            s,
            v
        );
    }
    Ok(())
}

const PATCH_TYPES: [&str; 4] = [
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

proptest! {
    #![proptest_config(cases(250))]

    /// Any patch body of any type with any query: no 5xx, and a refused write changes
    /// nothing (object and resourceVersion identical).
    #[test]
    fn failed_patch_changes_nothing(
        which in 0usize..2,
        ct in 0usize..4,
        q in query(),
        merge_body in patch_body(node_like()),
        json_body in patch_body(json_patch_doc()),
        status_sub in any::<bool>(),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let app = seeded().await;
            let base = ["/api/v1/nodes/n1", "/api/v1/namespaces/default/services/s1"][which];
            let before = get(&app, base).await;
            let body = if ct == 1 { json_body } else { merge_body };
            let sub = if status_sub { "/status" } else { "" };
            let uri = format!("{base}{sub}?{q}");
            let Some((s, v)) = send(&app, "PATCH", &uri, Some(PATCH_TYPES[ct]), body).await else {
                return Ok(());
            };
            assert_not_server_error(s, &v, &format!("PATCH {uri} ({})", PATCH_TYPES[ct]))?;
            let after = get(&app, base).await;
            if !s.is_success() || q.contains("dryRun=All") {
                prop_assert_eq!(&after, &before, "PATCH {} answered {}: {}", uri, s, v);
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Server-side apply of arbitrary configurations by two managers, forced or not: no
    /// 5xx, failures change nothing, and re-applying what succeeded is a no-op for the
    /// object's content.
    #[test]
    fn server_side_apply_bodies(
        first in node_like(),
        second in node_like(),
        force in any::<bool>(),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let app = seeded().await;
            let base = "/api/v1/nodes/n1";
            for (manager, config) in [("alpha", &first), ("beta", &second), ("alpha", &first)] {
                let before = get(&app, base).await;
                let uri = format!("{base}?fieldManager={manager}&force={force}");
                let body = config.to_string().into_bytes();
                let (s, v) = send(&app, "PATCH", &uri, Some(PATCH_TYPES[3]), body)
                    .await
                    .expect("request");
                assert_not_server_error(s, &v, &format!("apply by {manager}"))?;
                let after = get(&app, base).await;
                if !s.is_success() {
                    prop_assert_eq!(&after, &before, "apply by {} answered {}: {}", manager, s, v);
                } else {
                    prop_assert_eq!(&v, &after);
                }
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Arbitrary queries on LIST and WATCH (cluster and namespace scope): no 5xx, and every
    /// refusal is a `Status`.
    #[test]
    fn list_and_watch_queries(q in query(), path in 0usize..4) {
        let rt = runtime();
        rt.block_on(async {
            let app = seeded().await;
            let base = [
                "/api/v1/nodes",
                "/api/v1/namespaces/default/services",
                "/api/v1/services",
                "/api/v1/watch/nodes",
            ][path];
            let uri = format!("{base}?{q}");
            if let Some((s, v)) = send(&app, "GET", &uri, None, Vec::new()).await {
                assert_not_server_error(s, &v, &format!("GET {uri}"))?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}

// ---------------------------------------------------------------------------------------------
// managedFields bookkeeping

/// Objects shaped like the kinds whose lists are keyed or sets: node conditions (by
/// type), service ports (by port and protocol), finalizers (a set).
fn keyed_object() -> impl Strategy<Value = Value> {
    let condition = (
        prop_oneof![Just("Ready"), Just("DiskPressure"), Just("x")],
        json_value(),
    )
        .prop_map(|(t, v)| json!({"type": t, "status": v}));
    let port = (
        prop_oneof![Just(json!(80)), Just(json!(443)), Just(json!("80"))],
        prop::option::of(prop_oneof![Just("TCP"), Just("UDP")]),
        json_value(),
    )
        .prop_map(|(p, proto, extra)| {
            let mut m = json!({"port": p, "name": extra});
            if let Some(proto) = proto {
                m["protocol"] = json!(proto);
            }
            m
        });
    (
        prop::collection::vec(condition, 0..4),
        prop::collection::vec(port, 0..4),
        prop::collection::vec(
            prop_oneof![Just(json!("a")), Just(json!("b")), json_value()],
            0..3,
        ),
        node_like(),
        any::<bool>(),
    )
        .prop_map(|(conditions, ports, finalizers, mut base, flip)| {
            base["status"]["conditions"] = Value::Array(conditions);
            base["spec"]["ports"] = if flip {
                json!({"port": 1})
            } else {
                Value::Array(ports)
            };
            base["metadata"]["finalizers"] = Value::Array(finalizers);
            base
        })
}

proptest! {
    #![proptest_config(cases(500))]

    /// The one-walk diff used on every write equals the whole-set definition: changed
    /// paths as `fieldpath::changed`, removed paths as `of(old) − of(new)`.
    #[test]
    fn fieldpath_diff_matches_whole_sets(
        kind in prop_oneof![Just("Node"), Just("Service"), Just("Pod")],
        old in keyed_object(),
        patch in prop_oneof![json_object(), keyed_object()],
        unrelated in keyed_object(),
        related in any::<bool>(),
    ) {
        use mock_kube_apiserver::fieldpath::{self, FieldSet};
        let new = if related {
            patch::merge::apply(&old, patch.to_string().as_bytes()).unwrap_or(unrelated)
        } else {
            unrelated
        };
        let d = fieldpath::diff(kind, &old, &new);
        prop_assert_eq!(d.changed, fieldpath::changed(kind, Some(&old), &new));
        prop_assert_eq!(
            d.removed,
            FieldSet::of(kind, &old).difference(&FieldSet::of(kind, &new))
        );
    }
}

proptest! {
    #![proptest_config(cases(300))]

    /// A field set survives its `FieldsV1` encoding, and decoding arbitrary JSON as
    /// `FieldsV1` never panics.
    #[test]
    fn fields_v1_round_trip(
        kind in prop_oneof![Just("Node"), Just("Service")],
        obj in keyed_object(),
        junk in json_value(),
    ) {
        use mock_kube_apiserver::fieldpath::FieldSet;
        let set = FieldSet::of(kind, &obj);
        prop_assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()), set);
        let _ = FieldSet::from_fields_v1(&junk).to_fields_v1();
    }

    /// The encoding every create records, built straight from the object, is the field
    /// set's encoding (or declines, for keyed lists with a repeated key).
    #[test]
    fn fields_v1_of_matches_the_set(
        kind in prop_oneof![Just("Node"), Just("Service"), Just("Pod")],
        obj in keyed_object(),
    ) {
        use mock_kube_apiserver::fieldpath::{self, FieldSet};
        if let Some(direct) = fieldpath::fields_v1_of(kind, &obj) {
            prop_assert_eq!(direct, FieldSet::of(kind, &obj).to_fields_v1());
        }
    }

    /// An update keeps a stored entry encoded only where that changes nothing: a set's
    /// encoding is canonical, a canonical trie decodes and encodes back to itself, and
    /// taking paths out of it in place gives the encoding of the set without them.
    #[test]
    fn fields_v1_edited_in_place_matches_the_set(
        kind in prop_oneof![Just("Node"), Just("Service"), Just("Pod")],
        obj in keyed_object(),
        other in keyed_object(),
        junk in json_value(),
    ) {
        use mock_kube_apiserver::fieldpath::{self, FieldSet};
        let set = FieldSet::of(kind, &obj);
        let Value::Object(mut trie) = set.to_fields_v1() else {
            panic!("a trie is an object");
        };
        prop_assert!(fieldpath::is_canonical_fields_v1(&trie));
        // What an update to `other` changes or removes, what `other` has, and a third of
        // the set's own paths (members with children among them).
        let d = fieldpath::diff(kind, &obj, &other);
        let own: FieldSet = FieldSet(set.0.iter().step_by(3).cloned().collect());
        let gone = d.changed.union(&d.removed).union(&FieldSet::of(kind, &other)).union(&own);
        for p in &gone.0 {
            fieldpath::remove_from_fields_v1(&mut trie, p);
        }
        prop_assert_eq!(Value::Object(trie), set.difference(&gone).to_fields_v1());
        let Value::Object(again) = FieldSet::from_fields_v1(&junk).to_fields_v1() else {
            panic!("a trie is an object");
        };
        prop_assert!(fieldpath::is_canonical_fields_v1(&again));
        if let Value::Object(j) = &junk
            && fieldpath::is_canonical_fields_v1(j)
        {
            prop_assert_eq!(FieldSet::from_fields_v1(&junk).to_fields_v1(), junk.clone());
        }
    }
}
