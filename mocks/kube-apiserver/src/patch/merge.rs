//! JSON merge patch (RFC 7386), as kube-apiserver applies it.
//!
//! Why this exists: kube-rs `Patch::Merge`, kubectl `--type merge`, the Python client and the
//! kube-rs events `Recorder` send merge patches. kube-apiserver applies them with
//! evanphx/json-patch `MergePatch` (merge.go `mergeDocs`/`pruneNulls`), which this module
//! follows: `null` deletes a key, objects merge recursively, anything else (arrays included)
//! replaces, and nulls inside a value that is set rather than merged are pruned from nested
//! objects (also objects nested in arrays).

use serde_json::{Map, Value};

use super::error::{PatchError, go_json_type};

/// Apply a merge patch body to `target`.
pub fn apply(target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch)
        // evanphx merge.go: a syntax error is ErrBadJSONPatch, which the handler turns into 400.
        .map_err(|e| PatchError::Malformed(format!("Invalid JSON Patch: {e}")))?;
    let patch = match patch {
        Value::Object(m) => m,
        Value::Null => return Err(PatchError::Malformed("Invalid JSON Patch".to_string())),
        other => {
            return Err(PatchError::Malformed(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_type(&other)
            )));
        }
    };
    let mut doc = target.clone();
    match &mut doc {
        Value::Object(d) => merge_objects(d, patch),
        _ => {
            let mut v = Value::Object(patch);
            prune_nulls(&mut v);
            doc = v;
        }
    }
    Ok(doc)
}

/// Merge `patch` into `doc` in place (evanphx `mergeDocs` with mergeMerge=false).
pub fn merge_objects(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            doc.remove(&k);
            continue;
        }
        match doc.get_mut(&k) {
            Some(cur) if !cur.is_null() => merge_value(cur, v),
            _ => {
                let mut v = v;
                prune_nulls(&mut v);
                doc.insert(k, v);
            }
        }
    }
}

/// evanphx `merge`: objects merge, otherwise the patch value replaces the current one.
fn merge_value(cur: &mut Value, patch: Value) {
    match (cur, patch) {
        (Value::Object(c), Value::Object(p)) => merge_objects(c, p),
        (cur @ Value::Object(_), p) => *cur = p, // current is an object, patch is not: no pruning
        (cur, mut p) => {
            prune_nulls(&mut p);
            *cur = p;
        }
    }
}

/// Remove null-valued keys from objects, recursively, including objects inside arrays. Null
/// array elements are kept (evanphx `pruneAryNulls`).
fn prune_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            for x in m.values_mut() {
                prune_nulls(x);
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                prune_nulls(x);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(target: Value, patch: Value) -> Value {
        apply(&target, patch.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn rfc7386_table() {
        // (target, patch, want)
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            // arrays are replaced, never merged
            (
                json!({"l": [1, 2, 3]}),
                json!({"l": [4]}),
                json!({"l": [4]}),
            ),
            // nulls in objects inside a newly set array are pruned, null elements kept
            (
                json!({}),
                json!({"l": [{"x": null, "y": 1}, null]}),
                json!({"l": [{"y": 1}, null]}),
            ),
            // deleting a missing key is a no-op
            (json!({"a": 1}), json!({"zz": null}), json!({"a": 1})),
        ];
        for (target, patch, want) in cases {
            assert_eq!(
                run(target.clone(), patch.clone()),
                want,
                "target={target} patch={patch}"
            );
        }
    }

    #[test]
    fn lease_release_sets_fields_to_null() {
        let lease =
            json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "t"}});
        let got = run(
            lease,
            json!({"spec": {"holderIdentity": null, "renewTime": null}}),
        );
        assert_eq!(got, json!({"spec": {"leaseDurationSeconds": 15}}));
    }

    #[test]
    fn malformed_patches_are_400() {
        for body in [&b"not json"[..], b"[1,2]", b"\"x\"", b"null", b"3", b""] {
            let err = apply(&json!({}), body).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed(_)),
                "{:?} -> {err:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(err.code(), 400);
        }
    }

    #[test]
    fn events_series_update() {
        let ev =
            json!({"metadata": {"name": "e"}, "series": {"count": 1, "lastObservedTime": "a"}});
        let got = run(ev, json!({"series": {"count": 2, "lastObservedTime": "b"}}));
        assert_eq!(got["series"], json!({"count": 2, "lastObservedTime": "b"}));
    }
}
