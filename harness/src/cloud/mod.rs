//! One face for every mock cloud, so cases are written once and run per provider: create,
//! change and delete instances, inject faults, count the CCM's calls, and know what a
//! provider's CCM should report (providerID format, region, config file).
//!
//! [`CloudControl`] is opaque: each cloud implements the crate-private [`Backend`] trait in
//! its own file ([`openstack`], [`aws`], [`vsphere`], [`azure`], [`gcp`]), and nothing outside this folder can
//! tell which cloud it holds except through [`CloudControl::provider`]. Questions a case
//! asks of the cloud's request journal have typed answers: each backend classifies its
//! journal entries into [`CloudCall`]s (instance lookup, route write, load-balancer create /
//! delete / backend write, ...), and the counts and spans cases need are computed from
//! those here, once for every cloud.
//!
//! Adding a cloud: a file here with a `Backend` implementation, one arm in
//! [`CloudControl::start`], and a [`Provider`] variant.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use mock_cloud::{Journal, JournalEntry};

use crate::error::CaseError;
pub use crate::provider::Provider;

mod address_block;
pub mod aws;
pub mod azure;
pub mod gcp;
pub mod openstack;
pub mod vsphere;

pub use aws::AWS_CLUSTER_ID;

/// An instance to create in the cloud; `None` fields take the mock's defaults.
#[derive(Debug, Clone, Default)]
pub struct InstanceSpec {
    pub name: String,
    /// Availability zone; `Some("")` for none.
    pub zone: Option<String>,
    pub instance_type: Option<String>,
    /// `None` = one allocated address.
    pub internal_ips: Option<Vec<String>>,
    /// `None` = one allocated address; `Some(vec![])` = none.
    pub external_ips: Option<Vec<String>>,
}

impl InstanceSpec {
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Default::default()
        }
    }
}

/// A change to an instance.
#[derive(Debug, Clone, Default)]
pub struct InstancePatch {
    pub internal_ips: Option<Vec<String>>,
    pub external_ips: Option<Vec<String>>,
    pub zone: Option<String>,
    /// Power state: `Some(false)` stops (shuts down) the instance, `Some(true)` starts it.
    pub running: Option<bool>,
}

/// An instance as the cloud holds it, with what the CCM should derive from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub id: String,
    pub name: String,
    pub zone: String,
    pub region: String,
    pub instance_type: String,
    pub internal_ips: Vec<String>,
    pub external_ips: Vec<String>,
    /// The providerID the provider's CCM sets (`openstack:///<id>`, `aws:///<az>/<id>`).
    pub provider_id: String,
    /// DNS names the provider's CCM reports besides the IPs, as (type, name): AWS reports
    /// the private DNS name as InternalDNS and Hostname, the public one as ExternalDNS.
    pub dns_addresses: Vec<(String, String)>,
    /// The machine's BIOS UUID as its kubelet reports it (`status.nodeInfo.systemUUID`);
    /// the vSphere CCM finds the VM by it. Empty where the provider does not use it.
    pub system_uuid: String,
}

impl Instance {
    /// The addresses a CCM reports for it, as (type, address), before the node's own
    /// Hostname is kept.
    pub fn cloud_addresses(&self) -> Vec<(String, String)> {
        let internal = self
            .internal_ips
            .iter()
            .map(|a| ("InternalIP".to_string(), a.clone()));
        let external = self
            .external_ips
            .iter()
            .map(|a| ("ExternalIP".to_string(), a.clone()));
        internal
            .chain(external)
            .chain(self.dns_addresses.iter().cloned())
            .collect()
    }
}

