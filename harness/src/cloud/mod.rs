//! One face for every mock cloud, so cases are written once and run per provider: create,
//! change and delete instances, inject faults, count the CCM's calls, and know what a
//! provider's CCM should report (providerID format, region, config file).
//!
//! OpenStack, AWS and vSphere (the vSphere translation lives in [`vsphere`]).

use std::collections::BTreeMap;
use std::time::Duration;

use mock_openstack::{Config as OsConfig, OpenStackMock, ServerInfo, ServerPatch, ServerSpec};

use crate::case::CaseError;

pub mod vsphere;
pub use vsphere::VsphereCloud;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    OpenStack,
    Aws,
    Vsphere,
}

impl Provider {
    /// The providers run by default (`CCM_CONFORMANCE_PROVIDERS` / `--provider` pick others).
    pub fn all() -> &'static [Provider] {
        &[Provider::OpenStack, Provider::Aws, Provider::Vsphere]
    }

    /// The name used by `--cloud-provider`, in case names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenStack => "openstack",
            Provider::Aws => "aws",
            Provider::Vsphere => "vsphere",
        }
    }

    pub fn parse(s: &str) -> Result<Provider, String> {
        match s.trim() {
            "openstack" => Ok(Provider::OpenStack),
            "aws" => Ok(Provider::Aws),
            "vsphere" => Ok(Provider::Vsphere),
            other => Err(format!(
                "unknown provider {other:?} (known: openstack, aws, vsphere)"
            )),
        }
    }

    /// A comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<Provider>, String> {
        let mut out = Vec::new();
        for p in s.split(',').filter(|p| !p.trim().is_empty()) {
            let p = Provider::parse(p)?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }
}

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

