//! The fault engine: rules that make a mock misbehave on purpose for matching requests —
//! answer an error, throttle, answer late, drop the connection, or pretend a resource it
//! just created does not exist yet — so cases can test how a CCM copes with a real cloud's
//! failure modes. The engine only decides *whether* and *what*; each cloud renders the
//! answer in its own error envelope.
//!
//! # Rules
//!
//! A rule ([`Fault`], JSON on `POST <admin>/faults` or in a seed file's `faults`) has
//! matchers (all optional; an absent one matches anything) and an effect:
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
//!   - `throttle`: the cloud's own throttling answer ([`throttle_preset`]: EC2
//!     `RequestLimitExceeded` 503, ELB `Throttling` 400, OpenStack 429 + `Retry-After`,
//!     vSphere `NotAuthenticated`); `status`/`code`/`message` override the preset;
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
//! The older, smaller [`FaultRule`] (service, method, path, status, message, count,
//! latency) is still accepted everywhere a [`Fault`] is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How long a creation is remembered for `not_found_after_create` at most.
const CREATED_MEMORY: Duration = Duration::from_secs(600);

/// The original rule shape, kept so existing callers compile; converts into a [`Fault`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// The mock's service name (`"compute"`, `"network"`, ...), compared exactly.
    #[serde(default)]
    pub service: Option<String>,
    /// HTTP method, compared case-insensitively.
    #[serde(default)]
    pub method: Option<String>,
    /// A regex searched (unanchored) in the full request path, without the query.
    #[serde(default)]
    pub path: Option<String>,
    /// The error status to answer (400..=599). 0 means "no error": a latency-only rule.
    #[serde(default)]
    pub status: u16,
    /// Text for the error envelope; the cloud picks a default when `None`.
    #[serde(default)]
    pub message: Option<String>,
    /// How many times the rule fires before it is removed; `None` = until removed.
    #[serde(default)]
    pub count: Option<u32>,
    /// Delay before answering (the error, or the normal answer for a latency-only rule).
    #[serde(default)]
    pub latency_ms: Option<u64>,
}

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Error,
    Throttle,
    Latency,
    Reset,
    NotFoundAfterCreate,
}

/// A fault rule (see the module docs for the JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
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

impl From<FaultRule> for Fault {
    fn from(r: FaultRule) -> Self {
        Fault {
            service: r.service,
            method: r.method,
            path: r.path,
            status: r.status,
            message: r.message,
            count: r.count,
            latency_ms: r.latency_ms,
            ..Default::default()
        }
    }
}