/// A situation a case needs that not every cloud (or provider CCM as the harness
/// configures it) can express; see [`CloudControl::supports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// An instance without an availability zone.
    NoZone,
    /// An instance for which the cloud reports no address at all.
    NoAddresses,
    /// IPv6 InternalIPs next to IPv4 ones (dual-stack node addresses).
    DualStackAddresses,
    /// Cloud routes for IPv6 pod CIDRs next to IPv4 ones (dual-stack routes, RT-05).
    DualStackRoutes,
    /// UDP load balancers that carry traffic (LB-22).
    UdpLoadBalancers,
    /// Service load balancers at all (every LB case).
    LoadBalancers,
    /// Cloud routes for pod CIDRs at all (every RT case).
    Routes,
    /// An address the cloud reports as ExternalIP only, beside the InternalIPs (NA-01 adds
    /// one and then expects no writes).
    SeparateExternalAddresses,
    /// Load balancers that health-check each node's `healthCheckNodePort`, so with
    /// `externalTrafficPolicy: Local` only nodes with a local endpoint get traffic (LB-11).
    LocalTrafficHealthChecks,
    /// A Service setting that makes the provider answer `ImplementedElsewhere` and leave
    /// the load balancer to another controller (LB-19); see
    /// [`CloudControl::implemented_elsewhere_annotations`].
    ImplementedElsewhere,
    /// A machine replaced under the same name gets a new providerID, so the lifecycle
    /// controller can tell the replacement from the machine that went (NL-07).
    ReplacementGetsNewProviderId,
    /// `UpdateLoadBalancer` fails for a load balancer deleted out of band, so no
    /// `UpdatedLoadBalancer` event follows a node change (LB-26).
    UpdateFailsForMissingLoadBalancer,
    /// Load balancers that can keep their identity (and address) across a `--cluster-name`
    /// change (UP-06).
    LoadBalancersSurviveClusterRename,
    /// The provider tells a shut-down instance from a running one (`InstanceShutdown`), so
    /// the lifecycle controller can taint its NotReady node (NL-03, NL-04).
    ShutdownDetection,
}

/// A fault to inject into the cloud API the CCM uses.
#[derive(Debug, Clone)]
pub enum FaultSpec {
    /// Instance lookups (by ID or by name) answer `status` in the cloud's error envelope,
    /// `count` times (`None`: until cleared); only for `instance_id` when given.
    InstanceLookup {
        instance_id: Option<String>,
        status: u16,
        count: Option<u32>,
    },
    /// Route writes (adding or removing routes on the cluster's router) answer `status`,
    /// `count` times (`None`: until cleared).
    RouteWrite { status: u16, count: Option<u32> },
    /// Load-balancer writes with this HTTP method (`POST` creates, `DELETE` deletes, `PUT`
    /// updates) answer `status`, `count` times (`None`: until cleared).
    LoadBalancerWrite {
        method: &'static str,
        status: u16,
        count: Option<u32>,
    },
}

/// A load balancer as the cloud holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudLoadBalancer {
    pub id: String,
    pub name: String,
    /// The address clients reach it on: OpenStack's floating IP on the VIP port when it has
    /// one (what upstream reports as the ingress), else the VIP.
    pub vip: String,
    /// The cloud's provisioning state (e.g. Octavia `ACTIVE`, `PENDING_CREATE`).
    pub state: String,
}

/// Which of the in-tree provider's names a load balancer it left behind gets (the upgrade
/// suite's starting point, [`crate::in_tree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTreeName {
    /// The name keyed on the cluster name (OpenStack: `kube_service_<cluster>_<ns>_<name>`).
    ClusterScoped,
    /// The oldest scheme, keyed on the Service UID (`a<uid>`, 32 characters at most).
    ServiceUid,
}

/// A load balancer an in-tree provider left behind, and what its Service's status said.
#[derive(Debug, Clone)]
pub struct InTreeLoadBalancer {
    pub cloud: CloudLoadBalancer,
    /// The `status.loadBalancer.ingress[0]` the in-tree service controller wrote (`ip` with
    /// `ipMode: VIP` on OpenStack, `hostname` on AWS).
    pub ingress: serde_json::Value,
    /// The address clients used (VIP or DNS name), without port.
    pub address: String,
}

/// cloud-provider `cloud.go` `DefaultLoadBalancerName`: `a` + the UID without dashes, at
/// most 32 characters (the in-tree name every provider could fall back to).
pub(crate) fn default_load_balancer_name(service: &Service) -> Result<String, CaseError> {
    let uid = service
        .metadata
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CaseError::failed("the Service has no uid yet"))?;
    let mut name = format!("a{}", uid.replace('-', ""));
    truncate(&mut name, 32);
    Ok(name)
}

