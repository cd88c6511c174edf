//! Invariants checked *during* a transition (an upgrade, a rollback, a kubelet switch), not
//! only at its end: the things ccm-behaviour.md §3 lists as what a cluster must not notice.
//!
//! A [`Recorder`] takes a baseline of every Node and LoadBalancer Service and the cloud's
//! load balancers, then, until [`Recorder::finish`]:
//! - watches Nodes and Services and compares every version it sees with the baseline
//!   (providerID byte-identical, zone/region/instance-type labels identical, addresses
//!   set-equal, no uninitialized taint, not deleted; ingress identical, finalizer kept);
//! - polls the cloud's load balancers (ids appearing or disappearing = created/deleted);
//! - polls the CCM's leader-election Lease (who led when: "re-ensured once per leader");
//! - probes every LB ingress with a TCP connection every 100 ms and keeps the longest time
//!   without an answer.
//!
//! At the end it adds what the API server's audit log and the cloud's journal say happened
//! in the window: writes by anyone but the harness and the kubelets to the baseline Nodes
//! (spec, metadata, deletion) and Services, and load-balancer create/delete calls. One
//! Service write is expected: a provider recording its load balancer's cloud ID in an
//! annotation (the cloud's `load_balancer_id_annotations`) the first time it sees the Service, and the one
//! re-ensure that annotation change causes (upstream's `needsUpdate` compares annotations).
//! Upstream tolerates a 2 min probe lag (kubernetes/kubernetes test/e2e/upgrades); the cases
//! report the gap as a metric instead of a pass/fail threshold.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::case::CaseMetrics;
use crate::cloud::{CloudObserver, LbOp};
use crate::env::Environment;
use crate::error::CaseError;
use crate::node::{addresses, has_uninitialized_taint, provider_id};
use crate::wait::Probe;

/// Labels a CCM derives from the cloud and must never change on an existing node.
pub const TOPOLOGY_LABELS: &[&str] = &[
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
];
/// The service-lb controller's finalizer.
pub const LB_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// The CCM's leader-election Lease (kube-system), as upstream names it.
pub const CCM_LEASE: &str = "cloud-controller-manager";
/// How often the probers and pollers look.
pub const PROBE_PERIOD: Duration = Duration::from_millis(100);

/// What must not change on a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub provider_id: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Sorted (type, address) pairs.
    pub addresses: Vec<(String, String)>,
    pub tainted: bool,
}

impl NodeFacts {
    pub fn of(node: &Node) -> Self {
        let labels = node
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| TOPOLOGY_LABELS.contains(&k.as_str()))
            .collect();
        let mut addrs = addresses(node);
        addrs.sort();
        Self {
            provider_id: provider_id(node).map(str::to_string),
            labels,
            addresses: addrs,
            tainted: has_uninitialized_taint(node),
        }
    }

    /// How `now` differs from `self` (the baseline), one phrase per difference.
    pub fn differences(&self, now: &NodeFacts) -> Vec<String> {
        let mut out = Vec::new();
        if self.provider_id != now.provider_id {
            out.push(format!(
                "providerID {:?} -> {:?}",
                self.provider_id, now.provider_id
            ));
        }
        if self.labels != now.labels {
            out.push(format!("labels {:?} -> {:?}", self.labels, now.labels));
        }
        if self.addresses != now.addresses {
            out.push(format!(
                "addresses {:?} -> {:?}",
                self.addresses, now.addresses
            ));
        }
        if now.tainted && !self.tainted {
            out.push("the uninitialized taint reappeared".into());
        }
        out
    }
}

/// What must not change on a LoadBalancer Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceFacts {
    /// Ingress IPs and hostnames, in order.
    pub ingress: Vec<String>,
    pub finalizer: bool,
    /// The annotations in which the provider keeps its load balancer's cloud identity
    /// (`CloudControl::load_balancer_id_annotations`) that the Service carries: writing
    /// one that was missing is expected, changing one is a new identity.
    pub lb_ids: BTreeMap<String, String>,
}

