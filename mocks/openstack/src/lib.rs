//! A mock OpenStack (Keystone, Nova, Neutron, Octavia) that unmodified OpenStack
//! clients — gophercloud in cloud-provider-openstack, openstacksdk and the `openstack`
//! CLI, our reference CCM — can talk to, so CCM conformance cases run with no cloud at all.
//!
//! One listener, with devstack's path layout: Keystone at `/identity`, Nova at
//! `/compute/v2.1`, Neutron at `/network`, Octavia at `/load-balancer` (API under both
//! `/v2` and `/v2.0`), and our control API at `/admin`. Servers live in 127/8 (fixed IPs
//! in 127.10.0.0/16, floating IPs in 127.20.0.0/16, load balancer VIPs in 127.30.0.0/16)
//! so the data plane works without root (DESIGN.md "Data plane"). Load balancers move
//! through `PENDING_*` by a lifecycle mode set on the admin API, and `/admin/leaks` lists
//! what the cloud APIs created that still exists. ACTIVE load balancers carry real traffic:
//! their listeners bind the VIP and proxy to the members (`dataplane`).
//!
//! # Control API (`/admin`), by example
//!
//! ```text
//! # Every request, in order (service, method, path, query, status, fault id):
//! curl $ADMIN/journal?since=0
//! # Fault rules (full JSON in mock_cloud::faults). Throttle the second node's lookups
//! # twice (OpenStack's 429 + Retry-After), then hide new load balancers for 2 reads:
//! curl -X POST $ADMIN/faults -d '{"service":"compute","operation":"GET servers/{id}",
//!      "resource":"<server id>","kind":"throttle","count":2}'
//! curl -X POST $ADMIN/faults -d '{"service":"load-balancer",
//!      "kind":"not_found_after_create","window_reads":2}'
//! curl -X POST $ADMIN/faults -d '{"kind":"reset","probability":0.1}'   # drop 10%
//! curl -X PUT  $ADMIN/faults/seed -d '{"seed":42}'                    # deterministic
//! # What the cloud APIs created and still exists, by type:
//! curl $ADMIN/leaks        # {"total":0,"by_type":{}}
//! curl -X POST $ADMIN/reset
//! ```
//!
//! Fault rules see `service` = `identity|compute|network|load-balancer`, `operation` = the
//! method and the path after the service prefix, versions dropped and ids as `{id}`
//! (`"GET servers/{id}"`, `"POST lbaas/loadbalancers"`, `"PUT routers/{id}/add_extraroutes"`),
//! and `resource` = the last id in the path. Errors use each service's envelope (Keystone
//! `error`, Nova fault names, `NeutronError`, Octavia `faultstring`); a reset drops the
//! connection and is journaled with status 0.
//!
//! # Seed files, TLS, credentials
//!
//! [`Config::seed`] (`ccm-conformance mock openstack --seed FILE`) adds servers
//! ([`SeedState`]), fault rules and Octavia lifecycle modes, all restored by reset; the
//! format is in `mock_cloud::seed`. [`Config::tls`] (`--tls`) serves HTTPS with a CA made at
//! start, written to the ready info's `ca_file`. Keystone takes the password of
//! [`Config::username`] and the user's application credential (by id, or by name and
//! user; requesting a scope with it is a 401, as in Keystone).
#![forbid(unsafe_code)]

mod admin_api;
mod control;
mod envelope;
mod error;
mod gate;
mod ids;
mod keystone;
mod leaks;
mod neutron;
mod nova;
mod octavia;
mod pool;
mod state;
mod util;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use control::{Admin, LIFECYCLE_TYPES, LifecycleTarget, RouterInfo};
pub use leaks::{LeakedResource, Leaks};
pub use mock_cloud::{Mode as LifecycleMode, Policies as LifecyclePolicies};
pub use state::{AdminError, REBOOT_SECONDS, ServerInfo, ServerPatch, ServerSpec};

use crate::state::Cloud;

