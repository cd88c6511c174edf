//! The ELB classic data plane: what the load balancer nodes would do. Every listener of a
//! classic load balancer binds `vip:LoadBalancerPort` (the VIP is what its `DNSName`
//! resolves to through [`crate::Admin::resolve`]) and proxies TCP to the registered,
//! running instances' `privateIp:InstancePort` with [`mock_cloud::Proxy`]. The load
//! balancer's security groups decide who may connect: the CIDRs of their TCP ingress
//! rules covering the port (no group: everyone), as AWS filters at the ELB's groups. The
//! health check target (`TCP:port`, `HTTP:port/path`) probes each instance, and an
//! unhealthy instance gets no traffic (`DescribeInstanceHealth` still answers from the
//! instance state).
//!
//! ELBv2 network load balancers are served the same way once `active`: each listener
//! binds `vip:port` and forwards to its target group's registered instances
//! `privateIp:port`, probed with the target group's health check (no security groups:
//! everyone may connect, as for an NLB without them). TCP and TLS listeners proxy TCP,
//! UDP listeners proxy datagrams (the shared engine's UDP proxy, as mock-openstack serves
//! Octavia UDP listeners), TCP_UDP listeners both on the same port. Health checks of any
//! target group are TCP or HTTP(S) on the health-check port, never UDP (AWS rule: ELBv2
//! CreateTargetGroup `HealthCheckProtocol`).
//!
//! The shared reconciler ([`mock_cloud::reconcile`]) asks [`plan`] after every request
//! (but `Describe*`) and every [`RECONCILE_PERIOD`], and starts, updates and stops proxies
//! to match. Approximations: the
//! probe interval is fixed and short (not the configured 5–300 s), SSL/HTTPS listeners are
//! served as plain TCP.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mock_cloud::{
    Backend, Cidr, ExpectedCodes, HealthCheck, Planner, Probe, Protocol, ProxyConfig, Reconciler,
};

use crate::Shared;
use crate::elb::ClassicLb;
use crate::state::{Cloud, InstanceState};

/// How often the reconciler runs when no request wakes it.
pub(crate) const RECONCILE_PERIOD: Duration = Duration::from_millis(100);

/// One listener as the data plane serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenerPlan {
    pub protocol: Protocol,
    pub listen: SocketAddr,
    pub backends: Vec<Backend>,
    pub allowed: Vec<Cidr>,
    pub health: Option<HealthCheck>,
}

/// `TCP:30080` / `HTTP:31000/healthz` as a probe on each instance's private IP.
pub(crate) fn health_of(target: &str) -> Option<(Probe, u16)> {
    let (proto, rest) = target.split_once(':')?;
    let (port, path) = match rest.split_once('/') {
        Some((port, path)) => (port, format!("/{path}")),
        None => (rest, "/".to_string()),
    };
    let port: u16 = port.parse().ok()?;
    let probe = match proto.to_ascii_uppercase().as_str() {
        "TCP" | "SSL" => Probe::Tcp,
        "HTTP" | "HTTPS" => Probe::Http {
            path,
            expected: ExpectedCodes::parse("200").ok()?,
        },
        _ => return None,
    };
    Some((probe, port))
}

fn allowed_cidrs(cloud: &Cloud, lb: &ClassicLb, port: i64) -> Vec<Cidr> {
    if lb.security_groups.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for g in cloud
        .security_groups
        .iter()
        .filter(|g| lb.security_groups.contains(&g.id))
    {
        for perm in &g.ingress {
            let proto_ok = perm.protocol == "tcp" || perm.protocol == "-1" || perm.protocol == "6";
            let covers = perm.protocol == "-1"
                || (perm.from_port.unwrap_or(0) <= port && port <= perm.to_port.unwrap_or(65535));
            if proto_ok && covers {
                out.extend(perm.cidrs.iter().filter_map(|c| Cidr::parse(c).ok()));
            }
        }
    }
    if out.is_empty() {
        // Groups that admit nobody: a prefix no client address falls in.
        out.extend(Cidr::parse("255.255.255.255/32").ok());
    }
    out
}

