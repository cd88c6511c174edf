//! Listing: the list parameters (`maxResults`, `pageToken`, `filter`), page tokens
//! bound to their listing and filter, the list reply's shape and the aggregated lists
//! (`items: {"zones/z": {...}}` with a `warning` for empty scopes), as
//! google.golang.org/api `compute/v1/compute-gen.go` decodes them. Apart from the
//! handlers because every collection pages the same way.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::filter::Filter;
use crate::state::{Cloud, Kind};

use super::{MAX_RESULTS, Req, render, render_instance};

/// `maxResults`, `pageToken`, `filter` of a list call.
#[derive(Debug)]
pub struct ListQuery {
    pub filter: Filter,
    pub filter_text: String,
    pub max_results: usize,
    pub offset: usize,
}

/// Parses the list parameters; `listing` names the listing (a page token from another
/// listing or filter is refused).
pub fn list_query(query: &str, listing: &str) -> Result<ListQuery, ApiError> {
    let mut filter_text = String::new();
    let mut max_results = MAX_RESULTS;
    let mut token = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "filter" => filter_text = v.into_owned(),
            "maxResults" => {
                max_results = match v.parse::<usize>() {
                    Ok(0) => MAX_RESULTS,
                    Ok(n) if n <= MAX_RESULTS => n,
                    _ => {
                        return Err(ApiError::Invalid(format!(
                            "Invalid value for field 'maxResults': '{v}'. Must be less than or equal to {MAX_RESULTS}"
                        )));
                    }
                }
            }
            "pageToken" => token = Some(v.into_owned()),
            _ => {}
        }
    }
    let filter = Filter::parse(&filter_text).map_err(|e| ApiError::Invalid(e.to_string()))?;
    let fingerprint = fingerprint(listing, &filter_text);
    let offset = match token.as_deref() {
        None | Some("") => 0,
        Some(t) => decode_token(t, fingerprint).ok_or_else(|| {
            ApiError::Invalid(format!(
                "Invalid value for field 'pageToken': '{}'",
                t.chars().take(100).collect::<String>()
            ))
        })?,
    };
    Ok(ListQuery {
        filter,
        filter_text,
        max_results,
        offset,
    })
}

fn fingerprint(listing: &str, filter: &str) -> u64 {
    // FNV-1a: stable across runs and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in listing.bytes().chain([0u8]).chain(filter.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub fn encode_token(offset: usize, fp: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{offset}.{fp:016x}"))
}

/// The offset a page token carries, if it is one of this listing's.
pub fn decode_token(token: &str, fp: u64) -> Option<usize> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = std::str::from_utf8(&raw).ok()?;
    let (offset, f) = text.split_once('.')?;
    if f.len() != 16 || u64::from_str_radix(f, 16).ok()? != fp {
        return None;
    }
    if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) || offset.len() > 9 {
        return None;
    }
    offset.parse().ok()
}

/// One page of `items` (already in order) after the filter.
pub fn page(items: Vec<Value>, q: &ListQuery, listing: &str) -> (Vec<Value>, Option<String>) {
    let matching: Vec<Value> = items.into_iter().filter(|v| q.filter.matches(v)).collect();
    let end = q.offset.saturating_add(q.max_results).min(matching.len());
    let start = q.offset.min(matching.len());
    let next =
        (end < matching.len()).then(|| encode_token(end, fingerprint(listing, &q.filter_text)));
    (matching[start..end].to_vec(), next)
}

pub(super) fn list_reply(
    cloud: &Cloud,
    req: &Req,
    items: Vec<Value>,
    kind: &str,
    rel: &str,
) -> Result<Value, ApiError> {
    let q = list_query(&req.query, rel)?;
    let (items, next) = page(items, &q, rel);
    let mut v = json!({"kind": kind, "id": rel, "selfLink": format!("{}/compute/v1/{rel}", cloud.ctx.base)});
    if !items.is_empty() {
        v["items"] = Value::Array(items);
    }
    if let Some(t) = next {
        v["nextPageToken"] = json!(t);
    }
    Ok(v)
}

pub(super) fn aggregated(cloud: &Cloud, req: &Req, collection: &str) -> Result<Value, ApiError> {
    let ctx = &cloud.ctx;
    let mut all: Vec<(String, Value)> = Vec::new();
    let scopes: Vec<String> = match collection {
        "instances" => {
            for i in cloud.instances.values() {
                all.push((format!("zones/{}", i.zone), render_instance(cloud, i)));
            }
            ctx.zones.iter().map(|z| format!("zones/{z}")).collect()
        }
        c => {
            let kind = Kind::from_collection(c)
                .ok_or_else(|| ApiError::NotFound(ctx.rel(&format!("aggregated/{c}"))))?;
            for (k, d) in cloud.docs_of(kind, None) {
                all.push((k.scope.prefix(), render(cloud, k, d)));
            }
            if kind.regional() {
                vec![format!("regions/{}", ctx.region)]
            } else {
                vec!["global".into()]
            }
        }
    };
    all.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1["name"].as_str().cmp(&b.1["name"].as_str()))
    });
    let rel = ctx.rel(&format!("aggregated/{collection}"));
    let q = list_query(&req.query, &rel)?;
    let matching: Vec<(String, Value)> = all
        .into_iter()
        .filter(|(_, v)| q.filter.matches(v))
        .collect();
    let start = q.offset.min(matching.len());
    let end = q.offset.saturating_add(q.max_results).min(matching.len());
    let mut grouped: BTreeMap<String, Vec<Value>> =
        scopes.into_iter().map(|s| (s, Vec::new())).collect();
    for (scope, v) in &matching[start..end] {
        grouped.entry(scope.clone()).or_default().push(v.clone());
    }
    let items: Map<String, Value> = grouped
        .into_iter()
        .map(|(scope, list)| {
            let v = if list.is_empty() {
                json!({"warning": {"code": "NO_RESULTS_ON_PAGE",
                    "message": format!("There are no results for scope '{scope}' on this page."),
                    "data": [{"key": "scope", "value": scope}]}})
            } else {
                json!({ collection: list })
            };
            (scope, v)
        })
        .collect();
    let kind_word = match collection {
        "instances" => "instance".to_string(),
        c => Kind::from_collection(c)
            .map(|k| k.singular().to_string())
            .unwrap_or_default(),
    };
    let mut v = json!({"kind": format!("compute#{kind_word}AggregatedList"), "id": rel,
        "items": items, "selfLink": format!("{}/compute/v1/{rel}", ctx.base)});
    if end < matching.len() {
        v["nextPageToken"] = json!(encode_token(end, fingerprint(&rel, &q.filter_text)));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_belong_to_their_listing() {
        let t = encode_token(5, fingerprint("l", "f"));
        assert_eq!(decode_token(&t, fingerprint("l", "f")), Some(5));
        assert_eq!(decode_token(&t, fingerprint("l", "g")), None);
        assert_eq!(decode_token("garbage", 1), None);
    }

    #[test]
    fn max_results_bounds() {
        assert!(list_query("maxResults=501", "x").is_err());
        assert_eq!(
            list_query("maxResults=0", "x").expect("q").max_results,
            MAX_RESULTS
        );
        assert!(list_query("filter=name%20%3E%201", "x").is_err());
    }
}
