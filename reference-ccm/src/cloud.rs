//! The provider interface the controllers call, shaped like upstream `InstancesV2`
//! (`kubernetes/cloud-provider` `cloud.go`).
//!
//! Exists so controllers never know which cloud they talk to: each provider under
//! `providers/` implements [`Instances`]; the controllers are generic over it.

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

/// What the cloud knows about the instance behind a Node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceMetadata {
    /// `<provider>://<id>`; empty means "the cloud does not set one".
    pub provider_id: String,
    pub instance_type: String,
    pub node_addresses: Vec<NodeAddress>,
    pub zone: String,
    pub region: String,
    pub additional_labels: BTreeMap<String, String>,
}

/// Errors a provider reports to the controllers.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// `cloudprovider.InstanceNotFound`: the instance does not exist.
    #[error("instance not found")]
    InstanceNotFound,
    /// Anything else (transport, HTTP status, decoding, ambiguity); retried by callers.
    #[error("{0}")]
    Other(String),
}

/// `InstancesV2`: look up by `spec.providerID` first, else by node name.
pub trait Instances: Send + Sync + 'static {
    /// Whether the instance exists. A stopped instance still exists; a missing one is
    /// `Ok(false)`, never `Err(InstanceNotFound)` (k/k#139301).
    fn instance_exists(&self, node: &Node)
    -> impl Future<Output = Result<bool, CloudError>> + Send;
    /// Whether the instance is shut down (but still exists).
    fn instance_shutdown(
        &self,
        node: &Node,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send;
    /// The metadata used to initialize the node; `Ok(None)` is "nil metadata, nil error".
    fn instance_metadata(
        &self,
        node: &Node,
    ) -> impl Future<Output = Result<Option<InstanceMetadata>, CloudError>> + Send;
}
