//! EC2's operations on the shared cloud state (`crate::state::Cloud`: instances, subnets,
//! route tables, security groups, tags): instance lifecycle, routes, ingress rules and
//! tags, with EC2's error codes. Requests arrive already validated (see `api.rs`); this
//! module knows nothing of query parameters or XML.

use std::collections::BTreeMap;

use crate::error::AwsError;
use crate::state::{
    Cloud, Instance, InstanceSpec, InstanceState, Permission, Route, SecurityGroup, new_id,
};

pub(super) fn not_found(code: &str, kind: &str, id: &str) -> AwsError {
    AwsError::bad(code, format!("The {kind} '{id}' does not exist"))
}

// ---- instances ----

pub(crate) fn mac_of(i: &Instance) -> String {
    let o = i.private_ip.octets();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

pub(super) fn lookup_instances<'c>(
    cloud: &'c Cloud,
    ids: &[String],
) -> Result<Vec<&'c Instance>, AwsError> {
    // Real EC2 fails the whole call when any id is unknown (cloud-apis.md §4.2).
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| cloud.instance(id).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        if let Some(bad) = missing.iter().find(|id| !is_instance_id(id)) {
            return Err(AwsError::bad(
                "InvalidInstanceID.Malformed",
                format!("Invalid id: \"{bad}\""),
            ));
        }
        return Err(AwsError::bad(
            "InvalidInstanceID.NotFound",
            format!("The instance IDs '{}' do not exist", missing.join(", ")),
        ));
    }
    Ok(ids.iter().filter_map(|id| cloud.instance(id)).collect())
}

