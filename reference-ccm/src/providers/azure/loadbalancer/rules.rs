//! The probes and load-balancing rules a Service wants on its Azure load balancer, and
//! upstream's comparisons that decide whether an existing one is rewritten.
//!
//! Exists apart from the load balancer's ARM calls because it is pure: the Service (and
//! the IDs of the LB, its frontend and its pool) in, JSON out, unit tested without a cloud.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::shared::{
    ANNOTATION_DISABLE_TCP_RESET, ANNOTATION_IDLE_TIMEOUT, ANNOTATION_PROBE_PATH,
    ANNOTATION_PROBE_PROTOCOL, annotation, annotation_true, eq_ci, floating_ip_disabled, name_of,
    owned_by, rule_name, str_at,
};
use crate::cloud::LbError;

/// The probes and rules a Service wants on an LB.
pub fn expected_probes_and_rules(
    service: &Service,
    lb_id: &str,
    fip_id: &str,
    pool_id: &str,
    disable_outbound_snat: bool,
) -> Result<(Vec<Value>, Vec<Value>), LbError> {
    let spec = service.spec.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let probe_id = |name: &str| format!("{lb_id}/probes/{name}");
    let mut probes = Vec::new();
    let mut rules = Vec::new();
    let idle = match annotation(service, ANNOTATION_IDLE_TIMEOUT) {
        None => 4,
        Some(v) => {
            let n: i64 = v.trim().parse().map_err(|_| {
                LbError::Other(format!(
                    "error parsing idle timeout key: {ANNOTATION_IDLE_TIMEOUT}: {v:?}"
                ))
            })?;
            if !(4..=100).contains(&n) {
                return Err(LbError::Other(format!(
                    "idle timeout value must be a whole number representing minutes between 4 and 100, actual value: {n}"
                )));
            }
            n
        }
    };
    // ETP=Local: kube-proxy's health check (service/helpers NeedsHealthCheck).
    let mut local_probe: Option<Value> = None;
    if spec.external_traffic_policy.as_deref() == Some("Local")
        && spec.type_.as_deref() == Some("LoadBalancer")
    {
        let port = spec.health_check_node_port.unwrap_or(0);
        let name = rule_name(service, "TCP", port, false);
        local_probe = Some(json!({"name": name, "properties": {
            "protocol": "Http", "port": port, "requestPath": "/healthz",
            "intervalInSeconds": 5, "probeThreshold": 2}}));
    }
    let mut local_added = false;
    for port in &ports {
        let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
        let transport = match protocol.as_str() {
            "TCP" => "Tcp",
            "UDP" => "Udp",
            "SCTP" => {
                return Err(LbError::Other(
                    "SCTP is only supported on standard loadbalancer in internal mode (not implemented by the reference CCM)".to_owned(),
                ));
            }
            other => {
                return Err(LbError::Other(format!(
                    "only TCP, UDP and SCTP are supported for Azure LoadBalancers, not {other}"
                )));
            }
        };
        let name = rule_name(service, &protocol, port.port, false);
        let node_port = port.node_port.unwrap_or(0);
        let mut props = json!({
            "protocol": transport,
            "frontendPort": port.port,
            "backendPort": port.port,
            "disableOutboundSnat": disable_outbound_snat,
            "enableFloatingIP": true,
            "loadDistribution": if spec.session_affinity.as_deref() == Some("ClientIP") { "SourceIP" } else { "Default" },
            "frontendIPConfiguration": {"id": fip_id},
            "backendAddressPool": {"id": pool_id},
            "idleTimeoutInMinutes": idle,
        });
        if transport == "Tcp" {
            props["enableTcpReset"] =
                json!(!annotation_true(service, ANNOTATION_DISABLE_TCP_RESET));
        }
        if transport == "Tcp" && local_probe.is_none() {
            if node_port == 0 {
                return Err(LbError::Other(format!(
                    "port {} has no nodePort for its health probe",
                    port.port
                )));
            }
            let wanted = annotation(service, ANNOTATION_PROBE_PROTOCOL)
                .map(str::to_owned)
                .or_else(|| port.app_protocol.clone())
                .unwrap_or_else(|| "Tcp".to_owned());
            // Port-specific annotations are looked up first upstream; only the
            // appProtocol and the global annotation are modelled here.
            let wanted = annotation(
                service,
                &format!(
                    "service.beta.kubernetes.io/port_{}_health-probe_protocol",
                    port.port
                ),
            )
            .map(str::to_owned)
            .unwrap_or(wanted);
            let probe_protocol = match wanted.trim().to_ascii_lowercase().as_str() {
                "http" => "Http",
                "https" => "Https",
                _ => "Tcp",
            };
            let mut probe_props = json!({"protocol": probe_protocol, "port": node_port,
                "intervalInSeconds": 5, "probeThreshold": 2});
            if probe_protocol != "Tcp" {
                probe_props["requestPath"] =
                    json!(annotation(service, ANNOTATION_PROBE_PATH).unwrap_or("/"));
            }
            props["probe"] = json!({"id": probe_id(&name)});
            probes.push(json!({"name": name, "properties": probe_props}));
        } else if let Some(lp) = &local_probe {
            // ETP Local: every rule, TCP or UDP, uses the health-check probe.
            props["probe"] = json!({"id": probe_id(name_of(lp))});
            if !local_added {
                probes.push(lp.clone());
                local_added = true;
            }
        }
        if floating_ip_disabled(service) {
            props["backendPort"] = json!(node_port);
            props["enableFloatingIP"] = json!(false);
        }
        rules.push(json!({"name": name, "properties": props}));
    }
    Ok((probes, rules))
}

