//! The object store: objects, the global resourceVersion, and the event history.
//!
//! It plays the part of etcd plus the generic registry (apiserver
//! pkg/registry/generic/registry/store.go): every write bumps ONE global revision
//! (including deletes), is recorded in a bounded history for watch resumption,
//! and is broadcast to live watchers. Writes broadcast while holding the lock, so a
//! watcher that subscribes under the lock sees every later event exactly once.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::allocator;
use crate::apply;
use crate::error::{ApiError, Cause, OPTIMISTIC_LOCK_MESSAGE};
use crate::meta::{
    finalizers, generate_name, labels, meta_nonempty, meta_str, now_rfc3339, set_meta,
    validate_name,
};
use crate::persist::{self, Journal, PersistError};
use crate::resources::{self, ResourceDesc};
use crate::selector::{FieldSelector, LabelSelector};
use crate::strategy::{self, Subresource};

/// Namespaces that exist in every fresh server.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

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

/// Whether deleting an object of `desc` is graceful: only pods here (kubernetes
/// pkg/registry/core/pod/strategy.go implements `RESTGracefulDeleteStrategy`).
fn graceful_delete(desc: &ResourceDesc) -> bool {
    desc.group.is_empty() && desc.plural == "pods"
}

/// The grace period a first DELETE gives a pod (pod strategy `CheckGracefulDelete`, after
/// apiserver pkg/registry/rest/delete.go `BeforeDelete` turned a negative request into 1):
/// the request's, else `spec.terminationGracePeriodSeconds`; zero for a pod that is not
/// scheduled or has terminated.
fn pod_grace_period(pod: &Value, opts: &DeleteOptions) -> i64 {
    let requested = opts.grace_period_seconds.map(|p| if p < 0 { 1 } else { p });
    let mut period = requested.unwrap_or_else(|| {
        // kubernetes pkg/apis/core/v1 defaults.go: 30 s when the pod did not say.
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if !scheduled || matches!(phase, Some("Failed" | "Succeeded")) {
        period = 0;
    }
    period.max(0)
}

/// `ts` moved by `seconds` (RFC 3339, whole seconds); `ts` itself when it does not parse.
fn shift_timestamp(ts: &str, seconds: i64) -> String {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| t.checked_add(jiff::SignedDuration::from_secs(seconds)).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| ts.to_string())
}

/// Strings as Go's `%#v` prints their elements: quoted, comma-separated.
fn go_strings(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The garbage collector's finalizers (apimachinery pkg/apis/meta/v1 `FinalizerOrphanDependents`,
/// `FinalizerDeleteDependents`).
const ORPHAN_FINALIZER: &str = "orphan";
const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The finalizers a DELETE leaves on `obj` once the garbage collector's are added or
/// removed as `opts` asks, or `None` when they stay as they are (apiserver
/// pkg/registry/generic/registry/store.go `deletionFinalizersForGarbageCollection`,
/// `shouldOrphanDependents`, `shouldDeleteDependents`). Events opt out of garbage
/// collection (kubernetes pkg/registry/core/event/strategy.go `rest.Unsupported`); every
/// other resource served here defaults to background deletion.
fn gc_finalizers(desc: &ResourceDesc, obj: &Value, opts: &DeleteOptions) -> Option<Vec<String>> {
    if desc.plural == "events" {
        return None;
    }
    let current = finalizers(obj);
    let has = |f: &str| current.iter().any(|c| c == f);
    let policy = opts.propagation_policy.as_deref();
    let orphan = match (opts.orphan_dependents, policy) {
        (Some(o), _) => o,
        (None, Some(p)) => p == "Orphan",
        (None, None) => current
            .iter()
            .find(|f| *f == ORPHAN_FINALIZER || *f == FOREGROUND_FINALIZER)
            .is_some_and(|f| f == ORPHAN_FINALIZER),
    };
    let foreground = match (opts.orphan_dependents, policy) {
        (Some(_), _) => false,
        (None, Some(p)) => p == "Foreground",
        (None, None) => has(FOREGROUND_FINALIZER),
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .cloned()
        .collect();
    if orphan {
        out.push(ORPHAN_FINALIZER.into());
    }
    if foreground {
        out.push(FOREGROUND_FINALIZER.into());
    }
    let same = out.len() == current.len() && out.iter().all(|f| has(f));
    (!same).then_some(out)
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

type ObjectKey = (String, String);

struct Inner {
    revision: u64,
    objects: BTreeMap<String, BTreeMap<ObjectKey, Arc<Stored>>>,
    history: VecDeque<Arc<StoreEvent>>,
    history_cap: usize,
    /// Revision of the newest event evicted from history (0: nothing evicted yet).
    floor: u64,
    /// Where committed writes are appended when the store lives in a data directory.
    journal: Option<Journal>,
}

/// A cheap-to-clone handle on the shared store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<StoreEvent>>,
}

fn not_found(desc: &ResourceDesc, name: &str) -> ApiError {
    ApiError::NotFound {
        group: desc.group.into(),
        resource: desc.plural.into(),
        name: name.into(),
    }
}

fn conflict(desc: &ResourceDesc, name: &str, reason: String) -> ApiError {
    ApiError::Conflict {
        group: desc.group.into(),
        resource: desc.plural.into(),
        name: name.into(),
        reason,
    }
}

/// A failed delete precondition: upstream names the object by its kind, not its resource
/// (apiserver pkg/registry/rest/delete.go `BeforeDelete`), so `details.kind` is `ConfigMap`.
fn precondition_conflict(desc: &ResourceDesc, name: &str, reason: String) -> ApiError {
    ApiError::Conflict {
        group: desc.group.into(),
        resource: desc.kind.into(),
        name: name.into(),
        reason,
    }
}

fn invalid(desc: &ResourceDesc, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: desc.group.into(),
        kind: desc.kind.into(),
        name: name.into(),
        causes,
    }
}

fn namespace_of(desc: &ResourceDesc, ns: Option<&str>) -> String {
    if desc.namespaced {
        ns.unwrap_or_default().to_string()
    } else {
        String::new()
    }
}

/// A present `apiVersion`/`kind` must name this resource (a wrong one is a 400, as in
/// upstream's decoder); a missing one is filled in.
fn check_type_meta(desc: &ResourceDesc, obj: &Value) -> Result<(), ApiError> {
    let want_av = desc.api_version();
    if let Some(av) = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && av != want_av
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({av}) does not match the expected API version ({want_av})"
        )));
    }
    if let Some(kind) = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && kind != desc.kind
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            desc.kind
        )));
    }
    Ok(())
}

