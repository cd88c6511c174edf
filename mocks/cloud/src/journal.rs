//! The request journal: every request a mock answers, in order, so a case can assert on
//! what the CCM did (how many lookups, whether it retried, whether anything happened after
//! a point in time) instead of guessing from side effects.
//!
//! Each entry also says what the call was in the terms cases ask about ([`CallKind`]:
//! an instance lookup, a route write, a load-balancer create...), decided by the mock's
//! request gate when it classified the request, so readers never parse the cloud's
//! operation strings again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// Entries kept before the oldest are dropped; sequence numbers keep counting. About 600
/// bytes each, so at most some 60 MB: half an hour of a soak's calls; readers that need
/// more poll with [`Journal::since`].
pub const DEFAULT_JOURNAL_CAPACITY: usize = 100_000;

/// What a journal entry was, in the terms cases ask about. Each mock's request gate
/// decides it when it classifies a request (`Call::kind`), from the cloud's own notion of
/// the call (Nova path, EC2 `Action`, SOAP method, ARM type, Compute method id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A lookup of instances (Nova `GET /servers…`, EC2 `DescribeInstances`, vSphere
    /// SearchIndex `Find*`, ARM `GET Microsoft.Compute/virtualMachines…`, Compute
    /// `instances.get|list|aggregatedList`).
    InstanceLookup,
    /// A change to the cluster's routes.
    RouteWrite,
    /// A call to the load-balancer API.
    LoadBalancer(LbOp),
    /// A call to another API that a load-balancer ensure makes (Neutron ports and floating
    /// IPs, EC2 security groups and subnets, ARM network resources, Compute addresses,
    /// firewalls and health checks).
    LoadBalancerSupport,
    /// Anything else (authentication, admin routes, other reads).
    #[default]
    Other,
}

/// A load-balancer API call's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbOp {
    /// Creates a load balancer (Octavia `POST /lbaas/loadbalancers`, ELB/ELBv2
    /// `CreateLoadBalancer`, an ARM load balancer PUT answered 201, Compute
    /// `forwardingRules.insert`).
    Create,
    /// Deletes a load balancer.
    Delete,
    /// Changes its backends (Octavia's batch member update, ELB/ELBv2 instance and target
    /// (de)registration, an ARM NIC PUT, Compute `targetPools.addInstance|removeInstance`).
    BackendWrite,
    /// Any other write (listeners, pools, health checks, attributes).
    OtherWrite,
    Read,
}

impl LbOp {
    pub fn is_write(self) -> bool {
        !matches!(self, LbOp::Read)
    }
}

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
    /// The operation the request gate computed, in the cloud's terms (what fault rules'
    /// `operation` matches; each mock documents it: OpenStack `"POST lbaas/loadbalancers"`,
    /// AWS the `Action`, vSphere the SOAP method or vAPI operation). `None` when the mock
    /// could not tell (a request refused before it was understood); absent in JSON written
    /// before this field existed.
    #[serde(default)]
    pub operation: Option<String>,
    /// The resource the request is about (an id, a name, a MoRef), when there is one.
    #[serde(default)]
    pub resource: Option<String>,
    /// What the call was ([`CallKind`]), as the gate classified it; `other` in JSON
    /// written before this field existed.
    #[serde(default)]
    pub kind: CallKind,
}

/// What a journal entry says about one request (all but the sequence number and time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub status: u16,
    pub fault: Option<u64>,
    pub operation: Option<&'a str>,
    pub resource: Option<&'a str>,
    pub kind: CallKind,
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

    /// Appends an entry with no operation or resource; returns its sequence number.
    pub fn record(
        &self,
        service: &str,
        method: &str,
        path: &str,
        query: &str,
        status: u16,
        fault: Option<u64>,
    ) -> u64 {
        self.append(Record {
            service,
            method,
            path,
            query,
            status,
            fault,
            operation: None,
            resource: None,
            kind: CallKind::Other,
        })
    }

    /// Appends an entry stamped with the current time; returns its sequence number.
    pub fn append(&self, r: Record<'_>) -> u64 {
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
            service: r.service.to_string(),
            method: r.method.to_string(),
            path: r.path.to_string(),
            query: r.query.to_string(),
            status: r.status,
            fault: r.fault,
            operation: r.operation.map(str::to_string),
            resource: r.resource.map(str::to_string),
            kind: r.kind,
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
    fn operation_and_resource_are_kept_and_optional_in_json() {
        let j = Journal::new();
        j.append(Record {
            service: "elbv2",
            method: "POST",
            path: "/",
            operation: Some("CreateLoadBalancer"),
            resource: Some("lb-1"),
            status: 200,
            ..Default::default()
        });
        let e = &j.entries()[0];
        assert_eq!(e.operation.as_deref(), Some("CreateLoadBalancer"));
        assert_eq!(e.resource.as_deref(), Some("lb-1"));
        let old = r#"{"seq":1,"time":"2026-01-01T00:00:00Z","service":"compute","method":"GET",
            "path":"/","query":"","status":200,"fault":null}"#;
        let e: JournalEntry = serde_json::from_str(old).expect("old entries still parse");
        assert_eq!((e.operation, e.resource), (None, None));
        assert_eq!(e.kind, CallKind::Other);
    }

    #[test]
    fn kind_is_kept_and_reads_back_from_json() {
        let j = Journal::new();
        j.append(Record {
            service: "elbv2",
            kind: CallKind::LoadBalancer(LbOp::BackendWrite),
            ..Default::default()
        });
        j.record("admin", "GET", "/admin/journal", "", 200, None);
        let entries = j.entries();
        assert_eq!(entries[0].kind, CallKind::LoadBalancer(LbOp::BackendWrite));
        assert_eq!(entries[1].kind, CallKind::Other);
        let json = serde_json::to_value(&entries[0]).expect("json");
        assert_eq!(
            json["kind"],
            serde_json::json!({"load_balancer": "backend_write"})
        );
        let back: JournalEntry = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, entries[0]);
        assert_eq!(
            serde_json::to_value(CallKind::InstanceLookup).expect("json"),
            "instance_lookup"
        );
        assert!(LbOp::OtherWrite.is_write() && !LbOp::Read.is_write());
    }

    #[test]
    fn clones_share_entries() {
        let j = Journal::new();
        let k = j.clone();
        k.record("identity", "POST", "/v3/auth/tokens", "", 201, None);
        assert_eq!(j.len(), 1);
    }
}
