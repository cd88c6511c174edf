//! The embedded API server beside a real one (etcd + kube-apiserver from `apiserver build`),
//! both started by `cluster`: the same requests get the same status, reason and stored data
//! from both, and a SIGKILLed `cluster --apiserver real` takes etcd and kube-apiserver with
//! it. The binaries are built (or found in the cache) by the test itself; `.ci/run` builds
//! them first so that the minutes of a cold Go build show as a step of their own.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

mod support;
use support::Running;

const BIN: &str = env!("CARGO_BIN_EXE_ccm-conformance");

struct Server {
    url: String,
    token: String,
    readonly_token: String,
    client: reqwest::Client,
    process: Running,
}

fn build_control_plane() {
    let out = Command::new(BIN)
        .args(["apiserver", "build"])
        .output()
        .expect("running apiserver build");
    assert!(
        out.status.success(),
        "apiserver build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(kind: &str, dir: &Path) -> Server {
    let ready = dir.join(format!("{kind}.json"));
    let mut process = Running(
        Command::new(BIN)
            .args(["cluster", "--apiserver", kind, "--ready-file"])
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning ccm-conformance cluster"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let info: Value = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break serde_json::from_str(&text).expect("ready file is JSON");
        }
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("cluster --apiserver {kind} exited before it was ready: {status}");
        }
        assert!(Instant::now() < deadline, "no ready file from {kind}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let kubeconfig: Value = serde_json::from_str(
        &std::fs::read_to_string(info["kubeconfig"].as_str().expect("kubeconfig"))
            .expect("reading the kubeconfig"),
    )
    .expect("the kubeconfig is JSON");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
                .as_str()
                .expect("a CA in the kubeconfig"),
        )
        .expect("base64 CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("PEM CA"))
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let text = |k: &str| info[k].as_str().expect(k).to_string();
    Server {
        url: text("server"),
        token: text("token"),
        readonly_token: text("readonly_token"),
        client,
        process,
    }
}

/// One request of the comparison: method, path, body, which token, and the fields of the
/// answer compared besides the status code and the Status `reason` (JSON pointers).
struct Step {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    token: Token,
    fields: &'static [&'static str],
}

#[derive(Clone, Copy)]
enum Token {
    Admin,
    ReadOnly,
    None,
}