/// What should be served now.
pub(crate) fn plan(cloud: &mut Cloud) -> Vec<ListenerPlan> {
    // Looking does not count as a read of the lifecycle (as the admin API's view).
    let active: Vec<String> = cloud
        .elbv2
        .lbs
        .values_mut()
        .filter_map(|lb| {
            let done = lb.lifecycle.peek() == mock_cloud::Phase::Done;
            (lb.kind == "network" && done).then(|| lb.arn.clone())
        })
        .collect();
    let cloud = &*cloud;
    let mut out = Vec::new();
    for lb in cloud.elbs.values() {
        let health = health_of(&lb.health_check.target);
        for l in &lb.listeners {
            let (Ok(port), Ok(instance_port)) =
                (u16::try_from(l.port), u16::try_from(l.instance_port))
            else {
                continue;
            };
            let backends = lb
                .instances
                .iter()
                .filter_map(|id| cloud.instance(id))
                .filter(|i| i.state == InstanceState::Running)
                .map(|i| Backend {
                    address: SocketAddr::new(IpAddr::V4(i.private_ip), instance_port),
                    monitor: health
                        .as_ref()
                        .map(|(_, p)| SocketAddr::new(IpAddr::V4(i.private_ip), *p)),
                })
                .collect();
            out.push(ListenerPlan {
                protocol: Protocol::Tcp,
                listen: SocketAddr::new(IpAddr::V4(lb.vip), port),
                backends,
                allowed: allowed_cidrs(cloud, lb, l.port),
                health: health.as_ref().map(|(probe, _)| HealthCheck {
                    probe: probe.clone(),
                    interval: Duration::from_millis(200),
                    timeout: Duration::from_millis(500),
                    rise: 1,
                    fall: 1,
                    // A classic ELB with no healthy instance answers nothing.
                    fail_open: false,
                }),
            });
        }
    }
    for lb in cloud.elbv2.lbs.values() {
        if !active.contains(&lb.arn) {
            continue;
        }
        for l in cloud
            .elbv2
            .listeners
            .values()
            .filter(|l| l.lb_arn == lb.arn)
        {
            let Ok(port) = u16::try_from(l.port) else {
                continue;
            };
            let Some(tg) = l
                .actions
                .iter()
                .find_map(|(_, arn)| cloud.elbv2.target_groups.get(arn))
            else {
                continue;
            };
            let probe = match tg.health.protocol.to_ascii_uppercase().as_str() {
                "HTTP" | "HTTPS" => ExpectedCodes::parse("200")
                    .ok()
                    .map(|expected| Probe::Http {
                        path: tg.health.path.clone().unwrap_or_else(|| "/".into()),
                        expected,
                    }),
                _ => Some(Probe::Tcp),
            };
            let protocols: &[Protocol] = match l.protocol.as_str() {
                "UDP" => &[Protocol::Udp],
                "TCP_UDP" => &[Protocol::Tcp, Protocol::Udp],
                _ => &[Protocol::Tcp],
            };
            let backends: Vec<Backend> = tg
                .targets
                .iter()
                .filter_map(|(id, p)| Some((cloud.instance(id)?, u16::try_from(*p).ok()?)))
                .filter(|(i, _)| i.state == InstanceState::Running)
                .map(|(i, p)| {
                    let hc_port = tg.health.port.parse::<u16>().unwrap_or(p);
                    Backend {
                        address: SocketAddr::new(IpAddr::V4(i.private_ip), p),
                        monitor: Some(SocketAddr::new(IpAddr::V4(i.private_ip), hc_port)),
                    }
                })
                .collect();
            let health = probe.map(|probe| HealthCheck {
                probe,
                interval: Duration::from_millis(200),
                timeout: Duration::from_millis(500),
                rise: 1,
                fall: 1,
                // NLBs fail open when every target is unhealthy (AWS docs, "Health checks
                // for Network Load Balancer target groups"): a UDP Service whose TCP
                // health check on the traffic port finds nothing still gets traffic.
                fail_open: true,
            });
            for protocol in protocols {
                out.push(ListenerPlan {
                    protocol: *protocol,
                    listen: SocketAddr::new(IpAddr::V4(lb.vip), port),
                    backends: backends.clone(),
                    allowed: Vec::new(),
                    health: health.clone(),
                });
            }
        }
    }
    out
}

/// Proxies are keyed by address and protocol: a TCP_UDP listener has two on one port.
type Key = (SocketAddr, Protocol);

impl mock_cloud::Listener for ListenerPlan {
    type Key = Key;

    fn key(&self) -> Key {
        (self.listen, self.protocol)
    }

    fn config(&self) -> ProxyConfig {
        ProxyConfig {
            protocol: self.protocol,
            listen: self.listen,
            backends: self.backends.clone(),
            allowed_cidrs: self.allowed.clone(),
            health: self.health.clone(),
        }
    }
}

/// The ELB nodes' planner for the shared reconciler ([`mock_cloud::reconcile`]): plans
/// on every pass.
struct Nodes {
    shared: Arc<Shared>,
}

impl Planner for Nodes {
    type Listener = ListenerPlan;

    const LABEL: &'static str = "elb data plane";

    fn plan(&mut self, _retrying: bool) -> Option<Vec<ListenerPlan>> {
        Some(plan(&mut self.shared.cloud()))
    }
}

/// Starts the reconciler: after every request but `Describe*` and every
/// [`RECONCILE_PERIOD`].
pub(crate) fn start(shared: Arc<Shared>) -> Reconciler {
    let wake = shared.wake.clone();
    Reconciler::start(Nodes { shared }, wake, RECONCILE_PERIOD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_targets() {
        assert_eq!(health_of("TCP:30080").map(|h| h.1), Some(30080));
        let Some((Probe::Http { path, .. }, 31000)) = health_of("HTTP:31000/healthz") else {
            panic!("http target");
        };
        assert_eq!(path, "/healthz");
        assert!(health_of("bogus").is_none());
        assert!(health_of("TCP:x").is_none());
    }
}
