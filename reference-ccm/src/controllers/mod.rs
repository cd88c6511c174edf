//! Controllers of the reference CCM: cloud-node (initialization and address sync),
//! cloud-node-lifecycle (deleting nodes whose instance is gone, the shutdown taint),
//! service-lb (cloud load balancers) and node-route (pod CIDR routes). `lib.rs` logs
//! "Skipping" for those the provider cannot support, as upstream does.

pub mod events;
pub mod lifecycle;
pub mod node;
pub mod route;
pub mod service;
pub mod workqueue;
