//! Network load balancing's data plane: what target-pool forwarding rules carry, through
//! the shared reconciler and proxies ([`mock_cloud::reconcile`], [`mock_cloud::Proxy`]).
//!
//! For each forwarding rule whose `target` is a target pool and whose last operation
//! finished, the mock binds `IPAddress:port` for every port of `portRange` or `ports`
//! (one proxy per port; cloud-provider-gcp writes `portRange` as the Service's
//! `min-max` port, `loadBalancerPortRange`, so a Service with ports 8080 and 8443 gets
//! all 364 ports between them: ranges wider than [`MAX_PORTS`] are not served at all), TCP or UDP by `IPProtocol`,
//! and proxies to the *same port* on each pool instance's `networkIP` that is `RUNNING`:
//! GCE's network load balancer keeps the destination (the forwarding rule's IP and port)
//! and the node's kube-proxy serves the Service port, which loopback cannot do with the
//! VIP as destination, so the mock sends to the node's own IP at that port (the same
//! idea as floating IP in `mocks/azure`).
//!
//! Members are decided by the pool's legacy HTTP health check (`port`, `requestPath`,
//! `checkIntervalSec`, `timeoutSec`, `healthyThreshold`, `unhealthyThreshold`); with none,
//! every member is in. Health-check probes are not subject to firewalls (GCE needs
//! `k8s-<cluster>-node-http-hc` for its probers' ranges; the mock's probes come from
//! loopback).
//!
//! Sources are decided by the VPC firewall (cloud-provider-gcp writes `k8s-fw-<lb>` with
//! the Service's `loadBalancerSourceRanges`): a source is allowed when some enabled
//! INGRESS firewall of the instances' network allows the protocol and port, has empty
//! `targetTags` or shares a tag with a pool member, and whose `sourceRanges` contain it.
//! Approximations: `denied` rules and `sourceTags` are ignored, and the allow list is the
//! union over the members (one list per listener).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mock_cloud::{Backend, Cidr, ExpectedCodes, HealthCheck, Planner, Probe, Protocol, Reconciler};
use serde_json::Value;

use crate::Shared;
use crate::compute::{parse_port_range, rule_ports};
use crate::path::{self, Scope};
use crate::state::{Cloud, Instance, Key, Kind};

/// How often the reconciler runs when nothing wakes it.
const RECONCILE_PERIOD: Duration = Duration::from_millis(100);
/// The widest port range served.
pub const MAX_PORTS: u32 = 256;
/// Nothing in 127/8 matches this: the allow list of a listener nobody may reach.
const NOBODY: &str = "255.255.255.255/32";

/// One listener.
pub type ListenerPlan = mock_cloud::RuleListener;

fn doc<'a>(cloud: &'a Cloud, url: &str, kind: Kind) -> Option<&'a Value> {
    let r = path::parse_ref(url).ok()?;
    cloud
        .docs
        .get(&Key {
            kind,
            scope: r.scope,
            name: r.name,
        })
        .map(|d| &d.value)
}

fn member<'a>(cloud: &'a Cloud, url: &str) -> Option<&'a Instance> {
    let r = path::parse_ref(url).ok()?;
    let Scope::Zone(z) = &r.scope else {
        return None;
    };
    cloud.instance_in(z, &r.name)
}

fn health_check(hc: &Value) -> Option<(HealthCheck, u16)> {
    let port = u16::try_from(hc["port"].as_u64().unwrap_or(80)).ok()?;
    let secs = |f: &str, d: u64| hc[f].as_u64().unwrap_or(d).max(1);
    let count = |f: &str| {
        u32::try_from(hc[f].as_u64().unwrap_or(2))
            .unwrap_or(2)
            .max(1)
    };
    Some((
        HealthCheck {
            probe: Probe::Http {
                path: hc["requestPath"].as_str().unwrap_or("/").to_string(),
                expected: ExpectedCodes::default(),
            },
            interval: Duration::from_secs(secs("checkIntervalSec", 5)),
            timeout: Duration::from_secs(secs("timeoutSec", 5)),
            rise: count("healthyThreshold"),
            fall: count("unhealthyThreshold"),
            fail_open: false,
        },
        port,
    ))
}