/// Each mock started in this process gets its own /24 in the 127/8 pools, so cases running
/// in parallel never bind the same load-balancer or node address. The sequence starts at a
/// point taken from the process id, so two test processes on one machine (a benchmark next
/// to `cargo test`) start far apart instead of both at block 0.
fn next_address_block() -> u8 {
    static NEXT: std::sync::OnceLock<std::sync::atomic::AtomicU8> = std::sync::OnceLock::new();
    NEXT.get_or_init(|| std::sync::atomic::AtomicU8::new((std::process::id() % 251) as u8))
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A running mock cloud.
pub enum CloudControl {
    OpenStack(OpenStackMock),
    Aws(AwsMock),
    Vsphere(VsphereCloud),
}

impl CloudControl {
    pub async fn start(provider: Provider, seeded_nodes: usize) -> Result<Self, CaseError> {
        match provider {
            Provider::OpenStack => {
                let config = OsConfig {
                    nodes: seeded_nodes,
                    address_block: next_address_block(),
                    ..OsConfig::default()
                };
                let mock = OpenStackMock::start(config)
                    .await
                    .map_err(|e| CaseError::infra("starting mock OpenStack", e))?;
                Ok(CloudControl::OpenStack(mock))
            }
            Provider::Aws => Ok(CloudControl::Aws(
                AwsMock::start(seeded_nodes, next_address_block()).await?,
            )),
            // Nodes are VMs the cases create; the mock seeds none.
            Provider::Vsphere => Ok(CloudControl::Vsphere(
                VsphereCloud::start(next_address_block()).await?,
            )),
        }
    }

    /// Whether this cloud can express `feature`; `Err` says precisely why not.
    pub fn supports(&self, feature: Feature) -> Result<(), String> {
        match (self, feature) {
            // Dual-stack routes too: cloud-provider-openstack pkg/openstack/routes.go routes
            // each pod CIDR via the node address of its family, and the mock router takes
            // IPv6 extraroutes via its fd00::/64 interface (mocks/openstack neutron_l3.rs).
            (CloudControl::OpenStack(_), _) => Ok(()),
            // kubernetes/cloud-provider-aws pkg/providers/v1/aws_routes.go sends every pod
            // CIDR as DestinationCidrBlock (IPv4 only) and lists only DestinationCidrBlock.
            (CloudControl::Aws(_), Feature::DualStackRoutes) => Err(
                "upstream cloud-provider-aws cannot route an IPv6 pod CIDR (aws_routes.go sends it as DestinationCidrBlock, never DestinationIpv6CidrBlock)".into(),
            ),
            // EC2 places every instance in a subnet, and every subnet in one zone.
            (CloudControl::Aws(_), Feature::NoZone) => Err(
                "every EC2 instance has an availability zone (placement.availabilityZone)".into(),
            ),
            // A VPC instance keeps its primary private IP and private DNS name for life,
            // so cloud-provider-aws always reports at least InternalIP and InternalDNS.
            (CloudControl::Aws(_), Feature::NoAddresses) => Err(
                "an EC2 instance always has its primary private IP and private DNS name".into(),
            ),
            // cloud-provider-aws pkg/providers/v1/aws.go reports IPv6 addresses only with
            // [Global] NodeIPFamilies including ipv6, which the harness's config sets.
            (CloudControl::Aws(_), Feature::DualStackAddresses) => Ok(()),
            (
                CloudControl::Aws(_),
                Feature::LoadBalancers
                | Feature::Routes
                | Feature::SeparateExternalAddresses
                | Feature::UdpLoadBalancers,
            ) => Ok(()),
            // kubernetes/cloud-provider-vsphere pkg/cloudprovider/vsphere/cloud.go: without
            // NSX-T (not modelled here) LoadBalancer() and Routes() return false.
            (
                CloudControl::Vsphere(_),
                Feature::LoadBalancers | Feature::UdpLoadBalancers,
            ) => Err(
                "the vSphere cloud provider implements no load balancer (cloud-provider-vsphere returns false from LoadBalancer())".into(),
            ),
            (CloudControl::Vsphere(_), Feature::Routes | Feature::DualStackRoutes) => Err(
                "the vSphere cloud provider implements no routes (cloud-provider-vsphere returns false from Routes())".into(),
            ),
            // A host without zone tag; a VM whose Tools report nothing; guest IPv6 addresses;
            // an external IP apart from the internal ones (the harness's vsphere.conf sets
            // `nodes` internal/external subnets, pkg/cloudprovider/vsphere/nodemanager.go).
            (
                CloudControl::Vsphere(_),
                Feature::NoZone
                | Feature::NoAddresses
                | Feature::DualStackAddresses
                | Feature::SeparateExternalAddresses,
            ) => Ok(()),
        }
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
        match self {
            // The mock OpenStack takes any address on its network.
            CloudControl::OpenStack(_) => Ok((1..=n).map(|i| format!("127.10.9.{i}")).collect()),
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .free_private_ips(None, n)
                .map(|ips| ips.into_iter().map(|ip| ip.to_string()).collect())
                .map_err(|e| CaseError::infra("picking private IPs in mock AWS", e)),
            CloudControl::Vsphere(m) => Ok(m.spare_internal_ips(n)),
        }
    }

    /// `n` addresses the cloud accepts as new external IPs of an instance, none in use
    /// (127/8 where the data plane needs them bound; vSphere's are not loopback, see
    /// [`vsphere::INTERNAL_SUBNETS`]).
    pub fn spare_external_ips(&self, n: usize) -> Vec<String> {
        match self {
            CloudControl::OpenStack(_) | CloudControl::Aws(_) => {
                (0..n).map(|i| format!("127.20.9.{}", 9 - i % 9)).collect()
            }
            CloudControl::Vsphere(m) => m.spare_external_ips(n),
        }
    }

    /// A providerID naming `instance` in a form its provider accepts but its CCM would not
    /// compute itself, where the generic `<name>://<region>/<id>` is not one (NI-07):
    /// vSphere's BIOS UUID in upper case (cloud-provider-vsphere compares UUIDs without
    /// case; `vsphere://<region>/...` is not a vSphere providerID).
    pub fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        match self {
            CloudControl::Vsphere(_) => Some(format!(
                "vsphere://{}",
                instance.system_uuid.to_ascii_uppercase()
            )),
            _ => None,
        }
    }

    pub fn provider(&self) -> Provider {
        match self {
            CloudControl::OpenStack(_) => Provider::OpenStack,
            CloudControl::Aws(_) => Provider::Aws,
            CloudControl::Vsphere(_) => Provider::Vsphere,
        }
    }

    /// The ready-file object of DESIGN.md for this mock.
    pub fn ready_info(&self) -> serde_json::Value {
        match self {
            CloudControl::OpenStack(m) => serde_json::to_value(m.ready_info()).unwrap_or_default(),
            CloudControl::Aws(m) => serde_json::to_value(m.mock.ready_info()).unwrap_or_default(),
            CloudControl::Vsphere(m) => {
                serde_json::to_value(m.mock.ready_info()).unwrap_or_default()
            }
        }
    }

    /// The provider's upstream cloud-config file pointing at this mock.
    pub fn cloud_config(&self) -> String {
        match self {
            CloudControl::OpenStack(m) => {
                let r = m.ready_info();
                // cloud-provider-openstack docs/openstack-cloud-controller-manager: [Global]
                // for auth; [Route] router-id enables routes (used only when the CCM runs
                // with --configure-cloud-routes=true).
                let mut conf = format!(
                    "[Global]\nauth-url = \"{}\"\nusername = \"{}\"\npassword = \"{}\"\ntenant-name = \"{}\"\ndomain-name = \"{}\"\nregion = \"{}\"\n",
                    r.auth_url, r.username, r.password, r.project_name, r.domain_name, r.region
                );
                // The VIP subnet and the external network named, as deployments do:
                // upstream would otherwise derive the subnet from a node's providerID (and
                // fail while nodes have none) and pick an external network itself
                // (cloud-provider-openstack `getSubnetIDForLB`, `getFloatingNetworkIDForLB`).
                let admin = m.admin();
                conf.push_str("\n[LoadBalancer]\n");
                if let Some(subnet) = admin.private_subnet_id() {
                    conf.push_str(&format!("subnet-id = \"{subnet}\"\n"));
                }
                if let Some(net) = admin.external_network_id() {
                    conf.push_str(&format!("floating-network-id = \"{net}\"\n"));
                }
                if let Some(router) = m.admin().routers().first() {
                    conf.push_str(&format!("\n[Route]\nrouter-id = \"{}\"\n", router.id));
                }
                conf
            }
            CloudControl::Aws(m) => m.cloud_config(),
            CloudControl::Vsphere(m) => m.cloud_config(),
        }
    }

    /// How a dual-stack cluster deploys this provider's CCM when it differs from
    /// [`Self::cloud_config`]: the config and extra CCM environment. vSphere reports one IP
    /// family unless told both (`ipFamily`, behind ENABLE_ALPHA_DUAL_STACK); OpenStack and
    /// AWS as the harness configures them report both already (`None`).
    pub fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        match self {
            CloudControl::OpenStack(_) | CloudControl::Aws(_) => None,
            CloudControl::Vsphere(m) => Some((
                m.dual_stack_cloud_config(),
                vec![(vsphere::DUAL_STACK_ENV.to_owned(), "true".to_owned())],
            )),
        }
    }

    /// A cloud config that names the Secret `namespace/name` for its credentials instead of
    /// holding them, and the data that Secret needs; `Err` says why the provider's CCM has
    /// no such setting.
    pub fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        match self {
            CloudControl::Vsphere(m) => Ok(m.secret_cloud_config(namespace, name)),
            CloudControl::OpenStack(_) => Err(
                "cloud-provider-openstack reads its credentials only from the cloud.conf file it is given (pkg/openstack/openstack.go ReadConfig); deployments mount the Secret as that file".into(),
            ),
            CloudControl::Aws(_) => Err(
                "cloud-provider-aws takes credentials from the AWS SDK's default chain (environment, shared files, instance role), never from a Secret".into(),
            ),
        }
    }

    /// The address a load balancer's ingress hostname stands for in this cloud (AWS ELB
    /// DNS names resolve to their data-plane VIP); `None` when unknown.
    pub fn resolve_ingress(&self, hostname: &str) -> Option<String> {
        match self {
            CloudControl::OpenStack(_) | CloudControl::Vsphere(_) => None,
            CloudControl::Aws(m) => m.mock.admin().resolve(hostname).map(|ip| ip.to_string()),
        }
    }

    /// Environment variables the CCM process needs for this cloud (AWS: the mock's static
    /// credentials, as the AWS SDK's environment provider reads them).
    pub fn ccm_env(&self) -> Vec<(String, String)> {
        match self {
            CloudControl::OpenStack(_) | CloudControl::Vsphere(_) => Vec::new(),
            CloudControl::Aws(m) => m.ccm_env(),
        }
    }

    pub fn region(&self) -> String {
        match self {
            CloudControl::OpenStack(m) => m.ready_info().region,
            CloudControl::Aws(m) => m.mock.ready_info().region,
            CloudControl::Vsphere(_) => vsphere::REGION.to_string(),
        }
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        match self {
            CloudControl::OpenStack(m) => {
                let server = m
                    .admin()
                    .create_server(ServerSpec {
                        name: spec.name,
                        az: spec.zone,
                        flavor: spec.instance_type,
                        internal_ips: spec.internal_ips,
                        floating_ips: spec.external_ips,
                        ..Default::default()
                    })
                    .map_err(|e| CaseError::infra("creating server in mock OpenStack", e))?;
                Ok(self.instance(server))
            }
            CloudControl::Aws(m) => m.create_instance(spec),
            CloudControl::Vsphere(m) => m.create_instance(spec),
        }
    }

    pub fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        match self {
            CloudControl::OpenStack(m) => {
                let server = m
                    .admin()
                    .update_server(
                        id,
                        ServerPatch {
                            internal_ips: patch.internal_ips,
                            floating_ips: patch.external_ips,
                            az: patch.zone,
                            // Nova's server states (SHUTOFF is what cloud-provider-openstack
                            // reports as shut down, pkg/openstack/instancesv2.go).
                            status: patch
                                .running
                                .map(|r| if r { "ACTIVE" } else { "SHUTOFF" }.to_string()),
                            ..Default::default()
                        },
                    )
                    .map_err(|e| CaseError::infra("updating server in mock OpenStack", e))?;
                Ok(self.instance(server))
            }
            CloudControl::Aws(m) => m.update_instance(id, patch),
            CloudControl::Vsphere(m) => m.update_instance(id, patch),
        }
    }

    pub fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .delete_server(id)
                .map_err(|e| CaseError::infra("deleting server in mock OpenStack", e)),
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .delete_instance(id)
                .map_err(|e| CaseError::infra("deleting instance in mock AWS", e)),
            CloudControl::Vsphere(m) => m.delete_instance(id),
        }
    }

    /// Starts rebooting an instance as its cloud's reboot call would, and holds it in the
    /// rebooting phase until [`Self::finish_reboot`], so a case can watch the CCM during
    /// the window instead of racing it:
    /// - OpenStack: Nova's soft `reboot` action, status `REBOOT` (then `ACTIVE`);
    /// - AWS: `RebootInstances` leaves the instance `running` with its addresses, so EC2
    ///   shows nothing to hold (the instance must exist and run);
    /// - vSphere: `RebootGuest`, VMware Tools down so `guest.net` is empty while the VM
    ///   stays `poweredOn` (what cloud-provider-vsphere#479 was about).
    pub fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .reboot_server(id, false, true)
                .map(|_| ())
                .map_err(|e| CaseError::infra("rebooting server in mock OpenStack", e)),
            CloudControl::Aws(m) => match m.mock.admin().instance(id) {
                Some(i) if i.state == mock_aws::InstanceState::Running => Ok(()),
                Some(i) => Err(CaseError::failed(format!(
                    "cannot reboot instance {id}: it is {:?}, not running",
                    i.state
                ))),
                None => Err(CaseError::failed(format!("no instance {id} in mock AWS"))),
            },
            CloudControl::Vsphere(m) => m.begin_reboot(id),
        }
    }

    /// Ends a reboot [`Self::begin_reboot`] holds: the instance is up as before.
    pub fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .finish_reboot(id)
                .map(|_| ())
                .map_err(|e| CaseError::infra("finishing a reboot in mock OpenStack", e)),
            CloudControl::Aws(_) => Ok(()),
            CloudControl::Vsphere(m) => m.finish_reboot(id),
        }
    }

    /// Whether the cloud shows the instance as rebooting (always false on AWS, where a
    /// reboot is invisible).
    pub fn rebooting(&self, id: &str) -> bool {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .server(id)
                .is_some_and(|s| matches!(s.status.as_str(), "REBOOT" | "HARD_REBOOT")),
            CloudControl::Aws(_) => false,
            CloudControl::Vsphere(m) => m.rebooting(id),
        }
    }

    pub fn instance_by_name(&self, name: &str) -> Option<Instance> {
        match self {
            CloudControl::OpenStack(m) => m.admin().server_by_name(name).map(|s| self.instance(s)),
            CloudControl::Aws(m) => m.mock.admin().instance_by_name(name).map(|i| m.instance(i)),
            CloudControl::Vsphere(m) => m.instance_by_name(name),
        }
    }

    pub fn instances(&self) -> Vec<Instance> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .servers()
                .into_iter()
                .map(|s| self.instance(s))
                .collect(),
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .instances()
                .into_iter()
                .map(|i| m.instance(i))
                .collect(),
            CloudControl::Vsphere(m) => m.instances(),
        }
    }

    pub fn inject(&self, fault: FaultSpec) -> u64 {
        match (self, fault) {
            (CloudControl::Aws(m), fault) => m.inject(fault),
            (CloudControl::Vsphere(m), fault) => m.inject(fault),
            (
                CloudControl::OpenStack(m),
                FaultSpec::InstanceLookup {
                    instance_id,
                    status,
                    count,
                },
            ) => {
                let path = match instance_id {
                    Some(id) => format!("/servers/{}$", regex::escape(&id)),
                    None => "/servers(/detail)?(/[^/]+)?$".to_string(),
                };
                m.admin().faults().add(mock_cloud::FaultRule {
                    service: Some("compute".into()),
                    method: Some("GET".into()),
                    path: Some(path),
                    status,
                    message: Some("injected by ccm-conformance".into()),
                    count,
                    latency_ms: None,
                })
            }
            (CloudControl::OpenStack(m), FaultSpec::RouteWrite { status, count }) => {
                m.admin().faults().add(mock_cloud::FaultRule {
                    service: Some("network".into()),
                    method: Some("PUT".into()),
                    path: Some("/routers/".into()),
                    status,
                    message: Some("injected by ccm-conformance".into()),
                    count,
                    latency_ms: None,
                })
            }
            (
                CloudControl::OpenStack(m),
                FaultSpec::LoadBalancerWrite {
                    method,
                    status,
                    count,
                },
            ) => m.admin().faults().add(mock_cloud::FaultRule {
                service: Some("load-balancer".into()),
                method: Some(method.into()),
                path: Some("/lbaas/loadbalancers".into()),
                status,
                message: Some("injected by ccm-conformance".into()),
                count,
                latency_ms: None,
            }),
        }
    }

    /// The routes of the cluster's router as `(destination, nexthop)`.
    pub fn routes(&self) -> Vec<(String, String)> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .routers()
                .into_iter()
                .next()
                .map(|r| r.routes)
                .unwrap_or_default(),
            CloudControl::Aws(m) => m.routes(),
            CloudControl::Vsphere(_) => Vec::new(),
        }
    }

    /// Adds a route the CCM does not own (another tool's), to check it is left alone.
    pub fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        match self {
            CloudControl::OpenStack(m) => {
                let router = m
                    .admin()
                    .routers()
                    .into_iter()
                    .next()
                    .ok_or_else(|| CaseError::failed("the mock has no router"))?;
                m.admin()
                    .add_route(&router.id, destination, nexthop)
                    .map_err(|e| CaseError::infra("adding a route", e))
            }
            CloudControl::Aws(m) => m.add_route(destination, nexthop),
            CloudControl::Vsphere(_) => Err(CaseError::Skipped(
                "vsphere cannot express it: the vSphere cloud provider implements no routes".into(),
            )),
        }
    }

    /// Writes the CCM made to routes (any non-GET call on routers).
    pub fn route_writes(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m.admin().journal().count(|e| {
                e.service == "network" && e.method != "GET" && e.path.contains("/routers")
            }),
            CloudControl::Aws(m) => {
                m.count_actions(&["CreateRoute", "DeleteRoute", "ReplaceRoute"])
            }
            CloudControl::Vsphere(_) => 0,
        }
    }

    /// Every load balancer in the cloud.
    pub fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        match self {
            CloudControl::OpenStack(m) => {
                let admin = m.admin();
                admin
                    .load_balancers()
                    .iter()
                    .map(|lb| {
                        let text = |k: &str| {
                            lb.get(k)
                                .and_then(|v| v.as_str())
                                .unwrap_or_default()
                                .to_string()
                        };
                        CloudLoadBalancer {
                            id: text("id"),
                            name: text("name"),
                            vip: admin
                                .floating_ip_of_port(&text("vip_port_id"))
                                .unwrap_or_else(|| text("vip_address")),
                            state: text("provisioning_status"),
                        }
                    })
                    .collect()
            }
            CloudControl::Aws(m) => m.load_balancers(),
            CloudControl::Vsphere(_) => Vec::new(),
        }
    }

    /// Every resource the CCM created through the cloud API that still exists, as
    /// `type name` lines: empty after a clean teardown.
    pub fn leaks(&self) -> Vec<String> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .leaks()
                .by_type
                .iter()
                .flat_map(|(t, items)| items.iter().map(move |i| format!("{t} {}", i.name)))
                .collect(),
            // Instances are created by the harness, never by the CCM.
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .leaks()
                .into_iter()
                .filter(|l| !l.starts_with("instance "))
                .collect(),
            CloudControl::Vsphere(m) => m.leaks(),
        }
    }

    /// Calls the CCM made to the load-balancer API (any method), to assert "no cloud call".
    pub fn load_balancer_calls(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => {
                m.admin().journal().count(|e| e.service == "load-balancer")
            }
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .journal()
                .count(|e| e.service == "elb" || e.service == "elbv2"),
            CloudControl::Vsphere(_) => 0,
        }
    }

    /// Load-balancer API writes (POST, PUT, DELETE) the CCM made.
    pub fn load_balancer_writes(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .journal()
                .count(|e| e.service == "load-balancer" && e.method != "GET"),
            CloudControl::Aws(m) => m.load_balancer_writes(),
            CloudControl::Vsphere(_) => 0,
        }
    }

    pub fn clear_faults(&self) {
        match self {
            CloudControl::OpenStack(m) => m.admin().faults().clear(),
            CloudControl::Aws(m) => m.mock.admin().faults().clear(),
            CloudControl::Vsphere(m) => m.mock.admin().faults().clear(),
        }
    }

    /// How many calls the CCM made to look up instances (any status), so cases can bound
    /// retries ("no hot loop").
    pub fn instance_lookups(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .journal()
                .entries()
                .iter()
                .filter(|e| {
                    e.service == "compute" && e.method == "GET" && e.path.contains("/servers")
                })
                .count(),
            CloudControl::Aws(m) => m.count_actions(&["DescribeInstances"]),
            CloudControl::Vsphere(m) => m.instance_lookups(),
        }
    }

    /// How many lookups were answered with an injected fault.
    pub fn faulted_calls(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .journal()
                .entries()
                .iter()
                .filter(|e| e.fault.is_some())
                .count(),
            CloudControl::Aws(m) => m
                .mock
                .admin()
                .journal()
                .entries()
                .iter()
                .filter(|e| e.fault.is_some())
                .count(),
            CloudControl::Vsphere(m) => m.faulted_calls(),
        }
    }

    /// A compact journal dump for failure details.
    pub fn journal_text(&self, last: usize) -> String {
        match self {
            CloudControl::OpenStack(m) => {
                let entries = m.admin().journal().entries();
                entries[entries.len().saturating_sub(last)..]
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {} {} {}?{} -> {}",
                            e.seq, e.service, e.method, e.path, e.query, e.status
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            CloudControl::Aws(m) => {
                let entries = m.mock.admin().journal().entries();
                entries[entries.len().saturating_sub(last)..]
                    .iter()
                    .map(|e| format!("{} {} {} -> {}", e.seq, e.service, e.query, e.status))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            CloudControl::Vsphere(m) => m.journal_text(last),
        }
    }

    fn instance(&self, s: ServerInfo) -> Instance {
        let region = self.region();
        Instance {
            provider_id: format!("openstack:///{}", s.id),
            id: s.id,
            name: s.name,
            zone: s.az,
            region,
            instance_type: s.flavor,
            internal_ips: s.internal_ips,
            external_ips: s.floating_ips,
            dns_addresses: Vec::new(),
            system_uuid: String::new(),
        }
    }

    pub async fn shutdown(self) {
        match self {
            CloudControl::OpenStack(m) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), m.shutdown()).await;
            }
            CloudControl::Aws(m) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), m.mock.shutdown()).await;
            }
            CloudControl::Vsphere(m) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), m.mock.shutdown()).await;
            }
        }
    }
}

