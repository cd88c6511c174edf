//! What Azure's requests are to the shared request gate ([`mock_cloud::gate`]): how a
//! request is classified for the journal and fault rules, ARM's bearer-token check
//! (answered before fault rules, and journaled), the throttling preset and the error
//! envelopes.
//!
//! Journal entries and fault rules see:
//! - `service`: `compute`, `network` (ARM by resource provider), `resources`
//!   (subscription and resource group reads), `identity` (tokens, managed identity,
//!   OpenID and instance discovery), `metadata` (`/metadata/endpoints`), `admin`;
//! - `operation`: `"<METHOD> <Namespace>/<type>[/<child>]"` with ARM's canonical casing
//!   (`"PUT Microsoft.Network/loadBalancers"`, `"GET Microsoft.Compute/virtualMachines"`
//!   for a get and a list alike, `"GET Microsoft.Compute/virtualMachines/instanceView"`,
//!   `"PUT Microsoft.Network/routeTables/routes"`), `"GET <Namespace>/operations"` and
//!   `"GET <Namespace>/operationResults"` for polls, `"GET providers/<Namespace>"` for
//!   provider registration, `"GET resourceGroups"`, `"GET subscriptions"`,
//!   `"POST token"` (all token endpoints), `"GET msi/token"`,
//!   `"GET metadata/endpoints"`, `"GET openid-configuration"`, `"GET discovery/instance"`;
//! - `resource`: the innermost resource name in the path (`node-0`, the route's name),
//!   the operation id for polls, the client id for tokens; none for lists.
//!
//! ARM throttles with 429 `TooManyRequests` and `Retry-After`; errors are
//! `{"error":{"code","message"}}`, except the identity endpoints', which are AAD's
//! `{"error","error_description"}`.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{Faults, Journal, Throttle};

use crate::Shared;
use crate::arm::ArmError;
use crate::arm::path::{self, ArmPath};

/// How a request was classified, carried to rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Arm,
    Identity,
    Metadata,
    Admin,
}

/// ARM's throttling answer.
pub const THROTTLE: Throttle = Throttle {
    status: 429,
    code: Some("TooManyRequests"),
    message: "The request is being throttled as the limit has been reached for operation type.",
};

/// The canonical `Namespace/type[/child]` of an ARM resource path.
fn canonical_type(p: &ArmPath) -> (String, Option<String>) {
    let ArmPath::Resource {
        namespace, types, ..
    } = p
    else {
        return (String::new(), None);
    };
    let key = p.type_key().unwrap_or_default();
    let ty = match path::type_info(&key) {
        Some(info) => info.arm_type.to_string(),
        None if key == "microsoft.compute/virtualmachines/instanceview" => {
            "Microsoft.Compute/virtualMachines/instanceView".to_string()
        }
        None => {
            let mut s = namespace.clone();
            for (t, _) in types {
                s.push('/');
                s.push_str(t);
            }
            s
        }
    };
    (ty, p.name().map(str::to_string))
}

fn canonical_namespace(ns: &str) -> String {
    if ns.eq_ignore_ascii_case("Microsoft.Compute") {
        "Microsoft.Compute".into()
    } else if ns.eq_ignore_ascii_case("Microsoft.Network") {
        "Microsoft.Network".into()
    } else {
        ns.to_string()
    }
}

/// The journal's service, operation and resource of a request (see the module docs).
pub fn classify_path(method: &str, p: &str) -> (Kind, String, Option<String>, Option<String>) {
    if p == "/admin" || p.starts_with("/admin/") {
        return (Kind::Admin, "admin".into(), None, None);
    }
    if let Ok(arm) = path::parse(p) {
        let (service, op, resource) = match &arm {
            ArmPath::Subscription { sub } => (
                "resources",
                format!("{method} subscriptions"),
                Some(sub.clone()),
            ),
            ArmPath::ResourceGroup { rg, .. } => (
                "resources",
                format!("{method} resourceGroups"),
                Some(rg.clone()),
            ),
            ArmPath::Provider { namespace, .. } => (
                service_of(namespace),
                format!("{method} providers/{}", canonical_namespace(namespace)),
                None,
            ),
            ArmPath::Operation {
                namespace,
                result,
                id,
                ..
            } => (
                service_of(namespace),
                format!(
                    "{method} {}/{}",
                    canonical_namespace(namespace),
                    if *result {
                        "operationResults"
                    } else {
                        "operations"
                    }
                ),
                Some(id.clone()),
            ),
            ArmPath::Resource { namespace, .. } => {
                let (ty, name) = canonical_type(&arm);
                (service_of(namespace), format!("{method} {ty}"), name)
            }
        };
        return (Kind::Arm, service.into(), Some(op), resource);
    }
    let segs: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["metadata", "endpoints"] => (
            Kind::Metadata,
            "metadata".into(),
            Some(format!("{method} metadata/endpoints")),
            None,
        ),
        ["msi", "token"] => (
            Kind::Identity,
            "identity".into(),
            Some(format!("{method} msi/token")),
            None,
        ),
        ["common", "discovery", "instance"] => (
            Kind::Identity,
            "identity".into(),
            Some(format!("{method} discovery/instance")),
            None,
        ),
        [.., "openid-configuration"] => (
            Kind::Identity,
            "identity".into(),
            Some(format!("{method} openid-configuration")),
            segs.first().map(|t| t.to_string()),
        ),
        [.., "token"] if segs.contains(&"oauth2") => (
            Kind::Identity,
            "identity".into(),
            Some(format!("{method} token")),
            segs.first().map(|t| t.to_string()),
        ),
        _ => (Kind::Arm, "other".into(), None, None),
    }
}

