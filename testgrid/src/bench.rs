//! Benchmarks of the result path: `ccm-conformance bench junit`, `bench publish` and
//! `bench merge`; and [`record`], which keeps any benchmark's figures as a Prow build.
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
    #[error("{0} exists: a build directory holds one record of each benchmark")]
    Occupied(std::path::PathBuf),
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

/// The provider the synthetic runs name: any name serves, the figures do not depend on it.
pub const SYNTHETIC_PROVIDER: &str = "example";

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
        suite: SYNTHETIC_PROVIDER.into(),
        name: format!(
            "[sig-cloud-provider] [{SYNTHETIC_PROVIDER}] NodeInit case {i:04} removes the uninitialized taint [Conformance]"
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
        let case_dir = dir
            .join("cases")
            .join(format!("{SYNTHETIC_PROVIDER}-{i:04}"));
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
        provider: SYNTHETIC_PROVIDER.into(),
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
            provider: SYNTHETIC_PROVIDER.into(),
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

/// One benchmark's outcome as TestGrid graphs it: a testcase named after the benchmark whose
/// numeric properties are its figures (reference `testgrid-prow.md` §2.3: numeric testcase
/// properties are metrics, drawn over the columns).
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// The benchmark, e.g. `node-init openstack`; the testcase name.
    pub benchmark: String,
    /// How long the benchmark took as a whole (the testcase's time).
    pub elapsed: Duration,
    /// Figure name and value, e.g. (`node-init openstack reference p50-s`, 0.41). Names are
    /// the metric names, so they carry the benchmark and the unit: one chart each.
    pub values: Vec<(String, f64)>,
}

/// The JUnit file [`record`] writes for benchmark `kind` (`junit_bench-<kind>.xml`): one per
/// benchmark, so several benchmarks of one job record into one build directory.
pub fn record_path(dir: &Path, kind: &str) -> std::path::PathBuf {
    crate::junit_path(dir, &format!("bench-{kind}"))
}

/// Whether [`record`] can write benchmark `kind` into `dir` (checked before a long
/// benchmark, too).
pub fn check_free(dir: &Path, kind: &str) -> Result<(), Error> {
    let path = record_path(dir, kind);
    if path.exists() {
        return Err(Error::Occupied(path));
    }
    Ok(())
}

/// Records benchmark `kind`'s figures into the build directory `dir` as
/// `junit_bench-<kind>.xml` (suite `bench`, a testcase per [`Figures`]) with
/// `metadata.json`, so `publish` uploads them and `dashboard` (or TestGrid) graphs each
/// figure over the builds. `started`: the build's start, to write `started.json` (kept
/// when there is one: the first benchmark of a job started the build) and `finished.json`
/// (now); `None` inside Prow, whose sidecar writes those two. Refuses a second record of
/// the same benchmark into one directory.
pub fn record(
    dir: &Path,
    kind: &str,
    figures: &[Figures],
    started: Option<u64>,
    metadata: &RunMetadata,
) -> Result<std::path::PathBuf, Error> {
    check_free(dir, kind)?;
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    if let Some(started) = started
        && !dir.join(prow::STARTED_JSON).exists()
    {
        prow::write_started(dir, &Started::at(started))?;
    }
    let cases = figures
        .iter()
        .map(|f| CaseResult {
            suite: "bench".into(),
            name: f.benchmark.clone(),
            outcome: Outcome::Passed,
            duration: f.elapsed,
            properties: f
                .values
                .iter()
                .filter(|(_, v)| v.is_finite())
                .map(|(k, v)| (k.clone(), format!("{v:.4}")))
                .collect(),
            system_out: None,
        })
        .collect();
    let junit = record_path(dir, kind);
    JunitFile::new(&junit, "ccm-conformance bench").seal(cases)?;
    prow::write_metadata(dir, metadata)?;
    if let Some(started) = started {
        let finished = prow::now_epoch_seconds().max(started);
        prow::write_finished(dir, &Finished::new(finished, JobResult::Success, metadata))?;
    }
    Ok(junit)
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
    fn recorded_figures_are_the_dashboards_metrics_over_runs() {
        let dir = tempfile::tempdir().unwrap();
        let meta = RunMetadata::default();
        for (build, p50) in [("1", 0.5), ("2", 0.25)] {
            let figures = Figures {
                benchmark: "node-init openstack".into(),
                elapsed: Duration::from_secs(3),
                values: vec![
                    ("node-init openstack reference p50-s".into(), p50),
                    ("not a number".into(), f64::NAN),
                ],
            };
            let started = 1_700_000_000 + build.parse::<u64>().unwrap();
            let dir = dir.path().join(build);
            record(&dir, "node-init", &[figures], Some(started), &meta).unwrap();
            // A second benchmark of the same job joins the build.
            record(&dir, "junit", &[], Some(started + 60), &meta).unwrap();
            let first = prow::read_started(&dir.join(prow::STARTED_JSON)).unwrap();
            assert_eq!(first.timestamp, started);
        }
        let again = record(&dir.path().join("1"), "junit", &[], None, &meta).unwrap_err();
        assert!(matches!(again, Error::Occupied(_)), "{again}");
        let grid = crate::dashboard::Grid::new(crate::dashboard::load_dir(dir.path()).unwrap());
        assert_eq!(
            grid.metrics.get("node-init openstack reference p50-s"),
            Some(&vec![Some(0.25), Some(0.5)]),
            "newest first"
        );
        assert!(!grid.metrics.contains_key("not a number"));
        assert_eq!(grid.rows.len(), 1);
        assert!(
            grid.rows[0]
                .cells
                .iter()
                .all(|c| *c == crate::dashboard::Cell::Pass)
        );
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