/// The mock AWS with what the harness adds: case zone names mapped to AWS zones.
pub struct AwsMock {
    pub mock: mock_aws::MockAws,
    /// Resolves this mock's ELB DNS names to their VIPs for [`crate::traffic`].
    _resolver: crate::traffic::ResolverGuard,
    /// Case zone name (e.g. `az-2`) -> AWS zone of the mock, assigned on first use.
    zones: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

/// The cluster id the harness's AWS mock tags its resources with (`--cluster-name`).
pub const AWS_CLUSTER_ID: &str = "ccm-conformance";

impl AwsMock {
    pub async fn start(nodes: usize, address_block: u8) -> Result<Self, CaseError> {
        let config = mock_aws::Config {
            nodes,
            address_block,
            cluster_id: AWS_CLUSTER_ID.to_string(),
            imds: true,
            ..Default::default()
        };
        let mock = mock_aws::MockAws::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock AWS", e))?;
        let admin = mock.admin();
        let resolver = crate::traffic::register_resolver(std::sync::Arc::new(move |host: &str| {
            admin.resolve(host).map(std::net::IpAddr::V4)
        }));
        Ok(Self {
            mock,
            _resolver: resolver,
            zones: std::sync::Mutex::new(Default::default()),
        })
    }

    pub fn admin(&self) -> mock_aws::Admin {
        self.mock.admin()
    }

