//! `ccm-conformance`: run the suites, start an embedded cluster or a mock cloud for manual
//! use. Command lines and ready files are contracts (DESIGN.md "Contracts").

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ccm_harness::{Provider, Settings};
use clap::{Args, Parser, Subcommand};
use mock_cloud::{MockCloud, MockOptions};

mod bench_cli;
mod cli_testgrid;
mod shards;
mod soak_cli;

#[derive(Parser)]
#[command(
    name = "ccm-conformance",
    version,
    about = "Conformance harness for Kubernetes cloud-controller-managers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the conformance suites against a CCM (default: the reference CCM).
    Run(RunArgs),
    /// Start the embedded API server (optionally a mock cloud, simulated nodes and a CCM)
    /// and keep it up until SIGINT/SIGTERM.
    Cluster(ClusterArgs),
    /// Start one mock cloud alone.
    Mock(MockArgs),
    /// Benchmarks that print numbers (build with --release for meaningful ones).
    Bench(bench_cli::BenchArgs),
    /// Upload a run's artifacts in the Prow/GCS layout TestGrid reads.
    Publish(PublishArgs),
    /// Print a TestGrid configuration for a provider's bucket and job.
    TestgridConfig(TestgridConfigArgs),
    /// Compare two runs (JUnit files or artifact directories): new failures, fixes, flakes,
    /// added/removed cases, duration regressions. Exits 1 when B has new failures.
    Diff(DiffArgs),
    /// Render a static TestGrid-style page (index.html) from published runs.
    Dashboard(cli_testgrid::DashboardArgs),
    /// Run the suites against a provider's CCM and write a self-certification folder:
    /// JUnit, logs, Prow files, README.md and testgrid-config.yaml.
    Certify(cli_testgrid::CertifyArgs),
    /// Soak a CCM: a seeded random workload under cloud faults, CCM kills and API server
    /// restarts, then a quiet phase and the invariants (no leaks, no duplicates, no stuck
    /// finalizers, no wrongly deleted nodes, no hot loops) as JUnit.
    Soak(soak_cli::SoakArgs),
    /// Join the artifacts of a run's shards (`run --shard K/N`) into one run in the Prow
    /// layout: one JUnit, started/finished/metadata, build log and case logs.
    Merge(MergeArgs),
    /// Upstream's cloud-controller-managers, built from their Go modules.
    #[command(subcommand)]
    Upstream(UpstreamCommand),
    /// A real control plane (kube-apiserver and etcd) built from its Go modules, to measure
    /// the embedded API server against.
    #[command(subcommand)]
    Apiserver(ApiserverCommand),
}

#[derive(Subcommand)]
enum ApiserverCommand {
    /// Build (or find in the cache) kube-apiserver and etcd with the `go` command; stdout's
    /// last two lines are their paths. Cache: $XDG_CACHE_HOME/ccm-conformance/upstream/
    /// kube-apiserver-<version>/ and etcd-<version>/.
    Build(ApiserverBuildArgs),
}

#[derive(Args)]
struct ApiserverBuildArgs {
    /// A Kubernetes release (module k8s.io/kubernetes; default: the newest known to build).
    #[arg(long)]
    version: Option<String>,
    /// An etcd release (module go.etcd.io/etcd/server/v3; default: the one the default
    /// Kubernetes release requires).
    #[arg(long)]
    etcd_version: Option<String>,
}

#[derive(Subcommand)]
enum UpstreamCommand {
    /// Build (or find in the cache) a provider's upstream CCM with the `go` command; the
    /// binary's path is the last line of stdout. Cache:
    /// $XDG_CACHE_HOME/ccm-conformance/upstream/<provider>-<version>/.
    Build(UpstreamBuildArgs),
}

#[derive(Args)]
struct UpstreamBuildArgs {
    /// aws, openstack, vsphere or azure (azure also builds its cloud-node-manager).
    provider: String,
    /// A release tag of the provider's module (default: the newest one known to build).
    #[arg(long)]
    version: Option<String>,
}

#[derive(Args)]
struct DiffArgs {
    /// The earlier run: a JUnit file or a directory holding junit*.xml (searched recursively).
    before: PathBuf,
    /// The later run.
    after: PathBuf,
    /// A passing case is "slower" when it takes at least this factor longer...
    #[arg(long, default_value_t = 1.5)]
    slower_factor: f64,
    /// ...and at least this many seconds more.
    #[arg(long, default_value_t = 2.0)]
    slower_seconds: f64,
}

