//! TLS, authentication and authorization over a real socket: kube-rs and kubectl with
//! the generated kubeconfig, client certificates, and the 401/403/413 answers.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use mock_kube_apiserver::auth::{Denial, READONLY_GROUP};
use mock_kube_apiserver::{ApiServer, Config};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(20);

fn tls_config() -> Config {
    Config {
        tls: true,
        ..Config::default()
    }
}

async fn client_from(kubeconfig: &str) -> Client {
    mock_cloud::tls::install_ring_provider();
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(cfg).expect("client")
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).expect("node")
}

/// A raw request through `client` (its TLS and credentials); returns status and body.
async fn raw(client: &Client, method: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .expect("request");
    let resp = tokio::time::timeout(DEADLINE, client.send(req.map(Into::into)))
        .await
        .expect("answered before the deadline")
        .expect("sent");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, value)
}

#[tokio::test]
async fn kube_rs_works_over_tls_with_the_generated_kubeconfig() {
    let server = ApiServer::start(tls_config()).await.expect("start");
    assert!(server.url().starts_with("https://127.0.0.1:"));
    let kubeconfig = server.kubeconfig_yaml();
    let doc: Value = serde_json::from_str(&kubeconfig).expect("json kubeconfig");
    let ca = doc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("CA data in the kubeconfig");
    assert_eq!(ca, b64(server.ca_pem().expect("ca")));

    let client = client_from(&kubeconfig).await;
    let nodes: Api<Node> = Api::all(client);
    let list = nodes.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.expect("rv");
    let mut stream = nodes
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    nodes
        .create(&PostParams::default(), &node("tls-1"))
        .await
        .expect("create over TLS");
    let event = tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("event before the deadline")
        .expect("stream open")
        .expect("event");
    assert!(matches!(event, WatchEvent::Added(n) if n.metadata.name.as_deref() == Some("tls-1")));
    server.shutdown().await;
}

#[tokio::test]
async fn credentials_are_required_over_tls_and_the_readonly_token_cannot_write() {
    let server = ApiServer::start(tls_config()).await.expect("start");
    let anonymous = client_from(&server.kubeconfig_with_user(json!({}))).await;
    // No credentials: system:anonymous, whom RBAC refuses (kube-apiserver's default
    // --anonymous-auth=true; a real one answers the same, tests/real_apiserver.rs).
    let (code, status) = raw(&anonymous, "GET", "/api/v1/nodes", Vec::new()).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["kind"], "Status");
    assert_eq!(
        status["message"],
        "nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // Public endpoints stay public.
    assert_eq!(raw(&anonymous, "GET", "/version", Vec::new()).await.0, 200);
    assert_eq!(raw(&anonymous, "GET", "/healthz", Vec::new()).await.0, 200);
    // Setting anonymous access on does not open TLS.
    server.set_allow_anonymous(true);
    assert_eq!(
        raw(&anonymous, "GET", "/api/v1/nodes", Vec::new()).await.0,
        403
    );

    let wrong = client_from(&server.kubeconfig_with_user(json!({"token": "nope"}))).await;
    assert_eq!(raw(&wrong, "GET", "/api/v1/nodes", Vec::new()).await.0, 401);

    let readonly =
        client_from(&server.kubeconfig_with_user(json!({"token": server.readonly_token()}))).await;
    let (code, list) = raw(&readonly, "GET", "/api/v1/nodes", Vec::new()).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "NodeList");
    let body = serde_json::to_vec(&json!({"metadata": {"name": "n1"}})).expect("body");
    let (code, status) = raw(&readonly, "POST", "/api/v1/nodes", body).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "nodes is forbidden: User \"ccm-conformance-readonly\" cannot create resource \"nodes\" in API group \"\" at the cluster scope"
    );
    assert_eq!(status["details"]["kind"], "nodes");
    let (code, status) = raw(
        &readonly,
        "PATCH",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l1",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "leases.coordination.k8s.io \"l1\" is forbidden: User \"ccm-conformance-readonly\" cannot patch resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""
    );
    // Nothing was written by the refused requests.
    let admin = client_from(&server.kubeconfig_yaml()).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    assert!(nodes.get_opt("n1").await.expect("get").is_none());

    // Bodies over 3 MiB: 413 before anything is parsed.
    let big = vec![b' '; 3 * 1024 * 1024 + 1];
    let (code, status) = raw(&admin, "POST", "/api/v1/nodes", big).await;
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    server.shutdown().await;
}

