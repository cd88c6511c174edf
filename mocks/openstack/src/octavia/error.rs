//! Why an Octavia request was refused ([`LbError`]). Its own leaf so the attribute tables
//! (`fields`), which `state` checks bodies against, can refuse a body without importing
//! `state`.

/// Why an Octavia request was refused; rendered as a WSME fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LbError {
    /// `octavia/common/exceptions.py` NotFound: "%(resource)s %(id)s not found."
    #[error("{resource} {id} not found.")]
    NotFound { resource: &'static str, id: String },
    /// `octavia/common/exceptions.py` ImmutableObject.
    #[error("{resource} {id} is immutable and cannot be updated.")]
    Immutable { resource: &'static str, id: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
}

impl LbError {
    pub fn status(&self) -> u16 {
        match self {
            LbError::NotFound { .. } => 404,
            LbError::Immutable { .. } | LbError::Conflict(_) => 409,
            LbError::Invalid(_) => 400,
        }
    }
}

pub(super) fn invalid(message: impl Into<String>) -> LbError {
    LbError::Invalid(message.into())
}
