//! Turns cases into libtest-mimic trials (one per case and provider), runs each on a shared
//! tokio runtime inside its own environment with a deadline, and records every result in
//! the JUnit file as soon as it is known, so an interrupted run still leaves a valid file.
//! What runs and what surrounds it (selection, upstream builds, Prow files) is
//! [`crate::run`]'s: this module runs the trials it is given.
//!
//! On SIGINT/SIGTERM the run is aborted (see [`crate::interrupt`]): finished cases stay as
//! they are, running ones become `<error message="interrupted …">`, the rest
//! `<skipped message="not run: aborted">`, the CCM processes are killed and the process
//! exits with [`EXIT_INTERRUPTED`](crate::interrupt::EXIT_INTERRUPTED).

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use ccm_testgrid::prow::BuildLog;
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};
use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};
use tokio::runtime::Runtime;

use crate::case::{Case, CaseError};
use crate::env::Environment;
use crate::interrupt::{self, EXIT_INTERRUPTED, Signal};
use crate::progress::{Progress, Verdict};
use crate::provider::Provider;
use crate::settings::Settings;

/// One runtime for every trial thread: the in-process servers of a case run on its workers
/// while the trial thread blocks on the case body.
static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("building the tokio runtime")
});

/// A case that runs longer than this fails instead of eating the job.
pub const CASE_DEADLINE: Duration = Duration::from_secs(180);

/// How many cases run at once when the user does not say (`--test-threads`): cases mostly
/// wait on the CCM, so more than the core count keeps a 2-core machine busy.
pub const DEFAULT_PARALLEL: usize = 6;

/// The JUnit context (`junit_<context>.xml`).
pub const JUNIT_CONTEXT: &str = "conformance";

/// `$ARTIFACTS/progress.json`, rewritten whenever a case starts or ends.
pub const PROGRESS_JSON: &str = "progress.json";

/// The skip reason of cases an aborted run never started.
pub const NOT_RUN_ABORTED: &str = "not run: aborted";

/// How long the CCMs get to exit after SIGTERM when a run is aborted, before SIGKILL.
pub const ABORT_KILL_GRACE: Duration = Duration::from_secs(1);

/// Called on abort after the JUnit file is final and the CCMs are gone, before the process
/// exits ([`crate::run::prow::abort_hook`] writes `finished.json` with `ABORTED` here).
pub type AbortHook = Box<dyn FnOnce(Signal) + Send>;

/// How [`run_with`] reports and reacts.
#[derive(Default)]
pub struct RunOptions {
    /// `[n/N] PASS|FAIL|SKIP name (1.2s)` lines and a summary table on stdout, with
    /// libtest's own output sent to `$ARTIFACTS/libtest-output.txt` (the CLI). Off, the
    /// output stays libtest's (`cargo test --test conformance`).
    pub progress_lines: bool,
    /// Abort on SIGINT/SIGTERM as described in the module docs.
    pub handle_signals: bool,
    pub on_abort: Option<AbortHook>,
}

/// Runs `cases` for every provider in `settings` with libtest's command-line semantics
/// (`--list`, filters, `--exact`, `--skip`, `--test-threads`, `--ignored`), keeping only
/// the trials whose full name `keep` accepts ([`crate::run::Selection`]), with progress
/// output and interrupt handling as `options` say.
pub fn run_with(
    cases: &[Case],
    settings: Settings,
    mut args: Arguments,
    keep: impl Fn(&str) -> bool,
    options: RunOptions,
) -> Conclusion {
    crate::install_crypto_provider();
    // `cargo test --test conformance` has no logging of its own: the cases' log files
    // (the binary's `run` has set this up already, and this does nothing then).
    crate::case_log::init(Some(settings.artifacts.join("harness.log")), false);
    if args.test_threads.is_none() {
        args.test_threads = Some(DEFAULT_PARALLEL);
    }
    let junit = Arc::new(JunitFile::new(
        junit_path(&settings.artifacts, JUNIT_CONTEXT),
        "ccm-conformance",
    ));
    if !args.list
        && let Err(e) = junit.flush()
    {
        eprintln!("warning: cannot write {}: {e}", junit.path().display());
    }
    let log = match (&settings.build_log, args.list) {
        (Some(path), false) => match BuildLog::open(path) {
            Ok(log) => Some(Arc::new(log)),
            Err(e) => {
                eprintln!("warning: cannot write {}: {e}", path.display());
                None
            }
        },
        _ => None,
    };
    // The plan: every trial `keep` accepts and libtest's filters select, in run order.
    let planned: Vec<(String, String)> = settings
        .providers
        .iter()
        .flat_map(|&p| {
            cases
                .iter()
                .map(move |c| (p.name().to_string(), c.full_name(p)))
        })
        .filter(|(_, name)| keep(name))
        .filter(|(_, name)| !args.is_filtered_out(&Trial::test(name.clone(), || Ok(()))))
        .collect();
    let settings = Arc::new(settings);
    let print = options.progress_lines && !args.list;
    let progress = Arc::new(Progress::new(
        planned,
        print,
        (!args.list).then(|| settings.artifacts.join(PROGRESS_JSON)),
    ));
    if print {
        // libtest-mimic panics when it cannot create its log file: check first.
        let libtest_log = settings.artifacts.join("libtest-output.txt");
        let logfile = match std::fs::File::create(&libtest_log) {
            Ok(_) => libtest_log.to_string_lossy().into_owned(),
            Err(_) => "/dev/null".to_string(),
        };
        args.logfile = Some(logfile);
        println!(
            "running {} cases ({} at a time); results in {}",
            progress.total(),
            args.test_threads.unwrap_or(DEFAULT_PARALLEL),
            junit.path().display()
        );
    }
    if options.handle_signals && !args.list {
        let (progress, junit, log) = (progress.clone(), junit.clone(), log.clone());
        let on_abort = options.on_abort;
        let installed = interrupt::on_signal(move |signal| {
            abort(signal, &progress, &junit, log.as_deref(), on_abort)
        });
        if let Err(e) = installed {
            eprintln!("warning: {e}; an interrupted run will leave partial results");
        }
    }
    let mut trials = trials_with_progress(cases, &settings, &junit, log, Some(progress.clone()));
    trials.retain(|t| keep(t.name()));
    let conclusion = libtest_mimic::run(&args, trials);
    if print {
        print!("{}", progress.summary());
    }
    conclusion
}

