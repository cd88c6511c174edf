//! Wire shapes of the Octavia and Neutron answers the load balancer reads (gophercloud
//! `openstack/loadbalancer/v2`, `openstack/networking/v2`): only the fields it uses.
//!
//! Exists apart so the load balancer's logic reads without a page of serde structs.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct OctaviaLb {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub provisioning_status: String,
    #[serde(default)]
    pub vip_address: String,
    #[serde(default)]
    pub vip_port_id: String,
    #[serde(default)]
    pub tags: Vec<String>,
}
#[derive(Debug, Deserialize)]
pub(super) struct LbEnvelope {
    pub(super) loadbalancer: OctaviaLb,
}
#[derive(Debug, Deserialize)]
pub(super) struct LbList {
    #[serde(default)]
    pub(super) loadbalancers: Vec<OctaviaLb>,
}
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Listener {
    pub(super) id: String,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) tags: Vec<String>,
    #[serde(default)]
    pub(super) protocol: String,
    #[serde(default)]
    pub(super) protocol_port: i32,
    #[serde(default)]
    pub(super) default_pool_id: Option<String>,
    #[serde(default)]
    pub(super) allowed_cidrs: Option<Vec<String>>,
}
#[derive(Debug, Deserialize)]
pub(super) struct ListenerList {
    #[serde(default)]
    pub(super) listeners: Vec<Listener>,
}
#[derive(Debug, Deserialize)]
pub(super) struct ListenerEnvelope {
    pub(super) listener: Listener,
}
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Pool {
    pub(super) id: String,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) healthmonitor_id: Option<String>,
}
#[derive(Debug, Deserialize)]
pub(super) struct PoolEnvelope {
    pub(super) pool: Pool,
}
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Monitor {
    #[serde(default)]
    pub(super) name: String,
}
#[derive(Debug, Deserialize)]
pub(super) struct MonitorEnvelope {
    pub(super) healthmonitor: Monitor,
}
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Member {
    #[serde(default)]
    pub(super) address: String,
    #[serde(default)]
    pub(super) protocol_port: i32,
    #[serde(default)]
    pub(super) monitor_port: Option<i32>,
}
#[derive(Debug, Deserialize)]
pub(super) struct MemberList {
    #[serde(default)]
    pub(super) members: Vec<Member>,
}
#[derive(Debug, Clone, Deserialize)]
pub(super) struct FloatingIp {
    pub(super) id: String,
    #[serde(default)]
    pub(super) floating_ip_address: String,
    #[serde(default)]
    pub(super) description: String,
}
#[derive(Debug, Deserialize)]
pub(super) struct FloatingIpList {
    #[serde(default)]
    pub(super) floatingips: Vec<FloatingIp>,
}
#[derive(Debug, Deserialize)]
pub(super) struct FloatingIpEnvelope {
    pub(super) floatingip: FloatingIp,
}
#[derive(Debug, Deserialize)]
pub(super) struct NeutronPortList {
    #[serde(default)]
    pub(super) ports: Vec<NeutronPort>,
}
#[derive(Debug, Deserialize)]
pub(super) struct NeutronPort {
    #[serde(default)]
    pub(super) fixed_ips: Vec<NeutronFixedIp>,
}
#[derive(Debug, Deserialize)]
pub(super) struct NeutronFixedIp {
    #[serde(default)]
    pub(super) ip_address: String,
    #[serde(default)]
    pub(super) subnet_id: String,
}
