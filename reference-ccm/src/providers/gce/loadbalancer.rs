//! The external (target-pool) network load balancer of a Service, as
//! kubernetes/cloud-provider-gcp `providers/gce/gce_loadbalancer_external.go` builds it.
//!
//! Resources, all named after `cloudprovider.DefaultLoadBalancerName` (`a` + the UID
//! without dashes, at most 32 characters; `gce_loadbalancer.go` `GetLoadBalancerName`):
//! - a regional static address, reserved while the forwarding rule is (re)created and
//!   released afterwards unless `spec.loadBalancerIP` names a static address the user
//!   owns (`ensureStaticIP`, `verifyUserRequestedIP`, the deferred release in
//!   `ensureExternalLoadBalancer`);
//! - firewall `k8s-fw-<lb>`: the Service's protocol and ports (`getPortRanges` merges
//!   consecutive ports), source ranges from `loadBalancerSourceRanges` (else the
//!   annotation, else `0.0.0.0/0`), destination the LB IP, priority 1000, target tags
//!   from `node-tags` or else the instances' tags (`firewallObject`, `GetNodeTags` /
//!   `computeHostTags`: per instance the longest tag that prefixes its name);
//! - a legacy HTTP health check: with `externalTrafficPolicy: Local` one named like the
//!   LB on `healthCheckNodePort` `/healthz`, else the shared `k8s-<cluster-id>-node` on
//!   10256 `/healthz` (`gce_healthchecks.go`, `gce_loadbalancer_naming.go`), 8 s interval,
//!   1 s timeout, thresholds 1/3 (`gce.go` `gceHc*`), drift fixed with a PUT
//!   (`ensureHTTPHealthCheck`), and its firewall from the health checkers' ranges
//!   130.211.0.0/22, 35.191.0.0/16, 209.85.152.0/22, 209.85.204.0/22
//!   (`gce_loadbalancer.go` `l4LbSrcRngsFlag`): `k8s-<cluster-id>-node-http-hc` or
//!   `k8s-<lb>-http-hc` (`ensureHTTPHealthCheckFirewall`);
//! - target pool: instance URLs, `sessionAffinity` `CLIENT_IP` or `NONE`
//!   (`translateAffinityType`), the health check; recreated (with the forwarding rule)
//!   when the affinity or the health-check kind changes (`targetPoolNeedsRecreation`);
//!   otherwise members change with one `addInstance` and/or one `removeInstance` carrying
//!   the diff, then the pool is read back and its size checked (`updateTargetPool`);
//! - forwarding rule: `IPAddress`, `IPProtocol`, `portRange` min-max, `target` = the pool
//!   URL, description `{"kubernetes.io/service-name":"<ns>/<name>"}`; recreated when the
//!   requested IP, protocol or port range changes (`forwardingRuleNeedsUpdate`).
//!
//! Deletion (`ensureExternalLoadBalancerDeleted`, `DeleteExternalTargetPoolAndChecks`)
//! removes the firewall, the forwarding rule, the pool, then the health checks, and the
//! address last (upstream deletes it in parallel with the rest and retries while a
//! forwarding rule still holds it; a Compute that refuses to release an address in use,
//! as the harness's mock does, needs this order). Every step runs whether or not the
//! forwarding rule still exists. Health checks: the Service's own and the shared node
//! check, whatever the Service's policy is now (see `delete_external`); the shared one only
//! when the API lets it go (a 400 "being used by" from another pool keeps it,
//! `isInUsedByError`), each deleted (or already gone) check's firewall after it. The
//! shared check and its firewall are handled under one lock (`sharedResourceLock`), held
//! on create until the pool that uses the check exists.
//!
//! A load balancer whose forwarding rule is gone still "exists" for `get_load_balancer`
//! while the Service carries the load-balancer finalizer (upstream `GetLoadBalancer` with
//! `NetLBFinalizerV1`), so the service controller runs the deletion for a half-built or
//! half-updated load balancer too (a failure or a kill between reserving the address and
//! creating the forwarding rule, or after deleting the rule for a recreate).
//!
//! Mixed protocols are refused ("mixed protocol is not supported for LoadBalancer",
//! `checkMixedProtocol`), as are protocols other than TCP/UDP (`getProtocol`) and an
//! empty node list (`errStrLbNoHosts`). Internal load balancers
//! (`networking.gke.io/load-balancer-type: Internal`) are not implemented here.
//!
//! Deviations, on purpose: upstream reserves and then releases the static address on
//! every ensure, two writes per sync even when nothing changed; here the address is only
//! touched when the forwarding rule is created or recreated (its IP cannot change
//! otherwise), so an unchanged Service costs no write. Pools are created with full
//! instance URLs (upstream sends `/zones/<z>/instances/<n>`, which GCE expands). The
//! `gke.networking.io/l4-netlb-v1` finalizer, the `LoadBalancerPortsError` condition,
//! network tiers other than PREMIUM and XPN firewall events are not modelled.
//!
//! By role: the firewalls are in `firewall`, the HTTP health check in `health_check`, the
//! static address in `address`; this file has the names, the hosts, the target pool, the
//! forwarding rule and the `LoadBalancer` entry points.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use serde_json::{Value, json};

