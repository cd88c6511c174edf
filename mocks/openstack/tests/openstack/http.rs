//! End to end over a real socket with reqwest: what a CCM does at node initialization
//! (authenticate from the catalog, find the server by name, read it, read its ports),
//! also at the benchmark's scale of 1,000 servers.

use std::time::{Duration, Instant};

use mock_openstack::{Config, OpenStackMock, ServerSpec};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

struct Session {
    client: reqwest::Client,
    token: String,
    compute: String,
    network: String,
}

fn endpoint(catalog: &Value, kind: &str, region: &str) -> String {
    catalog
        .as_array()
        .and_then(|c| c.iter().find(|e| e["type"] == kind))
        .and_then(|e| e["endpoints"].as_array())
        .and_then(|eps| {
            eps.iter()
                .find(|ep| ep["interface"] == "public" && ep["region_id"] == region)
        })
        .and_then(|ep| ep["url"].as_str())
        .unwrap_or_else(|| panic!("no public {kind} endpoint in {catalog}"))
        .to_string()
}

async fn login(mock: &OpenStackMock) -> Session {
    let client = client();
    let info = mock.ready_info();
    assert!(info.auth_url.ends_with("/v3"));
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": info.username, "domain": {"name": info.domain_name}, "password": info.password}}},
        "scope": {"project": {"name": info.project_name, "domain": {"name": info.domain_name}}}}});
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
    let catalog = &doc["token"]["catalog"];
    Session {
        compute: endpoint(catalog, "compute", &info.region),
        network: endpoint(catalog, "network", &info.region),
        client,
        token,
    }
}

impl Session {
    async fn get(&self, url: String) -> (u16, Value) {
        let resp = self
            .client
            .get(&url)
            .header("x-auth-token", &self.token)
            .send()
            .await
            .expect("send");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The node-init lookups: server by name, server by id, ports by device; returns the
    /// InternalIP from the ports and the floating IP from Nova.
    async fn node_init(&self, name: &str) -> (String, String, String) {
        let (status, list) = self
            .get(format!("{}/servers/detail?name=%5E{name}%24", self.compute))
            .await;
        assert_eq!(status, 200);
        let servers = list["servers"].as_array().expect("servers");
        assert_eq!(servers.len(), 1, "{name}");
        let id = servers[0]["id"].as_str().expect("id").to_string();
        let (status, server) = self.get(format!("{}/servers/{id}", self.compute)).await;
        assert_eq!(status, 200);
        let floating = server["server"]["addresses"]["private"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["OS-EXT-IPS:type"] == "floating"))
            .and_then(|x| x["addr"].as_str())
            .unwrap_or_default()
            .to_string();
        let (status, ports) = self
            .get(format!("{}/v2.0/ports?device_id={id}", self.network))
            .await;
        assert_eq!(status, 200);
        let internal = ports["ports"][0]["fixed_ips"][0]["ip_address"]
            .as_str()
            .expect("ip")
            .to_string();
        (id, internal, floating)
    }
}

#[tokio::test]
async fn node_init_calls_over_http() {
    let mock = OpenStackMock::start(Config {
        nodes: 3,
        ..Config::default()
    })
    .await
    .expect("start");
    let session = login(&mock).await;
    let admin = mock.admin();
    for server in admin.servers() {
        let (id, internal, floating) = session.node_init(&server.name).await;
        assert_eq!(id, server.id);
        assert_eq!(vec![internal], server.internal_ips);
        assert_eq!(vec![floating], server.floating_ips);
    }
    let (status, _) = session
        .get(format!("{}/servers/{}", session.compute, "missing"))
        .await;
    assert_eq!(status, 404);
    let lookups = admin
        .journal()
        .count(|e| e.service == "compute" && e.path.contains("/servers"));
    assert_eq!(lookups, 7);
    mock.shutdown().await;
}

#[tokio::test]
async fn thousand_servers_stay_fast() {
    let mock = OpenStackMock::start(Config {
        nodes: 0,
        ..Config::default()
    })
    .await
    .expect("start");
    let admin = mock.admin();
    for i in 0..1000 {
        admin
            .create_server(ServerSpec {
                name: format!("bench-{i}"),
                ..Default::default()
            })
            .expect("create");
    }
    let session = std::sync::Arc::new(login(&mock).await);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..10 {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            for i in (worker..1000).step_by(10) {
                let (_, internal, _) = session.node_init(&format!("bench-{i}")).await;
                assert!(internal.starts_with("127.10."));
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    let elapsed = started.elapsed();
    eprintln!("3000 node-init requests over 1000 servers took {elapsed:?}");
    assert_eq!(
        admin
            .journal()
            .count(|e| e.service != "identity" && e.status == 200),
        3000
    );
    // Generous: the point is to catch per-request work that grows badly with the fleet.
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    mock.shutdown().await;
}

#[tokio::test]
async fn ready_info_serializes_with_the_contract_fields() {
    let mock = OpenStackMock::start(Config::default())
        .await
        .expect("start");
    let value = serde_json::to_value(mock.ready_info()).expect("json");
    for key in [
        "auth_url",
        "username",
        "password",
        "project_name",
        "domain_name",
        "region",
        "admin_url",
    ] {
        assert!(value[key].is_string(), "{key} in {value}");
    }
    let admin_url = value["admin_url"].as_str().expect("admin_url");
    let resp = client()
        .get(format!("{admin_url}/servers"))
        .send()
        .await
        .expect("admin");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["servers"].as_array().map(Vec::len), Some(3));
    mock.shutdown().await;
}
