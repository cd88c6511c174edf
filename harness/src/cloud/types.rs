//! What the harness says to and hears from any cloud: instances to create and change,
//! load balancers as the cloud holds them, the situations a case may need
//! ([`Feature`]) and the faults it may inject ([`FaultSpec`]). Plain data shared by every
//! backend and by the cases, so that neither side knows the other's cloud.

use k8s_openapi::api::core::v1::Service;

use crate::error::CaseError;

/// The `--cluster-name` every CCM under test gets; clouds name what the CCM makes for the
/// cluster after it (load balancers, security groups, routes).
pub const CLUSTER_NAME: &str = "ccm-conformance";

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
/// configures it) can express; see [`CloudControl::supports`](super::CloudControl::supports).
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
    /// [`CloudControl::implemented_elsewhere_annotations`](super::CloudControl::implemented_elsewhere_annotations).
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

/// One load balancer's update as the cloud journal shows it ([`CloudControl::lb_updates_since`](super::CloudControl::lb_updates_since)).
#[derive(Debug, Clone)]
pub struct LbUpdate {
    /// First and last load-balancer call attributed to this load balancer.
    pub start: jiff::Timestamp,
    pub end: jiff::Timestamp,
    /// Backend writes (member/target/instance registrations).
    pub writes: usize,
}

/// A hold on load-balancer creates; see [`CloudControl::hold_load_balancer_creates`](super::CloudControl::hold_load_balancer_creates).
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
