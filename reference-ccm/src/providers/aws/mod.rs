//! The AWS provider: upstream's INI cloud config with `[ServiceOverride]`, a small
//! SigV4-signed query-protocol client for EC2 and ELB, `InstancesV2`, `LoadBalancer`
//! (ELB classic, and NLB by annotation) and `Routes` (the cluster's VPC route table).
//!
//! Exists so every suite also runs against AWS semantics (the harness's mock AWS, or a
//! real account), behaving like `kubernetes/cloud-provider-aws` `pkg/providers/v1`.
//!
//! Why a hand-written client rather than `aws-sdk-ec2` / `aws-sdk-elasticloadbalancing(v2)`:
//! the SDKs add about 12.5 minutes to a cold build on the 2-core CI machine (DESIGN.md
//! "Build budget"), and CI pays the cold build on every submission; the CCM uses about
//! twenty actions of the query protocol, whose wire format is form parameters in and
//! plain XML out. SigV4 ([`sigv4`]) is a small module on `ring` (already built for
//! rustls) and the XML is read with the providers' shared reader
//! ([`crate::providers::xml`], on quick-xml, which the vSphere provider needs anyway), so
//! the provider adds no crate to the build.

pub mod client;
pub mod config;
pub mod instances;
pub mod loadbalancer;
pub mod nlb;
pub mod routes;
pub mod sigv4;

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Node;

use super::{AnyCloud, NewProvider, Provider, ProviderFactory};
use crate::cloud::{Capabilities, CloudError, InstanceMetadata, Instances};
use crate::options::Options;
use client::{Api, AwsClient, ClientError, filter_params, list_params};
use config::AwsConfig;
use instances::{Ec2Instance, Lookup, PROVIDER_NAME, lookup_for};

/// Startup failures of the provider.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl From<ClientError> for CloudError {
    fn from(e: ClientError) -> Self {
        CloudError::Other(e.to_string())
    }
}

/// Label with the AWS zone id (`topology.k8s.aws/zone-id`, cloud-provider-aws
/// `instances_v2.go` `getAdditionalLabels`).
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";

/// States a node-name lookup considers (`aws.go` `getInstancesByNodeNames`).
const LIVE_STATES: &[&str] = &["pending", "running", "shutting-down", "stopping", "stopped"];

/// The AWS cloud.
#[derive(Debug)]
pub struct Aws {
    client: AwsClient,
    config: AwsConfig,
    /// Zone name -> zone id; zone ids never change.
    zone_ids: Mutex<HashMap<String, String>>,
}

impl Aws {
    /// Reads the config file and builds the client; returns warnings to log later.
    pub async fn new(cloud_config_path: &str) -> Result<(Self, Vec<String>), AwsError> {
        let (config, mut warnings) = AwsConfig::load(cloud_config_path)?;
        let client = AwsClient::from_config(&config)?;
        if config.cluster_id.is_empty() {
            warnings.push(
                "no [Global] KubernetesClusterID: instances are not filtered by cluster tag"
                    .to_owned(),
            );
        }
        Ok((Self::with_client(config, client), warnings))
    }

