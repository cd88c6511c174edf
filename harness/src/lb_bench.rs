//! `bench lb`: what a load-balancer-heavy cluster costs the cloud and how fast it serves.
//!
//! Why: the complaints in ccm-behaviour.md §6 (items 10 and 11: cloud throttling from LB
//! re-syncs on node churn, node changes taking long to reach load balancers) are about
//! volume and latency, which timed tests cannot judge but numbers can. The benchmark
//! registers `nodes` nodes, creates `services` LoadBalancer Services at once and reports
//! the time from each Service's creation to an answer through its ingress (p50/p99/max),
//! the load-balancer API calls per Service, then the calls caused by adding and removing
//! [`CHURN_NODES`] nodes. The ideal churn cost is one backend update per Service per node
//! sync (kubernetes/cloud-provider controllers/service/controller.go `nodeSyncService`).
//!
//! How "calls per node change" is measured (issue 5: "one UpdateLoadBalancer per affected
//! Service and nothing else"): the churn nodes are added as one burst and removed as one
//! burst (kubelets stopped first, then the ten Node deletes sent at once), as a cluster
//! autoscaler does. The CCM's node-sync loop runs once per node-set change it observes
//! (upstream `nodeSyncLoop`/`triggerNodeSync`: a burst coalesces only into the syncs that
//! start after it), so a burst may be seen as one change or as a few. Each
//! `UpdateLoadBalancer` the service controller makes is counted by its
//! `UpdatedLoadBalancer` Event; the cloud side is counted from the mock's journal:
//! - OpenStack: a write is any non-GET on the Octavia API; one `UpdateLoadBalancer` is one
//!   batch member update (`PUT lbaas/pools/{id}/members`) per pool, i.e. one for the
//!   bench's single-port Services, and none when the node set changed but the members did
//!   not (a new node has no address yet).
//! - AWS: a write is any non-`Describe*` ELB/ELBv2 action; one `UpdateLoadBalancer` of a
//!   classic ELB is one `RegisterInstancesWithLoadBalancer` (nodes added) or one
//!   `DeregisterInstancesFromLoadBalancer` (nodes removed) — both in one reconcile when a
//!   node-set change adds and removes nodes, which the bench does not do; of an NLB it is
//!   `RegisterTargets`/`DeregisterTargets` per target group.
//!
//! So the target reads: writes per `UpdateLoadBalancer` = 1.00 and `UpdateLoadBalancer`
//! calls per Service = node-set changes the CCM observed (1 when the burst coalesced).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::case::CaseError;
use crate::env::{Environment, NodeIp, NodeOptions};
use crate::provider::Provider;
use crate::settings::Settings;

/// Nodes added, then removed, in the churn phase.
pub const CHURN_NODES: usize = 10;
/// How long each phase may take before the benchmark gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(300);
/// The cloud is considered settled after this long without a load-balancer call.
const QUIET: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct LbBenchReport {
    pub services: usize,
    pub nodes: usize,
    /// Service creation to the first answer through its ingress.
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// First creation to the last Service answering.
    pub total: Duration,
    /// Load-balancer API calls (and writes) while creating every Service, per Service.
    pub calls_per_service: f64,
    pub writes_per_service: f64,
    /// Every cloud call a load balancer causes while creating every Service, per Service:
    /// the load-balancer API plus the network calls around it (OpenStack: Neutron ports and
    /// floating IPs; AWS: EC2 security groups, subnets, VPCs — not instance lookups, which
    /// the node controllers make on their own clock).
    pub cloud_calls_per_service: f64,
    /// Load-balancer API calls and writes caused by adding [`CHURN_NODES`] nodes.
    pub add_calls: usize,
    pub add_writes: usize,
    /// The same for removing them again.
    pub remove_calls: usize,
    pub remove_writes: usize,
    /// `UpdateLoadBalancer` calls (the service controller's `UpdatedLoadBalancer` and
    /// `UpdateLoadBalancerFailed` Events) caused by adding, and by removing, the nodes.
    pub add_updates: usize,
    pub remove_updates: usize,
    /// `--concurrent-service-syncs` the CCM ran with (upstream default 1).
    pub concurrent_service_syncs: usize,
}

impl LbBenchReport {
    /// Cloud writes per `UpdateLoadBalancer` call (target 1.00).
    pub fn writes_per_update(writes: usize, updates: usize) -> f64 {
        writes as f64 / updates.max(1) as f64
    }

    /// `UpdateLoadBalancer` calls per Service (= node-set changes the CCM observed).
    pub fn updates_per_service(&self, updates: usize) -> f64 {
        updates as f64 / self.services.max(1) as f64
    }
}

