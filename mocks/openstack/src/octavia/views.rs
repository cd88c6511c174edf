//! Octavia's JSON views of the state: load balancers and children as the API shows them
//! (with the provisioning and operating statuses derived from the state and the data
//! plane's member health), and the status tree. The HTTP handlers in `api` wrap these.

use mock_cloud::MemberStatus;
use serde_json::{Value, json};

use super::fields::str_of;
use super::model::{Child, ChildProv, Kind, Lb, Lbaas, Op, Prov};
use crate::util::iso_naive_seconds;

fn ids(iter: impl Iterator<Item = String>) -> Value {
    Value::Array(iter.map(|id| json!({ "id": id })).collect())
}

impl Lbaas {
    pub(super) fn lb_status(lb: &Lb) -> (&'static str, &'static str) {
        match &lb.prov {
            Prov::Active => ("ACTIVE", "ONLINE"),
            Prov::Error => ("ERROR", "ERROR"),
            Prov::Pending(Op::Create, _) => ("PENDING_CREATE", "OFFLINE"),
            Prov::Pending(op, _) => (op.pending(), "ONLINE"),
        }
    }

    fn child_status(&self, c: &Child) -> (&'static str, &'static str) {
        let prov = match c.prov {
            ChildProv::Active => "ACTIVE",
            ChildProv::Error => "ERROR",
            ChildProv::Pending(op) => op.pending(),
        };
        let operating = match c.prov {
            ChildProv::Error => "ERROR",
            ChildProv::Pending(Op::Create) => "OFFLINE",
            _ if c.attrs.get("admin_state_up") == Some(&Value::Bool(false)) => "OFFLINE",
            _ if c.kind == Kind::Member => {
                let monitored = c.pool_id.as_deref().and_then(|p| self.monitor_of(p));
                if monitored.is_some() {
                    self.member_health
                        .get(&c.id)
                        .map_or("ONLINE", |h| h.as_str())
                } else {
                    "NO_MONITOR"
                }
            }
            _ if c.kind == Kind::Pool => self.pool_health(&c.id),
            _ => "ONLINE",
        };
        (prov, operating)
    }

