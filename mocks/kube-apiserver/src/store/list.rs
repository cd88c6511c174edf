//! LIST: pages of objects in key order, with upstream's continue tokens and
//! `remainingItemCount`.
//!
//! Why this exists: paging follows etcd's keys as kube-apiserver's does (a `continue` while
//! any key of the scope follows, the first page's revision on every page), which clients
//! that page (kubectl, informers) observe.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Value, json};

use super::state::{ObjectKey, Store};
use super::types::{Filter, ListPage};
use crate::error::ApiError;
use crate::meta::meta_str;
use crate::resources::ResourceDesc;

/// Opaque continue token: base64 of JSON, like upstream's (apiserver
/// pkg/storage/continue.go) but with our own fields.
fn encode_continue(revision: u64, last: &ObjectKey) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": revision, "ns": last.0, "name": last.1});
    base64::engine::general_purpose::URL_SAFE.encode(raw.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let bad = |why: &str| ApiError::BadRequest(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("unknown version"));
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no resource version"))?;
    let ns = v
        .get("ns")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

impl Store {
    /// A page of objects sorted by namespace then name.
    pub fn list(
        &self,
        desc: &'static ResourceDesc,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let start = continue_token.map(decode_continue).transpose()?;
        let inner = self.lock();
        let revision = match &start {
            Some((rv, _)) if *rv < inner.floor => {
                return Err(ApiError::Expired(
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter."
                        .into(),
                ));
            }
            // Later pages report the first page's revision, so a watch started from the
            // list's RV replays everything that changed while paging.
            Some((rv, _)) => *rv,
            None => inner.revision,
        };
        let empty = BTreeMap::new();
        let objects = inner.objects.get(&desc.key()).unwrap_or(&empty);
        let range = match &start {
            Some((_, key)) => objects.range::<ObjectKey, _>((
                std::ops::Bound::Excluded(key.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => objects.range::<ObjectKey, _>(..),
        };
        // Paging walks the stored keys of the list's scope (all, or one namespace) and
        // filters as it goes, as upstream pages over etcd keys (apiserver
        // pkg/storage/etcd3/store.go `GetList`): a full page has a `continue` whenever any
        // key of the scope follows, matching or not, and `remainingItemCount` only when
        // there is no selector (pkg/storage/continue.go `PrepareContinueToken`).
        let in_scope = |obj: &Value| {
            filter
                .namespace
                .as_ref()
                .is_none_or(|ns| meta_str(obj, "namespace").unwrap_or("") == ns)
        };
        let mut scope = range.filter(|(_, obj)| in_scope(obj));
        let mut items = Vec::new();
        let mut last_key = None;
        let limit = limit.filter(|l| *l > 0);
        for (key, obj) in scope.by_ref() {
            if !filter.matches(desc, obj) {
                continue;
            }
            items.push(obj.clone());
            last_key = Some(key.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let full = limit.is_some_and(|l| items.len() >= l);
        let selects =
            filter.labels.is_some() || filter.fields.is_some() || filter.name_selector.is_some();
        let following = if full { scope.count() as u64 } else { 0 };
        let (continue_token, remaining) = match last_key {
            Some(last) if following > 0 => (
                Some(encode_continue(revision, &last)),
                (!selects).then_some(following),
            ),
            _ => (None, None),
        };
        Ok(ListPage {
            items,
            revision,
            continue_token,
            remaining,
        })
    }
}
