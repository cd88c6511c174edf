//! Benchmark: one Octavia load balancer's whole life — fully-populated create (listener,
//! pool, member, health monitor), read until ACTIVE, cascade delete, read until gone — with
//! immediate transitions, as a CCM drives it for every Service of type LoadBalancer.
//! Issue 4's target is under 5 ms of server time per cycle; this measures the time a
//! client sees over loopback HTTP with keep-alive (an upper bound on server time) and
//! prints the median, p90 and max.
//!
//! Run: `cargo bench -p mock-openstack --bench lb_cycle` (add `-- CYCLES` to change the
//! count, default 500).

use std::time::{Duration, Instant};

use mock_openstack::{Config, OpenStackMock};
use serde_json::{Value, json};

const TARGET: Duration = Duration::from_millis(5);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn cycle(
    client: &reqwest::Client,
    lbs: &str,
    token: &str,
    subnet: &str,
    i: usize,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let body = json!({"loadbalancer": {"name": format!("bench-{i}"), "vip_subnet_id": subnet,
        "listeners": [{"protocol": "TCP", "protocol_port": 18080,
            "default_pool": {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                "members": [{"address": "127.10.0.10", "protocol_port": 30080}],
                "healthmonitor": {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1}}}]}});
    let created = client
        .post(lbs)
        .header("x-auth-token", token)
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(created.status() == 201, "create: {}", created.status());
    let created: Value = created.json().await?;
    let id = created["loadbalancer"]["id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no id in {created}"))?
        .to_string();
    let uri = format!("{lbs}/{id}");
    loop {
        let lb: Value = client
            .get(&uri)
            .header("x-auth-token", token)
            .send()
            .await?
            .json()
            .await?;
        if lb["loadbalancer"]["provisioning_status"] == "ACTIVE" {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(5), "never ACTIVE");
    }
    let deleted = client
        .delete(format!("{uri}?cascade=true"))
        .header("x-auth-token", token)
        .send()
        .await?;
    anyhow::ensure!(deleted.status() == 204, "delete: {}", deleted.status());
    loop {
        let r = client
            .get(&uri)
            .header("x-auth-token", token)
            .send()
            .await?;
        if r.status() == 404 {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(5), "never gone");
    }
    Ok(started.elapsed())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cycles: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(500);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mock = OpenStackMock::start(Config {
        nodes: 3,
        ..Config::default()
    })
    .await?;
    let info = mock.ready_info();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let auth = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": info.username, "domain": {"name": info.domain_name}, "password": info.password}}},
        "scope": {"project": {"name": info.project_name, "domain": {"name": info.domain_name}}}}});
    let resp = client
        .post(format!("{}/auth/tokens", info.auth_url))
        .json(&auth)
        .send()
        .await?;
    let token = resp.headers()["x-subject-token"].to_str()?.to_string();
    let base = info.auth_url.trim_end_matches("/identity/v3").to_string();
    let subnets: Value = client
        .get(format!("{base}/network/v2.0/subnets"))
        .header("x-auth-token", &token)
        .send()
        .await?
        .json()
        .await?;
    let subnet = subnets["subnets"][0]["id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no subnet"))?
        .to_string();
    let lbs = format!("{base}/load-balancer/v2/lbaas/loadbalancers");

    for i in 0..20 {
        cycle(&client, &lbs, &token, &subnet, i).await?;
    }
    let mut times = Vec::with_capacity(cycles);
    for i in 0..cycles {
        times.push(cycle(&client, &lbs, &token, &subnet, i).await?);
    }
    times.sort();
    let median = percentile(&times, 0.5);
    println!(
        "openstack lb create->ACTIVE->cascade delete->gone, {cycles} cycles (4+ requests each, \
         loopback HTTP included): median {:.3} ms, p90 {:.3} ms, max {:.3} ms; target < {} ms: {}",
        median.as_secs_f64() * 1e3,
        percentile(&times, 0.9).as_secs_f64() * 1e3,
        percentile(&times, 1.0).as_secs_f64() * 1e3,
        TARGET.as_millis(),
        if median < TARGET { "met" } else { "MISSED" }
    );
    let leaks = mock.admin().leaks();
    println!("leaks after the run: {}", serde_json::to_string(&leaks)?);
    mock.shutdown().await;
    Ok(())
}
