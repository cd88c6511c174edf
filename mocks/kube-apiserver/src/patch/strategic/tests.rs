//! Unit tests of strategic merge patch: per-kind list strategies, directives, element
//! order and upstream's errors.
//!
//! Why this exists: the tests are kept in a file of their own, beside the code, so that
//! the module they test stays short enough to read in one go.

use super::errors::ERR_NO_LIST_OF_LISTS;
use super::*;
use serde_json::json;

fn run(kind: &str, target: &Value, patch: Value) -> Result<Value> {
    apply(kind, target, patch.to_string().as_bytes())
}

fn ok(kind: &str, target: &Value, patch: Value) -> Value {
    run(kind, target, patch.clone()).unwrap_or_else(|e| panic!("{patch}: {e}"))
}

fn addr(t: &str, a: &str) -> Value {
    json!({"type": t, "address": a})
}

fn node_with_addresses(addrs: Vec<Value>) -> Value {
    json!({"kind": "Node", "metadata": {"name": "n1"}, "status": {"addresses": addrs}})
}

/// The patch `nodeutil.PatchNodeStatus` sends (component-helpers node/util
/// `fixupPatchForNodeStatusAddresses`): the address list is the full new list followed by
/// a `{"$patch":"replace"}` element.
#[test]
fn node_addresses_list_replace_keeps_duplicate_types() {
    let node = node_with_addresses(vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", "n1")]);
    let new = vec![
        addr("InternalIP", "10.0.0.2"),
        addr("InternalIP", "10.0.0.3"),
        addr("ExternalIP", "192.0.2.1"),
        addr("Hostname", "n1"),
    ];
    let mut list = new.clone();
    list.push(json!({"$patch": "replace"}));
    let with_order = json!({"status": {
        "$setElementOrder/addresses": [
            {"type": "InternalIP"}, {"type": "InternalIP"}, {"type": "ExternalIP"}, {"type": "Hostname"}
        ],
        "addresses": list.clone()
    }});
    let helper_patch = json!({"status": {"addresses": list}});
    // replace element first, as some clients send it
    let mut first = vec![json!({"$patch": "replace"})];
    first.extend(new.clone());
    let replace_first = json!({"status": {"addresses": first}});
    for patch in [helper_patch, replace_first] {
        let got = ok("Node", &node, patch.clone());
        assert_eq!(
            got["status"]["addresses"],
            Value::Array(new.clone()),
            "{patch}"
        );
    }
    // The helper never combines the trailing replace element with `$setElementOrder`
    // (it diffs with the old addresses); upstream's validatePatchWithSetOrderList rejects
    // that combination because the directive element is left over, and so do we.
    let err = run("Node", &node, with_order).unwrap_err();
    assert_eq!(err.code(), 422, "{err:?}");
}

#[test]
fn node_addresses_keyed_merge_without_replace() {
    // Without the directive the list merges by `type` (why the helper adds it): the patch
    // element updates the live element of the same type.
    let node = node_with_addresses(vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", "n1")]);
    let got = ok(
        "Node",
        &node,
        json!({"status": {"addresses": [addr("InternalIP", "10.0.0.9")]}}),
    );
    assert_eq!(
        got["status"]["addresses"],
        json!([addr("InternalIP", "10.0.0.9"), addr("Hostname", "n1")])
    );
    // a list-level replace with no other element empties the list
    let got = ok(
        "Node",
        &node,
        json!({"status": {"addresses": [{"$patch": "replace"}]}}),
    );
    assert_eq!(got["status"]["addresses"], json!([]));
}

#[test]
fn taints_are_atomic() {
    let node = json!({"spec": {"taints": [
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "other", "effect": "NoExecute"}
    ]}});
    let got = ok(
        "Node",
        &node,
        json!({"spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}}),
    );
    assert_eq!(
        got["spec"]["taints"],
        json!([{"key": "other", "effect": "NoExecute"}])
    );
    let got = ok("Node", &node, json!({"spec": {"taints": []}}));
    assert_eq!(got["spec"]["taints"], json!([]));
    let got = ok("Node", &node, json!({"spec": {"taints": null}}));
    assert!(got["spec"].get("taints").is_none());
    // directive elements never land in an atomic list
    let got = ok(
        "Node",
        &node,
        json!({"spec": {"taints": [{"$patch": "replace"}, {"key": "a", "effect": "NoSchedule"}]}}),
    );
    assert_eq!(
        got["spec"]["taints"],
        json!([{"key": "a", "effect": "NoSchedule"}])
    );
}

#[test]
fn finalizers_merge_set() {
    let obj = |f: Value| json!({"metadata": {"name": "s", "finalizers": f}});
    // (live, patch metadata, want)
    let cases = [
        (json!(["a"]), json!({"finalizers": ["a"]}), json!(["a"])),
        (
            json!(["a"]),
            json!({"finalizers": ["b"]}),
            json!(["b", "a"]),
        ),
        (
            json!(["a", "b"]),
            json!({"finalizers": ["b", "c"]}),
            json!(["a", "b", "c"]),
        ),
        (
            json!(["a", "b", "c"]),
            json!({"$deleteFromPrimitiveList/finalizers": ["b"]}),
            json!(["a", "c"]),
        ),
        (
            json!(["a", "b"]),
            json!({"$deleteFromPrimitiveList/finalizers": ["zz"]}),
            json!(["a", "b"]),
        ),
        (
            json!(["a", "b"]),
            json!({"$deleteFromPrimitiveList/finalizers": ["a", "b"]}),
            json!([]),
        ),
        // CCM PatchService removing the LB cleanup finalizer (two-way patch shape)
        (
            json!(["x", "service.kubernetes.io/load-balancer-cleanup"]),
            json!({"$setElementOrder/finalizers": ["x"], "$deleteFromPrimitiveList/finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}),
            json!(["x"]),
        ),
        // ... and adding it
        (
            json!(["x"]),
            json!({"$setElementOrder/finalizers": ["x", "service.kubernetes.io/load-balancer-cleanup"], "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}),
            json!(["x", "service.kubernetes.io/load-balancer-cleanup"]),
        ),
        // reorder only
        (
            json!(["a", "b", "c"]),
            json!({"$setElementOrder/finalizers": ["c", "a", "b"]}),
            json!(["c", "a", "b"]),
        ),
        (json!(["a", "b"]), json!({"finalizers": null}), Value::Null),
    ];
    for (live, meta, want) in cases {
        let got = ok(
            "Service",
            &obj(live.clone()),
            json!({"metadata": meta.clone()}),
        );
        let got_f = got["metadata"]
            .get("finalizers")
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(got_f, want, "live={live} patch={meta}");
    }
    // a missing list is created from the patch; deleting from a missing list is a no-op
    let bare = json!({"metadata": {"name": "s"}});
    let got = ok("Service", &bare, json!({"metadata": {"finalizers": ["a"]}}));
    assert_eq!(got["metadata"]["finalizers"], json!(["a"]));
    let got = ok(
        "Service",
        &bare,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    );
    assert_eq!(got, bare);
}

#[test]
fn int_list_order_follows_upstream() {
    // behaviour of apimachinery's "preserve the order from the patch" cases, on podCIDRs
    let obj = |l: Value| json!({"spec": {"podCIDRs": l}});
    let cases = [
        (
            json!(["1", "2", "3"]),
            json!(["3", "1", "2"]),
            json!(["3", "1", "2"]),
        ),
        (
            json!(["1", "2", "3"]),
            json!(["3", "1"]),
            json!(["2", "3", "1"]),
        ),
        (json!(["1", "2"]), json!(["2", "3"]), json!(["1", "2", "3"])),
    ];
    for (live, patch, want) in cases {
        let got = ok(
            "Node",
            &obj(live.clone()),
            json!({"spec": {"podCIDRs": patch.clone()}}),
        );
        assert_eq!(got["spec"]["podCIDRs"], want, "live={live} patch={patch}");
    }
}

#[test]
fn conditions_keyed_merge() {
    let node = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
        {"type": "MemoryPressure", "status": "False"}
    ]}});
    let got = ok(
        "Node",
        &node,
        json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": null},
            {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
        ]}}),
    );
    assert_eq!(
        got["status"]["conditions"],
        json!([
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"},
            {"type": "MemoryPressure", "status": "False"}
        ])
    );
    // with $setElementOrder (what CreateTwoWayMergePatch emits) the order is the requested one
    let got = ok(
        "Node",
        &node,
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "MemoryPressure"}, {"type": "NetworkUnavailable"}],
            "conditions": [{"type": "NetworkUnavailable", "status": "False"}]
        }}),
    );
    let types: Vec<&str> = got["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Ready", "MemoryPressure", "NetworkUnavailable"]);
    // Service conditions merge the same way
    let svc = json!({"status": {"conditions": [{"type": "A", "status": "True"}]}});
    let got = ok(
        "Service",
        &svc,
        json!({"status": {"conditions": [{"type": "A", "message": "m"}]}}),
    );
    assert_eq!(
        got["status"]["conditions"],
        json!([{"type": "A", "status": "True", "message": "m"}])
    );
}

