//! One face for every cloud, so cases are written once and run per provider: create,
//! change and delete instances, inject faults, count the CCM's calls, and know what a
//! provider's CCM should report (providerID format, region, config file).
//!
//! This folder is the only part of the harness that knows which cloud it talks to:
//! - [`registry`] lists every cloud's [`CloudDescriptor`] (names, mock, upstream build);
//!   each descriptor lives in its cloud's own file, beside that cloud's backend.
//! - [`capability`] splits what a backend can do into small traits (instances, load
//!   balancers, routes, faults, journal); each backend implements those it can, and a case
//!   that needs a missing one is skipped with the reason ([`Capability`]).
//! - [`CloudControl`] ([`control`]) is the opaque face cases hold; [`types`] and [`calls`]
//!   are the plain data it speaks in (instances, features, faults, classified journal
//!   calls); [`standalone`] serves a mock alone for `ccm-conformance mock <cloud>`.
//!
//! Adding a cloud: its mock crate, its file here (a backend and a `CLOUD` descriptor), one
//! line in [`registry`]; ARCHITECTURE.md "Adding a cloud".

mod address_block;
pub mod calls;
pub mod capability;
mod control;
pub mod descriptor;
pub mod registry;
pub mod standalone;
pub mod types;

mod aws;
mod azure;
mod gcp;
mod openstack;
mod vsphere;

pub use calls::{CallKind, CloudCall, CloudObserver, LbOp};
pub use capability::Capability;
pub use control::CloudControl;
pub use descriptor::{CloudDescriptor, MockTls, UpstreamEntry};
pub use standalone::{StandaloneError, StandaloneMock};
pub use types::{
    CloudLoadBalancer, CreateHold, FaultSpec, Feature, InTreeLoadBalancer, InTreeName, Instance,
    InstancePatch, InstanceSpec, LbUpdate,
};

pub use crate::provider::Provider;

pub(crate) use calls::{LbLister, RefsReader, tokens};
pub(crate) use capability::{
    Backend, FaultControl, InstanceControl, JournalControl, LoadBalancerControl, Offers,
    RouteControl,
};
pub(crate) use types::{default_load_balancer_name, service_key, truncate};
