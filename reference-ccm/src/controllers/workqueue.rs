//! A small rate-limited work queue, like client-go's `workqueue`.
//!
//! Exists because the service controller needs what kube-runtime's `Controller` does not
//! give: the previous object on updates (for `needsUpdate`), a retry after a fixed delay
//! (`api.RetryError`), and a per-key exponential backoff with its own base and cap
//! (5 s doubling to 300 s, cloud-provider `controllers/service/controller.go`). A key is
//! never handed to two workers at once; adding a key that is being processed re-queues it
//! when the worker calls [`WorkQueue::done`] (client-go's dirty/processing sets).
//!
//! TEST ONLY: a queue made with `retry_without_backoff` (`--testing-break=retry-without-backoff`)
//! requeues failed keys at once, a hot loop against the cloud the Chaos suite must catch.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<String>,
    dirty: HashSet<String>,
    processing: HashSet<String>,
    failures: HashMap<String, u32>,
}

/// Deduplicating FIFO of keys with per-key exponential backoff.
#[derive(Debug)]
pub struct WorkQueue {
    state: Mutex<State>,
    notify: Notify,
    base_delay: Duration,
    max_delay: Duration,
    /// `name` label of the `workqueue_*` metrics; empty = not recorded.
    name: &'static str,
    /// TEST ONLY (`--testing-break=retry-without-backoff`): failed keys come back at once.
    retry_without_backoff: bool,
}

impl WorkQueue {
    pub fn new(base_delay: Duration, max_delay: Duration) -> Arc<Self> {
        Self::named("", base_delay, max_delay)
    }

    /// A queue whose adds, depth and retries show as `workqueue_*{name="<name>"}`.
    pub fn named(name: &'static str, base_delay: Duration, max_delay: Duration) -> Arc<Self> {
        Self::named_with(name, base_delay, max_delay, false)
    }

    /// [`WorkQueue::named`]; with `retry_without_backoff` (TEST ONLY,
    /// `--testing-break=retry-without-backoff`) [`WorkQueue::add_rate_limited`] requeues
    /// at once instead of after the exponential backoff.
    pub fn named_with(
        name: &'static str,
        base_delay: Duration,
        max_delay: Duration,
        retry_without_backoff: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            base_delay,
            max_delay,
            retry_without_backoff,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: &str) {
        let mut s = self.lock();
        if !s.dirty.insert(key.to_owned()) {
            return;
        }
        if s.processing.contains(key) {
            return; // re-queued by done()
        }
        s.queue.push_back(key.to_owned());
        let depth = s.queue.len();
        drop(s);
        self.record_depth(depth);
        if !self.name.is_empty() {
            crate::metrics::global()
                .workqueue_adds_total
                .inc_with(self.name);
        }
        self.notify.notify_one();
    }

    fn record_depth(&self, depth: usize) {
        if !self.name.is_empty() {
            crate::metrics::global()
                .workqueue_depth
                .set_with(self.name, depth as f64);
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(self: &Arc<Self>, key: &str, delay: Duration) {
        let queue = Arc::clone(self);
        let key = key.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(&key);
        });
    }

    /// Queues `key` after its next backoff delay; returns the delay.
    pub fn add_rate_limited(self: &Arc<Self>, key: &str) -> Duration {
        let delay = {
            let mut s = self.lock();
            let failures = s.failures.entry(key.to_owned()).or_insert(0);
            let delay = retry_delay(
                self.base_delay,
                self.max_delay,
                *failures,
                self.retry_without_backoff,
            );
            *failures = failures.saturating_add(1);
            delay
        };
        if !self.name.is_empty() {
            crate::metrics::global()
                .workqueue_retries_total
                .inc_with(self.name);
        }
        self.add_after(key, delay);
        delay
    }

    /// Resets the backoff of `key` (after a success).
    pub fn forget(&self, key: &str) {
        self.lock().failures.remove(key);
    }

    /// Number of failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for the next key; the caller must call [`WorkQueue::done`] with it.
    pub async fn get(&self) -> String {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    self.record_depth(s.queue.len());
                    if !s.queue.is_empty() {
                        self.notify.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &str) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.to_owned());
            drop(s);
            self.notify.notify_one();
        }
    }
}

/// The delay before a failed key's next try: [`backoff`], or zero when the queue runs the
/// TEST ONLY `--testing-break=retry-without-backoff`.
pub fn retry_delay(
    base: Duration,
    max: Duration,
    failures: u32,
    without_backoff: bool,
) -> Duration {
    if without_backoff {
        Duration::ZERO
    } else {
        backoff(base, max, failures)
    }
}

/// client-go `ItemExponentialFailureRateLimiter`: `base * 2^failures`, capped.
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(31));
    base.checked_mul(factor).unwrap_or(max).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_base_to_cap() {
        let b = |n| backoff(Duration::from_secs(5), Duration::from_secs(300), n);
        assert_eq!(b(0), Duration::from_secs(5));
        assert_eq!(b(1), Duration::from_secs(10));
        assert_eq!(b(5), Duration::from_secs(160));
        assert_eq!(b(6), Duration::from_secs(300));
        assert_eq!(b(40), Duration::from_secs(300));
    }

    #[test]
    fn retry_delay_is_zero_only_with_the_testing_break() {
        let (base, max) = (Duration::from_secs(5), Duration::from_secs(300));
        for failures in [0, 1, 5, 6, 40] {
            assert_eq!(
                retry_delay(base, max, failures, false),
                backoff(base, max, failures)
            );
            assert_eq!(retry_delay(base, max, failures, true), Duration::ZERO);
        }
        assert_eq!(retry_delay(base, max, 2, false), Duration::from_secs(20));
    }

    #[tokio::test]
    async fn queue_without_backoff_requeues_failed_keys_at_once() {
        let (base, max) = (Duration::from_secs(5), Duration::from_secs(300));
        let normal = WorkQueue::named_with("", base, max, false);
        assert_eq!(normal.add_rate_limited("k"), Duration::from_secs(5));
        assert_eq!(normal.add_rate_limited("k"), Duration::from_secs(10));
        assert_eq!(normal.add_rate_limited("k"), Duration::from_secs(20));
        let broken = WorkQueue::named_with("", base, max, true);
        for n in 1..=10 {
            assert_eq!(broken.add_rate_limited("k"), Duration::ZERO);
            assert_eq!(broken.failures("k"), n);
        }
        // Back without waiting for the 5 s base delay.
        let got = tokio::time::timeout(Duration::from_secs(2), broken.get()).await;
        assert_eq!(got.ok().as_deref(), Some("k"));
    }

    #[tokio::test]
    async fn dedupes_and_requeues_keys_added_while_processing() {
        let q = WorkQueue::new(Duration::from_millis(1), Duration::from_millis(10));
        q.add("a");
        q.add("a");
        q.add("b");
        let first = q.get().await;
        assert_eq!(first, "a");
        q.add("a"); // while processing: held back until done
        assert_eq!(q.get().await, "b");
        q.done("b");
        q.done("a");
        assert_eq!(q.get().await, "a");
        q.done("a");
        let waited = tokio::time::timeout(Duration::from_millis(50), q.get()).await;
        assert!(waited.is_err(), "queue should be empty");
        assert_eq!(q.add_rate_limited("c"), Duration::from_millis(1));
        assert_eq!(q.failures("c"), 1);
        let got = tokio::time::timeout(Duration::from_secs(2), q.get()).await;
        assert_eq!(got.ok().as_deref(), Some("c"));
        q.forget("c");
        assert_eq!(q.failures("c"), 0);
    }
}