/// Whether a firewall `allowed` entry admits `protocol` on `port`.
fn allows(entry: &Value, protocol: Protocol, port: u16) -> bool {
    let proto = entry["IPProtocol"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let proto_ok = match proto.as_str() {
        "all" => true,
        "tcp" | "6" => protocol == Protocol::Tcp,
        "udp" | "17" => protocol == Protocol::Udp,
        _ => false,
    };
    if !proto_ok {
        return false;
    }
    match entry["ports"].as_array() {
        None => true,
        Some(list) if list.is_empty() => true,
        Some(list) => list
            .iter()
            .filter_map(|p| p.as_str().and_then(parse_port_range))
            .any(|(a, b)| (a..=b).contains(&port)),
    }
}

/// The sources the firewalls let reach `port` of the members over `protocol`.
pub fn firewall_sources(
    cloud: &Cloud,
    members: &[&Instance],
    protocol: Protocol,
    port: u16,
) -> Vec<Cidr> {
    let network = cloud.ctx.network_url();
    let mut out: Vec<Cidr> = Vec::new();
    for (_, d) in cloud.docs_of(Kind::Firewall, None) {
        let f = &d.value;
        let same_network = f["network"]
            .as_str()
            .is_some_and(|n| path::parse_ref(n).ok() == path::parse_ref(&network).ok());
        if !same_network
            || f["disabled"].as_bool() == Some(true)
            || f["direction"].as_str() != Some("INGRESS")
        {
            continue;
        }
        if !f["allowed"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| allows(e, protocol, port))
        {
            continue;
        }
        let targets: Vec<&str> = f["targetTags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !targets.is_empty()
            && !members
                .iter()
                .any(|m| m.tags.iter().any(|t| targets.contains(&t.as_str())))
        {
            continue;
        }
        for r in f["sourceRanges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if let Ok(c) = Cidr::parse(r)
                && !out.contains(&c)
            {
                out.push(c);
            }
        }
    }
    if out.is_empty() {
        out.push(Cidr::parse(NOBODY).expect("valid"));
    }
    out
}

/// What should be served now.
pub fn plan(cloud: &Cloud) -> Vec<ListenerPlan> {
    let mut plans = Vec::new();
    for (key, d) in cloud.docs_of(Kind::ForwardingRule, None) {
        if cloud.pending.contains_key(key) {
            continue;
        }
        let fr = &d.value;
        let Some(pool) = fr["target"]
            .as_str()
            .and_then(|t| doc(cloud, t, Kind::TargetPool))
        else {
            continue;
        };
        let Some(ip) = fr["IPAddress"]
            .as_str()
            .and_then(|s| s.parse::<IpAddr>().ok())
        else {
            continue;
        };
        let protocols: &[Protocol] = match fr["IPProtocol"].as_str() {
            Some("TCP") => &[Protocol::Tcp],
            Some("UDP") => &[Protocol::Udp],
            Some("L3_DEFAULT") => &[Protocol::Tcp, Protocol::Udp],
            _ => continue,
        };
        let members: Vec<&Instance> = pool["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u.as_str().and_then(|u| member(cloud, u)))
            .filter(|i| i.status == "RUNNING")
            .collect();
        let health = pool["healthChecks"][0]
            .as_str()
            .and_then(|u| doc(cloud, u, Kind::HttpHealthCheck))
            .and_then(health_check);
        for (a, b) in rule_ports(fr) {
            if u32::from(b) - u32::from(a) + 1 > MAX_PORTS {
                tracing::debug!(rule = %key.name, "port range {a}-{b} too wide to serve");
                continue;
            }
            for port in a..=b {
                let backends: Vec<Backend> = members
                    .iter()
                    .map(|m| Backend {
                        address: SocketAddr::new(IpAddr::V4(m.network_ip()), port),
                        monitor: health
                            .as_ref()
                            .map(|(_, p)| SocketAddr::new(IpAddr::V4(m.network_ip()), *p)),
                    })
                    .collect();
                for protocol in protocols {
                    plans.push(ListenerPlan {
                        rule: key.name.clone(),
                        protocol: *protocol,
                        listen: SocketAddr::new(ip, port),
                        backends: backends.clone(),
                        allowed: firewall_sources(cloud, &members, *protocol, port),
                        health: health.as_ref().map(|(h, _)| h.clone()),
                    });
                }
            }
        }
    }
    plans
}

struct GcpPlanner {
    shared: Arc<Shared>,
    planned: Option<(u64, u64)>,
}

impl Planner for GcpPlanner {
    type Listener = ListenerPlan;
    const LABEL: &'static str = "gcp data plane";

    fn plan(&mut self, retrying: bool) -> Option<Vec<ListenerPlan>> {
        // Planning walks every forwarding rule, pool, health check and firewall; it runs
        // on a copy so that Compute requests do not wait for it behind the store's lock.
        let snapshot = {
            let cloud = self.shared.cloud();
            let stamp = (self.shared.wake.rev(), cloud.transitions);
            let stale = self.planned != Some(stamp) || retrying;
            self.planned = Some(stamp);
            stale.then(|| cloud.clone())
        };
        snapshot.map(|cloud| plan(&cloud))
    }
}

pub fn start(shared: Arc<Shared>) -> Reconciler {
    let wake = shared.wake.clone();
    Reconciler::start(
        GcpPlanner {
            shared,
            planned: None,
        },
        wake,
        RECONCILE_PERIOD,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn firewall_entries() {
        assert!(allows(
            &json!({"IPProtocol": "tcp", "ports": ["80"]}),
            Protocol::Tcp,
            80
        ));
        assert!(!allows(
            &json!({"IPProtocol": "tcp", "ports": ["80"]}),
            Protocol::Udp,
            80
        ));
        assert!(allows(
            &json!({"IPProtocol": "tcp", "ports": ["80-90"]}),
            Protocol::Tcp,
            85
        ));
        assert!(!allows(
            &json!({"IPProtocol": "tcp", "ports": ["80-90"]}),
            Protocol::Tcp,
            91
        ));
        assert!(allows(&json!({"IPProtocol": "all"}), Protocol::Udp, 1));
        assert!(allows(&json!({"IPProtocol": "udp"}), Protocol::Udp, 53));
    }
}