#[tokio::test]
async fn client_certificates_signed_by_the_ca_authenticate() {
    let server = ApiServer::start(tls_config()).await.expect("start");
    let (cert, key) = server.client_cert("alice").expect("client cert");
    let alice = client_from(&server.kubeconfig_with_user(json!({
        "client-certificate-data": b64(&cert),
        "client-key-data": b64(&key),
    })))
    .await;
    let nodes: Api<Node> = Api::all(alice);
    nodes
        .create(&PostParams::default(), &node("by-alice"))
        .await
        .expect("an admin certificate may write");

    let (cert, key) = server
        .client_cert_in("bob", &[READONLY_GROUP])
        .expect("client cert");
    let bob = client_from(&server.kubeconfig_with_user(json!({
        "client-certificate-data": b64(&cert),
        "client-key-data": b64(&key),
    })))
    .await;
    let (code, _) = raw(&bob, "GET", "/api/v1/nodes/by-alice", Vec::new()).await;
    assert_eq!(code, 200);
    let (code, status) = raw(&bob, "DELETE", "/api/v1/nodes/by-alice", Vec::new()).await;
    assert_eq!(code, 403);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("User \"bob\" cannot delete resource \"nodes\"")),
        "{status}"
    );

    let plain = ApiServer::start(Config::default()).await.expect("plain");
    assert!(plain.client_cert("x").is_err());
    plain.shutdown().await;
    server.shutdown().await;
}

/// A denial takes one verb on one resource from one user: the request gets the 403
/// Status upstream's authorization filter writes, nothing is deleted, other users and
/// other verbs are unaffected, and lifting it lets the same request through.
#[tokio::test]
async fn a_denial_answers_the_rbac_403_and_changes_nothing() {
    let server = ApiServer::start(tls_config()).await.expect("start");
    let admin = client_from(&server.kubeconfig_yaml()).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    for name in ["x", "y"] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("create");
    }
    let (cert, key) = server
        .client_cert_in("ccm", &["system:serviceaccounts"])
        .expect("cert");
    let ccm = client_from(&server.kubeconfig_with_user(json!({
        "client-certificate-data": b64(&cert),
        "client-key-data": b64(&key),
    })))
    .await;
    server.deny(Denial {
        user: "ccm".into(),
        verb: "delete".into(),
        group: String::new(),
        resource: "nodes".into(),
    });

    let (code, status) = raw(&ccm, "DELETE", "/api/v1/nodes/x", Vec::new()).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["code"], 403);
    assert_eq!(
        status["message"],
        "nodes \"x\" is forbidden: User \"ccm\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
    );
    assert_eq!(status["details"]["name"], "x");
    assert_eq!(status["details"]["kind"], "nodes");
    assert!(
        nodes.get_opt("x").await.expect("get").is_some(),
        "x was deleted"
    );

    // Other verbs of the same user, and the same verb of another user, still work.
    let (code, _) = raw(&ccm, "GET", "/api/v1/nodes/x", Vec::new()).await;
    assert_eq!(code, 200);
    nodes
        .delete("y", &Default::default())
        .await
        .expect("the admin may still delete");

    server.clear_denials();
    let (code, status) = raw(&ccm, "DELETE", "/api/v1/nodes/x", Vec::new()).await;
    assert_eq!(code, 200, "{status}");
    assert!(nodes.get_opt("x").await.expect("get").is_none());
    let denied: Vec<_> = server
        .audit()
        .into_iter()
        .filter(|e| e.verb == "delete" && e.name.as_deref() == Some("x"))
        .map(|e| e.status)
        .collect();
    assert_eq!(
        denied,
        vec![403, 200],
        "the audit log records both attempts"
    );
    server.shutdown().await;
}

/// Start + first authenticated request, plain HTTP vs TLS, interleaved; prints the
/// medians (the harness keeps plain HTTP only if TLS costs measurably more per case).
#[tokio::test]
async fn start_and_first_request_cost() {
    const ROUNDS: usize = 10;
    let mut plain = Vec::new();
    let mut tls = Vec::new();
    for round in 0..2 * ROUNDS {
        let use_tls = round % 2 == 1;
        let begin = Instant::now();
        let server = ApiServer::start(Config {
            tls: use_tls,
            ..Config::default()
        })
        .await
        .expect("start");
        let client = client_from(&server.kubeconfig_yaml()).await;
        let nodes: Api<Node> = Api::all(client);
        nodes.list(&ListParams::default()).await.expect("list");
        let took = begin.elapsed();
        if use_tls {
            tls.push(took)
        } else {
            plain.push(took)
        }
        server.shutdown().await;
    }
    plain.sort();
    tls.sort();
    eprintln!(
        "start + first request, median of {ROUNDS}: plain {:?}, tls {:?}",
        plain[ROUNDS / 2],
        tls[ROUNDS / 2]
    );
}

