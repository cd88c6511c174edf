//! What one run of the suites is asked to do, checked once. The two front ends parse
//! their own syntax — `ccm-conformance run` (and `certify`) its flags with clap,
//! `cargo test --test conformance` the environment variables of DESIGN.md (libtest-mimic
//! refuses unknown flags) — into a [`RunInput`]; [`RunRequest::new`] then checks it
//! the same way for both (providers known, CCM binaries present, regular expressions and
//! files readable) and names the flag or the variable at fault. Every such error is bad
//! input: one line, exit status [`RequestError::EXIT_CODE`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use libtest_mimic::Arguments;
use regex::Regex;

use super::selection::{Rerun, Selection, parse_providers};
use crate::settings::{ApiServerChoice, Settings};
use crate::shard::Shard;

/// Where a run's options came from, to name them in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `ccm-conformance run`'s flags (and `certify`'s).
    Flags,
    /// The environment of `cargo test --test conformance`.
    Environment,
}

/// An option of a run, for error messages.
#[derive(Debug, Clone, Copy)]
enum Field {
    Providers,
    CloudTimeout,
    Apiserver,
    Focus,
    Skip,
    RerunFailed,
    Shard,
    ShardDurations,
}

impl Origin {
    /// The flag or the environment variable that sets `field`.
    fn name(self, field: Field) -> &'static str {
        let (flag, var) = match field {
            Field::Providers => ("--provider", "CCM_CONFORMANCE_PROVIDERS"),
            Field::CloudTimeout => ("--cloud-timeout", "CCM_CONFORMANCE_CLOUD_TIMEOUT"),
            Field::Apiserver => ("--apiserver", "CCM_CONFORMANCE_APISERVER"),
            // Not read from the environment: libtest's own filters do this there.
            Field::Focus => ("--focus", "focus"),
            Field::Skip => ("--skip", "skip"),
            Field::RerunFailed => ("--rerun-failed", "rerun-failed"),
            Field::Shard => ("--shard", "CCM_CONFORMANCE_SHARD"),
            Field::ShardDurations => ("--shard-durations", "CCM_CONFORMANCE_SHARD_DURATIONS"),
        };
        match self {
            Origin::Flags => flag,
            Origin::Environment => var,
        }
    }
}

/// A run's options as given, parsed from their text but not checked yet.
#[derive(Debug, Clone, Default)]
pub struct RunInput {
    /// Provider names, each possibly a comma-separated list; none: every provider.
    pub providers: Vec<String>,
    /// `reference`, `upstream[@vX.Y.Z]` or a path; `None`: the reference CCM.
    pub ccm: Option<String>,
    /// Extra flags for every CCM start.
    pub ccm_args: Vec<String>,
    /// The upgrade suite's N and N+1, as `ccm`; `None`: `ccm`.
    pub ccm_old: Option<String>,
    pub ccm_new: Option<String>,
    /// External mode: a kubeconfig, or `in-cluster` (the pod's service account).
    pub kubeconfig: Option<PathBuf>,
    /// External mode: how long a case waits for the cloud's load balancers.
    pub cloud_timeout: Option<Duration>,
    pub apiserver: ApiServerChoice,
    /// `None`: `$ARTIFACTS` or `./_artifacts`.
    pub artifacts: Option<PathBuf>,
    /// Regular expressions over the cases' full names.
    pub focus: Option<String>,
    pub skip: Option<String>,
    /// A JUnit file or artifacts directory whose failed cases to run again.
    pub rerun_failed: Option<PathBuf>,
    pub shard: Option<Shard>,
    /// A JUnit file or artifacts directory to balance the shards by.
    pub shard_durations: Option<PathBuf>,
}

/// One run, checked: what [`super::execute`] runs.
pub struct RunRequest {
    /// What every case is configured with (providers, CCMs, API server, artifacts...).
    pub settings: Settings,
    /// Which cases run.
    pub selection: Selection,
    /// libtest's options: `--list`, its filters, `--test-threads` (`run --parallel`).
    pub libtest: Arguments,
    /// `[n/N] PASS name (1.2s)` lines and a summary on stdout, libtest's own output to
    /// `libtest-output.txt` (the CLI); off, the output stays libtest's (`cargo test`).
    pub progress_lines: bool,
}

/// Bad input: a flag or variable the run cannot use.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("CCM binary {} does not exist", .0.display())]
    NoSuchCcm(PathBuf),
    /// `--kubeconfig in-cluster` outside a pod (the line says what is missing).
    #[error("{0}")]
    InCluster(String),
}

