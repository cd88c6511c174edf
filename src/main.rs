//! `ccm-conformance`: run the suites, start an embedded cluster or a mock cloud for manual
//! use. Command lines and ready files are contracts (DESIGN.md "Contracts").
//!
//! This file parses the command line and dispatches; each family of subcommands has its
//! own file: `run_cli.rs` (run, merge, diff), `cluster_cli.rs` (cluster, mock),
//! `upstream_cli.rs` (upstream build, apiserver build), `cli_testgrid.rs` (publish,
//! testgrid-config, dashboard, certify), `soak_cli.rs`, `bench_cli.rs`, and `shards.rs`
//! (`run` as child processes, for `certify --shards` and `bench matrix`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

mod bench_cli;
mod cli_testgrid;
mod cluster_cli;
mod run_cli;
mod shards;
mod soak_cli;
mod upstream_cli;

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
    Run(run_cli::RunArgs),
    /// Start the embedded API server (optionally a mock cloud, simulated nodes and a CCM)
    /// and keep it up until SIGINT/SIGTERM.
    Cluster(cluster_cli::ClusterArgs),
    /// Start one mock cloud alone.
    Mock(cluster_cli::MockArgs),
    /// Benchmarks that print numbers (build with --release for meaningful ones).
    Bench(bench_cli::BenchArgs),
    /// Upload a run's artifacts in the Prow/GCS layout TestGrid reads.
    Publish(cli_testgrid::PublishArgs),
    /// Print a TestGrid configuration for a provider's bucket and job.
    TestgridConfig(cli_testgrid::TestgridConfigArgs),
    /// Compare two runs (JUnit files or artifact directories): new failures, fixes, flakes,
    /// added/removed cases, duration regressions. Exits 1 when B has new failures.
    Diff(run_cli::DiffArgs),
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
    Merge(run_cli::MergeArgs),
    /// Upstream's cloud-controller-managers, built from their Go modules.
    #[command(subcommand)]
    Upstream(upstream_cli::UpstreamCommand),
    /// A real control plane (kube-apiserver and etcd) built from its Go modules, to measure
    /// the embedded API server against.
    #[command(subcommand)]
    Apiserver(upstream_cli::ApiserverCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A run's terminal is for its progress and summary: library log lines go to each
    // case's harness.log and the run's (harness/src/case_log.rs), on screen only when
    // asked. The servers (`cluster`, `mock`, ...) log on the terminal as before.
    let (run_log, terminal) = match &cli.command {
        Command::Run(a) => (Some(a.artifacts().join("harness.log")), a.verbose()),
        Command::Soak(a) => (Some(a.run_log()), a.verbose()),
        Command::Certify(a) => (Some(a.out.join("harness.log")), false),
        _ => (None, true),
    };
    ccm_harness::case_log::init(run_log, terminal);
    ccm_harness::install_crypto_provider();
    let result = match cli.command {
        Command::Run(args) => run_cli::run(args),
        Command::Cluster(args) => runtime()
            .and_then(|rt| rt.block_on(cluster_cli::cluster(args)))
            .map(|_| ExitCode::SUCCESS),
        Command::Mock(args) => runtime().and_then(|rt| rt.block_on(cluster_cli::mock(args))),
        Command::Publish(args) => cli_testgrid::publish(args).map(|_| ExitCode::SUCCESS),
        Command::TestgridConfig(args) => {
            cli_testgrid::testgrid_config(args).map(|_| ExitCode::SUCCESS)
        }
        Command::Diff(args) => run_cli::diff(args),
        Command::Dashboard(args) => cli_testgrid::dashboard(args),
        Command::Certify(args) => cli_testgrid::certify(args),
        Command::Soak(args) => soak_cli::soak(args),
        Command::Merge(args) => run_cli::merge(args),
        Command::Upstream(upstream_cli::UpstreamCommand::Build(args)) => {
            upstream_cli::upstream_build(args)
        }
        Command::Apiserver(upstream_cli::ApiserverCommand::Build(args)) => {
            upstream_cli::apiserver_build(args)
        }
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

/// `--apiserver` of `run`, `cluster` and `bench`: the API server of each cluster.
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