    pub fn with_client(config: AwsConfig, client: AwsClient) -> Self {
        Self {
            client,
            config,
            zone_ids: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &AwsConfig {
        &self.config
    }

    pub fn client(&self) -> &AwsClient {
        &self.client
    }

    /// Every instance `DescribeInstances` returns for `params`, following `NextToken`.
    pub async fn describe_instances(
        &self,
        params: Vec<(String, String)>,
    ) -> Result<Vec<Ec2Instance>, ClientError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut p = params.clone();
            if let Some(t) = &token {
                p.push(("NextToken".into(), t.clone()));
            }
            let root = self.client.call(Api::Ec2, "DescribeInstances", &p).await?;
            for r in root.items(&["reservationSet"]) {
                out.extend(r.items(&["instancesSet"]).map(Ec2Instance::from_xml));
            }
            token = Some(root.text_at(&["nextToken"]).to_owned()).filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// The instance behind a node; `InstanceNotFound` when EC2 does not know it.
    pub async fn get_instance(&self, node: &Node) -> Result<Ec2Instance, CloudError> {
        match lookup_for(node).map_err(CloudError::Other)? {
            Lookup::ById(id) => {
                let found = self
                    .describe_instances(list_params("InstanceId", std::slice::from_ref(&id)))
                    .await;
                match found {
                    Ok(mut list) => match list.len() {
                        0 => Err(CloudError::InstanceNotFound),
                        _ => Ok(list.remove(0)),
                    },
                    Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => {
                        Err(CloudError::InstanceNotFound)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Lookup::ByPrivateDnsName(name) => {
                let mut params = filter_params(&[
                    ("private-dns-name", vec![name.clone()]),
                    (
                        "instance-state-name",
                        LIVE_STATES.iter().map(|s| (*s).to_owned()).collect(),
                    ),
                ]);
                params.push(("MaxResults".into(), "1000".into()));
                let mut found: Vec<Ec2Instance> = self
                    .describe_instances(params)
                    .await?
                    .into_iter()
                    .filter(|i| i.has_cluster_tag(&self.config.cluster_id))
                    .collect();
                match found.len() {
                    0 => Err(CloudError::InstanceNotFound),
                    1 => Ok(found.remove(0)),
                    n => Err(CloudError::Other(format!(
                        "found {n} instances with private DNS name {name:?}, expected one"
                    ))),
                }
            }
        }
    }

    async fn zone_id(&self, zone: &str) -> Result<Option<String>, CloudError> {
        if zone.is_empty() {
            return Ok(None);
        }
        if let Some(id) = self.zone_ids.lock().ok().and_then(|m| m.get(zone).cloned()) {
            return Ok(Some(id));
        }
        let root = self
            .client
            .call(
                Api::Ec2,
                "DescribeAvailabilityZones",
                &list_params("ZoneName", &[zone.to_owned()]),
            )
            .await?;
        let id = root
            .items(&["availabilityZoneInfo"])
            .find(|z| z.text_at(&["zoneName"]) == zone)
            .map(|z| z.text_at(&["zoneId"]).to_owned())
            .filter(|id| !id.is_empty());
        if let (Some(id), Ok(mut m)) = (&id, self.zone_ids.lock()) {
            m.insert(zone.to_owned(), id.clone());
        }
        Ok(id)
    }
}

/// The AWS provider in the registry ([`crate::providers::registry::PROVIDERS`]).
pub static FACTORY: ProviderFactory = ProviderFactory {
    name: PROVIDER_NAME,
    display_name: "AWS",
    accepts_node_labels: false,
    new: new_provider,
    render_metrics: None,
};

/// [`ProviderFactory::new`]: [`Aws::new`] on `--cloud-config`.
fn new_provider(opts: &Options) -> NewProvider<'_> {
    Box::pin(async move {
        let (cloud, warnings) = Aws::new(&opts.cloud_config).await?;
        Ok((AnyCloud::new(cloud), warnings))
    })
}

impl Provider for Aws {
    /// The AWS provider needs no Kubernetes client (cloud-provider-aws's `Initialize` only
    /// keeps the client builder for its tagging controller, not modelled here).
    fn initialize(&self, _client: kube::Client) {}

    /// Routes need nothing probed: the route table comes from the config or the VPC.
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

impl Instances for Aws {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.get_instance(node).await {
            Ok(i) => Ok(i.exists()),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.get_instance(node).await?.is_shutdown())
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let instance = self.get_instance(node).await?;
        let mut additional_labels = std::collections::BTreeMap::new();
        if let Some(id) = self.zone_id(&instance.zone).await? {
            additional_labels.insert(ZONE_ID_LABEL.to_owned(), id);
        }
        let region = if instance.zone.is_empty() {
            self.config.region.clone()
        } else {
            config::region_of_zone(&instance.zone)
        };
        Ok(Some(InstanceMetadata {
            provider_id: instance.provider_id(),
            instance_type: instance.instance_type.clone(),
            node_addresses: instance.node_addresses_for(&self.config.node_ip_families),
            zone: instance.zone.clone(),
            region,
            additional_labels,
        }))
    }
}
