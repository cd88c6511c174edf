//! Octavia's data plane: what the amphorae would do. Every listener of a serving load
//! balancer binds `vip_address:protocol_port` (and the same port on any floating IP bound
//! to the VIP port, which is the address CPO reports when it uses floating IPs) and
//! proxies to its default pool's members `address:protocol_port`, through
//! [`mock_cloud::Proxy`]. The pool's health monitor drives each member's
//! `operating_status`, which the API then shows (members, pools, load balancers and the
//! `/status` tree); listener `allowed_cidrs` filter clients.
//!
//! The Octavia model stays synchronous and HTTP-free: the shared reconciler
//! ([`mock_cloud::reconcile`]) asks [`plan`] for the wanted listeners (reading the model
//! without counting reads, so lifecycle modes are unaffected), starts, updates and stops
//! proxies to match, and this module writes member health back. It runs
//! after every write request and every [`RECONCILE_PERIOD`] (time-based lifecycles).
//!
//! What is served: load balancers that are ACTIVE or PENDING_UPDATE (an amphora keeps its
//! old configuration while an update is under way), their ACTIVE / PENDING_UPDATE
//! listeners with `admin_state_up`, and members that have been created (a PENDING_DELETE
//! member serves until the delete completes). Deleting a listener or the load balancer
//! stops the proxy as soon as the delete is accepted.
//!
//! Member `monitor_address`/`monitor_port` redirect the probes (CPO points them at the
//! healthCheckNodePort for `externalTrafficPolicy: Local`). Approximations: `http_method`
//! and member weights are ignored; HTTPS, TLS-HELLO, PING and SCTP monitors are TCP connects; SCTP listeners are
//! not served.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mock_cloud::{
    Backend, Cidr, ExpectedCodes, HealthCheck, MemberStatus, Planner, Probe, Protocol, Proxy,
    ProxyConfig, Reconciler,
};
use serde_json::Value;

use crate::Shared;
use crate::octavia::model::{Child, ChildProv, Kind, Lbaas, Op, Prov};
use crate::state::Cloud;

/// How often the reconciler runs when nothing wakes it.
pub(crate) const RECONCILE_PERIOD: Duration = Duration::from_millis(100);

/// One address a listener serves on, and what it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenerPlan {
    pub listener_id: String,
    pub protocol: Protocol,
    pub listen: SocketAddr,
    /// `(member id, address:protocol_port and monitor target)`.
    pub members: Vec<(String, Backend)>,
    pub allowed: Vec<Cidr>,
    pub health: Option<HealthCheck>,
}

fn str_of<'a>(attrs: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    attrs.get(key).and_then(Value::as_str)
}

fn admin_up(attrs: &serde_json::Map<String, Value>) -> bool {
    attrs.get("admin_state_up") != Some(&Value::Bool(false))
}

fn port_of(attrs: &serde_json::Map<String, Value>) -> Option<u16> {
    attrs
        .get("protocol_port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
}

/// The health check an Octavia health monitor stands for.
fn health_check(attrs: &serde_json::Map<String, Value>) -> HealthCheck {
    let secs = |key: &str, default: u64| {
        Duration::from_secs(attrs.get(key).and_then(Value::as_u64).unwrap_or(default))
    };
    let count = |key: &str, default: u32| {
        attrs
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(default)
    };
    let probe = match str_of(attrs, "type") {
        Some("HTTP") => Probe::Http {
            path: str_of(attrs, "url_path").unwrap_or("/").to_string(),
            expected: str_of(attrs, "expected_codes")
                .and_then(|c| ExpectedCodes::parse(c).ok())
                .unwrap_or_default(),
        },
        Some("UDP-CONNECT") => Probe::Udp,
        _ => Probe::Tcp,
    };
    HealthCheck {
        probe,
        interval: secs("delay", 5),
        timeout: secs("timeout", 5),
        // Octavia: rise = max_retries, fall = max_retries_down (default 3).
        rise: count("max_retries", 3),
        fall: count("max_retries_down", 3),
        // Octavia sends nothing to a pool whose members are all down.
        fail_open: false,
    }
}

/// Every child grouped by its parent, built in one pass so a plan costs one walk over the
/// children however many load balancers there are (with 100 load balancers of 50 members
/// each, a scan per listener and per pool dominated the mock's CPU).
#[derive(Default)]
struct Children<'a> {
    /// Listeners by load balancer, in creation order.
    listeners: HashMap<&'a str, Vec<&'a Child>>,
    /// Members by pool, in creation order.
    members: HashMap<&'a str, Vec<&'a Child>>,
    monitors: HashMap<&'a str, &'a Child>,
}

