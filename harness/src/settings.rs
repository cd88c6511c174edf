//! What a case is configured with: the providers, the CCMs of each role, the API server,
//! the artifacts directory. A run builds it once from its request
//! ([`crate::run::RunRequest`]: `ccm-conformance run`'s flags or, for
//! `cargo test --test conformance`, the environment); `soak` and `bench` build their own.
//!
//! A CCM is named as `reference` (ours), a path, or `upstream[@vX.Y.Z]`: upstream's Go CCM
//! of each provider, which differs per provider, so it is built (or found in the cache) by
//! [`Settings::resolve_upstream`] before the run and put in place per provider by
//! [`Settings::for_provider`]. `--apiserver real` (`CCM_CONFORMANCE_APISERVER=real`) needs
//! etcd and kube-apiserver built from source: [`Settings::resolve_control_plane`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::provider::Provider;

#[derive(Debug, Clone)]
pub struct Settings {
    pub providers: Vec<Provider>,
    /// The CCM binary under test.
    pub ccm: PathBuf,
    /// Extra flags for every CCM start, after the harness's own.
    pub ccm_args: Vec<String>,
    /// External mode: a real cluster (not supported by the first suites: they skip).
    pub kubeconfig: Option<PathBuf>,
    pub artifacts: PathBuf,
    /// How long "X stays true" checks watch in hermetic runs. Upstream e2e waits 60 s for
    /// e.g. "the taint is kept"; against mocks a CCM that retries with the upstream 5 ms
    /// doubling backoff retries ~10 times within 5 s, which is what the check needs.
    pub hold: Duration,
    /// A log with one line per finished case (`build-log.txt` of a publishable run).
    pub build_log: Option<PathBuf>,
    /// The "old" and "new" CCM binaries of the upgrade suite (`--ccm-old`, `--ccm-new`,
    /// `CCM_CONFORMANCE_CCM_OLD`, `CCM_CONFORMANCE_CCM_NEW`); `None` = [`Self::ccm`].
    pub ccm_old: Option<PathBuf>,
    pub ccm_new: Option<PathBuf>,
    /// External mode: how long a case waits for the cloud to create or delete a load
    /// balancer (`--cloud-timeout`, `CCM_CONFORMANCE_CLOUD_TIMEOUT` in seconds). Default
    /// 20 min (ccm-behaviour.md §4 LB-01/LB-04, upstream e2e against a real cloud).
    pub cloud_timeout: Duration,
    /// The roles (`--ccm`, `--ccm-old`, `--ccm-new`) that run upstream's CCM, and the
    /// binaries built for them.
    pub upstream: UpstreamCcms,
    /// The API server each case's cluster runs.
    pub apiserver: ApiServerChoice,
    /// etcd and kube-apiserver for [`ApiServerChoice::Real`], once resolved.
    pub control_plane: Option<ccm_control_plane::Binaries>,
    /// A per-node agent the CCM under test relies on, started beside every simulated
    /// kubelet: upstream Azure's cloud-node-manager, which does the node initialization
    /// its CCM leaves undone ([`ccm_upstream::node_manager`]). Set for `--ccm upstream`.
    pub node_manager: Option<PathBuf>,
    /// How long the embedded API server keeps an Event after its last write
    /// (kube-apiserver's `--event-ttl`, an hour by default; `soak --event-ttl`).
    pub event_ttl: Duration,
}

/// Which API server a hermetic case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiServerChoice {
    /// `mock-kube-apiserver`, in the harness's process: fast, the default.
    #[default]
    Embedded,
    /// A real etcd + kube-apiserver per case (crate `ccm-control-plane`), the judge of the
    /// embedded one: where a verdict differs, the embedded server is wrong until shown
    /// otherwise.
    Real,
}

impl ApiServerChoice {
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "" | "embedded" => Ok(Self::Embedded),
            "real" => Ok(Self::Real),
            other => Err(format!("{other:?}: expected embedded or real")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Real => "real",
        }
    }
}

/// How the CCM of a role is named on the command line or in the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CcmChoice {
    /// The reference CCM (`reference`, or empty).
    Reference,
    /// Upstream's CCM of each provider (`upstream`, `upstream@vX.Y.Z`); `None` = the
    /// default version of [`ccm_upstream::Upstream`].
    Upstream(Option<String>),
    /// A binary the user brings.
    Path(PathBuf),
}

impl CcmChoice {
    pub fn parse(value: &str) -> Self {
        match value.trim() {
            "" | "reference" => CcmChoice::Reference,
            "upstream" => CcmChoice::Upstream(None),
            v => match v.strip_prefix("upstream@") {
                Some(version) => CcmChoice::Upstream(Some(version.to_string())),
                None => CcmChoice::Path(PathBuf::from(v)),
            },
        }
    }
}

/// Upstream CCM choices per role and, once resolved, each provider's binary.
#[derive(Debug, Clone, Default)]
pub struct UpstreamCcms {
    /// `Some(version)` when the role runs upstream (`Some(None)` = default version).
    pub ccm: Option<Option<String>>,
    pub old: Option<Option<String>>,
    pub new: Option<Option<String>>,
    built: BTreeMap<(Provider, Option<String>), PathBuf>,
    /// The node agents built for the `ccm` role, by provider.
    node_managers: BTreeMap<Provider, PathBuf>,
}

