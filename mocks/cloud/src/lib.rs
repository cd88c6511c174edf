//! What every cloud mock shares, so that each cloud crate only has to speak its own
//! protocol: a request journal (cases assert "exactly one call", "no hot loop"), a fault
//! engine (errors and latency injected by rule; the cloud renders them in its own error
//! envelope), resource state machines (pending -> done | failed, by reads, time or force),
//! the admin HTTP routes that drive both, a helper that serves an axum router on an
//! ephemeral port with graceful shutdown, and the load balancers' data plane (a TCP/UDP
//! proxy with health checks, so cases can send real traffic through a mock LB).
//!
//! Also: seed files (`seed`: initial state, fault rules and lifecycle modes in one JSON
//! document, for `ccm-conformance mock <cloud> --seed FILE`), and a throwaway CA with HTTPS
//! serving (`tls`) for clients that insist on it. The fault rule JSON, with an example, is
//! in the `faults` module docs; the admin routes in [`admin_router`].
#![forbid(unsafe_code)]

pub mod admin;
pub mod dataplane;
pub mod faults;
pub mod journal;
pub mod lifecycle;
pub mod seed;
pub mod serve;
pub mod tls;

pub use admin::{AdminRejection, ResetFn, admin_error, admin_router, parse_admin_json};
pub use dataplane::{
    Backend, Cidr, DataplaneError, ExpectedCodes, HealthCheck, MemberStatus, Probe, Protocol,
    Proxy, ProxyConfig,
};
pub use faults::{
    Fault, FaultAction, FaultError, FaultKind, FaultRule, FaultStatus, Faults, FiredFault,
    RequestInfo, throttle_preset,
};
pub use journal::{DEFAULT_JOURNAL_CAPACITY, Journal, JournalEntry};
pub use lifecycle::{Lifecycle, LifecycleError, Mode, Phase, Policies};
pub use seed::{LifecycleSeed, SeedError, SeedFile};
pub use serve::{BoundListener, ServeError, ServerHandle, bind, connection_reset, serve};