/// The abort path: final JUnit, CCMs killed, hook, exit. Runs on the signal thread while
/// the trial threads may still be blocked in their cases.
fn abort(
    signal: Signal,
    progress: &Progress,
    junit: &JunitFile,
    log: Option<&BuildLog>,
    on_abort: Option<AbortHook>,
) -> ! {
    eprintln!(
        "\n{}: aborting the run; writing results and stopping the CCMs",
        signal.name()
    );
    let (running, pending) = progress.unfinished();
    let mut last = Vec::new();
    for case in running {
        last.push(CaseResult {
            suite: case.suite,
            name: case.name,
            outcome: Outcome::Errored {
                message: format!(
                    "interrupted by {} after {:.1}s: the run was aborted while this case ran",
                    signal.name(),
                    case.elapsed.as_secs_f64()
                ),
                detail: String::new(),
            },
            duration: case.elapsed,
            properties: Vec::new(),
            system_out: None,
        });
    }
    for case in pending {
        last.push(CaseResult {
            suite: case.suite,
            name: case.name,
            outcome: Outcome::Skipped {
                reason: NOT_RUN_ABORTED.into(),
            },
            duration: Duration::ZERO,
            properties: Vec::new(),
            system_out: None,
        });
    }
    if let Err(e) = junit.seal(last) {
        eprintln!("warning: cannot write JUnit: {e}");
    }
    if let Some(log) = log {
        let _ = log.line(&format!("ABORTED by {}", signal.name()));
    }
    // Cases keep running on their threads and may start a CCM while the first ones stop:
    // sweep until no child is left, and once more right before exiting.
    let mut stopped = interrupt::kill_children(ABORT_KILL_GRACE).len();
    for _ in 0..3 {
        let late = interrupt::kill_children(Duration::from_millis(200));
        if late.is_empty() {
            break;
        }
        stopped += late.len();
    }
    eprintln!("stopped {stopped} child processes (CCMs)");
    if let Some(hook) = on_abort {
        hook(signal);
    }
    interrupt::kill_children(Duration::ZERO);
    eprintln!("run aborted; partial results in {}", junit.path().display());
    std::process::exit(i32::from(EXIT_INTERRUPTED))
}

/// One trial per (provider, case).
pub fn trials(
    cases: &[Case],
    settings: &Arc<Settings>,
    junit: &Arc<JunitFile>,
    log: Option<Arc<BuildLog>>,
) -> Vec<Trial> {
    trials_with_progress(cases, settings, junit, log, None)
}

