//! Tables, aggregated discovery, OpenAPI v3 and field validation through the axum
//! router, without a socket.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::{AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn app() -> axum::Router {
    router(AppState::new(&Config::default()))
}

struct Reply {
    status: StatusCode,
    content_type: String,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    accept: Option<&str>,
    body: Option<(&str, Value)>,
) -> Reply {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(a) = accept {
        b = b.header(header::ACCEPT, a);
    }
    let body = match body {
        Some((ct, v)) => {
            b = b.header(header::CONTENT_TYPE, ct);
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    let resp = app
        .clone()
        .oneshot(b.body(body).expect("request"))
        .await
        .expect("infallible");
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let warnings = resp
        .headers()
        .get_all(header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Reply {
        status,
        content_type,
        warnings,
        body,
    }
}

async fn create(app: &axum::Router, uri: &str, obj: Value) {
    let r = send(app, "POST", uri, None, Some(("application/json", obj))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

#[tokio::test]
async fn list_and_get_as_table() {
    let app = app();
    create(
        &app,
        "/api/v1/nodes",
        json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
               "status": {"nodeInfo": {"kubeletVersion": "v1.34.0"}}}),
    )
    .await;

    let list = send(
        &app,
        "GET",
        "/api/v1/nodes?limit=500",
        Some(TABLE_ACCEPT),
        None,
    )
    .await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(
        list.content_type,
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    assert_eq!(list.body["kind"], "Table");
    assert_eq!(list.body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        column_names(&list.body)[..5],
        ["Name", "Status", "Roles", "Age", "Version"]
    );
    let row = &list.body["rows"][0];
    assert_eq!(row["cells"][0], "n1");
    assert_eq!(row["cells"][2], "worker");
    assert_eq!(row["cells"][4], "v1.34.0");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert!(list.body["metadata"]["resourceVersion"].is_string());

    let one = send(
        &app,
        "GET",
        "/api/v1/nodes/n1?includeObject=Object",
        Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
        None,
    )
    .await;
    assert_eq!(one.body["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(one.body["rows"][0]["object"]["kind"], "Node");

    let bad = send(
        &app,
        "GET",
        "/api/v1/nodes?includeObject=All",
        Some(TABLE_ACCEPT),
        None,
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    // Without the Table media type: the plain list, as before.
    let plain = send(&app, "GET", "/api/v1/nodes", None, None).await;
    assert_eq!(plain.body["kind"], "NodeList");
    assert_eq!(plain.content_type, "application/json");
}

/// kube-apiserver's JSON lists hold their items without `apiVersion` and `kind` (a built-in
/// type's list items have an empty TypeMeta); Tables with whole objects and
/// PartialObjectMetadataLists keep a kind per item. The embedded server keeps each item's
/// encoding between LISTs: a write must show in the next LIST.
#[tokio::test]
async fn list_items_carry_no_type_meta_and_follow_writes() {
    let app = app();
    create(
        &app,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
    )
    .await;
    let plain = send(&app, "GET", "/api/v1/nodes", None, None).await;
    assert_eq!(plain.body["kind"], "NodeList");
    assert_eq!(plain.body["apiVersion"], "v1");
    let item = plain.body["items"][0].as_object().expect("an item");
    assert_eq!(item["metadata"]["name"], "n1");
    assert!(!item.contains_key("kind") && !item.contains_key("apiVersion"));

    let table = send(
        &app,
        "GET",
        "/api/v1/nodes?includeObject=Object",
        Some(TABLE_ACCEPT),
        None,
    )
    .await;
    assert_eq!(table.body["rows"][0]["object"]["kind"], "Node");
    assert_eq!(table.body["rows"][0]["object"]["apiVersion"], "v1");
    let partial = send(
        &app,
        "GET",
        "/api/v1/nodes",
        Some("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
        None,
    )
    .await;
    assert_eq!(partial.body["items"][0]["kind"], "PartialObjectMetadata");

    let patched = send(
        &app,
        "PATCH",
        "/api/v1/nodes/n1",
        None,
        Some((
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"seq": "2"}}}),
        )),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let again = send(&app, "GET", "/api/v1/nodes", None, None).await;
    assert_eq!(again.body["items"][0]["metadata"]["labels"]["seq"], "2");
    assert_eq!(
        again.body["items"][0]["metadata"]["resourceVersion"],
        patched.body["metadata"]["resourceVersion"]
    );
    let removed = send(&app, "DELETE", "/api/v1/nodes/n1", None, None).await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.body);
    let empty = send(&app, "GET", "/api/v1/nodes", None, None).await;
    assert_eq!(empty.body["items"], json!([]));
}

#[tokio::test]
async fn services_table_shows_pending_load_balancer() {
    let app = app();
    create(
        &app,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "web"},
               "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                        "ports": [{"port": 80, "protocol": "TCP"}]}}),
    )
    .await;
    let t = send(
        &app,
        "GET",
        "/api/v1/namespaces/default/services",
        Some(TABLE_ACCEPT),
        None,
    )
    .await
    .body;
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age",
            "Selector"
        ]
    );
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[1], "LoadBalancer");
    assert_eq!(cells[3], "<pending>");
    let ports = cells[4].as_str().expect("ports");
    assert!(
        ports.starts_with("80:") && ports.ends_with("/TCP"),
        "{ports}"
    );
    assert_eq!(cells[6], "app=web");
}

