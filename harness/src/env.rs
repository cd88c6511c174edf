//! The environment one case runs in: a fresh API server (the embedded one, or a real
//! etcd + kube-apiserver with `--apiserver real`: [`cluster_api`]), one mock cloud and
//! simulated kubelets, all on 127.0.0.1 with ephemeral ports, plus the CCM under test as a
//! child process. Everything a case leaves behind (kubeconfig,
//! cloud config, CCM log) stays in the case's artifacts folder. `ccm-conformance cluster`
//! builds its long-lived cluster from the same parts ([`standalone`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mock_kubelet::{ServiceFeed, SimKubelet};

mod audit;
mod ccm_processes;
mod cluster_api;
mod nodes;
mod other_cluster;
pub mod standalone;
pub use ccm_processes::{LEADER_FLAGS, ccm_command_line, start_standalone_ccm};
pub use cluster_api::{ClusterApi, ServeOptions};
pub use other_cluster::OtherCluster;

use crate::ccm::CcmProcess;
use crate::cloud::{CloudControl, InstanceSpec};
use crate::error::CaseError;
use crate::provider::Provider;
use crate::settings::Settings;

/// The `--cluster-name` every CCM the harness starts gets (cases may override it).
pub use crate::cloud::types::CLUSTER_NAME;

/// User-Agent of the harness's own API calls.
pub const HARNESS_USER_AGENT: &str = "ccm-conformance-harness";
/// User-Agent of the simulated kubelets.
pub const KUBELET_USER_AGENT: &str = "kubelet/v1.34.0 (ccm-conformance simulated)";

/// How a node's kubelet is set up and whether its instance exists in the cloud.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The cloud instance to create first; `None` = the node has no instance.
    pub instance: Option<InstanceSpec>,
    /// `--node-ip`: `Some(NodeIp::FirstInternal)` uses the instance's first internal IP.
    pub node_ip: Option<NodeIp>,
    /// `--provider-id` set by the kubelet itself.
    pub kubelet_provider_id: Option<String>,
    /// Raw annotations (to present values a real kubelet would refuse).
    pub annotations: BTreeMap<String, String>,
    /// The kubelet's status heartbeat period (default: upstream's 5 minutes).
    pub status_report_interval: Option<Duration>,
}

#[derive(Debug, Clone)]
pub enum NodeIp {
    FirstInternal,
    Literal(String),
    /// An address the cloud knows for no instance, in this cloud's own address block
    /// (`127.99.<block>.1`), so cases running at once never bind the same one.
    UnknownToCloud,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            instance: Some(InstanceSpec::default()),
            node_ip: None,
            kubelet_provider_id: None,
            annotations: BTreeMap::new(),
            status_report_interval: None,
        }
    }
}

impl NodeOptions {
    pub fn without_instance() -> Self {
        Self {
            instance: None,
            ..Self::default()
        }
    }
}

pub struct Environment {
    pub provider: Provider,
    settings: Arc<Settings>,
    dir: PathBuf,
    apiserver: Option<ClusterApi>,
    client: kube::Client,
    kubelet_client: kube::Client,
    cloud: Option<CloudControl>,
    kubelets: BTreeMap<String, SimKubelet>,
    ccm: Option<CcmProcess>,
    /// Extra CCM processes beside the primary one (leader election, rolling upgrades),
    /// by the name the case gave them.
    replicas: BTreeMap<String, CcmProcess>,
    /// CCM environment a case's deployment adds to the cloud's ([`Self::deploy_dual_stack`]).
    deployment_env: Vec<(String, String)>,
    ccm_args: Vec<String>,
    kubeconfig: PathBuf,
    cloud_config: PathBuf,
    /// The CCM's per-node agents, by node ([`crate::Settings::node_manager`]).
    node_managers: BTreeMap<String, CcmProcess>,
    /// When each exited agent was first seen gone, and how many times each was restarted
    /// ([`Self::restart_exited_node_managers`]).
    node_manager_exits: BTreeMap<String, std::time::Instant>,
    node_manager_restarts: BTreeMap<String, u32>,
    /// API servers of other clusters ([`Self::other_cluster`]).
    other_apiservers: Vec<ClusterApi>,
    /// The one Service watch every simulated kube-proxy of this cluster reads, started
    /// with the first node ([`Self::kube_proxy_services`]).
    service_feed: Option<ServiceFeed>,
}

