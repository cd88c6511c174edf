//! Service cluster IP and node port allocation.
//!
//! Load-balancer CCMs read `spec.ports[].nodePort` (and `healthCheckNodePort` for
//! `externalTrafficPolicy: Local`) to program their backends, so Services must come
//! back from create with them filled in, as the real registry does (kubernetes
//! pkg/registry/core/service/storage/alloc.go). The allocator is a pure function over
//! the Service being written and the other Services in the store, which the store
//! calls under its lock; nothing is kept outside the stored objects.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use crate::error::Cause;

/// Default service CIDR 10.0.0.0/24; .1 is the `kubernetes` Service's address.
const SERVICE_NET: [u8; 3] = [10, 0, 0];
const FIRST_HOST: u8 = 2;
/// Default `--service-node-port-range`.
const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

fn ports_of(svc: &Value) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn node_port(port: &serde_json::Map<String, Value>) -> Option<u16> {
    port.get("nodePort")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
}

fn used_node_ports(others: &[&Value]) -> BTreeSet<u16> {
    let mut used = BTreeSet::new();
    for svc in others {
        used.extend(ports_of(svc).filter_map(node_port));
        if let Some(p) = svc
            .pointer("/spec/healthCheckNodePort")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
        {
            used.insert(p);
        }
    }
    used
}

fn next_free_port(used: &BTreeSet<u16>) -> Option<u16> {
    let span = u32::from(NODE_PORTS.end() - NODE_PORTS.start()) + 1;
    let start = fastrand::u32(..span);
    (0..span)
        .map(|i| NODE_PORTS.start() + u16::try_from((start + i) % span).unwrap_or(0))
        .find(|p| !used.contains(p))
}

