//! ARM's asynchronous operations: a PUT or DELETE is answered at once with an
//! `Azure-AsyncOperation` URL (and, for a DELETE, a `Location` URL), and the client polls
//! it until `status` is terminal (azure-sdk-for-go `sdk/azcore/internal/pollers/async`,
//! `.../loc`; cloud-provider-azure `pkg/azclient` polls through them). How soon an
//! operation ends is a [`mock_cloud::Lifecycle`]: instant by default, slowed, failed or
//! held by a lifecycle mode from the admin API or a seed file.

use mock_cloud::{Lifecycle, Phase};
use serde_json::{Value, json};

/// What an operation does once it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Put,
    Delete,
}

/// One asynchronous operation.
#[derive(Debug, Clone)]
pub struct Operation {
    pub id: String,
    /// The store key of the resource it changes.
    pub key: String,
    pub kind: OpKind,
    pub lifecycle: Lifecycle,
    pub started: jiff::Timestamp,
    /// Settled phase, once applied to the resource.
    pub applied: Option<Phase>,
}

impl Operation {
    pub fn new(key: String, kind: OpKind, lifecycle: Lifecycle) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            key,
            kind,
            lifecycle,
            started: jiff::Timestamp::now(),
            applied: None,
        }
    }

    /// ARM's status word for a phase.
    pub fn status_word(phase: Phase) -> &'static str {
        match phase {
            Phase::Pending => "InProgress",
            Phase::Done => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    /// The operation status document (`GET …/operations/{id}`).
    pub fn status_body(&self, phase: Phase) -> Value {
        let mut body = json!({
            "name": self.id,
            "status": Self::status_word(phase),
            "startTime": self.started.to_string(),
        });
        if phase != Phase::Pending {
            body["endTime"] = Value::String(jiff::Timestamp::now().to_string());
        }
        if phase == Phase::Failed {
            body["error"] = json!({
                "code": "InternalServerError",
                "message": "The operation failed (lifecycle mode `error` of the mock)."
            });
        }
        body
    }
}
