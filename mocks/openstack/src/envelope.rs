//! Errors in each service's own shape. Clients (gophercloud, openstacksdk) mostly look
//! only at the status, but people read these bodies in logs, and a wrong shape can break
//! stricter parsers; every error the mock produces goes through here.

use axum::Json;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Which API a request belongs to, from its path prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    Identity,
    Compute,
    Network,
    LoadBalancer,
    Admin,
    Other,
}

impl Service {
    pub fn of(path: &str) -> Service {
        let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
        match first {
            "identity" => Service::Identity,
            "compute" => Service::Compute,
            "network" => Service::Network,
            "load-balancer" => Service::LoadBalancer,
            "admin" => Service::Admin,
            _ => Service::Other,
        }
    }

    /// The name used in the journal and in fault rules.
    pub fn name(self) -> &'static str {
        match self {
            Service::Identity => "identity",
            Service::Compute => "compute",
            Service::Network => "network",
            Service::LoadBalancer => "load-balancer",
            Service::Admin => "admin",
            Service::Other => "other",
        }
    }
}

fn reason(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Error")
}

/// Keystone: `{"error":{"code","title","message"}}` (`keystone/exception.py`); also what
/// keystonemiddleware answers on the other services for a missing or bad token.
pub(crate) fn keystone_error(status: StatusCode, message: &str) -> Response {
    let body =
        json!({"error": {"code": status.as_u16(), "title": reason(status), "message": message}});
    (status, Json(body)).into_response()
}

pub(crate) fn unauthorized() -> Response {
    keystone_error(
        StatusCode::UNAUTHORIZED,
        "The request you have made requires authentication.",
    )
}

/// Nova: the fault name by status (`nova/api/openstack/wsgi.py` `_FAULT_NAMES`).
pub(crate) fn nova_error(status: StatusCode, message: &str) -> Response {
    let name = match status.as_u16() {
        400 => "badRequest",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "itemNotFound",
        405 => "badMethod",
        409 => "conflictingRequest",
        413 | 429 => "overLimit",
        415 => "badMediaType",
        501 => "notImplemented",
        503 => "serviceUnavailable",
        _ => "computeFault",
    };
    let body = json!({ name: {"code": status.as_u16(), "message": message} });
    (status, Json(body)).into_response()
}

/// Neutron: `{"NeutronError":{"type","message","detail"}}` (`neutron_lib/exceptions`).
pub(crate) fn neutron_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"NeutronError": {"type": kind, "message": message, "detail": ""}});
    (status, Json(body)).into_response()
}

/// Neutron's type for errors with no specific exception class (webob's `HTTPxxx` names).
fn neutron_generic_type(status: StatusCode) -> String {
    format!("HTTP{}", reason(status).replace([' ', '-'], ""))
}

/// Octavia (WSME): `{"faultcode","faultstring","debuginfo"}`.
pub(crate) fn octavia_error(status: StatusCode, message: &str) -> Response {
    let code = if status.is_server_error() {
        "Server"
    } else {
        "Client"
    };
    let body = json!({"faultcode": code, "faultstring": message, "debuginfo": null});
    (status, Json(body)).into_response()
}

/// An error for `service` in its envelope, with a generic type/name.
pub(crate) fn service_error(service: Service, status: StatusCode, message: &str) -> Response {
    match service {
        Service::Identity => keystone_error(status, message),
        Service::Compute => nova_error(status, message),
        Service::Network => neutron_error(status, &neutron_generic_type(status), message),
        Service::LoadBalancer => octavia_error(status, message),
        Service::Admin | Service::Other => mock_cloud::admin_error(status, message),
    }
}

/// An injected fault's answer.
pub(crate) fn fault(service: Service, status: u16, message: Option<&str>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let default = format!("{} (injected fault)", reason(status));
    let mut response = service_error(service, status, message.unwrap_or(&default));
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
    }
    response
}

pub(crate) async fn not_found(uri: Uri) -> Response {
    let service = Service::of(uri.path());
    service_error(
        service,
        StatusCode::NOT_FOUND,
        &format!("The resource could not be found: {}", uri.path()),
    )
}

pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let service = Service::of(uri.path());
    let message = format!("The method {method} is not allowed for {}", uri.path());
    service_error(service, StatusCode::METHOD_NOT_ALLOWED, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_paths() {
        assert_eq!(Service::of("/identity/v3/auth/tokens"), Service::Identity);
        assert_eq!(Service::of("/compute"), Service::Compute);
        assert_eq!(Service::of("/network/v2.0/ports"), Service::Network);
        assert_eq!(
            Service::of("/load-balancer/v2/lbaas"),
            Service::LoadBalancer
        );
        assert_eq!(Service::of("/admin/servers"), Service::Admin);
        assert_eq!(Service::of("/"), Service::Other);
        assert_eq!(Service::of("/computer"), Service::Other);
    }

    #[test]
    fn neutron_generic_types_read_like_webob() {
        assert_eq!(
            neutron_generic_type(StatusCode::INTERNAL_SERVER_ERROR),
            "HTTPInternalServerError"
        );
        assert_eq!(
            neutron_generic_type(StatusCode::TOO_MANY_REQUESTS),
            "HTTPTooManyRequests"
        );
    }
}