impl UpstreamCcms {
    fn roles(&self) -> impl Iterator<Item = &Option<String>> {
        [&self.ccm, &self.old, &self.new].into_iter().flatten()
    }

    fn binary(&self, provider: Provider, version: &Option<String>) -> Option<PathBuf> {
        self.built.get(&(provider, version.clone())).cloned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("upstream {provider} CCM: {source}")]
    Upstream {
        provider: &'static str,
        #[source]
        source: ccm_upstream::BuildError,
    },
    #[error("there is no upstream CCM for {0} in this harness")]
    NoUpstream(&'static str),
    #[error("{binary} for --apiserver real: {source}")]
    ControlPlane {
        binary: &'static str,
        #[source]
        source: ccm_upstream::BuildError,
    },
}

impl Settings {
    /// Settings with defaults: every available provider, the given reference CCM binary.
    pub fn new(reference_ccm: PathBuf) -> Self {
        Self {
            providers: Provider::all().to_vec(),
            ccm: reference_ccm,
            ccm_args: Vec::new(),
            kubeconfig: None,
            artifacts: default_artifacts(),
            hold: Duration::from_secs(5),
            build_log: None,
            ccm_old: None,
            ccm_new: None,
            cloud_timeout: Duration::from_secs(20 * 60),
            upstream: UpstreamCcms::default(),
            apiserver: ApiServerChoice::Embedded,
            control_plane: None,
            node_manager: None,
            event_ttl: Duration::from_secs(3600),
        }
    }

    /// `reference` keeps the built-in CCM, `upstream[@vX.Y.Z]` picks upstream's CCM of
    /// each provider; anything else is a path to the CCM binary.
    pub fn set_ccm(&mut self, value: &str) {
        match CcmChoice::parse(value) {
            CcmChoice::Reference => {}
            CcmChoice::Upstream(v) => self.upstream.ccm = Some(v),
            CcmChoice::Path(p) => self.ccm = p,
        }
    }

    /// The upgrade suite's N (`--ccm-old`): as [`Self::set_ccm`].
    pub fn set_ccm_old(&mut self, value: &str) {
        match CcmChoice::parse(value) {
            CcmChoice::Reference => {}
            CcmChoice::Upstream(v) => self.upstream.old = Some(v),
            CcmChoice::Path(p) => self.ccm_old = Some(p),
        }
    }

    /// The upgrade suite's N+1 (`--ccm-new`): as [`Self::set_ccm`].
    pub fn set_ccm_new(&mut self, value: &str) {
        match CcmChoice::parse(value) {
            CcmChoice::Reference => {}
            CcmChoice::Upstream(v) => self.upstream.new = Some(v),
            CcmChoice::Path(p) => self.ccm_new = Some(p),
        }
    }

    /// Whether any role runs upstream's CCM.
    pub fn uses_upstream(&self) -> bool {
        self.upstream.roles().next().is_some()
    }

    /// Builds (or finds in the cache) upstream's CCM for every provider of `providers` and
    /// every role that asks for it. `progress` hears what is being built.
    pub fn resolve_upstream(
        &mut self,
        providers: &[Provider],
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), SettingsError> {
        let versions: Vec<Option<String>> = self.upstream.roles().cloned().collect();
        let builder = ccm_upstream::Builder::default();
        for &provider in providers {
            let upstream = provider
                .upstream_ccm()
                .ok_or(SettingsError::NoUpstream(provider.name()))?;
            for version in &versions {
                if self.upstream.binary(provider, version).is_some() {
                    continue;
                }
                let built = builder
                    .build(upstream, version.as_deref(), &mut |line| {
                        progress(&format!("upstream {} CCM: {line}", provider.name()))
                    })
                    .map_err(|source| SettingsError::Upstream {
                        provider: provider.name(),
                        source,
                    })?;
                progress(&format!(
                    "upstream {} CCM {}: {}{}",
                    provider.name(),
                    built.version,
                    built.path.display(),
                    if built.reused { " (cached)" } else { "" }
                ));
                self.upstream
                    .built
                    .insert((provider, version.clone()), built.path);
            }
            // The CCM under test's node agent, of the same release.
            if let (Some(version), Some(agent)) =
                (self.upstream.ccm.clone(), provider.upstream_node_manager())
                && !self.upstream.node_managers.contains_key(&provider)
            {
                let built = builder
                    .build(agent, version.as_deref(), &mut |line| {
                        progress(&format!(
                            "upstream {} node manager: {line}",
                            provider.name()
                        ))
                    })
                    .map_err(|source| SettingsError::Upstream {
                        provider: provider.name(),
                        source,
                    })?;
                progress(&format!(
                    "upstream {} node manager {}: {}{}",
                    provider.name(),
                    built.version,
                    built.path.display(),
                    if built.reused { " (cached)" } else { "" }
                ));
                self.upstream.node_managers.insert(provider, built.path);
            }
        }
        Ok(())
    }

