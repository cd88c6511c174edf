//! The CCM under test, always a separate OS process (ours or the user's binary, same path):
//! started with a kubeconfig and the provider's cloud config, its output kept in a log file
//! beside the case, judged healthy by its HTTPS `/healthz` on `--secure-port`, stopped with
//! SIGTERM and then SIGKILL.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::error::CaseError;

pub struct CcmProcess {
    child: Child,
    log: PathBuf,
    port: u16,
}

/// A free TCP port on 127.0.0.1 (bound then released; the CCM binds it right after),
/// never one this process handed out before. The kernel may give a port just released to
/// the next `bind(0)`, so two cases starting CCMs at once could otherwise get the same
/// one: the second CCM fails to bind while the first answers its `/healthz`, and the
/// harness takes the wrong process for healthy (seen in CI: upstream OpenStack LB-08).
pub fn free_port() -> std::io::Result<u16> {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        "no port that was not handed out before after 64 tries",
    ))
}

impl CcmProcess {
    /// Spawns `binary args...`, appending stdout and stderr to `log`.
    pub fn spawn(binary: &Path, args: &[String], log: &Path, port: u16) -> Result<Self, CaseError> {
        Self::spawn_with_env(binary, args, &[], log, port)
    }

    /// [`Self::spawn`] with extra environment variables (e.g. a cloud's credentials).
    pub fn spawn_with_env(
        binary: &Path,
        args: &[String],
        env: &[(String, String)],
        log: &Path,
        port: u16,
    ) -> Result<Self, CaseError> {
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| CaseError::infra(&format!("opening CCM log {}", log.display()), e))
        };
        let (out, err) = (open()?, open()?);
        use std::io::Write;
        let _ = writeln!(&out, "==> {} {}", binary.display(), args.join(" "));
        let child = Command::new(binary)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                CaseError::failed(format!("cannot start CCM {}: {e}", binary.display()))
            })?;
        Ok(Self {
            child,
            log: log.to_path_buf(),
            port,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits until `https://127.0.0.1:PORT/healthz` answers 200, failing early (with the
    /// log's tail) if the process exits.
    pub async fn wait_healthy(&mut self, timeout: Duration) -> Result<(), CaseError> {
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| CaseError::infra("building HTTPS client", e))?;
        let url = format!("https://127.0.0.1:{}/healthz", self.port);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(CaseError::with_detail(
                    format!(
                        "CCM exited during startup ({status}): {}",
                        exit_reason(&std::fs::read_to_string(&self.log).unwrap_or_default())
                    ),
                    self.log_tail(40),
                ));
            }
            let last = match client.get(&url).send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => format!("/healthz answered {}", r.status()),
                Err(e) => format!("/healthz: {e}"),
            };
            if Instant::now() >= deadline {
                return Err(CaseError::with_detail(
                    format!("CCM not healthy after {timeout:?}: {last}"),
                    self.log_tail(40),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, up to 5 s to exit, then SIGKILL.
    pub async fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }

    /// SIGKILL and reap: the process gets no chance to release its lease or clean up.
    pub async fn kill(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let _ = self.child.kill().await;
    }

    /// The last `lines` lines of the CCM's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_of(&self.log, lines)
    }
}

/// The last `lines` lines of a text file (empty when it cannot be read).
pub fn tail_of(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Why a process that exited at startup stopped, from its log: the last `Error: ` line
/// of its own run (cobra's, which the `k8s.io/cloud-provider` command prints before the
/// usage text; before v1.29 the usage followed every error), else its last line. The log
/// holds every run of the CCM in the case, each after a `==> ` command line.
fn exit_reason(log: &str) -> &str {
    let run = log.rsplit_once("\n==> ").map_or(log, |(_, run)| run);
    let mut lines = run.lines().map(str::trim_end);
    lines
        .clone()
        .rev()
        .find_map(|l| l.strip_prefix("Error: ").map(|_| l))
        .or_else(|| lines.rfind(|l| !l.trim().is_empty()))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_reason_is_the_error_line_of_the_last_run() {
        let log = "==> ccm --a\nError: old run\n==> ccm --controllers=x\nI1127 starting\n\
                   \"x\" is not in the list of known controllers\n\
                   Error: \"x\" is not in the list of known controllers\nUsage:\n  ccm [flags]\n\
                   \n      --vmodule pattern=N\n";
        assert_eq!(
            exit_reason(log),
            "Error: \"x\" is not in the list of known controllers"
        );
        // Without cobra's line: the last line of the last run.
        let log = "==> ccm\nError: old\n==> ccm\nF1127 bad cloud config\n\n";
        assert_eq!(exit_reason(log), "F1127 bad cloud config");
        assert_eq!(exit_reason(""), "");
    }

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().expect("port")).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }
}
