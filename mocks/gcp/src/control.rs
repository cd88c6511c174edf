//! The control side of a running mock ([`Admin`]): instances, lifecycle modes,
//! inspection (load balancers, routes, leaks), reset. The HTTP admin API (`admin_api`)
//! is a thin layer over it.
//!
//! Leaks: whatever the Compute API created that still exists (addresses, forwarding
//! rules, target pools, health checks, firewalls, routes). The seed's network and
//! subnetwork and the admin API's instances are the baseline and never count.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::path::Scope;
use crate::state::{Cloud, FIRST_HOST, INTERNAL_POOL, Instance, Kind, NAT_POOL, Pool, now_rfc3339};
use crate::{LIFECYCLE_TYPES, LifecycleMode, LifecyclePolicies, Shared};

/// Why an admin call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("conflict: {0}")]
    Conflict(String),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> AdminError {
    AdminError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// The instance statuses GCE reports.
pub const STATUSES: &[&str] = &[
    "PROVISIONING",
    "STAGING",
    "RUNNING",
    "STOPPING",
    "STOPPED",
    "SUSPENDING",
    "SUSPENDED",
    "REPAIRING",
    "TERMINATED",
];

/// An instance to create (`POST /admin/instances`, seed files).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    pub name: String,
    /// Defaults to the mock's zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// Network tags (`tags.items`); default none.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// `RUNNING` (default), `TERMINATED`, ...
    #[serde(default)]
    pub status: Option<String>,
    /// Whether it has an external (NAT) address; default true.
    #[serde(default)]
    pub nat: Option<bool>,
    /// Its `networkIP`; default allocated from `127.70.<block>.0/24`. An alias of a
    /// one-element `network_ips` (giving both is invalid).
    #[serde(default, rename = "networkIP", alias = "network_ip")]
    pub network_ip: Option<String>,
    /// Default `e2-standard-2`.
    #[serde(default, rename = "machineType", alias = "machine_type")]
    pub machine_type: Option<String>,
    /// One `networkIP` per NIC (`nic0`, `nic1`, ...). `None`: one NIC with an address
    /// allocated from `127.70.<block>.0/24`. Any free IPv4 address is accepted (the data
    /// plane needs 127/8 for nic0); one in use is a conflict; empty is invalid.
    #[serde(default, alias = "networkIPs")]
    pub network_ips: Option<Vec<String>>,
    /// The i-th goes on nic i as its ONE_TO_ONE_NAT `natIP`. `None`: one allocated
    /// from `127.72.<block>.0/24` on nic0 unless `nat` is false; `Some(vec![])`: none.
    /// More than NICs is invalid; one in use is a conflict.
    #[serde(default, alias = "natIPs")]
    pub nat_ips: Option<Vec<String>>,
}

/// A change to an instance (`PATCH /admin/instances/{name}`).
///
/// `status` takes any of [`STATUSES`] from any other (a reboot is `STOPPING`, then
/// `TERMINATED`, then `RUNNING`; `SUSPENDED` too). NAT addresses stay as they are
/// whatever the status: GCE would release an ephemeral external IP when an instance
/// stops, but the harness names its addresses explicitly (`nat_ips`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancePatch {
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub status: Option<String>,
    /// `true`: a NAT address on nic0 if it has none; `false`: no NAT on any NIC.
    /// Ignored when `nat_ips` is given.
    #[serde(default)]
    pub nat: Option<bool>,
    #[serde(default, rename = "machineType", alias = "machine_type")]
    pub machine_type: Option<String>,
    /// Replaces the NICs' `networkIP`s; the NIC count follows the list (NAT addresses
    /// on NICs that go away are dropped). Empty is invalid (an instance has a NIC).
    #[serde(default, alias = "networkIPs")]
    pub network_ips: Option<Vec<String>>,
    /// Replaces the NAT addresses (the i-th on nic i); `Some(vec![])` removes all.
    /// Given together with `nat`, this wins.
    #[serde(default, alias = "natIPs")]
    pub nat_ips: Option<Vec<String>>,
}

