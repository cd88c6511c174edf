//! The objects both API server benchmarks write: this crate's `benches/apiserver.rs` and
//! `control-plane/benches/vs_embedded.rs` (which includes this file by path, so the
//! embedded and the real kube-apiserver are measured with the very same bodies).

use serde_json::{Value, json};

/// A node as a kubelet registers it (labels, capacity, conditions, addresses, nodeInfo).
pub fn node(name: &str) -> Value {
    let cond = |t: &str, s: &str| {
        json!({"type": t, "status": s, "reason": format!("Kubelet{t}"), "message": "kubelet is posting ready status",
               "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16318412Ki", "pods": "110", "ephemeral-storage": "102626232Ki"},
            "allocatable": {"cpu": "4", "memory": "16216012Ki", "pods": "110", "ephemeral-storage": "94580335255"},
            "conditions": [cond("MemoryPressure", "False"), cond("DiskPressure", "False"), cond("PIDPressure", "False"), cond("Ready", "True")],
            "addresses": [{"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "m", "systemUUID": "u", "bootID": "b", "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.34.0", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}
        }
    })
}

/// A headless Service selecting pods labelled `app: <name>`.
pub fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
           "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                    "selector": {"app": name}}})
}
