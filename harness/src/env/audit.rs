//! The API server's side of a case: what it recorded (the audit log, so cases can tell
//! the CCM's writes from everyone else's), what it allows (RBAC denials, per-user
//! kubeconfigs) and its restart.

use std::path::PathBuf;
use std::time::Duration;

use mock_kube_apiserver::AuditEntry;

use super::cluster_api::ClusterApi;
use super::{Environment, HARNESS_USER_AGENT, KUBELET_USER_AGENT, client_for};
use crate::error::CaseError;

impl Environment {
    /// Takes one verb on one resource away from the user `user` on the API server (a
    /// ClusterRole missing that rule): its requests get the 403 a real RBAC denial
    /// gives. Pair with [`Self::kubeconfig_for_user`] to run a CCM as `user`.
    pub async fn deny(&self, user: &str, verb: &str, resource: &str) -> Result<(), CaseError> {
        self.api()?.deny(&self.client, user, verb, resource).await
    }

    /// Lifts every [`Self::deny`].
    pub async fn clear_denials(&self) -> Result<(), CaseError> {
        self.api()?.clear_denials(&self.client).await
    }

    /// Writes a kubeconfig (in the case dir) that authenticates as `user` with a client
    /// certificate signed by the API server's CA (group `system:serviceaccounts`, not
    /// `system:masters`, so denials apply as RBAC would), and returns its path: for
    /// `--kubeconfig=<path>` after the other CCM flags.
    pub async fn kubeconfig_for_user(&self, user: &str) -> Result<PathBuf, CaseError> {
        let yaml = self.api()?.kubeconfig_for_user(&self.client, user).await?;
        let safe: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = self.dir.join(format!("kubeconfig-{safe}"));
        std::fs::write(&path, yaml).map_err(|e| CaseError::infra("writing kubeconfig", e))?;
        Ok(path)
    }

    fn api(&self) -> Result<&ClusterApi, CaseError> {
        self.apiserver
            .as_ref()
            .ok_or_else(|| CaseError::failed("the API server is not running"))
    }

    /// Every write (create, update, patch, delete) the CCM made, i.e. not from the harness or
    /// the kubelets, in order.
    pub fn ccm_writes(&self) -> Vec<AuditEntry> {
        self.ccm_writes_since(0)
    }

    /// [`Self::ccm_writes`] after audit entry `mark`, copying only what is newer: for a
    /// caller that polls through a long run (the soak), as the log keeps only its newest
    /// entries.
    pub fn ccm_writes_since(&self, mark: u64) -> Vec<AuditEntry> {
        self.apiserver
            .as_ref()
            .map(|api| api.audit_since(mark))
            .unwrap_or_default()
            .into_iter()
            .filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete"))
            .filter(|e| {
                !e.user_agent.starts_with(HARNESS_USER_AGENT)
                    && !e.user_agent.starts_with(KUBELET_USER_AGENT)
            })
            .collect()
    }

    /// The sequence number of the API server's last audit entry: writes after it are
    /// [`Self::foreign_writes_since`] this mark.
    pub fn audit_mark(&self) -> u64 {
        self.apiserver
            .as_ref()
            .map(ClusterApi::audit_last_seq)
            .unwrap_or(0)
    }

    /// The API server's audit log across restarts, in order, `seq` increasing throughout.
    pub fn api_audit(&self) -> Vec<AuditEntry> {
        self.apiserver
            .as_ref()
            .map(ClusterApi::audit)
            .unwrap_or_default()
    }

    /// Restarts the API server on the same address with the same credentials and objects:
    /// every connection and watch of the CCM and the kubelets breaks and must be
    /// re-established. Returns how long the API was down.
    pub async fn restart_apiserver(&mut self) -> Result<Duration, CaseError> {
        let api = self
            .apiserver
            .take()
            .ok_or_else(|| CaseError::failed("the API server is not running"))?;
        let started = std::time::Instant::now();
        self.apiserver = Some(api.restart().await?);
        let down = started.elapsed();
        // Fresh clients: pooled connections to the old server are dead.
        self.client = client_for(&self.kubeconfig, HARNESS_USER_AGENT).await?;
        self.kubelet_client = client_for(&self.kubeconfig, KUBELET_USER_AGENT).await?;
        Ok(down)
    }

    /// Writes after `mark` by anyone but the harness and the kubelets (the CCM under test,
    /// its replicas, a simulated kube-controller-manager), in order.
    pub fn foreign_writes_since(&self, mark: u64) -> Vec<AuditEntry> {
        self.ccm_writes()
            .into_iter()
            .filter(|e| e.seq > mark)
            .collect()
    }
}
