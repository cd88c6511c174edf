//! List elements: their kinds, finding a map by its merge key, comparing merge keys.
//!
//! Why this exists: upstream checks the elements of every list it merges (one kind, not
//! lists of lists, maps carrying their merge key) and finds elements by key; the merge,
//! the ordering and the directives all do so.

use serde_json::Value;

use super::errors::{ERR_NO_LIST_OF_LISTS, Result, err_bad_arg_type, err_no_merge_key, invalid};

/// Kind of the elements of a list, for upstream's `sliceElementType` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ElemKind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

pub(super) fn elem_kind(v: &Value) -> ElemKind {
    match v {
        Value::Null => ElemKind::Null,
        Value::Bool(_) => ElemKind::Bool,
        Value::Number(_) => ElemKind::Number,
        Value::String(_) => ElemKind::String,
        Value::Array(_) => ElemKind::Array,
        Value::Object(_) => ElemKind::Object,
    }
}

/// upstream `sliceElementType`: all elements share one kind, which is not a list.
pub(super) fn slice_element_type(slices: &[&[Value]]) -> Result<ElemKind> {
    let mut prev: Option<ElemKind> = None;
    for v in slices.iter().flat_map(|s| s.iter()) {
        let k = elem_kind(v);
        match prev {
            None => {
                if k == ElemKind::Array {
                    return Err(invalid(ERR_NO_LIST_OF_LISTS));
                }
                prev = Some(k);
            }
            Some(p) if p != k => {
                let all: Vec<Value> = slices.iter().map(|s| Value::Array(s.to_vec())).collect();
                return Err(invalid(format!(
                    "list element types are not identical: {}",
                    Value::Array(all)
                )));
            }
            Some(_) => {}
        }
    }
    prev.ok_or_else(|| invalid("no elements in any of the given slices"))
}

/// upstream `findMapInSliceBasedOnKeyValue`: index of the first map whose `key` equals `value`.
pub(super) fn find_map_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>> {
    for (i, v) in list.iter().enumerate() {
        let Some(m) = v.as_object() else {
            return Err(invalid(format!("value for key {i} is not a map")));
        };
        if m.get(key) == Some(value) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// upstream `index`: position of `item` in `list`, comparing merge-key values for maps (a map
/// without the key compares as "nil", equal to another such map) and whole values otherwise.
pub(super) fn index_of(list: &[Value], item: &Value, key: &str, kind: ElemKind) -> Option<usize> {
    let get = |v: &'_ Value| -> Option<Value> {
        if kind == ElemKind::Object {
            v.as_object().and_then(|m| m.get(key)).cloned()
        } else {
            Some(v.clone())
        }
    };
    let want = get(item);
    list.iter().position(|v| get(v) == want)
}

/// upstream `validateMergeKeyInLists`.
pub(super) fn validate_merge_key_in_lists(key: &str, lists: &[&[Value]]) -> Result<()> {
    for v in lists.iter().flat_map(|l| l.iter()) {
        let Some(m) = v.as_object() else {
            return Err(err_bad_arg_type("map[string]interface {}", v));
        };
        if !m.contains_key(key) {
            return Err(err_no_merge_key(m, key));
        }
    }
    Ok(())
}

/// upstream `mergeKeyValueEqual`.
pub(super) fn merge_key_value_equal(left: &Value, right: &Value, key: &str) -> Result<bool> {
    if key.is_empty() {
        return Ok(left == right);
    }
    let l = left
        .as_object()
        .ok_or_else(|| err_bad_arg_type("map[string]interface {}", left))?;
    let r = right
        .as_object()
        .ok_or_else(|| err_bad_arg_type("map[string]interface {}", right))?;
    let lv = l.get(key).ok_or_else(|| err_no_merge_key(l, key))?;
    let rv = r.get(key).ok_or_else(|| err_no_merge_key(r, key))?;
    Ok(lv == rv)
}
