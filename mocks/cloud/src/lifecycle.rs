//! Asynchronous resource state machines, shared by every cloud mock. Real clouds answer a
//! write at once and finish it later (Octavia `PENDING_* -> ACTIVE|ERROR`, ELBv2
//! `provisioning -> active`, EC2 `pending -> running`); CCMs poll, so how and when a
//! resource settles is what a case needs to control. A [`Lifecycle`] is one pending
//! transition, evaluated lazily when the resource is looked at; [`Policies`] pick the
//! [`Mode`] for a new transition by resource id, then by resource type, then a default.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How a pending transition ends. As JSON: `{"mode":"immediate"}`, `{"mode":"reads","n":3}`,
/// `{"mode":"seconds","t":1.5}`, `{"mode":"error"}`, `{"mode":"stuck"}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase", deny_unknown_fields)]
pub enum Mode {
    /// Done as soon as anyone looks (the write's own reply still shows it pending).
    Immediate,
    /// The first `n` reads see it pending; the next one sees it done.
    Reads { n: u32 },
    /// Done once `t` seconds have passed since the write.
    Seconds { t: f64 },
    /// Fails (the cloud's ERROR state) as soon as anyone looks.
    Error,
    /// Pending forever (until the mode is changed).
    Stuck,
}

/// Why a mode was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LifecycleError {
    #[error("lifecycle seconds {0} is not a finite, non-negative number of seconds")]
    BadSeconds(f64),
}

impl Mode {
    /// Checks values serde cannot (a usable duration).
    pub fn validate(self) -> Result<Mode, LifecycleError> {
        match self {
            Mode::Seconds { t } if Duration::try_from_secs_f64(t).is_err() => {
                Err(LifecycleError::BadSeconds(t))
            }
            other => Ok(other),
        }
    }
}

/// Where a transition stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Pending,
    Done,
    Failed,
}

/// One pending transition. Once it is done or failed it stays so, whatever the mode
/// becomes later.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    mode: Mode,
    started: Instant,
    reads: u32,
    settled: Option<Phase>,
}

impl Lifecycle {
    /// A transition that starts now.
    pub fn begin(mode: Mode) -> Self {
        Self::begin_at(mode, Instant::now())
    }

    pub fn begin_at(mode: Mode, started: Instant) -> Self {
        Self {
            mode,
            started,
            reads: 0,
            settled: None,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Changes how the transition ends (e.g. release a stuck one, or force an error);
    /// the reads counted and the start time are kept. No effect once settled.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// A client read the resource: counts for [`Mode::Reads`].
    pub fn read(&mut self) -> Phase {
        self.observe_at(Instant::now(), true)
    }

    /// Looks without counting a read (writes checking for a conflict, internal views).
    pub fn peek(&mut self) -> Phase {
        self.observe_at(Instant::now(), false)
    }

    /// Whether a look now would see it done, without counting a read or recording
    /// anything (for observers such as a data plane that hold the state immutably).
    pub fn is_done(&self) -> bool {
        self.clone().observe_at(Instant::now(), false) == Phase::Done
    }

    /// The phase at `now`; `count_read` says whether this look counts as a client read.
    pub fn observe_at(&mut self, now: Instant, count_read: bool) -> Phase {
        if let Some(phase) = self.settled {
            return phase;
        }
        let phase = match self.mode {
            Mode::Immediate => Phase::Done,
            Mode::Error => Phase::Failed,
            Mode::Stuck => Phase::Pending,
            Mode::Reads { n } => {
                if self.reads >= n {
                    Phase::Done
                } else {
                    if count_read {
                        self.reads += 1;
                    }
                    Phase::Pending
                }
            }
            Mode::Seconds { t } => {
                let wait = Duration::try_from_secs_f64(t).unwrap_or(Duration::ZERO);
                if now.saturating_duration_since(self.started) >= wait {
                    Phase::Done
                } else {
                    Phase::Pending
                }
            }
        };
        if phase != Phase::Pending {
            self.settled = Some(phase);
        }
        phase
    }
}

/// Which mode a new transition gets: by resource id, else by the first resource type
/// given that has a mode, else the default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policies {
    pub default: Mode,
    pub by_type: BTreeMap<String, Mode>,
    pub by_id: BTreeMap<String, Mode>,
}

impl Default for Policies {
    fn default() -> Self {
        Self::new(Mode::Immediate)
    }
}

impl Policies {
    pub fn new(default: Mode) -> Self {
        Self {
            default,
            by_type: BTreeMap::new(),
            by_id: BTreeMap::new(),
        }
    }

    /// The mode for a transition of resource `id`; `types` from most to least specific
    /// (e.g. `["member", "loadbalancer"]` for a member change that moves its LB).
    pub fn mode_for(&self, types: &[&str], id: &str) -> Mode {
        if let Some(mode) = self.by_id.get(id) {
            return *mode;
        }
        types
            .iter()
            .find_map(|t| self.by_type.get(*t).copied())
            .unwrap_or(self.default)
    }

