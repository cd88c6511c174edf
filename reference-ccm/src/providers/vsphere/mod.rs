//! The vSphere provider: upstream's `vsphere.conf`, a hand-written vim25 SOAP + vAPI
//! client, and `InstancesV2` with zones/regions from tags. No load balancer and no
//! routes: cloud-provider-vsphere only has them through NSX-T, which is out of scope,
//! and [`Vsphere::capabilities`] says so.
//!
//! Behaviour follows `kubernetes/cloud-provider-vsphere` `pkg/cloudprovider/vsphere`
//! (`instances.go`, `nodemanager.go`, `zones.go`): providerID `vsphere://<bios-uuid>`;
//! a node is found by its SystemUUID with `SearchIndex.FindByUuid` (BIOS uuid, VMs only)
//! in each configured datacenter, else by its name with `FindAllByDnsName`, else by its
//! IPs with `FindByIp`; the VM exists while found, is shut down when not `poweredOn`;
//! addresses come from `guest.net` (NICs with `deviceConfigId != -1`): for each family of
//! the config's `ipFamily` (default IPv4 only) one InternalIP and one ExternalIP, picked by
//! the `nodes` subnets of the config, else the family's first IP as both (see
//! [`node_addresses`]), plus `guest.hostName` as Hostname; zone and region are the tags in
//! the `labels.zone` / `labels.region` categories on the VM's host or its nearest ancestor
//! carrying one; `--node-labels` are every node's additional labels (`instances_v2.go`
//! `getAdditionalLabels`).
//!
//! The vCenter session is made when a lookup first needs it. With credentials in the file
//! [`Vsphere::new`] makes it at once, so a bad password or datacenter fails startup. With a
//! Secret named in the file (see [`credentials`]) the CCM starts without it, as upstream's
//! connection manager only reads the Secret to log in (`pkg/common/connectionmanager/
//! connectionmanager.go` `Connect`): until the Secret has the server's credentials every
//! lookup fails and nodes stay uninitialized; when vCenter refuses them (`InvalidLogin`) the
//! session is dropped, so the next lookup reads the Secret again and a rotated password
//! works without a restart.

pub mod client;
pub mod config;
pub mod credentials;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};

use super::{AnyCloud, KubeClient, NewProvider, Provider, ProviderFactory};
use crate::address::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP, addr};
use crate::cloud::{
    Capabilities, CloudError, InstanceMetadata, Instances, LbError, LoadBalancer, Route, Routes,
};
use crate::controllers::route::Cidr;
use crate::options::Options;
use crate::providers::xml::Element;
use client::{ClientError, MoRef, VsphereClient};
use config::{IpFamily, NodeNetworks, VsphereConfig};

/// `ProviderName()` of the vSphere cloud provider.
pub const PROVIDER_NAME: &str = "vsphere";
const PROVIDER_PREFIX: &str = "vsphere://";
/// Upper bound on parent hops when reading a VM's ancestry.
const MAX_ANCESTRY: usize = 16;

/// Failures of the provider: at startup, or of the login a lookup needed.
#[derive(Debug, thiserror::Error)]
pub enum VsphereError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("datacenter {0:?} from the cloud config is not in the inventory")]
    UnknownDatacenter(String),
    #[error(transparent)]
    Credentials(#[from] credentials::CredentialsError),
    #[error("no Kubernetes client to read secret {0} with")]
    NoKubeClient(config::SecretRef),
}

impl From<ClientError> for CloudError {
    fn from(e: ClientError) -> Self {
        CloudError::Other(e.to_string())
    }
}

impl From<VsphereError> for CloudError {
    fn from(e: VsphereError) -> Self {
        CloudError::Other(e.to_string())
    }
}

