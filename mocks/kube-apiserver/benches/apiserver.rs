//! Benchmark of the embedded API server alone, printing numbers (no harness).
//!
//! Why this exists: issue 3 sets targets for the server on a 2-core machine — ≥ 5,000 node
//! creates/s, LIST of 5,000 nodes under 100 ms, p99 watch delivery under 10 ms with 100
//! watchers, under 300 MB resident with 5,000 nodes and 1,000 services — and every case in
//! the conformance run stands on it. Run with
//! `cargo bench -p mock-kube-apiserver --bench apiserver` (release profile); set
//! `APISERVER_BENCH_SCALE=0.1` for a quick smoke run and `APISERVER_BENCH_ONLY=list,watch`
//! (sections: memory/list, creates, updates, http, watch) to run only some.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::{ApiServer, AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;

use common::{cpu_seconds, median, node, percentile, service, status_mb};

const TOKEN: &str = "bench-token";

fn scale(n: usize) -> usize {
    let s: f64 = std::env::var("APISERVER_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * s) as usize).max(1)
}

/// Whether to run a section: `APISERVER_BENCH_ONLY=memory,list,creates,updates,http,watch`
/// picks some (memory and list always run together); unset runs all.
fn enabled(section: &str) -> bool {
    std::env::var("APISERVER_BENCH_ONLY")
        .map(|only| only.split(',').any(|s| s.trim() == section))
        .unwrap_or(true)
}

fn config() -> Config {
    Config {
        token: TOKEN.into(),
        ..Config::default()
    }
}

fn post(uri: &str, body: &Value) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("request")
}

async fn oneshot_create(app: &axum::Router, uri: &str, body: &Value) {
    let resp = app
        .clone()
        .oneshot(post(uri, body))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::CREATED);
    let _ = resp.into_body().collect().await;
}

/// Node creates/s through the router in process, from `clients` concurrent tasks.
async fn creates_in_process(clients: usize, total: usize) -> (f64, f64) {
    let app = router(AppState::new(&config()));
    // Bodies are built before the clock starts: only the server is measured.
    let bodies: Vec<Vec<String>> = (0..clients)
        .map(|c| {
            (0..total / clients)
                .map(|i| node(&format!("n-{c}-{i}")).to_string())
                .collect()
        })
        .collect();
    let cpu = cpu_seconds("self");
    let start = Instant::now();
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|bodies| {
            let app = app.clone();
            tokio::spawn(async move {
                for body in bodies {
                    let req = Request::builder()
                        .method("POST")
                        .uri("/api/v1/nodes")
                        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(Body::from(body))
                        .expect("request");
                    let resp = app.clone().oneshot(req).await.expect("infallible");
                    assert_eq!(resp.status(), StatusCode::CREATED);
                    let _ = resp.into_body().collect().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let n = (total / clients * clients) as f64;
    (
        n / start.elapsed().as_secs_f64(),
        (cpu_seconds("self") - cpu) / n * 1e6,
    )
}

/// Writes/s of the node-initialisation pattern through the router in process: on each of
/// `nodes` nodes a merge patch of labels + providerID, a JSON patch removing the taint and
/// a strategic status patch of addresses (what the CCM does), each recording managedFields.
async fn updates_in_process(nodes: usize) -> (f64, f64) {
    let app = router(AppState::new(&config()));
    for i in 0..nodes {
        oneshot_create(&app, "/api/v1/nodes", &node(&format!("u-{i}"))).await;
    }
    let patch = |uri: String, ct: &str, body: Value| {
        Request::builder()
            .method("PATCH")
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, ct)
            .header(header::USER_AGENT, "bench-ccm/v0")
            .body(Body::from(body.to_string()))
            .expect("request")
    };
    let cpu = cpu_seconds("self");
    let start = Instant::now();
    for i in 0..nodes {
        let name = format!("u-{i}");
        let reqs = [
            patch(
                format!("/api/v1/nodes/{name}"),
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "m1.small",
                        "topology.kubernetes.io/zone": "zone-a"}}, "spec": {"providerID": format!("example:///{i}")}}),
            ),
            patch(
                format!("/api/v1/nodes/{name}"),
                "application/json-patch+json",
                json!([{"op": "test", "path": "/spec/taints/0/key", "value": "node.cloudprovider.kubernetes.io/uninitialized"},
                       {"op": "remove", "path": "/spec/taints/0"}]),
            ),
            patch(
                format!("/api/v1/nodes/{name}/status"),
                "application/strategic-merge-patch+json",
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"},
                                                {"type": "Hostname", "address": name}]}}),
            ),
        ];
        for req in reqs {
            let resp = app.clone().oneshot(req).await.expect("infallible");
            assert_eq!(resp.status(), StatusCode::OK);
            let _ = resp.into_body().collect().await;
        }
    }
    let n = (3 * nodes) as f64;
    (
        n / start.elapsed().as_secs_f64(),
        (cpu_seconds("self") - cpu) / n * 1e6,
    )
}

