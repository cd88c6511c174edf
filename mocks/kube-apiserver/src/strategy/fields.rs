//! Small helpers over JSON maps that the kind rules are written with: defaulting a field
//! the way Go's defaulters do, and reading lists and values for validation messages.
//!
//! Why this exists: every kind family's defaults and validation use them.

use serde_json::{Map, Value, json};

/// Insert `value` at `key` when it is absent or null.
pub(super) fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Set a string field left at Go's zero value (absent, null or "") to `value`.
pub(super) fn default_string(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        map.insert(key.into(), json!(value));
    }
}

/// The object at `key`, created (or replacing a null) when absent; None when it holds
/// something else, which validation or the type check reports.
pub(super) fn child<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    default_field(map, key, json!({}));
    map.get_mut(key).and_then(Value::as_object_mut)
}

pub(super) fn list_len(v: &Value, key: &str) -> usize {
    v.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

pub(super) fn rendered(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".into(), Value::to_string)
}
