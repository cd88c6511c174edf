//! What GCP's requests are to the shared request gate ([`mock_cloud::gate`]).
//!
//! Journal entries and fault rules see:
//! - `service`: `compute` (the Compute API), `oauth2` (`/token`), `metadata` (the
//!   metadata server), `admin`, `other`;
//! - `operation`: Google's method id, `compute.<collection>.<method>` as in the discovery
//!   document (`compute.addresses.insert`, `compute.targetPools.addInstance`,
//!   `compute.instances.get`, `compute.instances.list`, `compute.instances.aggregatedList`,
//!   `compute.regionOperations.wait`, `compute.zones.list`), `POST token`,
//!   `GET <metadata path>` (`GET instance/service-accounts/default/token`);
//! - `resource`: the name in the path (the operation's name for operations; for an
//!   insert, the body's `name`).
//!
//! The bearer check (and the metadata server's `Metadata-Flavor` check) answer before
//! fault rules and are journaled. Throttling is GCE's 429 `rateLimitExceeded`.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{Faults, Journal, Throttle};

use crate::Shared;
use crate::error::{ApiError, default_reason};
use crate::path::{self, Scope, Target};

/// How a request was classified, carried to rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Compute,
    Token,
    Metadata,
    Admin,
}

/// GCE's throttling answer.
pub const THROTTLE: Throttle = Throttle {
    status: 429,
    code: Some("rateLimitExceeded"),
    message: "Rate Limit Exceeded",
};

/// `(kind, service, operation, resource)` of a request.
pub fn classify_path(method: &str, p: &str) -> (Kind, String, Option<String>, Option<String>) {
    if p == "/admin" || p.starts_with("/admin/") {
        return (Kind::Admin, "admin".into(), None, None);
    }
    if p == "/token" {
        return (
            Kind::Token,
            "oauth2".into(),
            Some(format!("{method} token")),
            None,
        );
    }
    if p == "/" || p == "/computeMetadata/v1" || p.starts_with("/computeMetadata/v1/") {
        let suffix = p
            .trim_start_matches("/computeMetadata/v1")
            .trim_matches('/');
        return (
            Kind::Metadata,
            "metadata".into(),
            Some(format!("{method} {suffix}")),
            None,
        );
    }
    let Ok(parsed) = path::parse(p) else {
        return (
            Kind::Compute,
            if p.starts_with("/compute/") {
                "compute"
            } else {
                "other"
            }
            .into(),
            None,
            None,
        );
    };
    let verb = |name: bool, action: Option<&str>| -> String {
        match (method, name, action) {
            (_, _, Some(a)) => a.to_string(),
            ("GET", true, None) => "get".into(),
            ("GET", false, None) => "list".into(),
            ("POST", false, None) => "insert".into(),
            ("DELETE", _, None) => "delete".into(),
            ("PUT", _, None) => "update".into(),
            ("PATCH", _, None) => "patch".into(),
            (m, _, None) => m.to_ascii_lowercase(),
        }
    };
    let (op, resource) = match &parsed.target {
        Target::Project => (
            format!("compute.projects.{}", verb(true, None)),
            Some(parsed.project.clone()),
        ),
        Target::Location { collection, name } => (
            format!("compute.{collection}.{}", verb(name.is_some(), None)),
            name.clone(),
        ),
        Target::Aggregated { collection } => (format!("compute.{collection}.aggregatedList"), None),
        Target::Resource {
            scope,
            collection,
            name,
            action,
        } => {
            let collection = if collection == "operations" {
                match scope {
                    Scope::Global => "globalOperations".to_string(),
                    Scope::Region(_) => "regionOperations".to_string(),
                    Scope::Zone(_) => "zoneOperations".to_string(),
                }
            } else {
                collection.clone()
            };
            (
                format!(
                    "compute.{collection}.{}",
                    verb(name.is_some(), action.as_deref())
                ),
                name.clone(),
            )
        }
    };
    (Kind::Compute, "compute".into(), Some(op), resource)
}

impl Gate for Shared {
    type Extra = Kind;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn wake(&self) -> Option<&Wake> {
        Some(&self.wake)
    }

