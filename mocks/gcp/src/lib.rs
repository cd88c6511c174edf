//! A mock Google Compute Engine: the Compute API (v1, beta and alpha paths over one
//! model), an OAuth token endpoint and the metadata server, on one plain-HTTP listener, so
//! cloud-provider-gcp (`providers/gce`, google.golang.org/api `compute/v1` and
//! k8s-cloud-provider), google-cloud-compute (Python) and the reference CCM run against
//! it unchanged with no cloud.
//!
//! Plain HTTP: the Go and Python clients accept an `http://` endpoint (`api-endpoint` in
//! gce.conf, `client_options.api_endpoint`), and the metadata server is HTTP by design
//! (`GCE_METADATA_HOST=127.0.0.1:<port>`).
//!
//! Layout: [`error`] (Google's envelope), [`path`] (URL shapes and references),
//! [`filter`] (list filters), `state` (resources, instances, operations), `compute` (the
//! handlers, paging, bodies), `auth` (tokens, metadata server), `gate` (classification,
//! faults, journal), `dataplane` (forwarding-rule traffic), `control` + `admin_api`
//! (the `/admin` API, leaks).
//!
//! The data plane lives in 127/8 so no root is needed: instances' `networkIP`
//! `127.70.<block>.<n>`, external addresses and forwarding-rule IPs `127.71.<block>.<n>`
//! (the proxies listen there), instances' `natIP` `127.72.<block>.<n>` (reported only),
//! n from 10; `address_block` keeps mocks running side by side apart. An instance has
//! one or more NICs (`nic0`, `nic1`, ...), each with a `networkIP` and at most one
//! ONE_TO_ONE_NAT `natIP`; the admin API may name any free IPv4 address for either
//! (out of the pools too), and target pools' traffic goes to nic0's `networkIP`, which
//! must then be in 127/8. The metadata server describes the first instance by name,
//! every NIC under `instance/network-interfaces/`.
//!
//! # What clients see (checked with google.golang.org/api v0.313 + k8s-cloud-provider
//! v1.33, google-cloud-compute 1.57 and gcloud against this mock)
//!
//! - Endpoint: the ready file's `endpoint`, `http://127.0.0.1:P/compute/v1/` (gce.conf
//!   `api-endpoint`; gcloud `api_endpoint_overrides/compute`); Python takes the API root
//!   `http://127.0.0.1:P` as `api_endpoint`. Self links are
//!   `http://127.0.0.1:P/compute/v1/projects/...` whatever the version asked (the
//!   `/compute/` segment matters: k8s-cloud-provider `ParseResourceURL` needs it to read
//!   an operation's `selfLink`).
//! - Collections: `zones`, `regions`, `projects/{p}`, zonal `instances` (read only;
//!   `aggregated/instances` too), `machineTypes`; regional `addresses`,
//!   `forwardingRules` (+`setTarget`), `targetPools` (+`addInstance`, `removeInstance`,
//!   `addHealthCheck`, `removeHealthCheck`), `subnetworks` (read only); global
//!   `httpHealthChecks`, `healthChecks`, `firewalls` (+`update`/`patch` for those three),
//!   `routes`, `networks` (read only); zonal, regional and global `operations` (get,
//!   list, delete, `POST .../wait`).
//! - Operations: under the default lifecycle mode a write's reply is already `DONE`;
//!   other modes reply `PENDING`, later looks say `RUNNING`. `wait` returns at once when
//!   done (or for a `reads` mode: each wait is one read), else blocks until done or
//!   `op_wait_timeout` (2 s) and returns the operation as it is.
//! - Auth: tokens from `POST /token` or the metadata server; `allow_anonymous` for
//!   clients that send none (`token-url = nil` *without* `GCE_METADATA_HOST`,
//!   google-cloud-compute with `AnonymousCredentials`).
//!
//! # Control API (`/admin`), by example
//!
//! ```text
//! curl $ADMIN/journal?since=0
//! curl -X POST $ADMIN/faults -d '{"service":"compute","operation":"compute.targetPools.insert","kind":"throttle","count":2}'
//! curl -X POST $ADMIN/instances -d '{"name":"node-9","zone":"us-central1-b","tags":["node"]}'
//! curl -X PATCH $ADMIN/instances/node-9 -d '{"status":"TERMINATED","nat":false}'
//! curl -X PUT $ADMIN/lifecycle -d '{"target":"type","name":"forwardingrules","mode":{"mode":"reads","n":3}}'
//! curl $ADMIN/leaks            # {"total":0,"by_type":{}}
//! curl $ADMIN/load-balancers   # one summary per forwarding rule
//! curl -X POST $ADMIN/instances -d '{"name":"multi","network_ips":["127.70.9.1","127.70.9.2"],"nat_ips":["127.72.9.1"]}'
//! curl -X PATCH $ADMIN/instances/multi -d '{"network_ips":["127.70.9.3"],"nat_ips":[]}'
//! curl $ADMIN/routes
//! curl -X POST $ADMIN/routes -d '{"name":"other","dest_range":"10.9.0.0/16","next_hop_ip":"127.70.0.10"}'
//! curl -X POST $ADMIN/reset
//! ```
#![forbid(unsafe_code)]

