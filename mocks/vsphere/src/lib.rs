//! A mock vCenter that unmodified vSphere clients — govmomi in cloud-provider-vsphere,
//! pyvmomi, our reference CCM — talk to over HTTPS, so CCM conformance cases run with no
//! vCenter. Where vcsim (govmomi's simulator) is the usual stand-in, this mock adds what a
//! CCM needs and vcsim lacks: first-class guest hostName/IPs and BIOS UUIDs matching the
//! simulated nodes, `SearchIndex` scoped to the datacenter, idle session expiry, `/api/session`,
//! and the shared fault/journal/leak engine (`mock-cloud`).
//!
//! One HTTPS listener (vSphere clients insist on TLS), a CA generated at start and written
//! to `ca.pem` in [`Config::ca_dir`] (a temporary directory by default):
//! - `POST /sdk`: vim25 SOAP (see [`METHODS`]); `GET /sdk/vimServiceVersions.xml` and a
//!   minimal `GET /sdk/vimService.wsdl` (service `VimService` at `/sdk`).
//! - `/rest/com/vmware/cis/...` and `/api/...`: vAPI sessions and tagging.
//! - `/admin`: our control API (journal, faults, reset from `mock-cloud`; VMs, tags, leaks).
//!
//! Journal and faults speak vSphere terms: a SOAP call is journaled with service `vim`,
//! method `POST` and path `/sdk/<Method>` (e.g. `/sdk/FindByUuid`), so a fault rule
//! `{"service":"vim","path":"FindByUuid","status":404}` fails that method only. For the
//! fault engine (`Faults::for_cloud("vsphere")`, through the shared request gate) a call's `operation` is the SOAP method
//! and its `resource` the MoRef id it is about (`_this`, or for the PropertyCollector the
//! first `obj` of the spec). A fired rule answers a vim25 fault (HTTP 500, as vCenter
//! does): a `code` naming `NotAuthenticated`, `ManagedObjectNotFound`, `InvalidArgument` or
//! `SystemError` picks that fault (kind `throttle` names `NotAuthenticated`); otherwise
//! 401/403 -> `NotAuthenticated`, 404 -> `ManagedObjectNotFound` (of `_this`), 400 ->
//! `InvalidArgument`, others -> `SystemError`. Kind `reset` drops the connection (journal
//! status 0); `not_found_after_create` answers `ManagedObjectNotFound` for reads of a VM
//! made by [`Admin::create_vm`] within the window. vAPI calls are journaled as service
//! `vapi` with their real path, and a fired rule answers the vAPI error envelope with the
//! rule's status. Journal entries carry the same `operation` (the SOAP method; for vAPI
//! `"METHOD path"`) and `resource` (the MoRef id) the fault engine saw; admin entries
//! carry neither.
//!
//! [`Config::seed`] (`ccm-conformance mock vsphere --seed FILE`) adds VMs, tag categories,
//! tags and attachments ([`VsphereState`]), fault rules and power-task lifecycle modes
//! (types [`LIFECYCLE_TYPES`]), all restored by reset. Power tasks follow the shared
//! lifecycle engine (`mock_cloud::lifecycle`): `immediate` (default) finishes before the
//! call returns; `reads`, `seconds`, `error`, `stuck` leave the task `running` and set the
//! VM's power state only when it succeeds; [`Admin::set_task_policies`] changes the modes
//! at run time. `WaitForUpdates[Ex]` blocks until a filtered object changes or
//! `maxWaitSeconds` passes. `RebootGuest` and `ResetVM_Task` restart the guest: the VM
//! stays `poweredOn` while VMware Tools are down and `guest.net` is empty, for
//! [`REBOOT_SECONDS`] (or until [`Admin::finish_reboot`] when [`Admin::reboot_vm`] holds
//! it), which is the window cloud-provider-vsphere#479 is about.
//!
//! Deliberate simplifications (each documented where it lives): an already-reached power
//! state fails the task at once (`InvalidPowerState`); `WaitForUpdates[Ex]` reports whole
//! objects (every selected property) and only tells a first call from later ones by
//! version, and blocks at most a minute; property filters and
//! `RetrievePropertiesEx` pages are not tied to the session that made them; an unknown
//! top-level property is `InvalidProperty`, an unknown path below a known one is unset.
//! Differences from vcsim, checked by `tests/pyvmomi.rs`, are listed there.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mock_vsphere::Error> {
//! let mock = mock_vsphere::VsphereMock::start(mock_vsphere::Config::default()).await?;
//! let admin = mock.admin();
//! let vm = admin.vm_by_name("node-0").expect("seeded");
//! admin.update_vm(&vm.id, mock_vsphere::VmPatch { ips: Some(vec!["198.18.0.99".into()]), ..Default::default() })
//!     .expect("patch");
//! admin.faults().add(mock_cloud::Fault::error(401).service("vim").path("FindByUuid").count(Some(1)));
//! println!("{}", serde_json::to_string(&mock.ready_info()).expect("json"));
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod admin_api;
mod control;
mod gate;
mod props;
mod seed;
mod soap;
mod spec;
mod state;
mod vapi;
mod xml;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use mock_cloud::lifecycle::Policies;
use mock_cloud::tls::{ClientAuth, LOCAL_SANS, TestCa, TlsError};
use mock_cloud::{Faults, Journal, ServeError, ServerHandle};
use serde::{Deserialize, Serialize};

