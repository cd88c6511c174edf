//! `cluster` and `mock`: servers for manual use and for other tools, up until SIGINT or
//! SIGTERM, each announcing itself with a ready object (stdout and `--ready-file`; the
//! objects are a contract, DESIGN.md "Contracts"). `cluster` is built from the harness's
//! own environment parts ([`ccm_harness::env::standalone`]): the same API servers, mock
//! clouds, simulated kubelets and CCM command line as every case.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ccm_harness::env::ServeOptions;
use ccm_harness::env::standalone::{Standalone, StandaloneOptions};
use ccm_harness::{Provider, Settings};
use clap::Args;

use crate::ApiserverKind;

#[derive(Args)]
pub(crate) struct ClusterArgs {
    /// Mock cloud to start beside the API server: openstack, aws, vsphere, azure or gcp.
    #[arg(long)]
    cloud: Option<String>,
    /// Simulated kubelets to register (with instances named like them when --cloud is set).
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Start a CCM against the cluster: `reference`, `upstream[@vX.Y.Z]` (built or found
    /// in the cache) or a binary path (needs --cloud).
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

/// `cluster`: starts what the flags ask for, announces it, serves until SIGINT/SIGTERM,
/// then stops everything.
pub(crate) async fn cluster(args: ClusterArgs) -> Result<()> {
    let provider = args
        .cloud
        .as_deref()
        .map(Provider::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if args.ccm.is_some() && provider.is_none() {
        bail!("--ccm needs --cloud");
    }
    if args.apiserver == ApiserverKind::Real && (args.insecure_http || args.data_dir.is_some()) {
        bail!("--insecure-http and --data-dir are for the embedded API server");
    }
    let workdir = tempfile::tempdir().context("creating a work directory")?;
    let mut settings = Settings::new(crate::reference_ccm().unwrap_or_default());
    if let Some(ccm) = &args.ccm {
        settings.set_ccm(ccm);
    }
    settings.apiserver = args.apiserver.into();
    // An upstream CCM and a real API server's binaries, built or found in the cache.
    let providers: Vec<Provider> = provider.into_iter().collect();
    settings.resolve(&providers, &mut |line| eprintln!("{line}"))?;
    let options = StandaloneOptions {
        cloud: provider,
        nodes: args.nodes,
        start_ccm: args.ccm.is_some(),
        serve: ServeOptions {
            tls: !args.insecure_http,
            rbac: args.rbac,
            data_dir: args.data_dir.clone(),
        },
        kubeconfig: args
            .kubeconfig_out
            .clone()
            .unwrap_or_else(|| workdir.path().join("kubeconfig")),
    };
    // The harness's errors carry their cause in the message already.
    let cluster = Standalone::start(&settings, &options, workdir.path())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.apiserver == ApiserverKind::Real {
        eprintln!(
            "etcd and kube-apiserver logs: {}",
            workdir.path().join("control-plane").display()
        );
    }
    if let Some(log) = cluster.ccm_log() {
        eprintln!("CCM log: {}", log.display());
    }
    let announced =
        ccm_harness::cloud::standalone::announce(&cluster.ready(), args.ready_file.as_deref());
    let served = match announced {
        Ok(()) => ccm_harness::interrupt::until_signal()
            .await
            .context("waiting for a signal"),
        Err(e) => Err(e),
    };
    cluster.shutdown().await;
    served
}

#[derive(Args)]
pub(crate) struct MockArgs {
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

/// `mock <cloud>`: the cloud's descriptor in the harness's registry says how its mock is
/// served; a cloud without a mock, an option it cannot take or a seed file it cannot use
/// is one line on stderr and exit status 2.
pub(crate) async fn mock(args: MockArgs) -> Result<ExitCode> {
    use ccm_harness::cloud::{StandaloneError, StandaloneMock};
    let bad_input = |line: String| {
        eprintln!("error: {line}");
        Ok(ExitCode::from(2))
    };
    let provider = match Provider::parse(&args.cloud) {
        Ok(p) => p,
        Err(e) => return bad_input(e),
    };
    let request = StandaloneMock {
        listen: args.listen,
        nodes: args.nodes,
        seed: args.seed,
        tls: args.tls,
        imds: args.imds,
        ready_file: args.ready_file,
    };
    match provider.serve_mock(request).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(StandaloneError::BadInput(line)) => bad_input(line),
        Err(StandaloneError::Failed(e)) => Err(e),
    }
}
