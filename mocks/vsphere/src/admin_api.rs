//! The vSphere part of the control API under `/admin` (journal, fault and reset routes
//! come from `mock-cloud`): VMs can be listed, created, changed (guest hostName, IPs,
//! power state) and deleted without a SOAP session, so cases shape what the CCM sees;
//! tags and categories can be created and attached (zones/regions); `GET /leaks` lists
//! what exists now and did not at the seed; `POST /sessions/expire` drops every session.
//!
//! - `GET /vms`, `POST /vms` (a `VmSpec`), `GET|PATCH|DELETE /vms/{id}` (`VmPatch`)
//! - `GET /tags` -> `{"categories": [...], "tags": [...]}`; `POST /categories`
//!   `{"name","cardinality","associable_types"}`; `POST /tags` `{"category_id","name"}`;
//!   `POST /tags/attach` `{"tag_id","object_id"}`
//! - `GET /leaks` -> `{"leaks": ["vm vm-42", ...]}`
//! - `GET /lifecycle` -> the power-task modes; `PUT /lifecycle` with a seed file's
//!   `lifecycle` object (`{"default": {...}, "types": {"poweroff": {...}}, "ids": {"vm-9":
//!   {...}}}`, types [`crate::LIFECYCLE_TYPES`]) replaces them for tasks started later

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mock_cloud::{AdminRejection, parse_admin_json};
use serde::Deserialize;
use serde_json::json;

use crate::Admin;
use crate::state::{AdminError, VmPatch, VmSpec};

pub(crate) fn routes(admin: Admin) -> Router {
    Router::new()
        .route("/vms", get(list).post(create))
        .route("/vms/{id}", get(show).patch(update).delete(remove))
        .route("/tags", get(list_tags).post(create_tag))
        .route("/categories", post(create_category))
        .route("/tags/attach", post(attach))
        .route("/leaks", get(leaks))
        .route("/sessions/expire", post(expire))
        .route("/lifecycle", get(lifecycle).put(set_lifecycle))
        .with_state(admin)
}

fn rejection(e: AdminError) -> AdminRejection {
    let status = match e {
        AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::Conflict(_) => StatusCode::CONFLICT,
    };
    AdminRejection::new(status, e.to_string())
}

async fn list(State(admin): State<Admin>) -> Response {
    Json(json!({ "vms": admin.vms() })).into_response()
}

async fn show(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<Response, AdminRejection> {
    admin
        .vm(&id)
        .map(|v| Json(v).into_response())
        .ok_or_else(|| rejection(AdminError::NotFound(id)))
}

async fn create(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let spec: VmSpec = parse_admin_json(body)?;
    let info = admin.create_vm(spec).map_err(rejection)?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

async fn update(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let patch: VmPatch = parse_admin_json(body)?;
    let info = admin.update_vm(&id, patch).map_err(rejection)?;
    Ok(Json(info).into_response())
}

async fn remove(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminRejection> {
    admin.delete_vm(&id).map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_tags(State(admin): State<Admin>) -> Response {
    Json(json!({ "categories": admin.categories(), "tags": admin.tags() })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewCategory {
    name: String,
    #[serde(default = "single")]
    cardinality: String,
    #[serde(default)]
    associable_types: Vec<String>,
}

fn single() -> String {
    "SINGLE".into()
}

async fn create_category(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let c: NewCategory = parse_admin_json(body)?;
    let id = admin
        .create_category(&c.name, &c.cardinality, c.associable_types)
        .map_err(rejection)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTag {
    category_id: String,
    name: String,
}

async fn create_tag(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let t: NewTag = parse_admin_json(body)?;
    let id = admin
        .create_tag(&t.category_id, &t.name)
        .map_err(rejection)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Attach {
    tag_id: String,
    object_id: String,
}

async fn attach(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, AdminRejection> {
    let a: Attach = parse_admin_json(body)?;
    admin
        .attach_tag(&a.tag_id, &a.object_id)
        .map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn leaks(State(admin): State<Admin>) -> Response {
    Json(json!({ "leaks": admin.leaks() })).into_response()
}

async fn expire(State(admin): State<Admin>) -> StatusCode {
    admin.expire_sessions();
    StatusCode::NO_CONTENT
}

async fn lifecycle(State(admin): State<Admin>) -> Response {
    Json(admin.task_policies()).into_response()
}

async fn set_lifecycle(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let seed: mock_cloud::LifecycleSeed = parse_admin_json(body)?;
    let policies = seed
        .policies(crate::LIFECYCLE_TYPES)
        .map_err(|e| AdminRejection::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    admin.set_task_policies(policies);
    Ok(Json(admin.task_policies()).into_response())
}
