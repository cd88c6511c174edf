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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How long a creation is remembered for `not_found_after_create` at most.
const CREATED_MEMORY: Duration = Duration::from_secs(600);

/// What a rule does when it fires (the JSON `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Error,
    Throttle,
    Latency,
    Reset,
    NotFoundAfterCreate,
}

/// A fault rule as JSON has it (see the module docs): flat, every field optional, not yet
/// checked. [`Faults::try_add`] and `Fault::try_from` check it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<String>,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FaultKind>,
    #[serde(default)]
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_reads: Option<u32>,
}

impl FaultJson {
    /// The kind, with the default applied (`error` when a status is set, else `latency`).
    pub fn effective_kind(&self) -> FaultKind {
        self.kind.unwrap_or(if self.status != 0 {
            FaultKind::Error
        } else {
            FaultKind::Latency
        })
    }
}

/// Which requests a rule applies to, and how often it fires. Absent matchers match
/// anything; see the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matcher {
    pub cloud: Option<String>,
    pub service: Option<String>,
    /// Compared case-insensitively.
    pub method: Option<String>,
    /// A regex searched (unanchored) in the request path.
    pub path: Option<String>,
    /// Compared case-insensitively.
    pub operation: Option<String>,
    pub resource: Option<String>,
    /// 0..=1, rolled on the engine's seeded RNG each time the rule matches.
    pub probability: Option<f64>,
    /// Fires left before the rule is removed; `None` = until removed.
    pub count: Option<u32>,
}

/// The delay before answering: `latency_ms` plus a uniform `0..=jitter_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delay {
    pub latency_ms: Option<u64>,
    pub jitter_ms: Option<u64>,
}

/// A fault rule: one variant per kind (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FaultJson", into = "FaultJson")]
pub enum Fault {
    /// Answer `status` (400..=599) in the cloud's envelope.
    Error {
        when: Matcher,
        delay: Delay,
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    /// The cloud's throttling answer; `status`/`code`/`message` override its preset.
    Throttle {
        when: Matcher,
        delay: Delay,
        status: Option<u16>,
        code: Option<String>,
        message: Option<String>,
    },
    /// Delay, then serve normally.
    Latency { when: Matcher, delay: Delay },
    /// Drop the connection without a response.
    Reset { when: Matcher, delay: Delay },
    /// A read of a resource created less than `window_ms` ago, or read fewer than
    /// `window_reads` times since, answers the cloud's 404.
    NotFoundAfterCreate {
        when: Matcher,
        delay: Delay,
        window_ms: Option<u64>,
        window_reads: Option<u32>,
        code: Option<String>,
        message: Option<String>,
    },
}

impl Fault {
    /// An `error` rule answering `status`.
    pub fn error(status: u16) -> Fault {
        Fault::Error {
            when: Matcher::default(),
            delay: Delay::default(),
            status,
            code: None,
            message: None,
        }
    }

    /// A `throttle` rule with the cloud's preset answer.
    pub fn throttle() -> Fault {
        Fault::Throttle {
            when: Matcher::default(),
            delay: Delay::default(),
            status: None,
            code: None,
            message: None,
        }
    }

    /// A `latency` rule: `ms` before serving normally.
    pub fn latency(ms: u64) -> Fault {
        Fault::Latency {
            when: Matcher::default(),
            delay: Delay {
                latency_ms: Some(ms),
                jitter_ms: None,
            },
        }
    }

    /// A `reset` rule.
    pub fn reset() -> Fault {
        Fault::Reset {
            when: Matcher::default(),
            delay: Delay::default(),
        }
    }