#[derive(Args)]
struct PublishArgs {
    /// The run's artifacts directory (holds started.json, finished.json, junit_*.xml).
    #[arg(long)]
    from: PathBuf,
    /// gs://BUCKET/PREFIX or file:///PATH (the same tree, written locally). GCS credentials:
    /// GOOGLE_APPLICATION_CREDENTIALS (service-account key), else the metadata server;
    /// STORAGE_EMULATOR_HOST=HOST:PORT targets an emulator without authentication.
    #[arg(long)]
    to: String,
    /// Job name (a TestGrid test group usually has one job).
    #[arg(long)]
    job: String,
    /// Build ID: an increasing integer (default: started.json's timestamp).
    #[arg(long)]
    build: Option<String>,
    /// Pull request number (a presubmit run); needs --repo.
    #[arg(long, requires = "repo")]
    pr: Option<u64>,
    /// ORG/REPO of the pull request.
    #[arg(long, requires = "pr")]
    repo: Option<String>,
}

#[derive(Args)]
struct TestgridConfigArgs {
    /// Provider name (used for the dashboard names).
    #[arg(long)]
    provider: String,
    /// Bucket results are uploaded to (gs://BUCKET/PREFIX or BUCKET).
    #[arg(long)]
    bucket: String,
    #[arg(long)]
    job: String,
    /// The job is a presubmit (results under pr-logs/directory/<job>).
    #[arg(long)]
    presubmit: bool,
    /// Which CCM the job runs: `upstream` names the tab `upstream-<provider>-ccm` (one tab
    /// per upstream CCM beside the reference CCM's, as ci/prow's periodics upload them).
    #[arg(long, default_value = "reference")]
    ccm: String,
}

#[derive(Args)]
struct RunArgs {
    /// Provider to run (repeatable; default: all available).
    #[arg(long = "provider")]
    providers: Vec<String>,
    /// `reference`, `upstream[@vX.Y.Z]` (each provider's upstream CCM, built from its Go
    /// module or found in the cache) or the path of a CCM binary.
    #[arg(long, default_value = "reference")]
    ccm: String,
    /// Extra flag for the CCM (repeatable), e.g. --ccm-arg=--v=4.
    #[arg(long = "ccm-arg", allow_hyphen_values = true)]
    ccm_args: Vec<String>,
    /// The upgrade suite's old CCM (N): as --ccm (default: --ccm).
    #[arg(long, value_name = "CCM")]
    ccm_old: Option<String>,
    /// The upgrade suite's new CCM (N+1): as --ccm (default: --ccm).
    #[arg(long, value_name = "CCM")]
    ccm_new: Option<String>,
    /// Run against an existing cluster (external mode); `in-cluster`: the pod's own
    /// service account (KUBERNETES_SERVICE_HOST/PORT, its token and CA), as the Sonobuoy
    /// plugin runs it.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// External mode: how long a case waits for the cloud to create or delete a load
    /// balancer, in seconds (default 1200, upstream e2e's real-cloud bound).
    #[arg(long, value_name = "SECONDS", requires = "kubeconfig")]
    cloud_timeout: Option<u64>,
    /// Only cases whose full name matches this regular expression.
    #[arg(long)]
    focus: Option<String>,
    /// Leave out cases whose full name matches this regular expression.
    #[arg(long)]
    skip: Option<String>,
    /// Where JUnit and logs go (default: $ARTIFACTS or ./_artifacts).
    #[arg(long)]
    artifacts: Option<PathBuf>,
    /// Also print the libraries' log lines (WARN and up, or what RUST_LOG says) on the
    /// terminal; they are always in each case's `harness.log`.
    #[arg(long)]
    verbose: bool,
    /// Run shard K of N of the case list (after --provider, --focus, --skip): the N
    /// shards of one list partition it; `merge` joins their artifacts into one run.
    #[arg(long, value_name = "K/N")]
    shard: Option<ccm_harness::shard::Shard>,
    /// Balance the shards by the case durations of an earlier run (its JUnit file or
    /// artifacts directory); without it every case counts the same.
    #[arg(long, value_name = "JUNIT", requires = "shard")]
    shard_durations: Option<PathBuf>,
    /// How many cases run at once.
    #[arg(long)]
    parallel: Option<usize>,
    /// Only list the cases.
    #[arg(long)]
    list: bool,
    /// Run exactly the cases whose last attempt failed or errored in this JUnit file (or in
    /// the junit*.xml files of this directory); --focus/--skip still apply.
    #[arg(long, value_name = "JUNIT")]
    rerun_failed: Option<PathBuf>,
    /// The API server of each case's cluster: `embedded` (ours, the default) or `real`
    /// (etcd and kube-apiserver per case, built by `apiserver build` or found in its
    /// cache; about 7 s more per case).
    #[arg(
        long,
        env = "CCM_CONFORMANCE_APISERVER",
        default_value = "embedded",
        conflicts_with = "kubeconfig"
    )]
    apiserver: ApiserverKind,
}

