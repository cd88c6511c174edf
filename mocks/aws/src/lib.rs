//! A mock AWS (EC2, ELB classic, ELBv2) that unmodified AWS clients — the AWS CCM's
//! aws-sdk-go-v2, boto3, the `aws` CLI, our reference CCM — talk to through
//! `[ServiceOverride]` / `--endpoint-url`, so CCM conformance cases run with no cloud.
//!
//! One listener: the query-protocol endpoint at `/` (EC2, ELB, ELBv2 told apart by `Version`),
//! with SigV4 verified against one configured key pair, and our control API at `/admin`
//! (journal, faults and reset from `mock-cloud`, plus instances and load balancers).
//! Load balancers get a VIP in 127.51.0.0/16 that the data plane (`dataplane`) binds,
//! proxying to the registered instances; [`Admin::resolve`] (`GET /admin/resolve/{name}`)
//! maps a `DNSName` to it. [`Config::address_block`] moves every pool to its own /24 so
//! mocks can run side by side. Intended differences from EC2: an instance may carry a
//! chosen private DNS name and public IP ([`InstanceSpec`]) so hermetic nodes can be named
//! freely. Instances live in 127/8 (private 127.40.0.0/13, public 127.50.0.0/16) so the data plane
//! works without root (DESIGN.md "Data plane").
//!
//! Journal and faults speak AWS terms: an entry's `service` is `ec2`, `elb`, `elbv2` or
//! `admin`, its `path` is `/` and its `query` the request's form with `Action` and
//! `Version` first (`Action=DescribeInstances&Version=2016-11-15&...`); a fault rule's
//! `service` is one of those names and its `path` regex is searched in `/{Action}`
//! followed by `/{value}` for every `InstanceId.N` and filter value (e.g.
//! `"DescribeInstances"`, or `"DescribeInstances/.*i-0abc"` for one instance). Fault statuses map to each service's codes (EC2 503 ->
//! `RequestLimitExceeded`, ELB 400/429 -> `Throttling`, ...).
//! For the fault engine (`mock_cloud::faults`, cloud `aws`) a request's `operation` is its
//! `Action` and its `resource` the first `InstanceId.N`, else the load balancer's name
//! (`LoadBalancerName`, `Name`, `Names.member.1`), else `LoadBalancerArn`; `Describe*`
//! calls count as reads (method `GET`) so `not_found_after_create` applies to them, and
//! RunInstances / CreateLoadBalancer report what they created. `reset` drops the
//! connection; `not_found` answers `InvalidInstanceID.NotFound` / `LoadBalancerNotFound`.
//!
//! # Admin API, by example
//!
//! Every path below is under the `admin_url` of [`ReadyInfo`] (`http://127.0.0.1:PORT/admin`);
//! admin requests are journaled (service `admin`) and never faulted. Errors are
//! `{"error": "..."}` with a 4xx status.
//!
//! **Faults** (`mock_cloud::faults` has every field): make the next two DescribeInstances
//! calls that look up one instance answer EC2's throttling error, then list and clear rules.
//!
//! ```text
//! POST /admin/faults  {"service": "ec2", "operation": "DescribeInstances",
//!                      "resource": "i-0abc1234567890def", "kind": "throttle", "count": 2}
//!   -> 201 {"id": 1}
//!      (the two calls get 503 <Code>RequestLimitExceeded</Code> in EC2's <Response><Errors>)
//! GET /admin/faults     -> 200 {"faults": [{"id": 1, ...}], "seed": 0}
//! DELETE /admin/faults  -> 204
//! ```
//!
//! **Journal**: every request the endpoint answered, in order, with the form in `query`
//! (`Action` and `Version` first); `?since=SEQ` returns only later entries.
//!
//! ```text
//! GET /admin/journal?since=0
//!   -> 200 {"entries": [{"seq": 1, "time": "2026-11-22T08:40:00Z", "service": "ec2",
//!           "method": "POST", "path": "/",
//!           "query": "Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-0abc1234567890def",
//!           "status": 503, "fault": 1}]}
//! DELETE /admin/journal -> 204
//! ```
//!
//! **Leaks**: what the cloud APIs created since the seed and still exists, one
//! `"<kind> <id>"` string each (kinds `instance`, `security-group`, `route`,
//! `load-balancer`, `target-group`); a case that cleaned up after itself sees `[]`.
//!
//! ```text
//! GET /admin/leaks
//!   -> 200 {"leaks": ["security-group sg-0f3e...", "load-balancer a1b2c3...",
//!                     "route rtb-0a1b... 10.244.1.0/24"]}
//! POST /admin/reset -> 204   (journal and faults cleared, cloud back to the seed)
//! ```
//!
//! The same operations in process: [`Admin::faults`], [`Admin::journal`], [`Admin::leaks`],
//! [`Admin::reset`].
//!
//! # Data plane and metadata
//!
//! ELB classic listeners proxy TCP; NLB listeners proxy TCP (TCP, TLS), UDP datagrams
//! (UDP) or both (TCP_UDP) to the target group's instances, health-checked over TCP or
//! HTTP (`dataplane`). With [`Config::imds`], an IMDSv2 listener serves the chosen
//! instance's metadata and its role's temporary credentials ([`Admin::imds_role_credentials`]),
//! which the endpoint accepts with their `X-Amz-Security-Token` (`imds`).
#![forbid(unsafe_code)]