    /// A `not_found_after_create` rule with the given windows.
    pub fn not_found_after_create(window_ms: Option<u64>, window_reads: Option<u32>) -> Fault {
        Fault::NotFoundAfterCreate {
            when: Matcher::default(),
            delay: Delay::default(),
            window_ms,
            window_reads,
            code: None,
            message: None,
        }
    }

    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Error { .. } => FaultKind::Error,
            Fault::Throttle { .. } => FaultKind::Throttle,
            Fault::Latency { .. } => FaultKind::Latency,
            Fault::Reset { .. } => FaultKind::Reset,
            Fault::NotFoundAfterCreate { .. } => FaultKind::NotFoundAfterCreate,
        }
    }

    pub fn when(&self) -> &Matcher {
        match self {
            Fault::Error { when, .. }
            | Fault::Throttle { when, .. }
            | Fault::Latency { when, .. }
            | Fault::Reset { when, .. }
            | Fault::NotFoundAfterCreate { when, .. } => when,
        }
    }

    pub fn when_mut(&mut self) -> &mut Matcher {
        match self {
            Fault::Error { when, .. }
            | Fault::Throttle { when, .. }
            | Fault::Latency { when, .. }
            | Fault::Reset { when, .. }
            | Fault::NotFoundAfterCreate { when, .. } => when,
        }
    }

    pub fn delay(&self) -> &Delay {
        match self {
            Fault::Error { delay, .. }
            | Fault::Throttle { delay, .. }
            | Fault::Latency { delay, .. }
            | Fault::Reset { delay, .. }
            | Fault::NotFoundAfterCreate { delay, .. } => delay,
        }
    }

    pub fn delay_mut(&mut self) -> &mut Delay {
        match self {
            Fault::Error { delay, .. }
            | Fault::Throttle { delay, .. }
            | Fault::Latency { delay, .. }
            | Fault::Reset { delay, .. }
            | Fault::NotFoundAfterCreate { delay, .. } => delay,
        }
    }

    /// The rule's message, for the kinds that answer one.
    pub fn message_text(&self) -> Option<&str> {
        match self {
            Fault::Error { message, .. }
            | Fault::Throttle { message, .. }
            | Fault::NotFoundAfterCreate { message, .. } => message.as_deref(),
            Fault::Latency { .. } | Fault::Reset { .. } => None,
        }
    }

    /// The rule's error code, for the kinds that answer one.
    pub fn code_text(&self) -> Option<&str> {
        match self {
            Fault::Error { code, .. }
            | Fault::Throttle { code, .. }
            | Fault::NotFoundAfterCreate { code, .. } => code.as_deref(),
            Fault::Latency { .. } | Fault::Reset { .. } => None,
        }
    }

    /// Matches only this cloud's engine ([`Faults::for_cloud`]).
    pub fn cloud(mut self, cloud: &str) -> Fault {
        self.when_mut().cloud = Some(cloud.to_string());
        self
    }

    /// Matches only this service.
    pub fn service(mut self, service: &str) -> Fault {
        self.when_mut().service = Some(service.to_string());
        self
    }

    /// Matches only this HTTP method.
    pub fn method(mut self, method: &str) -> Fault {
        self.when_mut().method = Some(method.to_string());
        self
    }

    /// Matches only paths this regex is found in.
    pub fn path(mut self, regex: impl Into<String>) -> Fault {
        self.when_mut().path = Some(regex.into());
        self
    }

    /// Matches only this operation.
    pub fn operation(mut self, operation: &str) -> Fault {
        self.when_mut().operation = Some(operation.to_string());
        self
    }

    /// Matches only this resource.
    pub fn resource(mut self, resource: impl Into<String>) -> Fault {
        self.when_mut().resource = Some(resource.into());
        self
    }

    /// Fires with this probability.
    pub fn probability(mut self, p: f64) -> Fault {
        self.when_mut().probability = Some(p);
        self
    }

    /// Fires this many times (`None`: until removed).
    pub fn count(mut self, count: Option<u32>) -> Fault {
        self.when_mut().count = count;
        self
    }

    /// Waits `latency_ms` (plus the jitter) before answering.
    pub fn after_ms(mut self, latency_ms: u64) -> Fault {
        self.delay_mut().latency_ms = Some(latency_ms);
        self
    }

    /// Adds a uniform `0..=jitter_ms` to the delay.
    pub fn jitter_ms(mut self, jitter_ms: u64) -> Fault {
        self.delay_mut().jitter_ms = Some(jitter_ms);
        self
    }

    /// The message of the answer (error, throttle and not-found kinds; ignored otherwise).
    pub fn message(mut self, text: impl Into<String>) -> Fault {
        if let Fault::Error { message, .. }
        | Fault::Throttle { message, .. }
        | Fault::NotFoundAfterCreate { message, .. } = &mut self
        {
            *message = Some(text.into());
        }
        self
    }

    /// The cloud error code of the answer (error, throttle and not-found kinds).
    pub fn code(mut self, text: impl Into<String>) -> Fault {
        if let Fault::Error { code, .. }
        | Fault::Throttle { code, .. }
        | Fault::NotFoundAfterCreate { code, .. } = &mut self
        {
            *code = Some(text.into());
        }
        self
    }
}

impl From<Fault> for FaultJson {
    fn from(f: Fault) -> FaultJson {
        let kind = f.kind();
        let (when, delay) = (f.when().clone(), *f.delay());
        let mut json = FaultJson {
            cloud: when.cloud,
            service: when.service,
            method: when.method,
            path: when.path,
            operation: when.operation,
            resource: when.resource,
            probability: when.probability,
            count: when.count,
            latency_ms: delay.latency_ms,
            jitter_ms: delay.jitter_ms,
            ..Default::default()
        };
        match f {
            Fault::Error {
                status,
                code,
                message,
                ..
            } => {
                json.status = status;
                json.code = code;
                json.message = message;
            }
            Fault::Throttle {
                status,
                code,
                message,
                ..
            } => {
                json.status = status.unwrap_or(0);
                json.code = code;
                json.message = message;
            }
            Fault::Latency { .. } | Fault::Reset { .. } => {}
            Fault::NotFoundAfterCreate {
                window_ms,
                window_reads,
                code,
                message,
                ..
            } => {
                json.window_ms = window_ms;
                json.window_reads = window_reads;
                json.code = code;
                json.message = message;
            }
        }
        // The kind is written only where the default would not give it back.
        if json.effective_kind() != kind {
            json.kind = Some(kind);
        }
        json
    }
}

impl TryFrom<FaultJson> for Fault {
    type Error = FaultError;