impl ServiceFacts {
    pub fn of(service: &Service, id_annotations: &[&str]) -> Self {
        Self {
            ingress: ingress_of(service),
            finalizer: service
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == LB_FINALIZER)),
            lb_ids: service
                .metadata
                .annotations
                .iter()
                .flatten()
                .filter(|(k, _)| id_annotations.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The ID annotations `now` has that the baseline lacked (a first recording).
    pub fn recorded_ids(&self, now: &ServiceFacts) -> usize {
        now.lb_ids
            .keys()
            .filter(|k| !self.lb_ids.contains_key(*k))
            .count()
    }

    pub fn differences(&self, now: &ServiceFacts) -> Vec<String> {
        let mut out = Vec::new();
        for (key, was) in &self.lb_ids {
            match now.lb_ids.get(key) {
                Some(v) if v != was => out.push(format!(
                    "load-balancer identity annotation {key} {was:?} -> {v:?}"
                )),
                None => out.push(format!("load-balancer identity annotation {key} removed")),
                Some(_) => {}
            }
        }
        if self.ingress != now.ingress {
            out.push(format!("ingress {:?} -> {:?}", self.ingress, now.ingress));
        }
        if self.finalizer && !now.finalizer {
            out.push(format!("finalizer {LB_FINALIZER} removed"));
        }
        out
    }
}

/// A Service's ingress IPs (or hostnames), in order.
pub fn ingress_of(service: &Service) -> Vec<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| {
            i.iter()
                .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// One traffic target's record.
#[derive(Debug, Clone, Default)]
pub struct ProbeStats {
    pub answered: u64,
    pub failed: u64,
    pub longest_gap: Duration,
}

#[derive(Default)]
struct Observed {
    /// Invariant breaks, `+secs what`, deduplicated.
    violations: Vec<String>,
    seen: BTreeSet<String>,
    /// Every Lease holder in order (consecutive duplicates merged).
    leaders: Vec<String>,
    /// Cloud load-balancer ids seen at any poll.
    lb_ids: BTreeSet<String>,
    lb_names: BTreeMap<String, String>,
    probes: BTreeMap<String, ProbeStats>,
    node_versions: usize,
    service_versions: usize,
}

impl Observed {
    fn violation(&mut self, at: Duration, what: String) {
        if self.seen.insert(what.clone()) {
            self.violations
                .push(format!("+{:.1}s {what}", at.as_secs_f64()));
        }
    }
}

type Shared = Arc<Mutex<Observed>>;

fn lock(shared: &Shared) -> MutexGuard<'_, Observed> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// What happened during a transition.
#[derive(Debug, Clone, Default)]
pub struct TransitionReport {
    pub duration: Duration,
    /// Invariant breaks the watchers saw, with when (`+secs`).
    pub violations: Vec<String>,
    /// Writes the harness and the kubelets did not make to baseline Nodes (anything but
    /// status) and Services (anything): `verb resource/name[/sub] by user-agent`.
    pub unexpected_writes: Vec<String>,
    /// Status writes to baseline Nodes by the CCM (allowed: e.g. heartbeat conditions;
    /// address changes show up as violations).
    pub node_status_writes: usize,
    pub longest_gap: Duration,
    pub probes: BTreeMap<String, ProbeStats>,
    /// Cloud load balancers that appeared / disappeared in the window, as `name (id)`.
    pub lbs_created: Vec<String>,
    pub lbs_deleted: Vec<String>,
    /// Successful create / delete calls to the load-balancer API in the window.
    pub lb_create_calls: usize,
    pub lb_delete_calls: usize,
    /// Every holder of the CCM's Lease seen in the window, in order.
    pub leaders: Vec<String>,
    /// `EnsuringLoadBalancer` events per baseline Service (`ns/name`) in the window.
    pub ensures: BTreeMap<String, i32>,
    /// Services whose missing [`LB_ID_ANNOTATIONS`] the CCM recorded in the window (one
    /// write each is expected, and one more ensure it triggers).
    pub ids_recorded: BTreeSet<String>,
    /// Cloud calls in the window (all services, all methods).
    pub cloud_calls: usize,
}

impl TransitionReport {
    /// The JUnit properties TestGrid graphs.
    pub fn metrics(&self) -> CaseMetrics {
        vec![
            (
                "longest_gap_seconds".into(),
                format!("{:.3}", self.longest_gap.as_secs_f64()),
            ),
            (
                "unexpected_writes".into(),
                self.unexpected_writes.len().to_string(),
            ),
            (
                "invariant_violations".into(),
                self.violations.len().to_string(),
            ),
            ("lbs_created".into(), self.lbs_created.len().to_string()),
            ("lbs_deleted".into(), self.lbs_deleted.len().to_string()),
            (
                "transition_seconds".into(),
                format!("{:.3}", self.duration.as_secs_f64()),
            ),
        ]
    }

    /// Every invariant failure: violations, unexpected writes, load balancers created or
    /// deleted. Empty when the transition was invisible.
    pub fn failures(&self) -> Vec<String> {
        let mut out = self.violations.clone();
        out.extend(
            self.unexpected_writes
                .iter()
                .map(|w| format!("unexpected write: {w}")),
        );
        out.extend(
            self.lbs_created
                .iter()
                .map(|lb| format!("load balancer created: {lb}")),
        );
        out.extend(
            self.lbs_deleted
                .iter()
                .map(|lb| format!("load balancer deleted: {lb}")),
        );
        if self.lbs_created.is_empty() && self.lb_create_calls > 0 {
            out.push(format!(
                "{} load-balancer create call(s) in the cloud journal",
                self.lb_create_calls
            ));
        }
        if self.lbs_deleted.is_empty() && self.lb_delete_calls > 0 {
            out.push(format!(
                "{} load-balancer delete call(s) in the cloud journal",
                self.lb_delete_calls
            ));
        }
        out
    }

    /// `Ok` when [`Self::failures`] is empty; else a failure whose message names the first
    /// and whose detail lists all of them and the probes.
    pub fn check(&self, what: &str) -> Result<(), CaseError> {
        let failures = self.failures();
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(CaseError::with_detail(
                format!(
                    "{what}: expected no visible change, observed {} problem(s), first: {first}",
                    failures.len()
                ),
                self.describe(),
            )),
        }
    }

    /// A multi-line account for failure details and logs.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for f in self.failures() {
            out.push_str(&format!("- {f}\n"));
        }
        out.push_str(&format!(
            "window {:.1}s, longest probe gap {:.3}s, leaders {:?}, ensures {:?}, cloud calls {}\n",
            self.duration.as_secs_f64(),
            self.longest_gap.as_secs_f64(),
            self.leaders,
            self.ensures,
            self.cloud_calls
        ));
        for (target, p) in &self.probes {
            out.push_str(&format!(
                "probe {target}: {} answered, {} failed, longest gap {:.3}s\n",
                p.answered,
                p.failed,
                p.longest_gap.as_secs_f64()
            ));
        }
        out
    }
}

