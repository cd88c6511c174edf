//! Controllers of the reference CCM. Only the cloud-node controller exists so far;
//! `lib.rs` logs "Skipping" for the others, as upstream does for controllers that
//! cannot start.

pub mod node;