    async fn classify(&self, req: Request) -> Classified<Kind> {
        let path = req.uri().path().to_string();
        let method = req.method().to_string();
        let (kind, service, operation, resource) = classify_path(&method, &path);
        let call = Call {
            service,
            method: method.clone(),
            query: req.uri().query().unwrap_or("").to_string(),
            operation,
            resource,
            gated: kind != Kind::Admin,
            wakes: method != "GET" && kind == Kind::Compute,
            fault_method: None,
            fault_path: None,
            extra: kind,
            path,
        };
        let mut call = call;
        match kind {
            Kind::Compute if call.operation.is_some() => {
                if let Err(e) = self.check_bearer(req.headers()) {
                    return Classified::Answer(call, e.into_response());
                }
                // An insert names its resource in the body: journal and match it by that.
                if call.method == "POST"
                    && call
                        .operation
                        .as_deref()
                        .is_some_and(|o| o.ends_with(".insert"))
                {
                    let (parts, body) = req.into_parts();
                    let Ok(bytes) = axum::body::to_bytes(body, crate::BODY_LIMIT).await else {
                        return Classified::Answer(
                            call,
                            ApiError::TooLarge(crate::BODY_LIMIT).into_response(),
                        );
                    };
                    call.resource = serde_json::from_slice::<serde_json::Value>(&bytes)
                        .ok()
                        .and_then(|v| v.get("name")?.as_str().map(str::to_string));
                    return Classified::Pass(
                        call,
                        Request::from_parts(parts, axum::body::Body::from(bytes)),
                    );
                }
            }
            Kind::Metadata if call.path != "/" && !crate::auth::has_flavor(req.headers()) => {
                let mut r = (
                    StatusCode::FORBIDDEN,
                    "Missing Metadata-Flavor:Google header.\n",
                )
                    .into_response();
                r.headers_mut()
                    .insert("metadata-flavor", HeaderValue::from_static("Google"));
                return Classified::Answer(call, r);
            }
            _ => {}
        }
        Classified::Pass(call, req)
    }

    fn throttle(_service: &str) -> Throttle {
        THROTTLE
    }

    fn render_error(
        &self,
        call: &Call<Kind>,
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        let message = message
            .unwrap_or("Injected by the mock's fault rules.")
            .to_string();
        match call.extra {
            Kind::Token => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let error = code.unwrap_or(if status.is_server_error() {
                    "server_error"
                } else {
                    "invalid_request"
                });
                (
                    status,
                    axum::Json(serde_json::json!({"error": error, "error_description": message})),
                )
                    .into_response()
            }
            Kind::Metadata => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut r = (status, message).into_response();
                r.headers_mut()
                    .insert("metadata-flavor", HeaderValue::from_static("Google"));
                r
            }
            _ => {
                let reason = code.unwrap_or_else(|| default_reason(status)).to_string();
                let e = ApiError::Other {
                    status,
                    reason,
                    message,
                };
                let mut r = e.into_response();
                if status == 429 {
                    r.headers_mut()
                        .insert("retry-after", HeaderValue::from_static("1"));
                }
                r
            }
        }
    }

    /// An insert that was accepted makes its resource "created" for
    /// `not_found_after_create` rules (by name).
    async fn served(&self, _call: &Call<Kind>, response: Response) -> Response {
        if response.status() == StatusCode::OK
            && self.faults.wants_created()
            && let Some(created) = response.extensions().get::<crate::compute::Created>()
        {
            self.faults.note_created(&created.0);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_resources() {
        let cases = [
            (
                "GET",
                "/compute/v1/projects/p/zones/z/instances/node-0",
                "compute.instances.get",
                Some("node-0"),
            ),
            (
                "GET",
                "/compute/v1/projects/p/zones/z/instances",
                "compute.instances.list",
                None,
            ),
            (
                "POST",
                "/compute/beta/projects/p/regions/r/addresses",
                "compute.addresses.insert",
                None,
            ),
            (
                "POST",
                "/compute/v1/projects/p/regions/r/targetPools/tp/addInstance",
                "compute.targetPools.addInstance",
                Some("tp"),
            ),
            (
                "POST",
                "/compute/v1/projects/p/regions/r/operations/op-1/wait",
                "compute.regionOperations.wait",
                Some("op-1"),
            ),
            (
                "GET",
                "/compute/v1/projects/p/global/operations/op-1",
                "compute.globalOperations.get",
                Some("op-1"),
            ),
            (
                "GET",
                "/compute/v1/projects/p/aggregated/instances",
                "compute.instances.aggregatedList",
                None,
            ),
            (
                "DELETE",
                "/compute/v1/projects/p/global/firewalls/fw",
                "compute.firewalls.delete",
                Some("fw"),
            ),
            (
                "GET",
                "/compute/v1/projects/p/zones",
                "compute.zones.list",
                None,
            ),
            ("POST", "/token", "POST token", None),
            (
                "GET",
                "/computeMetadata/v1/instance/zone",
                "GET instance/zone",
                None,
            ),
        ];
        for (m, p, op, res) in cases {
            let (_, _, o, r) = classify_path(m, p);
            assert_eq!((o.as_deref(), r.as_deref()), (Some(op), res), "{p}");
        }
        assert_eq!(classify_path("GET", "/admin/instances").1, "admin");
    }
}
