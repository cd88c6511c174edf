//! Pod rules: the pod-spec defaults (also applied to workload templates), the QoS class
//! set on create, and which pod-spec fields an update may change.
//!
//! Why this exists: pods carry the most defaults a client reads back (kubernetes
//! pkg/apis/core/v1/defaults.go) and the strictest update rule (`ValidatePodUpdate`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::fields::{child, default_field};
use crate::error::Cause;

pub(super) fn default_pod_spec(pod: &mut Map<String, Value>) {
    default_field(pod, "restartPolicy", json!("Always"));
    default_field(pod, "terminationGracePeriodSeconds", json!(30));
    default_field(pod, "dnsPolicy", json!("ClusterFirst"));
    default_field(pod, "securityContext", json!({}));
    default_field(pod, "schedulerName", json!("default-scheduler"));
    for_each_container(pod, |c| {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_pulls_always(image) {
            "Always"
        } else {
            "IfNotPresent"
        };
        default_field(c, "imagePullPolicy", json!(policy));
        default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
        default_field(c, "terminationMessagePolicy", json!("File"));
        default_field(c, "resources", json!({}));
        let ports = c.get_mut("ports").and_then(Value::as_array_mut);
        for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
            default_field(port, "protocol", json!("TCP"));
        }
    });
}

/// A container's requests default to its limits (`SetDefaults_Pod`).
pub(super) fn default_pod_resources(pod: &mut Map<String, Value>) {
    for_each_container(pod, |c| {
        let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
            return;
        };
        let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
            return;
        };
        if limits.is_empty() {
            return;
        }
        let Some(requests) = child(resources, "requests") else {
            return;
        };
        for (name, q) in limits {
            default_field(requests, &name, q);
        }
    });
}

/// Calls `f` with every container of a pod spec that is an object, the init containers
/// first.
fn for_each_container(pod: &mut Map<String, Value>, mut f: impl FnMut(&mut Map<String, Value>)) {
    for list in ["initContainers", "containers"] {
        let containers = pod.get_mut(list).and_then(Value::as_array_mut);
        for c in containers
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            f(c);
        }
    }
}

/// A quantity (`100m`, `1.5`, `128Mi`, `2G`, `1e3`) as a number, for comparisons.
fn quantity(q: &Value) -> Option<f64> {
    let text = match q {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    text.parse::<f64>().ok()
}

/// The QoS class of a pod spec (kubernetes pkg/apis/core/helper/qos/qos.go
/// `ComputePodQOS`, container resources only): BestEffort without any cpu or memory
/// request or limit; Guaranteed when every container limits both and requests equal
/// limits; Burstable otherwise.
pub(super) fn qos_class(spec: &Value) -> &'static str {
    const SUPPORTED: [&str; 2] = ["cpu", "memory"];
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut limited = 0;
            for (kind, sums) in [("requests", &mut requests), ("limits", &mut limits)] {
                for name in SUPPORTED {
                    let q = c
                        .pointer(&format!("/resources/{kind}/{name}"))
                        .and_then(quantity)
                        .filter(|q| *q > 0.0);
                    if let Some(q) = q {
                        *sums.entry(name).or_default() += q;
                        if kind == "limits" {
                            limited += 1;
                        }
                    }
                }
            }
            if limited < SUPPORTED.len() {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let equal = SUPPORTED
        .iter()
        .all(|name| match (requests.get(name), limits.get(name)) {
            (Some(r), Some(l)) => (r - l).abs() < 1e-9,
            (None, Some(_)) => true,
            _ => false,
        });
    if guaranteed && equal {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `Always` for an image without a tag or digest, or tagged `latest`.
pub(super) fn image_pulls_always(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// The fields of a pod spec an update may change (kubernetes pkg/apis/core/validation
/// `updatablePodSpecFields`).
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`'s spec rule: the new spec with its updatable fields taken from the
/// old one must equal the old spec. The cause's message names the spec fields that
/// differ where upstream prints a Go diff of the two specs.
pub(super) fn validate_pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (Some(old_spec), Some(new_spec)) = (
        old.get("spec").and_then(Value::as_object),
        new.get("spec").and_then(Value::as_object),
    ) else {
        return;
    };
    let mut munged = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let old_list = old_spec.get(list).and_then(Value::as_array);
        let new_list = munged.get_mut(list).and_then(Value::as_array_mut);
        if let (Some(old_list), Some(new_list)) = (old_list, new_list)
            && old_list.len() == new_list.len()
        {
            for (n, o) in new_list.iter_mut().zip(old_list) {
                if let (Some(n), Some(image)) = (n.as_object_mut(), o.get("image")) {
                    n.insert("image".into(), image.clone());
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match old_spec.get(key) {
            Some(v) => {
                munged.insert(key.into(), v.clone());
            }
            None => {
                munged.remove(key);
            }
        }
    }
    if &munged == old_spec {
        return;
    }
    let mut changed: Vec<&str> = munged
        .keys()
        .chain(old_spec.keys())
        .filter(|k| munged.get(*k) != old_spec.get(*k))
        .map(String::as_str)
        .collect();
    changed.sort_unstable();
    changed.dedup();
    causes.push(Cause::forbidden(
        "spec",
        &format!(
            "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\nchanged: {}",
            changed.join(", ")
        ),
    ));
}