    /// cloud-provider-aws `pkg/providers/v1/config/config.go`: `[Global]` with the zone,
    /// VPC, subnet and cluster id (so no instance metadata is needed) and one
    /// `[ServiceOverride]` per API pointing at the mock.
    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        let admin = self.mock.admin();
        let subnets = admin.subnets();
        let (zone, subnet) = subnets.first().cloned().unwrap_or_default();
        let mut conf = format!(
            "[Global]\nZone = {zone}\nVPC = {}\nSubnetID = {subnet}\nKubernetesClusterID = {AWS_CLUSTER_ID}\n",
            admin.vpc_id()
        );
        // Dual-stack node addresses (IPv4 first), so instances given IPv6 addresses report
        // them; instances without any are unaffected.
        conf.push_str("NodeIPFamilies = ipv4\nNodeIPFamilies = ipv6\n");
        // Service IDs of aws-sdk-go-v2, which upstream matches exactly since v1.31
        // (shared/reference/upstream-builds.md); the instance metadata service too, as
        // upstream reads its identity document at start.
        let services = [
            ("EC2", "ec2"),
            ("Elastic Load Balancing", "elasticloadbalancing"),
            ("Elastic Load Balancing v2", "elasticloadbalancing"),
        ];
        for (i, (service, signing)) in services.iter().enumerate() {
            conf.push_str(&format!(
                "\n[ServiceOverride \"{}\"]\nService = {service}\nRegion = {region}\nURL = {url}\nSigningRegion = {region}\nSigningName = {signing}\n",
                i + 1,
                region = r.region,
                url = r.endpoint,
            ));
        }
        if let Some(imds) = &r.imds_endpoint {
            conf.push_str(&format!(
                "\n[ServiceOverride \"{}\"]\nService = ec2imds\nRegion = {region}\nURL = {imds}\nSigningRegion = {region}\n",
                services.len() + 1,
                region = r.region,
            ));
        }
        conf
    }