use super::Gce;
use super::client::ComputeError;
use crate::cloud::{LbError, LoadBalancer};
use crate::providers::{lookup_before_create, skip_lookup_before_create};

mod address;
mod firewall;
mod health_check;

/// `l4LbSrcRngsFlag` defaults: where GCE's health checkers and L4 proxies come from.
pub const HEALTH_CHECK_SOURCE_RANGES: [&str; 4] = [
    "130.211.0.0/22",
    "35.191.0.0/16",
    "209.85.152.0/22",
    "209.85.204.0/22",
];
/// `lbNodesHealthCheckPort` (kube-proxy healthz) and `nodesHealthCheckPath`.
pub const NODES_HEALTH_CHECK_PORT: i64 = 10256;
pub const HEALTH_CHECK_PATH: &str = "/healthz";
const MAX_TARGET_POOL_CREATE_INSTANCES: usize = 200;
const MAX_INSTANCES_PER_UPDATE: usize = 1000;
pub const LB_TYPE_ANNOTATION: &str = "networking.gke.io/load-balancer-type";
const DEPRECATED_LB_TYPE_ANNOTATION: &str = "cloud.google.com/load-balancer-type";

/// The HTTP health check to have (`makeHTTPHealthCheck`); `health_check` ensures it.
#[derive(Debug, Clone)]
struct HealthCheck {
    name: String,
    port: i64,
    path: String,
}

/// `cloudprovider.DefaultLoadBalancerName`.
pub fn lb_name(service: &Service) -> String {
    let uid = service.metadata.uid.clone().unwrap_or_default();
    let mut name = format!("a{}", uid.replace('-', ""));
    name.truncate(32);
    name
}

