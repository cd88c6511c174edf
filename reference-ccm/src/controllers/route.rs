//! The node-route controller: one cloud route per node pod CIDR.
//!
//! Exists for clusters whose pod network relies on the cloud's routing table. Behaviour
//! follows `kubernetes/cloud-provider` `controllers/route/route_controller.go` (paraphrased):
//! - started only with `--configure-cloud-routes` and a provider with Routes; the
//!   `--cluster-cidr` must parse (empty fails), at most two CIDRs, two must be dual-stack
//!   (startup error otherwise, `startRouteController` in `cloud-provider/app`);
//! - every `--route-reconciliation-period`: list routes and nodes; nodes without pod CIDRs
//!   are skipped; missing routes are created with the node UID as name hint; routes inside a
//!   cluster CIDR that are blackholes or not wanted are deleted; routes outside every
//!   cluster CIDR are never touched;
//! - a failed create records `FailedToCreateRoute` (Warning) on the Node;
//! - `NetworkUnavailable` is set False/`RouteCreated` when all of a node's CIDRs are routed,
//!   else True/`NoRouteCreated`, by a status patch skipped when already in that state.
//!
//! Routes listed by the provider may name only a next hop; the node is resolved here by
//! matching it against node addresses.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, NodeAddress};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cloud::{Route, Routes};
use crate::controllers::events::{EventType, record};

/// Event source of this controller.
pub const COMPONENT: &str = "route_controller";
/// Node condition maintained here.
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// Upstream's bound on concurrent cloud calls per reconcile.
const MAX_CONCURRENT_ROUTE_OPS: usize = 200;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RouteConfigError {
    #[error("--cluster-cidr {value:?}: invalid CIDR {cidr:?}")]
    BadCidr { value: String, cidr: String },
    #[error("--cluster-cidr {0:?}: more than two CIDRs are not allowed")]
    TooMany(String),
    #[error("--cluster-cidr {0:?}: two CIDRs must be one IPv4 and one IPv6 (dual-stack)")]
    NotDualStack(String),
}

/// An IP network, address masked to its prefix (Go `net.ParseCIDR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Self> {
        let (ip, prefix) = s.trim().split_once('/')?;
        let ip: IpAddr = ip.parse().ok()?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let prefix: u8 = prefix.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return None;
        }
        Some(Self {
            addr: mask(ip, prefix),
            prefix,
        })
    }

    /// Whether `other` lies entirely inside this network.
    pub fn contains(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && other.prefix >= self.prefix
            && mask(other.addr, self.prefix) == self.addr
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6((bits & m).into())
        }
    }
}

/// `--cluster-cidr` as the route controller validates it.
pub fn parse_cluster_cidrs(value: &str) -> Result<Vec<Cidr>, RouteConfigError> {
    let cidrs = value
        .split(',')
        .map(|c| {
            Cidr::parse(c).ok_or_else(|| RouteConfigError::BadCidr {
                value: value.to_owned(),
                cidr: c.to_owned(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if cidrs.len() > 2 {
        return Err(RouteConfigError::TooMany(value.to_owned()));
    }
    if cidrs.len() == 2 && cidrs[0].addr.is_ipv4() == cidrs[1].addr.is_ipv4() {
        return Err(RouteConfigError::NotDualStack(value.to_owned()));
    }
    Ok(cidrs)
}

/// Settings from the command line.
#[derive(Debug, Clone)]
pub struct RouteControllerOptions {
    pub cluster_name: String,
    pub cluster_cidrs: Vec<Cidr>,
    pub period: Duration,
}

/// A route to create for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRoute {
    pub node: String,
    pub name_hint: String,
    pub route: Route,
}

/// What one reconcile does.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create: Vec<NewRoute>,
    pub delete: Vec<Route>,
    /// (node, pod CIDR) pairs already routed.
    pub existing: BTreeSet<(String, String)>,
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.as_ref();
    let list = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
    if !list.is_empty() {
        return list;
    }
    spec.and_then(|s| s.pod_cidr.clone())
        .filter(|c| !c.is_empty())
        .into_iter()
        .collect()
}

fn node_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

/// The node a listed route points at: its name, or the node owning its next hop.
fn route_target(route: &Route, by_address: &HashMap<String, String>) -> String {
    if !route.target_node.is_empty() {
        return route.target_node.clone();
    }
    route
        .target_node_addresses
        .iter()
        .find_map(|a| by_address.get(&a.address).cloned())
        .unwrap_or_default()
}

/// Normalizes a CIDR string so `10.0.0.1/24` and `10.0.0.0/24` compare equal.
fn canonical(cidr: &str) -> String {
    Cidr::parse(cidr).map_or_else(|| cidr.to_owned(), |c| format!("{}/{}", c.addr, c.prefix))
}

/// Diffs cloud routes against node pod CIDRs.
pub fn plan(routes: &[Route], nodes: &[Node], cluster_cidrs: &[Cidr]) -> Plan {
    let mut by_address = HashMap::new();
    for n in nodes {
        for a in node_addresses(n) {
            if a.type_ == "InternalIP" || a.type_ == "ExternalIP" {
                by_address.entry(a.address).or_insert_with(|| n.name_any());
            }
        }
    }
    let mut wanted = BTreeSet::new();
    for n in nodes {
        for c in pod_cidrs(n) {
            wanted.insert((n.name_any(), canonical(&c)));
        }
    }
    let mut plan = Plan::default();
    for r in routes {
        let key = (route_target(r, &by_address), canonical(&r.destination_cidr));
        if !r.blackhole && wanted.contains(&key) {
            plan.existing.insert(key);
            continue;
        }
        let responsible = Cidr::parse(&r.destination_cidr)
            .is_some_and(|dest| cluster_cidrs.iter().any(|c| c.contains(&dest)));
        if responsible {
            plan.delete.push(r.clone());
        }
    }
    for n in nodes {
        for c in pod_cidrs(n) {
            let key = (n.name_any(), canonical(&c));
            if plan.existing.contains(&key) {
                continue;
            }
            plan.create.push(NewRoute {
                node: n.name_any(),
                name_hint: n.metadata.uid.clone().unwrap_or_default(),
                route: Route {
                    name: String::new(),
                    target_node: n.name_any(),
                    target_node_addresses: node_addresses(n),
                    destination_cidr: c,
                    blackhole: false,
                },
            });
        }
    }
    plan
}

/// `(status, reason, message)` of NetworkUnavailable for a node.
pub fn network_condition(all_routed: bool) -> (&'static str, &'static str, &'static str) {
    if all_routed {
        ("False", "RouteCreated", "RouteController created a route")
    } else {
        (
            "True",
            "NoRouteCreated",
            "RouteController failed to create a route",
        )
    }
}

fn condition_already(node: &Node, status: &str, reason: &str) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE))
        .is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason))
}

