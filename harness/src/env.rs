//! The environment one case runs in: a fresh API server (the embedded one, or a real
//! etcd + kube-apiserver with `--apiserver real`: [`cluster_api`]), one mock cloud and
//! simulated kubelets, all on 127.0.0.1 with ephemeral ports, plus the CCM under test as a
//! child process. Everything a case leaves behind (kubeconfig,
//! cloud config, CCM log) stays in the case's artifacts folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mock_kube_apiserver::AuditEntry;
use mock_kubelet::{KubeletConfig, ServiceFeed, SimKubelet, UNINITIALIZED_TAINT};

mod cluster_api;
mod other_cluster;
use cluster_api::ClusterApi;
pub use other_cluster::OtherCluster;

use crate::case::CaseError;
use crate::ccm::{CcmProcess, free_port};
use crate::cloud::{CloudControl, Instance, InstanceSpec, Provider};
use crate::settings::Settings;
use crate::wait::{Probe, eventually, holds_for};

/// The `--cluster-name` every CCM the harness starts gets (cases may override it).
pub const CLUSTER_NAME: &str = "ccm-conformance";

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

    /// Environment the CCM needs for the cloud (AWS credentials; empty for OpenStack).
    fn cloud_env(&self) -> Vec<(String, String)> {
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
    pub fn ccm_command_line(&self, port: u16) -> Vec<String> {
        let mut args = vec![
            format!("--cloud-provider={}", self.provider.name()),
            format!("--cloud-config={}", self.cloud_config.display()),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            "--configure-cloud-routes=false".into(),
            format!("--cluster-name={CLUSTER_NAME}"),
        ];
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
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port().map_err(|e| CaseError::infra("finding a free port", e))?;
            let mut args = self.ccm_command_line(port);
            args.extend(extra.iter().map(|s| s.to_string()));
            let mut ccm = CcmProcess::spawn_with_env(binary, &args, &self.cloud_env(), log, port)?;
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

    /// Assigns pod CIDRs to a node, as kube-controller-manager's node IPAM would.
    pub async fn set_pod_cidrs(&self, name: &str, cidrs: &[&str]) -> Result<(), CaseError> {
        let patch = serde_json::json!({"spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs}});
        self.nodes()
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map(drop)
            .map_err(|e| CaseError::infra(&format!("setting pod CIDRs of {name}"), e))
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

    /// Creates the node's cloud instance (unless `options.instance` is `None`), then
    /// registers the Node through a simulated kubelet.
    pub async fn add_node(
        &mut self,
        name: &str,
        options: NodeOptions,
    ) -> Result<Option<Instance>, CaseError> {
        let instance = match options.instance.clone() {
            Some(mut spec) => {
                spec.name = name.to_string();
                Some(self.cloud().create_instance(spec)?)
            }
            None => None,
        };
        self.start_kubelet_for(name, instance.as_ref(), options)
            .await?;
        Ok(instance)
    }

    /// Registers Node `name` through a new simulated kubelet running on `instance`, an
    /// instance that already exists (a replacement VM, NL-07); `options.instance` is
    /// ignored. A stopped kubelet of the same name is replaced.
    pub async fn add_node_on(
        &mut self,
        name: &str,
        instance: &Instance,
        options: NodeOptions,
    ) -> Result<(), CaseError> {
        self.start_kubelet_for(name, Some(instance), options).await
    }

    async fn start_kubelet_for(
        &mut self,
        name: &str,
        instance: Option<&Instance>,
        options: NodeOptions,
    ) -> Result<(), CaseError> {
        let mut config = KubeletConfig::new(name);
        config.node_ip = match (&options.node_ip, &instance) {
            (Some(NodeIp::Literal(ip)), _) => Some(ip.clone()),
            (Some(NodeIp::FirstInternal), Some(i)) => i.internal_ips.first().cloned(),
            _ => None,
        };
        config.provider_id = options.kubelet_provider_id;
        config.system_uuid = instance
            .as_ref()
            .map(|i| i.system_uuid.clone())
            .unwrap_or_default();
        config.annotations = options.annotations;
        if let Some(p) = options.status_report_interval {
            config.status_report_interval = p;
        }
        // Every node runs kube-proxy: load balancers reach it on nodeIP:nodePort.
        config.proxy = true;
        config.services = Some(self.kube_proxy_services());
        let kubelet = SimKubelet::start(self.kubelet_client.clone(), config)
            .await
            .map_err(|e| CaseError::infra("registering node", e))?;
        self.kubelets.insert(name.to_string(), kubelet);
        Ok(())
    }

    /// The Service watch the simulated kube-proxies share (one per cluster, like an
    /// informer cache shared within a process; see `mock_kubelet::kube_proxy`).
    fn kube_proxy_services(&mut self) -> ServiceFeed {
        self.service_feed
            .get_or_insert_with(|| ServiceFeed::start(self.kubelet_client.clone()))
            .clone()
    }

    /// Creates the node's instance and registers the Node the way a kubelet with an
    /// in-tree cloud provider (`--cloud-provider=<name>`, before the external migration) and
    /// `--node-ip` = the first internal IP left it: providerID, zone/region/instance-type
    /// labels (GA and beta, as kubelets set both), the cloud's addresses, no uninitialized
    /// taint (ccm-behaviour.md §3 A; kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go).
    pub async fn add_in_tree_node(
        &mut self,
        name: &str,
        mut spec: InstanceSpec,
    ) -> Result<Instance, CaseError> {
        spec.name = name.to_string();
        let instance = self.cloud().create_instance(spec)?;
        let mut config = KubeletConfig::new(name);
        config.external_cloud_provider = false;
        config.node_ip = instance.internal_ips.first().cloned();
        config.provider_id = Some(instance.provider_id.clone());
        config.system_uuid = instance.system_uuid.clone();
        config.cloud_addresses = instance.cloud_addresses();
        config.labels = in_tree_labels(&instance);
        config.proxy = true;
        config.services = Some(self.kube_proxy_services());
        let kubelet = SimKubelet::start(self.kubelet_client.clone(), config)
            .await
            .map_err(|e| CaseError::infra("registering in-tree node", e))?;
        self.kubelets.insert(name.to_string(), kubelet);
        Ok(instance)
    }

    /// Restarts a node's kubelet with `--cloud-provider=external` and the same `--node-ip`
    /// (the migration step): it re-registers, which never re-adds the taint.
    pub async fn switch_kubelet_to_external(&mut self, name: &str) -> Result<(), CaseError> {
        let client = self.kubelet_client.clone();
        let kubelet = self
            .kubelets
            .get_mut(name)
            .ok_or_else(|| CaseError::failed(format!("no kubelet for node {name}")))?;
        let mut config = kubelet.config().clone();
        config.external_cloud_provider = true;
        config.cloud_addresses.clear();
        kubelet
            .restart_with(client, config)
            .await
            .map_err(|e| CaseError::infra("restarting kubelet as external", e))
    }

    /// Restarts a node's kubelet (re-registration without re-tainting).
    pub async fn restart_kubelet(&mut self, name: &str) -> Result<(), CaseError> {
        let client = self.kubelet_client.clone();
        let kubelet = self
            .kubelets
            .get_mut(name)
            .ok_or_else(|| CaseError::failed(format!("no kubelet for node {name}")))?;
        kubelet
            .restart(client)
            .await
            .map_err(|e| CaseError::infra("restarting kubelet", e))
    }

    /// Stops a node's kubelet: no more heartbeats, conditions Unknown (what
    /// kube-controller-manager's node lifecycle would write after its grace period).
    pub async fn stop_kubelet(&mut self, name: &str) -> Result<(), CaseError> {
        let kubelet = self
            .kubelets
            .get_mut(name)
            .ok_or_else(|| CaseError::failed(format!("no kubelet for node {name}")))?;
        kubelet
            .stop()
            .await
            .map_err(|e| CaseError::infra("stopping kubelet", e))
    }

    /// Reboots node `name`'s instance and holds it mid-reboot until
    /// [`Self::finish_node_reboot`]: the cloud shows the reboot as its API would
    /// ([`CloudControl::begin_reboot`]) and the kubelet stops (the node goes NotReady, as
    /// kube-controller-manager marks it once the grace period passes), so the CCM's
    /// address sync and lifecycle checks run against a rebooting machine.
    pub async fn begin_node_reboot(&mut self, name: &str) -> Result<Instance, CaseError> {
        let instance = self
            .cloud()
            .instance_by_name(name)
            .ok_or_else(|| CaseError::failed(format!("no instance named {name}")))?;
        self.cloud().begin_reboot(&instance.id)?;
        self.stop_kubelet(name).await?;
        Ok(instance)
    }

    /// Ends the reboot [`Self::begin_node_reboot`] holds: the instance is up and the
    /// kubelet starts again, re-registering the existing Node (no uninitialized taint).
    pub async fn finish_node_reboot(&mut self, name: &str) -> Result<(), CaseError> {
        let instance = self
            .cloud()
            .instance_by_name(name)
            .ok_or_else(|| CaseError::failed(format!("no instance named {name}")))?;
        self.cloud().finish_reboot(&instance.id)?;
        self.restart_kubelet(name).await
    }

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

    /// Sets a running kubelet's Ready condition.
    pub async fn set_node_ready(&self, name: &str, ready: bool) -> Result<(), CaseError> {
        let kubelet = self
            .kubelets
            .get(name)
            .ok_or_else(|| CaseError::failed(format!("no kubelet for node {name}")))?;
        kubelet
            .set_ready(ready)
            .await
            .map_err(|e| CaseError::infra("setting node readiness", e))
    }

    pub async fn node(&self, name: &str) -> Result<Node, CaseError> {
        self.nodes()
            .get(name)
            .await
            .map_err(|e| CaseError::infra(&format!("getting node {name}"), e))
    }

    /// Waits until the node has no uninitialized taint and returns it.
    pub async fn wait_initialized(
        &mut self,
        name: &str,
        timeout: Duration,
    ) -> Result<Node, CaseError> {
        self.ccm_alive()?;
        let nodes = self.nodes();
        let result = eventually(
            &format!("node {name} to lose the uninitialized taint"),
            timeout,
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes
                        .get(name)
                        .await
                        .map_err(|e| CaseError::infra("getting node", e))?;
                    Ok(if has_uninitialized_taint(&node) {
                        Probe::Pending(format!("taints: {}", describe_taints(&node)))
                    } else {
                        Probe::Done(node)
                    })
                }
            },
        )
        .await;
        result.map_err(|e| self.with_ccm_log(e))
    }

    /// Polls node `name` until `check` accepts it (`Ok(value)`), or fails after `timeout`
    /// with the last thing `check` reported (`Err(observed)`).
    pub async fn node_eventually<T>(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Node) -> Result<T, String>,
    ) -> Result<T, CaseError> {
        let nodes = self.nodes();
        let check = &check;
        eventually(&format!("{what} on node {name}"), timeout, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes
                    .get(name)
                    .await
                    .map_err(|e| CaseError::infra(&format!("getting node {name}"), e))?;
                Ok(match check(&node) {
                    Ok(v) => Probe::Done(v),
                    Err(seen) => Probe::Pending(seen),
                })
            }
        })
        .await
    }

    /// Waits until node `name` is gone from the API (the lifecycle controller deleted it),
    /// failing after `timeout` with the providerID it still had.
    pub async fn wait_node_deleted(&self, name: &str, timeout: Duration) -> Result<(), CaseError> {
        let nodes = self.nodes();
        eventually(&format!("node {name} deleted"), timeout, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes
                    .get_opt(name)
                    .await
                    .map_err(|e| CaseError::infra(&format!("getting node {name}"), e))?;
                Ok(match node {
                    None => Probe::Done(()),
                    Some(n) => Probe::Pending(format!(
                        "{name} still exists with providerID {:?}",
                        provider_id(&n)
                    )),
                })
            }
        })
        .await
    }

    /// Checks that node `name` exists and satisfies `check` throughout `period`.
    pub async fn node_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&Node) -> Result<(), String>,
    ) -> Result<(), CaseError> {
        let nodes = self.nodes();
        let check = &check;
        holds_for(&format!("{what} on node {name}"), period, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes
                    .get_opt(name)
                    .await
                    .map_err(|e| CaseError::infra(&format!("getting node {name}"), e))?;
                Ok(match node.as_ref().map(check) {
                    None => Probe::Pending(format!("node {name} was deleted")),
                    Some(Ok(())) => Probe::Done(()),
                    Some(Err(seen)) => Probe::Pending(seen),
                })
            }
        })
        .await
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

    /// Every write (create, update, patch, delete) the CCM made, i.e. not from the harness or
    /// the kubelets, in order.
    pub fn ccm_writes(&self) -> Vec<AuditEntry> {
        self.api_audit()
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
        self.api_audit().last().map(|e| e.seq).unwrap_or(0)
    }

    /// The API server's audit log across restarts, in order, `seq` increasing throughout.
    pub fn api_audit(&self) -> Vec<AuditEntry> {
        self.apiserver
            .as_ref()
            .map(ClusterApi::audit)
            .unwrap_or_default()
    }

    /// Makes the cloud's load balancers slow: each change stays pending for `reads` status
    /// reads (Octavia's PENDING_* states), so a case can act while the CCM is mid-ensure.
    pub fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.cloud().slow_load_balancers(reads)
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

    /// Core/v1 events about the node.
    pub async fn node_events(&self, name: &str) -> Result<Vec<Event>, CaseError> {
        let events: Api<Event> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Node,involvedObject.name={name}"
        ));
        events
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|e| CaseError::infra("listing events", e))
    }

    /// Stops every process and server the environment started.
    pub async fn teardown(&mut self) {
        self.stop_ccm().await;
        for name in self.replica_names() {
            self.stop_replica(&name).await;
        }
        self.kubelets.clear();
        if let Some(cloud) = self.cloud.take() {
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

/// The cloud labels an in-tree kubelet put on its Node: GA and beta topology and
/// instance-type labels (kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go
/// `initialNode`); zone labels only when the instance has a zone.
pub fn in_tree_labels(instance: &Instance) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut put = |keys: [&str; 2], value: &str| {
        if !value.is_empty() {
            for k in keys {
                labels.insert(k.to_string(), value.to_string());
            }
        }
    };
    put(
        [
            "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/zone",
        ],
        &instance.zone,
    );
    put(
        [
            "topology.kubernetes.io/region",
            "failure-domain.beta.kubernetes.io/region",
        ],
        &instance.region,
    );
    put(
        [
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/instance-type",
        ],
        &instance.instance_type,
    );
    labels
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

pub fn has_uninitialized_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
}

pub fn describe_taints(node: &Node) -> String {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.is_empty() {
        return "none".into();
    }
    taints
        .iter()
        .map(|t| {
            format!(
                "{}={}:{}",
                t.key,
                t.value.clone().unwrap_or_default(),
                t.effect
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The node's addresses as (type, address) pairs, in order.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}