/// What is compared of an answer: the status code, the Status `reason` (errors) and the
/// step's fields.
async fn answer(server: &Server, step: &Step) -> Value {
    let url = format!("{}{}", server.url, step.path);
    let mut req = match step.method {
        "POST" => server.client.post(url),
        "DELETE" => server.client.delete(url),
        _ => server.client.get(url),
    };
    match step.token {
        Token::Admin => req = req.bearer_auth(&server.token),
        Token::ReadOnly => req = req.bearer_auth(&server.readonly_token),
        Token::None => {}
    }
    if let Some(body) = &step.body {
        req = req.json(body);
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let mut out = json!({"code": code, "reason": body.get("reason")});
    for field in step.fields {
        out[*field] = body.pointer(field).cloned().unwrap_or(Value::Null);
    }
    out
}

fn steps() -> Vec<Step> {
    let secret = |name: &str, string_data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": "diff"},
               "stringData": string_data})
    };
    vec![
        Step {
            name: "create a namespace",
            method: "POST",
            path: "/api/v1/namespaces",
            body: Some(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff"}}),
            ),
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "create a Secret from stringData",
            method: "POST",
            path: "/api/v1/namespaces/diff/secrets",
            body: Some(secret("creds", json!({"10.0.0.1.username": "user"}))),
            token: Token::Admin,
            fields: &["/data", "/stringData", "/type"],
        },
        Step {
            name: "read it back",
            method: "GET",
            path: "/api/v1/namespaces/diff/secrets/creds",
            body: None,
            token: Token::Admin,
            fields: &["/data", "/stringData", "/type"],
        },
        Step {
            name: "create it again",
            method: "POST",
            path: "/api/v1/namespaces/diff/secrets",
            body: Some(secret("creds", json!({"k": "v"}))),
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "a stringData value that is not a string",
            method: "POST",
            path: "/api/v1/namespaces/diff/secrets",
            body: Some(secret("bad", json!({"k": 1}))),
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "an invalid name",
            method: "POST",
            path: "/api/v1/namespaces/diff/secrets",
            body: Some(secret("Bad_Name", json!({"k": "v"}))),
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "a Secret that does not exist",
            method: "GET",
            path: "/api/v1/namespaces/diff/secrets/missing",
            body: None,
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "a write with the read-only token",
            method: "POST",
            path: "/api/v1/namespaces",
            body: Some(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ro"}}),
            ),
            token: Token::ReadOnly,
            fields: &[],
        },
        Step {
            name: "a read with the read-only token",
            method: "GET",
            path: "/api/v1/namespaces/diff",
            body: None,
            token: Token::ReadOnly,
            fields: &[],
        },
        Step {
            name: "create a Deployment with what kubectl create deployment sends",
            method: "POST",
            path: "/apis/apps/v1/namespaces/diff/deployments",
            body: Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "ccm", "labels": {"app": "ccm"}},
                "spec": {"selector": {"matchLabels": {"app": "ccm"}},
                    "template": {"metadata": {"labels": {"app": "ccm"}},
                        "spec": {"containers": [{"name": "ccm", "image": "ccm:v1"}]}}}})),
            token: Token::Admin,
            fields: &[
                "/metadata/generation",
                "/spec/replicas",
                "/spec/strategy",
                "/spec/revisionHistoryLimit",
                "/spec/progressDeadlineSeconds",
                "/status",
            ],
        },
        Step {
            name: "a Deployment whose selector does not match its template",
            method: "POST",
            path: "/apis/apps/v1/namespaces/diff/deployments",
            body: Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "bad"},
                "spec": {"selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "y"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}}}})),
            token: Token::Admin,
            fields: &[],
        },
        Step {
            name: "create a DaemonSet",
            method: "POST",
            path: "/apis/apps/v1/namespaces/diff/daemonsets",
            body: Some(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "ccm"},
                "spec": {"selector": {"matchLabels": {"app": "ccm"}},
                    "template": {"metadata": {"labels": {"app": "ccm"}},
                        "spec": {"containers": [{"name": "ccm", "image": "ccm:v1"}]}}}})),
            token: Token::Admin,
            fields: &[
                "/metadata/generation",
                "/spec/updateStrategy",
                "/spec/revisionHistoryLimit",
                "/status",
            ],
        },
        Step {
            name: "create a ClusterRoleBinding without apiGroups",
            method: "POST",
            path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            body: Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:ccm"},
                "roleRef": {"kind": "ClusterRole", "name": "system:ccm"},
                "subjects": [{"kind": "User", "name": "ccm"},
                    {"kind": "ServiceAccount", "name": "ccm", "namespace": "diff"}]})),
            token: Token::Admin,
            fields: &["/roleRef", "/subjects"],
        },
        Step {
            name: "create a ServiceAccount",
            method: "POST",
            path: "/api/v1/namespaces/diff/serviceaccounts",
            body: Some(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "ccm"}})),
            token: Token::Admin,
            fields: &["/secrets"],
        },
        Step {
            name: "delete the ServiceAccount",
            method: "DELETE",
            path: "/api/v1/namespaces/diff/serviceaccounts/ccm",
            body: None,
            token: Token::Admin,
            fields: &["/kind", "/metadata/name"],
        },
        Step {
            name: "delete the ClusterRoleBinding",
            method: "DELETE",
            path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:ccm",
            body: None,
            token: Token::Admin,
            fields: &["/kind", "/status"],
        },
        Step {
            name: "no token over TLS",
            method: "GET",
            path: "/api/v1/namespaces",
            body: None,
            token: Token::None,
            fields: &[],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_real_answer_alike_and_real_dies_with_its_parent() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    build_control_plane();
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = start("embedded", dir.path());
    let real = start("real", dir.path());
    let mut differences = Vec::new();
    for step in steps() {
        let (ours, theirs) = (answer(&embedded, &step).await, answer(&real, &step).await);
        if ours != theirs {
            differences.push(format!(
                "{}: embedded {ours}\n{:width$}  real     {theirs}",
                step.name,
                "",
                width = step.name.len()
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "the servers differ:\n{}",
        differences.join("\n")
    );

    // SIGKILL runs no destructor: etcd and kube-apiserver must die by their death signal.
    let mut real = real;
    let pid = real.process.0.id();
    let children = children_of(pid);
    assert_eq!(children.len(), 2, "etcd and kube-apiserver: {children:?}");
    let _ = real.process.0.kill();
    let _ = real.process.0.wait();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let alive: Vec<u32> = children
            .iter()
            .copied()
            .filter(|&c| proc_stat(c).is_some_and(|(s, _)| s != 'Z'))
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running after the parent was SIGKILLed: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (state, parent PID) of a process, from /proc; `None` once it is gone.
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    Some((f.next()?.chars().next()?, f.next()?.parse().ok()?))
}

fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|(s, pp)| pp == parent && s != 'Z'))
        .collect()
}
