//! The control API every mock exposes next to its cloud API (mounted by the cloud under
//! its admin prefix): the journal, fault rules and reset. It is our own API, so errors are
//! plain `{"error": "..."}` with a 4xx status, never a cloud envelope.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::faults::{FaultError, FaultJson, Faults};
use crate::journal::Journal;

/// What `POST <admin>/reset` does beyond clearing the journal and the fault rules
/// (which the router does itself): typically putting the cloud back to its seed.
pub type ResetFn = Arc<dyn Fn() + Send + Sync>;

/// An admin API error: `{"error": message}` with a 4xx status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminRejection {
    pub status: StatusCode,
    pub message: String,
}

impl AdminRejection {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for AdminRejection {
    fn into_response(self) -> Response {
        admin_error(self.status, &self.message)
    }
}

/// The admin API's error response.
pub fn admin_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Parses a JSON request body for an admin route, turning every failure (too large,
/// unreadable, not JSON, wrong shape) into a 4xx `{"error": ...}`.
pub fn parse_admin_json<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, AdminRejection> {
    let bytes = body.map_err(|e| AdminRejection::new(e.status(), e.body_text()))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        AdminRejection::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}"))
    })
}

#[derive(Clone)]
struct AdminState {
    journal: Journal,
    faults: Faults,
    reset: ResetFn,
}

#[derive(Deserialize)]
struct SinceQuery {
    since: Option<u64>,
}

/// Routes, relative to where the cloud mounts them (e.g. `Router::nest("/admin", ..)`):
/// - `GET /journal[?since=SEQ]` -> `{"entries": [JournalEntry...]}`; `DELETE /journal` -> 204
/// - `GET /faults` -> `{"faults": [FaultStatus...], "seed": N}`; `POST /faults` (a
///   [`FaultJson`](crate::faults::FaultJson), JSON in the `faults` module docs) -> 201 `{"id": N}`;
///   `DELETE /faults` -> 204; `DELETE /faults/{id}` -> 204 or 404;
///   `PUT /faults/seed` `{"seed": N}` -> 204 (reseeds the engine's RNG)
/// - `POST /reset` -> 204: clears journal and faults, then calls `reset`.
pub fn admin_router(journal: Journal, faults: Faults, reset: ResetFn) -> Router {
    Router::new()
        .route("/journal", get(get_journal).delete(clear_journal))
        .route(
            "/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/faults/seed", put(set_seed))
        .route("/faults/{id}", delete(remove_fault))
        .route("/reset", post(reset_all))
        .with_state(AdminState {
            journal,
            faults,
            reset,
        })
}

/// A mock's whole admin API: the shared routes ([`admin_router`]: journal, fault rules,
/// reset) over its journal and fault rules, and the cloud's own routes beside them.
pub struct AdminApi {
    pub journal: Journal,
    pub faults: Faults,
    /// What reset does beyond clearing the journal and the fault rules.
    pub reset: ResetFn,
    /// The cloud's own admin routes (instances, lifecycle modes, leaks, ...).
    pub routes: Router,
}

impl AdminApi {
    pub fn new(
        journal: Journal,
        faults: Faults,
        reset: impl Fn() + Send + Sync + 'static,
        routes: Router,
    ) -> Self {
        AdminApi {
            journal,
            faults,
            reset: Arc::new(reset),
            routes,
        }
    }

    /// The admin routes (`/admin/...` once nested), not journaled: for a mock whose request
    /// gate journals them (as service `admin`).
    pub fn router(self) -> Router {
        admin_router(self.journal, self.faults, self.reset).merge(self.routes)
    }

    /// The admin routes journaled as service `admin` ([`journaled_as_admin`]): for admin
    /// routes served without the request gate.
    pub fn journaled(self) -> Router {
        let journal = self.journal.clone();
        journaled_as_admin(self.router(), journal)
    }
}

/// `router` (a mock's admin routes, mounted under `/admin`) with every request journaled as
/// service `admin` with its `/admin…` path and never faulted: what the request gate does for
/// a mock whose admin routes pass through it, for admin routes served on their own.
pub fn journaled_as_admin(router: Router, journal: Journal) -> Router {
    router.layer(axum::middleware::from_fn_with_state(journal, journal_admin))
}

async fn journal_admin(
    State(journal): State<Journal>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let method = req.method().to_string();
    let path = format!("/admin{}", req.uri().path());
    let query = req.uri().query().unwrap_or("").to_string();
    let response = next.run(req).await;
    let status = response.status().as_u16();
    journal.record("admin", &method, &path, &query, status, None);
    response
}

