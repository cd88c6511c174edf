//! A mock Azure: Resource Manager (Compute and Network), Azure AD tokens, managed
//! identity and cloud discovery on one HTTPS listener, so cloud-provider-azure, the Azure
//! SDKs (Go azcore/azidentity, Python azure-mgmt-*) and the reference CCM run against it
//! unchanged with no cloud.
//!
//! HTTPS only: azcore and azure-core refuse bearer tokens over plain HTTP, so a CA is
//! made at start ([`mock_cloud::tls`]) and written to the ready file's `ca_file`.
//!
//! Layout (state apart from protocol): [`arm`] (error envelope, api-version, etags,
//! paging, path shapes, async operations), `auth` (discovery, tokens, managed identity),
//! `state` (the document store and operations), `compute` and `network` (each `state`
//! and `api`), `gate` (classification, faults, journal), `dataplane` (load balancer
//! traffic), `control` + `admin_api` (the `/admin` API) and `leaks`.
//!
//! The data plane listens in 127/8 so it needs no root: VM private IPs
//! `127.60.<block>.<n>`, internal load balancer frontends `127.62.<block>.<n>`, n from 10;
//! `address_block` keeps mocks running side by side apart. Public IPs are reported as
//! `198.18.<block>.<n>` (cloud-provider-azure refuses a loopback or private address for
//! an external Service) and served on their twin `127.61.<block>.<n>`: dial
//! [`listener_ip`] of what ARM reports.
//!
//! # Control API (`/admin`), by example
//!
//! On the same HTTPS listener (trust `ca_file`), plain JSON, no auth; the routes are
//! listed in `admin_api`, journal operations and resources in `gate`.
//!
//! ```text
//! curl $ADMIN/journal?since=0
//! curl -X POST $ADMIN/faults -d '{"service":"network","operation":"PUT Microsoft.Network/loadBalancers","kind":"throttle","count":2}'
//! curl -X POST $ADMIN/vms -d '{"name":"node-9","zone":"2","vmSize":"Standard_D4s_v3"}'
//! curl -X PATCH $ADMIN/vms/node-9 -d '{"running":false}'
//! curl -X POST $ADMIN/scale-sets -d '{"name":"pool","capacity":2,"zones":["1","2"]}'
//! curl -X POST $ADMIN/routes -d '{"name":"other","address_prefix":"10.9.0.0/24","next_hop_ip":"127.60.0.50"}'
//! curl -X PUT $ADMIN/lifecycle -d '{"target":"type","name":"loadbalancers","mode":{"mode":"reads","n":3}}'
//! curl $ADMIN/leaks            # {"total":0,"by_type":{}}
//! curl $ADMIN/load-balancers   # summaries: name, frontends, rules, state
//! curl -X POST $ADMIN/reset
//! ```
#![forbid(unsafe_code)]

mod admin_api;
pub mod arm;
pub(crate) mod auth;
mod compute;
mod control;
mod dataplane;
mod gate;
mod leaks;
mod network;
mod state;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use arm::path::LIFECYCLE_TYPES;
pub use auth::{ADFS_TENANT, ALT_AUDIENCE, AUDIENCE};
pub use compute::state::{PowerState, VmInfo, VmPatch, VmSpec};
pub use compute::vmss::ScaleSetSpec;
pub use control::{
    Admin, AdminError, LbSummary, LifecycleTarget, NsgRuleInfo, RouteInfo, ScaleSetInfo,
};
pub use leaks::{LeakedResource, Leaks};
pub use mock_cloud::{Mode as LifecycleMode, Policies as LifecyclePolicies};
pub use state::listener_ip;

use crate::state::{Cloud, Ctx};

/// Request bodies larger than this get a 413 in ARM's envelope.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The defaults of the wire contract.
pub const DEFAULT_TENANT: &str = "00000000-0000-0000-0000-000000000001";
pub const DEFAULT_SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000aa";

