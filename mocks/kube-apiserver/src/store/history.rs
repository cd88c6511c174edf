//! Watch bookkeeping: registering watchers, and making each write happen: stamped with
//! its revision, stored, kept in the bounded history, broadcast to live watchers and
//! appended to the journal of a persisted store.
//!
//! Why this exists: a watch from a resourceVersion replays the history after it and then
//! follows live events without a gap or a repeat, which holds because writes are
//! recorded, and watchers subscribe, under the store's lock.

use std::sync::Arc;

use serde_json::{Value, json};

use super::state::{Inner, ObjectKey, Store};
use super::types::{EventKind, Filter, StoreEvent, Stored, Subscription, WatchFrom};
use crate::error::ApiError;
use crate::meta::{meta_str, set_meta};
use crate::resources::ResourceDesc;

impl Store {
    /// A copy of the retained event history (oldest first).
    pub fn history(&self) -> Vec<Arc<StoreEvent>> {
        self.lock().history.iter().cloned().collect()
    }

    /// Register a watcher. `Err(Expired)` when `from` is older than the history.
    pub fn watch(
        &self,
        desc: &'static ResourceDesc,
        filter: &Filter,
        from: WatchFrom,
    ) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let live = self.tx.subscribe();
        let mut sub = Subscription {
            initial: Vec::new(),
            replay: Vec::new(),
            revision: inner.revision,
            live,
        };
        match from {
            WatchFrom::Now { initial: false } => {}
            WatchFrom::Now { initial: true } => {
                if let Some(objects) = inner.objects.get(&desc.key()) {
                    sub.initial = objects
                        .values()
                        .filter(|o| filter.matches(desc, o))
                        .cloned()
                        .collect();
                }
            }
            WatchFrom::After(rv) => {
                if rv < inner.floor {
                    return Err(ApiError::Expired(format!(
                        "too old resource version: {rv} ({})",
                        inner.floor + 1
                    )));
                }
                sub.replay = inner
                    .history
                    .iter()
                    .filter(|e| e.revision > rv)
                    .cloned()
                    .collect();
            }
        }
        Ok(sub)
    }

    /// Make a write of `kind` on `key` happen: `object` stamped with the next revision,
    /// stored under `key` (for a delete, the key removed) and recorded ([`Self::commit`]).
    /// Called with the lock held; returns the stored object.
    pub(super) fn write_object(
        &self,
        inner: &mut Inner,
        kind: EventKind,
        desc: &'static ResourceDesc,
        key: ObjectKey,
        mut object: Value,
        prev: Option<Arc<Stored>>,
    ) -> Arc<Stored> {
        let revision = inner.revision + 1;
        set_meta(
            &mut object,
            "resourceVersion",
            Some(json!(revision.to_string())),
        );
        let object = Arc::new(Stored::new(object));
        match kind {
            EventKind::Deleted => {
                if let Some(map) = inner.objects.get_mut(&desc.key()) {
                    map.remove(&key);
                }
            }
            EventKind::Added | EventKind::Modified => {
                inner
                    .objects
                    .entry(desc.key())
                    .or_default()
                    .insert(key.clone(), object.clone());
            }
        }
        self.commit(inner, kind, desc, key.0, object.clone(), prev);
        object
    }

    /// Record a write: bump the revision, append to history, broadcast. Called with
    /// the lock held; the object already carries the new revision.
    fn commit(
        &self,
        inner: &mut Inner,
        kind: EventKind,
        resource: &'static ResourceDesc,
        namespace: String,
        object: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        inner.revision += 1;
        if let Some(journal) = inner.journal.as_mut() {
            let name = meta_str(&object, "name").unwrap_or("");
            let stored = (kind != EventKind::Deleted).then_some(object.value());
            if let Err(err) = journal.append(inner.revision, resource, &namespace, name, stored) {
                tracing::error!(%err, "persisting a write failed; it is served but not kept");
            }
        }
        let event = Arc::new(StoreEvent {
            revision: inner.revision,
            kind,
            resource,
            namespace,
            object,
            prev,
            lines: Default::default(),
        });
        inner.history.push_back(event.clone());
        while inner.history.len() > inner.history_cap {
            if let Some(evicted) = inner.history.pop_front() {
                inner.floor = evicted.revision;
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(event);
    }
}
