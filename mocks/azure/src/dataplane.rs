//! Azure Load Balancer's data plane: what the load balancers carry, through the shared
//! reconciler and proxies ([`mock_cloud::reconcile`], [`mock_cloud::Proxy`]).
//!
//! Every load-balancing rule of a load balancer whose last operation succeeded (its
//! `served` content, so an update in progress keeps the old behaviour) binds
//! `frontendIP:frontendPort` (TCP, UDP, or both for `All`) and proxies to each backend
//! pool member (NIC ipConfigurations that reference the pool, and IP-based
//! `loadBalancerBackendAddresses`) at the rule's `backendPort`. With
//! `enableFloatingIP: true` (what cloud-provider-azure sets by default) Azure delivers the
//! packet to the node with the frontend IP as destination, which loopback cannot do: the
//! mock sends it to the member's IP at the *frontend* port, and the simulated kube-proxy
//! serves LoadBalancer ports on the node IP.
//!
//! Probes (`Tcp` port; `Http` port and `requestPath`; `Https` as a TCP connect) decide
//! member health: `intervalInSeconds`, `probeThreshold` (or `numberOfProbes`) failures
//! take a member down, one success brings it back; with every member down nothing is
//! sent (Azure stops new flows).
//!
//! Sources are decided by the network security group (`nsg-ccm`): traffic to a
//! frontend is allowed only if an Inbound rule, in priority order, matching the
//! protocol, the destination (the frontend IP, `*`, or a prefix holding it; without
//! floating IP the member's IP) and the port (frontend port; without floating IP the
//! backend port) allows it; the default `DenyAllInBound` refuses the rest. Service tags: `*`,
//! `Internet` and `Any` are any client in 127/8 (the mock's "internet"),
//! `VirtualNetwork` is the VMs' 127.60.<block>/24. Approximation: a `Deny` for specific
//! sources above an `Allow` does not carve them out of it (the proxy takes an allow
//! list); a `Deny` of every source ends the walk, before the default `AllowVnetInBound`
//! too (upstream adds such a rule with `loadBalancerSourceRanges`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mock_cloud::{Backend, Cidr, ExpectedCodes, HealthCheck, Planner, Probe, Protocol, Reconciler};
use serde_json::Value;

use crate::Shared;
use crate::arm::path;
use crate::control::one_or_many;
use crate::state::{Cloud, PRIVATE_POOL, listener_ip};

/// How often the reconciler runs when nothing wakes it (time-based lifecycles).
const RECONCILE_PERIOD: Duration = Duration::from_millis(100);

/// One frontend listener.
pub type ListenerPlan = mock_cloud::RuleListener;

fn str_at<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("properties")?.get(field)?.as_str()
}

fn id_at<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("properties")?.get(field)?.get("id")?.as_str()
}

fn key(id: &str) -> String {
    path::resource_key(id)
}

/// Served content of every top-level document of a type.
fn served<'a>(cloud: &'a Cloud, ty: &str) -> Vec<&'a Value> {
    let info = path::type_info(ty).expect("known");
    cloud
        .docs_of(info)
        .into_iter()
        .filter_map(|(_, d)| d.served.as_ref())
        .collect()
}

/// Pool id (lowercased) -> member IPs.
fn pool_members(cloud: &Cloud) -> HashMap<String, Vec<IpAddr>> {
    let mut out: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for nic in served(cloud, path::NIC) {
        for cfg in nic["properties"]["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(ip) = str_at(cfg, "privateIPAddress").and_then(|s| s.parse().ok()) else {
                continue;
            };
            for pool in cfg["properties"]["loadBalancerBackendAddressPools"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(pid) = pool.get("id").and_then(Value::as_str) {
                    out.entry(key(pid)).or_default().push(ip);
                }
            }
        }
    }
    out
}