/// The vSphere cloud.
#[derive(Debug)]
pub struct Vsphere {
    config: VsphereConfig,
    /// HTTP client and `https://server:port` of the vCenter.
    http: reqwest::Client,
    base_url: String,
    /// Reads the credentials Secret; set by [`Vsphere::initialize`].
    kube: KubeClient,
    /// `--node-labels`, every node's additional labels.
    node_labels: BTreeMap<String, String>,
    /// The logged-in session, once a lookup made it; `None` again after vCenter refused
    /// Secret credentials.
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
}

/// A logged-in client and the datacenters lookups are scoped to (empty = unscoped).
#[derive(Debug)]
struct Session {
    client: VsphereClient,
    datacenters: Vec<MoRef>,
}

/// The VM properties the provider reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmInfo {
    pub moref: Option<MoRef>,
    pub uuid: String,
    pub power_state: String,
    pub host_name: String,
    /// IPs of NICs with `deviceConfigId != -1`, in NIC order, with their NIC's network.
    pub ips: Vec<GuestIp>,
    pub num_cpu: u32,
    pub memory_mb: u64,
    pub guest_id: String,
    pub host: Option<MoRef>,
}

/// One guest IP and the VM network of the NIC that has it (`GuestNicInfo.network`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestIp {
    pub ip: String,
    pub network: String,
}

impl Vsphere {
    /// Reads the config file, checks its IP families against [`config::DUAL_STACK_ENV`] and
    /// builds the provider with [`Self::from_config`].
    pub async fn new(cloud_config_path: &str) -> Result<(Self, Vec<String>), VsphereError> {
        let config = VsphereConfig::load(cloud_config_path)?;
        config.check_dual_stack(std::env::var_os(config::DUAL_STACK_ENV).is_some())?;
        Self::from_config(config, Duration::from_secs(60)).await
    }

    /// Builds the provider; with credentials in the file it also logs in and resolves the
    /// datacenters now, so that errors there are startup errors. With a Secret it does
    /// neither: the first lookup does.
    pub async fn from_config(
        config: VsphereConfig,
        timeout: Duration,
    ) -> Result<(Self, Vec<String>), VsphereError> {
        let http = client::http_client(&config, timeout)?;
        let base_url = config.base_url();
        let (cloud, warnings) = Self::with_http(config, http, &base_url);
        if cloud.config.secret.is_none() {
            cloud.session().await?;
        }
        Ok((cloud, warnings))
    }

    /// The provider talking to `base_url` through `http`; connects on the first lookup.
    pub fn with_http(
        config: VsphereConfig,
        http: reqwest::Client,
        base_url: &str,
    ) -> (Self, Vec<String>) {
        let mut warnings = Vec::new();
        if config.zone_category.is_empty() && config.region_category.is_empty() {
            warnings.push(
                "no labels.zone/labels.region in vsphere.conf: nodes get no topology labels"
                    .to_owned(),
            );
        }
        let cloud = Self {
            config,
            http,
            base_url: base_url.to_owned(),
            kube: KubeClient::default(),
            node_labels: BTreeMap::new(),
            session: tokio::sync::Mutex::new(None),
        };
        (cloud, warnings)
    }

