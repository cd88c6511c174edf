//! What both API server benchmarks share: this crate's `benches/apiserver.rs` and
//! `control-plane/benches/vs_embedded.rs` (which includes this file by path, so the
//! embedded and the real kube-apiserver are measured with the very same bodies and
//! figures): the objects written, medians and percentiles, and a process's memory and CPU
//! from `/proc`.

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

/// The median (sorts `xs`).
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The `p` quantile (0.0–1.0) of sorted values, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A `kB` field of `/proc/<process>/status` (`process`: a pid or `self`), in MB.
pub fn status_mb(process: &str, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU seconds (user + system) a process (a pid or `self`) has used, from
/// `/proc/<process>/stat`: on a shared machine the wall-clock rates swing with other load,
/// CPU per operation much less.
pub fn cpu_seconds(process: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{process}/stat")) else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / 100.0
}