mod admin_api;
mod api;
mod dataplane;
mod ec2;
mod elb;
mod elbv2;
mod error;
mod imds;
mod model;
mod params;
mod sigv4;
mod xml;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::any;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use imds::{ROLE as IMDS_ROLE, RoleCredentials};
pub use mock_cloud::Mode as LifecycleMode;
pub use model::{AdminError, InstanceInfo, InstancePatch, InstanceSpec, InstanceState};
pub use sigv4::sign as sign_request;

use crate::model::Cloud;

/// Request bodies larger than this get a 413 `RequestEntityTooLarge`.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// EC2 actions the endpoint answers.
pub const EC2_ACTIONS: &[&str] = ec2::ACTIONS;
/// ELB classic actions the endpoint answers.
pub const ELB_ACTIONS: &[&str] = elb::ACTIONS;
/// ELBv2 actions the endpoint answers.
pub const ELBV2_ACTIONS: &[&str] = elbv2::ACTIONS;

/// How the mock starts.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    pub region: String,
    /// Availability zones, one subnet each; empty means `<region>a`, `b`, `c`.
    pub zones: Vec<String>,
    /// `kubernetes.io/cluster/<cluster_id>` goes on instances, subnets, route table, VPC.
    pub cluster_id: String,
    /// Instances created at start (and restored by reset), in the first zone, `Name` tag
    /// `{node_name_prefix}{i}`.
    pub nodes: usize,
    pub node_name_prefix: String,
    pub instance_type: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Verify SigV4 on every request (default true). Off, any or no signature passes.
    pub verify_signatures: bool,
    /// Which /24 of the 127/8 address pools this mock uses, so mocks running side by
    /// side (one per parallel case) never hand out the same node or VIP address.
    pub address_block: u8,
    /// Extra instances, fault rules and the ELBv2 lifecycle mode (a seed file; see
    /// [`SeedState`]). Reset puts all of it back.
    pub seed: SeedFile,
    /// Also serve the instance metadata service (IMDSv2) on a second listener, same
    /// address, port chosen by the OS ([`ReadyInfo::imds_endpoint`]); it speaks for the
    /// instance chosen with [`Admin::set_imds_instance`].
    pub imds: bool,
}

/// The AWS `state` of a seed file: instances created after the `nodes` ones, e.g.
/// `{"instances": [{"name": "node-a", "zone": "us-west-2b", "public_ip": false,
/// "secondary_private_ips": ["127.41.0.20"]}]}` (fields as for `POST /admin/instances`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedState {
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
}

/// A seed file for this mock (format in `mock_cloud::seed`). Lifecycle: `default` or
/// `types.loadbalancer` sets how new ELBv2 load balancers leave `provisioning`
/// ([`LIFECYCLE_TYPES`]); per-id modes are refused (ids are not known before start).
pub type SeedFile = mock_cloud::SeedFile<SeedState>;

/// Resource types a seed file's lifecycle modes can name.
pub const LIFECYCLE_TYPES: &[&str] = &["loadbalancer"];

