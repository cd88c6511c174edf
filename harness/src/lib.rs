//! The harness runs conformance cases: it builds an environment for each case (an
//! embedded API server, a mock cloud and simulated kubelets), starts the CCM under test as
//! a separate OS process, gives cases bounded waits and assertions, and records results as
//! JUnit.
//!
//! Cases (in `ccm-suites`) talk only to this crate: they never see a transport or a
//! particular mock, so the same case runs against every provider (see [`cloud`]): nothing
//! outside `cloud/` knows which cloud it talks to.
#![forbid(unsafe_code)]

pub mod bench;
pub mod case;
pub mod case_log;
pub mod ccm;
pub mod cloud;
pub mod env;
pub mod error;
pub mod external;
pub mod in_cluster;
pub mod in_tree;
pub mod interrupt;
pub mod invariants;
pub mod kcm;
pub mod lb_bench;
pub mod node;
pub mod probe;
pub mod progress;
pub mod provider;
pub mod run;
pub mod runner;
pub mod settings;
pub mod shard;
pub mod soak;
pub mod traffic;
pub mod wait;

pub use case::{Case, CaseError, CaseFn, Tag};
pub use cloud::{
    CloudControl, CloudLoadBalancer, FaultSpec, Instance, InstancePatch, InstanceSpec,
};
pub use env::{Environment, NodeOptions};
pub use provider::Provider;
pub use settings::Settings;
pub use wait::{Probe, eventually, holds_for};

/// Installs the process-wide rustls crypto provider (ring) once; reqwest is built without one.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