    /// `--node-labels`: added to every node's metadata.
    pub fn with_node_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.node_labels = labels;
        self
    }

    pub fn config(&self) -> &VsphereConfig {
        &self.config
    }

    /// The session, logging in first when there is none (one login at a time).
    async fn session(&self) -> Result<Arc<Session>, VsphereError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let (user, password) = match &self.config.secret {
            None => (self.config.user.clone(), self.config.password.clone()),
            Some(secret) => {
                let kube = self
                    .kube
                    .0
                    .get()
                    .ok_or_else(|| VsphereError::NoKubeClient(secret.clone()))?;
                let c = credentials::fetch(kube, secret, &self.config.server).await?;
                (c.user, c.password)
            }
        };
        let client =
            VsphereClient::connect_with(self.http.clone(), &self.base_url, &user, &password)
                .await?;
        let mut datacenters = Vec::new();
        if !self.config.datacenters.is_empty() {
            let known = client.datacenters().await?;
            for name in &self.config.datacenters {
                let dc = known
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, r)| r.clone())
                    .ok_or_else(|| VsphereError::UnknownDatacenter(name.clone()))?;
                datacenters.push(dc);
            }
        }
        let session = Arc::new(Session {
            client,
            datacenters,
        });
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Passes `result` through; when vCenter refused credentials that came from the Secret,
    /// first drops `used` so that the next lookup logs in with the Secret read again.
    async fn checked<T>(
        &self,
        used: &Arc<Session>,
        result: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if let (Err(e), Some(secret)) = (&result, &self.config.secret)
            && e.invalid_login()
        {
            let mut slot = self.session.lock().await;
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, used)) {
                tracing::warn!(
                    server = %self.config.server,
                    "vCenter refused the credentials from secret {secret}; reading it again on the next lookup"
                );
                *slot = None;
            }
        }
        result
    }

    async fn find_one(
        &self,
        method: &str,
        arg_name: &str,
        arg: &str,
    ) -> Result<Option<MoRef>, CloudError> {
        let session = self.session().await?;
        let scopes: Vec<Option<&MoRef>> = if session.datacenters.is_empty() {
            vec![None]
        } else {
            session.datacenters.iter().map(Some).collect()
        };
        for dc in scopes {
            let found = session.client.find_vms(method, dc, arg_name, arg).await;
            if let Some(vm) = self.checked(&session, found).await?.into_iter().next() {
                return Ok(Some(vm));
            }
        }
        Ok(None)
    }

    /// The VM behind a node, `None` when vSphere does not know it.
    pub async fn find_vm(&self, node: &Node) -> Result<Option<MoRef>, CloudError> {
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or("");
        let uuid = if !provider_id.is_empty() {
            provider_id
                .strip_prefix(PROVIDER_PREFIX)
                .map(str::to_owned)
                .ok_or_else(|| {
                    CloudError::Other(format!("providerID {provider_id:?} is not a vsphere:// ID"))
                })?
        } else {
            node.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.system_uuid.clone())
                .unwrap_or_default()
        };
        for candidate in uuid_candidates(&uuid) {
            if let Some(vm) = self.find_one("FindByUuid", "uuid", &candidate).await? {
                return Ok(Some(vm));
            }
        }
        if !provider_id.is_empty() {
            // A providerID names the VM; when its uuid is gone, so is the VM.
            return Ok(None);
        }
        let name = node.metadata.name.as_deref().unwrap_or("");
        if !name.is_empty()
            && let Some(vm) = self.find_one("FindAllByDnsName", "dnsName", name).await?
        {
            return Ok(Some(vm));
        }
        for ip in node_ips(node) {
            if let Some(vm) = self.find_one("FindByIp", "ip", &ip).await? {
                return Ok(Some(vm));
            }
        }
        Ok(None)
    }

    /// Reads the VM's properties; `Ok(None)` when it vanished meanwhile.
    pub async fn vm_info(&self, vm: &MoRef) -> Result<Option<VmInfo>, CloudError> {
        let session = self.session().await?;
        let found = session
            .client
            .properties(
                vm,
                &[
                    "summary.config.uuid",
                    "summary.config.numCpu",
                    "summary.config.memorySizeMB",
                    "summary.config.guestId",
                    "runtime.powerState",
                    "runtime.host",
                    "guest.hostName",
                    "guest.net",
                ],
            )
            .await;
        let props = match self.checked(&session, found).await {
            Ok(p) => p,
            Err(e) if e.fault() == Some("ManagedObjectNotFound") => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut info = VmInfo {
            moref: Some(vm.clone()),
            ..VmInfo::default()
        };
        for (name, val) in &props {
            let text = val.text.trim();
            match name.as_str() {
                "summary.config.uuid" => info.uuid = text.to_ascii_lowercase(),
                "summary.config.numCpu" => info.num_cpu = text.parse().unwrap_or(0),
                "summary.config.memorySizeMB" => info.memory_mb = text.parse().unwrap_or(0),
                "summary.config.guestId" => info.guest_id = text.to_owned(),
                "runtime.powerState" => info.power_state = text.to_owned(),
                "runtime.host" => info.host = MoRef::from_element(val),
                "guest.hostName" => info.host_name = text.to_owned(),
                "guest.net" => info.ips = guest_ips(val),
                _ => {}
            }
        }
        Ok(Some(info))
    }

    /// Zone and region from tags on the host and its ancestors (nearest wins).
    async fn zone_region(&self, info: &VmInfo) -> Result<(String, String), CloudError> {
        let (zc, rc) = (&self.config.zone_category, &self.config.region_category);
        let (mut zone, mut region) = (String::new(), String::new());
        if zc.is_empty() && rc.is_empty() {
            return Ok((zone, region));
        }
        let session = self.session().await?;
        let mut chain: Vec<MoRef> = info.moref.iter().cloned().collect();
        let mut next = info.host.clone();
        while let Some(obj) = next.take() {
            if chain.len() > MAX_ANCESTRY {
                break;
            }
            let found = session.client.properties(&obj, &["parent"]).await;
            let props = self.checked(&session, found).await?;
            next = props
                .iter()
                .find(|(n, _)| n == "parent")
                .and_then(|(_, v)| MoRef::from_element(v));
            chain.push(obj);
        }
        for obj in &chain {
            let tags = session.client.attached_tags(obj).await;
            for (category, tag) in self.checked(&session, tags).await? {
                if zone.is_empty() && !zc.is_empty() && &category == zc {
                    zone = tag.clone();
                }
                if region.is_empty() && !rc.is_empty() && &category == rc {
                    region = tag;
                }
            }
            if (zone.is_empty() == zc.is_empty()) && (region.is_empty() == rc.is_empty()) {
                break;
            }
        }
        Ok((zone, region))
    }

    async fn info_for(&self, node: &Node) -> Result<Option<VmInfo>, CloudError> {
        match self.find_vm(node).await? {
            Some(vm) => self.vm_info(&vm).await,
            None => Ok(None),
        }
    }
}

