//! Neutron (networking API v2.0): ports, networks and subnets, routers and floating IPs
//! (L3), and security groups.

pub(crate) mod l3;
mod ports;
pub(crate) mod sg;

pub(crate) use ports::{Pairs, bad_request, page, pairs, routes};