fn service_name(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `makeServiceDescription`.
pub fn service_description(service_name: &str) -> String {
    format!(r#"{{"kubernetes.io/service-name":"{service_name}"}}"#)
}

/// `makeFirewallDescription`.
fn firewall_description(service_name: &str, ip: &str) -> String {
    format!(
        r#"{{"kubernetes.io/service-name":"{service_name}", "kubernetes.io/service-ip":"{ip}"}}"#
    )
}

/// `MakeNodesHealthCheckName`.
pub fn nodes_health_check_name(cluster_id: &str) -> String {
    format!("k8s-{cluster_id}-node")
}

/// `MakeHealthCheckFirewallName`.
pub fn health_check_firewall_name(cluster_id: &str, hc_name: &str, nodes: bool) -> String {
    if nodes {
        format!("{}-http-hc", nodes_health_check_name(cluster_id))
    } else {
        format!("k8s-{hc_name}-http-hc")
    }
}

/// `MakeFirewallName`.
pub fn firewall_name(lb: &str) -> String {
    format!("k8s-fw-{lb}")
}

/// `GetLoadBalancerAnnotationType` == Internal.
pub fn is_internal(service: &Service) -> bool {
    let annotations = service.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    matches!(
        get(LB_TYPE_ANNOTATION).or(get(DEPRECATED_LB_TYPE_ANNOTATION)),
        Some("Internal" | "internal")
    )
}

/// `(protocol, port numbers)` of the Service; mixed or unsupported protocols refused.
pub fn protocol_and_ports(service: &Service) -> Result<(String, Vec<i32>), String> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    if ports.is_empty() {
        return Err("no ports specified for GCE load balancer".to_owned());
    }
    let proto = |p: &k8s_openapi::api::core::v1::ServicePort| {
        p.protocol.clone().unwrap_or_else(|| "TCP".to_owned())
    };
    let first = proto(&ports[0]);
    if ports.iter().any(|p| proto(p) != first) {
        return Err("mixed protocol is not supported for LoadBalancer".to_owned());
    }
    if first != "TCP" && first != "UDP" {
        return Err(format!(
            "invalid protocol {first}, only TCP and UDP are supported"
        ));
    }
    Ok((first, ports.iter().map(|p| p.port).collect()))
}

/// `loadBalancerPortRange`: `min-max`.
pub fn port_range(ports: &[i32]) -> String {
    let min = ports.iter().min().copied().unwrap_or(0);
    let max = ports.iter().max().copied().unwrap_or(0);
    format!("{min}-{max}")
}

/// `getPortRanges`: sorted, deduplicated, consecutive ports merged into `a-b`.
pub fn port_ranges(ports: &[i32]) -> Vec<String> {
    let sorted: BTreeSet<i32> = ports.iter().copied().collect();
    let mut out = Vec::new();
    let mut iter = sorted.into_iter();
    let Some(mut start) = iter.next() else {
        return out;
    };
    let mut prev = start;
    let push = |out: &mut Vec<String>, s: i32, e: i32| {
        out.push(if s == e {
            s.to_string()
        } else {
            format!("{s}-{e}")
        })
    };
    for p in iter {
        if p != prev + 1 {
            push(&mut out, start, prev);
            start = p;
        }
        prev = p;
    }
    push(&mut out, start, prev);
    out
}

/// A CIDR with host bits cleared (`net.ParseCIDR` + `IPNet.String()`), for set
/// comparisons as `utilnet.IPNetSet` does them.
pub fn normalize_cidr(cidr: &str) -> Result<String, String> {
    let bad = || format!("{cidr:?} is not a CIDR");
    let (ip, len) = cidr.trim().split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let len: u32 = len.parse().map_err(|_| bad())?;
    match ip {
        IpAddr::V4(v4) if len <= 32 => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            Ok(format!(
                "{}/{len}",
                std::net::Ipv4Addr::from(u32::from(v4) & mask)
            ))
        }
        IpAddr::V6(v6) if len <= 128 => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            Ok(format!(
                "{}/{len}",
                std::net::Ipv6Addr::from(u128::from(v6) & mask)
            ))
        }
        _ => Err(bad()),
    }
}

fn cidr_set(ranges: &[String]) -> Result<BTreeSet<String>, String> {
    ranges.iter().map(|r| normalize_cidr(r)).collect()
}

fn str_list(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn int_field(v: &Value, key: &str) -> i64 {
    v.get(key)
        .and_then(|x| x.as_i64().or_else(|| x.as_str()?.parse().ok()))
        .unwrap_or(0)
}

/// `hostURLToComparablePath`: `/zones/<z>/instances/<n>`.
pub fn comparable_host_path(url: &str) -> String {
    url.find("/zones/")
        .map(|i| url[i..].to_owned())
        .or_else(|| url.strip_prefix("zones/").map(|r| format!("/zones/{r}")))
        .unwrap_or_default()
}

/// `GetServiceHealthCheckPathPort`: `/healthz` on `healthCheckNodePort` for ETP Local.
pub fn health_check_path_port(service: &Service) -> Option<i64> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() != Some("LoadBalancer")
        || spec.external_traffic_policy.as_deref() != Some("Local")
    {
        return None;
    }
    spec.health_check_node_port
        .filter(|p| *p != 0)
        .map(i64::from)
}

/// An instance found for a node (`gceInstance`).
#[derive(Debug, Clone)]
pub struct Host {
    pub zone: String,
    pub name: String,
    pub tags: Vec<String>,
}

impl Host {
    fn comparable(&self) -> String {
        format!("/zones/{}/instances/{}", self.zone, self.name)
    }
}

fn lb_err(e: impl std::fmt::Display) -> LbError {
    LbError::Other(e.to_string())
}

