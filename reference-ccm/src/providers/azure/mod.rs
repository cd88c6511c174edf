//! The Azure provider (`--cloud-provider=azure`): upstream's `azure.json`, an ARM client,
//! `InstancesV2`, `LoadBalancer` (one Standard load balancer per cluster, NIC-based backend
//! pool, NSG rules) and `Routes` (the configured route table), for `vmType: standard`.
//!
//! Exists so every suite also runs against Azure semantics (the harness's mock ARM, or a
//! real subscription), behaving like kubernetes-sigs/cloud-provider-azure
//! `pkg/provider` (each module cites the upstream file it follows). At start the
//! provider reads the `Microsoft.Compute` provider registration for the region's zones, as
//! upstream's zone repo does (`pkg/provider/zone/repo.go`, `pkg/azclient/providerclient`
//! `GetVirtualMachineSupportedZones`), and fails the start when it cannot: that is also
//! where wrong credentials or endpoints surface.

pub mod client;
pub mod config;
pub mod instances;
pub mod loadbalancer;
pub mod md5;
pub mod nsg;
pub mod routes;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use super::{AnyCloud, NewProvider, Provider, ProviderFactory};
use crate::cloud::{Capabilities, CloudError, InstanceMetadata, Instances};
use crate::options::Options;
use client::{ArmClient, ArmError, COMPUTE_API, NETWORK_API, RESOURCES_API};
use config::AzureConfig;
use instances::{PROVIDER_NAME, lowercase_resource_group, vm_name_for};

/// Startup failures of the provider.
#[derive(Debug, thiserror::Error)]
pub enum AzureError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Client(#[from] ArmError),
}

impl From<ArmError> for CloudError {
    fn from(e: ArmError) -> Self {
        CloudError::Other(e.to_string())
    }
}

/// The Azure cloud.
#[derive(Debug)]
pub struct Azure {
    client: ArmClient,
    config: AzureConfig,
    /// Region (lowercased, spaces removed) -> zones, from the provider registration.
    region_zones: BTreeMap<String, Vec<String>>,
    /// Serializes load-balancer reconciles, as upstream's `serviceReconcileLock`
    /// (`pkg/provider/azure_loadbalancer.go`): they share one LB and one NSG.
    lb_lock: tokio::sync::Mutex<()>,
    /// Serializes route-table writes, as upstream's `delayedRouteUpdater`
    /// (`pkg/provider/azure_routes.go`) batches them.
    route_lock: tokio::sync::Mutex<()>,
    /// Node name (lowercased) -> the ID of its primary NIC's primary IP configuration
    /// (lowercased), learned when the node last joined a backend pool. A VM keeps its
    /// NIC for life, so a node whose configuration is already a pool member needs no VM
    /// or NIC read on the next reconcile (upstream reads VMs from its 60 s cache,
    /// `azure_vmsets_repo.go` `newVMCache`).
    ip_configs: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Azure {
    /// Reads `azure.json`, discovers the cloud, authenticates and reads the zones.
    pub async fn new(cloud_config_path: &str) -> Result<(Self, Vec<String>), AzureError> {
        let (config, warnings) = AzureConfig::load(cloud_config_path)?;
        let client = ArmClient::connect(&config).await?;
        let cloud = Self::with_client(config, client).await?;
        Ok((cloud, warnings))
    }

    /// Builds the provider over an existing client (tests use a plain-http one).
    pub async fn with_client(config: AzureConfig, client: ArmClient) -> Result<Self, AzureError> {
        let registration = client
            .get(
                &format!(
                    "/subscriptions/{}/providers/Microsoft.Compute",
                    client.subscription
                ),
                RESOURCES_API,
                &[],
            )
            .await?;
        Ok(Self {
            region_zones: region_zones(&registration),
            client,
            config,
            lb_lock: Default::default(),
            route_lock: Default::default(),
            ip_configs: Default::default(),
        })
    }

    pub fn config(&self) -> &AzureConfig {
        &self.config
    }

    pub fn client(&self) -> &ArmClient {
        &self.client
    }

    /// `/subscriptions/<sub>/resourceGroups/<rg>/providers/<kind>/<name>`.
    pub fn resource_path(&self, resource_group: &str, kind: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{resource_group}/providers/{kind}/{name}",
            self.client.subscription
        )
    }

    /// A network resource in the configured resource group.
    pub fn network_path(&self, kind: &str, name: &str) -> String {
        self.resource_path(
            &self.config.resource_group,
            &format!("Microsoft.Network/{kind}"),
            name,
        )
    }

    /// The zones of the configured location (empty when the region has none).
    pub fn location_zones(&self) -> Vec<String> {
        let key = self.config.location.to_ascii_lowercase().replace(' ', "");
        self.region_zones.get(&key).cloned().unwrap_or_default()
    }

    /// The VM named `name` with its instance view; `InstanceNotFound` on 404 or while it
    /// is being deleted (`newVMCache`).
    pub async fn get_vm(&self, name: &str) -> Result<Value, CloudError> {
        let path = self.resource_path(
            &self.config.resource_group,
            "Microsoft.Compute/virtualMachines",
            name,
        );
        match self
            .client
            .get(&path, COMPUTE_API, &[("$expand", "instanceView")])
            .await
        {
            Ok(vm) => {
                let state = vm
                    .pointer("/properties/provisioningState")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if state.eq_ignore_ascii_case("Deleting") {
                    return Err(CloudError::InstanceNotFound);
                }
                Ok(vm)
            }
            Err(e) if e.is_not_found() => Err(CloudError::InstanceNotFound),
            Err(e) => Err(e.into()),
        }
    }