/// Fill in cluster IP and node ports of Service `obj`. `old` is the stored version on
/// update (its allocations are kept); `others` are all other Services.
pub fn allocate(obj: &mut Value, old: Option<&Value>, others: &[&Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return causes;
    };
    let svc_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();

    // Cluster IP.
    if svc_type != "ExternalName" {
        let old_ip = old
            .and_then(|o| o.pointer("/spec/clusterIP"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let wanted = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let ip = match (old_ip, wanted) {
            (Some(old_ip), _) => Some(old_ip.to_string()),
            (None, Some(ip)) if ip == "None" => Some(ip),
            (None, Some(ip)) => {
                let taken = others
                    .iter()
                    .any(|o| o.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(&ip));
                if ip.parse::<Ipv4Addr>().is_err() {
                    causes.push(Cause::invalid(
                        "spec.clusterIP",
                        &ip,
                        "must be a valid IP address",
                    ));
                } else if taken {
                    causes.push(Cause::invalid(
                        "spec.clusterIP",
                        &ip,
                        "provided IP is already allocated",
                    ));
                }
                Some(ip)
            }
            (None, None) => {
                let taken: BTreeSet<&str> = others
                    .iter()
                    .filter_map(|o| o.pointer("/spec/clusterIP").and_then(Value::as_str))
                    .collect();
                let free = (FIRST_HOST..=254)
                    .map(|h| {
                        Ipv4Addr::new(SERVICE_NET[0], SERVICE_NET[1], SERVICE_NET[2], h).to_string()
                    })
                    .find(|ip| !taken.contains(ip.as_str()));
                if free.is_none() {
                    causes.push(Cause::invalid("spec.clusterIP", "", "range is full"));
                }
                free
            }
        };
        if let Some(ip) = ip {
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
            if ip != "None" {
                spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
            }
            spec.entry("ipFamilyPolicy")
                .or_insert_with(|| json!("SingleStack"));
        }
    }

    // Node ports.
    let is_lb = svc_type == "LoadBalancer";
    if is_lb {
        spec.entry("allocateLoadBalancerNodePorts")
            .or_insert(json!(true));
    }
    let wants_node_ports = svc_type == "NodePort"
        || (is_lb && spec.get("allocateLoadBalancerNodePorts") != Some(&json!(false)));
    let mut used = used_node_ports(others);
    let old_ports: Vec<(Value, Value, u16)> = old
        .map(|o| {
            ports_of(o)
                .filter_map(|p| {
                    let np = node_port(p)?;
                    Some((
                        p.get("port").cloned().unwrap_or(Value::Null),
                        p.get("protocol").cloned().unwrap_or(json!("TCP")),
                        np,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for (i, port) in ports
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .enumerate()
        {
            if !wants_node_ports {
                if svc_type == "ClusterIP" {
                    port.remove("nodePort");
                }
                continue;
            }
            let field = format!("spec.ports[{i}].nodePort");
            match node_port(port) {
                Some(p) => {
                    if !NODE_PORTS.contains(&p) {
                        causes.push(Cause::invalid(
                            &field,
                            &p.to_string(),
                            "provided port is not in the valid range. The range of valid ports is 30000-32767",
                        ));
                    } else if !used.insert(p) {
                        causes.push(Cause::invalid(
                            &field,
                            &p.to_string(),
                            "provided port is already allocated",
                        ));
                    }
                }
                None => {
                    let key_port = port.get("port").cloned().unwrap_or(Value::Null);
                    let key_proto = port.get("protocol").cloned().unwrap_or(json!("TCP"));
                    let reuse = old_ports
                        .iter()
                        .find(|(p, proto, np)| {
                            *p == key_port && *proto == key_proto && !used.contains(np)
                        })
                        .map(|(_, _, np)| *np);
                    match reuse.or_else(|| next_free_port(&used)) {
                        Some(p) => {
                            used.insert(p);
                            port.insert("nodePort".into(), json!(p));
                        }
                        None => causes.push(Cause::invalid(&field, "0", "range is full")),
                    }
                }
            }
        }
    }

    // Health check node port for LoadBalancer + externalTrafficPolicy=Local.
    let local = spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local");
    if is_lb && local {
        let current = spec
            .get("healthCheckNodePort")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        let old_hc = old
            .and_then(|o| o.pointer("/spec/healthCheckNodePort"))
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok());
        match current.or(old_hc) {
            Some(p) if used.contains(&p) && Some(p) != old_hc => causes.push(Cause::invalid(
                "spec.healthCheckNodePort",
                &p.to_string(),
                "provided port is already allocated",
            )),
            Some(p) => {
                spec.insert("healthCheckNodePort".into(), json!(p));
            }
            None => match next_free_port(&used) {
                Some(p) => {
                    spec.insert("healthCheckNodePort".into(), json!(p));
                }
                None => causes.push(Cause::invalid(
                    "spec.healthCheckNodePort",
                    "0",
                    "range is full",
                )),
            },
        }
    } else {
        spec.remove("healthCheckNodePort");
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_ip_and_node_ports() {
        let mut a = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}});
        assert!(allocate(&mut a, None, &[]).is_empty());
        assert_eq!(a["spec"]["clusterIP"], "10.0.0.2");
        let p0 = a["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .expect("nodePort");
        let p1 = a["spec"]["ports"][1]["nodePort"]
            .as_u64()
            .expect("nodePort");
        assert_ne!(p0, p1);
        assert!(a["spec"]["healthCheckNodePort"].as_u64().is_some());

        let mut b = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": p0}]}});
        let causes = allocate(&mut b, None, &[&a]);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.ports[0].nodePort");

        let mut c = json!({"spec": {"ports": [{"port": 80}]}});
        assert!(allocate(&mut c, None, &[&a]).is_empty());
        assert_eq!(c["spec"]["clusterIP"], "10.0.0.3");
        assert!(c["spec"]["ports"][0].get("nodePort").is_none());
    }

    #[test]
    fn update_keeps_allocations() {
        let mut a =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}});
        assert!(allocate(&mut a, None, &[]).is_empty());
        let mut updated =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}});
        assert!(allocate(&mut updated, Some(&a), &[]).is_empty());
        assert_eq!(
            updated["spec"]["ports"][0]["nodePort"],
            a["spec"]["ports"][0]["nodePort"]
        );
        assert_eq!(updated["spec"]["clusterIP"], a["spec"]["clusterIP"]);
    }

    #[test]
    fn headless_gets_no_ip() {
        let mut h = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
        assert!(allocate(&mut h, None, &[]).is_empty());
        assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
        assert!(h["spec"].get("ipFamilies").is_none());
    }
}
