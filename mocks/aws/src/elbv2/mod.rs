//! ELBv2 (`Version=2015-12-01`), what the AWS CCM uses for `aws-load-balancer-type: nlb`
//! (cloud-apis.md §4.3): load balancers with the `provisioning -> active` state machine
//! (driven by `mock-cloud`'s lifecycle modes, so a case can hold a load balancer in
//! `provisioning` or fail it, which moto cannot), target groups, targets and their health,
//! listeners, attributes, tags and security groups. Error codes as ELBv2:
//! `LoadBalancerNotFound`, `TargetGroupNotFound`, `DuplicateLoadBalancerName`,
//! `DuplicateTargetGroupName`, `ResourceInUse`, `ListenerNotFound`, `DuplicateListener`.
//!
//! `model` holds the resources, `state` the operations on them; `api` validates the query
//! parameters into typed requests, calls `state` and renders the XML answer.

mod api;
pub(crate) mod model;
pub(crate) mod state;

pub(crate) use api::{ACTIONS, handle};
pub(crate) use state::state_of;
