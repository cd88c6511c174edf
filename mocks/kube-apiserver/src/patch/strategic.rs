//! Strategic merge patch, following apimachinery pkg/util/strategicpatch/patch.go
//! (`StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`, the options
//! kube-apiserver uses).
//!
//! Why this exists: kubectl, every Go controller (CCM `PatchNodeStatus`, `PatchService`, taint
//! helpers, event recorders) and kube-lease-manager send strategic merge patches. Unlike a merge
//! patch, lists with a patch strategy merge by key (or as sets of primitives), and the patch may
//! carry directives:
//! - `$patch: replace | delete` inside a map (replace the map / make it empty);
//! - `{"$patch": "replace"}` as a list element: the list becomes exactly the other patch
//!   elements (what k8s.io/component-helpers node/util `fixupPatchForNodeStatusAddresses`
//!   relies on, so nodes with two addresses of one type survive);
//! - `{"<key>": v, "$patch": "delete"}` as a list element: drop every element with that key;
//! - `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`, `$retainKeys`.
//!
//! The per-kind list strategies come from [`crate::schema`]. The element order of merged lists
//! follows upstream's `normalizeElementOrder`/`mergeSortedSlice`: patch items keep the patch's
//! order, server-only items keep their relative live order and are interleaved by live
//! position; items new to the live list come before remaining server-only items.
//!
//! Deliberate deviation: for an atomic list, upstream stores the patch list verbatim, so a
//! `{"$patch": "replace"}` element there would end up in the object; we drop such directive
//! elements instead. Errors that upstream returns as plain Go errors (HTTP 500) are 422 here.

use serde_json::{Map, Value};

use super::{PatchError, go_json_type};
use crate::schema::{ListStrategy, list_strategy};

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

// apimachinery pkg/util/mergepatch/errors.go
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
const ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST: &str =
    "invalid patch format of setElementOrder list";

type Result<T, E = PatchError> = std::result::Result<T, E>;

/// Apply a strategic merge patch body to `target`, an object of `kind`.
pub fn apply(kind: &str, target: &Value, patch: &[u8]) -> Result<Value> {
    // apiserver strategicPatchObject: the body is unmarshalled into a map; failure is a 400.
    let patch: Value =
        serde_json::from_slice(patch).map_err(|e| PatchError::Malformed(e.to_string()))?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_json_type(&patch)
        )));
    };
    let Value::Object(original) = target.clone() else {
        return Err(PatchError::Invalid("invalid JSON document".to_string()));
    };
    let merger = Merger { kind };
    Ok(Value::Object(merger.merge_map(original, patch, &[])?))
}

/// Kind of the elements of a list, for upstream's `sliceElementType` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ElemKind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

fn elem_kind(v: &Value) -> ElemKind {
    match v {
        Value::Null => ElemKind::Null,
        Value::Bool(_) => ElemKind::Bool,
        Value::Number(_) => ElemKind::Number,
        Value::String(_) => ElemKind::String,
        Value::Array(_) => ElemKind::Array,
        Value::Object(_) => ElemKind::Object,
    }
}

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

fn invalid(msg: impl Into<String>) -> PatchError {
    PatchError::Invalid(msg.into())
}

fn err_no_merge_key(m: &Map<String, Value>, key: &str) -> PatchError {
    invalid(format!(
        "map: {} does not contain declared merge key: {key}",
        Value::Object(m.clone())
    ))
}

fn err_bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    invalid(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

fn err_bad_patch_type(directive: &Value, m: &Map<String, Value>) -> PatchError {
    let d = directive
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| directive.to_string());
    invalid(format!(
        "unknown patch type: {d} in map: {}",
        Value::Object(m.clone())
    ))
}

fn child(path: &[String], key: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(key.to_string());
    p
}

