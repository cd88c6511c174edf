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
    fold_string_data(desc, obj);
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

/// A Secret's `stringData` is write-only: every entry is stored base64-encoded in `data`,
/// over a `data` key of the same name, and `stringData` itself is dropped, so no reader
/// (a watch, a GET, a CCM's Secret lister) ever sees it (kubernetes pkg/apis/core/v1/
/// conversion.go `Convert_v1_Secret_To_core_Secret`). Non-string values are left for
/// validation to refuse.
fn fold_string_data(desc: &ResourceDesc, obj: &mut Value) {
    use base64::Engine as _;
    if !(desc.group.is_empty() && desc.kind == "Secret") {
        return;
    }
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.get("stringData") else {
        return;
    };
    if strings.values().any(|v| !v.is_string()) {
        return;
    }
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    if !matches!(map.get("data"), Some(Value::Object(_))) {
        map.insert("data".into(), json!({}));
    }
    if let Some(Value::Object(data)) = map.get_mut("data") {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, Value::String(encoded));
        }
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
    fold_string_data(desc, new);
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
    fn secret_string_data_is_folded_into_data() {
        let secrets = lookup("", "v1", "secrets").expect("secrets");
        let mut obj = json!({
            "metadata": {"name": "s"},
            "data": {"a": "b2xk", "keep": "eA=="},
            "stringData": {"a": "new", "host.username": "user"}
        });
        prepare_create(secrets, &mut obj);
        assert_eq!(
            obj,
            json!({
                "metadata": {"name": "s"},
                "data": {"a": "bmV3", "keep": "eA==", "host.username": "dXNlcg=="}
            })
        );
        // Updates too; without `data` it is created.
        let mut new = json!({"metadata": {"name": "s"}, "stringData": {"k": ""}});
        prepare_update(secrets, Subresource::Main, &obj, &mut new);
        assert_eq!(new, json!({"metadata": {"name": "s"}, "data": {"k": ""}}));
        // Other kinds keep a field of that name.
        let maps = lookup("", "v1", "configmaps").expect("configmaps");
        let mut cm = json!({"stringData": {"k": "v"}});
        prepare_create(maps, &mut cm);
        assert_eq!(cm, json!({"stringData": {"k": "v"}}));
    }

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

    #[test]
    fn allocated_values_survive_updates_that_omit_them() {
        let svc = lookup("", "v1", "services").expect("services");
        let old = json!({"spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "healthCheckNodePort": 31000,
            "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                      {"name": "https", "port": 443, "nodePort": 30443}],
        }});
        let mut new = json!({"spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "",
            // `https` now explicitly uses http's old node port, so http cannot get it back.
            "ports": [{"name": "http", "port": 8080},
                      {"name": "https", "port": 443, "nodePort": 30080},
                      {"name": "new", "port": 9}],
        }});
        patch_allocated_values(svc, &old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.7");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.7"]));
        assert_eq!(new["spec"]["healthCheckNodePort"], 31000);
        assert_eq!(new["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(new["spec"]["ports"][1]["nodePort"], 30080);
        assert_eq!(new["spec"]["ports"][2].get("nodePort"), None);
        assert!(validate_update(svc, &old, &new).is_empty());

        // Switching to ExternalName or ClusterIP needs neither IP nor node ports kept.
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
        patch_allocated_values(svc, &old, &mut external);
        assert_eq!(external["spec"].get("clusterIP"), None);
        let mut cluster_ip =
            json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}]}});
        patch_allocated_values(svc, &old, &mut cluster_ip);
        assert_eq!(cluster_ip["spec"]["clusterIP"], "10.0.0.7");
        assert_eq!(cluster_ip["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(cluster_ip["spec"].get("healthCheckNodePort"), None);
    }
}
