//! The parts of kube-proxy a load-balancer case can observe, so traffic through a mock
//! cloud load balancer ends somewhere that says which node it reached (DESIGN.md "Data
//! plane").
//!
//! On the node's first `InternalIP` (which the CCM may set after start-up; the proxy
//! follows the Node), it binds every `spec.ports[].nodePort` of NodePort and LoadBalancer
//! Services, TCP and UDP, and answers with the node's name: TCP writes `<node-name>\n` and
//! closes, UDP replies `<node-name>` to each datagram. For LoadBalancer Services with
//! `externalTrafficPolicy: Local` it serves `spec.healthCheckNodePort` like kube-proxy's
//! service health server (kubernetes `pkg/proxy/healthcheck/service_health.go`): an HTTP
//! answer to any path, 200 when the node has a local endpoint and 503 otherwise, with a
//! JSON body `{"service":{"namespace","name"},"localEndpoints":N,"serviceProxyHealthy":true}`.
//!
//! Like every kube-proxy it also serves its own health server on the node IP at port
//! [`PROXIER_HEALTH_PORT`] (kube-proxy's `--healthz-bind-address` default `0.0.0.0:10256`,
//! kubernetes `pkg/proxy/healthcheck/proxier_health.go`): `GET /healthz` answers 200 with
//! `{"lastUpdated","currentTime","nodeEligible":true}`, any other path 404. Cloud load
//! balancers probe it for `externalTrafficPolicy: Cluster` (cloud-provider-gcp's node
//! health check `k8s-<cluster-id>-node` on 10256 `/healthz`).
//!
//! There are no pods, so which nodes have a local endpoint is declared on the Service by
//! the test: the annotation [`LOCAL_ENDPOINTS_ANNOTATION`] lists node names, comma
//! separated (absent = no node has one).
//!
//! A test that needs to see *which endpoint* served a request (a server pod cycling, as in
//! upstream e2e's UDP cases, or session affinity) names the endpoints instead with
//! [`ENDPOINTS_ANNOTATION`] (`pod@node`, comma separated; it takes precedence over
//! [`LOCAL_ENDPOINTS_ANNOTATION`]). Then a nodePort answers with an endpoint's pod name the
//! way kube-proxy would pick it: `externalTrafficPolicy: Local` only among the node's own
//! endpoints (none: the request is dropped, kube-proxy's behaviour for Local), `Cluster`
//! among all; `sessionAffinity: ClientIP` always picks the same endpoint for a client
//! address, otherwise requests rotate over the endpoints. An entry `pod@node/terminating`
//! is a terminating endpoint: used only when no ready one is in scope, and not counted by
//! the health port (kube-proxy's terminating-endpoint fallback, KEP-1669, GA in 1.28; what
//! keeps rolling updates of `Local` Services from dropping traffic).
//!
//! # Floating IP
//!
//! Azure load-balancing rules default to `enableFloatingIP: true` (cloud-provider-azure
//! `pkg/provider/azure_loadbalancer.go`: the rule's backend port is the Service port, not
//! the nodePort): the packet reaches the node with the frontend IP still its destination,
//! and kube-proxy's rules for the Service's ingress IP take it. In 127/8 a packet cannot be
//! addressed to one node with another address as destination, so the mock cloud sends it to
//! the node's IP at the frontend port, and a proxy told [`KubeletConfig::floating_ip`] serves
//! every LoadBalancer Service's `port`s on its node IP as it serves their nodePorts (same
//! answers, same `externalTrafficPolicy`). Two Services with the same port share one such
//! binding (the first one listed answers): on a real node the destination address tells them
//! apart, here nothing can.
//!
//! [`KubeletConfig::floating_ip`]: crate::KubeletConfig::floating_ip
//!
//! Ports are unbound when their Service goes away, stops wanting them, or the node IP
//! changes. A port that cannot be bound (taken, or the IP is not local) is logged and
//! retried every [`RETRY_PERIOD`].
//!
//! The proxies of one simulated cluster may share one Service watch ([`ServiceFeed`]), as
//! the informers of one process share a cache: with 50 nodes, 50 watches each decoding
//! every Service write cost the harness more CPU than the CCM under test spent on the
//! whole sync (`bench lb`). A kubelet given no feed watches on its own.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

