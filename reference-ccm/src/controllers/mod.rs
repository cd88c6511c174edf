//! Controllers of the reference CCM: cloud-node (initialization and address sync) and
//! cloud-node-lifecycle (deleting nodes whose instance is gone, the shutdown taint).
//! `lib.rs` logs "Skipping" for the others, as upstream does for controllers that cannot
//! start.

pub mod events;
pub mod lifecycle;
pub mod node;
