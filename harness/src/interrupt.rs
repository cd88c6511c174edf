//! SIGINT/SIGTERM during a run: stop waiting for the cases, leave valid result files, kill
//! the CCM processes, exit.
//!
//! Why: Prow's entrypoint SIGINTs the test process at the job timeout and SIGKILLs it after
//! the grace period (reference `testgrid-prow.md` §0 rule 9); sonobuoy users lose all
//! results on a timeout (§7). The cases run on libtest-mimic's threads, which cannot be
//! cancelled, so the abort path runs on its own thread, writes the files from what
//! [`crate::progress::Progress`] knows and ends the process. The CCMs are separate OS
//! processes that would outlive us (their `kill_on_drop` never runs on `exit`), so every
//! direct child process is killed by PID, found through `/proc` (Linux).
//!
//! The long-running servers (`cluster`, `mock`) only wait for the signal
//! ([`until_signal`]) and then stop what they started.

use std::time::{Duration, Instant};

/// Exit code of an interrupted run: 128 + SIGINT, the code Prow maps to ABORTED (prow
/// `pkg/entrypoint/run.go`; reference §4), used for SIGTERM too.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Which signal ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// Errors setting up the signal watcher.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("installing the {signal} handler: {source}")]
    Install {
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Calls `handler` on a thread of its own at the first SIGINT or SIGTERM. The handlers are
/// installed before this returns, so a signal that arrives afterwards is never lost to the
/// default action.
pub fn on_signal(handler: impl FnOnce(Signal) + Send + 'static) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|source| Error::Install {
            signal: "signal",
            source,
        })?;
    let (mut int, mut term) = rt.block_on(async {
        let int = signal(SignalKind::interrupt()).map_err(|source| Error::Install {
            signal: "SIGINT",
            source,
        })?;
        let term = signal(SignalKind::terminate()).map_err(|source| Error::Install {
            signal: "SIGTERM",
            source,
        })?;
        Ok::<_, Error>((int, term))
    })?;
    std::thread::Builder::new()
        .name("signal-watcher".into())
        .spawn(move || {
            let which = rt.block_on(async {
                tokio::select! {
                    _ = int.recv() => Signal::Interrupt,
                    _ = term.recv() => Signal::Terminate,
                }
            });
            handler(which);
        })
        .map_err(|source| Error::Install {
            signal: "signal",
            source,
        })?;
    Ok(())
}

/// Waits for SIGINT or SIGTERM: how the servers of `ccm-conformance cluster` and `mock`
/// know to stop (they clean up themselves; no abort path).
pub async fn until_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

/// PIDs of the live direct children of this process, from `/proc/*/stat` (field 4 is the
/// parent PID; `comm` in parentheses may itself hold spaces or parentheses).
pub fn child_pids() -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_of(pid).is_some_and(|(state, ppid)| ppid == me && state != 'Z'))
        .collect()
}

/// (state, parent PID) of `pid`.
fn stat_of(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

fn alive(pid: u32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| state != 'Z')
}

fn send(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .args(pids.iter().map(u32::to_string))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// SIGTERM to every direct child, up to `grace` for them to exit, then SIGKILL to the rest.
/// Returns the PIDs that were signalled.
pub fn kill_children(grace: Duration) -> Vec<u32> {
    let pids = child_pids();
    kill(&pids, grace);
    pids
}

/// SIGTERM to `pids`, up to `grace` for them to exit, then SIGKILL to the rest.
pub fn kill(pids: &[u32], grace: Duration) {
    send("TERM", pids);
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    send("KILL", &left);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        assert_eq!(
            parse_stat("123 (reference-ccm) S 77 123 77 0 -1"),
            Some(('S', 77))
        );
        assert_eq!(parse_stat("5 (a) b) (c) Z 9 1"), Some(('Z', 9)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S notanumber"), None);
    }

    #[test]
    // Only the child spawned here is killed: other tests of this binary run in parallel.
    fn children_are_found_and_killed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(child_pids().contains(&pid));
        kill(&[pid], Duration::from_secs(2));
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(!child_pids().contains(&pid));
    }
}
