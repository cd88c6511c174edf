//! Cloud providers the reference CCM knows, one module each.
//!
//! Exists to keep every cloud's wire protocol and config format out of the
//! controllers, which only see [`crate::cloud::Instances`].

pub mod openstack;
