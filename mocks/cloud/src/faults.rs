//! The fault engine: rules that make a mock answer an error (or answer late) for matching
//! requests, so cases can test how a CCM copes with a failing cloud. The engine only
//! decides *whether* and *what*; each cloud renders the error in its own envelope.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// A rule as clients write it. `None` matchers match anything.
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
}

/// A rule with its id and how often it fired, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FaultStatus {
    pub id: u64,
    #[serde(flatten)]
    pub rule: FaultRule,
    /// Times fired so far. `rule.count` is what is left.
    pub fired: u64,
}

/// What the cloud must do for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiredFault {
    pub rule_id: u64,
    /// `None` for a latency-only rule: delay, then serve normally.
    pub status: Option<u16>,
    pub message: Option<String>,
    pub latency: Option<Duration>,
}

#[derive(Debug)]
struct Active {
    status: FaultStatus,
    path: Option<Regex>,
}

impl Active {
    fn matches(&self, service: &str, method: &str, path: &str) -> bool {
        let rule = &self.status.rule;
        rule.service.as_deref().is_none_or(|s| s == service)
            && rule
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self.path.as_ref().is_none_or(|re| re.is_match(path))
    }
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    rules: Vec<Active>,
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
    pub fn add(&self, rule: FaultRule) -> u64 {
        match self.try_add(rule) {
            Ok(id) => id,
            Err(e) => panic!("invalid fault rule: {e}"),
        }
    }

    /// Validates and adds a rule; returns its id (ids start at 1 and are never reused).
    pub fn try_add(&self, rule: FaultRule) -> Result<u64, FaultError> {
        if rule.status != 0 && !(400..=599).contains(&rule.status) {
            return Err(FaultError::BadStatus(rule.status));
        }
        if rule.status == 0 && rule.latency_ms.is_none() {
            return Err(FaultError::NoEffect);
        }
        if rule.count == Some(0) {
            return Err(FaultError::ZeroCount);
        }
        let path = match &rule.path {
            Some(p) => Some(Regex::new(p).map_err(|source| FaultError::BadPath {
                pattern: p.clone(),
                source,
            })?),
            None => None,
        };
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.rules.push(Active {
            status: FaultStatus { id, rule, fired: 0 },
            path,
        });
        Ok(id)
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

    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// The first (oldest) rule matching the request fires: its count goes down by one and
    /// a rule with nothing left is removed.
    pub fn check(&self, service: &str, method: &str, path: &str) -> Option<FiredFault> {
        let mut inner = self.lock();
        let index = inner
            .rules
            .iter()
            .position(|a| a.matches(service, method, path))?;
        let active = &mut inner.rules[index];
        active.status.fired += 1;
        let rule = &mut active.status.rule;
        let fired = FiredFault {
            rule_id: active.status.id,
            status: (rule.status != 0).then_some(rule.status),
            message: rule.message.clone(),
            latency: rule.latency_ms.map(Duration::from_millis),
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
            hit.map(|h| (h.status, h.message)),
            Some((Some(500), Some("boom".into())))
        );
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
            hit.map(|h| (h.status, h.latency)),
            Some((None, Some(Duration::from_millis(5))))
        );
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
        assert!(f.list().is_empty());
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
}
