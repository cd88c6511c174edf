//! JSON patch (RFC 6902) with the semantics of evanphx/json-patch v4, the library
//! kube-apiserver applies JSON patches with (apiserver pkg/endpoints/handlers/patch.go imports
//! `gopkg.in/evanphx/json-patch.v4`).
//!
//! Why this exists instead of the `json-patch` crate: clients depend on Go quirks that RFC-exact
//! implementations reject. kube-runtime's finalizer helper (kube-runtime/src/finalizer.rs)
//! sends `test /metadata/finalizers null` before adding the first finalizer; in evanphx
//! (patch.go `test`) a missing member compares equal to `null`, so the test passes. Other
//! quirks kept on purpose: negative array indices count from the end, `replace` of a missing
//! object member adds it, and a path without a leading `/` is read as if it had one.
//!
//! Errors: a body that is not a JSON array of operation objects is a 400; any failure while
//! applying is a 422 (the handler wraps it in `NewGenericServerResponse(422, …)`). Messages
//! mirror evanphx's wording.

use serde_json::{Map, Value};

use super::error::{PatchError, go_json_type};

const ERR_MISSING: &str = "missing value";
const ERR_TEST_FAILED: &str = "test failed";
const ERR_INVALID_INDEX: &str = "invalid index referenced";

/// Why one operation failed; `Test` becomes [`PatchError::TestFailed`].
enum OpError {
    Test(String),
    Other(String),
}

/// Apply a JSON patch body to `target`.
pub fn apply(target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let ops = decode(patch)?;
    let mut doc = target.clone();
    for op in &ops {
        apply_op(&mut doc, op).map_err(|e| match e {
            OpError::Test(m) => PatchError::TestFailed(m),
            OpError::Other(m) => PatchError::Invalid(m),
        })?;
    }
    Ok(doc)
}

/// evanphx `DecodePatch`: the body must be a JSON array whose elements are objects (or null,
/// which then fails at apply time as an unknown operation).
fn decode(patch: &[u8]) -> Result<Vec<Map<String, Value>>, PatchError> {
    let v: Value =
        serde_json::from_slice(patch).map_err(|e| PatchError::Malformed(e.to_string()))?;
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(PatchError::Malformed(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                go_json_type(&other)
            )));
        }
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Object(m) => Ok(m),
            Value::Null => Ok(Map::new()),
            other => Err(PatchError::Malformed(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                go_json_type(&other)
            ))),
        })
        .collect()
}

/// `op` field, or "unknown" (evanphx `Operation.Kind`).
fn kind(op: &Map<String, Value>) -> &str {
    match op.get("op") {
        Some(Value::String(s)) => s,
        _ => "unknown",
    }
}

/// A string field of the operation (`path` or `from`).
fn string_field(op: &Map<String, Value>, name: &str) -> Result<String, String> {
    match op.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) | None => Err(format!("operation missing {name} field: {ERR_MISSING}")),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            go_json_type(other)
        )),
    }
}

/// The operation's `value`: `None` when absent, `Some(Null)` when explicitly null.
fn value(op: &Map<String, Value>) -> Option<&Value> {
    op.get("value")
}

fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    match kind(op) {
        "add" => add(doc, op),
        "remove" => remove(doc, op),
        "replace" => replace(doc, op),
        "move" => move_op(doc, op),
        "test" => test(doc, op),
        "copy" => copy(doc, op),
        other => Err(OpError::Other(format!("Unexpected kind: {other}"))),
    }
}

/// RFC 6901 unescaping of one reference token.
fn decode_key(k: &str) -> String {
    k.replace("~1", "/").replace("~0", "~")
}

/// Go `strconv.Atoi` on an index, with its error text.
fn atoi(key: &str) -> Result<i64, String> {
    key.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {key:?}: invalid syntax"))
}

fn invalid_index(idx: i64) -> String {
    format!("Unable to access invalid index: {idx}: {ERR_INVALID_INDEX}")
}

/// Resolve a negative index (evanphx `SupportNegativeIndices`, on by default) for an array of
/// `len` elements; `None` when out of range below zero.
fn resolve_negative(idx: i64, len: usize) -> Option<i64> {
    if idx >= 0 {
        return Some(idx);
    }
    let len = len as i64;
    if idx < -len { None } else { Some(idx + len) }
}

