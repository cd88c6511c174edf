//! ELB classic (`Version=2012-06-01`, the "query" protocol with `.member.N` lists), the AWS
//! CCM's default load balancer (cloud-apis.md §4.3): create/describe/delete, instance
//! registration, health check, listeners, attributes, tags and security groups. Classic
//! load balancers have no state machine; the CCM reports `DNSName` as the ingress hostname.
//!
//! `model` holds the load balancer records, `state` the operations on them; `api` validates
//! the query parameters into typed requests, calls `state` and renders the XML answer.

mod api;
pub(crate) mod model;
pub(crate) mod state;

pub(crate) use api::{ACTIONS, handle};
pub(crate) use model::ClassicLb;
