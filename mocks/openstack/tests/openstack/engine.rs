//! The shared engine as a client sees it over a real socket: HTTPS with the generated CA,
//! a seed file's servers, fault rules and lifecycle modes (also after reset), and injected
//! connection resets.

use std::time::Duration;

use mock_cloud::{FaultJson, FaultKind, Mode};
use mock_openstack::{Config, OpenStackMock, SeedFile};
use serde_json::{Value, json};

fn client_trusting(ca_pem: Option<&[u8]>) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some(pem) = ca_pem {
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(pem).expect("pem"));
    }
    builder.build().expect("client")
}

async fn token(client: &reqwest::Client, mock: &OpenStackMock) -> String {
    let info = mock.ready_info();
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
    resp.headers()["x-subject-token"]
        .to_str()
        .expect("token")
        .to_string()
}

#[tokio::test]
async fn serves_https_with_the_ca_named_in_the_ready_info() {
    let mock = OpenStackMock::start(Config {
        nodes: 1,
        tls: true,
        ..Config::default()
    })
    .await
    .expect("start");
    let info = mock.ready_info();
    assert!(info.auth_url.starts_with("https://127.0.0.1:"), "{info:?}");
    let ca_file = info.ca_file.clone().expect("ca_file");
    let pem = std::fs::read(&ca_file).expect("ca file");

    // A client that does not trust the CA is refused.
    let stranger = client_trusting(None);
    assert!(stranger.get(&info.auth_url).send().await.is_err());

    let client = client_trusting(Some(&pem));
    let token = token(&client, &mock).await;
    let servers: Value = client
        .get(format!(
            "{}/compute/v2.1/servers/detail",
            info.auth_url.trim_end_matches("/identity/v3")
        ))
        .header("x-auth-token", &token)
        .send()
        .await
        .expect("servers")
        .json()
        .await
        .expect("json");
    assert_eq!(servers["servers"].as_array().map(Vec::len), Some(1));
    mock.shutdown().await;
    assert!(
        !std::path::Path::new(&ca_file).exists(),
        "CA file left behind"
    );
}

#[tokio::test]
async fn plain_http_has_no_ca_file() {
    let mock = OpenStackMock::start(Config {
        nodes: 0,
        ..Config::default()
    })
    .await
    .expect("start");
    let ready = serde_json::to_value(mock.ready_info()).expect("json");
    assert_eq!(ready["ca_file"], Value::Null);
    mock.shutdown().await;
}

#[tokio::test]
async fn seed_servers_faults_and_lifecycle_apply_and_survive_reset() {
    let seed: SeedFile = SeedFile::parse(
        br#"{"state": {"servers": [{"name": "seeded-a", "az": "az-9"}]},
             "faults": [{"service": "network", "kind": "throttle", "count": 1}],
             "fault_seed": 7,
             "lifecycle": {"types": {"loadbalancer": {"mode": "stuck"}}}}"#,
        std::path::Path::new("inline"),
    )
    .expect("seed");
    let mock = OpenStackMock::start(Config {
        nodes: 1,
        seed,
        ..Config::default()
    })
    .await
    .expect("start");
    let admin = mock.admin();
    assert_eq!(admin.servers().len(), 2);
    assert_eq!(
        admin.server_by_name("seeded-a").map(|s| s.az),
        Some("az-9".to_string())
    );
    assert_eq!(admin.faults().seed(), 7);
    assert_eq!(admin.faults().list().len(), 1);
    assert_eq!(
        admin.lifecycle().by_type.get("loadbalancer"),
        Some(&Mode::Stuck)
    );

    let client = client_trusting(None);
    let token = token(&client, &mock).await;
    let ports = format!("http://{}/network/v2.0/ports", mock.local_addr());
    let first = client
        .get(&ports)
        .header("x-auth-token", &token)
        .send()
        .await
        .expect("ports");
    assert_eq!(first.status(), 429);
    assert!(first.headers().get("retry-after").is_some());
    let second = client
        .get(&ports)
        .header("x-auth-token", &token)
        .send()
        .await
        .expect("ports");
    assert_eq!(second.status(), 200);
    assert!(admin.faults().list().is_empty());

    // Reset puts the seed back, rules included.
    admin.faults().add(FaultJson {
        status: 500,
        ..Default::default()
    });
    admin
        .delete_server(&admin.server_by_name("seeded-a").expect("a").id)
        .expect("delete");
    let reset = client
        .post(format!("{}/reset", mock.ready_info().admin_url))
        .send()
        .await
        .expect("reset");
    assert_eq!(reset.status(), 204);
    assert!(admin.server_by_name("seeded-a").is_some());
    let rules = admin.faults().list();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].rule.kind(), FaultKind::Throttle);
    mock.shutdown().await;
}

#[tokio::test]
async fn bad_seed_state_fails_start_with_the_reason() {
    let seed: SeedFile = SeedFile::parse(
        br#"{"lifecycle": {"types": {"router": {"mode": "stuck"}}}}"#,
        std::path::Path::new("inline"),
    )
    .expect("modes parse; the type is the cloud's check");
    let err = OpenStackMock::start(Config {
        seed,
        ..Config::default()
    })
    .await
    .err()
    .expect("refused");
    assert!(err.to_string().contains("router"), "{err}");
}

#[tokio::test]
async fn reset_rule_drops_the_connection() {
    let mock = OpenStackMock::start(Config {
        nodes: 1,
        ..Config::default()
    })
    .await
    .expect("start");
    let client = client_trusting(None);
    let token = token(&client, &mock).await;
    let rule = mock.admin().faults().add(FaultJson {
        service: Some("compute".into()),
        kind: Some(FaultKind::Reset),
        count: Some(1),
        ..Default::default()
    });
    let url = format!("http://{}/compute/v2.1/servers/detail", mock.local_addr());
    let err = client
        .get(&url)
        .header("x-auth-token", &token)
        .send()
        .await
        .expect_err("connection dropped");
    assert!(!err.is_timeout(), "{err:?}");
    let ok = client
        .get(&url)
        .header("x-auth-token", &token)
        .send()
        .await
        .expect("served again");
    assert_eq!(ok.status(), 200);
    let journal = mock.admin().journal();
    assert_eq!(journal.count(|e| e.fault == Some(rule) && e.status == 0), 1);
    mock.shutdown().await;
}