#[test]
fn list_element_delete_directive() {
    let obj = json!({"metadata": {"ownerReferences": [
        {"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}, {"uid": "1", "name": "dup"}
    ]}});
    let got = ok(
        "ConfigMap",
        &obj,
        json!({"metadata": {"ownerReferences": [{"uid": "1", "$patch": "delete"}]}}),
    );
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([{"uid": "2", "name": "b"}])
    );
    // delete without the merge key is an error
    let err = run(
        "ConfigMap",
        &obj,
        json!({"metadata": {"ownerReferences": [{"$patch": "delete"}]}}),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    // delete of a condition type
    let node = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}});
    let got = ok(
        "Node",
        &node,
        json!({"status": {"conditions": [{"type": "A", "$patch": "delete"}]}}),
    );
    assert_eq!(got["status"]["conditions"], json!([{"type": "B"}]));
}

#[test]
fn map_directives() {
    let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}});
    let got = ok(
        "Node",
        &obj,
        json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
    );
    assert_eq!(got["metadata"]["labels"], json!({"c": "3"}));
    assert_eq!(got["metadata"]["annotations"], json!({"x": "y"}));
    let got = ok(
        "Node",
        &obj,
        json!({"metadata": {"labels": {"$patch": "delete"}}}),
    );
    assert_eq!(got["metadata"]["labels"], json!({}));
    // upstream handleDirectiveInMergeMap rejects "merge" (and anything else) on maps
    for d in ["merge", "bogus"] {
        let err = run("Node", &obj, json!({"metadata": {"labels": {"$patch": d}}})).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{d}: {err:?}");
    }
    // whole-object replace
    let got = ok("Node", &obj, json!({"$patch": "replace", "spec": {}}));
    assert_eq!(got, json!({"spec": {}}));
    // a new key whose value is a directive map is dropped (upstream removeDirectives)
    let got = ok("Node", &obj, json!({"spec": {"$patch": "delete"}}));
    assert!(got.get("spec").is_none());
}