/// Records a transition; see the module docs.
pub struct Recorder {
    started: Instant,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    shared: Shared,
    audit_mark: u64,
    journal_mark: u64,
    tap: Option<CloudObserver>,
    nodes: BTreeMap<String, NodeFacts>,
    services: BTreeMap<String, ServiceFacts>,
    id_annotations: &'static [&'static str],
    ensures_before: BTreeMap<String, i32>,
}

impl Recorder {
    /// Takes the baseline (every Node, every Service of type LoadBalancer in `default`, the
    /// cloud's load balancers) and starts watching. `targets` are `ip:port` addresses to
    /// probe (usually every ingress with its port).
    pub async fn start(env: &Environment, targets: &[String]) -> Result<Recorder, CaseError> {
        let client = env.client();
        let id_annotations = env.cloud().load_balancer_id_annotations();
        let node_api: Api<Node> = Api::all(client.clone());
        let service_api: Api<Service> = Api::namespaced(client.clone(), "default");
        let nodes: BTreeMap<String, NodeFacts> = node_api
            .list(&ListParams::default())
            .await
            .map_err(|e| CaseError::infra("listing nodes for the baseline", e))?
            .items
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    NodeFacts::of(n),
                )
            })
            .collect();
        let services: BTreeMap<String, ServiceFacts> = service_api
            .list(&ListParams::default())
            .await
            .map_err(|e| CaseError::infra("listing services for the baseline", e))?
            .items
            .iter()
            .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap_or_default(),
                    ServiceFacts::of(s, id_annotations),
                )
            })
            .collect();
        let names: Vec<String> = services.keys().cloned().collect();
        wait_services_quiet(env, &names, QUIET_BEFORE_BASELINE).await?;
        let ensures_before = ensuring_events(env, services.keys()).await?;
        let tap = env.cloud().observer();
        let shared: Shared = Arc::default();
        if let Some(tap) = &tap {
            let mut o = lock(&shared);
            for (id, name) in tap.load_balancers() {
                o.lb_ids.insert(id.clone());
                o.lb_names.insert(id, name);
            }
        }
        let baseline_lbs = lock(&shared).lb_ids.clone();
        let (stop, stopped) = watch::channel(false);
        let started = Instant::now();
        let mut tasks = vec![
            tokio::spawn(watch_nodes(
                node_api,
                nodes.clone(),
                shared.clone(),
                started,
                stopped.clone(),
            )),
            tokio::spawn(watch_services(
                service_api,
                services.clone(),
                id_annotations,
                shared.clone(),
                started,
                stopped.clone(),
            )),
            tokio::spawn(poll_leases_and_cloud(
                Api::namespaced(client, "kube-system"),
                tap.clone(),
                baseline_lbs,
                shared.clone(),
                started,
                stopped.clone(),
            )),
        ];
        for target in targets {
            lock(&shared)
                .probes
                .insert(target.clone(), ProbeStats::default());
            tasks.push(tokio::spawn(probe(
                target.clone(),
                shared.clone(),
                stopped.clone(),
            )));
        }
        Ok(Recorder {
            started,
            stop,
            tasks,
            shared,
            audit_mark: env.audit_mark(),
            journal_mark: tap.as_ref().map(CloudObserver::mark).unwrap_or(0),
            tap,
            nodes,
            services,
            id_annotations,
            ensures_before,
        })
    }

    /// Seconds since the recorder started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Invariant violations seen so far (for cases that want to stop early).
    pub fn violations_so_far(&self) -> Vec<String> {
        lock(&self.shared).violations.clone()
    }

    /// Keeps watching for `period`, ending early at the first violation (the report then
    /// has it). The observation window of "nothing visible happens".
    pub async fn observe(&self, period: Duration) {
        let end = Instant::now() + period;
        while Instant::now() < end && lock(&self.shared).violations.is_empty() {
            tokio::time::sleep(PROBE_PERIOD).await;
        }
    }

    /// Stops watching and probing and puts everything together.
    pub async fn finish(self, env: &Environment) -> Result<TransitionReport, CaseError> {
        let duration = self.started.elapsed();
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        // A last look, in case a watch event was still in flight when we stopped.
        let now = duration;
        let node_api = env.nodes();
        for (name, base) in &self.nodes {
            match node_api
                .get_opt(name)
                .await
                .map_err(|e| CaseError::infra("getting node", e))?
            {
                None => lock(&self.shared).violation(now, format!("node {name} was deleted")),
                Some(n) => {
                    for d in base.differences(&NodeFacts::of(&n)) {
                        lock(&self.shared).violation(now, format!("node {name}: {d}"));
                    }
                }
            }
        }
        let services = env.services();
        let mut ids_recorded = BTreeSet::new();
        for (name, base) in &self.services {
            match services
                .get_opt(name)
                .await
                .map_err(|e| CaseError::infra("getting service", e))?
            {
                None => lock(&self.shared).violation(now, format!("service {name} was deleted")),
                Some(s) => {
                    let facts = ServiceFacts::of(&s, self.id_annotations);
                    for d in base.differences(&facts) {
                        lock(&self.shared).violation(now, format!("service {name}: {d}"));
                    }
                    if base.recorded_ids(&facts) > 0 {
                        ids_recorded.insert(name.clone());
                    }
                }
            }
        }
        // The one metadata write each first ID recording takes.
        let mut id_writes_left: BTreeSet<String> = ids_recorded.clone();
        let mut unexpected_writes = Vec::new();
        let mut node_status_writes = 0;
        for e in env.foreign_writes_since(self.audit_mark) {
            let name = e.name.clone().unwrap_or_default();
            let line = || {
                format!(
                    "{} {}/{}{} by {:?}",
                    e.verb,
                    e.resource,
                    name,
                    e.subresource
                        .as_deref()
                        .map(|s| format!("/{s}"))
                        .unwrap_or_default(),
                    e.user_agent
                )
            };
            match e.resource.as_str() {
                "nodes" if self.nodes.contains_key(&name) => {
                    if e.subresource.as_deref() == Some("status") && e.verb != "delete" {
                        node_status_writes += 1;
                    } else {
                        unexpected_writes.push(line());
                    }
                }
                "services"
                    if e.namespace.as_deref() == Some("default")
                        && self.services.contains_key(&name) =>
                {
                    let metadata_write =
                        e.subresource.is_none() && matches!(e.verb.as_str(), "patch" | "update");
                    if !(metadata_write && id_writes_left.remove(&name)) {
                        unexpected_writes.push(line())
                    }
                }
                _ => {}
            }
        }
        let (mut lbs_created, mut lbs_deleted) = (Vec::new(), Vec::new());
        let (mut lb_create_calls, mut lb_delete_calls, mut cloud_calls) = (0, 0, 0);
        if let Some(tap) = &self.tap {
            let calls = tap.calls_since(self.journal_mark);
            cloud_calls = calls.len();
            let succeeded = |op: LbOp| {
                calls
                    .iter()
                    .filter(|c| c.ok() && c.lb_op() == Some(op))
                    .count()
            };
            (lb_create_calls, lb_delete_calls) = (succeeded(LbOp::Create), succeeded(LbOp::Delete));
            let now: BTreeMap<String, String> = tap.load_balancers().into_iter().collect();
            let o = lock(&self.shared);
            let baseline = &o.lb_names;
            for (id, name) in baseline.iter().filter(|(id, _)| !now.contains_key(*id)) {
                lbs_deleted.push(format!("{name} ({id})"));
            }
            for (id, name) in now.iter().filter(|(id, _)| !baseline.contains_key(*id)) {
                lbs_created.push(format!("{name} ({id})"));
            }
            // Created and deleted again within the window: only the poller saw those.
            for id in o
                .lb_ids
                .iter()
                .filter(|id| !baseline.contains_key(*id) && !now.contains_key(*id))
            {
                lbs_created.push(format!("({id}, deleted again)"));
            }
        }
        let after = ensuring_events(env, self.services.keys()).await?;
        let ensures = after
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v - self.ensures_before.get(k).copied().unwrap_or(0),
                )
            })
            .collect();
        let o = lock(&self.shared);
        let mut probes = o.probes.clone();
        // A probe that never answered at all has a gap as long as the window.
        for p in probes.values_mut() {
            if p.answered == 0 {
                p.longest_gap = duration;
            }
        }
        let longest_gap = probes
            .values()
            .map(|p| p.longest_gap)
            .max()
            .unwrap_or_default();
        Ok(TransitionReport {
            duration,
            violations: o.violations.clone(),
            unexpected_writes,
            ids_recorded,
            node_status_writes,
            longest_gap,
            probes,
            lbs_created,
            lbs_deleted,
            lb_create_calls,
            lb_delete_calls,
            leaders: o.leaders.clone(),
            ensures,
            cloud_calls,
        })
    }
}