/// An instance as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceInfo {
    pub name: String,
    pub zone: String,
    pub id: String,
    /// nic0's `networkIP` (= `network_ips[0]`).
    pub network_ip: String,
    /// nic0's `natIP` (= `nat_ips.first()`).
    pub nat_ip: Option<String>,
    /// Every NIC's `networkIP`, nic0 first.
    pub network_ips: Vec<String>,
    /// The NAT addresses, the i-th on nic i.
    pub nat_ips: Vec<String>,
    pub tags: Vec<String>,
    pub status: String,
    pub machine_type: String,
    /// `gce://<project>/<zone>/<name>`
    pub provider_id: String,
    pub self_link: String,
}

/// A forwarding rule and what it feeds, summarized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbSummary {
    pub name: String,
    /// The forwarding rule's numeric id (new when it is recreated under the same name).
    pub id: String,
    pub region: String,
    pub ip: String,
    pub protocol: String,
    /// `portRange` or the `ports`.
    pub ports: Vec<String>,
    pub target_pool: Option<String>,
    /// Instance names of the pool.
    pub instances: Vec<String>,
    pub health_check: Option<String>,
    pub session_affinity: Option<String>,
    pub description: String,
    /// Whether its last operation is still in progress.
    pub pending: bool,
}

/// A route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteInfo {
    pub name: String,
    pub dest_range: String,
    /// The `nextHopInstance` URL.
    pub next_hop_instance: Option<String>,
    /// Its last segment (the instance name).
    pub next_hop_instance_name: Option<String>,
    pub next_hop_ip: Option<String>,
    pub priority: i64,
    pub description: String,
}

/// One leaked resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeakedResource {
    pub name: String,
    pub self_link: String,
}

/// `{"total": N, "by_type": {"forwardingRules": [...]}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Leaks {
    pub total: usize,
    pub by_type: BTreeMap<String, Vec<LeakedResource>>,
}

/// What a lifecycle mode applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleTarget {
    Default,
    /// A collection ([`LIFECYCLE_TYPES`]).
    Type(String),
    /// Resources of this name (any collection).
    Resource(String),
}

fn parse_ip(field: &'static str, s: &str) -> Result<Ipv4Addr, AdminError> {
    s.parse()
        .map_err(|_| invalid(field, format!("{s:?} is not an IPv4 address")))
}

fn check_status(s: &str) -> Result<String, AdminError> {
    if STATUSES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(invalid(
            "status",
            format!("{s:?} is not one of {}", STATUSES.join(", ")),
        ))
    }
}

fn check_tags(tags: &[String]) -> Result<(), AdminError> {
    match tags.iter().find(|t| !crate::path::valid_name(t)) {
        Some(t) => Err(invalid("tags", format!("{t:?} is not a valid network tag"))),
        None => Ok(()),
    }
}

fn fingerprint() -> String {
    crate::compute::byte_fingerprint(uuid::Uuid::new_v4().as_u64_pair().0)
}