/// Service annotation listing the nodes that have a local endpoint: `node-a,node-b`.
pub const LOCAL_ENDPOINTS_ANNOTATION: &str = "ccm-conformance.io/local-endpoints";
/// Service annotation naming its endpoints as `pod@node`: `web-1@node-a,web-2@node-b`.
pub const ENDPOINTS_ANNOTATION: &str = "ccm-conformance.io/endpoints";

/// How often binds that failed are retried.
pub const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// Bound on reading one health-check request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a health-check request head read.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// kube-proxy's own health server port (`--healthz-bind-address` default).
pub const PROXIER_HEALTH_PORT: u16 = 10256;
/// Concurrent connections per TCP port.
const MAX_CONNECTIONS: usize = 256;

/// What one bound port does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Role {
    /// A Service's nodePort (TCP or UDP): answers with the node name.
    NodePort { udp: bool },
    /// A Service's healthCheckNodePort (TCP, HTTP).
    Health { namespace: String, name: String },
    /// kube-proxy's own `/healthz` ([`PROXIER_HEALTH_PORT`]).
    ProxierHealth,
}

/// What a bound port answers, updated in place without rebinding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Live {
    /// Local endpoints (health ports).
    local: u32,
    /// Every endpoint from [`ENDPOINTS_ANNOTATION`]; `None`: answer with the node name.
    endpoints: Option<Vec<Endpoint>>,
    /// `externalTrafficPolicy: Local`.
    local_only: bool,
    /// `sessionAffinity: ClientIP`.
    client_ip_affinity: bool,
}

impl Live {
    /// The answer to a request from `client` on node `node` (`turn` rotates without
    /// affinity); `None` drops the request.
    fn answer(&self, node: &str, client: IpAddr, turn: usize) -> Option<String> {
        let Some(endpoints) = &self.endpoints else {
            return Some(node.to_string());
        };
        let in_scope = |e: &&Endpoint| !self.local_only || e.node == node;
        let mut candidates: Vec<&String> = endpoints
            .iter()
            .filter(in_scope)
            .filter(|e| !e.terminating)
            .map(|e| &e.pod)
            .collect();
        if candidates.is_empty() {
            candidates = endpoints.iter().filter(in_scope).map(|e| &e.pod).collect();
        }
        if candidates.is_empty() {
            return None;
        }
        let index = if self.client_ip_affinity {
            stable_hash(&client.to_string())
        } else {
            turn
        };
        Some(candidates[index % candidates.len()].clone())
    }
}

/// FNV-1a, so affinity does not depend on the process's hash seed.
fn stable_hash(s: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    usize::try_from(h % (u64::from(u32::MAX))).unwrap_or(0)
}

/// One endpoint of [`ENDPOINTS_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    pod: String,
    node: String,
    terminating: bool,
}

/// The entries of [`ENDPOINTS_ANNOTATION`] (`pod@node`, `pod@node/terminating`);
/// malformed entries are skipped.
fn parse_endpoints(value: &str) -> Vec<Endpoint> {
    value
        .split(',')
        .filter_map(|e| {
            let (pod, rest) = e.trim().split_once('@')?;
            let (node, terminating) = match rest.split_once('/') {
                Some((node, "terminating")) => (node, true),
                Some(_) => return None,
                None => (rest, false),
            };
            (!pod.is_empty() && !node.is_empty()).then(|| Endpoint {
                pod: pod.to_string(),
                node: node.to_string(),
                terminating,
            })
        })
        .collect()
}

/// One wanted binding. What it answers ([`Live`]) is not part of the key: it changes in
/// place without rebinding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Binding {
    addr: SocketAddr,
    role: Role,
}