impl Environment {
    /// Starts the API server and the mock cloud; the CCM is started by [`Self::start_ccm`].
    pub async fn embedded(
        provider: Provider,
        settings: Arc<Settings>,
        dir: &Path,
        case_ccm_args: &[&str],
    ) -> Result<Self, CaseError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| CaseError::infra("creating case artifacts dir", e))?;
        let apiserver = ClusterApi::start(&settings, &dir.join("control-plane")).await?;
        let kubeconfig = dir.join("kubeconfig");
        apiserver.write_kubeconfig(&kubeconfig)?;
        let client = client_for(&kubeconfig, HARNESS_USER_AGENT).await?;
        let kubelet_client = client_for(&kubeconfig, KUBELET_USER_AGENT).await?;
        let cloud = CloudControl::start(provider, 0).await?;
        let cloud_config = dir.join("cloud.conf");
        std::fs::write(&cloud_config, cloud.cloud_config())
            .map_err(|e| CaseError::infra("writing cloud config", e))?;
        let ccm_args = case_ccm_args.iter().map(|s| s.to_string()).collect();
        Ok(Self {
            provider,
            settings,
            dir: dir.to_path_buf(),
            apiserver: Some(apiserver),
            client,
            kubelet_client,
            cloud: Some(cloud),
            kubelets: BTreeMap::new(),
            ccm: None,
            replicas: BTreeMap::new(),
            deployment_env: Vec::new(),
            ccm_args,
            kubeconfig,
            cloud_config,
            node_managers: BTreeMap::new(),
            node_manager_exits: BTreeMap::new(),
            node_manager_restarts: BTreeMap::new(),
            other_apiservers: Vec::new(),
            service_feed: None,
        })
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The client the simulated kubelets use (their own User-Agent).
    pub fn kubelet_client(&self) -> kube::Client {
        self.kubelet_client.clone()
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub fn cloud(&self) -> &CloudControl {
        self.cloud
            .as_ref()
            .expect("cloud is present until teardown")
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How long "stays true" checks watch.
    pub fn hold(&self) -> Duration {
        self.settings.hold
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes the cloud's load balancers slow: each change stays pending for `reads` status
    /// reads (Octavia's PENDING_* states), so a case can act while the CCM is mid-ensure.
    pub fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.cloud().slow_load_balancers(reads)
    }

    /// Services in the `default` namespace, where the cases create theirs.
    pub fn services(&self) -> Api<k8s_openapi::api::core::v1::Service> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Core/v1 events about a Service in `default`, oldest first.
    pub async fn service_events(&self, name: &str) -> Result<Vec<Event>, CaseError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Service,involvedObject.name={name}"
        ));
        let mut items = events
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|e| CaseError::infra("listing events", e))?;
        items.sort_by_key(|e| {
            e.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        });
        Ok(items)
    }

    /// Stops every process and server the environment started.
    pub async fn teardown(&mut self) {
        self.stop_ccm().await;
        for name in self.replica_names() {
            self.stop_replica(&name).await;
        }
        for name in self.node_managers.keys().cloned().collect::<Vec<_>>() {
            self.stop_node_manager(&name).await;
        }
        self.kubelets.clear();
        if let Some(cloud) = self.cloud.take() {
            // The mock cloud's request journal beside the CCM's log: what the CCM asked
            // and what it was answered, for whoever reads a failure.
            let _ = std::fs::write(self.dir.join("cloud-journal.txt"), cloud.journal_dump());
            cloud.shutdown().await;
        }
        if let Some(api) = self.apiserver.take() {
            api.shutdown().await;
        }
        for api in std::mem::take(&mut self.other_apiservers) {
            api.shutdown().await;
        }
    }
}

/// Prefixes a failure's message with `context` (skips pass through).
fn prefix_failure(context: &str, err: CaseError) -> CaseError {
    err.map_message(|message| format!("{context}: {message}"))
}

/// A kube client for the kubeconfig, identifying itself with `user_agent`.
pub async fn client_for(kubeconfig: &Path, user_agent: &str) -> Result<kube::Client, CaseError> {
    let kc =
        Kubeconfig::read_from(kubeconfig).map_err(|e| CaseError::infra("reading kubeconfig", e))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| CaseError::infra("loading kubeconfig", e))?;
    let ua =
        http::HeaderValue::from_str(user_agent).map_err(|e| CaseError::infra("user agent", e))?;
    config.headers.push((http::header::USER_AGENT, ua));
    kube::Client::try_from(config).map_err(|e| CaseError::infra("building kube client", e))
}
