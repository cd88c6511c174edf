//! `run` as child processes of this binary: one whole run, or the N shards of a run
//! (`run --shard K/N`) started together and waited for. What `certify --shards` and
//! `bench matrix` share: on one machine as on N Prow jobs, a shard is a process with its
//! own artifacts directory, and `merge` joins them afterwards.
//!
//! Each child's stdout and stderr go to `<dir>.output.txt` beside its artifacts directory
//! (the directory itself holds only the run's files, as `merge` expects), and to the
//! terminal with a `[K/N]` prefix when asked.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// One finished child `run`.
#[derive(Debug, Clone)]
pub struct Finished {
    /// `Some(k)`: shard k of the run; `None`: the whole run.
    pub shard: Option<usize>,
    /// Its `--artifacts` directory.
    pub dir: PathBuf,
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// From spawn to exit.
    pub elapsed: Duration,
}

impl Finished {
    /// 0 (every case passed) or 101 (a case failed: libtest's code, which `run` keeps):
    /// the run completed and wrote its JUnit. 1 is an error before or around the cases,
    /// 2 bad input, 130 an interrupt.
    pub fn completed(&self) -> bool {
        matches!(self.code, Some(0 | 101))
    }

    /// Where its output went.
    pub fn output(&self) -> PathBuf {
        output_path(&self.dir)
    }
}

fn output_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".output.txt");
    dir.with_file_name(name)
}

/// Runs `ccm-conformance run ARGS --artifacts DIR` once per entry of `shards` (`None`: the
/// whole run; `Some((k, n))`: `--shard k/n`), all at once, and waits for every one. `echo`
/// prints each child's lines on the terminal, prefixed with its shard.
pub fn run_all(
    args: &[OsString],
    runs: Vec<(Option<(usize, usize)>, PathBuf)>,
    echo: bool,
) -> Result<Vec<Finished>> {
    let exe = std::env::current_exe().context("locating ccm-conformance")?;
    let handles: Vec<_> = runs
        .into_iter()
        .map(|(shard, dir)| {
            let mut cmd = Command::new(&exe);
            cmd.arg("run").args(args).arg("--artifacts").arg(&dir);
            // A child is a run of its own, not the Prow job this process may be: it
            // writes its own started.json and finished.json, which `merge` reads.
            cmd.env_remove("PROW_JOB_ID");
            if let Some((k, n)) = shard {
                cmd.arg("--shard").arg(format!("{k}/{n}"));
            }
            let prefix = shard
                .map(|(k, n)| format!("[{k}/{n}] "))
                .unwrap_or_default();
            let echo = echo.then_some(prefix);
            std::thread::spawn(move || run_one(cmd, shard.map(|s| s.0), dir, echo))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a child run's thread panicked"))
        .collect()
}

fn run_one(
    mut cmd: Command,
    shard: Option<usize>,
    dir: PathBuf,
    echo: Option<String>,
) -> Result<Finished> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let output = output_path(&dir);
    let file =
        std::fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
    let file = Arc::new(Mutex::new(file));
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a child `ccm-conformance run`")?;
    let pumps: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| {
        let (file, echo) = (file.clone(), echo.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = writeln!(file.lock().unwrap_or_else(|p| p.into_inner()), "{line}");
                if let Some(prefix) = &echo {
                    println!("{prefix}{line}");
                }
            }
        })
    })
    .collect();
    let status = child.wait().context("waiting for a child run")?;
    let elapsed = started.elapsed();
    for pump in pumps {
        let _ = pump.join();
    }
    Ok(Finished {
        shard,
        dir,
        code: status.code(),
        elapsed,
    })
}
