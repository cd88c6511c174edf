//! The whole CCM in-process against stubbed Kubernetes and OpenStack APIs: flags,
//! kubeconfig, Keystone auth, the watch-driven controller, HTTPS /healthz and /metrics.
//! (The real end-to-end run against the embedded API server lives in the workspace's
//! conformance target.)

use std::time::{Duration, Instant};

use clap::Parser;
use reference_ccm::options::Options;
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

async fn mount_openstack(server: &MockServer) {
    let uri = server.uri();
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .respond_with(ResponseTemplate::new(201).insert_header("X-Subject-Token", "tok").set_body_json(json!({"token": {
            "catalog": [
                {"type": "compute", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/compute/v2.1")}]},
                {"type": "network", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/network")}]}
            ]}})))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/detail"))
        .and(query_param("name", "^n1$"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"servers": [{
            "id": "srv-1", "name": "n1", "status": "ACTIVE", "OS-EXT-AZ:availability_zone": "nova",
            "flavor": {"original_name": "m1.small", "id": "f1"},
            "addresses": {"private": [{"addr": "10.0.0.11", "OS-EXT-IPS:type": "fixed"}]}}]})),
        )
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/network/v2.0/ports"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ports": []})))
        .mount(server)
        .await;
}

async fn mount_kube(server: &MockServer) {
    let node = json!({"metadata": {"name": "n1", "uid": "u1", "resourceVersion": "10", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
    // The watch returns an empty stream after a while; the watcher simply re-watches.
    Mock::given(method("GET"))
        .and(path("/api/v1/nodes"))
        .and(query_param("watch", "true"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(500)))
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/nodes"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"kind": "NodeList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "10"}, "items": [node]})),
        )
        .with_priority(2)
        .mount(server)
        .await;
    let echo = |status: u16| {
        move |req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            ResponseTemplate::new(status).set_body_json(body)
        }
    };
    Mock::given(method("PUT"))
        .and(path("/api/v1/nodes/n1"))
        .respond_with(echo(200))
        .mount(server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/api/v1/nodes/n1/status"))
        .respond_with(echo(200))
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/namespaces/default/events"))
        .respond_with(echo(201))
        .mount(server)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializes_a_node_and_serves_healthz() -> anyhow::Result<()> {
    let kube = MockServer::start().await;
    let cloud = MockServer::start().await;
    mount_kube(&kube).await;
    mount_openstack(&cloud).await;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: t\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
            kube.uri()
        ),
    )?;
    let cloud_conf = dir.path().join("cloud.conf");
    std::fs::write(
        &cloud_conf,
        format!(
            "[Global]\nauth-url={}/v3\nusername=admin\npassword=pw\nproject-name=demo\ndomain-name=Default\nregion=RegionOne\n",
            cloud.uri()
        ),
    )?;
    let port = free_port();
    let opts = Options::try_parse_from([
        "reference-ccm".to_owned(),
        "--cloud-provider=openstack".to_owned(),
        format!("--cloud-config={}", cloud_conf.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--leader-elect=false".to_owned(),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        // /metrics is authorized like upstream's unless opened (cloud-provider options).
        "--authorization-always-allow-paths=/healthz,/metrics".to_owned(),
    ])?;
    let ccm = tokio::spawn(reference_ccm::run(opts));

    // Wait (bounded) for the node PUT, then check what was sent.
    let deadline = Instant::now() + Duration::from_secs(20);
    let put = loop {
        let requests = kube.received_requests().await.unwrap_or_default();
        let put = requests
            .iter()
            .find(|r| r.method.as_str() == "PUT")
            .cloned();
        let events = requests
            .iter()
            .any(|r| r.method.as_str() == "POST" && r.url.path().ends_with("/events"));
        if let (Some(put), true) = (put, events) {
            break put;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "node was not initialized in time; ccm finished: {}",
            ccm.is_finished()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        put.headers.get("user-agent").and_then(|v| v.to_str().ok()),
        Some(reference_ccm::USER_AGENT)
    );
    let body: Value = serde_json::from_slice(&put.body)?;
    assert_eq!(body["spec"]["providerID"], "openstack:///srv-1");
    assert_eq!(
        body["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        "m1.small"
    );

    let https = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()?;
    let healthz = https
        .get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .await?;
    assert_eq!(healthz.status(), 200);
    assert_eq!(healthz.text().await?, "ok");
    // Not in the always-allowed paths: refused as upstream's delegated authorizer does.
    let readyz = https
        .get(format!("https://127.0.0.1:{port}/readyz"))
        .send()
        .await?;
    assert_eq!(readyz.status(), 403);
    let metrics = https
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        metrics.contains("node_controller_cloud_provider_taint_removal_delay_seconds_count 1"),
        "{metrics}"
    );
    ccm.abort();
    Ok(())
}
