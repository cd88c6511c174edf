//! Fault rules as written and checked: the JSON form ([`FaultJson`], flat, what the admin
//! API, seed files and listings speak), the typed form ([`Fault`]: one variant per kind,
//! with the shared [`Matcher`] and [`Delay`], builders for one-line rules in Rust), the
//! conversions between them and the checks that refuse a rule that could never fire or
//! means nothing ([`FaultError`]). Kept apart from the engine that applies rules
//! (`engine`), which only ever holds rules that passed these checks.

use regex::Regex;
use serde::{Deserialize, Serialize};

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
/// checked. [`Faults::try_add`](super::Faults::try_add) and `Fault::try_from` check it.
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

    /// Matches only this cloud's engine ([`Faults::for_cloud`](super::Faults::for_cloud)).
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

/// What [`Faults::try_add`](super::Faults::try_add) takes: a [`Fault`] or its JSON.
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

pub(super) fn compile_path(fault: &Fault) -> Result<Option<Regex>, FaultError> {
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