#[derive(Args)]
struct MergeArgs {
    /// A shard's artifacts directory (repeatable, or several after one --from).
    #[arg(long, num_args = 1.., required = true)]
    from: Vec<PathBuf>,
    /// Where the merged run goes.
    #[arg(long)]
    out: PathBuf,
}

/// `merge`: exit 0 for a complete, passing run; 1 when a shard is missing, unfinished or
/// failed, or a case failed (each said); 2 for shards that cannot be merged (one line).
fn merge(args: MergeArgs) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    match ccm_testgrid::merge::merge(&args.from, &args.out) {
        Err(ccm_testgrid::merge::Error::Refused(line)) => {
            eprintln!("error: {line}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
        Ok(m) => {
            for p in &m.problems {
                println!("  {p}");
            }
            println!(
                "merged {} of {} shards: {} cases, {} ({:.2}s) into {}",
                args.from.len(),
                m.shards,
                m.cases,
                m.result.as_str(),
                started.elapsed().as_secs_f64(),
                args.out.display()
            );
            Ok(if m.result == ccm_testgrid::prow::JobResult::Success {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

#[derive(Args)]
struct ClusterArgs {
    /// Mock cloud to start beside the API server: openstack, aws, vsphere, azure or gcp.
    #[arg(long)]
    cloud: Option<String>,
    /// Simulated kubelets to register (with instances named like them when --cloud is set).
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Start a CCM against the cluster: `reference` or a binary path (needs --cloud).
    #[arg(long)]
    ccm: Option<String>,
    /// Where to write the kubeconfig (default: a file in a temporary directory).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Written once serving: {"kubeconfig","server","token","readonly_token"[,"cloud"]}.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Serve the API over plain HTTP instead of HTTPS (the default generates a CA and
    /// puts it into the kubeconfig).
    #[arg(long)]
    insecure_http: bool,
    /// Keep the API server's objects in this directory, so a later `cluster` on the
    /// same directory serves them again (resourceVersions keep increasing).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// `embedded` (this program's API server) or `real`: etcd and kube-apiserver, built
    /// from their Go modules by `apiserver build` (or found in its cache), with TLS, an
    /// admin and a read-only token, and RBAC; the ready file has the same fields.
    #[arg(long, env = "CCM_CONFORMANCE_APISERVER", default_value = "embedded")]
    apiserver: ApiserverKind,
    /// Embedded API server: authorize service-account tokens and client certificates
    /// outside system:masters by the RBAC objects stored in it, as kube-apiserver does
    /// (the real one always runs with RBAC).
    #[arg(long, env = "CCM_CONFORMANCE_RBAC")]
    rbac: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ApiserverKind {
    Embedded,
    Real,
}

impl From<ApiserverKind> for ccm_harness::settings::ApiServerChoice {
    fn from(kind: ApiserverKind) -> Self {
        match kind {
            ApiserverKind::Embedded => Self::Embedded,
            ApiserverKind::Real => Self::Real,
        }
    }
}

/// The API server `cluster` serves: ours, or a real control plane (one value per run: the
/// variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
enum ClusterApi {
    Embedded(mock_kube_apiserver::ApiServer),
    Real(ccm_control_plane::ControlPlane),
}

impl ClusterApi {
    async fn start(args: &ClusterArgs, workdir: &Path) -> Result<Self> {
        Ok(match args.apiserver {
            ApiserverKind::Embedded => Self::Embedded(
                mock_kube_apiserver::ApiServer::start(mock_kube_apiserver::Config {
                    tls: !args.insecure_http,
                    data_dir: args.data_dir.clone(),
                    rbac: args.rbac,
                    ..mock_kube_apiserver::Config::default()
                })
                .await
                .context("starting the API server")?,
            ),
            ApiserverKind::Real => {
                if args.insecure_http || args.data_dir.is_some() {
                    bail!("--insecure-http and --data-dir are for the embedded API server");
                }
                let mut bins = Vec::new();
                for name in ["kube-apiserver", "etcd"] {
                    let upstream = ccm_upstream::control_plane(name)
                        .ok_or_else(|| anyhow::anyhow!("no control-plane component {name}"))?;
                    bins.push(build_upstream(upstream, None)?);
                }
                let bins = ccm_control_plane::Binaries {
                    kube_apiserver: bins[0].clone(),
                    etcd: bins[1].clone(),
                };
                let dir = workdir.join("control-plane");
                let plane = ccm_control_plane::ControlPlane::start(&bins, &dir)
                    .await
                    .context("starting etcd and kube-apiserver")?;
                eprintln!("etcd and kube-apiserver logs: {}", dir.display());
                Self::Real(plane)
            }
        })
    }

    fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        match self {
            Self::Embedded(api) => api.write_kubeconfig(path).map_err(anyhow::Error::from),
            Self::Real(plane) => plane.write_kubeconfig(path).map_err(anyhow::Error::from),
        }
        .with_context(|| format!("writing {}", path.display()))
    }

    fn ready(&self) -> serde_json::Value {
        let (server, token, readonly) = match self {
            Self::Embedded(api) => (api.url(), api.token(), api.readonly_token()),
            Self::Real(plane) => (
                plane.url().to_string(),
                plane.token(),
                plane.readonly_token(),
            ),
        };
        serde_json::json!({"server": server, "token": token, "readonly_token": readonly})
    }

    async fn shutdown(self) {
        match self {
            Self::Embedded(api) => api.shutdown().await,
            Self::Real(plane) => plane.shutdown().await,
        }
    }
}

#[derive(Args)]
struct MockArgs {
    /// Which cloud: openstack, aws, vsphere, azure or gcp.
    cloud: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Seeded instances, named node-0, node-1, ...
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Seed file: initial state, fault rules, lifecycle modes (JSON, documented in
    /// mocks/cloud `seed`). A bad file exits with status 2.
    #[arg(long)]
    seed: Option<PathBuf>,
    /// Serve HTTPS with a CA generated at start; the ready file's `ca_file` names it
    /// (openstack).
    #[arg(long)]
    tls: bool,
    /// Also serve the instance metadata service (IMDSv2) on a second port; the ready
    /// file's `imds_endpoint` names it (aws). `PUT <admin_url>/imds {"instance_id": ...}`
    /// chooses the instance it speaks for.
    #[arg(long)]
    imds: bool,
    /// Written once serving: the mock's connection object (DESIGN.md).
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A run's terminal is for its progress and summary: library log lines go to each
    // case's harness.log and the run's (harness/src/case_log.rs), on screen only when
    // asked. The servers (`cluster`, `mock`, ...) log on the terminal as before.
    let (run_log, terminal) = match &cli.command {
        Command::Run(a) => (
            Some(
                a.artifacts
                    .clone()
                    .unwrap_or_else(ccm_harness::settings::default_artifacts)
                    .join("harness.log"),
            ),
            a.verbose,
        ),
        Command::Soak(a) => (Some(a.run_log()), a.verbose()),
        Command::Certify(a) => (Some(a.out.join("harness.log")), false),
        _ => (None, true),
    };
    ccm_harness::case_log::init(run_log, terminal);
    ccm_harness::install_crypto_provider();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Cluster(args) => runtime()
            .and_then(|rt| rt.block_on(cluster(args)))
            .map(|_| ExitCode::SUCCESS),
        Command::Mock(args) => runtime().and_then(|rt| rt.block_on(mock(args))),
        Command::Publish(args) => publish(args).map(|_| ExitCode::SUCCESS),
        Command::TestgridConfig(args) => testgrid_config(args).map(|_| ExitCode::SUCCESS),
        Command::Diff(args) => diff(args),
        Command::Dashboard(args) => cli_testgrid::dashboard(args),
        Command::Certify(args) => cli_testgrid::certify(args),
        Command::Soak(args) => soak_cli::soak(args),
        Command::Merge(args) => merge(args),
        Command::Upstream(UpstreamCommand::Build(args)) => upstream_build(args),
        Command::Apiserver(ApiserverCommand::Build(args)) => apiserver_build(args),
        Command::Bench(args) => bench_cli::bench(args).map(|_| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// The reference CCM installed next to this binary.
pub(crate) fn reference_ccm() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating ccm-conformance")?;
    let path = exe.with_file_name("reference-ccm");
    if !path.exists() {
        bail!(
            "reference-ccm not found next to {} (build it with `cargo build --bins`)",
            exe.display()
        );
    }
    Ok(path)
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let mut settings = Settings::new(reference_ccm()?);
    if !args.providers.is_empty() {
        settings.providers =
            Provider::parse_list(&args.providers.join(",")).map_err(anyhow::Error::msg)?;
    }
    settings.set_ccm(&args.ccm);
    settings.ccm_args = args.ccm_args;
    if let Some(v) = &args.ccm_old {
        settings.set_ccm_old(v);
    }
    if let Some(v) = &args.ccm_new {
        settings.set_ccm_new(v);
    }
    for path in [
        Some(&settings.ccm),
        settings.ccm_old.as_ref(),
        settings.ccm_new.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if !path.exists() {
            bail!("CCM binary {} does not exist", path.display());
        }
    }
    settings.apiserver = args.apiserver.into();
    if !args.list {
        let providers = settings.providers.clone();
        resolve_upstream(&mut settings, &providers)?;
        resolve_control_plane(&mut settings)?;
    }
    settings.kubeconfig = args.kubeconfig;
    if let Some(secs) = args.cloud_timeout {
        settings.cloud_timeout = std::time::Duration::from_secs(secs);
    }
    if let Some(dir) = args.artifacts {
        settings.artifacts = dir;
    }
    if settings.kubeconfig.as_deref() == Some(Path::new(ccm_harness::in_cluster::IN_CLUSTER)) {
        match ccm_harness::in_cluster::write_kubeconfig(&settings.artifacts, |k| {
            std::env::var(k).ok()
        }) {
            Ok(path) => settings.kubeconfig = Some(path),
            Err(line) => {
                eprintln!("error: {line}");
                return Ok(ExitCode::from(2));
            }
        }
    }
    settings.shard = args.shard;
    if let Some(path) = &args.shard_durations {
        settings.shard_durations = ccm_harness::shard::durations_from(path)
            .map_err(anyhow::Error::msg)
            .context("--shard-durations")?;
    }
    let focus = args
        .focus
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--focus")?;
    let skip = args
        .skip
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--skip")?;
    let rerun = match &args.rerun_failed {
        Some(path) => {
            let results = ccm_testgrid::read::read_results(path)?;
            let failed: std::collections::BTreeSet<String> =
                ccm_testgrid::read::failed_names(&results)
                    .into_iter()
                    .collect();
            let known: std::collections::BTreeSet<String> = ccm_suites::all()
                .iter()
                .flat_map(|c| settings.providers.iter().map(|&p| c.full_name(p)))
                .collect();
            for gone in failed.difference(&known) {
                eprintln!(
                    "warning: {gone:?} failed in {} but is not a case here",
                    path.display()
                );
            }
            if failed.is_empty() {
                println!("nothing failed in {}: nothing to rerun", path.display());
                return Ok(ExitCode::SUCCESS);
            }
            Some(failed)
        }
        None => None,
    };
    let keep = |name: &str| {
        rerun.as_ref().is_none_or(|r| r.contains(name))
            && focus.as_ref().is_none_or(|f| f.is_match(name))
            && !skip.as_ref().is_some_and(|s| s.is_match(name))
    };
    let mut metadata = run_metadata(&settings);
    if let Some(shard) = settings.shard {
        // What `merge` checks: the shards of one run share the count and the list.
        let list = ccm_harness::runner::kept_names(&ccm_suites::all(), &settings, keep);
        metadata.extra.insert("shard".into(), shard.to_string());
        metadata
            .extra
            .insert("case-list".into(), ccm_harness::shard::list_digest(&list));
    }
    let prow_files = !args.list;
    if prow_files {
        start_prow_files(&mut settings, &metadata)?;
    }
    let (settings_artifacts, settings_meta) = (settings.artifacts.clone(), metadata);
    let mut targs = libtest_mimic::Arguments::from_iter(["ccm-conformance"]);
    targs.test_threads = args.parallel;
    targs.list = args.list;
    // External mode: a case cut off by the interrupt leaves its namespace (each case's
    // fixture deletes its own when it ends); say which ones and how to delete them.
    let external_cleanup = settings.kubeconfig.clone();
    let on_abort: Option<ccm_harness::runner::AbortHook> = prow_files.then(|| {
        let (dir, meta) = (settings_artifacts.clone(), settings_meta.clone());
        Box::new(move |_signal| {
            if let Some(kubeconfig) = &external_cleanup {
                eprintln!(
                    "interrupted: namespaces of the cases cut off may be left in the cluster; delete them with: kubectl --kubeconfig {} delete namespace -l {}",
                    kubeconfig.display(),
                    ccm_harness::external::CREATED_BY_SELECTOR
                );
            }
            if let Err(e) = write_finished(&dir, &meta, ccm_testgrid::prow::JobResult::Aborted) {
                eprintln!("warning: {e:#}");
            }
        }) as ccm_harness::runner::AbortHook
    });
    let options = ccm_harness::runner::RunOptions {
        progress_lines: true,
        handle_signals: true,
        on_abort,
    };
    let conclusion =
        ccm_harness::runner::run_with(&ccm_suites::all(), settings, targs, keep, options);
    if prow_files {
        finish_prow_files(&settings_artifacts, &settings_meta, conclusion.has_failed())?;
    }
    Ok(conclusion.exit_code())
}

/// The files a publishable run leaves in `$ARTIFACTS` (shared/reference/testgrid-prow.md §1):
/// `started.json` now, `metadata.json`, and a `build-log.txt` with one line per case. Under
/// Prow (`PROW_JOB_ID` set) the pod utilities write started/finished.json themselves.
fn start_prow_files(
    settings: &mut Settings,
    metadata: &ccm_testgrid::prow::RunMetadata,
) -> Result<()> {
    use ccm_testgrid::prow;
    std::fs::create_dir_all(&settings.artifacts)
        .with_context(|| format!("creating {}", settings.artifacts.display()))?;
    if std::env::var_os("PROW_JOB_ID").is_none() {
        let started = prow::Started::now().with_prow_env(|k| std::env::var(k).ok());
        prow::write_started(&settings.artifacts, &started)?;
    }
    prow::write_metadata(&settings.artifacts, metadata)?;
    let log = settings.artifacts.join(prow::BUILD_LOG);
    let _ = std::fs::remove_file(&log);
    settings.build_log = Some(log);
    Ok(())
}

fn finish_prow_files(
    artifacts: &Path,
    metadata: &ccm_testgrid::prow::RunMetadata,
    failed: bool,
) -> Result<()> {
    use ccm_testgrid::prow::JobResult;
    let result = if failed {
        JobResult::Failure
    } else {
        JobResult::Success
    };
    write_finished(artifacts, metadata, result)
}

/// `finished.json` unless Prow's sidecar writes it (`PROW_JOB_ID` set).
fn write_finished(
    artifacts: &Path,
    metadata: &ccm_testgrid::prow::RunMetadata,
    result: ccm_testgrid::prow::JobResult,
) -> Result<()> {
    use ccm_testgrid::prow;
    if std::env::var_os("PROW_JOB_ID").is_none() {
        prow::write_finished(
            artifacts,
            &prow::Finished::new(prow::now_epoch_seconds(), result, metadata),
        )?;
    }
    Ok(())
}

fn diff(args: DiffArgs) -> Result<ExitCode> {
    use ccm_testgrid::diff::{RegressionThreshold, diff};
    use ccm_testgrid::read::read_results;
    let valid = args.slower_factor.is_finite()
        && args.slower_factor > 0.0
        && args.slower_seconds.is_finite()
        && args.slower_seconds >= 0.0;
    if !valid {
        bail!("--slower-factor must be > 0 and --slower-seconds >= 0");
    }
    let before = read_results(&args.before)?;
    let after = read_results(&args.after)?;
    let threshold = RegressionThreshold {
        factor: args.slower_factor,
        min_increase: std::time::Duration::from_secs_f64(args.slower_seconds),
    };
    let d = diff(&before, &after, threshold);
    print!("{d}");
    Ok(if d.has_new_failures() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Builds (or finds in the cache) upstream's CCM for `providers` when a role asks for it,
/// reporting progress on stderr.
/// `--apiserver real`: kube-apiserver and etcd built (or found in the cache) before the
/// first case.
pub(crate) fn resolve_control_plane(settings: &mut Settings) -> Result<()> {
    settings.resolve_control_plane(&mut |line| eprintln!("{line}"))?;
    Ok(())
}

pub(crate) fn resolve_upstream(settings: &mut Settings, providers: &[Provider]) -> Result<()> {
    if settings.uses_upstream() {
        settings.resolve_upstream(providers, &mut |line| eprintln!("{line}"))?;
    }
    Ok(())
}

/// `upstream build`: progress on stderr, the binary's path as the last line of stdout.
fn upstream_build(args: UpstreamBuildArgs) -> Result<ExitCode> {
    let Some(upstream) = ccm_upstream::ccm(&args.provider) else {
        bail!(
            "no upstream CCM for {:?} (known: {})",
            args.provider,
            ccm_upstream::CCMS
                .iter()
                .map(|u| u.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    // The per-node agent the CCM relies on (Azure's cloud-node-manager), same release;
    // the CCM's path stays the last line.
    if let Some(agent) = ccm_upstream::node_manager(&args.provider) {
        println!(
            "{}",
            build_upstream(agent, args.version.as_deref())?.display()
        );
    }
    println!(
        "{}",
        build_upstream(upstream, args.version.as_deref())?.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `apiserver build`: kube-apiserver, then etcd; progress on stderr, each path on stdout.
fn apiserver_build(args: ApiserverBuildArgs) -> Result<ExitCode> {
    for (name, version) in [
        ("kube-apiserver", args.version.as_deref()),
        ("etcd", args.etcd_version.as_deref()),
    ] {
        let upstream = ccm_upstream::control_plane(name)
            .ok_or_else(|| anyhow::anyhow!("no control-plane component {name:?}"))?;
        println!("{}", build_upstream(upstream, version)?.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds `upstream` (or finds it in the cache) with progress on stderr.
fn build_upstream(upstream: &ccm_upstream::Upstream, version: Option<&str>) -> Result<PathBuf> {
    let built = ccm_upstream::Builder::default()
        .build(upstream, version, &mut |line| eprintln!("{line}"))?;
    eprintln!(
        "{} {} {}",
        upstream.binary,
        built.version,
        if built.reused {
            "found in the cache"
        } else {
            "built"
        }
    );
    Ok(built.path)
}

/// The first line of `BIN --version`.
fn binary_version(binary: &Path) -> Option<String> {
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
}

/// Column headers TestGrid shows: versions of the pieces under test.
fn run_metadata(settings: &Settings) -> ccm_testgrid::prow::RunMetadata {
    // Upstream CCMs differ per provider: name each.
    let mut versions: Vec<String> = Vec::new();
    for &p in &settings.providers {
        let v = binary_version(&settings.for_provider(p).ccm).unwrap_or_else(|| "unknown".into());
        let v = if settings.uses_upstream() {
            format!(
                "{} {v}",
                ccm_upstream::ccm(p.name()).map_or("?", |u| u.binary)
            )
        } else {
            v
        };
        if !versions.contains(&v) {
            versions.push(v);
        }
    }
    let ccm_version = if versions.is_empty() {
        "unknown".into()
    } else {
        versions.join(", ")
    };
    ccm_testgrid::prow::RunMetadata {
        k8s_version: match settings.apiserver {
            ccm_harness::settings::ApiServerChoice::Embedded => {
                mock_kube_apiserver::discovery::GIT_VERSION.to_string()
            }
            ccm_harness::settings::ApiServerChoice::Real => {
                ccm_upstream::control_plane("kube-apiserver").map_or_else(
                    || "unknown".into(),
                    |u| format!("{} (real)", u.default_version),
                )
            }
        },
        ccm_version,
        provider: settings
            .providers
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(","),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        extra: Default::default(),
    }
}

fn publish(args: PublishArgs) -> Result<()> {
    use ccm_testgrid::{layout::PullRef, publish::Target};
    let target = Target::parse(&args.to)?;
    let pr = match (args.pr, args.repo.as_deref()) {
        (Some(n), Some(repo)) => Some(PullRef::new(repo, n)?),
        _ => None,
    };
    let report = ccm_testgrid::publish::publish(
        &args.from,
        &target,
        &args.job,
        args.build.as_deref(),
        pr.as_ref(),
    )?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    println!(
        "published build {} ({} objects) to {}",
        report.build,
        report.objects.len(),
        report.build_url
    );
    Ok(())
}

fn testgrid_config(args: TestgridConfigArgs) -> Result<()> {
    use ccm_testgrid::layout::{JobKind, JobLayout};
    let (bucket, prefix) = match args.bucket.strip_prefix("gs://") {
        Some(rest) => rest
            .split_once('/')
            .map(|(b, p)| (b.to_string(), p.to_string()))
            .unwrap_or((rest.to_string(), String::new())),
        None => (args.bucket.clone(), String::new()),
    };
    let kind = if args.presubmit {
        JobKind::Batch
    } else {
        JobKind::Periodic
    };
    let layout = JobLayout::new(&prefix, &args.job, kind)?;
    let mut spec = ccm_testgrid::config::ConfigSpec::new(&args.provider, &bucket, layout);
    match args.ccm.as_str() {
        "reference" => {}
        "upstream" => {
            let binary = ccm_upstream::ccm(&args.provider)
                .map(|u| u.binary)
                .ok_or_else(|| anyhow::anyhow!("no upstream CCM for {:?}", args.provider))?;
            spec.tab_name = format!("upstream-{}-ccm", args.provider);
            spec.description =
                format!("CCM conformance of upstream's {binary} (built from its Go module)");
        }
        other => bail!("--ccm {other:?}: expected reference or upstream"),
    }
    print!("{}", ccm_testgrid::config::render(&spec)?);
    Ok(())
}

async fn cluster(args: ClusterArgs) -> Result<()> {
    let provider = args
        .cloud
        .as_deref()
        .map(Provider::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if args.ccm.is_some() && provider.is_none() {
        bail!("--ccm needs --cloud");
    }
    let workdir = tempfile::tempdir().context("creating a work directory")?;
    let mut settings = Settings::new(reference_ccm().unwrap_or_default());
    if let Some(ccm) = &args.ccm {
        settings.set_ccm(ccm);
    }
    let api = ClusterApi::start(&args, workdir.path()).await?;
    let kubeconfig = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| workdir.path().join("kubeconfig"));
    api.write_kubeconfig(&kubeconfig)?;
    let kubelet_client =
        ccm_harness::env::client_for(&kubeconfig, ccm_harness::env::KUBELET_USER_AGENT).await?;

    let cloud = match provider {
        Some(p) => Some(ccm_harness::CloudControl::start(p, 0).await?),
        None => None,
    };
    let mut kubelets = Vec::new();
    for i in 0..args.nodes {
        let name = format!("node-{i}");
        let mut config = mock_kubelet::KubeletConfig::new(&name);
        if let Some(cloud) = &cloud {
            let instance = cloud.create_instance(ccm_harness::InstanceSpec::named(&name))?;
            config.node_ip = instance.internal_ips.first().cloned();
            config.system_uuid = instance.system_uuid.clone();
        } else {
            config.external_cloud_provider = false;
        }
        kubelets.push(mock_kubelet::SimKubelet::start(kubelet_client.clone(), config).await?);
    }

    let mut ccm = None;
    if let (Some(_), Some(cloud)) = (&args.ccm, &cloud) {
        let conf = workdir.path().join("cloud.conf");
        std::fs::write(&conf, cloud.cloud_config())?;
        let port = ccm_harness::ccm::free_port()?;
        let ccm_args = vec![
            format!("--cloud-provider={}", cloud.provider().cloud_provider()),
            format!("--cloud-config={}", conf.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            "--configure-cloud-routes=false".into(),
        ];
        let log = workdir.path().join("ccm.log");
        // The cloud's environment too (AWS: the mock's static credentials).
        let mut process = ccm_harness::ccm::CcmProcess::spawn_with_env(
            &settings.ccm,
            &ccm_args,
            &cloud.ccm_env(),
            &log,
            port,
        )?;
        process
            .wait_healthy(std::time::Duration::from_secs(30))
            .await?;
        eprintln!("CCM log: {}", log.display());
        ccm = Some(process);
    }

    let mut ready = api.ready();
    ready["kubeconfig"] =
        serde_json::json!(kubeconfig.canonicalize().unwrap_or(kubeconfig.clone()));
    if let Some(cloud) = &cloud {
        ready["cloud"] = cloud.ready_info();
    }
    announce(&ready, args.ready_file.as_deref())?;
    wait_for_signal().await?;
    if let Some(mut p) = ccm {
        p.stop().await;
    }
    drop(kubelets);
    if let Some(cloud) = cloud {
        cloud.shutdown().await;
    }
    api.shutdown().await;
    Ok(())
}

/// A seed file the mock cannot use: reported on stderr, exit status 2.
fn bad_seed(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

async fn mock(args: MockArgs) -> Result<ExitCode> {
    if args.tls && args.cloud == "aws" {
        bail!("--tls is not supported for the aws mock yet (vsphere always serves HTTPS)");
    }
    if args.imds && args.cloud != "aws" {
        bail!("--imds is for the aws mock (its instance metadata service)");
    }
    // Mocks exist independently of the providers the suites can run, so this matches on
    // the cloud name itself.
    match args.cloud.as_str() {
        "openstack" => serve_mock::<mock_openstack::OpenStackMock>(&args).await,
        "aws" => serve_mock::<mock_aws::MockAws>(&args).await,
        // vSphere is always HTTPS (pyvmomi and govc expect it); the ready file names the
        // generated CA in `ca_file`.
        "vsphere" => serve_mock::<mock_vsphere::VsphereMock>(&args).await,
        // Azure is always HTTPS (azcore and azure-core refuse bearer tokens over HTTP); the
        // ready file names the generated CA in `ca_file`.
        "azure" => serve_mock::<mock_azure::AzureMock>(&args).await,
        // GCE clients speak plain HTTP to an `api-endpoint`, and the metadata server is
        // HTTP by design; the ready file's `metadata_host` is for `GCE_METADATA_HOST`.
        "gcp" => serve_mock::<mock_gcp::GcpMock>(&args).await,
        other => bail!("unknown cloud {other:?} (mocks: openstack, aws, vsphere, azure, gcp)"),
    }
}

/// Starts one mock with the `--seed` file (the default state without one), writes its
/// ready object and serves until SIGINT/SIGTERM. A seed file that does not load, or whose
/// content does not fit the cloud (address in use, unknown zone...), exits with status 2.
async fn serve_mock<M: MockCloud>(args: &MockArgs) -> Result<ExitCode> {
    let seed = match &args.seed {
        Some(path) => match M::load_seed(path) {
            Ok(seed) => seed,
            Err(e) => return Ok(bad_seed(e)),
        },
        None => M::Seed::default(),
    };
    let options = MockOptions {
        listen: args.listen,
        nodes: args.nodes,
        tls: args.tls,
        imds: args.imds,
    };
    let mock = match M::start(M::config(&options, seed)).await {
        Ok(mock) => mock,
        Err(e) if args.seed.is_some() && M::is_seed_error(&e) => return Ok(bad_seed(e)),
        Err(e) => return Err(e).with_context(|| format!("starting mock {}", M::LABEL)),
    };
    announce(
        &serde_json::to_value(mock.ready())?,
        args.ready_file.as_deref(),
    )?;
    wait_for_signal().await?;
    mock.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// Prints the ready object and writes it atomically to the ready file.
fn announce(ready: &serde_json::Value, ready_file: Option<&Path>) -> Result<()> {
    let text = serde_json::to_string_pretty(ready)?;
    println!("{text}");
    if let Some(path) = ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}