/// The wanted bindings for a node, and what each answers.
fn wanted(
    node_name: &str,
    node_ip: IpAddr,
    services: &[Arc<Service>],
    floating_ip: bool,
) -> HashMap<Binding, Live> {
    let mut out = HashMap::new();
    out.insert(
        Binding {
            addr: SocketAddr::new(node_ip, PROXIER_HEALTH_PORT),
            role: Role::ProxierHealth,
        },
        Live::default(),
    );
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
        if ty != "NodePort" && ty != "LoadBalancer" {
            continue;
        }
        let annotations = svc.metadata.annotations.as_ref();
        let endpoints = annotations
            .and_then(|a| a.get(ENDPOINTS_ANNOTATION))
            .map(|v| parse_endpoints(v));
        let local_policy = spec.external_traffic_policy.as_deref() == Some("Local");
        let serving = Live {
            local: 0,
            endpoints: endpoints.clone(),
            local_only: local_policy,
            client_ip_affinity: spec.session_affinity.as_deref() == Some("ClientIP"),
        };
        for port in spec.ports.iter().flatten() {
            let Some(node_port) = port.node_port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            let udp = match port.protocol.as_deref().unwrap_or("TCP") {
                "TCP" => false,
                "UDP" => true,
                _ => continue,
            };
            out.insert(
                Binding {
                    addr: SocketAddr::new(node_ip, node_port),
                    role: Role::NodePort { udp },
                },
                serving.clone(),
            );
            if floating_ip
                && ty == "LoadBalancer"
                && let Ok(service_port) = u16::try_from(port.port)
            {
                out.entry(Binding {
                    addr: SocketAddr::new(node_ip, service_port),
                    role: Role::NodePort { udp },
                })
                .or_insert_with(|| serving.clone());
            }
        }
        let health_port = spec
            .health_check_node_port
            .and_then(|p| u16::try_from(p).ok());
        if ty == "LoadBalancer"
            && local_policy
            && let Some(port) = health_port
        {
            let local = match &endpoints {
                Some(list) => list
                    .iter()
                    .filter(|e| e.node == node_name && !e.terminating)
                    .count(),
                None => usize::from(
                    annotations
                        .and_then(|a| a.get(LOCAL_ENDPOINTS_ANNOTATION))
                        .is_some_and(|list| list.split(',').any(|n| n.trim() == node_name)),
                ),
            };
            out.insert(
                Binding {
                    addr: SocketAddr::new(node_ip, port),
                    role: Role::Health {
                        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
                        name: svc.metadata.name.clone().unwrap_or_default(),
                    },
                },
                Live {
                    local: u32::try_from(local).unwrap_or(u32::MAX),
                    ..Live::default()
                },
            );
        }
    }
    out
}

/// The node's first InternalIP.
fn node_ip(node: &Node) -> Option<IpAddr> {
    node.status
        .as_ref()?
        .addresses
        .iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")?
        .address
        .parse()
        .ok()
}

/// A bound port's server task, and what it answers (shared with the task). Dropping it
/// aborts the task (a dropped `JoinHandle` would detach it and keep the port bound): the
/// proxy's own task is aborted when its kubelet is dropped, and then every port it bound
/// must close with it, or a long run leaks a socket per port per node.
struct Bound {
    task: JoinHandle<()>,
    live: Arc<Mutex<Live>>,
}

impl Bound {
    async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One watch of every Service, shared by the simulated kube-proxies of a cluster: a
/// reflector store and a counter that moves after each event (a proxy that falls behind
/// sees one change for a whole burst). Cloning shares it; the watch stops when the last
/// clone is dropped.
#[derive(Clone)]
pub struct ServiceFeed {
    store: Store<Service>,
    changes: watch::Receiver<u64>,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for ServiceFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceFeed")
            .field("services", &self.store.state().len())
            .field("changes", &*self.changes.borrow())
            .finish()
    }
}

