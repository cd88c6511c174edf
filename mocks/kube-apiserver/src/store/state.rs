//! The [`Store`] handle and the state behind its lock: the objects by resource and
//! key, the global revision, the event history and the journal.
//!
//! Why this exists: every other part of the store (list, write, delete, history, open)
//! works on this one locked state; the helpers they share (lookups, the errors they
//! answer with, stamping and recording a write) live here with it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

use super::types::{StoreEvent, Stored};
use crate::allocator;
use crate::error::{ApiError, Cause};
use crate::persist::Journal;
use crate::resources::ResourceDesc;

/// An object's key within its resource: (namespace, name).
pub(super) type ObjectKey = (String, String);

/// What the store's lock guards.
pub(super) struct Inner {
    pub(super) revision: u64,
    pub(super) objects: BTreeMap<String, BTreeMap<ObjectKey, Arc<Stored>>>,
    pub(super) history: VecDeque<Arc<StoreEvent>>,
    pub(super) history_cap: usize,
    /// Revision of the newest event evicted from history (0: nothing evicted yet).
    pub(super) floor: u64,
    /// Where committed writes are appended when the store lives in a data directory.
    pub(super) journal: Option<Journal>,
}

/// A cheap-to-clone handle on the shared store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    pub(super) tx: broadcast::Sender<Arc<StoreEvent>>,
}

fn not_found(desc: &ResourceDesc, name: &str) -> ApiError {
    ApiError::NotFound {
        group: desc.group.into(),
        resource: desc.plural.into(),
        name: name.into(),
    }
}

pub(super) fn invalid(desc: &ResourceDesc, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: desc.group.into(),
        kind: desc.kind.into(),
        name: name.into(),
        causes,
    }
}

pub(super) fn namespace_of(desc: &ResourceDesc, ns: Option<&str>) -> String {
    if desc.namespaced {
        ns.unwrap_or_default().to_string()
    } else {
        String::new()
    }
}

impl Store {
    pub(super) fn empty(history: usize, journal: Option<Journal>) -> Store {
        let (tx, _) = broadcast::channel(history.clamp(64, 1 << 16));
        Store {
            inner: Arc::new(Mutex::new(Inner {
                revision: 0,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                history_cap: history.max(1),
                floor: 0,
                journal,
            })),
            tx,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current global revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// One object.
    pub fn get(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let inner = self.lock();
        inner
            .get(desc, &namespace_of(desc, ns), name)
            .map(|o| o.value().clone())
    }
}

impl Inner {
    pub(super) fn get(
        &self,
        desc: &ResourceDesc,
        ns: &str,
        name: &str,
    ) -> Result<Arc<Stored>, ApiError> {
        self.objects
            .get(&desc.key())
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| not_found(desc, name))
    }

    /// Service IP/port allocation against every other stored Service.
    pub(super) fn allocate(
        &self,
        desc: &ResourceDesc,
        key: &ObjectKey,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Vec<Cause> {
        if !(desc.group.is_empty() && desc.kind == "Service") {
            return Vec::new();
        }
        let others: Vec<&Value> = self
            .objects
            .get(&desc.key())
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != key)
            .map(|(_, v)| v.value())
            .collect();
        allocator::allocate(obj, old, &others)
    }

    pub(super) fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .get("namespaces")
            .is_some_and(|m| m.contains_key(&(String::new(), ns.to_string())))
    }
}
