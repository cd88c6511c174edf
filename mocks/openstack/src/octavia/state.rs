//! Octavia's state: the operations on load balancers and their children (listeners, pools,
//! members, health monitors; the records are in `model`), kept apart from HTTP so the
//! rules are in one place. Each write puts the load balancer in `PENDING_*` and starts a
//! [`Lifecycle`]; the transition is evaluated when anyone looks, and while it is pending
//! every other write is refused with a 409, as in Octavia (`octavia/db/repositories.py`
//! `test_and_set_provisioning_status`: only ACTIVE load balancers are mutable, ACTIVE or
//! ERROR ones deletable).
//!
//! Child attributes are kept as JSON maps checked against a small table per kind (type,
//! required, updatable; the tables are in `fields`), because Octavia's objects have many
//! pass-through fields a mock only needs to store and echo. How the state is shown (JSON,
//! statuses) is in `views`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use mock_cloud::{Lifecycle, Mode, Phase};
use serde_json::{Map, Value, json};

use super::error::{LbError, invalid};
use super::fields::{
    TreeListener, TreePool, as_object, bad_value, check_create, check_update, defaults, merge,
    parse_tree_pool, str_of, take_list, take_object,
};
use super::model::{Child, ChildProv, Kind, Lb, Lbaas, Op, Prov};
use crate::ids::new_id;
use crate::state::{Cloud, Port};

pub(crate) const LB: &str = "Load Balancer";
pub(crate) const LB_TYPE: &str = "loadbalancer";

impl Lbaas {
    fn seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    fn mode(&self, kind: Option<Kind>, lb_id: &str) -> Mode {
        match kind {
            Some(k) => self.policies.mode_for(&[k.key(), LB_TYPE], lb_id),
            None => self.policies.mode_for(&[LB_TYPE], lb_id),
        }
    }

    /// Evaluates `lb_id`'s pending transition and applies its outcome. Returns whether the
    /// LB still exists. `read` counts this look as a client read.
    pub fn settle(&mut self, lb_id: &str, read: bool, ports: &mut BTreeMap<String, Port>) -> bool {
        let Some(lb) = self.lbs.get_mut(lb_id) else {
            return false;
        };
        let Prov::Pending(op, life) = &mut lb.prov else {
            return true;
        };
        let op = *op;
        let phase = if read { life.read() } else { life.peek() };
        let now = jiff::Timestamp::now();
        if phase != Phase::Pending {
            self.transitions += 1;
        }
        match phase {
            Phase::Pending => true,
            Phase::Done if op == Op::Delete => {
                self.remove_lb(lb_id, ports);
                false
            }
            Phase::Done | Phase::Failed => {
                let ok = phase == Phase::Done;
                lb.prov = if ok { Prov::Active } else { Prov::Error };
                lb.updated = now;
                let mut gone = Vec::new();
                for child in self.children.values_mut().filter(|c| c.lb_id == lb_id) {
                    if let ChildProv::Pending(child_op) = child.prov {
                        if ok && child_op == Op::Delete {
                            gone.push(child.id.clone());
                        } else {
                            child.prov = if ok {
                                ChildProv::Active
                            } else {
                                ChildProv::Error
                            };
                            child.updated = now;
                        }
                    }
                }
                for id in gone {
                    self.remove_child(&id);
                }
                true
            }
        }
    }

    /// Settles every load balancer (for lists and leak reports).
    pub fn settle_all(&mut self, read: bool, ports: &mut BTreeMap<String, Port>) {
        let ids: Vec<String> = self.lbs.keys().cloned().collect();
        for id in ids {
            self.settle(&id, read, ports);
        }
    }

    fn remove_lb(&mut self, lb_id: &str, ports: &mut BTreeMap<String, Port>) {
        if let Some(lb) = self.lbs.remove(lb_id) {
            self.vips.release(&lb.vip_address);
            if lb.owns_port {
                ports.remove(&lb.vip_port_id);
            }
        }
        self.children.retain(|_, c| c.lb_id != lb_id);
    }

    /// Removes a child and what hangs off it (a pool's members and monitor; listeners
    /// lose it as default pool).
    fn remove_child(&mut self, id: &str) {
        let Some(child) = self.children.remove(id) else {
            return;
        };
        if child.kind == Kind::Pool {
            self.children
                .retain(|_, c| c.pool_id.as_deref() != Some(id));
            for l in self.children.values_mut() {
                if l.kind == Kind::Listener && str_of(&l.attrs, "default_pool_id") == Some(id) {
                    l.attrs.insert("default_pool_id".into(), Value::Null);
                }
            }
        }
    }

