//! The AWS part of the control API under `/admin` (journal, fault and reset routes come
//! from `mock-cloud`): instances can be listed, created, changed (state, type, public IP,
//! tags) and deleted without SigV4, so cases shape the cloud the CCM sees; load balancers
//! are listed, `GET /leaks` reports what the cloud APIs created that still exists,
//! `PUT /lifecycle/elbv2[/{name}]` sets how ELBv2 load balancers leave `provisioning`, and
//! `GET /resolve/{dns-name}` answers `{"address": "127.51.B.N"}` (404 for an unknown name):
//! the data-plane address a load balancer's `DNSName` stands for, since hermetic names
//! exist in no DNS. `PUT /imds {"instance_id": "i-..."}` (or `null`) chooses the instance
//! the metadata service speaks for.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use mock_cloud::{AdminRejection, parse_admin_json};
use serde_json::json;

use crate::state::{AdminError, InstancePatch, InstanceSpec};
use crate::{Admin, LifecycleMode};

pub(crate) fn routes(admin: Admin) -> Router {
    Router::new()
        .route("/instances", get(list).post(create))
        .route("/instances/{id}", get(show).patch(update).delete(remove))
        .route("/loadbalancers", get(list_lbs))
        .route("/leaks", get(leaks))
        .route("/resolve/{name}", get(resolve))
        .route("/lifecycle/elbv2", put(set_default_lifecycle))
        .route("/lifecycle/elbv2/{name}", put(set_lb_lifecycle))
        .route("/imds", put(set_imds))
        .with_state(admin)
}

fn rejection(e: AdminError) -> AdminRejection {
    let status = match e {
        AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::AddressInUse(_) | AdminError::Exhausted(_) => StatusCode::CONFLICT,
    };
    AdminRejection::new(status, e.to_string())
}

async fn list(State(admin): State<Admin>) -> Response {
    Json(json!({ "instances": admin.instances() })).into_response()
}

async fn show(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<Response, AdminRejection> {
    admin
        .instance(&id)
        .map(|i| Json(i).into_response())
        .ok_or_else(|| rejection(AdminError::NotFound(id)))
}

async fn create(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let spec: InstanceSpec = parse_admin_json(body)?;
    let info = admin.create_instance(spec).map_err(rejection)?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

async fn update(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let patch: InstancePatch = parse_admin_json(body)?;
    let info = admin.update_instance(&id, patch).map_err(rejection)?;
    Ok(Json(info).into_response())
}

async fn remove(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminRejection> {
    admin.delete_instance(&id).map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_lbs(State(admin): State<Admin>) -> Response {
    Json(json!({
        "classic": admin.load_balancer_names(),
        "v2": admin.elbv2_load_balancers(),
    }))
    .into_response()
}

async fn resolve(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    match admin.resolve(&name) {
        Some(ip) => Json(json!({ "address": ip.to_string() })).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": format!("no load balancer has the DNS name {name:?}") })),
        )
            .into_response(),
    }
}

async fn leaks(State(admin): State<Admin>) -> Response {
    Json(json!({ "leaks": admin.leaks() })).into_response()
}

/// `PUT /lifecycle/elbv2` with a mode (`{"mode":"reads","n":3}`...): new load balancers.
async fn set_default_lifecycle(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, AdminRejection> {
    let mode: LifecycleMode = parse_admin_json(body)?;
    admin.set_elbv2_lifecycle(None, mode).map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /lifecycle/elbv2/{name or arn}`: one load balancer, its pending transition too.
async fn set_lb_lifecycle(
    State(admin): State<Admin>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, AdminRejection> {
    let mode: LifecycleMode = parse_admin_json(body)?;
    admin
        .set_elbv2_lifecycle(Some(&name), mode)
        .map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /imds` body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImdsChoice {
    instance_id: Option<String>,
}

async fn set_imds(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, AdminRejection> {
    let choice: ImdsChoice = parse_admin_json(body)?;
    admin
        .set_imds_instance(choice.instance_id.as_deref())
        .map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}