#[test]
fn list_merge_directive_is_rejected() {
    let node = json!({"status": {"conditions": [{"type": "A"}]}});
    let err = run(
        "Node",
        &node,
        json!({"status": {"conditions": [{"$patch": "merge"}]}}),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    let err = run(
        "Node",
        &node,
        json!({"status": {"conditions": [{"type": "B", "$patch": "frob"}]}}),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
}

#[test]
fn retain_keys() {
    let svc = json!({"spec": {"type": "LoadBalancer", "loadBalancerIP": "1.2.3.4", "ports": [{"port": 80}]}});
    let got = ok(
        "Service",
        &svc,
        json!({"spec": {"$retainKeys": ["type", "ports"], "type": "ClusterIP"}}),
    );
    assert_eq!(
        got["spec"],
        json!({"type": "ClusterIP", "ports": [{"port": 80}]})
    );
    // a patched key that is not retained is a malformed patch (400)
    let err = run(
        "Service",
        &svc,
        json!({"spec": {"$retainKeys": ["type"], "ports": []}}),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
    let err = run("Service", &svc, json!({"spec": {"$retainKeys": "type"}})).unwrap_err();
    assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
}

#[test]
fn service_ports_keyed_by_port() {
    let svc = json!({"spec": {"ports": [
        {"port": 80, "protocol": "TCP", "nodePort": 30080},
        {"port": 443, "protocol": "TCP", "nodePort": 30443}
    ]}});
    let got = ok(
        "Service",
        &svc,
        json!({"spec": {"ports": [{"port": 443, "name": "https"}, {"port": 8080, "protocol": "TCP"}]}}),
    );
    assert_eq!(
        got["spec"]["ports"],
        json!([
            {"port": 80, "protocol": "TCP", "nodePort": 30080},
            {"port": 443, "protocol": "TCP", "nodePort": 30443, "name": "https"},
            {"port": 8080, "protocol": "TCP"}
        ])
    );
    // LB ingress is atomic
    let svc =
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}]}}});
    let got = ok(
        "Service",
        &svc,
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "3.3.3.3"}]}}}),
    );
    assert_eq!(
        got["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "3.3.3.3"}])
    );
}

