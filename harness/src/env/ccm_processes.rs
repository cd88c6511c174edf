//! The CCM under test as OS processes: the primary one a case starts, and the replicas a
//! case adds for leader election and rolling upgrades; their command lines (the provider's
//! cloud config, the harness's kubeconfig, the case's flags), health checks and log tails.
//! `ccm-conformance cluster --ccm` starts its CCM here too ([`start_standalone_ccm`]), so
//! that every CCM the harness starts gets one command line.

use std::path::Path;
use std::time::Duration;

use super::{CLUSTER_NAME, Environment, prefix_failure};
use crate::ccm::{CcmProcess, free_port};
use crate::cloud::CloudControl;
use crate::error::CaseError;
use crate::provider::Provider;

/// Leader-election flags for replicas, shortened from upstream's 15 s / 10 s / 2 s so a
/// hand-over (the reference CCM does not release its Lease on exit; a killed CCM cannot)
/// takes seconds, not a quarter minute.
pub const LEADER_FLAGS: &[&str] = &[
    "--leader-elect=true",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=500ms",
];

/// The flags every CCM the harness starts gets first: the provider's name and cloud config,
/// the cluster's kubeconfig, `127.0.0.1:port` for its `/healthz`, no cloud routes, and the
/// cluster's name ([`CLUSTER_NAME`]). `leader_elect`: `None` leaves it to the CCM's default.
pub fn ccm_command_line(
    provider: Provider,
    cloud_config: &Path,
    kubeconfig: &Path,
    leader_elect: Option<bool>,
    port: u16,
) -> Vec<String> {
    let mut args = vec![
        format!("--cloud-provider={}", provider.cloud_provider()),
        format!("--cloud-config={}", cloud_config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];
    args.extend(leader_elect.map(|on| format!("--leader-elect={on}")));
    args.extend([
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--configure-cloud-routes=false".into(),
        format!("--cluster-name={CLUSTER_NAME}"),
    ]);
    args
}

/// Spawns `binary` with `command_line(port)` on a free port and waits for its `/healthz`.
/// The port is free when chosen but another process of the run may bind it before the CCM
/// does: then (and only then) it tries again on another port.
async fn spawn_healthy(
    binary: &Path,
    command_line: impl Fn(u16) -> Vec<String>,
    env: &[(String, String)],
    log: &Path,
) -> Result<CcmProcess, CaseError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = free_port().map_err(|e| CaseError::infra("finding a free port", e))?;
        let args = command_line(port);
        let mut ccm = CcmProcess::spawn_with_env(binary, &args, env, log, port)?;
        match ccm.wait_healthy(Duration::from_secs(30)).await {
            Ok(()) => return Ok(ccm),
            Err(e) => {
                // Go: "listen tcp 127.0.0.1:N: bind: address already in use";
                // Rust: "Address already in use (os error 98)".
                let lost_port = ccm.exited().is_some()
                    && ccm
                        .log_tail(5)
                        .to_ascii_lowercase()
                        .contains("address already in use");
                ccm.stop().await;
                if !(lost_port && attempt < 3) {
                    return Err(e);
                }
            }
        }
    }
}

/// The CCM of a cluster that is no case's (`ccm-conformance cluster --ccm`): `cloud`'s
/// config written to `dir/cloud.conf`, [`ccm_command_line`] with leader election left to
/// the CCM, the cloud's environment (AWS: the mock's static credentials), its log in
/// `dir/ccm.log`. Waits for its `/healthz`.
pub async fn start_standalone_ccm(
    binary: &Path,
    cloud: &CloudControl,
    kubeconfig: &Path,
    dir: &Path,
) -> Result<CcmProcess, CaseError> {
    let conf = dir.join("cloud.conf");
    std::fs::write(&conf, cloud.cloud_config())
        .map_err(|e| CaseError::infra("writing cloud config", e))?;
    let provider = cloud.provider();
    let command_line = |port| ccm_command_line(provider, &conf, kubeconfig, None, port);
    spawn_healthy(binary, command_line, &cloud.ccm_env(), &dir.join("ccm.log")).await
}

impl Environment {
    /// Environment the CCM (and its per-node agents) need for the cloud (AWS credentials;
    /// empty for OpenStack).
    pub(super) fn cloud_env(&self) -> Vec<(String, String)> {
        let mut env = self
            .cloud
            .as_ref()
            .map(CloudControl::ccm_env)
            .unwrap_or_default();
        env.extend(self.deployment_env.iter().cloned());
        env
    }

    /// Deploys the CCM as a dual-stack cluster would from its next start on: the cloud's
    /// [`CloudControl::dual_stack_deployment`] config and environment, where it has one.
    pub fn deploy_dual_stack(&mut self) -> Result<(), CaseError> {
        let Some((config, env)) = self.cloud().dual_stack_deployment() else {
            return Ok(());
        };
        std::fs::write(&self.cloud_config, config)
            .map_err(|e| CaseError::infra("writing the dual-stack cloud config", e))?;
        self.deployment_env = env;
        Ok(())
    }

    /// The CCM command line: the provider's upstream flags, then the case's, then the user's.
    /// A case's CCM runs alone (`--leader-elect=false`) unless the case starts replicas,
    /// whose [`LEADER_FLAGS`] come later and win.
    pub fn ccm_command_line(&self, port: u16) -> Vec<String> {
        let mut args = ccm_command_line(
            self.provider,
            &self.cloud_config,
            &self.kubeconfig,
            Some(false),
            port,
        );
        args.extend(self.ccm_args.iter().cloned());
        args.extend(self.settings.ccm_args.iter().cloned());
        args
    }

