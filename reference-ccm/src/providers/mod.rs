//! Cloud providers the reference CCM knows, one module each, and [`AnyCloud`], the one
//! type the controllers are started with whichever `--cloud-provider` was chosen.
//!
//! Exists to keep every cloud's wire protocol and config format out of the
//! controllers, which only see [`crate::cloud::Instances`], [`crate::cloud::LoadBalancer`]
//! and [`crate::cloud::Routes`].

pub mod aws;
pub mod openstack;
pub mod quirks;
pub mod vsphere;
pub mod xml;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::cloud::{
    Capabilities, CloudError, InstanceMetadata, Instances, LbError, LoadBalancer, Route, Routes,
};

/// The Kubernetes client a provider gets in [`AnyCloud::initialize`], once; `Debug` by
/// hand because `kube::Client` has none.
#[derive(Default)]
pub struct KubeClient(std::sync::OnceLock<kube::Client>);

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "KubeClient(set)"
        } else {
            "KubeClient(unset)"
        })
    }
}

/// The provider picked by `--cloud-provider`. One lives per process, behind an `Arc`,
/// so the size difference between variants does not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum AnyCloud {
    OpenStack(openstack::OpenStack),
    Aws(aws::Aws),
    Vsphere(vsphere::Vsphere),
}

impl AnyCloud {
    /// `cloudprovider.Interface.Initialize`: the provider gets the Kubernetes client
    /// (OpenStack records load-balancer IDs on Services with it, vSphere reads the Secret
    /// its config may name for the vCenter credentials).
    pub fn initialize(&self, client: &kube::Client) {
        match self {
            AnyCloud::OpenStack(c) => c.initialize(client.clone()),
            AnyCloud::Vsphere(c) => c.initialize(client.clone()),
            AnyCloud::Aws(_) => {}
        }
    }

    /// Probes route support (only called when the route controller would start).
    pub async fn detect_routes(&mut self) -> Option<String> {
        match self {
            AnyCloud::OpenStack(c) => c.detect_routes().await,
            AnyCloud::Aws(_) | AnyCloud::Vsphere(_) => None,
        }
    }

    pub fn capabilities(&self) -> Capabilities {
        match self {
            AnyCloud::OpenStack(c) => c.capabilities(),
            AnyCloud::Aws(c) => c.capabilities(),
            AnyCloud::Vsphere(c) => c.capabilities(),
        }
    }
}

impl Instances for AnyCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.instance_exists(node).await,
            AnyCloud::Aws(c) => c.instance_exists(node).await,
            AnyCloud::Vsphere(c) => c.instance_exists(node).await,
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.instance_shutdown(node).await,
            AnyCloud::Aws(c) => c.instance_shutdown(node).await,
            AnyCloud::Vsphere(c) => c.instance_shutdown(node).await,
        }
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.instance_metadata(node).await,
            AnyCloud::Aws(c) => c.instance_metadata(node).await,
            AnyCloud::Vsphere(c) => c.instance_metadata(node).await,
        }
    }
}

impl LoadBalancer for AnyCloud {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        match self {
            AnyCloud::OpenStack(c) => c.get_load_balancer(cluster, service).await,
            AnyCloud::Aws(c) => c.get_load_balancer(cluster, service).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_lb()),
        }
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        match self {
            AnyCloud::OpenStack(c) => c.ensure_load_balancer(cluster, service, nodes).await,
            AnyCloud::Aws(c) => c.ensure_load_balancer(cluster, service, nodes).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_lb()),
        }
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        match self {
            AnyCloud::OpenStack(c) => c.update_load_balancer(cluster, service, nodes).await,
            AnyCloud::Aws(c) => c.update_load_balancer(cluster, service, nodes).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_lb()),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        match self {
            AnyCloud::OpenStack(c) => c.ensure_load_balancer_deleted(cluster, service).await,
            AnyCloud::Aws(c) => c.ensure_load_balancer_deleted(cluster, service).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_lb()),
        }
    }
}

impl Routes for AnyCloud {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.list_routes(cluster).await,
            AnyCloud::Aws(c) => c.list_routes(cluster).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_routes()),
        }
    }

    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.create_route(cluster, name_hint, route).await,
            AnyCloud::Aws(c) => c.create_route(cluster, name_hint, route).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_routes()),
        }
    }

    async fn delete_route(&self, cluster: &str, route: &Route) -> Result<(), CloudError> {
        match self {
            AnyCloud::OpenStack(c) => c.delete_route(cluster, route).await,
            AnyCloud::Aws(c) => c.delete_route(cluster, route).await,
            AnyCloud::Vsphere(_) => Err(vsphere_no_routes()),
        }
    }
}

/// vSphere has no load balancer; the service controller is never started for it
/// ([`vsphere::Vsphere::capabilities`]), so this only answers a caller that ignored that.
fn vsphere_no_lb() -> LbError {
    LbError::Other("provider vsphere has no load balancer (capability)".to_owned())
}

/// vSphere has no routes; see [`vsphere_no_lb`].
fn vsphere_no_routes() -> CloudError {
    CloudError::Other("provider vsphere has no routes (capability)".to_owned())
}