/// The uuid as given (lower-case), then its byte-swapped SMBIOS form when it parses
/// (cloud-provider-vsphere `pkg/common/vclib/utils.go` `ConvertK8sUUIDtoNormal` handles
/// the first three fields being little-endian in the node's SystemUUID).
pub fn uuid_candidates(uuid: &str) -> Vec<String> {
    let u = uuid.trim().to_ascii_lowercase();
    if u.is_empty() {
        return Vec::new();
    }
    let mut out = vec![u.clone()];
    let parts: Vec<&str> = u.split('-').collect();
    if parts.len() == 5 && parts[..3].iter().all(|p| p.len() % 2 == 0) {
        let swap = |p: &str| -> String {
            let bytes: Vec<&str> = (0..p.len())
                .step_by(2)
                .filter_map(|i| p.get(i..i + 2))
                .collect();
            bytes.into_iter().rev().collect()
        };
        let swapped = format!(
            "{}-{}-{}-{}-{}",
            swap(parts[0]),
            swap(parts[1]),
            swap(parts[2]),
            parts[3],
            parts[4]
        );
        if swapped != u {
            out.push(swapped);
        }
    }
    out
}

/// The node's own IPs to try with `FindByIp`: status addresses, then the kubelet's
/// provided-node-ip annotation.
fn node_ips(node: &Node) -> Vec<String> {
    let mut ips: Vec<String> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == INTERNAL_IP || a.type_ == EXTERNAL_IP)
        .map(|a| a.address.clone())
        .collect();
    if let Some(v) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("alpha.kubernetes.io/provided-node-ip"))
    {
        ips.extend(v.split(',').map(|s| s.trim().to_owned()));
    }
    ips.retain(|ip| ip.parse::<IpAddr>().is_ok());
    ips.dedup();
    ips
}

