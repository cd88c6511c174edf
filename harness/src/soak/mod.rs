//! `soak`: a CCM under a long random workload while the cloud misbehaves, the CCM is
//! killed and the API server restarts — then a quiet phase, then the invariants a cluster
//! owner cares about (ccm-behaviour.md §6: leaked load balancers, duplicates after a retry,
//! Services stuck with the cleanup finalizer, nodes deleted by mistake, throttling storms
//! made worse by hot loops).
//!
//! How a soak runs, on one [`Environment`]:
//! 1. **Start**: the CCM, `nodes` nodes, all initialized.
//! 2. **Workload** for `duration`: the seeded [`Plan`] one step every `step_interval`
//!    (Services created, changed and deleted; nodes added, NotReady and Ready, their
//!    instances deleted in the cloud), with the [`FaultPlan`]'s rules in the cloud's fault
//!    engine (seeded with the same seed), `kill -9` of the CCM and API server restarts where
//!    the plan says. After every step: duplicate load balancers (two of one name) are
//!    sampled, cloud calls counted per second, and a CCM that died on its own is restarted
//!    (and counted).
//! 3. **Quiet**: faults off; wait (at most `quiet_limit`, upstream's service-controller
//!    backoff cap of 5 min plus a margin by default) until every LoadBalancer Service has
//!    one load balancer that answers, no load balancer lacks a Service, and every node
//!    matches its instance.
//! 4. **Cleanup**: every Service deleted; they must go (finalizer removed) and the cloud's
//!    leak report must be empty.
//!
//! Each invariant becomes one JUnit testcase with its evidence ([`Invariant`]).
//! Deterministic under the seed: the workload is identical ([`Plan::digest`]); the faults
//! roll the same sequence, though which request each lands on depends on the CCM's timing.
//!
//! With `replicas` > 1 the CCM runs as that many replicas electing a leader on the
//! `cloud-controller-manager` Lease ([`LEADER_FLAGS`]); each planned kill hits one replica
//! drawn under the seed (the leader about half the time with two), so the workload also
//! crosses leader hand-overs, counted from the Lease's `leaseTransitions`.
//!
//! Not covered yet (docs/soak.md): listener/target-group/security-rule duplicates (only
//! whole load balancers are compared).

pub mod faults;
pub mod plan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

pub use faults::FaultPlan;
/// Fault rules in the mocks' wire form, for plans beyond the presets (the Chaos cases').
pub use mock_cloud::{FaultJson, FaultKind};
pub use plan::{Plan, PlanSpec, Step};

use crate::cloud::Feature;
use crate::env::{Environment, LEADER_FLAGS, NodeIp, NodeOptions};
use crate::error::CaseError;
use crate::invariants::ingress_of;
use crate::node::{addresses, has_uninitialized_taint};
use crate::provider::Provider;
use crate::settings::Settings;

/// The port every soak Service starts on (and [`Step::ChangePort`] moves to `PORT + 1`).
const PORT: i32 = 8080;

/// What to soak, for how long, and how hard.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    pub provider: Provider,
    pub duration: Duration,
    pub services: usize,
    pub nodes: usize,
    pub seed: u64,
    pub faults: FaultPlan,
    /// Chance per workload step of a `kill -9` of the CCM (three times that right after a
    /// Service delete or update, so some kills land mid-delete and mid-update); 0: none.
    pub kill_rate: f64,
    /// Chance per workload step of an API server restart; 0: none.
    pub restart_rate: f64,
    pub step_interval: Duration,
    /// The quiet phase's bound, and the cleanup's.
    pub quiet_limit: Duration,
    /// Invariant 6's bound: cloud calls in any one second.
    pub max_calls_per_second: usize,
    /// Flags for the CCM besides the settings' (a broken variant's, in tests).
    pub ccm_args: Vec<String>,
    /// CCM processes: 1 runs it without leader election, as the conformance cases do;
    /// more run replicas with leader election, and kills hit one of them.
    pub replicas: usize,
}

