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
mod control;
mod dataplane;
mod ec2;
mod elb;
mod elbv2;
mod error;
mod gate;
mod imds;
mod params;
mod sigv4;
mod state;
mod xml;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::any;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use control::Admin;
pub use imds::{ROLE as IMDS_ROLE, RoleCredentials};
pub use mock_cloud::Mode as LifecycleMode;
pub use sigv4::sign as sign_request;
pub use state::{AdminError, InstanceInfo, InstancePatch, InstanceSpec, InstanceState};

use crate::state::Cloud;

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
    pub(crate) seed: Cloud,
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
            .create_instance(spec, &state::new_id("r"), None)
            .map_err(|source| Error::Seed { name, source })?;
    }
    for (i, spec) in config.seed.state.instances.iter().enumerate() {
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| format!("seed instance {i}"));
        cloud
            .create_instance(spec.clone(), &state::new_id("r"), None)
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

impl mock_cloud::MockCloud for MockAws {
    const LABEL: &'static str = "AWS";
    type Seed = SeedFile;
    type Config = Config;
    type Error = Error;
    type Ready = ReadyInfo;

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

    fn admin_api(&self) -> mock_cloud::AdminApi {
        admin_api(&self.shared)
    }

    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send {
        MockAws::shutdown(self)
    }
}

/// The admin API (`/admin/...` once nested); served beside the gate, so [`router`]
/// journals it itself (service `admin`).
pub(crate) fn admin_api(shared: &Arc<Shared>) -> mock_cloud::AdminApi {
    let admin = Admin {
        shared: shared.clone(),
    };
    let reset_target = admin.clone();
    mock_cloud::AdminApi::new(
        shared.journal.clone(),
        shared.faults.clone(),
        move || reset_target.reset_cloud(),
        admin_api::routes(admin),
    )
}

/// The whole HTTP surface.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let control = admin_api(&shared).journaled();
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
pub(crate) mod testing;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod mock_cloud_tests {
    use super::*;

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin` with its `/admin` path.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = MockAws::start(Config::default()).await.expect("start");
        mock_cloud::testing::check_admin_router(mock, "/journal").await;
    }
}
