//! Error paths and basic semantics through the axum router, without a socket.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::{AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "test-token";

fn app() -> axum::Router {
    let config = Config {
        token: TOKEN.into(),
        max_body_bytes: 64 * 1024,
        ..Config::default()
    };
    router(AppState::new(&config))
}

fn req(
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    b.body(body.into()).expect("request")
}

async fn send(app: &axum::Router, r: Request<Body>) -> (StatusCode, Value) {
    let resp = app.clone().oneshot(r).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

async fn create_node(app: &axum::Router, name: &str) -> Value {
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}).to_string();
    let (s, v) = send(
        app,
        req("POST", "/api/v1/nodes", Some("application/json"), body),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v
}

fn assert_status(v: &Value, code: u16, reason: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
}

#[tokio::test]
async fn malformed_json_is_400() {
    let app = app();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/nodes",
            Some("application/json"),
            "{not json",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_status(&v, 400, "BadRequest");
}

#[tokio::test]
async fn unknown_resource_is_404() {
    let app = app();
    let (s, v) = send(&app, req("GET", "/api/v1/widgets", None, Body::empty())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_status(&v, 404, "NotFound");
    let (s, _) = send(
        &app,
        req(
            "GET",
            "/api/v1/namespaces/default/nodes",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, v) = send(
        &app,
        req("GET", "/api/v1/nodes/missing", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["message"], "nodes \"missing\" not found");
    assert_eq!(v["details"]["name"], "missing");
}

#[tokio::test]
async fn stale_resource_version_is_409() {
    let app = app();
    let node = create_node(&app, "n1").await;
    let mut changed = node.clone();
    changed["metadata"]["labels"] = json!({"a": "b"});
    let (s, _) = send(
        &app,
        req(
            "PUT",
            "/api/v1/nodes/n1",
            Some("application/json"),
            changed.to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    // `node` still carries the old resourceVersion.
    let mut stale = node;
    stale["metadata"]["labels"] = json!({"a": "c"});
    let (s, v) = send(
        &app,
        req(
            "PUT",
            "/api/v1/nodes/n1",
            Some("application/json"),
            stale.to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_status(&v, 409, "Conflict");
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[tokio::test]
async fn invalid_name_is_422() {
    let app = app();
    let body = json!({"metadata": {"name": "Bad_Name"}}).to_string();
    let (s, v) = send(
        &app,
        req("POST", "/api/v1/nodes", Some("application/json"), body),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_status(&v, 422, "Invalid");
    assert_eq!(v["details"]["kind"], "Node");
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(v["details"]["causes"][0]["reason"], "FieldValueInvalid");
}

#[tokio::test]
async fn missing_or_wrong_token_is_401() {
    let config = Config {
        token: TOKEN.into(),
        ..Config::default()
    };
    let state = AppState::new(&config);
    // Default: no credentials is anonymous and allowed (kubectl over http sends none).
    let anon = Request::builder()
        .uri("/api/v1/nodes")
        .body(Body::empty())
        .expect("req");
    assert_eq!(send(&router(state.clone()), anon).await.0, StatusCode::OK);
    state.set_allow_anonymous(false);
    let app = router(state);
    let no_token = Request::builder()
        .uri("/api/v1/nodes")
        .body(Body::empty())
        .expect("req");
    let (s, v) = send(&app, no_token).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_status(&v, 401, "Unauthorized");
    let wrong = Request::builder()
        .uri("/api/v1/nodes")
        .header(header::AUTHORIZATION, "Bearer nope")
        .body(Body::empty())
        .expect("req");
    assert_eq!(send(&app, wrong).await.0, StatusCode::UNAUTHORIZED);
    // Public endpoints need no token.
    for path in ["/version", "/healthz", "/readyz", "/livez"] {
        let r = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("req");
        assert_eq!(send(&app, r).await.0, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn oversized_body_is_413() {
    let app = app();
    let big = format!(
        "{{\"metadata\":{{\"name\":\"n\"}},\"x\":\"{}\"}}",
        "a".repeat(100 * 1024)
    );
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/nodes",
            Some("application/json"),
            big.clone(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_status(&v, 413, "RequestEntityTooLarge");
    // Also without a Content-Length (streamed body).
    let stream = futures::stream::iter(vec![Ok::<_, std::io::Error>(bytes::Bytes::from(big))]);
    let (s, _) = send(
        &app,
        req(
            "POST",
            "/api/v1/nodes",
            Some("application/json"),
            Body::from_stream(stream),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn bad_field_selector_is_400() {
    let app = app();
    let (s, v) = send(
        &app,
        req(
            "GET",
            "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_status(&v, 400, "BadRequest");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("field label not supported: spec.nodeName"),
        "{v}"
    );
    // Supported on pods.
    let (s, _) = send(
        &app,
        req(
            "GET",
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dx",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn unsupported_media_type_is_415() {
    let app = app();
    create_node(&app, "n1").await;
    let (s, v) = send(
        &app,
        req("PATCH", "/api/v1/nodes/n1", Some("application/json"), "{}"),
    )
    .await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_status(&v, 415, "UnsupportedMediaType");
    // Protobuf is decoded for the types a CCM writes only (tests/protobuf.rs).
    let (s, _) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/vnd.kubernetes.protobuf"),
            "x",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn method_not_allowed_is_405() {
    let app = app();
    let (s, v) = send(
        &app,
        req("POST", "/api/v1/nodes/n1", Some("application/json"), "{}"),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_status(&v, 405, "MethodNotAllowed");
    let (s, _) = send(
        &app,
        req("POST", "/api/v1/configmaps", Some("application/json"), "{}"),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn duplicate_is_409_already_exists() {
    let app = app();
    create_node(&app, "n1").await;
    let body = json!({"metadata": {"name": "n1"}}).to_string();
    let (s, v) = send(
        &app,
        req("POST", "/api/v1/nodes", Some("application/json"), body),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_status(&v, 409, "AlreadyExists");
    assert_eq!(v["message"], "nodes \"n1\" already exists");
}

#[tokio::test]
async fn namespace_rules() {
    let app = app();
    let cm = json!({"metadata": {"name": "c", "namespace": "other"}}).to_string();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/json"),
            cm,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let cm = json!({"metadata": {"name": "c"}}).to_string();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/nope/configmaps",
            Some("application/json"),
            cm,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["message"], "namespaces \"nope\" not found");
    let (s, v) = send(&app, req("GET", "/api/v1/namespaces", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

#[tokio::test]
async fn generate_name_and_delete_status() {
    let app = app();
    let body = json!({"metadata": {"generateName": "cm-"}, "data": {"a": "b"}}).to_string();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/json"),
            body,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let name = v["metadata"]["name"].as_str().expect("name").to_string();
    assert_eq!(name.len(), "cm-".len() + 5);
    assert!(
        v["metadata"]["creationTimestamp"]
            .as_str()
            .expect("ts")
            .ends_with('Z')
    );
    let uri = format!("/api/v1/namespaces/default/configmaps/{name}");
    let (s, v) = send(&app, req("DELETE", &uri, None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["status"], "Success");
    assert_eq!(v["details"]["kind"], "configmaps");
    assert_eq!(v["details"]["name"], name);
    let (s, _) = send(&app, req("DELETE", &uri, None, Body::empty())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn delete_precondition_is_409() {
    let app = app();
    create_node(&app, "n1").await;
    let body = json!({"preconditions": {"uid": "not-it"}}).to_string();
    let (s, v) = send(
        &app,
        req("DELETE", "/api/v1/nodes/n1", Some("application/json"), body),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_status(&v, 409, "Conflict");
}

#[tokio::test]
async fn dry_run_stores_nothing() {
    let app = app();
    let body = json!({"metadata": {"name": "n1"}}).to_string();
    let (s, _) = send(
        &app,
        req(
            "POST",
            "/api/v1/nodes?dryRun=All",
            Some("application/json"),
            body,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = send(&app, req("GET", "/api/v1/nodes/n1", None, Body::empty())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn status_subresource_isolation() {
    let app = app();
    create_node(&app, "n1").await;
    let (s, v) = send(
        &app,
        req("PATCH", "/api/v1/nodes/n1/status", Some("application/merge-patch+json"),
            r#"{"metadata":{"labels":{"x":"y"}},"spec":{"podCIDR":"10.0.0.0/24"},"status":{"phase":"Running"}}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"]["phase"], "Running");
    assert_eq!(v["metadata"]["labels"]["x"], "y");
    assert!(v["spec"].get("podCIDR").is_none(), "{v}");
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            "/api/v1/nodes/n1",
            Some("application/merge-patch+json"),
            r#"{"status":{"phase":"Gone"}}"#,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"]["phase"], "Running");
}

#[tokio::test]
async fn watch_options_validation_is_422() {
    let app = app();
    let (s, v) = send(
        &app,
        req(
            "GET",
            "/api/v1/nodes?watch=true&sendInitialEvents=true",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_status(&v, 422, "Invalid");
    assert_eq!(v["details"]["causes"][0]["field"], "resourceVersionMatch");
}

#[tokio::test]
async fn discovery_documents() {
    let app = app();
    let (s, v) = send(&app, req("GET", "/api/v1", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    let nodes = v["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "nodes")
        .expect("nodes")
        .clone();
    assert_eq!(nodes["kind"], "Node");
    assert_eq!(nodes["namespaced"], false);
    assert_eq!(nodes["shortNames"], json!(["no"]));
    let (s, v) = send(
        &app,
        req("GET", "/apis/coordination.k8s.io/v1", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["groupVersion"], "coordination.k8s.io/v1");
    let (s, v) = send(&app, req("GET", "/version", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["gitVersion"], "v1.34.0");
}

#[tokio::test]
async fn list_pagination() {
    let app = app();
    for i in 0..5 {
        create_node(&app, &format!("n{i}")).await;
    }
    let (s, v) = send(
        &app,
        req("GET", "/api/v1/nodes?limit=2", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["kind"], "NodeList");
    assert_eq!(v["items"].as_array().expect("items").len(), 2);
    assert_eq!(v["metadata"]["remainingItemCount"], 3);
    let token = v["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    let (s, v2) = send(
        &app,
        req(
            "GET",
            &format!("/api/v1/nodes?limit=10&continue={token}"),
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> = v2["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, vec!["n2", "n3", "n4"]);
    assert_eq!(
        v2["metadata"]["resourceVersion"],
        v["metadata"]["resourceVersion"]
    );
    let (s, v) = send(
        &app,
        req("GET", "/api/v1/nodes?continue=garbage", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}

#[tokio::test]
async fn put_creates_leases_but_not_nodes() {
    let app = app();
    let lease = json!({"metadata": {"name": "l1"}, "spec": {"holderIdentity": "a"}}).to_string();
    let uri = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l1";
    let (s, v) = send(&app, req("PUT", uri, Some("application/json"), lease)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["kind"], "Lease");
    let node = json!({"metadata": {"name": "n9"}}).to_string();
    let (s, _) = send(
        &app,
        req("PUT", "/api/v1/nodes/n9", Some("application/json"), node),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn cluster_scoped_body_namespace_is_cleared() {
    let app = app();
    let body = json!({"metadata": {"name": "n1", "namespace": "default"}}).to_string();
    let (s, v) = send(
        &app,
        req("POST", "/api/v1/nodes", Some("application/json"), body),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert!(v["metadata"].get("namespace").is_none(), "{v}");
}

#[tokio::test]
async fn watch_on_object_url_selects_that_object() {
    let app = app();
    create_node(&app, "a").await;
    create_node(&app, "b").await;
    let r = req(
        "GET",
        "/api/v1/nodes/b?watch=true&timeoutSeconds=0",
        None,
        Body::empty(),
    );
    let resp = app.clone().oneshot(r).await.expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    // timeoutSeconds=0 ends the stream right after the initial events.
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn services_get_cluster_ip_and_node_ports() {
    let app = app();
    let svc = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 8080}]}});
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/services",
            Some("application/json"),
            svc.to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert!(
        v["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.0.0.")),
        "{v}"
    );
    let node_port = v["spec"]["ports"][0]["nodePort"]
        .as_u64()
        .expect("nodePort");
    assert!((30000..=32767).contains(&node_port));
    assert!(v["spec"]["healthCheckNodePort"].as_u64().is_some());
    assert_eq!(v["spec"]["ports"][0]["targetPort"], 8080);
    // LB status is writable only through /status.
    let status = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"127.0.0.100"}]}}}"#;
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            "/api/v1/namespaces/default/services/lb",
            Some("application/merge-patch+json"),
            status,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["status"]["loadBalancer"].get("ingress").is_none(), "{v}");
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            "/api/v1/namespaces/default/services/lb/status",
            Some("application/merge-patch+json"),
            status,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.100"
    );
    assert_eq!(v["spec"]["ports"][0]["nodePort"], node_port);
    // A second Service asking for the same node port is refused.
    let dup = json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": node_port}]}});
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/services",
            Some("application/json"),
            dup.to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
}

/// `stringData` is write-only: stored into `data`, never returned (kubernetes
/// pkg/apis/core/v1/conversion.go); upstream's vSphere CCM reads `data` only.
#[tokio::test]
async fn secret_string_data_lands_in_data() {
    let app = app();
    let body = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "default"},
        "stringData": {"10.0.0.1.username": "user"}
    })
    .to_string();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/secrets",
            Some("application/json"),
            body,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["data"], json!({"10.0.0.1.username": "dXNlcg=="}), "{v}");
    assert!(v.get("stringData").is_none(), "{v}");
    let patch = json!({"stringData": {"10.0.0.1.password": "pw"}}).to_string();
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            "/api/v1/namespaces/default/secrets/creds",
            Some("application/merge-patch+json"),
            patch,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        v["data"],
        json!({"10.0.0.1.username": "dXNlcg==", "10.0.0.1.password": "cHc="}),
        "{v}"
    );
    let (_, v) = send(
        &app,
        req("GET", "/api/v1/namespaces/default/secrets/creds", None, ""),
    )
    .await;
    assert!(v.get("stringData").is_none(), "{v}");
    // A value that is not a string does not decode: 400, nothing stored.
    let bad = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bad", "namespace": "default"},
        "stringData": {"k": 1}
    })
    .to_string();
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/default/secrets",
            Some("application/json"),
            bad,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(
        v["message"],
        "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.stringData of type string",
        "{v}"
    );
    let (s, _) = send(
        &app,
        req("GET", "/api/v1/namespaces/default/secrets/bad", None, ""),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
