//! The cloud's state: a store of ARM documents keyed by lowercased id, the VM records,
//! and the asynchronous operations still changing documents.
//!
//! Why documents: ARM itself stores a resource as the JSON a client PUT, plus what the
//! resource provider computes (ids of sub-resources, allocated addresses, etag,
//! `provisioningState`, read-only back-references). Keeping that JSON, with per-type
//! hooks that check references and fill computed fields (the network provider's, in
//! `network/state.rs`, handed in as [`Prepare`] and [`CheckDelete`]: they read the store,
//! so the store takes them as parameters rather than importing them), answers every
//! field a client sent back as sent (the CCM compares what it reads with what it wants,
//! and a lost field makes it PUT again forever).
//!
//! Child resources (routes of a route table, subnets of a virtual network) live in
//! their parent's `properties` array, as ARM shows them, and are also addressable on
//! their own path.
//!
//! Every top-level document also keeps `served`: its content when its last operation
//! succeeded. The data plane serves that, so a load balancer whose update is still in
//! progress keeps carrying traffic as before, and one still being created carries none.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use axum::http::StatusCode;
use mock_cloud::{Lifecycle, Phase, Policies};
use serde_json::{Value, json};

use crate::arm::ops::{OpKind, Operation};
use crate::arm::path::{self, TypeInfo};
use crate::arm::{ArmError, new_etag};
use crate::compute::state::Vm;

/// The hook that builds a PUT's stored document from its body: checks the body and its
/// references, fills ids, etag, state and computed fields (`network::state::prepare`).
pub type Prepare =
    fn(&Cloud, &TypeInfo, &str, &str, Value, Option<&Value>) -> Result<Value, ArmError>;

/// The hook that refuses deleting what is still used (`network::state::check_delete`).
pub type CheckDelete = fn(&Cloud, &TypeInfo, &str) -> Result<(), ArmError>;

/// Where the mock's resources live.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub subscription: String,
    pub resource_group: String,
    pub location: String,
    /// The /24 index of the 127.60/61/62 pools.
    pub block: u8,
    pub vnet: String,
    pub subnet: String,
    pub nsg: String,
    pub route_table: String,
}

/// First host number allocated in each /24.
pub const FIRST_HOST: u8 = 10;
/// An address pool: `<a>.<b>.<block>.<n>`, one /24 per mock (its `address_block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool(pub [u8; 2]);

impl Pool {
    pub fn addr(self, block: u8, n: u8) -> Ipv4Addr {
        Ipv4Addr::new(self.0[0], self.0[1], block, n)
    }

    /// The pool's /24 for `block`, as `a.b.block.0/24`.
    pub fn cidr(self, block: u8) -> String {
        format!("{}/24", self.addr(block, 0))
    }

    pub fn holds(self, block: u8, ip: Ipv4Addr) -> bool {
        ip.octets()[..3] == [self.0[0], self.0[1], block]
    }
}

/// VM private IPs.
pub const PRIVATE_POOL: Pool = Pool([127, 60]);
/// Public IPs as ARM reports them: 198.18.0.0/15 (RFC 2544's benchmarking range, routed
/// nowhere) because cloud-provider-azure refuses a Service address that is not global
/// unicast or is private (`pkg/provider/azure_publicip_repo.go`,
/// `validatePublicIPCandidate`), which 127/8 and RFC 1918 both are. The data plane
/// listens on each one's loopback twin in [`PUBLIC_LISTENER_POOL`] ([`listener_ip`]).
pub const PUBLIC_POOL: Pool = Pool([198, 18]);
/// Where the data plane serves public frontends: `127.61.<block>.<n>` for
/// `198.18.<block>.<n>`, so no root and no interface setup are needed.
pub const PUBLIC_LISTENER_POOL: Pool = Pool([127, 61]);
/// Internal load balancer frontends (private, as ARM's are: in the VMs' address space).
pub const INTERNAL_POOL: Pool = Pool([127, 62]);

