//! Making a store: fresh (with the default namespaces) or from a data directory
//! ([`crate::persist`]), and detaching it from the journal when its server stops.
//!
//! Why this exists: a server that restarts on a data directory must serve the same
//! objects and continue the same revisions; this is where the store meets persistence.

use std::sync::Arc;

use serde_json::json;

use super::state::Store;
use super::types::{Stored, WriteOptions};
use crate::persist::{self, PersistError};
use crate::resources;

/// Namespaces that exist in every fresh server.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Store {
    /// A store holding the default namespaces, keeping `history` events for resumption.
    pub fn new(history: usize) -> Store {
        let store = Store::empty(history, None);
        store.create_default_namespaces();
        store
    }

    /// A store kept in `dir` ([`crate::persist`]): the objects and revision an earlier
    /// store left there, or the default namespaces in an empty directory. Watches from
    /// before the reload get 410 Expired; watches from the loaded revision on work.
    pub fn open(history: usize, dir: &std::path::Path) -> Result<Store, PersistError> {
        let (loaded, journal) = persist::open(dir)?;
        let store = Store::empty(history, Some(journal));
        if loaded.revision == 0 {
            store.create_default_namespaces();
            return Ok(store);
        }
        {
            let mut inner = store.lock();
            inner.revision = loaded.revision;
            inner.floor = loaded.revision;
            for ((resource, ns, name), (_, obj)) in loaded.objects {
                inner
                    .objects
                    .entry(resource)
                    .or_default()
                    .insert((ns, name), Arc::new(Stored::new(obj)));
            }
        }
        Ok(store)
    }

    /// Stop persisting: later writes through this handle stay in memory only. Called
    /// when a server on a data directory stops, so a stale handle cannot append to the
    /// journal a restarted server now owns.
    pub fn close_journal(&self) {
        self.lock().journal = None;
    }

    fn create_default_namespaces(&self) {
        let store = self;
        if let Some(ns) = resources::lookup("", "v1", "namespaces") {
            for name in DEFAULT_NAMESPACES {
                // Cannot fail on a fresh store with valid names.
                let _ = store.create(
                    ns,
                    None,
                    json!({"metadata": {"name": name}}),
                    WriteOptions::default(),
                );
            }
        }
    }
}
