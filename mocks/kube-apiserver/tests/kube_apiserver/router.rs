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
async fn wrong_token_is_401_and_no_token_is_anonymous() {
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
    // Then it is system:anonymous without permissions, as kube-apiserver answers: 403.
    let (s, v) = send(&app, no_token).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_status(&v, 403, "Forbidden");
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
        // ... but a token that fails is a 401 there too: authentication comes first.
        let r = Request::builder()
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer nope")
            .body(Body::empty())
            .expect("req");
        assert_eq!(send(&app, r).await.0, StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[tokio::test]
async fn an_accept_header_without_a_served_media_type_is_406() {
    let app = app();
    create_node(&app, "a").await;
    let with_accept = |accept: &str| {
        let mut r = req("GET", "/api/v1/nodes/a", None, Body::empty());
        r.headers_mut()
            .insert(header::ACCEPT, accept.parse().expect("header"));
        r
    };
    let (s, v) = send(&app, with_accept("application/xml")).await;
    assert_eq!(s, StatusCode::NOT_ACCEPTABLE);
    assert_status(&v, 406, "NotAcceptable");
    assert_eq!(v["details"], json!({}), "{v}");
    for ok in [
        "application/xml, */*",
        "application/vnd.kubernetes.protobuf",
        "application/yaml",
        "",
    ] {
        let (s, v) = send(&app, with_accept(ok)).await;
        assert_eq!(s, StatusCode::OK, "{ok:?}: {v}");
    }
}

#[tokio::test]
async fn list_options_limit_and_resource_version_match() {
    let app = app();
    for n in ["a", "b"] {
        create_node(&app, n).await;
    }
    // A limit of zero or less is no limit.
    for limit in ["0", "-1"] {
        let (s, v) = send(
            &app,
            req(
                "GET",
                &format!("/api/v1/nodes?limit={limit}"),
                None,
                Body::empty(),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["items"].as_array().map(Vec::len), Some(2), "{v}");
        assert!(v["metadata"].get("continue").is_none(), "{v}");
    }
    let (s, v) = send(
        &app,
        req(
            "GET",
            "/api/v1/nodes?resourceVersion=1&resourceVersionMatch=Newest",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["details"]["kind"], "ListOptions", "{v}");
    assert_eq!(
        v["details"]["causes"][0]["reason"], "FieldValueNotSupported",
        "{v}"
    );
}

#[tokio::test]
async fn delete_options_are_validated_and_propagation_policies_kept() {
    let app = app();
    create_node(&app, "a").await;
    let delete = |body: Value| {
        req(
            "DELETE",
            "/api/v1/nodes/a",
            Some("application/json"),
            body.to_string(),
        )
    };
    let (s, v) = send(&app, delete(json!({"propagationPolicy": "Sideways"}))).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["details"]["kind"], "DeleteOptions", "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "propagationPolicy");
    let (s, v) = send(
        &app,
        delete(json!({"propagationPolicy": "Orphan", "orphanDependents": false})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    // From the query when there is no body.
    let (s, v) = send(
        &app,
        req(
            "DELETE",
            "/api/v1/nodes/a?propagationPolicy=Foreground",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["kind"], "Node", "{v}");
    assert_eq!(v["metadata"]["finalizers"], json!(["foregroundDeletion"]));
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
    // Protobuf is decoded for every kind served (protobuf.rs here); CBOR is not.
    let (s, _) = send(
        &app,
        req(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some("application/cbor"),
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
async fn watch_on_object_url_is_a_get() {
    // kube-apiserver routes GET of an object URL to GetResource, which has no watch
    // (apiserver pkg/endpoints/installer.go): `watch=true` there answers the object.
    let app = app();
    create_node(&app, "a").await;
    create_node(&app, "b").await;
    let (s, v) = send(
        &app,
        req(
            "GET",
            "/api/v1/nodes/b?watch=true&timeoutSeconds=0",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["kind"], "Node", "{v}");
    assert_eq!(v["metadata"]["name"], "b", "{v}");
}

#[tokio::test]
async fn the_watch_prefix_watches_one_object_or_a_collection() {
    let app = app();
    create_node(&app, "a").await;
    create_node(&app, "b").await;
    let lines = |bytes: &[u8]| -> Vec<Value> {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    };
    // timeoutSeconds=0 ends the stream right after the initial events.
    for (uri, names) in [
        ("/api/v1/watch/nodes/b?timeoutSeconds=0", vec!["b"]),
        ("/api/v1/watch/nodes?timeoutSeconds=0", vec!["a", "b"]),
    ] {
        let resp = app
            .clone()
            .oneshot(req("GET", uri, None, Body::empty()))
            .await
            .expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let events = lines(&bytes);
        let got: Vec<&str> = events
            .iter()
            .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(got, names, "{uri}");
        assert!(events.iter().all(|e| e["type"] == "ADDED"), "{events:?}");
    }
    let (s, _) = send(
        &app,
        req("DELETE", "/api/v1/watch/nodes/b", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let (s, _) = send(
        &app,
        req("GET", "/api/v1/watch/nodes/b/status", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
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

// --- ServiceAccount, RBAC and apps/v1 workloads (served and stored; nothing runs them) ---

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn pod_template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "main", "image": "registry.example/ccm:v1"}]}})
}

/// One object of every new kind: collection URL, body, and whether DELETE answers with
/// the object (ServiceAccount, `ReturnDeletedObject`) rather than a Status.
fn new_kind_cases() -> Vec<(&'static str, String, Value, bool)> {
    vec![
        (
            "ServiceAccount",
            "/api/v1/namespaces/kube-system/serviceaccounts".into(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "cloud-controller-manager"}}),
            true,
        ),
        (
            "Role",
            format!("{RBAC}/namespaces/kube-system/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ccm:leases"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]}),
            false,
        ),
        (
            "ClusterRole",
            format!("{RBAC}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "system:cloud-controller-manager"},
                   "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["*"]},
                             {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
            false,
        ),
        (
            "RoleBinding",
            format!("{RBAC}/namespaces/kube-system/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "ccm:apiserver-authentication-reader"},
                   "roleRef": {"kind": "Role", "name": "extension-apiserver-authentication-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}]}),
            false,
        ),
        (
            "ClusterRoleBinding",
            format!("{RBAC}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "system:cloud-controller-manager"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:cloud-controller-manager"},
                   "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}]}),
            false,
        ),
        (
            "Deployment",
            "/apis/apps/v1/namespaces/kube-system/deployments".into(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ccm"},
                   "spec": {"selector": {"matchLabels": {"app": "ccm"}}, "template": pod_template("ccm")}}),
            false,
        ),
        (
            "DaemonSet",
            "/apis/apps/v1/namespaces/kube-system/daemonsets".into(),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ccm"},
                   "spec": {"selector": {"matchLabels": {"app": "ccm"}}, "template": pod_template("ccm")}}),
            false,
        ),
    ]
}

#[tokio::test]
async fn new_kinds_create_get_list_delete() {
    let app = app();
    for (kind, collection, body, returns_object) in new_kind_cases() {
        let name = body["metadata"]["name"].as_str().expect("name").to_string();
        let (s, created) = send(
            &app,
            req(
                "POST",
                &collection,
                Some("application/json"),
                body.to_string(),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{kind}: {created}");
        assert_eq!(created["kind"], kind);
        assert_eq!(created["apiVersion"], body["apiVersion"]);
        assert!(created["metadata"]["uid"].is_string(), "{created}");
        let workload = collection.starts_with("/apis/apps/");
        assert_eq!(
            created["metadata"].get("generation").cloned(),
            workload.then(|| json!(1)),
            "{kind}: generation"
        );

        let item = format!("{collection}/{}", name.replace(':', "%3A"));
        let (s, got) = send(&app, req("GET", &item, None, Body::empty())).await;
        assert_eq!(s, StatusCode::OK, "{kind}: {got}");
        assert_eq!(got["metadata"]["name"], name.as_str());

        let (s, list) = send(&app, req("GET", &collection, None, Body::empty())).await;
        assert_eq!(s, StatusCode::OK, "{kind}: {list}");
        assert_eq!(list["kind"], format!("{kind}List"));
        assert!(
            list["items"]
                .as_array()
                .expect("items")
                .iter()
                .any(|i| i["metadata"]["name"] == name.as_str()),
            "{kind}: {list}"
        );

        // Duplicate names are 409 AlreadyExists.
        let (s, v) = send(
            &app,
            req(
                "POST",
                &collection,
                Some("application/json"),
                body.to_string(),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "{kind}: {v}");
        assert_status(&v, 409, "AlreadyExists");

        let (s, deleted) = send(&app, req("DELETE", &item, None, Body::empty())).await;
        assert_eq!(s, StatusCode::OK, "{kind}: {deleted}");
        if returns_object {
            assert_eq!(deleted["kind"], kind, "{deleted}");
        } else {
            assert_eq!(deleted["kind"], "Status", "{kind}: {deleted}");
            assert_eq!(deleted["status"], "Success");
            assert_eq!(deleted["details"]["name"], name.as_str());
        }
        let (s, _) = send(&app, req("GET", &item, None, Body::empty())).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{kind}");
    }
}

#[tokio::test]
async fn new_kinds_defaults_and_tables() {
    let app = app();
    for (_, collection, body, _) in new_kind_cases() {
        let (s, v) = send(
            &app,
            req(
                "POST",
                &collection,
                Some("application/json"),
                body.to_string(),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let (_, deploy) = send(
        &app,
        req(
            "GET",
            "/apis/apps/v1/namespaces/kube-system/deployments/ccm",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(deploy["spec"]["replicas"], 1);
    assert_eq!(deploy["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(deploy["status"], json!({}));
    let (_, ds) = send(
        &app,
        req(
            "GET",
            "/apis/apps/v1/namespaces/kube-system/daemonsets/ccm",
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(ds["status"]["desiredNumberScheduled"], 0);
    let (_, rb) = send(
        &app,
        req(
            "GET",
            &format!(
                "{RBAC}/namespaces/kube-system/rolebindings/ccm:apiserver-authentication-reader"
            ),
            None,
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");

    // Server-side tables, as kubectl asks for them.
    let table = |uri: &str| {
        let mut r = req("GET", uri, None, Body::empty());
        r.headers_mut().insert(
            header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
                .parse()
                .expect("accept"),
        );
        r
    };
    let columns = |t: &Value| -> Vec<String> {
        t["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].as_str().expect("name").to_string())
            .collect()
    };
    let cases = [
        (
            "/api/v1/namespaces/kube-system/serviceaccounts",
            vec!["Name", "Age"],
        ),
        (
            "/apis/apps/v1/namespaces/kube-system/deployments",
            vec!["Name", "Ready", "Up-to-date", "Available", "Age"],
        ),
        (
            "/apis/apps/v1/namespaces/kube-system/daemonsets",
            vec![
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
            ],
        ),
        (&format!("{RBAC}/clusterroles"), vec!["Name", "Created At"]),
        (
            &format!("{RBAC}/namespaces/kube-system/roles"),
            vec!["Name", "Created At"],
        ),
        (
            &format!("{RBAC}/clusterrolebindings"),
            vec!["Name", "Role", "Age"],
        ),
        (
            &format!("{RBAC}/namespaces/kube-system/rolebindings"),
            vec!["Name", "Role", "Age"],
        ),
    ];
    for (uri, want) in cases {
        let (s, t) = send(&app, table(uri)).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {t}");
        assert_eq!(t["kind"], "Table", "{uri}");
        assert_eq!(columns(&t), want, "{uri}");
        assert_eq!(t["rows"].as_array().expect("rows").len(), 1, "{uri}: {t}");
    }
    let (_, t) = send(
        &app,
        table("/apis/apps/v1/namespaces/kube-system/deployments"),
    )
    .await;
    assert_eq!(t["rows"][0]["cells"][1], "0/1");
    let (_, t) = send(&app, table(&format!("{RBAC}/clusterrolebindings"))).await;
    assert_eq!(
        t["rows"][0]["cells"][1],
        "ClusterRole/system:cloud-controller-manager"
    );
    assert_eq!(
        t["rows"][0]["cells"][5],
        "kube-system/cloud-controller-manager"
    );
}

#[tokio::test]
async fn new_kinds_reject_bad_bodies() {
    let app = app();
    // Wrong JSON types are 400, as typed decoding fails.
    let bad_types = [
        (
            format!("{RBAC}/clusterroles"),
            json!({"metadata": {"name": "r"}, "rules": {"verbs": ["get"]}}),
            "ClusterRole.rules of type []v1.PolicyRule",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments".to_string(),
            json!({"metadata": {"name": "d"}, "spec": "three replicas"}),
            "Deployment.spec of type v1.DeploymentSpec",
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts".to_string(),
            json!({"metadata": {"name": "sa"}, "automountServiceAccountToken": "yes"}),
            "ServiceAccount.automountServiceAccountToken of type bool",
        ),
    ];
    for (uri, body, want) in bad_types {
        let (s, v) = send(
            &app,
            req("POST", &uri, Some("application/json"), body.to_string()),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        assert_status(&v, 400, "BadRequest");
        assert!(
            v["message"].as_str().expect("message").contains(want),
            "{v}"
        );
    }

    // Invalid names are 422; RBAC names are path segments, so colons are fine there.
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/apis/apps/v1/namespaces/default/daemonsets",
            Some("application/json"),
            json!({"metadata": {"name": "Bad_Name"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                   "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}}})
            .to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_status(&v, 422, "Invalid");
    assert_eq!(v["details"]["kind"], "DaemonSet");
    assert_eq!(v["details"]["group"], "apps");
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    let (s, v) = send(
        &app,
        req(
            "POST",
            &format!("{RBAC}/clusterroles"),
            Some("application/json"),
            json!({"metadata": {"name": "a%b"}, "rules": []}).to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");

    // Kind rules: a cluster role binding grants only a ClusterRole; a deployment's
    // selector must match its template.
    let (s, v) = send(
        &app,
        req(
            "POST",
            &format!("{RBAC}/clusterrolebindings"),
            Some("application/json"),
            json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"}})
                .to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "roleRef.kind");
    assert_eq!(
        v["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    let (s, v) = send(
        &app,
        req(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            Some("application/json"),
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                   "template": pod_template("y")}})
            .to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["message"]
            .as_str()
            .expect("message")
            .contains("`selector` does not match template `labels`"),
        "{v}"
    );
    // Namespaced kinds need an existing namespace.
    let (s, _) = send(
        &app,
        req(
            "POST",
            "/api/v1/namespaces/missing/serviceaccounts",
            Some("application/json"),
            json!({"metadata": {"name": "sa"}}).to_string(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn deployment_status_subresource_isolation() {
    let app = app();
    let base = "/apis/apps/v1/namespaces/default/deployments";
    let body = json!({"metadata": {"name": "web", "labels": {"tier": "a"}},
                      "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web")},
                      "status": {"replicas": 7}});
    let (s, v) = send(
        &app,
        req("POST", base, Some("application/json"), body.to_string()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"], json!({}), "create clears status");
    assert_eq!(v["metadata"]["generation"], 1);
    let item = format!("{base}/web");
    let status = format!("{item}/status");
    let merge = Some("application/merge-patch+json");

    // /status: status changes; spec and labels do not; generation stays.
    let (s, v) = send(
        &app,
        req("PATCH", &status, merge,
            r#"{"metadata":{"labels":{"tier":"b"},"annotations":{"kept":"yes"}},"spec":{"replicas":5},"status":{"readyReplicas":2,"replicas":2}}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"]["readyReplicas"], 2);
    assert_eq!(v["spec"]["replicas"], 2);
    assert_eq!(v["metadata"]["labels"]["tier"], "a");
    assert_eq!(v["metadata"]["annotations"]["kept"], "yes");
    assert_eq!(v["metadata"]["generation"], 1);
    let (s, got) = send(&app, req("GET", &status, None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["status"]["readyReplicas"], 2);

    // Main resource: status changes are dropped; a spec change bumps the generation.
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &item,
            merge,
            r#"{"spec":{"replicas":3},"status":{"readyReplicas":9}}"#,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["spec"]["replicas"], 3);
    assert_eq!(v["status"]["readyReplicas"], 2);
    assert_eq!(v["metadata"]["generation"], 2);
    // A label-only change does not.
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &item,
            merge,
            r#"{"metadata":{"labels":{"x":"y"}}}"#,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["metadata"]["generation"], 2);
    // PUT through /status with the current object: spec stays.
    let mut put = v.clone();
    put["spec"]["replicas"] = json!(10);
    put["status"]["availableReplicas"] = json!(2);
    let (s, v) = send(
        &app,
        req("PUT", &status, Some("application/json"), put.to_string()),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["spec"]["replicas"], 3);
    assert_eq!(v["status"]["availableReplicas"], 2);
    // The selector is immutable.
    let (s, v) = send(
        &app,
        req(
            "PATCH",
            &item,
            merge,
            r#"{"spec":{"selector":{"matchLabels":{"app":"web","v":"2"}}}}"#,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let causes = v["details"]["causes"].as_array().expect("causes");
    assert!(
        causes.iter().any(|c| c["field"] == "spec.selector"
            && c["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("field is immutable"))),
        "{v}"
    );
}

#[tokio::test]
async fn new_kinds_discovery() {
    let app = app();
    let (s, v) = send(&app, req("GET", "/apis", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    let groups: Vec<&str> = v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(
        groups.contains(&"apps") && groups.contains(&"rbac.authorization.k8s.io"),
        "{groups:?}"
    );
    let names = |v: &Value| -> Vec<String> {
        v["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|r| r["name"].as_str().expect("name").to_string())
            .collect()
    };
    let (s, apps) = send(&app, req("GET", "/apis/apps/v1", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        names(&apps),
        [
            "deployments",
            "deployments/status",
            "daemonsets",
            "daemonsets/status"
        ]
    );
    assert_eq!(apps["resources"][0]["shortNames"], json!(["deploy"]));
    assert_eq!(apps["resources"][0]["categories"], json!(["all"]));
    assert_eq!(apps["resources"][2]["shortNames"], json!(["ds"]));
    let (s, rbac) = send(&app, req("GET", RBAC, None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        names(&rbac),
        [
            "roles",
            "clusterroles",
            "rolebindings",
            "clusterrolebindings"
        ]
    );
    assert!(
        rbac["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .all(|r| r.get("shortNames").is_none())
    );
    let (_, core) = send(&app, req("GET", "/api/v1", None, Body::empty())).await;
    let sa = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "serviceaccounts")
        .expect("serviceaccounts")
        .clone();
    assert_eq!(sa["shortNames"], json!(["sa"]));
    assert_eq!(sa["namespaced"], true);
    let (s, group) = send(&app, req("GET", "/apis/apps", None, Body::empty())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(group["preferredVersion"]["groupVersion"], "apps/v1");
}

/// A request with `token` as its bearer token.
fn as_user(token: &str, method: &str, uri: &str, body: Option<Value>) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    if body.is_some() {
        b = b.header(header::CONTENT_TYPE, "application/json");
    }
    b.body(body.map_or_else(Body::empty, |v| Body::from(v.to_string())))
        .expect("request")
}

/// A server with RBAC on, a ServiceAccount `default/ccm` and a token for it.
async fn rbac_app_with_sa_token(rbac: bool) -> (AppState, axum::Router, String) {
    let config = Config {
        token: TOKEN.into(),
        rbac,
        ..Config::default()
    };
    let state = AppState::new(&config);
    let app = router(state.clone());
    let (s, v) = send(
        &app,
        as_user(
            TOKEN,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            Some(json!({"metadata": {"name": "ccm"}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = send(
        &app,
        as_user(
            TOKEN,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/ccm/token",
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["kind"], "TokenRequest");
    assert_eq!(v["spec"]["expirationSeconds"], 3600);
    let token = v["status"]["token"].as_str().expect("token").to_string();
    (state, app, token)
}

#[tokio::test]
async fn token_request_errors_follow_kube_apiserver() {
    let (_, app, _) = rbac_app_with_sa_token(false).await;
    let uri = "/api/v1/namespaces/default/serviceaccounts/ccm/token";
    let (s, v) = send(
        &app,
        as_user(
            TOKEN,
            "POST",
            uri,
            Some(json!({"spec": {"expirationSeconds": 599}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["details"]["causes"][0]["field"], "spec.expirationSeconds");
    let (s, v) = send(
        &app,
        as_user(
            TOKEN,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/nope/token",
            Some(json!({})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["message"], "serviceaccounts \"nope\" not found");
    let (s, _) = send(&app, as_user(TOKEN, "GET", uri, None)).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let (s, _) = send(
        &app,
        as_user(
            TOKEN,
            "GET",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            None,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn service_account_tokens_authenticate_and_without_rbac_are_admins() {
    let (state, app, token) = rbac_app_with_sa_token(false).await;
    let (s, v) = send(&app, as_user(&token, "DELETE", "/api/v1/nodes/x", None)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "an admin reaches the store: {v}");
    // Denials narrow service accounts too.
    state.deny(mock_kube_apiserver::auth::Denial {
        user: "system:serviceaccount:default:ccm".into(),
        verb: "delete".into(),
        group: String::new(),
        resource: "nodes".into(),
    });
    let (s, v) = send(&app, as_user(&token, "DELETE", "/api/v1/nodes/x", None)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        v["message"],
        "nodes \"x\" is forbidden: User \"system:serviceaccount:default:ccm\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // Deleting the ServiceAccount kills its tokens.
    let (s, _) = send(
        &app,
        as_user(
            TOKEN,
            "DELETE",
            "/api/v1/namespaces/default/serviceaccounts/ccm",
            None,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = send(&app, as_user(&token, "GET", "/api/v1/nodes", None)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn rbac_authorizes_service_accounts_from_stored_roles() {
    let (_, app, token) = rbac_app_with_sa_token(true).await;
    // Discovery and self reviews come with the bootstrap policy.
    let (s, _) = send(&app, as_user(&token, "GET", "/api", None)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, v) = send(
        &app,
        as_user(&token, "GET", "/api/v1/namespaces/default/configmaps", None),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        v["message"],
        "configmaps is forbidden: User \"system:serviceaccount:default:ccm\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let (s, v) = send(&app, as_user(&token, "GET", "/metrics", None)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        v["message"],
        "forbidden: User \"system:serviceaccount:default:ccm\" cannot get path \"/metrics\""
    );
    for (uri, body) in [
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"metadata": {"name": "ccm"}, "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"], "resourceNames": ["mine"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"metadata": {"name": "ccm"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ccm"},
                "subjects": [{"kind": "ServiceAccount", "name": "ccm"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"metadata": {"name": "ccm"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ccm"},
                "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "default"}]}),
        ),
        ("/api/v1/nodes", json!({"metadata": {"name": "n1"}})),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "mine"}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "theirs"}}),
        ),
    ] {
        let (s, v) = send(&app, as_user(TOKEN, "POST", uri, Some(body))).await;
        assert_eq!(s, StatusCode::CREATED, "{uri}: {v}");
    }
    let (s, _) = send(&app, as_user(&token, "GET", "/api/v1/nodes", None)).await;
    assert_eq!(s, StatusCode::OK);
    let mut patch = as_user(
        &token,
        "PATCH",
        "/api/v1/nodes/n1/status",
        Some(json!({"status": {"capacity": {"cpu": "1"}}})),
    );
    patch.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/merge-patch+json".parse().expect("ct"),
    );
    let (s, v) = send(&app, patch).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = send(&app, as_user(&token, "DELETE", "/api/v1/nodes/n1", None)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        v["message"],
        "nodes \"n1\" is forbidden: User \"system:serviceaccount:default:ccm\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
    );
    assert_eq!(v["details"], json!({"name": "n1", "kind": "nodes"}));
    let cm = "/api/v1/namespaces/default/configmaps";
    let (s, _) = send(
        &app,
        as_user(&token, "DELETE", &format!("{cm}/theirs"), None),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = send(&app, as_user(&token, "DELETE", &format!("{cm}/mine"), None)).await;
    assert_eq!(s, StatusCode::OK);

    // Access reviews answer as requests are decided.
    let sar = |spec: Value| {
        as_user(
            TOKEN,
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}),
            ),
        )
    };
    let (s, v) = send(
        &app,
        sar(json!({"user": "system:serviceaccount:default:ccm",
            "resourceAttributes": {"verb": "patch", "resource": "nodes", "subresource": "status", "name": "n1"}})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"ccm\" of ClusterRole \"ccm\" to ServiceAccount \"ccm/default\""})
    );
    let (_, v) = send(
        &app,
        sar(json!({"user": "system:serviceaccount:default:ccm",
            "resourceAttributes": {"verb": "delete", "resource": "nodes", "name": "n1"}})),
    )
    .await;
    assert_eq!(v["status"], json!({"allowed": false}));
    let (s, v) = send(&app, sar(json!({"user": "x"}))).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["details"]["group"], "authorization.k8s.io", "{v}");
    assert!(v["details"].get("kind").is_none(), "{v}");
    // The service account asks about itself.
    let (s, v) = send(
        &app,
        as_user(
            &token,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            Some(json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "nodes"}}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"]["allowed"], true);
    // And the rules it has in a namespace (kubectl auth can-i --list).
    let (s, v) = send(
        &app,
        as_user(
            &token,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            Some(json!({"spec": {"namespace": "default"}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"]["incomplete"], false);
    let resource_rules = v["status"]["resourceRules"].as_array().expect("rules");
    assert!(
        resource_rules.contains(
            &json!({"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes/status"]})
        ),
        "{v}"
    );
    let (s, v) = send(
        &app,
        as_user(
            &token,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            Some(json!({"spec": {}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["message"], "no namespace on request");
    // And its token reviews.
    let (s, v) = send(
        &app,
        as_user(
            TOKEN,
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(json!({"spec": {"token": token}})),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["status"]["user"]["username"],
        "system:serviceaccount:default:ccm"
    );
    // The admin token stays a system:masters admin with RBAC on.
    let (s, _) = send(&app, as_user(TOKEN, "DELETE", "/api/v1/nodes/n1", None)).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn discovery_lists_the_auth_apis() {
    let app = app();
    let (_, v) = send(&app, req("GET", "/api/v1", None, Body::empty())).await;
    let token = v["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .cloned()
        .expect("serviceaccounts/token");
    assert_eq!(token["kind"], "TokenRequest");
    assert_eq!(token["group"], "authentication.k8s.io");
    assert_eq!(token["verbs"], json!(["create"]));
    let (_, v) = send(
        &app,
        req("GET", "/apis/authorization.k8s.io/v1", None, Body::empty()),
    )
    .await;
    let names: Vec<&str> = v["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "subjectaccessreviews",
        "selfsubjectaccessreviews",
        "localsubjectaccessreviews",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let (s, v) = send(
        &app,
        req("GET", "/apis/authentication.k8s.io/v1", None, Body::empty()),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["resources"][0]["verbs"], json!(["create"]), "{v}");
}

#[tokio::test]
async fn the_read_only_identity_reviews_itself_with_and_without_rbac() {
    // kube-apiserver's bootstrap system:basic-user role lets every authenticated user
    // create self reviews; the read-only identity keeps its fixed role under RBAC.
    for rbac in [false, true] {
        let config = Config {
            token: TOKEN.into(),
            readonly_token: "ro".into(),
            rbac,
            ..Config::default()
        };
        let app = router(AppState::new(&config));
        let review = |verb: &str| {
            as_user(
                "ro",
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                Some(json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "nodes"}}})),
            )
        };
        let (s, v) = send(&app, review("list")).await;
        assert_eq!(s, StatusCode::CREATED, "rbac {rbac}: {v}");
        assert_eq!(v["status"]["allowed"], true, "rbac {rbac}: {v}");
        let (_, v) = send(&app, review("delete")).await;
        assert_eq!(v["status"]["allowed"], false, "rbac {rbac}: {v}");
        let (s, v) = send(
            &app,
            as_user(
                "ro",
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                Some(json!({"spec": {"namespace": "default"}})),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "rbac {rbac}: {v}");
        assert_eq!(
            v["status"]["resourceRules"][0]["verbs"],
            json!(["get", "list", "watch"])
        );
        // Other creates stay refused.
        let (s, _) = send(
            &app,
            as_user(
                "ro",
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                Some(json!({"spec": {"user": "x", "resourceAttributes": {"verb": "get", "resource": "nodes"}}})),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
    }
}