impl ServiceFeed {
    /// Starts watching Services through `client` (needs a Tokio runtime).
    pub fn start(client: kube::Client) -> Self {
        let (store, writer) = reflector::store::<Service>();
        let (tx, changes) = watch::channel(0u64);
        let events = reflector::reflector(
            writer,
            watcher(Api::<Service>::all(client), watcher::Config::default()),
        )
        // kube-proxy reads no managedFields; dropping them keeps the store small.
        .modify(|s| s.metadata.managed_fields = None)
        .default_backoff();
        let task = tokio::spawn(
            async move {
                let mut events = std::pin::pin!(events);
                while events.next().await.is_some() {
                    tx.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            .in_current_span(),
        );
        Self {
            store,
            changes,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }
}

/// Runs until `stopped` turns true; then every port is closed before it returns. Services
/// come from `feed`, or from a watch of this proxy's own.
pub(crate) async fn run(
    client: kube::Client,
    node_name: String,
    feed: Option<ServiceFeed>,
    floating_ip: bool,
    mut stopped: watch::Receiver<bool>,
) {
    let feed = feed.unwrap_or_else(|| ServiceFeed::start(client.clone()));
    let services = feed.store.clone();
    let mut service_changes = feed.changes.clone();
    // Whatever the shared store holds already counts as a change for this proxy.
    service_changes.mark_changed();
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let node_events = reflector::reflector(
        nodes_writer,
        watcher(
            Api::<Node>::all(client),
            watcher::Config::default().fields(&format!("metadata.name={node_name}")),
        ),
    )
    .default_backoff()
    .map(|_| ());
    let mut node_events = node_events.boxed();

    let mut bound: HashMap<Binding, Bound> = HashMap::new();
    let mut failed: HashMap<Binding, String> = HashMap::new();
    let mut retry = tokio::time::interval(RETRY_PERIOD);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            // A burst of Service writes (100 LoadBalancer Services being created) is one
            // reconcile: the feed's counter only says that something changed.
            changed = service_changes.changed() => {
                if changed.is_err() { break }
            }
            event = node_events.next() => {
                if event.is_none() { break }
                let mut ended = false;
                while let Some(next) = node_events.next().now_or_never() {
                    if next.is_none() {
                        ended = true;
                        break;
                    }
                }
                if ended { break }
            }
            // The periodic pass only retries ports that could not be bound.
            _ = retry.tick(), if !failed.is_empty() => {}
        }
        reconcile(
            &node_name,
            &services,
            &nodes,
            floating_ip,
            &mut bound,
            &mut failed,
        )
        .await;
    }
    for (_, b) in bound.drain() {
        b.stop().await;
    }
}

async fn reconcile(
    node_name: &str,
    services: &Store<Service>,
    nodes: &Store<Node>,
    floating_ip: bool,
    bound: &mut HashMap<Binding, Bound>,
    failed: &mut HashMap<Binding, String>,
) {
    let ip = nodes
        .state()
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node_name))
        .and_then(|n| node_ip(n));
    let want = match ip {
        Some(ip) => wanted(node_name, ip, &services.state(), floating_ip),
        None => HashMap::new(),
    };
    let gone: Vec<Binding> = bound
        .keys()
        .filter(|b| !want.contains_key(*b))
        .cloned()
        .collect();
    for b in gone {
        if let Some(server) = bound.remove(&b) {
            tracing::debug!(node = node_name, addr = %b.addr, "kube-proxy: unbinding");
            server.stop().await;
        }
    }
    failed.retain(|b, _| want.contains_key(b));
    for (binding, live) in want {
        if let Some(server) = bound.get(&binding) {
            *server.live.lock().unwrap_or_else(|p| p.into_inner()) = live;
            continue;
        }
        match start(&binding, node_name, live).await {
            Ok(server) => {
                tracing::debug!(node = node_name, addr = %binding.addr, role = ?binding.role, "kube-proxy: bound");
                failed.remove(&binding);
                bound.insert(binding, server);
            }
            Err(e) => {
                let message = e.to_string();
                if failed.get(&binding) != Some(&message) {
                    tracing::warn!(node = node_name, addr = %binding.addr, error = %message, "kube-proxy: cannot bind; retrying");
                    failed.insert(binding, message);
                }
            }
        }
    }
}

