//! ELBv2's data: load balancers, target groups, listeners and tags, and `Elbv2`, the part
//! of `crate::state::Cloud` that holds them. Split from `state.rs` (the operations, which
//! take the whole `Cloud`) so the cloud can own these records without `crate::state` and
//! `elbv2::state` importing each other; this module imports nothing from the crate.

use std::collections::BTreeMap;

use mock_cloud::{Lifecycle, Mode};

#[derive(Debug, Clone)]
pub(crate) struct LoadBalancer {
    pub arn: String,
    pub name: String,
    pub dns_name: String,
    /// The address the data plane serves the listeners on (what `dns_name` resolves to).
    pub vip: std::net::Ipv4Addr,
    pub kind: String,
    pub scheme: String,
    pub vpc_id: String,
    pub subnets: Vec<(String, String)>,
    pub security_groups: Vec<String>,
    pub ip_address_type: String,
    pub lifecycle: Lifecycle,
    pub attributes: BTreeMap<String, String>,
    pub created: jiff::Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    pub protocol: String,
    pub port: String,
    pub path: Option<String>,
    pub interval: i64,
    pub timeout: i64,
    pub healthy: i64,
    pub unhealthy: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct TargetGroup {
    pub arn: String,
    pub name: String,
    pub protocol: String,
    pub port: i64,
    pub vpc_id: String,
    pub target_type: String,
    pub health: HealthCheck,
    pub targets: Vec<(String, i64)>,
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub arn: String,
    pub lb_arn: String,
    pub protocol: String,
    pub port: i64,
    /// `(type, target group arn)`.
    pub actions: Vec<(String, String)>,
}

/// A resource's tags, key to value.
pub(crate) type Tags = BTreeMap<String, String>;

/// The ELBv2 part of the cloud.
#[derive(Debug, Clone)]
pub(crate) struct Elbv2 {
    /// How new load balancers leave `provisioning`.
    pub mode: Mode,
    pub lbs: BTreeMap<String, LoadBalancer>,
    pub target_groups: BTreeMap<String, TargetGroup>,
    pub listeners: BTreeMap<String, Listener>,
    pub tags: BTreeMap<String, Tags>,
}

impl Default for Elbv2 {
    fn default() -> Self {
        Self {
            mode: Mode::Immediate,
            lbs: BTreeMap::new(),
            target_groups: BTreeMap::new(),
            listeners: BTreeMap::new(),
            tags: BTreeMap::new(),
        }
    }
}
