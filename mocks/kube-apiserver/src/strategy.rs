//! Per-kind rules applied on create and update (upstream "strategies").
//!
//! The generic store treats every object the same; the few kind-specific rules
//! real clients notice live here: status subresource isolation, create-time
//! defaults, and immutable fields.

use serde_json::{Value, json};

use crate::error::Cause;
use crate::resources::ResourceDesc;

/// Which endpoint a write came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}

/// Create-time defaults and resets.
pub fn prepare_create(desc: &ResourceDesc, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match (desc.group, desc.kind) {
        // kubernetes pkg/registry/core/namespace/strategy.go PrepareForCreate.
        ("", "Namespace") => {
            map.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            map.insert("status".into(), json!({"phase": "Active"}));
        }
        // kubernetes pkg/registry/core/service/strategy.go PrepareForCreate clears status.
        ("", "Service") => {
            map.insert("status".into(), json!({"loadBalancer": {}}));
            default_service_spec(map);
        }
        // kubernetes pkg/registry/core/pod/strategy.go PrepareForCreate resets status.
        ("", "Pod") => {
            map.insert("status".into(), json!({"phase": "Pending"}));
        }
        _ => {}
    }
}

/// The defaults of kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_Service`
/// that need no allocator (cluster IPs and node ports are not allocated here).
fn default_service_spec(map: &mut serde_json::Map<String, Value>) {
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    spec.entry("type").or_insert_with(|| json!("ClusterIP"));
    spec.entry("sessionAffinity")
        .or_insert_with(|| json!("None"));
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| json!("Cluster"));
    let is_external = matches!(
        spec.get("type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    );
    if is_external {
        spec.entry("externalTrafficPolicy")
            .or_insert_with(|| json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert_with(|| json!("TCP"));
            if let Some(p) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(p);
            }
        }
    }
}

/// Status isolation on update (kubernetes pkg/registry/core/{node,service}/strategy.go):
/// the main resource cannot change status, `/status` cannot change spec; metadata
/// changes through `/status` are kept.
pub fn prepare_update(desc: &ResourceDesc, sub: Subresource, old: &Value, new: &mut Value) {
    if !desc.status_subresource {
        return;
    }
    let reset = match sub {
        Subresource::Main => "status",
        Subresource::Status => "spec",
    };
    let Some(map) = new.as_object_mut() else {
        return;
    };
    match old.get(reset) {
        Some(v) => {
            map.insert(reset.into(), v.clone());
        }
        None => {
            map.remove(reset);
        }
    }
}

/// Kind-specific update validation; returns the causes of a 422.
pub fn validate_update(desc: &ResourceDesc, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if desc.group.is_empty() && desc.kind == "Node" {
        // kubernetes pkg/apis/core/validation/validation.go ValidateNodeUpdate:
        // providerID may only go from "" to a value.
        let old_id = old
            .pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_id = new
            .pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !old_id.is_empty() && old_id != new_id {
            causes.push(Cause::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
    if desc.group.is_empty() && desc.kind == "Service" {
        let old_ip = old
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_ip = new
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !old_ip.is_empty() && old_ip != new_ip {
            causes.push(Cause::invalid(
                "spec.clusterIP",
                new_ip,
                "field is immutable",
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    #[test]
    fn node_status_isolation() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let old = json!({"spec": {"podCIDR": "a"}, "status": {"phase": "x"}});
        let mut main = json!({"spec": {"podCIDR": "b"}, "status": {"phase": "y"}});
        prepare_update(nodes, Subresource::Main, &old, &mut main);
        assert_eq!(
            main,
            json!({"spec": {"podCIDR": "b"}, "status": {"phase": "x"}})
        );
        let mut status = json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "y"}});
        prepare_update(nodes, Subresource::Status, &old, &mut status);
        assert_eq!(
            status,
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"podCIDR": "a"}, "status": {"phase": "y"}})
        );
    }

    #[test]
    fn provider_id_is_immutable_once_set() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let empty = json!({"spec": {}});
        let set = json!({"spec": {"providerID": "openstack:///1"}});
        let other = json!({"spec": {"providerID": "openstack:///2"}});
        assert!(validate_update(nodes, &empty, &set).is_empty());
        assert!(validate_update(nodes, &set, &set).is_empty());
        assert_eq!(validate_update(nodes, &set, &other).len(), 1);
    }

    #[test]
    fn service_defaults() {
        let svc = lookup("", "v1", "services").expect("services");
        let mut obj =
            json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}, "status": {"x": 1}});
        prepare_create(svc, &mut obj);
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(obj["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(obj["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(obj["status"], json!({"loadBalancer": {}}));
    }
}
