//! `dryRun=All` on every write verb: the request is validated and answered as if it
//! ran, but nothing is stored, the revision does not move and no watcher hears of it
//! (apiserver pkg/endpoints/handlers: `dryrun.IsDryRun` skips the storage write).

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use mock_kube_apiserver::resources::lookup;
use mock_kube_apiserver::store::{Filter, WatchFrom};
use mock_kube_apiserver::{AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "dry-token";

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, Value) {
    let r = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body.to_string()))
        .expect("request");
    let resp = app.clone().oneshot(r).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

const JSON: &str = "application/json";

#[tokio::test]
async fn dry_run_all_changes_nothing_on_any_write_verb() {
    let state = AppState::new(&Config {
        token: TOKEN.into(),
        ..Config::default()
    });
    let app = router(state.clone());
    let store = state.store.clone();
    let (s, n1) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        JSON,
        r#"{"metadata":{"name":"n1","finalizers":["x/y"]}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    send(
        &app,
        "POST",
        "/api/v1/nodes",
        JSON,
        r#"{"metadata":{"name":"n2"}}"#,
    )
    .await;
    let nodes = lookup("", "v1", "nodes").expect("nodes");
    let mut live = store
        .watch(nodes, &Filter::default(), WatchFrom::Now { initial: false })
        .expect("watch")
        .live;
    let revision = store.revision();
    let n1_before = store.get(nodes, None, "n1").expect("n1");

    let n1_rv = n1["metadata"]["resourceVersion"].as_str().expect("rv");
    let put_body =
        json!({"metadata": {"name": "n1", "resourceVersion": n1_rv, "labels": {"a": "b"}}})
            .to_string();
    let writes: Vec<(&str, &str, &str, String, StatusCode)> = vec![
        (
            "POST",
            "/api/v1/nodes?dryRun=All",
            JSON,
            r#"{"metadata":{"name":"n3"}}"#.into(),
            StatusCode::CREATED,
        ),
        (
            "PUT",
            "/api/v1/nodes/n1?dryRun=All",
            JSON,
            put_body,
            StatusCode::OK,
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l9?dryRun=All",
            JSON,
            r#"{"metadata":{"name":"l9"},"spec":{}}"#.into(),
            StatusCode::CREATED,
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1?dryRun=All",
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"m":"1"}}}"#.into(),
            StatusCode::OK,
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1?dryRun=All",
            "application/strategic-merge-patch+json",
            r#"{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}"#.into(),
            StatusCode::OK,
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1?dryRun=All",
            "application/json-patch+json",
            r#"[{"op":"add","path":"/metadata/labels","value":{"j":"1"}}]"#.into(),
            StatusCode::OK,
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1/status?dryRun=All",
            "application/merge-patch+json",
            r#"{"status":{"phase":"Running"}}"#.into(),
            StatusCode::OK,
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1?dryRun=All&fieldManager=m",
            "application/apply-patch+yaml",
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"s":"1"}}}"#
                .into(),
            StatusCode::OK,
        ),
        (
            "PATCH",
            "/api/v1/nodes/new?dryRun=All&fieldManager=m",
            "application/apply-patch+yaml",
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"new"}}"#.into(),
            StatusCode::CREATED,
        ),
        (
            "DELETE",
            "/api/v1/nodes/n1?dryRun=All",
            JSON,
            String::new(),
            StatusCode::OK,
        ),
        (
            "DELETE",
            "/api/v1/nodes/n2?dryRun=All",
            JSON,
            String::new(),
            StatusCode::OK,
        ),
        (
            "DELETE",
            "/api/v1/nodes/n2",
            JSON,
            r#"{"dryRun":["All"]}"#.into(),
            StatusCode::OK,
        ),
        (
            "DELETE",
            "/api/v1/nodes?dryRun=All",
            JSON,
            String::new(),
            StatusCode::OK,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/services?dryRun=All",
            JSON,
            r#"{"metadata":{"name":"s"},"spec":{"type":"NodePort","ports":[{"port":80}]}}"#.into(),
            StatusCode::CREATED,
        ),
    ];
    for (method, uri, ct, body, want) in &writes {
        let (s, v) = send(&app, method, uri, ct, body).await;
        assert_eq!(s, *want, "{method} {uri}: {v}");
        assert_eq!(
            store.revision(),
            revision,
            "{method} {uri} moved the revision"
        );
    }
    // A dry-run answer looks like the real one: the patch is applied in the response.
    let (_, v) = send(
        &app,
        "PATCH",
        "/api/v1/nodes/n1?dryRun=All",
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"m":"1"}}}"#,
    )
    .await;
    assert_eq!(v["metadata"]["labels"]["m"], "1");
    // Invalid input is still refused.
    let (s, _) = send(
        &app,
        "POST",
        "/api/v1/nodes?dryRun=All",
        JSON,
        r#"{"metadata":{"name":"BAD NAME"}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = send(
        &app,
        "POST",
        "/api/v1/nodes?dryRun=Some",
        JSON,
        r#"{"metadata":{"name":"n5"}}"#,
    )
    .await;
    // An invalid CreateOptions, as kube-apiserver v1.37.2 answers it (differential corpus).
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);

    assert_eq!(store.get(nodes, None, "n1").expect("n1"), n1_before);
    assert!(store.get(nodes, None, "n2").is_ok());
    for name in ["n3", "new"] {
        assert!(store.get(nodes, None, name).is_err(), "{name} was stored");
    }
    let services = lookup("", "v1", "services").expect("services");
    assert!(store.get(services, Some("default"), "s").is_err());
    let leases = lookup("coordination.k8s.io", "v1", "leases").expect("leases");
    assert!(store.get(leases, Some("default"), "l9").is_err());
    // The first event a watcher sees is the next real write.
    send(
        &app,
        "POST",
        "/api/v1/nodes",
        JSON,
        r#"{"metadata":{"name":"real"}}"#,
    )
    .await;
    let event = live.try_recv().expect("the real write is broadcast");
    assert_eq!(event.object["metadata"]["name"], "real");
    assert_eq!(event.revision, revision + 1);
}
