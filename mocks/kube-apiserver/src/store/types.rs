//! The values the store takes and hands out: stored objects, write and delete options,
//! watch events, list filters and pages.
//!
//! Why this exists: these are the store's vocabulary, shared by the HTTP layer, the watch
//! layer and every part of the store, and hold no store state themselves.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::meta::{labels, meta_str};
use crate::resources::ResourceDesc;
use crate::selector::{FieldSelector, LabelSelector};

/// A stored object, shared by the store's map, LIST pages, watch events and history.
///
/// Besides the object it keeps the object's JSON as an item of a list, encoded by the
/// first LIST that sends it and reused by every later one until the object changes (a
/// write stores a new `Stored`): encoding thousands of objects for each LIST was most
/// of its time. The cache costs about the object's JSON size in memory, only for
/// objects that were listed.
#[derive(Debug)]
pub struct Stored {
    value: Value,
    list_item_json: OnceLock<Bytes>,
}

impl Stored {
    pub fn new(value: Value) -> Stored {
        Stored {
            value,
            list_item_json: OnceLock::new(),
        }
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The object as an item of a JSON list: without `apiVersion` and `kind`, as
    /// kube-apiserver writes the items of a built-in type's list (their `TypeMeta` is
    /// empty, and Go's encoder omits it).
    pub fn list_item_json(&self) -> &Bytes {
        self.list_item_json.get_or_init(|| {
            let mut buf = Vec::with_capacity(1024);
            // Writing JSON into a Vec cannot fail (no I/O, string keys only).
            let _ = serde_json::to_writer(&mut buf, &ListItem(&self.value));
            Bytes::from(buf)
        })
    }
}

impl std::ops::Deref for Stored {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

/// An object serialized as a list item: its top-level `apiVersion` and `kind` left out.
pub struct ListItem<'a>(pub &'a Value);

impl ListItem<'_> {
    fn is_type_meta(key: &str) -> bool {
        key == "kind" || key == "apiVersion"
    }
}

impl serde::Serialize for ListItem<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(map) = self.0 else {
            return self.0.serialize(serializer);
        };
        let len = map.keys().filter(|k| !Self::is_type_meta(k)).count();
        let mut out = serializer.serialize_map(Some(len))?;
        for (key, value) in map {
            if !Self::is_type_meta(key) {
                out.serialize_entry(key, value)?;
            }
        }
        out.end()
    }
}

/// Watch event types the store produces (BOOKMARK and ERROR are made by the watch layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One write, as kept in the history and sent to watchers.
#[derive(Debug)]
pub struct StoreEvent {
    /// The revision this write produced.
    pub revision: u64,
    pub kind: EventKind,
    pub resource: &'static ResourceDesc,
    pub namespace: String,
    /// The new state (for deletes: the last state, carrying the delete revision).
    pub object: Arc<Stored>,
    /// The state before the write (None for creates).
    pub prev: Option<Arc<Stored>>,
    /// The watch layer's JSON lines for this event, one per type a watcher can see it as
    /// (`ADDED`, `MODIFIED`, `DELETED`, by [`crate::watch::Seen`]): encoded by the first
    /// watcher that sends it, then shared by every other (apiserver's watch cache does the
    /// same with its `cachingObject`), instead of each watcher encoding every event.
    pub lines: [OnceLock<Bytes>; 3],
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// How `metadata.managedFields` is maintained by this write.
    pub fields: FieldManagement,
}

/// Who records field ownership for a write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FieldManagement {
    /// Nobody (writes made by the harness itself): an object sent without
    /// managedFields keeps the stored ones.
    #[default]
    Untracked,
    /// An Update operation by this manager ([`crate::apply::record_update`]).
    Update(String),
    /// The caller computed managedFields already (server-side apply).
    Precomputed,
}

/// DeleteOptions the store understands.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    /// `Foreground`, `Background` or `Orphan` (validated by the HTTP layer).
    pub propagation_policy: Option<String>,
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `gracePeriodSeconds`: how long a pod may take to stop (graceful deletion).
    pub grace_period_seconds: Option<i64>,
}

/// What a DELETE did.
#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; this is its last state.
    Deleted(Value),
    /// Finalizers are pending; the object is marked for deletion.
    Pending(Value),
}

/// Which objects a list or watch wants.
#[derive(Default)]
pub struct Filter {
    /// Restrict to one namespace.
    pub namespace: Option<String>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    /// Extra field selector (a watch on an object URL selects its name).
    pub name_selector: Option<FieldSelector>,
}

impl Filter {
    /// Whether `obj` (of resource `desc`) passes.
    pub fn matches(&self, desc: &ResourceDesc, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && meta_str(obj, "namespace").unwrap_or("") != ns
        {
            return false;
        }
        if let Some(sel) = &self.labels
            && !sel.matches(&labels(obj))
        {
            return false;
        }
        let get = |f: &str| desc.field_value(obj, f);
        for sel in [&self.fields, &self.name_selector].into_iter().flatten() {
            if !sel.matches(&get) {
                return false;
            }
        }
        true
    }
}

/// A page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Arc<Stored>>,
    /// The list's `metadata.resourceVersion`.
    pub revision: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// From now; with `initial`, first the current objects as synthetic ADDED events.
    Now { initial: bool },
    /// Every event after this revision.
    After(u64),
}

/// A registered watcher's starting point.
pub struct Subscription {
    /// Current objects to send as ADDED first (only for `WatchFrom::Now { initial: true }`).
    pub initial: Vec<Arc<Stored>>,
    /// History events to replay (only for `WatchFrom::After`).
    pub replay: Vec<Arc<StoreEvent>>,
    /// The store revision when the watch was registered.
    pub revision: u64,
    /// Live events after `revision`.
    pub live: broadcast::Receiver<Arc<StoreEvent>>,
}