    /// Checks the rule (the errors, in this order: count, probability, status, effect,
    /// window fields, path regex).
    fn try_from(json: FaultJson) -> Result<Fault, FaultError> {
        let kind = json.effective_kind();
        check_when(json.count, json.probability)?;
        if matches!(
            kind,
            FaultKind::Latency | FaultKind::Reset | FaultKind::NotFoundAfterCreate
        ) && json.status != 0
        {
            return Err(FaultError::Unused {
                kind,
                field: "a status",
            });
        }
        let when = Matcher {
            cloud: json.cloud,
            service: json.service,
            method: json.method,
            path: json.path,
            operation: json.operation,
            resource: json.resource,
            probability: json.probability,
            count: json.count,
        };
        let delay = Delay {
            latency_ms: json.latency_ms,
            jitter_ms: json.jitter_ms,
        };
        let (window_ms, window_reads) = (json.window_ms, json.window_reads);
        let fault = match kind {
            FaultKind::Error => Fault::Error {
                when,
                delay,
                status: json.status,
                code: json.code,
                message: json.message,
            },
            FaultKind::Throttle => Fault::Throttle {
                when,
                delay,
                status: (json.status != 0).then_some(json.status),
                code: json.code,
                message: json.message,
            },
            FaultKind::Latency => Fault::Latency { when, delay },
            FaultKind::Reset => Fault::Reset { when, delay },
            FaultKind::NotFoundAfterCreate => Fault::NotFoundAfterCreate {
                when,
                delay,
                window_ms,
                window_reads,
                code: json.code,
                message: json.message,
            },
        };
        check_effect(&fault)?;
        if kind != FaultKind::NotFoundAfterCreate && (window_ms.is_some() || window_reads.is_some())
        {
            return Err(FaultError::Unused {
                kind,
                field: "window_ms/window_reads",
            });
        }
        compile_path(&fault)?;
        Ok(fault)
    }
}

/// What [`Faults::try_add`] takes: a [`Fault`] or its JSON.
pub trait IntoFault {
    /// The checked rule and the JSON the listing shows for it.
    fn into_fault(self) -> Result<(Fault, FaultJson), FaultError>;
}

impl IntoFault for Fault {
    fn into_fault(self) -> Result<(Fault, FaultJson), FaultError> {
        check_when(self.when().count, self.when().probability)?;
        check_effect(&self)?;
        compile_path(&self)?;
        let json = FaultJson::from(self.clone());
        Ok((self, json))
    }
}

impl IntoFault for FaultJson {
    fn into_fault(self) -> Result<(Fault, FaultJson), FaultError> {
        let fault = Fault::try_from(self.clone())?;
        Ok((fault, self))
    }
}

fn check_when(count: Option<u32>, probability: Option<f64>) -> Result<(), FaultError> {
    if count == Some(0) {
        return Err(FaultError::ZeroCount);
    }
    if let Some(p) = probability
        && !(0.0..=1.0).contains(&p)
    {
        return Err(FaultError::BadProbability(p));
    }
    Ok(())
}

fn check_effect(fault: &Fault) -> Result<(), FaultError> {
    match fault {
        Fault::Error { status, .. } if !(400..=599).contains(status) => {
            Err(FaultError::BadStatus(*status))
        }
        Fault::Throttle {
            status: Some(status),
            ..
        } if !(400..=599).contains(status) => Err(FaultError::BadStatus(*status)),
        Fault::Latency { delay, .. } if delay.latency_ms.is_none() && delay.jitter_ms.is_none() => {
            Err(FaultError::NoEffect)
        }
        Fault::NotFoundAfterCreate {
            window_ms,
            window_reads,
            ..
        } if window_ms.unwrap_or(0) == 0 && window_reads.unwrap_or(0) == 0 => {
            Err(FaultError::NoWindow)
        }
        _ => Ok(()),
    }
}

fn compile_path(fault: &Fault) -> Result<Option<Regex>, FaultError> {
    match &fault.when().path {
        Some(p) => Ok(Some(Regex::new(p).map_err(|source| {
            FaultError::BadPath {
                pattern: p.clone(),
                source,
            }
        })?)),
        None => Ok(None),
    }
}

/// Why a rule was refused.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("fault rule path {pattern:?} is not a valid regex: {source}")]
    BadPath {
        pattern: String,
        source: regex::Error,
    },
    #[error("fault rule status {0} is not an error status (use 400..=599, or 0 with latency_ms)")]
    BadStatus(u16),
    #[error("fault rule does nothing: status is 0 and latency_ms is not set")]
    NoEffect,
    #[error("fault rule count is 0, so it would never fire")]
    ZeroCount,
    #[error("no fault rule with id {0}")]
    NotFound(u64),
    #[error("fault rule probability {0} is not a number in 0..=1")]
    BadProbability(f64),
    #[error("fault rule of kind {kind:?} cannot have {field}")]
    Unused {
        kind: FaultKind,
        field: &'static str,
    },
    #[error("fault rule of kind not_found_after_create needs window_ms or window_reads above 0")]
    NoWindow,
    #[error("fault rule {index}: {source}")]
    InList {
        index: usize,
        source: Box<FaultError>,
    },
}

