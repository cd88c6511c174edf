//! The errors strategic merge patch reports, worded as apimachinery's mergepatch and
//! strategicpatch packages word them.
//!
//! Why this exists: the merge algorithm, the directive handling and the list helpers all
//! fail with these texts (clients and tests compare them), and need one `Result` type.

use serde_json::{Map, Value};

use crate::patch::error::PatchError;

// apimachinery pkg/util/mergepatch/errors.go
pub(super) const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
pub(super) const ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST: &str =
    "invalid patch format of primitive list";
pub(super) const ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
pub(super) const ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST: &str =
    "invalid patch format of setElementOrder list";

pub(super) type Result<T, E = PatchError> = std::result::Result<T, E>;

/// Go type names used in mergepatch error texts.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

pub(super) fn invalid(msg: impl Into<String>) -> PatchError {
    PatchError::Invalid(msg.into())
}

pub(super) fn err_no_merge_key(m: &Map<String, Value>, key: &str) -> PatchError {
    invalid(format!(
        "map: {} does not contain declared merge key: {key}",
        Value::Object(m.clone())
    ))
}

pub(super) fn err_bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    invalid(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

pub(super) fn err_bad_patch_type(directive: &Value, m: &Map<String, Value>) -> PatchError {
    let d = directive
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| directive.to_string());
    invalid(format!(
        "unknown patch type: {d} in map: {}",
        Value::Object(m.clone())
    ))
}
