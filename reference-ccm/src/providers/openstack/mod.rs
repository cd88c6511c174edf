//! The OpenStack provider: `cloud.conf`, Keystone/Nova/Neutron/Octavia client,
//! `InstancesV2`, `LoadBalancer` (Octavia) and `Routes` (Neutron router extra routes).
//!
//! Exists as the first provider of the reference CCM; it talks HTTP to whatever the
//! `cloud.conf` points at (a real cloud or the harness's mock) exactly like
//! `kubernetes/cloud-provider-openstack` does for node initialization.

pub mod client;
pub mod config;
pub mod instances;
pub mod loadbalancer;
pub mod metrics;
pub mod routes;

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Node;

use super::{AnyCloud, KubeClient, NewProvider, Provider, ProviderFactory};
use crate::cloud::{Capabilities, CloudError, InstanceMetadata, Instances};
use crate::options::Options;
use client::{ClientError, OpenStackClient, Service};
use config::CloudConfig;
use instances::{
    FlavorEnvelope, Lookup, PROVIDER_NAME, PortList, Server, ServerEnvelope, ServerList,
    is_valid_label_value, lookup_for, node_addresses, quote_meta,
};

/// Startup failures of the provider.
#[derive(Debug, thiserror::Error)]
pub enum OpenStackError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// The OpenStack cloud: one authenticated client plus the parsed config.
#[derive(Debug)]
pub struct OpenStack {
    client: OpenStackClient,
    config: CloudConfig,
    /// Flavor ID -> instance type; flavors are immutable in Nova, so this never goes stale.
    flavor_names: Mutex<HashMap<String, String>>,
    /// `OS_CCM_REGIONAL=true` puts the region into providerIDs, as upstream.
    regional: bool,
    /// How long to wait for Octavia to finish a change.
    lb_poll: loadbalancer::poll::PollSchedule,
    /// Whether Octavia is in the catalog (and `[LoadBalancer] enabled`).
    load_balancer_supported: bool,
    /// Extra-route API of `[Route] router-id`, once [`OpenStack::detect_routes`] found it.
    routes: Option<routes::api::RouteApi>,
    /// Why optional features are unsupported, for the startup log.
    notes: Vec<String>,
    /// The Kubernetes client handed over by [`OpenStack::initialize`]: the load balancer
    /// records its Octavia ID on the Service and warns with Events, as upstream's
    /// `Initialize` gives cloud-provider-openstack its `kclient` and event recorder
    /// (`pkg/openstack/openstack.go`).
    kube: KubeClient,
}

impl From<ClientError> for CloudError {
    fn from(e: ClientError) -> Self {
        CloudError::Other(e.to_string())
    }
}

impl OpenStack {
    /// Reads `cloud.conf`, authenticates, resolves endpoints. Returns config warnings
    /// for the caller to log once logging is up.
    pub async fn new(cloud_config_path: &str) -> Result<(Self, Vec<String>), OpenStackError> {
        let (config, mut warnings) = CloudConfig::load(cloud_config_path)?;
        let cloud = Self::from_config(config).await?;
        warnings.extend(cloud.notes.iter().cloned());
        Ok((cloud, warnings))
    }

    /// Authenticates with an already parsed config.
    pub async fn from_config(config: CloudConfig) -> Result<Self, OpenStackError> {
        let client = OpenStackClient::connect(&config.global).await?;
        let regional = std::env::var("OS_CCM_REGIONAL").is_ok_and(|v| v == "true");
        let mut notes = Vec::new();
        let load_balancer_supported =
            config.load_balancer.enabled && client.has_endpoint(Service::LoadBalancer).await;
        if !load_balancer_supported {
            notes.push(
                "load balancers unsupported: [LoadBalancer] enabled=false or no load-balancer endpoint in the catalog"
                    .to_owned(),
            );
        }
        Ok(Self {
            client,
            config,
            flavor_names: Mutex::new(HashMap::new()),
            regional,
            lb_poll: loadbalancer::poll::PollSchedule::from_env(),
            load_balancer_supported,
            routes: None,
            notes,
            kube: KubeClient::default(),
        })
    }

    /// Overrides the Octavia wait schedule (tests).
    pub fn set_lb_poll(&mut self, schedule: loadbalancer::poll::PollSchedule) {
        self.lb_poll = schedule;
    }