/// A rule with its id and how often it fired, as listed: `{"id": N, ...the rule's JSON as
/// written, with the count left..., "fired": N}`.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultStatus {
    pub id: u64,
    /// The rule; its `when().count` is what is left.
    pub rule: Fault,
    /// Times fired so far.
    pub fired: u64,
    json: FaultJson,
}

impl FaultStatus {
    /// The rule as it was written (with the count left), as the listing shows it.
    pub fn json(&self) -> &FaultJson {
        &self.json
    }
}

impl Serialize for FaultStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Listed<'a> {
            id: u64,
            #[serde(flatten)]
            rule: &'a FaultJson,
            fired: u64,
        }
        Listed {
            id: self.id,
            rule: &self.json,
            fired: self.fired,
        }
        .serialize(serializer)
    }
}

/// What the cloud must do for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Delay (if any), then serve normally.
    Serve,
    /// Answer this error in the cloud's envelope.
    Error,
    /// Drop the connection without a response.
    Reset,
    /// Answer the cloud's "not found" for the resource.
    NotFound,
}

/// What fired for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiredFault {
    pub rule_id: u64,
    /// The error status (for `Error` and `NotFound`); `None` otherwise.
    pub status: Option<u16>,
    pub message: Option<String>,
    /// The delay (latency plus jitter), if any.
    pub latency: Option<Duration>,
    /// The cloud's error code, when the rule or a throttling preset names one.
    pub code: Option<String>,
    pub action: FaultAction,
}

/// A request as the engine sees it. `operation` and `resource` are the cloud's notions
/// (see the module docs); `None` when the cloud has none for this request.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub operation: Option<&'a str>,
    pub resource: Option<&'a str>,
}

/// A cloud's own throttling answer for a service: status, error code, default message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub status: u16,
    pub code: Option<&'static str>,
    pub message: &'static str,
}

impl Throttle {
    /// HTTP's own answer (429), used when a cloud names no preset (OpenStack services
    /// answer so, with `Retry-After`).
    pub const TOO_MANY_REQUESTS: Throttle = Throttle {
        status: 429,
        code: None,
        message: "Rate limit exceeded, retry later.",
    };
}

/// How a cloud throttles, by service name (each mock supplies its own).
pub type ThrottlePreset = fn(&str) -> Throttle;

fn default_throttle(_service: &str) -> Throttle {
    Throttle::TOO_MANY_REQUESTS
}

#[derive(Debug)]
struct Active {
    status: FaultStatus,
    path: Option<Regex>,
}

impl Active {
    fn matches(&self, cloud: Option<&str>, req: &RequestInfo<'_>) -> bool {
        let when = self.status.rule.when();
        fn same(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref().is_none_or(|w| got == Some(w))
        }
        fn same_ci(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref()
                .is_none_or(|w| got.is_some_and(|g| g.eq_ignore_ascii_case(w)))
        }
        same(&when.cloud, cloud)
            && same(&when.service, Some(req.service))
            && same_ci(&when.method, Some(req.method))
            && same_ci(&when.operation, req.operation)
            && same(&when.resource, req.resource)
            && self.path.as_ref().is_none_or(|re| re.is_match(req.path))
    }
}

#[derive(Debug, Clone, Copy)]
struct Created {
    at: Instant,
    reads: u32,
}

#[derive(Debug)]
struct Inner {
    cloud: Option<String>,
    next_id: u64,
    rules: Vec<Active>,
    seed: u64,
    rng: fastrand::Rng,
    created: HashMap<String, Created>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            cloud: None,
            next_id: 0,
            rules: Vec::new(),
            seed: 0,
            rng: fastrand::Rng::with_seed(0),
            created: HashMap::new(),
        }
    }
}

