//! The mock's own control API under `/admin` (plain JSON, no auth, errors
//! `{"error": ...}`), beside the shared journal, faults and reset routes:
//!
//! - `GET /instances` -> `[InstanceInfo]`; `POST /instances` ([`crate::InstanceSpec`]) ->
//!   201; `GET|PATCH|DELETE /instances/{name}` ([`crate::InstancePatch`]: `tags`,
//!   `status`, `nat`, `machineType`, `network_ips`, `nat_ips`)
//! - `GET /lifecycle`; `PUT /lifecycle`
//!   `{"target": "default"|"type"|"resource", "name": "...", "mode": {...}|null}` -> 204
//! - `GET /leaks` -> [`crate::Leaks`]
//! - `GET /load-balancers` -> [`crate::LbSummary`] list (one per forwarding rule)
//! - `GET /routes` -> [`crate::RouteInfo`] list; `POST /routes`
//!   `{"name", "dest_range", "next_hop_ip"}` -> 201 [`crate::RouteInfo`] (a route made
//!   outside the Compute API: not a leak)
//! - `GET /resources/{collection}` -> the stored resources (`firewalls`, ...)

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mock_cloud::{admin_error, parse_admin_json};
use serde::Deserialize;

use crate::LifecycleMode;
use crate::control::{Admin, AdminError, InstancePatch, InstanceSpec, LifecycleTarget};

fn refuse(e: AdminError) -> Response {
    let status = match e {
        AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::Conflict(_) => StatusCode::CONFLICT,
    };
    admin_error(status, &e.to_string())
}

fn done<T: serde::Serialize>(status: StatusCode, r: Result<T, AdminError>) -> Response {
    match r {
        Ok(v) => (status, Json(v)).into_response(),
        Err(e) => refuse(e),
    }
}

pub fn routes(admin: Admin) -> Router {
    Router::new()
        .route(
            "/instances",
            get(|State(a): State<Admin>| async move { Json(a.instances()) }).post(create),
        )
        .route(
            "/instances/{name}",
            get(get_one).patch(patch).delete(delete),
        )
        .route(
            "/lifecycle",
            get(|State(a): State<Admin>| async move { Json(a.lifecycle()) }).put(put_lifecycle),
        )
        .route(
            "/leaks",
            get(|State(a): State<Admin>| async move { Json(a.leaks()) }),
        )
        .route(
            "/load-balancers",
            get(|State(a): State<Admin>| async move { Json(a.load_balancers()) }),
        )
        .route(
            "/routes",
            get(|State(a): State<Admin>| async move { Json(a.routes()) }).post(add_route),
        )
        .route("/resources/{collection}", get(resources))
        .with_state(admin)
}

async fn create(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    match parse_admin_json::<InstanceSpec>(body) {
        Ok(spec) => done(StatusCode::CREATED, a.create_instance(spec)),
        Err(e) => e.into_response(),
    }
}

async fn get_one(State(a): State<Admin>, Path(name): Path<String>) -> Response {
    done(
        StatusCode::OK,
        a.instance(&name)
            .ok_or_else(|| AdminError::NotFound(format!("instance {name}"))),
    )
}

async fn patch(
    State(a): State<Admin>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match parse_admin_json::<InstancePatch>(body) {
        Ok(p) => done(StatusCode::OK, a.update_instance(&name, p)),
        Err(e) => e.into_response(),
    }
}

async fn delete(State(a): State<Admin>, Path(name): Path<String>) -> Response {
    match a.delete_instance(&name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(e),
    }
}

async fn resources(State(a): State<Admin>, Path(c): Path<String>) -> Response {
    match a.resources(&c) {
        Some(v) => Json(v).into_response(),
        None => admin_error(StatusCode::NOT_FOUND, &format!("no collection {c:?}")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteBody {
    name: String,
    dest_range: String,
    next_hop_ip: String,
}

async fn add_route(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    match parse_admin_json::<RouteBody>(body) {
        Ok(b) => done(
            StatusCode::CREATED,
            a.add_route(&b.name, &b.dest_range, &b.next_hop_ip),
        ),
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LifecycleBody {
    target: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    mode: Option<LifecycleMode>,
}

async fn put_lifecycle(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    let body: LifecycleBody = match parse_admin_json(body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let target = match (body.target.as_str(), body.name) {
        ("default", _) => LifecycleTarget::Default,
        ("type", Some(n)) => LifecycleTarget::Type(n),
        ("resource", Some(n)) => LifecycleTarget::Resource(n),
        (t, _) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                &format!("target {t:?} needs to be default, or type/resource with a name"),
            );
        }
    };
    match a.set_lifecycle(target, body.mode) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(e),
    }
}
