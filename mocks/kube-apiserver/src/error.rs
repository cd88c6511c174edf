//! API errors rendered as Kubernetes `Status` objects.
//!
//! Real clients decide what to do from `reason` and `code` (kube-rs `is_conflict`,
//! `is_already_exists`, client-go `IsNotFound`...), so every failure of this server
//! goes out as a `Status` body whose reason, code and message follow upstream
//! (apimachinery pkg/api/errors/errors.go). Nothing here panics and nothing is an
//! empty 500.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One entry of `details.causes` (a field-level validation failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`, ...
    pub reason: String,
    /// Human-readable text, already prefixed the way upstream does (`Invalid value: ...`).
    pub message: String,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// A `FieldValueInvalid` cause for `field` holding `value`.
    pub fn invalid(field: &str, value: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {value:?}: {detail}"),
            field: field.into(),
        }
    }
    /// A `FieldValueInvalid` cause whose value is not a string, already rendered (upstream
    /// prints Go values: `map[string]string{"app":"web"}`, numbers bare).
    pub fn invalid_rendered(field: &str, rendered: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {rendered}: {detail}"),
            field: field.into(),
        }
    }
    /// A `FieldValueNotSupported` cause (apimachinery pkg/util/validation/field
    /// `NotSupported`).
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                supported.join(", ")
            ),
            field: field.into(),
        }
    }
    /// A `FieldValueRequired` cause.
    pub fn required(field: &str, detail: &str) -> Cause {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired".into(),
            message,
            field: field.into(),
        }
    }
    /// A `FieldValueForbidden` cause.
    pub fn forbidden(field: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {detail}"),
            field: field.into(),
        }
    }
}

/// Everything that can go wrong serving a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{} {name:?} not found", qualified(group, resource))]
    NotFound {
        group: String,
        resource: String,
        name: String,
    },
    /// A path that names no resource this server knows.
    #[error("the server could not find the requested resource")]
    UnknownPath,
    #[error("{} {name:?} already exists", qualified(group, resource))]
    AlreadyExists {
        group: String,
        resource: String,
        name: String,
    },
    #[error(
        "Operation cannot be fulfilled on {} {name:?}: {reason}",
        qualified(group, resource)
    )]
    Conflict {
        group: String,
        resource: String,
        name: String,
        reason: String,
    },
    #[error(
        "{} {name:?} is invalid: {}",
        qualified(group, kind),
        join_causes(causes)
    )]
    Invalid {
        group: String,
        kind: String,
        name: String,
        causes: Vec<Cause>,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Expired(String),
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("Unauthorized")]
    Unauthorized,
    /// An authenticated caller the authorizer denies (apimachinery
    /// pkg/api/errors/errors.go `NewForbidden`; the message comes from apiserver
    /// pkg/endpoints/handlers/responsewriters/errors.go `forbiddenMessage`).
    #[error("{}", forbidden_message(group, resource, name, message))]
    Forbidden {
        group: String,
        /// Plural resource, empty for non-resource paths.
        resource: String,
        name: String,
        /// Why, e.g. `User "u" cannot create resource "nodes" in API group "" at the cluster scope`.
        message: String,
    },
    /// No media type of the `Accept` header is one kube-apiserver serializes (apiserver
    /// pkg/endpoints/handlers/negotiation/errors.go `errNotAcceptable`).
    #[error(
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )]
    NotAcceptable,
    #[error("Request entity too large: limit is {0}")]
    TooLarge(usize),
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// Server-side apply would change fields other managers own (apimachinery
    /// pkg/api/errors/errors.go `NewApplyConflict`).
    #[error("{message}")]
    ApplyConflict { message: String, causes: Vec<Cause> },
    /// A status built elsewhere (e.g. by the patch engines) with its own code and reason.
    #[error("{message}")]
    Other {
        code: u16,
        reason: &'static str,
        message: String,
    },
}

/// The "conflict" reason upstream gives for a stale resourceVersion.
pub const OPTIMISTIC_LOCK_MESSAGE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn forbidden_message(group: &str, resource: &str, name: &str, why: &str) -> String {
    match (resource.is_empty(), name.is_empty()) {
        (true, _) => format!("forbidden: {why}"),
        (false, true) => format!("{} is forbidden: {why}", qualified(group, resource)),
        (false, false) => format!(
            "{} {name:?} is forbidden: {why}",
            qualified(group, resource)
        ),
    }
}

fn join_causes(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    }
}