fn kubectl() -> Option<&'static str> {
    let path = "/usr/bin/kubectl";
    if Path::new(path).exists() {
        return Some(path);
    }
    eprintln!("skipping: kubectl not found at {path}");
    None
}

#[tokio::test]
async fn kubectl_over_tls() {
    let Some(bin) = kubectl() else { return };
    let server = ApiServer::start(tls_config()).await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("write");
    let admin = client_from(&server.kubeconfig_yaml()).await;
    Api::<Node>::all(admin)
        .create(&PostParams::default(), &node("kubectl-tls"))
        .await
        .expect("create");
    let run = |args: Vec<String>, cache: &str| {
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join(cache))
            .arg("--request-timeout=10s")
            .args(args)
            .kill_on_drop(true);
        async move {
            tokio::time::timeout(DEADLINE, cmd.output())
                .await
                .expect("kubectl finished")
                .expect("kubectl runs")
        }
    };
    let out = run(vec!["get".into(), "nodes".into()], "c1").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("kubectl-tls"), "{stdout}");

    let manifest = dir.path().join("node.json");
    std::fs::write(
        &manifest,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"ro"}}"#,
    )
    .expect("manifest");
    let out = run(
        vec![
            "--token".into(),
            server.readonly_token().into(),
            "create".into(),
            "--validate=false".into(),
            "-f".into(),
            manifest.display().to_string(),
        ],
        "c2",
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "is forbidden: User \"ccm-conformance-readonly\" cannot create resource \"nodes\""
        ),
        "{stderr}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_service_account_with_rbac_meets_the_403s_its_roles_leave() {
    // A CCM deployed as a ServiceAccount (its upstream manifests) on a server with RBAC:
    // what the ClusterRole grants works, the rest is the 403 kube-apiserver gives.
    let api = ApiServer::start(Config {
        rbac: true,
        ..tls_config()
    })
    .await
    .expect("start");
    let admin = client_from(&api.kubeconfig_yaml()).await;
    assert!(
        api.kubeconfig_for_service_account("kube-system", "cloud-controller-manager")
            .is_err(),
        "no such ServiceAccount yet"
    );
    for (path, body) in [
        (
            "/api/v1/namespaces/kube-system/serviceaccounts",
            json!({"metadata": {"name": "cloud-controller-manager"}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"metadata": {"name": "system:cloud-controller-manager"}, "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"metadata": {"name": "system:cloud-controller-manager"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:cloud-controller-manager"},
                "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager",
                    "namespace": "kube-system"}]}),
        ),
    ] {
        let (s, v) = raw(&admin, "POST", path, body.to_string().into_bytes()).await;
        assert_eq!(s, 201, "{path}: {v}");
    }
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect("admin creates a node");
    let ccm = client_from(
        &api.kubeconfig_for_service_account("kube-system", "cloud-controller-manager")
            .expect("kubeconfig"),
    )
    .await;
    let nodes: Api<Node> = Api::all(ccm.clone());
    let listed = nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes");
    assert_eq!(listed.items.len(), 1);
    let err = nodes
        .delete("n1", &Default::default())
        .await
        .expect_err("no delete rule");
    let kube::Error::Api(status) = err else {
        panic!("an API error: {err:?}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "nodes \"n1\" is forbidden: User \"system:serviceaccount:kube-system:cloud-controller-manager\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // Discovery comes with the bootstrap policy.
    assert_eq!(
        ccm.apiserver_version().await.expect("version").git_version,
        mock_kube_apiserver::discovery::GIT_VERSION
    );
    let (s, _) = raw(&ccm, "GET", "/apis", Vec::new()).await;
    assert_eq!(s, 200);
    // A client certificate outside system:masters is authorized the same way, as a
    // member of system:authenticated: discovery and self reviews, nothing else.
    let node_cert = client_from(
        &api.kubeconfig_for_cert("system:node:n1", &["system:nodes"])
            .expect("cert kubeconfig"),
    )
    .await;
    let (s, _) = raw(&node_cert, "GET", "/api", Vec::new()).await;
    assert_eq!(s, 200);
    let (s, v) = raw(&node_cert, "GET", "/api/v1/nodes", Vec::new()).await;
    assert_eq!(s, 403, "{v}");
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "nodes"}}});
    let (s, v) = raw(
        &node_cert,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ssar.to_string().into_bytes(),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["status"], json!({"allowed": false}));
    // The client CA is published for delegated authentication.
    let (s, cm) = raw(
        &admin,
        "GET",
        "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
        Vec::new(),
    )
    .await;
    assert_eq!(s, 200, "{cm}");
    assert_eq!(
        cm["data"]["client-ca-file"].as_str().map(str::trim_end),
        api.ca_pem().map(str::trim_end)
    );
    api.shutdown().await;
}