/// `--concurrent-service-syncs` in effect for `args` (the last one wins, as with pflag).
pub fn concurrent_service_syncs<'a>(args: impl IntoIterator<Item = &'a str>) -> usize {
    let mut value = 1;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let v = match arg.strip_prefix("--concurrent-service-syncs") {
            Some(rest) if rest.starts_with('=') => rest[1..].to_owned(),
            Some("") => args.next().unwrap_or_default().to_owned(),
            _ => continue,
        };
        if let Ok(n) = v.parse() {
            value = n;
        }
    }
    value
}

/// Runs the benchmark once on a fresh environment.
pub async fn load_balancers(
    provider: Provider,
    settings: Arc<Settings>,
    dir: &Path,
    services: usize,
    nodes: usize,
    ccm_args: &[&str],
) -> Result<LbBenchReport, CaseError> {
    let syncs = concurrent_service_syncs(
        ccm_args
            .iter()
            .copied()
            .chain(settings.ccm_args.iter().map(String::as_str)),
    );
    let mut env = Environment::embedded(provider, settings, dir, ccm_args).await?;
    let result = run(&mut env, services, nodes).await.map(|r| LbBenchReport {
        concurrent_service_syncs: syncs,
        ..r
    });
    let result = result.map_err(|e| env.with_ccm_log(e));
    env.teardown().await;
    result
}

fn with_ip() -> NodeOptions {
    NodeOptions {
        node_ip: Some(NodeIp::FirstInternal),
        ..Default::default()
    }
}

fn lb_service(name: &str) -> Result<Service, CaseError> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}
    }))
    .map_err(|e| CaseError::infra("building Service", e))
}

fn first_ingress(s: &Service) -> Option<String> {
    let ingress = s
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?;
    let first = ingress.first()?;
    first.ip.clone().or(first.hostname.clone())
}

