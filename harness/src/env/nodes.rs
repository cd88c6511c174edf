//! Nodes: the instance in the mock cloud and the simulated kubelet that registers it
//! (in-tree or external), their restarts and reboots, and bounded waits on a Node.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use mock_kubelet::{KubeletConfig, ServiceFeed, SimKubelet};

use super::{Environment, NodeIp, NodeOptions};
use crate::cloud::{Instance, InstanceSpec};
use crate::error::CaseError;
use crate::node::{describe_taints, has_uninitialized_taint, in_tree_labels, provider_id};
use crate::wait::{Probe, eventually, holds_for};

impl Environment {
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
            (Some(NodeIp::UnknownToCloud), _) => {
                Some(format!("127.99.{}.1", self.cloud().address_block()))
            }
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
        config.floating_ip = self.cloud().load_balancers_use_floating_ip();
        let kubelet = SimKubelet::start(self.kubelet_client.clone(), config)
            .await
            .map_err(|e| CaseError::infra("registering node", e))?;
        self.kubelets.insert(name.to_string(), kubelet);
        self.start_node_manager(name).await
    }

    /// Starts the CCM's per-node agent for node `name`, when the CCM under test has one
    /// ([`crate::Settings::node_manager`]: upstream Azure's cloud-node-manager). It runs
    /// as its DaemonSet pod would on that node: with `--use-instance-metadata=false` it
    /// finds its VM by the host's name (cloud-provider-azure `pkg/provider/azure_zones.go`
    /// GetZone reads `os.Hostname()`), so it gets a UTS namespace whose hostname is the
    /// node's (`unshare --uts`, which needs root). A case that turns the CCM's
    /// cloud-node controller off (`--controllers=...,-cloud-node-controller`) gets no
    /// agent either: the agent is that controller, moved onto the node.
    async fn start_node_manager(&mut self, name: &str) -> Result<(), CaseError> {
        let Some(agent) = self.settings.node_manager.clone() else {
            return Ok(());
        };
        if turns_off_cloud_node_controller(&self.ccm_args) {
            return Ok(());
        }
        self.stop_node_manager(name).await;
        let mut args = vec![
            "--uts".to_string(),
            "sh".into(),
            "-c".into(),
            "hostname \"$0\" && exec \"$@\"".into(),
            name.to_string(),
            agent.display().to_string(),
            format!("--node-name={name}"),
            format!("--cloud-config={}", self.cloud_config.display()),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--use-instance-metadata=false".into(),
            "--secure-port=0".into(),
        ];
        // The node agent updates addresses on its own period: a case that shortens the
        // CCM's (the address cases' 1 s) deploys its agent alike.
        args.extend(
            self.ccm_args
                .iter()
                .filter(|a| a.starts_with("--node-status-update-frequency="))
                .cloned(),
        );
        let log = self.dir.join(format!("node-manager-{name}.log"));
        let process = crate::ccm::CcmProcess::spawn_with_env(
            std::path::Path::new("unshare"),
            &args,
            &self.cloud_env(),
            &log,
            0,
        )?;
        self.node_managers.insert(name.to_string(), process);
        Ok(())
    }

    /// Restarts every per-node agent that has exited, as the kubelet restarts a DaemonSet
    /// pod (restartPolicy Always): after CrashLoopBackOff's delay, 10 s doubling with each
    /// restart of that agent up to 5 min (kubelet `pkg/kubelet/kubelet.go` backOffPeriod,
    /// MaxContainerBackOff). Upstream Azure's cloud-node-manager exits when its start-up
    /// calls fail (cloud-provider-azure `pkg/node/nodearm.go` NewARMNodeProvider). Returns
    /// how many were restarted.
    pub async fn restart_exited_node_managers(&mut self) -> Result<usize, CaseError> {
        let exited: Vec<String> = self
            .node_managers
            .iter_mut()
            .filter_map(|(name, p)| p.exited().map(|_| name.clone()))
            .collect();
        self.node_manager_exits
            .retain(|name, _| exited.contains(name));
        let mut restarted = 0;
        for name in exited {
            let seen = *self
                .node_manager_exits
                .entry(name.clone())
                .or_insert_with(std::time::Instant::now);
            let before = self.node_manager_restarts.get(&name).copied().unwrap_or(0);
            if seen.elapsed() >= crash_loop_backoff(before) {
                self.node_manager_exits.remove(&name);
                self.node_manager_restarts.insert(name.clone(), before + 1);
                self.start_node_manager(&name).await?;
                restarted += 1;
            }
        }
        Ok(restarted)
    }

    /// Stops node `name`'s agent, if it runs one.
    pub(crate) async fn stop_node_manager(&mut self, name: &str) {
        if let Some(mut p) = self.node_managers.remove(name) {
            p.stop().await;
        }
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
        config.floating_ip = self.cloud().load_balancers_use_floating_ip();
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
            .map_err(|e| CaseError::infra("restarting kubelet as external", e))?;
        self.start_node_manager(name).await
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
            .map_err(|e| CaseError::infra("stopping kubelet", e))?;
        // The machine is down: so is the agent that ran on it.
        self.stop_node_manager(name).await;
        Ok(())
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
}

/// Whether CCM flags turn the cloud-node controller off (`--controllers=*,-cloud-node-controller`).
fn turns_off_cloud_node_controller(args: &[String]) -> bool {
    args.iter().any(|a| {
        a.strip_prefix("--controllers=")
            .is_some_and(|list| list.split(',').any(|c| c == "-cloud-node-controller"))
    })
}

/// The kubelet's restart delay after `restarts` earlier restarts: 10 s, doubling, at most
/// 5 min.
fn crash_loop_backoff(restarts: u32) -> std::time::Duration {
    std::time::Duration::from_secs(10u64.saturating_mul(1 << restarts.min(5)).min(300))
}

#[cfg(test)]
mod tests {
    use super::crash_loop_backoff;
    use super::turns_off_cloud_node_controller as off;

    #[test]
    fn restarts_back_off_as_the_kubelets_do() {
        let secs: Vec<u64> = (0..8).map(|n| crash_loop_backoff(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn the_node_agent_follows_the_cloud_node_controller_flag() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(off(&args(&[
            "--v=2",
            "--controllers=*,-cloud-node-controller"
        ])));
        assert!(!off(&args(&["--controllers=*,-service-lb-controller"])));
        assert!(!off(&args(&["--controllers=*"])));
        assert!(!off(&args(&[])));
    }
}
