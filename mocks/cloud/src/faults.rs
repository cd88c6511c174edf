//! The fault engine: rules that make a mock misbehave on purpose for matching requests —
//! answer an error, throttle, answer late, drop the connection, or pretend a resource it
//! just created does not exist yet — so cases can test how a CCM copes with a real cloud's
//! failure modes. The engine only decides *whether* and *what*; each cloud renders the
//! answer in its own error envelope.
//!
//! # Rules
//!
//! A rule has matchers (all optional; an absent one matches anything) and an effect. In
//! Rust it is a [`Fault`]: one variant per kind holding only what that kind uses, with the
//! shared [`Matcher`] and [`Delay`]; short constructors ([`Fault::error`],
//! [`Fault::latency`], ...) and builder methods ([`Fault::service`], [`Fault::path`], ...)
//! make one line per rule. On the wire (`POST <admin>/faults`, a seed file's `faults`, the
//! `GET <admin>/faults` listing) it is the flat [`FaultJson`]:
//!
//! ```json
//! {
//!   "cloud": "openstack",        "service": "compute",   "method": "GET",
//!   "path": "/servers/[^/]+$",   "operation": "GET servers",
//!   "resource": "7b1e...",       "probability": 0.5,     "count": 3,
//!   "kind": "error",             "status": 503,          "code": null,
//!   "message": "injected",       "latency_ms": 100,      "jitter_ms": 50
//! }
//! ```
//!
//! - `cloud`, `service`, `operation`, `resource` compare exactly (`method` and `operation`
//!   ignore case); `path` is a regex searched in the request path (no query). What
//!   `operation` and `resource` are is the cloud's choice (AWS: the `Action`; OpenStack:
//!   `"METHOD collection"` and the id in the path), see each mock's docs.
//! - `probability` (0..=1) rolls the engine's seeded RNG each time the rule matches; a
//!   rule that rolls "no" lets the next rule be considered. `count` is how many times the
//!   rule fires before it is removed.
//! - `kind` (default: `error` if `status` is set, else `latency`):
//!   - `error`: answer `status` (400..=599) with `code`/`message` in the cloud's envelope;
//!   - `throttle`: the cloud's own throttling answer (each mock's [`crate::Gate::throttle`]
//!     preset: EC2 `RequestLimitExceeded` 503, ELB `Throttling` 400, OpenStack 429 +
//!     `Retry-After`, vSphere `NotAuthenticated`); `status`/`code`/`message` override it;
//!   - `latency`: delay, then serve normally;
//!   - `reset`: drop the connection without any response;
//!   - `not_found_after_create`: eventual consistency — a `GET` of a resource created less
//!     than `window_ms` ago, or read fewer than `window_reads` times since (whichever
//!     limit ends first), answers the cloud's 404. The mock reports creations with
//!     [`Faults::note_created`].
//! - `latency_ms` + a uniform `0..=jitter_ms` delay every kind (before answering).
//!
//! Deterministic: the RNG is seeded ([`Faults::set_seed`], `PUT <admin>/faults/seed`
//! `{"seed": 42}`, a seed file's `fault_seed`; default 0), so the same seed and the same
//! request sequence fire the same faults.
//!
//! A [`FaultJson`] is checked when it becomes a [`Fault`] ([`Faults::try_add`], or
//! `TryFrom`); the listing shows each rule as it was written (with the `count` left).

mod engine;
mod rule;

pub use engine::{
    FaultAction, FaultStatus, Faults, FiredFault, RequestInfo, Throttle, ThrottlePreset,
};
pub use rule::{Delay, Fault, FaultError, FaultJson, FaultKind, IntoFault, Matcher};

#[cfg(test)]
mod tests;
