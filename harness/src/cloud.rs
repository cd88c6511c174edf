//! One face for every mock cloud, so cases are written once and run per provider: create,
//! change and delete instances, inject faults, count the CCM's calls, and know what a
//! provider's CCM should report (providerID format, region, config file).
//!
//! Only OpenStack exists so far; AWS and vSphere arrive with their mocks (issue 4).

use std::time::Duration;

use mock_openstack::{Config as OsConfig, OpenStackMock, ServerInfo, ServerPatch, ServerSpec};

use crate::case::CaseError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    OpenStack,
}

impl Provider {
    pub fn all() -> &'static [Provider] {
        &[Provider::OpenStack]
    }

    /// The name used by `--cloud-provider`, in case names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenStack => "openstack",
        }
    }

    pub fn parse(s: &str) -> Result<Provider, String> {
        match s.trim() {
            "openstack" => Ok(Provider::OpenStack),
            "aws" | "vsphere" => Err(format!(
                "provider {s:?} is not available yet (its mock is not built)"
            )),
            other => Err(format!("unknown provider {other:?} (known: openstack)")),
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
    /// The providerID the provider's CCM sets (`openstack:///<id>`).
    pub provider_id: String,
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
        internal.chain(external).collect()
    }
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
    /// The address clients reach it on inside the cloud.
    pub vip: String,
    /// The cloud's provisioning state (e.g. Octavia `ACTIVE`, `PENDING_CREATE`).
    pub state: String,
}

/// Each mock started in this process gets its own /24 in the 127/8 pools, so cases running
/// in parallel never bind the same load-balancer or node address.
fn next_address_block() -> u8 {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A running mock cloud.
pub enum CloudControl {
    OpenStack(OpenStackMock),
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
        }
    }

    pub fn provider(&self) -> Provider {
        match self {
            CloudControl::OpenStack(_) => Provider::OpenStack,
        }
    }

    /// The ready-file object of DESIGN.md for this mock.
    pub fn ready_info(&self) -> serde_json::Value {
        match self {
            CloudControl::OpenStack(m) => serde_json::to_value(m.ready_info()).unwrap_or_default(),
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
                if let Some(router) = m.admin().routers().first() {
                    conf.push_str(&format!("\n[Route]\nrouter-id = \"{}\"\n", router.id));
                }
                conf
            }
        }
    }

    pub fn region(&self) -> String {
        match self {
            CloudControl::OpenStack(m) => m.ready_info().region,
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
        }
    }

    pub fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .delete_server(id)
                .map_err(|e| CaseError::infra("deleting server in mock OpenStack", e)),
        }
    }

    pub fn instance_by_name(&self, name: &str) -> Option<Instance> {
        match self {
            CloudControl::OpenStack(m) => m.admin().server_by_name(name).map(|s| self.instance(s)),
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
        }
    }

    pub fn inject(&self, fault: FaultSpec) -> u64 {
        match (self, fault) {
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
        }
    }

    /// Writes the CCM made to routes (any non-GET call on routers).
    pub fn route_writes(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m.admin().journal().count(|e| {
                e.service == "network" && e.method != "GET" && e.path.contains("/routers")
            }),
        }
    }

    /// Every load balancer in the cloud.
    pub fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
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
                        vip: text("vip_address"),
                        state: text("provisioning_status"),
                    }
                })
                .collect(),
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
        }
    }

    /// Calls the CCM made to the load-balancer API (any method), to assert "no cloud call".
    pub fn load_balancer_calls(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => {
                m.admin().journal().count(|e| e.service == "load-balancer")
            }
        }
    }

    /// Load-balancer API writes (POST, PUT, DELETE) the CCM made.
    pub fn load_balancer_writes(&self) -> usize {
        match self {
            CloudControl::OpenStack(m) => m
                .admin()
                .journal()
                .count(|e| e.service == "load-balancer" && e.method != "GET"),
        }
    }

    pub fn clear_faults(&self) {
        match self {
            CloudControl::OpenStack(m) => m.admin().faults().clear(),
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
        }
    }

    pub async fn shutdown(self) {
        match self {
            CloudControl::OpenStack(m) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), m.shutdown()).await;
            }
        }
    }
}