/// IPs of `guest.net` NICs that are VM devices (`deviceConfigId != -1`), without the
/// local-only ones upstream drops (cloud-provider-vsphere `nodemanager.go`
/// `excludeLocalhostIPs` with `util.go` `ErrOnLocalOnlyIPAddr`: unspecified, link-local
/// multicast, link-local unicast, loopback).
fn guest_ips(val: &Element) -> Vec<GuestIp> {
    val.children
        .iter()
        .filter(|nic| nic.text_at(&["deviceConfigId"]) != "-1")
        .flat_map(|nic| {
            let network = nic.text_at(&["network"]).trim().to_owned();
            nic.all("ipAddress").map(move |ip| GuestIp {
                ip: ip.text.trim().to_owned(),
                network: network.clone(),
            })
        })
        .filter(|GuestIp { ip, .. }| {
            ip.parse::<IpAddr>().is_ok_and(|a| match a {
                IpAddr::V4(v4) => {
                    !v4.is_link_local()
                        && !v4.is_unspecified()
                        && !v4.is_loopback()
                        // 224.0.0.0/24, Go's IsLinkLocalMulticast for IPv4.
                        && v4.octets()[..3] != [224, 0, 0]
                }
                IpAddr::V6(v6) => {
                    !v6.is_loopback()
                        && !v6.is_unspecified()
                        && (v6.segments()[0] & 0xffc0) != 0xfe80
                        && (v6.segments()[0] & 0xff0f) != 0xff02
                }
            })
        })
        .collect()
}