impl SoakConfig {
    /// A configuration with the defaults `ccm-conformance soak` uses.
    pub fn new(provider: Provider, duration: Duration, seed: u64) -> Self {
        SoakConfig {
            provider,
            duration,
            services: 30,
            nodes: 20,
            seed,
            faults: FaultPlan::parse("light").expect("a preset"),
            kill_rate: 0.01,
            restart_rate: 0.004,
            step_interval: Duration::from_millis(500),
            quiet_limit: Duration::from_secs(330),
            max_calls_per_second: 400,
            ccm_args: Vec::new(),
            replicas: 1,
        }
    }

    fn plan(&self, load_balancers: bool) -> Plan {
        let steps = (self.duration.as_millis() / self.step_interval.as_millis().max(1)) as usize;
        Plan::draw(&PlanSpec {
            seed: self.seed,
            steps: steps.max(1),
            services: self.services,
            nodes: self.nodes,
            load_balancers,
            kill_rate: self.kill_rate,
            restart_rate: self.restart_rate,
        })
    }
}

/// One checked property, as a JUnit testcase.
#[derive(Debug, Clone)]
pub struct Invariant {
    /// `SO-1` … `SO-6`.
    pub id: &'static str,
    pub title: &'static str,
    /// `None`: held; else the evidence.
    pub failure: Option<String>,
    /// How long judging it took: the quiet phase's wait for SO-1 and SO-4, the cleanup's
    /// for SO-5 and SO-2; zero for those read off the samples (SO-3, SO-6).
    pub took: Duration,
}

/// What a soak did and found.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    pub seed: u64,
    pub digest: String,
    pub steps: usize,
    pub workload_errors: usize,
    pub faults_fired: usize,
    pub kills: usize,
    pub apiserver_restarts: usize,
    /// Times the CCM (or one of its per-node agents) was found dead without being killed
    /// (restarted each time).
    pub ccm_exits: usize,
    /// With replicas: the CCM Lease's `leaseTransitions` at the end (hand-overs).
    pub leader_transitions: Option<i32>,
    pub cloud_calls: usize,
    pub worst_calls_per_second: usize,
    /// Quiet phase start to convergence (`None`: not within the bound).
    pub converged_after: Option<Duration>,
    pub invariants: Vec<Invariant>,
    /// Every call an injected fault answered or delayed, as the cloud's journal has it.
    pub fault_journal: Vec<String>,
    /// The first workload steps the API server or the cloud refused, with why.
    pub workload_error_samples: Vec<String>,
    pub wall: Duration,
    /// The harness process's CPU time over the soak, as a share of one core.
    pub harness_cpu_share: f64,
    /// The harness process's resident memory at the start, at its peak and at the end.
    pub rss_start_kib: u64,
    /// Resident memory and the Events held through the workload, about every tenth of
    /// it: whether memory levels off or keeps climbing, and with what.
    pub samples: Vec<MemorySample>,
    pub rss_peak_kib: u64,
    pub rss_end_kib: u64,
}

/// The harness's memory at one point of the workload, beside what the API server holds
/// that lives longest: Events (deleted an `--event-ttl`, an hour by default, after their
/// last write, as kube-apiserver does).
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySample {
    /// Since the workload started.
    pub at: Duration,
    pub rss_kib: u64,
    /// Events in the cluster (`None`: the list failed, e.g. during an API server restart).
    pub events: Option<u64>,
}

impl SoakReport {
    pub fn passed(&self) -> bool {
        self.invariants.iter().all(|i| i.failure.is_none())
    }
}