/// The shared rule set; clones share the same rules.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// An engine for one cloud (`"openstack"`, `"aws"`, `"vsphere"`): rules with a `cloud`
    /// matcher compare against it.
    pub fn for_cloud(cloud: &str) -> Self {
        let faults = Self::default();
        faults.lock().cloud = Some(cloud.to_string());
        faults
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a rule written by the test itself; returns its id.
    ///
    /// # Panics
    /// If the rule is invalid (see [`Faults::try_add`]); that is a bug in the calling
    /// test. Rules that come from outside the process go through `try_add`.
    pub fn add(&self, rule: impl IntoFault) -> u64 {
        match self.try_add(rule) {
            Ok(id) => id,
            Err(e) => panic!("invalid fault rule: {e}"),
        }
    }

    /// Checks and adds a rule; returns its id (ids start at 1 and are never reused).
    pub fn try_add(&self, rule: impl IntoFault) -> Result<u64, FaultError> {
        let (rule, json) = rule.into_fault()?;
        let path = compile_path(&rule)?;
        let mut inner = self.lock();
        Ok(push(&mut inner, rule, json, path))
    }

    /// Checks every rule first, then adds them all (or none); returns their ids.
    pub fn try_add_all<R: IntoFault>(&self, rules: Vec<R>) -> Result<Vec<u64>, FaultError> {
        let mut checked = Vec::with_capacity(rules.len());
        for (index, rule) in rules.into_iter().enumerate() {
            let in_list = |e| FaultError::InList {
                index,
                source: Box::new(e),
            };
            let (rule, json) = rule.into_fault().map_err(in_list)?;
            let path = compile_path(&rule).map_err(in_list)?;
            checked.push((rule, json, path));
        }
        let mut inner = self.lock();
        Ok(checked
            .into_iter()
            .map(|(rule, json, path)| push(&mut inner, rule, json, path))
            .collect())
    }

    /// The active rules, oldest first.
    pub fn list(&self) -> Vec<FaultStatus> {
        self.lock().rules.iter().map(|a| a.status.clone()).collect()
    }

    pub fn remove(&self, id: u64) -> Result<(), FaultError> {
        let mut inner = self.lock();
        let before = inner.rules.len();
        inner.rules.retain(|a| a.status.id != id);
        if inner.rules.len() == before {
            Err(FaultError::NotFound(id))
        } else {
            Ok(())
        }
    }

    /// Removes every rule and forgets recorded creations; the RNG restarts from the seed.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.rules.clear();
        inner.created.clear();
        inner.rng = fastrand::Rng::with_seed(inner.seed);
    }

    /// Reseeds the RNG behind `probability` and `jitter_ms`.
    pub fn set_seed(&self, seed: u64) {
        let mut inner = self.lock();
        inner.seed = seed;
        inner.rng = fastrand::Rng::with_seed(seed);
    }

    pub fn seed(&self) -> u64 {
        self.lock().seed
    }

    /// Whether a `not_found_after_create` rule exists, so the mock knows whether it has to
    /// report creations at all.
    pub fn wants_created(&self) -> bool {
        self.lock()
            .rules
            .iter()
            .any(|a| a.status.rule.kind() == FaultKind::NotFoundAfterCreate)
    }

    /// The mock created resource `id` just now.
    pub fn note_created(&self, id: &str) {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .created
            .retain(|_, c| now.saturating_duration_since(c.at) < CREATED_MEMORY);
        inner
            .created
            .insert(id.to_string(), Created { at: now, reads: 0 });
    }

    /// The older entry point: a request with no operation or resource.
    pub fn check(&self, service: &str, method: &str, path: &str) -> Option<FiredFault> {
        self.check_request(&RequestInfo {
            service,
            method,
            path,
            operation: None,
            resource: None,
        })
    }

    /// [`Faults::check_throttled`] with HTTP's own throttling answer.
    pub fn check_request(&self, req: &RequestInfo<'_>) -> Option<FiredFault> {
        self.check_throttled(req, default_throttle)
    }

    /// The first (oldest) matching rule that fires decides: its count goes down by one
    /// and a rule with nothing left is removed. `throttle` is the cloud's preset for
    /// `throttle` rules (each mock has its own, see [`crate::Gate::throttle`]).
    pub fn check_throttled(
        &self,
        req: &RequestInfo<'_>,
        throttle: ThrottlePreset,
    ) -> Option<FiredFault> {
        let now = Instant::now();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let cloud = inner.cloud.clone();
        let mut chosen = None;
        for (index, active) in inner.rules.iter().enumerate() {
            if !active.matches(cloud.as_deref(), req) {
                continue;
            }
            if let Fault::NotFoundAfterCreate {
                window_ms,
                window_reads,
                ..
            } = &active.status.rule
                && !in_window(*window_ms, *window_reads, &inner.created, req, now)
            {
                continue;
            }
            if let Some(p) = active.status.rule.when().probability
                && inner.rng.f64() >= p
            {
                continue;
            }
            chosen = Some(index);
            break;
        }
        let index = chosen?;
        let active = &mut inner.rules[index];
        active.status.fired += 1;
        let rule_id = active.status.id;
        let rule = &active.status.rule;
        let delay = *rule.delay();
        let latency = match (delay.latency_ms, delay.jitter_ms) {
            (None, None) => None,
            (base, jitter) => {
                let extra = jitter.map_or(0, |j| inner.rng.u64(0..=j));
                Some(Duration::from_millis(
                    base.unwrap_or(0).saturating_add(extra),
                ))
            }
        };
        let message = rule.message_text().map(str::to_string);
        let code = rule.code_text().map(str::to_string);
        let fired = match rule {
            Fault::Error { status, .. } => FiredFault {
                rule_id,
                status: Some(*status),
                message,
                latency,
                code,
                action: FaultAction::Error,
            },
            Fault::Throttle { status, .. } => {
                let preset = throttle(req.service);
                FiredFault {
                    rule_id,
                    status: Some(status.unwrap_or(preset.status)),
                    message: message.or_else(|| Some(preset.message.to_string())),
                    latency,
                    code: code.or(preset.code.map(str::to_string)),
                    action: FaultAction::Error,
                }
            }
            Fault::Latency { .. } => FiredFault {
                rule_id,
                status: None,
                message,
                latency,
                code: None,
                action: FaultAction::Serve,
            },
            Fault::Reset { .. } => FiredFault {
                rule_id,
                status: None,
                message,
                latency,
                code: None,
                action: FaultAction::Reset,
            },
            Fault::NotFoundAfterCreate { .. } => {
                if let Some(c) = req.resource.and_then(|r| inner.created.get_mut(r)) {
                    c.reads += 1;
                }
                FiredFault {
                    rule_id,
                    status: Some(404),
                    message,
                    latency,
                    code,
                    action: FaultAction::NotFound,
                }
            }
        };
        let active = &mut inner.rules[index];
        if let Some(left) = active.status.rule.when_mut().count.as_mut() {
            *left = left.saturating_sub(1);
            let left = *left;
            active.status.json.count = Some(left);
            if left == 0 {
                inner.rules.remove(index);
            }
        }
        Some(fired)
    }
}

