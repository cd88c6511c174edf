//! vAPI REST: sessions and tagging, which the vSphere CCM uses for zones and regions.
//!
//! Two generations of the same API, as vCenter serves both: the legacy `/rest` form
//! (`POST /rest/com/vmware/cis/session` -> `{"value": id}`, results wrapped in `value`,
//! actions as `?~action=...`, ids as `id:<id>` path segments; `govmomi:vapi/rest/client.go`,
//! `govmomi:vapi/tags/tag_association.go`) and the 7.0+ `/api` form (`POST /api/session`
//! -> `"id"`, bare results, `?action=...`). The session id travels in the
//! `vmware-api-session-id` header (or cookie). Errors use each form's envelope:
//! `/rest` -> `{"type": "com.vmware.vapi.std.errors.<kind>", "value": {...}}`,
//! `/api` -> `{"error_type": "<KIND>", "messages": [...]}`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Shared;

/// Header carrying the vAPI session id.
pub const SESSION_HEADER: &str = "vmware-api-session-id";

/// A vAPI session: its user, when it was made and last used (the `cis session get`
/// answer's `created_time` / `last_accessed_time`), and the idle clock.
#[derive(Debug, Clone)]
pub(crate) struct VapiSession {
    pub user: String,
    pub created: jiff::Timestamp,
    pub last_accessed: jiff::Timestamp,
    pub last_used: Instant,
}

impl VapiSession {
    pub fn new(user: &str) -> Self {
        let now = jiff::Timestamp::now();
        VapiSession {
            user: user.to_string(),
            created: now,
            last_accessed: now,
            last_used: Instant::now(),
        }
    }
}

/// vAPI's DateTime on the wire: ISO 8601 in UTC to the millisecond, `2026-01-02T03:04:05.678Z`.
fn vapi_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Rest,
    Api,
}

fn error(flavor: Flavor, status: StatusCode, kind: &str, message: &str) -> Response {
    let body = match flavor {
        Flavor::Rest => json!({
            "type": format!("com.vmware.vapi.std.errors.{kind}"),
            "value": {"messages": [{"args": [], "default_message": message, "id": format!("vapi.{kind}")}]},
        }),
        Flavor::Api => json!({
            "error_type": kind.to_uppercase(),
            "messages": [{"args": [], "default_message": message, "id": format!("vapi.{kind}")}],
        }),
    };
    (status, Json(body)).into_response()
}

fn unauthenticated(flavor: Flavor) -> Response {
    error(
        flavor,
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "This method requires authentication.",
    )
}

fn not_found(flavor: Flavor, what: &str) -> Response {
    error(
        flavor,
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("{what} not found."),
    )
}

fn wrap(flavor: Flavor, v: Value) -> Response {
    match flavor {
        Flavor::Rest => Json(json!({ "value": v })).into_response(),
        Flavor::Api => Json(v).into_response(),
    }
}

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/rest/com/vmware/cis/session",
            post(rest_login).delete(rest_logout).get(rest_session_get),
        )
        .route(
            "/api/session",
            post(api_login).delete(api_logout).get(api_session_get),
        )
        .route(
            "/rest/com/vmware/cis/tagging/category",
            get(rest_categories),
        )
        .route(
            "/rest/com/vmware/cis/tagging/category/{id}",
            get(rest_category),
        )
        .route("/rest/com/vmware/cis/tagging/tag", get(rest_tags))
        .route("/rest/com/vmware/cis/tagging/tag/{id}", get(rest_tag))
        .route(
            "/rest/com/vmware/cis/tagging/tag-association",
            post(rest_association),
        )
        .route("/api/cis/tagging/category", get(api_categories))
        .route("/api/cis/tagging/category/{id}", get(api_category))
        .route("/api/cis/tagging/tag", get(api_tags))
        .route("/api/cis/tagging/tag/{id}", get(api_tag))
        .route("/api/cis/tagging/tag-association", post(api_association))
        .with_state(shared)
        .layer(axum::middleware::from_fn(read_whole_body))
}