mod admin_api;
pub(crate) mod auth;
mod compute;
mod control;
mod dataplane;
pub mod error;
pub mod filter;
mod gate;
pub mod path;
mod state;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use control::{
    Admin, AdminError, InstanceInfo, InstancePatch, InstanceSpec, LbSummary, LifecycleTarget,
    RouteInfo,
};
pub use control::{LeakedResource, Leaks};
pub use mock_cloud::{Mode as LifecycleMode, Policies as LifecyclePolicies};

use crate::state::{Cloud, Ctx};

/// Request bodies larger than this get a 413 in Google's envelope.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// Lifecycle type names (per collection, lowercased).
pub const LIFECYCLE_TYPES: &[&str] = &[
    "addresses",
    "forwardingrules",
    "targetpools",
    "httphealthchecks",
    "healthchecks",
    "firewalls",
    "routes",
];

/// The GCP `state` of a seed file: instances created after the `nodes` ones, e.g.
/// `{"instances": [{"name": "node-a", "zone": "us-central1-b", "tags": ["x"]}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedState {
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
}

/// A seed file for this mock (format in `mock_cloud::seed`; lifecycle types are
/// [`LIFECYCLE_TYPES`], ids are resource names).
pub type Seed = mock_cloud::SeedFile<SeedState>;

/// How the mock starts.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Instances created at start (and restored by reset): `{node_name_prefix}{i}` in the
    /// default zone.
    pub nodes: usize,
    pub node_name_prefix: String,
    /// Network tags of the seeded instances.
    pub node_tags: Vec<String>,
    pub project_id: String,
    pub project_number: u64,
    pub region: String,
    /// Zones of the region; the first is the default zone.
    pub zones: Vec<String>,
    pub zone: String,
    pub network: String,
    /// Which /24 of 127.70/71/72 to allocate from.
    pub address_block: u8,
    /// Let requests without `Authorization` through (upstream `token-url = nil`).
    pub allow_anonymous: bool,
    /// Lifetime of issued tokens.
    pub token_ttl: Duration,
    /// The longest an operation `wait` blocks (GCE's is about two minutes).
    pub op_wait_timeout: Duration,
    pub seed: Seed,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            nodes: 3,
            node_name_prefix: "node-".into(),
            node_tags: vec!["ccm-node".into()],
            project_id: "ccm-conformance".into(),
            project_number: 123_456_789_012,
            region: "us-central1".into(),
            zones: vec![
                "us-central1-a".into(),
                "us-central1-b".into(),
                "us-central1-c".into(),
            ],
            zone: "us-central1-a".into(),
            network: "default".into(),
            address_block: 0,
            allow_anonymous: false,
            token_ttl: auth::DEFAULT_TTL,
            op_wait_timeout: Duration::from_secs(2),
            seed: Seed::default(),
        }
    }
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting mock GCP: {0}")]
    Serve(#[from] ServeError),
    #[error("seeding instance {name:?}: {source}")]
    Seed { name: String, source: AdminError },
    #[error("seed file: {0}")]
    SeedFile(#[from] mock_cloud::SeedError),
    #[error("seed file fault rules: {0}")]
    SeedFaults(#[from] mock_cloud::FaultError),
    #[error("config: {0}")]
    Config(String),
}

/// What a client needs (the ready-file object of the wire contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    /// The v1 base with its trailing slash: `http://127.0.0.1:P/compute/v1/`.
    pub endpoint: String,
    pub project_id: String,
    pub region: String,
    pub zone: String,
    pub network: String,
    /// `127.0.0.1:P` (for `GCE_METADATA_HOST`).
    pub metadata_host: String,
    pub token_url: String,
    pub admin_url: String,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub config: Config,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    cloud: Mutex<Cloud>,
    seed: Cloud,
    tokens: Mutex<HashMap<String, auth::Token>>,
    pub journal: Journal,
    pub faults: Faults,
    pub wake: Arc<mock_cloud::Wake>,
}

impl Shared {
    /// The state with finished operations applied. Held briefly, never across an await.
    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        let mut cloud = self.cloud.lock().unwrap_or_else(|p| p.into_inner());
        cloud.settle();
        cloud
    }

    pub fn tokens(&self) -> MutexGuard<'_, HashMap<String, auth::Token>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) fn build_shared(config: Config, base: String) -> Result<Shared, Error> {
    if !config.zones.contains(&config.zone) {
        return Err(Error::Config(format!(
            "zone {} is not one of {:?}",
            config.zone, config.zones
        )));
    }
    if let Some(z) = config
        .zones
        .iter()
        .find(|z| state::Ctx::zone_region(z) != config.region)
    {
        return Err(Error::Config(format!(
            "zone {z} is not in region {}",
            config.region
        )));
    }
    let ctx = Ctx {
        base: base.clone(),
        project: config.project_id.clone(),
        number: config.project_number,
        region: config.region.clone(),
        zones: config.zones.clone(),
        network: config.network.clone(),
        block: config.address_block,
    };
    let mut cloud = Cloud::new(ctx);
    for i in 0..config.nodes {
        let name = format!("{}{i}", config.node_name_prefix);
        let spec = InstanceSpec {
            name: name.clone(),
            zone: Some(config.zone.clone()),
            tags: Some(config.node_tags.clone()),
            ..Default::default()
        };
        control::create_instance(&mut cloud, spec)
            .map_err(|source| Error::Seed { name, source })?;
    }
    for spec in &config.seed.state.instances {
        control::create_instance(&mut cloud, spec.clone()).map_err(|source| Error::Seed {
            name: spec.name.clone(),
            source,
        })?;
    }
    cloud.policies = config.seed.lifecycle.policies(LIFECYCLE_TYPES)?;
    let faults = Faults::for_cloud("gcp");
    config.seed.apply_faults(&faults)?;
    Ok(Shared {
        base,
        seed: cloud.clone(),
        cloud: Mutex::new(cloud),
        tokens: Mutex::new(HashMap::new()),
        journal: Journal::new(),
        faults,
        wake: Arc::new(mock_cloud::Wake::new()),
        config,
    })
}

