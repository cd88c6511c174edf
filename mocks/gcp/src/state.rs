//! The cloud's state: the Compute resources the API writes (stored as the JSON GCE
//! returns, with computed fields filled in, so a client reading back what it wrote gets
//! every field as sent), the instances (typed records the admin API makes), and the
//! operations.
//!
//! Every mutation is validated in full before anything changes and applied at once;
//! its operation is DONE in the reply under the default (immediate) mode, else settles
//! through the shared lifecycle engine ([`mock_cloud::Lifecycle`],
//! mode per resource name, then per collection, then the default). If the mode makes the
//! operation fail, the mutation is undone (GCE leaves nothing of a failed insert), and
//! the operation is `DONE` with `error.errors[]` and `httpErrorStatusCode` (what
//! k8s-cloud-provider `pkg/cloud/op.go` turns into the write's error). While an
//! operation on a resource is in progress, another write to it is 400
//! `resourceNotReady`, as GCE answers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;

use mock_cloud::{Lifecycle, Phase, Policies};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::path::Scope;

/// First host number allocated in each /24.
pub const FIRST_HOST: u8 = 10;

/// An address pool: `127.<b>.<block>.<n>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool(pub u8);

impl Pool {
    pub fn addr(self, block: u8, n: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, block, n)
    }
    pub fn cidr(self, block: u8) -> String {
        format!("{}/24", self.addr(block, 0))
    }
}

/// Instances' `networkIP` (and internal addresses): the subnetwork's range.
pub const INTERNAL_POOL: Pool = Pool(70);
/// External addresses and forwarding-rule IPs: the data plane listens on them.
pub const EXTERNAL_POOL: Pool = Pool(71);
/// Instances' `natIP` (reported only).
pub const NAT_POOL: Pool = Pool(72);

/// The resource collections the API writes (and the read-only network ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Address,
    ForwardingRule,
    TargetPool,
    HttpHealthCheck,
    HealthCheck,
    Firewall,
    Route,
    Network,
    Subnetwork,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Address,
        Kind::ForwardingRule,
        Kind::TargetPool,
        Kind::HttpHealthCheck,
        Kind::HealthCheck,
        Kind::Firewall,
        Kind::Route,
        Kind::Network,
        Kind::Subnetwork,
    ];

    pub fn collection(self) -> &'static str {
        match self {
            Kind::Address => "addresses",
            Kind::ForwardingRule => "forwardingRules",
            Kind::TargetPool => "targetPools",
            Kind::HttpHealthCheck => "httpHealthChecks",
            Kind::HealthCheck => "healthChecks",
            Kind::Firewall => "firewalls",
            Kind::Route => "routes",
            Kind::Network => "networks",
            Kind::Subnetwork => "subnetworks",
        }
    }

    /// The resource's own word (`compute#address`, messages).
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Address => "address",
            Kind::ForwardingRule => "forwardingRule",
            Kind::TargetPool => "targetPool",
            Kind::HttpHealthCheck => "httpHealthCheck",
            Kind::HealthCheck => "healthCheck",
            Kind::Firewall => "firewall",
            Kind::Route => "route",
            Kind::Network => "network",
            Kind::Subnetwork => "subnetwork",
        }
    }

    pub fn regional(self) -> bool {
        matches!(
            self,
            Kind::Address | Kind::ForwardingRule | Kind::TargetPool | Kind::Subnetwork
        )
    }

    /// Only the seed has these (the API reads them).
    pub fn read_only(self) -> bool {
        matches!(self, Kind::Network | Kind::Subnetwork)
    }

    /// The lifecycle type name (`PUT /admin/lifecycle`, seed files).
    pub fn lifecycle(self) -> &'static str {
        match self {
            Kind::Address => "addresses",
            Kind::ForwardingRule => "forwardingrules",
            Kind::TargetPool => "targetpools",
            Kind::HttpHealthCheck => "httphealthchecks",
            Kind::HealthCheck => "healthchecks",
            Kind::Firewall => "firewalls",
            Kind::Route => "routes",
            Kind::Network => "networks",
            Kind::Subnetwork => "subnetworks",
        }
    }

    pub fn from_collection(c: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.collection() == c)
    }
}

/// Where a stored resource is: kind, scope (`Global` or a region) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: Kind,
    pub scope: Scope,
    pub name: String,
}

/// The mock's fixed context.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub project: String,
    pub number: u64,
    pub region: String,
    pub zones: Vec<String>,
    pub network: String,
    pub block: u8,
}

impl Ctx {
    /// `projects/{p}/{rel}`
    pub fn rel(&self, rel: &str) -> String {
        format!("projects/{}/{rel}", self.project)
    }

