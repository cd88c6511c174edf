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

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::case::CaseError;
use crate::cloud::Provider;
use crate::env::{Environment, NodeIp, NodeOptions};
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
    /// Load-balancer API calls and writes caused by adding [`CHURN_NODES`] nodes.
    pub add_calls: usize,
    pub add_writes: usize,
    /// The same for removing them again.
    pub remove_calls: usize,
    pub remove_writes: usize,
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
    let mut env = Environment::embedded(provider, settings, dir, ccm_args).await?;
    let result = run(&mut env, services, nodes).await;
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

    // Churn: add CHURN_NODES nodes, wait for the cloud to settle; remove them, again.
    let (c0, w0) = (
        env.cloud().load_balancer_calls(),
        env.cloud().load_balancer_writes(),
    );
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
    for name in &churn {
        env.stop_kubelet(name).await?;
        env.nodes()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| CaseError::infra("deleting node", e))?;
    }
    settle(env).await?;
    let (c2, w2) = (
        env.cloud().load_balancer_calls(),
        env.cloud().load_balancer_writes(),
    );

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
        add_calls: c1 - c0,
        add_writes: w1 - w0,
        remove_calls: c2 - c1,
        remove_writes: w2 - w1,
    })
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