fn service_of(namespace: &str) -> &'static str {
    if namespace.eq_ignore_ascii_case("Microsoft.Compute") {
        "compute"
    } else if namespace.eq_ignore_ascii_case("Microsoft.Network") {
        "network"
    } else {
        "resources"
    }
}

/// The default error code of an injected status.
fn default_code(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "AuthenticationFailed",
        403 => "AuthorizationFailed",
        404 => "ResourceNotFound",
        409 => "Conflict",
        412 => "PreconditionFailed",
        429 => "TooManyRequests",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "GatewayTimeout",
        _ => "InternalServerError",
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
        let (kind, service, operation, resource) = classify_path(&method, &path);
        let call = Call {
            service,
            method: method.clone(),
            query: req.uri().query().unwrap_or("").to_string(),
            operation,
            resource,
            gated: kind != Kind::Admin,
            wakes: method != "GET",
            fault_method: None,
            fault_path: None,
            extra: kind,
            path,
        };
        if kind == Kind::Arm
            && call.operation.is_some()
            && let Err(e) = self.check_bearer(req.headers())
        {
            let challenge = self.bearer_challenge(&e);
            let mut response = e.into_response();
            response.headers_mut().insert("www-authenticate", challenge);
            return Classified::Answer(call, response);
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
        let status_code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = message.unwrap_or("Injected by the mock's fault rules.");
        match call.extra {
            Kind::Identity => {
                let error = code.unwrap_or(if status == 429 {
                    "temporarily_unavailable"
                } else {
                    "server_error"
                });
                let mut response = (
                    status_code,
                    axum::Json(serde_json::json!({"error": error, "error_description": message})),
                )
                    .into_response();
                if status == 429 {
                    response
                        .headers_mut()
                        .insert("retry-after", HeaderValue::from_static("1"));
                }
                response
            }
            _ => {
                let code = code.unwrap_or_else(|| default_code(status));
                let message = if status == 404 && code == "ResourceNotFound" {
                    match &call.resource {
                        Some(r) => format!(
                            "The Resource '{r}' under resource group '{}' was not found.",
                            self.config.resource_group
                        ),
                        None => message.to_string(),
                    }
                } else {
                    message.to_string()
                };
                ArmError::new(status_code, code, message).into_response()
            }
        }
    }

    fn finish(&self, _call: &Call<Kind>, response: &mut Response) {
        let id = uuid::Uuid::new_v4().to_string();
        if let Ok(v) = HeaderValue::from_str(&id) {
            let headers = response.headers_mut();
            headers.insert("x-ms-request-id", v.clone());
            headers.insert("x-ms-correlation-request-id", v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_resources() {
        let sub = "/subscriptions/s/resourceGroups/rg/providers";
        let cases = [
            (
                "PUT",
                format!("{sub}/Microsoft.Network/loadBalancers/kubernetes"),
                "network",
                "PUT Microsoft.Network/loadBalancers",
                Some("kubernetes"),
            ),
            (
                "GET",
                format!("{sub}/microsoft.compute/virtualmachines/node-0"),
                "compute",
                "GET Microsoft.Compute/virtualMachines",
                Some("node-0"),
            ),
            (
                "GET",
                format!("{sub}/Microsoft.Compute/virtualMachines"),
                "compute",
                "GET Microsoft.Compute/virtualMachines",
                None,
            ),
            (
                "GET",
                format!("{sub}/Microsoft.Compute/virtualMachines/n/instanceView"),
                "compute",
                "GET Microsoft.Compute/virtualMachines/instanceView",
                Some("n"),
            ),
            (
                "PUT",
                format!("{sub}/Microsoft.Network/routeTables/rt/routes/r1"),
                "network",
                "PUT Microsoft.Network/routeTables/routes",
                Some("r1"),
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/o1"
                    .to_string(),
                "network",
                "GET Microsoft.Network/operations",
                Some("o1"),
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute".to_string(),
                "compute",
                "GET providers/Microsoft.Compute",
                None,
            ),
            (
                "POST",
                "/t/oauth2/v2.0/token".to_string(),
                "identity",
                "POST token",
                Some("t"),
            ),
            (
                "POST",
                "/adfs/oauth2/token".to_string(),
                "identity",
                "POST token",
                Some("adfs"),
            ),
            (
                "GET",
                "/msi/token".to_string(),
                "identity",
                "GET msi/token",
                None,
            ),
            (
                "GET",
                "/metadata/endpoints".to_string(),
                "metadata",
                "GET metadata/endpoints",
                None,
            ),
        ];
        for (method, p, service, op, resource) in cases {
            let (_, s, o, r) = classify_path(method, &p);
            assert_eq!(
                (s.as_str(), o.as_deref(), r.as_deref()),
                (service, Some(op), resource),
                "{p}"
            );
        }
        assert_eq!(classify_path("GET", "/admin/vms").1, "admin");
    }
}
