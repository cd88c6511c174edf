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
//!
//! Layout: the merge algorithm ([`apply`] and its `Merger`) is here; `directives` handles
//! the `$` directives, `order` the order of merged lists, `elements` the checks and
//! lookups on list elements, `errors` upstream's error texts.

mod directives;
mod elements;
mod errors;
mod order;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use super::error::{PatchError, go_json_type};
use crate::schema::{ListStrategy, list_strategy};
use directives::{
    DELETE_DIRECTIVE, DELETE_FROM_PRIMITIVE_LIST_PREFIX, DIRECTIVE_MARKER, REPLACE_DIRECTIVE,
    SET_ELEMENT_ORDER_PREFIX, apply_retain_keys, discard_nulls, extract_key, has_directive,
    merge_slice_with_special_elements, remove_directives, validate_patch_with_set_order_list,
};
use elements::{ElemKind, elem_kind, find_map_by_key, slice_element_type};
use errors::{Result, err_bad_arg_type, err_bad_patch_type, err_no_merge_key, invalid};
use order::{normalize_element_order, partition};

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

fn child(path: &[String], key: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(key.to_string());
    p
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
