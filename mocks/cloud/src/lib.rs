//! What every cloud mock shares, so that each cloud crate only has to speak its own
//! protocol: a request journal (cases assert "exactly one call", "no hot loop"), a fault
//! engine (errors and latency injected by rule; the cloud renders them in its own error
//! envelope), resource state machines (pending -> done | failed, by reads, time or force),
//! the admin HTTP routes that drive both, a helper that serves an axum router on an
//! ephemeral port with graceful shutdown, and the load balancers' data plane (a TCP/UDP
//! proxy with health checks, so cases can send real traffic through a mock LB).
//!
//! Every mock mounts the same request gate (`gate`: classify, fault rules, latency, the
//! fault's action, the handlers, the journal entry, the data plane's wake-up), runs the
//! same data plane reconciler (`reconcile`) and is driven through the same [`MockCloud`]
//! trait; each supplies only its cloud's notions (how to classify a request, including
//! what kind of call it is for the journal ([`CallKind`]), and render an error, what
//! listeners to serve).
//!
//! Every mock also has the same skeleton of files: `lib.rs` (the crate's face and its
//! `MockCloud` impl), `state.rs` (the cloud's state apart from protocol), `gate.rs` (the
//! request gate), `control.rs` (the `Admin` handle), `admin_api.rs` (its HTTP routes) and,
//! for tests, `testing.rs` (the cloud's request shapes over `testing`, this crate's
//! shared test support behind the `testing` feature).
//!
//! Also: seed files (`seed`: initial state, fault rules and lifecycle modes in one JSON
//! document, for `ccm-conformance mock <cloud> --seed FILE`), and a throwaway CA with HTTPS
//! serving (`tls`) for clients that insist on it. The fault rule JSON, with an example, is
//! in the `faults` module docs; the admin routes in [`admin_router`].
#![forbid(unsafe_code)]

pub mod admin;
pub mod dataplane;
pub mod faults;
pub mod gate;
pub mod journal;
pub mod lifecycle;
pub mod mock;
pub mod reconcile;
pub mod seed;
pub mod serve;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls;

pub use admin::{
    AdminApi, AdminRejection, ResetFn, admin_error, admin_router, journaled_as_admin,
    parse_admin_json,
};
pub use dataplane::{
    Backend, Cidr, DataplaneError, ExpectedCodes, HealthCheck, MemberStatus, Probe, Protocol,
    Proxy, ProxyConfig,
};
pub use faults::{
    Delay, Fault, FaultAction, FaultError, FaultJson, FaultKind, FaultStatus, Faults, FiredFault,
    IntoFault, Matcher, RequestInfo, Throttle, ThrottlePreset,
};
pub use gate::{Call, Classified, Gate, GateLayer, GateService, Wake};
pub use journal::{CallKind, DEFAULT_JOURNAL_CAPACITY, Journal, JournalEntry, LbOp, Record};
pub use lifecycle::{Lifecycle, LifecycleError, Mode, Phase, Policies};
pub use mock::{LoadSeed, MockCloud, MockOptions};
pub use reconcile::{Listener, Planner, Reconciler, RuleListener};
pub use seed::{LifecycleSeed, SeedError, SeedFile};
pub use serve::{BoundListener, ServeError, ServerHandle, bind, connection_reset, serve};
