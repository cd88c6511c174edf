//! Benchmarks that print numbers (performance targets live here, not in timed tests).
//!
//! `node_init`: N nodes register at once on the mock cloud; for each, the time from just
//! before its kubelet's Node POST to the moment a watch sees the Node without the
//! uninitialized taint. Reports p50/p99/max and the total time from the first registration
//! to the last taint removal.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use mock_kubelet::{KubeletConfig, SimKubelet};

use crate::case::CaseError;
use crate::cloud::{InstanceSpec, Provider};
use crate::env::Environment;
use crate::node::has_uninitialized_taint;
use crate::settings::Settings;

#[derive(Debug, Clone)]
pub struct NodeInitReport {
    pub nodes: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// First registration to last taint removal.
    pub total: Duration,
    /// Time to register every Node (the kubelets' POSTs).
    pub registration: Duration,
}

/// Registers `nodes` nodes at once against the CCM in `settings` (with `ccm_args`).
pub async fn node_init(
    provider: Provider,
    settings: Arc<Settings>,
    dir: &Path,
    nodes: usize,
    ccm_args: &[&str],
) -> Result<NodeInitReport, CaseError> {
    let mut env = Environment::embedded(provider, settings, dir, ccm_args).await?;
    let result = run(&mut env, nodes).await;
    let result = result.map_err(|e| env.with_ccm_log(e));
    env.teardown().await;
    result
}

async fn run(env: &mut Environment, nodes: usize) -> Result<NodeInitReport, CaseError> {
    let names: Vec<String> = (0..nodes).map(|i| format!("node-{i:04}")).collect();
    for name in &names {
        env.cloud().create_instance(InstanceSpec::named(name))?;
    }
    env.start_ccm().await?;

    // Watch for taint removals before any node exists.
    let removed: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let api: Api<Node> = env.nodes();
    let watch = {
        let removed = removed.clone();
        tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Ok(Some(node)) = stream.try_next().await {
                if !has_uninitialized_taint(&node) {
                    let name = node.metadata.name.unwrap_or_default();
                    removed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };

    let client = env.kubelet_client();
    let started = Instant::now();
    let registered: Vec<(String, Instant, SimKubelet)> =
        futures::stream::iter(names.iter().cloned())
            .map(|name| {
                let client = client.clone();
                async move {
                    let at = Instant::now();
                    let kubelet = SimKubelet::start(client, KubeletConfig::new(&name))
                        .await
                        .map_err(|e| CaseError::infra("registering node", e))?;
                    Ok::<_, CaseError>((name, at, kubelet))
                }
            })
            .buffer_unordered(64)
            .try_collect()
            .await?;
    let registration = started.elapsed();

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = removed.lock().unwrap_or_else(|p| p.into_inner()).len();
        if done >= nodes {
            break;
        }
        env.ccm_alive()?;
        if Instant::now() > deadline {
            return Err(CaseError::failed(format!(
                "only {done}/{nodes} nodes initialized within 120 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    watch.abort();
    let removed = removed.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut latencies: Vec<Duration> = registered
        .iter()
        .filter_map(|(name, at, _)| removed.get(name).map(|r| r.saturating_duration_since(*at)))
        .collect();
    latencies.sort();
    let last = removed.values().max().copied().unwrap_or(started);
    let pct = |p: f64| {
        latencies[((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    Ok(NodeInitReport {
        nodes,
        p50: pct(0.50),
        p99: pct(0.99),
        max: *latencies.last().unwrap_or(&Duration::ZERO),
        total: last.saturating_duration_since(started),
        registration,
    })
}