#[tokio::test]
async fn watch_as_table_sends_headers_once() {
    let app = app();
    create(&app, "/api/v1/nodes", json!({"metadata": {"name": "a"}})).await;
    create(&app, "/api/v1/nodes", json!({"metadata": {"name": "b"}})).await;
    let r = send(
        &app,
        "GET",
        "/api/v1/nodes?watch=true&timeoutSeconds=1",
        Some(TABLE_ACCEPT),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let Value::String(text) = r.body else {
        panic!("expected NDJSON, got {}", r.body)
    };
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    assert!(events[1]["object"]["columnDefinitions"].is_null());
    assert_eq!(events[1]["object"]["rows"][0]["cells"][0], "b");
}

#[tokio::test]
async fn aggregated_discovery_on_request() {
    let app = app();
    let core = send(&app, "GET", "/api", Some(DISCOVERY_ACCEPT), None).await;
    assert_eq!(
        core.content_type,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(core.body["kind"], "APIGroupDiscoveryList");
    assert_eq!(core.body["items"][0]["versions"][0]["version"], "v1");
    let groups = send(&app, "GET", "/apis", Some(DISCOVERY_ACCEPT), None).await;
    assert_eq!(groups.body["apiVersion"], "apidiscovery.k8s.io/v2");
    assert!(
        groups.body["items"]
            .as_array()
            .expect("items")
            .iter()
            .any(|g| g["metadata"]["name"] == "coordination.k8s.io")
    );
    let legacy = send(&app, "GET", "/apis", Some("application/json"), None).await;
    assert_eq!(legacy.body["kind"], "APIGroupList");
    assert_eq!(legacy.content_type, "application/json");
}

#[tokio::test]
async fn openapi_v3_index_and_documents() {
    let app = app();
    let idx = send(&app, "GET", "/openapi/v3", None, None).await;
    assert_eq!(idx.status, StatusCode::OK);
    let url = idx.body["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
        .as_str()
        .expect("url")
        .to_string();
    let doc = send(&app, "GET", &url, None, None).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert_eq!(
        doc.body["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]["x-kubernetes-group-version-kind"]
            [0]["kind"],
        "Lease"
    );
    let missing = send(&app, "GET", "/openapi/v3/apis/nope/v1", None, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn field_validation_strict_warn_ignore() {
    let app = app();
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "colour": "x"},
                     "data": {"a": "1"}, "spec": {}});
    let strict = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        None,
        Some(("application/json", obj.clone())),
    )
    .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST, "{}", strict.body);
    let message = strict.body["message"].as_str().expect("message");
    assert!(
        message.contains(
            r#"strict decoding error: unknown field "spec", unknown field "metadata.colour""#
        ),
        "{message}"
    );

    let warn = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        None,
        Some(("application/json", obj.clone())),
    )
    .await;
    assert_eq!(warn.status, StatusCode::CREATED);
    assert_eq!(
        warn.warnings,
        [
            r#"299 - "unknown field \"spec\"""#,
            r#"299 - "unknown field \"metadata.colour\"""#
        ]
    );
    assert!(
        warn.body.get("spec").is_none(),
        "unknown fields are dropped"
    );
    assert_eq!(warn.body["data"]["a"], "1");

    let patch = send(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict",
        None,
        Some(("application/merge-patch+json", json!({"extra": 1}))),
    )
    .await;
    // The patch handler reports the patched object as an invalid `patch` (a 422, as
    // kube-apiserver v1.37.2 answers it), where a create gets the decoder's 400.
    assert_eq!(
        patch.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        patch.body
    );
    assert_eq!(patch.body["details"]["causes"][0]["field"], "patch");
    assert!(
        patch.body["details"]["causes"][0]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("strict decoding error: unknown field \"extra\"")),
        "{}",
        patch.body
    );
    // A repeated key is refused under Strict only (the last one wins otherwise).
    let raw = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1"},"data":{"b":"2"}}"#;
    for (validation, status) in [
        ("Strict", StatusCode::BAD_REQUEST),
        ("Ignore", StatusCode::CREATED),
    ] {
        let resp = app
            .clone()
            .oneshot(
                Request::builder()
                    .method("POST")
                    .uri(format!(
                        "/api/v1/namespaces/default/configmaps?fieldValidation={validation}"
                    ))
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(raw))
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(resp.status(), status, "{validation}");
        let body: Value =
            serde_json::from_slice(&resp.into_body().collect().await.expect("body").to_bytes())
                .expect("json");
        if validation == "Strict" {
            assert_eq!(
                body["message"],
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"data\""
            );
        } else {
            assert_eq!(body["data"], json!({"b": "2"}));
        }
    }
    let ignored = send(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c?fieldValidation=Ignore",
        None,
        Some((
            "application/merge-patch+json",
            json!({"extra": 1, "data": {"b": "2"}}),
        )),
    )
    .await;
    assert_eq!(ignored.status, StatusCode::OK);
    assert!(ignored.warnings.is_empty());
    assert!(ignored.body.get("extra").is_none());
    assert_eq!(ignored.body["data"]["b"], "2");

    let invalid = send(
        &app,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c?fieldValidation=Loud",
        None,
        Some(("application/json", json!({"metadata": {"name": "c"}}))),
    )
    .await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(invalid.body["details"]["kind"], "UpdateOptions");
}