    /// The id override alone, if any.
    pub fn for_id(&self, id: &str) -> Option<Mode> {
        self.by_id.get(id).copied()
    }

    /// Removes every override and sets the default back to `default`.
    pub fn clear(&mut self, default: Mode) {
        *self = Self::new(default);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediate_and_error_settle_on_first_look_and_latch() {
        let mut l = Lifecycle::begin(Mode::Immediate);
        assert_eq!(l.peek(), Phase::Done);
        l.set_mode(Mode::Stuck);
        assert_eq!(l.read(), Phase::Done);
        let mut e = Lifecycle::begin(Mode::Error);
        assert_eq!(e.read(), Phase::Failed);
        e.set_mode(Mode::Immediate);
        assert_eq!(e.read(), Phase::Failed);
    }

    #[test]
    fn reads_counts_only_reads() {
        let mut l = Lifecycle::begin(Mode::Reads { n: 2 });
        assert_eq!(l.peek(), Phase::Pending);
        assert_eq!(l.peek(), Phase::Pending);
        assert_eq!(l.read(), Phase::Pending);
        assert_eq!(l.read(), Phase::Pending);
        assert_eq!(l.read(), Phase::Done);
        assert_eq!(Lifecycle::begin(Mode::Reads { n: 0 }).read(), Phase::Done);
    }

    #[test]
    fn seconds_settles_after_the_duration() {
        let start = Instant::now();
        let mut l = Lifecycle::begin_at(Mode::Seconds { t: 2.0 }, start);
        assert_eq!(l.observe_at(start, true), Phase::Pending);
        assert_eq!(
            l.observe_at(start + Duration::from_millis(1999), true),
            Phase::Pending
        );
        assert_eq!(
            l.observe_at(start + Duration::from_secs(2), false),
            Phase::Done
        );
    }

    #[test]
    fn is_done_looks_without_counting() {
        let l = Lifecycle::begin(Mode::Reads { n: 1 });
        assert!(!l.is_done());
        assert!(!l.is_done());
        let mut l = l;
        assert_eq!(l.read(), Phase::Pending);
        assert!(l.is_done());
        assert!(Lifecycle::begin(Mode::Immediate).is_done());
        assert!(!Lifecycle::begin(Mode::Error).is_done());
        assert!(!Lifecycle::begin(Mode::Stuck).is_done());
    }

    #[test]
    fn stuck_stays_pending_until_released() {
        let mut l = Lifecycle::begin(Mode::Stuck);
        for _ in 0..10 {
            assert_eq!(l.read(), Phase::Pending);
        }
        l.set_mode(Mode::Reads { n: 3 });
        // Reads made while stuck did not count (stuck does not count them).
        assert_eq!(l.read(), Phase::Pending);
        l.set_mode(Mode::Error);
        assert_eq!(l.peek(), Phase::Failed);
    }

    #[test]
    fn policies_prefer_id_then_type_then_default() {
        let mut p = Policies::default();
        p.by_type
            .insert("loadbalancer".into(), Mode::Reads { n: 1 });
        p.by_type.insert("member".into(), Mode::Stuck);
        p.by_id.insert("lb-1".into(), Mode::Error);
        assert_eq!(p.mode_for(&["loadbalancer"], "lb-1"), Mode::Error);
        assert_eq!(p.mode_for(&["loadbalancer"], "lb-2"), Mode::Reads { n: 1 });
        assert_eq!(p.mode_for(&["member", "loadbalancer"], "lb-2"), Mode::Stuck);
        assert_eq!(p.mode_for(&["pool"], "lb-2"), Mode::Immediate);
        assert_eq!(p.for_id("lb-1"), Some(Mode::Error));
        p.clear(Mode::Stuck);
        assert_eq!(p.mode_for(&["loadbalancer"], "lb-1"), Mode::Stuck);
    }

    #[test]
    fn modes_parse_from_json_and_validate() {
        let m: Mode = serde_json::from_str(r#"{"mode":"reads","n":3}"#).expect("reads");
        assert_eq!(m, Mode::Reads { n: 3 });
        let m: Mode = serde_json::from_str(r#"{"mode":"seconds","t":0.5}"#).expect("secs");
        assert_eq!(m.validate(), Ok(Mode::Seconds { t: 0.5 }));
        let m: Mode = serde_json::from_str(r#"{"mode":"seconds","t":-1}"#).expect("neg");
        assert_eq!(m.validate(), Err(LifecycleError::BadSeconds(-1.0)));
        assert!(serde_json::from_str::<Mode>(r#"{"mode":"sometimes"}"#).is_err());
        assert_eq!(
            serde_json::to_value(Mode::Immediate).expect("ser"),
            serde_json::json!({"mode": "immediate"})
        );
    }
}
