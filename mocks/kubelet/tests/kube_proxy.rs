//! The simulated kube-proxy against the embedded API server: NodePorts answer with the
//! node name (TCP and UDP), the health-check node port of an `externalTrafficPolicy: Local`
//! Service answers 200 only where the Service says the node has a local endpoint, ports
//! follow the node's InternalIP and close when the Service goes away or the kubelet stops.
//! Every wait has a deadline.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use mock_kube_apiserver::{ApiServer, Config};
use mock_kubelet::{KubeletConfig, LOCAL_ENDPOINTS_ANNOTATION, SimKubelet};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const DEADLINE: Duration = Duration::from_secs(10);

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn start() -> (ApiServer, Client) {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    (server, Client::try_from(cfg).expect("client"))
}

/// Everything a TCP connection to `addr` yields; `None` if refused or timed out.
async fn read_tcp(addr: SocketAddr) -> Option<String> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}

async fn ask_udp(addr: SocketAddr) -> Option<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.ok()?;
    socket.send_to(b"who", addr).await.ok()?;
    let mut buf = [0u8; 256];
    let (n, _) = tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// `GET /healthz` on `addr`: the status code, or `None` if nothing answers.
async fn healthz(addr: SocketAddr) -> Option<u16> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        out.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}

fn node_port(svc: &Service, i: usize) -> u16 {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.get(i))
        .and_then(|p| p.node_port)
        .and_then(|p| u16::try_from(p).ok())
        .expect("nodePort allocated")
}

/// A kubelet with its kube-proxy on `ip`.
async fn proxy_kubelet(client: &Client, name: &str, ip: Ipv4Addr) -> SimKubelet {
    let config = KubeletConfig::new(name)
        .node_ip(ip.to_string())
        .with_proxy(true);
    SimKubelet::start(client.clone(), config)
        .await
        .expect("kubelet")
}

/// Creates NodePort Service `name` in `default` with `ports` and returns it as stored.
async fn node_port_service(client: &Client, name: &str, ports: serde_json::Value) -> Service {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": name}, "ports": ports}
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &svc)
        .await
        .expect("create")
}

#[tokio::test]
async fn node_ports_answer_with_node_name_and_close_with_the_service() {
    let (_server, client) = start().await;
    let ip = Ipv4Addr::new(127, 40, 0, 1);
    let mut kubelet = proxy_kubelet(&client, "node-a", ip).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc = node_port_service(
        &client,
        "web",
        json!([
            {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}]),
    )
    .await;
    let tcp = SocketAddr::new(IpAddr::V4(ip), node_port(&svc, 0));
    let udp = SocketAddr::new(IpAddr::V4(ip), node_port(&svc, 1));
    eventually("TCP nodePort answers", || async {
        (read_tcp(tcp).await.as_deref() == Some("node-a\n")).then_some(())
    })
    .await;
    assert_eq!(
        eventually("UDP nodePort answers", || async { ask_udp(udp).await }).await,
        "node-a"
    );

    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("TCP nodePort closed", || async {
        read_tcp(tcp).await.is_none().then_some(())
    })
    .await;
    eventually("UDP nodePort closed", || async {
        ask_udp(udp).await.is_none().then_some(())
    })
    .await;
    kubelet.stop().await.expect("stop");
}

/// Dropping a kubelet (as a test's teardown does) closes every port its kube-proxy bound;
/// before, the per-port server tasks outlived it and a benchmark of 100 Services on 50
/// nodes ran out of file descriptors by its fourth environment.
#[tokio::test]
async fn dropping_the_kubelet_closes_its_node_ports() {
    let (_server, client) = start().await;
    let ip = Ipv4Addr::new(127, 40, 0, 2);
    let kubelet = proxy_kubelet(&client, "node-b", ip).await;
    let svc = node_port_service(
        &client,
        "drop",
        json!([{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]),
    )
    .await;
    let tcp = SocketAddr::new(IpAddr::V4(ip), node_port(&svc, 0));
    eventually("TCP nodePort answers", || async {
        (read_tcp(tcp).await.as_deref() == Some("node-b\n")).then_some(())
    })
    .await;
    drop(kubelet);
    eventually("the nodePort can be bound again", || async {
        tokio::net::TcpListener::bind(tcp).await.ok().map(drop)
    })
    .await;
}

#[tokio::test]
async fn health_check_node_port_follows_local_endpoints_and_node_ip() {
    let (_server, client) = start().await;
    // No --node-ip: nothing is bound until the Node gets an InternalIP (the CCM's job).
    let mut kubelet = SimKubelet::start(
        client.clone(),
        KubeletConfig::new("node-b").with_proxy(true),
    )
    .await
    .expect("kubelet");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "selector": {"app": "lb"},
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}
    }))
    .expect("service");
    let svc = services
        .create(&PostParams::default(), &svc)
        .await
        .expect("create");
    let hc_port = svc
        .spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .and_then(|p| u16::try_from(p).ok())
        .expect("healthCheckNodePort allocated");

    let ip = Ipv4Addr::new(127, 40, 0, 2);
    let nodes: Api<Node> = Api::all(client.clone());
    let addresses = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": ip.to_string()},
        {"type": "Hostname", "address": "node-b"}]}});
    nodes
        .patch_status("node-b", &PatchParams::default(), &Patch::Merge(&addresses))
        .await
        .expect("set addresses");
    let health = SocketAddr::new(IpAddr::V4(ip), hc_port);
    let traffic = SocketAddr::new(IpAddr::V4(ip), node_port(&svc, 0));
    assert_eq!(
        eventually("503 without local endpoints", || async {
            healthz(health).await
        })
        .await,
        503
    );
    assert_eq!(read_tcp(traffic).await.as_deref(), Some("node-b\n"));

    let annotate =
        |list: &str| json!({"metadata": {"annotations": {LOCAL_ENDPOINTS_ANNOTATION: list}}});
    services
        .patch(
            "lb",
            &PatchParams::default(),
            &Patch::Merge(&annotate("node-x,node-b")),
        )
        .await
        .expect("annotate");
    eventually("200 with a local endpoint", || async {
        (healthz(health).await == Some(200)).then_some(())
    })
    .await;
    services
        .patch(
            "lb",
            &PatchParams::default(),
            &Patch::Merge(&annotate("node-x")),
        )
        .await
        .expect("annotate");
    eventually("503 again", || async {
        (healthz(health).await == Some(503)).then_some(())
    })
    .await;

    // Cluster policy: no health-check port served.
    let cluster = json!({"spec": {"externalTrafficPolicy": "Cluster"}});
    services
        .patch("lb", &PatchParams::default(), &Patch::Merge(&cluster))
        .await
        .expect("policy");
    eventually("health port closed for Cluster policy", || async {
        healthz(health).await.is_none().then_some(())
    })
    .await;

    // Stopping the kubelet takes its kube-proxy down with it.
    kubelet.stop().await.expect("stop");
    assert_eq!(read_tcp(traffic).await, None);
}