/// evanphx `findObject`: walk every token but the last; each step must land on a non-null
/// object or array. Returns the container and the decoded last token.
fn find_parent<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return None;
    }
    let mut cur = doc;
    for part in &split[1..split.len() - 1] {
        let key = decode_key(part);
        let next = match cur {
            Value::Object(m) => m.get_mut(&key)?,
            Value::Array(a) => {
                let idx = resolve_negative(atoi(&key).ok()?, a.len())?;
                a.get_mut(usize::try_from(idx).ok()?)?
            }
            _ => return None,
        };
        if !(next.is_object() || next.is_array()) {
            return None;
        }
        cur = next;
    }
    let last = decode_key(split[split.len() - 1]);
    Some((cur, last))
}

/// Container `get`: `Ok(None)` for a missing (or null) object member.
fn con_get<'a>(con: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match con {
        Value::Object(m) => Ok(m.get(key).filter(|v| !v.is_null())),
        Value::Array(a) => {
            let raw = atoi(key)?;
            let idx = resolve_negative(raw, a.len()).ok_or_else(|| invalid_index(raw))?;
            let i = usize::try_from(idx).map_err(|_| invalid_index(raw))?;
            match a.get(i) {
                Some(v) if v.is_null() => Ok(None),
                Some(v) => Ok(Some(v)),
                None => Err(invalid_index(idx)),
            }
        }
        _ => Err(format!("unknown object type: {}", go_json_type(con))),
    }
}

fn con_add(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(a) => {
            if key == "-" {
                a.push(val);
                return Ok(());
            }
            let raw = atoi(key)
                .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            let size = a.len() as i64 + 1;
            if raw >= size {
                return Err(invalid_index(raw));
            }
            let idx = if raw < 0 {
                if raw < -size {
                    return Err(invalid_index(raw));
                }
                raw + size
            } else {
                raw
            };
            let i = usize::try_from(idx).map_err(|_| invalid_index(raw))?;
            a.insert(i, val);
            Ok(())
        }
        _ => Err(format!("unknown object type: {}", go_json_type(con))),
    }
}

fn con_remove(con: &mut Value, key: &str) -> Result<Value, String> {
    match con {
        Value::Object(m) => m
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: {ERR_MISSING}")),
        Value::Array(a) => {
            let raw = atoi(key)?;
            if raw >= a.len() as i64 {
                return Err(invalid_index(raw));
            }
            let idx = resolve_negative(raw, a.len()).ok_or_else(|| invalid_index(raw))?;
            let i = usize::try_from(idx).map_err(|_| invalid_index(raw))?;
            Ok(a.remove(i))
        }
        _ => Err(format!("unknown object type: {}", go_json_type(con))),
    }
}

/// Container `set`, only used by `replace` after `con_get` succeeded.
fn con_set(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(a) => {
            let raw = atoi(key)?;
            let idx = resolve_negative(raw, a.len()).ok_or_else(|| invalid_index(raw))?;
            let slot = usize::try_from(idx)
                .ok()
                .and_then(|i| a.get_mut(i))
                .ok_or_else(|| invalid_index(raw))?;
            *slot = val;
            Ok(())
        }
        _ => Err(format!("unknown object type: {}", go_json_type(con))),
    }
}

fn add(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = string_field(op, "path").map_err(|_| {
        OpError::Other(format!(
            "add operation failed to decode path: {ERR_MISSING}"
        ))
    })?;
    let val = value(op).cloned().unwrap_or(Value::Null);
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "add operation does not apply: doc is missing path: \"{path}\": {ERR_MISSING}"
        ))
    })?;
    con_add(con, &key, val)
        .map_err(|e| OpError::Other(format!("error in add for path: '{path}': {e}")))
}

fn remove(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = string_field(op, "path").map_err(|_| {
        OpError::Other(format!(
            "remove operation failed to decode path: {ERR_MISSING}"
        ))
    })?;
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": {ERR_MISSING}"
        ))
    })?;
    con_remove(con, &key)
        .map(|_| ())
        .map_err(|e| OpError::Other(format!("error in remove for path: '{path}': {e}")))
}

fn replace(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = string_field(op, "path")
        .map_err(|e| OpError::Other(format!("replace operation failed to decode path: {e}")))?;
    let val = value(op).cloned().unwrap_or(Value::Null);
    if path.is_empty() {
        if !(val.is_object() || val.is_array()) {
            return Err(OpError::Other(
                "replace operation value must be object or array".to_string(),
            ));
        }
        *doc = val;
        return Ok(());
    }
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "replace operation does not apply: doc is missing path: {path}: {ERR_MISSING}"
        ))
    })?;
    if con_get(con, &key).is_err() {
        return Err(OpError::Other(format!(
            "replace operation does not apply: doc is missing key: {path}: {ERR_MISSING}"
        )));
    }
    con_set(con, &key, val)
        .map_err(|e| OpError::Other(format!("error in remove for path: '{path}': {e}")))
}