    pub fn lb(&self, id: &str) -> Result<&Lb, LbError> {
        self.lbs.get(id).ok_or_else(|| LbError::NotFound {
            resource: LB,
            id: id.to_string(),
        })
    }

    pub fn child(&self, kind: Kind, id: &str) -> Result<&Child, LbError> {
        self.children
            .get(id)
            .filter(|c| c.kind == kind)
            .ok_or_else(|| LbError::NotFound {
                resource: kind.resource(),
                id: id.to_string(),
            })
    }

    /// Refuses writes unless the LB is ACTIVE (or, for `delete`, ACTIVE or ERROR).
    fn check_mutable(
        &mut self,
        lb_id: &str,
        delete: bool,
        ports: &mut BTreeMap<String, Port>,
    ) -> Result<(), LbError> {
        if !self.settle(lb_id, false, ports) {
            return Err(LbError::NotFound {
                resource: LB,
                id: lb_id.to_string(),
            });
        }
        let lb = self.lb(lb_id)?;
        match lb.prov {
            Prov::Active => Ok(()),
            Prov::Error if delete => Ok(()),
            _ => Err(LbError::Immutable {
                resource: LB,
                id: lb_id.to_string(),
            }),
        }
    }

    /// Puts the LB into a new pending operation.
    fn begin(&mut self, lb_id: &str, op: Op, kind: Option<Kind>) {
        let mode = self.mode(kind, lb_id);
        if let Some(lb) = self.lbs.get_mut(lb_id) {
            lb.prov = Prov::Pending(op, Lifecycle::begin(mode));
            lb.updated = jiff::Timestamp::now();
        }
    }

    /// Applies an id override to a transition already under way (force error, release).
    pub fn apply_override(&mut self, lb_id: &str) {
        if let Some(mode) = self.policies.for_id(lb_id)
            && let Some(lb) = self.lbs.get_mut(lb_id)
            && let Prov::Pending(_, life) = &mut lb.prov
        {
            life.set_mode(mode);
        }
    }

    fn new_child(
        &mut self,
        kind: Kind,
        lb_id: &str,
        pool_id: Option<String>,
        body: &Map<String, Value>,
    ) -> String {
        let mut attrs = defaults(Some(kind));
        merge(&mut attrs, body);
        if kind == Kind::Monitor && matches!(str_of(body, "type"), Some("HTTP" | "HTTPS")) {
            // Octavia's HTTP defaults, for the fields the request left out.
            for (field, default) in [
                ("http_method", "GET"),
                ("url_path", "/"),
                ("expected_codes", "200"),
            ] {
                if attrs.get(field).is_none_or(Value::is_null) {
                    attrs.insert(field.into(), json!(default));
                }
            }
        }
        let id = new_id();
        let now = jiff::Timestamp::now();
        let seq = self.seq();
        self.children.insert(
            id.clone(),
            Child {
                id: id.clone(),
                seq,
                kind,
                lb_id: lb_id.to_string(),
                pool_id,
                attrs,
                prov: ChildProv::Pending(Op::Create),
                created: now,
                updated: now,
            },
        );
        id
    }

    fn create_tree_pool(&mut self, lb_id: &str, tree: TreePool) -> String {
        let pool_id = self.new_child(Kind::Pool, lb_id, None, &tree.body);
        for m in &tree.members {
            self.new_child(Kind::Member, lb_id, Some(pool_id.clone()), m);
        }
        if let Some(hm) = &tree.monitor {
            self.new_child(Kind::Monitor, lb_id, Some(pool_id.clone()), hm);
        }
        pool_id
    }

    pub(super) fn children_of(&self, kind: Kind, lb_id: &str) -> impl Iterator<Item = &Child> {
        self.children
            .values()
            .filter(move |c| c.kind == kind && c.lb_id == lb_id)
    }

    pub(crate) fn members_of(&self, pool_id: &str) -> impl Iterator<Item = &Child> {
        self.children
            .values()
            .filter(move |c| c.kind == Kind::Member && c.pool_id.as_deref() == Some(pool_id))
    }

    pub(crate) fn monitor_of(&self, pool_id: &str) -> Option<&Child> {
        self.children
            .values()
            .find(|c| c.kind == Kind::Monitor && c.pool_id.as_deref() == Some(pool_id))
    }

