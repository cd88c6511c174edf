//! Load-balancer traffic while the Service's endpoints change under it: a UDP server pod
//! cycling on the same or another node, session affinity, and a DaemonSet rolling update
//! (ccm-behaviour.md LB-22, LB-23; kubernetes/kubernetes `test/e2e/network/loadbalancer.go`
//! "should be able to preserve UDP traffic when server pod cycles for a LoadBalancer
//! service on same nodes / on different nodes", "should have session affinity work for
//! LoadBalancer service", and "should not have connectivity disruption during rolling
//! update with externalTrafficPolicy=Cluster / Local", which asks for at least 95%
//! successful requests).
//!
//! There are no pods: the simulated kube-proxy answers with the endpoint named on the
//! Service (`ccm-conformance.io/endpoints`, `pod@node[/terminating]`, see mocks/kubelet
//! `kube_proxy.rs`), choosing as kube-proxy would (Local/Cluster, ClientIP affinity,
//! terminating-endpoint fallback). So in this form the cases check the CCM's side — a UDP
//! (LB-22) or TCP (LB-23) load balancer whose listeners, pools and members keep one
//! client's flow reaching whichever endpoint serves now — while kube-proxy's own part
//! (conntrack of UDP flows, graceful termination) is only exercised against a real cluster.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::{CaseError, Environment, Probe, ensure, eventually};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use super::{
    LB_TIMEOUT, SVC, create, delete_and_check_leaks, ready_ingress, service, two_nodes, wait_reason,
};

/// The Service annotation naming endpoints (mocks/kubelet kube_proxy.rs
/// `ENDPOINTS_ANNOTATION`).
const ENDPOINTS: &str = "ccm-conformance.io/endpoints";
const UDP_PORT: u16 = 5353;
/// How long a cycled server may take to answer the same client flow (the mock's stand-in
/// for upstream's `loadBalancerLagTimeout`).
const RECOVERY: Duration = Duration::from_secs(10);
/// Requests an affinity check sends (upstream `checkAffinity` uses 15).
const AFFINITY_REQUESTS: usize = 15;
/// Upstream's bar for a rolling update (`loadbalancer.go`: 95% of requests succeed).
const MIN_SUCCESS_RATE: f64 = 0.95;
/// The pace of the LB-23 client (upstream hits the load balancer continuously).
const REQUEST_PERIOD: Duration = Duration::from_millis(50);

/// Sets the Service's endpoints (and other fields) with a merge patch.
async fn patch_service(env: &Environment, patch: serde_json::Value) -> Result<(), CaseError> {
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| CaseError::infra("patching Service", e))
}

async fn set_endpoints(env: &Environment, list: &str) -> Result<(), CaseError> {
    patch_service(env, json!({"metadata": {"annotations": {ENDPOINTS: list}}})).await
}

/// The address a client sends to: the ingress IP, or what an ingress hostname stands for
/// (through the mock clouds' resolvers, as TCP clients dial).
fn target(ingress: &str, port: u16) -> String {
    ccm_harness::traffic::resolve_addr(&format!("{ingress}:{port}"))
}

/// One UDP client socket (one 5-tuple for the whole case) sending a datagram every 100 ms
/// and recording each answer.
struct UdpFlow {
    answers: Arc<Mutex<Vec<(Instant, String)>>>,
    sent: Arc<Mutex<usize>>,
    task: JoinHandle<()>,
}

impl UdpFlow {
    async fn start(target: String) -> Result<Self, CaseError> {
        let socket = UdpSocket::bind("0.0.0.0:0")
            .await
            .map_err(|e| CaseError::infra("binding the UDP client", e))?;
        let answers = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(Mutex::new(0usize));
        let (a, s) = (answers.clone(), sent.clone());
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                if socket.send_to(b"hostname", &target).await.is_err() {
                    continue;
                }
                *s.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                let got = tokio::time::timeout(Duration::from_millis(90), socket.recv(&mut buf));
                if let Ok(Ok(n)) = got.await {
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    a.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((Instant::now(), text));
                }
            }
        });
        Ok(Self {
            answers,
            sent,
            task,
        })
    }

    /// Waits until `server` answers the flow after `since`; returns how long that took.
    async fn wait_for(&self, server: &str, since: Instant) -> Result<Duration, CaseError> {
        let answers = self.answers.clone();
        eventually(&format!("the UDP flow to reach {server}"), RECOVERY, || {
            let answers = answers.clone();
            async move {
                let list = answers.lock().unwrap_or_else(|p| p.into_inner());
                let hit = list
                    .iter()
                    .find(|(at, who)| *at >= since && who == server)
                    .map(|(at, _)| at.duration_since(since));
                let last = list.last().map(|(_, w)| w.clone());
                Ok(match hit {
                    Some(d) => Probe::Done(d),
                    None => Probe::Pending(format!("last answer {last:?}")),
                })
            }
        })
        .await
    }

    fn stop(self) -> (usize, usize) {
        self.task.abort();
        let sent = *self.sent.lock().unwrap_or_else(|p| p.into_inner());
        let answered = self.answers.lock().unwrap_or_else(|p| p.into_inner()).len();
        (sent, answered)
    }
}