/// Request bodies larger than this get a 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// How the mock starts.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Servers created at start (and restored by reset): `{node_name_prefix}{i}`.
    pub nodes: usize,
    pub node_name_prefix: String,
    pub region: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub domain_name: String,
    pub default_az: String,
    /// Lifetime of issued tokens; an expired token gets a 401 (clients re-authenticate).
    pub token_ttl: Duration,
    /// The user's one application credential (Keystone `application_credential` auth,
    /// by id, or by name plus user); the secret is random by default.
    pub application_credential_id: String,
    pub application_credential_name: String,
    pub application_credential_secret: String,
    /// Which /24 of each 127.x.0.0/16 address pool (fixed, floating, VIP) to allocate from
    /// first; give each mock running at the same time its own block.
    pub address_block: u8,
    /// Serve HTTPS with a CA generated at start (its PEM goes to `ca_file`, named in the
    /// ready file); plain HTTP otherwise.
    pub tls: bool,
    /// Where to write the CA when `tls` is on; `None` = a file in the temp directory.
    pub ca_file: Option<PathBuf>,
    /// Extra state, fault rules and lifecycle modes (a seed file; see [`SeedState`]).
    /// Reset puts all of it back.
    pub seed: SeedFile,
}

/// The OpenStack `state` of a seed file: servers created after the `nodes` ones, e.g.
/// `{"servers": [{"name": "node-a", "az": "az-1", "metadata": {"k": "v"}}]}` (fields as
/// for `POST /admin/servers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedState {
    #[serde(default)]
    pub servers: Vec<ServerSpec>,
}

/// A seed file for this mock (format in `mock_cloud::seed`; lifecycle types are
/// [`LIFECYCLE_TYPES`]).
pub type SeedFile = mock_cloud::SeedFile<SeedState>;

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            nodes: 3,
            node_name_prefix: "node-".to_string(),
            region: "RegionOne".to_string(),
            username: "admin".to_string(),
            // Random, so a client that ignores its configuration cannot pass by luck.
            password: uuid::Uuid::new_v4().simple().to_string(),
            project_name: "demo".to_string(),
            domain_name: "Default".to_string(),
            default_az: "nova".to_string(),
            token_ttl: Duration::from_secs(3600),
            application_credential_id: uuid::Uuid::new_v4().simple().to_string(),
            application_credential_name: "ccm".to_string(),
            application_credential_secret: uuid::Uuid::new_v4().simple().to_string(),
            address_block: 0,
            tls: false,
            ca_file: None,
            seed: SeedFile::default(),
        }
    }
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting mock OpenStack: {0}")]
    Serve(#[from] ServeError),
    #[error("seeding server {name:?}: {source}")]
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

/// What a client needs to reach the mock (the ready-file object of DESIGN.md "Contracts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    /// Keystone v3, ending in `/v3`.
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub domain_name: String,
    pub region: String,
    pub admin_url: String,
    /// An application credential of the same user (Keystone `v3applicationcredential`).
    pub application_credential_id: String,
    pub application_credential_secret: String,
    /// The CA to trust (PEM file) when the mock serves HTTPS; `null` for plain HTTP.
    pub ca_file: Option<String>,
}

/// Ids of the single user, project and domain the mock knows.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub user_id: String,
    pub project_id: String,
    pub domain_id: String,
}

/// An issued token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub expires_at: jiff::Timestamp,
    /// The `token` object as issued, for validation requests.
    pub body: serde_json::Value,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub config: Config,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub identity: Identity,
    pub catalog: serde_json::Value,
    pub host_id: String,
    cloud: Mutex<Cloud>,
    seed: Cloud,
    tokens: Mutex<HashMap<String, Token>>,
    pub journal: Journal,
    pub faults: Faults,
    /// Wakes the data plane's reconciler after a write; its revision is bumped after every
    /// write (and reset), so the reconciler can tell that nothing changed since its last
    /// plan; see [`Shared::model_changed`].
    pub wake: Arc<mock_cloud::Wake>,
}