    /// The server behind a node; `InstanceNotFound` on 404 or an empty name lookup.
    pub async fn get_server(&self, node: &Node) -> Result<Server, CloudError> {
        match lookup_for(node).map_err(CloudError::Other)? {
            Lookup::ById(id) => {
                match self
                    .client
                    .get_json::<ServerEnvelope>(Service::Compute, &format!("/servers/{id}"), &[])
                    .await
                {
                    Ok(env) => Ok(env.server),
                    Err(ClientError::NotFound { .. }) => Err(CloudError::InstanceNotFound),
                    Err(e) => Err(e.into()),
                }
            }
            Lookup::ByName(name) => {
                let pattern = format!("^{}$", quote_meta(&name));
                let list: ServerList = self
                    .client
                    .get_json(
                        Service::Compute,
                        "/servers/detail",
                        &[("name", pattern.as_str())],
                    )
                    .await?;
                let mut servers = list.servers;
                match servers.len() {
                    0 => Err(CloudError::InstanceNotFound),
                    1 => Ok(servers.remove(0)),
                    n => Err(CloudError::Other(format!(
                        "found {n} servers named {name:?}, expected one"
                    ))),
                }
            }
        }
    }

    /// `original_name` if it is a valid label value, else the flavor's name, else its ID.
    async fn instance_type(&self, server: &Server) -> Result<String, CloudError> {
        if let Some(name) = server
            .flavor
            .original_name
            .as_deref()
            .filter(|n| is_valid_label_value(n))
        {
            return Ok(name.to_owned());
        }
        let Some(id) = server.flavor.id.clone().filter(|id| !id.is_empty()) else {
            return Err(CloudError::Other(
                "flavor original_name/id not found".to_owned(),
            ));
        };
        if let Some(name) = self.cached_flavor(&id) {
            return Ok(name);
        }
        let flavor: FlavorEnvelope = self
            .client
            .get_json(Service::Compute, &format!("/flavors/{id}"), &[])
            .await?;
        let name = if is_valid_label_value(&flavor.flavor.name) {
            flavor.flavor.name
        } else {
            id.clone()
        };
        if let Ok(mut cache) = self.flavor_names.lock() {
            cache.insert(id, name.clone());
        }
        Ok(name)
    }

    fn cached_flavor(&self, id: &str) -> Option<String> {
        self.flavor_names
            .lock()
            .ok()
            .and_then(|c| c.get(id).cloned())
    }
}

/// The OpenStack provider in the registry ([`crate::providers::registry::PROVIDERS`]).
pub static FACTORY: ProviderFactory = ProviderFactory {
    name: PROVIDER_NAME,
    display_name: "OpenStack",
    accepts_node_labels: false,
    new: new_provider,
    render_metrics: Some(metrics::render),
};

/// [`ProviderFactory::new`]: the hidden `--testing-lb-name-scheme` (OpenStack's alone),
/// then [`OpenStack::new`] on `--cloud-config`.
fn new_provider(opts: &Options) -> NewProvider<'_> {
    loadbalancer::naming::use_name_scheme(opts.testing_lb_name_scheme);
    Box::pin(async move {
        let (cloud, warnings) = OpenStack::new(&opts.cloud_config).await?;
        Ok((AnyCloud::new(cloud), warnings))
    })
}

impl Provider for OpenStack {
    /// `cloudprovider.Interface.Initialize`: hands the provider a Kubernetes client. Only
    /// the first call counts; without one, load balancers work but their IDs are not
    /// recorded on Services.
    fn initialize(&self, client: kube::Client) {
        let _ = self.kube.0.set(client);
    }

    /// Checks whether routes can be managed (`[Route] router-id` and a Neutron extra-route
    /// extension). Called only when the route controller would start, so that
    /// `--configure-cloud-routes=false` makes no route calls at all (upstream asks
    /// `cloud.Routes()` only then). Returns why routes are unsupported, if they are.
    async fn detect_routes(&mut self) -> Option<String> {
        if self.config.route.router_id.is_empty() {
            return Some("routes unsupported: no [Route] router-id".to_owned());
        }
        match routes::api::RouteApi::detect(&self.client).await {
            Ok(Some(api)) => {
                self.routes = Some(api);
                None
            }
            Ok(None) => Some(
                "routes unsupported: Neutron lists neither extraroute nor extraroute-atomic"
                    .to_owned(),
            ),
            Err(e) => Some(format!(
                "routes unsupported: listing Neutron extensions: {e}"
            )),
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            load_balancer: self.load_balancer_supported,
            routes: self.routes.is_some(),
        }
    }
}

impl Instances for OpenStack {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.get_server(node).await {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.get_server(node).await?.status == "SHUTOFF")
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let server = self.get_server(node).await?;
        let instance_type = self.instance_type(&server).await?;
        let ports: PortList = self
            .client
            .get_json(
                Service::Network,
                "/ports",
                &[("device_id", server.id.as_str())],
            )
            .await?;
        let region = self.config.global.region.clone();
        let provider_id = if self.regional {
            format!("{PROVIDER_NAME}://{region}/{}", server.id)
        } else {
            format!("{PROVIDER_NAME}:///{}", server.id)
        };
        Ok(Some(InstanceMetadata {
            provider_id,
            instance_type,
            node_addresses: node_addresses(&server, &ports.ports, &self.config.networking),
            zone: server.availability_zone.clone().unwrap_or_default(),
            region,
            additional_labels: Default::default(),
        }))
    }
}