    /// The full v1 URL of a project-relative path.
    pub fn url(&self, rel: &str) -> String {
        format!("{}/compute/v1/{}", self.base, self.rel(rel))
    }

    pub fn key_rel(&self, key: &Key) -> String {
        self.rel(&format!(
            "{}/{}/{}",
            key.scope.prefix(),
            key.kind.collection(),
            key.name
        ))
    }

    pub fn key_url(&self, key: &Key) -> String {
        format!("{}/compute/v1/{}", self.base, self.key_rel(key))
    }

    pub fn scope_url(&self, scope: &Scope) -> Option<String> {
        match scope {
            Scope::Global => None,
            other => Some(self.url(&other.prefix())),
        }
    }

    pub fn network_url(&self) -> String {
        self.url(&format!("global/networks/{}", self.network))
    }

    pub fn subnetwork_url(&self) -> String {
        self.url(&format!(
            "regions/{}/subnetworks/{}",
            self.region, self.network
        ))
    }

    pub fn has_zone(&self, z: &str) -> bool {
        self.zones.iter().any(|x| x == z)
    }

    /// The region of a zone (`us-central1-a` -> `us-central1`).
    pub fn zone_region(z: &str) -> &str {
        z.rsplit_once('-').map_or(z, |(r, _)| r)
    }
}

/// One stored resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub value: Value,
    pub id: u64,
}

/// An instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub zone: String,
    pub id: u64,
    /// One per NIC (`nic0`, `nic1`, ...): its `networkIP`; never empty.
    pub network_ips: Vec<Ipv4Addr>,
    /// The i-th is the ONE_TO_ONE_NAT `natIP` of nic i; at most as many as NICs.
    pub nat_ips: Vec<Ipv4Addr>,
    pub tags: Vec<String>,
    pub tags_fingerprint: String,
    pub status: String,
    pub machine_type: String,
    pub created: String,
}

impl Instance {
    /// nic0's `networkIP` (the data plane's member address).
    pub fn network_ip(&self) -> Ipv4Addr {
        self.network_ips
            .first()
            .copied()
            .unwrap_or(Ipv4Addr::UNSPECIFIED)
    }

    /// nic0's `natIP`.
    pub fn nat_ip(&self) -> Option<Ipv4Addr> {
        self.nat_ips.first().copied()
    }

    /// Whether any of its NICs or NATs has this address.
    pub fn holds(&self, ip: Ipv4Addr) -> bool {
        self.network_ips.contains(&ip) || self.nat_ips.contains(&ip)
    }
}

/// An operation.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub id: u64,
    pub scope: Scope,
    pub op_type: String,
    pub key: Key,
    pub target_id: u64,
    pub lifecycle: Lifecycle,
    /// How it ended, once it did.
    pub applied: Option<Phase>,
    /// Whether a client looked at it since the write (the write's reply says PENDING,
    /// later looks RUNNING).
    pub polled: bool,
    pub insert_time: String,
    pub end_time: Option<String>,
    /// What to put back if it fails: the resource's document before the write.
    pub undo: Option<Doc>,
}

/// The state.
#[derive(Debug, Clone)]
pub struct Cloud {
    pub ctx: Ctx,
    pub docs: BTreeMap<Key, Doc>,
    /// By name (instance names are unique across zones in the mock).
    pub instances: BTreeMap<String, Instance>,
    pub ops: HashMap<String, Operation>,
    /// Resource -> the name of its operation in progress.
    pub pending: HashMap<Key, String>,
    pub policies: Policies,
    /// Resources not of the API's making (seed, admin).
    pub baseline: HashSet<Key>,
    pub next_id: u64,
    /// Operations that ended (the data plane re-plans when this moves).
    pub transitions: u64,
}

/// RFC 3339 with milliseconds and an offset, as GCE writes its timestamps.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3f-00:00")
        .to_string()
}