fn random_alnum(len: usize, upper_only: bool) -> String {
    let mut out = String::new();
    while out.len() < len {
        for c in uuid::Uuid::new_v4().simple().to_string().chars() {
            let c = if upper_only {
                c.to_ascii_uppercase()
            } else {
                c
            };
            out.push(c);
        }
    }
    out.truncate(len);
    out
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            region: "us-west-2".to_string(),
            zones: Vec::new(),
            cluster_id: "ccm-conformance".to_string(),
            nodes: 3,
            node_name_prefix: "node-".to_string(),
            instance_type: "m5.large".to_string(),
            // Random, so a client that ignores its configuration cannot pass by luck.
            access_key_id: format!("AKIA{}", random_alnum(16, true)),
            secret_access_key: random_alnum(40, false),
            verify_signatures: true,
            address_block: 0,
            seed: SeedFile::default(),
            imds: false,
        }
    }
}

impl Config {
    /// The zones in effect.
    pub fn zones(&self) -> Vec<String> {
        if self.zones.is_empty() {
            ["a", "b", "c"]
                .iter()
                .map(|l| format!("{}{l}", self.region))
                .collect()
        } else {
            self.zones.clone()
        }
    }
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting mock AWS: {0}")]
    Serve(#[from] ServeError),
    #[error("seeding instance {name:?}: {source}")]
    Seed { name: String, source: AdminError },
    #[error("seed file: {0}")]
    SeedFile(#[from] mock_cloud::SeedError),
    #[error("seed file fault rules: {0}")]
    SeedFaults(#[from] mock_cloud::FaultError),
    #[error("seed file lifecycle: per-id modes are not supported by the AWS mock ({0:?})")]
    SeedLifecycleIds(Vec<String>),
}

/// What a client needs to reach the mock (the ready-file object of DESIGN.md "Contracts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    /// The endpoint for EC2 and ELB (`http://127.0.0.1:PORT`).
    pub endpoint: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub admin_url: String,
    /// The IMDSv2 endpoint (`http://127.0.0.1:PORT`) when [`Config::imds`] is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imds_endpoint: Option<String>,
}

/// An ELBv2 load balancer as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elbv2Info {
    pub arn: String,
    pub name: String,
    /// The data-plane address its DNS name resolves to.
    pub vip: Ipv4Addr,
    /// `provisioning`, `active` or `failed`.
    pub state: String,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub config: Config,
    pub base: String,
    cloud: Mutex<Cloud>,
    seed: Cloud,
    pub journal: Journal,
    pub faults: Faults,
    /// The instance metadata service's instance and tokens.
    pub(crate) imds: imds::ImdsState,
    /// Wakes the data plane reconciler after a request.
    pub wake: Arc<mock_cloud::Wake>,
}

impl Shared {
    /// The cloud state. Callers hold it briefly and never across an await.
    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        self.cloud
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The control side of a running mock: same operations as the HTTP admin API.
#[derive(Clone)]
pub struct Admin {
    shared: Arc<Shared>,
}

impl Admin {
    /// All instances (terminated ones too, until deleted), in creation order.
    pub fn instances(&self) -> Vec<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud
            .instances
            .iter()
            .map(|i| cloud.instance_info(i))
            .collect()
    }

    pub fn instance(&self, id: &str) -> Option<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud.instance(id).map(|i| cloud.instance_info(i))
    }