    /// Environment the CCM process needs (static credentials of the mock).
    pub fn ccm_env(&self) -> Vec<(String, String)> {
        let r = self.mock.ready_info();
        vec![
            ("AWS_ACCESS_KEY_ID".into(), r.access_key_id),
            ("AWS_SECRET_ACCESS_KEY".into(), r.secret_access_key),
            ("AWS_REGION".into(), r.region),
        ]
    }

    /// The mock zone for a case's zone name: a real zone stays, others get one assigned.
    fn zone_for(&self, wanted: &str) -> Result<String, CaseError> {
        let known: Vec<String> = self
            .mock
            .admin()
            .subnets()
            .into_iter()
            .map(|(z, _)| z)
            .collect();
        if wanted.is_empty() {
            return Err(CaseError::failed(
                "an instance without an availability zone does not exist in AWS",
            ));
        }
        if known.iter().any(|z| z == wanted) {
            return Ok(wanted.to_string());
        }
        let mut map = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(z) = map.get(wanted) {
            return Ok(z.clone());
        }
        // Skip the first zone (the default) so a zone change is visible.
        let z = known
            .iter()
            .cycle()
            .nth(1 + map.len())
            .cloned()
            .ok_or_else(|| CaseError::failed("the mock AWS has no zones"))?;
        map.insert(wanted.to_string(), z.clone());
        Ok(z)
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let zone = spec.zone.as_deref().map(|z| self.zone_for(z)).transpose()?;
        let parse = |s: &str| {
            s.parse::<std::net::Ipv4Addr>()
                .map_err(|e| CaseError::infra(&format!("address {s:?} for mock AWS"), e))
        };
        let (private_ip, secondary_private_ips, ipv6_addresses) = match spec.internal_ips {
            None => (None, Vec::new(), Vec::new()),
            Some(ips) => {
                let (v4, v6) = split_families(&ips)?;
                let mut v4 = v4.into_iter();
                let primary = v4.next();
                if primary.is_none() {
                    return Err(CaseError::failed(
                        "an EC2 instance always has a primary private IPv4 address",
                    ));
                }
                (primary, v4.collect(), v6)
            }
        };
        let (public_ip, public_ip_address) = match spec.external_ips.as_deref() {
            None => (None, None),
            Some([]) => (Some(false), None),
            Some([one]) => (Some(true), Some(parse(one)?)),
            Some(other) => {
                return Err(CaseError::failed(format!(
                    "the AWS mock gives an instance at most one public IP, not {other:?}"
                )));
            }
        };
        let info = self
            .mock
            .admin()
            .create_instance(mock_aws::InstanceSpec {
                // Nodes are named after the instance's private DNS name, as on AWS.
                private_dns_name: Some(spec.name.clone()),
                name: Some(spec.name),
                zone,
                instance_type: spec.instance_type,
                private_ip,
                public_ip,
                public_ip_address,
                secondary_private_ips,
                ipv6_addresses,
                ..Default::default()
            })
            .map_err(|e| CaseError::infra("creating instance in mock AWS", e))?;
        Ok(self.instance(info))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        if patch.zone.is_some() {
            return Err(CaseError::failed(
                "an EC2 instance cannot move to another availability zone",
            ));
        }
        // The primary private IP stays for the instance's life; secondary private IPs and
        // IPv6 addresses can be assigned and unassigned (AssignPrivateIpAddresses).
        let (secondary_private_ips, ipv6_addresses) = match patch.internal_ips {
            None => (None, None),
            Some(ips) => {
                let (v4, v6) = split_families(&ips)?;
                let primary = self
                    .mock
                    .admin()
                    .instance(id)
                    .map(|i| i.private_ip)
                    .ok_or_else(|| CaseError::failed(format!("no instance {id} in mock AWS")))?;
                if v4.first() != Some(&primary) {
                    return Err(CaseError::failed(format!(
                        "an EC2 instance keeps its primary private IP {primary}; asked for {ips:?}"
                    )));
                }
                (Some(v4[1..].to_vec()), Some(v6))
            }
        };
        let (public_ip, public_ip_address) =
            match patch.external_ips.as_deref() {
                None => (None, None),
                Some([]) => (Some(false), None),
                Some([one]) => (
                    Some(true),
                    Some(one.parse::<std::net::Ipv4Addr>().map_err(|e| {
                        CaseError::infra(&format!("address {one:?} for mock AWS"), e)
                    })?),
                ),
                Some(other) => {
                    return Err(CaseError::failed(format!(
                        "the AWS mock gives an instance at most one public IP, not {other:?}"
                    )));
                }
            };
        let info = self
            .mock
            .admin()
            .update_instance(
                id,
                mock_aws::InstancePatch {
                    // cloud-provider-aws reports stopped/stopping as shut down.
                    state: patch.running.map(|r| {
                        if r {
                            mock_aws::InstanceState::Running
                        } else {
                            mock_aws::InstanceState::Stopped
                        }
                    }),
                    public_ip,
                    public_ip_address,
                    secondary_private_ips,
                    ipv6_addresses,
                    ..Default::default()
                },
            )
            .map_err(|e| CaseError::infra("updating instance in mock AWS", e))?;
        Ok(self.instance(info))
    }