async fn start(binding: &Binding, node_name: &str, live: Live) -> std::io::Result<Bound> {
    let live = Arc::new(Mutex::new(live));
    let name = node_name.to_string();
    let task = match &binding.role {
        Role::NodePort { udp: true } => {
            let socket = UdpSocket::bind(binding.addr).await?;
            tokio::spawn(answer_udp(socket, name, live.clone()).in_current_span())
        }
        Role::NodePort { udp: false } => {
            let listener = TcpListener::bind(binding.addr).await?;
            let (shared, turn) = (live.clone(), Arc::new(AtomicUsize::new(0)));
            tokio::spawn(serve_tcp(listener, move |stream| {
                let client = stream
                    .peer_addr()
                    .map(|a| a.ip())
                    .unwrap_or(IpAddr::from([0, 0, 0, 0]));
                let answer = shared.lock().unwrap_or_else(|p| p.into_inner()).answer(
                    &name,
                    client,
                    turn.fetch_add(1, Ordering::Relaxed),
                );
                answer_line(stream, answer)
            }))
        }
        Role::Health {
            namespace,
            name: svc,
        } => {
            let listener = TcpListener::bind(binding.addr).await?;
            let (namespace, svc, shared) = (namespace.clone(), svc.clone(), live.clone());
            tokio::spawn(serve_tcp(listener, move |stream| {
                let local = shared.lock().unwrap_or_else(|p| p.into_inner()).local;
                answer_health(stream, namespace.clone(), svc.clone(), local)
            }))
        }
        Role::ProxierHealth => {
            let listener = TcpListener::bind(binding.addr).await?;
            tokio::spawn(serve_tcp(listener, answer_proxier_health).in_current_span())
        }
    };
    Ok(Bound { task, live })
}

