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
#![forbid(unsafe_code)]

mod admin_api;
mod dataplane;
mod envelope;
mod gate;
mod keystone;
mod lbaas;
mod leaks;
mod model;
mod neutron;
mod neutron_l3;
mod neutron_sg;
mod nova;
mod octavia;
mod util;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use leaks::{LeakedResource, Leaks};
pub use mock_cloud::{Mode as LifecycleMode, Policies as LifecyclePolicies};
pub use model::{AdminError, ServerInfo, ServerPatch, ServerSpec};

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
    /// Which /24 of each 127.x.0.0/16 address pool (fixed, floating, VIP) to allocate from
    /// first; give each mock running at the same time its own block.
    pub address_block: u8,
}

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
            address_block: 0,
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
    /// Wakes the data plane's reconciler after a write.
    pub dataplane_wake: tokio::sync::Notify,
}

impl Shared {
    /// The cloud state. Callers hold it briefly and never across an await.
    pub fn cloud(&self) -> MutexGuard<'_, Cloud> {
        self.cloud
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        if crate::neutron_l3::parse_cidr(destination).is_none() {
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
        let route = crate::neutron_l3::Route {
            destination: destination.to_string(),
            nexthop,
        };
        if !router.routes.contains(&route) {
            router.routes.push(route);
        }
        Ok(())
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
    dataplane: dataplane::DataPlane,
}

impl OpenStackMock {
    /// Binds, seeds `config.nodes` servers and starts serving, with the load balancers'
    /// data plane (listeners bind their VIPs once ACTIVE).
    pub async fn start(config: Config) -> Result<OpenStackMock, Error> {
        let bound = mock_cloud::bind(config.listen).await?;
        let shared = Arc::new(build_shared(config, bound.base_url())?);
        let server = bound.serve(router(shared.clone()));
        let dataplane = dataplane::DataPlane::start(shared.clone());
        tracing::info!(base = %shared.base, "mock OpenStack serving");
        Ok(OpenStackMock {
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
        ReadyInfo {
            auth_url: format!("{}/identity/v3", self.shared.base),
            username: c.username.clone(),
            password: c.password.clone(),
            project_name: c.project_name.clone(),
            domain_name: c.domain_name.clone(),
            region: c.region.clone(),
            admin_url: format!("{}/admin", self.shared.base),
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
    let catalog = keystone::catalog(&base, &config.region);
    Ok(Shared {
        host_id: format!("{}{}", new_hex_id(), &new_hex_id()[..24]),
        catalog,
        identity,
        seed: cloud.clone(),
        cloud: Mutex::new(cloud),
        tokens: Mutex::new(HashMap::new()),
        journal: Journal::new(),
        faults: Faults::new(),
        dataplane_wake: tokio::sync::Notify::new(),
        base,
        config,
    })
}

/// The whole HTTP surface.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let admin = Admin {
        shared: shared.clone(),
    };
    let reset_target = admin.clone();
    let reset: mock_cloud::ResetFn = Arc::new(move || reset_target.reset_cloud());
    let control = mock_cloud::admin_router(shared.journal.clone(), shared.faults.clone(), reset)
        .merge(admin_api::routes(admin));
    Router::new()
        .merge(keystone::routes(shared.clone()))
        .merge(nova::routes(shared.clone()))
        .merge(neutron::routes(shared.clone()))
        .merge(octavia::routes(shared.clone()))
        .nest("/admin", control)
        .fallback(envelope::not_found)
        .method_not_allowed_fallback(envelope::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(shared, gate::gate))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

#[cfg(test)]
pub(crate) mod testing;