/// `findProbe`'s comparison.
pub fn probe_matches(existing: &Value, expected: &Value) -> bool {
    let num = |v: &Value, k: &str| {
        v.pointer(&format!("/properties/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let s = |v: &Value, k: &str| str_at(v, &format!("/properties/{k}")).map(str::to_owned);
    name_of(existing).eq_ignore_ascii_case(name_of(expected))
        && num(existing, "port") == num(expected, "port")
        && eq_ci(
            s(existing, "protocol").as_deref(),
            s(expected, "protocol").as_deref(),
        )
        && eq_ci(
            s(existing, "requestPath").as_deref(),
            s(expected, "requestPath").as_deref(),
        )
        && num(existing, "intervalInSeconds") == num(expected, "intervalInSeconds")
        && num(existing, "probeThreshold") == num(expected, "probeThreshold")
}

/// `findRule` / `equalLoadBalancingRulePropertiesFormat` (with `wantLB`).
pub fn rule_matches(existing: &Value, expected: &Value) -> bool {
    if !name_of(existing).eq_ignore_ascii_case(name_of(expected)) {
        return false;
    }
    let (s, t) = (&existing["properties"], &expected["properties"]);
    let id = |v: &Value, k: &str| {
        v.get(k)
            .and_then(|r| r.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let sub_eq = |k: &str| match (id(s, k), id(t, k)) {
        (None, None) => true,
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(&b),
        _ => false,
    };
    let flag = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let tcp = s.get("protocol").and_then(Value::as_str) == Some("Tcp");
    let mut same = s.get("protocol") == t.get("protocol")
        && (!tcp || flag(s, "enableTcpReset") == flag(t, "enableTcpReset"))
        && sub_eq("frontendIPConfiguration")
        && sub_eq("backendAddressPool")
        && s.get("loadDistribution") == t.get("loadDistribution")
        && s.get("frontendPort") == t.get("frontendPort")
        && s.get("backendPort") == t.get("backendPort")
        && sub_eq("probe")
        && s.get("enableFloatingIP") == t.get("enableFloatingIP")
        && flag(s, "disableOutboundSnat") == flag(t, "disableOutboundSnat");
    if let (Some(a), Some(b)) = (s.get("idleTimeoutInMinutes"), t.get("idleTimeoutInMinutes"))
        && !a.is_null()
        && !b.is_null()
    {
        same = same && a == b;
    }
    same
}

/// Removes the Service's items no longer expected and adds the missing ones
/// (`reconcileLBProbes` / `reconcileLBRules`); whether anything changed.
pub(super) fn reconcile_list(
    list: &mut Vec<Value>,
    expected: &[Value],
    service: &Service,
    matches: fn(&Value, &Value) -> bool,
) -> bool {
    let mut dirty = false;
    let before = list.len();
    list.retain(|item| {
        !owned_by(name_of(item), service) || expected.iter().any(|e| matches(item, e))
    });
    dirty |= list.len() != before;
    for e in expected {
        if !list.iter().any(|item| matches(item, e)) {
            list.push(e.clone());
            dirty = true;
        }
    }
    dirty
}