impl RequestError {
    /// The exit status of a run refused for bad input.
    pub const EXIT_CODE: u8 = 2;
}

impl RunRequest {
    /// Checks `input` and turns it into a request: `reference_ccm` is the reference CCM's
    /// binary, `libtest` the test runner's options.
    pub fn new(
        input: RunInput,
        origin: Origin,
        reference_ccm: PathBuf,
        libtest: Arguments,
    ) -> Result<Self, RequestError> {
        let invalid = |field: Field, reason: String| RequestError::Invalid {
            what: origin.name(field),
            reason: one_line(&reason),
        };
        let mut settings = Settings::new(reference_ccm);
        settings.providers =
            parse_providers(&input.providers).map_err(|r| invalid(Field::Providers, r))?;
        if let Some(v) = &input.ccm {
            settings.set_ccm(v);
        }
        settings.ccm_args = input.ccm_args;
        if let Some(v) = &input.ccm_old {
            settings.set_ccm_old(v);
        }
        if let Some(v) = &input.ccm_new {
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
                return Err(RequestError::NoSuchCcm(path.clone()));
            }
        }
        settings.apiserver = input.apiserver;
        settings.kubeconfig = input.kubeconfig;
        if let Some(timeout) = input.cloud_timeout {
            settings.cloud_timeout = timeout;
        }
        if let Some(dir) = input.artifacts {
            settings.artifacts = dir;
        }
        if settings.kubeconfig.as_deref() == Some(Path::new(crate::in_cluster::IN_CLUSTER)) {
            let path =
                crate::in_cluster::write_kubeconfig(&settings.artifacts, |k| std::env::var(k).ok())
                    .map_err(RequestError::InCluster)?;
            settings.kubeconfig = Some(path);
        }
        let mut selection = Selection {
            shard: input.shard,
            ..Selection::default()
        };
        if let Some(path) = &input.shard_durations {
            selection.shard_durations = crate::shard::durations_from(path)
                .map_err(|r| invalid(Field::ShardDurations, r))?;
        }
        let regex = |field: Field, text: &Option<String>| {
            text.as_deref()
                .map(Regex::new)
                .transpose()
                .map_err(|e| invalid(field, regex_reason(&e)))
        };
        selection.focus = regex(Field::Focus, &input.focus)?;
        selection.skip = regex(Field::Skip, &input.skip)?;
        if let Some(path) = input.rerun_failed {
            let results = ccm_testgrid::read::read_results(&path)
                .map_err(|e| invalid(Field::RerunFailed, e.to_string()))?;
            let failed = ccm_testgrid::read::failed_names(&results)
                .into_iter()
                .collect();
            selection.rerun = Some(Rerun { from: path, failed });
        }
        Ok(Self {
            settings,
            selection,
            libtest,
            progress_lines: false,
        })
    }

    /// The request of `cargo test --test conformance`: the variables of DESIGN.md
    /// (`CCM_CONFORMANCE_PROVIDERS`, `_CCM`, `_CCM_OLD`, `_CCM_NEW`, `_CCM_ARGS`,
    /// `_KUBECONFIG`, `_CLOUD_TIMEOUT` in seconds, `_APISERVER`, `_SHARD`,
    /// `_SHARD_DURATIONS`, and `ARTIFACTS`) with libtest's flags.
    pub fn from_env(reference_ccm: PathBuf, libtest: Arguments) -> Result<Self, RequestError> {
        Self::from_vars(reference_ccm, libtest, |k| std::env::var(k).ok())
    }

    /// [`Self::from_env`] over any source of variables.
    pub fn from_vars(
        reference_ccm: PathBuf,
        libtest: Arguments,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, RequestError> {
        let origin = Origin::Environment;
        let invalid = |field: Field, reason: String| RequestError::Invalid {
            what: origin.name(field),
            reason,
        };
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut input = RunInput {
            providers: set("CCM_CONFORMANCE_PROVIDERS").into_iter().collect(),
            ccm: var("CCM_CONFORMANCE_CCM"),
            ccm_old: var("CCM_CONFORMANCE_CCM_OLD"),
            ccm_new: var("CCM_CONFORMANCE_CCM_NEW"),
            ccm_args: var("CCM_CONFORMANCE_CCM_ARGS")
                .map(|v| v.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            kubeconfig: var("CCM_CONFORMANCE_KUBECONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            shard_durations: set("CCM_CONFORMANCE_SHARD_DURATIONS").map(PathBuf::from),
            ..RunInput::default()
        };
        if let Some(v) = var("CCM_CONFORMANCE_CLOUD_TIMEOUT") {
            let secs = v.trim().parse().map_err(|_| {
                invalid(
                    Field::CloudTimeout,
                    format!("{v:?} is not a number of seconds"),
                )
            })?;
            input.cloud_timeout = Some(Duration::from_secs(secs));
        }
        if let Some(v) = var("CCM_CONFORMANCE_APISERVER") {
            input.apiserver =
                ApiServerChoice::parse(&v).map_err(|r| invalid(Field::Apiserver, r))?;
        }
        if let Some(v) = set("CCM_CONFORMANCE_SHARD") {
            input.shard = Some(v.parse().map_err(|r| invalid(Field::Shard, r))?);
        }
        Self::new(input, origin, reference_ccm, libtest)
    }
}

/// A regular expression's error in one line: what is wrong, without the pattern drawn
/// with a caret under it.
fn regex_reason(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().trim_start_matches("error: ").to_string())
            .unwrap_or_else(|| text.clone()),
        other => other.to_string(),
    }
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn reference() -> PathBuf {
        // Any file that exists stands in for the reference CCM.
        std::env::current_exe().unwrap()
    }

    fn no_args() -> Arguments {
        Arguments::from_iter(["test"])
    }

    #[test]
    fn the_environment_sets_what_the_flags_set() {
        let dir = tempfile::tempdir().unwrap();
        let r = RunRequest::from_vars(
            reference(),
            no_args(),
            vars(&[
                ("CCM_CONFORMANCE_PROVIDERS", "aws,openstack"),
                ("CCM_CONFORMANCE_CCM_ARGS", "--v=4  --x"),
                ("CCM_CONFORMANCE_CLOUD_TIMEOUT", "30"),
                ("CCM_CONFORMANCE_SHARD", "2/3"),
                ("CCM_CONFORMANCE_KUBECONFIG", dir.path().to_str().unwrap()),
            ]),
        )
        .unwrap();
        let names: Vec<&str> = r.settings.providers.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["aws", "openstack"]);
        assert_eq!(r.settings.ccm_args, ["--v=4", "--x"]);
        assert_eq!(r.settings.cloud_timeout, Duration::from_secs(30));
        assert_eq!(
            r.selection.shard.map(|s| s.to_string()).as_deref(),
            Some("2/3")
        );
        assert_eq!(r.settings.kubeconfig.as_deref(), Some(dir.path()));
        assert!(!r.progress_lines);
        let all = RunRequest::from_vars(reference(), no_args(), vars(&[])).unwrap();
        assert_eq!(all.settings.providers.len(), crate::Provider::all().len());
    }

    #[test]
    fn bad_input_names_its_variable_or_flag_in_one_line() {
        let env = |pairs: &[(&str, &str)]| {
            RunRequest::from_vars(reference(), no_args(), vars(pairs))
                .err()
                .expect("refused")
                .to_string()
        };
        assert!(
            env(&[("CCM_CONFORMANCE_PROVIDERS", "gke")])
                .starts_with("CCM_CONFORMANCE_PROVIDERS: unknown provider")
        );
        assert!(
            env(&[("CCM_CONFORMANCE_CLOUD_TIMEOUT", "soon")])
                .starts_with("CCM_CONFORMANCE_CLOUD_TIMEOUT:")
        );
        assert!(
            env(&[("CCM_CONFORMANCE_APISERVER", "kind")]).starts_with("CCM_CONFORMANCE_APISERVER:")
        );
        assert!(env(&[("CCM_CONFORMANCE_SHARD", "4/3")]).starts_with("CCM_CONFORMANCE_SHARD:"));
        assert_eq!(
            env(&[("CCM_CONFORMANCE_CCM", "/does/not/exist")]),
            "CCM binary /does/not/exist does not exist"
        );
        let flags = |input: RunInput| {
            RunRequest::new(input, Origin::Flags, reference(), no_args())
                .err()
                .expect("refused")
                .to_string()
        };
        let focus = flags(RunInput {
            focus: Some("(".into()),
            ..RunInput::default()
        });
        assert_eq!(focus, "--focus: unclosed group");
        let provider = flags(RunInput {
            providers: vec!["nonesuch".into()],
            ..RunInput::default()
        });
        assert!(
            provider.starts_with("--provider: unknown provider"),
            "{provider}"
        );
        let rerun = flags(RunInput {
            rerun_failed: Some("/does/not/exist.xml".into()),
            ..RunInput::default()
        });
        assert!(rerun.starts_with("--rerun-failed: "), "{rerun}");
        for e in [focus, provider, rerun] {
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