/// One datagram from a fresh socket (a new flow); the answer, if any within a second.
async fn udp_once(target: &str) -> Option<String> {
    let socket = UdpSocket::bind("0.0.0.0:0").await.ok()?;
    socket.send_to(b"hostname", target).await.ok()?;
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(1), socket.recv(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).to_string())
}

/// Which servers answer [`AFFINITY_REQUESTS`] new flows; `Err` names the first flow left
/// unanswered. An affinity change may rebuild the load balancer (GCE recreates the target
/// pool and its forwarding rule: cloud-provider-gcp `gce_loadbalancer_external.go`,
/// `tpNeedsRecreation`), so the callers wait through unanswered rounds.
async fn affinity_answers(target: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for _ in 0..AFFINITY_REQUESTS {
        match udp_once(target).await {
            Some(a) => out.push(a),
            None => return Err(format!("no UDP answer from {target}")),
        }
    }
    Ok(out)
}

pub(super) async fn lb22(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::UdpLoadBalancers)?;
    two_nodes(env).await?;
    let env: &Environment = env;
    let mut svc = service(
        SVC,
        json!({"ports": [{"name": "dns", "port": UDP_PORT, "targetPort": UDP_PORT, "protocol": "UDP"}]}),
    )?;
    let mut annotations = env.cloud().udp_service_annotations();
    annotations.insert(ENDPOINTS.to_string(), "server-1@node-a".to_string());
    svc.metadata.annotations = Some(annotations);
    create(env, &svc).await?;
    let ingress = ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let target = target(&ingress, UDP_PORT);
    let flow = UdpFlow::start(target.clone()).await?;
    flow.wait_for("server-1", Instant::now()).await?;
    // The server pod is deleted and comes back on the same node, then on the other node;
    // the same client flow must reach each new one.
    let mut metrics = Vec::new();
    for (server, node, label) in [
        ("server-2", "node-a", "same_node"),
        ("server-3", "node-b", "different_node"),
    ] {
        set_endpoints(env, "").await?;
        let cycled = Instant::now();
        set_endpoints(env, &format!("{server}@{node}")).await?;
        let took = flow.wait_for(server, cycled).await?;
        metrics.push((
            format!("udp_recovery_{label}_seconds"),
            format!("{:.3}", took.as_secs_f64()),
        ));
    }
    let (sent, answered) = flow.stop();
    metrics.push(("udp_datagrams_sent".into(), sent.to_string()));
    metrics.push(("udp_datagrams_answered".into(), answered.to_string()));

    // Session affinity (upstream checkAffinity): with ClientIP every new flow from this
    // client reaches one server; switched to None, more than one.
    patch_service(
        env,
        json!({"metadata": {"annotations": {ENDPOINTS: "s1@node-a,s2@node-b,s3@node-a"}},
               "spec": {"sessionAffinity": "ClientIP"}}),
    )
    .await?;
    eventually("every new flow to reach one server", RECOVERY, || async {
        let seen = match affinity_answers(&target).await {
            Ok(seen) => seen,
            Err(why) => return Ok(Probe::Pending(why)),
        };
        let first = seen.first().cloned().unwrap_or_default();
        Ok(if seen.iter().all(|s| *s == first) {
            Probe::Done(())
        } else {
            Probe::Pending(format!("servers {seen:?}"))
        })
    })
    .await?;
    patch_service(env, json!({"spec": {"sessionAffinity": "None"}})).await?;
    eventually(
        "new flows to spread once affinity is off",
        RECOVERY,
        || async {
            let seen = match affinity_answers(&target).await {
                Ok(seen) => seen,
                Err(why) => return Ok(Probe::Pending(why)),
            };
            let distinct: std::collections::BTreeSet<_> = seen.iter().collect();
            Ok(if distinct.len() > 1 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("servers {seen:?}"))
            })
        },
    )
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(metrics)
}

/// Requests through the load balancer every [`REQUEST_PERIOD`], each a new TCP connection,
/// counted as answered or not.
struct Requests {
    results: Arc<Mutex<Vec<Option<String>>>>,
    task: JoinHandle<()>,
}

