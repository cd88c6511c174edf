//! kube-rs (client and runtime) against the embedded server over a real socket.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{wait::await_condition, watcher};
use kube::{Client, ResourceExt};
use mock_kube_apiserver::{ApiServer, Config};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

async fn start(config: Config) -> (ApiServer, Client) {
    let server = ApiServer::start(config).await.expect("start server");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kube config");
    let client = Client::try_from(cfg).expect("client");
    (server, client)
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).expect("node")
}

fn api_status(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn node_crud_and_patches() {
    let (server, client) = start(Config::default()).await;
    // kube-rs sends its bearer token even over plain HTTP: require it.
    server.set_allow_anonymous(false);
    let nodes: Api<Node> = Api::all(client);
    let created = nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let got = nodes.get("n1").await.expect("get");
    assert_eq!(got.resource_version(), created.resource_version());
    assert!(nodes.get_opt("missing").await.expect("get_opt").is_none());
    let err = nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect_err("duplicate");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.reason == "AlreadyExists"),
        "{err:?}"
    );

    // replace, then a stale replace.
    let mut changed = got.clone();
    changed.labels_mut().insert("a".into(), "b".into());
    let replaced = nodes
        .replace("n1", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_ne!(replaced.resource_version(), got.resource_version());
    let err = nodes
        .replace("n1", &PostParams::default(), &changed)
        .await
        .expect_err("stale");
    assert_eq!(api_status(&err), 409);

    // merge patch
    let pp = PatchParams::default();
    let merged = nodes
        .patch(
            "n1",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(merged.labels().get("m").map(String::as_str), Some("1"));

    // JSON patches exactly as kube-runtime's finalizer helper sends them.
    let add_first: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f1"]},
    ]))
    .expect("patch");
    let with_f1 = nodes
        .patch("n1", &pp, &Patch::Json::<()>(add_first))
        .await
        .expect("add first finalizer");
    assert_eq!(with_f1.finalizers(), ["example.com/f1".to_string()]);
    let add_second: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/f1"]},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/f2"},
    ]))
    .expect("patch");
    nodes
        .patch("n1", &pp, &Patch::Json::<()>(add_second))
        .await
        .expect("add second finalizer");
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x"]},
    ]))
    .expect("patch");
    let err = nodes
        .patch("n1", &pp, &Patch::Json::<()>(failing))
        .await
        .expect_err("failed test");
    assert_eq!(api_status(&err), 422);
    let remove: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/f1"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]))
    .expect("patch");
    let after = nodes
        .patch("n1", &pp, &Patch::Json::<()>(remove))
        .await
        .expect("remove finalizer");
    assert_eq!(after.finalizers(), ["example.com/f2".to_string()]);

    // strategic merge: taints are atomic, labels merge.
    let smp = nodes
        .patch(
            "n1",
            &pp,
            &Patch::Strategic(json!({
                "metadata": {"labels": {"s": "2"}},
                "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]}
            })),
        )
        .await
        .expect("strategic patch");
    assert_eq!(smp.labels().get("m").map(String::as_str), Some("1"));
    assert_eq!(
        smp.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(Vec::len),
        Some(1)
    );

    // status patch with the nodeutil list-level replace of addresses (duplicates of one type survive).
    let status = nodes
        .patch_status(
            "n1",
            &pp,
            &Patch::Strategic(json!({"status": {"addresses": [
                {"type": "InternalIP", "address": "127.0.0.10"},
                {"type": "InternalIP", "address": "127.0.0.11"},
                {"$patch": "replace"}
            ]}})),
        )
        .await
        .expect("status patch");
    let addrs = status.status.and_then(|s| s.addresses).unwrap_or_default();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    // A status patch does not touch spec; a main-resource patch does not touch status.
    let spec_via_status = nodes
        .patch_status(
            "n1",
            &pp,
            &Patch::Merge(json!({"spec": {"podCIDR": "10.0.0.0/24"}})),
        )
        .await
        .expect("status patch");
    assert!(spec_via_status.spec.and_then(|s| s.pod_cidr).is_none());

    // delete with a finalizer left: marked, then removing the finalizer deletes it.
    let del = nodes
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = del
        .left()
        .expect("object returned while finalizers are pending");
    assert!(marked.metadata.deletion_timestamp.is_some());
    nodes
        .patch(
            "n1",
            &pp,
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("drop finalizers");
    assert!(nodes.get_opt("n1").await.expect("get_opt").is_none());

    let list = nodes.list(&ListParams::default()).await.expect("list");
    assert!(list.items.is_empty());
    assert!(list.metadata.resource_version.is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn lease_crud() {
    let (server, client) = start(Config::default()).await;
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}
    }))
    .expect("lease");
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create");
    let mut renewed = created.clone();
    if let Some(spec) = renewed.spec.as_mut() {
        spec.lease_duration_seconds = Some(41);
    }
    let replaced = leases
        .replace("n1", &PostParams::default(), &renewed)
        .await
        .expect("replace");
    assert_eq!(
        replaced
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds),
        Some(41)
    );
    let err = leases
        .replace("n1", &PostParams::default(), &renewed)
        .await
        .expect_err("stale");
    assert_eq!(api_status(&err), 409);
    let mut unconditional = replaced.clone();
    unconditional.metadata.resource_version = None;
    let err = leases
        .replace("n1", &PostParams::default(), &unconditional)
        .await
        .expect_err("rv required");
    assert_eq!(api_status(&err), 422);
    let patched = leases
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}})),
        )
        .await
        .expect("strategic");
    assert!(patched.spec.and_then(|s| s.renew_time).is_some());
    let gone = leases
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(gone.right().is_some(), "immediate delete returns a Status");
    server.shutdown().await;
}

