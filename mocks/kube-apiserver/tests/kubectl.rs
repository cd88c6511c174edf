//! kubectl against the embedded server, as a user drives it (skipped when kubectl
//! is not installed). Every command's output or effect is checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mock_kube_apiserver::resources::lookup;
use mock_kube_apiserver::strategy::Subresource;
use mock_kube_apiserver::{ApiServer, Config, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const DEADLINE: Duration = Duration::from_secs(30);

fn kubectl() -> Option<&'static str> {
    let path = "/usr/bin/kubectl";
    if Path::new(path).exists() {
        return Some(path);
    }
    eprintln!("skipping: kubectl not found at {path}");
    None
}

/// A started server, a kubeconfig for it, and a scratch directory.
struct Session {
    bin: &'static str,
    server: ApiServer,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    runs: AtomicUsize,
}

impl Session {
    async fn start(bin: &'static str) -> Session {
        let server = ApiServer::start(Config::default()).await.expect("start");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("write kubeconfig");
        Session {
            bin,
            server,
            dir,
            kubeconfig,
            runs: AtomicUsize::new(0),
        }
    }

    /// A kubectl command with its own discovery cache (kubectl caches discovery
    /// per host:port under the cache dir).
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let mut cmd = tokio::process::Command::new(self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join(format!("cache-{n}")))
            .arg("--request-timeout=10s")
            .args(args)
            .kill_on_drop(true);
        cmd
    }

    async fn output(&self, args: &[&str]) -> std::process::Output {
        tokio::time::timeout(DEADLINE, self.command(args).output())
            .await
            .expect("kubectl finished before the deadline")
            .expect("kubectl runs")
    }

    /// Run, expect success, return stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run, expect failure, return stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.output(args).await;
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all).await).expect("json output")
    }

    fn file(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).expect("write manifest");
        path.to_string_lossy().into_owned()
    }

    fn store(&self) -> Store {
        self.server.store()
    }
}

/// Wait until `cond` holds, polling; fail at the deadline.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn seed_node(store: &Store, name: &str, ready: bool) {
    let nodes = lookup("", "v1", "nodes").expect("nodes");
    store
        .create(
            nodes,
            None,
            json!({
                "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
                "status": {
                    "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                    "nodeInfo": {"kubeletVersion": "v1.34.0", "osImage": "Test OS", "kernelVersion": "6.1",
                                 "containerRuntimeVersion": "containerd://2.0"},
                },
            }),
            Default::default(),
        )
        .expect("create node");
}