    fn instance(&self, i: mock_aws::InstanceInfo) -> Instance {
        let region = self.mock.ready_info().region;
        // The CCM also reports the private DNS name as Hostname; it is the node's name,
        // which the kubelet reports itself ("before the node's own Hostname is kept").
        let mut dns_addresses = vec![("InternalDNS".to_string(), i.private_dns_name.clone())];
        if let Some(ip) = i.public_ip {
            dns_addresses.push(("ExternalDNS".to_string(), public_dns_name(&region, ip)));
        }
        Instance {
            id: i.id,
            name: i.name.unwrap_or_default(),
            zone: i.zone,
            region,
            instance_type: i.instance_type,
            // With NodeIPFamilies ipv4 then ipv6 the AWS CCM reports the private IPv4s, then
            // the first IPv6 of the (one) ENI (aws.go extractIPv6NodeAddresses).
            internal_ips: std::iter::once(&i.private_ip)
                .chain(&i.secondary_private_ips)
                .map(|ip| ip.to_string())
                .chain(i.ipv6_addresses.first().map(|ip| ip.to_string()))
                .collect(),
            external_ips: i.public_ip.iter().map(|p| p.to_string()).collect(),
            provider_id: i.provider_id,
            dns_addresses,
            system_uuid: String::new(),
        }
    }

