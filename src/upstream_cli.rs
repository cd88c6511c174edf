//! `upstream build` and `apiserver build`: upstream's CCMs and a real control plane
//! (kube-apiserver, etcd) built from their Go modules into a cache outside the repository
//! (crate `ccm-upstream`); the paths are the last lines of stdout, for scripts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ccm_harness::Provider;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub(crate) enum ApiserverCommand {
    /// Build (or find in the cache) kube-apiserver and etcd with the `go` command; stdout's
    /// last two lines are their paths. Cache: $XDG_CACHE_HOME/ccm-conformance/upstream/
    /// kube-apiserver-<version>/ and etcd-<version>/.
    Build(ApiserverBuildArgs),
}

#[derive(Args)]
pub(crate) struct ApiserverBuildArgs {
    /// A Kubernetes release (module k8s.io/kubernetes; default: the newest known to build).
    #[arg(long)]
    version: Option<String>,
    /// An etcd release (module go.etcd.io/etcd/server/v3; default: the one the default
    /// Kubernetes release requires).
    #[arg(long)]
    etcd_version: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum UpstreamCommand {
    /// Build (or find in the cache) a provider's upstream CCM with the `go` command; the
    /// binary's path is the last line of stdout. Cache:
    /// $XDG_CACHE_HOME/ccm-conformance/upstream/<provider>-<version>/.
    Build(UpstreamBuildArgs),
}

#[derive(Args)]
pub(crate) struct UpstreamBuildArgs {
    /// aws, openstack, vsphere or azure (azure also builds its cloud-node-manager).
    provider: String,
    /// A release tag of the provider's module (default: the newest one known to build).
    #[arg(long)]
    version: Option<String>,
}

/// `upstream build`: progress on stderr, the binary's path as the last line of stdout.
pub(crate) fn upstream_build(args: UpstreamBuildArgs) -> Result<ExitCode> {
    let provider = Provider::parse(&args.provider)
        .ok()
        .filter(|p| p.upstream_ccm().is_some());
    let Some(provider) = provider else {
        bail!(
            "no upstream CCM for {:?} (known: {})",
            args.provider,
            Provider::all()
                .iter()
                .filter(|p| p.upstream_ccm().is_some())
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    // The per-node agent the CCM relies on (Azure's cloud-node-manager), same release;
    // the CCM's path stays the last line.
    if let Some(agent) = provider.upstream_node_manager() {
        println!(
            "{}",
            build_upstream(agent, args.version.as_deref())?.display()
        );
    }
    if let Some(upstream) = provider.upstream_ccm() {
        println!(
            "{}",
            build_upstream(upstream, args.version.as_deref())?.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `apiserver build`: kube-apiserver, then etcd; progress on stderr, each path on stdout.
pub(crate) fn apiserver_build(args: ApiserverBuildArgs) -> Result<ExitCode> {
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
