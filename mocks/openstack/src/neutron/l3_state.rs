//! Neutron's L3 state: floating IPs and routers with their extra routes, inside
//! [`Cloud`](crate::state::Cloud), and the CIDR arithmetic their checks use. The HTTP side
//! (JSON, validation errors in Neutron's shape) is in `l3`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::ids::new_id;

#[derive(Debug, Clone)]
pub(crate) struct FloatingIp {
    pub id: String,
    pub address: IpAddr,
    pub network_id: String,
    pub port_id: Option<String>,
    pub fixed_ip: Option<IpAddr>,
    pub description: String,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Route {
    pub destination: String,
    pub nexthop: IpAddr,
}

#[derive(Debug, Clone)]
pub(crate) struct RouterRes {
    pub id: String,
    pub name: String,
    pub description: String,
    pub admin_state_up: bool,
    pub external_network_id: String,
    pub external_subnet_id: String,
    pub external_ip: IpAddr,
    /// Subnets with an interface on the router (CIDRs, for nexthop checks).
    pub interface_cidrs: Vec<&'static str>,
    pub routes: Vec<Route>,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

/// Floating IPs and routers, inside [`Cloud`].
#[derive(Debug, Clone, Default)]
pub(crate) struct L3 {
    pub floatingips: BTreeMap<String, FloatingIp>,
    pub routers: BTreeMap<String, RouterRes>,
}

pub(crate) fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    match parse_any_cidr(s)? {
        (IpAddr::V4(addr), len) => Some((addr, len)),
        (IpAddr::V6(_), _) => None,
    }
}

/// An IPv4 or IPv6 CIDR (`addr/len`, the length within the family's width).
pub(crate) fn parse_any_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let width = if addr.is_ipv4() { 32 } else { 128 };
    let len: u8 = len.parse().ok().filter(|l| *l <= width)?;
    Some((addr, len))
}

pub(crate) fn in_cidr(ip: IpAddr, cidr: &str) -> bool {
    match (ip, parse_any_cidr(cidr)) {
        (IpAddr::V4(ip), Some((IpAddr::V4(net), len))) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), Some((IpAddr::V6(net), len))) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// The IPv6 subnet the seed router has an interface on, next to the private IPv4 subnet:
/// the mock's servers take IPv6 fixed IPs (dual-stack nodes use `fd00::…`) on the private
/// network, and Neutron only accepts an extraroute whose nexthop is on a subnet the router
/// is attached to (`neutron/db/extraroute_db.py` `_validate_routes_nexthop`).
pub(crate) const PRIVATE_V6_CIDR: &str = "fd00::/64";

impl L3 {
    /// The seed router: private subnet inside, public network as gateway (127.20.0.2, out
    /// of the floating allocation range).
    pub fn seeded(cloud_networks: &[(String, String, &'static str, bool)]) -> Self {
        let mut l3 = L3::default();
        let external = cloud_networks.iter().find(|n| n.3);
        let mut internal: Vec<&'static str> = cloud_networks
            .iter()
            .filter(|n| !n.3)
            .map(|n| n.2)
            .collect();
        if !internal.is_empty() {
            internal.push(PRIVATE_V6_CIDR);
        }
        if let Some((net, subnet, _, _)) = external {
            let now = jiff::Timestamp::now();
            let id = new_id();
            l3.routers.insert(
                id.clone(),
                RouterRes {
                    id,
                    name: "router1".into(),
                    description: String::new(),
                    admin_state_up: true,
                    external_network_id: net.clone(),
                    external_subnet_id: subnet.clone(),
                    external_ip: IpAddr::V4(Ipv4Addr::new(127, 20, 0, 2)),
                    interface_cidrs: internal,
                    routes: Vec::new(),
                    created: now,
                    updated: now,
                },
            );
        }
        l3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_membership() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert!(in_cidr(ip("127.10.3.4"), "127.10.0.0/16"));
        assert!(!in_cidr(ip("127.11.0.1"), "127.10.0.0/16"));
        assert!(in_cidr(ip("10.0.0.1"), "0.0.0.0/0"));
        assert!(!in_cidr(ip("::1"), "0.0.0.0/0"));
        assert_eq!(parse_cidr("10.0.0.0/33"), None);
        assert_eq!(parse_cidr("fd00::/64"), None);
        assert!(in_cidr(ip("fd00::9:1"), "fd00::/64"));
        assert!(!in_cidr(ip("fd00:0:0:1::1"), "fd00::/64"));
        assert!(in_cidr(ip("fd01::1"), "::/0"));
        assert!(!in_cidr(ip("10.0.0.1"), "::/0"));
        assert!(in_cidr(ip("fd00::1"), "fd00::1/128"));
        assert_eq!(parse_any_cidr("fd00::/129"), None);
    }
}