impl<'a> Children<'a> {
    fn index(lbaas: &'a Lbaas) -> Self {
        let mut out = Children::default();
        for c in lbaas.children.values() {
            match (c.kind, c.pool_id.as_deref()) {
                (Kind::Listener, _) => out.listeners.entry(&c.lb_id).or_default().push(c),
                (Kind::Member, Some(pool)) => out.members.entry(pool).or_default().push(c),
                (Kind::Monitor, Some(pool)) => {
                    out.monitors.entry(pool).or_insert(c);
                }
                _ => {}
            }
        }
        for list in out.listeners.values_mut().chain(out.members.values_mut()) {
            list.sort_by_key(|c| c.seq);
        }
        out
    }

    /// The pool's members that carry traffic, in creation order.
    fn pool_backends(&self, pool_id: &str) -> Vec<(String, Backend)> {
        self.members
            .get(pool_id)
            .into_iter()
            .flatten()
            .filter(|m| m.prov != ChildProv::Pending(Op::Create) && admin_up(&m.attrs))
            .filter_map(|m| Some((m.id.clone(), member_backend(&m.attrs)?)))
            .collect()
    }

    /// The pool's health monitor, once created and enabled.
    fn pool_health_check(&self, pool_id: &str) -> Option<HealthCheck> {
        self.monitors
            .get(pool_id)
            .filter(|hm| hm.prov != ChildProv::Pending(Op::Create) && admin_up(&hm.attrs))
            .map(|hm| health_check(&hm.attrs))
    }
}