fn probe_check(probe: &Value) -> Option<(HealthCheck, u16)> {
    let p = probe.get("properties")?;
    let port = u16::try_from(p.get("port")?.as_u64()?).ok()?;
    let interval = p
        .get("intervalInSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(5)
        .max(1);
    let threshold = p
        .get("probeThreshold")
        .or_else(|| p.get("numberOfProbes"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1)
        .max(1);
    let probe = match p.get("protocol").and_then(Value::as_str) {
        Some(proto) if proto.eq_ignore_ascii_case("Http") => Probe::Http {
            path: p
                .get("requestPath")
                .and_then(Value::as_str)
                .unwrap_or("/")
                .to_string(),
            expected: ExpectedCodes::default(),
        },
        _ => Probe::Tcp,
    };
    Some((
        HealthCheck {
            probe,
            interval: Duration::from_secs(interval),
            timeout: Duration::from_secs(interval.min(5)),
            rise: 1,
            fall: threshold,
            fail_open: false,
        },
        port,
    ))
}

/// A port range of an NSG rule matches `port`.
fn port_matches(range: &str, port: u16) -> bool {
    let range = range.trim();
    if range == "*" {
        return true;
    }
    match range.split_once('-') {
        Some((lo, hi)) => match (lo.trim().parse::<u16>(), hi.trim().parse::<u16>()) {
            (Ok(lo), Ok(hi)) => (lo..=hi).contains(&port),
            _ => false,
        },
        None => range.parse::<u16>() == Ok(port),
    }
}

/// An NSG address prefix as CIDRs (`*`, service tags, CIDRs, addresses).
fn prefix_cidrs(prefix: &str, block: u8) -> Vec<Cidr> {
    let p = prefix.trim();
    match p.to_ascii_lowercase().as_str() {
        "*" | "internet" | "any" | "0.0.0.0/0" => vec![Cidr::parse("127.0.0.0/8").expect("valid")],
        "virtualnetwork" => {
            vec![Cidr::parse(&PRIVATE_POOL.cidr(block)).expect("valid")]
        }
        _ => Cidr::parse(p).map(|c| vec![c]).unwrap_or_default(),
    }
}

fn is_everyone(prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| {
        matches!(
            p.trim().to_ascii_lowercase().as_str(),
            "*" | "internet" | "any" | "0.0.0.0/0"
        )
    })
}

/// Nothing in 127/8 matches this: the allow list of a frontend nobody may reach.
const NOBODY: &str = "255.255.255.255/32";

/// The sources the NSG lets reach `frontend:port` over `protocol`.
pub fn nsg_allowed(
    nsg: Option<&Value>,
    frontend: IpAddr,
    port: u16,
    protocol: Protocol,
    block: u8,
) -> Vec<Cidr> {
    let mut rules: Vec<&Value> = nsg
        .and_then(|n| n["properties"]["securityRules"].as_array())
        .into_iter()
        .flatten()
        .collect();
    rules.sort_by_key(|r| r["properties"]["priority"].as_u64().unwrap_or(u64::MAX));
    let mut allowed = Vec::new();
    let mut denied_all = false;
    for rule in rules {
        let p = &rule["properties"];
        if !p["direction"]
            .as_str()
            .is_some_and(|d| d.eq_ignore_ascii_case("Inbound"))
        {
            continue;
        }
        let proto = p["protocol"].as_str().unwrap_or("*");
        let proto_ok = proto == "*"
            || (proto.eq_ignore_ascii_case("Tcp") && protocol == Protocol::Tcp)
            || (proto.eq_ignore_ascii_case("Udp") && protocol == Protocol::Udp);
        if !proto_ok {
            continue;
        }
        let dests = one_or_many(p, "destinationAddressPrefix", "destinationAddressPrefixes");
        let dest_ok = dests.iter().any(|d| {
            is_everyone(std::slice::from_ref(d))
                || Cidr::parse(d).is_ok_and(|c| c.contains(frontend))
        });
        if !dest_ok {
            continue;
        }
        let ports = one_or_many(p, "destinationPortRange", "destinationPortRanges");
        if !ports.iter().any(|r| port_matches(r, port)) {
            continue;
        }
        let sources = one_or_many(p, "sourceAddressPrefix", "sourceAddressPrefixes");
        if p["access"]
            .as_str()
            .is_some_and(|a| a.eq_ignore_ascii_case("Allow"))
        {
            for s in &sources {
                allowed.extend(prefix_cidrs(s, block));
            }
        } else if is_everyone(&sources) {
            denied_all = true;
            break;
        }
    }
    // The default AllowVnetInBound (priority 65000), unless a rule above denied all.
    if !denied_all {
        allowed.extend(prefix_cidrs("VirtualNetwork", block));
    }
    if allowed.is_empty() {
        allowed.push(Cidr::parse(NOBODY).expect("valid"));
    }
    allowed
}

/// The sources the NSG admits for one rule. With floating IP the packet reaches the VM
/// addressed to the frontend IP and port; without, to the VM's own IP and the backend
/// port (so upstream writes those as the rule's destinations,
/// cloud-provider-azure `pkg/provider/azure_loadbalancer.go` with
/// `azure-disable-load-balancer-floating-ip`). One allow list per listener: the union
/// over the members.
fn rule_sources(
    nsg: Option<&Value>,
    frontend: IpAddr,
    fport: u16,
    floating: bool,
    backends: &[Backend],
    protocol: Protocol,
    block: u8,
) -> Vec<Cidr> {
    if floating || backends.is_empty() {
        return nsg_allowed(nsg, frontend, fport, protocol, block);
    }
    let nobody = Cidr::parse(NOBODY).expect("valid");
    let mut out: Vec<Cidr> = Vec::new();
    for b in backends {
        for c in nsg_allowed(nsg, b.address.ip(), b.address.port(), protocol, block) {
            if c != nobody && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    if out.is_empty() {
        out.push(nobody);
    }
    out
}

/// What planning needs from the store, copied out under its lock so that computing the
/// plan (every rule's NSG sources, quadratic in rules) does not hold up ARM requests.
pub struct PlanInput {
    members: HashMap<String, Vec<IpAddr>>,
    nsg: Option<Value>,
    pips: HashMap<String, IpAddr>,
    lbs: Vec<Value>,
    block: u8,
}

impl PlanInput {
    pub fn of(cloud: &Cloud) -> Self {
        let nsg_id = cloud.id(path::NSG, &[&cloud.ctx.nsg]);
        PlanInput {
            members: pool_members(cloud),
            nsg: cloud.docs.get(&key(&nsg_id)).and_then(|d| d.served.clone()),
            pips: served(cloud, path::PIP)
                .into_iter()
                .filter_map(|p| {
                    let ip = str_at(p, "ipAddress")?.parse().ok()?;
                    Some((key(p["id"].as_str()?), ip))
                })
                .collect(),
            lbs: served(cloud, path::LB).into_iter().cloned().collect(),
            block: cloud.ctx.block,
        }
    }
}

/// What should be served now (tests; the planner plans from a snapshot).
#[cfg(test)]
pub fn plan(cloud: &Cloud) -> Vec<ListenerPlan> {
    plan_from(&PlanInput::of(cloud))
}

/// What should be served for a snapshot of the store.
pub fn plan_from(input: &PlanInput) -> Vec<ListenerPlan> {
    let PlanInput {
        members,
        nsg,
        pips,
        lbs,
        block,
    } = input;
    let nsg = nsg.as_ref();
    let mut plans = Vec::new();
    for lb in lbs {
        let lb_name = lb["name"].as_str().unwrap_or_default().to_ascii_lowercase();
        let p = &lb["properties"];
        let frontends: HashMap<String, IpAddr> = p["frontendIPConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|fe| {
                let ip = match id_at(fe, "publicIPAddress") {
                    Some(pip) => *pips.get(&key(pip))?,
                    None => str_at(fe, "privateIPAddress")?.parse().ok()?,
                };
                Some((key(fe["id"].as_str()?), ip))
            })
            .collect();
        let probes: HashMap<String, &Value> = p["probes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pr| Some((key(pr["id"].as_str()?), pr)))
            .collect();
        let ip_pools: HashMap<String, Vec<IpAddr>> = p["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pool| {
                let ips = pool["properties"]["loadBalancerBackendAddresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| str_at(a, "ipAddress")?.parse().ok())
                    .collect();
                Some((key(pool["id"].as_str()?), ips))
            })
            .collect();
        for rule in p["loadBalancingRules"].as_array().into_iter().flatten() {
            let rp = &rule["properties"];
            let Some(frontend) =
                id_at(rule, "frontendIPConfiguration").and_then(|f| frontends.get(&key(f)))
            else {
                continue;
            };
            let Some(fport) = rp["frontendPort"]
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
            else {
                continue;
            };
            if fport == 0 {
                // HA ports rules: every port; not served by the mock.
                continue;
            }
            let floating = rp["enableFloatingIP"].as_bool().unwrap_or(false);
            let bport = if floating {
                fport
            } else {
                match rp["backendPort"]
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                {
                    Some(p) if p != 0 => p,
                    _ => fport,
                }
            };
            let mut pool_ids: Vec<String> = rp["backendAddressPools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.get("id").and_then(Value::as_str).map(key))
                .collect();
            if let Some(pid) = id_at(rule, "backendAddressPool") {
                pool_ids.push(key(pid));
            }
            pool_ids.sort();
            pool_ids.dedup();
            let probe = id_at(rule, "probe")
                .and_then(|pid| probes.get(&key(pid)))
                .and_then(|p| probe_check(p));
            let mut backends: Vec<Backend> = Vec::new();
            for pid in &pool_ids {
                let ips = members
                    .get(pid)
                    .into_iter()
                    .flatten()
                    .chain(ip_pools.get(pid).into_iter().flatten());
                for ip in ips {
                    let b = Backend {
                        address: SocketAddr::new(*ip, bport),
                        monitor: probe.as_ref().map(|(_, port)| SocketAddr::new(*ip, *port)),
                    };
                    if !backends.contains(&b) {
                        backends.push(b);
                    }
                }
            }
            let protocols: &[Protocol] = match rp["protocol"].as_str() {
                Some(s) if s.eq_ignore_ascii_case("Udp") => &[Protocol::Udp],
                Some(s) if s.eq_ignore_ascii_case("All") => &[Protocol::Tcp, Protocol::Udp],
                _ => &[Protocol::Tcp],
            };
            let rule_name = format!(
                "{lb_name}/{}",
                rule["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            );
            for protocol in protocols {
                plans.push(ListenerPlan {
                    rule: rule_name.clone(),
                    protocol: *protocol,
                    listen: SocketAddr::new(listener_ip(*frontend), fport),
                    backends: backends.clone(),
                    allowed: rule_sources(
                        nsg, *frontend, fport, floating, &backends, *protocol, *block,
                    ),
                    health: probe.as_ref().map(|(h, _)| h.clone()),
                });
            }
        }
    }
    plans
}

/// The planner: re-plans when a request changed something or an operation ended.
struct Planner_ {
    shared: Arc<Shared>,
    planned: Option<(u64, u64)>,
}

impl Planner for Planner_ {
    type Listener = ListenerPlan;
    const LABEL: &'static str = "azure data plane";

    fn plan(&mut self, retrying: bool) -> Option<Vec<ListenerPlan>> {
        let input = {
            let cloud = self.shared.cloud();
            let stamp = (self.shared.wake.rev(), cloud.transitions);
            let stale = self.planned != Some(stamp) || retrying;
            self.planned = Some(stamp);
            stale.then(|| PlanInput::of(&cloud))
        };
        input.map(|i| plan_from(&i))
    }
}

pub fn start(shared: Arc<Shared>) -> Reconciler {
    let wake = shared.wake.clone();
    Reconciler::start(
        Planner_ {
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

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|c| Cidr::parse(c).expect("cidr")).collect()
    }

    fn nsg(rules: serde_json::Value) -> Value {
        json!({"properties": {"securityRules": rules}})
    }

    fn rule(
        name: &str,
        priority: u32,
        access: &str,
        proto: &str,
        src: serde_json::Value,
        dst: &str,
        port: &str,
    ) -> Value {
        json!({"name": name, "properties": {"priority": priority, "access": access, "direction": "Inbound",
            "protocol": proto, "sourceAddressPrefixes": src, "destinationAddressPrefix": dst,
            "destinationPortRange": port}})
    }

    #[test]
    fn nsg_walks_rules_by_priority() {
        let vip: IpAddr = "127.61.0.10".parse().expect("ip");
        let vnet = "127.60.0.0/24";
        // No rule: only the VNet default.
        assert_eq!(nsg_allowed(None, vip, 80, Protocol::Tcp, 0), cidrs(&[vnet]));
        let n = nsg(json!([
            rule("deny-all", 300, "Deny", "*", json!(["*"]), "*", "*"),
            rule(
                "allow-a",
                200,
                "Allow",
                "Tcp",
                json!(["127.99.0.0/16"]),
                "127.61.0.10",
                "80"
            ),
            rule(
                "allow-udp",
                100,
                "Allow",
                "Udp",
                json!(["127.98.0.0/16"]),
                "*",
                "80"
            ),
            rule(
                "allow-after-deny",
                400,
                "Allow",
                "Tcp",
                json!(["Internet"]),
                "*",
                "*"
            ),
            rule(
                "other-port",
                150,
                "Allow",
                "Tcp",
                json!(["127.97.0.0/16"]),
                "*",
                "81-90"
            ),
        ]));
        // The deny-all at 300 also shuts out the VNet default (upstream adds such a
        // deny for loadBalancerSourceRanges), and ends the walk before `allow-after-deny`.
        assert_eq!(
            nsg_allowed(Some(&n), vip, 80, Protocol::Tcp, 0),
            cidrs(&["127.99.0.0/16"])
        );
        assert_eq!(
            nsg_allowed(Some(&n), vip, 80, Protocol::Udp, 0),
            cidrs(&["127.98.0.0/16"])
        );
        assert_eq!(
            nsg_allowed(Some(&n), vip, 85, Protocol::Tcp, 0),
            cidrs(&["127.97.0.0/16"])
        );
        let other: IpAddr = "127.61.0.11".parse().expect("ip");
        assert_eq!(
            nsg_allowed(Some(&n), other, 80, Protocol::Tcp, 0),
            cidrs(&[NOBODY])
        );
        let open = nsg(json!([rule(
            "any",
            100,
            "Allow",
            "*",
            json!(["Internet"]),
            "*",
            "*"
        )]));
        assert_eq!(
            nsg_allowed(Some(&open), vip, 1, Protocol::Udp, 3),
            cidrs(&["127.0.0.0/8", "127.60.3.0/24"])
        );
    }

    #[test]
    fn ports() {
        assert!(port_matches("*", 5));
        assert!(port_matches("80", 80));
        assert!(port_matches("80-90", 85));
        assert!(!port_matches("80-90", 91));
        assert!(!port_matches("x", 80));
    }

    #[test]
    fn without_floating_ip_the_nsg_sees_members_and_backend_ports() {
        let vip: IpAddr = "127.61.0.10".parse().expect("ip");
        let member = Backend::from("127.60.0.10:30080".parse::<SocketAddr>().expect("addr"));
        let n = nsg(json!([
            rule(
                "to-vip",
                100,
                "Allow",
                "Tcp",
                json!(["127.99.0.0/16"]),
                "127.61.0.10",
                "80"
            ),
            rule(
                "to-node",
                110,
                "Allow",
                "Tcp",
                json!(["127.98.0.0/16"]),
                "127.60.0.10",
                "30080"
            ),
            rule("deny", 4095, "Deny", "*", json!(["*"]), "*", "*"),
        ]));
        assert_eq!(
            rule_sources(Some(&n), vip, 80, true, &[member], Protocol::Tcp, 0),
            cidrs(&["127.99.0.0/16"])
        );
        assert_eq!(
            rule_sources(Some(&n), vip, 80, false, &[member], Protocol::Tcp, 0),
            cidrs(&["127.98.0.0/16"])
        );
        assert_eq!(
            rule_sources(Some(&n), vip, 81, false, &[], Protocol::Tcp, 0),
            cidrs(&[NOBODY])
        );
    }

    /// Only what finished is served: a load balancer whose create is held serves
    /// nothing, and an update in progress keeps the previous rules.
    #[tokio::test]
    async fn plans_follow_finished_operations_only() {
        use crate::testing::Mock;
        use crate::{LifecycleMode, LifecycleTarget};
        let m = Mock::seeded(1);
        let t = m.token().await;
        let pip = m
            .arm(
                "PUT",
                &m.rg_path("Microsoft.Network/publicIPAddresses/p"),
                &t,
                Some(json!({"properties": {}})),
            )
            .await;
        let pip_id = pip.body["id"].as_str().expect("id").to_string();
        let lb_path = m.rg_path("Microsoft.Network/loadBalancers/kubernetes");
        let lb_id = m.id("Microsoft.Network/loadBalancers/kubernetes");
        let body = |port: u16| {
            json!({"properties": {
                "frontendIPConfigurations": [{"name": "fe", "properties": {"publicIPAddress": {"id": pip_id}}}],
                "backendAddressPools": [{"name": "pool"}],
                "loadBalancingRules": [{"name": "r", "properties": {"protocol": "Tcp", "frontendPort": port,
                    "backendPort": port, "enableFloatingIP": true,
                    "frontendIPConfiguration": {"id": format!("{lb_id}/frontendIPConfigurations/fe")},
                    "backendAddressPool": {"id": format!("{lb_id}/backendAddressPools/pool")}}}]}})
        };
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("kubernetes".into()),
                Some(LifecycleMode::Stuck),
            )
            .expect("hold");
        let r = m.arm("PUT", &lb_path, &t, Some(body(80))).await;
        assert_eq!(r.body["properties"]["provisioningState"], "Updating");
        assert!(
            plan(&m.shared.cloud()).is_empty(),
            "a held create serves nothing"
        );
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("kubernetes".into()),
                Some(LifecycleMode::Immediate),
            )
            .expect("release");
        let ports = |m: &Mock| {
            plan(&m.shared.cloud())
                .iter()
                .map(|p| p.listen.port())
                .collect::<Vec<_>>()
        };
        assert_eq!(ports(&m), [80]);
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("kubernetes".into()),
                Some(LifecycleMode::Stuck),
            )
            .expect("hold");
        let r = m.arm("PUT", &lb_path, &t, Some(body(81))).await;
        assert_eq!(r.status, axum::http::StatusCode::OK);
        assert_eq!(
            ports(&m),
            [80],
            "the update in progress keeps the old rules"
        );
        m.admin()
            .set_lifecycle(LifecycleTarget::Resource("kubernetes".into()), None)
            .expect("clear");
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("kubernetes".into()),
                Some(LifecycleMode::Immediate),
            )
            .expect("release");
        assert_eq!(ports(&m), [81]);
    }
}