/// upstream `extractKey`: `"$prefix/field"` -> `"field"`.
fn extract_key(s: &str, prefix: &str) -> Result<String> {
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

fn has_directive(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
}

/// upstream `removeDirectives`: drop maps that carry `$patch` (and list elements that are
/// such maps); `None` means "do not keep this value at all".
fn remove_directives(v: Value) -> Option<Value> {
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
fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// upstream `sliceElementType`: all elements share one kind, which is not a list.
fn slice_element_type(slices: &[&[Value]]) -> Result<ElemKind> {
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
fn find_map_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>> {
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
fn index_of(list: &[Value], item: &Value, key: &str, kind: ElemKind) -> Option<usize> {
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
fn validate_merge_key_in_lists(key: &str, lists: &[&[Value]]) -> Result<()> {
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

/// upstream `extractToDeleteItems`: split `{"$patch":"delete"}` elements from the others.
fn extract_to_delete_items(list: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
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

/// upstream `normalizeSliceOrder`: sort `to_sort` by position in `order`. Go's
/// `sort.SliceStable` is an insertion sort for up to 20 elements; its comparator calls an
/// element that is missing from `order` "less", and we keep that behaviour by using the same
/// insertion sort.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>> {
    let (mut to_sort, to_delete) = if kind == ElemKind::Object {
        validate_merge_key_in_lists(key, &[&to_sort, order])?;
        extract_to_delete_items(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let less =
        |a: &Value, b: &Value| match (index_of(order, a, key, kind), index_of(order, b, key, kind))
        {
            (Some(ia), Some(ib)) => ia < ib,
            _ => true,
        };
    for i in 1..to_sort.len() {
        let mut j = i;
        while j > 0 && less(&to_sort[j], &to_sort[j - 1]) {
            to_sort.swap(j, j - 1);
            j -= 1;
        }
    }
    to_sort.extend(to_delete);
    Ok(to_sort)
}

/// upstream `mergeSortedSlice`: insert server-only items (`left`) among patch items (`right`),
/// placing a left item first only when both are in `server_order` and it comes earlier there.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    key: &str,
    kind: ElemKind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, key, kind), index_of(server_order, r, key, kind)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// upstream `normalizeElementOrder`.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, key, kind)?;
    Ok(merge_sorted_slice(
        server_only,
        patch,
        server_order,
        key,
        kind,
    ))
}

/// upstream `partitionPrimitivesByPresentInList`.
fn partition_primitives(list: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    list.into_iter().partition(|v| by.contains(v))
}

/// upstream `partitionMapsByPresentInList`.
fn partition_maps(list: Vec<Value>, by: &[Value], key: &str) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut in_patch = Vec::new();
    let mut server_only = Vec::new();
    for v in list {
        let Some(m) = v.as_object() else {
            return Err(err_bad_arg_type("map[string]interface {}", &v));
        };
        let Some(kv) = m.get(key) else {
            return Err(err_no_merge_key(m, key));
        };
        if find_map_by_key(by, key, kv)?.is_some() {
            in_patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((in_patch, server_only))
}

fn partition(list: Vec<Value>, by: &[Value], key: &str) -> Result<(Vec<Value>, Vec<Value>)> {
    if key.is_empty() {
        Ok(partition_primitives(list, by))
    } else {
        partition_maps(list, by, key)
    }
}

/// upstream `mergeKeyValueEqual`.
fn merge_key_value_equal(left: &Value, right: &Value, key: &str) -> Result<bool> {
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

/// upstream `validatePatchWithSetOrderList`: the patch list's items appear in the
/// `$setElementOrder` list, in the same relative order.
fn validate_patch_with_set_order_list(
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

struct Merger<'a> {
    kind: &'a str,
}

impl Merger<'_> {
    fn strategy(&self, path: &[String]) -> ListStrategy {
        list_strategy(self.kind, path)
    }

    /// upstream `mergeMap`.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        path: &[String],
    ) -> Result<Map<String, Value>> {
        if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
            // upstream handleDirectiveInMergeMap: only replace and delete are valid on maps.
            return match directive.as_str() {
                Some(REPLACE_DIRECTIVE) => {
                    patch.remove(DIRECTIVE_MARKER);
                    Ok(patch)
                }
                Some(DELETE_DIRECTIVE) => Ok(Map::new()),
                _ => Err(err_bad_patch_type(directive, &patch)),
            };
        }

        apply_retain_keys(&mut original, &mut patch)?;
        self.merge_set_element_order(&mut original, &mut patch, path)?;

        for (raw_key, patch_v) in patch {
            let (key, is_delete_list) = if raw_key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                (
                    extract_key(&raw_key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?,
                    true,
                )
            } else {
                (raw_key, false)
            };

            // null deletes the key (IgnoreUnmatchedNulls: nothing else to do)
            if patch_v.is_null() {
                original.remove(&key);
                continue;
            }

            let Some(slot) = original.get_mut(&key) else {
                if !is_delete_list {
                    let mut v = patch_v;
                    discard_nulls(&mut v);
                    if let Some(v) = remove_directives(v) {
                        original.insert(key, v);
                    }
                }
                continue;
            };

            let sub_path = child(path, &key);
            match (std::mem::take(slot), patch_v) {
                (Value::Object(o), Value::Object(p)) => {
                    *slot = Value::Object(self.merge_map(o, p, &sub_path)?);
                }
                (Value::Array(o), Value::Array(p)) => {
                    let strategy = self.strategy(&sub_path);
                    *slot = Value::Array(self.merge_slice_handler(
                        o,
                        p,
                        strategy,
                        is_delete_list,
                        &sub_path,
                    )?);
                }
                (o, mut p) => {
                    let same_type = elem_kind(&o) == elem_kind(&p);
                    if !same_type && is_delete_list {
                        *slot = o;
                        continue;
                    }
                    if !same_type {
                        discard_nulls(&mut p);
                    }
                    match remove_directives(p) {
                        Some(v) => *slot = v,
                        None => {
                            original.remove(&key);
                        }
                    }
                }
            }
        }
        Ok(original)
    }

    /// upstream `mergePatchIntoOriginal`: handle every `$setElementOrder/<field>` together
    /// with the patch list of that field, and order the result.
    fn merge_set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        path: &[String],
    ) -> Result<()> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
            .cloned()
            .collect();
        for key in keys {
            let Some(order_v) = patch.remove(&key) else {
                continue;
            };
            let Value::Array(order) = order_v else {
                return Err(err_bad_arg_type("[]interface {}", &order_v));
            };
            let field = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;
            let original_list = match original.get(&field) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(err_bad_arg_type("[]interface {}", other)),
            };
            let patch_list = match patch.get(&field) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(err_bad_arg_type("[]interface {}", other)),
            };
            let sub_path = child(path, &field);
            let strategy = self.strategy(&sub_path);
            let merge_key = strategy.merge_key();
            validate_patch_with_set_order_list(
                patch_list.as_deref().unwrap_or(&[]),
                &order,
                merge_key,
            )?;

            let merged = match (&original_list, &patch_list) {
                (Some(o), None) => o.clone(),
                (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                (Some(o), Some(p)) => {
                    self.merge_slice_handler(o.clone(), p.clone(), strategy, false, &sub_path)?
                }
                (None, None) => continue,
            };

            let (patch_items, server_only) = partition(merged, &order, merge_key)?;
            let original_items = original_list.unwrap_or_default();
            let kind =
                slice_element_type(&[&original_items, patch_list.as_deref().unwrap_or(&[])])?;
            let both = normalize_element_order(
                patch_items,
                server_only,
                &order,
                &original_items,
                merge_key,
                kind,
            )?;
            original.insert(field.clone(), Value::Array(both));
            patch.remove(&field);
        }
        Ok(())
    }

    /// upstream `mergeSliceHandler`: merge when the field has a merge strategy (or for a
    /// `$deleteFromPrimitiveList`), else the patch list replaces the live list.
    fn merge_slice_handler(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        strategy: ListStrategy,
        is_delete_list: bool,
        path: &[String],
    ) -> Result<Vec<Value>> {
        if strategy.merges() || is_delete_list {
            self.merge_slice(original, patch, strategy.merge_key(), is_delete_list, path)
        } else {
            // Atomic list: replaced. Directive elements dropped (see module docs).
            Ok(patch.into_iter().filter(|v| !has_directive(v)).collect())
        }
    }

    /// upstream `mergeSlice`.
    fn merge_slice(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        merge_key: &str,
        is_delete_list: bool,
        path: &[String],
    ) -> Result<Vec<Value>> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = slice_element_type(&[&original, &patch])?;

        let (merged, server_order, patch_order) = if kind != ElemKind::Object {
            if is_delete_list {
                // upstream deleteFromSlice: no reordering afterwards
                return Ok(original
                    .into_iter()
                    .filter(|v| !patch.contains(v))
                    .collect());
            }
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for v in original.iter().chain(patch.iter()) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            (merged, original, patch)
        } else {
            if merge_key.is_empty() {
                return Err(invalid(format!(
                    "cannot merge lists without merge key for {}",
                    path.join(".")
                )));
            }
            let (original, patch) = merge_slice_with_special_elements(original, patch, merge_key)?;
            let merged = self.merge_slice_without_special_elements(
                original.clone(),
                &patch,
                merge_key,
                path,
            )?;
            (merged, original, patch)
        };

        let (patch_items, server_only) = partition(merged, &patch_order, merge_key)?;
        normalize_element_order(
            patch_items,
            server_only,
            &patch_order,
            &server_order,
            merge_key,
            kind,
        )
    }

    /// upstream `mergeSliceWithoutSpecialElements`: merge patch elements into live elements
    /// with the same merge-key value; append the others.
    fn merge_slice_without_special_elements(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        path: &[String],
    ) -> Result<Vec<Value>> {
        for v in patch {
            let Some(pm) = v.as_object() else {
                return Err(err_bad_arg_type("map[string]interface {}", v));
            };
            let Some(kv) = pm.get(merge_key) else {
                return Err(err_no_merge_key(pm, merge_key));
            };
            match find_map_by_key(&original, merge_key, kv)? {
                Some(i) => {
                    let Value::Object(om) = std::mem::take(&mut original[i]) else {
                        return Err(invalid(format!("value for key {i} is not a map")));
                    };
                    original[i] = Value::Object(self.merge_map(om, pm.clone(), path)?);
                }
                None => original.push(v.clone()),
            }
        }
        Ok(original)
    }
}

/// upstream `applyRetainKeysDirective`: drop live keys not listed; every patched key must be
/// listed.
fn apply_retain_keys(
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
fn merge_slice_with_special_elements(
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

#[cfg(test)]
mod tests {
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
        let node =
            node_with_addresses(vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", "n1")]);
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
        let node =
            node_with_addresses(vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", "n1")]);
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
            let err =
                run("Node", &obj, json!({"metadata": {"labels": {"$patch": d}}})).unwrap_err();
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
        let svc = json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}]}}});
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
}