/// Node creates/s over loopback HTTP/1.1 (keep-alive), from `clients` concurrent clients.
async fn creates_http(clients: usize, total: usize) -> f64 {
    let server = ApiServer::start(config()).await.expect("start");
    let url = format!("{}/api/v1/nodes", server.url());
    let bodies: Vec<Vec<String>> = (0..clients)
        .map(|c| {
            (0..total / clients)
                .map(|i| node(&format!("n-{c}-{i}")).to_string())
                .collect()
        })
        .collect();
    let start = Instant::now();
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|bodies| {
            let url = url.clone();
            let http = reqwest::Client::new();
            tokio::spawn(async move {
                for body in bodies {
                    let resp = http
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(body)
                        .send()
                        .await
                        .expect("POST");
                    assert_eq!(resp.status().as_u16(), 201);
                    let _ = resp.bytes().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let rate = (total / clients * clients) as f64 / start.elapsed().as_secs_f64();
    server.shutdown().await;
    rate
}

/// Median ms of LISTing every node, over HTTP (body read in full) and in process.
async fn list_nodes(base: &str, app: &axum::Router, runs: usize) -> (f64, f64) {
    let http = reqwest::Client::new();
    let url = format!("{base}/api/v1/nodes");
    let mut over_http = Vec::new();
    let mut in_process = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let body = http
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("LIST")
            .bytes()
            .await
            .expect("body");
        over_http.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(body.len() > 1000);
        let t = Instant::now();
        let req = Request::builder()
            .uri("/api/v1/nodes")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .body(Body::empty())
            .expect("request");
        let resp = app.clone().oneshot(req).await.expect("infallible");
        let _ = resp.into_body().collect().await.expect("body");
        in_process.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (median(&mut over_http), median(&mut in_process))
}

/// Delivery latency (ms) from sending a write to each of `watchers` HTTP watches
/// receiving its event, over `writes` sequential label patches of one node.
async fn watch_latency(watchers: usize, writes: usize) -> Vec<f64> {
    let server = ApiServer::start(config()).await.expect("start");
    let http = reqwest::Client::new();
    let base = server.url();
    let resp = http
        .post(format!("{base}/api/v1/nodes"))
        .bearer_auth(TOKEN)
        .json(&node("w"))
        .send()
        .await
        .expect("create");
    assert_eq!(resp.status().as_u16(), 201);
    let sent: Arc<Vec<Mutex<Option<Instant>>>> =
        Arc::new((0..writes).map(|_| Mutex::new(None)).collect());
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(watchers * writes)));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(watchers);
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let resp = reqwest::Client::new()
            .get(format!(
                "{base}/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dw"
            ))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("watch");
        assert_eq!(resp.status().as_u16(), 200);
        let (sent, latencies, ready) = (sent.clone(), latencies.clone(), ready_tx.clone());
        tasks.push(tokio::spawn(async move {
            let mut resp = resp;
            let mut buf = Vec::new();
            let mut seen = 0;
            while seen < writes {
                let Ok(Some(chunk)) = resp.chunk().await else {
                    break;
                };
                buf.extend_from_slice(&chunk);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                        continue;
                    };
                    let seq = ev["object"]["metadata"]["labels"]["seq"]
                        .as_str()
                        .and_then(|s| s.parse::<usize>().ok());
                    match seq {
                        None => {
                            let _ = ready.send(()).await; // the initial ADDED
                        }
                        Some(i) if i < writes => {
                            let at = *sent[i].lock().expect("lock");
                            if let Some(at) = at {
                                let ms = at.elapsed().as_secs_f64() * 1e3;
                                latencies.lock().expect("lock").push(ms);
                            }
                            seen += 1;
                        }
                        Some(_) => {}
                    }
                }
            }
        }));
    }
    for _ in 0..watchers {
        ready_rx.recv().await.expect("watcher ready");
    }
    for i in 0..writes {
        *sent[i].lock().expect("lock") = Some(Instant::now());
        let resp = http
            .patch(format!("{base}/api/v1/nodes/w"))
            .bearer_auth(TOKEN)
            .header(header::CONTENT_TYPE, "application/merge-patch+json")
            .body(json!({"metadata": {"labels": {"seq": i.to_string()}}}).to_string())
            .send()
            .await
            .expect("patch");
        assert_eq!(resp.status().as_u16(), 200);
        let _ = resp.bytes().await;
        // Writes a few ms apart, as controllers make them, so each is measured on its own.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    server.shutdown().await;
    let mut l = latencies.lock().expect("lock").clone();
    l.sort_by(f64::total_cmp);
    l
}