fn move_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let from = string_field(op, "from")
        .map_err(|e| OpError::Other(format!("move operation failed to decode from: {e}")))?;
    let (con, key) = find_parent(doc, &from).ok_or_else(|| {
        OpError::Other(format!(
            "move operation does not apply: doc is missing from path: {from}: {ERR_MISSING}"
        ))
    })?;
    if let Err(e) = con_get(con, &key) {
        return Err(OpError::Other(format!(
            "error in move for path: '{key}': {e}"
        )));
    }
    let val = con_remove(con, &key)
        .map_err(|e| OpError::Other(format!("error in move for path: '{key}': {e}")))?;
    let path = string_field(op, "path")
        .map_err(|e| OpError::Other(format!("move operation failed to decode path: {e}")))?;
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "move operation does not apply: doc is missing destination path: {path}: {ERR_MISSING}"
        ))
    })?;
    con_add(con, &key, val)
        .map_err(|e| OpError::Other(format!("error in move for path: '{path}': {e}")))
}

fn copy(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let from = string_field(op, "from")
        .map_err(|e| OpError::Other(format!("copy operation failed to decode from: {e}")))?;
    let (con, key) = find_parent(doc, &from).ok_or_else(|| {
        OpError::Other(format!(
            "copy operation does not apply: doc is missing from path: {from}: {ERR_MISSING}"
        ))
    })?;
    let val = match con_get(con, &key) {
        Ok(Some(v)) => v.clone(),
        // A null member copies as null; a missing one has nothing to copy.
        Ok(None) => match con {
            Value::Object(m) if m.contains_key(&key) => Value::Null,
            _ => {
                return Err(OpError::Other(format!(
                    "copy operation does not apply: doc is missing from path: {from}: {ERR_MISSING}"
                )));
            }
        },
        Err(e) => {
            return Err(OpError::Other(format!(
                "error in copy for from: '{from}': {e}"
            )));
        }
    };
    let path = string_field(op, "path").map_err(|_| {
        OpError::Other(format!(
            "copy operation failed to decode path: {ERR_MISSING}"
        ))
    })?;
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "copy operation does not apply: doc is missing destination path: {path}: {ERR_MISSING}"
        ))
    })?;
    con_add(con, &key, val)
        .map_err(|e| OpError::Other(format!("error while adding value during copy: {e}")))
}

