//! The request journal: every request a mock answers, in order, so a case can assert on
//! what the CCM did (how many lookups, whether it retried, whether anything happened after
//! a point in time) instead of guessing from side effects.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// Entries kept before the oldest are dropped; sequence numbers keep counting.
pub const DEFAULT_JOURNAL_CAPACITY: usize = 1_000_000;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Position in the journal, from 1, never reused (also not after `clear`).
    pub seq: u64,
    pub time: jiff::Timestamp,
    /// `"identity"`, `"compute"`, `"network"`, `"load-balancer"`, `"admin"`, ...
    pub service: String,
    pub method: String,
    /// The request path, without the query.
    pub path: String,
    /// The raw query string ("" when none).
    pub query: String,
    /// The status the mock answered.
    pub status: u16,
    /// The id of the fault rule that produced (or delayed) the answer.
    pub fault: Option<u64>,
}

#[derive(Debug)]
struct Inner {
    next_seq: u64,
    capacity: usize,
    entries: VecDeque<JournalEntry>,
}

/// A bounded, shared journal; clones share the same entries.
#[derive(Debug, Clone)]
pub struct Journal {
    inner: Arc<Mutex<Inner>>,
}

impl Default for Journal {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_JOURNAL_CAPACITY)
    }
}

impl Journal {
    pub fn new() -> Self {
        Self::default()
    }

    /// A journal keeping at most `capacity` entries (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                next_seq: 1,
                capacity: capacity.max(1),
                entries: VecDeque::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the journal consistent enough
        // (each operation is a single push/pop), so keep serving.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends an entry stamped with the current time; returns its sequence number.
    pub fn record(
        &self,
        service: &str,
        method: &str,
        path: &str,
        query: &str,
        status: u16,
        fault: Option<u64>,
    ) -> u64 {
        let time = jiff::Timestamp::now();
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if inner.entries.len() >= inner.capacity {
            inner.entries.pop_front();
        }
        inner.entries.push_back(JournalEntry {
            seq,
            time,
            service: service.to_string(),
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            status,
            fault,
        });
        seq
    }

    /// All kept entries, oldest first.
    pub fn entries(&self) -> Vec<JournalEntry> {
        self.lock().entries.iter().cloned().collect()
    }

    /// Entries with a sequence number greater than `seq`, oldest first.
    pub fn since(&self, seq: u64) -> Vec<JournalEntry> {
        let inner = self.lock();
        // Sequence numbers are increasing, so the first match can be found by bisection.
        let start = inner.entries.partition_point(|e| e.seq <= seq);
        inner.entries.range(start..).cloned().collect()
    }

    /// The sequence number of the newest entry (0 when nothing was ever recorded), a mark
    /// for a later `since`.
    pub fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// How many kept entries satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&JournalEntry) -> bool) -> usize {
        self.lock().entries.iter().filter(|e| pred(e)).count()
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry; sequence numbers keep counting.
    pub fn clear(&self) {
        self.lock().entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_in_order_and_since_filters() {
        let j = Journal::new();
        assert_eq!(j.last_seq(), 0);
        let a = j.record("compute", "GET", "/servers", "", 200, None);
        let b = j.record("network", "GET", "/ports", "device_id=x", 200, None);
        let c = j.record("compute", "GET", "/servers/1", "", 500, Some(7));
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(j.entries().len(), 3);
        let since = j.since(a);
        assert_eq!(since.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(j.count(|e| e.service == "compute"), 2);
        assert_eq!(j.count(|e| e.fault == Some(7)), 1);
        assert_eq!(j.last_seq(), 3);
    }

    #[test]
    fn bounded_and_clear_keeps_sequence() {
        let j = Journal::with_capacity(2);
        for _ in 0..5 {
            j.record("compute", "GET", "/", "", 200, None);
        }
        let seqs: Vec<u64> = j.entries().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![4, 5]);
        j.clear();
        assert!(j.is_empty());
        assert_eq!(j.record("compute", "GET", "/", "", 200, None), 6);
    }

    #[test]
    fn clones_share_entries() {
        let j = Journal::new();
        let k = j.clone();
        k.record("identity", "POST", "/v3/auth/tokens", "", 201, None);
        assert_eq!(j.len(), 1);
    }
}
