//! Where a run stands: which cases are planned, running and done, shown as
//! `[n/N] PASS name (1.2s)` lines and a summary table on a terminal, and kept in
//! `$ARTIFACTS/progress.json` after every case.
//!
//! Why: long conformance runs without progress were the most common complaint about
//! sonobuoy and hydrophone (reference `testgrid-prow.md` §7), and the abort path needs to
//! know which cases were running and which never started to write them into the JUnit file
//! (`<error>` and "not run: aborted").

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The verdict of a finished case, as shown on a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        }
    }
}

#[derive(Debug, Clone)]
enum State {
    Pending,
    Running(Instant),
    Done { verdict: Verdict, took: Duration },
}

#[derive(Debug, Clone)]
struct Entry {
    suite: String,
    state: State,
}

/// A case that was running, with how long it had run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningCase {
    pub suite: String,
    pub name: String,
    pub elapsed: Duration,
}

/// A planned case that never started.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCase {
    pub suite: String,
    pub name: String,
}

/// Shared by every trial thread of a run.
pub struct Progress {
    started: Instant,
    /// `[n/N]` lines on stdout (the CLI); the libtest target keeps libtest's own output.
    print: bool,
    file: Option<PathBuf>,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Insertion order = plan order.
    order: Vec<String>,
    cases: BTreeMap<String, Entry>,
    finished: usize,
}

/// `progress.json`: counts, then every case with its state.
#[derive(Serialize)]
struct ProgressFile<'a> {
    total: usize,
    finished: usize,
    passed: usize,
    failed: usize,
    skipped: usize,
    running: Vec<&'a str>,
    elapsed_seconds: f64,
    cases: Vec<CaseLine<'a>>,
}

#[derive(Serialize)]
struct CaseLine<'a> {
    suite: &'a str,
    name: &'a str,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