fn set_ready(store: &Store, name: &str) {
    let nodes = lookup("", "v1", "nodes").expect("nodes");
    store
        .patch(
            nodes,
            None,
            name,
            Subresource::Status,
            |cur| {
                let mut new = cur.clone();
                new["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
                Ok(new)
            },
            Default::default(),
        )
        .expect("patch status");
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[tokio::test]
async fn kubectl_session() {
    let Some(bin) = kubectl() else { return };
    // Guard against a kubectl that is present but broken.
    assert!(
        Command::new(bin)
            .arg("version")
            .arg("--client")
            .output()
            .is_ok_and(|o| o.status.success())
    );
    let s = Session::start(bin).await;
    seed_node(&s.store(), "n1", true);

    // get: the printer columns come from the server's Table.
    let table = s.ok(&["get", "nodes"]).await;
    let header: Vec<&str> = first_line(&table).split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[0], row[1], row[2], row[4]),
        ("n1", "Ready", "control-plane", "v1.34.0"),
        "{table}"
    );
    let wide = s.ok(&["get", "nodes", "-o", "wide"]).await;
    for col in [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ] {
        assert!(first_line(&wide).contains(col), "{col} missing:\n{wide}");
    }
    assert!(
        wide.contains("10.0.0.5") && wide.contains("containerd://2.0"),
        "{wide}"
    );
    let yaml = s.ok(&["get", "node", "n1", "-o", "yaml"]).await;
    assert!(
        yaml.contains("kind: Node") && yaml.contains("name: n1"),
        "{yaml}"
    );
    let ip = s
        .ok(&[
            "get",
            "node",
            "n1",
            "-o",
            "jsonpath={.status.addresses[0].address}",
        ])
        .await;
    assert_eq!(ip, "10.0.0.5");
    let raw: Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/version"]).await).expect("version");
    assert_eq!(raw["gitVersion"], "v1.34.0");

    // Aggregated discovery: no per-group legacy documents were needed.
    assert!(
        !s.server
            .audit()
            .iter()
            .any(|e| e.path == "/api/v1" || e.path.starts_with("/apis/")),
        "kubectl fell back to legacy discovery"
    );

    let described = s.ok(&["describe", "node", "n1"]).await;
    assert!(
        described.contains("Name:") && described.contains("n1"),
        "{described}"
    );
    assert!(described.contains("InternalIP:  10.0.0.5"), "{described}");
    assert!(
        described.contains("Kubelet Version:            v1.34.0"),
        "{described}"
    );

    // apply: create, then a changed manifest is patched (client-side apply).
    let manifest = |label: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: applied\n  labels:\n    tier: {label}\nspec:\n  podCIDR: 10.1.0.0/24\n"
        )
    };
    let path = s.file("node.yaml", &manifest("a"));
    assert_eq!(
        s.ok(&["apply", "-f", &path]).await.trim(),
        "node/applied created"
    );
    let path = s.file("node.yaml", &manifest("b"));
    assert_eq!(
        s.ok(&["apply", "-f", &path]).await.trim(),
        "node/applied configured"
    );
    let applied = s.json(&["get", "node", "applied"]).await;
    assert_eq!(applied["metadata"]["labels"]["tier"], "b");
    assert!(
        applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let audit = s.server.audit();
    let patch = audit
        .iter()
        .find(|e| e.verb == "patch" && e.name.as_deref() == Some("applied"))
        .expect("apply patched");
    assert_eq!(patch.patch_type.as_deref(), Some("strategic"));
    assert!(
        patch.query.contains("fieldValidation=Strict"),
        "{}",
        patch.query
    );

    // Strict validation (kubectl found fieldValidation in the OpenAPI v3 document).
    let bad = s.file(
        "bad.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: bad\nspek: {}\n",
    );
    let err = s.fails(&["apply", "-f", &bad]).await;
    assert!(
        err.contains(r#"strict decoding error: unknown field "spek""#),
        "{err}"
    );

    // explain reads the OpenAPI v3 schemas.
    let explained = s.ok(&["explain", "node.spec"]).await;
    assert!(
        explained.contains("providerID") && explained.contains("FIELDS"),
        "{explained}"
    );

    // create and replace.
    let cm = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  namespace: default\ndata:\n  key: {value}\n"
        )
    };
    let path = s.file("cm.yaml", &cm("one"));
    assert_eq!(
        s.ok(&["create", "-f", &path]).await.trim(),
        "configmap/c1 created"
    );
    let path = s.file("cm.yaml", &cm("two"));
    assert_eq!(
        s.ok(&["replace", "-f", &path]).await.trim(),
        "configmap/c1 replaced"
    );
    assert_eq!(
        s.ok(&["get", "cm", "c1", "-o", "jsonpath={.data.key}"])
            .await,
        "two"
    );
    let cms = s.ok(&["get", "configmaps"]).await;
    assert_eq!(
        first_line(&cms).split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"]
    );

    // patch, three ways.
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"merge"}}"#,
    ])
    .await;
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"json"}]"#,
    ])
    .await;
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type",
        "strategic",
        "-p",
        r#"{"data":{"s":"strategic"}}"#,
    ])
    .await;
    let patched = s.json(&["get", "cm", "c1"]).await;
    assert_eq!(
        (
            &patched["data"]["m"],
            &patched["data"]["j"],
            &patched["data"]["s"]
        ),
        (&json!("merge"), &json!("json"), &json!("strategic"))
    );

    // label and annotate.
    assert_eq!(
        s.ok(&["label", "node", "n1", "env=test"]).await.trim(),
        "node/n1 labeled"
    );
    assert_eq!(
        s.ok(&["annotate", "node", "n1", "note=hi"]).await.trim(),
        "node/n1 annotated"
    );
    let n1 = s.json(&["get", "node", "n1"]).await;
    assert_eq!(n1["metadata"]["labels"]["env"], "test");
    assert_eq!(n1["metadata"]["annotations"]["note"], "hi");

    // Services as a user sees them: the table's real columns, an allocated ClusterIP and
    // NodePort, and `describe service`.
    let svc = s.file(
        "svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  type: LoadBalancer\n  selector:\n    app: web\n  ports:\n  - port: 8080\n",
    );
    assert_eq!(
        s.ok(&["apply", "-f", &svc]).await.trim(),
        "service/web created"
    );
    let svcs = s.ok(&["get", "svc", "web", "-o", "wide"]).await;
    assert_eq!(
        first_line(&svcs).split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{svcs}"
    );
    assert!(
        svcs.contains("LoadBalancer") && svcs.contains("<pending>") && svcs.contains("8080:3"),
        "{svcs}"
    );
    let described = s.ok(&["describe", "service", "web"]).await;
    for want in [
        "Name:                     web",
        "Type:                     LoadBalancer",
        "Port:                     <unset>  8080/TCP",
        "NodePort:                 <unset>  3",
        "Selector:                 app=web",
    ] {
        assert!(described.contains(want), "{want:?} missing:\n{described}");
    }
    s.ok(&["delete", "svc", "web"]).await;

    // delete with a finalizer: stays, with a deletionTimestamp, until it is removed.
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await;
    s.ok(&["delete", "cm", "c1", "--wait=false"]).await;
    let held = s.json(&["get", "cm", "c1"]).await;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let gone = s.fails(&["get", "cm", "c1"]).await;
    assert!(gone.contains("NotFound"), "{gone}");

    // wait: for a condition that becomes true while kubectl watches.
    seed_node(&s.store(), "late", false);
    let waiter = s
        .command(&[
            "wait",
            "--for=condition=Ready",
            "node/late",
            "--timeout=25s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn wait");
    eventually("kubectl wait watches node/late", || {
        s.server.audit().iter().any(|e| {
            e.verb == "watch" && e.resource == "nodes" && e.user_agent.starts_with("kubectl")
        })
    })
    .await;
    set_ready(&s.store(), "late");
    let out = tokio::time::timeout(DEADLINE, waiter.wait_with_output())
        .await
        .expect("wait finished")
        .expect("wait ran");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "node/late condition met"
    );
    let met = s
        .ok(&[
            "wait",
            "--for=jsonpath={.spec.podCIDR}=10.1.0.0/24",
            "node/applied",
            "--timeout=10s",
        ])
        .await;
    assert_eq!(met.trim(), "node/applied condition met");

    // get -w: the header once, then a row per event.
    let mut watcher = s
        .command(&["get", "nodes", "-w"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let mut lines = BufReader::new(watcher.stdout.take().expect("stdout")).lines();
    let mut next_line = async || {
        tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("a line before the deadline")
            .expect("read")
            .expect("stream open")
    };
    let header = next_line().await;
    assert!(
        header.starts_with("NAME") && header.contains("ROLES"),
        "{header}"
    );
    let mut initial = Vec::new();
    for _ in 0..3 {
        initial.push(next_line().await);
    }
    assert!(initial.iter().any(|l| l.starts_with("n1 ")), "{initial:?}");
    s.ok(&["label", "node", "n1", "watched=yes"]).await;
    let update = next_line().await;
    assert!(
        update.starts_with("n1 ") && update.contains("Ready"),
        "{update}"
    );
    watcher.kill().await.expect("stop watch");

    // api-resources lists every served type from aggregated discovery.
    let resources = s.ok(&["api-resources"]).await;
    for needle in [
        "nodes",
        "leases",
        "coordination.k8s.io/v1",
        "endpointslices",
    ] {
        assert!(resources.contains(needle), "{needle} missing:\n{resources}");
    }

    // Services print their real columns.
    let svc = s.file(
        "svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  type: LoadBalancer\n  selector:\n    app: web\n  ports:\n  - port: 80\n",
    );
    s.ok(&["create", "-f", &svc]).await;
    let services = s.ok(&["get", "svc", "web", "-o", "wide"]).await;
    let cols: Vec<&str> = first_line(&services).split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ]
    );
    let row: Vec<&str> = services
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[1], row[3], row[6]),
        ("LoadBalancer", "<pending>", "app=web"),
        "{services}"
    );
    assert!(
        row[4].starts_with("80:") && row[4].ends_with("/TCP"),
        "{services}"
    );

    s.server.shutdown().await;
}