/// Sum of `EnsuringLoadBalancer` event counts per Service in `default`.
/// How long Services must stay unchanged before a baseline is taken.
pub const QUIET_BEFORE_BASELINE: Duration = Duration::from_millis(500);

/// Waits (up to a minute) until every Service in `names` (namespace `default`) has no
/// sync in flight — each `EnsuringLoadBalancer` answered by `EnsuredLoadBalancer` or
/// `SyncLoadBalancerFailed` — and neither the Service nor those counts changed for `quiet`.
/// A baseline taken earlier would count the tail of a previous sync (such as the re-ensure
/// a provider's own annotation write causes) as part of the transition.
pub async fn wait_services_quiet(
    env: &Environment,
    names: &[String],
    quiet: Duration,
) -> Result<(), CaseError> {
    // Per Service: (resourceVersion, ensures started, ensures finished).
    type Snapshot = Vec<(String, i32, i32)>;
    let last: Mutex<Option<(Snapshot, Instant)>> = Mutex::new(None);
    crate::wait::eventually(
        "the load-balancer Services to settle",
        Duration::from_secs(60),
        || async {
            let mut snapshot = Vec::new();
            let mut pending = Vec::new();
            for name in names {
                let rv = env
                    .services()
                    .get_opt(name)
                    .await
                    .map_err(|e| CaseError::infra("getting service", e))?
                    .and_then(|s| s.metadata.resource_version)
                    .unwrap_or_default();
                let (mut started, mut finished) = (0, 0);
                for e in env.service_events(name).await? {
                    let n = e.count.unwrap_or(1).max(1);
                    match e.reason.as_deref() {
                        Some("EnsuringLoadBalancer") => started += n,
                        Some("EnsuredLoadBalancer" | "SyncLoadBalancerFailed") => finished += n,
                        _ => {}
                    }
                }
                if started > finished {
                    pending.push(format!("{name}: {started} ensuring, {finished} done"));
                }
                snapshot.push((rv, started, finished));
            }
            let mut guard = last.lock().unwrap_or_else(|e| e.into_inner());
            let since = match guard.as_ref() {
                Some((prev, since)) if *prev == snapshot => *since,
                _ => Instant::now(),
            };
            *guard = Some((snapshot, since));
            Ok(if pending.is_empty() && since.elapsed() >= quiet {
                Probe::Done(())
            } else if pending.is_empty() {
                Probe::Pending("changed within the quiet period".into())
            } else {
                Probe::Pending(pending.join("; "))
            })
        },
    )
    .await
}