/// Node addresses as upstream's `DiscoverNode` / `discoverIPs` pick them
/// (`kubernetes/cloud-provider-vsphere` `pkg/cloudprovider/vsphere/nodemanager.go`), for
/// each of `families` (the config's `ipFamily`) in order: of the family's guest IPs, those
/// outside the exclude subnets are candidates; the InternalIP is the first candidate inside
/// an internal subnet (subnets in config order), else the first on a NIC of
/// `internalVmNetworkName` (ignoring case), the ExternalIP likewise with the external
/// settings; when neither is found (or nothing is set) the family's first candidate is
/// both. Then the hostname. `None` when a family gets neither address, which upstream
/// fails the lookup with.
///
/// Difference from upstream: the Hostname comes last, not first.
pub fn node_addresses(
    info: &VmInfo,
    nets: &NodeNetworks,
    families: &[IpFamily],
) -> Option<Vec<NodeAddress>> {
    let ips: Vec<(IpAddr, &str)> = info
        .ips
        .iter()
        .filter_map(|g| Some((g.ip.parse().ok()?, g.network.as_str())))
        .collect();
    let mut out: Vec<NodeAddress> = Vec::new();
    for family in families {
        let of_family: Vec<(IpAddr, &str)> = ips
            .iter()
            .copied()
            .filter(|(ip, _)| family.matches(ip))
            .collect();
        let (internal, external) = discover_ips(&of_family, nets);
        if internal.is_none() && external.is_none() {
            return None;
        }
        for (kind, ip) in [(INTERNAL_IP, internal), (EXTERNAL_IP, external)] {
            if let Some(ip) = ip {
                let a = addr(kind, &ip.to_string());
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    if !info.host_name.is_empty() {
        out.push(addr(HOSTNAME, &info.host_name));
    }
    Some(out)
}

/// `(internal, external)` among one family's IPs, each with its NIC's network (upstream
/// `discoverIPs`: subnet match first, then `findNetworkNameMatch`, then the first IP).
fn discover_ips(
    family: &[(IpAddr, &str)],
    nets: &NodeNetworks,
) -> (Option<IpAddr>, Option<IpAddr>) {
    let host = |ip: &IpAddr| Cidr {
        addr: *ip,
        prefix: if ip.is_ipv4() { 32 } else { 128 },
    };
    let outside = |excluded: &[Cidr]| -> Vec<(IpAddr, &str)> {
        family
            .iter()
            .copied()
            .filter(|(ip, _)| !excluded.iter().any(|net| net.contains(&host(ip))))
            .collect()
    };
    let internal_candidates = outside(&nets.exclude_internal_subnets);
    let external_candidates = outside(&nets.exclude_external_subnets);
    let in_subnets = |candidates: &[(IpAddr, &str)], subnets: &[Cidr]| {
        subnets.iter().find_map(|net| {
            candidates
                .iter()
                .map(|(ip, _)| *ip)
                .find(|ip| net.contains(&host(ip)))
        })
    };
    let on_network = |candidates: &[(IpAddr, &str)], name: &str| {
        (!name.is_empty())
            .then(|| {
                candidates
                    .iter()
                    .find(|(_, network)| network.eq_ignore_ascii_case(name))
                    .map(|(ip, _)| *ip)
            })
            .flatten()
    };
    let internal = in_subnets(&internal_candidates, &nets.internal_subnets)
        .or_else(|| on_network(&internal_candidates, &nets.internal_vm_network_name));
    let external = in_subnets(&external_candidates, &nets.external_subnets)
        .or_else(|| on_network(&external_candidates, &nets.external_vm_network_name));
    if internal.is_none() && external.is_none() {
        (
            internal_candidates.first().map(|(ip, _)| *ip),
            external_candidates.first().map(|(ip, _)| *ip),
        )
    } else {
        (internal, external)
    }
}

/// `vsphere-vm.cpu-N.mem-Ggb.os-<os>` (cloud-provider-vsphere `nodemanager.go`
/// `DiscoverNode`), `<os>` from the VM's `summary.config.guestId` by [`guest_os`].
pub fn instance_type(info: &VmInfo) -> String {
    format!(
        "vsphere-vm.cpu-{}.mem-{}gb.os-{}",
        info.num_cpu,
        info.memory_mb / 1024,
        guest_os(&info.guest_id)
    )
}

/// The OS name upstream derives from a vSphere guest ID (cloud-provider-vsphere `types.go`
/// `GuestOSLookup`), by that table's rules rather than its ~150 rows: `Guest` and a 64-bit
/// suffix dropped (`debian10_64Guest` → `debian10`, `ubuntu64Guest` → `ubuntu`), every
/// Darwin release → `darwin`, the generic and "other" Linux kernels → `linux`, Windows
/// IDs lower-cased (`winNetWebGuest` → `winnetweb`); an ID vSphere does not define (no
/// `Guest` suffix) → `unknown`, as upstream's lookup miss. Known difference: the table's
/// irregular rows (`centos64Guest` → `centos64`) are not reproduced.
pub fn guest_os(guest_id: &str) -> String {
    let Some(base) = guest_id.strip_suffix("Guest") else {
        return "unknown".into();
    };
    let base = base
        .strip_suffix("_64")
        .or_else(|| base.strip_suffix("64"))
        .unwrap_or(base);
    if base.is_empty() {
        "unknown".into()
    } else if base.starts_with("darwin") {
        "darwin".into()
    } else if base == "genericLinux" || (base.starts_with("other") && base.ends_with("Linux")) {
        "linux".into()
    } else if base.starts_with("win") || base == "turboLinux" {
        base.to_ascii_lowercase()
    } else {
        base.to_string()
    }
}

/// vSphere has no load balancer; the service controller is never started for it
/// ([`Vsphere::capabilities`]), so this only answers a caller that ignored that.
fn no_load_balancer() -> LbError {
    LbError::Other("provider vsphere has no load balancer (capability)".to_owned())
}

/// vSphere has no routes; see [`no_load_balancer`].
fn no_routes() -> CloudError {
    CloudError::Other("provider vsphere has no routes (capability)".to_owned())
}

/// The vSphere provider in the registry ([`crate::providers::registry::PROVIDERS`]); the one that
/// owns `--node-labels`.
pub static FACTORY: ProviderFactory = ProviderFactory {
    name: PROVIDER_NAME,
    display_name: "vSphere",
    accepts_node_labels: true,
    new: new_provider,
    render_metrics: None,
};

/// [`ProviderFactory::new`]: [`Vsphere::new`] on `--cloud-config`, with `--node-labels`.
fn new_provider(opts: &Options) -> NewProvider<'_> {
    Box::pin(async move {
        let (cloud, warnings) = Vsphere::new(&opts.cloud_config).await?;
        let cloud = cloud.with_node_labels(opts.node_labels());
        Ok((AnyCloud::new(cloud), warnings))
    })
}

impl Provider for Vsphere {
    /// `cloudprovider.Interface.Initialize`: the client that reads the credentials Secret.
    fn initialize(&self, client: kube::Client) {
        let _ = self.kube.0.set(client);
    }

    /// Routes are never detected on vSphere: it has none ([`Self::capabilities`]).
    async fn detect_routes(&mut self) -> Option<String> {
        None
    }

    /// No load balancer, no routes (both need NSX-T upstream).
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            load_balancer: false,
            routes: false,
        }
    }
}