    fn check_listener_port(&self, lb_id: &str, body: &Map<String, Value>) -> Result<(), LbError> {
        let port = body.get("protocol_port").and_then(Value::as_i64);
        let protocol = str_of(body, "protocol");
        // `octavia/common/exceptions.py` DuplicateListenerEntry.
        if self.children_of(Kind::Listener, lb_id).any(|l| {
            l.attrs.get("protocol_port").and_then(Value::as_i64) == port
                && (str_of(&l.attrs, "protocol") == Some("UDP")) == (protocol == Some("UDP"))
        }) {
            return Err(LbError::Conflict(format!(
                "Another Listener on this Load Balancer is already using protocol_port {}",
                port.unwrap_or_default()
            )));
        }
        Ok(())
    }

    fn check_member_unique(
        &self,
        pool_id: &str,
        body: &Map<String, Value>,
        except: Option<&str>,
    ) -> Result<(), LbError> {
        let address = str_of(body, "address");
        let port = body.get("protocol_port").and_then(Value::as_i64);
        if self.members_of(pool_id).any(|m| {
            Some(m.id.as_str()) != except
                && str_of(&m.attrs, "address") == address
                && m.attrs.get("protocol_port").and_then(Value::as_i64) == port
        }) {
            // `octavia/common/exceptions.py` DuplicateMemberEntry.
            return Err(LbError::Conflict(format!(
                "Another member on this pool is already using ip {} on protocol_port {}",
                address.unwrap_or_default(),
                port.unwrap_or_default()
            )));
        }
        Ok(())
    }
}

// ---- operations on the whole cloud (they touch Neutron ports too) ---------------------

impl Cloud {
    fn vip_target(
        &self,
        body: &Map<String, Value>,
    ) -> Result<(String, String, Option<IpAddr>, bool), LbError> {
        // Returns (network_id, subnet_id, address if fixed by an existing port, owns_port).
        if let Some(port_id) = str_of(body, "vip_port_id") {
            let port = self
                .ports
                .get(port_id)
                .ok_or_else(|| invalid(format!("Port {port_id} not found.")))?;
            let ip = port.fixed_ips.first().copied();
            return Ok((port.network_id.clone(), port.subnet_id.clone(), ip, false));
        }
        if let Some(subnet_id) = str_of(body, "vip_subnet_id") {
            let subnet = self
                .subnets
                .iter()
                .find(|s| s.id == subnet_id)
                .ok_or_else(|| invalid(format!("Subnet {subnet_id} not found.")))?;
            return Ok((subnet.network_id.clone(), subnet.id.clone(), None, true));
        }
        if let Some(network_id) = str_of(body, "vip_network_id") {
            let network = self
                .networks
                .iter()
                .find(|n| n.id == network_id)
                .ok_or_else(|| invalid(format!("Network {network_id} not found.")))?;
            return Ok((network.id.clone(), network.subnet_id.clone(), None, true));
        }
        Err(invalid(
            "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
        ))
    }