fn is_instance_id(id: &str) -> bool {
    id.strip_prefix("i-").is_some_and(|h| {
        (h.len() == 8 || h.len() == 17) && h.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// A validated `RunInstances`.
pub(super) struct RunInstances {
    pub count: i64,
    pub zone: Option<String>,
    pub subnet: Option<String>,
    pub instance_type: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// Launches the instances; answers the reservation id and the new instance ids.
pub(super) fn run_instances(
    cloud: &mut Cloud,
    req: RunInstances,
) -> Result<(String, Vec<String>), AwsError> {
    if let Some(z) = &req.zone
        && !cloud.zones.contains(z)
    {
        return Err(AwsError::invalid_value("AvailabilityZone", z));
    }
    let subnet = req.subnet.as_deref();
    if let Some(s) = subnet
        && !cloud.subnets.iter().any(|n| n.id == s)
    {
        return Err(not_found("InvalidSubnetID.NotFound", "subnet ID", s));
    }
    let reservation = new_id("r");
    let mut created = Vec::new();
    for _ in 0..req.count {
        let spec = InstanceSpec {
            zone: req.zone.clone(),
            instance_type: req.instance_type.clone(),
            private_ip: None,
            public_ip: Some(true),
            // moto and EC2 both answer `pending` here; the next describe shows running.
            state: Some(InstanceState::Running),
            tags: req.tags.clone(),
            name: None,
            ..Default::default()
        };
        let id = cloud
            .create_instance(spec, &reservation, subnet)
            .map_err(|e| AwsError::bad("InsufficientInstanceCapacity", e.to_string()))?;
        created.push(id);
    }
    Ok((reservation, created))
}

#[derive(Clone, Copy)]
pub(super) enum StateChange {
    Stop,
    Start,
    Terminate,
}

/// Stop/Start/Terminate: answers `(id, previous, shown)` where `shown` is the transitional
/// state (`stopping`, `pending`, `shutting-down`); the instance settles at once (moto
/// settles on the next call too).
pub(super) fn change_state(
    cloud: &mut Cloud,
    ids: &[String],
    change: StateChange,
) -> Result<Vec<(String, InstanceState, InstanceState)>, AwsError> {
    lookup_instances(cloud, ids)?;
    let mut changes = Vec::new();
    for id in ids {
        let Some(i) = cloud.instance_mut(id) else {
            continue;
        };
        let previous = i.state;
        let (shown, settled) = match (change, previous) {
            (_, InstanceState::Terminated) => (previous, previous),
            (StateChange::Stop, InstanceState::Stopped) => (previous, previous),
            (StateChange::Stop, _) => (InstanceState::Stopping, InstanceState::Stopped),
            (StateChange::Start, InstanceState::Running) => (previous, previous),
            (StateChange::Start, _) => (InstanceState::Pending, InstanceState::Running),
            (StateChange::Terminate, _) => (InstanceState::ShuttingDown, InstanceState::Terminated),
        };
        i.state = settled;
        changes.push((id.clone(), previous, shown));
    }
    Ok(changes)
}

/// A validated `ModifyInstanceAttribute`: what is absent stays.
pub(super) struct ModifyInstance {
    pub source_dest_check: Option<bool>,
    pub instance_type: Option<String>,
    /// Empty keeps the groups.
    pub groups: Vec<String>,
}

pub(super) fn modify_instance(
    cloud: &mut Cloud,
    id: &str,
    req: ModifyInstance,
) -> Result<(), AwsError> {
    for g in &req.groups {
        if !cloud.security_groups.iter().any(|s| &s.id == g) {
            return Err(not_found("InvalidGroup.NotFound", "security group", g));
        }
    }
    if let Some(i) = cloud.instance_mut(id) {
        if let Some(c) = req.source_dest_check {
            i.source_dest_check = c;
        }
        if let Some(t) = req.instance_type {
            i.instance_type = t;
        }
        if !req.groups.is_empty() {
            i.group_ids = req.groups;
        }
    }
    Ok(())
}

// ---- instance topology ----

/// Instance families EC2 reports a topology for (EC2 API reference,
/// DescribeInstanceTopology "Limitations"); `p6-b200` has four network-node layers, the
/// others three. Instances of other types are left out of the answer, not refused.
const TOPOLOGY_FAMILIES: &[(&str, usize)] = &[
    ("hpc6a", 3),
    ("hpc6id", 3),
    ("hpc7a", 3),
    ("hpc7g", 3),
    ("p3dn", 3),
    ("p4d", 3),
    ("p4de", 3),
    ("p5", 3),
    ("p5e", 3),
    ("p5en", 3),
    ("trn1", 3),
    ("trn1n", 3),
    ("trn2", 3),
    ("trn2u", 3),
    ("p6-b200", 4),
];

/// How many network-node layers EC2 reports for an instance type (`None`: unsupported).
pub(super) fn topology_layers(instance_type: &str) -> Option<usize> {
    let family = instance_type.split('.').next().unwrap_or_default();
    TOPOLOGY_FAMILIES
        .iter()
        .find(|(f, _)| *f == family)
        .map(|(_, n)| *n)
}

/// A stable `nn-` id (17 hex digits) for a network node, from what it stands for.
fn network_node_id(key: &str) -> String {
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("nn-{:017x}", u128::from(hash) & 0x1_ffff_ffff_ffff_ffff)
}

/// The network nodes from the top layer down: one spine per zone, then one node per
/// subnet and layer below, so instances of a subnet share every layer (EC2 itself groups
/// by physical placement; a mock has none, and a subnet is the closest stand-in).
pub(super) fn network_nodes(i: &Instance, layers: usize) -> Vec<String> {
    (0..layers)
        .map(|layer| {
            if layer == 0 {
                network_node_id(&format!("{}/spine", i.zone))
            } else {
                network_node_id(&format!("{}/{}/{layer}", i.zone, i.subnet_id))
            }
        })
        .collect()
}

// ---- routes ----

fn route_table_mut<'c>(
    cloud: &'c mut Cloud,
    id: &str,
) -> Result<&'c mut crate::state::RouteTable, AwsError> {
    cloud
        .route_tables
        .iter_mut()
        .find(|t| t.id == id)
        .ok_or_else(|| not_found("InvalidRouteTableID.NotFound", "routeTable ID", id))
}

/// Adds `route` to `table`; its destination must be new there and its instance (if any)
/// must exist.
pub(super) fn create_route(cloud: &mut Cloud, table: &str, route: Route) -> Result<(), AwsError> {
    if let Some(i) = &route.instance_id {
        lookup_instances(cloud, std::slice::from_ref(i))?;
    }
    let t = route_table_mut(cloud, table)?;
    if t.routes.iter().any(|r| r.destination == route.destination) {
        return Err(AwsError::bad(
            "RouteAlreadyExists",
            format!(
                "The route identified by {} already exists.",
                route.destination
            ),
        ));
    }
    t.routes.push(route);
    Ok(())
}

/// Removes the route to `cidr` from `table` (never the `local` one).
pub(super) fn delete_route(cloud: &mut Cloud, table: &str, cidr: &str) -> Result<(), AwsError> {
    let t = route_table_mut(cloud, table)?;
    let before = t.routes.len();
    t.routes
        .retain(|r| r.destination != cidr || r.gateway_id.as_deref() == Some("local"));
    if t.routes.len() == before {
        return Err(AwsError::bad(
            "InvalidRoute.NotFound",
            format!("no route with destination-cidr-block {cidr} in route table {table}"),
        ));
    }
    Ok(())
}

// ---- security groups ----

/// A validated `CreateSecurityGroup`.
pub(super) struct CreateSecurityGroup {
    pub name: String,
    pub description: String,
    /// `None` is the first VPC.
    pub vpc: Option<String>,
}

/// Creates a security group; answers its id. `tags` are read after the VPC and name
/// checks, so those faults are answered first.
pub(super) fn create_security_group(
    cloud: &mut Cloud,
    req: CreateSecurityGroup,
    tags: impl FnOnce() -> Result<BTreeMap<String, String>, AwsError>,
) -> Result<String, AwsError> {
    let CreateSecurityGroup {
        name,
        description,
        vpc,
    } = req;
    let vpc = match vpc {
        Some(v) => v,
        None => cloud.vpcs.first().map(|v| v.id.clone()).unwrap_or_default(),
    };
    if !cloud.vpcs.iter().any(|v| v.id == vpc) {
        return Err(not_found("InvalidVpcID.NotFound", "vpc ID", &vpc));
    }
    if cloud
        .security_groups
        .iter()
        .any(|g| g.name == name && g.vpc_id == vpc)
    {
        return Err(AwsError::bad(
            "InvalidGroup.Duplicate",
            format!("The security group '{name}' already exists for VPC '{vpc}'"),
        ));
    }
    let tags = tags()?;
    let id = new_id("sg");
    cloud.security_groups.push(SecurityGroup {
        id: id.clone(),
        name,
        description,
        vpc_id: vpc,
        ingress: Vec::new(),
    });
    if !tags.is_empty() {
        cloud.tags.insert(id.clone(), tags);
    }
    Ok(id)
}

/// How a request names a security group: `GroupId`, else `GroupName`.
pub(super) enum GroupRef {
    Id(String),
    Name(String),
}

/// The id of the group `group` names; it must exist.
pub(super) fn security_group_id(cloud: &Cloud, group: &GroupRef) -> Result<String, AwsError> {
    let (found, asked) = match group {
        GroupRef::Id(id) => (cloud.security_groups.iter().find(|g| &g.id == id), id),
        GroupRef::Name(name) => (cloud.security_groups.iter().find(|g| &g.name == name), name),
    };
    found
        .map(|g| g.id.clone())
        .ok_or_else(|| not_found("InvalidGroup.NotFound", "security group", asked))
}

/// Authorize (`add`) or revoke ingress, one source at a time as EC2 counts them.
pub(super) fn ingress(
    cloud: &mut Cloud,
    id: &str,
    perms: Vec<Permission>,
    add: bool,
) -> Result<(), AwsError> {
    let known: Vec<String> = cloud.security_groups.iter().map(|g| g.id.clone()).collect();
    let Some(group) = cloud.security_groups.iter_mut().find(|g| g.id == id) else {
        return Err(not_found("InvalidGroup.NotFound", "security group", id));
    };
    for perm in perms {
        for g in &perm.groups {
            if !known.contains(g) {
                return Err(not_found("InvalidGroup.NotFound", "security group", g));
            }
        }
        let same = |q: &Permission| {
            q.protocol == perm.protocol
                && q.from_port == perm.from_port
                && q.to_port == perm.to_port
        };
        let existing = group.ingress.iter_mut().find(|q| same(q));
        if add {
            match existing {
                Some(q) => {
                    for c in &perm.cidrs {
                        if q.cidrs.contains(c) {
                            return Err(AwsError::bad(
                                "InvalidPermission.Duplicate",
                                format!(
                                    "the specified rule \"peer: {c}, {}\" already exists",
                                    perm.protocol
                                ),
                            ));
                        }
                    }
                    for g in &perm.groups {
                        if q.groups.contains(g) {
                            return Err(AwsError::bad(
                                "InvalidPermission.Duplicate",
                                format!(
                                    "the specified rule \"peer: {g}, {}\" already exists",
                                    perm.protocol
                                ),
                            ));
                        }
                    }
                    q.cidrs.extend(perm.cidrs);
                    q.groups.extend(perm.groups);
                }
                None => group.ingress.push(perm),
            }
        } else {
            let Some(q) = existing else {
                return Err(AwsError::bad(
                    "InvalidPermission.NotFound",
                    "The specified rule does not exist in this security group.",
                ));
            };
            if perm.cidrs.iter().any(|c| !q.cidrs.contains(c))
                || perm.groups.iter().any(|g| !q.groups.contains(g))
            {
                return Err(AwsError::bad(
                    "InvalidPermission.NotFound",
                    "The specified rule does not exist in this security group.",
                ));
            }
            q.cidrs.retain(|c| !perm.cidrs.contains(c));
            q.groups.retain(|g| !perm.groups.contains(g));
            group
                .ingress
                .retain(|q| !q.cidrs.is_empty() || !q.groups.is_empty());
        }
    }
    Ok(())
}

/// Deletes a security group nothing refers to (another group's rule, a live instance, a
/// classic load balancer).
pub(super) fn delete_security_group(cloud: &mut Cloud, group: &GroupRef) -> Result<(), AwsError> {
    let id = security_group_id(cloud, group)?;
    let referenced = cloud
        .security_groups
        .iter()
        .any(|g| g.id != id && g.ingress.iter().any(|perm| perm.groups.contains(&id)))
        || cloud
            .instances
            .iter()
            .any(|i| i.state != InstanceState::Terminated && i.group_ids.contains(&id))
        || cloud
            .elbs
            .values()
            .any(|lb| lb.security_groups.contains(&id));
    if referenced {
        return Err(AwsError::bad(
            "DependencyViolation",
            format!("resource {id} has a dependent object"),
        ));
    }
    cloud.security_groups.retain(|g| g.id != id);
    cloud.tags.remove(&id);
    Ok(())
}

// ---- tags ----

pub(super) fn resource_exists(cloud: &Cloud, id: &str) -> bool {
    cloud.instance(id).is_some()
        || cloud.vpcs.iter().any(|v| v.id == id)
        || cloud.subnets.iter().any(|s| s.id == id)
        || cloud.route_tables.iter().any(|t| t.id == id)
        || cloud.security_groups.iter().any(|g| g.id == id)
}

pub(super) fn resource_type(id: &str) -> &'static str {
    match id.split('-').next() {
        Some("i") => "instance",
        Some("vpc") => "vpc",
        Some("subnet") => "subnet",
        Some("rtb") => "route-table",
        Some("sg") => "security-group",
        _ => "unknown",
    }
}

/// Every id must name a taggable resource.
pub(super) fn check_tagged(cloud: &Cloud, ids: &[String]) -> Result<(), AwsError> {
    for id in ids {
        if !resource_exists(cloud, id) {
            let code = match resource_type(id) {
                "instance" => "InvalidInstanceID.NotFound",
                "security-group" => "InvalidGroup.NotFound",
                "subnet" => "InvalidSubnetID.NotFound",
                "vpc" => "InvalidVpcID.NotFound",
                "route-table" => "InvalidRouteTableID.NotFound",
                _ => "InvalidID",
            };
            return Err(not_found(code, "ID", id));
        }
    }
    Ok(())
}

/// Sets `tags` (a missing value is "") on every resource in `ids`.
pub(super) fn create_tags(
    cloud: &mut Cloud,
    ids: Vec<String>,
    tags: &[(String, Option<String>)],
) -> Result<(), AwsError> {
    check_tagged(cloud, &ids)?;
    for id in ids {
        let t = cloud.tags.entry(id).or_default();
        for (k, v) in tags {
            t.insert(k.clone(), v.clone().unwrap_or_default());
        }
    }
    Ok(())
}

/// Deletes `tags` from every resource in `ids` (all of them when `tags` is empty).
pub(super) fn delete_tags(
    cloud: &mut Cloud,
    ids: Vec<String>,
    tags: &[(String, Option<String>)],
) -> Result<(), AwsError> {
    check_tagged(cloud, &ids)?;
    for id in ids {
        let Some(t) = cloud.tags.get_mut(&id) else {
            continue;
        };
        if tags.is_empty() {
            t.clear();
        }
        // A value given must match; no value deletes the key whatever its value.
        for (k, v) in tags {
            if v.as_ref().is_none_or(|v| t.get(k) == Some(v)) {
                t.remove(k);
            }
        }
    }
    Ok(())
}