impl LoadBalancer for Vsphere {
    async fn get_load_balancer(
        &self,
        _cluster: &str,
        _service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        Err(no_load_balancer())
    }

    async fn ensure_load_balancer(
        &self,
        _cluster: &str,
        _service: &Service,
        _nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        Err(no_load_balancer())
    }

    async fn update_load_balancer(
        &self,
        _cluster: &str,
        _service: &Service,
        _nodes: &[Node],
    ) -> Result<(), LbError> {
        Err(no_load_balancer())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster: &str,
        _service: &Service,
    ) -> Result<(), LbError> {
        Err(no_load_balancer())
    }
}

impl Routes for Vsphere {
    async fn list_routes(&self, _cluster: &str) -> Result<Vec<Route>, CloudError> {
        Err(no_routes())
    }

    async fn create_route(
        &self,
        _cluster: &str,
        _name_hint: &str,
        _route: &Route,
    ) -> Result<(), CloudError> {
        Err(no_routes())
    }

    async fn delete_route(&self, _cluster: &str, _route: &Route) -> Result<(), CloudError> {
        Err(no_routes())
    }
}

impl Instances for Vsphere {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.find_vm(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        match self.info_for(node).await? {
            Some(info) => Ok(info.power_state == "poweredOff"),
            None => Err(CloudError::InstanceNotFound),
        }
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let Some(info) = self.info_for(node).await? else {
            return Err(CloudError::InstanceNotFound);
        };
        // No usable guest IP (VMware Tools down while the guest reboots, or not reporting
        // yet) is an error, never "no addresses": upstream's DiscoverNode fails with
        // "unable to find suitable IP address for node" (cloud-provider-vsphere
        // pkg/cloudprovider/vsphere/nodemanager.go, since #585 for #576), so the periodic
        // sync keeps the node's addresses instead of replacing them with the Hostname
        // alone (cloud-provider-vsphere#479).
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if info.ips.is_empty() {
            return Err(CloudError::Other(format!(
                "unable to find suitable IP address for node {name}: the VM's guest.net has no usable IP"
            )));
        }
        // A configured family without any address fails the same way (DiscoverNode's
        // loop over the IP families), so the node stays uninitialized.
        let families = &self.config.ip_families;
        let Some(node_addresses) = node_addresses(&info, &self.config.nodes, families) else {
            let list: Vec<String> = families.iter().map(IpFamily::to_string).collect();
            return Err(CloudError::Other(format!(
                "unable to find suitable IP address for node {name} with IP family [{}]",
                list.join(" ")
            )));
        };
        let (zone, region) = self.zone_region(&info).await?;
        Ok(Some(InstanceMetadata {
            provider_id: format!("{PROVIDER_PREFIX}{}", info.uuid),
            instance_type: instance_type(&info),
            node_addresses,
            zone,
            region,
            additional_labels: self.node_labels.clone(),
        }))
    }
}

#[cfg(test)]
mod tests;
