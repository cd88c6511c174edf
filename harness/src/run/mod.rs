//! One run of the suites, whoever asks for it. `ccm-conformance run` and `certify` build a
//! [`RunRequest`] from their flags, `cargo test --test conformance` from the environment;
//! [`execute`] then owns the rest: the upstream binaries a run needs, the case selection
//! (`selection.rs`), the Prow files around the JUnit (`prow.rs`) and the runner. Why one
//! pipeline: the two front ends used to parse and check the options each in its own way,
//! and only the CLI wrote `started.json`, `metadata.json`, `build-log.txt` and
//! `finished.json` — now every run leaves the same files by the same rules.

use std::path::PathBuf;

use libtest_mimic::Conclusion;

use crate::case::Case;
use crate::runner::{self, RunOptions};
use crate::settings::SettingsError;

pub mod prow;
mod request;
mod selection;

pub use request::{Origin, RequestError, RunInput, RunRequest};
pub use selection::{Rerun, Selection, parse_providers};

/// Why a checked run could not run (bad input is a [`RequestError`] before this).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("creating {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Prow(#[from] ccm_testgrid::prow::Error),
    /// An upstream CCM or the real control plane could not be built.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// Runs `request` over `cases`: the failed cases' names checked against these cases, the
/// upstream CCMs (and a real API server's binaries) built or found before the first case,
/// the Prow files written around the cases (not for `--list`), `finished.json` `ABORTED`
/// when a signal ends the run. Returns libtest's conclusion (its
/// [`exit_code`](Conclusion::exit_code) is the run's).
pub fn execute(request: RunRequest, cases: &[Case]) -> Result<Conclusion, RunError> {
    let RunRequest {
        mut settings,
        selection,
        libtest,
        progress_lines,
    } = request;
    if let Some(rerun) = &selection.rerun {
        for gone in selection.unknown_reruns(cases, &settings.providers) {
            eprintln!(
                "warning: {gone:?} failed in {} but is not a case here",
                rerun.from.display()
            );
        }
        if rerun.failed.is_empty() {
            println!(
                "nothing failed in {}: nothing to rerun",
                rerun.from.display()
            );
            return Ok(Conclusion {
                num_filtered_out: 0,
                num_passed: 0,
                num_failed: 0,
                num_ignored: 0,
                num_measured: 0,
            });
        }
    }
    let listing = libtest.list;
    let mut on_abort = None;
    let mut prow_files = None;
    if !listing {
        // Before the first case, so that no case's time includes a Go build.
        let providers = settings.providers.clone();
        settings.resolve(&providers, &mut |line| eprintln!("{line}"))?;
        let mut metadata = prow::run_metadata(&settings);
        metadata
            .extra
            .extend(selection.shard_metadata(cases, &settings.providers));
        settings.build_log = Some(prow::start(&settings.artifacts, &metadata)?);
        on_abort = Some(prow::abort_hook(
            settings.artifacts.clone(),
            metadata.clone(),
            settings.kubeconfig.clone(),
        ));
        prow_files = Some((settings.artifacts.clone(), metadata));
    }
    let chosen = selection.chosen(cases, &settings.providers);
    let options = RunOptions {
        progress_lines,
        handle_signals: true,
        on_abort,
    };
    let conclusion = runner::run_with(
        cases,
        settings,
        libtest,
        |name| chosen.contains(name),
        options,
    );
    if let Some((artifacts, metadata)) = prow_files {
        prow::finish(&artifacts, &metadata, conclusion.has_failed())?;
    }
    Ok(conclusion)
}