/// The address the data plane listens on for a frontend address: a public IP's loopback
/// twin; any other address unchanged. Clients of the mock (the harness, `curl`) dial
/// this for a public IP they read from ARM.
pub fn listener_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.octets()[..2] == PUBLIC_POOL.0 => {
            let [_, _, block, n] = v4.octets();
            IpAddr::V4(PUBLIC_LISTENER_POOL.addr(block, n))
        }
        other => other,
    }
}

/// One stored top-level resource.
#[derive(Debug, Clone)]
pub struct Doc {
    pub value: Value,
    /// Its content when its last operation succeeded (`None`: never yet).
    pub served: Option<Value>,
    /// Creation order (lists answer in it).
    pub seq: u64,
}

/// The state.
#[derive(Debug, Clone)]
pub struct Cloud {
    pub ctx: Ctx,
    pub docs: BTreeMap<String, Doc>,
    /// By lowercased name.
    pub vms: BTreeMap<String, Vm>,
    /// Scale sets by lowercased name.
    pub scale_sets: BTreeMap<String, crate::compute::vmss::ScaleSet>,
    pub ops: HashMap<String, Operation>,
    /// Resource key -> the id of its operation in progress.
    pub pending: HashMap<String, String>,
    pub policies: Policies,
    /// Keys (documents, NSG rules, routes) that are not the CCM's doing: the seed and the
    /// admin API's. Everything else still present is a leak.
    pub baseline: HashSet<String>,
    pub seq: u64,
    /// Operations that ended (the data plane re-plans when this moves).
    pub transitions: u64,
}

fn props(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    v.get("properties").and_then(Value::as_object)
}

impl Cloud {
    /// The infrastructure every start (and reset) has: the virtual network with its
    /// subnet, the network security group and the route table, built by `prepare`.
    pub fn new(ctx: Ctx, prepare: Prepare) -> Cloud {
        let mut cloud = Cloud {
            ctx,
            docs: BTreeMap::new(),
            vms: BTreeMap::new(),
            scale_sets: BTreeMap::new(),
            ops: HashMap::new(),
            pending: HashMap::new(),
            policies: Policies::default(),
            baseline: HashSet::new(),
            seq: 0,
            transitions: 0,
        };
        let c = cloud.ctx.clone();
        let nsg_id = cloud.id(path::NSG, &[&c.nsg]);
        let rt_id = cloud.id(path::RT, &[&c.route_table]);
        let seeds = [
            (
                path::NSG,
                c.nsg.clone(),
                json!({"properties": {"securityRules": []}}),
            ),
            (
                path::RT,
                c.route_table.clone(),
                json!({"properties": {"routes": [], "disableBgpRoutePropagation": false}}),
            ),
            (
                path::VNET,
                c.vnet.clone(),
                json!({"properties": {
                    "addressSpace": {"addressPrefixes": ["10.0.0.0/8"]},
                    "subnets": [{"name": c.subnet, "properties": {
                        "addressPrefix": "10.240.0.0/16",
                        "networkSecurityGroup": {"id": nsg_id},
                        "routeTable": {"id": rt_id}}}]
                }}),
            ),
        ];
        for (ty, name, body) in seeds {
            let info = path::type_info(ty).expect("known type");
            let id = cloud.id(ty, &[&name]);
            let value = prepare(&cloud, info, &id, &name, body, None)
                .expect("the seeded infrastructure is valid");
            cloud.insert_settled(&id, value);
        }
        cloud
    }

    /// A canonical id of type `ty` in the mock's resource group.
    pub fn id(&self, ty: &str, names: &[&str]) -> String {
        let info = path::type_info(ty).expect("known type");
        path::resource_id(
            &self.ctx.subscription,
            &self.ctx.resource_group,
            info,
            names,
        )
    }

