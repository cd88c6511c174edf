//! `Config.event_ttl` (kube-apiserver `--event-ttl`): an Event goes that long after its
//! last write, a write in between keeps it, and nothing else expires.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, Patch, PatchParams, PostParams};
use mock_kube_apiserver::{ApiServer, Config};

use crate::persistence::client;
use serde_json::json;

fn event(name: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "Test", "message": "m", "type": "Normal", "count": 1
    }))
    .expect("event")
}

#[tokio::test]
async fn events_expire_after_their_last_write_and_nothing_else_does() {
    let server = ApiServer::start(Config {
        event_ttl: Duration::from_secs(2),
        ..Config::default()
    })
    .await
    .expect("start");
    let c = client(&server).await;
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(c, "default");
    events
        .create(&PostParams::default(), &event("old"))
        .await
        .expect("old");
    events
        .create(&PostParams::default(), &event("kept"))
        .await
        .expect("kept");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "stays"}})).unwrap();
    maps.create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    // Keep writing "kept" (as a recorder bumps `count`) while "old" ages out.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut count = 1;
    loop {
        assert!(Instant::now() < deadline, "\"old\" never expired");
        count += 1;
        events
            .patch(
                "kept",
                &PatchParams::default(),
                &Patch::Merge(json!({"count": count})),
            )
            .await
            .expect("bump kept");
        if events.get_opt("old").await.expect("get old").is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(events.get_opt("kept").await.expect("get kept").is_some());
    assert!(maps.get_opt("stays").await.expect("get cm").is_some());
    // Left alone, "kept" goes too.
    let deadline = Instant::now() + Duration::from_secs(20);
    while events.get_opt("kept").await.expect("get kept").is_some() {
        assert!(
            Instant::now() < deadline,
            "\"kept\" never expired once left alone"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
