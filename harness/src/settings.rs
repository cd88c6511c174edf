//! What a run is configured with. `cargo test --test conformance` reads it from the
//! environment (libtest-mimic refuses unknown flags); `ccm-conformance run` from its flags.
//! Variable names are a contract (DESIGN.md): `CCM_CONFORMANCE_PROVIDERS`,
//! `CCM_CONFORMANCE_CCM`, `CCM_CONFORMANCE_CCM_ARGS`, `CCM_CONFORMANCE_KUBECONFIG`, `ARTIFACTS`;
//! added since: `CCM_CONFORMANCE_CLOUD_TIMEOUT` (seconds, external mode).

use std::path::PathBuf;
use std::time::Duration;

use crate::cloud::Provider;

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
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{var}: {reason}")]
    Invalid { var: &'static str, reason: String },
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
        }
    }

    /// Reads the documented environment variables over the defaults.
    pub fn from_env(reference_ccm: PathBuf) -> Result<Self, SettingsError> {
        let mut s = Self::new(reference_ccm);
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_PROVIDERS") {
            if !v.trim().is_empty() {
                s.providers =
                    Provider::parse_list(&v).map_err(|reason| SettingsError::Invalid {
                        var: "CCM_CONFORMANCE_PROVIDERS",
                        reason,
                    })?;
            }
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_CCM") {
            s.set_ccm(&v);
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_CCM_OLD") {
            s.ccm_old = ccm_path(&v);
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_CCM_NEW") {
            s.ccm_new = ccm_path(&v);
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_CCM_ARGS") {
            s.ccm_args = v.split_whitespace().map(str::to_string).collect();
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_CLOUD_TIMEOUT") {
            s.cloud_timeout =
                v.trim()
                    .parse()
                    .map(Duration::from_secs)
                    .map_err(|_| SettingsError::Invalid {
                        var: "CCM_CONFORMANCE_CLOUD_TIMEOUT",
                        reason: format!("{v:?} is not a number of seconds"),
                    })?;
        }
        if let Ok(v) = std::env::var("CCM_CONFORMANCE_KUBECONFIG") {
            if !v.is_empty() {
                s.kubeconfig = Some(PathBuf::from(v));
            }
        }
        Ok(s)
    }

    /// `reference` keeps the built-in CCM; anything else is a path to the CCM binary.
    pub fn set_ccm(&mut self, value: &str) {
        if !value.is_empty() && value != "reference" {
            self.ccm = PathBuf::from(value);
        }
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

/// `""` and `reference` mean the CCM under test; anything else is a path.
pub fn ccm_path(value: &str) -> Option<PathBuf> {
    (!value.is_empty() && value != "reference").then(|| PathBuf::from(value))
}

/// `$ARTIFACTS` or `./_artifacts`.
pub fn default_artifacts() -> PathBuf {
    std::env::var_os("ARTIFACTS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("_artifacts"))
}
