//! In-process audit log of every request.
//!
//! The harness asserts on what clients did ("the CCM patched node n1 once", "no
//! write after X"), so every request is recorded with the verb and resource
//! upstream audit logs would show. Bounded so long runs cannot grow without limit.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One served request.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Increasing from 1 in arrival order of completion.
    pub seq: u64,
    pub time: jiff::Timestamp,
    /// get list watch create update patch delete deletecollection, or the lowercase
    /// HTTP method for non-resource paths.
    pub verb: String,
    pub method: String,
    pub path: String,
    pub query: String,
    /// Plural resource name (`nodes`, `leases`), empty for non-resource paths.
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub user_agent: String,
    /// The authenticated user name (`system:serviceaccount:kube-system:node-controller`),
    /// empty when authentication failed.
    pub user: String,
    /// HTTP status (for watches: the status the stream started with).
    pub status: u16,
    /// For PATCH: `merge`, `json`, `strategic`, `apply`, or the raw Content-Type if
    /// it is none of them.
    pub patch_type: Option<String>,
}

/// Shared, bounded log.
/// Audit entries kept in memory: about 800 bytes each, so at most some 40 MB, a quarter
/// hour of a soak's traffic (readers that need more poll with [`AuditLog::since`]).
pub const AUDIT_CAPACITY: usize = 50_000;

#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    next_seq: u64,
    cap: usize,
    entries: VecDeque<AuditEntry>,
}

impl AuditLog {
    /// A log keeping the last `cap` entries.
    pub fn new(cap: usize) -> AuditLog {
        AuditLog {
            inner: Arc::new(Mutex::new(Inner {
                next_seq: 1,
                cap: cap.max(1),
                entries: VecDeque::new(),
            })),
        }
    }

    /// Append, assigning `seq`.
    pub fn record(&self, mut entry: AuditEntry) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        entry.seq = inner.next_seq;
        inner.next_seq += 1;
        inner.entries.push_back(entry);
        while inner.entries.len() > inner.cap {
            inner.entries.pop_front();
        }
    }

    /// A copy of the retained entries after `seq` (all of them for 0), oldest first; found
    /// by bisection, so a caller polling with its last mark pays only for what is new.
    pub fn since(&self, seq: u64) -> Vec<AuditEntry> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let start = inner.entries.partition_point(|e| e.seq <= seq);
        inner.entries.range(start..).cloned().collect()
    }

    /// The `seq` of the newest entry (0 when nothing was recorded).
    pub fn last_seq(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_seq
            - 1
    }

    /// A copy of the retained entries, oldest first.
    pub fn snapshot(&self) -> Vec<AuditEntry> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> AuditEntry {
        AuditEntry {
            seq: 0,
            time: jiff::Timestamp::now(),
            verb: "get".into(),
            method: "GET".into(),
            path: "/api/v1/nodes/n".into(),
            query: String::new(),
            resource: "nodes".into(),
            subresource: None,
            namespace: None,
            name: Some("n".into()),
            user_agent: String::new(),
            user: String::new(),
            status: 200,
            patch_type: None,
        }
    }

    #[test]
    fn bounded_and_sequenced() {
        let log = AuditLog::new(2);
        for _ in 0..3 {
            log.record(entry());
        }
        let seqs: Vec<u64> = log.snapshot().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![2, 3]);
        let after = |s| log.since(s).iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(after(0), vec![2, 3]);
        assert_eq!(after(2), vec![3]);
        assert_eq!(after(3), Vec::<u64>::new());
        assert_eq!(log.last_seq(), 3);
    }
}
