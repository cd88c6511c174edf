//! The mock's own control API under `/admin` (plain JSON, no auth, errors
//! `{"error": ...}`), beside the shared journal, faults and reset routes:
//!
//! - `GET /vms` -> `[VmInfo]`; `POST /vms` ([`VmSpec`]) -> 201 `VmInfo`;
//!   `GET /vms/{name}`; `PATCH /vms/{name}` ([`VmPatch`]) -> `VmInfo`;
//!   `DELETE /vms/{name}` -> 204
//! - `GET /lifecycle` -> the policies; `PUT /lifecycle`
//!   `{"target": "default"|"type"|"resource", "name": "...", "mode": {"mode": "reads", "n": 2}|null}` -> 204
//! - `GET /leaks` -> [`crate::Leaks`]
//! - `GET /load-balancers` -> [`crate::LbSummary`] list
//! - `GET /routes` -> [`crate::RouteInfo`] list; `POST /routes`
//!   `{"name", "address_prefix", "next_hop_ip"}` -> 201 (out of band, not a leak)
//! - `GET /nsg-rules` -> [`crate::NsgRuleInfo`] list
//! - `GET /resources/{type}` -> the stored documents of a type (`loadBalancers`, ...)
//! - `GET /scale-sets` -> [`crate::ScaleSetInfo`] list; `POST /scale-sets`
//!   ([`crate::ScaleSetSpec`]: `name`, `capacity`, `zones`, `vmSize`) -> 201;
//!   `DELETE /scale-sets/{name}` -> 204

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mock_cloud::{AdminRejection, admin_error, parse_admin_json};
use serde::Deserialize;

use crate::LifecycleMode;
use crate::compute::state::{VmPatch, VmSpec};
use crate::control::{Admin, AdminError, LifecycleTarget};

fn refuse(e: AdminError) -> Response {
    let status = match e {
        AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::Conflict(_) => StatusCode::CONFLICT,
    };
    admin_error(status, &e.to_string())
}

pub fn routes(admin: Admin) -> Router {
    Router::new()
        .route("/vms", get(list_vms).post(create_vm))
        .route("/vms/{name}", get(get_vm).patch(patch_vm).delete(delete_vm))
        .route("/lifecycle", get(get_lifecycle).put(put_lifecycle))
        .route("/leaks", get(|State(a): State<Admin>| async move { Json(a.leaks()) }))
        .route(
            "/load-balancers",
            get(|State(a): State<Admin>| async move { Json(a.load_balancers()) }),
        )
        .route("/routes", get(|State(a): State<Admin>| async move { Json(a.routes()) }).post(add_route))
        .route("/nsg-rules", get(|State(a): State<Admin>| async move { Json(a.nsg_rules()) }))
        .route(
            "/resources/{ty}",
            get(|State(a): State<Admin>, Path(ty): Path<String>| async move { Json(a.resources(&ty)) }),
        )
        .route("/scale-sets", get(|State(a): State<Admin>| async move { Json(a.scale_sets()) }).post(create_scale_set))
        .route("/scale-sets/{name}", axum::routing::delete(delete_scale_set))
        .with_state(admin)
}

async fn create_scale_set(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    let spec: crate::ScaleSetSpec = match parse_admin_json(body) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    match a.create_scale_set(spec) {
        Ok(ss) => (StatusCode::CREATED, Json(ss)).into_response(),
        Err(e) => refuse(e),
    }
}

async fn delete_scale_set(State(a): State<Admin>, Path(name): Path<String>) -> Response {
    match a.delete_scale_set(&name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(e),
    }
}

async fn list_vms(State(a): State<Admin>) -> Response {
    Json(a.vms()).into_response()
}

async fn create_vm(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    let spec: VmSpec = match parse_admin_json(body) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    match a.create_vm(spec) {
        Ok(vm) => (StatusCode::CREATED, Json(vm)).into_response(),
        Err(e) => refuse(e),
    }
}

async fn get_vm(State(a): State<Admin>, Path(name): Path<String>) -> Response {
    match a.vm(&name) {
        Some(vm) => Json(vm).into_response(),
        None => refuse(AdminError::NotFound(format!("VM {name}"))),
    }
}

async fn patch_vm(
    State(a): State<Admin>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let patch: VmPatch = match parse_admin_json(body) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match a.update_vm(&name, patch) {
        Ok(vm) => Json(vm).into_response(),
        Err(e) => refuse(e),
    }
}

async fn delete_vm(State(a): State<Admin>, Path(name): Path<String>) -> Response {
    match a.delete_vm(&name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(e),
    }
}

async fn get_lifecycle(State(a): State<Admin>) -> Response {
    Json(a.lifecycle()).into_response()
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
        (t @ ("type" | "resource"), None) => {
            return AdminRejection::new(
                StatusCode::BAD_REQUEST,
                format!("target {t} needs a name"),
            )
            .into_response();
        }
        (other, _) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                &format!("target {other:?} is not one of default, type, resource"),
            );
        }
    };
    match a.set_lifecycle(target, body.mode) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteBody {
    name: String,
    address_prefix: String,
    next_hop_ip: String,
}

async fn add_route(State(a): State<Admin>, body: Result<Bytes, BytesRejection>) -> Response {
    let body: RouteBody = match parse_admin_json(body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    match a.add_route(&body.name, &body.address_prefix, &body.next_hop_ip) {
        Ok(()) => StatusCode::CREATED.into_response(),
        Err(e) => refuse(e),
    }
}
