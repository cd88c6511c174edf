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

/// Whitespace runs collapsed to one space, so kubectl's tab-aligned output can be
/// matched without depending on column widths.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn header(table: &str) -> Vec<&str> {
    first_line(table).split_whitespace().collect()
}

/// The first row whose first cell is `name`, split on whitespace.
fn row_of<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
}

const CCM_INSTALL: &str = include_str!("../fixtures/ccm-install.yaml");
const CCM_DS: &str = "example-cloud-controller-manager";

/// A provider's first steps: namespace, secret and configmap from the command line,
/// `kubectl create` of the RBAC and workload kinds, then `kubectl apply -f` of a CCM
/// install manifest, read back every way a user would, re-applied, changed, deleted.
#[tokio::test]
async fn kubectl_ccm_install() {
    let Some(bin) = kubectl() else { return };
    let s = Session::start(bin).await;

    // Imperative creates.
    let created = [
        (
            vec!["create", "namespace", "ccm-test"],
            "namespace/ccm-test created",
        ),
        (
            vec![
                "create",
                "secret",
                "generic",
                "cloud-config",
                "-n",
                "kube-system",
                "--from-literal=cloud.conf=[Global]\nauth-url=http://127.0.0.1:5000/v3\n",
            ],
            "secret/cloud-config created",
        ),
        (
            vec![
                "create",
                "configmap",
                "ccm-extra",
                "-n",
                "kube-system",
                "--from-literal=region=r1",
            ],
            "configmap/ccm-extra created",
        ),
        (
            vec!["create", "serviceaccount", "helper", "-n", "ccm-test"],
            "serviceaccount/helper created",
        ),
        (
            vec![
                "create",
                "clusterrole",
                "node-reader",
                "--verb=get,list",
                "--resource=nodes",
            ],
            "clusterrole.rbac.authorization.k8s.io/node-reader created",
        ),
        (
            vec![
                "create",
                "clusterrolebinding",
                "node-reader",
                "--clusterrole=node-reader",
                "--serviceaccount=kube-system:cloud-controller-manager",
            ],
            "clusterrolebinding.rbac.authorization.k8s.io/node-reader created",
        ),
        (
            vec![
                "create",
                "rolebinding",
                "helper-reads-nodes",
                "-n",
                "ccm-test",
                "--clusterrole=node-reader",
                "--serviceaccount=ccm-test:helper",
            ],
            "rolebinding.rbac.authorization.k8s.io/helper-reads-nodes created",
        ),
        (
            vec![
                "create",
                "deployment",
                "web",
                "-n",
                "ccm-test",
                "--image=registry.example/web:1.0",
            ],
            "deployment.apps/web created",
        ),
    ];
    for (args, want) in &created {
        assert_eq!(s.ok(args).await.trim(), *want, "{args:?}");
    }
    let secret = s
        .ok(&[
            "get",
            "secret",
            "cloud-config",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.data.cloud\\.conf}",
        ])
        .await;
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(secret.trim())
        .expect("base64");
    assert!(
        String::from_utf8_lossy(&decoded).contains("auth-url="),
        "{secret}"
    );
    let role = s.json(&["get", "clusterrole", "node-reader"]).await;
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}])
    );

    // apply -f of the install manifest, then again: nothing to change.
    let manifest = s.file("ccm-install.yaml", CCM_INSTALL);
    let applied = s.ok(&["apply", "-f", &manifest]).await;
    let lines = [
        "serviceaccount/cloud-controller-manager",
        "clusterrole.rbac.authorization.k8s.io/system:cloud-controller-manager",
        "clusterrolebinding.rbac.authorization.k8s.io/system:cloud-controller-manager",
        "rolebinding.rbac.authorization.k8s.io/cloud-controller-manager:apiserver-authentication-reader",
        "configmap/cloud-controller-manager-flags",
        "daemonset.apps/example-cloud-controller-manager",
    ];
    let with = |verb: &str| {
        lines
            .iter()
            .map(|l| format!("{l} {verb}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        applied.lines().collect::<Vec<_>>(),
        with("created"),
        "{applied}"
    );
    let again = s.ok(&["apply", "-f", &manifest]).await;
    assert_eq!(
        again.lines().collect::<Vec<_>>(),
        with("unchanged"),
        "{again}"
    );

    // get: the columns kube-apiserver prints.
    let ds = s.ok(&["get", "ds", "-n", "kube-system"]).await;
    assert_eq!(
        header(&ds),
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ],
        "{ds}"
    );
    assert_eq!(
        row_of(&ds, CCM_DS)[1..7],
        [
            "0",
            "0",
            "0",
            "0",
            "0",
            "node-role.kubernetes.io/control-plane="
        ],
        "{ds}"
    );
    let deploy = s
        .ok(&["get", "deploy", "-n", "ccm-test", "-o", "wide"])
        .await;
    assert_eq!(
        header(&deploy),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{deploy}"
    );
    let web = row_of(&deploy, "web");
    assert_eq!((web[1], web[2], web[3]), ("0/1", "0", "0"), "{deploy}");
    assert_eq!(
        web[5..],
        ["web", "registry.example/web:1.0", "app=web"],
        "{deploy}"
    );
    let sas = s.ok(&["get", "sa", "-n", "kube-system"]).await;
    assert_eq!(header(&sas), ["NAME", "AGE"], "{sas}");
    row_of(&sas, "cloud-controller-manager");
    let roles = s.ok(&["get", "clusterroles"]).await;
    assert_eq!(header(&roles), ["NAME", "CREATED", "AT"], "{roles}");
    row_of(&roles, "system:cloud-controller-manager");
    let crb = s
        .ok(&[
            "get",
            "clusterrolebinding",
            "system:cloud-controller-manager",
            "-o",
            "wide",
        ])
        .await;
    assert_eq!(
        header(&crb),
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{crb}"
    );
    let row = row_of(&crb, "system:cloud-controller-manager");
    assert_eq!(
        row[1], "ClusterRole/system:cloud-controller-manager",
        "{crb}"
    );
    assert_eq!(
        row.last(),
        Some(&"kube-system/cloud-controller-manager"),
        "{crb}"
    );
    let rbs = s.ok(&["get", "rolebindings", "-n", "kube-system"]).await;
    assert_eq!(
        row_of(
            &rbs,
            "cloud-controller-manager:apiserver-authentication-reader"
        )[1],
        "Role/extension-apiserver-authentication-reader",
        "{rbs}"
    );

    // get all: the `all` category covers daemon sets and deployments.
    let all = s.ok(&["get", "all", "-n", "kube-system"]).await;
    assert!(
        all.contains("daemonset.apps/example-cloud-controller-manager"),
        "{all}"
    );
    let all = s.ok(&["get", "all", "-n", "ccm-test"]).await;
    assert!(all.contains("deployment.apps/web"), "{all}");

    // -o yaml: server-set fields and defaults.
    let yaml = s
        .ok(&["get", "ds", CCM_DS, "-n", "kube-system", "-o", "yaml"])
        .await;
    for want in [
        "kind: DaemonSet",
        "apiVersion: apps/v1",
        "generation: 1",
        "hostNetwork: true",
        "type: RollingUpdate",
        "maxUnavailable: 1",
        "revisionHistoryLimit: 10",
        "numberReady: 0",
        "kubectl.kubernetes.io/last-applied-configuration",
    ] {
        assert!(yaml.contains(want), "{want:?} missing:\n{yaml}");
    }
    let yaml = s
        .ok(&[
            "get",
            "clusterrolebinding",
            "system:cloud-controller-manager",
            "-o",
            "yaml",
        ])
        .await;
    assert!(
        yaml.contains("kind: ClusterRoleBinding") && yaml.contains("roleRef:"),
        "{yaml}"
    );
    let web = s.json(&["get", "deploy", "web", "-n", "ccm-test"]).await;
    assert_eq!(web["spec"]["replicas"], 1);
    assert_eq!(web["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");

    // describe, per kind.
    let describes: [(&[&str], &[&str]); 7] = [
        (
            &["describe", "ds", CCM_DS, "-n", "kube-system"],
            &[
                "Selector: k8s-app=example-cloud-controller-manager",
                "Node-Selector: node-role.kubernetes.io/control-plane=",
                "Pods Status: 0 Running / 0 Waiting / 0 Succeeded / 0 Failed",
                "Service Account: cloud-controller-manager",
                "Image: registry.example/cloud-controller-manager:v1.34.0",
            ],
        ),
        (
            &["describe", "deployment", "web", "-n", "ccm-test"],
            &[
                "Replicas: 1 desired | 0 updated | 0 total | 0 available | 0 unavailable",
                "StrategyType: RollingUpdate",
                "RollingUpdateStrategy: 25% max unavailable, 25% max surge",
            ],
        ),
        (
            &["describe", "clusterrole", "system:cloud-controller-manager"],
            &[
                "PolicyRule:",
                "nodes [] [] [*]",
                "leases.coordination.k8s.io [] [] [get create update]",
            ],
        ),
        (
            &[
                "describe",
                "clusterrolebinding",
                "system:cloud-controller-manager",
            ],
            &[
                "Kind: ClusterRole",
                "ServiceAccount cloud-controller-manager kube-system",
            ],
        ),
        (
            &[
                "describe",
                "rolebinding",
                "cloud-controller-manager:apiserver-authentication-reader",
                "-n",
                "kube-system",
            ],
            &[
                "Kind: Role",
                "Name: extension-apiserver-authentication-reader",
            ],
        ),
        (
            &[
                "describe",
                "sa",
                "cloud-controller-manager",
                "-n",
                "kube-system",
            ],
            &["Name: cloud-controller-manager", "Namespace: kube-system"],
        ),
        (
            &["describe", "secret", "cloud-config", "-n", "kube-system"],
            &["Type: Opaque", "cloud.conf:"],
        ),
    ];
    for (args, wants) in describes {
        let out = squash(&s.ok(args).await);
        for want in wants {
            assert!(out.contains(want), "{args:?}: {want:?} missing:\n{out}");
        }
    }

    // A changed manifest is a strategic merge patch of the pod template.
    let changed = s.file("ccm-install.yaml", &CCM_INSTALL.replace("--v=2", "--v=4"));
    let out = s.ok(&["apply", "-f", &changed]).await;
    assert!(
        out.contains("daemonset.apps/example-cloud-controller-manager configured")
            && out.contains("serviceaccount/cloud-controller-manager unchanged"),
        "{out}"
    );
    let ds = s.json(&["get", "ds", CCM_DS, "-n", "kube-system"]).await;
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["args"][0], "--v=4");
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1));
    assert_eq!(pod["volumes"].as_array().map(Vec::len), Some(2));
    assert_eq!(pod["tolerations"].as_array().map(Vec::len), Some(3));
    assert_eq!(ds["metadata"]["generation"], 2);
    let audit = s.server.audit();
    let patch = audit
        .iter()
        .find(|e| e.verb == "patch" && e.name.as_deref() == Some(CCM_DS))
        .expect("apply patched the daemon set");
    assert_eq!(patch.patch_type.as_deref(), Some("strategic"));
    assert!(
        s.ok(&["apply", "-f", &changed])
            .await
            .lines()
            .all(|l| l.ends_with(" unchanged")),
        "second apply of the changed manifest"
    );

    // delete -f removes everything it created.
    let deleted = s.ok(&["delete", "-f", &changed]).await;
    assert_eq!(deleted.lines().count(), lines.len(), "{deleted}");
    for args in [
        &["get", "ds", CCM_DS, "-n", "kube-system"][..],
        &["get", "sa", "cloud-controller-manager", "-n", "kube-system"],
        &["get", "clusterrole", "system:cloud-controller-manager"],
        &[
            "get",
            "clusterrolebinding",
            "system:cloud-controller-manager",
        ],
        &[
            "get",
            "rolebinding",
            "cloud-controller-manager:apiserver-authentication-reader",
            "-n",
            "kube-system",
        ],
    ] {
        let err = s.fails(args).await;
        assert!(err.contains("NotFound"), "{args:?}: {err}");
    }

    // The same manifest through server-side apply: created, then applied again as a
    // no-op, then removed.
    let ssa = s.ok(&["apply", "--server-side", "-f", &manifest]).await;
    assert_eq!(
        ssa.lines().collect::<Vec<_>>(),
        with("serverside-applied"),
        "{ssa}"
    );
    let ds = s
        .json(&[
            "get",
            "ds",
            CCM_DS,
            "-n",
            "kube-system",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(ds["metadata"]["generation"], 1);
    assert_eq!(ds["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(ds["metadata"]["managedFields"][0]["operation"], "Apply");
    let ssa = s.ok(&["apply", "--server-side", "-f", &manifest]).await;
    assert_eq!(
        ssa.lines().collect::<Vec<_>>(),
        with("serverside-applied"),
        "{ssa}"
    );
    let again = s.json(&["get", "ds", CCM_DS, "-n", "kube-system"]).await;
    assert_eq!(
        again["metadata"]["resourceVersion"], ds["metadata"]["resourceVersion"],
        "a repeated server-side apply changes nothing"
    );
    s.ok(&["delete", "-f", &manifest]).await;

    for args in [
        &["delete", "deployment", "web", "-n", "ccm-test"][..],
        &[
            "delete",
            "rolebinding",
            "helper-reads-nodes",
            "-n",
            "ccm-test",
        ],
        &["delete", "sa", "helper", "-n", "ccm-test"],
        &["delete", "clusterrolebinding", "node-reader"],
        &["delete", "clusterrole", "node-reader"],
        &["delete", "secret", "cloud-config", "-n", "kube-system"],
        &["delete", "configmap", "ccm-extra", "-n", "kube-system"],
        &["delete", "namespace", "ccm-test"],
    ] {
        let out = s.ok(args).await;
        assert!(out.trim().ends_with("deleted"), "{args:?}: {out}");
    }
    s.server.shutdown().await;
}