    /// The oldest instance whose `Name` tag is `name`.
    pub fn instance_by_name(&self, name: &str) -> Option<InstanceInfo> {
        self.instances()
            .into_iter()
            .find(|i| i.name.as_deref() == Some(name))
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<InstanceInfo, AdminError> {
        let mut cloud = self.shared.cloud();
        let id = cloud.create_instance(spec, &model::new_id("r"), None)?;
        cloud
            .instance(&id)
            .map(|i| cloud.instance_info(i))
            .ok_or(AdminError::NotFound(id))
    }

    pub fn update_instance(
        &self,
        id: &str,
        patch: InstancePatch,
    ) -> Result<InstanceInfo, AdminError> {
        let mut cloud = self.shared.cloud();
        cloud.update_instance(id, patch)?;
        cloud
            .instance(id)
            .map(|i| cloud.instance_info(i))
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// `n` private IPs not in use in `zone`'s subnet (the first subnet for `None`): what
    /// a harness gives an instance as its primary and secondary private IPs.
    pub fn free_private_ips(
        &self,
        zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<Ipv4Addr>, AdminError> {
        self.shared.cloud().free_private_ips(zone, n)
    }

    /// Chooses the instance the metadata service speaks for (`None`: none, every metadata
    /// path answers 404).
    pub fn set_imds_instance(&self, id: Option<&str>) -> Result<(), AdminError> {
        if let Some(id) = id
            && self.shared.cloud().instance(id).is_none()
        {
            return Err(AdminError::NotFound(id.to_string()));
        }
        self.shared.imds.set_instance(id.map(str::to_string));
        Ok(())
    }

    /// The temporary credentials the metadata service hands out for the instance's role
    /// ([`IMDS_ROLE`]); the endpoint accepts them with their session token.
    pub fn imds_role_credentials(&self) -> RoleCredentials {
        self.shared.imds.credentials.clone()
    }

    /// Removes the instance entirely: EC2 then answers `InvalidInstanceID.NotFound`.
    pub fn delete_instance(&self, id: &str) -> Result<(), AdminError> {
        self.shared.cloud().delete_instance(id)
    }

    /// The seeded VPC's id (for a CCM config's `[Global] VPC`).
    pub fn vpc_id(&self) -> String {
        self.shared
            .cloud()
            .vpcs
            .first()
            .map(|v| v.id.clone())
            .unwrap_or_default()
    }

    /// Subnets as `(zone, subnet id)`, one per zone, in zone order.
    pub fn subnets(&self) -> Vec<(String, String)> {
        self.shared
            .cloud()
            .subnets
            .iter()
            .map(|s| (s.zone.clone(), s.id.clone()))
            .collect()
    }

    /// Routes of every route table as `(route table id, destination, target)`, the target
    /// being the instance id, else the gateway id.
    pub fn routes(&self) -> Vec<(String, String, String)> {
        let cloud = self.shared.cloud();
        cloud
            .route_tables
            .iter()
            .flat_map(|t| {
                t.routes.iter().map(|r| {
                    let target = r
                        .instance_id
                        .clone()
                        .or_else(|| r.gateway_id.clone())
                        .unwrap_or_default();
                    (t.id.clone(), r.destination.clone(), target)
                })
            })
            .collect()
    }

    /// The address a load balancer's DNS name stands for (its data-plane VIP), as a
    /// resolver would answer; `None` for a name no load balancer has.
    pub fn resolve(&self, hostname: &str) -> Option<Ipv4Addr> {
        let cloud = self.shared.cloud();
        cloud
            .elbs
            .values()
            .find(|lb| lb.dns_name.eq_ignore_ascii_case(hostname))
            .map(|lb| lb.vip)
            .or_else(|| {
                cloud
                    .elbv2
                    .lbs
                    .values()
                    .find(|lb| lb.dns_name.eq_ignore_ascii_case(hostname))
                    .map(|lb| lb.vip)
            })
    }

    /// Classic load balancers as `(name, DNS name, VIP)`.
    pub fn classic_load_balancers(&self) -> Vec<(String, String, Ipv4Addr)> {
        self.shared
            .cloud()
            .elbs
            .values()
            .map(|lb| (lb.name.clone(), lb.dns_name.clone(), lb.vip))
            .collect()
    }

    /// Adds a route to the main route table, to `target`: an instance id (`i-...`) or
    /// a gateway id (what another tool than the CCM may have put there).
    pub fn add_route(&self, destination: &str, target: &str) -> Result<(), AdminError> {
        let mut cloud = self.shared.cloud();
        if target.starts_with("i-") && cloud.instance(target).is_none() {
            return Err(AdminError::NotFound(target.to_string()));
        }
        let table = cloud
            .route_tables
            .iter_mut()
            .find(|t| t.main)
            .ok_or_else(|| AdminError::NotFound("main route table".into()))?;
        if table.routes.iter().any(|r| r.destination == destination) {
            return Err(AdminError::Invalid {
                field: "destination",
                reason: format!("a route to {destination} exists"),
            });
        }
        let instance = target.starts_with("i-");
        table.routes.push(model::Route {
            destination: destination.to_string(),
            gateway_id: (!instance).then(|| target.to_string()),
            instance_id: instance.then(|| target.to_string()),
        });
        Ok(())
    }

    /// Names of the classic load balancers.
    pub fn load_balancer_names(&self) -> Vec<String> {
        self.shared.cloud().elbs.keys().cloned().collect()
    }

    /// ELBv2 load balancers with their state (looking does not count as a read).
    pub fn elbv2_load_balancers(&self) -> Vec<Elbv2Info> {
        let mut cloud = self.shared.cloud();
        cloud
            .elbv2
            .lbs
            .values_mut()
            .map(|lb| Elbv2Info {
                arn: lb.arn.clone(),
                name: lb.name.clone(),
                vip: lb.vip,
                state: elbv2::state_of(lb.lifecycle.peek()).to_string(),
            })
            .collect()
    }

    /// How ELBv2 load balancers leave `provisioning`: for new ones (`target` = `None`),
    /// or for one load balancer by name or ARN (its pending transition included).
    pub fn set_elbv2_lifecycle(
        &self,
        target: Option<&str>,
        mode: LifecycleMode,
    ) -> Result<(), AdminError> {
        let mode = mode.validate().map_err(|e| AdminError::Invalid {
            field: "mode",
            reason: e.to_string(),
        })?;
        let mut cloud = self.shared.cloud();
        match target {
            None => cloud.elbv2.mode = mode,
            Some(t) => {
                let lb = cloud
                    .elbv2
                    .lbs
                    .values_mut()
                    .find(|lb| lb.arn == t || lb.name == t)
                    .ok_or_else(|| AdminError::NotFound(t.to_string()))?;
                lb.lifecycle.set_mode(mode);
            }
        }
        Ok(())
    }

    /// What the cloud APIs created since the seed that still exists, as
    /// `"<kind> <id>"` lines (terminated instances count as gone).
    pub fn leaks(&self) -> Vec<String> {
        let cloud = self.shared.cloud();
        let seed = &self.shared.seed;
        let mut out = Vec::new();
        for i in &cloud.instances {
            if i.state != InstanceState::Terminated && seed.instance(&i.id).is_none() {
                out.push(format!("instance {}", i.id));
            }
        }
        for g in &cloud.security_groups {
            if !seed.security_groups.iter().any(|s| s.id == g.id) {
                out.push(format!("security-group {}", g.id));
            }
        }
        for t in &cloud.route_tables {
            let before = seed.route_tables.iter().find(|s| s.id == t.id);
            for r in &t.routes {
                if before.is_none_or(|b| !b.routes.contains(r)) {
                    out.push(format!("route {} {}", t.id, r.destination));
                }
            }
        }
        out.extend(cloud.elbs.keys().map(|n| format!("load-balancer {n}")));
        out.extend(cloud.elbv2.lbs.keys().map(|a| format!("load-balancer {a}")));
        out.extend(
            cloud
                .elbv2
                .target_groups
                .keys()
                .map(|a| format!("target-group {a}")),
        );
        out
    }

    pub fn journal(&self) -> Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Clears the journal and fault rules and puts the cloud back to the seed (same ids
    /// and addresses).
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    fn reset_cloud(&self) {
        let seed = self.shared.seed.clone();
        *self.shared.cloud() = seed;
        // The seed file's rules were checked at start, so this cannot fail.
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }
}

/// A running mock AWS.
pub struct MockAws {
    shared: Arc<Shared>,
    server: ServerHandle,
    /// The IMDSv2 listener, when [`Config::imds`] is on.
    imds: Option<(ServerHandle, String)>,
    dataplane: mock_cloud::Reconciler,
}

impl MockAws {
    /// Binds, seeds `config.nodes` instances and starts serving.
    pub async fn start(config: Config) -> Result<MockAws, Error> {
        let bound = mock_cloud::bind(config.listen).await?;
        let imds_bound = if config.imds {
            Some(mock_cloud::bind(SocketAddr::new(config.listen.ip(), 0)).await?)
        } else {
            None
        };
        let shared = Arc::new(build_shared(config, bound.base_url())?);
        let server = bound.serve(router(shared.clone()));
        let imds = imds_bound.map(|b| {
            let url = b.base_url();
            (b.serve(imds::router(shared.clone())), url)
        });
        let dataplane = dataplane::start(shared.clone());
        tracing::info!(base = %shared.base, "mock AWS serving");
        Ok(MockAws {
            shared,
            server,
            imds,
            dataplane,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn ready_info(&self) -> ReadyInfo {
        let c = &self.shared.config;
        ReadyInfo {
            endpoint: self.shared.base.clone(),
            region: c.region.clone(),
            access_key_id: c.access_key_id.clone(),
            secret_access_key: c.secret_access_key.clone(),
            admin_url: format!("{}/admin", self.shared.base),
            imds_endpoint: self.imds.as_ref().map(|(_, url)| url.clone()),
        }
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    pub async fn shutdown(self) {
        self.server.shutdown().await;
        if let Some((imds, _)) = self.imds {
            imds.shutdown().await;
        }
        self.dataplane.shutdown().await;
    }
}

pub(crate) fn build_shared(config: Config, base: String) -> Result<Shared, Error> {
    let zones = config.zones();
    let mut cloud = Cloud::new(
        &config.region,
        &zones,
        &config.cluster_id,
        &config.instance_type,
        config.address_block,
    );
    for i in 0..config.nodes {
        let name = format!("{}{i}", config.node_name_prefix);
        let spec = InstanceSpec {
            name: Some(name.clone()),
            ..Default::default()
        };
        cloud
            .create_instance(spec, &model::new_id("r"), None)
            .map_err(|source| Error::Seed { name, source })?;
    }
    for (i, spec) in config.seed.state.instances.iter().enumerate() {
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| format!("seed instance {i}"));
        cloud
            .create_instance(spec.clone(), &model::new_id("r"), None)
            .map_err(|source| Error::Seed { name, source })?;
    }
    let lifecycle = &config.seed.lifecycle;
    if !lifecycle.ids.is_empty() {
        return Err(Error::SeedLifecycleIds(
            lifecycle.ids.keys().cloned().collect(),
        ));
    }
    let policies = lifecycle.policies(LIFECYCLE_TYPES)?;
    cloud.elbv2.mode = policies
        .by_type
        .get("loadbalancer")
        .copied()
        .unwrap_or(policies.default);
    let faults = Faults::for_cloud("aws");
    config.seed.apply_faults(&faults)?;
    Ok(Shared {
        seed: cloud.clone(),
        cloud: Mutex::new(cloud),
        journal: Journal::new(),
        faults,
        imds: imds::ImdsState::default(),
        wake: Arc::new(mock_cloud::Wake::new()),
        base,
        config,
    })
}

/// The whole HTTP surface.
impl mock_cloud::MockCloud for MockAws {
    const LABEL: &'static str = "AWS";
    type Seed = SeedFile;
    type Config = Config;
    type Error = Error;
    type Ready = ReadyInfo;

    fn load_seed(path: &std::path::Path) -> Result<SeedFile, mock_cloud::SeedError> {
        SeedFile::load(path)
    }

    fn config(options: &mock_cloud::MockOptions, seed: SeedFile) -> Config {
        Config {
            listen: options.listen,
            nodes: options.nodes,
            seed,
            imds: options.imds,
            ..Default::default()
        }
    }

    fn start(config: Config) -> impl std::future::Future<Output = Result<Self, Error>> + Send {
        MockAws::start(config)
    }

    fn is_seed_error(error: &Error) -> bool {
        matches!(
            error,
            Error::Seed { .. }
                | Error::SeedFile(_)
                | Error::SeedFaults(_)
                | Error::SeedLifecycleIds(_)
        )
    }

    fn ready(&self) -> ReadyInfo {
        self.ready_info()
    }

    fn admin_router(&self) -> Router {
        admin_routes(self.shared.clone())
    }

    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send {
        MockAws::shutdown(self)
    }
}

/// The admin routes (`/admin/...` once nested), journaled as service `admin`.
pub(crate) fn admin_routes(shared: Arc<Shared>) -> Router {
    let admin = Admin {
        shared: shared.clone(),
    };
    let reset_target = admin.clone();
    let reset: mock_cloud::ResetFn = Arc::new(move || reset_target.reset_cloud());
    let routes = mock_cloud::admin_router(shared.journal.clone(), shared.faults.clone(), reset)
        .merge(admin_api::routes(admin));
    mock_cloud::journaled_as_admin(routes, shared.journal.clone())
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let control = admin_routes(shared.clone());
    Router::new()
        .route(
            "/",
            any(api::endpoint).layer(mock_cloud::GateLayer::new(shared.clone())),
        )
        .with_state(shared)
        .nest("/admin", control)
        .fallback(api::not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod mock_cloud_tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use mock_cloud::MockCloud;
    use tower::ServiceExt;

    use super::*;

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin` with its `/admin` path.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = MockAws::start(Config::default()).await.expect("start");
        let answer = MockCloud::admin_router(&mock)
            .oneshot(
                Request::get("/journal")
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(answer.status(), StatusCode::OK);
        let last = mock.admin().journal().entries().pop().expect("an entry");
        assert_eq!(
            (
                last.service.as_str(),
                last.method.as_str(),
                last.path.as_str()
            ),
            ("admin", "GET", "/admin/journal")
        );
        MockCloud::shutdown(mock).await;
    }
}