/// One reconcile pass.
pub async fn reconcile<R: Routes>(
    client: &Client,
    cloud: &R,
    opts: &RouteControllerOptions,
) -> Result<(), String> {
    let nodes_api: Api<Node> = Api::all(client.clone());
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    crate::metrics::global().route_sync_total.inc();
    let routes = cloud
        .list_routes(&opts.cluster_name)
        .await
        .map_err(|e| format!("listing routes: {e}"))?;
    let nodes = nodes_api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?
        .items;
    let plan = plan(&routes, &nodes, &opts.cluster_cidrs);
    let cluster = opts.cluster_name.as_str();

    let created: Vec<(String, String, Result<(), String>)> = futures::stream::iter(plan.create)
        .map(|new| async move {
            let start = Instant::now();
            let result = cloud
                .create_route(cluster, &new.name_hint, &new.route)
                .await
                .map_err(|e| {
                    format!(
                        "Could not create route {} {} for node {} after {:?}: {e}",
                        new.name_hint,
                        new.route.destination_cidr,
                        new.node,
                        start.elapsed()
                    )
                });
            (new.node, canonical(&new.route.destination_cidr), result)
        })
        .buffer_unordered(MAX_CONCURRENT_ROUTE_OPS)
        .collect()
        .await;
    futures::stream::iter(plan.delete)
        .for_each_concurrent(MAX_CONCURRENT_ROUTE_OPS, |route| async move {
            match cloud.delete_route(cluster, &route).await {
                Ok(()) => tracing::info!(cidr = %route.destination_cidr, "Deleted route"),
                Err(e) => {
                    tracing::warn!(cidr = %route.destination_cidr, "Could not delete route: {e}")
                }
            }
        })
        .await;

    let mut routed = plan.existing;
    let by_name: HashMap<String, &Node> = nodes.iter().map(|n| (n.name_any(), n)).collect();
    for (node, cidr, result) in created {
        match result {
            Ok(()) => {
                tracing::info!(%node, %cidr, "Created route");
                routed.insert((node, cidr));
            }
            Err(message) => {
                tracing::warn!("{message}");
                if let Some(n) = by_name.get(&node) {
                    record(
                        &events,
                        n,
                        COMPONENT,
                        EventType::Warning,
                        "FailedToCreateRoute",
                        &message,
                    )
                    .await;
                }
            }
        }
    }
    for n in &nodes {
        let cidrs = pod_cidrs(n);
        if cidrs.is_empty() {
            continue;
        }
        let all = cidrs
            .iter()
            .all(|c| routed.contains(&(n.name_any(), canonical(c))));
        let (status, reason, message) = network_condition(all);
        if condition_already(n, status, reason) {
            continue;
        }
        let now = jiff::Timestamp::now().to_string();
        let patch = json!({"status": {"conditions": [{
            "type": NETWORK_UNAVAILABLE, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now, "lastHeartbeatTime": now,
        }]}});
        if let Err(e) = nodes_api
            .patch_status(
                &n.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            tracing::warn!(node = %n.name_any(), "updating NetworkUnavailable failed: {e}");
        }
    }
    Ok(())
}