    /// Faults in AWS terms: instance lookups are `DescribeInstances` (503 answers EC2's
    /// `RequestLimitExceeded`), route writes `CreateRoute`/`DeleteRoute`, load-balancer
    /// writes the ELB/ELBv2 create/modify/delete actions by HTTP-method meaning.
    fn inject(&self, fault: FaultSpec) -> u64 {
        let (service, path, status, count) = match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => {
                let path = match instance_id.and_then(|id| {
                    self.mock
                        .admin()
                        .instance(&id)
                        .map(|i| (id, i.private_dns_name))
                }) {
                    Some((id, dns)) => format!(
                        "^/DescribeInstances/(.*/)?({}|{})(/|$)",
                        regex::escape(&id),
                        regex::escape(&dns)
                    ),
                    None => "^/DescribeInstances(/|$)".to_string(),
                };
                (None, path, status, count)
            }
            FaultSpec::RouteWrite { status, count } => (
                Some("ec2"),
                "^/(CreateRoute|DeleteRoute|ReplaceRoute)(/|$)".to_string(),
                status,
                count,
            ),
            FaultSpec::LoadBalancerWrite {
                method,
                status,
                count,
            } => {
                let actions = match method {
                    "POST" => {
                        "CreateLoadBalancer|CreateLoadBalancerListeners|CreateTargetGroup|CreateListener"
                    }
                    "DELETE" => {
                        "DeleteLoadBalancer|DeleteLoadBalancerListeners|DeleteTargetGroup|DeleteListener"
                    }
                    _ => {
                        "RegisterInstancesWithLoadBalancer|DeregisterInstancesFromLoadBalancer|RegisterTargets|DeregisterTargets|ModifyListener|ModifyTargetGroup|ConfigureHealthCheck"
                    }
                };
                (None, format!("^/({actions})(/|$)"), status, count)
            }
        };
        self.mock.admin().faults().add(mock_cloud::FaultRule {
            service: service.map(str::to_string),
            method: None,
            path: Some(path),
            status,
            message: Some("injected by ccm-conformance".into()),
            count,
            latency_ms: None,
        })
    }

    /// Routes with an instance as target, as (destination, the instance's private IP):
    /// the next hop in the terms the cases use for every cloud.
    fn routes(&self) -> Vec<(String, String)> {
        let admin = self.mock.admin();
        admin
            .routes()
            .into_iter()
            .filter(|(_, _, target)| target.starts_with("i-"))
            .map(|(_, dest, target)| {
                let hop = admin
                    .instance(&target)
                    .map(|i| i.private_ip.to_string())
                    .unwrap_or(target);
                (dest, hop)
            })
            .collect()
    }

    /// A foreign route to the instance whose private IP is `nexthop` (else to `nexthop`
    /// taken as a gateway id).
    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        let admin = self.mock.admin();
        let target = admin
            .instances()
            .into_iter()
            .find(|i| i.private_ip.to_string() == nexthop)
            .map(|i| i.id)
            .unwrap_or_else(|| nexthop.to_string());
        admin
            .add_route(destination, &target)
            .map_err(|e| CaseError::infra("adding a route in mock AWS", e))
    }

    /// Journal entries (any service) whose action is one of `actions`.
    fn count_actions(&self, actions: &[&str]) -> usize {
        self.mock.admin().journal().count(|e| {
            let action = e
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("Action="))
                .unwrap_or_default();
            actions.contains(&action)
        })
    }

    fn load_balancer_writes(&self) -> usize {
        self.mock.admin().journal().count(|e| {
            let action = e
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("Action="))
                .unwrap_or_default();
            (e.service == "elb" || e.service == "elbv2") && !action.starts_with("Describe")
        })
    }

    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        let admin = self.mock.admin();
        let mut out: Vec<CloudLoadBalancer> = admin
            .classic_load_balancers()
            .into_iter()
            .map(|(name, _, vip)| CloudLoadBalancer {
                id: name.clone(),
                name,
                vip: vip.to_string(),
                // Classic ELBs have no provisioning state.
                state: "active".into(),
            })
            .collect();
        out.extend(
            admin
                .elbv2_load_balancers()
                .into_iter()
                .map(|lb| CloudLoadBalancer {
                    id: lb.arn,
                    name: lb.name,
                    vip: lb.vip.to_string(),
                    state: lb.state,
                }),
        );
        out
    }
}