    /// A pool is ERROR when all its monitored members are down, DEGRADED when some are
    /// (`octavia/controller/healthmanager/health_drivers/update_db.py`).
    fn pool_health(&self, pool_id: &str) -> &'static str {
        if self.monitor_of(pool_id).is_none() {
            return "ONLINE";
        }
        let (mut total, mut down) = (0, 0);
        for m in self.members_of(pool_id) {
            total += 1;
            if self.member_health.get(&m.id) == Some(&MemberStatus::Error) {
                down += 1;
            }
        }
        match down {
            0 => "ONLINE",
            d if d == total => "ERROR",
            _ => "DEGRADED",
        }
    }

    /// The LB's statuses as shown: an ACTIVE LB with a pool not ONLINE is DEGRADED
    /// (`update_db.py` again).
    fn lb_view_status(&self, lb: &Lb) -> (&'static str, &'static str) {
        let (prov, operating) = Self::lb_status(lb);
        if operating == "ONLINE"
            && self
                .children_of(Kind::Pool, &lb.id)
                .any(|p| self.pool_health(&p.id) != "ONLINE")
        {
            return (prov, "DEGRADED");
        }
        (prov, operating)
    }

    pub fn lb_json(&self, lb: &Lb, project_id: &str) -> Value {
        let (prov, operating) = self.lb_view_status(lb);
        let mut v = Value::Object(lb.attrs.clone());
        let listeners = ids(self
            .sorted(Kind::Listener, Some(&lb.id))
            .map(|c| c.id.clone()));
        let pools = ids(self.sorted(Kind::Pool, Some(&lb.id)).map(|c| c.id.clone()));
        let extra = json!({
            "id": lb.id, "project_id": project_id, "tenant_id": project_id,
            "provisioning_status": prov, "operating_status": operating,
            "vip_address": lb.vip_address.to_string(), "vip_port_id": lb.vip_port_id,
            "vip_subnet_id": lb.vip_subnet_id, "vip_network_id": lb.vip_network_id,
            "listeners": listeners, "pools": pools,
            "created_at": iso_naive_seconds(lb.created), "updated_at": iso_naive_seconds(lb.updated),
        });
        if let (Value::Object(dst), Value::Object(src)) = (&mut v, extra) {
            dst.extend(src);
        }
        v
    }

    /// Children of a kind (optionally of one LB) in creation order.
    pub fn sorted(&self, kind: Kind, lb_id: Option<&str>) -> impl Iterator<Item = &Child> {
        let mut v: Vec<&Child> = self
            .children
            .values()
            .filter(|c| c.kind == kind && lb_id.is_none_or(|l| c.lb_id == l))
            .collect();
        v.sort_by_key(|c| c.seq);
        v.into_iter()
    }

    pub fn lbs_sorted(&self) -> Vec<&Lb> {
        let mut v: Vec<&Lb> = self.lbs.values().collect();
        v.sort_by_key(|l| l.seq);
        v
    }

    pub fn child_json(&self, c: &Child, project_id: &str) -> Value {
        let (prov, operating) = self.child_status(c);
        let mut v = Value::Object(c.attrs.clone());
        let lbs = json!([{ "id": c.lb_id }]);
        let mut extra = json!({
            "id": c.id, "project_id": project_id, "tenant_id": project_id,
            "provisioning_status": prov, "operating_status": operating,
            "created_at": iso_naive_seconds(c.created), "updated_at": iso_naive_seconds(c.updated),
        });
        match c.kind {
            Kind::Listener => extra["loadbalancers"] = lbs,
            Kind::Pool => {
                extra["loadbalancers"] = lbs;
                extra["listeners"] = ids(self
                    .sorted(Kind::Listener, Some(&c.lb_id))
                    .filter(|l| str_of(&l.attrs, "default_pool_id") == Some(c.id.as_str()))
                    .map(|l| l.id.clone()));
                let mut members: Vec<&Child> = self.members_of(&c.id).collect();
                members.sort_by_key(|m| m.seq);
                extra["members"] = ids(members.into_iter().map(|m| m.id.clone()));
                extra["healthmonitor_id"] =
                    self.monitor_of(&c.id).map_or(Value::Null, |m| json!(m.id));
            }
            Kind::Member => {}
            Kind::Monitor => {
                extra["pools"] = json!([{ "id": c.pool_id }]);
            }
        }
        if let (Value::Object(dst), Value::Object(src)) = (&mut v, extra) {
            dst.extend(src);
        }
        v
    }

    /// `GET /loadbalancers/{id}/status` (`octavia/api/v2/types/load_balancer.py`
    /// LoadBalancerStatusResponse and friends).
    pub fn status_tree(&self, lb: &Lb) -> Value {
        let (prov, operating) = self.lb_view_status(lb);
        let status = |c: &Child| {
            let (p, o) = self.child_status(c);
            let name = c.attrs.get("name").cloned().unwrap_or(Value::Null);
            json!({"id": c.id, "name": name, "provisioning_status": p, "operating_status": o})
        };
        let pool_status = |p: &Child| {
            let mut v = status(p);
            let mut members: Vec<&Child> = self.members_of(&p.id).collect();
            members.sort_by_key(|m| m.seq);
            v["members"] = Value::Array(
                members
                    .into_iter()
                    .map(|m| {
                        let mut mv = status(m);
                        mv["address"] = m.attrs.get("address").cloned().unwrap_or(Value::Null);
                        mv["protocol_port"] =
                            m.attrs.get("protocol_port").cloned().unwrap_or(Value::Null);
                        mv
                    })
                    .collect(),
            );
            if let Some(hm) = self.monitor_of(&p.id) {
                let mut hv = status(hm);
                hv["type"] = hm.attrs.get("type").cloned().unwrap_or(Value::Null);
                v["health_monitor"] = hv;
            }
            v
        };
        let listeners: Vec<Value> = self
            .sorted(Kind::Listener, Some(&lb.id))
            .map(|l| {
                let mut v = status(l);
                let pools: Vec<Value> = str_of(&l.attrs, "default_pool_id")
                    .and_then(|p| self.children.get(p))
                    .map(pool_status)
                    .into_iter()
                    .collect();
                v["pools"] = Value::Array(pools);
                v
            })
            .collect();
        let name = lb.attrs.get("name").cloned().unwrap_or(Value::Null);
        json!({"statuses": {"loadbalancer": {
            "id": lb.id, "name": name, "provisioning_status": prov,
            "operating_status": operating, "listeners": listeners,
        }}})
    }
}