impl Cloud {
    /// The network infrastructure every start and reset has: network `default` (custom
    /// mode) with one subnetwork of that name in the region, `127.70.<block>.0/24`.
    pub fn new(ctx: Ctx) -> Cloud {
        let mut cloud = Cloud {
            ctx,
            docs: BTreeMap::new(),
            instances: BTreeMap::new(),
            ops: HashMap::new(),
            pending: HashMap::new(),
            policies: Policies::default(),
            baseline: HashSet::new(),
            next_id: 1_000_000_000_000_000_000 + 1_000_000 * u64::from(0u8),
            transitions: 0,
        };
        cloud.next_id += u64::from(cloud.ctx.block) * 1_000_000_000_000;
        let c = cloud.ctx.clone();
        let net = Key {
            kind: Kind::Network,
            scope: Scope::Global,
            name: c.network.clone(),
        };
        let sub = Key {
            kind: Kind::Subnetwork,
            scope: Scope::Region(c.region.clone()),
            name: c.network.clone(),
        };
        let id = cloud.new_id();
        let value = json!({
            "kind": "compute#network", "id": id.to_string(), "name": c.network,
            "creationTimestamp": now_rfc3339(), "selfLink": c.key_url(&net),
            "autoCreateSubnetworks": false, "subnetworks": [c.key_url(&sub)],
            "routingConfig": {"routingMode": "REGIONAL"}, "mtu": 1460,
            "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
        });
        cloud.insert_baseline(net, Doc { value, id });
        let id = cloud.new_id();
        let value = json!({
            "kind": "compute#subnetwork", "id": id.to_string(), "name": c.network,
            "creationTimestamp": now_rfc3339(), "selfLink": c.key_url(&sub),
            "network": c.network_url(), "region": c.url(&format!("regions/{}", c.region)),
            "ipCidrRange": INTERNAL_POOL.cidr(c.block), "gatewayAddress": INTERNAL_POOL.addr(c.block, 1).to_string(),
            "stackType": "IPV4_ONLY", "privateIpGoogleAccess": false, "purpose": "PRIVATE",
        });
        cloud.insert_baseline(sub, Doc { value, id });
        cloud
    }

    pub fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn insert_baseline(&mut self, key: Key, doc: Doc) {
        self.baseline.insert(key.clone());
        self.docs.insert(key, doc);
    }

    /// Resources of a kind (in one scope, or all), in name order.
    pub fn docs_of(&self, kind: Kind, scope: Option<&Scope>) -> Vec<(&Key, &Doc)> {
        self.docs
            .iter()
            .filter(|(k, _)| k.kind == kind && scope.is_none_or(|s| &k.scope == s))
            .collect()
    }

    pub fn instance_in(&self, zone: &str, name: &str) -> Option<&Instance> {
        self.instances.get(name).filter(|i| i.zone == zone)
    }

    // ---- operations -------------------------------------------------------------

    /// Applies every operation whose lifecycle ended (looks count no read).
    pub fn settle(&mut self) {
        let names: Vec<String> = self.pending.values().cloned().collect();
        for n in names {
            self.observe_op(&n, false);
        }
    }

    /// Looks at an operation (`count_read`: a client polled it); applies its end.
    pub fn observe_op(&mut self, name: &str, count_read: bool) -> Option<Operation> {
        let op = self.ops.get_mut(name)?;
        if count_read {
            op.polled = true;
        }
        let phase = match op.applied {
            Some(p) => p,
            None if count_read => op.lifecycle.read(),
            None => op.lifecycle.peek(),
        };
        if phase != Phase::Pending && op.applied.is_none() {
            op.applied = Some(phase);
            op.end_time = Some(now_rfc3339());
            let op = op.clone();
            self.pending.remove(&op.key);
            self.transitions += 1;
            if phase == Phase::Failed {
                match op.undo {
                    Some(doc) => {
                        self.docs.insert(op.key.clone(), doc);
                    }
                    None => {
                        self.docs.remove(&op.key);
                    }
                }
            }
        }
        self.ops.get(name).cloned()
    }

    /// 400 `resourceNotReady` while the resource has an operation in progress.
    pub fn check_ready(&mut self, key: &Key) -> Result<(), ApiError> {
        self.settle();
        if self.pending.contains_key(key) {
            return Err(ApiError::NotReady(self.ctx.key_rel(key)));
        }
        Ok(())
    }

    /// Records an operation for a write already applied to `key` (`undo`: the document
    /// before it).
    pub fn begin(
        &mut self,
        key: &Key,
        op_type: &str,
        target_id: u64,
        undo: Option<Doc>,
    ) -> Operation {
        let mode = self.policies.mode_for(&[key.kind.lifecycle()], &key.name);
        let id = self.new_id();
        let u = uuid::Uuid::new_v4().simple().to_string();
        let millis = jiff::Timestamp::now().as_millisecond();
        let name = format!(
            "operation-{millis}-{}-{}-{}",
            &u[..13],
            &u[13..21],
            &u[21..29]
        );
        let scope = match &key.scope {
            Scope::Global => Scope::Global,
            other => other.clone(),
        };
        let now = now_rfc3339();
        let op = Operation {
            name: name.clone(),
            id,
            scope,
            op_type: op_type.to_string(),
            key: key.clone(),
            target_id,
            lifecycle: Lifecycle::begin(mode),
            applied: None,
            polled: false,
            insert_time: now,
            end_time: None,
            undo,
        };
        self.pending.insert(key.clone(), name.clone());
        self.ops.insert(name.clone(), op.clone());
        // An immediate operation is DONE in the write's own reply, as GCE answers fast
        // operations. google-cloud-compute's `ExtendedOperation.result()` polls through
        // an operations client built without the caller's `api_endpoint`
        // (`compute_v1/services/*/transports/base.py`, `_global_operations_client`), so
        // against a mock only a finished reply lets it return.
        if mode == mock_cloud::Mode::Immediate {
            return self.observe_op(&name, false).unwrap_or(op);
        }
        op
    }

