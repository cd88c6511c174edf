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
//! There are no pods, so which nodes have a local endpoint is declared on the Service by
//! the test: the annotation [`LOCAL_ENDPOINTS_ANNOTATION`] lists node names, comma
//! separated (absent = no node has one).
//!
//! Ports are unbound when their Service goes away, stops wanting them, or the node IP
//! changes. A port that cannot be bound (taken, or the IP is not local) is logged and
//! retried every [`RETRY_PERIOD`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Service annotation listing the nodes that have a local endpoint: `node-a,node-b`.
pub const LOCAL_ENDPOINTS_ANNOTATION: &str = "ccm-conformance.io/local-endpoints";

/// How often binds that failed are retried.
pub const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// Bound on reading one health-check request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a health-check request head read.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// Concurrent connections per TCP port.
const MAX_CONNECTIONS: usize = 256;

/// What one bound port does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Role {
    /// A Service's nodePort (TCP or UDP): answers with the node name.
    NodePort { udp: bool },
    /// A Service's healthCheckNodePort (TCP, HTTP).
    Health { namespace: String, name: String },
}

/// One wanted binding. The health answer (local endpoints) is not part of the key: it
/// changes in place without rebinding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Binding {
    addr: SocketAddr,
    role: Role,
}

/// The wanted bindings for a node, and each health port's local endpoint count.
fn wanted(node_name: &str, node_ip: IpAddr, services: &[Arc<Service>]) -> HashMap<Binding, u32> {
    let mut out = HashMap::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
        if ty != "NodePort" && ty != "LoadBalancer" {
            continue;
        }
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
                0,
            );
        }
        let local_policy = spec.external_traffic_policy.as_deref() == Some("Local");
        let health_port = spec
            .health_check_node_port
            .and_then(|p| u16::try_from(p).ok());
        if ty == "LoadBalancer"
            && local_policy
            && let Some(port) = health_port
        {
            let local = svc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(LOCAL_ENDPOINTS_ANNOTATION))
                .is_some_and(|list| list.split(',').any(|n| n.trim() == node_name));
            out.insert(
                Binding {
                    addr: SocketAddr::new(node_ip, port),
                    role: Role::Health {
                        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
                        name: svc.metadata.name.clone().unwrap_or_default(),
                    },
                },
                u32::from(local),
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

/// A bound port's server task, and for health ports the shared endpoint count.
struct Bound {
    task: JoinHandle<()>,
    local_endpoints: Arc<Mutex<u32>>,
}

impl Bound {
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Runs until `stopped` turns true; then every port is closed before it returns.
pub(crate) async fn run(
    client: kube::Client,
    node_name: String,
    mut stopped: watch::Receiver<bool>,
) {
    let (services, services_writer) = reflector::store::<Service>();
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let service_events = reflector::reflector(
        services_writer,
        watcher(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .map(|_| ());
    let node_events = reflector::reflector(
        nodes_writer,
        watcher(
            Api::<Node>::all(client),
            watcher::Config::default().fields(&format!("metadata.name={node_name}")),
        ),
    )
    .default_backoff()
    .map(|_| ());
    let mut events = futures::stream::select(service_events, node_events).boxed();

    let mut bound: HashMap<Binding, Bound> = HashMap::new();
    let mut failed: HashMap<Binding, String> = HashMap::new();
    let mut retry = tokio::time::interval(RETRY_PERIOD);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            event = events.next() => if event.is_none() { break },
            _ = retry.tick() => {}
        }
        reconcile(&node_name, &services, &nodes, &mut bound, &mut failed).await;
    }
    for (_, b) in bound.drain() {
        b.stop().await;
    }
}

async fn reconcile(
    node_name: &str,
    services: &Store<Service>,
    nodes: &Store<Node>,
    bound: &mut HashMap<Binding, Bound>,
    failed: &mut HashMap<Binding, String>,
) {
    let ip = nodes
        .state()
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node_name))
        .and_then(|n| node_ip(n));
    let want = match ip {
        Some(ip) => wanted(node_name, ip, &services.state()),
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
    for (binding, local) in want {
        if let Some(server) = bound.get(&binding) {
            let mut count = server
                .local_endpoints
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            *count = local;
            continue;
        }
        match start(&binding, node_name, local).await {
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

async fn start(binding: &Binding, node_name: &str, local: u32) -> std::io::Result<Bound> {
    let local_endpoints = Arc::new(Mutex::new(local));
    let name = node_name.to_string();
    let task = match &binding.role {
        Role::NodePort { udp: true } => {
            let socket = UdpSocket::bind(binding.addr).await?;
            tokio::spawn(answer_udp(socket, name))
        }
        Role::NodePort { udp: false } => {
            let listener = TcpListener::bind(binding.addr).await?;
            tokio::spawn(serve_tcp(listener, move |stream| {
                answer_name(stream, name.clone())
            }))
        }
        Role::Health {
            namespace,
            name: svc,
        } => {
            let listener = TcpListener::bind(binding.addr).await?;
            let (namespace, svc, count) = (namespace.clone(), svc.clone(), local_endpoints.clone());
            tokio::spawn(serve_tcp(listener, move |stream| {
                let local = *count.lock().unwrap_or_else(|p| p.into_inner());
                answer_health(stream, namespace.clone(), svc.clone(), local)
            }))
        }
    };
    Ok(Bound {
        task,
        local_endpoints,
    })
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

async fn answer_name(mut stream: tokio::net::TcpStream, name: String) {
    let _ = stream.write_all(format!("{name}\n").as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn answer_udp(socket: UdpSocket, name: String) {
    let mut buf = vec![0u8; 65_536];
    loop {
        // Errors are ICMP reports for earlier replies; keep serving.
        if let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(name.as_bytes(), peer).await;
        }
    }
}

/// Reads a request head (bounded in size and time) and answers like kube-proxy's service
/// health server.
async fn answer_health(
    mut stream: tokio::net::TcpStream,
    namespace: String,
    name: String,
    local_endpoints: u32,
) {
    let read_head = async {
        let mut head = Vec::new();
        let mut chunk = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        true
    };
    if !matches!(
        tokio::time::timeout(REQUEST_TIMEOUT, read_head).await,
        Ok(true)
    ) {
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
        let w = wanted("n1", ip, &services);
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
        assert_eq!(w.get(&health), Some(&1));
        assert_eq!(
            w.len(),
            5,
            "no SCTP, no ClusterIP, no health port for Cluster: {w:?}"
        );
        assert_eq!(wanted("n2", ip, &services).get(&health), Some(&0));
    }
}