fn set_type_meta(desc: &ResourceDesc, obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(desc.api_version()));
        map.insert("kind".into(), json!(desc.kind));
    }
}

/// Body namespace vs URL namespace (apiserver pkg/registry/rest/meta.go
/// `EnsureObjectNamespaceMatchesRequestNamespace`).
fn reconcile_namespace(desc: &ResourceDesc, obj: &mut Value, ns: &str) -> Result<(), ApiError> {
    let body_ns = meta_str(obj, "namespace").unwrap_or("").to_string();
    if desc.namespaced {
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
                    .into(),
            ));
        }
        set_meta(obj, "namespace", Some(json!(ns)));
    } else {
        // Cluster-scoped: a namespace in the body is cleared.
        set_meta(obj, "namespace", None);
    }
    Ok(())
}

fn parse_rv(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// Opaque continue token: base64 of JSON, like upstream's (apiserver
/// pkg/storage/continue.go) but with our own fields.
fn encode_continue(revision: u64, last: &ObjectKey) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": revision, "ns": last.0, "name": last.1});
    base64::engine::general_purpose::URL_SAFE.encode(raw.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let bad = |why: &str| ApiError::BadRequest(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("unknown version"));
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no resource version"))?;
    let ns = v
        .get("ns")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

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

    fn empty(history: usize, journal: Option<Journal>) -> Store {
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current global revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// A copy of the retained event history (oldest first).
    pub fn history(&self) -> Vec<Arc<StoreEvent>> {
        self.lock().history.iter().cloned().collect()
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

    /// A page of objects sorted by namespace then name.
    pub fn list(
        &self,
        desc: &'static ResourceDesc,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let start = continue_token.map(decode_continue).transpose()?;
        let inner = self.lock();
        let revision = match &start {
            Some((rv, _)) if *rv < inner.floor => {
                return Err(ApiError::Expired(
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter."
                        .into(),
                ));
            }
            // Later pages report the first page's revision, so a watch started from the
            // list's RV replays everything that changed while paging.
            Some((rv, _)) => *rv,
            None => inner.revision,
        };
        let empty = BTreeMap::new();
        let objects = inner.objects.get(&desc.key()).unwrap_or(&empty);
        let range = match &start {
            Some((_, key)) => objects.range::<ObjectKey, _>((
                std::ops::Bound::Excluded(key.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => objects.range::<ObjectKey, _>(..),
        };
        // Paging walks the stored keys of the list's scope (all, or one namespace) and
        // filters as it goes, as upstream pages over etcd keys (apiserver
        // pkg/storage/etcd3/store.go `GetList`): a full page has a `continue` whenever any
        // key of the scope follows, matching or not, and `remainingItemCount` only when
        // there is no selector (pkg/storage/continue.go `PrepareContinueToken`).
        let in_scope = |obj: &Value| {
            filter
                .namespace
                .as_ref()
                .is_none_or(|ns| meta_str(obj, "namespace").unwrap_or("") == ns)
        };
        let mut scope = range.filter(|(_, obj)| in_scope(obj));
        let mut items = Vec::new();
        let mut last_key = None;
        let limit = limit.filter(|l| *l > 0);
        for (key, obj) in scope.by_ref() {
            if !filter.matches(desc, obj) {
                continue;
            }
            items.push(obj.clone());
            last_key = Some(key.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let full = limit.is_some_and(|l| items.len() >= l);
        let selects =
            filter.labels.is_some() || filter.fields.is_some() || filter.name_selector.is_some();
        let following = if full { scope.count() as u64 } else { 0 };
        let (continue_token, remaining) = match last_key {
            Some(last) if following > 0 => (
                Some(encode_continue(revision, &last)),
                (!selects).then_some(following),
            ),
            _ => (None, None),
        };
        Ok(ListPage {
            items,
            revision,
            continue_token,
            remaining,
        })
    }

    /// Create an object (apiserver pkg/registry/rest/create.go `BeforeCreate`).
    pub fn create(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        mut obj: Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        }
        check_type_meta(desc, &obj)?;
        let ns = namespace_of(desc, ns);
        reconcile_namespace(desc, &mut obj, &ns)?;
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ] {
            set_meta(&mut obj, field, None);
        }
        let name = match (
            meta_nonempty(&obj, "name"),
            meta_nonempty(&obj, "generateName"),
        ) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => generate_name(prefix),
            (None, None) => {
                return Err(invalid(
                    desc,
                    "",
                    vec![Cause::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        };
        let causes = validate_name(&name, desc.name_rule);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        set_meta(&mut obj, "name", Some(json!(name)));
        strategy::prepare_create(desc, &mut obj);
        let causes = strategy::validate_create(desc, &obj);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        set_meta(
            &mut obj,
            "uid",
            Some(json!(uuid::Uuid::new_v4().to_string())),
        );
        set_meta(&mut obj, "creationTimestamp", Some(json!(now_rfc3339())));
        set_type_meta(desc, &mut obj);

        let mut inner = self.lock();
        if desc.namespaced && !inner.namespace_exists(&ns) {
            return Err(ApiError::NotFound {
                group: String::new(),
                resource: "namespaces".into(),
                name: ns,
            });
        }
        let key = (ns.clone(), name.clone());
        if inner
            .objects
            .get(&desc.key())
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::AlreadyExists {
                group: desc.group.into(),
                resource: desc.plural.into(),
                name,
            });
        }
        let causes = inner.allocate(desc, &key, &mut obj, None);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        if let FieldManagement::Update(manager) = &opts.fields {
            apply::record_update(desc, None, &mut obj, manager, Subresource::Main);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let revision = inner.revision + 1;
        set_meta(
            &mut obj,
            "resourceVersion",
            Some(json!(revision.to_string())),
        );
        let obj = Arc::new(Stored::new(obj));
        inner
            .objects
            .entry(desc.key())
            .or_default()
            .insert(key, obj.clone());
        self.commit(&mut inner, EventKind::Added, desc, ns, obj.clone(), None);
        Ok(obj.value().clone())
    }

    /// Replace an object (PUT). `sub` selects main resource or `/status` rules.
    pub fn update(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        obj: Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        self.update_locked(
            &mut inner,
            desc,
            &ns,
            name,
            sub,
            old,
            obj,
            !desc.allow_unconditional_update,
            opts,
        )
    }

    /// Read-modify-write under the lock (PATCH). `patch` gets the current object and
    /// returns the desired one; a `metadata.resourceVersion` it carries that differs
    /// from the current one is a 409, as for PUT.
    pub fn patch(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        patch: impl FnOnce(&Value) -> Result<Value, ApiError>,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        let new = patch(&old)?;
        self.update_locked(&mut inner, desc, &ns, name, sub, old, new, false, opts)
    }

    /// Server-side apply: `build` gets the current object (None when missing) and
    /// returns the desired one. A missing object is created (apiserver
    /// pkg/endpoints/handlers/patch.go `applyPatch` creates on NotFound), except through
    /// a subresource. Returns the object and whether it was created.
    pub fn apply(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        build: impl Fn(Option<&Value>) -> Result<Value, ApiError>,
        opts: WriteOptions,
    ) -> Result<(Value, bool), ApiError> {
        // Two rounds: a create that loses a race to another writer becomes an update.
        for _ in 0..2 {
            {
                let mut inner = self.lock();
                let ns = namespace_of(desc, ns);
                match inner.get(desc, &ns, name) {
                    Ok(old) => {
                        let new = build(Some(&old))?;
                        return self
                            .update_locked(&mut inner, desc, &ns, name, sub, old, new, false, opts)
                            .map(|v| (v, false));
                    }
                    Err(e) if sub != Subresource::Main => return Err(e),
                    Err(_) => {}
                }
            }
            let mut obj = build(None)?;
            match meta_nonempty(&obj, "name") {
                Some(n) if n != name => {
                    return Err(ApiError::BadRequest(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => set_meta(&mut obj, "name", Some(json!(name))),
            }
            match self.create(desc, ns, obj, opts.clone()) {
                Err(ApiError::AlreadyExists { .. }) => continue,
                other => return other.map(|v| (v, true)),
            }
        }
        Err(conflict(desc, name, OPTIMISTIC_LOCK_MESSAGE.into()))
    }

    /// The shared update path (apiserver pkg/registry/generic/registry/store.go `Update`
    /// and pkg/registry/rest/update.go `BeforeUpdate`).
    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        &self,
        inner: &mut Inner,
        desc: &'static ResourceDesc,
        ns: &str,
        name: &str,
        sub: Subresource,
        old: Arc<Stored>,
        mut new: Value,
        rv_required: bool,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        }
        check_type_meta(desc, &new)?;
        match meta_nonempty(&new, "name") {
            Some(n) if n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => set_meta(&mut new, "name", Some(json!(name))),
        }
        reconcile_namespace(desc, &mut new, ns)?;

        let old_rv = meta_str(&old, "resourceVersion").unwrap_or("").to_string();
        match meta_nonempty(&new, "resourceVersion") {
            Some(rv) if rv != old_rv => {
                if parse_rv(rv).is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "invalid resourceVersion {rv:?}"
                    )));
                }
                return Err(conflict(desc, name, OPTIMISTIC_LOCK_MESSAGE.into()));
            }
            Some(_) => {}
            None if rv_required => {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::invalid(
                        "metadata.resourceVersion",
                        "",
                        "must be specified for an update",
                    )],
                ));
            }
            None => {}
        }

        strategy::prepare_update(desc, sub, &old, &mut new);

        // System fields: uid may be omitted but not changed; the rest always come from
        // the stored object.
        match (meta_nonempty(&new, "uid"), meta_str(&old, "uid")) {
            (Some(u), Some(o)) if u != o => {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::invalid("metadata.uid", u, "field is immutable")],
                ));
            }
            _ => {}
        }
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            let value = old.get("metadata").and_then(|m| m.get(field)).cloned();
            set_meta(&mut new, field, value);
        }
        strategy::update_generation(desc, sub, &old, &mut new);
        set_meta(&mut new, "selfLink", None);

        let deleting = meta_nonempty(&old, "deletionTimestamp").is_some();
        let new_finalizers = finalizers(&new);
        if deleting {
            let old_finalizers = finalizers(&old);
            let added: Vec<&String> = new_finalizers
                .iter()
                .filter(|f| !old_finalizers.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            go_strings(&added)
                        ),
                    )],
                ));
            }
        }
        strategy::patch_allocated_values(desc, &old, &mut new);
        let mut causes = strategy::validate_update(desc, &old, &new);
        if causes.is_empty() {
            let key = (ns.to_string(), name.to_string());
            causes = inner.allocate(desc, &key, &mut new, Some(&old));
        }
        if !causes.is_empty() {
            return Err(invalid(desc, name, causes));
        }

        if opts.fields != FieldManagement::Precomputed
            && new.pointer("/metadata/managedFields").is_none()
        {
            let kept = old.pointer("/metadata/managedFields").cloned();
            set_meta(&mut new, "managedFields", kept);
        }
        if let FieldManagement::Update(manager) = &opts.fields {
            apply::record_update(desc, Some(&old), &mut new, manager, sub);
        }
        set_type_meta(desc, &mut new);
        set_meta(&mut new, "resourceVersion", Some(json!(old_rv)));
        if new == *old.value() {
            return Ok(new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        let revision = inner.revision + 1;
        set_meta(
            &mut new,
            "resourceVersion",
            Some(json!(revision.to_string())),
        );
        let new = Arc::new(Stored::new(new));
        let key = (ns.to_string(), name.to_string());
        if deleting && new_finalizers.is_empty() {
            // apiserver store.go: an update that empties the finalizers of an object
            // being deleted deletes it.
            if let Some(map) = inner.objects.get_mut(&desc.key()) {
                map.remove(&key);
            }
            self.commit(
                inner,
                EventKind::Deleted,
                desc,
                ns.to_string(),
                new.clone(),
                Some(old),
            );
        } else {
            inner
                .objects
                .entry(desc.key())
                .or_default()
                .insert(key, new.clone());
            self.commit(
                inner,
                EventKind::Modified,
                desc,
                ns.to_string(),
                new.clone(),
                Some(old),
            );
        }
        Ok(new.value().clone())
    }

    /// Delete an object (apiserver store.go `Delete` with finalizer handling).
    pub fn delete(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        let uid = meta_str(&old, "uid").unwrap_or("");
        let rv = meta_str(&old, "resourceVersion").unwrap_or("");
        if let Some(want) = opts.precondition_uid.as_deref().filter(|s| !s.is_empty())
            && want != uid
        {
            return Err(precondition_conflict(
                desc,
                name,
                format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                ),
            ));
        }
        if let Some(want) = opts
            .precondition_resource_version
            .as_deref()
            .filter(|s| !s.is_empty())
            && want != rv
        {
            return Err(precondition_conflict(
                desc,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                ),
            ));
        }
        let key = (ns.clone(), name.to_string());
        let deleting = meta_nonempty(&old, "deletionTimestamp").is_some();
        // Graceful deletion (pods; apiserver pkg/registry/rest/delete.go `BeforeDelete`):
        // the first DELETE sets deletionTimestamp = now + grace period; a later one may
        // only shorten a pending grace period, and otherwise changes nothing.
        let mut graceful: Option<(String, i64)> = None;
        if graceful_delete(desc) {
            let current = old
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .filter(|g| *g > 0);
            match (deleting, current) {
                (false, _) => {
                    let period = pod_grace_period(&old, opts);
                    graceful = Some((shift_timestamp(&now_rfc3339(), period), period));
                }
                (true, None) => {}
                (true, Some(current)) => {
                    let shorter = opts
                        .grace_period_seconds
                        .map(|p| if p < 0 { 1 } else { p })
                        .filter(|p| *p < current);
                    let Some(period) = shorter else {
                        return Ok(DeleteOutcome::Pending(old.value().clone()));
                    };
                    let ts = meta_str(&old, "deletionTimestamp").unwrap_or("");
                    graceful = Some((shift_timestamp(ts, period - current), period));
                }
            }
        }
        // With finalizers left (those of the object, or the garbage collector's that the
        // propagation policy adds) or a grace period running, the object is only marked
        // (store.go `updateForGracefulDeletionAndFinalizers`, `markAsDeleting`); a graceful
        // delete with no grace period left is marked, then deleted; otherwise it goes.
        let gc = gc_finalizers(desc, &old, opts);
        let pending = gc.as_ref().map_or_else(|| finalizers(&old), Clone::clone);
        let mut current = old.clone();
        if !pending.is_empty() || graceful.is_some() {
            if deleting && gc.is_none() && graceful.is_none() {
                return Ok(DeleteOutcome::Pending(old.value().clone()));
            }
            let mut marked = old.value().clone();
            if gc.is_some() {
                set_meta(&mut marked, "finalizers", Some(json!(pending)));
            }
            let bump = |marked: &mut Value| {
                if let Some(g) = marked
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    && g > 0
                {
                    set_meta(marked, "generation", Some(json!(g + 1)));
                }
            };
            match &graceful {
                Some((ts, period)) => {
                    if !deleting {
                        bump(&mut marked);
                    }
                    set_meta(&mut marked, "deletionTimestamp", Some(json!(ts)));
                    set_meta(
                        &mut marked,
                        "deletionGracePeriodSeconds",
                        Some(json!(period)),
                    );
                }
                None => {
                    if !deleting {
                        bump(&mut marked);
                        set_meta(&mut marked, "deletionTimestamp", Some(json!(now_rfc3339())));
                    }
                    set_meta(&mut marked, "deletionGracePeriodSeconds", Some(json!(0)));
                }
            }
            let stays = !pending.is_empty() || graceful.as_ref().is_some_and(|(_, p)| *p > 0);
            if opts.dry_run {
                return Ok(if stays {
                    DeleteOutcome::Pending(marked)
                } else {
                    DeleteOutcome::Deleted(marked)
                });
            }
            let revision = inner.revision + 1;
            set_meta(
                &mut marked,
                "resourceVersion",
                Some(json!(revision.to_string())),
            );
            let marked = Arc::new(Stored::new(marked));
            inner
                .objects
                .entry(desc.key())
                .or_default()
                .insert(key.clone(), marked.clone());
            self.commit(
                &mut inner,
                EventKind::Modified,
                desc,
                ns.clone(),
                marked.clone(),
                Some(old),
            );
            if stays {
                return Ok(DeleteOutcome::Pending(marked.value().clone()));
            }
            current = marked;
        }
        let old = current;
        if opts.dry_run {
            return Ok(DeleteOutcome::Deleted(old.value().clone()));
        }
        let revision = inner.revision + 1;
        let mut last = old.value().clone();
        set_meta(
            &mut last,
            "resourceVersion",
            Some(json!(revision.to_string())),
        );
        let last = Arc::new(Stored::new(last));
        if let Some(map) = inner.objects.get_mut(&desc.key()) {
            map.remove(&key);
        }
        self.commit(
            &mut inner,
            EventKind::Deleted,
            desc,
            ns,
            last.clone(),
            Some(old),
        );
        Ok(DeleteOutcome::Deleted(last.value().clone()))
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

impl Inner {
    fn get(&self, desc: &ResourceDesc, ns: &str, name: &str) -> Result<Arc<Stored>, ApiError> {
        self.objects
            .get(&desc.key())
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| not_found(desc, name))
    }

    /// Service IP/port allocation against every other stored Service.
    fn allocate(
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

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .get("namespaces")
            .is_some_and(|m| m.contains_key(&(String::new(), ns.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let Ok(DeleteOutcome::Pending(first)) =
            store.delete(pods, Some("default"), "running", &none)
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
}
