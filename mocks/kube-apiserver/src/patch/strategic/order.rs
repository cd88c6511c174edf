//! The element order of merged lists: upstream's `normalizeElementOrder`,
//! `mergeSortedSlice` and the partitions they work on.
//!
//! Why this exists: clients see the order of merged lists (node addresses, conditions,
//! containers), and upstream's order rules, including its insertion-sort quirks, are
//! subtle enough to keep apart from the merge itself.

use serde_json::Value;

use super::directives::extract_to_delete_items;
use super::elements::{ElemKind, find_map_by_key, index_of, validate_merge_key_in_lists};
use super::errors::{Result, err_bad_arg_type, err_no_merge_key};

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
pub(super) fn normalize_element_order(
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

pub(super) fn partition(
    list: Vec<Value>,
    by: &[Value],
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    if key.is_empty() {
        Ok(partition_primitives(list, by))
    } else {
        partition_maps(list, by, key)
    }
}
