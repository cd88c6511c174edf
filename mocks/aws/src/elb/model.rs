//! ELB classic's data: the load balancer record and its parts, as `crate::state::Cloud`
//! holds them. Split from `state.rs` (the operations, which take the whole `Cloud`) so the
//! cloud can own these records without `crate::state` and `elb::state` importing each
//! other; this module imports nothing from the crate.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listener {
    pub protocol: String,
    pub port: i64,
    pub instance_protocol: String,
    pub instance_port: i64,
    pub certificate: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    pub target: String,
    pub interval: i64,
    pub timeout: i64,
    pub unhealthy: i64,
    pub healthy: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub cross_zone: bool,
    pub access_log: bool,
    pub draining: bool,
    pub draining_timeout: i64,
    pub idle_timeout: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct ClassicLb {
    pub name: String,
    pub dns_name: String,
    /// The address the data plane serves the listeners on (what `dns_name` resolves to).
    pub vip: std::net::Ipv4Addr,
    pub scheme: String,
    pub vpc_id: String,
    pub listeners: Vec<Listener>,
    pub subnets: Vec<String>,
    pub zones: Vec<String>,
    pub security_groups: Vec<String>,
    pub instances: Vec<String>,
    pub health_check: HealthCheck,
    pub attributes: Attributes,
    pub tags: BTreeMap<String, String>,
    pub created: jiff::Timestamp,
}