impl Requests {
    fn start(target: String) -> Self {
        let results = Arc::new(Mutex::new(Vec::new()));
        let r = results.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(REQUEST_PERIOD);
            loop {
                tick.tick().await;
                let answer = ccm_harness::traffic::tcp_line(&target, Duration::from_secs(1))
                    .await
                    .ok()
                    .flatten();
                r.lock().unwrap_or_else(|p| p.into_inner()).push(answer);
            }
        });
        Self { results, task }
    }

    fn count(&self) -> usize {
        self.results.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Stops; `(requests, answered, last answer)`.
    fn stop(self) -> (usize, usize, Option<String>) {
        self.task.abort();
        let list = self.results.lock().unwrap_or_else(|p| p.into_inner());
        let answered = list.iter().filter(|a| a.is_some()).count();
        (
            list.len(),
            answered,
            list.iter().rev().flatten().next().cloned(),
        )
    }
}

/// Waits until the client made `n` more requests than `from` (time passing, measured in
/// the client's own requests rather than a sleep).
async fn requests_pass(requests: &Requests, from: usize, n: usize) -> Result<(), CaseError> {
    eventually(
        &format!("{n} more requests"),
        REQUEST_PERIOD * (n as u32) * 20,
        || async {
            let now = requests.count();
            Ok(if now >= from + n {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} of {n}", now.saturating_sub(from)))
            })
        },
    )
    .await
}

/// The DaemonSet's endpoints: generation `generation` on every node in `nodes`, and the
/// previous generation terminating on `terminating` (one node at a time, maxUnavailable 1).
fn daemonset(nodes: &[(&str, u32)], terminating: Option<&str>) -> String {
    let mut list: Vec<String> = nodes
        .iter()
        .map(|(node, g)| format!("ds-{g}-{node}@{node}"))
        .collect();
    if let Some(node) = terminating {
        list.push(format!("ds-1-{node}@{node}/terminating"));
    }
    list.join(",")
}

pub(super) async fn lb23(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    let mut metrics = Vec::new();
    for policy in ["Cluster", "Local"] {
        let mut svc = service(SVC, json!({"externalTrafficPolicy": policy}))?;
        let initial = daemonset(&[("node-a", 1), ("node-b", 1)], None);
        svc.metadata.annotations = Some([(ENDPOINTS.to_string(), initial)].into());
        create(env, &svc).await?;
        let ingress = ready_ingress(env).await?;
        wait_reason(env, "EnsuredLoadBalancer").await?;
        let target = format!("{ingress}:8080");
        eventually("a first answer", LB_TIMEOUT, || async {
            Ok(
                match ccm_harness::traffic::tcp_line(&target, Duration::from_secs(1)).await {
                    Ok(Some(_)) => Probe::Done(()),
                    _ => Probe::Pending("no answer yet".into()),
                },
            )
        })
        .await?;
        let requests = Requests::start(target.clone());
        requests_pass(&requests, 0, 10).await?;
        // Rolling update, one node at a time: the old pod terminates (still serving while
        // it is the node's only endpoint), the new one becomes ready, the old one goes.
        let mut generations = [("node-a", 1u32), ("node-b", 1u32)];
        for i in 0..generations.len() {
            let node = generations[i].0;
            let others: Vec<(&str, u32)> = generations
                .iter()
                .copied()
                .filter(|(n, _)| *n != node)
                .collect();
            set_endpoints(env, &daemonset(&others, Some(node))).await?;
            requests_pass(&requests, requests.count(), 10).await?;
            generations[i].1 = 2;
            set_endpoints(env, &daemonset(&generations, Some(node))).await?;
            requests_pass(&requests, requests.count(), 5).await?;
            set_endpoints(env, &daemonset(&generations, None)).await?;
            requests_pass(&requests, requests.count(), 5).await?;
        }
        requests_pass(&requests, requests.count(), 10).await?;
        let (total, answered, last) = requests.stop();
        let rate = answered as f64 / total.max(1) as f64;
        metrics.push((
            format!("rolling_update_{}_success_rate", policy.to_lowercase()),
            format!("{rate:.3}"),
        ));
        ensure!(
            rate >= MIN_SUCCESS_RATE,
            "expected at least {:.0}% of requests answered through the rolling update with \
             externalTrafficPolicy={policy}, observed {answered} of {total}",
            MIN_SUCCESS_RATE * 100.0
        );
        ensure!(
            last.as_deref().is_some_and(|a| a.starts_with("ds-2-")),
            "expected the updated DaemonSet (ds-2-*) to answer after the rolling update with \
             externalTrafficPolicy={policy}, observed {last:?}"
        );
        delete_and_check_leaks(env).await?;
    }
    Ok(metrics)
}
