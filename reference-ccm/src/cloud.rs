//! The provider interface the controllers call, shaped like upstream `InstancesV2`
//! (`kubernetes/cloud-provider` `cloud.go`).
//!
//! Exists so controllers never know which cloud they talk to: each provider under
//! `providers/` implements [`Instances`] (and, where supported, [`LoadBalancer`] and
//! [`Routes`]); the controllers are generic over them.

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
    /// `cloudprovider.NotImplemented`: the provider does not offer this call (v1
    /// `InstanceID` of a provider without provider IDs, upstream `cloud.go`).
    #[error("unimplemented")]
    NotImplemented,
    /// Anything else (transport, HTTP status, decoding, ambiguity); retried by callers.
    #[error("{0}")]
    Other(String),
}

/// Which of upstream's instance interfaces the controllers should drive. Upstream's
/// cloud-node controller uses `InstancesV2()` when the provider offers it and falls back to
/// the v1 `Instances()` (+ `Zones()`) by-providerID-then-by-name calls otherwise
/// (kubernetes/cloud-provider controllers/node/node_controller.go `getInstanceMetadata`).
/// Our providers all speak v2; v1 exists so the controller's fallback logic is there and
/// testable (the hidden `--testing-provider-quirk=v1-instances`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstancesApi {
    V2,
    /// v1 `Instances`; `zones` is whether `Zones()` is supported too.
    V1 {
        zones: bool,
    },
}

/// `cloudprovider.Zone`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Zone {
    pub failure_domain: String,
    pub region: String,
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

    /// Which interface the controllers use; [`InstancesApi::V2`] unless a provider only
    /// implements the v1 calls below.
    fn instances_api(&self) -> InstancesApi {
        InstancesApi::V2
    }

    // v1 `Instances` / `Zones` (cloud.go), only called under [`InstancesApi::V1`]. The
    // by-name calls take the whole Node, without its providerID, because some providers
    // identify an instance by more than the name (vSphere: the system UUID).

    /// `cloudprovider.GetInstanceProviderID`: `ProviderName()://InstanceID(name)`.
    fn instance_provider_id(
        &self,
        _node: &Node,
    ) -> impl Future<Output = Result<String, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `NodeAddressesByProviderID`.
    fn node_addresses_by_provider_id(
        &self,
        _provider_id: &str,
    ) -> impl Future<Output = Result<Vec<NodeAddress>, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `NodeAddresses(name)`.
    fn node_addresses_by_name(
        &self,
        _node: &Node,
    ) -> impl Future<Output = Result<Vec<NodeAddress>, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `InstanceTypeByProviderID`.
    fn instance_type_by_provider_id(
        &self,
        _provider_id: &str,
    ) -> impl Future<Output = Result<String, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `InstanceType(name)`.
    fn instance_type_by_name(
        &self,
        _node: &Node,
    ) -> impl Future<Output = Result<String, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `Zones.GetZoneByProviderID`.
    fn zone_by_provider_id(
        &self,
        _provider_id: &str,
    ) -> impl Future<Output = Result<Zone, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
    /// `Zones.GetZoneByNodeName`.
    fn zone_by_name(&self, _node: &Node) -> impl Future<Output = Result<Zone, CloudError>> + Send {
        async { Err(CloudError::NotImplemented) }
    }
}

// ---------------------------------------------------------------------------------------
// Load balancers and routes (kubernetes/cloud-provider cloud.go `LoadBalancer`, `Routes`).
// ---------------------------------------------------------------------------------------

use std::time::Duration;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

/// What a provider implements besides instances; controllers that need a missing
/// capability are not started (upstream: `cloud.LoadBalancer()` / `cloud.Routes()` ok=false).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub load_balancer: bool,
    pub routes: bool,
}

/// Errors of [`LoadBalancer`] calls.
#[derive(Debug, thiserror::Error)]
pub enum LbError {
    /// `cloudprovider.ImplementedElsewhere`: another controller owns this load balancer.
    #[error("implemented elsewhere")]
    ImplementedElsewhere,
    /// `api.RetryError`: retry after a fixed delay instead of the exponential backoff.
    #[error("{message} (retry after {retry_after:?})")]
    Retry {
        message: String,
        retry_after: Duration,
    },
    /// Anything else; retried with the per-service exponential backoff.
    #[error("{0}")]
    Other(String),
}

/// `cloudprovider.LoadBalancer`. `cluster` is `--cluster-name`.
pub trait LoadBalancer: Send + Sync + 'static {
    /// The current status if the load balancer exists; `Ok(None)` when it does not
    /// (never an error for "not found": cloud-provider-openstack PR#1829).
    fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> impl Future<Output = Result<Option<LoadBalancerStatus>, LbError>> + Send;
    /// Creates or updates the load balancer so it matches `service` with `nodes` as backends.
    fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> impl Future<Output = Result<LoadBalancerStatus, LbError>> + Send;
    /// Updates only the backends (node set) of an existing load balancer.
    fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> impl Future<Output = Result<(), LbError>> + Send;
    /// Deletes the load balancer; success when it is gone (also when it never existed).
    fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> impl Future<Output = Result<(), LbError>> + Send;
}

/// `cloudprovider.Route`: traffic for `destination_cidr` goes to `target_node`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Route {
    pub name: String,
    /// Node name; empty in `list_routes` answers when the provider only knows the next
    /// hop (the controller resolves it from `target_node_addresses`).
    pub target_node: String,
    /// The node's addresses (create) or the next hop (list).
    pub target_node_addresses: Vec<NodeAddress>,
    pub destination_cidr: String,
    /// A route whose target is gone; always deleted when inside the cluster CIDR.
    pub blackhole: bool,
}

/// `cloudprovider.Routes`.
pub trait Routes: Send + Sync + 'static {
    fn list_routes(
        &self,
        cluster: &str,
    ) -> impl Future<Output = Result<Vec<Route>, CloudError>> + Send;
    /// `name_hint` is the node UID, as upstream passes it.
    fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;
    fn delete_route(
        &self,
        cluster: &str,
        route: &Route,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;
}
