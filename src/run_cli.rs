//! `run`, `merge` and `diff`: a run of the suites and the two commands that read runs.
//! `run` turns its flags into a [`RunRequest`] once and hands it to
//! [`ccm_harness::run::execute`], which owns the rest (selection, Prow files, the runner);
//! the flags themselves are a contract (DESIGN.md "Contracts").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ccm_harness::run::{Origin, RequestError, RunInput, RunRequest};
use clap::Args;

use crate::ApiserverKind;

#[derive(Args)]
pub(crate) struct RunArgs {
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

impl RunArgs {
    /// `--verbose`: the libraries' log lines on the terminal too.
    pub(crate) fn verbose(&self) -> bool {
        self.verbose
    }

    /// Where the run's files go (the run's `harness.log` among them).
    pub(crate) fn artifacts(&self) -> PathBuf {
        self.artifacts
            .clone()
            .unwrap_or_else(ccm_harness::settings::default_artifacts)
    }

    /// The request these flags make: parsed by clap, checked by [`RunRequest::new`].
    fn into_request(self, reference_ccm: PathBuf) -> Result<RunRequest, RequestError> {
        let mut libtest = libtest_mimic::Arguments::from_iter(["ccm-conformance"]);
        libtest.test_threads = self.parallel;
        libtest.list = self.list;
        let input = RunInput {
            providers: self.providers,
            ccm: Some(self.ccm),
            ccm_args: self.ccm_args,
            ccm_old: self.ccm_old,
            ccm_new: self.ccm_new,
            kubeconfig: self.kubeconfig,
            cloud_timeout: self.cloud_timeout.map(std::time::Duration::from_secs),
            apiserver: self.apiserver.into(),
            artifacts: self.artifacts,
            focus: self.focus,
            skip: self.skip,
            rerun_failed: self.rerun_failed,
            shard: self.shard,
            shard_durations: self.shard_durations,
        };
        let mut request = RunRequest::new(input, Origin::Flags, reference_ccm, libtest)?;
        request.progress_lines = true;
        Ok(request)
    }
}

/// `run`: exit 0 only if nothing failed (101 when a case did, libtest's code); bad input
/// is one line and exit status 2.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode> {
    let request = args.into_request(crate::reference_ccm()?);
    execute(request)
}

/// Runs a request: bad input is one line on stderr and exit status 2; otherwise the run's
/// own exit code.
fn execute(request: Result<RunRequest, RequestError>) -> Result<ExitCode> {
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(RequestError::EXIT_CODE));
        }
    };
    let conclusion = ccm_harness::run::execute(request, &ccm_suites::all())?;
    Ok(conclusion.exit_code())
}

#[derive(Args)]
pub(crate) struct MergeArgs {
    /// A shard's artifacts directory (repeatable, or several after one --from).
    #[arg(long, num_args = 1.., required = true)]
    from: Vec<PathBuf>,
    /// Where the merged run goes.
    #[arg(long)]
    out: PathBuf,
}

/// `merge`: exit 0 for a complete, passing run; 1 when a shard is missing, unfinished or
/// failed, or a case failed (each said); 2 for shards that cannot be merged (one line).
pub(crate) fn merge(args: MergeArgs) -> Result<ExitCode> {
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
pub(crate) struct DiffArgs {
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

/// `diff`: exit 1 when the later run has new failures.
pub(crate) fn diff(args: DiffArgs) -> Result<ExitCode> {
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
