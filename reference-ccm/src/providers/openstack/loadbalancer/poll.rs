//! How long to wait for Octavia to finish a change: [`PollSchedule`].
//!
//! Exists apart from the load balancer's calls because the provider itself holds the
//! schedule (read from the environment when it is built, overridden by tests), so the
//! provider's `mod.rs` imports it from here and not from the load balancer file, which
//! imports the provider.

use std::time::Duration;

/// When to poll a pending load balancer: at once (upstream's `wait.ExponentialBackoff`
/// checks its condition before the first sleep, so with an Octavia that is already ACTIVE
/// no time is lost), one fast poll, then upstream's backoff (`OCCM_WAIT_LB_ACTIVE_STEPS`
/// steps from `OCCM_WAIT_LB_ACTIVE_INITIAL_DELAY_MS`, x1.2;
/// cloud-provider-openstack `pkg/util/openstack/loadbalancer.go` `WaitActiveAndGetLoadBalancer`).
#[derive(Debug, Clone, PartialEq)]
pub struct PollSchedule {
    pub first: Duration,
    pub initial: Duration,
    pub factor: f64,
    pub steps: u32,
}

impl Default for PollSchedule {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(50),
            initial: Duration::from_secs(1),
            factor: 1.2,
            steps: 23,
        }
    }
}

impl PollSchedule {
    /// Defaults overridden by `OCCM_WAIT_LB_ACTIVE_STEPS` (upstream's knob) and
    /// `OCCM_WAIT_LB_ACTIVE_INITIAL_DELAY_MS` (ours; tests use a short one).
    pub fn from_env() -> Self {
        let mut s = Self::default();
        if let Some(steps) = env_number("OCCM_WAIT_LB_ACTIVE_STEPS") {
            s.steps = u32::try_from(steps).unwrap_or(s.steps);
        }
        if let Some(ms) = env_number("OCCM_WAIT_LB_ACTIVE_INITIAL_DELAY_MS") {
            s.initial = Duration::from_millis(ms);
            s.first = s.first.min(s.initial);
        }
        s
    }

    /// The sleeps before each poll; the first is zero (check before sleeping).
    pub fn delays(&self) -> Vec<Duration> {
        let mut out = vec![Duration::ZERO, self.first];
        let mut d = self.initial.as_secs_f64();
        for _ in 0..self.steps {
            out.push(Duration::from_secs_f64(d));
            d *= self.factor;
        }
        out
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_schedule_checks_at_once_then_fast_then_upstream() {
        let d = PollSchedule::default().delays();
        assert_eq!(d.len(), 25);
        assert_eq!(d[0], Duration::ZERO);
        assert_eq!(d[1], Duration::from_millis(50));
        assert_eq!(d[2], Duration::from_secs(1));
        assert!(d[3] > Duration::from_millis(1199) && d[3] < Duration::from_millis(1201));
    }
}