    /// An operation as GCE shows it.
    pub fn render_op(&self, op: &Operation) -> Value {
        let ctx = &self.ctx;
        let scope_rel = op.scope.prefix();
        let (status, progress) = match op.applied {
            Some(_) => ("DONE", 100),
            None if op.polled => ("RUNNING", 0),
            None => ("PENDING", 0),
        };
        let mut v = json!({
            "kind": "compute#operation",
            "id": op.id.to_string(),
            "name": op.name,
            "operationType": op.op_type,
            "targetLink": ctx.key_url(&op.key),
            "targetId": op.target_id.to_string(),
            "status": status,
            "user": format!("ccm@{}.iam.gserviceaccount.com", ctx.project),
            "progress": progress,
            "insertTime": op.insert_time,
            "startTime": op.insert_time,
            "selfLink": ctx.url(&format!("{scope_rel}/operations/{}", op.name)),
        });
        if let Some(end) = &op.end_time {
            v["endTime"] = json!(end);
        }
        match &op.scope {
            Scope::Zone(_) => v["zone"] = json!(ctx.url(&scope_rel)),
            Scope::Region(_) => v["region"] = json!(ctx.url(&scope_rel)),
            Scope::Global => {}
        }
        if op.applied == Some(Phase::Failed) {
            v["error"] = json!({"errors": [{
                "code": "INTERNAL_ERROR",
                "message": format!("The operation on '{}' failed (the mock's lifecycle mode for it is error).", ctx.key_rel(&op.key)),
            }]});
            v["httpErrorStatusCode"] = json!(500);
            v["httpErrorMessage"] = json!("INTERNAL SERVER ERROR");
        }
        v
    }

    // ---- addresses --------------------------------------------------------------

    /// Every IPv4 address held: instances, addresses, forwarding rules.
    pub fn used_ips(&self) -> HashSet<Ipv4Addr> {
        let mut used = HashSet::new();
        for i in self.instances.values() {
            used.extend(i.network_ips.iter().copied());
            used.extend(i.nat_ips.iter().copied());
        }
        for (k, d) in &self.docs {
            let field = match k.kind {
                Kind::Address => "address",
                Kind::ForwardingRule => "IPAddress",
                _ => continue,
            };
            if let Some(ip) = d
                .value
                .get(field)
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
            {
                used.insert(ip);
            }
        }
        used
    }

    /// The next free address of a pool (n from 10).
    pub fn allocate(&self, pool: Pool) -> Option<Ipv4Addr> {
        let used = self.used_ips();
        (FIRST_HOST..=254)
            .map(|n| pool.addr(self.ctx.block, n))
            .find(|ip| !used.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            base: "http://h".into(),
            project: "p".into(),
            number: 1,
            region: "r1".into(),
            zones: vec!["r1-a".into()],
            network: "default".into(),
            block: 3,
        }
    }

    #[test]
    fn failed_operations_undo_their_write() {
        let mut c = Cloud::new(ctx());
        c.policies.default = mock_cloud::Mode::Error;
        let key = Key {
            kind: Kind::Route,
            scope: Scope::Global,
            name: "r".into(),
        };
        c.docs.insert(
            key.clone(),
            Doc {
                value: json!({"name": "r"}),
                id: 1,
            },
        );
        let op = c.begin(&key, "insert", 1, None);
        assert!(c.check_ready(&key).is_ok(), "an error mode settles at once");
        assert!(!c.docs.contains_key(&key));
        let v = c.render_op(c.ops.get(&op.name).expect("op"));
        assert_eq!(
            (v["status"].as_str(), v["httpErrorStatusCode"].as_u64()),
            (Some("DONE"), Some(500))
        );
        assert_eq!(
            c.allocate(EXTERNAL_POOL),
            Some(Ipv4Addr::new(127, 71, 3, 10))
        );
    }
}