impl ApiError {
    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownPath => 404,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::Expired(_) => 410,
            ApiError::MethodNotAllowed => 405,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden { .. } => 403,
            ApiError::NotAcceptable => 406,
            ApiError::TooLarge(_) => 413,
            ApiError::Internal(_) => 500,
            ApiError::Other { code, .. } => *code,
        }
    }

    /// The `Status.reason` string.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownPath => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Expired(_) => "Expired",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::NotAcceptable => "NotAcceptable",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::Internal(_) => "InternalError",
            ApiError::Other { reason, .. } => reason,
        }
    }

    /// The full `Status` object.
    pub fn to_status(&self) -> Value {
        let details = match self {
            ApiError::NotFound {
                group,
                resource,
                name,
            }
            | ApiError::AlreadyExists {
                group,
                resource,
                name,
            }
            | ApiError::Conflict {
                group,
                resource,
                name,
                ..
            }
            | ApiError::Forbidden {
                group,
                resource,
                name,
                ..
            } => Some(details(name, group, resource)),
            ApiError::Invalid {
                group,
                kind,
                name,
                causes,
            } => {
                let mut d = details(name, group, kind);
                d["causes"] = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                Some(d)
            }
            // Built by upstream's generic response helpers with no group, kind or name
            // (apimachinery pkg/api/errors/errors.go `NewGenericServerResponse`, used for
            // unknown paths and methods, and by the patch handler for unknown patch types
            // and patches that cannot apply, and by the Accept negotiation): an empty but
            // present `details`. A create's or update's unsupported media type has none.
            ApiError::UnknownPath | ApiError::MethodNotAllowed => Some(json!({})),
            ApiError::Other {
                code: 415 | 422, ..
            } => Some(json!({})),
            ApiError::NotAcceptable => Some(json!({})),
            ApiError::ApplyConflict { causes, .. } => Some(json!({
                "causes": causes.iter().map(|c| json!({
                    "reason": c.reason, "message": c.message, "field": c.field
                })).collect::<Vec<_>>(),
            })),
            _ => None,
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let (Some(details), Some(map)) = (details, status.as_object_mut()) {
            map.insert("details".into(), details);
        }
        status
    }
}

/// `details` of a Status naming one object: `name`, `group` and `kind` are omitted when
/// empty, as Go's `omitempty` does (apimachinery pkg/apis/meta/v1/types.go
/// `StatusDetails`; a review sent without a kind is refused with no kind).
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Value::Object(d)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut resp = (code, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_message_matches_upstream() {
        let e = ApiError::Conflict {
            group: String::new(),
            resource: "nodes".into(),
            name: "x".into(),
            reason: OPTIMISTIC_LOCK_MESSAGE.into(),
        };
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on nodes \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(e.to_status()["code"], 409);
        assert_eq!(e.to_status()["reason"], "Conflict");
    }

    #[test]
    fn generic_errors_carry_empty_details_and_object_errors_omit_the_core_group() {
        assert_eq!(ApiError::MethodNotAllowed.to_status()["details"], json!({}));
        assert_eq!(ApiError::UnknownPath.to_status()["details"], json!({}));
        assert!(
            ApiError::UnsupportedMediaType("x".into())
                .to_status()
                .get("details")
                .is_none()
        );
        let patch = ApiError::Other {
            code: 422,
            reason: "Invalid",
            message: "test failed".into(),
        };
        assert_eq!(patch.to_status()["details"], json!({}));
        assert!(
            ApiError::BadRequest("x".into())
                .to_status()
                .get("details")
                .is_none()
        );
        let missing = ApiError::NotFound {
            group: String::new(),
            resource: "configmaps".into(),
            name: "a".into(),
        };
        assert_eq!(
            missing.to_status()["details"],
            json!({"name": "a", "kind": "configmaps"})
        );
    }

    #[test]
    fn group_is_qualified_in_messages() {
        let e = ApiError::NotFound {
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            name: "l".into(),
        };
        assert_eq!(e.to_string(), "leases.coordination.k8s.io \"l\" not found");
        assert_eq!(e.to_status()["details"]["kind"], "leases");
    }

    #[test]
    fn forbidden_messages_follow_upstream() {
        let e = ApiError::Forbidden {
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            name: "l".into(),
            message: "User \"u\" cannot update resource \"leases\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "leases.coordination.k8s.io \"l\" is forbidden: User \"u\" cannot update resource \"leases\""
        );
        assert_eq!((e.code(), e.reason()), (403, "Forbidden"));
        let path = ApiError::Forbidden {
            group: String::new(),
            resource: String::new(),
            name: String::new(),
            message: "User \"u\" cannot post path \"/api\"".into(),
        };
        assert_eq!(
            path.to_string(),
            "forbidden: User \"u\" cannot post path \"/api\""
        );
    }

    #[test]
    fn invalid_lists_causes() {
        let e = ApiError::Invalid {
            group: String::new(),
            kind: "Node".into(),
            name: "A".into(),
            causes: vec![Cause::invalid("metadata.name", "A", "bad")],
        };
        assert_eq!(
            e.to_string(),
            "Node \"A\" is invalid: metadata.name: Invalid value: \"A\": bad"
        );
        assert_eq!(
            e.to_status()["details"]["causes"][0]["field"],
            "metadata.name"
        );
    }
}