fn push(inner: &mut Inner, rule: Fault, json: FaultJson, path: Option<Regex>) -> u64 {
    inner.next_id += 1;
    let id = inner.next_id;
    inner.rules.push(Active {
        status: FaultStatus {
            id,
            rule,
            fired: 0,
            json,
        },
        path,
    });
    id
}

/// Whether `req` reads a resource still inside the rule's not-found window.
fn in_window(
    window_ms: Option<u64>,
    window_reads: Option<u32>,
    created: &HashMap<String, Created>,
    req: &RequestInfo<'_>,
    now: Instant,
) -> bool {
    if !req.method.eq_ignore_ascii_case("GET") {
        return false;
    }
    let Some(c) = req.resource.and_then(|r| created.get(r)) else {
        return false;
    };
    let by_time =
        window_ms.is_none_or(|ms| now.saturating_duration_since(c.at) < Duration::from_millis(ms));
    let by_reads = window_reads.is_none_or(|n| c.reads < n);
    by_time && by_reads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, status: u16, count: Option<u32>) -> FaultJson {
        FaultJson {
            path: Some(path.into()),
            status,
            count,
            ..Default::default()
        }
    }

    fn get<'a>(path: &'a str, resource: Option<&'a str>) -> RequestInfo<'a> {
        RequestInfo {
            service: "compute",
            method: "GET",
            path,
            operation: Some("GET servers"),
            resource,
        }
    }

    #[test]
    fn fires_exactly_count_times_then_disappears() {
        let f = Faults::new();
        let id = f.add(rule("/servers/", 503, Some(2)));
        assert_eq!(
            f.check("compute", "GET", "/compute/v2.1/servers/abc")
                .map(|x| x.rule_id),
            Some(id)
        );
        assert_eq!(f.list()[0].fired, 1);
        assert_eq!(f.list()[0].rule.when().count, Some(1));
        assert!(
            f.check("compute", "GET", "/compute/v2.1/servers/abc")
                .is_some()
        );
        assert!(
            f.check("compute", "GET", "/compute/v2.1/servers/abc")
                .is_none()
        );
        assert!(f.list().is_empty());
    }

    #[test]
    fn matchers_filter_service_method_and_path() {
        let f = Faults::new();
        f.add(FaultJson {
            service: Some("network".into()),
            method: Some("get".into()),
            path: Some("/ports$".into()),
            status: 500,
            message: Some("boom".into()),
            ..Default::default()
        });
        assert!(f.check("compute", "GET", "/network/v2.0/ports").is_none());
        assert!(f.check("network", "POST", "/network/v2.0/ports").is_none());
        assert!(f.check("network", "GET", "/network/v2.0/ports/1").is_none());
        let hit = f.check("network", "GET", "/network/v2.0/ports");
        assert_eq!(
            hit.map(|h| (h.status, h.message, h.action)),
            Some((Some(500), Some("boom".into()), FaultAction::Error))
        );
    }

    #[test]
    fn cloud_operation_and_resource_matchers() {
        let f = Faults::for_cloud("openstack");
        f.add(FaultJson {
            cloud: Some("aws".into()),
            status: 500,
            ..Default::default()
        });
        f.add(FaultJson {
            cloud: Some("openstack".into()),
            operation: Some("get SERVERS".into()),
            resource: Some("abc".into()),
            status: 502,
            ..Default::default()
        });
        assert!(f.check_request(&get("/servers/def", Some("def"))).is_none());
        assert!(f.check("compute", "GET", "/servers/abc").is_none());
        let hit = f.check_request(&get("/servers/abc", Some("abc")));
        assert_eq!(hit.and_then(|h| h.status), Some(502));
    }

    #[test]
    fn latency_only_rule_has_no_status() {
        let f = Faults::new();
        f.add(FaultJson {
            latency_ms: Some(5),
            ..Default::default()
        });
        let hit = f.check("compute", "GET", "/x");
        assert_eq!(
            hit.map(|h| (h.status, h.latency, h.action)),
            Some((None, Some(Duration::from_millis(5)), FaultAction::Serve))
        );
    }

    #[test]
    fn jitter_stays_in_range_and_is_deterministic_under_a_seed() {
        let run = |seed: u64| {
            let f = Faults::new();
            f.set_seed(seed);
            f.add(FaultJson {
                latency_ms: Some(10),
                jitter_ms: Some(20),
                ..Default::default()
            });
            (0..50)
                .map(|_| {
                    f.check("compute", "GET", "/x")
                        .and_then(|h| h.latency)
                        .map(|d| d.as_millis())
                        .unwrap_or(0)
                })
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert!(a.iter().all(|ms| (10..=30).contains(ms)), "{a:?}");
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
    }

    #[test]
    fn probability_is_seeded_and_roughly_right() {
        let run = |seed: u64| {
            let f = Faults::new();
            f.set_seed(seed);
            f.add(FaultJson {
                status: 500,
                probability: Some(0.3),
                ..Default::default()
            });
            (0..1000)
                .map(|_| f.check("compute", "GET", "/x").is_some())
                .collect::<Vec<_>>()
        };
        let a = run(1);
        let fired = a.iter().filter(|x| **x).count();
        assert!((200..400).contains(&fired), "{fired}");
        assert_eq!(a, run(1));
        assert_ne!(a, run(2));
    }

    #[test]
    fn a_rule_that_rolls_no_lets_the_next_one_fire() {
        let f = Faults::new();
        f.add(FaultJson {
            status: 500,
            probability: Some(0.0),
            ..Default::default()
        });
        let second = f.add(rule("x", 503, None));
        assert_eq!(
            f.check("compute", "GET", "/x").map(|h| h.rule_id),
            Some(second)
        );
        assert_eq!(f.list()[0].fired, 0);
    }

    #[test]
    fn throttle_answers_follow_the_mocks_preset() {
        fn preset(service: &str) -> Throttle {
            match service {
                "ec2" => Throttle {
                    status: 503,
                    code: Some("RequestLimitExceeded"),
                    message: "Request limit exceeded.",
                },
                _ => Throttle::TOO_MANY_REQUESTS,
            }
        }
        let f = Faults::new();
        f.add(Fault::throttle());
        let req = |service| RequestInfo {
            service,
            method: "POST",
            path: "/",
            operation: None,
            resource: None,
        };
        let ec2 = f.check_throttled(&req("ec2"), preset).expect("ec2");
        assert_eq!(
            (ec2.status, ec2.code.as_deref(), ec2.message.as_deref()),
            (
                Some(503),
                Some("RequestLimitExceeded"),
                Some("Request limit exceeded.")
            )
        );
        let os = f.check_throttled(&req("compute"), preset).expect("os");
        assert_eq!((os.status, os.code), (Some(429), None));
        // Without a preset: HTTP's 429; the rule's own status, code and message win.
        let plain = Faults::new();
        plain.add(Fault::throttle().code("SlowDown").message("later"));
        let hit = plain.check("sdk", "POST", "/sdk").expect("fires");
        assert_eq!(
            (hit.status, hit.code.as_deref(), hit.message.as_deref()),
            (Some(429), Some("SlowDown"), Some("later"))
        );
        let own = Faults::new();
        own.add(FaultJson {
            kind: Some(FaultKind::Throttle),
            status: 500,
            ..Default::default()
        });
        assert_eq!(
            own.check_throttled(&req("ec2"), preset)
                .and_then(|h| h.status),
            Some(500)
        );
    }

    #[test]
    fn listing_shows_the_rule_as_written_with_the_count_left() {
        let f = Faults::new();
        let written = r#"{"kind":"error","status":503,"count":2,"message":null}"#;
        let json: FaultJson = serde_json::from_str(written).expect("parse");
        f.add(json);
        f.add(Fault::latency(5).service("compute"));
        f.check("x", "GET", "/");
        let listed = serde_json::to_value(f.list()).expect("json");
        assert_eq!(
            listed,
            serde_json::json!([
                {"id": 1, "service": null, "method": null, "path": null, "count": 1,
                 "kind": "error", "status": 503, "message": null, "latency_ms": null, "fired": 1},
                {"id": 2, "service": "compute", "method": null, "path": null, "count": null,
                 "status": 0, "message": null, "latency_ms": 5, "fired": 0},
            ])
        );
    }

    #[test]
    fn constructors_round_trip_through_json() {
        let rules = [
            Fault::error(503)
                .service("compute")
                .method("GET")
                .path("/servers/")
                .message("m")
                .count(Some(2)),
            Fault::throttle()
                .operation("DescribeVpcs")
                .resource("vpc-1")
                .probability(0.5),
            Fault::latency(10).jitter_ms(5).cloud("aws"),
            Fault::reset().after_ms(3),
            Fault::not_found_after_create(None, Some(2)).code("NotFound"),
        ];
        for rule in rules {
            let json = serde_json::to_string(&rule).expect("json");
            let back: Fault = serde_json::from_str(&json).expect("parse");
            assert_eq!(back, rule, "{json}");
        }
        assert!(serde_json::from_str::<Fault>(r#"{"status":200}"#).is_err());
    }

    #[test]
    fn reset_rule_asks_for_a_dropped_connection() {
        let f = Faults::new();
        f.add(FaultJson {
            kind: Some(FaultKind::Reset),
            count: Some(1),
            ..Default::default()
        });
        let hit = f.check("compute", "GET", "/x").expect("fires");
        assert_eq!((hit.action, hit.status), (FaultAction::Reset, None));
        assert!(f.check("compute", "GET", "/x").is_none());
    }

    #[test]
    fn not_found_window_by_reads_covers_only_new_resources_and_gets() {
        let f = Faults::new();
        f.add(FaultJson {
            kind: Some(FaultKind::NotFoundAfterCreate),
            window_reads: Some(2),
            ..Default::default()
        });
        assert!(f.wants_created());
        f.note_created("new");
        assert!(f.check_request(&get("/servers/old", Some("old"))).is_none());
        let post = RequestInfo {
            method: "PUT",
            ..get("/servers/new", Some("new"))
        };
        assert!(f.check_request(&post).is_none());
        for _ in 0..2 {
            let hit = f.check_request(&get("/servers/new", Some("new")));
            assert_eq!(
                hit.map(|h| (h.action, h.status)),
                Some((FaultAction::NotFound, Some(404)))
            );
        }
        assert!(f.check_request(&get("/servers/new", Some("new"))).is_none());
    }

    #[test]
    fn not_found_window_by_time_ends() {
        let f = Faults::new();
        f.add(FaultJson {
            kind: Some(FaultKind::NotFoundAfterCreate),
            window_ms: Some(30),
            ..Default::default()
        });
        f.note_created("new");
        assert!(f.check_request(&get("/servers/new", Some("new"))).is_some());
        let deadline = Instant::now() + Duration::from_secs(5);
        while f.check_request(&get("/servers/new", Some("new"))).is_some() {
            assert!(Instant::now() < deadline, "window never closed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn invalid_rules_are_refused() {
        let f = Faults::new();
        assert!(matches!(
            f.try_add(rule("(", 500, None)),
            Err(FaultError::BadPath { .. })
        ));
        assert!(matches!(
            f.try_add(rule("x", 200, None)),
            Err(FaultError::BadStatus(200))
        ));
        assert!(matches!(
            f.try_add(rule("x", 0, None)),
            Err(FaultError::NoEffect)
        ));
        assert!(matches!(
            f.try_add(rule("x", 500, Some(0))),
            Err(FaultError::ZeroCount)
        ));
        let bad = [
            FaultJson {
                status: 500,
                probability: Some(1.5),
                ..Default::default()
            },
            FaultJson {
                status: 500,
                probability: Some(f64::NAN),
                ..Default::default()
            },
            FaultJson {
                kind: Some(FaultKind::Reset),
                status: 500,
                ..Default::default()
            },
            FaultJson {
                kind: Some(FaultKind::NotFoundAfterCreate),
                ..Default::default()
            },
            FaultJson {
                status: 500,
                window_ms: Some(5),
                ..Default::default()
            },
            FaultJson {
                kind: Some(FaultKind::Throttle),
                status: 302,
                ..Default::default()
            },
            FaultJson {
                kind: Some(FaultKind::Error),
                ..Default::default()
            },
        ];
        for b in bad {
            assert!(f.try_add(b.clone()).is_err(), "{b:?}");
        }
        assert!(f.list().is_empty());
    }

    #[test]
    fn add_all_is_all_or_nothing() {
        let f = Faults::new();
        let good = FaultJson {
            status: 500,
            ..Default::default()
        };
        let bad = FaultJson {
            status: 200,
            ..Default::default()
        };
        let err = f.try_add_all(vec![good.clone(), bad]);
        assert!(matches!(err, Err(FaultError::InList { index: 1, .. })));
        assert!(f.list().is_empty());
        assert_eq!(
            f.try_add_all(vec![good.clone(), good])
                .map(|v| v.len())
                .ok(),
            Some(2)
        );
    }

    #[test]
    fn remove_and_clear() {
        let f = Faults::new();
        let a = f.add(rule("a", 500, None));
        let b = f.add(rule("b", 500, None));
        assert!(a < b);
        assert!(f.remove(a).is_ok());
        assert!(matches!(f.remove(a), Err(FaultError::NotFound(_))));
        assert_eq!(f.list().len(), 1);
        f.clear();
        assert!(f.list().is_empty());
    }

    #[test]
    fn oldest_matching_rule_wins() {
        let f = Faults::new();
        let first = f.add(rule("servers", 500, None));
        f.add(rule("servers", 404, None));
        assert_eq!(
            f.check("compute", "GET", "/servers").map(|h| h.rule_id),
            Some(first)
        );
    }

    #[test]
    fn old_rule_json_still_parses_as_a_fault() {
        let f: Fault =
            serde_json::from_str(r#"{"service":"compute","status":503,"count":1}"#).expect("parse");
        assert_eq!(f.kind(), FaultKind::Error);
        let f: Fault =
            serde_json::from_str(r#"{"kind":"not_found_after_create","window_reads":1}"#)
                .expect("parse");
        assert_eq!(f.kind(), FaultKind::NotFoundAfterCreate);
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"explode"}"#).is_err());
    }
}
