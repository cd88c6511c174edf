//! [`PatchError`]: why a patch could not be applied, and the Kubernetes `Status` each
//! reason maps to.
//!
//! Why this exists: the three patch engines ([`super::json`], [`super::merge`],
//! [`super::strategic`]) fail with it and the HTTP layer turns it into a response; as a
//! leaf module of its own the engines depend on it, not on the module that dispatches to
//! them.

use serde_json::Value;

/// Why a patch could not be applied. Each variant maps to one Kubernetes `Status`; use
/// [`PatchError::code`], [`PatchError::reason`] and [`PatchError::status_message`] to build it.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch document could not be decoded (not JSON, wrong shape, bad directive format).
    /// 400 BadRequest.
    #[error("{0}")]
    Malformed(String),
    /// A JSON patch `test` operation failed. 422 Invalid.
    #[error("{0}")]
    TestFailed(String),
    /// The patch decodes but cannot be applied, or produces something that is not an object.
    /// 422 Invalid.
    #[error("{0}")]
    Invalid(String),
    /// The patch type is not handled here (server-side apply goes through
    /// [`crate::apply`]). 415 UnsupportedMediaType.
    #[error("{0}")]
    Unsupported(String),
}

/// Status message kube-apiserver uses for 422s built by `NewGenericServerResponse`
/// (apimachinery pkg/api/errors/errors.go).
pub const GENERIC_422_MESSAGE: &str =
    "the server rejected our request due to an error in our request";

impl PatchError {
    /// HTTP status code for the Kubernetes `Status`.
    pub fn code(&self) -> u16 {
        match self {
            PatchError::Malformed(_) => 400,
            PatchError::TestFailed(_) | PatchError::Invalid(_) => 422,
            PatchError::Unsupported(_) => 415,
        }
    }

    /// `Status.reason` (apimachinery pkg/apis/meta/v1/types.go `StatusReason*`).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::Malformed(_) => "BadRequest",
            PatchError::TestFailed(_) | PatchError::Invalid(_) => "Invalid",
            PatchError::Unsupported(_) => "UnsupportedMediaType",
        }
    }

    /// `Status.message` as kube-apiserver would write it. 422s from patch application use the
    /// generic message (the apiserver drops the detail); everything else carries the detail.
    pub fn status_message(&self) -> String {
        match self {
            PatchError::TestFailed(_) | PatchError::Invalid(_) => GENERIC_422_MESSAGE.to_string(),
            PatchError::Malformed(m) | PatchError::Unsupported(m) => m.clone(),
        }
    }

    /// The detailed message (same as `Display`).
    pub fn detail(&self) -> &str {
        match self {
            PatchError::Malformed(m)
            | PatchError::TestFailed(m)
            | PatchError::Invalid(m)
            | PatchError::Unsupported(m) => m,
        }
    }
}

/// Go's name for a JSON value's type in `json: cannot unmarshal X into ...` messages.
pub(crate) fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