    /// Stores a document as done (seed and admin writes), in the baseline.
    pub fn insert_settled(&mut self, id: &str, mut value: Value) {
        set_state(&mut value, "Succeeded");
        let key = path::resource_key(id);
        self.seq += 1;
        self.mark_baseline(&key, &value);
        let seq = self.docs.get(&key).map_or(self.seq, |d| d.seq);
        self.docs.insert(
            key,
            Doc {
                served: Some(value.clone()),
                value,
                seq,
            },
        );
    }

    /// Records a document and its NSG rules and routes as not the CCM's doing.
    pub fn mark_baseline(&mut self, key: &str, value: &Value) {
        self.baseline.insert(key.to_string());
        for coll in ["securityRules", "routes"] {
            if let Some(items) = props(value)
                .and_then(|p| p.get(coll))
                .and_then(Value::as_array)
            {
                for item in items {
                    if let Some(id) = item.get("id").and_then(Value::as_str) {
                        self.baseline.insert(path::resource_key(id));
                    }
                }
            }
        }
    }

    // ---- lookups ----------------------------------------------------------------

    /// The stored JSON of a resource or child resource.
    pub fn lookup(&self, key: &str) -> Option<&Value> {
        if let Some(doc) = self.docs.get(key) {
            return Some(&doc.value);
        }
        let (parent, coll, name) = path::split_sub_resource(key)?;
        let doc = self.docs.get(&parent)?;
        find_child(&doc.value, &coll, &name)
    }

    fn lookup_mut(&mut self, key: &str) -> Option<&mut Value> {
        if self.docs.contains_key(key) {
            return self.docs.get_mut(key).map(|d| &mut d.value);
        }
        let (parent, coll, name) = path::split_sub_resource(key)?;
        let doc = self.docs.get_mut(&parent)?;
        find_child_mut(&mut doc.value, &coll, &name)
    }

    /// Whether a sub-resource id (`{lb}/frontendIPConfigurations/x`, `{vnet}/subnets/y`,
    /// a backend pool) exists.
    pub fn sub_resource_exists(&self, id: &str) -> bool {
        self.lookup(&path::resource_key(id)).is_some()
    }

    /// Top-level documents of a type, in creation order.
    pub fn docs_of(&self, info: &TypeInfo) -> Vec<(&String, &Doc)> {
        let prefix = format!(
            "/subscriptions/{}/resourcegroups/{}/providers/{}/",
            self.ctx.subscription.to_ascii_lowercase(),
            self.ctx.resource_group.to_ascii_lowercase(),
            info.key.split('/').next().unwrap_or_default()
        );
        let seg = info.key.split('/').nth(1).unwrap_or_default();
        let mut out: Vec<(&String, &Doc)> = self
            .docs
            .iter()
            .filter(|(k, _)| {
                k.strip_prefix(&prefix)
                    .and_then(|rest| rest.split_once('/'))
                    .is_some_and(|(t, name)| t == seg && !name.contains('/'))
            })
            .collect();
        out.sort_by_key(|(_, d)| d.seq);
        out
    }

    // ---- operations -------------------------------------------------------------

    /// Applies every operation whose lifecycle ended (a look that counts no read).
    pub fn settle(&mut self) {
        let ids: Vec<String> = self.pending.values().cloned().collect();
        for id in ids {
            self.observe_op(&id, false);
        }
    }

    /// Whether an operation's first poll will find it ended (an immediate lifecycle), so
    /// its answer can tell the client to poll at once. Looks without applying anything.
    pub fn op_ends_at_first_poll(&self, op_id: &str) -> bool {
        self.ops
            .get(op_id)
            .is_some_and(|op| op.applied.is_some() || op.lifecycle.clone().read() != Phase::Pending)
    }