    /// `POST /loadbalancers`, including the fully-populated form (listeners -> default_pool
    /// -> members + healthmonitor, and top-level pools).
    pub fn create_lb(&mut self, mut body: Map<String, Value>) -> Result<String, LbError> {
        let listeners = take_list(&mut body, "listeners")?;
        let pools = take_list(&mut body, "pools")?;
        check_create(None, &body, &[])?;
        let mut tree = Vec::new();
        for mut l in listeners {
            let pool = take_object(&mut l, "default_pool")?
                .map(parse_tree_pool)
                .transpose()?;
            check_create(Some(Kind::Listener), &l, &["loadbalancer_id"])?;
            tree.push(TreeListener { body: l, pool });
        }
        let pools: Vec<TreePool> = pools
            .into_iter()
            .map(parse_tree_pool)
            .collect::<Result<_, _>>()?;
        let (network_id, subnet_id, port_ip, needs_port) = self.vip_target(&body)?;
        // Reserve the VIP address: asked for, the given port's, or the next free one.
        let vip = match (port_ip, str_of(&body, "vip_address")) {
            (Some(ip), _) => ip,
            (None, Some(s)) => {
                let ip: IpAddr = s
                    .parse()
                    .map_err(|_| bad_value("vip_address", &json!(s), "Invalid IP address."))?;
                if !self.lbaas.vips.take(ip) {
                    return Err(LbError::Conflict(format!(
                        "IP address {ip} is already allocated on the VIP network."
                    )));
                }
                ip
            }
            (None, None) => self
                .lbaas
                .vips
                .allocate()
                .map_err(|e| LbError::Conflict(e.to_string()))?,
        };
        let id = new_id();
        let port_id = match str_of(&body, "vip_port_id") {
            Some(p) => p.to_string(),
            None => new_id(),
        };
        if needs_port {
            let port = Port {
                id: port_id.clone(),
                name: format!("octavia-lb-{id}"),
                network_id: network_id.clone(),
                subnet_id: subnet_id.clone(),
                mac: self.next_mac(),
                device_id: format!("lb-{id}"),
                device_owner: "Octavia".to_string(),
                status: "DOWN".to_string(),
                fixed_ips: vec![vip],
                allowed_address_pairs: Vec::new(),
                created: jiff::Timestamp::now(),
                updated: jiff::Timestamp::now(),
            };
            self.ports.insert(port_id.clone(), port);
        }
        let mut attrs = defaults(None);
        merge(&mut attrs, &body);
        let now = jiff::Timestamp::now();
        let lbaas = &mut self.lbaas;
        let seq = lbaas.seq();
        let mode = lbaas.mode(None, &id);
        lbaas.lbs.insert(
            id.clone(),
            Lb {
                id: id.clone(),
                seq,
                attrs,
                vip_address: vip,
                vip_port_id: port_id,
                owns_port: needs_port,
                vip_subnet_id: subnet_id,
                vip_network_id: network_id,
                prov: Prov::Pending(Op::Create, Lifecycle::begin(mode)),
                created: now,
                updated: now,
            },
        );
        for t in tree {
            let listener_id = lbaas.new_child(Kind::Listener, &id, None, &t.body);
            if let Some(pool) = t.pool {
                let pool_id = lbaas.create_tree_pool(&id, pool);
                if let Some(l) = lbaas.children.get_mut(&listener_id) {
                    l.attrs.insert("default_pool_id".into(), json!(pool_id));
                }
            }
        }
        for pool in pools {
            lbaas.create_tree_pool(&id, pool);
        }
        Ok(id)
    }

    pub fn update_lb(&mut self, id: &str, body: Map<String, Value>) -> Result<(), LbError> {
        let lbaas = &mut self.lbaas;
        lbaas.lb(id)?;
        check_update(None, &body)?;
        lbaas.check_mutable(id, false, &mut self.ports)?;
        if let Some(lb) = lbaas.lbs.get_mut(id) {
            merge(&mut lb.attrs, &body);
        }
        lbaas.begin(id, Op::Update, None);
        Ok(())
    }

    pub fn delete_lb(&mut self, id: &str, cascade: bool) -> Result<(), LbError> {
        let lbaas = &mut self.lbaas;
        lbaas.lb(id)?;
        lbaas.check_mutable(id, true, &mut self.ports)?;
        let has_children = lbaas.children.values().any(|c| c.lb_id == id);
        if has_children && !cascade {
            // `octavia/api/v2/controllers/load_balancer.py` delete without cascade.
            return Err(invalid(format!(
                "Validation failure: Cannot delete Load Balancer {id} - it has children"
            )));
        }
        for child in lbaas.children.values_mut().filter(|c| c.lb_id == id) {
            child.prov = ChildProv::Pending(Op::Delete);
        }
        lbaas.begin(id, Op::Delete, None);
        Ok(())
    }

