//! Microsoft.Network: network interfaces, public IPs, load balancers, security groups,
//! route tables and routes, virtual networks and subnets, all kept as ARM documents.

pub mod api;
pub mod state;