fn trials_with_progress(
    cases: &[Case],
    settings: &Arc<Settings>,
    junit: &Arc<JunitFile>,
    log: Option<Arc<BuildLog>>,
    progress: Option<Arc<Progress>>,
) -> Vec<Trial> {
    let mut out = Vec::new();
    for &provider in &settings.providers {
        let settings = Arc::new(settings.for_provider(provider));
        for case in cases {
            let name = case.full_name(provider);
            let (case, settings, junit, log, progress) = (
                case.clone(),
                settings.clone(),
                junit.clone(),
                log.clone(),
                progress.clone(),
            );
            let trial_name = name.clone();
            out.push(Trial::ignorable_test(trial_name, move || {
                if let Some(p) = &progress {
                    p.start(&name);
                }
                let started = Instant::now();
                let span = crate::case_log::case_span(
                    &case_dir(&settings, provider, &case).join("harness.log"),
                );
                let (result, metrics) = RUNTIME.block_on(tracing::Instrument::instrument(
                    run_case(&case, provider, settings.clone()),
                    span,
                ));
                let outcome = match &result {
                    Ok(()) => Outcome::Passed,
                    Err(CaseError::Failed {
                        message, detail, ..
                    }) => Outcome::Failed {
                        message: message.clone(),
                        detail: detail.clone(),
                    },
                    Err(CaseError::Skipped(reason)) => Outcome::Skipped {
                        reason: reason.clone(),
                    },
                };
                if let Some(p) = &progress {
                    let (verdict, note) = match &outcome {
                        Outcome::Passed => (Verdict::Pass, ""),
                        Outcome::Failed { message, .. } | Outcome::Errored { message, .. } => {
                            (Verdict::Fail, message.as_str())
                        }
                        Outcome::Skipped { reason } => (Verdict::Skip, reason.as_str()),
                    };
                    p.finish(&name, verdict, started.elapsed(), note);
                }
                if let Some(log) = &log {
                    let verdict = match &outcome {
                        Outcome::Passed => "PASS".to_string(),
                        Outcome::Failed { message, .. } | Outcome::Errored { message, .. } => {
                            format!("FAIL ({message})")
                        }
                        Outcome::Skipped { reason } => format!("SKIP ({reason})"),
                    };
                    let _ = log.line(&format!(
                        "{verdict} {name} ({:.1}s)",
                        started.elapsed().as_secs_f64()
                    ));
                }
                let record = CaseResult {
                    suite: provider.name().to_string(),
                    name: name.clone(),
                    outcome,
                    duration: started.elapsed(),
                    properties: metrics,
                    system_out: None,
                };
                if let Err(e) = junit.record(record) {
                    eprintln!("warning: cannot write JUnit: {e}");
                }
                match result {
                    Ok(()) => Ok(Completion::Completed),
                    Err(CaseError::Skipped(reason)) => Ok(Completion::ignored_with(reason)),
                    Err(CaseError::Failed {
                        message, detail, ..
                    }) => Err(Failed::from(format!("{message}\n{detail}"))),
                }
            }));
        }
    }
    out
}

/// A failure's detail ("" for a skip).
fn failure_detail(e: &CaseError) -> &str {
    match e {
        CaseError::Failed { detail, .. } => detail,
        CaseError::Skipped(_) => "",
    }
}

/// `<artifacts>/cases/<provider>-<id>`: the case's kubeconfig, configs, logs and journals.
fn case_dir(settings: &Settings, provider: Provider, case: &Case) -> PathBuf {
    settings
        .artifacts
        .join("cases")
        .join(format!("{}-{}", provider.name(), case.id))
}

/// Builds the environment, runs the body under the case deadline, tears everything down.
async fn run_case(
    case: &Case,
    provider: Provider,
    settings: Arc<Settings>,
) -> (Result<(), CaseError>, Vec<(String, String)>) {
    if let Some(kubeconfig) = &settings.kubeconfig {
        // The cases with a black-box form run it (crate::external); the rest stay skipped.
        if !case.is_mock_only()
            && let Some(result) = crate::external::run(case.id, kubeconfig, &settings).await
        {
            return match result {
                Ok(metrics) => (Ok(()), metrics),
                Err(e) => (Err(e), Vec::new()),
            };
        }
        let reason = if case.is_mock_only() {
            "not run: needs the mock cloud ([Mock]); external mode has no cloud control"
        } else {
            "not run: external clusters are not supported by this suite yet (embedded mode only)"
        };
        return (Err(CaseError::Skipped(reason.into())), Vec::new());
    }
    let dir = case_dir(&settings, provider, case);
    let _ = std::fs::remove_dir_all(&dir);
    let mut env = match Environment::embedded(provider, settings.clone(), &dir, case.ccm_args).await
    {
        Ok(env) => env,
        Err(e) => return (Err(e), Vec::new()),
    };
    let body = async {
        for need in case.capabilities() {
            env.cloud().require_capability(need)?;
        }
        if case.start_ccm {
            env.start_ccm().await?;
        }
        (case.run)(&mut env).await
    };
    let result = match tokio::time::timeout(CASE_DEADLINE, body).await {
        Ok(r) => r,
        Err(_) => Err(CaseError::failed(format!(
            "case did not finish within {CASE_DEADLINE:?}"
        ))),
    };
    let result = match result {
        Err(e @ CaseError::Failed { .. }) if !failure_detail(&e).contains("--- CCM log") => {
            Err(env.with_ccm_log(e))
        }
        other => other,
    };
    env.teardown().await;
    match result {
        Ok(metrics) => (Ok(()), metrics),
        Err(e) => (Err(e), Vec::new()),
    }
}
