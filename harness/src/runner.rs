//! Turns cases into libtest-mimic trials (one per case and provider), runs each on a shared
//! tokio runtime inside its own environment with a deadline, and records every result in
//! the JUnit file as soon as it is known, so an interrupted run still leaves a valid file.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use ccm_testgrid::prow::BuildLog;
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};
use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};
use tokio::runtime::Runtime;

use crate::case::{Case, CaseError};
use crate::env::Environment;
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

/// Runs `cases` for every provider in `settings` with libtest's command-line semantics
/// (`--list`, filters, `--exact`, `--skip`, `--test-threads`, `--ignored`).
pub fn run(cases: &[Case], settings: Settings, args: Arguments) -> Conclusion {
    run_filtered(cases, settings, args, |_| true)
}

/// [`run`], keeping only the trials whose full name `keep` accepts (the CLI's
/// `--focus`/`--skip` regular expressions).
pub fn run_filtered(
    cases: &[Case],
    settings: Settings,
    mut args: Arguments,
    keep: impl Fn(&str) -> bool,
) -> Conclusion {
    crate::install_crypto_provider();
    if args.test_threads.is_none() {
        args.test_threads = Some(DEFAULT_PARALLEL);
    }
    let junit = Arc::new(JunitFile::new(
        junit_path(&settings.artifacts, JUNIT_CONTEXT),
        "ccm-conformance",
    ));
    if !args.list {
        if let Err(e) = junit.flush() {
            eprintln!("warning: cannot write {}: {e}", junit.path().display());
        }
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
    let settings = Arc::new(settings);
    let mut trials = trials(cases, &settings, &junit, log);
    trials.retain(|t| keep(t.name()));
    libtest_mimic::run(&args, trials)
}

/// One trial per (provider, case).
pub fn trials(
    cases: &[Case],
    settings: &Arc<Settings>,
    junit: &Arc<JunitFile>,
    log: Option<Arc<BuildLog>>,
) -> Vec<Trial> {
    let mut out = Vec::new();
    for &provider in &settings.providers {
        for case in cases {
            let name = case.full_name(provider);
            let (case, settings, junit, log) =
                (case.clone(), settings.clone(), junit.clone(), log.clone());
            let trial_name = name.clone();
            out.push(Trial::ignorable_test(trial_name, move || {
                let started = Instant::now();
                let (result, metrics) =
                    RUNTIME.block_on(run_case(&case, provider, settings.clone()));
                let outcome = match &result {
                    Ok(()) => Outcome::Passed,
                    Err(CaseError::Failed { message, detail }) => Outcome::Failed {
                        message: message.clone(),
                        detail: detail.clone(),
                    },
                    Err(CaseError::Skipped(reason)) => Outcome::Skipped {
                        reason: reason.clone(),
                    },
                };
                if let Some(log) = &log {
                    let verdict = match &outcome {
                        Outcome::Passed => "PASS".to_string(),
                        Outcome::Failed { message, .. } => format!("FAIL ({message})"),
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
                    Err(CaseError::Failed { message, detail }) => {
                        Err(Failed::from(format!("{message}\n{detail}")))
                    }
                }
            }));
        }
    }
    out
}

/// Builds the environment, runs the body under the case deadline, tears everything down.
async fn run_case(
    case: &Case,
    provider: crate::cloud::Provider,
    settings: Arc<Settings>,
) -> (Result<(), CaseError>, Vec<(String, String)>) {
    if settings.kubeconfig.is_some() {
        let reason = if case.is_mock_only() {
            "not run: needs the mock cloud ([Mock]); external mode has no cloud control"
        } else {
            "not run: external clusters are not supported by this suite yet (embedded mode only)"
        };
        return (Err(CaseError::Skipped(reason.into())), Vec::new());
    }
    let dir = settings
        .artifacts
        .join("cases")
        .join(format!("{}-{}", provider.name(), case.id));
    let _ = std::fs::remove_dir_all(&dir);
    let mut env = match Environment::embedded(provider, settings.clone(), &dir, case.ccm_args).await
    {
        Ok(env) => env,
        Err(e) => return (Err(e), Vec::new()),
    };
    let body = async {
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
        Err(CaseError::Failed { message, detail }) if !detail.contains("--- CCM log") => {
            Err(env.with_ccm_log(CaseError::Failed { message, detail }))
        }
        other => other,
    };
    env.teardown().await;
    match result {
        Ok(metrics) => (Ok(()), metrics),
        Err(e) => (Err(e), Vec::new()),
    }
}