    /// What a run needs before its first case, for `providers`: upstream's CCMs when a
    /// role runs them ([`Self::resolve_upstream`]) and a real API server's binaries
    /// ([`Self::resolve_control_plane`]). `progress` hears what is being built.
    pub fn resolve(
        &mut self,
        providers: &[Provider],
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), SettingsError> {
        if self.uses_upstream() {
            self.resolve_upstream(providers, progress)?;
        }
        self.resolve_control_plane(progress)
    }

    /// With `--apiserver real`: builds (or finds in the cache) kube-apiserver and etcd at
    /// their default versions (`ccm-conformance apiserver build`), once, before the first
    /// case. Nothing to do for the embedded server.
    pub fn resolve_control_plane(
        &mut self,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), SettingsError> {
        if self.apiserver != ApiServerChoice::Real || self.control_plane.is_some() {
            return Ok(());
        }
        let builder = ccm_upstream::Builder::default();
        let mut paths = Vec::new();
        for name in ["kube-apiserver", "etcd"] {
            let upstream = ccm_upstream::control_plane(name).expect("a known component");
            let built = builder
                .build(upstream, None, &mut |line| {
                    progress(&format!("{name}: {line}"))
                })
                .map_err(|source| SettingsError::ControlPlane {
                    binary: upstream.binary,
                    source,
                })?;
            progress(&format!(
                "{name} {}: {}{}",
                built.version,
                built.path.display(),
                if built.reused { " (cached)" } else { "" }
            ));
            paths.push(built.path);
        }
        let etcd = paths.pop().expect("two paths");
        let kube_apiserver = paths.pop().expect("two paths");
        self.control_plane = Some(ccm_control_plane::Binaries {
            kube_apiserver,
            etcd,
        });
        Ok(())
    }

    /// These settings as one provider's cases see them: `upstream` roles replaced by that
    /// provider's upstream binary (resolved by [`Self::resolve_upstream`]; an unresolved
    /// role keeps the path it had).
    pub fn for_provider(&self, provider: Provider) -> Settings {
        let mut s = self.clone();
        let pick = |role: &Option<Option<String>>| {
            role.as_ref()
                .and_then(|v| self.upstream.binary(provider, v))
        };
        if let Some(p) = pick(&self.upstream.ccm) {
            s.ccm = p;
            s.node_manager = self.upstream.node_managers.get(&provider).cloned();
        }
        if let Some(p) = pick(&self.upstream.old) {
            s.ccm_old = Some(p);
        }
        if let Some(p) = pick(&self.upstream.new) {
            s.ccm_new = Some(p);
        }
        s
    }
}

impl Settings {
    /// The upgrade suite's "old" CCM (N): `--ccm-old`, else the CCM under test.
    pub fn ccm_old(&self) -> &std::path::Path {
        self.ccm_old.as_deref().unwrap_or(&self.ccm)
    }

    /// The upgrade suite's "new" CCM (N+1): `--ccm-new`, else the CCM under test.
    pub fn ccm_new(&self) -> &std::path::Path {
        self.ccm_new.as_deref().unwrap_or(&self.ccm)
    }
}

/// `$ARTIFACTS` or `./_artifacts`.
pub fn default_artifacts() -> PathBuf {
    std::env::var_os("ARTIFACTS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("_artifacts"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccm_choices() {
        assert_eq!(CcmChoice::parse("reference"), CcmChoice::Reference);
        assert_eq!(CcmChoice::parse(""), CcmChoice::Reference);
        assert_eq!(CcmChoice::parse("upstream"), CcmChoice::Upstream(None));
        assert_eq!(
            CcmChoice::parse("upstream@v1.36.0"),
            CcmChoice::Upstream(Some("v1.36.0".into()))
        );
        assert_eq!(
            CcmChoice::parse("./bin/my-ccm"),
            CcmChoice::Path(PathBuf::from("./bin/my-ccm"))
        );
    }

    #[test]
    fn upstream_roles_resolve_per_provider() {
        let mut s = Settings::new(PathBuf::from("/x/reference-ccm"));
        s.set_ccm("upstream");
        s.set_ccm_old("upstream@v1.35.0");
        assert!(s.uses_upstream());
        let aws = Provider::parse("aws").unwrap();
        s.upstream.built.insert((aws, None), "/c/aws-new".into());
        s.upstream
            .built
            .insert((aws, Some("v1.35.0".into())), "/c/aws-old".into());
        let aws = s.for_provider(aws);
        assert_eq!(aws.ccm, PathBuf::from("/c/aws-new"));
        assert_eq!(aws.ccm_old(), std::path::Path::new("/c/aws-old"));
        assert_eq!(aws.ccm_new(), std::path::Path::new("/c/aws-new"));
        // Not resolved for OpenStack: keeps what it had.
        let os = s.for_provider(Provider::parse("openstack").unwrap());
        assert_eq!(os.ccm, PathBuf::from("/x/reference-ccm"));
    }
}