/// Cuts `s` to at most `max` bytes.
pub(crate) fn truncate(s: &mut String, max: usize) {
    while s.len() > max {
        s.pop();
    }
}

/// `namespace/name` of a Service.
pub(crate) fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What a journal entry was, in the terms cases ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A lookup of instances (Nova `GET /servers…`, EC2 `DescribeInstances`, vSphere
    /// SearchIndex `Find*`).
    InstanceLookup,
    /// A change to the cluster's routes.
    RouteWrite,
    /// A call to the load-balancer API.
    LoadBalancer(LbOp),
    /// A call to another API that a load-balancer ensure makes (Neutron ports and floating
    /// IPs, EC2 security groups and subnets).
    LoadBalancerSupport,
    /// Anything else (authentication, other reads).
    Other,
}

/// A load-balancer API call's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbOp {
    /// Creates a load balancer (Octavia `POST /lbaas/loadbalancers`, ELB/ELBv2
    /// `CreateLoadBalancer`).
    Create,
    /// Deletes a load balancer.
    Delete,
    /// Changes its backends (Octavia's batch member update, ELB/ELBv2 instance and target
    /// (de)registration).
    BackendWrite,
    /// Any other write (listeners, pools, health checks, attributes).
    OtherWrite,
    Read,
}

impl LbOp {
    pub fn is_write(self) -> bool {
        !matches!(self, LbOp::Read)
    }
}

/// One journal entry as a case sees it.
#[derive(Debug, Clone)]
pub struct CloudCall {
    pub seq: u64,
    pub time: jiff::Timestamp,
    pub kind: CallKind,
    /// The answer's HTTP status.
    pub status: u16,
    /// Whether an injected fault produced or delayed the answer.
    pub faulted: bool,
    /// Identifiers the call names (ids, names, ARNs in its path and parameters), for
    /// telling which load balancer it was about.
    pub refs: Vec<String>,
}

impl CloudCall {
    /// `e` read as a call of `kind` naming `refs`.
    pub(crate) fn of(e: &JournalEntry, kind: CallKind, refs: Vec<String>) -> Self {
        CloudCall {
            seq: e.seq,
            time: e.time,
            kind,
            status: e.status,
            faulted: e.fault.is_some(),
            refs,
        }
    }

    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn lb_op(&self) -> Option<LbOp> {
        match self.kind {
            CallKind::LoadBalancer(op) => Some(op),
            _ => None,
        }
    }
}