impl Progress {
    /// `planned` is (suite, full case name) in run order. `file` is `progress.json`.
    pub fn new(planned: Vec<(String, String)>, print: bool, file: Option<PathBuf>) -> Self {
        let mut order = Vec::with_capacity(planned.len());
        let mut cases = BTreeMap::new();
        for (suite, name) in planned {
            if cases
                .insert(
                    name.clone(),
                    Entry {
                        suite,
                        state: State::Pending,
                    },
                )
                .is_none()
            {
                order.push(name);
            }
        }
        Self {
            started: Instant::now(),
            print,
            file,
            inner: Mutex::new(Inner {
                order,
                cases,
                finished: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn total(&self) -> usize {
        self.lock().order.len()
    }

    /// Marks a case as running.
    pub fn start(&self, name: &str) {
        let mut inner = self.lock();
        if let Some(e) = inner.cases.get_mut(name) {
            e.state = State::Running(Instant::now());
        }
        self.write_file(&inner);
    }

    /// Marks a case as done, prints its line and rewrites `progress.json`. Returns the line.
    pub fn finish(&self, name: &str, verdict: Verdict, took: Duration, note: &str) -> String {
        let mut inner = self.lock();
        let first_time = inner
            .cases
            .get(name)
            .is_some_and(|e| !matches!(e.state, State::Done { .. }));
        if first_time {
            inner.finished += 1;
        }
        if let Some(e) = inner.cases.get_mut(name) {
            e.state = State::Done { verdict, took };
        }
        let mut line = format!(
            "[{}/{}] {} {name} ({:.1}s)",
            inner.finished,
            inner.order.len(),
            verdict.label(),
            took.as_secs_f64()
        );
        if !note.is_empty() {
            line.push_str(": ");
            line.push_str(note.lines().next().unwrap_or(""));
        }
        if self.print {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        self.write_file(&inner);
        line
    }

    /// The cases running now and the ones that never started (for an abort).
    pub fn unfinished(&self) -> (Vec<RunningCase>, Vec<PendingCase>) {
        let inner = self.lock();
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for name in &inner.order {
            let Some(e) = inner.cases.get(name) else {
                continue;
            };
            match e.state {
                State::Running(since) => running.push(RunningCase {
                    suite: e.suite.clone(),
                    name: name.clone(),
                    elapsed: since.elapsed(),
                }),
                State::Pending => pending.push(PendingCase {
                    suite: e.suite.clone(),
                    name: name.clone(),
                }),
                State::Done { .. } => {}
            }
        }
        (running, pending)
    }

    /// The end-of-run table: counts, then every failed case.
    pub fn summary(&self) -> String {
        let inner = self.lock();
        let mut counts: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
        let mut failed = Vec::new();
        for name in &inner.order {
            let Some(e) = inner.cases.get(name) else {
                continue;
            };
            if let State::Done { verdict, took } = e.state {
                let c = counts.entry(e.suite.as_str()).or_default();
                match verdict {
                    Verdict::Pass => c[0] += 1,
                    Verdict::Fail => {
                        c[1] += 1;
                        failed.push((name.as_str(), took));
                    }
                    Verdict::Skip => c[2] += 1,
                }
            }
        }
        let mut out = String::new();
        out.push_str(&format!(
            "\n{:<16} {:>6} {:>6} {:>6}\n",
            "suite", "pass", "fail", "skip"
        ));
        let mut total = [0usize; 3];
        for (suite, c) in &counts {
            out.push_str(&format!(
                "{suite:<16} {:>6} {:>6} {:>6}\n",
                c[0], c[1], c[2]
            ));
            for i in 0..3 {
                total[i] += c[i];
            }
        }
        out.push_str(&format!(
            "{:<16} {:>6} {:>6} {:>6}   {} of {} run in {:.1}s\n",
            "total",
            total[0],
            total[1],
            total[2],
            inner.finished,
            inner.order.len(),
            self.started.elapsed().as_secs_f64()
        ));
        if !failed.is_empty() {
            out.push_str("\nFailed:\n");
            for (name, took) in failed {
                out.push_str(&format!("  {name} ({:.1}s)\n", took.as_secs_f64()));
            }
        }
        out
    }

    fn write_file(&self, inner: &Inner) {
        let Some(path) = &self.file else { return };
        let mut file = ProgressFile {
            total: inner.order.len(),
            finished: inner.finished,
            passed: 0,
            failed: 0,
            skipped: 0,
            running: Vec::new(),
            elapsed_seconds: self.started.elapsed().as_secs_f64(),
            cases: Vec::new(),
        };
        for name in &inner.order {
            let Some(e) = inner.cases.get(name) else {
                continue;
            };
            let (state, seconds) = match &e.state {
                State::Pending => ("PENDING", None),
                State::Running(since) => {
                    file.running.push(name);
                    ("RUNNING", Some(since.elapsed().as_secs_f64()))
                }
                State::Done { verdict, took } => {
                    match verdict {
                        Verdict::Pass => file.passed += 1,
                        Verdict::Fail => file.failed += 1,
                        Verdict::Skip => file.skipped += 1,
                    }
                    (verdict.label(), Some(took.as_secs_f64()))
                }
            };
            file.cases.push(CaseLine {
                suite: &e.suite,
                name,
                state,
                seconds,
            });
        }
        if let Ok(bytes) = serde_json::to_vec_pretty(&file) {
            let _ = write_atomic(path, &bytes);
        }
    }
}

/// Temporary file + rename, so a reader never sees a half-written `progress.json`.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned() -> Vec<(String, String)> {
        ["a", "b", "c"]
            .iter()
            .map(|n| ("openstack".to_string(), n.to_string()))
            .collect()
    }

    #[test]
    fn lines_count_finished_cases_and_file_tracks_states() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("progress.json");
        let p = Progress::new(planned(), false, Some(file.clone()));
        p.start("b");
        let line = p.finish("b", Verdict::Pass, Duration::from_millis(1234), "");
        assert_eq!(line, "[1/3] PASS b (1.2s)");
        p.start("a");
        let line = p.finish("a", Verdict::Fail, Duration::from_secs(2), "boom\nmore");
        assert_eq!(line, "[2/3] FAIL a (2.0s): boom");
        p.start("c");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(v["total"], 3);
        assert_eq!(v["finished"], 2);
        assert_eq!(v["passed"], 1);
        assert_eq!(v["failed"], 1);
        assert_eq!(v["running"], serde_json::json!(["c"]));
        assert_eq!(v["cases"][0]["state"], "FAIL");
        let (running, pending) = p.unfinished();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].name, "c");
        assert!(pending.is_empty());
        let summary = p.summary();
        assert!(summary.contains("openstack"), "{summary}");
        assert!(summary.contains("Failed:\n  a (2.0s)"), "{summary}");
    }

    #[test]
    fn unfinished_lists_running_then_pending_in_plan_order() {
        let p = Progress::new(planned(), false, None);
        p.start("c");
        let (running, pending) = p.unfinished();
        assert_eq!(running[0].name, "c");
        let names: Vec<_> = pending.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(p.total(), 3);
    }
}
