//! `Config.data_dir`: objects, UIDs and the resourceVersion sequence survive a restart
//! of the server, on the same port, and watches from the new revision work.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use mock_kube_apiserver::{ApiServer, Config};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

/// A kube-rs client for `server` (its own kubeconfig).
pub(crate) async fn client(server: &ApiServer) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(cfg).expect("client")
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"k": "v"}}, "spec": {}}))
        .expect("node")
}

fn rv(obj: &impl ResourceExt) -> u64 {
    obj.resource_version()
        .and_then(|s| s.parse().ok())
        .expect("numeric resourceVersion")
}

#[tokio::test]
async fn restart_on_the_same_dir_keeps_objects_and_resource_versions_increase() {
    let dir = tempfile::tempdir().expect("dir");
    let server = ApiServer::start(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    })
    .await
    .expect("start");
    let addr = server.addr();
    let nodes: Api<Node> = Api::all(client(&server).await);
    let a = nodes
        .create(&PostParams::default(), &node("a"))
        .await
        .expect("a");
    nodes
        .create(&PostParams::default(), &node("b"))
        .await
        .expect("b");
    nodes
        .create(&PostParams::default(), &node("gone"))
        .await
        .expect("gone");
    let patched = nodes
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"k": "patched"}}})),
        )
        .await
        .expect("patch");
    nodes
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete");
    let services: Api<Service> = Api::namespaced(client(&server).await, "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}]},
    }))
    .expect("svc");
    let svc = services
        .create(&PostParams::default(), &svc)
        .await
        .expect("svc");
    let before = server.store().revision();

    let server = server.restart().await.expect("restart");
    assert_eq!(server.addr(), addr, "same port after restart");
    assert_eq!(server.store().revision(), before);
    // The old client reconnects to the same address.
    let got = nodes.get("a").await.expect("a after restart");
    assert_eq!(got.uid(), a.uid());
    assert_eq!(got.resource_version(), patched.resource_version());
    assert_eq!(got.labels().get("k").map(String::as_str), Some("patched"));
    assert!(nodes.get_opt("gone").await.expect("get").is_none());
    let svc_after = services.get("web").await.expect("svc after restart");
    assert_eq!(svc_after.spec, svc.spec, "allocated IP and node port kept");

    let list = nodes.list(&ListParams::default()).await.expect("list");
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .expect("list rv");
    assert_eq!(list_rv, before);
    assert_eq!(list.items.len(), 2);
    let mut watch = nodes
        .watch(&WatchParams::default().timeout(10), &list_rv.to_string())
        .await
        .expect("watch from the reloaded revision")
        .boxed();
    let c = nodes
        .create(&PostParams::default(), &node("c"))
        .await
        .expect("c");
    assert!(rv(&c) > before, "resourceVersion {} after {before}", rv(&c));
    let event = tokio::time::timeout(DEADLINE, watch.next())
        .await
        .expect("event before the deadline")
        .expect("stream open")
        .expect("event");
    assert!(matches!(event, WatchEvent::Added(n) if n.name_any() == "c"));
    // A second NodePort service must not reuse the persisted allocation.
    let other: Service = serde_json::from_value(json!({
        "metadata": {"name": "web2"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}]},
    }))
    .expect("svc");
    let other = services
        .create(&PostParams::default(), &other)
        .await
        .expect("web2");
    let port = |s: &Service| {
        s.spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p[0].node_port)
    };
    assert_ne!(port(&other), port(&svc_after));
    server.shutdown().await;

    // A brand-new server on the same directory (another port) sees the same state.
    let third = ApiServer::start(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    })
    .await
    .expect("start again");
    let nodes: Api<Node> = Api::all(client(&third).await);
    let names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(names, vec!["a", "b", "c"]);
    assert!(third.store().revision() > before);
    third.shutdown().await;
}

#[tokio::test]
async fn restart_without_data_dir_keeps_the_in_memory_store_and_tls_identity() {
    mock_cloud::tls::install_ring_provider();
    let server = ApiServer::start(Config {
        tls: true,
        ..Config::default()
    })
    .await
    .expect("start");
    let kubeconfig = server.kubeconfig_yaml();
    let nodes: Api<Node> = Api::all(client(&server).await);
    nodes
        .create(&PostParams::default(), &node("m"))
        .await
        .expect("m");
    let server = server.restart().await.expect("restart");
    assert_eq!(
        server.kubeconfig_yaml(),
        kubeconfig,
        "same CA, token and port"
    );
    assert!(nodes.get_opt("m").await.expect("get").is_some());
    server.shutdown().await;
}
