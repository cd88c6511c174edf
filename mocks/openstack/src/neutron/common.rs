//! The helpers every Neutron resource's handlers share: query filters and paging, request
//! bodies, and 400s in Neutron's shape. Kept out of `mod.rs`, which mounts the resources'
//! routes, so `ports`, `l3` and `sg` use these without importing the module that imports
//! them; this module imports none of them.

use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::Shared;
use crate::envelope::neutron_error;
use crate::state::Cloud;
use crate::util::{encode_query, json, last};

pub(crate) type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

pub(crate) fn bad_request(message: &str) -> Response {
    neutron_error(StatusCode::BAD_REQUEST, "HTTPBadRequest", message)
}

pub(crate) fn pairs(query: Pairs) -> Result<Vec<(String, String)>, Response> {
    query
        .map(|Query(p)| p)
        .map_err(|e| bad_request(&format!("Invalid query string: {e}")))
}

/// The object under `key` in a JSON request body, errors in Neutron's shape.
pub(crate) fn neutron_body(
    body: Result<Bytes, BytesRejection>,
    key: &str,
) -> Result<Map<String, Value>, Response> {
    let bytes = body.map_err(|e| {
        let status = e.status();
        neutron_error(status, "HTTPRequestEntityTooLarge", &e.body_text())
    })?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| bad_request(&format!("Malformed request body: {e}")))?;
    match value.get(key) {
        Some(Value::Object(m)) => Ok(m.clone()),
        _ => Err(bad_request(&format!(
            "Resource body required with key {key:?}"
        ))),
    }
}

pub(crate) fn opt_str<'a>(
    m: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, Response> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad_request(&format!(
            "Invalid input for {key}. Reason: '{other}' is not a valid string."
        ))),
    }
}

/// A Neutron list of resources that need nothing but the attribute filters and paging:
/// `all` renders every resource (under the cloud lock) as `(id, json)`.
pub(crate) fn filtered_list(
    s: &Shared,
    key: &str,
    query: Pairs,
    all: impl FnOnce(&Cloud) -> Vec<(String, Value)>,
) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let items: Vec<(String, Value)> = all(&s.cloud())
        .into_iter()
        .filter(|(_, v)| passes(v, &pairs))
        .collect();
    page(s, key, &pairs, items).unwrap_or_else(|r| r)
}

/// Whether a listed resource passes the query's attribute filters (string/number/bool
/// equality on top-level fields; repeated keys OR-ed, different keys AND-ed).
pub(crate) fn passes(item: &Value, pairs: &[(String, String)]) -> bool {
    const RESERVED: &[&str] = &[
        "limit",
        "marker",
        "fields",
        "sort_key",
        "sort_dir",
        "page_reverse",
    ];
    let mut keys: Vec<&str> = pairs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !RESERVED.contains(k))
        .collect();
    keys.dedup();
    keys.iter().all(|key| {
        let wanted: Vec<&str> = pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        match item.get(*key) {
            None => true,
            Some(Value::String(s)) => wanted.contains(&s.as_str()),
            Some(Value::Number(n)) => wanted.contains(&n.to_string().as_str()),
            Some(Value::Bool(b)) => wanted
                .iter()
                .any(|w| w.eq_ignore_ascii_case(&b.to_string())),
            Some(Value::Null) => wanted.contains(&""),
            Some(Value::Array(tags)) if *key == "tags" => wanted
                .iter()
                .flat_map(|w| w.split(','))
                .all(|w| tags.iter().any(|t| t == w)),
            Some(_) => true,
        }
    })
}

/// `limit`/`marker` paging over a list sorted by id, with a `<collection>_links` next link
/// when the page is full.
pub(crate) fn page(
    s: &Shared,
    collection: &str,
    pairs: &[(String, String)],
    items: Vec<(String, Value)>,
) -> Result<Response, Response> {
    let limit = match last(pairs, "limit") {
        None => None,
        Some(l) => match l.trim().parse::<usize>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                return Err(bad_request(&format!(
                    "Invalid input for limit: {l:?} is not an integer"
                )));
            }
        },
    };
    let marker = last(pairs, "marker");
    let mut selected: Vec<(String, Value)> = items
        .into_iter()
        .filter(|(id, _)| marker.is_none_or(|m| id.as_str() > m))
        .collect();
    let mut body = json!({});
    if let Some(limit) = limit
        && selected.len() >= limit
    {
        selected.truncate(limit);
        if let Some((last_id, _)) = selected.last() {
            let mut next: Vec<(String, String)> = pairs
                .iter()
                .filter(|(k, _)| k != "marker")
                .cloned()
                .collect();
            next.push(("marker".to_string(), last_id.clone()));
            let href = format!(
                "{}/network/v2.0/{collection}?{}",
                s.base,
                encode_query(&next)
            );
            body[format!("{collection}_links")] = json!([{"rel": "next", "href": href}]);
        }
    }
    body[collection] = Value::Array(selected.into_iter().map(|(_, v)| v).collect());
    Ok(json(StatusCode::OK, body))
}
