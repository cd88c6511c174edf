//! The data plane end to end: a load balancer created through the Octavia API carries real
//! TCP and UDP traffic from its VIP to its members, follows member changes (batch PUT),
//! enforces `allowed_cidrs`, reports member health from its monitor, and stops serving when
//! deleted. Every wait is bounded by a deadline.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use mock_openstack::{Config, OpenStackMock};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, UdpSocket};
use tokio::task::JoinHandle;

const DEADLINE: Duration = Duration::from_secs(10);

/// Polls `check` until it returns `Some`, or panics with `what` after [`DEADLINE`].
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

/// A TCP backend at `ip` that answers every connection with `name\n`.
async fn name_server(ip: Ipv4Addr, name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind backend");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(format!("{name}\n").as_bytes()).await;
        }
    });
    (addr, task)
}

/// A UDP backend at `ip` that answers every datagram with `name`.
async fn udp_name_server(ip: Ipv4Addr, port: u16, name: &'static str) -> JoinHandle<()> {
    let socket = UdpSocket::bind((ip, port)).await.expect("bind udp backend");
    tokio::spawn(async move {
        let mut buf = [0u8; 256];
        while let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(name.as_bytes(), peer).await;
        }
    })
}

/// What a TCP client at `source` reads from `target`; `None` if refused or closed empty.
async fn fetch(target: SocketAddr, source: Ipv4Addr) -> Option<String> {
    let attempt = async {
        let socket = TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from((source, 0))).ok()?;
        let mut stream = socket.connect(target).await.ok()?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await.ok()?;
        (!out.is_empty()).then_some(out)
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}

async fn ask_udp(target: SocketAddr) -> Option<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.ok()?;
    socket.send_to(b"hi", target).await.ok()?;
    let mut buf = [0u8; 256];
    let (n, _) = tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A port free for TCP and UDP on every address right now (so also on the VIP).
async fn free_port() -> u16 {
    for _ in 0..20 {
        let tcp = TcpListener::bind("0.0.0.0:0").await.expect("bind");
        let port = tcp.local_addr().expect("addr").port();
        if UdpSocket::bind(("0.0.0.0", port)).await.is_ok() {
            return port;
        }
    }
    panic!("no port free for both TCP and UDP");
}

struct Octavia {
    client: reqwest::Client,
    token: String,
    base: String,
}