    /// Looks at an operation (`count_read`: a client polled it) and applies its end.
    pub fn observe_op(&mut self, op_id: &str, count_read: bool) -> Option<(Operation, Phase)> {
        let op = self.ops.get_mut(op_id)?;
        let phase = match op.applied {
            Some(p) => p,
            None if count_read => op.lifecycle.read(),
            None => op.lifecycle.peek(),
        };
        if phase != Phase::Pending && op.applied.is_none() {
            op.applied = Some(phase);
            let op = op.clone();
            self.finish(&op, phase);
        }
        self.ops.get(op_id).map(|op| (op.clone(), phase))
    }

    fn finish(&mut self, op: &Operation, phase: Phase) {
        self.pending.remove(&op.key);
        self.transitions += 1;
        match (op.kind, phase) {
            (OpKind::Put, Phase::Done) => {
                if let Some(v) = self.lookup_mut(&op.key) {
                    set_state(v, "Succeeded");
                }
                if let Some(doc) = self.docs.get_mut(&op.key) {
                    doc.served = Some(doc.value.clone());
                }
            }
            (OpKind::Delete, Phase::Done) => self.remove(&op.key),
            (_, _) => {
                if let Some(v) = self.lookup_mut(&op.key) {
                    set_state(v, "Failed");
                }
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if self.docs.remove(key).is_some() {
            self.release_pool_members(key);
            return;
        }
        if let Some((parent, coll, name)) = path::split_sub_resource(key)
            && let Some(doc) = self.docs.get_mut(&parent)
            && let Some(items) = doc
                .value
                .get_mut("properties")
                .and_then(|p| p.get_mut(coll_name(&coll)))
                .and_then(Value::as_array_mut)
        {
            items.retain(|i| !name_is(i, &name));
            doc.value["etag"] = Value::String(new_etag());
        }
    }

    /// ARM disassociates a deleted load balancer's backend pools from the NICs that joined
    /// them (the NICs get a new etag): clients that then GET a NIC and PUT it back with
    /// another pool must not be refused for a stale reference (cloud-provider-azure
    /// `safeDeleteLoadBalancer` deletes without rewriting the NICs first).
    fn release_pool_members(&mut self, lb_key: &str) {
        let prefix = format!("{lb_key}/backendaddresspools/");
        let nic = path::type_info(path::NIC).expect("known");
        let nics: Vec<String> = self
            .docs_of(nic)
            .into_iter()
            .map(|(k, _)| k.clone())
            .collect();
        for k in nics {
            let Some(doc) = self.docs.get_mut(&k) else {
                continue;
            };
            let mut changed = false;
            for cfg in doc.value["properties"]["ipConfigurations"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if let Some(pools) =
                    cfg["properties"]["loadBalancerBackendAddressPools"].as_array_mut()
                {
                    let before = pools.len();
                    pools.retain(|p| {
                        !p["id"]
                            .as_str()
                            .is_some_and(|id| path::resource_key(id).starts_with(&prefix))
                    });
                    changed |= pools.len() != before;
                }
            }
            if changed {
                doc.value["etag"] = Value::String(new_etag());
            }
        }
    }

    /// Starts an operation on `key` with the lifecycle policies' mode.
    fn begin(&mut self, info: &TypeInfo, key: &str, name: &str, kind: OpKind) -> String {
        let mode = self
            .policies
            .mode_for(&[info.lifecycle], &name.to_ascii_lowercase());
        let op = Operation::new(key.to_string(), kind, Lifecycle::begin(mode));
        let id = op.id.clone();
        self.pending.insert(key.to_string(), id.clone());
        self.ops.insert(id.clone(), op);
        id
    }

    /// 409 `AnotherOperationInProgress` while the resource (or, for a child, its parent)
    /// has an operation in progress.
    fn check_idle(&mut self, key: &str, name: &str) -> Result<(), ArmError> {
        self.settle();
        let parent = path::split_sub_resource(key).map(|(p, _, _)| p);
        let busy = self
            .pending
            .get(key)
            .or_else(|| parent.as_ref().and_then(|p| self.pending.get(p)));
        match busy {
            Some(op) => Err(ArmError::new(
                StatusCode::CONFLICT,
                "AnotherOperationInProgress",
                format!(
                    "Another operation on this or dependent resource is in progress. To retry later, please use the Azure-AsyncOperation header of operation {op} on resource {name}."
                ),
            )),
            None => Ok(()),
        }
    }

    // ---- writes -----------------------------------------------------------------

    /// PUT: creates or replaces a resource (top-level or child), its document built by
    /// `prepare`. Returns whether it was created, the stored JSON and the operation id.
    pub fn put(
        &mut self,
        info: &'static TypeInfo,
        id: &str,
        name: &str,
        body: Value,
        headers: &axum::http::HeaderMap,
        prepare: Prepare,
    ) -> Result<(bool, Value, String), ArmError> {
        let key = path::resource_key(id);
        self.check_idle(&key, name)?;
        let existing = self.lookup(&key).cloned();
        let current_etag = existing
            .as_ref()
            .and_then(|v| v.get("etag"))
            .and_then(Value::as_str);
        crate::arm::check_preconditions(headers, current_etag)?;
        if let Some((parent_ty, coll)) = info.parent {
            let parent_key = path::split_sub_resource(&key)
                .map(|(p, _, _)| p)
                .unwrap_or_default();
            if !self.docs.contains_key(&parent_key) {
                let parent_info = path::type_info(parent_ty).expect("known parent");
                let parent_name = parent_key.rsplit('/').next().unwrap_or_default();
                return Err(ArmError::not_found(
                    parent_info.arm_type,
                    parent_name,
                    &self.ctx.resource_group,
                ));
            }
            let value = prepare(self, info, id, name, body, existing.as_ref())?;
            let doc = self.docs.get_mut(&parent_key).expect("checked");
            let items = doc
                .value
                .as_object_mut()
                .map(|o| o.entry("properties").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
                .map(|p| p.entry(coll).or_insert_with(|| json!([])))
                .and_then(Value::as_array_mut);
            if let Some(items) = items {
                match items.iter_mut().find(|i| name_is(i, name)) {
                    Some(slot) => *slot = value.clone(),
                    None => items.push(value.clone()),
                }
            }
            doc.value["etag"] = Value::String(new_etag());
            let op = self.begin(info, &key, name, OpKind::Put);
            return Ok((existing.is_none(), value, op));
        }
        let value = prepare(self, info, id, name, body, existing.as_ref())?;
        self.seq += 1;
        let seq = self.seq;
        match self.docs.get_mut(&key) {
            Some(doc) => doc.value = value.clone(),
            None => {
                self.docs.insert(
                    key.clone(),
                    Doc {
                        value: value.clone(),
                        served: None,
                        seq,
                    },
                );
            }
        }
        let op = self.begin(info, &key, name, OpKind::Put);
        // The network provider finishes a load balancer within the PUT itself: its reply
        // already says Succeeded (cloud-provider-azure
        // pkg/azclient/loadbalancerclient/testdata/AZURECLOUD.yaml), while public IPs,
        // NICs, NSGs and route tables answer Updating. Only when nothing slows it down.
        if info.key == path::LB
            && self
                .ops
                .get(&op)
                .is_some_and(|o| o.lifecycle.mode() == mock_cloud::Mode::Immediate)
        {
            self.observe_op(&op, false);
        }
        let value = self.lookup(&key).cloned().unwrap_or(value);
        Ok((existing.is_none(), value, op))
    }

    /// DELETE: `None` when there was nothing to delete (ARM's 204), else the operation.
    /// `check_delete` refuses deleting what is still used.
    pub fn delete(
        &mut self,
        info: &'static TypeInfo,
        id: &str,
        name: &str,
        headers: &axum::http::HeaderMap,
        check_delete: CheckDelete,
    ) -> Result<Option<String>, ArmError> {
        let key = path::resource_key(id);
        self.settle();
        if self.lookup(&key).is_none() {
            return Ok(None);
        }
        // Deleting what is already being deleted answers the same operation again.
        if let Some(op) = self.pending.get(&key)
            && self.ops.get(op).is_some_and(|o| o.kind == OpKind::Delete)
        {
            return Ok(Some(op.clone()));
        }
        self.check_idle(&key, name)?;
        let etag = self
            .lookup(&key)
            .and_then(|v| v.get("etag"))
            .and_then(Value::as_str);
        crate::arm::check_preconditions(headers, etag)?;
        check_delete(self, info, &key)?;
        if let Some(v) = self.lookup_mut(&key) {
            set_state(v, "Deleting");
        }
        Ok(Some(self.begin(info, &key, name, OpKind::Delete)))
    }

    // ---- addresses --------------------------------------------------------------

    /// Every IPv4 address a document or VM holds.
    pub fn used_ips(&self) -> HashSet<Ipv4Addr> {
        let mut used = HashSet::new();
        for doc in self.docs.values() {
            collect_ips(&doc.value, &mut used);
        }
        for ss in self.scale_sets.values() {
            used.extend(
                ss.instances
                    .iter()
                    .filter_map(|i| i.private_ip.parse::<Ipv4Addr>().ok()),
            );
        }
        used
    }

    /// The next free address of a pool (`<pool>.<block>.<n>`, n from 10).
    pub fn allocate(&self, pool: Pool, taken: &HashSet<Ipv4Addr>) -> Result<Ipv4Addr, ArmError> {
        let used = self.used_ips();
        (FIRST_HOST..=254)
            .map(|n| pool.addr(self.ctx.block, n))
            .find(|ip| !used.contains(ip) && !taken.contains(ip))
            .ok_or_else(|| {
                ArmError::bad_request(
                    "PublicIPCountLimitReached",
                    format!("No free address is left in {}.", pool.cidr(self.ctx.block)),
                )
            })
    }
}

/// The address fields ARM resources hold.
fn collect_ips(v: &Value, out: &mut HashSet<Ipv4Addr>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                if (k == "ipAddress" || k == "privateIPAddress")
                    && let Some(ip) = val.as_str().and_then(|s| s.parse().ok())
                {
                    out.insert(ip);
                } else {
                    collect_ips(val, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_ips(i, out)),
        _ => {}
    }
}

/// Sets `properties.provisioningState`.
pub fn set_state(v: &mut Value, state: &str) {
    if let Some(o) = v.as_object_mut() {
        let p = o.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = p.as_object_mut() {
            p.insert("provisioningState".into(), Value::String(state.into()));
        }
    }
}

pub fn name_is(item: &Value, name: &str) -> bool {
    item.get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| n.eq_ignore_ascii_case(name))
}

/// The canonical `properties` key of a lowercased collection segment.
fn coll_name(lower: &str) -> &'static str {
    match lower {
        "routes" => "routes",
        "subnets" => "subnets",
        "securityrules" => "securityRules",
        "frontendipconfigurations" => "frontendIPConfigurations",
        "backendaddresspools" => "backendAddressPools",
        "loadbalancingrules" => "loadBalancingRules",
        "probes" => "probes",
        "ipconfigurations" => "ipConfigurations",
        "inboundnatrules" => "inboundNatRules",
        "outboundrules" => "outboundRules",
        _ => "",
    }
}

fn find_child<'a>(v: &'a Value, coll: &str, name: &str) -> Option<&'a Value> {
    v.get("properties")?
        .get(coll_name(coll))?
        .as_array()?
        .iter()
        .find(|i| name_is(i, name))
}

fn find_child_mut<'a>(v: &'a mut Value, coll: &str, name: &str) -> Option<&'a mut Value> {
    v.get_mut("properties")?
        .get_mut(coll_name(coll))?
        .as_array_mut()?
        .iter_mut()
        .find(|i| name_is(i, name))
}