pub(crate) fn create_instance(
    cloud: &mut Cloud,
    spec: InstanceSpec,
) -> Result<InstanceInfo, AdminError> {
    if !crate::path::valid_name(&spec.name) {
        return Err(invalid(
            "name",
            format!("{:?} is not a valid instance name", spec.name),
        ));
    }
    if cloud.instances.contains_key(&spec.name) {
        return Err(AdminError::Conflict(format!(
            "instance {} exists",
            spec.name
        )));
    }
    let zone = spec
        .zone
        .unwrap_or_else(|| cloud.ctx.zones.first().cloned().unwrap_or_default());
    if !cloud.ctx.has_zone(&zone) {
        return Err(invalid(
            "zone",
            format!("{zone:?} is not one of {:?}", cloud.ctx.zones),
        ));
    }
    let tags = spec.tags.unwrap_or_default();
    check_tags(&tags)?;
    let status = check_status(spec.status.as_deref().unwrap_or("RUNNING"))?;
    let ips = match (spec.network_ip, spec.network_ips) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "network_ips",
                "give networkIP or network_ips, not both",
            ));
        }
        (Some(one), None) => Some(vec![one]),
        (None, many) => many,
    };
    let mut used = cloud.used_ips();
    let network_ips = match ips {
        Some(list) => explicit_ips("network_ips", &list, &used)?,
        None => vec![
            cloud
                .allocate(INTERNAL_POOL)
                .ok_or_else(|| invalid("networkIP", "no free address"))?,
        ],
    };
    if network_ips.is_empty() {
        return Err(invalid("network_ips", "an instance needs at least one NIC"));
    }
    used.extend(network_ips.iter().copied());
    let nat_ips = match spec.nat_ips {
        Some(list) => explicit_ips("nat_ips", &list, &used)?,
        None if spec.nat.unwrap_or(true) => vec![
            allocate_excluding(cloud, NAT_POOL, &used)
                .ok_or_else(|| invalid("nat", "no free address"))?,
        ],
        None => vec![],
    };
    if nat_ips.len() > network_ips.len() {
        return Err(invalid(
            "nat_ips",
            format!(
                "{} NAT addresses for {} NICs (at most one per NIC)",
                nat_ips.len(),
                network_ips.len()
            ),
        ));
    }
    let id = cloud.new_id();
    let inst = Instance {
        name: spec.name.clone(),
        zone,
        id,
        network_ips,
        nat_ips,
        tags,
        tags_fingerprint: fingerprint(),
        status,
        machine_type: spec.machine_type.unwrap_or_else(|| "e2-standard-2".into()),
        created: now_rfc3339(),
    };
    cloud.instances.insert(spec.name, inst.clone());
    Ok(info(cloud, &inst))
}

/// Parses explicit addresses: IPv4, none in `used`, no duplicates.
fn explicit_ips(
    field: &'static str,
    list: &[String],
    used: &HashSet<Ipv4Addr>,
) -> Result<Vec<Ipv4Addr>, AdminError> {
    let mut out: Vec<Ipv4Addr> = Vec::with_capacity(list.len());
    for s in list {
        let ip = parse_ip(field, s)?;
        if used.contains(&ip) || out.contains(&ip) {
            return Err(AdminError::Conflict(format!("address {ip} is in use")));
        }
        out.push(ip);
    }
    Ok(out)
}

/// The next address of a pool neither in use nor in `extra`.
fn allocate_excluding(cloud: &Cloud, pool: Pool, extra: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let used = cloud.used_ips();
    (FIRST_HOST..=254)
        .map(|n| pool.addr(cloud.ctx.block, n))
        .find(|ip| !used.contains(ip) && !extra.contains(ip))
}

fn info(cloud: &Cloud, i: &Instance) -> InstanceInfo {
    InstanceInfo {
        name: i.name.clone(),
        zone: i.zone.clone(),
        id: i.id.to_string(),
        network_ip: i.network_ip().to_string(),
        nat_ip: i.nat_ip().map(|n| n.to_string()),
        network_ips: i.network_ips.iter().map(ToString::to_string).collect(),
        nat_ips: i.nat_ips.iter().map(ToString::to_string).collect(),
        tags: i.tags.clone(),
        status: i.status.clone(),
        machine_type: i.machine_type.clone(),
        provider_id: format!("gce://{}/{}/{}", cloud.ctx.project, i.zone, i.name),
        self_link: cloud
            .ctx
            .url(&format!("zones/{}/instances/{}", i.zone, i.name)),
    }
}

/// The control handle.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