async fn ensuring_events<'a>(
    env: &Environment,
    names: impl Iterator<Item = &'a String>,
) -> Result<BTreeMap<String, i32>, CaseError> {
    let mut out = BTreeMap::new();
    for name in names {
        let n = env
            .service_events(name)
            .await?
            .iter()
            .filter(|e| e.reason.as_deref() == Some("EnsuringLoadBalancer"))
            .map(|e| e.count.unwrap_or(1).max(1))
            .sum();
        out.insert(name.clone(), n);
    }
    Ok(out)
}

async fn watch_nodes(
    api: Api<Node>,
    baseline: BTreeMap<String, NodeFacts>,
    shared: Shared,
    started: Instant,
    mut stopped: watch::Receiver<bool>,
) {
    let stream = watcher(api, watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    loop {
        let event = tokio::select! {
            _ = stopped.changed() => return,
            e = stream.next() => e,
        };
        let at = started.elapsed();
        match event {
            None => return,
            Some(Err(_)) => continue,
            Some(Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n))) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                let mut o = lock(&shared);
                o.node_versions += 1;
                if let Some(base) = baseline.get(&name) {
                    for d in base.differences(&NodeFacts::of(&n)) {
                        o.violation(at, format!("node {name}: {d}"));
                    }
                }
            }
            Some(Ok(watcher::Event::Delete(n))) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                if baseline.contains_key(&name) {
                    lock(&shared).violation(at, format!("node {name} was deleted"));
                }
            }
            Some(Ok(_)) => {}
        }
    }
}