/// A running mock GCP.
pub struct GcpMock {
    shared: Arc<Shared>,
    server: ServerHandle,
    dataplane: mock_cloud::Reconciler,
}

impl GcpMock {
    /// Binds, seeds `config.nodes` instances and serves, with the data plane.
    pub async fn start(config: Config) -> Result<GcpMock, Error> {
        let bound = mock_cloud::bind(config.listen).await?;
        let base = bound.base_url();
        let shared = Arc::new(build_shared(config, base)?);
        let server = bound.serve(router(shared.clone()));
        let dataplane = dataplane::start(shared.clone());
        tracing::info!(base = %shared.base, "mock GCP serving");
        Ok(GcpMock {
            shared,
            server,
            dataplane,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn ready_info(&self) -> ReadyInfo {
        let c = &self.shared.config;
        let base = &self.shared.base;
        ReadyInfo {
            endpoint: format!("{base}/compute/v1/"),
            project_id: c.project_id.clone(),
            region: c.region.clone(),
            zone: c.zone.clone(),
            network: c.network.clone(),
            metadata_host: base.trim_start_matches("http://").to_string(),
            token_url: format!("{base}/token"),
            admin_url: format!("{base}/admin"),
        }
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    /// Stops the API and every forwarding-rule listener.
    pub async fn shutdown(self) {
        self.dataplane.shutdown().await;
        self.server.shutdown().await;
    }
}

impl mock_cloud::MockCloud for GcpMock {
    const LABEL: &'static str = "GCP";
    type Seed = Seed;
    type Config = Config;
    type Error = Error;
    type Ready = ReadyInfo;

    fn config(options: &mock_cloud::MockOptions, seed: Seed) -> Config {
        Config {
            listen: options.listen,
            nodes: options.nodes,
            seed,
            ..Default::default()
        }
    }

    fn start(config: Config) -> impl std::future::Future<Output = Result<Self, Error>> + Send {
        GcpMock::start(config)
    }

    fn is_seed_error(error: &Error) -> bool {
        matches!(
            error,
            Error::Seed { .. } | Error::SeedFile(_) | Error::SeedFaults(_)
        )
    }

    fn ready(&self) -> ReadyInfo {
        self.ready_info()
    }

    fn admin_api(&self) -> mock_cloud::AdminApi {
        admin_api(&self.shared)
    }

    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send {
        GcpMock::shutdown(self)
    }
}

/// The admin API (`/admin/...` once nested); [`router`] journals it through the gate
/// (service `admin`).
fn admin_api(shared: &Arc<Shared>) -> mock_cloud::AdminApi {
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
    let compute: Router = Router::new()
        .fallback(compute::dispatch)
        .with_state(shared.clone());
    Router::new()
        .merge(auth::routes(shared.clone()))
        .nest("/admin", admin_api(&shared).router())
        .merge(compute)
        .layer(mock_cloud::GateLayer::new(shared))
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests;
