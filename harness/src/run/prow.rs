//! The files a publishable run leaves in its artifacts directory beside the JUnit
//! (shared/reference/testgrid-prow.md §1): `started.json` before the first case,
//! `metadata.json` (the versions TestGrid shows as column headers), `build-log.txt` with a
//! line per case, and `finished.json` at the end — `ABORTED` when a signal cuts the run
//! short. Under Prow (`PROW_JOB_ID` set) the pod utilities write `started.json` and
//! `finished.json` themselves, so a run leaves them alone.
//!
//! Here rather than in the CLI so that every way of running the suites (`run`, `certify`,
//! `cargo test --test conformance`) and `soak` leave the same files by the same rules.

use std::path::{Path, PathBuf};

use ccm_testgrid::prow::{self, JobResult, RunMetadata};

use super::RunError;
use crate::runner::AbortHook;
use crate::settings::{ApiServerChoice, Settings};

/// Whether Prow's sidecar writes `started.json` and `finished.json` (a Prow job).
fn under_prow() -> bool {
    std::env::var_os("PROW_JOB_ID").is_some()
}

/// The first line of `BIN --version`.
pub fn binary_version(binary: &Path) -> Option<String> {
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
}

/// Column headers TestGrid shows: versions of the pieces under test. The CCM's version is
/// asked of the binary each provider runs (upstream CCMs differ per provider: each is
/// named).
pub fn run_metadata(settings: &Settings) -> RunMetadata {
    let mut versions: Vec<String> = Vec::new();
    for &p in &settings.providers {
        let v = binary_version(&settings.for_provider(p).ccm).unwrap_or_else(|| "unknown".into());
        let v = if settings.uses_upstream() {
            format!("{} {v}", p.upstream_ccm().map_or("?", |u| u.binary))
        } else {
            v
        };
        if !versions.contains(&v) {
            versions.push(v);
        }
    }
    let ccm_version = if versions.is_empty() {
        "unknown".into()
    } else {
        versions.join(", ")
    };
    RunMetadata {
        k8s_version: match settings.apiserver {
            ApiServerChoice::Embedded => mock_kube_apiserver::discovery::GIT_VERSION.to_string(),
            ApiServerChoice::Real => ccm_upstream::control_plane("kube-apiserver").map_or_else(
                || "unknown".into(),
                |u| format!("{} (real)", u.default_version),
            ),
        },
        ccm_version,
        provider: settings
            .providers
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(","),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        extra: Default::default(),
    }
}

/// Creates `artifacts` and writes `started.json` (unless under Prow) and `metadata.json`.
pub fn begin(artifacts: &Path, metadata: &RunMetadata) -> Result<(), RunError> {
    std::fs::create_dir_all(artifacts).map_err(|source| RunError::CreateDir {
        path: artifacts.to_path_buf(),
        source,
    })?;
    if !under_prow() {
        let started = prow::Started::now().with_prow_env(|k| std::env::var(k).ok());
        prow::write_started(artifacts, &started)?;
    }
    prow::write_metadata(artifacts, metadata)?;
    Ok(())
}

/// [`begin`], and a fresh `build-log.txt` that the runner appends a line to per case;
/// returns its path.
pub fn start(artifacts: &Path, metadata: &RunMetadata) -> Result<PathBuf, RunError> {
    begin(artifacts, metadata)?;
    let log = artifacts.join(prow::BUILD_LOG);
    let _ = std::fs::remove_file(&log);
    Ok(log)
}

/// `finished.json` with `SUCCESS` or `FAILURE` (unless under Prow).
pub fn finish(artifacts: &Path, metadata: &RunMetadata, failed: bool) -> Result<(), RunError> {
    let result = if failed {
        JobResult::Failure
    } else {
        JobResult::Success
    };
    write_finished(artifacts, metadata, result)
}

/// `finished.json` with `result` (unless under Prow).
pub fn write_finished(
    artifacts: &Path,
    metadata: &RunMetadata,
    result: JobResult,
) -> Result<(), RunError> {
    if !under_prow() {
        prow::write_finished(
            artifacts,
            &prow::Finished::new(prow::now_epoch_seconds(), result, metadata),
        )?;
    }
    Ok(())
}

/// What the runner calls when a signal aborts the run, once the JUnit file is final:
/// `finished.json` `ABORTED`, and in external mode (`external_cluster`: its kubeconfig) how
/// to delete the namespaces of the cases cut off (each case's fixture deletes its own when
/// it ends, which a cut-off case never does).
pub fn abort_hook(
    artifacts: PathBuf,
    metadata: RunMetadata,
    external_cluster: Option<PathBuf>,
) -> AbortHook {
    Box::new(move |_signal| {
        if let Some(kubeconfig) = &external_cluster {
            eprintln!(
                "interrupted: namespaces of the cases cut off may be left in the cluster; delete them with: kubectl --kubeconfig {} delete namespace -l {}",
                kubeconfig.display(),
                crate::external::CREATED_BY_SELECTOR
            );
        }
        if let Err(e) = write_finished(&artifacts, &metadata, JobResult::Aborted) {
            eprintln!("warning: {e}");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_leaves_started_metadata_a_fresh_build_log_and_finished() {
        let dir = tempfile::tempdir().unwrap();
        let artifacts = dir.path().join("a");
        let metadata = RunMetadata {
            k8s_version: "v1".into(),
            ccm_version: "c".into(),
            provider: "aws".into(),
            harness_version: "h".into(),
            extra: Default::default(),
        };
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::write(artifacts.join(prow::BUILD_LOG), "old run\n").unwrap();
        let log = start(&artifacts, &metadata).unwrap();
        assert_eq!(log, artifacts.join(prow::BUILD_LOG));
        assert!(!log.exists(), "an earlier run's build log is gone");
        assert!(artifacts.join(prow::METADATA_JSON).exists());
        if !under_prow() {
            assert!(artifacts.join(prow::STARTED_JSON).exists());
            finish(&artifacts, &metadata, true).unwrap();
            let finished = prow::read_finished(&artifacts.join(prow::FINISHED_JSON)).unwrap();
            assert_eq!(finished.result, JobResult::Failure);
        }
    }
}
