//! The GCE provider (`--cloud-provider=gce`): upstream's `gce.conf`, a Compute v1
//! client, `InstancesV2`, the external (target-pool) `LoadBalancer` and `Routes`.
//!
//! Exists so every suite also runs against GCE semantics (the harness's mock Compute +
//! metadata server, or a real project), behaving like kubernetes/cloud-provider-gcp
//! `providers/gce` (each module cites the upstream file it follows). Capabilities are
//! upstream's (`gce.go`: `LoadBalancer()`, `Routes()`, `InstancesV2()` and `Zones()` all
//! answer true). At start the provider reads the metadata server only for what
//! `gce.conf` lacks (project, zone, network) and, with `multizone`/`regional`, lists
//! the zones of the region (`CreateGCECloud` → `refreshManagedZones`); a numeric
//! project id is turned into the project's name with `GET projects/<n>`
//! (`tryConvertToProjectNames`). No token is fetched until the first Compute call.

pub mod client;
pub mod clusterid;
pub mod config;
pub mod instances;
pub mod loadbalancer;
pub mod routes;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use super::{AnyCloud, KubeClient, NewProvider, Provider, ProviderFactory};
use crate::cloud::{Capabilities, CloudError, InstanceMetadata, Instances};
use crate::options::Options;
use client::{ComputeClient, ComputeError, MetadataClient};
use config::{ConfigFile, GceConfig};
use instances::{
    PROVIDER_NAME, canonical_name, format_provider_id, provider_id_of, split_provider_id,
};

/// Startup failures of the provider.
#[derive(Debug, thiserror::Error)]
pub enum GceError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Compute(#[from] ComputeError),
    #[error("failed to refresh managed zones: no zone of region {0} listed")]
    NoZones(String),
}

impl From<ComputeError> for CloudError {
    fn from(e: ComputeError) -> Self {
        CloudError::Other(e.to_string())
    }
}

/// The GCE cloud.
#[derive(Debug)]
pub struct Gce {
    client: ComputeClient,
    config: GceConfig,
    /// Zones searched for instances by name (`managedZones`).
    managed_zones: Vec<String>,
    kube: KubeClient,
    /// The cluster id once read or created (`ClusterID`).
    cluster_id: tokio::sync::Mutex<Option<String>>,
    /// Upstream's `sharedResourceLock`: the shared node health check and its firewall
    /// are never deleted while another Service attaches them.
    shared_lock: tokio::sync::Mutex<()>,
    /// `GetNodeTags` cache: the node names last seen and the tags computed for them.
    node_tags: std::sync::Mutex<Option<(BTreeSet<String>, Vec<String>)>>,
}

impl Gce {
    /// Reads `gce.conf`, asks the metadata server (`GCE_METADATA_HOST`) for what it lacks
    /// and builds the client.
    pub async fn new(cloud_config_path: &str) -> Result<(Self, Vec<String>), GceError> {
        let (file, warnings) = ConfigFile::load(cloud_config_path)?;
        let metadata = MetadataClient::from_env()?;
        let config = file.resolve(&metadata).await?;
        let client = ComputeClient::new(&config.api_endpoint, &config.token, metadata)?;
        let cloud = Self::with_client(config, client).await?;
        Ok((cloud, warnings))
    }