    /// Creates one child (`POST /listeners|pools|healthmonitors`, `POST /pools/{id}/members`).
    pub fn create_child(
        &mut self,
        kind: Kind,
        url_pool: Option<&str>,
        mut body: Map<String, Value>,
    ) -> Result<String, LbError> {
        let lbaas = &mut self.lbaas;
        let (lb_id, pool_id) = match kind {
            Kind::Listener => {
                let pool = take_object(&mut body, "default_pool")?;
                if pool.is_some() {
                    return Err(invalid(
                        "default_pool is only allowed in a fully populated load balancer create",
                    ));
                }
                check_create(Some(kind), &body, &[])?;
                let lb_id = str_of(&body, "loadbalancer_id")
                    .unwrap_or_default()
                    .to_string();
                lbaas
                    .lb(&lb_id)
                    .map_err(|_| invalid(format!("Load Balancer {lb_id} not found.")))?;
                (lb_id, None)
            }
            Kind::Pool => {
                let members = take_list(&mut body, "members")?;
                let monitor = take_object(&mut body, "healthmonitor")?;
                if !members.is_empty() || monitor.is_some() {
                    return Err(invalid(
                        "members and healthmonitor are only allowed in a fully populated load balancer create",
                    ));
                }
                check_create(Some(kind), &body, &[])?;
                let lb_id = match (
                    str_of(&body, "listener_id"),
                    str_of(&body, "loadbalancer_id"),
                ) {
                    (Some(listener_id), _) => {
                        let l = lbaas
                            .child(Kind::Listener, listener_id)
                            .map_err(|_| invalid(format!("Listener {listener_id} not found.")))?;
                        if str_of(&l.attrs, "default_pool_id").is_some() {
                            return Err(LbError::Conflict(format!(
                                "Listener {listener_id} already has a default pool"
                            )));
                        }
                        l.lb_id.clone()
                    }
                    (None, Some(lb_id)) => {
                        lbaas
                            .lb(lb_id)
                            .map_err(|_| invalid(format!("Load Balancer {lb_id} not found.")))?;
                        lb_id.to_string()
                    }
                    (None, None) => {
                        return Err(invalid(
                            "Validation failure: Either listener_id or loadbalancer_id must be specified.",
                        ));
                    }
                };
                (lb_id, None)
            }
            Kind::Member => {
                let pool_id = url_pool.unwrap_or_default();
                let pool = lbaas.child(Kind::Pool, pool_id)?;
                check_create(Some(kind), &body, &[])?;
                (pool.lb_id.clone(), Some(pool_id.to_string()))
            }
            Kind::Monitor => {
                check_create(Some(kind), &body, &[])?;
                let pool_id = str_of(&body, "pool_id").unwrap_or_default().to_string();
                let pool = lbaas
                    .child(Kind::Pool, &pool_id)
                    .map_err(|_| invalid(format!("Pool {pool_id} not found.")))?;
                let lb_id = pool.lb_id.clone();
                if lbaas.monitor_of(&pool_id).is_some() {
                    // `octavia/common/exceptions.py` DuplicateHealthMonitor.
                    return Err(LbError::Conflict(
                        "This pool already has a health monitor".into(),
                    ));
                }
                (lb_id, Some(pool_id))
            }
        };
        lbaas.check_mutable(&lb_id, false, &mut self.ports)?;
        match kind {
            Kind::Listener => lbaas.check_listener_port(&lb_id, &body)?,
            Kind::Member => {
                lbaas.check_member_unique(pool_id.as_deref().unwrap_or_default(), &body, None)?
            }
            _ => {}
        }
        let id = lbaas.new_child(kind, &lb_id, pool_id, &body);
        if kind == Kind::Pool
            && let Some(listener_id) = str_of(&body, "listener_id")
            && let Some(l) = lbaas.children.get_mut(listener_id)
        {
            l.attrs.insert("default_pool_id".into(), json!(id));
        }
        lbaas.begin(&lb_id, Op::Update, Some(kind));
        Ok(id)
    }

    pub fn update_child(
        &mut self,
        kind: Kind,
        id: &str,
        body: Map<String, Value>,
    ) -> Result<(), LbError> {
        let lbaas = &mut self.lbaas;
        let lb_id = lbaas.child(kind, id)?.lb_id.clone();
        check_update(Some(kind), &body)?;
        if let Some(pool_id) = body.get("default_pool_id").and_then(Value::as_str) {
            let pool = lbaas
                .child(Kind::Pool, pool_id)
                .map_err(|_| invalid(format!("Pool {pool_id} not found.")))?;
            if pool.lb_id != lb_id {
                return Err(invalid(format!(
                    "Pool {pool_id} is not on this listener's load balancer"
                )));
            }
        }
        lbaas.check_mutable(&lb_id, false, &mut self.ports)?;
        if let Some(child) = lbaas.children.get_mut(id) {
            merge(&mut child.attrs, &body);
            child.prov = ChildProv::Pending(Op::Update);
            child.updated = jiff::Timestamp::now();
        }
        lbaas.begin(&lb_id, Op::Update, Some(kind));
        Ok(())
    }