/// Runs one soak on a fresh environment under `dir`; `progress` hears a line per phase and
/// about every tenth of the workload.
pub async fn soak(
    config: &SoakConfig,
    settings: Arc<Settings>,
    dir: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SoakReport, CaseError> {
    let mut args = CCM_ARGS.to_vec();
    args.extend(config.ccm_args.iter().map(String::as_str));
    let mut env = Environment::embedded(config.provider, settings, dir, &args).await?;
    let result = soak_in(&mut env, config, progress).await;
    let result = result.map_err(|e| env.with_ccm_log(e));
    env.teardown().await;
    result
}

/// The CCM flags a soak needs: the lifecycle check every second (upstream default 5 s), so
/// a node whose instance is gone goes within the quiet phase.
pub const CCM_ARGS: &[&str] = &["--node-monitor-period=1s"];

/// Runs a soak on `env`, whose CCM is not started yet and which was made with
/// [`CCM_ARGS`] (the Chaos suite's cases run it on the environment the runner gives them).
pub async fn soak_in(
    env: &mut Environment,
    config: &SoakConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SoakReport, CaseError> {
    Soak::new(config, env).run(env, progress).await
}

/// The soak's own record of the cluster and of what it saw.
struct Soak<'a> {
    config: &'a SoakConfig,
    plan: Plan,
    load_balancers: bool,
    /// Services that exist, and whether each is of type LoadBalancer now.
    services: BTreeMap<String, bool>,
    /// Nodes whose instance exists.
    nodes: BTreeSet<String>,
    /// Nodes whose instance the workload deleted.
    gone: BTreeSet<String>,
    report: SoakReport,
    /// Every node name the plan uses, comma separated: where the Services' endpoints are.
    endpoints: String,
    duplicates: Vec<String>,
    calls_per_second: BTreeMap<i64, usize>,
    journal_mark: u64,
    /// The API server's audit read up to here; the Nodes the CCM deleted so far, in order
    /// (read as the run goes: the audit log keeps only its newest entries).
    audit_mark: u64,
    ccm_node_deletes: Vec<String>,
    cpu_start: f64,
    /// Picks which replica each kill hits (seeded apart from the plan, which it leaves
    /// as it is for one replica).
    victims: fastrand::Rng,
}

impl<'a> Soak<'a> {
    fn new(config: &'a SoakConfig, env: &Environment) -> Self {
        let load_balancers = env.cloud().supports(Feature::LoadBalancers).is_ok();
        let plan = config.plan(load_balancers);
        let mut endpoints = Plan::initial_nodes(config.nodes);
        endpoints.extend(plan.steps.iter().filter_map(|s| match s {
            Step::AddNode(n) => Some(n.clone()),
            _ => None,
        }));
        Soak {
            endpoints: endpoints.join(","),
            config,
            report: SoakReport {
                seed: config.seed,
                digest: plan.digest(),
                ..SoakReport::default()
            },
            plan,
            load_balancers,
            services: BTreeMap::new(),
            nodes: BTreeSet::new(),
            gone: BTreeSet::new(),
            duplicates: Vec::new(),
            calls_per_second: BTreeMap::new(),
            journal_mark: 0,
            audit_mark: 0,
            ccm_node_deletes: Vec::new(),
            cpu_start: process_cpu_seconds(),
            victims: fastrand::Rng::with_seed(config.seed ^ 0x6b69_6c6c),
        }
    }

    async fn run(
        mut self,
        env: &mut Environment,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<SoakReport, CaseError> {
        let started = Instant::now();
        self.report.rss_start_kib = process_rss_kib();
        self.report.rss_peak_kib = self.report.rss_start_kib;
        let provider = self.config.provider.name();
        progress(&format!(
            "soak [{provider}] seed {} plan {} ({} steps, every {} ms), faults {}{}",
            self.config.seed,
            self.report.digest,
            self.plan.steps.len(),
            self.config.step_interval.as_millis(),
            self.config.faults.name,
            if self.config.replicas > 1 {
                format!(", {} CCM replicas electing a leader", self.config.replicas)
            } else {
                String::new()
            }
        ));
        for replica in self.replicas() {
            self.start_ccm(env, replica.as_deref()).await?;
        }
        for name in Plan::initial_nodes(self.config.nodes) {
            env.add_node(&name, with_ip()).await?;
            self.nodes.insert(name);
        }
        for name in &self.nodes {
            env.wait_initialized(name, Duration::from_secs(120)).await?;
        }
        progress(&format!(
            "soak [{provider}] {} nodes initialized; workload starts",
            self.nodes.len()
        ));

        let faults = env.cloud().faults();
        faults.set_seed(self.config.seed);
        faults
            .try_add_all(self.config.faults.rules.clone())
            .map_err(|e| CaseError::infra("adding the soak's fault rules", e))?;
        self.journal_mark = env.cloud().journal_mark();
        let workload_started = Instant::now();
        let steps = std::mem::take(&mut self.plan.steps);
        let tenth = (steps.len() / 10).max(1);
        for (i, step) in steps.iter().enumerate() {
            let due = workload_started + self.config.step_interval * i as u32;
            tokio::time::sleep_until(due.into()).await;
            if let Err(e) = self.apply(env, step).await {
                self.report.workload_errors += 1;
                if self.report.workload_error_samples.len() < 20 {
                    self.report
                        .workload_error_samples
                        .push(format!("{}: {e}", step.label()));
                }
            }
            self.sample(env).await;
            self.report.steps += 1;
            if (i + 1) % tenth == 0 {
                let rss = process_rss_kib();
                let events = count_events(env).await;
                self.report.samples.push(MemorySample {
                    at: workload_started.elapsed(),
                    rss_kib: rss,
                    events,
                });
                progress(&format!(
                    "soak [{provider}] {:>4}s step {}/{}: {} Services ({} LoadBalancer), {} nodes, {} faults fired, {} kills, {} API server restarts, {} CCM exits, harness RSS {} MiB, {} Events",
                    workload_started.elapsed().as_secs(),
                    i + 1,
                    steps.len(),
                    self.services.len(),
                    self.services.values().filter(|lb| **lb).count(),
                    self.nodes.len(),
                    self.report.faults_fired,
                    self.report.kills,
                    self.report.apiserver_restarts,
                    self.report.ccm_exits,
                    rss / 1024,
                    events.map_or("?".into(), |n| n.to_string()),
                ));
            }
        }
        self.plan.steps = steps;

        env.cloud().clear_faults();
        self.restart_if_dead(env).await?;
        progress(&format!(
            "soak [{provider}] quiet phase: faults off, waiting up to {}s for convergence",
            self.config.quiet_limit.as_secs()
        ));
        let quiet = Instant::now();
        let mut last = Vec::new();
        while quiet.elapsed() < self.config.quiet_limit {
            self.sample(env).await;
            last = self.convergence_gaps(env).await;
            if last.is_empty() {
                self.report.converged_after = Some(quiet.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        progress(&format!(
            "soak [{provider}] {}",
            match self.report.converged_after {
                Some(d) => format!("converged {:.1}s after the faults stopped", d.as_secs_f64()),
                None => format!("not converged: {}", summarize(&last)),
            }
        ));
        let quiet_took = quiet.elapsed();
        let (lbs, node_gaps): (Vec<String>, Vec<String>) =
            last.iter().cloned().partition(|g| !g.starts_with("node "));
        self.check(
            quiet_took,
            "SO-1",
            "every LoadBalancer Service has exactly one load balancer carrying traffic, every other Service none",
            &lbs,
        );
        self.check(
            Duration::ZERO,
            "SO-3",
            "no duplicate load balancers at any moment",
            &self.duplicates.clone(),
        );
        let mut wrongly_deleted: Vec<String> = self
            .ccm_node_deletes
            .iter()
            .filter(|n| !self.gone.contains(*n))
            .map(|n| format!("node {n} deleted by the CCM while its instance existed"))
            .collect();
        wrongly_deleted.extend(node_gaps);
        self.check(
            quiet_took,
            "SO-4",
            "no node deleted while its instance existed; every node's addresses and labels match the cloud",
            &wrongly_deleted,
        );

        // Cleanup: every Service goes; then nothing of the CCM's may be left in the cloud.
        progress(&format!(
            "soak [{provider}] cleanup: deleting {} Services",
            self.services.len()
        ));
        for name in self.services.keys() {
            let _ = env.services().delete(name, &DeleteParams::default()).await;
        }
        let cleanup = Instant::now();
        let mut stuck = Vec::new();
        while cleanup.elapsed() < self.config.quiet_limit {
            stuck = remaining_services(env).await;
            if stuck.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.check(
            cleanup.elapsed(),
            "SO-5",
            "no Service left with the cleanup finalizer after deletion",
            &stuck,
        );
        let mut leaks = Vec::new();
        let leak_check = Instant::now();
        if self.load_balancers {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                leaks = env.cloud().leaks();
                leaks.extend(
                    env.cloud().load_balancers().into_iter().map(|lb| {
                        format!("load balancer {} ({}) without a Service", lb.name, lb.id)
                    }),
                );
                if leaks.is_empty() || Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        self.check(
            leak_check.elapsed(),
            "SO-2",
            "no cloud resource the CCM created is left once every Service is deleted",
            &leaks,
        );
        self.sample(env).await;
        self.report.worst_calls_per_second =
            self.calls_per_second.values().copied().max().unwrap_or(0);
        let worst = self.report.worst_calls_per_second;
        let hot = if worst > self.config.max_calls_per_second {
            let at = self
                .calls_per_second
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(s, _)| {
                    jiff::Timestamp::from_second(*s)
                        .map(|t| t.to_string())
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            vec![format!(
                "{worst} cloud calls in the second starting {at} (bound {}); {} calls for {} workload steps",
                self.config.max_calls_per_second, self.report.cloud_calls, self.report.steps
            )]
        } else {
            Vec::new()
        };
        self.check(
            Duration::ZERO,
            "SO-6",
            "a bounded number of cloud calls per change (no hot loop)",
            &hot,
        );
        self.report.invariants.sort_by_key(|i| i.id);
        if self.config.replicas > 1 {
            let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                kube::Api::namespaced(env.client(), "kube-system");
            self.report.leader_transitions = leases
                .get_opt(crate::invariants::CCM_LEASE)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.lease_transitions);
        }
        self.report.wall = started.elapsed();
        self.report.harness_cpu_share =
            (process_cpu_seconds() - self.cpu_start) / self.report.wall.as_secs_f64().max(0.001);
        self.report.rss_end_kib = process_rss_kib();
        self.report.rss_peak_kib = self.report.rss_peak_kib.max(self.report.rss_end_kib);
        Ok(self.report)
    }

    fn check(
        &mut self,
        took: Duration,
        id: &'static str,
        title: &'static str,
        evidence: &[String],
    ) {
        self.report.invariants.push(Invariant {
            id,
            title,
            failure: (!evidence.is_empty()).then(|| summarize(evidence)),
            took,
        });
    }

    /// Carries out one step. Errors (an API server restarting, a cloud refusing) are the
    /// workload's, counted, and never stop the soak.
    async fn apply(&mut self, env: &mut Environment, step: &Step) -> Result<(), CaseError> {
        let api = env.services();
        let patch = |v: serde_json::Value| async move {
            api.patch(&name_of(step), &PatchParams::default(), &Patch::Merge(v))
                .await
                .map(|_| ())
                .map_err(|e| CaseError::infra("patching Service", e))
        };
        match step {
            Step::CreateService(name) => {
                env.services()
                    .create(&PostParams::default(), &lb_service(name, &self.endpoints)?)
                    .await
                    .map_err(|e| CaseError::infra("creating Service", e))?;
                self.services.insert(name.clone(), true);
            }
            Step::ChangePort(name) => {
                let svc = env.services().get(name).await.map_err(api_error)?;
                let now = svc
                    .spec
                    .as_ref()
                    .and_then(|s| s.ports.as_ref())
                    .and_then(|p| p.first())
                    .map_or(PORT, |p| p.port);
                let port = if now == PORT { PORT + 1 } else { PORT };
                patch(serde_json::json!({"spec": {"ports": [
                    {"name": "http", "port": port, "targetPort": PORT, "protocol": "TCP"}
                ]}}))
                .await?;
            }
            Step::ToggleSourceRanges(name) => {
                if self.services.get(name) != Some(&true) {
                    return Ok(());
                }
                let svc = env.services().get(name).await.map_err(api_error)?;
                let set = svc
                    .spec
                    .as_ref()
                    .and_then(|s| s.load_balancer_source_ranges.as_ref())
                    .is_some_and(|r| !r.is_empty());
                let ranges = if set {
                    serde_json::Value::Null
                } else {
                    serde_json::json!(["127.0.0.0/8"])
                };
                patch(serde_json::json!({"spec": {"loadBalancerSourceRanges": ranges}})).await?;
            }
            Step::ToggleTrafficPolicy(name) => {
                if self.services.get(name) != Some(&true) {
                    return Ok(());
                }
                let svc = env.services().get(name).await.map_err(api_error)?;
                let local = svc
                    .spec
                    .as_ref()
                    .and_then(|s| s.external_traffic_policy.as_deref())
                    == Some("Local");
                let policy = if local { "Cluster" } else { "Local" };
                patch(serde_json::json!({"spec": {"externalTrafficPolicy": policy}})).await?;
            }
            Step::ToggleType(name) => {
                let lb = self.services.get(name).copied().unwrap_or(false);
                let spec = if lb {
                    // What only LoadBalancer (or NodePort) Services may carry goes with it.
                    serde_json::json!({"type": "ClusterIP", "externalTrafficPolicy": null,
                                       "loadBalancerSourceRanges": null})
                } else {
                    serde_json::json!({"type": "LoadBalancer"})
                };
                patch(serde_json::json!({ "spec": spec })).await?;
                self.services.insert(name.clone(), !lb);
            }
            Step::DeleteService(name) => {
                self.services.remove(name);
                env.services()
                    .delete(name, &DeleteParams::default())
                    .await
                    .map_err(api_error)?;
            }
            Step::AddNode(name) => {
                self.nodes.insert(name.clone());
                env.add_node(name, with_ip()).await?;
            }
            Step::SetReady(name, ready) => env.set_node_ready(name, *ready).await?,
            Step::DeleteInstance(name) => {
                self.nodes.remove(name);
                self.gone.insert(name.clone());
                let instance = env.cloud().instance_by_name(name);
                let _ = env.set_node_ready(name, false).await;
                env.stop_kubelet(name).await?;
                if let Some(i) = instance {
                    env.cloud().delete_instance(&i.id)?;
                }
            }
            Step::KillCcm => {
                let victim = self.victim();
                match &victim {
                    None => env.kill_ccm().await,
                    Some(name) => env.kill_replica(name).await,
                }
                self.report.kills += 1;
                self.start_ccm(env, victim.as_deref()).await?;
            }
            Step::RestartApiServer => {
                env.restart_apiserver().await?;
                self.report.apiserver_restarts += 1;
            }
        }
        Ok(())
    }

    /// The CCM processes by replica name; `None` is the one CCM without leader election.
    fn replicas(&self) -> Vec<Option<String>> {
        if self.config.replicas > 1 {
            (1..=self.config.replicas)
                .map(|i| Some(format!("r{i}")))
                .collect()
        } else {
            vec![None]
        }
    }

    /// The process the next kill hits.
    fn victim(&mut self) -> Option<String> {
        let all = self.replicas();
        let i = self.victims.usize(..all.len());
        all[i].clone()
    }

    /// Starts the CCM (or one replica), retrying a start that fails (a fault may hit its
    /// start-up calls).
    async fn start_ccm(
        &mut self,
        env: &mut Environment,
        replica: Option<&str>,
    ) -> Result<(), CaseError> {
        let mut last = None;
        for _ in 0..5 {
            let started = match replica {
                None => env.start_ccm().await,
                Some(name) => env.start_replica(name, None, LEADER_FLAGS).await,
            };
            match started {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.report.ccm_exits += 1;
                    last = Some(e);
                }
            }
        }
        Err(last.expect("five attempts"))
    }

    async fn restart_if_dead(&mut self, env: &mut Environment) -> Result<(), CaseError> {
        for replica in self.replicas() {
            let dead = match &replica {
                None => env.ccm_alive().is_err(),
                Some(name) => !env.replica_alive(name),
            };
            if dead {
                self.report.ccm_exits += 1;
                self.start_ccm(env, replica.as_deref()).await?;
            }
        }
        Ok(())
    }

    /// After every step: duplicates, calls per second, faults fired, memory; a CCM that
    /// died on its own is restarted.
    async fn sample(&mut self, env: &mut Environment) {
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for lb in env.cloud().load_balancers() {
            by_name.entry(lb.name).or_default().push(lb.id);
        }
        for (name, ids) in by_name.into_iter().filter(|(_, ids)| ids.len() > 1) {
            // The first sighting of each duplicated name is the evidence.
            if !self
                .duplicates
                .iter()
                .any(|d| d.contains(&format!(" {name} ")))
            {
                self.duplicates.push(format!(
                    "load balancer name {name} held by {} load balancers {ids:?}",
                    ids.len()
                ));
            }
        }
        let calls = env.cloud().calls_since(self.journal_mark);
        self.report
            .fault_journal
            .extend(env.cloud().faulted_lines_since(self.journal_mark));
        if let Some(last) = calls.last() {
            self.journal_mark = last.seq;
        }
        for c in &calls {
            *self.calls_per_second.entry(c.time.as_second()).or_default() += 1;
            self.report.faults_fired += usize::from(c.faulted);
        }
        self.report.cloud_calls += calls.len();
        let audit_mark = env.audit_mark();
        self.ccm_node_deletes.extend(
            env.ccm_writes_since(self.audit_mark)
                .into_iter()
                .filter(|e| e.seq <= audit_mark)
                .filter(|e| e.resource == "nodes" && e.verb == "delete" && e.subresource.is_none())
                .filter_map(|e| e.name),
        );
        self.audit_mark = audit_mark;
        self.report.rss_peak_kib = self.report.rss_peak_kib.max(process_rss_kib());
        if let Err(e) = self.restart_if_dead(env).await {
            tracing::info!(error = %e, "the CCM does not start again");
        }
        match env.restart_exited_node_managers().await {
            Ok(n) => self.report.ccm_exits += n,
            Err(e) => tracing::info!(error = %e, "a node agent does not start again"),
        }
    }

    /// What still differs from a converged cluster (empty: converged). Entries about nodes
    /// start with `node `.
    async fn convergence_gaps(&self, env: &Environment) -> Vec<String> {
        let mut gaps = Vec::new();
        if self.load_balancers {
            let lbs = env.cloud().load_balancers();
            let mut claimed = BTreeSet::new();
            for (name, is_lb) in &self.services {
                let Ok(svc) = env.services().get(name).await else {
                    gaps.push(format!("Service {name} cannot be read"));
                    continue;
                };
                let ingress = ingress_of(&svc);
                if !is_lb {
                    if !ingress.is_empty() {
                        gaps.push(format!(
                            "ClusterIP Service {name} still shows ingress {ingress:?}"
                        ));
                    }
                    continue;
                }
                let Some(first) = ingress.first() else {
                    gaps.push(format!("Service {name} has no ingress"));
                    continue;
                };
                let vip = env
                    .cloud()
                    .resolve_ingress(first)
                    .unwrap_or_else(|| first.clone());
                let mine: Vec<_> = lbs.iter().filter(|lb| lb.vip == vip).collect();
                if mine.len() != 1 {
                    gaps.push(format!(
                        "Service {name} (ingress {first}) has {} load balancers at {vip}",
                        mine.len()
                    ));
                }
                claimed.extend(mine.iter().map(|lb| lb.id.clone()));
                let port = svc
                    .spec
                    .as_ref()
                    .and_then(|s| s.ports.as_ref())
                    .and_then(|p| p.first())
                    .map_or(PORT, |p| p.port);
                let target = format!("{first}:{port}");
                if !matches!(
                    crate::traffic::tcp_line(&target, Duration::from_secs(1)).await,
                    Ok(Some(_))
                ) {
                    gaps.push(format!("Service {name}: no answer through {target}"));
                }
            }
            for lb in lbs.iter().filter(|lb| !claimed.contains(&lb.id)) {
                gaps.push(format!(
                    "load balancer {} ({}, {}) belongs to no LoadBalancer Service",
                    lb.name, lb.id, lb.vip
                ));
            }
        }
        for name in &self.nodes {
            let Ok(node) = env.node(name).await else {
                gaps.push(format!("node {name} is missing while its instance exists"));
                continue;
            };
            if has_uninitialized_taint(&node) {
                gaps.push(format!("node {name} still has the uninitialized taint"));
                continue;
            }
            if let Some(instance) = env.cloud().instance_by_name(name) {
                let have = addresses(&node);
                let missing: Vec<_> = instance
                    .cloud_addresses()
                    .into_iter()
                    .filter(|a| !have.contains(a))
                    .collect();
                if !missing.is_empty() {
                    gaps.push(format!(
                        "node {name} lacks the cloud's addresses {missing:?}"
                    ));
                }
                let zone = node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("topology.kubernetes.io/zone"));
                if !instance.zone.is_empty() && zone != Some(&instance.zone) {
                    gaps.push(format!(
                        "node {name} has zone label {zone:?}, its instance is in {}",
                        instance.zone
                    ));
                }
            }
        }
        for name in &self.gone {
            if env.node(name).await.is_ok() {
                gaps.push(format!(
                    "node {name} is still there though its instance is gone"
                ));
            }
        }
        gaps
    }
}

fn name_of(step: &Step) -> String {
    match step {
        Step::CreateService(n)
        | Step::ChangePort(n)
        | Step::ToggleSourceRanges(n)
        | Step::ToggleTrafficPolicy(n)
        | Step::ToggleType(n)
        | Step::DeleteService(n)
        | Step::AddNode(n)
        | Step::SetReady(n, _)
        | Step::DeleteInstance(n) => n.clone(),
        Step::KillCcm | Step::RestartApiServer => String::new(),
    }
}

fn api_error(e: kube::Error) -> CaseError {
    CaseError::infra("the API server", e)
}

fn with_ip() -> NodeOptions {
    NodeOptions {
        node_ip: Some(NodeIp::FirstInternal),
        ..Default::default()
    }
}

/// A soak Service. There are no pods: every node the plan ever names is declared to have a
/// local endpoint (the simulated kube-proxy's annotation), so the Service keeps answering
/// when its `externalTrafficPolicy` turns Local, as a Deployment spread over every node would.
fn lb_service(name: &str, nodes: &str) -> Result<Service, CaseError> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name,
                     "annotations": {mock_kubelet::LOCAL_ENDPOINTS_ANNOTATION: nodes}},
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}]}
    }))
    .map_err(|e| CaseError::infra("building Service", e))
}