/// Case addresses split into IPv4 and IPv6, in order.
fn split_families(
    ips: &[String],
) -> Result<(Vec<std::net::Ipv4Addr>, Vec<std::net::Ipv6Addr>), CaseError> {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for s in ips {
        match s.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => v4.push(a),
            Ok(std::net::IpAddr::V6(a)) => v6.push(a),
            Err(e) => return Err(CaseError::infra(&format!("address {s:?} for mock AWS"), e)),
        }
    }
    Ok((v4, v6))
}

/// EC2's public DNS name for an address (cloud-apis.md §4.2).
fn public_dns_name(region: &str, ip: std::net::Ipv4Addr) -> String {
    let dashed = ip.to_string().replace('.', "-");
    if region == "us-east-1" {
        format!("ec2-{dashed}.compute-1.amazonaws.com")
    } else {
        format!("ec2-{dashed}.{region}.compute.amazonaws.com")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vsphere_is_a_default_provider() {
        assert_eq!(Provider::parse("vsphere"), Ok(Provider::Vsphere));
        assert_eq!(Provider::Vsphere.name(), "vsphere");
        assert_eq!(
            Provider::all(),
            &[Provider::OpenStack, Provider::Aws, Provider::Vsphere]
        );
        assert!(Provider::parse("gce").unwrap_err().contains("vsphere"));
    }

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
        cloud.shutdown().await;
    }
}