/// Reconciles every period until the process ends.
pub async fn run<R: Routes>(client: Client, cloud: Arc<R>, opts: RouteControllerOptions) {
    let mut ticker = tokio::time::interval(opts.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(e) = reconcile(&client, cloud.as_ref(), &opts).await {
            tracing::warn!("route reconcile: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::addr;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use kube::api::ObjectMeta;

    #[test]
    fn cluster_cidr_validation() {
        assert_eq!(parse_cluster_cidrs("10.244.0.0/16").map(|v| v.len()), Ok(1));
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16, fd00:10:244::/56").map(|v| v.len()),
            Ok(2)
        );
        assert!(matches!(
            parse_cluster_cidrs(""),
            Err(RouteConfigError::BadCidr { .. })
        ));
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0"),
            Err(RouteConfigError::BadCidr { .. })
        ));
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0/33"),
            Err(RouteConfigError::BadCidr { .. })
        ));
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0/8,11.0.0.0/8"),
            Err(RouteConfigError::NotDualStack(_))
        ));
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0/8,fd00::/8,11.0.0.0/8"),
            Err(RouteConfigError::TooMany(_))
        ));
    }

    #[test]
    fn cidr_contains() {
        let c = |s| {
            Cidr::parse(s).unwrap_or(Cidr {
                addr: IpAddr::from([0, 0, 0, 0]),
                prefix: 99,
            })
        };
        assert!(c("10.244.0.0/16").contains(&c("10.244.3.0/24")));
        assert!(c("10.244.0.0/16").contains(&c("10.244.0.0/16")));
        assert!(!c("10.244.0.0/16").contains(&c("10.0.0.0/8")));
        assert!(!c("10.244.0.0/16").contains(&c("10.245.0.0/24")));
        assert!(!c("10.244.0.0/16").contains(&c("fd00::/64")));
        assert_eq!(c("10.244.1.7/16"), c("10.244.0.0/16"));
    }

    fn node(name: &str, ip: &str, cidrs: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: Some(cidrs.iter().map(|c| c.to_string()).collect()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![addr("InternalIP", ip)]),
                ..Default::default()
            }),
        }
    }

    fn listed(dest: &str, nexthop: &str) -> Route {
        Route {
            name: dest.into(),
            target_node_addresses: vec![addr("InternalIP", nexthop)],
            destination_cidr: dest.into(),
            ..Default::default()
        }
    }

    #[test]
    fn route_diffing() {
        let cluster = parse_cluster_cidrs("10.244.0.0/16,fd00:10:244::/56").unwrap_or_default();
        let nodes = vec![
            node("a", "10.0.0.1", &["10.244.1.0/24"]),
            node("b", "10.0.0.2", &["10.244.2.0/24", "fd00:10:244:2::/64"]),
            node("c", "10.0.0.3", &[]),
        ];
        let mut blackhole = listed("10.244.9.0/24", "10.0.0.1");
        blackhole.blackhole = true;
        let routes = vec![
            listed("10.244.1.0/24", "10.0.0.1"),   // a: kept
            listed("10.244.7.0/24", "10.0.0.99"),  // gone node inside CIDR: deleted
            listed("192.168.0.0/24", "10.0.0.99"), // outside cluster CIDR: untouched
            blackhole,                             // blackhole inside: deleted
        ];
        let p = plan(&routes, &nodes, &cluster);
        let created: Vec<(&str, &str, &str)> = p
            .create
            .iter()
            .map(|n| {
                (
                    n.node.as_str(),
                    n.name_hint.as_str(),
                    n.route.destination_cidr.as_str(),
                )
            })
            .collect();
        assert_eq!(
            created,
            vec![
                ("b", "uid-b", "10.244.2.0/24"),
                ("b", "uid-b", "fd00:10:244:2::/64")
            ]
        );
        let deleted: Vec<&str> = p
            .delete
            .iter()
            .map(|r| r.destination_cidr.as_str())
            .collect();
        assert_eq!(deleted, vec!["10.244.7.0/24", "10.244.9.0/24"]);
        assert!(
            p.existing
                .contains(&("a".to_owned(), "10.244.1.0/24".to_owned()))
        );
        assert_eq!(network_condition(true).1, "RouteCreated");
        assert_eq!(network_condition(false).0, "True");
    }
}