/// The Azure `state` of a seed file: VMs created after the `nodes` ones, e.g.
/// `{"vms": [{"name": "node-a", "zone": "2"}]}` (fields as for `POST /admin/vms`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedState {
    #[serde(default)]
    pub vms: Vec<VmSpec>,
}

/// A seed file for this mock (format in `mock_cloud::seed`; lifecycle types are
/// [`LIFECYCLE_TYPES`], ids are resource names).
pub type SeedFile = mock_cloud::SeedFile<SeedState>;

/// How the mock starts.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// VMs created at start (and restored by reset): `{node_name_prefix}{i}`.
    pub nodes: usize,
    pub node_name_prefix: String,
    /// Zones the seeded VMs are spread over (`node-i` gets `zones[i % len]`); empty: no
    /// zones, each VM gets fault domain `i % 3`.
    pub zones: Vec<String>,
    pub tenant_id: String,
    pub subscription_id: String,
    pub resource_group: String,
    pub location: String,
    pub client_id: String,
    /// Random per start, so a client that ignores its configuration cannot pass by luck.
    pub client_secret: String,
    /// What managed-identity requests must carry in `X-IDENTITY-HEADER`.
    pub identity_header: String,
    pub vnet_name: String,
    pub subnet_name: String,
    pub security_group_name: String,
    pub route_table_name: String,
    /// Which /24 of 127.60 (VMs), 198.18 (public IPs, served on 127.61) and 127.62
    /// (internal frontends) to allocate from.
    pub address_block: u8,
    /// Items per list page (small, so clients' paging is exercised).
    pub page_size: usize,
    /// Lifetime of issued tokens.
    pub token_ttl: Duration,
    /// Where to write the CA; `None`: a file in the temp directory.
    pub ca_file: Option<PathBuf>,
    /// Extra VMs, fault rules and lifecycle modes; reset puts them back.
    pub seed: SeedFile,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            nodes: 3,
            node_name_prefix: "node-".into(),
            zones: vec!["1".into(), "2".into(), "3".into()],
            tenant_id: DEFAULT_TENANT.into(),
            subscription_id: DEFAULT_SUBSCRIPTION.into(),
            resource_group: "rg-ccm".into(),
            location: "eastus".into(),
            client_id: "ccm-client".into(),
            client_secret: uuid::Uuid::new_v4().simple().to_string(),
            identity_header: uuid::Uuid::new_v4().simple().to_string(),
            vnet_name: "vnet-ccm".into(),
            subnet_name: "subnet-ccm".into(),
            security_group_name: "nsg-ccm".into(),
            route_table_name: "rt-ccm".into(),
            address_block: 0,
            page_size: 5,
            token_ttl: Duration::from_secs(3600),
            ca_file: None,
            seed: SeedFile::default(),
        }
    }
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting mock Azure: {0}")]
    Serve(#[from] ServeError),
    #[error("seeding VM {name:?}: {source}")]
    Seed { name: String, source: AdminError },
    #[error("seed file: {0}")]
    SeedFile(#[from] mock_cloud::SeedError),
    #[error("seed file fault rules: {0}")]
    SeedFaults(#[from] mock_cloud::FaultError),
    #[error("setting up TLS: {0}")]
    Tls(#[from] mock_cloud::tls::TlsError),
    #[error("writing the CA file {path}: {source}")]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a client needs (the ready-file object of the wire contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    /// ARM, AAD and discovery: `https://127.0.0.1:<port>` (no trailing slash).
    pub endpoint: String,
    pub tenant_id: String,
    pub subscription_id: String,
    pub resource_group: String,
    pub location: String,
    pub client_id: String,
    pub client_secret: String,
    /// The CA to trust (PEM).
    pub ca_file: String,
    pub admin_url: String,
    /// App Service managed identity: `IDENTITY_ENDPOINT` and `IDENTITY_HEADER`.
    pub identity_endpoint: String,
    pub identity_header: String,
    pub vnet_name: String,
    pub subnet_name: String,
    pub security_group_name: String,
    pub route_table_name: String,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub config: Config,
    /// `https://127.0.0.1:PORT`
    pub base: String,
    /// The service principal's object id (token claim `oid`).
    pub object_id: String,
    cloud: Mutex<Cloud>,
    seed: Cloud,
    tokens: Mutex<HashMap<String, auth::Token>>,
    pub journal: Journal,
    pub faults: Faults,
    pub wake: Arc<mock_cloud::Wake>,
}

impl Shared {
    /// The cloud state with finished operations applied. Held briefly, never across an
    /// await.
    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        let mut cloud = self
            .cloud
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cloud.settle();
        cloud
    }

    pub fn tokens(&self) -> MutexGuard<'_, HashMap<String, auth::Token>> {
        self.tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(crate) fn build_shared(config: Config, base: String) -> Result<Shared, Error> {
    let ctx = Ctx {
        subscription: config.subscription_id.clone(),
        resource_group: config.resource_group.clone(),
        location: config.location.clone(),
        block: config.address_block,
        vnet: config.vnet_name.clone(),
        subnet: config.subnet_name.clone(),
        nsg: config.security_group_name.clone(),
        route_table: config.route_table_name.clone(),
    };
    let mut cloud = Cloud::new(ctx, network::state::prepare);
    for i in 0..config.nodes {
        let name = format!("{}{i}", config.node_name_prefix);
        let zone = (!config.zones.is_empty()).then(|| config.zones[i % config.zones.len()].clone());
        control::create_vm(
            &mut cloud,
            VmSpec {
                name: name.clone(),
                zone,
                ..Default::default()
            },
        )
        .map_err(|source| Error::Seed { name, source })?;
    }
    for spec in &config.seed.state.vms {
        control::create_vm(&mut cloud, spec.clone()).map_err(|source| Error::Seed {
            name: spec.name.clone(),
            source,
        })?;
    }
    cloud.policies = config.seed.lifecycle.policies(LIFECYCLE_TYPES)?;
    let faults = Faults::for_cloud("azure");
    config.seed.apply_faults(&faults)?;
    Ok(Shared {
        base,
        object_id: uuid::Uuid::new_v4().to_string(),
        seed: cloud.clone(),
        cloud: Mutex::new(cloud),
        tokens: Mutex::new(HashMap::new()),
        journal: Journal::new(),
        faults,
        wake: Arc::new(mock_cloud::Wake::new()),
        config,
    })
}

/// A running mock Azure.
pub struct AzureMock {
    shared: Arc<Shared>,
    server: ServerHandle,
    dataplane: mock_cloud::Reconciler,
    ca_file: PathBuf,
}

impl AzureMock {
    /// Binds, seeds `config.nodes` VMs and serves HTTPS, with the load balancers' data
    /// plane.
    pub async fn start(config: Config) -> Result<AzureMock, Error> {
        let bound = mock_cloud::bind(config.listen).await?;
        mock_cloud::tls::install_ring_provider();
        let ca = mock_cloud::tls::TestCa::generate("mock-azure CA")?;
        let server_config = ca.server_config(
            mock_cloud::tls::LOCAL_SANS,
            mock_cloud::tls::ClientAuth::None,
        )?;
        let ca_file = config.ca_file.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "mock-azure-{}-{}-ca.pem",
                std::process::id(),
                bound.local_addr().port()
            ))
        });
        let base = bound.base_url_https();
        // Seeding first: a start that fails leaves no CA file behind.
        let shared = Arc::new(build_shared(config, base)?);
        ca.write_ca_file(&ca_file).map_err(|source| Error::CaFile {
            path: ca_file.clone(),
            source,
        })?;
        let server = bound.serve_tls(router(shared.clone()), server_config);
        let dataplane = dataplane::start(shared.clone());
        tracing::info!(base = %shared.base, "mock Azure serving");
        Ok(AzureMock {
            shared,
            server,
            dataplane,
            ca_file,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn ready_info(&self) -> ReadyInfo {
        let c = &self.shared.config;
        let base = &self.shared.base;
        ReadyInfo {
            endpoint: base.clone(),
            tenant_id: c.tenant_id.clone(),
            subscription_id: c.subscription_id.clone(),
            resource_group: c.resource_group.clone(),
            location: c.location.clone(),
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.clone(),
            ca_file: self.ca_file.display().to_string(),
            admin_url: format!("{base}/admin"),
            identity_endpoint: format!("{base}/msi/token"),
            identity_header: c.identity_header.clone(),
            vnet_name: c.vnet_name.clone(),
            subnet_name: c.subnet_name.clone(),
            security_group_name: c.security_group_name.clone(),
            route_table_name: c.route_table_name.clone(),
        }
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    /// Stops the API and every load balancer listener.
    pub async fn shutdown(self) {
        self.dataplane.shutdown().await;
        self.server.shutdown().await;
        let _ = std::fs::remove_file(&self.ca_file);
    }
}

impl mock_cloud::MockCloud for AzureMock {
    const LABEL: &'static str = "Azure";
    type Seed = SeedFile;
    type Config = Config;
    type Error = Error;
    type Ready = ReadyInfo;

    fn config(options: &mock_cloud::MockOptions, seed: SeedFile) -> Config {
        Config {
            listen: options.listen,
            nodes: options.nodes,
            seed,
            ..Default::default()
        }
    }

    fn start(config: Config) -> impl std::future::Future<Output = Result<Self, Error>> + Send {
        AzureMock::start(config)
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
        AzureMock::shutdown(self)
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
    let arm: Router = Router::new()
        .fallback(arm::router::dispatch)
        .with_state(shared.clone());
    Router::new()
        .merge(auth::routes(shared.clone()))
        .nest("/admin", admin_api(&shared).router())
        .merge(arm)
        .layer(mock_cloud::GateLayer::new(shared))
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod start_tests {
    use mock_cloud::MockCloud;

    use super::*;

    #[tokio::test]
    async fn seed_files_add_vms_faults_and_lifecycles_and_reset_restores_them() {
        let seed = SeedFile::parse(
            br#"{"state": {"vms": [{"name": "seeded", "zone": "3", "vmSize": "Standard_B2s"}]},
                 "faults": [{"service": "network", "status": 500, "count": 1}],
                 "lifecycle": {"types": {"loadbalancers": {"mode": "stuck"}}}}"#,
            std::path::Path::new("seed.json"),
        )
        .expect("seed");
        let mock = AzureMock::start(Config {
            nodes: 1,
            address_block: 45,
            seed,
            ..Config::default()
        })
        .await
        .expect("start");
        let admin = mock.admin();
        let names: Vec<String> = admin.vms().into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["node-0", "seeded"]);
        assert_eq!(
            admin.vm("seeded").map(|v| v.vm_size).as_deref(),
            Some("Standard_B2s")
        );
        assert_eq!(admin.faults().list().len(), 1);
        assert_eq!(
            admin.lifecycle().by_type["loadbalancers"],
            LifecycleMode::Stuck
        );
        admin.delete_vm("seeded").expect("delete");
        admin.faults().clear();
        admin.reset();
        assert_eq!(admin.vms().len(), 2);
        assert_eq!(admin.faults().list().len(), 1, "the seed's rules come back");
        mock.shutdown().await;
    }

    #[tokio::test]
    async fn bad_seed_vms_are_seed_errors() {
        let seed = SeedFile::parse(
            br#"{"state": {"vms": [{"name": "node-0"}]}}"#,
            std::path::Path::new("seed.json"),
        )
        .expect("parses");
        let err = AzureMock::start(Config {
            nodes: 1,
            address_block: 46,
            seed,
            ..Config::default()
        })
        .await
        .err()
        .expect("a duplicate VM is refused");
        assert!(<AzureMock as MockCloud>::is_seed_error(&err), "{err}");
    }

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin`.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = AzureMock::start(Config {
            nodes: 1,
            address_block: 47,
            ..Config::default()
        })
        .await
        .expect("start");
        mock_cloud::testing::check_admin_router(mock, "/vms").await;
    }
}