    pub fn delete_child(&mut self, kind: Kind, id: &str) -> Result<(), LbError> {
        let lbaas = &mut self.lbaas;
        let lb_id = lbaas.child(kind, id)?.lb_id.clone();
        lbaas.check_mutable(&lb_id, false, &mut self.ports)?;
        let pool_children: Vec<String> = if kind == Kind::Pool {
            lbaas
                .children
                .values()
                .filter(|c| c.pool_id.as_deref() == Some(id))
                .map(|c| c.id.clone())
                .collect()
        } else {
            Vec::new()
        };
        for cid in pool_children.iter().map(String::as_str).chain([id]) {
            if let Some(c) = lbaas.children.get_mut(cid) {
                c.prov = ChildProv::Pending(Op::Delete);
            }
        }
        lbaas.begin(&lb_id, Op::Update, Some(kind));
        Ok(())
    }

    /// `PUT /pools/{id}/members`: the body is the whole desired member list. Members are
    /// matched by (address, protocol_port): matches are updated, the rest created, and
    /// members not listed deleted (`octavia/api/v2/controllers/member.py` MembersController).
    pub fn batch_members(&mut self, pool_id: &str, members: Vec<Value>) -> Result<(), LbError> {
        let lbaas = &mut self.lbaas;
        let lb_id = lbaas.child(Kind::Pool, pool_id)?.lb_id.clone();
        let mut wanted = Vec::new();
        for m in &members {
            let body = as_object(m, "members")?;
            check_create(Some(Kind::Member), &body, &[])?;
            wanted.push(body);
        }
        lbaas.check_mutable(&lb_id, false, &mut self.ports)?;
        let key = |m: &Map<String, Value>| {
            (
                str_of(m, "address").unwrap_or_default().to_string(),
                m.get("protocol_port").and_then(Value::as_i64),
            )
        };
        let existing: Vec<(String, (String, Option<i64>))> = lbaas
            .members_of(pool_id)
            .map(|c| (c.id.clone(), key(&c.attrs)))
            .collect();
        let now = jiff::Timestamp::now();
        for body in &wanted {
            match existing.iter().find(|(_, k)| *k == key(body)) {
                Some((id, _)) => {
                    if let Some(c) = lbaas.children.get_mut(id) {
                        merge(&mut c.attrs, body);
                        c.prov = ChildProv::Pending(Op::Update);
                        c.updated = now;
                    }
                }
                None => {
                    lbaas.new_child(Kind::Member, &lb_id, Some(pool_id.to_string()), body);
                }
            }
        }
        for (id, k) in &existing {
            if !wanted.iter().any(|b| key(b) == *k)
                && let Some(c) = lbaas.children.get_mut(id)
            {
                c.prov = ChildProv::Pending(Op::Delete);
            }
        }
        lbaas.begin(&lb_id, Op::Update, Some(Kind::Member));
        Ok(())
    }

    /// Settles `lb_id` (counting a read); false when it is gone.
    pub fn settle_lb(&mut self, lb_id: &str, read: bool) -> bool {
        self.lbaas.settle(lb_id, read, &mut self.ports)
    }

    pub fn settle_all_lbs(&mut self, read: bool) {
        self.lbaas.settle_all(read, &mut self.ports);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn cloud() -> (Cloud, String) {
        let c = Cloud::new("nova");
        let subnet = c.subnets[0].id.clone();
        (c, subnet)
    }

    fn prov(c: &Cloud, id: &str) -> &'static str {
        Lbaas::lb_status(c.lbaas.lb(id).expect("lb")).0
    }

    #[test]
    fn create_allocates_vip_port_and_settles_by_reads() {
        let (mut c, subnet) = cloud();
        c.lbaas
            .policies
            .by_type
            .insert(LB_TYPE.into(), Mode::Reads { n: 2 });
        let id = c
            .create_lb(obj(json!({"name": "lb1", "vip_subnet_id": subnet})))
            .expect("create");
        let lb = c.lbaas.lb(&id).expect("lb").clone();
        assert_eq!(lb.vip_address.to_string(), "127.30.0.10");
        let port = c.ports.get(&lb.vip_port_id).expect("vip port");
        assert_eq!(port.device_id, format!("lb-{id}"));
        assert_eq!(port.fixed_ips, vec![lb.vip_address]);
        assert_eq!(prov(&c, &id), "PENDING_CREATE");
        assert!(c.settle_lb(&id, true));
        assert!(c.settle_lb(&id, true));
        assert_eq!(prov(&c, &id), "PENDING_CREATE");
        c.settle_lb(&id, true);
        assert_eq!(prov(&c, &id), "ACTIVE");
    }

