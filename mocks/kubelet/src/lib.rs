//! Simulated kubelets: they register and heartbeat Nodes the way
//! `kubelet --cloud-provider=external` does, so a CCM sees exactly what it would see in a
//! real cluster, without containers.
//!
//! What a CCM depends on, and therefore what this crate reproduces (kubernetes/kubernetes
//! `pkg/kubelet/kubelet_node_status.go`, `pkg/kubelet/nodestatus/setters.go`):
//! - the `node.cloudprovider.kubernetes.io/uninitialized` taint is added only when the
//!   kubelet *creates* the Node; re-registering an existing Node never re-adds it;
//! - `alpha.kubernetes.io/provided-node-ip` is set when `--node-ip` is given and is not the
//!   unspecified address, and removed otherwise;
//! - initial addresses: only `Hostname` without `--node-ip` (since 1.29); `InternalIP`(s) and
//!   `Hostname` with it; existing addresses are left alone (the CCM owns them);
//! - a `Ready` condition and a Lease in `kube-node-lease` renewed every few seconds.
//!
//! There is no kube-controller-manager in the embedded cluster, so [`SimKubelet::stop`] also
//! does what KCM's node-lifecycle controller would do once the grace period passed: it marks
//! the Node's conditions `Unknown` ("Kubelet stopped posting node status.").
//!
//! With [`KubeletConfig::proxy`] a simulated kube-proxy runs beside the kubelet (see
//! [`kube_proxy`]): NodePorts answer with the node's name and health-check node ports
//! answer like kube-proxy, so load balancers can be checked with real traffic.
#![forbid(unsafe_code)]

pub mod kube_proxy;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use kube_proxy::{LOCAL_ENDPOINTS_ANNOTATION, ServiceFeed};

/// Taint the kubelet adds at registration with an external cloud provider.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Annotation carrying `--node-ip` for the CCM (KEP-3705).
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
/// Namespace of node heartbeat leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Kubelet version the simulated nodes report.
pub const KUBELET_VERSION: &str = "v1.34.0";

/// Errors from a simulated kubelet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid --node-ip {value:?}: {reason}")]
    InvalidNodeIp { value: String, reason: String },
    #[error("registering node {node}: {source}")]
    Register {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating node {node}: {source}")]
    Update {
        node: String,
        #[source]
        source: kube::Error,
    },
}

/// How one simulated kubelet is configured (the subset of kubelet flags a CCM can observe).
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node name (`--hostname-override`).
    pub node_name: String,
    /// `--node-ip`: one IP or a comma-separated dual-stack pair. `None` = flag not given.
    pub node_ip: Option<String>,
    /// `--provider-id`, if the kubelet sets it itself.
    pub provider_id: Option<String>,
    /// `--cloud-provider=external` (true) or no cloud provider (false: no taint).
    pub external_cloud_provider: bool,
    /// Extra `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// Annotations written at registration, after the kubelet's own (tests use it to
    /// present a CCM with values a real kubelet would refuse, e.g. a malformed node IP).
    pub annotations: BTreeMap<String, String>,
    /// Lease renew interval (kubelet: 10 s = 25% of the 40 s lease duration).
    pub lease_renew_interval: Duration,
    /// How often the Ready heartbeat is written to node status (`nodeStatusReportFrequency`, 5 m).
    pub status_report_interval: Duration,
    /// Also run the simulated kube-proxy ([`kube_proxy`]) for this node. Off by default.
    pub proxy: bool,
    /// The addresses an in-tree cloud provider gave the kubelet (`--cloud-provider=<name>`,
    /// before the external migration), as (type, address): reported at first registration
    /// ahead of `Hostname`, instead of the `--node-ip` InternalIPs. Empty otherwise.
    pub cloud_addresses: Vec<(String, String)>,
    /// `status.nodeInfo.systemUUID`: the machine's SMBIOS/BIOS UUID as the kubelet reads it
    /// (cadvisor's `/sys/class/dmi/id/product_uuid`). The vSphere CCM finds a node's VM by it
    /// (kubernetes/cloud-provider-vsphere pkg/cloudprovider/vsphere/nodemanager.go); empty
    /// for the other clouds.
    pub system_uuid: String,
    /// The cluster's shared Service watch for the kube-proxy; `None`: it watches alone.
    pub services: Option<kube_proxy::ServiceFeed>,
    /// The cloud's load balancers deliver packets with the frontend address still as their
    /// destination (Azure's floating IP, direct server return), so the kube-proxy also
    /// serves each LoadBalancer Service's own ports on the node IP; see
    /// [`kube_proxy`]'s "Floating IP".
    pub floating_ip: bool,
}