impl Fault {
    /// The kind, with the default applied (`error` when a status is set, else `latency`).
    pub fn effective_kind(&self) -> FaultKind {
        self.kind.unwrap_or(if self.status != 0 {
            FaultKind::Error
        } else {
            FaultKind::Latency
        })
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

/// A rule with its id and how often it fired, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultStatus {
    pub id: u64,
    #[serde(flatten)]
    pub rule: Fault,
    /// Times fired so far. `rule.count` is what is left.
    pub fired: u64,
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

/// A cloud's own throttling answer: `(status, code, message)`, by cloud name when known,
/// else by service name. Sources: EC2 `RequestLimitExceeded` is a 503
/// (docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html); ELB `Throttling`
/// a 400 (aws-sdk-go-v2 `aws/retry/throttle_error.go` codes); OpenStack services answer
/// 429 with `Retry-After`; vSphere answers an expired or throttled session with the
/// `NotAuthenticated` SOAP fault (HTTP 500).
pub fn throttle_preset(
    cloud: Option<&str>,
    service: &str,
) -> (u16, Option<&'static str>, &'static str) {
    match (cloud, service) {
        (Some("vsphere"), _) => (
            500,
            Some("NotAuthenticated"),
            "The session is not authenticated.",
        ),
        (_, "ec2") => (503, Some("RequestLimitExceeded"), "Request limit exceeded."),
        (_, "elb" | "elbv2") => (400, Some("Throttling"), "Rate exceeded"),
        _ => (429, None, "Rate limit exceeded, retry later."),
    }
}

#[derive(Debug)]
struct Active {
    status: FaultStatus,
    kind: FaultKind,
    path: Option<Regex>,
}

impl Active {
    fn matches(&self, cloud: Option<&str>, req: &RequestInfo<'_>) -> bool {
        let rule = &self.status.rule;
        fn same(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref().is_none_or(|w| got == Some(w))
        }
        fn same_ci(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref()
                .is_none_or(|w| got.is_some_and(|g| g.eq_ignore_ascii_case(w)))
        }
        same(&rule.cloud, cloud)
            && same(&rule.service, Some(req.service))
            && same_ci(&rule.method, Some(req.method))
            && same_ci(&rule.operation, req.operation)
            && same(&rule.resource, req.resource)
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

fn validate(rule: &Fault) -> Result<(FaultKind, Option<Regex>), FaultError> {
    let kind = rule.effective_kind();
    if rule.count == Some(0) {
        return Err(FaultError::ZeroCount);
    }
    if let Some(p) = rule.probability
        && !(0.0..=1.0).contains(&p)
    {
        return Err(FaultError::BadProbability(p));
    }
    let error_status = rule.status == 0 || (400..=599).contains(&rule.status);
    match kind {
        FaultKind::Error if !(400..=599).contains(&rule.status) => {
            return Err(FaultError::BadStatus(rule.status));
        }
        FaultKind::Throttle if !error_status => return Err(FaultError::BadStatus(rule.status)),
        FaultKind::Latency | FaultKind::Reset | FaultKind::NotFoundAfterCreate
            if rule.status != 0 =>
        {
            return Err(FaultError::Unused {
                kind,
                field: "a status",
            });
        }
        FaultKind::Latency if rule.latency_ms.is_none() && rule.jitter_ms.is_none() => {
            return Err(FaultError::NoEffect);
        }
        FaultKind::NotFoundAfterCreate
            if rule.window_ms.unwrap_or(0) == 0 && rule.window_reads.unwrap_or(0) == 0 =>
        {
            return Err(FaultError::NoWindow);
        }
        _ => {}
    }
    if kind != FaultKind::NotFoundAfterCreate
        && (rule.window_ms.is_some() || rule.window_reads.is_some())
    {
        return Err(FaultError::Unused {
            kind,
            field: "window_ms/window_reads",
        });
    }
    let path = match &rule.path {
        Some(p) => Some(Regex::new(p).map_err(|source| FaultError::BadPath {
            pattern: p.clone(),
            source,
        })?),
        None => None,
    };
    Ok((kind, path))
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// An engine for one cloud (`"openstack"`, `"aws"`, `"vsphere"`): rules with a `cloud`
    /// matcher compare against it, and throttling presets follow it.
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
    pub fn add(&self, rule: impl Into<Fault>) -> u64 {
        match self.try_add(rule) {
            Ok(id) => id,
            Err(e) => panic!("invalid fault rule: {e}"),
        }
    }

    /// Validates and adds a rule; returns its id (ids start at 1 and are never reused).
    pub fn try_add(&self, rule: impl Into<Fault>) -> Result<u64, FaultError> {
        let rule = rule.into();
        let (kind, path) = validate(&rule)?;
        let mut inner = self.lock();
        Ok(push(&mut inner, rule, kind, path))
    }

    /// Validates every rule first, then adds them all (or none); returns their ids.
    pub fn try_add_all(&self, rules: Vec<Fault>) -> Result<Vec<u64>, FaultError> {
        let mut checked = Vec::with_capacity(rules.len());
        for (index, rule) in rules.into_iter().enumerate() {
            let (kind, path) = validate(&rule).map_err(|e| FaultError::InList {
                index,
                source: Box::new(e),
            })?;
            checked.push((rule, kind, path));
        }
        let mut inner = self.lock();
        Ok(checked
            .into_iter()
            .map(|(rule, kind, path)| push(&mut inner, rule, kind, path))
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
            .any(|a| a.kind == FaultKind::NotFoundAfterCreate)
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

    /// The first (oldest) matching rule that fires decides: its count goes down by one
    /// and a rule with nothing left is removed.
    pub fn check_request(&self, req: &RequestInfo<'_>) -> Option<FiredFault> {
        let now = Instant::now();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let cloud = inner.cloud.clone();
        let mut chosen = None;
        for (index, active) in inner.rules.iter().enumerate() {
            if !active.matches(cloud.as_deref(), req) {
                continue;
            }
            if active.kind == FaultKind::NotFoundAfterCreate
                && !in_window(&active.status.rule, &inner.created, req, now)
            {
                continue;
            }
            if let Some(p) = active.status.rule.probability
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
        let rule = &mut active.status.rule;
        let latency = match (rule.latency_ms, rule.jitter_ms) {
            (None, None) => None,
            (base, jitter) => {
                let extra = jitter.map_or(0, |j| inner.rng.u64(0..=j));
                Some(Duration::from_millis(
                    base.unwrap_or(0).saturating_add(extra),
                ))
            }
        };
        let message = rule.message.clone();
        let fired = match active.kind {
            FaultKind::Error => FiredFault {
                rule_id: active.status.id,
                status: Some(rule.status),
                message,
                latency,
                code: rule.code.clone(),
                action: FaultAction::Error,
            },
            FaultKind::Throttle => {
                let (status, code, default) = throttle_preset(cloud.as_deref(), req.service);
                FiredFault {
                    rule_id: active.status.id,
                    status: Some(if rule.status != 0 {
                        rule.status
                    } else {
                        status
                    }),
                    message: message.or_else(|| Some(default.to_string())),
                    latency,
                    code: rule.code.clone().or(code.map(str::to_string)),
                    action: FaultAction::Error,
                }
            }
            FaultKind::Latency => FiredFault {
                rule_id: active.status.id,
                status: None,
                message,
                latency,
                code: None,
                action: FaultAction::Serve,
            },
            FaultKind::Reset => FiredFault {
                rule_id: active.status.id,
                status: None,
                message,
                latency,
                code: None,
                action: FaultAction::Reset,
            },
            FaultKind::NotFoundAfterCreate => {
                if let Some(c) = req.resource.and_then(|r| inner.created.get_mut(r)) {
                    c.reads += 1;
                }
                FiredFault {
                    rule_id: active.status.id,
                    status: Some(404),
                    message,
                    latency,
                    code: rule.code.clone(),
                    action: FaultAction::NotFound,
                }
            }
        };
        if let Some(left) = rule.count.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                inner.rules.remove(index);
            }
        }
        Some(fired)
    }
}

fn push(inner: &mut Inner, rule: Fault, kind: FaultKind, path: Option<Regex>) -> u64 {
    inner.next_id += 1;
    let id = inner.next_id;
    inner.rules.push(Active {
        status: FaultStatus { id, rule, fired: 0 },
        kind,
        path,
    });
    id
}

/// Whether `req` reads a resource still inside the rule's not-found window.
fn in_window(
    rule: &Fault,
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
    let by_time = rule
        .window_ms
        .is_none_or(|ms| now.saturating_duration_since(c.at) < Duration::from_millis(ms));
    let by_reads = rule.window_reads.is_none_or(|n| c.reads < n);
    by_time && by_reads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, status: u16, count: Option<u32>) -> FaultRule {
        FaultRule {
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
        assert_eq!(f.list()[0].rule.count, Some(1));
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
        f.add(FaultRule {
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
        f.add(Fault {
            cloud: Some("aws".into()),
            status: 500,
            ..Default::default()
        });
        f.add(Fault {
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
        f.add(FaultRule {
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
            f.add(Fault {
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
            f.add(Fault {
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
        f.add(Fault {
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
    fn throttle_presets_follow_the_cloud() {
        let throttle = Fault {
            kind: Some(FaultKind::Throttle),
            ..Default::default()
        };
        let f = Faults::new();
        f.add(throttle.clone());
        let ec2 = f.check("ec2", "POST", "/DescribeInstances").expect("ec2");
        assert_eq!(
            (ec2.status, ec2.code.as_deref()),
            (Some(503), Some("RequestLimitExceeded"))
        );
        let elb = f.check("elbv2", "POST", "/x").expect("elb");
        assert_eq!(
            (elb.status, elb.code.as_deref()),
            (Some(400), Some("Throttling"))
        );
        let os = f.check("compute", "GET", "/x").expect("os");
        assert_eq!(os.status, Some(429));
        let v = Faults::for_cloud("vsphere");
        v.add(throttle);
        let vs = v.check("sdk", "POST", "/sdk").expect("vsphere");
        assert_eq!(vs.code.as_deref(), Some("NotAuthenticated"));
    }

    #[test]
    fn reset_rule_asks_for_a_dropped_connection() {
        let f = Faults::new();
        f.add(Fault {
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
        f.add(Fault {
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
        f.add(Fault {
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
            Fault {
                status: 500,
                probability: Some(1.5),
                ..Default::default()
            },
            Fault {
                status: 500,
                probability: Some(f64::NAN),
                ..Default::default()
            },
            Fault {
                kind: Some(FaultKind::Reset),
                status: 500,
                ..Default::default()
            },
            Fault {
                kind: Some(FaultKind::NotFoundAfterCreate),
                ..Default::default()
            },
            Fault {
                status: 500,
                window_ms: Some(5),
                ..Default::default()
            },
            Fault {
                kind: Some(FaultKind::Throttle),
                status: 302,
                ..Default::default()
            },
            Fault {
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
        let good = Fault {
            status: 500,
            ..Default::default()
        };
        let bad = Fault {
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
        assert_eq!(f.effective_kind(), FaultKind::Error);
        let f: Fault =
            serde_json::from_str(r#"{"kind":"not_found_after_create","window_reads":1}"#)
                .expect("parse");
        assert_eq!(f.effective_kind(), FaultKind::NotFoundAfterCreate);
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"explode"}"#).is_err());
    }
}
