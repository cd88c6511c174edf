//! [`Provider`], what every cloud implements, and [`AnyCloud`], the one provider of the
//! process behind a trait object.
//!
//! Exists so the controllers and `run` stay free of any particular cloud: the
//! `--cloud-provider` factory ([`super::ProviderFactory`]) hands back an [`AnyCloud`],
//! which forwards [`Instances`], [`LoadBalancer`] and [`Routes`] to whichever provider it
//! holds. Those traits return `impl Future`, which a trait object cannot, so `AnyCloud`
//! holds a private object-safe twin of [`Provider`] whose methods box their futures
//! (implemented once, for every [`Provider`]). One provider lives per process, so the
//! boxing costs nothing that matters.

use std::future::Future;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::cloud::{
    Capabilities, CloudError, InstanceMetadata, Instances, LbError, LoadBalancer, Route, Routes,
};

/// A cloud as the CCM drives it: instances, load balancers and routes (a provider without
/// one of them answers its calls with an error naming the capability and says so in
/// [`Provider::capabilities`]), plus upstream's `cloudprovider.Interface` hooks.
pub trait Provider: Instances + LoadBalancer + Routes + std::fmt::Debug {
    /// `cloudprovider.Interface.Initialize`: the provider gets the Kubernetes client, once
    /// (OpenStack records load-balancer IDs on Services with it, vSphere reads the Secret
    /// its config may name for the vCenter credentials).
    fn initialize(&self, client: kube::Client);

    /// Probes route support (only called when the route controller would start, so that
    /// `--configure-cloud-routes=false` makes no route calls at all). Returns why routes
    /// are unsupported, if they are, for the startup log.
    fn detect_routes(&mut self) -> impl Future<Output = Option<String>> + Send;

    /// Which optional interfaces this cloud supports.
    fn capabilities(&self) -> Capabilities;
}

/// The provider picked by `--cloud-provider`, whichever it is. One lives per process,
/// behind an `Arc`.
#[derive(Debug)]
pub struct AnyCloud(Box<dyn DynProvider>);

impl AnyCloud {
    /// Wraps a provider (what each cloud's factory returns).
    pub fn new(provider: impl Provider) -> Self {
        Self(Box::new(provider))
    }

    /// [`Provider::initialize`] of the provider inside.
    pub fn initialize(&self, client: &kube::Client) {
        self.0.initialize(client.clone())
    }

    /// [`Provider::detect_routes`] of the provider inside.
    pub async fn detect_routes(&mut self) -> Option<String> {
        self.0.detect_routes().await
    }

    /// [`Provider::capabilities`] of the provider inside.
    pub fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
}

/// [`Provider`] with boxed futures, so it can be a trait object.
trait DynProvider: Send + Sync + std::fmt::Debug {
    fn initialize(&self, client: kube::Client);
    fn detect_routes(&mut self) -> BoxFuture<'_, Option<String>>;
    fn capabilities(&self) -> Capabilities;
    fn instance_exists<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, Result<bool, CloudError>>;
    fn instance_shutdown<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, Result<bool, CloudError>>;
    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
    ) -> BoxFuture<'a, Result<Option<InstanceMetadata>, CloudError>>;
    fn get_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, Result<Option<LoadBalancerStatus>, LbError>>;
    fn ensure_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Node],
    ) -> BoxFuture<'a, Result<LoadBalancerStatus, LbError>>;
    fn update_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Node],
    ) -> BoxFuture<'a, Result<(), LbError>>;
    fn ensure_load_balancer_deleted<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, Result<(), LbError>>;
    fn list_routes<'a>(&'a self, cluster: &'a str)
    -> BoxFuture<'a, Result<Vec<Route>, CloudError>>;
    fn create_route<'a>(
        &'a self,
        cluster: &'a str,
        name_hint: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, Result<(), CloudError>>;
    fn delete_route<'a>(
        &'a self,
        cluster: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, Result<(), CloudError>>;
}

impl<P: Provider> DynProvider for P {
    fn initialize(&self, client: kube::Client) {
        Provider::initialize(self, client)
    }

    fn detect_routes(&mut self) -> BoxFuture<'_, Option<String>> {
        Box::pin(Provider::detect_routes(self))
    }

    fn capabilities(&self) -> Capabilities {
        Provider::capabilities(self)
    }

    fn instance_exists<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, Result<bool, CloudError>> {
        Box::pin(Instances::instance_exists(self, node))
    }

    fn instance_shutdown<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, Result<bool, CloudError>> {
        Box::pin(Instances::instance_shutdown(self, node))
    }

    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
    ) -> BoxFuture<'a, Result<Option<InstanceMetadata>, CloudError>> {
        Box::pin(Instances::instance_metadata(self, node))
    }

    fn get_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, Result<Option<LoadBalancerStatus>, LbError>> {
        Box::pin(LoadBalancer::get_load_balancer(self, cluster, service))
    }

    fn ensure_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Node],
    ) -> BoxFuture<'a, Result<LoadBalancerStatus, LbError>> {
        Box::pin(LoadBalancer::ensure_load_balancer(
            self, cluster, service, nodes,
        ))
    }

    fn update_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Node],
    ) -> BoxFuture<'a, Result<(), LbError>> {
        Box::pin(LoadBalancer::update_load_balancer(
            self, cluster, service, nodes,
        ))
    }

    fn ensure_load_balancer_deleted<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, Result<(), LbError>> {
        Box::pin(LoadBalancer::ensure_load_balancer_deleted(
            self, cluster, service,
        ))
    }

    fn list_routes<'a>(
        &'a self,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Route>, CloudError>> {
        Box::pin(Routes::list_routes(self, cluster))
    }

    fn create_route<'a>(
        &'a self,
        cluster: &'a str,
        name_hint: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(Routes::create_route(self, cluster, name_hint, route))
    }

    fn delete_route<'a>(
        &'a self,
        cluster: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(Routes::delete_route(self, cluster, route))
    }
}

impl Instances for AnyCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.0.instance_exists(node).await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.0.instance_shutdown(node).await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        self.0.instance_metadata(node).await
    }
}

impl LoadBalancer for AnyCloud {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        self.0.get_load_balancer(cluster, service).await
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        self.0.ensure_load_balancer(cluster, service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        self.0.update_load_balancer(cluster, service, nodes).await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        self.0.ensure_load_balancer_deleted(cluster, service).await
    }
}

impl Routes for AnyCloud {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        self.0.list_routes(cluster).await
    }

    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.0.create_route(cluster, name_hint, route).await
    }

    async fn delete_route(&self, cluster: &str, route: &Route) -> Result<(), CloudError> {
        self.0.delete_route(cluster, route).await
    }
}
