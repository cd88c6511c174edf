//! Differences from kube-apiserver v1.37.2 that the root package's differential corpus
//! (`tests/differential/corpus.json`, run by `tests/real_apiserver.rs`) found, fixed here
//! and pinned through the router (and, for the request-size limit, a real socket). Each
//! test names the corpus entries it stands for.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::{ApiServer, AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "test-token";

fn app() -> axum::Router {
    let config = Config {
        token: TOKEN.into(),
        ..Config::default()
    };
    router(AppState::new(&config))
}

fn req(method: &str, uri: &str, content_type: Option<&str>, body: Value) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    let body = if body.is_null() {
        Body::empty()
    } else {
        Body::from(body.to_string())
    };
    b.body(body).expect("request")
}

async fn send(app: &axum::Router, r: Request<Body>) -> (StatusCode, Value) {
    let resp = app.clone().oneshot(r).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

async fn post(app: &axum::Router, uri: &str, body: Value) -> (StatusCode, Value) {
    send(app, req("POST", uri, Some("application/json"), body)).await
}

async fn get(app: &axum::Router, uri: &str) -> (StatusCode, Value) {
    send(app, req("GET", uri, None, Value::Null)).await
}

fn cause_fields(v: &Value) -> Vec<String> {
    v["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["field"].as_str().unwrap_or("").to_string())
        .collect()
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

/// "get a ConfigMap that does not exist", "delete a ConfigMap", "delete with a stale
/// precondition": `details.group` is omitempty, and a failed delete precondition names
/// the kind.
#[tokio::test]
async fn status_details_omit_the_core_group() {
    let app = app();
    let (s, v) = get(&app, "/api/v1/namespaces/default/configmaps/missing").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(
        v["details"],
        json!({"name": "missing", "kind": "configmaps"})
    );
    post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        cm("a", json!({})),
    )
    .await;
    let pre = json!({"preconditions": {"resourceVersion": "1"}});
    let (s, v) = send(
        &app,
        req(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/a",
            Some("application/json"),
            pre,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(v["details"], json!({"name": "a", "kind": "ConfigMap"}));
    let (s, v) = send(
        &app,
        req(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/a",
            None,
            Value::Null,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["details"]["kind"], "configmaps");
    assert!(v["details"].get("group").is_none(), "{v}");
    let (_, v) = get(
        &app,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/x",
    )
    .await;
    assert_eq!(v["details"]["group"], "coordination.k8s.io");
}

/// "dry-run with an unknown value": a 422 on the options kind of the verb.
#[tokio::test]
async fn unknown_dry_run_is_422_on_the_options() {
    let app = app();
    let (s, v) = post(
        &app,
        "/api/v1/namespaces/default/configmaps?dryRun=Bogus",
        cm("d", json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["kind"], "CreateOptions");
    assert_eq!(v["details"]["group"], "meta.k8s.io");
    assert_eq!(cause_fields(&v), ["dryRun"]);
    assert_eq!(
        v["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    let (s, v) = send(
        &app,
        req(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/d?dryRun=x",
            None,
            Value::Null,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["kind"], "DeleteOptions");
    let (s, _) = post(
        &app,
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        cm("d", json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
}

/// "create the corpus namespace", "resources of /api/v1", "delete the collection of
/// namespaces".
#[tokio::test]
async fn namespaces_carry_their_name_label_and_have_no_delete_collection() {
    let app = app();
    let (s, v) = post(
        &app,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff", "labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["metadata"]["labels"],
        json!({"a": "b", "kubernetes.io/metadata.name": "diff"})
    );
    let (_, v) = get(&app, "/api/v1").await;
    let ns = v["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "namespaces"))
        .cloned()
        .expect("namespaces");
    assert!(
        !ns["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&json!("deletecollection"))
    );
    let (s, v) = send(&app, req("DELETE", "/api/v1/namespaces", None, Value::Null)).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{v}");
}

/// "ConfigMaps as PartialObjectMetadataList".
#[tokio::test]
async fn partial_object_metadata() {
    let app = app();
    post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        cm("a", json!({"app": "a"})),
    )
    .await;
    let accept = |kind: &str| format!("application/json;as={kind};g=meta.k8s.io;v=v1");
    let mut r = req(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        Value::Null,
    );
    r.headers_mut().insert(
        header::ACCEPT,
        accept("PartialObjectMetadataList").parse().expect("hv"),
    );
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(v["items"][0]["metadata"]["name"], "a");
    assert!(v["items"][0].get("data").is_none());
    assert!(v["metadata"]["resourceVersion"].is_string());
    let mut r = req(
        "GET",
        "/api/v1/namespaces/default/configmaps/a",
        None,
        Value::Null,
    );
    r.headers_mut().insert(
        header::ACCEPT,
        accept("PartialObjectMetadata").parse().expect("hv"),
    );
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["kind"], "PartialObjectMetadata");
    assert_eq!(v["metadata"]["labels"], json!({"app": "a"}));
    // The single form on a list (and the list form on an object) is not acceptable.
    let mut r = req(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        Value::Null,
    );
    r.headers_mut().insert(
        header::ACCEPT,
        accept("PartialObjectMetadata").parse().expect("hv"),
    );
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(v["reason"], "NotAcceptable");
}

/// "paging with a label selector, page 2".
#[tokio::test]
async fn filtered_pages_continue_while_keys_follow() {
    let app = app();
    for (n, app_label) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")] {
        post(
            &app,
            "/api/v1/namespaces/default/configmaps",
            cm(n, json!({"app": app_label})),
        )
        .await;
    }
    let (_, v) = get(
        &app,
        "/api/v1/namespaces/default/configmaps?limit=1&labelSelector=app%3Dx",
    )
    .await;
    assert!(v["metadata"].get("remainingItemCount").is_none(), "{v}");
    let token = v["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    let (_, v) = get(
        &app,
        &format!(
            "/api/v1/namespaces/default/configmaps?limit=1&labelSelector=app%3Dx&continue={token}"
        ),
    )
    .await;
    assert_eq!(v["items"][0]["metadata"]["name"], "c");
    assert!(
        v["metadata"]["continue"].is_string(),
        "d is stored after c: {v}"
    );
}

/// The validation entries of the corpus ("a ConfigMap with an invalid data key", "... an
/// invalid label", "a ConfigMap over 1 MiB", "a TLS Secret without its keys", "a Secret's
/// type cannot change", "create a Node with a bad taint effect", "a Service port out of
/// range", "... duplicate ports", "... an unknown type", "... two unnamed ports", "an
/// invalid ingress IP on status", "clusterIP is immutable", "an Event without
/// involvedObject", "a Lease with a negative duration", "an EndpointSlice with a bad
/// addressType").
#[tokio::test]
async fn field_validation_matches_upstream_paths() {
    let app = app();
    let ns = "/api/v1/namespaces/default";
    let cases: Vec<(String, Value, Vec<&str>)> = vec![
        (
            format!("{ns}/configmaps"),
            json!({"metadata": {"name": "c1"}, "data": {"bad key!": "v"}}),
            vec!["data[bad key!]"],
        ),
        (
            format!("{ns}/configmaps"),
            json!({"metadata": {"name": "c2", "labels": {"-bad-": "v"}}}),
            vec!["metadata.labels"],
        ),
        (
            format!("{ns}/configmaps"),
            json!({"metadata": {"name": "c3"}, "data": {"k": "x".repeat(1024 * 1024 + 1)}}),
            vec!["[]"],
        ),
        (
            format!("{ns}/secrets"),
            json!({"metadata": {"name": "s1"}, "type": "kubernetes.io/tls", "stringData": {"x": "y"}}),
            vec!["data[tls.crt]", "data[tls.key]"],
        ),
        (
            "/api/v1/nodes".into(),
            json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}),
            vec!["metadata.taints[0].effect"],
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "p"}, "spec": {"ports": [{"port": 70000}]}}),
            vec!["spec.ports[0].port", "spec.ports[0].targetPort"],
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "d"}, "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}}),
            vec!["spec.ports[1]"],
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "t"}, "spec": {"type": "Magic", "ports": [{"port": 80}]}}),
            vec!["spec.type"],
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "u"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}),
            vec!["spec.ports[0].name", "spec.ports[1].name"],
        ),
        (
            "/api/v1/namespaces/kube-system/events".into(),
            json!({"metadata": {"name": "e"}, "reason": "x"}),
            vec!["involvedObject.namespace"],
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases".into(),
            json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": -1}}),
            vec!["spec.leaseDurationSeconds"],
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices".into(),
            json!({"metadata": {"name": "s"}, "addressType": "IPv5", "endpoints": []}),
            vec!["addressType"],
        ),
    ];
    for (uri, body, fields) in cases {
        let (s, v) = post(&app, &uri, body.clone()).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{uri} {body}: {v}");
        assert_eq!(cause_fields(&v), fields, "{uri}: {v}");
    }
    // A Node event in `default` is fine, and its empty namespace reads back as absent.
    let (s, v) = post(
        &app,
        &format!("{ns}/events"),
        json!({"metadata": {"name": "e"}, "reason": "x",
               "involvedObject": {"kind": "Node", "name": "n", "namespace": ""}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["involvedObject"], json!({"kind": "Node", "name": "n"}));

    // Update rules: a Secret's type, a Service's cluster IP, an ingress IP on /status.
    let (s, _) = post(
        &app,
        &format!("{ns}/secrets"),
        json!({"metadata": {"name": "s"}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let merge = Some("application/merge-patch+json");
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &format!("{ns}/secrets/s"),
            merge,
            json!({"type": "Other"}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(cause_fields(&v), ["type"]);
    let (s, _) = post(
        &app,
        &format!("{ns}/services"),
        json!({"metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &format!("{ns}/services/web"),
            merge,
            json!({"spec": {"clusterIP": "10.0.0.250"}}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(cause_fields(&v), ["spec.clusterIPs[0]"]);
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &format!("{ns}/services/web/status"),
            merge,
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(cause_fields(&v), ["status.loadBalancer.ingress[0].ip"]);
}

/// "create a ConfigMap from a YAML body", "replace it with a YAML body", "a malformed YAML
/// body", "patch with an unsupported content type", "an unsupported media type on create".
#[tokio::test]
async fn yaml_bodies_and_unsupported_media_types() {
    let app = app();
    let yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  key: value\n";
    let r = Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/configmaps")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/yaml")
        .body(Body::from(yaml))
        .expect("request");
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["data"], json!({"key": "value"}));
    let r = Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/configmaps")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/yaml")
        .body(Body::from("metadata: ["))
        .expect("request");
    let (s, _) = send(&app, r).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A create's 415 has no details; the patch handler's has empty ones.
    let r = Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/configmaps")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("x"))
        .expect("request");
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(v.get("details").is_none(), "{v}");
    let r = Request::builder()
        .method("PATCH")
        .uri("/api/v1/namespaces/default/configmaps/from-yaml")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .expect("request");
    let (s, v) = send(&app, r).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(v["reason"], "UnsupportedMediaType");
    assert_eq!(v["details"], json!({}));
}

/// "a Secret with data that is not base64": the decoder's 400.
#[tokio::test]
async fn secret_data_must_be_base64() {
    let app = app();
    let (s, v) = post(
        &app,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "b"}, "data": {"k": "not base64!"}}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["reason"], "BadRequest");
}

/// "strategic patch of Service ports keyed by port", "create a Deployment with what
/// kubectl create deployment sends", "create a Lease": defaults on every write.
#[tokio::test]
async fn defaults_apply_to_patches_templates_and_micro_times() {
    let app = app();
    let (s, _) = post(
        &app,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            "/api/v1/namespaces/default/services/web",
            Some("application/strategic-merge-patch+json"),
            json!({"spec": {"ports": [{"name": "https", "port": 443}]}}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let https = v["spec"]["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["port"] == 443))
        .cloned()
        .expect("the new port");
    assert_eq!(
        https,
        json!({"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443})
    );

    let (s, v) = post(
        &app,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({
        "metadata": {"name": "ccm"},
        "spec": {"selector": {"matchLabels": {"app": "ccm"}},
                 "template": {"metadata": {"labels": {"app": "ccm"}},
                              "spec": {"containers": [{"name": "ccm", "image": "ccm:v1"}]}}}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        pod["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );

    let (s, v) = post(
        &app,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        json!({
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.000000+00:00"}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["spec"]["renewTime"], "2026-01-01T00:00:00.000000Z");
}

/// "apply by another manager with the same value", "an update records an Update manager":
/// managedFields in upstream's order, and a conflict naming an Update manager without a
/// time ("acquire an orphan Lease by apply").
#[tokio::test]
async fn managed_fields_order_and_conflict_message() {
    let app = app();
    let uri = "/api/v1/namespaces/default/configmaps/applied";
    let apply = Some("application/apply-patch+yaml");
    let body = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data});
    let (s, _) = send(
        &app,
        req(
            "PATCH",
            &format!("{uri}?fieldManager=zed"),
            apply,
            body(json!({"a": "1"})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = send(
        &app,
        req(
            "PATCH",
            &format!("{uri}?fieldManager=edit"),
            Some("application/merge-patch+json"),
            json!({"data": {"e": "1"}}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &format!("{uri}?fieldManager=amy"),
            apply,
            body(json!({"b": "2"})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let managers: Vec<&str> = v["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    // Apply entries first; zed and amy may share a second, then the name decides.
    assert_eq!(managers.last(), Some(&"edit"), "{v}");
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &format!("{uri}?fieldManager=amy"),
            apply,
            body(json!({"b": "2", "e": "2"})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(
        v["details"]["causes"][0]["message"],
        "conflict with \"edit\" using v1"
    );
}

/// "a body over the request size limit": over TLS, as `ccm-conformance cluster` serves, a
/// client that writes its whole body before it reads (Python's urllib3 does) gets the 413
/// Status, not a connection closed under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_body_gets_a_413_not_a_reset() {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    use std::io::{Read, Write};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = ApiServer::start(Config {
        tls: true,
        ..Config::default()
    })
    .await
    .expect("start");
    let ca =
        CertificateDer::from_pem_slice(server.ca_pem().expect("a CA").as_bytes()).expect("PEM");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("root");
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let body = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(3 * 1024 * 1024 + 1024)
    );
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        server.token(),
        body.len()
    );
    let addr = server.addr();
    let answer = tokio::task::spawn_blocking(move || {
        let name = ServerName::try_from("127.0.0.1").expect("name");
        let conn = rustls::ClientConnection::new(std::sync::Arc::new(tls), name).expect("TLS");
        let tcp = std::net::TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream.write_all(head.as_bytes()).expect("head");
        stream
            .write_all(body.as_bytes())
            .and_then(|()| stream.flush())
            .expect("the whole body is taken, not refused");
        let mut answer = vec![0u8; 4096];
        let n = stream.read(&mut answer).expect("an answer, not a reset");
        String::from_utf8_lossy(&answer[..n]).into_owned()
    })
    .await
    .expect("client thread");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("RequestEntityTooLarge"), "{answer}");
}
