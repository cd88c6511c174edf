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
mod envelope;
mod gate;
mod keystone;
mod leaks;
mod model;
mod neutron;
mod nova;
mod octavia;
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

pub use leaks::{LeakedResource, Leaks};
pub use mock_cloud::{Mode as LifecycleMode, Policies as LifecyclePolicies};
pub use model::{AdminError, REBOOT_SECONDS, ServerInfo, ServerPatch, ServerSpec};

use crate::model::Cloud;

/// Request bodies larger than this get a 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A router as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouterInfo {
    pub id: String,
    pub name: String,
    /// Extra routes as `(destination, nexthop)`.
    pub routes: Vec<(String, String)>,
}

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

/// The control side of a running mock: same operations as the HTTP admin API.
#[derive(Clone)]
pub struct Admin {
    shared: Arc<Shared>,
}

impl Admin {
    /// All servers, in creation order.
    pub fn servers(&self) -> Vec<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud
            .servers_in_order()
            .map(|s| cloud.server_info(s))
            .collect()
    }

    pub fn server(&self, id: &str) -> Option<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud.servers.get(id).map(|s| cloud.server_info(s))
    }

    /// The oldest server with this exact name.
    pub fn server_by_name(&self, name: &str) -> Option<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud.server_by_name(name).map(|s| cloud.server_info(s))
    }

    pub fn create_server(&self, spec: ServerSpec) -> Result<ServerInfo, AdminError> {
        self.shared.cloud().create_server(spec)
    }

    pub fn update_server(&self, id: &str, patch: ServerPatch) -> Result<ServerInfo, AdminError> {
        self.shared.cloud().update_server(id, patch)
    }

    /// Reboots a server as Nova's `reboot` action does (`hard`: `HARD_REBOOT`, else
    /// `REBOOT`, then `ACTIVE`); `hold` keeps it rebooting until [`Self::finish_reboot`],
    /// else it ends after [`REBOOT_SECONDS`] like one asked for through the API.
    pub fn reboot_server(
        &self,
        id: &str,
        hard: bool,
        hold: bool,
    ) -> Result<ServerInfo, AdminError> {
        let mode = if hold {
            LifecycleMode::Stuck
        } else {
            LifecycleMode::Seconds {
                t: model::REBOOT_SECONDS,
            }
        };
        self.shared.cloud().reboot_server(id, hard, mode)
    }

    /// Ends a server's reboot now: it is `ACTIVE` again.
    pub fn finish_reboot(&self, id: &str) -> Result<ServerInfo, AdminError> {
        self.shared
            .cloud()
            .set_reboot_mode(id, LifecycleMode::Immediate)
    }

    /// Deletes the server and its ports.
    pub fn delete_server(&self, id: &str) -> Result<(), AdminError> {
        self.shared.cloud().delete_server(id)
    }

    pub fn journal(&self) -> Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Clears the journal and fault rules and puts the servers back to the seed (same ids
    /// and addresses). Issued tokens stay valid.
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    fn reset_cloud(&self) {
        let seed = self.shared.seed.clone();
        *self.shared.cloud() = seed;
        self.shared.model_changed();
        // The seed file's rules were checked at start, so this cannot fail.
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }
}

/// What an Octavia lifecycle mode applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleTarget {
    /// Every transition without a more specific mode.
    Default,
    /// Transitions started by writes to one resource type: `loadbalancer`, `listener`,
    /// `pool`, `member` or `healthmonitor` (child writes fall back to `loadbalancer`).
    Type(String),
    /// Every transition of one load balancer, including the one under way.
    LoadBalancer(String),
}

/// Resource types a lifecycle mode can be set for.
pub const LIFECYCLE_TYPES: &[&str] = &[
    "loadbalancer",
    "listener",
    "pool",
    "member",
    "healthmonitor",
];

impl Admin {
    /// How Octavia transitions end, by default, type and load balancer.
    pub fn lifecycle(&self) -> LifecyclePolicies {
        self.shared.cloud().lbaas.policies.clone()
    }

