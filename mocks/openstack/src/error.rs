//! Why an admin operation was refused ([`AdminError`], public as
//! `mock_openstack::AdminError`). Its own leaf so the address pools (`pool.rs`) can fail
//! with it without importing `state.rs`, which holds the pools.

/// Why an admin operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("no server with id {0:?}")]
    NotFound(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("address {0} is already in use")]
    AddressInUse(String),
    #[error("no free address left in {0}")]
    Exhausted(&'static str),
    /// The server's state does not allow the action (Nova's 409 `conflictingRequest`).
    #[error("{0}")]
    InvalidState(String),
}
