//! kubectl against the embedded server (skipped when kubectl is not installed).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mock_kube_apiserver::{ApiServer, Config};
use serde_json::{Value, json};

fn kubectl() -> Option<&'static str> {
    let path = "/usr/bin/kubectl";
    if Path::new(path).exists() {
        return Some(path);
    }
    eprintln!("skipping: kubectl not found at {path}");
    None
}

/// Run kubectl with a deadline (it has its own request timeout too).
async fn run(bin: &str, kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--request-timeout=10s");
    cmd.args(args).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("kubectl finished before the deadline")
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn kubectl_get_nodes() {
    let Some(bin) = kubectl() else { return };
    // Guard against a kubectl that is present but broken.
    assert!(
        Command::new(bin)
            .arg("version")
            .arg("--client")
            .output()
            .is_ok_and(|o| o.status.success())
    );

    let server = ApiServer::start(Config::default()).await.expect("start");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("write kubeconfig");
    let cache = dir.path().join("cache");
    let store = server.store();
    let nodes = mock_kube_apiserver::resources::lookup("", "v1", "nodes").expect("nodes");
    for name in ["k1", "k2", "k3"] {
        store
            .create(
                nodes,
                None,
                json!({"metadata": {"name": name}}),
                Default::default(),
            )
            .expect("create node");
    }

    let table = run(bin, &kubeconfig, &cache, &["get", "nodes"]).await;
    for name in ["k1", "k2", "k3"] {
        assert!(table.contains(name), "{name} missing in:\n{table}");
    }

    let list: Value =
        serde_json::from_str(&run(bin, &kubeconfig, &cache, &["get", "nodes", "-o", "json"]).await)
            .expect("json output");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["k1", "k2", "k3"]);

    let version: Value =
        serde_json::from_str(&run(bin, &kubeconfig, &cache, &["get", "--raw", "/version"]).await)
            .expect("version");
    assert_eq!(version["gitVersion"], "v1.34.0");

    let node: Value = serde_json::from_str(
        &run(
            bin,
            &kubeconfig,
            &cache,
            &["get", "node", "k2", "-o", "json"],
        )
        .await,
    )
    .expect("node");
    assert_eq!(node["kind"], "Node");
    assert!(
        server
            .audit()
            .iter()
            .any(|e| e.user_agent.starts_with("kubectl") && e.verb == "list")
    );
    server.shutdown().await;
}
