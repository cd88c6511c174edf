//! Service rules: the `SetDefaults_Service` defaults, what a change of type drops, and
//! keeping allocated values an update leaves empty.
//!
//! Why this exists: Services are what a cloud controller manager reconciles; these rules
//! (kubernetes pkg/registry/core/service) decide what it reads back after every write.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDesc;

/// The defaults of kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_Service`
/// that need no allocator (cluster IPs and node ports are not allocated here).
pub(super) fn default_service_spec(map: &mut serde_json::Map<String, Value>) {
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
    // An ingress IP of a LoadBalancer defaults its ipMode to VIP.
    let is_lb = spec.get("type").and_then(Value::as_str) == Some("LoadBalancer");
    let ingress = map
        .get_mut("status")
        .and_then(|s| s.get_mut("loadBalancer"))
        .and_then(|l| l.get_mut("ingress"))
        .and_then(Value::as_array_mut);
    for ing in ingress
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let has_ip = ing
            .get("ip")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty());
        if is_lb && has_ip {
            ing.entry("ipMode").or_insert_with(|| json!("VIP"));
        }
    }
}

/// What a Service's new type no longer needs, when the write did not also change it
/// (kubernetes pkg/registry/core/service/strategy.go `dropTypeDependentFields`): the
/// load-balancer status, an unchanged externalTrafficPolicy once neither NodePort nor
/// LoadBalancer, an unchanged allocateLoadBalancerNodePorts once not a LoadBalancer.
/// Node ports and the health-check node port are released by the allocator.
pub(super) fn drop_type_dependent_fields(old: &Value, new: &mut Map<String, Value>) {
    let type_of = |spec: Option<&Value>| {
        spec.and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string()
    };
    let (was, is) = (type_of(old.get("spec")), type_of(new.get("spec")));
    let external = |t: &str| matches!(t, "NodePort" | "LoadBalancer");
    if is != "LoadBalancer"
        && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
        && status.contains_key("loadBalancer")
    {
        status.insert("loadBalancer".into(), json!({}));
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let unchanged = |spec: &Map<String, Value>, key: &str| {
        spec.get(key).is_some() && spec.get(key) == old.pointer(&format!("/spec/{key}"))
    };
    if external(&was) && !external(&is) && unchanged(spec, "externalTrafficPolicy") {
        spec.remove("externalTrafficPolicy");
    }
    if was == "LoadBalancer"
        && is != "LoadBalancer"
        && unchanged(spec, "allocateLoadBalancerNodePorts")
    {
        spec.remove("allocateLoadBalancerNodePorts");
    }
}

/// Keep the values the registry allocated when an update leaves them empty, so that
/// `kubectl replace` of a Service without `clusterIP` or node ports is not an
/// immutable-field error (kubernetes pkg/registry/core/service/storage/storage.go
/// `patchAllocatedValues`): cluster IPs while both versions need one, node ports by
/// port name while both need them (unless the old port is used by another port of the
/// new object), and the health-check node port.
pub fn patch_allocated_values(desc: &ResourceDesc, old: &Value, new: &mut Value) {
    if !(desc.group.is_empty() && desc.kind == "Service") {
        return;
    }
    let Some(old_spec) = old.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let svc_type = |s: &serde_json::Map<String, Value>| {
        s.get("type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string()
    };
    let (old_type, new_type) = (svc_type(old_spec), svc_type(spec));
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Number(n)) => n.as_u64() == Some(0),
        _ => false,
    };
    // needsClusterIP: every type but ExternalName.
    if old_type != "ExternalName" && new_type != "ExternalName" {
        for field in ["clusterIP", "clusterIPs"] {
            if empty(spec.get(field)) && !empty(old_spec.get(field)) {
                spec.insert(field.into(), old_spec[field].clone());
            }
        }
    }
    // needsNodePort: NodePort, or LoadBalancer that allocates node ports.
    let needs_node_port = |t: &str, s: &serde_json::Map<String, Value>| {
        t == "NodePort"
            || (t == "LoadBalancer"
                && s.get("allocateLoadBalancerNodePorts") != Some(&json!(false)))
    };
    if needs_node_port(&old_type, old_spec) && needs_node_port(&new_type, spec) {
        let node_port_of = |p: &Value| p.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
        let ports_of = |s: &serde_json::Map<String, Value>| -> Vec<Value> {
            s.get("ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let old_ports = ports_of(old_spec);
        let new_used: Vec<u64> = ports_of(spec).iter().map(node_port_of).collect();
        let name_of = |p: &Value| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut() {
                if node_port_of(port) != 0 {
                    continue;
                }
                let name = name_of(port);
                let Some(old_np) = old_ports
                    .iter()
                    .find(|p| name_of(p) == name)
                    .map(node_port_of)
                    .filter(|np| *np != 0 && !new_used.contains(np))
                else {
                    continue;
                };
                if let Some(map) = port.as_object_mut() {
                    map.insert("nodePort".into(), json!(old_np));
                }
            }
        }
    }
    // needsHCNodePort: LoadBalancer with externalTrafficPolicy Local.
    let needs_hc = |t: &str, s: &serde_json::Map<String, Value>| {
        t == "LoadBalancer"
            && s.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
    };
    if needs_hc(&old_type, old_spec)
        && needs_hc(&new_type, spec)
        && empty(spec.get("healthCheckNodePort"))
        && let Some(hc) = old_spec.get("healthCheckNodePort")
    {
        spec.insert("healthCheckNodePort".into(), hc.clone());
    }
}