/// VmRSS with 5,000 nodes and 1,000 services, then LIST of all nodes over HTTP and in process.
async fn memory_and_list() {
    let rss_before = status_mb("self", "VmRSS:");
    let state_app = router(AppState::new(&config()));
    let (nodes, services) = (scale(5_000), scale(1_000));
    for i in 0..nodes {
        oneshot_create(&state_app, "/api/v1/nodes", &node(&format!("node-{i:05}"))).await;
    }
    for i in 0..services {
        let svc = service(&format!("svc-{i:05}"));
        oneshot_create(&state_app, "/api/v1/namespaces/default/services", &svc).await;
    }
    let rss_after = status_mb("self", "VmRSS:");
    println!(
        "memory: VmRSS {rss_after:.1} MB with {nodes} nodes + {services} services \
         (process start {rss_before:.1} MB; target < 300 MB)"
    );
    // Serve the same router on loopback so both paths read the same store.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(axum::serve(listener, state_app.clone()).into_future());
    let (http_ms, local_ms) = list_nodes(&url, &state_app, 11).await;
    println!(
        "LIST {nodes} nodes: median {http_ms:.1} ms over HTTP, {local_ms:.1} ms in process \
         (target < 100 ms)"
    );
    serving.abort();
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        println!("mock-kube-apiserver benchmark ({} cores)", std::thread::available_parallelism().map_or(0, |n| n.get()));

        // Memory first, while the process is fresh.
        if enabled("memory") || enabled("list") {
            memory_and_list().await;
        }
        if enabled("creates") {
            let total = scale(5_000);
            for clients in [1, 8] {
                let (r, us) = creates_in_process(clients, total).await;
                println!("node creates in process, {clients} client(s): {r:.0}/s, {us:.0} µs CPU each (target ≥ 5000/s)");
            }
        }
        if enabled("updates") {
            let (r, us) = updates_in_process(scale(2_000)).await;
            println!("node-init patches in process (merge, json, strategic /status), 1 client: {r:.0}/s, {us:.0} µs CPU each");
        }
        if enabled("http") {
            let total = scale(4_000);
            for clients in [1, 8] {
                let r = creates_http(clients, total).await;
                println!("node creates over loopback HTTP, {clients} client(s): {r:.0}/s (target ≥ 5000/s)");
            }
        }
        if enabled("watch") {
            let l = watch_latency(100, scale(200)).await;
            if l.is_empty() {
                println!("watch delivery: no events measured");
            } else {
                println!(
                    "watch delivery, 100 watchers, {} deliveries: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < 10 ms)",
                    l.len(),
                    percentile(&l, 0.5),
                    percentile(&l, 0.99),
                    percentile(&l, 1.0)
                );
            }
        }
    });
}
