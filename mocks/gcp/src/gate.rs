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
//!   insert, the body's `name`);
//! - `kind` ([`mock_cloud::CallKind`]): [`call_kind`] of the method's collection and verb.
//!
//! The bearer check (and the metadata server's `Metadata-Flavor` check) answer before
//! fault rules and are journaled. Throttling is GCE's 429 `rateLimitExceeded`.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{CallKind, Faults, Journal, LbOp, Throttle};

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

/// How the gate sees a request (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// Which envelope answers it.
    pub kind: Kind,
    pub service: String,
    pub operation: Option<String>,
    pub resource: Option<String>,
    /// What the call is in the terms cases ask about ([`call_kind`]).
    pub call_kind: CallKind,
}

/// The journal's service, operation, resource and kind of a request.
pub fn classify_path(method: &str, p: &str) -> Classification {
    let other = |kind, service: &str, operation: Option<String>| Classification {
        kind,
        service: service.to_string(),
        // No `<api>.<collection>.<verb>` here ("POST token", "GET instance/zone"), so the
        // kind is `Other`, save for a metadata path spelling one out in dots
        // ("GET a.instances.get"): read the operation as the Compute methods are read, so
        // every request gets the kind journal readers gave it before the gate said.
        call_kind: operation.as_deref().map_or(CallKind::Other, |op| {
            let mut parts = op.splitn(3, '.').skip(1);
            let collection = parts.next().unwrap_or_default();
            call_kind(collection, parts.next().unwrap_or_default())
        }),
        operation,
        resource: None,
    };
    if p == "/admin" || p.starts_with("/admin/") {
        return other(Kind::Admin, "admin", None);
    }
    if p == "/token" {
        return other(Kind::Token, "oauth2", Some(format!("{method} token")));
    }
    if p == "/" || p == "/computeMetadata/v1" || p.starts_with("/computeMetadata/v1/") {
        let suffix = p
            .trim_start_matches("/computeMetadata/v1")
            .trim_matches('/');
        return other(
            Kind::Metadata,
            "metadata",
            Some(format!("{method} {suffix}")),
        );
    }
    let Ok(parsed) = path::parse(p) else {
        let service = if p.starts_with("/compute/") {
            "compute"
        } else {
            "other"
        };
        return other(Kind::Compute, service, None);
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
    let (collection, verb, resource) = match &parsed.target {
        Target::Project => (
            "projects".to_string(),
            verb(true, None),
            Some(parsed.project.clone()),
        ),
        Target::Location { collection, name } => {
            (collection.clone(), verb(name.is_some(), None), name.clone())
        }
        Target::Aggregated { collection } => {
            (collection.clone(), "aggregatedList".to_string(), None)
        }
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
                collection,
                verb(name.is_some(), action.as_deref()),
                name.clone(),
            )
        }
    };
    Classification {
        kind: Kind::Compute,
        service: "compute".into(),
        operation: Some(format!("compute.{collection}.{verb}")),
        resource,
        call_kind: call_kind(&collection, &verb),
    }
}

