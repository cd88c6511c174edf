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

/// TEST ONLY (`--testing-break=skip-lookup-before-create`, set once at startup): every
/// provider's EnsureLoadBalancer takes its create-or-update lookup as "not found".
static SKIP_LOOKUP_BEFORE_CREATE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Sets the process's `--testing-break=skip-lookup-before-create`; only the first call counts.
pub fn use_skip_lookup_before_create(skip: bool) {
    let _ = SKIP_LOOKUP_BEFORE_CREATE.set(skip);
}

/// Whether this process runs `--testing-break=skip-lookup-before-create`.
pub fn skip_lookup_before_create() -> bool {
    SKIP_LOOKUP_BEFORE_CREATE.get().copied().unwrap_or(false)
}

/// The one decision point of every provider's EnsureLoadBalancer: the existing load balancer
/// that `lookup` finds (update it) or `None` (create it). With `skip` (the TEST ONLY
/// `--testing-break=skip-lookup-before-create`, [`skip_lookup_before_create`]) the lookup
/// is not made and the answer is always "not found", so each ensure creates the load
/// balancer again. Lookups of the delete and get paths never come through here.
pub async fn lookup_before_create<T, E>(
    skip: bool,
    lookup: impl std::future::Future<Output = Result<Option<T>, E>>,
) -> Result<Option<T>, E> {
    if skip {
        return Ok(None);
    }
    lookup.await
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn lookup_before_create_answers_not_found_without_looking_only_when_skipping() {
        let looked = AtomicBool::new(false);
        let lookup = || async {
            looked.store(true, Ordering::SeqCst);
            Ok::<_, String>(Some("lb-1"))
        };
        assert_eq!(
            lookup_before_create(false, lookup()).await,
            Ok(Some("lb-1"))
        );
        assert!(looked.swap(false, Ordering::SeqCst));
        assert_eq!(lookup_before_create(true, lookup()).await, Ok(None));
        assert!(
            !looked.load(Ordering::SeqCst),
            "the lookup must not be made"
        );
        // A failing lookup is not made either: the break answers "not found".
        let failing = async { Err::<Option<u8>, _>("boom".to_owned()) };
        assert_eq!(lookup_before_create(true, failing).await, Ok(None));
        let failing = async { Err::<Option<u8>, _>("boom".to_owned()) };
        assert_eq!(
            lookup_before_create(false, failing).await,
            Err("boom".to_owned())
        );
        let absent = async { Ok::<Option<u8>, String>(None) };
        assert_eq!(lookup_before_create(false, absent).await, Ok(None));
    }
}
