//! Unit tests of the store: writes, revisions, finalizers, graceful deletion, paging,
//! watch history and reopening a persisted store.
//!
//! Why this exists: the tests are kept in a file of their own, beside the code, so that
//! the module they test stays short enough to read in one go.

use serde_json::{Value, json};

use super::delete::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::*;
use crate::error::ApiError;
use crate::resources::{self, ResourceDesc};
use crate::selector::LabelSelector;
use crate::strategy::Subresource;

fn nodes() -> &'static ResourceDesc {
    resources::lookup("", "v1", "nodes").expect("nodes")
}
fn leases() -> &'static ResourceDesc {
    resources::lookup("coordination.k8s.io", "v1", "leases").expect("leases")
}

#[test]
fn create_sets_system_fields_and_bumps_revision() {
    let store = Store::new(100);
    let start = store.revision();
    assert_eq!(start, DEFAULT_NAMESPACES.len() as u64);
    let n = store
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "n1", "uid": "mine"}}),
            WriteOptions::default(),
        )
        .expect("create");
    assert_eq!(n["kind"], "Node");
    assert_eq!(n["apiVersion"], "v1");
    assert_ne!(n["metadata"]["uid"], "mine");
    assert_eq!(n["metadata"]["resourceVersion"], (start + 1).to_string());
    let err = store.create(
        nodes(),
        None,
        json!({"metadata": {"name": "n1"}}),
        WriteOptions::default(),
    );
    assert!(matches!(err, Err(ApiError::AlreadyExists { .. })));
}

#[test]
fn a_reopened_store_continues_revisions_and_keeps_uids() {
    let dir = tempfile::tempdir().expect("dir");
    let first = Store::open(100, dir.path()).expect("open");
    let created = first
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "n1"}}),
            WriteOptions::default(),
        )
        .expect("create");
    let dry = first
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "dry"}}),
            WriteOptions {
                dry_run: true,
                ..WriteOptions::default()
            },
        )
        .expect("dry run");
    assert_eq!(dry["metadata"]["name"], "dry");
    let revision = first.revision();
    first.close_journal();
    first
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "after-close"}}),
            WriteOptions::default(),
        )
        .expect("memory only");

    let second = Store::open(100, dir.path()).expect("reopen");
    assert_eq!(second.revision(), revision);
    let n1 = second.get(nodes(), None, "n1").expect("n1");
    assert_eq!(n1, created);
    assert!(second.get(nodes(), None, "dry").is_err());
    assert!(second.get(nodes(), None, "after-close").is_err());
    let namespaces = resources::lookup("", "v1", "namespaces").expect("ns");
    let page = second
        .list(namespaces, &Filter::default(), None, None)
        .expect("list");
    assert_eq!(page.items.len(), DEFAULT_NAMESPACES.len());
    assert!(matches!(
        second.watch(nodes(), &Filter::default(), WatchFrom::After(revision - 1)),
        Err(ApiError::Expired(_))
    ));
    assert!(
        second
            .watch(nodes(), &Filter::default(), WatchFrom::After(revision))
            .is_ok()
    );
    let next = second
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "n2"}}),
            WriteOptions::default(),
        )
        .expect("create");
    assert_eq!(
        next["metadata"]["resourceVersion"],
        (revision + 1).to_string()
    );
}

#[test]
fn create_in_missing_namespace_is_not_found() {
    let store = Store::new(100);
    let err = store
        .create(
            leases(),
            Some("nope"),
            json!({"metadata": {"name": "l"}}),
            WriteOptions::default(),
        )
        .expect_err("missing ns");
    assert_eq!(err.to_string(), "namespaces \"nope\" not found");
}