pub use control::Admin;
pub use gate::LOOKUPS;
pub use seed::{AttachmentSeed, CategorySeed, LIFECYCLE_TYPES, SeedFile, TagSeed, VsphereState};
pub use soap::{API_VERSION, METHODS, SESSION_COOKIE};
pub use state::{
    AdminError, Category, Nic, PowerState, REBOOT_SECONDS, Tag, VmInfo, VmPatch, VmSpec,
};
pub use vapi::SESSION_HEADER;

use crate::soap::Sessions;
use crate::state::Inventory;

/// SOAP bodies larger than this get an `InvalidRequest` fault (HTTP 500).
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// How the mock starts.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    pub username: String,
    pub password: String,
    /// Datacenter names; each gets a cluster with `hosts` hosts.
    pub datacenters: Vec<String>,
    pub hosts: usize,
    /// VMs created at start (and restored by reset), in the first datacenter: name and
    /// `guest.hostName` `{node_name_prefix}{i}`, IP `198.18.{address_block}.{10+i}`.
    pub nodes: usize,
    pub node_name_prefix: String,
    pub address_block: u8,
    /// SOAP and vAPI sessions unused this long are dropped (`NotAuthenticated` / 401).
    pub session_idle_timeout: Duration,
    /// Where `ca.pem` is written; a temporary directory (removed on drop) when `None`.
    pub ca_dir: Option<PathBuf>,
    /// Zone/region tagging as the vSphere CCM's `labels{zone,region}` expect: when set,
    /// categories `k8s-region` and `k8s-zone` exist, the region tag is attached to every
    /// datacenter and zone tags to hosts round robin.
    pub zones: Option<ZoneSeed>,
    /// Extra VMs, tags, fault rules and task lifecycle modes (a seed file; see
    /// [`VsphereState`]), added after `nodes` and `zones`. Reset puts all of it back.
    pub seed: SeedFile,
}

/// Zone and region tags to seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSeed {
    pub region_category: String,
    pub zone_category: String,
    pub region: String,
    pub zones: Vec<String>,
}