async fn run(
    env: &mut Environment,
    services: usize,
    nodes: usize,
) -> Result<LbBenchReport, CaseError> {
    env.start_ccm().await?;
    for i in 0..nodes {
        env.add_node(&format!("node-{i:04}"), with_ip()).await?;
    }
    for i in 0..nodes {
        env.wait_initialized(&format!("node-{i:04}"), Duration::from_secs(120))
            .await?;
    }
    let names: Vec<String> = (0..services).map(|i| format!("lb-{i:04}")).collect();

    // Each Service's first ingress, as a watch sees it; a probe per Service then waits for
    // an answer through it.
    let answered: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = {
        let answered = answered.clone();
        let api = env.services();
        tokio::spawn(async move {
            let mut probing = std::collections::HashSet::new();
            let mut stream = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Ok(Some(s)) = stream.try_next().await {
                let (Some(name), Some(ingress)) = (s.metadata.name.clone(), first_ingress(&s))
                else {
                    continue;
                };
                if !probing.insert(name.clone()) {
                    continue;
                }
                let answered = answered.clone();
                tokio::spawn(async move {
                    let addr = format!("{ingress}:8080");
                    let deadline = Instant::now() + PHASE_LIMIT;
                    while Instant::now() < deadline {
                        if let Ok(Some(_)) =
                            crate::traffic::tcp_line(&addr, Duration::from_secs(1)).await
                        {
                            answered
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .insert(name, Instant::now());
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                });
            }
        })
    };

    let calls_before = env.cloud().load_balancer_calls();
    let cloud_before = env.cloud().load_balancer_related_calls();
    let writes_before = env.cloud().load_balancer_writes();
    let api = env.services();
    let started = Instant::now();
    let created: Vec<(String, Instant)> = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let api = api.clone();
            async move {
                let svc = lb_service(&name)?;
                let at = Instant::now();
                api.create(&PostParams::default(), &svc)
                    .await
                    .map_err(|e| CaseError::infra("creating Service", e))?;
                Ok::<_, CaseError>((name, at))
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        let done = answered.lock().unwrap_or_else(|p| p.into_inner()).len();
        if done >= services {
            break;
        }
        env.ccm_alive()?;
        if Instant::now() > deadline {
            watch.abort();
            return Err(CaseError::failed(format!(
                "only {done}/{services} Services answered through their ingress within {}s",
                PHASE_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    watch.abort();
    let answered = answered.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut latencies: Vec<Duration> = created
        .iter()
        .filter_map(|(n, at)| answered.get(n).map(|t| t.saturating_duration_since(*at)))
        .collect();
    latencies.sort();
    let last = answered.values().max().copied().unwrap_or(started);
    settle(env).await?;
    let per = |n: usize| n as f64 / services.max(1) as f64;
    let calls_per_service = per(env.cloud().load_balancer_calls() - calls_before);
    let writes_per_service = per(env.cloud().load_balancer_writes() - writes_before);
    let cloud_calls_per_service = per(env.cloud().load_balancer_related_calls() - cloud_before);

    // Churn: add CHURN_NODES nodes, wait for the cloud to settle; remove them, again.
    let (c0, w0) = (
        env.cloud().load_balancer_calls(),
        env.cloud().load_balancer_writes(),
    );
    let u0 = update_events(env).await?;
    let churn: Vec<String> = (0..CHURN_NODES).map(|i| format!("churn-{i:02}")).collect();
    for name in &churn {
        env.add_node(name, with_ip()).await?;
    }
    for name in &churn {
        env.wait_initialized(name, Duration::from_secs(120)).await?;
    }
    settle(env).await?;
    let (c1, w1) = (
        env.cloud().load_balancer_calls(),
        env.cloud().load_balancer_writes(),
    );
    let u1 = update_events(env).await?;
    // One burst: kubelets first (they would re-register their Node), then every delete at
    // once.
    for name in &churn {
        env.stop_kubelet(name).await?;
    }
    let nodes_api = env.nodes();
    futures::future::try_join_all(churn.iter().map(|name| {
        let api = nodes_api.clone();
        async move {
            api.delete(name, &DeleteParams::default())
                .await
                .map_err(|e| CaseError::infra("deleting node", e))
        }
    }))
    .await?;
    settle(env).await?;
    let (c2, w2) = (
        env.cloud().load_balancer_calls(),
        env.cloud().load_balancer_writes(),
    );
    let u2 = update_events(env).await?;

    let pct = |p: f64| {
        latencies
            .get(
                ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len().max(1)) - 1,
            )
            .copied()
            .unwrap_or_default()
    };
    Ok(LbBenchReport {
        services,
        nodes,
        p50: pct(0.50),
        p99: pct(0.99),
        max: latencies.last().copied().unwrap_or_default(),
        total: last.saturating_duration_since(started),
        calls_per_service,
        writes_per_service,
        cloud_calls_per_service,
        add_calls: c1 - c0,
        add_writes: w1 - w0,
        remove_calls: c2 - c1,
        remove_writes: w2 - w1,
        add_updates: u1.saturating_sub(u0),
        remove_updates: u2.saturating_sub(u1),
        concurrent_service_syncs: 1,
    })
}

/// `UpdateLoadBalancer` calls so far: the service controller's `UpdatedLoadBalancer` and
/// `UpdateLoadBalancerFailed` Events (the bench never syncs to zero nodes), by occurrence:
/// client-go's recorder folds a repeat of an identical Event into the first one's
/// `count`. Events are written off the sync path, so this waits until the count holds
/// still for a moment.
async fn update_events(env: &Environment) -> Result<usize, CaseError> {
    let api: Api<Event> = Api::namespaced(env.client(), "default");
    let count = || async {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| CaseError::infra("listing events", e))?;
        Ok::<_, CaseError>(
            list.items
                .iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some("Service")
                        && matches!(
                            e.reason.as_deref(),
                            Some("UpdatedLoadBalancer" | "UpdateLoadBalancerFailed")
                        )
                })
                .map(|e| e.count.unwrap_or(1).max(1) as usize)
                .sum(),
        )
    };
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut last = count().await?;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = count().await?;
        if now == last || Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// Waits until the CCM made no load-balancer call for [`QUIET`].
async fn settle(env: &mut Environment) -> Result<(), CaseError> {
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut last = env.cloud().load_balancer_calls();
    let mut since = Instant::now();
    while since.elapsed() < QUIET {
        if Instant::now() > deadline {
            return Err(CaseError::failed("the load-balancer API never went quiet"));
        }
        env.ccm_alive()?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = env.cloud().load_balancer_calls();
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_service_syncs_defaults_to_upstream_and_last_flag_wins() {
        assert_eq!(concurrent_service_syncs([]), 1);
        assert_eq!(
            concurrent_service_syncs(["--concurrent-service-syncs=4"]),
            4
        );
        assert_eq!(
            concurrent_service_syncs([
                "--concurrent-service-syncs",
                "3",
                "--v=2",
                "--concurrent-service-syncs=8"
            ]),
            8
        );
        assert_eq!(
            concurrent_service_syncs(["--concurrent-service-syncs-x=9"]),
            1
        );
    }

    #[test]
    fn writes_per_update_guards_zero() {
        assert_eq!(LbBenchReport::writes_per_update(100, 100), 1.0);
        assert_eq!(LbBenchReport::writes_per_update(5, 0), 5.0);
    }
}
