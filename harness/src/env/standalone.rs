//! A cluster that is no case's: what `ccm-conformance cluster` serves until it is told to
//! stop. Built from the same parts as a case's [`Environment`](super::Environment) — the
//! API server of [`ClusterApi`] (embedded or real), a mock cloud, simulated kubelets, a
//! CCM started by [`start_standalone_ccm`] with the command line every CCM of the harness
//! gets — so that `cluster` has no second way of starting any of them.

use std::path::{Path, PathBuf};

use mock_kubelet::{KubeletConfig, SimKubelet};
use serde_json::{Value, json};

use super::ccm_processes::start_standalone_ccm;
use super::cluster_api::{ClusterApi, ServeOptions};
use super::{KUBELET_USER_AGENT, client_for};
use crate::ccm::CcmProcess;
use crate::cloud::{CloudControl, InstanceSpec};
use crate::error::CaseError;
use crate::provider::Provider;
use crate::settings::Settings;

/// What to start beside the API server.
#[derive(Debug, Clone)]
pub struct StandaloneOptions {
    /// The mock cloud, if any.
    pub cloud: Option<Provider>,
    /// Simulated kubelets `node-0`, `node-1`...; with a cloud, each on an instance of the
    /// same name.
    pub nodes: usize,
    /// Start the settings' CCM against the cluster (needs `cloud`).
    pub start_ccm: bool,
    /// How the embedded API server serves.
    pub serve: ServeOptions,
    /// Where to write the admin kubeconfig.
    pub kubeconfig: PathBuf,
}

/// A running standalone cluster; [`Self::shutdown`] stops everything.
pub struct Standalone {
    api: ClusterApi,
    cloud: Option<CloudControl>,
    kubelets: Vec<SimKubelet>,
    ccm: Option<CcmProcess>,
    kubeconfig: PathBuf,
    ccm_log: Option<PathBuf>,
}

impl Standalone {
    /// Starts the API server `settings` asks for (a real one needs its binaries resolved:
    /// [`Settings::resolve_control_plane`]), then the cloud, the kubelets and the CCM
    /// (`settings.for_provider(cloud).ccm`); files (a real server's data and logs, the
    /// cloud config, the CCM's log) go under `dir`.
    pub async fn start(
        settings: &Settings,
        options: &StandaloneOptions,
        dir: &Path,
    ) -> Result<Self, CaseError> {
        if options.start_ccm && options.cloud.is_none() {
            return Err(CaseError::failed("a CCM needs a cloud"));
        }
        let api =
            ClusterApi::start_with(settings, &options.serve, &dir.join("control-plane")).await?;
        let kubeconfig = options.kubeconfig.clone();
        api.write_kubeconfig(&kubeconfig)?;
        let kubelet_client = client_for(&kubeconfig, KUBELET_USER_AGENT).await?;
        let cloud = match options.cloud {
            Some(p) => Some(CloudControl::start(p, 0).await?),
            None => None,
        };
        let mut kubelets = Vec::new();
        for i in 0..options.nodes {
            let name = format!("node-{i}");
            let mut config = KubeletConfig::new(&name);
            if let Some(cloud) = &cloud {
                let instance = cloud.create_instance(InstanceSpec::named(&name))?;
                config.node_ip = instance.internal_ips.first().cloned();
                config.system_uuid = instance.system_uuid.clone();
            } else {
                config.external_cloud_provider = false;
            }
            let kubelet = SimKubelet::start(kubelet_client.clone(), config)
                .await
                .map_err(|e| CaseError::infra(&format!("starting the kubelet of {name}"), e))?;
            kubelets.push(kubelet);
        }
        let (mut ccm, mut ccm_log) = (None, None);
        if let (true, Some(cloud)) = (options.start_ccm, &cloud) {
            let binary = settings.for_provider(cloud.provider()).ccm;
            ccm = Some(start_standalone_ccm(&binary, cloud, &kubeconfig, dir).await?);
            ccm_log = Some(dir.join("ccm.log"));
        }
        Ok(Self {
            api,
            cloud,
            kubelets,
            ccm,
            kubeconfig,
            ccm_log,
        })
    }

    /// The ready object of DESIGN.md: `{"kubeconfig", "server", "token",
    /// "readonly_token"}`, plus `"cloud"` (the mock's own ready object) with a cloud.
    pub fn ready(&self) -> Value {
        let mut ready = self.api.ready();
        ready["kubeconfig"] = json!(
            self.kubeconfig
                .canonicalize()
                .unwrap_or_else(|_| self.kubeconfig.clone())
        );
        if let Some(cloud) = &self.cloud {
            ready["cloud"] = cloud.ready_info();
        }
        ready
    }

    /// The CCM's log, when one runs.
    pub fn ccm_log(&self) -> Option<&Path> {
        self.ccm_log.as_deref()
    }

    /// Stops the CCM, the kubelets, the cloud and the API server, in that order.
    pub async fn shutdown(mut self) {
        if let Some(mut ccm) = self.ccm.take() {
            ccm.stop().await;
        }
        self.kubelets.clear();
        if let Some(cloud) = self.cloud.take() {
            cloud.shutdown().await;
        }
        self.api.shutdown().await;
    }
}