async fn next_event<S>(stream: &mut S) -> watcher::Event<Node>
where
    S: futures::Stream<Item = Result<watcher::Event<Node>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("event before deadline")
        .expect("stream open")
        .expect("no watcher error")
}

#[tokio::test]
async fn watcher_sees_added_modified_deleted() {
    let (server, client) = start(Config::default()).await;
    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(&PostParams::default(), &node("pre"))
        .await
        .expect("create");
    let mut stream = watcher(nodes.clone(), watcher::Config::default()).boxed();
    // Initial list: Init, InitApply(pre), InitDone.
    let mut seen_pre = false;
    loop {
        match next_event(&mut stream).await {
            watcher::Event::InitApply(n) => seen_pre |= n.name_any() == "pre",
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert!(seen_pre);
    nodes
        .create(&PostParams::default(), &node("w1"))
        .await
        .expect("create");
    nodes
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("patch");
    nodes
        .delete("w1", &DeleteParams::default())
        .await
        .expect("delete");
    let mut applied = 0;
    loop {
        match next_event(&mut stream).await {
            watcher::Event::Apply(n) if n.name_any() == "w1" => applied += 1,
            watcher::Event::Delete(n) if n.name_any() == "w1" => break,
            _ => {}
        }
    }
    assert_eq!(applied, 2, "ADDED and MODIFIED");
    server.shutdown().await;
}

#[tokio::test]
async fn expired_watch_is_410_in_stream_and_watcher_relists() {
    let config = Config {
        watch_history: 5,
        ..Config::default()
    };
    let (server, client) = start(config).await;
    let nodes: Api<Node> = Api::all(client);
    for i in 0..10 {
        nodes
            .create(&PostParams::default(), &node(&format!("e{i}")))
            .await
            .expect("create");
    }
    // A raw watch from revision 1 gets an ERROR event with code 410.
    let mut raw = nodes
        .watch(&WatchParams::default().timeout(5), "1")
        .await
        .expect("watch opens with 200")
        .boxed();
    let first = tokio::time::timeout(DEADLINE, raw.try_next())
        .await
        .expect("deadline")
        .expect("ok")
        .expect("event");
    match first {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected ERROR 410, got {other:?}"),
    }

    // A watcher whose selector matches nothing never advances its resourceVersion; with
    // a 1s watch timeout it re-watches from an RV that writes have pushed out of history,
    // gets the in-stream 410, and relists (a second Init).
    let cfg = watcher::Config::default().labels("app=none").timeout(1);
    let mut stream = watcher(nodes.clone(), cfg).boxed();
    let mut inits = 0;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while inits < 2 {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("relist before deadline")
            .expect("open");
        match ev {
            Ok(watcher::Event::Init) => inits += 1,
            // The first list is done and the watch is about to start from its RV.
            Ok(watcher::Event::InitDone) if inits == 1 => {
                for i in 0..10 {
                    nodes
                        .create(&PostParams::default(), &node(&format!("f{i}")))
                        .await
                        .expect("create");
                }
            }
            _ => {}
        }
    }
    let expired_watches = server
        .audit()
        .iter()
        .filter(|e| e.verb == "watch" && e.query.contains("labelSelector=app%3Dnone"))
        .count();
    assert!(expired_watches >= 1);
    server.shutdown().await;
}

#[tokio::test]
async fn controller_reconciles_every_node() {
    let (server, client) = start(Config::default()).await;
    let nodes: Api<Node> = Api::all(client);
    for name in ["c1", "c2", "c3"] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("create");
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let ctx = Arc::new(tx);
    let controller = Controller::new(nodes.clone(), watcher::Config::default())
        .run(
            |n: Arc<Node>, ctx: Arc<tokio::sync::mpsc::UnboundedSender<String>>| async move {
                let _ = ctx.send(n.name_any());
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            ctx,
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    let mut seen = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while seen.len() < 3 {
        let name = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("reconciled before deadline")
            .expect("open");
        seen.insert(name);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["c1", "c2", "c3"]);
    task.abort();
    server.shutdown().await;
}

#[tokio::test]
async fn await_condition_with_name_selector() {
    let (server, client) = start(Config::default()).await;
    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(&PostParams::default(), &node("a1"))
        .await
        .expect("create");
    nodes
        .create(&PostParams::default(), &node("other"))
        .await
        .expect("create");
    let waiter = tokio::spawn(await_condition(nodes.clone(), "a1", |n: Option<&Node>| {
        n.is_some_and(|n| n.labels().get("ready").is_some_and(|v| v == "true"))
    }));
    nodes
        .patch(
            "other",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"ready": "true"}}})),
        )
        .await
        .expect("patch other");
    nodes
        .patch(
            "a1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"ready": "true"}}})),
        )
        .await
        .expect("patch a1");
    let got = tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("deadline")
        .expect("join")
        .expect("condition");
    assert_eq!(got.map(|n| n.name_any()).as_deref(), Some("a1"));
    assert!(
        server
            .audit()
            .iter()
            .any(|e| e.verb == "watch" && e.query.contains("fieldSelector=metadata.name%3Da1")),
        "await_condition watched with a name field selector"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_end() {
    let (server, client) = start(Config::default()).await;
    let nodes: Api<Node> = Api::all(client);
    for name in ["s1", "s2"] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("create");
    }
    let mut stream = watcher(nodes.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = BTreeSet::new();
    loop {
        match next_event(&mut stream).await {
            watcher::Event::InitApply(n) => {
                initial.insert(n.name_any());
            }
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial.into_iter().collect::<Vec<_>>(), ["s1", "s2"]);
    nodes
        .create(&PostParams::default(), &node("s3"))
        .await
        .expect("create");
    loop {
        if let watcher::Event::Apply(n) = next_event(&mut stream).await {
            assert_eq!(n.name_any(), "s3");
            break;
        }
    }
    assert!(
        server
            .audit()
            .iter()
            .any(|e| e.verb == "watch" && e.query.contains("sendInitialEvents=true"))
    );
    assert!(
        !server.audit().iter().any(|e| e.verb == "list"),
        "no LIST in streaming mode"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn event_recorder_and_metadata_api() {
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let (server, client) = start(Config::default()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let n = nodes
        .create(&PostParams::default(), &node("ev1"))
        .await
        .expect("create");
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "test-ccm".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("node synced".into()),
        action: "Sync".into(),
        secondary: None,
    };
    let reference = n.object_ref(&());
    // Twice: the second publish updates the series with a merge patch.
    recorder
        .publish(&event, &reference)
        .await
        .expect("first publish");
    recorder
        .publish(&event, &reference)
        .await
        .expect("second publish");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let list = events
        .list(&ListParams::default())
        .await
        .expect("list events");
    assert_eq!(list.items.len(), 1, "one event with a series");
    assert!(list.items[0].series.is_some());

    // PartialObjectMetadata requests are answered with full objects, which decode.
    let meta = nodes
        .list_metadata(&ListParams::default())
        .await
        .expect("list_metadata");
    assert_eq!(meta.items.len(), 1);
    assert_eq!(meta.items[0].metadata.name.as_deref(), Some("ev1"));
    server.shutdown().await;
}

#[tokio::test]
async fn bookmarks_decode_in_kube_core() {
    let config = Config {
        bookmark_interval: Duration::from_millis(100),
        ..Config::default()
    };
    let (server, client) = start(config).await;
    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(&PostParams::default(), &node("b1"))
        .await
        .expect("create");
    let list = nodes.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.expect("list rv");
    let mut stream = nodes
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default().timeout(10)
            },
            &rv,
        )
        .await
        .expect("watch")
        .boxed();
    nodes
        .create(&PostParams::default(), &node("b2"))
        .await
        .expect("create");
    let mut added = false;
    loop {
        let ev = tokio::time::timeout(DEADLINE, stream.try_next())
            .await
            .expect("event before deadline")
            .expect("decodes")
            .expect("open");
        match ev {
            WatchEvent::Added(n) => added |= n.name_any() == "b2",
            WatchEvent::Bookmark(b) => {
                assert!(added, "the bookmark never overtakes the ADDED event");
                let bookmark_rv: u64 = b.metadata.resource_version.parse().expect("numeric rv");
                assert!(bookmark_rv > rv.parse::<u64>().expect("numeric"));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn aggregated_discovery_with_kube_rs() {
    let (server, client) = start(Config::default()).await;
    let discovery = kube::Discovery::new(client)
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let (nodes, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "Node"))
        .expect("nodes discovered");
    assert_eq!(nodes.plural, "nodes");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "nodes/status" || r.plural == "status")
    );
    let (leases, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "coordination.k8s.io",
            "v1",
            "Lease",
        ))
        .expect("leases discovered");
    assert_eq!(leases.plural, "leases");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    // One request each to /api and /apis, no per-group fallback.
    let discovery_paths: Vec<String> = server
        .audit()
        .into_iter()
        .map(|e| e.path)
        .filter(|p| p.starts_with("/api"))
        .collect();
    assert_eq!(discovery_paths, ["/apis", "/api"]);
    server.shutdown().await;
}
