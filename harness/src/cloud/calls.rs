//! The cloud's request journal as cases read it: each journal entry as a [`CloudCall`],
//! with the [`CallKind`] the mock's request gate gave it when it classified the request
//! (instance lookup, route write, load-balancer create / delete / backend write, ...;
//! parsed once, there) and the identifiers it names; and [`CloudObserver`], a handle
//! another task can poll.

use std::sync::Arc;

pub use mock_cloud::{CallKind, LbOp};
use mock_cloud::{Journal, JournalEntry};

/// Which identifiers in a journal entry may name a load balancer (its id, its name, one of
/// its pools': where in the request each cloud puts them).
pub(crate) type RefsReader = fn(&JournalEntry) -> Vec<String>;

/// The default [`RefsReader`]: the path's segments and the resource the gate named.
pub(crate) fn path_and_resource_refs(e: &JournalEntry) -> Vec<String> {
    let mut refs = tokens(&e.path);
    refs.extend(e.resource.clone());
    refs
}

/// One journal entry as a case sees it.
#[derive(Debug, Clone)]
pub struct CloudCall {
    pub seq: u64,
    pub time: jiff::Timestamp,
    pub kind: CallKind,
    /// The answer's HTTP status.
    pub status: u16,
    /// Whether an injected fault produced or delayed the answer.
    pub faulted: bool,
    /// Identifiers the call names (ids, names, ARNs in its path and parameters), for
    /// telling which load balancer it was about.
    pub refs: Vec<String>,
}

impl CloudCall {
    /// `e` as a call naming what `refs` reads in it.
    pub(crate) fn read(e: &JournalEntry, refs: RefsReader) -> Self {
        CloudCall {
            seq: e.seq,
            time: e.time,
            kind: e.kind,
            status: e.status,
            faulted: e.fault.is_some(),
            refs: refs(e),
        }
    }

    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn lb_op(&self) -> Option<LbOp> {
        match self.kind {
            CallKind::LoadBalancer(op) => Some(op),
            _ => None,
        }
    }
}

/// Splits text from a path or form into whole tokens (`web-1` never matches `web-10`).
pub(crate) fn tokens(text: &str) -> Vec<String> {
    text.split(['/', '?', '&', '='])
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Lists `(identity, name)` of every load balancer, from any task.
pub(crate) type LbLister = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// A cheap handle on a cloud's load balancers and journal that another task can keep
/// polling ([`crate::invariants::Recorder`]); see [`CloudControl::observer`](super::CloudControl::observer).
#[derive(Clone)]
pub struct CloudObserver {
    journal: Journal,
    refs: RefsReader,
    lbs: LbLister,
}

impl CloudObserver {
    pub(crate) fn new(journal: Journal, refs: RefsReader, lbs: LbLister) -> Self {
        Self { journal, refs, lbs }
    }

    /// `(identity, name)` of every load balancer; the identity changes when a load
    /// balancer is recreated under the same name.
    pub fn load_balancers(&self) -> Vec<(String, String)> {
        (self.lbs)()
    }

    /// The journal's last sequence number, a mark for [`Self::calls_since`].
    pub fn mark(&self) -> u64 {
        self.journal.last_seq()
    }

    pub fn calls_since(&self, mark: u64) -> Vec<CloudCall> {
        self.journal
            .since(mark)
            .iter()
            .map(|e| CloudCall::read(e, self.refs))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_whole() {
        assert_eq!(
            tokens("/lbaas/pools/p1/members?name=web-1&x="),
            ["lbaas", "pools", "p1", "members", "name", "web-1", "x"]
        );
    }
}