async fn watch_services(
    api: Api<Service>,
    baseline: BTreeMap<String, ServiceFacts>,
    id_annotations: &'static [&'static str],
    shared: Shared,
    started: Instant,
    mut stopped: watch::Receiver<bool>,
) {
    let stream = watcher(api, watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    loop {
        let event = tokio::select! {
            _ = stopped.changed() => return,
            e = stream.next() => e,
        };
        let at = started.elapsed();
        match event {
            None => return,
            Some(Err(_)) => continue,
            Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                let name = s.metadata.name.clone().unwrap_or_default();
                let mut o = lock(&shared);
                o.service_versions += 1;
                if let Some(base) = baseline.get(&name) {
                    for d in base.differences(&ServiceFacts::of(&s, id_annotations)) {
                        o.violation(at, format!("service {name}: {d}"));
                    }
                }
            }
            Some(Ok(watcher::Event::Delete(s))) => {
                let name = s.metadata.name.clone().unwrap_or_default();
                if baseline.contains_key(&name) {
                    lock(&shared).violation(at, format!("service {name} was deleted"));
                }
            }
            Some(Ok(_)) => {}
        }
    }
}

/// Every [`PROBE_PERIOD`]: the CCM Lease's holder, and the cloud's load balancers.
async fn poll_leases_and_cloud(
    leases: Api<Lease>,
    tap: Option<CloudObserver>,
    baseline_lbs: BTreeSet<String>,
    shared: Shared,
    started: Instant,
    mut stopped: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(PROBE_PERIOD);
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tick.tick() => {}
        }
        let holder = leases
            .get_opt(CCM_LEASE)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty());
        let lbs = tap.as_ref().map(CloudObserver::load_balancers);
        let at = started.elapsed();
        let mut o = lock(&shared);
        if let Some(h) = holder
            && o.leaders.last() != Some(&h)
        {
            o.leaders.push(h);
        }
        if let Some(lbs) = lbs {
            let now: BTreeSet<String> = lbs.iter().map(|(id, _)| id.clone()).collect();
            for (id, name) in &lbs {
                if o.lb_ids.insert(id.clone()) {
                    o.violation(at, format!("load balancer {name} ({id}) appeared"));
                }
            }
            for id in baseline_lbs.difference(&now) {
                let name = o.lb_names.get(id).cloned().unwrap_or_default();
                o.violation(at, format!("load balancer {name} ({id}) disappeared"));
            }
        }
    }
}