async fn get_journal(
    State(s): State<AdminState>,
    query: Result<Query<SinceQuery>, QueryRejection>,
) -> Result<Response, AdminRejection> {
    let Query(q) =
        query.map_err(|e| AdminRejection::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let entries = match q.since {
        Some(seq) => s.journal.since(seq),
        None => s.journal.entries(),
    };
    Ok(Json(json!({ "entries": entries })).into_response())
}

async fn clear_journal(State(s): State<AdminState>) -> StatusCode {
    s.journal.clear();
    StatusCode::NO_CONTENT
}

async fn list_faults(State(s): State<AdminState>) -> Response {
    Json(json!({ "faults": s.faults.list(), "seed": s.faults.seed() })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedBody {
    seed: u64,
}

async fn set_seed(
    State(s): State<AdminState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, AdminRejection> {
    let body: SeedBody = parse_admin_json(body)?;
    s.faults.set_seed(body.seed);
    Ok(StatusCode::NO_CONTENT)
}

async fn add_fault(
    State(s): State<AdminState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let rule: FaultJson = parse_admin_json(body)?;
    let id = s
        .faults
        .try_add(rule)
        .map_err(|e| AdminRejection::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

async fn clear_faults(State(s): State<AdminState>) -> StatusCode {
    s.faults.clear();
    StatusCode::NO_CONTENT
}

async fn remove_fault(
    State(s): State<AdminState>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminRejection> {
    let id: u64 = id.parse().map_err(|_| {
        AdminRejection::new(
            StatusCode::BAD_REQUEST,
            format!("fault id {id:?} is not a number"),
        )
    })?;
    match s.faults.remove(id) {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(e @ FaultError::NotFound(_)) => {
            Err(AdminRejection::new(StatusCode::NOT_FOUND, e.to_string()))
        }
        Err(e) => Err(AdminRejection::new(StatusCode::BAD_REQUEST, e.to_string())),
    }
}

async fn reset_all(State(s): State<AdminState>) -> StatusCode {
    s.faults.clear();
    s.journal.clear();
    (s.reset)();
    StatusCode::NO_CONTENT
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;
    use crate::faults::Fault;

    fn setup() -> (Router, Journal, Faults, Arc<AtomicUsize>) {
        let journal = Journal::new();
        let faults = Faults::new();
        let resets = Arc::new(AtomicUsize::new(0));
        let counter = resets.clone();
        let reset: ResetFn = Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let router = Router::new().nest(
            "/admin",
            admin_router(journal.clone(), faults.clone(), reset),
        );
        (router, journal, faults, resets)
    }

    async fn call(
        router: &Router,
        method: &str,
        uri: &str,
        body: &str,
    ) -> (StatusCode, serde_json::Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let resp = router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let value = if bytes.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json")
        };
        (status, value)
    }

    #[tokio::test]
    async fn journal_get_since_and_delete() {
        let (router, journal, _, _) = setup();
        journal.record("compute", "GET", "/a", "", 200, None);
        journal.record("compute", "GET", "/b", "x=1", 404, Some(3));
        let (status, body) = call(&router, "GET", "/admin/journal", "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["entries"].as_array().map(Vec::len), Some(2));
        assert_eq!(body["entries"][1]["fault"], 3);
        let (_, body) = call(&router, "GET", "/admin/journal?since=1", "").await;
        assert_eq!(body["entries"][0]["path"], "/b");
        let (status, body) = call(&router, "GET", "/admin/journal?since=abc", "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"].is_string());
        let (status, _) = call(&router, "DELETE", "/admin/journal", "").await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert!(journal.is_empty());
    }

    #[tokio::test]
    async fn faults_crud_and_errors() {
        let (router, _, faults, _) = setup();
        let (status, body) = call(
            &router,
            "POST",
            "/admin/faults",
            r#"{"service":"compute","path":"/servers","status":503,"count":1}"#,
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let id = body["id"].as_u64().expect("id");
        let (_, body) = call(&router, "GET", "/admin/faults", "").await;
        assert_eq!(body["faults"][0]["id"], id);
        assert_eq!(body["faults"][0]["status"], 503);
        assert_eq!(faults.list().len(), 1);

        let (status, body) = call(
            &router,
            "POST",
            "/admin/faults",
            r#"{"path":"(","status":500}"#,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"].as_str().is_some_and(|e| e.contains("regex")));
        let (status, _) = call(&router, "POST", "/admin/faults", "{not json").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _) = call(
            &router,
            "POST",
            "/admin/faults",
            r#"{"status":500,"bogus":1}"#,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        let (status, _) = call(&router, "DELETE", &format!("/admin/faults/{id}"), "").await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, body) = call(&router, "DELETE", &format!("/admin/faults/{id}"), "").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body["error"].is_string());
        let (status, _) = call(&router, "DELETE", "/admin/faults/x", "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        faults.add(Fault::error(500));
        let (status, _) = call(&router, "DELETE", "/admin/faults", "").await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert!(faults.list().is_empty());
    }

    #[tokio::test]
    async fn reset_clears_and_calls_back() {
        let (router, journal, faults, resets) = setup();
        journal.record("compute", "GET", "/a", "", 200, None);
        faults.add(Fault::error(500));
        let (status, _) = call(&router, "POST", "/admin/reset", "").await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert!(journal.is_empty());
        assert!(faults.list().is_empty());
        assert_eq!(resets.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn rich_rules_and_seed_through_the_api() {
        let (router, _, faults, _) = setup();
        let (status, _) = call(
            &router,
            "POST",
            "/admin/faults",
            r#"{"kind":"throttle","probability":0.5,"latency_ms":1,"jitter_ms":2}"#,
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, body) = call(
            &router,
            "POST",
            "/admin/faults",
            r#"{"kind":"reset","status":500}"#,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"].is_string());
        let (status, _) = call(&router, "PUT", "/admin/faults/seed", r#"{"seed":42}"#).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert_eq!(faults.seed(), 42);
        let (_, body) = call(&router, "GET", "/admin/faults", "").await;
        assert_eq!(body["seed"], 42);
        assert_eq!(body["faults"][0]["kind"], "throttle");
        let (status, _) = call(&router, "PUT", "/admin/faults/seed", r#"{"seed":-1}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
