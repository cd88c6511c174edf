//! Neutron (networking API v2.0), at `/network`: version discovery and extensions here;
//! the helpers every Neutron resource shares (query filters, paging, bodies and errors in
//! Neutron's shape) in `common`; the resources by area:
//!
//! - `ports`: ports, networks and subnets (what CCMs read);
//! - `l3` (HTTP) and `l3_state`: floating IPs and routers with extra routes;
//! - `sg` (HTTP) and `sg_state`: security groups and rules.

// Handlers build their error replies early and pass them up as `Err(Response)`; boxing
// them would only add noise.
#![allow(clippy::result_large_err)]

mod common;
pub(crate) mod l3;
pub(crate) mod l3_state;
mod ports;
pub(crate) mod sg;
pub(crate) mod sg_state;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use crate::Shared;
use crate::envelope::neutron_error;
use crate::util::json;

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