impl KubeletConfig {
    /// A kubelet for `node_name` with upstream defaults and `--cloud-provider=external`.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            node_ip: None,
            provider_id: None,
            external_cloud_provider: true,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            lease_renew_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(300),
            proxy: false,
            cloud_addresses: Vec::new(),
            system_uuid: String::new(),
            services: None,
            floating_ip: false,
        }
    }

    /// Sets `--node-ip`.
    pub fn node_ip(mut self, ip: impl Into<String>) -> Self {
        self.node_ip = Some(ip.into());
        self
    }

    /// Sets `--provider-id`.
    pub fn provider_id(mut self, id: impl Into<String>) -> Self {
        self.provider_id = Some(id.into());
        self
    }

    /// Runs the simulated kube-proxy too (or not).
    pub fn with_proxy(mut self, proxy: bool) -> Self {
        self.proxy = proxy;
        self
    }
}

/// Parses `--node-ip` like the kubelet: one IP, or two of different families.
/// Returns the IPs, and whether the annotation should be set (not for unspecified IPs).
fn parse_node_ips(value: &str) -> Result<Vec<IpAddr>, Error> {
    let invalid = |reason: &str| Error::InvalidNodeIp {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let ips = value
        .split(',')
        .map(|s| s.trim().parse::<IpAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("not an IP address"))?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(ips),
        [_, _] => Err(invalid(
            "dual-stack --node-ip must have one IPv4 and one IPv6",
        )),
        _ => Err(invalid("at most two IPs")),
    }
}

/// The Node object the kubelet POSTs at first registration.
pub fn initial_node(config: &KubeletConfig) -> Result<Value, Error> {
    let name = &config.node_name;
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(config.labels.clone());

    let mut annotations = BTreeMap::from([
        ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
            "true".to_string(),
        ),
    ]);
    let mut addresses = Vec::new();
    if let Some(node_ip) = &config.node_ip {
        let ips = parse_node_ips(node_ip)?;
        let specified: Vec<_> = ips.iter().filter(|ip| !ip.is_unspecified()).collect();
        // Only a kubelet with an external cloud provider hands its node IP to the CCM
        // (kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go).
        if !specified.is_empty() && config.external_cloud_provider {
            annotations.insert(PROVIDED_NODE_IP.to_string(), node_ip.clone());
        }
        if config.cloud_addresses.is_empty() {
            for ip in specified {
                addresses.push(json!({"type": "InternalIP", "address": ip.to_string()}));
            }
        }
    }
    for (kind, address) in &config.cloud_addresses {
        addresses.push(json!({"type": kind, "address": address}));
    }
    addresses.push(json!({"type": "Hostname", "address": name}));
    annotations.extend(config.annotations.clone());

    let mut spec = json!({});
    if config.external_cloud_provider {
        spec["taints"] =
            json!([{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]);
    }
    if let Some(id) = &config.provider_id {
        spec["providerID"] = json!(id);
    }
    let now = now();
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {
            "addresses": addresses,
            "conditions": conditions("True", &now),
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "", "systemUUID": config.system_uuid, "bootID": "",
                "kernelVersion": "6.1.0", "osImage": "Simulated Linux",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"
            }
        }
    }))
}

fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn micro_now() -> String {
    Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// Node conditions with Ready=`ready` (True, False or Unknown).
fn conditions(ready: &str, now: &str) -> Value {
    let (reason, message) = match ready {
        "True" => ("KubeletReady", "kubelet is posting ready status"),
        "Unknown" => ("NodeStatusUnknown", "Kubelet stopped posting node status."),
        _ => ("KubeletNotReady", "container runtime is down"),
    };
    let pressure = |t: &str, reason: &str| {
        let status = if ready == "Unknown" {
            "Unknown"
        } else {
            "False"
        };
        json!({"type": t, "status": status, "reason": reason, "message": "",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!([
        pressure("MemoryPressure", "KubeletHasSufficientMemory"),
        pressure("DiskPressure", "KubeletHasNoDiskPressure"),
        pressure("PIDPressure", "KubeletHasSufficientPID"),
        {"type": "Ready", "status": ready, "reason": reason, "message": message,
         "lastHeartbeatTime": now, "lastTransitionTime": now}
    ])
}

/// One running simulated kubelet. Dropping it stops its heartbeat (and kube-proxy) tasks.
pub struct SimKubelet {
    config: KubeletConfig,
    nodes: Api<Node>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    proxy: Option<JoinHandle<()>>,
}

impl SimKubelet {
    /// Registers the Node (creating it, or re-registering an existing one without
    /// re-tainting) and starts the Lease heartbeat.
    pub async fn start(client: kube::Client, config: KubeletConfig) -> Result<Self, Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let uid = register(&nodes, &config).await?;
        let (stop, stopped) = watch::channel(false);
        let proxy = config.proxy.then(|| {
            // The tasks carry the caller's span: their log lines belong to its case.
            tokio::spawn(
                kube_proxy::run(
                    client.clone(),
                    config.node_name.clone(),
                    config.services.clone(),
                    config.floating_ip,
                    stopped.clone(),
                )
                .in_current_span(),
            )
        });
        let leases: Api<Lease> = Api::namespaced(client, NODE_LEASE_NAMESPACE);
        let task = tokio::spawn(
            heartbeat(nodes.clone(), leases, config.clone(), uid, stopped).in_current_span(),
        );
        Ok(Self {
            config,
            nodes,
            stop,
            task: Some(task),
            proxy,
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.config.node_name
    }

    /// Stops heartbeating (and the kube-proxy: its ports close) and marks the node's
    /// conditions Unknown, as the node-lifecycle controller of kube-controller-manager
    /// would after its grace period.
    pub async fn stop(&mut self) -> Result<(), Error> {
        self.halt().await;
        self.patch_conditions("Unknown").await
    }

    /// Sets Ready to True or False (e.g. container runtime down) while still heartbeating.
    pub async fn set_ready(&self, ready: bool) -> Result<(), Error> {
        self.patch_conditions(if ready { "True" } else { "False" })
            .await
    }

    /// Restarts the kubelet process: re-registers (no taint is re-added) and heartbeats again.
    pub async fn restart(&mut self, client: kube::Client) -> Result<(), Error> {
        self.halt().await;
        let fresh = Self::start(client, self.config.clone()).await?;
        *self = fresh;
        Ok(())
    }

    /// Restarts the kubelet with a new configuration, e.g. switched from an in-tree cloud
    /// provider to `--cloud-provider=external` with the same `--node-ip` (the migration
    /// step of kubernetes/website "Migrate to the cloud controller manager"). Re-registering
    /// never adds the uninitialized taint or touches addresses; the provided-node-ip
    /// annotation follows the new configuration.
    pub async fn restart_with(
        &mut self,
        client: kube::Client,
        config: KubeletConfig,
    ) -> Result<(), Error> {
        self.halt().await;
        let fresh = Self::start(client, config).await?;
        *self = fresh;
        Ok(())
    }

    /// The configuration the kubelet runs with.
    pub fn config(&self) -> &KubeletConfig {
        &self.config
    }

    async fn halt(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(proxy) = self.proxy.take() {
            let _ = proxy.await;
        }
    }

    async fn patch_conditions(&self, ready: &str) -> Result<(), Error> {
        let patch = json!({"status": {"conditions": conditions(ready, &now())}});
        self.nodes
            .patch_status(
                &self.config.node_name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
            .map(drop)
            .map_err(|source| Error::Update {
                node: self.config.node_name.clone(),
                source,
            })
    }
}

impl Drop for SimKubelet {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(proxy) = self.proxy.take() {
            proxy.abort();
        }
    }
}

/// `tryRegisterWithAPIServer`: create, or on AlreadyExists reconcile the existing Node
/// (annotation and labels) without touching its taints or addresses. Returns the Node's uid
/// (the node Lease's owner).
async fn register(nodes: &Api<Node>, config: &KubeletConfig) -> Result<String, Error> {
    let name = config.node_name.clone();
    let body = initial_node(config)?;
    let node: Node = serde_json::from_value(body.clone()).map_err(|e| Error::Register {
        node: name.clone(),
        source: kube::Error::SerdeError(e),
    })?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(created) => Ok(created.metadata.uid.unwrap_or_default()),
        Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => {
            let provided = body["metadata"]["annotations"]
                .get(PROVIDED_NODE_IP)
                .cloned()
                .unwrap_or(Value::Null);
            let patch = json!({"metadata": {
                "labels": body["metadata"]["labels"],
                "annotations": {PROVIDED_NODE_IP: provided}
            }});
            let existing = nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| Error::Register { node: name, source })?;
            // The kubelet posts fresh conditions right after registering.
            let status = json!({"status": {"conditions": conditions("True", &now())}});
            nodes
                .patch_status(
                    &config.node_name,
                    &PatchParams::default(),
                    &Patch::Strategic(&status),
                )
                .await
                .map(|_| existing.metadata.uid.unwrap_or_default())
                .map_err(|source| Error::Register {
                    node: config.node_name.clone(),
                    source,
                })
        }
        Err(source) => Err(Error::Register { node: name, source }),
    }
}

/// Renews the node Lease every `lease_renew_interval` and posts the Ready heartbeat every
/// `status_report_interval`, until told to stop. Errors are logged and retried next tick,
/// as the kubelet does.
async fn heartbeat(
    nodes: Api<Node>,
    leases: Api<Lease>,
    config: KubeletConfig,
    node_uid: String,
    mut stopped: watch::Receiver<bool>,
) {
    let name = config.node_name.clone();
    let mut lease_tick = tokio::time::interval(config.lease_renew_interval);
    let mut status_tick = tokio::time::interval(config.status_report_interval);
    status_tick.tick().await; // registration just posted status
    let mut lease_exists = false;
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = lease_tick.tick() => {
                match renew_lease(&leases, &name, &node_uid, lease_exists).await {
                    Ok(()) => lease_exists = true,
                    Err(e) => tracing::debug!(node = %name, error = %e, "lease renewal failed"),
                }
            }
            _ = status_tick.tick() => {
                let patch = json!({"status": {"conditions": [
                    {"type": "Ready", "lastHeartbeatTime": now()}
                ]}});
                if let Err(e) = nodes.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                    tracing::debug!(node = %name, error = %e, "status heartbeat failed");
                }
            }
        }
    }
}

