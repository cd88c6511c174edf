//! Octavia (load-balancer API v2), one file per concern:
//!
//! - `model`: the records of load balancers and their children, inside
//!   [`crate::state::Cloud`];
//! - `state`: the provisioning state machine and the rules (409 while pending) — no HTTP;
//! - `error`: why a request was refused;
//! - `fields`: the attribute tables a create or update body is checked against;
//! - `views`: the JSON the API shows for that state (statuses, the status tree);
//! - `api`: the HTTP handlers (routes, WSME's error shape);
//! - `dataplane`: real traffic for ACTIVE load balancers (VIP listeners proxying to
//!   members, health monitors).

pub(crate) mod api;
mod dataplane;
mod error;
mod fields;
pub(crate) mod model;
pub(crate) mod state;
mod views;

pub(crate) use api::routes;
pub(crate) use dataplane::start as start_data_plane;