    /// Builds the provider over an existing client (tests tune its retries).
    pub async fn with_client(
        mut config: GceConfig,
        client: ComputeClient,
    ) -> Result<Self, GceError> {
        if config.project_id.bytes().all(|b| b.is_ascii_digit()) {
            match client.get(&config.project_id).await {
                Ok(p) => {
                    if let Some(name) = p.get("name").and_then(Value::as_str) {
                        if config.network_project_id == config.project_id {
                            config.network_project_id = name.to_owned();
                        }
                        config.project_id = name.to_owned();
                    }
                }
                Err(e) => tracing::warn!(
                    project = %config.project_id,
                    "failed to retrieve the project's name: {e}"
                ),
            }
        }
        let managed_zones = if config.all_zones {
            let filter = format!("region eq .*/regions/{}", config.region);
            let zones = client
                .list(&format!("{}/zones", config.project_id), Some(&filter))
                .await?;
            let names: Vec<String> = zones
                .iter()
                .filter_map(|z| z.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            if names.is_empty() {
                return Err(GceError::NoZones(config.region.clone()));
            }
            names
        } else {
            vec![config.zone.clone()]
        };
        Ok(Self {
            client,
            config,
            managed_zones,
            kube: KubeClient::default(),
            cluster_id: Default::default(),
            shared_lock: Default::default(),
            node_tags: Default::default(),
        })
    }

    pub fn config(&self) -> &GceConfig {
        &self.config
    }

    pub fn client(&self) -> &ComputeClient {
        &self.client
    }

    pub fn managed_zones(&self) -> &[String] {
        &self.managed_zones
    }

    /// `projects/<p>/zones/<z>/instances/<n>` relative to the projects base.
    pub fn instance_path(&self, zone: &str, name: &str) -> String {
        format!(
            "{}/zones/{zone}/instances/{}",
            self.config.project_id,
            canonical_name(name)
        )
    }

    /// The full URL of an instance (`makeHostURL`).
    pub fn instance_url(&self, zone: &str, name: &str) -> String {
        self.client.url(&self.instance_path(zone, name))
    }

    /// The instance in `zone`; `None` on 404.
    pub async fn get_instance(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Option<Value>, ComputeError> {
        self.client.get_opt(&self.instance_path(zone, name)).await
    }

    /// `getInstanceByName`: the first managed zone that has it.
    pub async fn find_instance(&self, name: &str) -> Result<Option<(String, Value)>, ComputeError> {
        for zone in &self.managed_zones {
            if let Some(i) = self.get_instance(zone, name).await? {
                return Ok(Some((zone.clone(), i)));
            }
        }
        Ok(None)
    }

    /// The instance behind a node: by providerID, else by name. `Ok(None)` when gone.
    pub async fn instance_for(&self, node: &Node) -> Result<Option<(String, Value)>, CloudError> {
        match provider_id_of(node) {
            Some(pid) => {
                // Upstream uses the configured project unless projectFromNodeProviderID.
                let (_, zone, name) = split_provider_id(pid).map_err(CloudError::Other)?;
                Ok(self.get_instance(&zone, &name).await?.map(|i| (zone, i)))
            }
            None => {
                let name = node.metadata.name.clone().unwrap_or_default();
                Ok(self.find_instance(&name).await?)
            }
        }
    }
}

/// The GCE provider in the registry ([`crate::providers::registry::PROVIDERS`]).
pub static FACTORY: ProviderFactory = ProviderFactory {
    name: PROVIDER_NAME,
    display_name: "GCE",
    accepts_node_labels: false,
    new: new_provider,
    render_metrics: None,
};

/// [`ProviderFactory::new`]: [`Gce::new`] on `--cloud-config`.
fn new_provider(opts: &Options) -> NewProvider<'_> {
    Box::pin(async move {
        let (cloud, warnings) = Gce::new(&opts.cloud_config).await?;
        Ok((AnyCloud::new(cloud), warnings))
    })
}

impl Provider for Gce {
    /// `Initialize`: the client is kept for the cluster id ConfigMap
    /// (`kube-system/ingress-uid`); only the first call counts.
    fn initialize(&self, client: kube::Client) {
        let _ = self.kube.0.set(client);
    }

    /// Routes need only the network, which the config always resolves.
    async fn detect_routes(&mut self) -> Option<String> {
        None
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            load_balancer: true,
            routes: true,
        }
    }
}

impl Instances for Gce {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.instance_for(node).await?.is_some())
    }

    async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
        // gce_instances.go InstanceShutdown: cloudprovider.NotImplemented.
        Err(CloudError::NotImplemented)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let Some((zone, instance)) = self.instance_for(node).await? else {
            return Err(CloudError::InstanceNotFound);
        };
        let provider_id = match provider_id_of(node) {
            Some(p) => p.to_owned(),
            None => {
                let name = instance
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                format_provider_id(&self.config.project_id, &zone, name)
            }
        };
        let region = config::gce_region(&zone)
            .ok_or_else(|| CloudError::Other(format!("unexpected zone: {zone}")))?
            .to_owned();
        let prefer_ipv6 = self.config.stack_type.eq_ignore_ascii_case("IPV6");
        let node_addresses =
            instances::node_addresses(&instance, prefer_ipv6).map_err(CloudError::Other)?;
        Ok(Some(InstanceMetadata {
            provider_id,
            instance_type: instances::instance_type(&instance),
            node_addresses,
            zone,
            region,
            additional_labels: Default::default(),
        }))
    }
}

#[cfg(test)]
mod tests;