#[test]
fn maps_merge_and_null_deletes() {
    let node = json!({"metadata": {"name": "n1", "labels": {"a": "1", "b": "2"}}, "spec": {"providerID": ""}});
    let got = ok(
        "Node",
        &node,
        json!({
            "metadata": {"labels": {"a": null, "c": "3", "topology.kubernetes.io/zone": "z"}, "annotations": {"x": "1", "y": null}},
            "spec": {"providerID": "openstack:///abc"}
        }),
    );
    assert_eq!(
        got,
        json!({
            "metadata": {"name": "n1", "labels": {"b": "2", "c": "3", "topology.kubernetes.io/zone": "z"}, "annotations": {"x": "1"}},
            "spec": {"providerID": "openstack:///abc"}
        })
    );
}

#[test]
fn lease_and_event_patches() {
    let lease = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}});
    let got = ok(
        "Lease",
        &lease,
        json!({"spec": {"renewTime": "2026-01-01T00:00:10.000000Z", "leaseTransitions": 1}}),
    );
    assert_eq!(got["spec"]["renewTime"], "2026-01-01T00:00:10.000000Z");
    assert_eq!(got["spec"]["leaseTransitions"], 1);
    assert_eq!(got["spec"]["holderIdentity"], "a");
    let got = ok(
        "Lease",
        &lease,
        json!({"spec": {"holderIdentity": null, "renewTime": null}}),
    );
    assert_eq!(got["spec"], json!({"leaseDurationSeconds": 15}));
    let ev = json!({"count": 1, "lastTimestamp": "t1", "message": "m"});
    let got = ok("Event", &ev, json!({"count": 2, "lastTimestamp": "t2"}));
    assert_eq!(
        got,
        json!({"count": 2, "lastTimestamp": "t2", "message": "m"})
    );
}

#[test]
fn nested_keyed_lists() {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "image": "i1", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "i2"}
    ]}});
    let got = ok(
        "Pod",
        &pod,
        json!({"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}}),
    );
    // new patch items come before server-only items (upstream mergeSortedSlice)
    assert_eq!(
        got["spec"]["containers"][0],
        json!({"name": "a", "image": "i1", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]})
    );
    assert_eq!(
        got["spec"]["containers"][1],
        json!({"name": "b", "image": "i2"})
    );
}