/// Accepts connections and runs `handle` on each, at most [`MAX_CONNECTIONS`] at once;
/// aborting this task ends them all.
async fn serve_tcp<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(tokio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if connections.len() < MAX_CONNECTIONS => {
                    connections.spawn(handle(stream));
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Writes `answer` as a line and closes; `None` closes without a word (dropped).
async fn answer_line(mut stream: tokio::net::TcpStream, answer: Option<String>) {
    if let Some(answer) = answer {
        let _ = stream.write_all(format!("{answer}\n").as_bytes()).await;
    }
    let _ = stream.shutdown().await;
}

async fn answer_udp(socket: UdpSocket, name: String, live: Arc<Mutex<Live>>) {
    let mut buf = vec![0u8; 65_536];
    let mut turn = 0usize;
    loop {
        // Errors are ICMP reports for earlier replies; keep serving.
        if let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            turn = turn.wrapping_add(1);
            let answer =
                live.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .answer(&name, peer.ip(), turn);
            if let Some(answer) = answer {
                let _ = socket.send_to(answer.as_bytes(), peer).await;
            }
        }
    }
}

/// Reads a request head, bounded in size and time; `None` when the client sent none.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let read = async {
        let mut head = Vec::new();
        let mut chunk = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        Some(head)
    };
    tokio::time::timeout(REQUEST_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

/// Answers like kube-proxy's proxier health server: `/healthz` is healthy (the simulated
/// proxy has no sync loop that could fall behind), anything else 404.
async fn answer_proxier_health(mut stream: tokio::net::TcpStream) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let line = String::from_utf8_lossy(&head);
    let path = line.split_whitespace().nth(1).unwrap_or_default();
    let response = if path.split('?').next() == Some("/healthz") {
        let now = jiff::Timestamp::now().to_string();
        let body =
            serde_json::json!({"lastUpdated": now, "currentTime": now, "nodeEligible": true})
                .to_string();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    } else {
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads a request head and answers like kube-proxy's service health server.
async fn answer_health(
    mut stream: tokio::net::TcpStream,
    namespace: String,
    name: String,
    local_endpoints: u32,
) {
    if read_head(&mut stream).await.is_none() {
        return;
    }
    let body = serde_json::json!({
        "service": {"namespace": namespace, "name": name},
        "localEndpoints": local_endpoints,
        "serviceProxyHealthy": true,
    })
    .to_string();
    let status = if local_endpoints > 0 {
        "200 OK"
    } else {
        "503 Service Unavailable"
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: {local_endpoints}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(v: serde_json::Value) -> Arc<Service> {
        Arc::new(serde_json::from_value(v).expect("service"))
    }

    #[tokio::test]
    async fn the_proxier_health_server_answers_healthz_only() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(serve_tcp(listener, answer_proxier_health));
        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("write");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("read");
            answer
        };
        let healthy = get("/healthz").await;
        assert!(healthy.starts_with("HTTP/1.1 200 OK"), "{healthy}");
        let body = healthy.split("\r\n\r\n").nth(1).unwrap_or_default();
        let body: serde_json::Value = serde_json::from_str(body).expect("json body");
        assert_eq!(body["nodeEligible"], true, "{body}");
        assert!(body["lastUpdated"].is_string(), "{body}");
        let other = get("/livez").await;
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        server.abort();
    }

    #[test]
    fn wanted_ports_by_type_protocol_and_policy() {
        let ip: IpAddr = "127.40.0.1".parse().expect("ip");
        let services = vec![
            svc(
                serde_json::json!({"metadata": {"name": "np", "namespace": "d"},
                "spec": {"type": "NodePort", "ports": [
                    {"port": 80, "nodePort": 30001},
                    {"port": 53, "protocol": "UDP", "nodePort": 30002},
                    {"port": 9, "protocol": "SCTP", "nodePort": 30003}]}}),
            ),
            svc(
                serde_json::json!({"metadata": {"name": "cip", "namespace": "d"},
                "spec": {"ports": [{"port": 80, "nodePort": 30004}]}}),
            ),
            svc(
                serde_json::json!({"metadata": {"name": "lb", "namespace": "d",
                    "annotations": {LOCAL_ENDPOINTS_ANNOTATION: "other, n1"}},
                "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                    "healthCheckNodePort": 30010, "ports": [{"port": 80, "nodePort": 30005}]}}),
            ),
            svc(
                serde_json::json!({"metadata": {"name": "lb2", "namespace": "d"},
                "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
                    "healthCheckNodePort": 30011, "ports": [{"port": 80, "nodePort": 30006}]}}),
            ),
        ];
        let w = wanted("n1", ip, &services, false);
        let port = |p: u16, role: Role| Binding {
            addr: SocketAddr::new(ip, p),
            role,
        };
        assert!(w.contains_key(&port(30001, Role::NodePort { udp: false })));
        assert!(w.contains_key(&port(30002, Role::NodePort { udp: true })));
        assert!(w.contains_key(&port(30005, Role::NodePort { udp: false })));
        assert!(w.contains_key(&port(30006, Role::NodePort { udp: false })));
        let health = port(
            30010,
            Role::Health {
                namespace: "d".into(),
                name: "lb".into(),
            },
        );
        assert_eq!(w.get(&health).map(|l| l.local), Some(1));
        assert!(w.contains_key(&port(PROXIER_HEALTH_PORT, Role::ProxierHealth)));
        assert_eq!(
            w.len(),
            6,
            "kube-proxy's own health port; no SCTP, no ClusterIP, no health port for Cluster: {w:?}"
        );
        assert_eq!(
            wanted("n2", ip, &services, false)
                .get(&health)
                .map(|l| l.local),
            Some(0)
        );

        // Floating IP: the LoadBalancer Services' own ports too (one binding for port 80,
        // which both share), never those of a NodePort Service.
        let floating = wanted("n1", ip, &services, true);
        assert_eq!(floating.len(), 7, "{floating:?}");
        assert!(floating.contains_key(&port(80, Role::NodePort { udp: false })));
        assert!(!floating.contains_key(&port(53, Role::NodePort { udp: true })));
    }

    #[test]
    fn named_endpoints_answer_like_kube_proxy() {
        let ip: IpAddr = "127.40.0.1".parse().expect("ip");
        let client: IpAddr = "127.0.0.9".parse().expect("ip");
        let lb = |policy: &str, affinity: &str| {
            svc(
                serde_json::json!({"metadata": {"name": "u", "namespace": "d",
                "annotations": {ENDPOINTS_ANNOTATION: "p1@n1, p2@n2,bad,p3@n1"}},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                "sessionAffinity": affinity, "healthCheckNodePort": 30010,
                "ports": [{"port": 53, "protocol": "UDP", "nodePort": 30005}]}}),
            )
        };
        let udp = Binding {
            addr: SocketAddr::new(ip, 30005),
            role: Role::NodePort { udp: true },
        };
        let live = |s| wanted("n2", ip, &[s], false).remove(&udp).expect("bound");
        // Local: only n2's own endpoint; on a node without one, dropped.
        let local = live(lb("Local", "None"));
        assert_eq!(local.answer("n2", client, 7).as_deref(), Some("p2"));
        let on_n3 = wanted("n3", ip, &[lb("Local", "None")], false)
            .remove(&udp)
            .expect("bound");
        assert_eq!(on_n3.answer("n3", client, 0), None);
        // Cluster without affinity rotates over every endpoint.
        let cluster = live(lb("Cluster", "None"));
        let seen: std::collections::BTreeSet<_> = (0..3)
            .filter_map(|t| cluster.answer("n2", client, t))
            .collect();
        assert_eq!(seen.len(), 3, "{seen:?}");
        // ClientIP affinity: one endpoint per client, whatever the turn.
        let sticky = live(lb("Cluster", "ClientIP"));
        let first = sticky.answer("n2", client, 0);
        assert!((1..20).all(|t| sticky.answer("n2", client, t) == first));
        // The health port counts named local endpoints.
        let health = Binding {
            addr: SocketAddr::new(ip, 30010),
            role: Role::Health {
                namespace: "d".into(),
                name: "u".into(),
            },
        };
        let on_n1 = wanted("n1", ip, &[lb("Local", "None")], false);
        assert_eq!(on_n1.get(&health).map(|l| l.local), Some(2));
        // Terminating endpoints serve only when no ready one is in scope, and are not
        // counted as healthy.
        let rolling = |list: &str| {
            svc(
                serde_json::json!({"metadata": {"name": "u", "namespace": "d",
                "annotations": {ENDPOINTS_ANNOTATION: list}},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                "healthCheckNodePort": 30010,
                "ports": [{"port": 53, "protocol": "UDP", "nodePort": 30005}]}}),
            )
        };
        let old_only = wanted("n1", ip, &[rolling("old@n1/terminating,x@n2")], false);
        assert_eq!(
            old_only[&udp].answer("n1", client, 0).as_deref(),
            Some("old")
        );
        assert_eq!(old_only.get(&health).map(|l| l.local), Some(0));
        let both = wanted("n1", ip, &[rolling("old@n1/terminating,new@n1")], false);
        assert!((0..5).all(|t| both[&udp].answer("n1", client, t).as_deref() == Some("new")));
        assert!(parse_endpoints("a@n1/gone").is_empty());
        // No annotation: the node name, as before.
        assert_eq!(
            Live::default().answer("n1", client, 0).as_deref(),
            Some("n1")
        );
    }
}
