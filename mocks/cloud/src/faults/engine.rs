//! The fault engine proper: the shared, seeded rule set ([`Faults`]) that decides for
//! each request whether a rule fires and what the cloud must do ([`FiredFault`],
//! [`FaultAction`]), with throttling presets ([`Throttle`]), the `not_found_after_create`
//! memory of what was just created, and the listing of rules ([`FaultStatus`]). Rules
//! reach it already checked (`rule`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::Serialize;

use super::rule::{Fault, FaultError, FaultJson, FaultKind, IntoFault, compile_path};

/// How long a creation is remembered for `not_found_after_create` at most.
const CREATED_MEMORY: Duration = Duration::from_secs(600);

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