/// Services still in the API (each with its finalizers), after every one was deleted.
async fn remaining_services(env: &Environment) -> Vec<String> {
    match env.services().list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some("default"))
            .filter(|s| s.metadata.name.as_deref() != Some("kubernetes"))
            .map(|s| {
                format!(
                    "Service {} still there, finalizers {:?}",
                    s.metadata.name.as_deref().unwrap_or("?"),
                    s.metadata.finalizers.clone().unwrap_or_default()
                )
            })
            .collect(),
        Err(e) => vec![format!("listing Services: {e}")],
    }
}

/// The first few pieces of evidence and how many more there are.
fn summarize(evidence: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut s = evidence
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if evidence.len() > SHOWN {
        s.push_str(&format!("; and {} more", evidence.len() - SHOWN));
    }
    s
}

/// This process's user + system CPU seconds (`/proc/self/stat`; 0 where unreadable).
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the state field.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    // USER_HZ is 100 on Linux for every architecture the harness runs on.
    ticks / 100.0
}

/// How many Events the cluster holds: a one-item list and its `remainingItemCount`.
async fn count_events(env: &Environment) -> Option<u64> {
    let events: kube::Api<k8s_openapi::api::core::v1::Event> = kube::Api::all(env.client());
    let page = events
        .list_metadata(&ListParams::default().limit(1))
        .await
        .ok()?;
    Some(page.items.len() as u64 + page.metadata.remaining_item_count.unwrap_or(0).max(0) as u64)
}

/// This process's resident set size in KiB (`VmRSS`; 0 where unreadable).
fn process_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_summarized_with_a_count_of_the_rest() {
        let ev: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
        let s = summarize(&ev);
        assert!(s.starts_with("e0; e1") && s.ends_with("and 2 more"), "{s}");
        assert_eq!(summarize(&ev[..1]), "e0");
    }

    #[test]
    fn the_process_reads_its_own_cpu_and_memory() {
        assert!(process_rss_kib() > 0);
        let before = process_cpu_seconds();
        let mut x = 0u64;
        for i in 0..30_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(process_cpu_seconds() >= before);
    }

    #[test]
    fn steps_follow_the_duration_and_interval() {
        let mut c = SoakConfig::new(
            Provider::parse("openstack").unwrap(),
            Duration::from_secs(10),
            5,
        );
        c.step_interval = Duration::from_millis(250);
        assert_eq!(c.plan(true).steps.len(), 40);
        c.kill_rate = 0.0;
        c.restart_rate = 0.0;
        let p = c.plan(true);
        assert_eq!(
            p.count(|s| matches!(s, Step::KillCcm | Step::RestartApiServer)),
            0
        );
    }
}