    #[test]
    fn writes_while_pending_are_immutable_and_delete_goes_away() {
        let (mut c, subnet) = cloud();
        c.lbaas.policies.default = Mode::Stuck;
        let id = c
            .create_lb(obj(json!({"vip_subnet_id": subnet})))
            .expect("create");
        let err = c
            .update_lb(&id, obj(json!({"name": "x"})))
            .expect_err("409");
        assert_eq!(err.status(), 409);
        assert_eq!(
            err.to_string(),
            format!("Load Balancer {id} is immutable and cannot be updated.")
        );
        c.lbaas.policies.by_id.insert(id.clone(), Mode::Immediate);
        c.lbaas.apply_override(&id);
        c.update_lb(&id, obj(json!({"tags": ["a"]})))
            .expect("update");
        c.settle_lb(&id, true);
        assert_eq!(prov(&c, &id), "ACTIVE");
        let port = c.lbaas.lb(&id).expect("lb").vip_port_id.clone();
        c.delete_lb(&id, false).expect("delete");
        assert_eq!(prov(&c, &id), "PENDING_DELETE");
        assert!(!c.settle_lb(&id, true));
        assert!(!c.ports.contains_key(&port));
        assert_eq!(c.lbaas.lb(&id).expect_err("gone").status(), 404);
    }

    #[test]
    fn fully_populated_tree_and_cascade() {
        let (mut c, subnet) = cloud();
        let body = json!({"vip_subnet_id": subnet, "listeners": [{"protocol": "TCP",
            "protocol_port": 8080, "default_pool": {"protocol": "TCP",
            "lb_algorithm": "ROUND_ROBIN", "members": [{"address": "127.10.0.10",
            "protocol_port": 30000}], "healthmonitor": {"type": "TCP", "delay": 5,
            "timeout": 3, "max_retries": 2}}}]});
        c.lbaas.policies.default = Mode::Reads { n: 1 };
        let id = c.create_lb(obj(body)).expect("create");
        assert_eq!(c.lbaas.children.len(), 4);
        let err = c.delete_lb(&id, false);
        assert_eq!(err.expect_err("409 while pending").status(), 409);
        c.settle_lb(&id, true);
        c.settle_lb(&id, true);
        assert_eq!(prov(&c, &id), "ACTIVE");
        assert!(
            c.lbaas
                .children
                .values()
                .all(|ch| ch.prov == ChildProv::Active)
        );
        assert_eq!(c.delete_lb(&id, false).expect_err("children").status(), 400);
        c.delete_lb(&id, true).expect("cascade");
        c.settle_lb(&id, true);
        assert_eq!(c.lbaas.children.len(), 4);
        c.settle_lb(&id, true);
        assert!(c.lbaas.children.is_empty());
        assert!(c.lbaas.lbs.is_empty());
    }

    #[test]
    fn error_mode_leaves_error_and_allows_delete_only() {
        let (mut c, subnet) = cloud();
        c.lbaas.policies.default = Mode::Error;
        let id = c
            .create_lb(obj(json!({"vip_subnet_id": subnet})))
            .expect("create");
        c.settle_lb(&id, true);
        assert_eq!(prov(&c, &id), "ERROR");
        assert_eq!(
            c.update_lb(&id, obj(json!({"name": "x"})))
                .expect_err("immutable")
                .status(),
            409
        );
        c.lbaas.policies.default = Mode::Immediate;
        c.delete_lb(&id, true).expect("delete from ERROR");
        assert!(!c.settle_lb(&id, true));
    }

    #[test]
    fn validation() {
        let (mut c, subnet) = cloud();
        for bad in [
            json!({}),
            json!({"vip_subnet_id": "nope"}),
            json!({"vip_subnet_id": subnet, "bogus": 1}),
            json!({"vip_subnet_id": subnet, "listeners": [{"protocol": "TCP"}]}),
            json!({"vip_subnet_id": subnet, "listeners": [{"protocol": "FTP", "protocol_port": 1}]}),
            json!({"vip_subnet_id": subnet, "listeners": [{"protocol": "TCP", "protocol_port": 0}]}),
        ] {
            assert_eq!(
                c.create_lb(obj(bad.clone())).expect_err("400").status(),
                400,
                "{bad}"
            );
        }
        assert!(c.lbaas.lbs.is_empty());
        assert_eq!(c.ports.len(), crate::state::ROUTER_PORTS);
    }
}