/// A member's traffic address and, when `monitor_address` or `monitor_port` is set, where
/// its probes go instead (Octavia fills the other half from the member).
fn member_backend(attrs: &serde_json::Map<String, Value>) -> Option<Backend> {
    let ip: IpAddr = str_of(attrs, "address")?.parse().ok()?;
    let port = port_of(attrs)?;
    let monitor_ip = str_of(attrs, "monitor_address").and_then(|a| a.parse::<IpAddr>().ok());
    let monitor_port = attrs
        .get("monitor_port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok());
    let monitor = (monitor_ip.is_some() || monitor_port.is_some())
        .then(|| SocketAddr::new(monitor_ip.unwrap_or(ip), monitor_port.unwrap_or(port)));
    Some(Backend {
        address: SocketAddr::new(ip, port),
        monitor,
    })
}

fn serving_lb(prov: &Prov) -> bool {
    matches!(prov, Prov::Active | Prov::Pending(Op::Update, _))
}

fn serving_child(prov: ChildProv) -> bool {
    matches!(prov, ChildProv::Active | ChildProv::Pending(Op::Update))
}

/// What the data plane should look like for the current model.
pub(crate) fn plan(cloud: &Cloud) -> Vec<ListenerPlan> {
    let lbaas: &Lbaas = &cloud.lbaas;
    let children = Children::index(lbaas);
    let mut plans = Vec::new();
    for lb in lbaas.lbs.values().filter(|lb| serving_lb(&lb.prov)) {
        let mut addresses = vec![lb.vip_address];
        addresses.extend(
            cloud
                .l3
                .floatingips
                .values()
                .filter(|f| f.port_id.as_deref() == Some(lb.vip_port_id.as_str()))
                .map(|f| f.address),
        );
        for listener in children.listeners.get(lb.id.as_str()).into_iter().flatten() {
            if !serving_child(listener.prov) || !admin_up(&listener.attrs) {
                continue;
            }
            let protocol = match str_of(&listener.attrs, "protocol") {
                Some("UDP") => Protocol::Udp,
                Some("SCTP") | None => continue,
                Some(_) => Protocol::Tcp,
            };
            let Some(port) = port_of(&listener.attrs) else {
                continue;
            };
            let allowed: Vec<Cidr> = listener
                .attrs
                .get("allowed_cidrs")
                .and_then(Value::as_array)
                .map(|cidrs| {
                    cidrs
                        .iter()
                        .filter_map(Value::as_str)
                        .filter_map(|c| Cidr::parse(c).ok())
                        .collect()
                })
                .unwrap_or_default();
            let pool = str_of(&listener.attrs, "default_pool_id")
                .and_then(|id| lbaas.children.get(id))
                .filter(|p| p.prov != ChildProv::Pending(Op::Create) && admin_up(&p.attrs));
            let (members, health) = match pool {
                None => (Vec::new(), None),
                Some(pool) => (
                    children.pool_backends(&pool.id),
                    children.pool_health_check(&pool.id),
                ),
            };
            for address in &addresses {
                plans.push(ListenerPlan {
                    listener_id: listener.id.clone(),
                    protocol,
                    listen: SocketAddr::new(*address, port),
                    members: members.clone(),
                    allowed: allowed.clone(),
                    health: health.clone(),
                });
            }
        }
    }
    plans
}

/// Proxies keyed by (listener, listen address, protocol).
type Key = (String, SocketAddr, Protocol);

impl mock_cloud::Listener for ListenerPlan {
    type Key = Key;

    fn key(&self) -> Key {
        (self.listener_id.clone(), self.listen, self.protocol)
    }

    fn config(&self) -> ProxyConfig {
        ProxyConfig {
            protocol: self.protocol,
            listen: self.listen,
            backends: self.members.iter().map(|(_, b)| *b).collect(),
            allowed_cidrs: self.allowed.clone(),
            health: self.health.clone(),
        }
    }
}

/// What the model looked like when it was last planned: writes seen, transitions
/// completed. Equal stamps mean the plan still holds.
type Stamp = (u64, u64);

/// Octavia's planner for the shared reconciler ([`mock_cloud::reconcile`]).
struct Amphorae {
    shared: Arc<Shared>,
    planned: Option<Stamp>,
}

impl Planner for Amphorae {
    type Listener = ListenerPlan;

    /// Re-plans only if the model changed since the last plan (or a bind is still
    /// failing).
    ///
    /// Why the stamp: with 100 load balancers of 50 members a plan walks 5,000 members
    /// under the cloud lock, and most passes (the periodic tick, reads) change nothing;
    /// planning them anyway held up the API requests of the CCM under test (`bench lb`).
    fn plan(&mut self, retrying: bool) -> Option<Vec<ListenerPlan>> {
        let mut cloud = self.shared.cloud();
        cloud.settle_all_lbs(false);
        // Read under the lock: a write bumps the counter after releasing it, so a plan
        // made here either includes the write or is followed by another pass.
        let stamp = (self.shared.wake.rev(), cloud.lbaas.transitions);
        let stale = self.planned != Some(stamp) || retrying;
        self.planned = Some(stamp);
        stale.then(|| plan(&cloud))
    }

    fn observe(&mut self, running: &[(&ListenerPlan, &Proxy)]) {
        write_health(&self.shared, running);
    }
}

/// Starts the reconciler: after every write request and every [`RECONCILE_PERIOD`].
pub(crate) fn start(shared: Arc<Shared>) -> Reconciler {
    let wake = shared.wake.clone();
    Reconciler::start(
        Amphorae {
            shared,
            planned: None,
        },
        wake,
        RECONCILE_PERIOD,
    )
}

/// Member health: the worst status any of the member's proxies reports, kept only for
/// members not ONLINE (the API shows ONLINE for the rest).
fn write_health(shared: &Shared, running: &[(&ListenerPlan, &Proxy)]) {
    let mut health: HashMap<&str, MemberStatus> = HashMap::new();
    for (plan, proxy) in running {
        let statuses: HashMap<SocketAddr, MemberStatus> = proxy.statuses().into_iter().collect();
        for (member_id, backend) in &plan.members {
            let Some(&status) = statuses.get(&backend.address) else {
                continue;
            };
            match health.get_mut(member_id.as_str()) {
                Some(seen) if status == MemberStatus::Error => *seen = status,
                Some(_) => {}
                // The first proxy to report decides, unless a later one says ERROR; an
                // ONLINE first answer is remembered as such so a later one cannot replace it.
                None => {
                    health.insert(member_id.as_str(), status);
                }
            }
        }
    }
    let health: BTreeMap<String, MemberStatus> = health
        .into_iter()
        .filter(|(_, s)| *s != MemberStatus::Online)
        .map(|(id, s)| (id.to_string(), s))
        .collect();
    let mut cloud = shared.cloud();
    if cloud.lbaas.member_health != health {
        cloud.lbaas.member_health = health;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> serde_json::Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn plan_follows_lifecycle_members_monitor_and_floating_ips() {
        let mut c = Cloud::new("nova");
        let subnet = c.subnets[0].id.clone();
        c.lbaas.policies.default = mock_cloud::Mode::Reads { n: 1 };
        let body = json!({"vip_subnet_id": subnet, "listeners": [{"protocol": "TCP",
            "protocol_port": 8080, "allowed_cidrs": ["127.0.0.0/8", "bogus"],
            "default_pool": {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
            "members": [{"address": "127.10.0.10", "protocol_port": 30000, "monitor_port": 31000},
                        {"address": "127.10.0.11", "protocol_port": 30000, "admin_state_up": false}],
            "healthmonitor": {"type": "HTTP", "delay": 2, "timeout": 1, "max_retries": 1,
                              "url_path": "/healthz", "expected_codes": "200-299"}}},
            {"protocol": "UDP", "protocol_port": 8080}]});
        let id = c.create_lb(obj(body)).expect("create");
        assert!(plan(&c).is_empty(), "nothing served while PENDING_CREATE");
        c.settle_lb(&id, true);
        c.settle_lb(&id, true);
        let plans = plan(&c);
        assert_eq!(plans.len(), 2);
        let tcp = &plans[0];
        let vip = c.lbaas.lb(&id).expect("lb").vip_address;
        assert_eq!(tcp.listen, SocketAddr::new(vip, 8080));
        assert_eq!(tcp.protocol, Protocol::Tcp);
        assert_eq!(tcp.members.len(), 1, "admin-down member left out");
        assert_eq!(
            tcp.members[0].1,
            Backend {
                address: "127.10.0.10:30000".parse().expect("addr"),
                monitor: Some("127.10.0.10:31000".parse().expect("addr")),
            }
        );
        assert_eq!(tcp.allowed, vec![Cidr::parse("127.0.0.0/8").expect("cidr")]);
        let hc = tcp.health.as_ref().expect("monitor");
        assert_eq!(hc.interval, Duration::from_secs(2));
        assert_eq!((hc.rise, hc.fall), (1, 3));
        assert!(matches!(&hc.probe, Probe::Http { path, expected }
            if path == "/healthz" && expected.accepts(204)));
        assert_eq!(plans[1].protocol, Protocol::Udp);
        assert!(plans[1].members.is_empty(), "no pool: no backends");

        // A floating IP on the VIP port serves too.
        let vip_port = c.lbaas.lb(&id).expect("lb").vip_port_id.clone();
        let fip = "127.20.0.99".parse().expect("ip");
        c.l3.floatingips.insert(
            "f1".into(),
            crate::neutron::l3::FloatingIp {
                id: "f1".into(),
                address: fip,
                network_id: String::new(),
                port_id: Some(vip_port),
                fixed_ip: Some(vip),
                description: String::new(),
                created: jiff::Timestamp::now(),
                updated: jiff::Timestamp::now(),
            },
        );
        assert!(
            plan(&c)
                .iter()
                .any(|p| p.listen == SocketAddr::new(fip, 8080))
        );

        c.delete_lb(&id, true).expect("cascade");
        assert!(plan(&c).is_empty(), "PENDING_DELETE stops serving");
    }
}