/// Connects to `target` every [`PROBE_PERIOD`]; the gap is the time between two answers
/// (and from the start to the first, and from the last to the end).
async fn probe(target: String, shared: Shared, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PROBE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_ok = Instant::now();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            _ = tick.tick() => {}
        }
        let answered = matches!(
            crate::traffic::tcp_line(&target, Duration::from_secs(1)).await,
            Ok(Some(_))
        );
        let now = Instant::now();
        let mut o = lock(&shared);
        let Some(p) = o.probes.get_mut(&target) else {
            return;
        };
        if answered {
            p.answered += 1;
            p.longest_gap = p.longest_gap.max(now - last_ok);
            last_ok = now;
        } else {
            p.failed += 1;
        }
    }
    let mut o = lock(&shared);
    if let Some(p) = o.probes.get_mut(&target)
        && p.answered > 0
    {
        p.longest_gap = p.longest_gap.max(last_ok.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("node")
    }

    #[test]
    fn node_facts_see_provider_id_labels_addresses_and_taint() {
        let base = node(json!({"metadata": {"name": "a", "labels": {
                "topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "a"}},
            "spec": {"providerID": "openstack:///1"},
            "status": {"addresses": [{"type": "Hostname", "address": "a"},
                                     {"type": "InternalIP", "address": "10.0.0.1"}]}}));
        let facts = NodeFacts::of(&base);
        assert!(facts.labels.contains_key("topology.kubernetes.io/zone"));
        assert!(!facts.labels.contains_key("kubernetes.io/hostname"));
        // Address order does not matter; a hostname label change does not count.
        let same = node(json!({"metadata": {"name": "a", "labels": {
                "topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "b"}},
            "spec": {"providerID": "openstack:///1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                     {"type": "Hostname", "address": "a"}]}}));
        assert!(facts.differences(&NodeFacts::of(&same)).is_empty());
        let changed = node(json!({"metadata": {"name": "a", "labels": {
                "topology.kubernetes.io/zone": "z2"}},
            "spec": {"providerID": "openstack:///2", "taints": [{"key":
                "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}}));
        let d = facts.differences(&NodeFacts::of(&changed));
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(d[3].contains("taint"));
    }

    #[test]
    fn service_facts_see_ingress_and_finalizer() {
        let svc = |ip: &str, fin: bool| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "web",
                    "finalizers": if fin { json!([LB_FINALIZER]) } else { json!([]) }},
                "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}))
            .expect("service")
        };
        let base = ServiceFacts::of(&svc("1.2.3.4", true), &[]);
        assert_eq!(base.ingress, vec!["1.2.3.4"]);
        assert!(
            base.differences(&ServiceFacts::of(&svc("1.2.3.4", true), &[]))
                .is_empty()
        );
        assert_eq!(
            base.differences(&ServiceFacts::of(&svc("5.6.7.8", false), &[]))
                .len(),
            2
        );
    }

    #[test]
    fn report_fails_on_anything_visible_and_reports_metrics() {
        let quiet = TransitionReport::default();
        assert!(quiet.check("upgrade").is_ok());
        let m = quiet.metrics();
        assert!(m.iter().any(|(k, _)| k == "longest_gap_seconds"));
        assert!(m.iter().any(|(k, v)| k == "unexpected_writes" && v == "0"));
        let noisy = TransitionReport {
            lb_create_calls: 1,
            unexpected_writes: vec!["patch nodes/a by \"x\"".into()],
            ..Default::default()
        };
        let failures = noisy.failures();
        assert_eq!(failures.len(), 2, "{failures:?}");
        match noisy.check("upgrade") {
            Err(CaseError::Failed {
                message, detail, ..
            }) => {
                assert!(message.contains("2 problem(s)"), "{message}");
                assert!(detail.contains("create call"), "{detail}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn probe_measures_the_gap_while_a_listener_is_down() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serve = |listener: tokio::net::TcpListener| {
            tokio::spawn(async move {
                while let Ok((mut s, _)) = listener.accept().await {
                    let _ = s.write_all(b"node-a\n").await;
                }
            })
        };
        let server = serve(listener);
        let shared: Shared = Arc::default();
        let target = addr.to_string();
        lock(&shared)
            .probes
            .insert(target.clone(), ProbeStats::default());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(probe(target.clone(), shared.clone(), stopped));
        // Wait for answers, take the listener down for a while, bring it back.
        crate::wait::eventually("first answers", Duration::from_secs(5), || async {
            Ok(if lock(&shared).probes[&target].answered >= 2 {
                crate::wait::Probe::Done(())
            } else {
                crate::wait::Probe::Pending("no answers yet".into())
            })
        })
        .await
        .expect("answers");
        server.abort();
        let down = Instant::now();
        crate::wait::eventually("failed probes", Duration::from_secs(5), || async {
            Ok(if lock(&shared).probes[&target].failed >= 5 {
                crate::wait::Probe::Done(())
            } else {
                crate::wait::Probe::Pending("still answering".into())
            })
        })
        .await
        .expect("failures");
        let outage = down.elapsed();
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let server = serve(listener);
        let answered = lock(&shared).probes[&target].answered;
        crate::wait::eventually("answers again", Duration::from_secs(5), || async {
            Ok(if lock(&shared).probes[&target].answered > answered {
                crate::wait::Probe::Done(())
            } else {
                crate::wait::Probe::Pending("down".into())
            })
        })
        .await
        .expect("back");
        let _ = stop.send(true);
        task.await.unwrap();
        server.abort();
        let gap = lock(&shared).probes[&target].longest_gap;
        assert!(
            gap >= outage,
            "gap {gap:?} shorter than the outage {outage:?}"
        );
        assert!(gap < Duration::from_secs(10), "gap {gap:?}");
    }
}