    /// Sets (`Some`) or removes (`None`) a lifecycle mode; removing the default sets it
    /// back to immediate. A load balancer's mode also applies to its pending transition.
    pub fn set_lifecycle(
        &self,
        target: LifecycleTarget,
        mode: Option<LifecycleMode>,
    ) -> Result<(), AdminError> {
        let mode = mode
            .map(|m| {
                m.validate().map_err(|e| AdminError::Invalid {
                    field: "mode",
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let mut cloud = self.shared.cloud();
        let policies = &mut cloud.lbaas.policies;
        match target {
            LifecycleTarget::Default => policies.default = mode.unwrap_or(LifecycleMode::Immediate),
            LifecycleTarget::Type(t) => {
                if !LIFECYCLE_TYPES.contains(&t.as_str()) {
                    return Err(AdminError::Invalid {
                        field: "type",
                        reason: format!("{t:?} is not one of {}", LIFECYCLE_TYPES.join(", ")),
                    });
                }
                match mode {
                    Some(m) => policies.by_type.insert(t, m),
                    None => policies.by_type.remove(&t),
                };
            }
            LifecycleTarget::LoadBalancer(id) => {
                match mode {
                    Some(m) => policies.by_id.insert(id.clone(), m),
                    None => policies.by_id.remove(&id),
                };
                cloud.lbaas.apply_override(&id);
            }
        }
        Ok(())
    }

    /// Every load balancer as Octavia shows it (looking does not count as a read).
    pub fn load_balancers(&self) -> Vec<serde_json::Value> {
        let mut cloud = self.shared.cloud();
        cloud.settle_all_lbs(false);
        let project = &self.shared.identity.project_id;
        cloud
            .lbaas
            .lbs_sorted()
            .into_iter()
            .map(|lb| cloud.lbaas.lb_json(lb, project))
            .collect()
    }

    /// The id of the private subnet the servers' ports are on.
    pub fn private_subnet_id(&self) -> Option<String> {
        let cloud = self.shared.cloud();
        let network = cloud.networks.iter().find(|n| !n.external)?;
        Some(network.subnet_id.clone())
    }

    /// The id of the external (floating IP) network.
    pub fn external_network_id(&self) -> Option<String> {
        let cloud = self.shared.cloud();
        cloud
            .networks
            .iter()
            .find(|n| n.external)
            .map(|n| n.id.clone())
    }

    /// The floating IP associated with `port_id`, if any.
    pub fn floating_ip_of_port(&self, port_id: &str) -> Option<String> {
        let cloud = self.shared.cloud();
        cloud
            .l3
            .floatingips
            .values()
            .find(|f| f.port_id.as_deref() == Some(port_id))
            .map(|f| f.address.to_string())
    }

    /// Associates a new floating IP with `port_id` (a load balancer's `vip_port_id`, say)
    /// and returns its address, as a tenant tool or an earlier CCM would have made it.
    pub fn seed_floating_ip(&self, port_id: &str) -> Result<String, AdminError> {
        let address = {
            let mut cloud = self.shared.cloud();
            crate::neutron::l3::seed_fip(&mut cloud, port_id).map_err(|reason| {
                AdminError::Invalid {
                    field: "port_id",
                    reason,
                }
            })?
        };
        self.shared.model_changed();
        Ok(address.to_string())
    }

    /// Every router as `(id, name, routes)`, routes as `(destination, nexthop)`.
    pub fn routers(&self) -> Vec<RouterInfo> {
        let cloud = self.shared.cloud();
        cloud
            .l3
            .routers
            .values()
            .map(|r| RouterInfo {
                id: r.id.clone(),
                name: r.name.clone(),
                routes: r
                    .routes
                    .iter()
                    .map(|x| (x.destination.clone(), x.nexthop.to_string()))
                    .collect(),
            })
            .collect()
    }

    /// Adds an extra route to a router, as another tenant tool would (a case can then check
    /// a CCM leaves routes it does not own alone).
    pub fn add_route(
        &self,
        router_id: &str,
        destination: &str,
        nexthop: &str,
    ) -> Result<(), AdminError> {
        let nexthop: std::net::IpAddr = nexthop.parse().map_err(|_| AdminError::Invalid {
            field: "nexthop",
            reason: format!("{nexthop:?} is not an IP address"),
        })?;
        if crate::neutron::l3_state::parse_cidr(destination).is_none() {
            return Err(AdminError::Invalid {
                field: "destination",
                reason: format!("{destination:?} is not an IPv4 CIDR"),
            });
        }
        let mut cloud = self.shared.cloud();
        let router = cloud
            .l3
            .routers
            .get_mut(router_id)
            .ok_or_else(|| AdminError::NotFound(format!("router {router_id}")))?;
        let route = crate::neutron::l3_state::Route {
            destination: destination.to_string(),
            nexthop,
        };
        if !router.routes.contains(&route) {
            router.routes.push(route);
        }
        Ok(())
    }

    /// Creates a load balancer as if a tool before the CCM under test had made it (an
    /// in-tree cloud provider, a previous CCM version), so upgrade cases can start from that
    /// state. `body` is Octavia's fully-populated create request (the `loadbalancer`
    /// object: name, listeners with default pools and members); `vip_subnet_id` defaults to
    /// the tenant subnet. The load balancer is ACTIVE at once whatever the lifecycle mode,
    /// the call is not journaled (it is not a client call), and it is not part of the seed:
    /// it shows in [`Self::leaks`] until deleted. Returns the load balancer as Octavia shows
    /// it.
    pub fn seed_load_balancer(
        &self,
        mut body: serde_json::Value,
    ) -> Result<serde_json::Value, AdminError> {
        let invalid = |reason: String| AdminError::Invalid {
            field: "loadbalancer",
            reason,
        };
        let id = {
            let mut cloud = self.shared.cloud();
            let subnet = cloud.subnets[0].id.clone();
            let object = body
                .as_object_mut()
                .ok_or_else(|| invalid("expected a JSON object".into()))?;
            object
                .entry("vip_subnet_id")
                .or_insert(serde_json::Value::String(subnet));
            let id = cloud
                .create_lb(object.clone())
                .map_err(|e| invalid(e.to_string()))?;
            // Finish the create now: an id override to immediate, settle, drop the override.
            let policies = &mut cloud.lbaas.policies;
            let previous = policies.by_id.insert(id.clone(), LifecycleMode::Immediate);
            cloud.lbaas.apply_override(&id);
            cloud.settle_lb(&id, false);
            match previous {
                Some(mode) => cloud.lbaas.policies.by_id.insert(id.clone(), mode),
                None => cloud.lbaas.policies.by_id.remove(&id),
            };
            id
        };
        self.shared.model_changed();
        let project = &self.shared.identity.project_id;
        let cloud = self.shared.cloud();
        let lb = cloud
            .lbaas
            .lbs
            .get(&id)
            .ok_or_else(|| AdminError::NotFound(format!("load balancer {id}")))?;
        Ok(cloud.lbaas.lb_json(lb, project))
    }

    /// Every resource created through the cloud APIs since the seed that still exists.
    pub fn leaks(&self) -> Leaks {
        let mut cloud = self.shared.cloud();
        cloud.settle_all_lbs(false);
        leaks::find(&self.shared.seed, &cloud)
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

/// The admin routes (`/admin/...` once nested); [`router`] journals them through the
/// gate (service `admin`).
fn admin_routes(shared: Arc<Shared>) -> Router {
    let admin = Admin {
        shared: shared.clone(),
    };
    let reset_target = admin.clone();
    let reset: mock_cloud::ResetFn = Arc::new(move || reset_target.reset_cloud());
    mock_cloud::admin_router(shared.journal.clone(), shared.faults.clone(), reset)
        .merge(admin_api::routes(admin))
}

impl mock_cloud::MockCloud for OpenStackMock {
    const LABEL: &'static str = "OpenStack";
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

    fn admin_router(&self) -> Router {
        mock_cloud::journaled_as_admin(
            admin_routes(self.shared.clone()),
            self.shared.journal.clone(),
        )
    }

    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send {
        OpenStackMock::shutdown(self)
    }
}

/// The whole HTTP surface.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let control = admin_routes(shared.clone());
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
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use mock_cloud::MockCloud;
    use tower::ServiceExt;

    use super::*;

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin` with its `/admin` path.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = OpenStackMock::start(Config::default())
            .await
            .expect("start");
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