    /// Starts (or restarts) the CCM and waits for its `/healthz`.
    pub async fn start_ccm(&mut self) -> Result<(), CaseError> {
        self.start_ccm_with(&[]).await
    }

    /// Starts (or restarts) the CCM with `extra` flags after all the others (a later flag
    /// overrides an earlier one, as with Go's pflag) and waits for its `/healthz`; an `Err`
    /// when it exits or never becomes healthy.
    pub async fn start_ccm_with(&mut self, extra: &[&str]) -> Result<(), CaseError> {
        self.stop_ccm().await;
        let binary = self.settings.ccm.clone();
        let ccm = self
            .spawn_healthy(&binary, extra, &self.dir.join("ccm.log"))
            .await?;
        self.ccm = Some(ccm);
        Ok(())
    }

    /// Spawns `binary` with [`Self::ccm_command_line`] and `extra` on a free port and waits
    /// for its `/healthz`. The port is free when chosen but another process of the run may
    /// bind it before the CCM does: then (and only then) it tries again on another port.
    async fn spawn_healthy(
        &self,
        binary: &Path,
        extra: &[&str],
        log: &Path,
    ) -> Result<CcmProcess, CaseError> {
        let command_line = |port| {
            let mut args = self.ccm_command_line(port);
            args.extend(extra.iter().map(|s| s.to_string()));
            args
        };
        spawn_healthy(binary, command_line, &self.cloud_env(), log).await
    }

    /// Starts a named CCM replica beside the primary CCM: its own `--secure-port`, its own
    /// log `ccm-<name>.log` in the case dir, the same command line as
    /// [`Self::ccm_command_line`] followed by `extra` (so `--leader-elect=true` in `extra`
    /// overrides the default `false`). `binary: None` runs the settings' CCM. Waits for its
    /// `/healthz`; an `Err` (with the log's tail) when it cannot start, exits or never
    /// becomes healthy. A replica of the same name is stopped first.
    pub async fn start_replica(
        &mut self,
        name: &str,
        binary: Option<&Path>,
        extra: &[&str],
    ) -> Result<(), CaseError> {
        self.stop_replica(name).await;
        let binary = binary.unwrap_or(&self.settings.ccm).to_path_buf();
        let log = self.dir.join(format!("ccm-{name}.log"));
        let ccm = self
            .spawn_healthy(&binary, extra, &log)
            .await
            .map_err(|e| prefix_failure(&format!("replica {name}"), e))?;
        self.replicas.insert(name.to_string(), ccm);
        Ok(())
    }

    /// Stops a replica gracefully (SIGTERM, then waits for it to exit; SIGKILL after 5 s).
    /// Unknown names are ignored.
    pub async fn stop_replica(&mut self, name: &str) {
        if let Some(mut ccm) = self.replicas.remove(name) {
            ccm.stop().await;
        }
    }

    /// Kills a replica (SIGKILL): no lease release, no cleanup, as a crash or OOM kill.
    /// Unknown names are ignored.
    pub async fn kill_replica(&mut self, name: &str) {
        if let Some(mut ccm) = self.replicas.remove(name) {
            ccm.kill().await;
        }
    }

    /// Whether the replica exists and its process is still running.
    pub fn replica_alive(&mut self, name: &str) -> bool {
        self.replicas
            .get_mut(name)
            .is_some_and(|c| c.exited().is_none())
    }

    /// The last `lines` lines of a replica's log (empty for an unknown name; the log of a
    /// stopped replica is still in the case dir as `ccm-<name>.log`).
    pub fn replica_log_tail(&self, name: &str, lines: usize) -> String {
        match self.replicas.get(name) {
            Some(c) => c.log_tail(lines),
            None => crate::ccm::tail_of(&self.dir.join(format!("ccm-{name}.log")), lines),
        }
    }

    /// Names of the replicas started and not stopped, in order.
    pub fn replica_names(&self) -> Vec<String> {
        self.replicas.keys().cloned().collect()
    }

    /// Kills the CCM (SIGKILL): no lease release, no cleanup, as a crash or an OOM kill.
    pub async fn kill_ccm(&mut self) {
        if let Some(mut ccm) = self.ccm.take() {
            ccm.kill().await;
        }
    }

    pub async fn stop_ccm(&mut self) {
        if let Some(mut ccm) = self.ccm.take() {
            ccm.stop().await;
        }
    }

    /// Fails if the CCM process has died.
    pub fn ccm_alive(&mut self) -> Result<(), CaseError> {
        if let Some(ccm) = self.ccm.as_mut()
            && let Some(status) = ccm.exited()
        {
            return Err(CaseError::with_detail(
                format!("the CCM exited unexpectedly ({status})"),
                ccm.log_tail(40),
            ));
        }
        Ok(())
    }

    pub fn ccm_log_tail(&self, lines: usize) -> String {
        self.ccm
            .as_ref()
            .map(|c| c.log_tail(lines))
            .unwrap_or_default()
    }

    /// Appends the CCM log tail to a failure's detail.
    pub fn with_ccm_log(&self, err: CaseError) -> CaseError {
        err.and_detail(|detail| {
            format!(
                "{detail}\n--- CCM log (tail) ---\n{}\n--- cloud journal (tail) ---\n{}",
                self.ccm_log_tail(30),
                self.cloud().journal_text(20)
            )
        })
    }
}
