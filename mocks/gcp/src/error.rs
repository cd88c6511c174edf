//! Google's JSON error envelope, as the Compute API answers every failed call:
//!
//! ```json
//! {"error": {"code": 404, "message": "The resource '...' was not found",
//!            "errors": [{"message": "...", "domain": "global", "reason": "notFound"}]}}
//! ```
//!
//! google.golang.org/api `googleapi/googleapi.go` (`CheckResponse`) decodes exactly this
//! (`error.code`, `error.message`, `error.errors[].reason`), and the GCE provider of
//! cloud-provider-gcp tests reasons with `isHTTPErrorCode`/`IsGCENotFound`/`isInUsedByError`
//! (`providers/gce/gce_util.go`): `notFound`, `alreadyExists` (409),
//! `resourceInUseByAnotherResource` (400) and 429 `rateLimitExceeded` must be exact. The
//! `status` word is only added where Google's front end adds one (401, 403, 429).
//!
//! A failed *operation* carries its error differently: `error.errors[{code, message}]`
//! with upper-case codes (`RESOURCE_NOT_FOUND`, ...) and `httpErrorStatusCode`
//! (k8s-cloud-provider `pkg/cloud/op.go` turns those into a `googleapi.Error`); see
//! [`ApiError::op_code`].

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A Compute API error: each variant is one `reason` of Google's envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404 `notFound`; the payload is the resource path (`projects/p/zones/z/instances/n`).
    #[error("The resource '{0}' was not found")]
    NotFound(String),
    /// 409 `alreadyExists`.
    #[error("The resource '{0}' already exists")]
    AlreadyExists(String),
    /// 400 `invalid`: a field or path value GCE refuses.
    #[error("{0}")]
    Invalid(String),
    /// 400 `required`: a field the method needs.
    #[error("Required field '{0}' not specified")]
    Required(String),
    /// 400 `parseError`: a body that is not JSON or not the right shape.
    #[error("Parse Error: {0}")]
    Parse(String),
    /// 400 `badRequest`.
    #[error("{0}")]
    BadRequest(String),
    /// 400 `resourceInUseByAnotherResource`.
    #[error("The {kind} resource '{resource}' is already being used by '{user}'")]
    InUse {
        kind: &'static str,
        resource: String,
        user: String,
    },
    /// 400 `resourceNotReady`: the resource has an operation in progress.
    #[error("The resource '{0}' is not ready")]
    NotReady(String),
    /// 401 `required`: no credentials.
    #[error(
        "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential."
    )]
    Unauthenticated,
    /// 401 `authError`: credentials that are not a token this mock issued.
    #[error(
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."
    )]
    BadCredentials,
    /// 403 `forbidden`: another project.
    #[error("Required permission for 'projects/{0}' denied (the mock serves one project)")]
    Forbidden(String),
    /// 413 `badRequest` (the front end refuses it before the API sees it).
    #[error("The request body is larger than the limit of {0} bytes")]
    TooLarge(usize),
    /// 405 `httpMethodNotAllowed`.
    #[error("Method {0} is not allowed for this resource")]
    MethodNotAllowed(String),
    /// Any status and reason (injected faults).
    #[error("{message}")]
    Other {
        status: u16,
        reason: String,
        message: String,
    },
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        let code = match self {
            ApiError::NotFound(_) => 404,
            ApiError::AlreadyExists(_) => 409,
            ApiError::Invalid(_)
            | ApiError::Required(_)
            | ApiError::Parse(_)
            | ApiError::BadRequest(_)
            | ApiError::InUse { .. }
            | ApiError::NotReady(_) => 400,
            ApiError::Unauthenticated | ApiError::BadCredentials => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::TooLarge(_) => 413,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Other { status, .. } => *status,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn reason(&self) -> &str {
        match self {
            ApiError::NotFound(_) => "notFound",
            ApiError::AlreadyExists(_) => "alreadyExists",
            ApiError::Invalid(_) => "invalid",
            ApiError::Required(_) | ApiError::Unauthenticated => "required",
            ApiError::Parse(_) => "parseError",
            ApiError::BadRequest(_) | ApiError::TooLarge(_) => "badRequest",
            ApiError::InUse { .. } => "resourceInUseByAnotherResource",
            ApiError::NotReady(_) => "resourceNotReady",
            ApiError::BadCredentials => "authError",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::MethodNotAllowed(_) => "httpMethodNotAllowed",
            ApiError::Other { reason, .. } => reason,
        }
    }

    /// The upper-case code an operation's `error.errors[].code` carries for this error.
    pub fn op_code(&self) -> &str {
        match self {
            ApiError::NotFound(_) => "RESOURCE_NOT_FOUND",
            ApiError::AlreadyExists(_) => "RESOURCE_ALREADY_EXISTS",
            ApiError::InUse { .. } => "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
            ApiError::NotReady(_) => "RESOURCE_NOT_READY",
            ApiError::Invalid(_) | ApiError::Required(_) => "INVALID_FIELD_VALUE",
            _ => "INTERNAL_ERROR",
        }
    }

    /// The envelope.
    pub fn body(&self) -> Value {
        let message = self.to_string();
        let mut item = json!({"message": message, "domain": "global", "reason": self.reason()});
        if matches!(self, ApiError::Unauthenticated | ApiError::BadCredentials) {
            item["location"] = json!("Authorization");
            item["locationType"] = json!("header");
        }
        let mut error =
            json!({"code": self.status().as_u16(), "message": message, "errors": [item]});
        let status = match self.status().as_u16() {
            401 => Some("UNAUTHENTICATED"),
            403 => Some("PERMISSION_DENIED"),
            429 => Some("RESOURCE_EXHAUSTED"),
            _ => None,
        };
        if let Some(s) = status {
            error["status"] = json!(s);
        }
        json!({ "error": error })
    }

    /// `invalid` for a resource name that is not RFC 1035 (GCE's own wording).
    pub fn bad_name(field: &str, value: &str) -> ApiError {
        ApiError::Invalid(format!(
            "Invalid value for field '{field}': '{value}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
        ))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        if self.status() == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                "www-authenticate",
                HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\""),
            );
        }
        response
    }
}

/// The default reason of an injected status.
pub fn default_reason(status: u16) -> &'static str {
    match status {
        400 => "badRequest",
        401 => "authError",
        403 => "forbidden",
        404 => "notFound",
        409 => "alreadyExists",
        412 => "conditionNotMet",
        429 => "rateLimitExceeded",
        503 => "backendError",
        _ if status >= 500 => "backendError",
        _ => "badRequest",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_shapes() {
        let e = ApiError::NotFound("projects/p/zones/z/instances/x".into());
        let b = e.body();
        assert_eq!(b["error"]["code"], 404);
        assert_eq!(b["error"]["errors"][0]["reason"], "notFound");
        assert_eq!(b["error"]["errors"][0]["domain"], "global");
        assert!(b["error"].get("status").is_none());
        let b = ApiError::BadCredentials.body();
        assert_eq!(
            (b["error"]["code"].as_u64(), b["error"]["status"].as_str()),
            (Some(401), Some("UNAUTHENTICATED"))
        );
        assert_eq!(
            ApiError::InUse {
                kind: "address",
                resource: "a".into(),
                user: "b".into()
            }
            .status(),
            StatusCode::BAD_REQUEST
        );
    }
}
