//! Events expire, as in kube-apiserver: `--event-ttl` (default 1 h) after their last write
//! they are gone. Upstream attaches an etcd lease of that length to every Event write
//! (apiserver `pkg/registry/core/event/storage` sets `TTLFunc`); here a sweep deletes
//! the Events whose last write — the newest `managedFields` time, or the creation time —
//! is older than the TTL. Watchers see an ordinary DELETED event, as they do when etcd's
//! lease expires.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::resources::{self, ResourceDesc};
use crate::store::{DeleteOptions, Filter, Store};

/// Sweeps `store` every tenth of `ttl` (at most a minute) until `shutdown` flips.
pub async fn expire(store: Store, ttl: Duration, mut shutdown: watch::Receiver<bool>) {
    if ttl.is_zero() {
        return;
    }
    let period = (ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        sweep(&store, ttl, jiff::Timestamp::now());
    }
}

/// Deletes the Events last written more than `ttl` before `now`; returns how many.
pub fn sweep(store: &Store, ttl: Duration, now: jiff::Timestamp) -> usize {
    let Ok(ttl) = jiff::SignedDuration::try_from(ttl) else {
        return 0;
    };
    let mut expired = 0;
    for desc in event_resources() {
        let Ok(page) = store.list(desc, &Filter::default(), None, None) else {
            continue;
        };
        for item in page.items {
            let obj = item.value();
            let Some(written) = last_write(obj) else {
                continue;
            };
            if now.duration_since(written) < ttl {
                continue;
            }
            let meta = &obj["metadata"];
            let (Some(ns), Some(name)) = (meta["namespace"].as_str(), meta["name"].as_str()) else {
                continue;
            };
            let opts = DeleteOptions {
                // Only the version that expired: a write since then keeps the Event.
                precondition_resource_version: meta["resourceVersion"].as_str().map(String::from),
                ..DeleteOptions::default()
            };
            if store.delete(desc, Some(ns), name, &opts).is_ok() {
                expired += 1;
            }
        }
    }
    expired
}

/// Both Event APIs' storage (core/v1 and events.k8s.io/v1), each once.
fn event_resources() -> Vec<&'static ResourceDesc> {
    let mut out: Vec<&'static ResourceDesc> = Vec::new();
    for desc in [
        resources::lookup("", "v1", "events"),
        resources::lookup("events.k8s.io", "v1", "events"),
    ]
    .into_iter()
    .flatten()
    {
        if !out.iter().any(|d| d.key() == desc.key()) {
            out.push(desc);
        }
    }
    out
}

/// The newest of `metadata.creationTimestamp` and every `managedFields[].time`.
fn last_write(obj: &Value) -> Option<jiff::Timestamp> {
    let meta = &obj["metadata"];
    let created = meta["creationTimestamp"].as_str();
    let managed = meta["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["time"].as_str());
    created
        .into_iter()
        .chain(managed)
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_write_is_the_newest_managed_fields_time() {
        let obj = json!({"metadata": {
            "creationTimestamp": "2026-11-27T06:00:00Z",
            "managedFields": [{"time": "2026-11-27T06:30:00Z"}, {"time": "2026-11-27T06:10:00Z"}]
        }});
        assert_eq!(
            last_write(&obj),
            Some("2026-11-27T06:30:00Z".parse().unwrap())
        );
        let bare = json!({"metadata": {"creationTimestamp": "2026-11-27T06:00:00Z"}});
        assert_eq!(
            last_write(&bare),
            Some("2026-11-27T06:00:00Z".parse().unwrap())
        );
        assert_eq!(last_write(&json!({"metadata": {}})), None);
    }
}