impl Admin {
    pub fn instances(&self) -> Vec<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud.instances.values().map(|i| info(&cloud, i)).collect()
    }

    pub fn instance(&self, name: &str) -> Option<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud.instances.get(name).map(|i| info(&cloud, i))
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<InstanceInfo, AdminError> {
        let r = create_instance(&mut self.shared.cloud(), spec);
        self.shared.wake.changed();
        r
    }

    pub fn update_instance(
        &self,
        name: &str,
        patch: InstancePatch,
    ) -> Result<InstanceInfo, AdminError> {
        let mut cloud = self.shared.cloud();
        let mut inst = cloud
            .instances
            .get(name)
            .cloned()
            .ok_or_else(|| AdminError::NotFound(format!("instance {name}")))?;
        if let Some(tags) = patch.tags {
            check_tags(&tags)?;
            inst.tags = tags;
            inst.tags_fingerprint = fingerprint();
        }
        if let Some(s) = patch.status {
            inst.status = check_status(&s)?;
        }
        if let Some(m) = patch.machine_type {
            inst.machine_type = m;
        }
        // Addresses held by everything but this instance.
        let mut others = cloud.used_ips();
        if let Some(old) = cloud.instances.get(name) {
            for ip in old.network_ips.iter().chain(&old.nat_ips) {
                others.remove(ip);
            }
        }
        if let Some(list) = &patch.network_ips {
            if list.is_empty() {
                return Err(invalid("network_ips", "an instance needs at least one NIC"));
            }
            let ips = explicit_ips("network_ips", list, &others)?;
            if inst.nat_ips.iter().any(|n| ips.contains(n)) && patch.nat_ips.is_none() {
                return Err(AdminError::Conflict(
                    "a networkIP is one of its NAT addresses".into(),
                ));
            }
            inst.network_ips = ips;
            inst.nat_ips.truncate(inst.network_ips.len());
        }
        let mut held = others.clone();
        held.extend(inst.network_ips.iter().copied());
        if let Some(list) = &patch.nat_ips {
            let nats = explicit_ips("nat_ips", list, &held)?;
            if nats.len() > inst.network_ips.len() {
                return Err(invalid(
                    "nat_ips",
                    format!(
                        "{} NAT addresses for {} NICs (at most one per NIC)",
                        nats.len(),
                        inst.network_ips.len()
                    ),
                ));
            }
            inst.nat_ips = nats;
        } else {
            match patch.nat {
                Some(true) if inst.nat_ips.is_empty() => {
                    held.extend(inst.nat_ips.iter().copied());
                    inst.nat_ips = vec![
                        allocate_excluding(&cloud, NAT_POOL, &held)
                            .ok_or_else(|| invalid("nat", "no free address"))?,
                    ];
                }
                Some(false) => inst.nat_ips.clear(),
                _ => {}
            }
        }
        cloud.instances.insert(name.to_string(), inst.clone());
        let out = info(&cloud, &inst);
        drop(cloud);
        self.shared.wake.changed();
        Ok(out)
    }

    pub fn delete_instance(&self, name: &str) -> Result<(), AdminError> {
        let removed = self.shared.cloud().instances.remove(name);
        self.shared.wake.changed();
        removed
            .map(|_| ())
            .ok_or_else(|| AdminError::NotFound(format!("instance {name}")))
    }

    pub fn journal(&self) -> mock_cloud::Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> mock_cloud::Faults {
        self.shared.faults.clone()
    }

    /// Clears journal and fault rules, puts the cloud back to its seed and re-applies the
    /// seed's fault rules. Issued tokens stay valid.
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    pub(crate) fn reset_cloud(&self) {
        *self.shared.cloud() = self.shared.seed.clone();
        self.shared.wake.changed();
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }

    pub fn lifecycle(&self) -> LifecyclePolicies {
        self.shared.cloud().policies.clone()
    }

    /// Sets (`Some`) or removes (`None`) a lifecycle mode; a resource's mode also applies
    /// to its operation in progress.
    pub fn set_lifecycle(
        &self,
        target: LifecycleTarget,
        mode: Option<LifecycleMode>,
    ) -> Result<(), AdminError> {
        let mode = mode
            .map(|m| m.validate().map_err(|e| invalid("mode", e.to_string())))
            .transpose()?;
        let mut cloud = self.shared.cloud();
        match target {
            LifecycleTarget::Default => {
                cloud.policies.default = mode.unwrap_or(LifecycleMode::Immediate)
            }
            LifecycleTarget::Type(t) => {
                let t = t.to_ascii_lowercase();
                if !LIFECYCLE_TYPES.contains(&t.as_str()) {
                    return Err(invalid(
                        "type",
                        format!("{t:?} is not one of {}", LIFECYCLE_TYPES.join(", ")),
                    ));
                }
                match mode {
                    Some(m) => cloud.policies.by_type.insert(t, m),
                    None => cloud.policies.by_type.remove(&t),
                };
            }
            LifecycleTarget::Resource(name) => match mode {
                Some(m) => {
                    cloud.policies.by_id.insert(name.clone(), m);
                    let ops: Vec<String> = cloud
                        .pending
                        .iter()
                        .filter(|(k, _)| k.name == name)
                        .map(|(_, o)| o.clone())
                        .collect();
                    for op in ops {
                        if let Some(op) = cloud.ops.get_mut(&op) {
                            op.lifecycle.set_mode(m);
                        }
                    }
                }
                None => {
                    cloud.policies.by_id.remove(&name);
                }
            },
        }
        drop(cloud);
        self.shared.wake.changed();
        Ok(())
    }

    /// What the Compute API created that still exists.
    pub fn leaks(&self) -> Leaks {
        let cloud = self.shared.cloud();
        let mut leaks = Leaks::default();
        for (k, _) in cloud
            .docs
            .iter()
            .filter(|(k, _)| !cloud.baseline.contains(*k))
        {
            leaks
                .by_type
                .entry(k.kind.collection().to_string())
                .or_default()
                .push(LeakedResource {
                    name: k.name.clone(),
                    self_link: cloud.ctx.key_url(k),
                });
            leaks.total += 1;
        }
        leaks
    }

    /// One summary per forwarding rule.
    pub fn load_balancers(&self) -> Vec<LbSummary> {
        let cloud = self.shared.cloud();
        let name_of = |url: &str| url.rsplit('/').next().unwrap_or_default().to_string();
        cloud
            .docs_of(Kind::ForwardingRule, None)
            .into_iter()
            .map(|(k, d)| {
                let v = &d.value;
                let pool = v["target"].as_str().and_then(|t| {
                    let r = crate::path::parse_ref(t).ok()?;
                    cloud.docs.get(&crate::state::Key {
                        kind: Kind::TargetPool,
                        scope: r.scope,
                        name: r.name,
                    })
                });
                let mut ports: Vec<String> = v["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect();
                if let Some(r) = v["portRange"].as_str() {
                    ports.push(r.to_string());
                }
                LbSummary {
                    name: k.name.clone(),
                    id: d.id.to_string(),
                    region: match &k.scope {
                        Scope::Region(r) => r.clone(),
                        _ => String::new(),
                    },
                    ip: v["IPAddress"].as_str().unwrap_or_default().to_string(),
                    protocol: v["IPProtocol"].as_str().unwrap_or_default().to_string(),
                    ports,
                    target_pool: v["target"].as_str().map(name_of),
                    instances: pool
                        .map(|p| {
                            p.value["instances"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(Value::as_str)
                                .map(name_of)
                                .collect()
                        })
                        .unwrap_or_default(),
                    health_check: pool
                        .and_then(|p| p.value["healthChecks"][0].as_str().map(name_of)),
                    session_affinity: pool
                        .and_then(|p| p.value["sessionAffinity"].as_str().map(str::to_string)),
                    description: v["description"].as_str().unwrap_or_default().to_string(),
                    pending: cloud.pending.contains_key(k),
                }
            })
            .collect()
    }

    /// Adds a route someone else made (next hop an IP, priority 1000, network the
    /// mock's). It is part of the baseline: never a leak, gone after `reset`. A name in
    /// use is a conflict.
    pub fn add_route(
        &self,
        name: &str,
        dest_range: &str,
        next_hop_ip: &str,
    ) -> Result<RouteInfo, AdminError> {
        self.add_described_route(name, dest_range, next_hop_ip, "")
    }

    /// [`Self::add_route`] with a `description`: `k8s-node-route` makes it look like a
    /// route a GCE CCM made (cloud-provider-gcp `gce_routes.go` lists its routes by name
    /// prefix and that description), e.g. one left behind by a node that is gone.
    pub fn add_described_route(
        &self,
        name: &str,
        dest_range: &str,
        next_hop_ip: &str,
        description: &str,
    ) -> Result<RouteInfo, AdminError> {
        if !crate::path::valid_name(name) {
            return Err(invalid(
                "name",
                format!("{name:?} is not a valid route name"),
            ));
        }
        let valid_cidr = dest_range.split_once('/').is_some_and(|(a, l)| {
            a.parse::<Ipv4Addr>().is_ok() && l.parse::<u8>().is_ok_and(|l| l <= 32)
        });
        if !valid_cidr {
            return Err(invalid(
                "dest_range",
                format!("{dest_range:?} is not an IPv4 CIDR"),
            ));
        }
        let hop = parse_ip("next_hop_ip", next_hop_ip)?;
        let mut cloud = self.shared.cloud();
        let key = crate::state::Key {
            kind: Kind::Route,
            scope: Scope::Global,
            name: name.to_string(),
        };
        if cloud.docs.contains_key(&key) {
            return Err(AdminError::Conflict(format!("route {name} exists")));
        }
        let id = cloud.new_id();
        let value = serde_json::json!({
            "kind": "compute#route", "id": id.to_string(), "name": name,
            "creationTimestamp": now_rfc3339(), "selfLink": cloud.ctx.key_url(&key),
            "network": cloud.ctx.network_url(), "destRange": dest_range,
            "nextHopIp": hop.to_string(), "priority": 1000, "routeType": "STATIC",
            "description": description,
        });
        cloud.insert_baseline(key, crate::state::Doc { value, id });
        drop(cloud);
        self.shared.wake.changed();
        self.routes()
            .into_iter()
            .find(|r| r.name == name)
            .ok_or_else(|| AdminError::NotFound(format!("route {name}")))
    }

    pub fn routes(&self) -> Vec<RouteInfo> {
        let cloud = self.shared.cloud();
        cloud
            .docs_of(Kind::Route, None)
            .into_iter()
            .map(|(k, d)| RouteInfo {
                name: k.name.clone(),
                dest_range: d.value["destRange"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                next_hop_instance: d.value["nextHopInstance"].as_str().map(str::to_string),
                next_hop_instance_name: d.value["nextHopInstance"]
                    .as_str()
                    .map(|s| s.rsplit('/').next().unwrap_or(s).to_string()),
                next_hop_ip: d.value["nextHopIp"].as_str().map(str::to_string),
                priority: d.value["priority"].as_i64().unwrap_or(1000),
                description: d.value["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect()
    }

    /// Every stored resource of a collection (`firewalls`, `targetPools`, ...).
    pub fn resources(&self, collection: &str) -> Option<Vec<Value>> {
        let kind = Kind::from_collection(collection)?;
        let cloud = self.shared.cloud();
        Some(
            cloud
                .docs_of(kind, None)
                .into_iter()
                .map(|(k, d)| crate::compute::render(&cloud, k, d))
                .collect(),
        )
    }
}
