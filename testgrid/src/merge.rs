//! `merge`: the shards of one run (`run --shard K/N`, each in its own artifacts directory:
//! N processes on one machine, or N Prow jobs) joined into one run in the Prow layout, so
//! `publish`, `dashboard` and TestGrid see one build — one column.
//!
//! What comes out: one `junit_conformance.xml` holding every shard's testcases (suites of
//! one name joined), `started.json` of the earliest shard, `finished.json` at the latest
//! shard's time with the worst result, `metadata.json` with `shards: N` for `shard`,
//! `build-log.txt` with each shard's lines under a header, and every shard's `cases/`
//! side by side.
//!
//! What it refuses (nothing written): directories that are not shards of a run (no
//! `shard` in `metadata.json`), shards of different runs (another shard count, case list,
//! provider or CCM), the same shard twice. What makes the merged run a FAILURE, said
//! shard by shard: a shard that is missing, that did not finish, that failed, or a case
//! that appears in two shards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use quick_junit::{Report, TestSuite};

use crate::prow::{self, Finished, JobResult, Started};

/// The metadata keys every shard of one run shares.
const SAME_IN_EVERY_SHARD: &[&str] = &["case-list", "provider", "ccm-version", "k8s-version"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: one line saying what and where.
    #[error("{0}")]
    Refused(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a merge made.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub shards: usize,
    pub cases: usize,
    pub result: JobResult,
    /// Why the result is not SUCCESS, shard by shard.
    pub problems: Vec<String>,
}

/// One shard's directory, read.
struct ShardRun {
    dir: PathBuf,
    index: usize,
    count: usize,
    metadata: BTreeMap<String, String>,
    started: Option<Started>,
    finished: Option<Finished>,
    report: Report,
}

fn refused(text: String) -> Error {
    Error::Refused(text)
}

fn read_shard(dir: &Path) -> Result<ShardRun, Error> {
    let metadata = prow::read_metadata(&dir.join(prow::METADATA_JSON))
        .map_err(|e| refused(format!("{}: not a run's artifacts ({e})", dir.display())))?;
    let shard = metadata.get("shard").ok_or_else(|| {
        refused(format!(
            "{}: not a shard (its metadata.json has no \"shard\"; run with --shard K/N)",
            dir.display()
        ))
    })?;
    let (index, count) = shard
        .split_once('/')
        .and_then(|(k, n)| Some((k.parse().ok()?, n.parse().ok()?)))
        .filter(|(k, n): &(usize, usize)| *k >= 1 && k <= n)
        .ok_or_else(|| refused(format!("{}: shard {shard:?} is not K/N", dir.display())))?;
    let junit = dir.join("junit_conformance.xml");
    let report = match std::fs::read_to_string(&junit) {
        Ok(xml) => Report::deserialize_from_str(&xml)
            .map_err(|e| refused(format!("{}: not a JUnit file: {e}", junit.display())))?,
        // A shard that died before its first case: reported below, not refused.
        Err(_) => Report::new("ccm-conformance"),
    };
    Ok(ShardRun {
        dir: dir.to_path_buf(),
        index,
        count,
        started: prow::read_started(&dir.join(prow::STARTED_JSON)).ok(),
        finished: prow::read_finished(&dir.join(prow::FINISHED_JSON)).ok(),
        metadata,
        report,
    })
}

/// Merges the shard directories `from` into `out` (made if missing).
pub fn merge(from: &[PathBuf], out: &Path) -> Result<Merged, Error> {
    if from.is_empty() {
        return Err(refused(
            "nothing to merge: give each shard's directory with --from".into(),
        ));
    }
    let mut shards = from
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    shards.sort_by_key(|s| s.index);
    let first = &shards[0];
    for s in &shards[1..] {
        if s.count != first.count {
            return Err(refused(format!(
                "{} is shard {}/{} but {} is shard {}/{}: shards of different runs",
                s.dir.display(),
                s.index,
                s.count,
                first.dir.display(),
                first.index,
                first.count
            )));
        }
        if shards.iter().filter(|o| o.index == s.index).count() > 1 {
            return Err(refused(format!(
                "shard {}/{} is given twice",
                s.index, s.count
            )));
        }
        for key in SAME_IN_EVERY_SHARD {
            if s.metadata.get(*key) != first.metadata.get(*key) {
                return Err(refused(format!(
                    "{} and {} are shards of different runs: {key} {:?} vs {:?}",
                    first.dir.display(),
                    s.dir.display(),
                    first.metadata.get(*key).map_or("", String::as_str),
                    s.metadata.get(*key).map_or("", String::as_str),
                )));
            }
        }
    }
    let count = first.count;
    let mut problems = Vec::new();
    let present: BTreeSet<usize> = shards.iter().map(|s| s.index).collect();
    for k in (1..=count).filter(|k| !present.contains(k)) {
        problems.push(format!("shard {k}/{count} is missing"));
    }
    // Worst first: a failure (a missing, unfinished or failed shard, a failed case, a case
    // twice), then an interrupted shard.
    let mut aborted = false;
    for s in &shards {
        match &s.finished {
            None => problems.push(format!(
                "shard {}/{count} ({}) did not finish: no finished.json",
                s.index,
                s.dir.display()
            )),
            Some(f) if f.result != JobResult::Success => {
                problems.push(format!(
                    "shard {}/{count} ({}) ended {}",
                    s.index,
                    s.dir.display(),
                    f.result.as_str()
                ));
                aborted |= f.result == JobResult::Aborted;
            }
            Some(_) => {}
        }
    }

    // One report: suites of one name joined, each case once.
    let mut report = Report::new("ccm-conformance");
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut cases = 0;
    for s in &shards {
        for suite in &s.report.test_suites {
            let name = suite.name.to_string();
            let merged = suites.entry(name.clone()).or_insert_with(|| {
                order.push(name.clone());
                let mut fresh = TestSuite::new(suite.name.clone());
                if let Some(t) = suite.timestamp {
                    fresh.set_timestamp(t);
                }
                fresh
            });
            for case in &suite.test_cases {
                if let Some(other) = seen.insert(case.name.to_string(), s.index) {
                    problems.push(format!(
                        "{} is in shard {other}/{count} and shard {}/{count}",
                        case.name.as_str(),
                        s.index
                    ));
                }
                cases += 1;
            }
            merged.add_test_cases(suite.test_cases.iter().cloned());
            merged.time = Some(merged.time.unwrap_or_default() + suite.time.unwrap_or_default());
        }
    }
    for name in order {
        report.add_test_suite(suites.remove(&name).expect("kept in order"));
    }
    let failed_cases = report
        .test_suites
        .iter()
        .any(|s| s.failures > 0 || s.errors > 0);
    let failed = failed_cases || problems.iter().any(|p| !p.ends_with("ended ABORTED"));
    let result = if failed {
        JobResult::Failure
    } else if aborted {
        JobResult::Aborted
    } else {
        JobResult::Success
    };

    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        crate::atomic::write(&path, bytes).map_err(|source| Error::Write { path, source })
    };
    let xml = report
        .to_string()
        .map_err(|e| refused(format!("serializing the merged JUnit: {e}")))?;
    write("junit_conformance.xml", xml.as_bytes())?;
    let prow_err = |e: prow::Error| refused(format!("writing {}: {e}", out.display()));
    if let Some(started) = shards
        .iter()
        .filter_map(|s| s.started.clone())
        .min_by_key(|s| s.timestamp)
    {
        prow::write_started(out, &started).map_err(prow_err)?;
    }
    let mut metadata = first.metadata.clone();
    metadata.remove("shard");
    metadata.insert("shards".into(), count.to_string());
    let finished_at = shards
        .iter()
        .filter_map(|s| s.finished.as_ref().map(|f| f.timestamp))
        .max()
        .unwrap_or_else(prow::now_epoch_seconds);
    prow::write_finished(
        out,
        &Finished {
            timestamp: finished_at,
            passed: result == JobResult::Success,
            result,
            metadata: metadata.clone(),
        },
    )
    .map_err(prow_err)?;
    let mut meta_json = serde_json::to_vec_pretty(&metadata).expect("a string map");
    meta_json.push(b'\n');
    write(prow::METADATA_JSON, &meta_json)?;
    let mut log = String::new();
    for s in &shards {
        log.push_str(&format!(
            "=== shard {}/{count} ({}) ===\n",
            s.index,
            s.dir.display()
        ));
        log.push_str(&std::fs::read_to_string(s.dir.join(prow::BUILD_LOG)).unwrap_or_default());
    }
    write(prow::BUILD_LOG, log.as_bytes())?;
    for s in &shards {
        copy_tree(&s.dir.join("cases"), &out.join("cases"))?;
    }
    Ok(Merged {
        shards: count,
        cases,
        result,
        problems,
    })
}

/// Copies `from` into `to` (hard links where the file system allows them); a missing
/// `from` copies nothing.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    let Ok(entries) = std::fs::read_dir(from) else {
        return Ok(());
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Write { path, source }
    };
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in entries.flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(io(&dst))?;
        }
    }
    Ok(())
}
