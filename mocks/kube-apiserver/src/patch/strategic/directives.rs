//! The directives a strategic merge patch may carry: `$patch` (replace, delete, merge)
//! in maps and list elements, `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>`, and removing them (and nulls) from patch values that are
//! stored as they are.
//!
//! Why this exists: the directives are what set strategic merge apart from a merge patch;
//! keeping their handling together keeps the merge algorithm (`strategic`) about merging.

use serde_json::{Map, Value};

use super::elements::{find_map_by_key, merge_key_value_equal};
use super::errors::{
    ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST, ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS,
    ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST, Result, err_bad_arg_type, err_bad_patch_type,
    err_no_merge_key, invalid,
};
use crate::patch::error::PatchError;

pub(super) const DIRECTIVE_MARKER: &str = "$patch";
pub(super) const DELETE_DIRECTIVE: &str = "delete";
pub(super) const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
pub(super) const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
pub(super) const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// upstream `extractKey`: `"$prefix/field"` -> `"field"`.
pub(super) fn extract_key(s: &str, prefix: &str) -> Result<String> {
    match s.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest.to_string()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX => Err(PatchError::Malformed(
            ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST.to_string(),
        )),
        _ => Err(PatchError::Malformed(
            ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST.to_string(),
        )),
    }
}

pub(super) fn has_directive(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
}

/// upstream `removeDirectives`: drop maps that carry `$patch` (and list elements that are
/// such maps); `None` means "do not keep this value at all".
pub(super) fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            let kept = m
                .into_iter()
                .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                .collect();
            Some(Value::Object(kept))
        }
        Value::Array(a) => Some(Value::Array(
            a.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// upstream `discardNullValuesFromPatch`: remove null members of maps, recursively.
pub(super) fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// upstream `extractToDeleteItems`: split `{"$patch":"delete"}` elements from the others.
pub(super) fn extract_to_delete_items(list: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for v in list {
        let Some(m) = v.as_object() else {
            return Err(err_bad_arg_type("map[string]interface {}", &v));
        };
        if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE) {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

/// upstream `validatePatchWithSetOrderList`: the patch list's items appear in the
/// `$setElementOrder` list, in the same relative order.
pub(super) fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    set_order: &[Value],
    key: &str,
) -> Result<()> {
    if patch_list.is_empty() || set_order.is_empty() {
        return Ok(());
    }
    let non_delete = if key.is_empty() {
        patch_list.to_vec()
    } else {
        extract_to_delete_items(patch_list.to_vec())?.0
    };
    let (mut pi, mut si) = (0, 0);
    while pi < non_delete.len() && si < set_order.len() {
        if has_directive(&non_delete[pi]) {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[pi], &set_order[si], key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= set_order.len() {
        return Err(invalid(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}\n",
            Value::Array(patch_list.to_vec()),
            Value::Array(set_order.to_vec())
        )));
    }
    Ok(())
}

/// upstream `applyRetainKeysDirective`: drop live keys not listed; every patched key must be
/// listed.
pub(super) fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::Malformed(
            ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS.to_string(),
        ));
    };
    let listed = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !listed(k) {
            return Err(PatchError::Malformed(
                ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS.to_string(),
            ));
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// upstream `mergeSliceWithSpecialElements`: apply `$patch: delete` elements to the live list
/// and detect `$patch: replace`; returns the (possibly replaced) live list and the patch
/// elements without directives.
pub(super) fn merge_slice_with_special_elements(
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut original = original;
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let Some(m) = v.as_object() else {
            return Err(err_bad_arg_type("map[string]interface {}", &v));
        };
        let Some(directive) = m.get(DIRECTIVE_MARKER) else {
            plain.push(v);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(kv) = m.get(merge_key) else {
                    return Err(err_no_merge_key(m, merge_key));
                };
                // upstream deleteMatchingEntries: every element with that key goes
                while let Some(i) = find_map_by_key(&original, merge_key, kv)? {
                    original.remove(i);
                }
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => {
                return Err(invalid(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            _ => return Err(err_bad_patch_type(directive, m)),
        }
    }
    if replace {
        Ok((plain, Vec::new()))
    } else {
        Ok((original, plain))
    }
}