fn ignore_not_found(r: Result<(), ComputeError>) -> Result<(), ComputeError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl Gce {
    fn region_path(&self, kind: &str, name: &str) -> String {
        format!(
            "{}/regions/{}/{kind}/{name}",
            self.config.project_id, self.config.region
        )
    }

    fn global_path(&self, kind: &str, name: &str) -> String {
        format!("{}/global/{kind}/{name}", self.config.project_id)
    }

    fn target_pool_url(&self, name: &str) -> String {
        self.client.url(&self.region_path("targetPools", name))
    }

    /// `getInstancesByNames`: the instances of the managed zones whose names are the
    /// nodes' (one list per zone, filtered by `node-instance-prefix`); an error when none
    /// is found, so a pool never drops to zero by mistake.
    pub async fn hosts_for(&self, nodes: &[Node]) -> Result<Vec<Host>, LbError> {
        let mut wanted: BTreeMap<String, Option<Host>> = BTreeMap::new();
        let mut prefix = self.config.node_instance_prefix.clone();
        for n in nodes {
            let name =
                super::instances::canonical_name(n.metadata.name.as_deref().unwrap_or_default())
                    .to_owned();
            if !name.starts_with(&prefix) {
                prefix.clear();
            }
            wanted.insert(name, None);
        }
        let filter = format!("name eq {prefix}.*");
        let mut remaining = wanted.len();
        for zone in &self.managed_zones {
            if remaining == 0 {
                break;
            }
            let list = self
                .client
                .list(
                    &format!("{}/zones/{zone}/instances", self.config.project_id),
                    Some(&filter),
                )
                .await
                .map_err(lb_err)?;
            for inst in list {
                let name = str_field(&inst, "name");
                if let Some(slot @ None) = wanted.get_mut(name) {
                    *slot = Some(Host {
                        zone: zone.clone(),
                        name: name.to_owned(),
                        tags: inst
                            .pointer("/tags/items")
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect()
                            })
                            .unwrap_or_default(),
                    });
                    remaining -= 1;
                }
            }
        }
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|(_, h)| h.is_none())
            .map(|(n, _)| n)
            .collect();
        if !missing.is_empty() {
            tracing::warn!(?missing, "failed to retrieve instances");
        }
        let hosts: Vec<Host> = wanted.into_values().flatten().collect();
        if hosts.is_empty() {
            return Err(LbError::Other("instance not found".to_owned()));
        }
        Ok(hosts)
    }

    /// `updateTargetPool`: one `addInstance` and/or one `removeInstance` with the diff,
    /// then the pool is read back and its size checked.
    async fn update_target_pool(&self, lb: &str, hosts: &[Host]) -> Result<(), LbError> {
        let path = self.region_path("targetPools", lb);
        let pool = self.client.get(&path).await.map_err(lb_err)?;
        let mut existing: BTreeMap<String, String> = str_list(&pool, "instances")
            .into_iter()
            .map(|u| (comparable_host_path(&u), u))
            .collect();
        let mut to_add = Vec::new();
        for h in hosts {
            if existing.remove(&h.comparable()).is_none() {
                to_add.push(json!({"instance": self.instance_url(&h.zone, &h.name)}));
            }
        }
        let to_remove: Vec<Value> = existing
            .into_values()
            .map(|u| json!({"instance": u}))
            .collect();
        for chunk in to_add.chunks(MAX_INSTANCES_PER_UPDATE) {
            self.client
                .insert(&format!("{path}/addInstance"), &json!({"instances": chunk}))
                .await
                .map_err(lb_err)?;
        }
        for chunk in to_remove.chunks(MAX_INSTANCES_PER_UPDATE) {
            self.client
                .insert(
                    &format!("{path}/removeInstance"),
                    &json!({"instances": chunk}),
                )
                .await
                .map_err(lb_err)?;
        }
        if to_add.is_empty() && to_remove.is_empty() {
            return Ok(());
        }
        let updated = self.client.get(&path).await.map_err(lb_err)?;
        let count = str_list(&updated, "instances").len();
        if count != hosts.len() {
            return Err(LbError::Other(format!(
                "unexpected number of instances ({count}) in target pool {lb} after update (expected {})",
                hosts.len()
            )));
        }
        Ok(())
    }

    /// `DeleteExternalTargetPoolAndChecks`.
    async fn delete_pool_and_checks(
        &self,
        lb: &str,
        cluster_id: &str,
        hc_names: &[String],
    ) -> Result<(), LbError> {
        ignore_not_found(
            self.client
                .delete(&self.region_path("targetPools", lb))
                .await,
        )
        .map_err(lb_err)?;
        for hc in hc_names {
            let nodes = hc != lb;
            let _guard = if nodes {
                Some(self.shared_lock.lock().await)
            } else {
                None
            };
            match self
                .client
                .delete(&self.global_path("httpHealthChecks", hc))
                .await
            {
                Ok(()) => {}
                // Another pool still uses the shared check: keep it and its firewall.
                Err(e) if e.is_in_use() => continue,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(lb_err(e)),
            }
            let fw = health_check_firewall_name(cluster_id, hc, nodes);
            ignore_not_found(
                self.client
                    .delete(&self.global_path("firewalls", &fw))
                    .await,
            )
            .map_err(lb_err)?;
        }
        Ok(())
    }

    /// EnsureLoadBalancer's create-or-update lookup of the forwarding rule `lb` (the load
    /// balancer's identity, as in `get_load_balancer`), or always `None` with `skip` (TEST
    /// ONLY `--testing-break=skip-lookup-before-create`: the rule is inserted again).
    async fn forwarding_rule_for_ensure(
        &self,
        skip: bool,
        lb: &str,
    ) -> Result<Option<Value>, ComputeError> {
        lookup_before_create(
            skip,
            self.client
                .get_opt(&self.region_path("forwardingRules", lb)),
        )
        .await
    }

    /// `ensureExternalLoadBalancer`.
    async fn ensure_external(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        let (protocol, ports) = protocol_and_ports(service).map_err(LbError::Other)?;
        if nodes.is_empty() {
            return Err(LbError::Other(
                "cannot EnsureLoadBalancer() with no hosts".to_owned(),
            ));
        }
        let hosts = self.hosts_for(nodes).await?;
        let lb = lb_name(service);
        let svc_name = service_name(service);
        let cluster_id = self.cluster_id(cluster).await.map_err(LbError::Other)?;
        let requested_ip = service
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_ip.clone())
            .unwrap_or_default();
        let affinity = match service
            .spec
            .as_ref()
            .and_then(|s| s.session_affinity.as_deref())
        {
            Some("ClientIP") => "CLIENT_IP",
            _ => "NONE",
        };

        // forwardingRuleNeedsUpdate
        let fwd = self
            .forwarding_rule_for_ensure(skip_lookup_before_create(), &lb)
            .await
            .map_err(lb_err)?;
        let fwd_ip = fwd
            .as_ref()
            .map(|f| str_field(f, "IPAddress").to_owned())
            .unwrap_or_default();
        let fwd_needs_update = match &fwd {
            None => true,
            Some(f) => {
                (!requested_ip.is_empty() && requested_ip != fwd_ip)
                    || str_field(f, "portRange") != port_range(&ports)
                    || str_field(f, "IPProtocol") != protocol
            }
        };
        // targetPoolNeedsRecreation
        let pool = self
            .client
            .get_opt(&self.region_path("targetPools", &lb))
            .await
            .map_err(lb_err)?;
        let mut tp_needs_recreation = match &pool {
            None => true,
            Some(p) => {
                let have = str_field(p, "sessionAffinity");
                !have.is_empty() && have != affinity
            }
        };
        // Which health check to have, and whether the kind changed.
        let local_hc = self
            .client
            .get_opt(&self.global_path("httpHealthChecks", &lb))
            .await
            .map_err(lb_err)?;
        let nodes_hc = HealthCheck {
            name: nodes_health_check_name(&cluster_id),
            port: NODES_HEALTH_CHECK_PORT,
            path: HEALTH_CHECK_PATH.to_owned(),
        };
        let (hc_to_create, hc_to_delete) = match health_check_path_port(service) {
            Some(port) => {
                let delete = if local_hc.is_none() {
                    tp_needs_recreation = true;
                    Some(nodes_hc.name.clone())
                } else {
                    None
                };
                let hc = HealthCheck {
                    name: lb.clone(),
                    port,
                    path: HEALTH_CHECK_PATH.to_owned(),
                };
                (hc, delete)
            }
            None => {
                let delete = local_hc.as_ref().map(|_| {
                    tp_needs_recreation = true;
                    lb.clone()
                });
                (nodes_hc, delete)
            }
        };
        let recreate_fwd = fwd.is_none() || fwd_needs_update || tp_needs_recreation;

        // The IP: user-owned, the forwarding rule's (kept), or a reserved static one.
        let mut user_owned = false;
        if !requested_ip.is_empty() {
            if self.address_by_ip(&requested_ip).await?.is_some() {
                user_owned = true;
            } else if requested_ip != fwd_ip {
                return Err(LbError::Other(format!(
                    "requested ip {requested_ip:?} is neither static nor assigned to the LB"
                )));
            }
        }
        let mut reserved = false;
        let ip = if user_owned {
            requested_ip.clone()
        } else if !recreate_fwd {
            fwd_ip.clone()
        } else {
            let (ip, existed) = self.ensure_static_ip(&lb, &svc_name, &fwd_ip).await?;
            reserved = !existed;
            ip
        };
        let result = self
            .ensure_rest(
                service,
                &lb,
                &svc_name,
                &cluster_id,
                &ip,
                &protocol,
                &ports,
                affinity,
                &hosts,
                fwd.is_some(),
                recreate_fwd,
                pool.is_some(),
                tp_needs_recreation,
                &hc_to_create,
                hc_to_delete,
            )
            .await;
        // The deferred release: safe once the forwarding rule holds the IP (or when we
        // reserved it in this call and failed before touching the rule).
        let safe = match &result {
            Ok(_) => true,
            Err(_) => reserved && fwd.is_none(),
        };
        if !user_owned && recreate_fwd {
            if safe {
                match ignore_not_found(
                    self.client
                        .delete(&self.region_path("addresses", &lb))
                        .await,
                ) {
                    Ok(()) => {}
                    // Some Computes refuse to release an address a forwarding rule holds
                    // (upstream expects it to become ephemeral): it stays reserved and
                    // is released with the load balancer.
                    Err(e) if e.is_in_use() => {
                        tracing::info!(%lb, "static IP {ip} stays reserved: {e}");
                    }
                    Err(e) => tracing::error!(%lb, "failed to release static IP {ip}: {e}"),
                }
            } else {
                tracing::warn!(%lb, "orphaning static IP {ip} after a failed update");
            }
        }
        result?;
        Ok(LoadBalancerStatus {
            // ipMode as the API server defaults it for an IP ingress (LoadBalancerIPMode,
            // GA in 1.32); upstream leaves it unset, so its service controller sees the
            // stored status differ and patches it again on every sync.
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip),
                ip_mode: Some("VIP".to_owned()),
                ..Default::default()
            }]),
        })
    }

    /// Firewalls, pool, health checks and forwarding rule, once the IP is known.
    #[allow(clippy::too_many_arguments)]
    async fn ensure_rest(
        &self,
        service: &Service,
        lb: &str,
        svc_name: &str,
        cluster_id: &str,
        ip: &str,
        protocol: &str,
        ports: &[i32],
        affinity: &str,
        hosts: &[Host],
        fwd_exists: bool,
        recreate_fwd: bool,
        tp_exists: bool,
        tp_needs_recreation: bool,
        hc: &HealthCheck,
        hc_to_delete: Option<String>,
    ) -> Result<(), LbError> {
        self.ensure_node_firewall(service, lb, ip, protocol, ports, hosts)
            .await?;
        if fwd_exists && recreate_fwd {
            ignore_not_found(
                self.client
                    .delete(&self.region_path("forwardingRules", lb))
                    .await,
            )
            .map_err(|e| {
                LbError::Other(format!(
                    "failed to delete existing forwarding rule for load balancer ({lb}) update: {e}"
                ))
            })?;
        }
        let nodes_hc = hc.name != lb;
        if tp_needs_recreation {
            if tp_exists {
                let names: Vec<String> = hc_to_delete.into_iter().collect();
                self.delete_pool_and_checks(lb, cluster_id, &names).await?;
            }
            // createTargetPoolAndHealthCheck: the shared check is locked until the pool that
            // uses it exists (upstream's deferred `sharedResourceLock.Unlock()`), so a
            // concurrent delete cannot take the check and its firewall in between.
            let guard = if nodes_hc {
                Some(self.shared_lock.lock().await)
            } else {
                None
            };
            self.ensure_health_check_firewall(service, ip, cluster_id, hosts, hc, nodes_hc)
                .await?;
            let link = self.ensure_health_check(hc).await?;
            let first: Vec<String> = hosts
                .iter()
                .take(MAX_TARGET_POOL_CREATE_INSTANCES)
                .map(|h| self.instance_url(&h.zone, &h.name))
                .collect();
            let pool = json!({
                "name": lb,
                "description": service_description(svc_name),
                "instances": first,
                "sessionAffinity": affinity,
                "healthChecks": [link],
            });
            match self
                .client
                .insert(
                    &format!(
                        "{}/regions/{}/targetPools",
                        self.config.project_id, self.config.region
                    ),
                    &pool,
                )
                .await
            {
                Err(e) if !e.is_already_exists() => {
                    return Err(LbError::Other(format!(
                        "failed to create target pool for load balancer ({lb}): {e}"
                    )));
                }
                _ => {}
            }
            drop(guard);
            if hosts.len() > MAX_TARGET_POOL_CREATE_INSTANCES {
                self.update_target_pool(lb, hosts).await?;
            }
        } else if tp_exists {
            self.update_target_pool(lb, hosts).await?;
            self.ensure_health_check(hc).await?;
            let _guard = if nodes_hc {
                Some(self.shared_lock.lock().await)
            } else {
                None
            };
            self.ensure_health_check_firewall(service, ip, cluster_id, hosts, hc, nodes_hc)
                .await?;
        }
        if recreate_fwd {
            let rule = json!({
                "name": lb,
                "description": service_description(svc_name),
                "IPAddress": ip,
                "IPProtocol": protocol,
                "portRange": port_range(ports),
                "target": self.target_pool_url(lb),
                "networkTier": "PREMIUM",
            });
            match self
                .client
                .insert(
                    &format!(
                        "{}/regions/{}/forwardingRules",
                        self.config.project_id, self.config.region
                    ),
                    &rule,
                )
                .await
            {
                Err(e) if !e.is_already_exists() => {
                    return Err(LbError::Other(format!(
                        "failed to create forwarding rule for load balancer ({lb}): {e}"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `ensureExternalLoadBalancerDeleted`.
    async fn delete_external(&self, cluster: &str, service: &Service) -> Result<(), LbError> {
        let lb = lb_name(service);
        let cluster_id = self.cluster_id(cluster).await.map_err(LbError::Other)?;
        // Both health checks, whatever the Service's policy is now. Upstream does this when
        // the Service is no longer of type LoadBalancer ("we have no idea whether it was
        // using local traffic health check or nodes health check. Attempt to delete both
        // to prevent leaking") and, for ETP Local, GETs the Service's own check and
        // deletes nothing else. Deviation, on purpose: the Service's pool may still use the
        // shared node check (an ETP Cluster -> Local update that stopped after deleting
        // the pool but before the shared check, or before creating the Service's own), and
        // only a delete that tries the shared check after its own pool is gone guarantees
        // that the last pool to go takes the shared check and its firewall with it (GCE
        // refuses while another pool uses it: `resourceInUseByAnotherResource`). Same
        // number of calls: the DELETE of the Service's own check replaces the GET.
        let hc_names = vec![lb.clone(), nodes_health_check_name(&cluster_id)];
        let mut errors = Vec::new();
        if let Err(e) = ignore_not_found(
            self.client
                .delete(&self.global_path("firewalls", &firewall_name(&lb)))
                .await,
        ) {
            errors.push(e.to_string());
        }
        match ignore_not_found(
            self.client
                .delete(&self.region_path("forwardingRules", &lb))
                .await,
        ) {
            Err(e) => errors.push(e.to_string()),
            Ok(()) => {
                if let Err(e) = self
                    .delete_pool_and_checks(&lb, &cluster_id, &hc_names)
                    .await
                {
                    errors.push(e.to_string());
                }
            }
        }
        // Last, once no forwarding rule holds it (upstream deletes it in parallel with
        // the rest and retries on the aggregate error).
        if let Err(e) = ignore_not_found(
            self.client
                .delete(&self.region_path("addresses", &lb))
                .await,
        ) {
            errors.push(e.to_string());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LbError::Other(errors.join("; ")))
        }
    }
}

fn internal_unsupported(service: &Service) -> LbError {
    LbError::Other(format!(
        "service {}: internal load balancers ({LB_TYPE_ANNOTATION}: Internal) are not implemented by the reference CCM's gce provider",
        service_name(service)
    ))
}

/// Whether the Service is handed to the regional backend-service controller (ingress-gce)
/// rather than this one: the `cloud.google.com/l4-rbs: enabled` annotation or a finalizer
/// of that controller, unless this controller's own finalizer says it already owns the
/// Service (cloud-provider-gcp `providers/gce/gce_util.go` `shouldProcessNetLB`,
/// `usesL4RBS`; `gce_annotations.go` `RBSAnnotationKey`). Upstream then answers
/// `ImplementedElsewhere` from ensure, update and delete (`gce_loadbalancer_external.go`).
fn implemented_elsewhere(service: &Service) -> bool {
    let finalizers = service.metadata.finalizers.as_deref().unwrap_or_default();
    let has = |f: &str| finalizers.iter().any(|x| x == f);
    if has("gke.networking.io/l4-netlb-v1") {
        return false;
    }
    let rbs = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("cloud.google.com/l4-rbs"))
        .is_some_and(|v| v == "enabled");
    rbs || has("gke.networking.io/l4-netlb-v2") || has("gke.networking.io/l4-netlb-v3")
}

/// Whether the Service may still own load-balancer resources although its forwarding rule
/// is gone: upstream's `NetLBFinalizerV1` / `ILBFinalizerV1` (`gce_loadbalancer.go`
/// `GetLoadBalancer`). This provider does not add `gke.networking.io/l4-netlb-v1` itself
/// (see the module docs); the service controller's
/// `service.kubernetes.io/load-balancer-cleanup` plays its part: added before the first
/// EnsureLoadBalancer, removed only after EnsureLoadBalancerDeleted succeeded.
fn has_load_balancer_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| {
            f == crate::controllers::service::FINALIZER
                || f == "gke.networking.io/l4-netlb-v1"
                || f == "gke.networking.io/l4-ilb-v1"
        })
}

impl LoadBalancer for Gce {
    async fn get_load_balancer(
        &self,
        _cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        let lb = lb_name(service);
        match self
            .client
            .get_opt(&self.region_path("forwardingRules", &lb))
            .await
        {
            Ok(Some(f)) => Ok(Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    ip: Some(str_field(&f, "IPAddress").to_owned()),
                    ip_mode: Some("VIP".to_owned()),
                    ..Default::default()
                }]),
            })),
            // No forwarding rule (or it cannot be read) but the Service carries the
            // finalizer: a create or update may have stopped half-way (a failure after the
            // rule was deleted for a recreate, a reserved address, a firewall, a pool, a
            // kill -9), so report it as existing and let EnsureLoadBalancerDeleted clean
            // up. Upstream `gce_loadbalancer.go` `GetLoadBalancer`: "Checking for
            // finalizer is more accurate because controller restart could happen in the
            // middle of resource deletion" (`hasFinalizer(svc, NetLBFinalizerV1)`).
            _ if has_load_balancer_finalizer(service) => Ok(Some(LoadBalancerStatus::default())),
            Ok(None) => Ok(None),
            Err(e) => Err(lb_err(e)),
        }
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        if is_internal(service) {
            return Err(internal_unsupported(service));
        }
        if implemented_elsewhere(service) {
            return Err(LbError::ImplementedElsewhere);
        }
        let lb = lb_name(service);
        // A forwarding rule of the other scheme is torn down first (EnsureLoadBalancer).
        if let Some(f) = self
            .client
            .get_opt(&self.region_path("forwardingRules", &lb))
            .await
            .map_err(lb_err)?
            && str_field(&f, "loadBalancingScheme").eq_ignore_ascii_case("INTERNAL")
        {
            return Err(internal_unsupported(service));
        }
        self.ensure_external(cluster, service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        _cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        if is_internal(service) {
            return Err(internal_unsupported(service));
        }
        if implemented_elsewhere(service) {
            return Err(LbError::ImplementedElsewhere);
        }
        // updateExternalLoadBalancer: only the pool's members.
        let hosts = self.hosts_for(nodes).await?;
        self.update_target_pool(&lb_name(service), &hosts).await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        if implemented_elsewhere(service) {
            return Err(LbError::ImplementedElsewhere);
        }
        // Also for an Internal-annotated Service: whatever external resources carry its
        // name are removed; internal ones are never created by this provider.
        self.delete_external(cluster, service).await
    }
}

#[cfg(test)]
mod tests;