#[test]
fn update_rules() {
    let store = Store::new(100);
    let created = store
        .create(
            leases(),
            Some("default"),
            json!({"metadata": {"name": "l"}, "spec": {}}),
            WriteOptions::default(),
        )
        .expect("create");
    // Lease needs an RV on PUT.
    let err = store
        .update(
            leases(),
            Some("default"),
            "l",
            Subresource::Main,
            json!({"metadata": {"name": "l"}}),
            WriteOptions::default(),
        )
        .expect_err("rv required");
    assert_eq!(err.code(), 422);
    // No-op keeps the RV.
    let same = store
        .update(
            leases(),
            Some("default"),
            "l",
            Subresource::Main,
            created.clone(),
            WriteOptions::default(),
        )
        .expect("noop");
    assert_eq!(
        same["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let mut changed = created.clone();
    changed["spec"]["holderIdentity"] = json!("me");
    let updated = store
        .update(
            leases(),
            Some("default"),
            "l",
            Subresource::Main,
            changed.clone(),
            WriteOptions::default(),
        )
        .expect("update");
    assert_ne!(
        updated["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let err = store
        .update(
            leases(),
            Some("default"),
            "l",
            Subresource::Main,
            changed,
            WriteOptions::default(),
        )
        .expect_err("stale");
    assert_eq!(err.code(), 409);
}

#[test]
fn finalizers_delay_delete() {
    let store = Store::new(100);
    store
        .create(
            nodes(),
            None,
            json!({"metadata": {"name": "n", "finalizers": ["a"]}}),
            WriteOptions::default(),
        )
        .expect("create");
    let out = store
        .delete(nodes(), None, "n", &DeleteOptions::default())
        .expect("delete");
    let DeleteOutcome::Pending(marked) = out else {
        panic!("expected pending")
    };
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let mut adding = marked.clone();
    adding["metadata"]["finalizers"] = json!(["a", "b"]);
    let err = store
        .update(
            nodes(),
            None,
            "n",
            Subresource::Main,
            adding,
            WriteOptions::default(),
        )
        .expect_err("no new finalizers");
    assert_eq!(err.code(), 422);
    let mut emptied = marked;
    emptied["metadata"]["finalizers"] = json!([]);
    store
        .update(
            nodes(),
            None,
            "n",
            Subresource::Main,
            emptied,
            WriteOptions::default(),
        )
        .expect("empty");
    assert!(store.get(nodes(), None, "n").is_err());
    let kinds: Vec<EventKind> = store
        .history()
        .iter()
        .rev()
        .take(3)
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        vec![EventKind::Deleted, EventKind::Modified, EventKind::Added]
    );
}

#[test]
fn propagation_policies_add_and_drop_the_collector_finalizers() {
    let store = Store::new(100);
    for name in ["fg", "or", "bg"] {
        store
            .create(
                nodes(),
                None,
                json!({"metadata": {"name": name}}),
                WriteOptions::default(),
            )
            .expect("create");
    }
    let policy = |p: &str| DeleteOptions {
        propagation_policy: Some(p.into()),
        ..DeleteOptions::default()
    };
    let DeleteOutcome::Pending(fg) = store
        .delete(nodes(), None, "fg", &policy("Foreground"))
        .expect("delete")
    else {
        panic!("a foreground delete waits for the collector")
    };
    assert_eq!(fg["metadata"]["finalizers"], json!([FOREGROUND_FINALIZER]));
    assert!(fg["metadata"]["deletionTimestamp"].is_string());
    let DeleteOutcome::Pending(or) = store
        .delete(nodes(), None, "or", &policy("Orphan"))
        .expect("delete")
    else {
        panic!("an orphaning delete waits for the collector")
    };
    assert_eq!(or["metadata"]["finalizers"], json!([ORPHAN_FINALIZER]));
    // Deleting again in the background drops the orphan finalizer, and with no
    // finalizer left the object goes (store.go `errDeleteNow`).
    assert!(matches!(
        store.delete(nodes(), None, "or", &policy("Background")),
        Ok(DeleteOutcome::Deleted(_))
    ));
    assert!(matches!(
        store.delete(nodes(), None, "bg", &policy("Background")),
        Ok(DeleteOutcome::Deleted(_))
    ));
    // Events are outside garbage collection: no finalizer, gone at once.
    let events = resources::lookup("", "v1", "events").expect("events");
    store
        .create(
            events,
            Some("default"),
            json!({"metadata": {"name": "e"}, "involvedObject": {}}),
            WriteOptions::default(),
        )
        .expect("create");
    assert!(matches!(
        store.delete(events, Some("default"), "e", &policy("Foreground")),
        Ok(DeleteOutcome::Deleted(_))
    ));
}

#[test]
fn pods_are_deleted_gracefully_when_scheduled() {
    let store = Store::new(100);
    let pods = resources::lookup("", "v1", "pods").expect("pods");
    for (name, node) in [("unscheduled", ""), ("running", "n1")] {
        store
            .create(
                pods,
                Some("default"),
                json!({"metadata": {"name": name}, "spec": {"nodeName": node,
                    "containers": [{"name": "c", "image": "i"}]}}),
                WriteOptions::default(),
            )
            .expect("create");
    }
    let none = DeleteOptions::default();
    // Not scheduled: no grace period, marked and gone at once; the answer shows the mark.
    let Ok(DeleteOutcome::Deleted(gone)) =
        store.delete(pods, Some("default"), "unscheduled", &none)
    else {
        panic!("an unscheduled pod goes at once")
    };
    assert!(gone["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(gone["metadata"]["deletionGracePeriodSeconds"], 0);
    let kinds: Vec<EventKind> = store
        .history()
        .iter()
        .rev()
        .take(2)
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, vec![EventKind::Deleted, EventKind::Modified]);
    // Scheduled: the pod's 30 s, then only shorter periods change anything.
    let Ok(DeleteOutcome::Pending(first)) = store.delete(pods, Some("default"), "running", &none)
    else {
        panic!("a running pod stays for its grace period")
    };
    assert_eq!(first["metadata"]["deletionGracePeriodSeconds"], 30);
    let ts = |v: &Value| {
        v["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .expect("timestamp")
    };
    let grace = |p: i64| DeleteOptions {
        grace_period_seconds: Some(p),
        ..DeleteOptions::default()
    };
    let Ok(DeleteOutcome::Pending(same)) =
        store.delete(pods, Some("default"), "running", &grace(60))
    else {
        panic!("pending")
    };
    assert_eq!(same, first);
    let Ok(DeleteOutcome::Pending(shorter)) =
        store.delete(pods, Some("default"), "running", &grace(10))
    else {
        panic!("pending")
    };
    assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 10);
    assert_eq!(ts(&first).as_second() - ts(&shorter).as_second(), 20);
    assert!(matches!(
        store.delete(pods, Some("default"), "running", &grace(0)),
        Ok(DeleteOutcome::Deleted(_))
    ));
    assert!(store.get(pods, Some("default"), "running").is_err());
}

#[test]
fn filtered_pages_continue_while_stored_keys_follow() {
    // kube-apiserver v1.37.2 answered the differential corpus's "paging with a label
    // selector, page 2" with a `continue` although no further object matched.
    let store = Store::new(100);
    for (name, app) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")] {
        store
            .create(
                nodes(),
                None,
                json!({"metadata": {"name": name, "labels": {"app": app}}}),
                WriteOptions::default(),
            )
            .expect("create");
    }
    let filter = Filter {
        labels: Some(LabelSelector::parse("app=x").expect("selector")),
        ..Filter::default()
    };
    let first = store.list(nodes(), &filter, Some(1), None).expect("page 1");
    assert_eq!(
        first.remaining, None,
        "no remainingItemCount with a selector"
    );
    let token = first.continue_token.expect("a continue after a");
    let second = store
        .list(nodes(), &filter, Some(1), Some(&token))
        .expect("page 2");
    let names: Vec<_> = second
        .items
        .iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("c")]);
    assert!(second.continue_token.is_some(), "d follows c in storage");
    let token = second.continue_token.expect("token");
    let third = store
        .list(nodes(), &filter, Some(1), Some(&token))
        .expect("page 3");
    assert!(third.items.is_empty());
    assert!(third.continue_token.is_none());
    // A page that is not full never continues.
    let all = store.list(nodes(), &filter, Some(5), None).expect("all");
    assert_eq!(all.items.len(), 2);
    assert!(all.continue_token.is_none());
}

#[test]
fn list_pages_and_history_expiry() {
    let store = Store::new(3);
    for i in 0..5 {
        store
            .create(
                nodes(),
                None,
                json!({"metadata": {"name": format!("n{i}")}}),
                WriteOptions::default(),
            )
            .expect("create");
    }
    let first = store
        .list(nodes(), &Filter::default(), Some(2), None)
        .expect("page 1");
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.remaining, Some(3));
    let token = first.continue_token.clone().expect("token");
    let second = store.list(nodes(), &Filter::default(), Some(10), Some(&token));
    // The first page's revision is already beyond the history floor? It is the newest
    // revision, so it is still valid.
    let second = second.expect("page 2");
    assert_eq!(second.items.len(), 3);
    assert!(second.continue_token.is_none());
    assert_eq!(second.revision, first.revision);
    assert!(matches!(
        store.watch(nodes(), &Filter::default(), WatchFrom::After(1)),
        Err(ApiError::Expired(_))
    ));
    let sub = store
        .watch(
            nodes(),
            &Filter::default(),
            WatchFrom::After(store.revision() - 2),
        )
        .expect("recent");
    assert_eq!(sub.replay.len(), 2);
}