impl Octavia {
    async fn login(mock: &OpenStackMock) -> Octavia {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let info = mock.ready_info();
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": info.username, "domain": {"name": info.domain_name},
                "password": info.password}}},
            "scope": {"project": {"name": info.project_name,
                "domain": {"name": info.domain_name}}}}});
        let resp = client
            .post(format!("{}/auth/tokens", info.auth_url))
            .json(&body)
            .send()
            .await
            .expect("auth");
        assert_eq!(resp.status(), 201);
        let token = resp.headers()["x-subject-token"]
            .to_str()
            .expect("token")
            .to_string();
        let doc: Value = resp.json().await.expect("json");
        let base = doc["token"]["catalog"]
            .as_array()
            .and_then(|c| c.iter().find(|e| e["type"] == "load-balancer"))
            .and_then(|e| e["endpoints"].as_array())
            .and_then(|eps| eps.iter().find(|ep| ep["interface"] == "public"))
            .and_then(|ep| ep["url"].as_str())
            .expect("octavia endpoint")
            .to_string();
        Octavia {
            client,
            token,
            base: format!("{base}/v2.0/lbaas"),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("x-auth-token", &self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("send");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The id of the seeded private subnet (the LB VIP subnet CPO is configured with).
    async fn private_subnet(&self, mock: &OpenStackMock) -> String {
        let network = mock
            .ready_info()
            .auth_url
            .replace("/identity/v3", "/network");
        let v: Value = self
            .client
            .get(format!("{network}/v2.0/subnets?name=private-subnet"))
            .header("x-auth-token", &self.token)
            .send()
            .await
            .expect("subnets")
            .json()
            .await
            .expect("json");
        v["subnets"][0]["id"]
            .as_str()
            .expect("subnet id")
            .to_string()
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Waits until the LB is ACTIVE, as CPO does.
    async fn wait_active(&self, lb: &str) {
        eventually("load balancer ACTIVE", || async {
            let v = self.get(&format!("/loadbalancers/{lb}")).await;
            (v["loadbalancer"]["provisioning_status"] == "ACTIVE").then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn load_balancer_carries_traffic_follows_members_and_stops_on_delete() {
    let mock = OpenStackMock::start(Config {
        nodes: 0,
        ..Config::default()
    })
    .await
    .expect("mock");
    let api = Octavia::login(&mock).await;
    let subnet = api.private_subnet(&mock).await;
    let (node_a, _a) = name_server(Ipv4Addr::new(127, 10, 0, 50), "node-a").await;
    let (node_b, _b) = name_server(Ipv4Addr::new(127, 10, 0, 51), "node-b").await;
    let port = free_port().await;
    let member =
        |addr: SocketAddr| json!({"address": addr.ip().to_string(), "protocol_port": addr.port()});

    let (status, created) = api
        .call(
            reqwest::Method::POST,
            "/loadbalancers",
            Some(
                json!({"loadbalancer": {"name": "kube_service_c_default_web",
                "vip_subnet_id": subnet, "listeners": [{"name": "l0", "protocol": "TCP",
                "protocol_port": port, "default_pool": {"name": "p0", "protocol": "TCP",
                "lb_algorithm": "ROUND_ROBIN", "members": [member(node_a)]}}]}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let lb = created["loadbalancer"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let vip: std::net::IpAddr = created["loadbalancer"]["vip_address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("vip");
    let front = SocketAddr::new(vip, port);
    api.wait_active(&lb).await;

    // The VIP answers with the member's answer.
    eventually("VIP answers node-a", || async {
        (fetch(front, Ipv4Addr::LOCALHOST).await.as_deref() == Some("node-a\n")).then_some(())
    })
    .await;

    // Batch member update: node-b replaces node-a.
    let pool = api.get("/pools").await["pools"][0]["id"]
        .as_str()
        .expect("pool")
        .to_string();
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            &format!("/pools/{pool}/members"),
            Some(json!({"members": [member(node_b)]})),
        )
        .await;
    assert_eq!(status, 202);
    api.wait_active(&lb).await;
    eventually("VIP answers node-b only", || async {
        let answers = [
            fetch(front, Ipv4Addr::LOCALHOST).await,
            fetch(front, Ipv4Addr::LOCALHOST).await,
        ];
        answers
            .iter()
            .all(|a| a.as_deref() == Some("node-b\n"))
            .then_some(())
    })
    .await;

    // allowed_cidrs: only 127.0.0.7 may connect.
    let listener = api.get("/listeners").await["listeners"][0]["id"]
        .as_str()
        .expect("listener")
        .to_string();
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            &format!("/listeners/{listener}"),
            Some(json!({"listener": {"allowed_cidrs": ["127.0.0.7/32"]}})),
        )
        .await;
    assert_eq!(status, 200);
    api.wait_active(&lb).await;
    eventually("other sources refused", || async {
        fetch(front, Ipv4Addr::LOCALHOST)
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(
        fetch(front, Ipv4Addr::new(127, 0, 0, 7)).await.as_deref(),
        Some("node-b\n")
    );

    // Cascade delete: the VIP stops answering.
    let (status, _) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/loadbalancers/{lb}?cascade=true"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    eventually("VIP closed after delete", || async {
        fetch(front, Ipv4Addr::new(127, 0, 0, 7))
            .await
            .is_none()
            .then_some(())
    })
    .await;
    mock.shutdown().await;
}

#[tokio::test]
async fn health_monitor_drives_member_status_and_udp_is_proxied() {
    let mock = OpenStackMock::start(Config {
        nodes: 0,
        ..Config::default()
    })
    .await
    .expect("mock");
    let api = Octavia::login(&mock).await;
    let subnet_id = api.private_subnet(&mock).await;
    let (alive, _alive_task) = name_server(Ipv4Addr::new(127, 10, 0, 60), "alive").await;
    // A member nobody listens on.
    let dead = {
        let l = TcpListener::bind((Ipv4Addr::new(127, 10, 0, 61), 0))
            .await
            .expect("bind");
        l.local_addr().expect("addr")
    };
    let udp_port = free_port().await;
    let _udp = udp_name_server(Ipv4Addr::new(127, 10, 0, 60), udp_port, "udp-alive").await;
    let port = free_port().await;
    let member =
        |addr: SocketAddr| json!({"address": addr.ip().to_string(), "protocol_port": addr.port()});
    let (status, created) = api
        .call(
            reqwest::Method::POST,
            "/loadbalancers",
            Some(
                json!({"loadbalancer": {"vip_subnet_id": subnet_id, "listeners": [
                {"protocol": "TCP", "protocol_port": port, "default_pool": {"protocol": "TCP",
                 "lb_algorithm": "ROUND_ROBIN", "members": [member(alive), member(dead)],
                 "healthmonitor": {"type": "TCP", "delay": 1, "timeout": 1, "max_retries": 1}}},
                {"protocol": "UDP", "protocol_port": port, "default_pool": {"protocol": "UDP",
                 "lb_algorithm": "ROUND_ROBIN", "members": [{"address": "127.10.0.60",
                 "protocol_port": udp_port}]}}]}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let lb = created["loadbalancer"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let vip: std::net::IpAddr = created["loadbalancer"]["vip_address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("vip");
    api.wait_active(&lb).await;

    // The status tree shows the dead member in ERROR, the pool and LB DEGRADED.
    let tree = eventually("dead member ERROR in /status", || async {
        let tree = api.get(&format!("/loadbalancers/{lb}/status")).await;
        let members = tree["statuses"]["loadbalancer"]["listeners"][0]["pools"][0]["members"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let of = |addr: SocketAddr| {
            members
                .iter()
                .find(|m| m["protocol_port"] == addr.port())
                .map(|m| m["operating_status"].clone())
        };
        (of(dead) == Some(json!("ERROR")) && of(alive) == Some(json!("ONLINE"))).then_some(tree)
    })
    .await;
    let root = &tree["statuses"]["loadbalancer"];
    assert_eq!(root["operating_status"], "DEGRADED", "{tree}");
    assert_eq!(
        root["listeners"][0]["pools"][0]["operating_status"],
        "DEGRADED"
    );
    let dead_member = api.get("/pools").await["pools"][0]["members"][1]["id"]
        .as_str()
        .expect("member id")
        .to_string();
    let pool = api.get("/pools").await["pools"][0]["id"]
        .as_str()
        .expect("pool")
        .to_string();
    let shown = api
        .get(&format!("/pools/{pool}/members/{dead_member}"))
        .await;
    assert_eq!(shown["member"]["operating_status"], "ERROR", "{shown}");

    // Traffic only reaches the live member.
    let front = SocketAddr::new(vip, port);
    for _ in 0..3 {
        assert_eq!(
            eventually("TCP answer", || async {
                fetch(front, Ipv4Addr::LOCALHOST).await
            })
            .await,
            "alive\n"
        );
    }
    // UDP through the same VIP and port number.
    let udp_front = SocketAddr::new(vip, port);
    assert_eq!(
        eventually("UDP answer", || async { ask_udp(udp_front).await }).await,
        "udp-alive"
    );
    mock.shutdown().await;
    assert_eq!(
        fetch(front, Ipv4Addr::LOCALHOST).await,
        None,
        "shutdown stops every listener"
    );
}

/// The whole data path of DESIGN.md "Data plane": a client reaches the VIP, Octavia
/// proxies to `nodeIP:nodePort`, the simulated kube-proxy answers with its node's name; the
/// monitor (HTTP `/healthz` on the healthCheckNodePort, as CPO configures it for
/// `externalTrafficPolicy: Local`) takes the node without a local endpoint out.
#[tokio::test]
async fn etp_local_traffic_reaches_only_nodes_with_local_endpoints() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Api, PostParams};
    use mock_kubelet::{KubeletConfig, LOCAL_ENDPOINTS_ANNOTATION, SimKubelet};

    let apiserver = mock_kube_apiserver::ApiServer::start(mock_kube_apiserver::Config::default())
        .await
        .expect("apiserver");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&apiserver.kubeconfig_yaml()).expect("kubeconfig");
    let kube_config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kube config");
    let client = kube::Client::try_from(kube_config).expect("kube client");
    let ips = [
        Ipv4Addr::new(127, 10, 200, 1),
        Ipv4Addr::new(127, 10, 200, 2),
    ];
    let mut kubelets = Vec::new();
    for (name, ip) in ["node-x", "node-y"].into_iter().zip(ips) {
        let config = KubeletConfig::new(name)
            .node_ip(ip.to_string())
            .with_proxy(true);
        kubelets.push(
            SimKubelet::start(client.clone(), config)
                .await
                .expect("kubelet"),
        );
    }
    let services: Api<Service> = Api::namespaced(client, "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "annotations": {LOCAL_ENDPOINTS_ANNOTATION: "node-y"}},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "selector": {"app": "web"},
            "ports": [{"port": 8080, "targetPort": 8080, "protocol": "TCP"}]}
    }))
    .expect("service");
    let svc = services
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service");
    let spec = svc.spec.expect("spec");
    let node_port = spec
        .ports
        .as_ref()
        .and_then(|p| p[0].node_port)
        .expect("nodePort");
    let hc_port = spec.health_check_node_port.expect("healthCheckNodePort");

    let mock = OpenStackMock::start(Config {
        nodes: 0,
        ..Config::default()
    })
    .await
    .expect("mock");
    let api = Octavia::login(&mock).await;
    let subnet = api.private_subnet(&mock).await;
    let port = free_port().await;
    let members: Vec<Value> = ips
        .iter()
        .map(|ip| {
            json!({"address": ip.to_string(), "protocol_port": node_port,
            "monitor_port": hc_port})
        })
        .collect();
    let (status, created) = api
        .call(
            reqwest::Method::POST,
            "/loadbalancers",
            Some(
                json!({"loadbalancer": {"vip_subnet_id": subnet, "listeners": [
                {"protocol": "TCP", "protocol_port": port, "default_pool": {"protocol": "TCP",
                 "lb_algorithm": "ROUND_ROBIN", "members": members,
                 "healthmonitor": {"type": "HTTP", "url_path": "/healthz", "delay": 1,
                    "timeout": 1, "max_retries": 1}}}]}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let lb = created["loadbalancer"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let vip: std::net::IpAddr = created["loadbalancer"]["vip_address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("vip");
    api.wait_active(&lb).await;
    eventually("node-x ERROR, node-y ONLINE", || async {
        let tree = api.get(&format!("/loadbalancers/{lb}/status")).await;
        let members = &tree["statuses"]["loadbalancer"]["listeners"][0]["pools"][0]["members"];
        (members[0]["operating_status"] == "ERROR" && members[1]["operating_status"] == "ONLINE")
            .then_some(())
    })
    .await;
    let front = SocketAddr::new(vip, port);
    for _ in 0..4 {
        assert_eq!(
            fetch(front, Ipv4Addr::LOCALHOST).await.as_deref(),
            Some("node-y\n")
        );
    }
    mock.shutdown().await;
    drop(kubelets);
}