/// evanphx `test`: a missing member or a null member equals a null (or absent) `value`.
fn test(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = string_field(op, "path")
        .map_err(|e| OpError::Other(format!("test operation failed to decode path: {e}")))?;
    let failed = || OpError::Test(format!("testing value {path} failed: {ERR_TEST_FAILED}"));
    let want = value(op);
    if path.is_empty() {
        return if want == Some(&*doc) {
            Ok(())
        } else {
            Err(failed())
        };
    }
    let (con, key) = find_parent(doc, &path).ok_or_else(|| {
        OpError::Other(format!(
            "test operation does not apply: is missing path: {path}: {ERR_MISSING}"
        ))
    })?;
    let got = con_get(con, &key)
        .map_err(|e| OpError::Other(format!("error in test for path: '{path}': {e}")))?;
    match (got, want) {
        (None, None) | (None, Some(Value::Null)) => Ok(()),
        (None, Some(_)) | (Some(_), None) | (Some(_), Some(Value::Null)) => Err(failed()),
        (Some(g), Some(w)) if g == w => Ok(()),
        _ => Err(failed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(target: &Value, patch: Value) -> Result<Value, PatchError> {
        apply(target, patch.to_string().as_bytes())
    }

    fn node() -> Value {
        json!({"metadata": {"name": "n1", "labels": {"a": "1"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    }

    /// The exact sequences kube-runtime's finalizer helper sends (kube-runtime/src/finalizer.rs).
    #[test]
    fn kube_runtime_finalizer_flow() {
        // 1. first finalizer: test null (member missing) + add the list
        let obj = node();
        let obj = run(
            &obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]}
            ]),
        )
        .unwrap();
        assert_eq!(obj["metadata"]["finalizers"], json!(["example.com/f"]));

        // 2. another finalizer: test the whole list + append with /-
        let obj = run(
            &obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/f"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "other/g"}
            ]),
        )
        .unwrap();
        assert_eq!(
            obj["metadata"]["finalizers"],
            json!(["example.com/f", "other/g"])
        );

        // 3. removal: test the element at its index + remove it
        let obj = run(
            &obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/f"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        )
        .unwrap();
        assert_eq!(obj["metadata"]["finalizers"], json!(["other/g"]));

        // 4. a stale test fails with TestFailed (422) and changes nothing
        let err = run(
            &obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/f"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TestFailed(_)), "{err:?}");
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.to_string(),
            "testing value /metadata/finalizers/0 failed: test failed"
        );

        // 5. test null fails once the list exists (a concurrent writer added one)
        let err = run(
            &obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}
            ]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TestFailed(_)), "{err:?}");
    }

    #[test]
    fn go_test_null_quirk() {
        let doc = json!({"a": {"n": null, "s": "x"}, "l": [null, 1]});
        let pass = [
            json!({"op": "test", "path": "/a/missing", "value": null}),
            json!({"op": "test", "path": "/a/n", "value": null}),
            json!({"op": "test", "path": "/a/missing"}), // absent value == null
            json!({"op": "test", "path": "/l/0", "value": null}),
            json!({"op": "test", "path": "/a/s", "value": "x"}),
            json!({"op": "test", "path": "", "value": doc.clone()}),
        ];
        for op in pass {
            run(&doc, json!([op.clone()])).unwrap_or_else(|e| panic!("{op}: {e}"));
        }
        let test_failed = [
            json!({"op": "test", "path": "/a/missing", "value": "x"}),
            json!({"op": "test", "path": "/a/s", "value": null}),
            json!({"op": "test", "path": "/a/s"}),
            json!({"op": "test", "path": "/a/s", "value": "y"}),
            json!({"op": "test", "path": "", "value": {}}),
        ];
        for op in test_failed {
            let err = run(&doc, json!([op.clone()])).unwrap_err();
            assert!(matches!(err, PatchError::TestFailed(_)), "{op}: {err:?}");
        }
        // a missing *parent* is not a test failure but an unappliable op (still 422)
        let other = [
            json!({"op": "test", "path": "/nope/x", "value": null}),
            json!({"op": "test", "path": "/l/5", "value": null}),
        ];
        for op in other {
            let err = run(&doc, json!([op.clone()])).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{op}: {err:?}");
            assert_eq!(err.code(), 422);
        }
    }

    #[test]
    fn operations_table() {
        let doc = json!({"o": {"a": 1}, "l": [1, 2, 3]});
        // (ops, want)
        let cases = [
            (
                json!([{"op": "add", "path": "/o/b", "value": 2}]),
                json!({"o": {"a": 1, "b": 2}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "add", "path": "/o/a", "value": 9}]),
                json!({"o": {"a": 9}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "add", "path": "/l/0", "value": 0}]),
                json!({"o": {"a": 1}, "l": [0, 1, 2, 3]}),
            ),
            (
                json!([{"op": "add", "path": "/l/3", "value": 4}]),
                json!({"o": {"a": 1}, "l": [1, 2, 3, 4]}),
            ),
            (
                json!([{"op": "add", "path": "/l/-", "value": 4}]),
                json!({"o": {"a": 1}, "l": [1, 2, 3, 4]}),
            ),
            (
                json!([{"op": "add", "path": "/l/-1", "value": 4}]),
                json!({"o": {"a": 1}, "l": [1, 2, 3, 4]}),
            ),
            (
                json!([{"op": "remove", "path": "/o/a"}]),
                json!({"o": {}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "remove", "path": "/l/1"}]),
                json!({"o": {"a": 1}, "l": [1, 3]}),
            ),
            (
                json!([{"op": "remove", "path": "/l/-1"}]),
                json!({"o": {"a": 1}, "l": [1, 2]}),
            ),
            (
                json!([{"op": "replace", "path": "/l/0", "value": 7}]),
                json!({"o": {"a": 1}, "l": [7, 2, 3]}),
            ),
            // evanphx quirk: replace of a missing object member adds it
            (
                json!([{"op": "replace", "path": "/o/z", "value": 7}]),
                json!({"o": {"a": 1, "z": 7}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "replace", "path": "", "value": {"x": 1}}]),
                json!({"x": 1}),
            ),
            (
                json!([{"op": "move", "from": "/o/a", "path": "/o/b"}]),
                json!({"o": {"b": 1}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "move", "from": "/l/0", "path": "/l/-"}]),
                json!({"o": {"a": 1}, "l": [2, 3, 1]}),
            ),
            (
                json!([{"op": "copy", "from": "/o", "path": "/p"}]),
                json!({"o": {"a": 1}, "p": {"a": 1}, "l": [1, 2, 3]}),
            ),
            (
                json!([{"op": "copy", "from": "/l/2", "path": "/l/0"}]),
                json!({"o": {"a": 1}, "l": [3, 1, 2, 3]}),
            ),
            // escaped tokens
            (
                json!([{"op": "add", "path": "/o/a~1b~0c", "value": 1}]),
                json!({"o": {"a": 1, "a/b~c": 1}, "l": [1, 2, 3]}),
            ),
            // empty patch and null patch change nothing
            (json!([]), doc.clone()),
            (Value::Null, doc.clone()),
        ];
        for (ops, want) in cases {
            let got = run(&doc, ops.clone()).unwrap_or_else(|e| panic!("{ops}: {e}"));
            assert_eq!(got, want, "{ops}");
        }
    }

    #[test]
    fn label_key_with_slash_via_escape() {
        let got = run(&node(), json!([
            {"op": "add", "path": "/metadata/labels/topology.kubernetes.io~1zone", "value": "z1"}
        ]))
        .unwrap();
        assert_eq!(
            got["metadata"]["labels"]["topology.kubernetes.io/zone"],
            "z1"
        );
    }

    #[test]
    fn unappliable_ops_are_422() {
        let doc = json!({"o": {"a": 1}, "l": [1, 2, 3], "s": "x"});
        let cases = [
            json!({"op": "add", "path": "/missing/x", "value": 1}),
            json!({"op": "add", "path": "/l/5", "value": 1}),
            json!({"op": "add", "path": "/l/-5", "value": 1}),
            json!({"op": "add", "path": "/l/x", "value": 1}),
            json!({"op": "add", "path": "/s/x", "value": 1}),
            json!({"op": "add", "path": "", "value": 1}),
            json!({"op": "remove", "path": "/o/zz"}),
            json!({"op": "remove", "path": "/l/3"}),
            json!({"op": "remove", "path": "/l/-4"}),
            json!({"op": "replace", "path": "/l/3", "value": 1}),
            json!({"op": "replace", "path": "/missing/a", "value": 1}),
            json!({"op": "replace", "path": "", "value": 1}),
            json!({"op": "move", "from": "/o/zz", "path": "/o/b"}),
            json!({"op": "move", "from": "/o/a", "path": "/nope/b"}),
            json!({"op": "copy", "from": "/o/zz", "path": "/o/b"}),
            json!({"op": "frobnicate", "path": "/o"}),
            json!({"path": "/o"}),
            json!({"op": "add", "value": 1}),
            json!({"op": "move", "path": "/o/b"}),
        ];
        for op in cases {
            let err = run(&doc, json!([op.clone()])).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{op}: {err:?}");
            assert_eq!(err.code(), 422, "{op}");
        }
        let err = run(&doc, json!([{"op": "remove", "path": "/o/zz"}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "error in remove for path: '/o/zz': Unable to remove nonexistent key: zz: missing value"
        );
    }

    #[test]
    fn ops_apply_in_order_and_atomically() {
        let doc = json!({"a": 1});
        let err = run(
            &doc,
            json!([
                {"op": "add", "path": "/b", "value": 2},
                {"op": "test", "path": "/b", "value": 3}
            ]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TestFailed(_)));
        // the caller's document is untouched
        assert_eq!(doc, json!({"a": 1}));
        let got = run(
            &doc,
            json!([
                {"op": "add", "path": "/b", "value": 2},
                {"op": "test", "path": "/b", "value": 2},
                {"op": "remove", "path": "/a"}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"b": 2}));
    }

    #[test]
    fn malformed_documents_are_400() {
        let cases: [&[u8]; 6] = [b"", b"{", b"{}", b"\"x\"", b"[1]", b"[[]]"];
        for body in cases {
            let err = apply(&json!({}), body).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed(_)),
                "{:?}: {err:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(err.code(), 400);
        }
        // a null element decodes but is an unknown op at apply time
        let err = apply(&json!({}), b"[null]").unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        assert_eq!(err.to_string(), "Unexpected kind: unknown");
    }
}
