//! The reference cloud-controller-manager, in Rust.
//!
//! Exists so ccm-conformance has a CCM it controls end to end: the harness starts it as a
//! separate process with upstream's flags, a kubeconfig and the provider's upstream
//! config file, and it talks to the API server and the cloud over HTTP like any CCM.
//! Startup errors are one line on stderr and exit status 1. All four upstream controllers
//! are implemented (cloud-node, cloud-node-lifecycle, service-lb, node-route); service-lb
//! and node-route start only when the provider supports load balancers / routes, and are
//! otherwise logged as skipped, as upstream does.

#![forbid(unsafe_code)]

pub mod address;
pub mod client_builder;
pub mod cloud;
pub mod controllers;
pub mod leader;
pub mod metrics;
pub mod migration;
pub mod options;
pub mod providers;
pub mod serving;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use options::Options;

/// User-Agent on every Kubernetes request (defined with the per-controller clients, which
/// extend it).
pub use client_builder::USER_AGENT;

/// Startup failures; each is printed as one line.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Options(#[from] options::OptionsError),
    /// The chosen provider could not be built (its config, its cloud); `provider` is its
    /// `--cloud-provider` name.
    #[error("{provider} provider: {source}")]
    Provider {
        provider: &'static str,
        source: providers::ProviderError,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("kubernetes client: {0}")]
    KubeClient(#[from] kube::Error),
    #[error(transparent)]
    Serving(#[from] serving::ServingError),
    #[error(transparent)]
    Migration(#[from] migration::MigrationError),
    #[error("node-route-controller: {0}")]
    Route(#[from] controllers::route::RouteConfigError),
    #[error(transparent)]
    ClientBuilder(#[from] client_builder::ClientBuilderError),
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Entry point of the `reference-ccm` binary: parses `std::env::args`, runs until
/// SIGINT/SIGTERM (exit 0), a lost lease (exit 1) or a startup error (exit 1).
pub fn main() -> ExitCode {
    main_with_args(std::env::args_os())
}

/// [`main`] with explicit arguments (the first is the program name).
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let opts = match parse_args(args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("reference-ccm: {line}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reference-ccm: {}", StartupError::Runtime(e));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reference-ccm: {}", error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// Parses flags; `Ok(None)` after printing `--help`/`--version`; `Err` is one line.
pub fn parse_args<I, T>(args: I) -> Result<Option<Options>, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Options::try_parse_from(args) {
        Ok(o) => Ok(Some(o)),
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return Ok(None);
            }
            let rendered = e.to_string();
            let line = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            Err(one_line(line.trim_start_matches("error: ")))
        }
    }
}

/// A startup error as the single line printed on stderr.
pub fn error_line(e: &StartupError) -> String {
    one_line(&e.to_string())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn init_logging(verbosity: u8) {
    let level = match verbosity {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},hyper=info,rustls=info,tower=info"))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

async fn kube_config(opts: &Options) -> Result<kube::Config, StartupError> {
    let mut config = if opts.kubeconfig.is_empty() {
        kube::Config::infer()
            .await
            .map_err(|e| StartupError::Kubeconfig(e.to_string()))?
    } else {
        let kubeconfig = kube::config::Kubeconfig::read_from(&opts.kubeconfig)
            .map_err(|e| StartupError::Kubeconfig(format!("{}: {e}", opts.kubeconfig)))?;
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| StartupError::Kubeconfig(format!("{}: {e}", opts.kubeconfig)))?
    };
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

/// Runs the CCM until a signal; errors before controllers start are startup errors.
pub async fn run(opts: Options) -> Result<(), StartupError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The flags, with the registry's checks (`--cloud-provider`, `--node-labels`).
    let factory = providers::registry::validate(&opts)?;
    providers::use_skip_lookup_before_create(
        opts.breaks(options::TestingBreak::SkipLookupBeforeCreate),
    );
    let enabled = opts.enabled_controllers()?;
    let migration = migration::MigrationConfig::from_options(&opts)?;

    // Provider and client first, logging after: a startup error stays one line.
    let (mut cloud, mut warnings) =
        (factory.new)(&opts)
            .await
            .map_err(|source| StartupError::Provider {
                provider: factory.name,
                source,
            })?;
    if enabled.contains(&options::NODE_ROUTE) && opts.configure_cloud_routes {
        warnings.extend(cloud.detect_routes().await);
    }
    let capabilities = cloud.capabilities();
    // Route config errors are fatal, as upstream's startRouteController returns them.
    let route_cidrs = if enabled.contains(&options::NODE_ROUTE)
        && opts.configure_cloud_routes
        && capabilities.routes
    {
        Some(controllers::route::parse_cluster_cidrs(&opts.cluster_cidr)?)
    } else {
        None
    };
    let config = kube_config(&opts).await?;
    let client = kube::Client::try_from(config.clone())?;
    // Each controller's client (its own ServiceAccount's with
    // --use-service-account-credentials); made before anything starts, as upstream's
    // ClientOrDie fails the start.
    let builder = client_builder::ClientBuilder::new(
        config,
        client.clone(),
        opts.use_service_account_credentials,
    );
    let mut clients = std::collections::BTreeMap::new();
    for name in &enabled {
        let sa = client_name(name);
        if !clients.contains_key(sa) {
            clients.insert(sa, builder.client(sa).await?);
        }
    }
    cloud.initialize(&client);
    let cloud = Arc::new(cloud);
    // The instance controllers see the provider through the (test-only) quirks.
    let instances = Arc::new(providers::quirks::WithQuirks::new(
        cloud.clone(),
        &opts.testing_provider_quirk,
    ));
    init_logging(opts.verbosity);
    for w in warnings {
        tracing::warn!("{w}");
    }
    if instances.active() {
        tracing::warn!(quirks = ?opts.testing_provider_quirk, "TEST ONLY: provider answers altered by --testing-provider-quirk");
    }
    if !opts.testing_break.is_empty() {
        tracing::warn!(breaks = ?opts.testing_break, "TEST ONLY: deliberately broken CCM behaviour enabled by --testing-break");
    }
    if !opts.kube_api_content_type.contains("json") {
        tracing::info!(content_type = %opts.kube_api_content_type, "only JSON is spoken to the API server; --kube-api-content-type ignored");
    }
    tracing::info!(version = env!("CARGO_PKG_VERSION"), provider = %opts.cloud_provider, "starting reference-ccm");

    // `/metrics` carries every registered provider's own families, whichever runs.
    let metrics = Arc::new(metrics::Metrics::with_provider_families(
        providers::registry::metric_families(),
    ));
    if opts.secure_port != 0 {
        serving::start(
            std::net::SocketAddr::new(opts.bind_address, opts.secure_port),
            metrics.clone(),
            opts.authorization_always_allow_paths.clone(),
        )
        .await?;
    }

    let starter = Arc::new(ControllerStarter {
        clients,
        root: client.clone(),
        cloud,
        instances,
        opts: opts.clone(),
        metrics,
        capabilities,
        route_cidrs,
    });
    // Leader migration splits the controllers between the main and the migration lease
    // (cloud-provider app/controllermanager.go); without it everything runs under the main one.
    let (main_set, migrated_set): (Vec<&'static str>, Vec<&'static str>) = match &migration {
        None => (enabled.clone(), Vec::new()),
        Some(m) => {
            let mut main_set = Vec::new();
            let mut migrated_set = Vec::new();
            for name in &enabled {
                match m.placement(name) {
                    migration::Placement::Main => main_set.push(*name),
                    migration::Placement::Migrated => migrated_set.push(*name),
                    migration::Placement::Elsewhere => tracing::info!(
                        "Skipping {name}: the leader migration config assigns it to another component"
                    ),
                }
            }
            (main_set, migrated_set)
        }
    };

    if opts.leader_elect {
        let identity = leader::default_identity();
        let lease = |name: &str| leader::LeaderConfig {
            namespace: opts.leader_elect_resource_namespace.clone(),
            name: name.to_owned(),
            identity: identity.clone(),
            lease_duration: opts.leader_elect_lease_duration,
            renew_deadline: opts.leader_elect_renew_deadline,
            retry_period: opts.leader_elect_retry_period,
        };
        let mut elector =
            leader::LeaderElector::new(client.clone(), lease(&opts.leader_elect_resource_name));
        tokio::select! {
            () = elector.acquire() => {}
            () = shutdown_signal() => return Ok(()),
        }
        tokio::spawn(leader::exit_when_lost(elector));
        starter.start_all(&main_set);
        if let Some(m) = &migration {
            // The migration lease is contended only once the main lease is held
            // (controller-manager pkg/leadermigration: MigrationReady).
            let mut migration_elector =
                leader::LeaderElector::new(client.clone(), lease(&m.leader_name));
            let starter = starter.clone();
            tokio::spawn(async move {
                migration_elector.acquire().await;
                starter.start_all(&migrated_set);
                leader::exit_when_lost(migration_elector).await;
            });
        }
    } else {
        starter.start_all(&main_set);
        starter.start_all(&migrated_set);
    }
    shutdown_signal().await;
    tracing::info!("shutting down");
    Ok(())
}

/// What starting a controller needs; one place so the main and the migration lease start
/// controllers the same way.
struct ControllerStarter {
    /// By [`client_name`].
    clients: std::collections::BTreeMap<&'static str, kube::Client>,
    /// The CCM's own client, for a controller without one of its own.
    root: kube::Client,
    cloud: Arc<providers::AnyCloud>,
    /// `cloud` as the cloud-node and lifecycle controllers see it.
    instances: Arc<providers::quirks::WithQuirks<providers::AnyCloud>>,
    opts: Options,
    metrics: Arc<metrics::Metrics>,
    capabilities: cloud::Capabilities,
    route_cidrs: Option<Vec<controllers::route::Cidr>>,
}

impl ControllerStarter {
    fn start_all(&self, names: &[&'static str]) {
        for name in names {
            self.start(name);
        }
    }

    fn start(&self, name: &'static str) {
        let client = self.clients.get(client_name(name)).unwrap_or(&self.root);
        let (opts, cloud) = (&self.opts, &self.cloud);
        match name {
            options::CLOUD_NODE => {
                let node_opts = controllers::node::NodeControllerOptions {
                    workers: opts.concurrent_node_syncs,
                    status_workers: opts.node_status_workers(),
                    status_update_period: opts.node_status_update_frequency,
                };
                tracing::info!(workers = node_opts.workers, "Starting {name}");
                tokio::spawn(controllers::node::run(
                    client.clone(),
                    self.instances.clone(),
                    node_opts,
                    self.metrics.clone(),
                ));
            }
            options::CLOUD_NODE_LIFECYCLE => {
                tracing::info!(period = ?opts.node_monitor_period, "Starting {name}");
                tokio::spawn(controllers::lifecycle::run(
                    client.clone(),
                    self.instances.clone(),
                    opts.node_monitor_period,
                    opts.breaks(options::TestingBreak::DeleteNodesOnCloudErrors),
                ));
            }
            options::SERVICE_LB if self.capabilities.load_balancer => {
                let service_opts = controllers::service::ServiceControllerOptions {
                    cluster_name: opts.cluster_name.clone(),
                    workers: opts.concurrent_service_syncs,
                    forget_finalizer: opts.breaks(options::TestingBreak::ForgetFinalizer),
                    retry_without_backoff: opts.breaks(options::TestingBreak::RetryWithoutBackoff),
                    drop_failed_deletes: opts.breaks(options::TestingBreak::DropFailedDeletes),
                };
                tracing::info!(workers = service_opts.workers, "Starting {name}");
                tokio::spawn(controllers::service::run(
                    client.clone(),
                    cloud.clone(),
                    service_opts,
                ));
            }
            options::SERVICE_LB => {
                tracing::warn!(
                    "Skipping {name}: the cloud provider does not support external load balancers"
                )
            }
            options::NODE_ROUTE if !opts.configure_cloud_routes => {
                tracing::info!(
                    "Will not configure cloud provider routes, --configure-cloud-routes: false; skipping {name}"
                )
            }
            options::NODE_ROUTE => match &self.route_cidrs {
                Some(cidrs) => {
                    let route_opts = controllers::route::RouteControllerOptions {
                        cluster_name: opts.cluster_name.clone(),
                        cluster_cidrs: cidrs.clone(),
                        period: opts.route_reconciliation_period,
                    };
                    tracing::info!(period = ?route_opts.period, "Starting {name}");
                    tokio::spawn(controllers::route::run(
                        client.clone(),
                        cloud.clone(),
                        route_opts,
                    ));
                }
                None => tracing::warn!(
                    "configure-cloud-routes is set, but cloud provider does not support routes. Will not configure cloud provider routes; skipping {name}"
                ),
            },
            other => {
                tracing::warn!("Skipping {other}: not implemented in this reference CCM version")
            }
        }
    }
}

/// The identity a controller calls the API as with --use-service-account-credentials
/// (k8s.io/cloud-provider app/controllermanager.go `DefaultInitFuncConstructors`).
fn client_name(controller: &str) -> &'static str {
    match controller {
        options::CLOUD_NODE | options::CLOUD_NODE_LIFECYCLE => "node-controller",
        options::SERVICE_LB => "service-controller",
        options::NODE_ROUTE => "route-controller",
        _ => "cloud-controller-manager",
    }
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn startup_error(args: &[&str]) -> String {
        let opts = match parse_args(args.iter().copied()) {
            Ok(Some(o)) => o,
            Ok(None) => return "help".into(),
            Err(line) => return line,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        match rt.map(|rt| rt.block_on(run(opts))) {
            Ok(Err(e)) => error_line(&e),
            Ok(Ok(())) => "ran".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn startup_errors_are_one_line() {
        let cases: [(&[&str], &str); 7] = [
            (&["ccm", "--cloud-provider=nope"], "unknown cloud provider"),
            (&["ccm"], "--cloud-provider cannot be empty"),
            (&["ccm", "--bogus-flag"], "--bogus-flag"),
            (
                &["ccm", "--cloud-provider=openstack", "--controllers=*,foo"],
                "foo",
            ),
            (
                &[
                    "ccm",
                    "--cloud-provider=openstack",
                    "--cloud-config=/nonexistent/cloud.conf",
                ],
                "/nonexistent/cloud.conf",
            ),
            (
                &["ccm", "--cloud-provider=openstack", "--node-labels=a=b"],
                "--node-labels is a flag of the vSphere provider",
            ),
            (
                &["ccm", "--cloud-provider=vsphere", "--node-labels=-a=b"],
                "invalid --node-labels key \"-a\":",
            ),
        ];
        for (args, needle) in cases {
            let line = startup_error(args);
            assert!(line.contains(needle), "{args:?}: {line}");
            assert!(!line.contains('\n'), "{args:?}: {line}");
        }
    }

    /// cloud-provider-vsphere cloud.go `validateDualStack`, before any vCenter call.
    #[test]
    fn vsphere_dual_stack_without_the_alpha_env_is_a_startup_error() {
        if std::env::var_os(providers::vsphere::config::DUAL_STACK_ENV).is_some() {
            return; // the environment allows it; nothing to check here
        }
        let Ok(dir) = tempfile::tempdir() else {
            panic!("tempdir")
        };
        let file = dir.path().join("vsphere.conf");
        let conf = "global:\n  user: u\n  password: p\n  ipFamily: [ipv4, ipv6]\n\
                    vcenter:\n  mock:\n    server: 127.0.0.1\n    port: 1\n";
        assert!(std::fs::write(&file, conf).is_ok());
        let arg = format!("--cloud-config={}", file.display());
        assert_eq!(
            startup_error(&["ccm", "--cloud-provider=vsphere", &arg]),
            "vsphere provider: multiple IP families specified for virtual center \"mock\" \
             but ENABLE_ALPHA_DUAL_STACK env var is not set"
        );
    }

    #[test]
    fn malformed_cloud_config_is_a_startup_error() {
        let dir = tempfile::tempdir();
        let Ok(dir) = dir else { panic!("tempdir") };
        let file = dir.path().join("cloud.conf");
        assert!(std::fs::write(&file, "[Global\nauth-url=x\n").is_ok());
        let arg = format!("--cloud-config={}", file.display());
        let line = startup_error(&["ccm", "--cloud-provider=openstack", &arg]);
        assert!(line.contains("line 1"), "{line}");
        assert_eq!(
            main_with_args(["ccm", "--cloud-provider=nope"]),
            ExitCode::FAILURE
        );
    }
}