/// What a Compute method (`compute.<collection>.<verb>`) is in the terms cases ask about:
/// instance reads are instance lookups, route writes route writes; forwarding rules are
/// the load balancer (an insert creates it, a delete deletes it), target pools its
/// backends (`addInstance`/`removeInstance` change them); addresses, firewalls and health
/// checks support it.
pub fn call_kind(collection: &str, verb: &str) -> CallKind {
    let read = matches!(verb, "get" | "list" | "aggregatedList");
    let lb = CallKind::LoadBalancer;
    match (collection, verb) {
        ("instances", _) if read => CallKind::InstanceLookup,
        ("routes", _) if !read => CallKind::RouteWrite,
        ("forwardingRules", _) if read => lb(LbOp::Read),
        ("forwardingRules", "insert") => lb(LbOp::Create),
        ("forwardingRules", "delete") => lb(LbOp::Delete),
        ("forwardingRules", _) => lb(LbOp::OtherWrite),
        ("targetPools", "addInstance" | "removeInstance") => lb(LbOp::BackendWrite),
        ("targetPools", _) if read => lb(LbOp::Read),
        ("targetPools", _) => lb(LbOp::OtherWrite),
        ("addresses" | "firewalls" | "httpHealthChecks" | "healthChecks", _) => {
            CallKind::LoadBalancerSupport
        }
        _ => CallKind::Other,
    }
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
        let c = classify_path(&method, &path);
        let kind = c.kind;
        let mut call = Call {
            operation: c.operation,
            resource: c.resource,
            kind: c.call_kind,
            gated: kind != Kind::Admin,
            wakes: method != "GET" && kind == Kind::Compute,
            ..Call::new(c.service, req.method(), req.uri(), kind)
        };
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
            let c = classify_path(m, p);
            assert_eq!(
                (c.operation.as_deref(), c.resource.as_deref()),
                (Some(op), res),
                "{p}"
            );
        }
        assert_eq!(classify_path("GET", "/admin/instances").service, "admin");
    }

    /// The table harness/src/cloud/gcp.rs read journal entries by before the gate said
    /// what a call was (`classify` over the journaled operation, read as
    /// `<api>.<collection>.<verb>`), kept as the reference the gate's kinds are checked
    /// against.
    fn harness_table(e: &mock_cloud::JournalEntry) -> CallKind {
        let operation = e.operation.as_deref().unwrap_or_default();
        let mut parts = operation.splitn(3, '.');
        let (_, collection, verb) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let read = matches!(verb, "get" | "list" | "aggregatedList");
        match (collection, verb) {
            ("instances", _) if read => CallKind::InstanceLookup,
            ("routes", _) if !read => CallKind::RouteWrite,
            ("forwardingRules", _) if read => CallKind::LoadBalancer(LbOp::Read),
            ("forwardingRules", "insert") => CallKind::LoadBalancer(LbOp::Create),
            ("forwardingRules", "delete") => CallKind::LoadBalancer(LbOp::Delete),
            ("forwardingRules", _) => CallKind::LoadBalancer(LbOp::OtherWrite),
            ("targetPools", "addInstance" | "removeInstance") => {
                CallKind::LoadBalancer(LbOp::BackendWrite)
            }
            ("targetPools", _) if read => CallKind::LoadBalancer(LbOp::Read),
            ("targetPools", _) => CallKind::LoadBalancer(LbOp::OtherWrite),
            ("addresses" | "firewalls" | "httpHealthChecks" | "healthChecks", _) => {
                CallKind::LoadBalancerSupport
            }
            _ => CallKind::Other,
        }
    }

    #[tokio::test]
    async fn journaled_kinds_are_the_harness_table() {
        use crate::testing::Mock;
        use serde_json::json;

        let m = Mock::seeded(1);
        let t = m.token().await;
        let (zone, region) = (m.shared.config.zone.clone(), m.shared.config.region.clone());
        let lb = CallKind::LoadBalancer;
        let z = |rest: &str| format!("zones/{zone}/{rest}");
        let r = |rest: &str| format!("regions/{region}/{rest}");
        let body = Some(json!({"name": "x"}));
        let calls: Vec<(&str, String, Option<serde_json::Value>, CallKind)> = vec![
            ("GET", z("instances/node-0"), None, CallKind::InstanceLookup),
            ("GET", z("instances"), None, CallKind::InstanceLookup),
            (
                "GET",
                "aggregated/instances".into(),
                None,
                CallKind::InstanceLookup,
            ),
            (
                "POST",
                z("instances/node-0/setTags"),
                Some(json!({})),
                CallKind::Other,
            ),
            (
                "POST",
                "global/routes".into(),
                body.clone(),
                CallKind::RouteWrite,
            ),
            ("GET", "global/routes".into(), None, CallKind::Other),
            (
                "DELETE",
                "global/routes/x".into(),
                None,
                CallKind::RouteWrite,
            ),
            (
                "POST",
                r("addresses"),
                body.clone(),
                CallKind::LoadBalancerSupport,
            ),
            ("GET", r("addresses/x"), None, CallKind::LoadBalancerSupport),
            (
                "POST",
                "global/firewalls".into(),
                body.clone(),
                CallKind::LoadBalancerSupport,
            ),
            (
                "PATCH",
                "global/firewalls/x".into(),
                body.clone(),
                CallKind::LoadBalancerSupport,
            ),
            (
                "POST",
                "global/httpHealthChecks".into(),
                body.clone(),
                CallKind::LoadBalancerSupport,
            ),
            (
                "DELETE",
                "global/healthChecks/x".into(),
                None,
                CallKind::LoadBalancerSupport,
            ),
            ("POST", r("targetPools"), body.clone(), lb(LbOp::OtherWrite)),
            ("GET", r("targetPools/x"), None, lb(LbOp::Read)),
            (
                "POST",
                r("targetPools/x/addInstance"),
                Some(json!({})),
                lb(LbOp::BackendWrite),
            ),
            (
                "POST",
                r("targetPools/x/removeInstance"),
                Some(json!({})),
                lb(LbOp::BackendWrite),
            ),
            (
                "POST",
                r("targetPools/x/addHealthCheck"),
                Some(json!({})),
                lb(LbOp::OtherWrite),
            ),
            ("POST", r("forwardingRules"), body.clone(), lb(LbOp::Create)),
            ("GET", r("forwardingRules"), None, lb(LbOp::Read)),
            (
                "GET",
                "aggregated/forwardingRules".into(),
                None,
                lb(LbOp::Read),
            ),
            (
                "POST",
                r("forwardingRules/x/setTarget"),
                Some(json!({})),
                lb(LbOp::OtherWrite),
            ),
            ("DELETE", r("forwardingRules/x"), None, lb(LbOp::Delete)),
            ("POST", r("operations/op-1/wait"), None, CallKind::Other),
            ("GET", "zones".into(), None, CallKind::Other),
            ("GET", String::new(), None, CallKind::Other),
        ];
        let first = m.shared.journal.last_seq();
        for (method, rel, body, _) in &calls {
            m.api(method, rel, &t, body.clone()).await;
        }
        let flavor = [("metadata-flavor", "Google")];
        m.send("GET", "/computeMetadata/v1/instance/zone", &flavor, "")
            .await;
        m.send(
            "GET",
            "/computeMetadata/v1/instance/attributes/a.instances.get",
            &flavor,
            "",
        )
        .await;
        m.send("GET", "/compute/v1/projects/p/zones/z/instances", &[], "")
            .await;
        m.send("GET", "/compute/v1/nothing", &[], "").await;
        m.send("GET", "/admin/instances", &[], "").await;
        let entries = m.shared.journal.since(first);
        assert_eq!(entries.len(), calls.len() + 5);
        for e in &m.shared.journal.entries() {
            assert_eq!(e.kind, harness_table(e), "{} {:?}", e.method, e.operation);
        }
        let journaled: Vec<(Option<&str>, CallKind)> = entries[..calls.len()]
            .iter()
            .map(|e| (e.operation.as_deref(), e.kind))
            .collect();
        let wanted: Vec<(Option<&str>, CallKind)> = entries[..calls.len()]
            .iter()
            .zip(&calls)
            .map(|(e, c)| (e.operation.as_deref(), c.3))
            .collect();
        assert_eq!(journaled, wanted);
        let rest: Vec<(&str, CallKind)> = entries[calls.len()..]
            .iter()
            .map(|e| (e.service.as_str(), e.kind))
            .collect();
        assert_eq!(
            rest,
            vec![
                ("metadata", CallKind::Other),
                ("metadata", CallKind::InstanceLookup),
                ("compute", CallKind::InstanceLookup),
                ("compute", CallKind::Other),
                ("admin", CallKind::Other),
            ]
        );
    }
}
