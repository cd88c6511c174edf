//! The object store: objects, the global resourceVersion, and the event history.
//!
//! It plays the part of etcd plus the generic registry (apiserver
//! pkg/registry/generic/registry/store.go): every write bumps ONE global revision
//! (including deletes), is recorded in a bounded history for watch resumption,
//! and is broadcast to live watchers. Writes broadcast while holding the lock, so a
//! watcher that subscribes under the lock sees every later event exactly once.
//!
//! Layout: [`types`] holds what the store takes and hands out (objects, options,
//! events, filters); the [`Store`] handle and its locked state are in `core`; reading
//! pages is `list`, creating and updating `write`, deleting (finalizers, graceful
//! deletion, garbage-collector finalizers) `delete`; the history and live events that
//! watches read are kept by `history`; `open` makes a fresh store or loads one from a
//! data directory ([`crate::persist`]).

mod delete;
mod history;
mod list;
mod open;
mod state;
pub mod types;
mod write;

#[cfg(test)]
mod tests;

pub use open::DEFAULT_NAMESPACES;
pub use state::Store;
pub use types::{
    DeleteOptions, DeleteOutcome, EventKind, FieldManagement, Filter, ListItem, ListPage,
    StoreEvent, Stored, Subscription, WatchFrom, WriteOptions,
};
