//! Cloud providers the reference CCM knows, one module each, and [`AnyCloud`], the one
//! type the controllers are started with whichever `--cloud-provider` was chosen. Every
//! provider has the same methods (what it lacks answers an error naming the capability),
//! so a new provider is a module here, one variant and one arm of `each_cloud!`.
//!
//! Exists to keep every cloud's wire protocol and config format out of the
//! controllers, which only see [`crate::cloud::Instances`], [`crate::cloud::LoadBalancer`]
//! and [`crate::cloud::Routes`].

pub mod aws;
pub mod azure;
pub mod gce;
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
    Azure(azure::Azure),
    Gce(gce::Gce),
}

/// `$body` with `$c` bound to the provider inside `$cloud`, whichever it is: every provider
/// implements the same methods, so adding one is one arm here.
macro_rules! each_cloud {
    ($cloud:expr, $c:ident => $body:expr) => {
        match $cloud {
            AnyCloud::OpenStack($c) => $body,
            AnyCloud::Aws($c) => $body,
            AnyCloud::Vsphere($c) => $body,
            AnyCloud::Azure($c) => $body,
            AnyCloud::Gce($c) => $body,
        }
    };
}

impl AnyCloud {
    /// `cloudprovider.Interface.Initialize`: the provider gets the Kubernetes client
    /// (OpenStack records load-balancer IDs on Services with it, vSphere reads the Secret
    /// its config may name for the vCenter credentials).
    pub fn initialize(&self, client: &kube::Client) {
        each_cloud!(self, c => c.initialize(client.clone()))
    }

    /// Probes route support (only called when the route controller would start).
    pub async fn detect_routes(&mut self) -> Option<String> {
        each_cloud!(self, c => c.detect_routes().await)
    }

    pub fn capabilities(&self) -> Capabilities {
        each_cloud!(self, c => c.capabilities())
    }
}

impl Instances for AnyCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        each_cloud!(self, c => c.instance_exists(node).await)
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        each_cloud!(self, c => c.instance_shutdown(node).await)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        each_cloud!(self, c => c.instance_metadata(node).await)
    }
}

impl LoadBalancer for AnyCloud {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        each_cloud!(self, c => c.get_load_balancer(cluster, service).await)
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        each_cloud!(self, c => c.ensure_load_balancer(cluster, service, nodes).await)
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        each_cloud!(self, c => c.update_load_balancer(cluster, service, nodes).await)
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        each_cloud!(self, c => c.ensure_load_balancer_deleted(cluster, service).await)
    }
}

impl Routes for AnyCloud {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        each_cloud!(self, c => c.list_routes(cluster).await)
    }

    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        each_cloud!(self, c => c.create_route(cluster, name_hint, route).await)
    }

    async fn delete_route(&self, cluster: &str, route: &Route) -> Result<(), CloudError> {
        each_cloud!(self, c => c.delete_route(cluster, route).await)
    }
}