#[test]
fn set_element_order_with_server_only_items() {
    // upstream "set elements order in a int list with server-only items" behaviour
    let obj = json!({"spec": {"podCIDRs": ["1", "3", "4", "2", "9"]}});
    let got = ok(
        "Node",
        &obj,
        json!({"spec": {"$setElementOrder/podCIDRs": ["4", "2", "3", "1"]}}),
    );
    assert_eq!(got["spec"]["podCIDRs"], json!(["4", "2", "3", "1", "9"]));
    let obj = json!({"spec": {"podCIDRs": ["1", "2", "7", "9", "8", "3", "4"]}});
    let got = ok(
        "Node",
        &obj,
        json!({"spec": {"$setElementOrder/podCIDRs": ["2", "1", "4", "3"]}}),
    );
    assert_eq!(
        got["spec"]["podCIDRs"],
        json!(["2", "1", "7", "9", "8", "4", "3"])
    );
    // a patch list out of the declared order is rejected
    let node = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}});
    let err = run(
        "Node",
        &node,
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "A"}, {"type": "B"}],
            "conditions": [{"type": "B"}, {"type": "A"}]
        }}),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
}

#[test]
fn errors() {
    let node =
        json!({"metadata": {"finalizers": ["a"]}, "status": {"conditions": [{"type": "A"}]}});
    // (patch body, is_400)
    let cases: Vec<(Vec<u8>, bool)> = vec![
        (b"not json".to_vec(), true),
        (b"[1]".to_vec(), true),
        (b"null".to_vec(), true),
        (
            json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}})
                .to_string()
                .into_bytes(),
            true,
        ),
        (
            json!({"metadata": {"$setElementOrder": ["a"]}})
                .to_string()
                .into_bytes(),
            true,
        ),
        (
            json!({"metadata": {"finalizers": [["x"]]}})
                .to_string()
                .into_bytes(),
            false,
        ),
        (
            json!({"metadata": {"finalizers": [1]}})
                .to_string()
                .into_bytes(),
            false,
        ),
        (
            json!({"status": {"conditions": [{"status": "True"}]}})
                .to_string()
                .into_bytes(),
            false,
        ),
        (
            json!({"metadata": {"$setElementOrder/finalizers": "a"}})
                .to_string()
                .into_bytes(),
            false,
        ),
    ];
    for (body, is_400) in cases {
        let err = apply("Node", &node, &body).unwrap_err();
        let want = if is_400 { 400 } else { 422 };
        assert_eq!(
            err.code(),
            want,
            "{} -> {err:?}",
            String::from_utf8_lossy(&body)
        );
    }
    // the first element decides the list's element type (upstream sliceElementType)
    let empty = json!({"metadata": {"finalizers": []}});
    let err = apply(
        "Node",
        &empty,
        json!({"metadata": {"finalizers": [["x"]]}})
            .to_string()
            .as_bytes(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), ERR_NO_LIST_OF_LISTS);
    assert_eq!(err.code(), 422);
}

#[test]
fn type_changes_replace() {
    let obj = json!({"a": {"x": 1}, "b": [1], "c": "s", "d": null});
    let got = ok(
        "ConfigMap",
        &obj,
        json!({"a": "now-a-string", "b": {"k": 1, "n": null}, "c": 2, "d": {"e": 1}}),
    );
    assert_eq!(
        got,
        json!({"a": "now-a-string", "b": {"k": 1}, "c": 2, "d": {"e": 1}})
    );
}

#[test]
fn does_not_modify_target() {
    let node = node_with_addresses(vec![addr("InternalIP", "10.0.0.1")]);
    let before = node.clone();
    let _ = ok(
        "Node",
        &node,
        json!({"status": {"addresses": [{"$patch": "replace"}]}}),
    );
    assert_eq!(node, before);
}