impl Shared {
    /// Tells the data plane that the model changed: call after the change is made (and
    /// its lock released), so a plan made before it is never taken as current.
    pub fn model_changed(&self) {
        self.wake.changed();
    }

    /// The cloud state. Callers hold it briefly and never across an await.
    /// The cloud, with reboots that have run their course ended first (so every reader,
    /// API or admin, sees the same settled state).
    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        let mut cloud = self
            .cloud
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cloud.settle_reboots();
        cloud
    }

    pub fn tokens(&self) -> MutexGuard<'_, HashMap<String, Token>> {
        self.tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `token` was issued here and has not expired.
    pub fn token_valid(&self, token: &str) -> bool {
        self.tokens()
            .get(token)
            .is_some_and(|t| jiff::Timestamp::now() < t.expires_at)
    }

    pub fn compute_url(&self) -> String {
        format!("{}/compute/v2.1", self.base)
    }
}

/// A running mock OpenStack.
pub struct OpenStackMock {
    shared: Arc<Shared>,
    server: ServerHandle,
    dataplane: mock_cloud::Reconciler,
    /// The CA file written for TLS (removed at shutdown).
    ca_file: Option<PathBuf>,
}

impl OpenStackMock {
    /// Binds, seeds `config.nodes` servers and starts serving, with the load balancers'
    /// data plane (listeners bind their VIPs once ACTIVE).
    pub async fn start(config: Config) -> Result<OpenStackMock, Error> {
        let bound = mock_cloud::bind(config.listen).await?;
        let tls = if config.tls {
            mock_cloud::tls::install_ring_provider();
            let ca = mock_cloud::tls::TestCa::generate("mock-openstack CA")?;
            let server_config = ca.server_config(
                mock_cloud::tls::LOCAL_SANS,
                mock_cloud::tls::ClientAuth::None,
            )?;
            let path = config.ca_file.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!(
                    "mock-openstack-{}-{}-ca.pem",
                    std::process::id(),
                    bound.local_addr().port()
                ))
            });
            ca.write_ca_file(&path).map_err(|source| Error::CaFile {
                path: path.clone(),
                source,
            })?;
            Some((server_config, path))
        } else {
            None
        };
        let base = if tls.is_some() {
            bound.base_url_https()
        } else {
            bound.base_url()
        };
        let shared = Arc::new(build_shared(config, base)?);
        let (server, ca_file) = match tls {
            Some((server_config, path)) => (
                bound.serve_tls(router(shared.clone()), server_config),
                Some(path),
            ),
            None => (bound.serve(router(shared.clone())), None),
        };
        let dataplane = octavia::start_data_plane(shared.clone());
        tracing::info!(base = %shared.base, "mock OpenStack serving");
        Ok(OpenStackMock {
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
        ReadyInfo {
            auth_url: format!("{}/identity/v3", self.shared.base),
            username: c.username.clone(),
            password: c.password.clone(),
            project_name: c.project_name.clone(),
            domain_name: c.domain_name.clone(),
            region: c.region.clone(),
            admin_url: format!("{}/admin", self.shared.base),
            application_credential_id: c.application_credential_id.clone(),
            application_credential_secret: c.application_credential_secret.clone(),
            ca_file: self.ca_file.as_ref().map(|p| p.display().to_string()),
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
        if let Some(path) = &self.ca_file {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn new_hex_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub(crate) fn build_shared(config: Config, base: String) -> Result<Shared, Error> {
    let identity = Identity {
        user_id: new_hex_id(),
        project_id: new_hex_id(),
        // devstack's "Default" domain has id "default".
        domain_id: config.domain_name.to_ascii_lowercase(),
    };
    let mut cloud = Cloud::new(&config.default_az);
    cloud.use_address_block(config.address_block);
    for i in 0..config.nodes {
        let name = format!("{}{i}", config.node_name_prefix);
        cloud
            .create_server(ServerSpec {
                name: name.clone(),
                ..Default::default()
            })
            .map_err(|source| Error::Seed { name, source })?;
    }
    for spec in &config.seed.state.servers {
        cloud
            .create_server(spec.clone())
            .map_err(|source| Error::Seed {
                name: spec.name.clone(),
                source,
            })?;
    }
    cloud.lbaas.policies = config.seed.lifecycle.policies(LIFECYCLE_TYPES)?;
    let faults = Faults::for_cloud("openstack");
    config.seed.apply_faults(&faults)?;
    let catalog = keystone::catalog(&base, &config.region);
    Ok(Shared {
        host_id: format!("{}{}", new_hex_id(), &new_hex_id()[..24]),
        catalog,
        identity,
        seed: cloud.clone(),
        cloud: Mutex::new(cloud),
        tokens: Mutex::new(HashMap::new()),
        journal: Journal::new(),
        faults,
        wake: Arc::new(mock_cloud::Wake::new()),
        base,
        config,
    })
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

impl mock_cloud::MockCloud for OpenStackMock {
    const LABEL: &'static str = "OpenStack";
    type Seed = SeedFile;
    type Config = Config;
    type Error = Error;
    type Ready = ReadyInfo;

    fn config(options: &mock_cloud::MockOptions, seed: SeedFile) -> Config {
        Config {
            listen: options.listen,
            nodes: options.nodes,
            tls: options.tls,
            seed,
            ..Default::default()
        }
    }

    fn start(config: Config) -> impl std::future::Future<Output = Result<Self, Error>> + Send {
        OpenStackMock::start(config)
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
        OpenStackMock::shutdown(self)
    }
}

/// The whole HTTP surface.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let control = admin_api(&shared).router();
    Router::new()
        .merge(keystone::routes(shared.clone()))
        .merge(nova::routes(shared.clone()))
        .merge(neutron::routes(shared.clone()))
        .merge(octavia::routes(shared.clone()))
        .nest("/admin", control)
        .fallback(envelope::not_found)
        .method_not_allowed_fallback(envelope::method_not_allowed)
        .layer(mock_cloud::GateLayer::new(shared))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod seed_tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn seeded_load_balancers_are_active_unjournaled_and_validated() {
        let mock = OpenStackMock::start(Config::default())
            .await
            .expect("start");
        let admin = mock.admin();
        // Even with a slow lifecycle the seeded load balancer is ACTIVE at once.
        admin
            .set_lifecycle(
                LifecycleTarget::Default,
                Some(LifecycleMode::Reads { n: 5 }),
            )
            .expect("lifecycle");
        let lb = admin
            .seed_load_balancer(json!({
                "name": "kube_service_c_default_web",
                "listeners": [{"protocol": "TCP", "protocol_port": 8080,
                    "default_pool": {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                        "members": [{"address": "127.10.0.10", "protocol_port": 30080}]}}]
            }))
            .expect("seed");
        assert_eq!(lb["provisioning_status"], "ACTIVE");
        assert_eq!(lb["name"], "kube_service_c_default_web");
        let all = admin.load_balancers();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0]["provisioning_status"], "ACTIVE");
        assert_eq!(admin.journal().count(|e| e.service == "load-balancer"), 0);
        assert_eq!(admin.leaks().by_type["loadbalancers"].len(), 1);
        // The override is gone: later creates follow the configured mode again.
        assert!(admin.lifecycle().by_id.is_empty());
        assert!(admin.seed_load_balancer(json!("not an object")).is_err());
        assert!(
            admin
                .seed_load_balancer(json!({"listeners": [{"protocol": "FTP", "protocol_port": 1}]}))
                .is_err()
        );
        mock.shutdown().await;
    }
}

#[cfg(test)]
mod mock_cloud_tests {
    use super::*;

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin` with its `/admin` path.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = OpenStackMock::start(Config::default())
            .await
            .expect("start");
        mock_cloud::testing::check_admin_router(mock, "/journal").await;
    }
}
