//! Octavia's records: load balancers and their children, their provisioning states, and
//! `Lbaas`, the part of `state::Cloud` that holds them. Split from `state` (the rules and
//! writes, which work on the whole `Cloud`) so the cloud can own these records without
//! `crate::state` and `octavia::state` importing each other; this module imports nothing
//! from its users.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use mock_cloud::{Lifecycle, MemberStatus, Policies};
use serde_json::{Map, Value};

use crate::pool::Pool;

/// The operation a pending load balancer (or child) is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Create,
    Update,
    Delete,
}

impl Op {
    pub(super) fn pending(self) -> &'static str {
        match self {
            Op::Create => "PENDING_CREATE",
            Op::Update => "PENDING_UPDATE",
            Op::Delete => "PENDING_DELETE",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Prov {
    Active,
    Error,
    Pending(Op, Lifecycle),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildProv {
    Active,
    Error,
    Pending(Op),
}

/// The four child resource kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Listener,
    Pool,
    Member,
    Monitor,
}

impl Kind {
    /// The name Octavia uses in messages.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Listener => "Listener",
            Kind::Pool => "Pool",
            Kind::Member => "Member",
            Kind::Monitor => "Health Monitor",
        }
    }

    /// The JSON wrapper key, also the lifecycle type name.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Listener => "listener",
            Kind::Pool => "pool",
            Kind::Member => "member",
            Kind::Monitor => "healthmonitor",
        }
    }

    pub fn collection(self) -> &'static str {
        match self {
            Kind::Listener => "listeners",
            Kind::Pool => "pools",
            Kind::Member => "members",
            Kind::Monitor => "healthmonitors",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Lb {
    pub id: String,
    pub seq: u64,
    pub attrs: Map<String, Value>,
    pub vip_address: IpAddr,
    pub vip_port_id: String,
    /// Whether the VIP port was created for this LB (and goes with it).
    pub owns_port: bool,
    pub vip_subnet_id: String,
    pub vip_network_id: String,
    pub prov: Prov,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

#[derive(Debug, Clone)]
pub(crate) struct Child {
    pub id: String,
    pub seq: u64,
    pub kind: Kind,
    pub lb_id: String,
    /// The pool of a member or health monitor.
    pub pool_id: Option<String>,
    pub attrs: Map<String, Value>,
    pub prov: ChildProv,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

/// All load-balancer state, inside `state::Cloud`.
#[derive(Debug, Clone)]
pub(crate) struct Lbaas {
    pub lbs: BTreeMap<String, Lb>,
    pub children: BTreeMap<String, Child>,
    pub(super) next_seq: u64,
    pub(crate) vips: Pool,
    pub policies: Policies,
    /// Member health as the data plane's monitors last saw it (`dataplane`), only for
    /// members not ONLINE: members not in it show ONLINE when monitored.
    pub member_health: BTreeMap<String, MemberStatus>,
    /// Pending transitions that have completed (or failed). A read can complete one
    /// without a write request, so the data plane's reconciler counts these as well as
    /// writes to know when its plan is stale.
    pub transitions: u64,
}

impl Default for Lbaas {
    fn default() -> Self {
        Self {
            lbs: BTreeMap::new(),
            children: BTreeMap::new(),
            next_seq: 1,
            vips: Pool::new(
                "127.30.0.0/16",
                Ipv4Addr::new(127, 30, 0, 10),
                Ipv4Addr::new(127, 30, 255, 254),
            ),
            policies: Policies::default(),
            member_health: BTreeMap::new(),
            transitions: 0,
        }
    }
}