impl Default for ZoneSeed {
    fn default() -> Self {
        ZoneSeed {
            region_category: "k8s-region".into(),
            zone_category: "k8s-zone".into(),
            region: "region-a".into(),
            zones: vec!["zone-a".into(), "zone-b".into()],
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            username: "administrator@vsphere.local".into(),
            // Random, so a client that ignores its configuration cannot pass by luck.
            password: format!("Pw-{}", uuid::Uuid::new_v4().simple()),
            datacenters: vec!["DC0".into()],
            hosts: 2,
            nodes: 3,
            node_name_prefix: "node-".into(),
            address_block: 0,
            session_idle_timeout: Duration::from_secs(30 * 60),
            ca_dir: None,
            zones: Some(ZoneSeed::default()),
            seed: SeedFile::default(),
        }
    }
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting mock vSphere: {0}")]
    Serve(#[from] ServeError),
    #[error("mock vSphere TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("writing the CA file {path}: {source}")]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("seeding {what}: {source}")]
    Seed { what: String, source: AdminError },
    #[error("mock vSphere config: {0}")]
    Config(String),
    #[error("seed file: {0}")]
    SeedFile(#[from] mock_cloud::SeedError),
    #[error("seed file fault rules: {0}")]
    SeedFaults(#[from] mock_cloud::FaultError),
}

/// What a client needs (the ready-file object of DESIGN.md "Contracts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    /// `https://127.0.0.1:PORT/sdk`.
    pub url: String,
    pub username: String,
    pub password: String,
    /// Always false: the CA in `ca_file` verifies the serving certificate.
    pub insecure: bool,
    pub ca_file: Option<String>,
    pub admin_url: String,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub config: Config,
    pub base: String,
    pub instance_uuid: String,
    inventory: Mutex<Inventory>,
    seed: Inventory,
    sessions: Mutex<Sessions>,
    pub journal: Journal,
    pub faults: Faults,
    /// Which lifecycle mode a new power task gets.
    policies: Mutex<Policies>,
}

impl Shared {
    /// The inventory. Callers hold it briefly and never across an await.
    pub fn inventory(&self) -> MutexGuard<'_, Inventory> {
        self.inventory.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn policies(&self) -> MutexGuard<'_, Policies> {
        self.policies.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running mock vCenter.
pub struct VsphereMock {
    shared: Arc<Shared>,
    server: ServerHandle,
    ca_file: PathBuf,
    /// Keeps the temporary CA directory alive.
    _ca_dir: Option<tempfile::TempDir>,
}

impl VsphereMock {
    /// Generates the CA, binds, seeds and starts serving HTTPS.
    pub async fn start(config: Config) -> Result<VsphereMock, Error> {
        let ca = TestCa::generate("ccm-conformance mock vSphere CA")?;
        let (dir, temp) = match &config.ca_dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = tempfile::tempdir().map_err(|source| Error::CaFile {
                    path: std::env::temp_dir(),
                    source,
                })?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let ca_file = dir.join("ca.pem");
        ca.write_ca_file(&ca_file).map_err(|source| Error::CaFile {
            path: ca_file.clone(),
            source,
        })?;
        let tls = ca.server_config(LOCAL_SANS, ClientAuth::None)?;
        let bound = mock_cloud::bind(config.listen).await?;
        let base = bound.base_url_https();
        let shared = Arc::new(build_shared(config, base)?);
        let server = bound.serve_tls(router(shared.clone()), tls);
        tracing::info!(base = %shared.base, "mock vSphere serving");
        Ok(VsphereMock {
            shared,
            server,
            ca_file,
            _ca_dir: temp,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn ca_file(&self) -> &std::path::Path {
        &self.ca_file
    }

    pub fn ready_info(&self) -> ReadyInfo {
        let c = &self.shared.config;
        ReadyInfo {
            url: format!("{}/sdk", self.shared.base),
            username: c.username.clone(),
            password: c.password.clone(),
            insecure: false,
            ca_file: Some(self.ca_file.display().to_string()),
            admin_url: format!("{}/admin", self.shared.base),
        }
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// Starts the mock and writes its [`ReadyInfo`] as JSON to `ready_file` (atomically:
/// a sibling temporary file renamed into place): `ccm-conformance mock vsphere` in a call.
pub async fn start_with_ready_file(
    config: Config,
    ready_file: &std::path::Path,
) -> Result<VsphereMock, Error> {
    let mock = VsphereMock::start(config).await?;
    let json =
        serde_json::to_vec_pretty(&mock.ready_info()).map_err(|e| Error::Config(e.to_string()))?;
    let tmp = ready_file.with_extension("tmp");
    std::fs::write(&tmp, json)
        .and_then(|()| std::fs::rename(&tmp, ready_file))
        .map_err(|source| Error::CaFile {
            path: ready_file.to_path_buf(),
            source,
        })?;
    Ok(mock)
}

pub(crate) fn build_shared(config: Config, base: String) -> Result<Shared, Error> {
    if config.datacenters.is_empty() {
        return Err(Error::Config("at least one datacenter is needed".into()));
    }
    let mut inv = Inventory::new(&config.datacenters, config.hosts);
    for i in 0..config.nodes {
        let name = format!("{}{i}", config.node_name_prefix);
        let spec = VmSpec {
            name: name.clone(),
            host_name: Some(name.clone()),
            // Not loopback: the vSphere CCM drops loopback guest IPs (cloud-provider-vsphere
            // `excludeLocalhostIPs`); the benchmarking range is never routed.
            ips: vec![format!(
                "198.18.{}.{}",
                config.address_block,
                10 + (i % 240)
            )],
            ..Default::default()
        };
        inv.create_vm(spec)
            .map_err(|source| Error::Seed { what: name, source })?;
    }
    if let Some(z) = &config.zones {
        seed_zones(&mut inv, z).map_err(|source| Error::Seed {
            what: "zone tags".into(),
            source,
        })?;
    }
    seed::apply(&mut inv, &config.seed.state)
        .map_err(|(what, source)| Error::Seed { what, source })?;
    let policies = config.seed.lifecycle.policies(LIFECYCLE_TYPES)?;
    let faults = Faults::for_cloud("vsphere");
    config.seed.apply_faults(&faults)?;
    Ok(Shared {
        seed: inv.clone(),
        inventory: Mutex::new(inv),
        sessions: Mutex::new(Sessions::default()),
        journal: Journal::new(),
        faults,
        policies: Mutex::new(policies),
        instance_uuid: state::new_uuid(),
        base,
        config,
    })
}

fn seed_zones(inv: &mut Inventory, z: &ZoneSeed) -> Result<(), AdminError> {
    let region_cat = inv.add_category(&z.region_category, "SINGLE", vec!["Datacenter".into()])?;
    let zone_cat = inv.add_category(
        &z.zone_category,
        "SINGLE",
        vec!["HostSystem".into(), "ClusterComputeResource".into()],
    )?;
    let region = inv.add_tag(&region_cat, &z.region)?;
    let mut zone_tags = Vec::new();
    for zone in &z.zones {
        zone_tags.push(inv.add_tag(&zone_cat, zone)?);
    }
    let dcs = inv.datacenters.clone();
    let mut n = 0;
    for dc in dcs {
        inv.attach(&region, &dc.id)?;
        for host in &dc.hosts {
            if !zone_tags.is_empty() {
                inv.attach(&zone_tags[n % zone_tags.len()], host)?;
                n += 1;
            }
        }
    }
    Ok(())
}

impl mock_cloud::MockCloud for VsphereMock {
    const LABEL: &'static str = "vSphere";
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
        VsphereMock::start(config)
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
        VsphereMock::shutdown(self)
    }
}

/// The admin API (`/admin/...` once nested); served beside the gates, so [`router`]
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
    let vapi =
        vapi::routes(shared.clone()).layer(mock_cloud::GateLayer::new(Arc::new(gate::VapiGate {
            shared: shared.clone(),
        })));
    Router::new()
        .route(
            "/sdk",
            post(soap::endpoint).route_layer(mock_cloud::GateLayer::new(Arc::new(
                gate::SoapGate {
                    shared: shared.clone(),
                },
            ))),
        )
        .route("/sdk/vimServiceVersions.xml", get(soap::service_versions))
        .route("/sdk/vimService.wsdl", get(soap::wsdl))
        .with_state(shared)
        .merge(vapi)
        .nest("/admin", control)
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod mock_cloud_tests {
    use super::*;

    /// The admin router `MockCloud` hands out serves the shared routes over the mock's own
    /// state and journals each request as service `admin` with its `/admin` path.
    #[tokio::test]
    async fn the_admin_router_serves_the_journal_and_journals_itself() {
        let mock = VsphereMock::start(Config::default()).await.expect("start");
        mock_cloud::testing::check_admin_router(mock, "/journal").await;
    }
}
