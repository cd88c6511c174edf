//! The self-certification kit: after `ccm-conformance certify` has run the suites into a
//! folder, this writes what turns that folder into something a provider can hand over —
//! a `README.md` (what ran, counts, versions, how to publish, how to propose the TestGrid
//! config) and `testgrid-config.yaml`.
//!
//! Why a folder and not an upload: KEP-2390 (reference `testgrid-prow.md` §5) asks providers
//! to upload results to their own bucket and then open a pull request against test-infra's
//! TestGrid config. The folder is exactly what `publish` uploads (started.json,
//! finished.json, build-log.txt, junit_*.xml, logs), so the kit is checked locally first
//! and published as is. CNCF certification is a different thing (§0 rule 10): the README
//! says so, so nobody submits CCM results to cncf/k8s-conformance.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::config::ConfigSpec;
use crate::layout::{JobKind, JobLayout};
use crate::prow::{self, FINISHED_JSON, STARTED_JSON};
use crate::read::{self, Status};

/// The README written into the kit.
pub const README: &str = "README.md";
/// The TestGrid config snippet written into the kit.
pub const TESTGRID_CONFIG: &str = "testgrid-config.yaml";

/// Errors while writing the kit.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Junit(#[from] read::Error),
    #[error(transparent)]
    Prow(#[from] prow::Error),
    #[error(transparent)]
    Layout(#[from] crate::layout::Error),
    #[error(transparent)]
    Config(#[from] crate::config::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the kit is about.
#[derive(Debug, Clone, PartialEq)]
pub struct KitSpec {
    pub provider: String,
    /// Job name the results are published under (and the TestGrid test group).
    pub job: String,
    /// Bucket the provider will publish to (without gs://); a placeholder is fine.
    pub bucket: String,
    /// How the CCM was given (`--ccm PATH` or `--kubeconfig PATH`), for the README.
    pub target: String,
}

impl KitSpec {
    /// Defaults: job `ci-<provider>-ccm-conformance`, bucket `k8s-conformance-<provider>`
    /// (the bucket naming of test-infra `testgrid/conformance/creating-a-bucket.md`, §5).
    pub fn new(provider: &str, target: &str) -> Self {
        Self {
            provider: provider.to_string(),
            job: format!("ci-{provider}-ccm-conformance"),
            bucket: format!("k8s-conformance-{provider}"),
            target: target.to_string(),
        }
    }
}

/// Counts of the run, by final verdict of each row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KitCounts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Passed after a failed attempt.
    pub flaky: usize,
}

/// What [`write_kit`] wrote and found.
#[derive(Debug, Clone, PartialEq)]
pub struct Kit {
    pub counts: KitCounts,
    /// finished.json's `result`, when the run got that far.
    pub result: Option<String>,
    pub readme: PathBuf,
    pub testgrid_config: PathBuf,
}

/// Writes `README.md` and `testgrid-config.yaml` into `dir`, a folder the suites have run
/// into. Reads the JUnit (strictly: a malformed file is an error naming it) and the Prow
/// JSON files.
pub fn write_kit(dir: &Path, spec: &KitSpec) -> Result<Kit, Error> {
    let results = read::read_results(dir)?;
    let mut counts = KitCounts::default();
    for record in results.values() {
        match record.last().map(|a| a.status) {
            Some(s) if s.is_failure() => counts.failed += 1,
            Some(Status::Skipped) => counts.skipped += 1,
            Some(_) if record.is_flaky() => counts.flaky += 1,
            Some(_) => counts.passed += 1,
            None => {}
        }
    }
    let finished_path = dir.join(FINISHED_JSON);
    let finished = if finished_path.is_file() {
        Some(prow::read_finished(&finished_path)?)
    } else {
        None
    };
    let started_path = dir.join(STARTED_JSON);
    let started = if started_path.is_file() {
        Some(prow::read_started(&started_path)?)
    } else {
        None
    };

    let layout = JobLayout::new("", &spec.job, JobKind::Periodic)?;
    let mut config = ConfigSpec::new(&spec.provider, &spec.bucket, layout);
    config.description = format!(
        "ccm-conformance suites against the {} CCM, uploaded by the provider",
        spec.provider
    );
    let yaml = crate::config::render(&config)?;
    let config_path = dir.join(TESTGRID_CONFIG);
    crate::atomic::write(&config_path, yaml.as_bytes()).map_err(|source| Error::Write {
        path: config_path.clone(),
        source,
    })?;

    let mut junit_files = Vec::new();
    list_junit(dir, dir, &mut junit_files);
    let mut md = String::new();
    let _ = writeln!(md, "# CCM conformance results: {}\n", spec.provider);
    let _ = writeln!(
        md,
        "Written by `ccm-conformance certify`. This folder is one run of the ccm-conformance \
suites in the layout Prow writes, ready for `ccm-conformance publish` and TestGrid.\n"
    );
    let _ = writeln!(md, "## What ran\n");
    let _ = writeln!(md, "- CCM under test: `{}`", spec.target);
    let _ = writeln!(md, "- provider: `{}`", spec.provider);
    if let Some(s) = &started {
        let _ = writeln!(
            md,
            "- started: {} (epoch {})",
            date(s.timestamp),
            s.timestamp
        );
    }
    match &finished {
        Some(f) => {
            let _ = writeln!(
                md,
                "- finished: {} (epoch {}), result **{}**",
                date(f.timestamp),
                f.timestamp,
                f.result.as_str()
            );
            for (k, v) in &f.metadata {
                let _ = writeln!(md, "- {k}: `{v}`");
            }
        }
        None => {
            let _ = writeln!(md, "- finished.json is missing: the run did not complete");
        }
    }
    let _ = writeln!(md, "\n## Results\n");
    let _ = writeln!(md, "| passed | failed | flaky | skipped | total |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} |\n",
        counts.passed,
        counts.failed,
        counts.flaky,
        counts.skipped,
        results.len()
    );
    let failed: Vec<_> = results.values().filter(|r| r.failed()).collect();
    if !failed.is_empty() {
        let _ = writeln!(md, "Failed:\n");
        for r in failed {
            let msg = r
                .last()
                .and_then(|a| a.message.as_deref())
                .unwrap_or_default();
            let _ = writeln!(md, "- `{}`: {}", r.row(), msg.replace('\n', " "));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Files\n");
    for f in [
        STARTED_JSON,
        FINISHED_JSON,
        prow::METADATA_JSON,
        prow::BUILD_LOG,
    ] {
        if dir.join(f).is_file() {
            let _ = writeln!(md, "- `{f}`");
        }
    }
    for f in &junit_files {
        let _ = writeln!(md, "- `{f}` (JUnit, TestGrid dialect)");
    }
    if dir.join("cases").is_dir() {
        let _ = writeln!(
            md,
            "- `cases/` (per-case logs: the CCM's log, its cloud config and kubeconfig)"
        );
    }
    let _ = writeln!(md, "- `{TESTGRID_CONFIG}` (TestGrid config snippet)\n");
    let _ = writeln!(md, "## Publish\n");
    let _ = writeln!(
        md,
        "Upload to a public-read bucket (KEP-2390; a `k8s-conformance-<provider>` bucket can be \
requested as described in test-infra `testgrid/conformance/creating-a-bucket.md`). Build IDs \
must increase from run to run; the default is started.json's timestamp.\n"
    );
    let _ = writeln!(md, "```sh");
    let _ = writeln!(
        md,
        "export GOOGLE_APPLICATION_CREDENTIALS=/path/to/service-account-key.json"
    );
    let _ = writeln!(
        md,
        "ccm-conformance publish --from . --to gs://{} --job {}",
        spec.bucket, spec.job
    );
    let _ = writeln!(md, "```\n");
    let _ = writeln!(
        md,
        "Check locally first: `ccm-conformance publish --from . --to file:///tmp/bucket --job {}` \
then `ccm-conformance dashboard --from /tmp/bucket --out /tmp/site`.\n",
        spec.job
    );
    let _ = writeln!(md, "## Propose the TestGrid configuration\n");
    let _ = writeln!(
        md,
        "`{TESTGRID_CONFIG}` holds a test group reading `gs://{}`, a dashboard and a \
dashboard group. Open a pull request against kubernetes/test-infra adding it under \
`config/testgrids/` (and the bucket to kettle's `buckets.yaml`, per \
`docs/contributing-test-results.md`). Set `alert_mail_to_addresses` before proposing it. \
Dashboards without results for 90 days may be removed, so publish at least for every \
Kubernetes patch release.\n",
        config.gcs_prefix()
    );
    let _ = writeln!(md, "## Not a CNCF certification\n");
    let _ = writeln!(
        md,
        "cncf/k8s-conformance accepts only the upstream `e2e.test` `[Conformance]` run \
(`junit_01.xml` + `e2e.log`). These CCM results are for TestGrid dashboards."
    );
    let readme = dir.join(README);
    crate::atomic::write(&readme, md.as_bytes()).map_err(|source| Error::Write {
        path: readme.clone(),
        source,
    })?;
    Ok(Kit {
        counts,
        result: finished.map(|f| f.result.as_str().to_string()),
        readme,
        testgrid_config: config_path,
    })
}

fn date(epoch: u64) -> String {
    i64::try_from(epoch)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Relative paths of the `junit*.xml` files under `dir` (best effort, for the README).
fn list_junit(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            list_junit(root, &p, out);
        } else if name.starts_with("junit")
            && name.ends_with(".xml")
            && !name.contains(".tmp.")
            && let Ok(rel) = p.strip_prefix(root)
        {
            out.push(rel.display().to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::junit::{CaseResult, JunitFile, Outcome};
    use crate::prow::{Finished, JobResult, RunMetadata, Started};
    use std::time::Duration;

    fn case(name: &str, outcome: Outcome) -> CaseResult {
        CaseResult {
            suite: "openstack".into(),
            name: name.into(),
            outcome,
            duration: Duration::from_secs(1),
            properties: Vec::new(),
            system_out: None,
        }
    }

    #[test]
    fn kit_counts_and_explains_the_run() {
        let dir = tempfile::tempdir().unwrap();
        prow::write_started(dir.path(), &Started::at(1_700_000_000)).unwrap();
        let j = JunitFile::new(crate::junit_path(dir.path(), "conformance"), "ccm");
        j.record(case("a", Outcome::Passed)).unwrap();
        j.record(case(
            "b",
            Outcome::Failed {
                message: "no providerID".into(),
                detail: String::new(),
            },
        ))
        .unwrap();
        j.record(case(
            "c",
            Outcome::Skipped {
                reason: "no routes".into(),
            },
        ))
        .unwrap();
        let meta = RunMetadata {
            provider: "openstack".into(),
            k8s_version: "v1.34.1".into(),
            ..Default::default()
        };
        prow::write_finished(
            dir.path(),
            &Finished::new(1_700_000_100, JobResult::Failure, &meta),
        )
        .unwrap();
        let kit = write_kit(dir.path(), &KitSpec::new("openstack", "--ccm ./ccm")).unwrap();
        assert_eq!(
            kit.counts,
            KitCounts {
                passed: 1,
                failed: 1,
                skipped: 1,
                flaky: 0
            }
        );
        assert_eq!(kit.result.as_deref(), Some("FAILURE"));
        let md = std::fs::read_to_string(&kit.readme).unwrap();
        assert!(md.contains("| 1 | 1 | 0 | 1 | 3 |"), "{md}");
        assert!(md.contains("`openstack.b`: no providerID"), "{md}");
        assert!(md.contains("k8s-version: `v1.34.1`"), "{md}");
        assert!(
            md.contains("--to gs://k8s-conformance-openstack --job ci-openstack-ccm-conformance")
        );
        assert!(md.contains("junit_conformance.xml"));
        let yaml = std::fs::read_to_string(&kit.testgrid_config).unwrap();
        assert!(
            yaml.contains("k8s-conformance-openstack/logs/ci-openstack-ccm-conformance"),
            "{yaml}"
        );
        assert!(yaml.contains("disable_prowjob_analysis: true"), "{yaml}");
    }

    #[test]
    fn malformed_junit_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("junit_x.xml"),
            "<testsuites><testsuite name=",
        )
        .unwrap();
        let err = write_kit(dir.path(), &KitSpec::new("p", "x")).unwrap_err();
        assert!(err.to_string().contains("junit_x.xml"), "{err}");
        assert!(!dir.path().join(README).exists());
    }
}
