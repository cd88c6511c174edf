//! Neutron (networking API v2.0), at `/network`: version discovery and extensions here,
//! with the helpers every Neutron resource shares (query filters, paging, bodies and
//! errors in Neutron's shape); the resources by area:
//!
//! - `ports`: ports, networks and subnets (what CCMs read);
//! - `l3` (HTTP) and `l3_state`: floating IPs and routers with extra routes;
//! - `sg`: security groups and rules.

// Handlers build their error replies early and pass them up as `Err(Response)`; boxing
// them would only add noise.
#![allow(clippy::result_large_err)]

pub(crate) mod l3;
pub(crate) mod l3_state;
mod ports;
pub(crate) mod sg;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::Shared;
use crate::envelope::neutron_error;
use crate::state::Cloud;
use crate::util::{encode_query, json, last};

pub(crate) type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// Extensions announced by `GET /v2.0/extensions`; CPO enables routes on `extraroute`.
const EXTENSIONS: &[(&str, &str)] = &[
    ("agent", "agent"),
    ("allowed-address-pairs", "Allowed Address Pairs"),
    ("binding", "Port Binding"),
    ("external-net", "Neutron external network"),
    ("extraroute", "Neutron Extra Route"),
    ("extraroute-atomic", "Atomically add/remove extra routes"),
    ("network-ip-availability", "Network IP Availability"),
    ("port-security", "Port Security"),
    ("project-id", "project_id field enabled"),
    ("router", "Neutron L3 Router"),
    ("security-group", "security-group"),
    ("standard-attr-description", "standard-attr-description"),
    (
        "standard-attr-tag",
        "Tag support for resources with standard attribute",
    ),
    ("subnet_allocation", "Subnet Allocation"),
];

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route("/network/v2.0", get(resources))
        .route("/network/v2.0/", get(resources))
        .route("/network/v2.0/extensions", get(list_extensions))
        .route("/network/v2.0/extensions/{alias}", get(show_extension))
        .with_state(shared.clone())
        .merge(ports::routes(shared.clone()))
        .merge(l3::routes(shared.clone()))
        .merge(sg::routes(shared))
}

async fn versions(State(s): State<Arc<Shared>>) -> Response {
    let link = json!({"href": format!("{}/network/v2.0/", s.base), "rel": "self"});
    json(
        StatusCode::OK,
        json!({"versions": [{"id": "v2.0", "status": "CURRENT", "links": [link]}]}),
    )
}

async fn resources(State(s): State<Arc<Shared>>) -> Response {
    let list: Vec<Value> = [
        ("port", "ports"),
        ("network", "networks"),
        ("subnet", "subnets"),
        ("floatingip", "floatingips"),
        ("router", "routers"),
        ("security_group", "security-groups"),
        ("security_group_rule", "security-group-rules"),
    ]
    .iter()
    .map(|(name, collection)| {
        let href = format!("{}/network/v2.0/{collection}", s.base);
        json!({"name": name, "collection": collection, "links": [{"href": href, "rel": "self"}]})
    })
    .collect();
    json(StatusCode::OK, json!({ "resources": list }))
}

fn extension(alias: &str, name: &str) -> Value {
    json!({"alias": alias, "name": name, "description": name, "updated": "2013-01-01T10:00:00-00:00", "links": []})
}

async fn list_extensions() -> Response {
    let list: Vec<Value> = EXTENSIONS
        .iter()
        .map(|(alias, name)| extension(alias, name))
        .collect();
    json(StatusCode::OK, json!({ "extensions": list }))
}

async fn show_extension(Path(alias): Path<String>) -> Response {
    match EXTENSIONS.iter().find(|(a, _)| *a == alias) {
        Some((a, name)) => json(StatusCode::OK, json!({"extension": extension(a, name)})),
        None => neutron_error(
            StatusCode::NOT_FOUND,
            "ExtensionNotFound",
            &format!("Extension with alias {alias} does not exist"),
        ),
    }
}

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

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;
    use crate::testing::{BASE, Mock};

    #[tokio::test]
    async fn root_versions_need_no_token() {
        let m = Mock::seeded(0);
        let r = m.send("GET", "/network", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["versions"][0]["id"], "v2.0");
        assert_eq!(r.body["versions"][0]["status"], "CURRENT");
        assert_eq!(
            r.body["versions"][0]["links"][0]["href"],
            format!("{BASE}/network/v2.0/")
        );
        assert_eq!(
            m.send("GET", "/network/v2.0/", &[], Body::empty())
                .await
                .status,
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test]
    async fn extensions_include_extraroute() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m.get("/network/v2.0/extensions", &token).await;
        let aliases: Vec<&str> = r.body["extensions"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|e| e["alias"].as_str())
            .collect();
        assert!(aliases.contains(&"extraroute") && aliases.contains(&"extraroute-atomic"));
        assert_eq!(
            m.get("/network/v2.0/extensions/router", &token)
                .await
                .status,
            StatusCode::OK
        );
        let r = m.get("/network/v2.0/extensions/nope", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["NeutronError"]["type"], "ExtensionNotFound");
    }
}
