//! Watch streams: store events turned into the NDJSON lines clients read.
//!
//! The rules follow the real server's watch cache (apiserver
//! pkg/storage/cacher/cache_watcher.go): a filtered watch turns "starts matching"
//! into ADDED and "stops matching" into DELETED (with the previous object and the
//! event's resourceVersion); a too-old resourceVersion is an in-stream ERROR 410
//! inside an HTTP 200 (kube-runtime relists only on that); bookmarks are sent only
//! when asked for and carry apiVersion, kind and only `metadata.resourceVersion`.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::error::ApiError;
use crate::meta::set_meta;
use crate::resources::ResourceDesc;
use crate::store::{EventKind, Filter, Store, StoreEvent, WatchFrom};
use crate::table::{self, TableOptions};

/// Annotation on the bookmark that ends the initial events of a watch-list
/// (apimachinery pkg/apis/meta/v1 `InitialEventsAnnotationKey`).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How one watch request behaves.
#[derive(Debug, Clone, Copy)]
pub struct WatchParams {
    pub from: WatchFrom,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true` with bookmarks: end the initial ADDEDs with an
    /// annotated bookmark.
    pub initial_events_end: bool,
    /// `timeoutSeconds`.
    pub timeout: Duration,
    /// Period between bookmarks.
    pub bookmark_interval: Duration,
    /// Send each event's object as a one-row Table (`kubectl get -w`).
    pub table: Option<TableOptions>,
}

/// One NDJSON line, `{"type":…,"object":…}` as upstream writes it. Serialized straight
/// from the borrowed object; a store event's lines are then shared ([`shared_line`]).
pub fn line(kind: &str, object: &Value) -> Bytes {
    let mut buf = Vec::with_capacity(512);
    buf.extend_from_slice(b"{\"type\":");
    // Writing JSON into a Vec cannot fail (no I/O, string keys only).
    let _ = serde_json::to_writer(&mut buf, kind);
    buf.extend_from_slice(b",\"object\":");
    let _ = serde_json::to_writer(&mut buf, object);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

fn bookmark(desc: &ResourceDesc, revision: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": desc.kind, "apiVersion": desc.api_version(), "metadata": metadata}),
    )
}

/// How a watcher sees an event: which depends on its filter, not on the event alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// The object matches now and did not before (or is new).
    Added = 0,
    /// It matched before and still does.
    Modified = 1,
    /// It matched before and no longer does, or was deleted: the previous object.
    Deleted = 2,
}

impl Seen {
    fn as_str(self) -> &'static str {
        match self {
            Seen::Added => "ADDED",
            Seen::Modified => "MODIFIED",
            Seen::Deleted => "DELETED",
        }
    }
}

/// How a watcher with `filter` on `desc` sees `ev`, if at all.
pub fn seen(ev: &StoreEvent, desc: &ResourceDesc, filter: &Filter) -> Option<Seen> {
    if !std::ptr::eq(ev.resource, desc) {
        return None;
    }
    let cur = ev.kind != EventKind::Deleted && filter.matches(desc, &ev.object);
    let old = ev.prev.as_ref().is_some_and(|p| filter.matches(desc, p));
    match (cur, old) {
        (true, false) => Some(Seen::Added),
        (true, true) => Some(Seen::Modified),
        (false, true) => Some(Seen::Deleted),
        (false, false) => None,
    }
}

/// The object a watcher that sees `ev` as `seen` is sent. Borrowed from the event unless
/// it had to change (DELETED: the previous object with the event's resourceVersion).
fn object_of(ev: &StoreEvent, seen: Seen) -> Cow<'_, Value> {
    match seen {
        Seen::Added | Seen::Modified => Cow::Borrowed(ev.object.value()),
        Seen::Deleted => {
            let mut prev = ev
                .prev
                .as_deref()
                .map(|p| p.value().clone())
                .unwrap_or_default();
            set_meta(
                &mut prev,
                "resourceVersion",
                Some(json!(ev.revision.to_string())),
            );
            Cow::Owned(prev)
        }
    }
}

/// What a watcher with `filter` on `desc` should see for `ev`, if anything.
/// The object is borrowed from the event unless it had to change (DELETED).
pub fn convert<'a>(
    ev: &'a StoreEvent,
    desc: &ResourceDesc,
    filter: &Filter,
) -> Option<(&'static str, Cow<'a, Value>)> {
    let seen = seen(ev, desc, filter)?;
    Some((seen.as_str(), object_of(ev, seen)))
}

/// The JSON line of `ev` seen as `seen`: encoded once per event and type by the first
/// watcher that sends it, a shared (reference-counted) `Bytes` for every other one.
pub fn shared_line(ev: &StoreEvent, seen: Seen) -> Bytes {
    ev.lines[seen as usize]
        .get_or_init(|| line(seen.as_str(), &object_of(ev, seen)))
        .clone()
}

enum Step {
    End,
    Bookmark,
    Live(Result<Arc<StoreEvent>, RecvError>),
}

/// The body of a watch response. Ends at the timeout, on shutdown, or after an
/// in-stream ERROR.
pub fn stream(
    store: Store,
    desc: &'static ResourceDesc,
    filter: Filter,
    params: WatchParams,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    async_stream::stream! {
        let sub = match store.watch(desc, &filter, params.from) {
            Ok(sub) => sub,
            Err(err) => {
                yield Ok(line("ERROR", &err.to_status()));
                return;
            }
        };
        let mut last = match params.from {
            WatchFrom::After(rv) => rv,
            WatchFrom::Now { .. } => sub.revision,
        };
        let mut encoder = ObjectEncoder { desc, table: params.table };
        for obj in &sub.initial {
            yield Ok(encoder.line("ADDED", obj));
        }
        for ev in &sub.replay {
            if let Some(line) = encoder.event(ev, &filter) {
                yield Ok(line);
            }
            last = last.max(ev.revision);
        }
        if params.initial_events_end {
            yield Ok(bookmark(desc, sub.revision, true));
        }
        let mut live = sub.live;
        let deadline = tokio::time::sleep(params.timeout);
        tokio::pin!(deadline);
        let period = params.bookmark_interval.max(Duration::from_millis(10));
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        if *shutdown.borrow() {
            return;
        }
        loop {
            let step = tokio::select! {
                _ = &mut deadline => Step::End,
                _ = shutdown.changed() => Step::End,
                _ = ticker.tick(), if params.bookmarks => Step::Bookmark,
                r = live.recv() => Step::Live(r),
            };
            match step {
                Step::End => break,
                Step::Live(Ok(ev)) => {
                    if ev.revision > last {
                        last = ev.revision;
                        if let Some(line) = encoder.event(&ev, &filter) {
                            yield Ok(line);
                        }
                    }
                }
                Step::Live(Err(RecvError::Lagged(_))) => {
                    yield Ok(line("ERROR", &too_slow(last).to_status()));
                    break;
                }
                Step::Live(Err(RecvError::Closed)) => break,
                Step::Bookmark => {
                    // Every event up to `revision` is already in the channel (writes
                    // broadcast under the store lock), so drain first: a bookmark must
                    // never overtake an event.
                    let revision = store.revision();
                    let mut failed = false;
                    loop {
                        match live.try_recv() {
                            Ok(ev) => {
                                if ev.revision > last {
                                    last = ev.revision;
                                    if let Some(line) = encoder.event(&ev, &filter) {
                                        yield Ok(line);
                                    }
                                }
                            }
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Lagged(_)) => {
                                failed = true;
                                break;
                            }
                            Err(TryRecvError::Closed) => return,
                        }
                    }
                    if failed {
                        yield Ok(line("ERROR", &too_slow(last).to_status()));
                        break;
                    }
                    last = last.max(revision);
                    yield Ok(bookmark(desc, last, false));
                }
            }
        }
    }
}

/// Turns event objects into lines, as Tables when the watch asked for them: only
/// the first Table carries column definitions (apiserver
/// pkg/endpoints/handlers/watch.go sets `NoHeaders` after the first event).
struct ObjectEncoder {
    desc: &'static ResourceDesc,
    table: Option<TableOptions>,
}

impl ObjectEncoder {
    /// The line for a store event, if this watcher sees it: JSON lines are shared between
    /// watchers ([`shared_line`]); a Table is this watcher's own (its options, and column
    /// definitions only in its first one).
    fn event(&mut self, ev: &StoreEvent, filter: &Filter) -> Option<Bytes> {
        let seen = seen(ev, self.desc, filter)?;
        Some(match self.table {
            None => shared_line(ev, seen),
            Some(_) => self.line(seen.as_str(), &object_of(ev, seen)),
        })
    }

    fn line(&mut self, kind: &str, obj: &Value) -> Bytes {
        let Some(opts) = self.table.as_mut() else {
            return line(kind, obj);
        };
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let t = table::table(self.desc, &[obj], json!({"resourceVersion": rv}), opts);
        opts.no_headers = true;
        line(kind, &t)
    }
}

fn too_slow(last: u64) -> ApiError {
    ApiError::Expired(format!(
        "too old resource version: {last}: the watcher fell too far behind"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use crate::selector::LabelSelector;
    use crate::store::WriteOptions;
    use crate::strategy::Subresource;
    use futures::StreamExt;

    fn params(from: WatchFrom) -> WatchParams {
        WatchParams {
            from,
            bookmarks: false,
            initial_events_end: false,
            timeout: Duration::from_secs(5),
            bookmark_interval: Duration::from_secs(60),
            table: None,
        }
    }

    async fn next_line<S: Stream<Item = Result<Bytes, Infallible>> + Unpin>(s: &mut S) -> Value {
        let item = tokio::time::timeout(Duration::from_secs(5), s.next())
            .await
            .expect("event before deadline")
            .expect("stream open");
        let Ok(bytes) = item;
        serde_json::from_slice(&bytes).expect("json line")
    }

    #[tokio::test]
    async fn label_selector_enter_and_leave() {
        let store = Store::new(100);
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let filter = Filter {
            labels: Some(LabelSelector::parse("role=a").expect("selector")),
            ..Filter::default()
        };
        let mut s = Box::pin(stream(
            store.clone(),
            nodes,
            filter,
            params(WatchFrom::Now { initial: true }),
            rx,
        ));
        let created = store
            .create(
                nodes,
                None,
                json!({"metadata": {"name": "n"}}),
                WriteOptions::default(),
            )
            .expect("create");
        let mut labelled = created.clone();
        labelled["metadata"]["labels"] = json!({"role": "a"});
        let labelled = store
            .update(
                nodes,
                None,
                "n",
                Subresource::Main,
                labelled,
                WriteOptions::default(),
            )
            .expect("label");
        let ev = next_line(&mut s).await;
        assert_eq!(ev["type"], "ADDED");
        let mut unlabelled = labelled.clone();
        unlabelled["metadata"]["labels"] = json!({});
        let unlabelled = store
            .update(
                nodes,
                None,
                "n",
                Subresource::Main,
                unlabelled,
                WriteOptions::default(),
            )
            .expect("unlabel");
        let ev = next_line(&mut s).await;
        assert_eq!(ev["type"], "DELETED");
        assert_eq!(
            ev["object"]["metadata"]["resourceVersion"],
            unlabelled["metadata"]["resourceVersion"]
        );
        assert_eq!(ev["object"]["metadata"]["labels"]["role"], "a");
    }

    #[test]
    fn watchers_share_an_event_line_per_type() {
        let store = Store::new(100);
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let created = store
            .create(
                nodes,
                None,
                json!({"metadata": {"name": "n", "labels": {"role": "a"}}}),
                WriteOptions::default(),
            )
            .expect("create");
        let mut unlabelled = created.clone();
        unlabelled["metadata"]["labels"] = json!({});
        store
            .update(
                nodes,
                None,
                "n",
                Subresource::Main,
                unlabelled,
                WriteOptions::default(),
            )
            .expect("unlabel");
        let history = store.history();
        let ev = history.last().expect("the update");
        let everything = Filter::default();
        let role_a = Filter {
            labels: Some(LabelSelector::parse("role=a").expect("selector")),
            ..Filter::default()
        };
        // One event, two types of line: MODIFIED for one watcher, DELETED for the other.
        assert_eq!(seen(ev, nodes, &everything), Some(Seen::Modified));
        assert_eq!(seen(ev, nodes, &role_a), Some(Seen::Deleted));
        let first = shared_line(ev, Seen::Modified);
        let second = shared_line(ev, Seen::Modified);
        assert_eq!(first.as_ptr(), second.as_ptr(), "encoded once, shared");
        let deleted: Value = serde_json::from_slice(&shared_line(ev, Seen::Deleted)).expect("json");
        assert_eq!(deleted["type"], "DELETED");
        assert_eq!(deleted["object"]["metadata"]["labels"]["role"], "a");
        assert_eq!(
            deleted["object"]["metadata"]["resourceVersion"],
            ev.revision.to_string()
        );
        let modified: Value = serde_json::from_slice(&first).expect("json");
        assert_eq!(modified["type"], "MODIFIED");
        assert_eq!(modified["object"]["kind"], "Node");
        assert_eq!(
            first,
            line("MODIFIED", ev.object.value()),
            "the same bytes a watcher would encode itself"
        );
    }

    #[tokio::test]
    async fn expired_resource_version_is_in_stream() {
        let store = Store::new(2);
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        for i in 0..4 {
            store
                .create(
                    nodes,
                    None,
                    json!({"metadata": {"name": format!("n{i}")}}),
                    WriteOptions::default(),
                )
                .expect("create");
        }
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let mut s = Box::pin(stream(
            store,
            nodes,
            Filter::default(),
            params(WatchFrom::After(1)),
            rx,
        ));
        let ev = next_line(&mut s).await;
        assert_eq!(ev["type"], "ERROR");
        assert_eq!(ev["object"]["code"], 410);
        assert_eq!(ev["object"]["reason"], "Expired");
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn bookmarks_follow_events() {
        let store = Store::new(100);
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let mut p = params(WatchFrom::Now { initial: true });
        p.bookmarks = true;
        p.initial_events_end = true;
        p.bookmark_interval = Duration::from_millis(50);
        store
            .create(
                nodes,
                None,
                json!({"metadata": {"name": "a"}}),
                WriteOptions::default(),
            )
            .expect("create");
        let mut s = Box::pin(stream(store.clone(), nodes, Filter::default(), p, rx));
        assert_eq!(next_line(&mut s).await["type"], "ADDED");
        let end = next_line(&mut s).await;
        assert_eq!(end["type"], "BOOKMARK");
        assert_eq!(
            end["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );
        assert_eq!(end["object"]["kind"], "Node");
        let b = next_line(&mut s).await;
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(
            b["object"]["metadata"]["resourceVersion"],
            store.revision().to_string()
        );
        assert!(b["object"]["metadata"].get("annotations").is_none());
    }

    #[tokio::test]
    async fn slow_watcher_gets_410_and_writers_do_not_block() {
        let store = Store::new(64);
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let mut s = Box::pin(stream(
            store.clone(),
            nodes,
            Filter::default(),
            params(WatchFrom::Now { initial: false }),
            rx,
        ));
        // Register the watcher (first poll subscribes, then waits for events).
        assert!(futures::poll!(s.next()).is_pending());
        // Far more writes than the channel holds; none of them may block.
        for i in 0..500 {
            store
                .create(
                    nodes,
                    None,
                    json!({"metadata": {"name": format!("n{i}")}}),
                    WriteOptions::default(),
                )
                .expect("create");
        }
        let ev = next_line(&mut s).await;
        assert_eq!(ev["type"], "ERROR", "{ev}");
        assert_eq!(ev["object"]["code"], 410);
        assert!(s.next().await.is_none(), "stream ends after the error");
    }
}
