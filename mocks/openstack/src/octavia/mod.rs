//! Octavia (load-balancer API v2): its state, its HTTP API, and the data plane that
//! carries traffic for ACTIVE load balancers.

pub(crate) mod api;
mod dataplane;
pub(crate) mod state;

pub(crate) use api::routes;
pub(crate) use dataplane::DataPlane;