    /// The VM's primary NIC (`getPrimaryInterfaceWithVMSet`): GET by the NIC ID's group.
    pub async fn primary_nic(&self, vm: &Value) -> Result<Value, CloudError> {
        let id = instances::primary_nic_id(vm)?;
        let rg = instances::resource_group_of(&id).ok_or_else(|| {
            CloudError::Other(format!(
                "error of extracting resourceGroup from nicID {id:?}"
            ))
        })?;
        let path = self.resource_path(
            &rg,
            "Microsoft.Network/networkInterfaces",
            instances::last_segment(&id),
        );
        Ok(self.client.get(&path, NETWORK_API, &[]).await?)
    }

    /// `(private IP, public IP)` of the primary IP configuration (`GetIPByNodeName`); the
    /// public IP is read by name in the configured resource group, as upstream does.
    pub async fn ips_of(&self, vm: &Value) -> Result<(String, Option<String>, Value), CloudError> {
        let nic = self.primary_nic(vm).await?;
        let i = instances::primary_ip_config_index(&nic)?;
        let config = &nic["properties"]["ipConfigurations"][i];
        let private = config
            .pointer("/properties/privateIPAddress")
            .and_then(Value::as_str)
            .ok_or_else(|| CloudError::Other("primary IP configuration has no private IP".into()))?
            .to_owned();
        let mut public = None;
        if let Some(pip_id) = config
            .pointer("/properties/publicIPAddress/id")
            .and_then(Value::as_str)
        {
            let path = self.network_path("publicIPAddresses", instances::last_segment(pip_id));
            if let Some(pip) = self.client.get_opt(&path, NETWORK_API, &[]).await? {
                public = pip
                    .pointer("/properties/ipAddress")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        Ok((private, public, nic))
    }
}

/// `GetVirtualMachineSupportedZones`: the `virtualMachines` resource type's zone mappings.
pub fn region_zones(registration: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for rt in registration
        .get("resourceTypes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let is_vm = rt
            .get("resourceType")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("virtualMachines"));
        if !is_vm {
            continue;
        }
        for m in rt
            .get("zoneMappings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(location) = m.get("location").and_then(Value::as_str) else {
                continue;
            };
            let zones = m
                .get("zones")
                .and_then(Value::as_array)
                .map(|z| {
                    z.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            out.insert(location.to_ascii_lowercase().replace(' ', ""), zones);
        }
    }
    out
}

/// The Azure provider in the registry ([`crate::providers::registry::PROVIDERS`]).
pub static FACTORY: ProviderFactory = ProviderFactory {
    name: PROVIDER_NAME,
    display_name: "Azure",
    accepts_node_labels: false,
    new: new_provider,
    render_metrics: None,
};

/// [`ProviderFactory::new`]: [`Azure::new`] on `--cloud-config`.
fn new_provider(opts: &Options) -> NewProvider<'_> {
    Box::pin(async move {
        let (cloud, warnings) = Azure::new(&opts.cloud_config).await?;
        Ok((AnyCloud::new(cloud), warnings))
    })
}

impl Provider for Azure {
    /// The Azure provider keeps no Kubernetes client (upstream uses it for features the
    /// reference CCM does not model: shared-IP services, PLS, node informers).
    fn initialize(&self, _client: kube::Client) {}

    /// Routes need a `routeTableName`; the table itself is created when missing.
    async fn detect_routes(&mut self) -> Option<String> {
        self.config
            .route_table_name
            .is_empty()
            .then(|| "routes unsupported: no routeTableName in azure.json".to_owned())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            load_balancer: true,
            routes: !self.config.route_table_name.is_empty(),
        }
    }
}

impl Instances for Azure {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let name = vm_name_for(node)?;
        match self.get_vm(&name).await {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let name = vm_name_for(node)?;
        match self.get_vm(&name).await {
            Ok(vm) => Ok(instances::is_shut_down(&vm)),
            // Upstream answers false so that InstanceExists decides.
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        // The providerID is checked (and a VMSS one refused) even though the lookups below
        // are by node name, as upstream's InstanceMetadata does them.
        vm_name_for(node)?;
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let vm = self.get_vm(&node_name).await?;
        let provider_id = match node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .filter(|p| !p.is_empty())
        {
            Some(p) => p,
            None => {
                let id = vm
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| CloudError::Other(format!("VM {node_name} has no id")))?;
                format!("{PROVIDER_NAME}://{}", lowercase_resource_group(id))
            }
        };
        let instance_type = vm
            .pointer("/properties/hardwareProfile/vmSize")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                CloudError::Other(format!("HardwareProfile of node({node_name}) is nil"))
            })?
            .to_owned();
        let (private, public, _) = self.ips_of(&vm).await?;
        let (zone, region) = instances::zone_of(&vm)?;
        Ok(Some(InstanceMetadata {
            provider_id,
            instance_type,
            node_addresses: instances::node_addresses(&node_name, &private, public.as_deref()),
            zone,
            region,
            additional_labels: Default::default(),
        }))
    }
}

#[cfg(test)]
mod tests;