/// Reads the whole request body before any handler runs, as vCenter's front end does.
/// govmomi sends body-less vAPI POSTs (`rest.Client.Login`, `Session`) with an empty
/// `io.MultiReader`, which Go's HTTP client writes as `Transfer-Encoding: chunked` with
/// the final `0\r\n\r\n` in a TLS record of its own. A handler that ignores the body
/// (login, session) answered before that record arrived, and hyper closes a keep-alive
/// connection whose request body was left unread: govmomi's next call on the pooled
/// connection then failed with `EOF` (seen as `rest.Client.Session: ... EOF`).
async fn read_whole_body(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let flavor = if req.uri().path().starts_with("/api") {
        Flavor::Api
    } else {
        Flavor::Rest
    };
    let (parts, body) = req.into_parts();
    match read_body(body, flavor).await {
        Ok(bytes) => {
            next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(resp) => resp,
    }
}

fn basic_user(headers: &HeaderMap) -> Option<(String, String)> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (u, p) = raw.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(v.to_string());
    }
    for value in headers.get_all(header::COOKIE) {
        let Ok(value) = value.to_str() else { continue };
        for part in value.split(';') {
            if let Some((k, v)) = part.trim().split_once('=')
                && k == SESSION_HEADER
            {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// The live session's user; touches it, drops it when idle too long.
fn authed(shared: &Shared, headers: &HeaderMap) -> Option<String> {
    authed_session(shared, headers).map(|s| s.user)
}

/// The live session (after touching it), or `None` when there is none or it idled out.
fn authed_session(shared: &Shared, headers: &HeaderMap) -> Option<VapiSession> {
    let id = session_id(headers)?;
    let mut sessions = shared.sessions();
    let idle = shared.config.session_idle_timeout;
    let entry = sessions.vapi.get_mut(&id)?;
    if entry.last_used.elapsed() > idle {
        sessions.vapi.remove(&id);
        return None;
    }
    entry.last_used = Instant::now();
    entry.last_accessed = jiff::Timestamp::now();
    Some(entry.clone())
}

fn login(shared: &Shared, headers: &HeaderMap, flavor: Flavor) -> Response {
    let Some((user, password)) = basic_user(headers) else {
        return unauthenticated(flavor);
    };
    if user != shared.config.username || password != shared.config.password {
        return unauthenticated(flavor);
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    shared
        .sessions()
        .vapi
        .insert(id.clone(), VapiSession::new(&user));
    let status = match flavor {
        Flavor::Rest => StatusCode::OK,
        Flavor::Api => StatusCode::CREATED,
    };
    let mut resp = wrap(flavor, json!(id));
    *resp.status_mut() = status;
    resp
}

fn logout(shared: &Shared, headers: &HeaderMap, flavor: Flavor) -> Response {
    let Some(id) = session_id(headers) else {
        return unauthenticated(flavor);
    };
    if shared.sessions().vapi.remove(&id).is_none() {
        return unauthenticated(flavor);
    }
    match flavor {
        Flavor::Rest => StatusCode::OK.into_response(),
        Flavor::Api => StatusCode::NO_CONTENT.into_response(),
    }
}

/// The caller's session (vAPI `cis session get`: `user`, `created_time`,
/// `last_accessed_time`).
fn session_get(shared: &Shared, headers: &HeaderMap, flavor: Flavor) -> Response {
    match authed_session(shared, headers) {
        Some(s) => wrap(
            flavor,
            json!({"user": s.user, "created_time": vapi_time(s.created),
                   "last_accessed_time": vapi_time(s.last_accessed)}),
        ),
        None => unauthenticated(flavor),
    }
}

/// `POST /rest/com/vmware/cis/session` creates a session; with `?~action=get` it reads the
/// caller's (the legacy form of `GET /api/session`; govmomi `rest.Client.Session`).
async fn rest_login(State(s): State<Arc<Shared>>, h: HeaderMap, RawQuery(q): RawQuery) -> Response {
    match action_of(q.as_deref(), "~action").as_deref() {
        None => login(&s, &h, Flavor::Rest),
        Some("get") => session_get(&s, &h, Flavor::Rest),
        Some(other) => error(
            Flavor::Rest,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            &format!("unsupported action {other:?}"),
        ),
    }
}
async fn api_login(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    login(&s, &h, Flavor::Api)
}
async fn rest_logout(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    logout(&s, &h, Flavor::Rest)
}
async fn api_logout(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    logout(&s, &h, Flavor::Api)
}
async fn rest_session_get(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    session_get(&s, &h, Flavor::Rest)
}
async fn api_session_get(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    session_get(&s, &h, Flavor::Api)
}

fn categories(shared: &Shared, headers: &HeaderMap, flavor: Flavor) -> Response {
    if authed(shared, headers).is_none() {
        return unauthenticated(flavor);
    }
    let ids: Vec<String> = shared
        .inventory()
        .categories
        .iter()
        .map(|c| c.id.clone())
        .collect();
    wrap(flavor, json!(ids))
}

fn category(shared: &Shared, headers: &HeaderMap, flavor: Flavor, id: &str) -> Response {
    if authed(shared, headers).is_none() {
        return unauthenticated(flavor);
    }
    let id = strip_id(flavor, id);
    let inv = shared.inventory();
    match inv.categories.iter().find(|c| c.id == id) {
        Some(c) => wrap(
            flavor,
            json!({"id": c.id, "name": c.name, "description": c.description,
                   "cardinality": c.cardinality, "associable_types": c.associable_types, "used_by": []}),
        ),
        None => not_found(flavor, &format!("Category {id}")),
    }
}

fn tags(shared: &Shared, headers: &HeaderMap, flavor: Flavor) -> Response {
    if authed(shared, headers).is_none() {
        return unauthenticated(flavor);
    }
    let ids: Vec<String> = shared
        .inventory()
        .tags
        .iter()
        .map(|t| t.id.clone())
        .collect();
    wrap(flavor, json!(ids))
}

fn tag(shared: &Shared, headers: &HeaderMap, flavor: Flavor, id: &str) -> Response {
    if authed(shared, headers).is_none() {
        return unauthenticated(flavor);
    }
    let id = strip_id(flavor, id);
    let inv = shared.inventory();
    match inv.tags.iter().find(|t| t.id == id) {
        Some(t) => wrap(
            flavor,
            json!({"id": t.id, "category_id": t.category_id, "name": t.name,
                   "description": t.description, "used_by": []}),
        ),
        None => not_found(flavor, &format!("Tag {id}")),
    }
}

/// `/rest` names objects as `id:<id>` path segments.
fn strip_id(flavor: Flavor, id: &str) -> &str {
    match flavor {
        Flavor::Rest => id.strip_prefix("id:").unwrap_or(id),
        Flavor::Api => id,
    }
}

#[derive(Deserialize)]
struct ObjectId {
    id: String,
    #[serde(rename = "type")]
    ty: String,
}

#[derive(Deserialize)]
struct ObjectBody {
    object_id: ObjectId,
}

fn action_of(query: Option<&str>, key: &str) -> Option<String> {
    let q = query?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn association(
    shared: &Shared,
    headers: &HeaderMap,
    flavor: Flavor,
    query: Option<&str>,
    body: &[u8],
) -> Response {
    if authed(shared, headers).is_none() {
        return unauthenticated(flavor);
    }
    let key = match flavor {
        Flavor::Rest => "~action",
        Flavor::Api => "action",
    };
    let action = action_of(query, key);
    if action.as_deref() != Some("list-attached-tags") {
        return error(
            flavor,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            &format!("unsupported action {action:?}"),
        );
    }
    let parsed: ObjectBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                flavor,
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                &format!("invalid body: {e}"),
            );
        }
    };
    let inv = shared.inventory();
    let exists = inv
        .get(&parsed.object_id.id)
        .is_some_and(|o| o.kind.type_name() == parsed.object_id.ty);
    if !exists {
        // vCenter answers an empty list for unknown objects (vcsim too).
        return wrap(flavor, json!([]));
    }
    wrap(flavor, json!(inv.attached(&parsed.object_id.id)))
}

async fn rest_categories(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    categories(&s, &h, Flavor::Rest)
}
async fn api_categories(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    categories(&s, &h, Flavor::Api)
}
async fn rest_category(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    category(&s, &h, Flavor::Rest, &id)
}
async fn api_category(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    category(&s, &h, Flavor::Api, &id)
}
async fn rest_tags(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    tags(&s, &h, Flavor::Rest)
}
async fn api_tags(State(s): State<Arc<Shared>>, h: HeaderMap) -> Response {
    tags(&s, &h, Flavor::Api)
}
async fn rest_tag(State(s): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    tag(&s, &h, Flavor::Rest, &id)
}
async fn api_tag(State(s): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    tag(&s, &h, Flavor::Api, &id)
}
async fn rest_association(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    RawQuery(q): RawQuery,
    body: Body,
) -> Response {
    match read_body(body, Flavor::Rest).await {
        Ok(body) => association(&s, &h, Flavor::Rest, q.as_deref(), &body),
        Err(resp) => resp,
    }
}
async fn api_association(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    RawQuery(q): RawQuery,
    body: Body,
) -> Response {
    match read_body(body, Flavor::Api).await {
        Ok(body) => association(&s, &h, Flavor::Api, q.as_deref(), &body),
        Err(resp) => resp,
    }
}

/// Largest vAPI request body read; tagging bodies are a few hundred bytes.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The request body, or a 413 in the flavor's error envelope (axum's own rejection would
/// be plain text, which vAPI clients cannot decode).
async fn read_body(body: Body, flavor: Flavor) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(body, BODY_LIMIT).await.map_err(|_| {
        error(
            flavor,
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_argument",
            &format!("The request body is larger than {BODY_LIMIT} bytes"),
        )
    })
}