/// Splits text from a path or form into whole tokens (`web-1` never matches `web-10`).
pub(crate) fn tokens(text: &str) -> Vec<String> {
    text.split(['/', '?', '&', '='])
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// One load balancer's update as the cloud journal shows it ([`CloudControl::lb_updates_since`]).
#[derive(Debug, Clone)]
pub struct LbUpdate {
    /// First and last load-balancer call attributed to this load balancer.
    pub start: jiff::Timestamp,
    pub end: jiff::Timestamp,
    /// Backend writes (member/target/instance registrations).
    pub writes: usize,
}

/// A hold on load-balancer creates; see [`CloudControl::hold_load_balancer_creates`].
pub struct CreateHold {
    faults: mock_cloud::Faults,
    rule: u64,
}

impl CreateHold {
    pub(crate) fn new(faults: mock_cloud::Faults, rule: u64) -> Self {
        Self { faults, rule }
    }

    /// How many creates have been held so far (the CCM is inside the first once this is 1).
    pub fn held(&self) -> u64 {
        self.faults
            .list()
            .iter()
            .find(|r| r.id == self.rule)
            .map(|r| r.fired)
            .unwrap_or(0)
    }

    /// Lets later creates through at once (one already held still waits its time).
    pub fn release(self) {
        let _ = self.faults.remove(self.rule);
    }
}

/// Lists `(identity, name)` of every load balancer, from any task.
pub(crate) type LbLister = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// A cheap handle on a cloud's load balancers and journal that another task can keep
/// polling ([`crate::invariants::Recorder`]); see [`CloudControl::observer`].
#[derive(Clone)]
pub struct CloudObserver {
    journal: Journal,
    classify: fn(&JournalEntry) -> CloudCall,
    lbs: LbLister,
}

impl CloudObserver {
    /// `(identity, name)` of every load balancer; the identity changes when a load
    /// balancer is recreated under the same name.
    pub fn load_balancers(&self) -> Vec<(String, String)> {
        (self.lbs)()
    }

    /// The journal's last sequence number, a mark for [`Self::calls_since`].
    pub fn mark(&self) -> u64 {
        self.journal.last_seq()
    }

    pub fn calls_since(&self, mark: u64) -> Vec<CloudCall> {
        self.journal.since(mark).iter().map(self.classify).collect()
    }
}

/// What each cloud implements (one file each in this folder). Defaults are "the cloud has
/// no such thing".
pub(crate) trait Backend: Send + Sync {
    fn provider(&self) -> Provider;
    /// Whether this cloud can express `feature`; `Err` says precisely why not.
    fn supports(&self, feature: Feature) -> Result<(), String>;
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError>;
    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("127.20.9.{}", 9 - i % 9)).collect()
    }
    fn alternate_provider_id(&self, _instance: &Instance) -> Option<String> {
        None
    }
    fn ready_info(&self) -> serde_json::Value;
    fn cloud_config(&self) -> String;
    fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        None
    }
    fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String>;
    fn resolve_ingress(&self, _hostname: &str) -> Option<String> {
        None
    }
    fn udp_service_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn implemented_elsewhere_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn additional_labels_flag(&self, _labels: &[String]) -> Option<String> {
        None
    }
    fn ccm_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Whether load balancers deliver with the frontend address as destination (floating
    /// IP), so nodes must serve Service ports too (`mock_kubelet::KubeletConfig::floating_ip`).
    fn load_balancers_use_floating_ip(&self) -> bool {
        false
    }
    /// Whether every Service's load balancer shares one set of backends, so a node change
    /// is one backend write for all of them (Azure's per-cluster backend pool).
    fn load_balancers_share_backends(&self) -> bool {
        false
    }
    fn region(&self) -> String;

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError>;
    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError>;
    fn delete_instance(&self, id: &str) -> Result<(), CaseError>;
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError>;
    fn finish_reboot(&self, id: &str) -> Result<(), CaseError>;
    fn rebooting(&self, id: &str) -> bool;
    fn instance_by_name(&self, name: &str) -> Option<Instance>;
    fn instances(&self) -> Vec<Instance>;

    fn inject(&self, fault: FaultSpec) -> u64;
    fn faults(&self) -> mock_cloud::Faults;

    fn routes(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn add_route(&self, _destination: &str, _nexthop: &str) -> Result<(), CaseError> {
        Err(CaseError::Skipped(format!(
            "{} cannot express it: the cloud provider implements no routes",
            self.provider().name()
        )))
    }

    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        Vec::new()
    }
    /// `(identity, name)` per load balancer for [`CloudObserver`]; `None` when the
    /// harness cannot watch this cloud's load balancers.
    fn load_balancer_lister(&self) -> Option<LbLister> {
        None
    }
    /// Identifiers that name each load balancer in calls, by load-balancer id.
    fn load_balancer_refs(&self) -> Vec<(String, Vec<String>)> {
        self.load_balancers()
            .into_iter()
            .map(|lb| (lb.id.clone(), vec![lb.id, lb.name]))
            .collect()
    }
    /// Whether [`CloudControl::load_balancer_call_times`] is known for this cloud.
    fn times_load_balancer_calls(&self) -> bool {
        false
    }
    fn hold_load_balancer_creates(&self, _latency: Duration) -> Option<CreateHold> {
        None
    }
    fn slow_load_balancers(&self, _reads: u32) -> Result<(), CaseError> {
        Err(CaseError::Skipped(format!(
            "no slow load-balancer lifecycle for provider {}",
            self.provider().name()
        )))
    }
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        let provider = self.provider().name();
        Box::pin(async move {
            Err(CaseError::Skipped(format!(
                "the harness cannot delete a {provider} load balancer out of band yet"
            )))
        })
    }
    fn in_tree_load_balancer_name(
        &self,
        _scheme: InTreeName,
        _cluster: &str,
        _service: &Service,
    ) -> Result<String, CaseError> {
        Err(CaseError::Skipped(format!(
            "no in-tree load-balancer seeding for provider {}",
            self.provider().name()
        )))
    }
    fn seed_in_tree_load_balancer<'a>(
        &'a self,
        _name: &'a str,
        _cluster: &'a str,
        _service: &'a Service,
        _nodes: &'a [Instance],
    ) -> BoxFuture<'a, Result<InTreeLoadBalancer, CaseError>> {
        let provider = self.provider().name();
        Box::pin(async move {
            Err(CaseError::Skipped(format!(
                "no in-tree load-balancer seeding for provider {provider}"
            )))
        })
    }

    /// Every resource the CCM created through the cloud API that still exists.
    fn leaks(&self) -> Vec<String>;
    fn journal(&self) -> Journal;
    /// How this cloud's journal entries read as [`CloudCall`]s.
    fn classifier(&self) -> fn(&JournalEntry) -> CloudCall;
    /// One journal entry as a line of a failure's detail.
    /// Default: the REST form (service, method, path and query, status).
    fn journal_line(&self, e: &JournalEntry) -> String {
        format!(
            "{} {} {} {}?{} -> {}",
            e.seq, e.service, e.method, e.path, e.query, e.status
        )
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// A running mock cloud.
pub struct CloudControl {
    backend: Box<dyn Backend>,
    /// Its /24 of the address pools, held until the cloud is gone.
    block: address_block::AddressBlock,
}

impl CloudControl {
    pub async fn start(provider: Provider, seeded_nodes: usize) -> Result<Self, CaseError> {
        let block = address_block::take();
        let address_block = block.index;
        let backend: Box<dyn Backend> = match provider {
            Provider::OpenStack => {
                Box::new(openstack::OpenStack::start(seeded_nodes, address_block).await?)
            }
            Provider::Aws => Box::new(aws::Aws::start(seeded_nodes, address_block).await?),
            // Nodes are VMs the cases create; the mock seeds none.
            Provider::Vsphere => Box::new(vsphere::VsphereCloud::start(address_block).await?),
            Provider::Azure => Box::new(azure::Azure::start(seeded_nodes, address_block).await?),
            Provider::Gcp => Box::new(gcp::Gcp::start(seeded_nodes, address_block).await?),
        };
        Ok(Self { backend, block })
    }

    pub fn provider(&self) -> Provider {
        self.backend.provider()
    }

    /// Its /24 index in the 127/8 address pools, unique on the machine while it runs.
    pub fn address_block(&self) -> u8 {
        self.block.index
    }

    /// Whether this cloud can express `feature`; `Err` says precisely why not.
    pub fn supports(&self, feature: Feature) -> Result<(), String> {
        self.backend.supports(feature)
    }

    /// Whether the cloud's load balancers deliver packets with the frontend address as
    /// destination (Azure's floating IP), so the simulated kube-proxy serves Service ports.
    pub fn load_balancers_use_floating_ip(&self) -> bool {
        self.backend.load_balancers_use_floating_ip()
    }

    /// Whether every Service's load balancer shares one set of backends (Azure: one backend
    /// pool per cluster, joined by each node's NIC), so a node change is one backend write
    /// for all Services rather than one per Service.
    pub fn load_balancers_share_backends(&self) -> bool {
        self.backend.load_balancers_share_backends()
    }

    /// [`Self::supports`] as a case precondition: a skip with the reason when unsupported.
    pub fn require(&self, feature: Feature) -> Result<(), CaseError> {
        self.supports(feature).map_err(|why| {
            CaseError::Skipped(format!(
                "{} cannot express it: {why}",
                self.provider().name()
            ))
        })
    }

    /// `n` IPv4 addresses the cloud accepts as internal IPs of a new instance (in its
    /// default zone), none of them in use: for cases that need to name addresses upfront.
    pub fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        self.backend.spare_internal_ips(n)
    }

    /// `n` addresses the cloud accepts as new external IPs of an instance, none in use
    /// (127/8 where the data plane needs them bound; vSphere's are not loopback, see
    /// [`vsphere::INTERNAL_SUBNETS`]).
    pub fn spare_external_ips(&self, n: usize) -> Vec<String> {
        self.backend.spare_external_ips(n)
    }

    /// A providerID naming `instance` in a form its provider accepts but its CCM would not
    /// compute itself, where the generic `<name>://<region>/<id>` is not one (NI-07).
    pub fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        self.backend.alternate_provider_id(instance)
    }

    /// The ready-file object of DESIGN.md for this mock.
    pub fn ready_info(&self) -> serde_json::Value {
        self.backend.ready_info()
    }

    /// The provider's upstream cloud-config file pointing at this mock.
    pub fn cloud_config(&self) -> String {
        self.backend.cloud_config()
    }

    /// How a dual-stack cluster deploys this provider's CCM when it differs from
    /// [`Self::cloud_config`]: the config and extra CCM environment (`None`: no difference).
    pub fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        self.backend.dual_stack_deployment()
    }

    /// A cloud config that names the Secret `namespace/name` for its credentials instead of
    /// holding them, and the data that Secret needs; `Err` says why the provider's CCM has
    /// no such setting.
    pub fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        self.backend.secret_credentials_config(namespace, name)
    }

    /// The address a load balancer's ingress hostname stands for in this cloud (AWS ELB
    /// DNS names resolve to their data-plane VIP); `None` when unknown.
    pub fn resolve_ingress(&self, hostname: &str) -> Option<String> {
        self.backend.resolve_ingress(hostname)
    }

    /// Annotations a Service of UDP ports needs for this cloud's CCM to make a load
    /// balancer that carries UDP (AWS: an NLB; classic ELBs carry no UDP).
    pub fn udp_service_annotations(&self) -> BTreeMap<String, String> {
        self.backend.udp_service_annotations()
    }

    /// Annotations that make the provider leave a Service's load balancer to another
    /// controller (`ImplementedElsewhere`); a skip where the provider has none
    /// ([`Feature::ImplementedElsewhere`]).
    pub fn implemented_elsewhere_annotations(&self) -> Result<BTreeMap<String, String>, CaseError> {
        self.require(Feature::ImplementedElsewhere)?;
        Ok(self.backend.implemented_elsewhere_annotations())
    }

    /// The flag with which this provider's CCM returns `labels` as AdditionalLabels, where
    /// it has one (vSphere's `--node-labels`); `None`: the provider has no such setting.
    pub fn additional_labels_flag(&self, labels: &[String]) -> Option<String> {
        self.backend.additional_labels_flag(labels)
    }

    /// Environment variables the CCM process needs for this cloud.
    pub fn ccm_env(&self) -> Vec<(String, String)> {
        self.backend.ccm_env()
    }

    pub fn region(&self) -> String {
        self.backend.region()
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        self.backend.create_instance(spec)
    }

    pub fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        self.backend.update_instance(id, patch)
    }

    pub fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.backend.delete_instance(id)
    }

    /// Starts rebooting an instance as its cloud's reboot call would, and holds it in the
    /// rebooting phase until [`Self::finish_reboot`], so a case can watch the CCM during
    /// the window instead of racing it (each backend documents what its cloud shows).
    pub fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.backend.begin_reboot(id)
    }

    /// Ends a reboot [`Self::begin_reboot`] holds: the instance is up as before.
    pub fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.backend.finish_reboot(id)
    }

    /// Whether the cloud shows the instance as rebooting (always false on AWS, where a
    /// reboot is invisible).
    pub fn rebooting(&self, id: &str) -> bool {
        self.backend.rebooting(id)
    }

    pub fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.backend.instance_by_name(name)
    }

    pub fn instances(&self) -> Vec<Instance> {
        self.backend.instances()
    }

    /// Injects `fault` in the cloud's own terms; returns the rule's id.
    pub fn inject(&self, fault: FaultSpec) -> u64 {
        self.backend.inject(fault)
    }

    /// The cloud's fault engine, for rules beyond [`FaultSpec`] (the soak's presets).
    pub fn faults(&self) -> mock_cloud::Faults {
        self.backend.faults()
    }

    pub fn clear_faults(&self) {
        self.backend.faults().clear()
    }

    /// The routes of the cluster's router as `(destination, nexthop)`.
    pub fn routes(&self) -> Vec<(String, String)> {
        self.backend.routes()
    }

    /// Adds a route the CCM does not own (another tool's), to check it is left alone.
    pub fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        self.backend.add_route(destination, nexthop)
    }

    /// Every load balancer in the cloud.
    pub fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        self.backend.load_balancers()
    }

    /// Every resource the CCM created through the cloud API that still exists, as
    /// `type name` lines: empty after a clean teardown.
    pub fn leaks(&self) -> Vec<String> {
        self.backend.leaks()
    }

    /// Deletes load balancer `id` with the cloud's own API, as an operator would (the
    /// journal records it like any client's call); skips where the harness cannot.
    pub async fn delete_load_balancer_out_of_band(&self, id: &str) -> Result<(), CaseError> {
        self.backend.delete_load_balancer_out_of_band(id).await
    }

    /// Makes the cloud hold every load-balancer create for `latency` before answering, so a
    /// case can act while the CCM is inside its ensure; `None` where the cloud has no such
    /// hold (OpenStack has Octavia's PENDING states instead, [`Self::slow_load_balancers`]).
    pub fn hold_load_balancer_creates(&self, latency: Duration) -> Option<CreateHold> {
        self.backend.hold_load_balancer_creates(latency)
    }

    /// Makes the cloud's load balancers slow: each change stays pending for `reads` status
    /// reads (Octavia's PENDING_* states), so a case can act while the CCM is mid-ensure.
    pub fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.require(Feature::LoadBalancers)?;
        self.backend.slow_load_balancers(reads)
    }

    /// The load-balancer name the in-tree provider gave `service` in a cluster named
    /// `cluster`.
    pub fn in_tree_load_balancer_name(
        &self,
        scheme: InTreeName,
        cluster: &str,
        service: &Service,
    ) -> Result<String, CaseError> {
        self.backend
            .in_tree_load_balancer_name(scheme, cluster, service)
    }

    /// Creates the load balancer named `name` that the in-tree provider made for `service`
    /// in cluster `cluster` (which must exist, so its node ports are allocated), in the
    /// cloud's own way (each backend documents it). The caller puts
    /// [`InTreeLoadBalancer::ingress`] in the Service's status.
    pub async fn seed_in_tree_load_balancer(
        &self,
        name: &str,
        cluster: &str,
        service: &Service,
        nodes: &[Instance],
    ) -> Result<InTreeLoadBalancer, CaseError> {
        self.backend
            .seed_in_tree_load_balancer(name, cluster, service, nodes)
            .await
    }

    /// A handle another task can poll for the load balancers and the journal; `None` where
    /// the harness cannot watch this cloud's load balancers.
    pub fn observer(&self) -> Option<CloudObserver> {
        let lbs = self.backend.load_balancer_lister()?;
        Some(CloudObserver {
            journal: self.backend.journal(),
            classify: self.backend.classifier(),
            lbs,
        })
    }

    /// The journal's last sequence number: a mark for [`Self::calls_since`].
    pub fn journal_mark(&self) -> u64 {
        self.backend.journal().last_seq()
    }

    /// The journal lines of the calls after `mark` that an injected fault answered or
    /// delayed, oldest first.
    pub fn faulted_lines_since(&self, mark: u64) -> Vec<String> {
        self.backend
            .journal()
            .since(mark)
            .iter()
            .filter(|e| e.fault.is_some())
            .map(|e| format!("{} {}", e.time, self.backend.journal_line(e)))
            .collect()
    }

    /// Every call the cloud answered after `mark`, classified.
    pub fn calls_since(&self, mark: u64) -> Vec<CloudCall> {
        let classify = self.backend.classifier();
        self.backend
            .journal()
            .since(mark)
            .iter()
            .map(classify)
            .collect()
    }

    fn count(&self, wanted: impl Fn(&CloudCall) -> bool) -> usize {
        let classify = self.backend.classifier();
        self.backend.journal().count(|e| wanted(&classify(e)))
    }

    /// How many calls the CCM made to look up instances (any status), so cases can bound
    /// retries ("no hot loop").
    pub fn instance_lookups(&self) -> usize {
        self.count(|c| c.kind == CallKind::InstanceLookup)
    }

    /// How many calls were answered (or delayed) by an injected fault.
    pub fn faulted_calls(&self) -> usize {
        self.backend.journal().count(|e| e.fault.is_some())
    }

    /// Writes the CCM made to routes.
    pub fn route_writes(&self) -> usize {
        self.count(|c| c.kind == CallKind::RouteWrite)
    }

    /// Calls the CCM made to the load-balancer API (any method), to assert "no cloud call".
    pub fn load_balancer_calls(&self) -> usize {
        self.count(|c| c.lb_op().is_some())
    }

    /// Load-balancer API writes the CCM made.
    pub fn load_balancer_writes(&self) -> usize {
        self.count(|c| c.lb_op().is_some_and(LbOp::is_write))
    }

    /// Calls a load-balancer sync makes: to the load-balancer API and the APIs it needs
    /// beside it (ports, floating IPs, security groups).
    pub fn load_balancer_related_calls(&self) -> usize {
        self.count(|c| {
            matches!(
                c.kind,
                CallKind::LoadBalancer(_) | CallKind::LoadBalancerSupport
            )
        })
    }

    /// When the CCM called the cloud's load-balancer API (any method), oldest first; `None`
    /// for a provider whose calls the harness does not time.
    pub fn load_balancer_call_times(&self) -> Option<Vec<jiff::Timestamp>> {
        if !self.backend.times_load_balancer_calls() {
            return None;
        }
        Some(
            self.calls_since(0)
                .into_iter()
                .filter(|c| c.lb_op().is_some())
                .map(|c| c.time)
                .collect(),
        )
    }

    /// Load-balancer calls after `mark`, grouped per load balancer (by the ids and names
    /// each call names), keeping the load balancers that got a backend write.
    pub fn lb_updates_since(&self, mark: u64) -> Vec<LbUpdate> {
        let keys = self.backend.load_balancer_refs();
        let mut spans: BTreeMap<String, LbUpdate> = BTreeMap::new();
        for call in self.calls_since(mark) {
            let Some(op) = call.lb_op() else { continue };
            let Some((id, _)) = keys.iter().find(|(_, k)| {
                k.iter()
                    .any(|k| !k.is_empty() && call.refs.iter().any(|r| r == k))
            }) else {
                continue;
            };
            let span = spans.entry(id.clone()).or_insert(LbUpdate {
                start: call.time,
                end: call.time,
                writes: 0,
            });
            span.start = span.start.min(call.time);
            span.end = span.end.max(call.time);
            span.writes += usize::from(op == LbOp::BackendWrite);
        }
        spans.into_values().filter(|u| u.writes > 0).collect()
    }

    /// A compact journal dump for failure details.
    pub fn journal_text(&self, last: usize) -> String {
        let entries = self.backend.journal().entries();
        entries[entries.len().saturating_sub(last)..]
            .iter()
            .map(|e| self.backend.journal_line(e))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The whole journal, one timestamped line per request (the case's
    /// `cloud-journal.txt`).
    pub fn journal_dump(&self) -> String {
        self.backend
            .journal()
            .entries()
            .iter()
            .map(|e| format!("{} {}\n", e.time, self.backend.journal_line(e)))
            .collect()
    }

    pub async fn shutdown(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.backend.shutdown()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn vsphere_has_no_load_balancers_or_routes() {
        crate::install_crypto_provider();
        let cloud = CloudControl::start(Provider::Vsphere, 0).await.unwrap();
        for f in [
            Feature::LoadBalancers,
            Feature::Routes,
            Feature::DualStackRoutes,
        ] {
            let why = cloud.supports(f).unwrap_err();
            assert!(
                why.contains("cloud-provider-vsphere returns false"),
                "{why}"
            );
        }
        assert!(matches!(
            cloud.require(Feature::LoadBalancers),
            Err(CaseError::Skipped(_))
        ));
        cloud.supports(Feature::NoZone).unwrap();
        assert!(cloud.observer().is_none());
        assert!(cloud.load_balancer_call_times().is_none());
        cloud.shutdown().await;
    }

    #[test]
    fn tokens_are_whole() {
        assert_eq!(
            tokens("/lbaas/pools/p1/members?name=web-1&x="),
            ["lbaas", "pools", "p1", "members", "name", "web-1", "x"]
        );
    }
}