/// The node lease controller (kubernetes/component-helpers apimachinery/lease/controller.go):
/// make sure the Lease exists (owned by the Node), then renew `renewTime`. A restarted
/// kubelet finds its Lease already there (AlreadyExists) and renews it.
async fn renew_lease(
    leases: &Api<Lease>,
    name: &str,
    node_uid: &str,
    exists: bool,
) -> Result<(), kube::Error> {
    let renew = micro_now();
    if !exists {
        let lease: Lease = serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid
            }]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renew}
        }))
        .map_err(kube::Error::SerdeError)?;
        match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => {}
            Err(e) => return Err(e),
        }
    }
    let patch = json!({"spec": {"renewTime": renew}});
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_kubelet_taints_at_creation_and_reports_hostname_only() {
        let node = initial_node(&KubeletConfig::new("n1")).unwrap();
        assert_eq!(node["spec"]["taints"][0]["key"], UNINITIALIZED_TAINT);
        assert_eq!(
            node["status"]["addresses"],
            json!([{"type": "Hostname", "address": "n1"}])
        );
        assert!(
            node["metadata"]["annotations"]
                .get(PROVIDED_NODE_IP)
                .is_none()
        );
    }

    #[test]
    fn node_ip_sets_annotation_and_internal_ip() {
        let node = initial_node(&KubeletConfig::new("n1").node_ip("10.0.0.5,fd00::5")).unwrap();
        assert_eq!(
            node["metadata"]["annotations"][PROVIDED_NODE_IP],
            "10.0.0.5,fd00::5"
        );
        let addrs = &node["status"]["addresses"];
        assert_eq!(addrs[0]["address"], "10.0.0.5");
        assert_eq!(addrs[1]["address"], "fd00::5");
        assert_eq!(addrs[2]["type"], "Hostname");
    }

    #[test]
    fn unspecified_node_ip_sets_no_annotation() {
        let node = initial_node(&KubeletConfig::new("n1").node_ip("0.0.0.0")).unwrap();
        assert!(
            node["metadata"]["annotations"]
                .get(PROVIDED_NODE_IP)
                .is_none()
        );
    }

    #[test]
    fn bad_node_ips_are_rejected() {
        for bad in ["x", "10.0.0.1,10.0.0.2", "1.1.1.1,::1,2.2.2.2"] {
            assert!(
                initial_node(&KubeletConfig::new("n").node_ip(bad)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn in_tree_kubelet_reports_cloud_addresses_without_taint_or_annotation() {
        let mut c = KubeletConfig::new("n1").node_ip("10.0.0.5");
        c.external_cloud_provider = false;
        c.cloud_addresses = vec![
            ("InternalIP".into(), "10.0.0.5".into()),
            ("ExternalIP".into(), "192.0.2.5".into()),
        ];
        let node = initial_node(&c).unwrap();
        assert!(node["spec"].get("taints").is_none());
        assert!(
            node["metadata"]["annotations"]
                .get(PROVIDED_NODE_IP)
                .is_none()
        );
        assert_eq!(
            node["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.5"},
                   {"type": "ExternalIP", "address": "192.0.2.5"},
                   {"type": "Hostname", "address": "n1"}])
        );
    }

    #[test]
    fn system_uuid_is_reported_in_node_info() {
        let node = initial_node(&KubeletConfig::new("n1")).unwrap();
        assert_eq!(node["status"]["nodeInfo"]["systemUUID"], "");
        let mut c = KubeletConfig::new("n1");
        c.system_uuid = "4207a1b2-0000-4000-8000-00000000abcd".into();
        let node = initial_node(&c).unwrap();
        assert_eq!(
            node["status"]["nodeInfo"]["systemUUID"],
            "4207a1b2-0000-4000-8000-00000000abcd"
        );
    }

    #[test]
    fn no_cloud_provider_means_no_taint() {
        let mut c = KubeletConfig::new("n1");
        c.external_cloud_provider = false;
        assert!(initial_node(&c).unwrap()["spec"].get("taints").is_none());
    }
}
