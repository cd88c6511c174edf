//! Benchmarks of the result path: `ccm-conformance bench junit` and `bench publish`.
//!
//! Why: the JUnit file is rewritten atomically after every case (so a killed run leaves a
//! complete file), which costs O(cases) per write; issue 7 bounds that at 5 ms per write
//! for a 2,000-case run, and a publish of such a run to a GCS emulator at 10 s. These
//! functions build a synthetic run of that size and time the real code paths.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::junit::{CaseResult, JunitFile, Outcome};
use crate::prow::{self, Finished, JobResult, RunMetadata, Started};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Junit(#[from] crate::junit::Error),
    #[error(transparent)]
    Prow(#[from] prow::Error),
    #[error(transparent)]
    Publish(#[from] crate::publish::Error),
    #[error(transparent)]
    Merge(#[from] crate::merge::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Distribution of per-operation times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    pub count: usize,
    pub median: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub total: Duration,
}

impl Timings {
    /// Percentiles by nearest rank over `samples` (any order).
    pub fn from_samples(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let pick = |q: f64| {
            if samples.is_empty() {
                return Duration::ZERO;
            }
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1]
        };
        Self {
            count: samples.len(),
            median: pick(0.5),
            p99: pick(0.99),
            max: samples.last().copied().unwrap_or_default(),
            total: samples.iter().sum(),
        }
    }
}

/// A case like the suites record: a long name, a duration, a metric, a failure now and then.
fn synthetic_case(i: usize) -> CaseResult {
    let outcome = match i % 20 {
        7 => Outcome::Failed {
            message: format!("node worker-{i} kept the uninitialized taint after 60s"),
            detail: "events:\n  taint still present\n".repeat(4),
        },
        13 => Outcome::Skipped {
            reason: "provider does not implement Routes".into(),
        },
        _ => Outcome::Passed,
    };
    CaseResult {
        suite: "openstack".into(),
        name: format!(
            "[sig-cloud-provider] [openstack] NodeInit case {i:04} removes the uninitialized taint [Conformance]"
        ),
        outcome,
        duration: Duration::from_millis(1200 + (i as u64 % 700)),
        properties: vec![(
            "taint-removal-seconds".into(),
            format!("{:.3}", 0.4 + (i % 9) as f64 / 10.0),
        )],
        system_out: None,
    }
}

/// Records `cases` cases one by one into `dir/junit_bench.xml` (each record rewrites the
/// file atomically, as during a run) and times each write.
pub fn junit_writes(dir: &Path, cases: usize) -> Result<Timings, Error> {
    let file = JunitFile::new(crate::junit_path(dir, "bench"), "ccm-conformance");
    let mut samples = Vec::with_capacity(cases);
    for i in 0..cases {
        let case = synthetic_case(i);
        let t = Instant::now();
        file.record(case)?;
        samples.push(t.elapsed());
    }
    Ok(Timings::from_samples(samples))
}

/// Writes a complete synthetic run of `cases` cases into `dir`: started/finished/metadata
/// JSON, build-log.txt, the JUnit, and `files_per_case` small log files per case under
/// `cases/<n>/` (a real run keeps ccm.log, cloud.conf and kubeconfig per case).
pub fn write_run(dir: &Path, cases: usize, files_per_case: usize) -> Result<(), Error> {
    prow::write_started(dir, &Started::at(1_700_000_000))?;
    let junit = JunitFile::new(crate::junit_path(dir, "conformance"), "ccm-conformance");
    let mut log = String::new();
    for i in 0..cases {
        junit.record(synthetic_case(i))?;
        log.push_str(&format!("[{}/{cases}] PASS case {i:04} (1.2s)\n", i + 1));
        let case_dir = dir.join("cases").join(format!("openstack-{i:04}"));
        for f in 0..files_per_case {
            let path = case_dir.join(format!("file-{f}.log"));
            let body = format!("I1122 02:00:00.000 case {i} file {f}\n").repeat(40);
            crate::atomic::write(&path, body.as_bytes())
                .map_err(|source| Error::Write { path, source })?;
        }
    }
    let path = dir.join(prow::BUILD_LOG);
    crate::atomic::write(&path, log.as_bytes()).map_err(|source| Error::Write { path, source })?;
    let meta = RunMetadata {
        provider: "openstack".into(),
        ..Default::default()
    };
    prow::write_metadata(dir, &meta)?;
    prow::write_finished(
        dir,
        &Finished::new(1_700_003_600, JobResult::Failure, &meta),
    )?;
    Ok(())
}

/// Writes `shards` shards of one synthetic `cases`-case run under `dir/shard-K` (the
/// cases dealt out in turn, one case log each), then merges them into `dir/merged`
/// `runs` times and times each merge.
pub fn merge_runs(dir: &Path, cases: usize, shards: usize, runs: usize) -> Result<Timings, Error> {
    let shards = shards.max(1);
    let mut from = Vec::new();
    for k in 1..=shards {
        let shard = dir.join(format!("shard-{k}"));
        prow::write_started(&shard, &Started::at(1_700_000_000 + k as u64))?;
        let mine: Vec<CaseResult> = (0..cases)
            .filter(|i| i % shards == k - 1)
            .map(synthetic_case)
            .collect();
        for case in &mine {
            let path = shard
                .join("cases")
                .join(case.name.split_whitespace().nth(4).unwrap_or("case"))
                .join("ccm.log");
            crate::atomic::write(&path, b"I1122 02:00:00.000 started\n")
                .map_err(|source| Error::Write { path, source })?;
        }
        JunitFile::new(crate::junit_path(&shard, "conformance"), "ccm-conformance").seal(mine)?;
        let mut meta = RunMetadata {
            provider: "openstack".into(),
            ..Default::default()
        };
        meta.extra.insert("shard".into(), format!("{k}/{shards}"));
        meta.extra.insert("case-list".into(), "bench".into());
        prow::write_metadata(&shard, &meta)?;
        prow::write_finished(
            &shard,
            &Finished::new(1_700_003_600, JobResult::Success, &meta),
        )?;
        from.push(shard);
    }
    let mut samples = Vec::new();
    for run in 0..runs.max(1) {
        let out = dir.join(format!("merged-{run}"));
        let t = Instant::now();
        crate::merge::merge(&from, &out)?;
        samples.push(t.elapsed());
    }
    Ok(Timings::from_samples(samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_of_synthetic_shards_holds_every_case() {
        let dir = tempfile::tempdir().unwrap();
        let t = merge_runs(dir.path(), 100, 3, 2).unwrap();
        assert_eq!(t.count, 2);
        let merged = crate::read::read_results(&dir.path().join("merged-1")).unwrap();
        assert_eq!(merged.len(), 100);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let ms = |n| Duration::from_millis(n);
        let t = Timings::from_samples((1..=100).rev().map(ms).collect());
        assert_eq!((t.median, t.p99, t.max), (ms(50), ms(99), ms(100)));
        assert_eq!(t.count, 100);
        assert_eq!(Timings::from_samples(Vec::new()).median, Duration::ZERO);
    }

    #[test]
    fn synthetic_run_reads_back_with_every_case() {
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path(), 40, 1).unwrap();
        let r = crate::read::read_results(dir.path()).unwrap();
        assert_eq!(r.len(), 40);
        assert_eq!(r.values().filter(|c| c.failed()).count(), 2);
        let t = junit_writes(dir.path(), 30).unwrap();
        assert_eq!(t.count, 30);
        assert!(t.median <= t.p99 && t.p99 <= t.max);
    }
}
