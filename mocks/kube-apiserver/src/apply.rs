//! Server-side apply and `metadata.managedFields` bookkeeping.
//!
//! Why this exists: kubectl `apply --server-side`, kube-rs controllers using
//! `Patch::Apply` and kube-lease-manager (which takes an orphaned lease with a
//! non-forced apply and treats a 409 as a lost election) rely on the server tracking
//! which manager owns which field and refusing to let one manager silently overwrite
//! another's value. This is a workable subset of upstream's field manager (apiserver
//! pkg/util/managedfields, sigs.k8s.io/structured-merge-diff merge/update.go):
//! - one entry per (manager, operation, subresource) holding a [`FieldSet`];
//! - an update (create, PUT, merge/JSON/strategic patch) takes every field it adds or
//!   changes away from the other managers, and drops removed fields from everyone;
//! - an apply merges the configuration into the live object, prunes the fields the
//!   same manager applied before and no longer sends (unless someone else owns them),
//!   and fails with a 409 listing the fields it would change that another manager
//!   owns, unless forced, in which case ownership moves.
//!
//! Left out: version conversion of field sets (one version per kind is served),
//! atomic maps/structs (`+mapType=atomic`), the `before-first-apply` manager for
//! objects created without managedFields, and the cap on Update entries.

use serde_json::{Map, Value};

use crate::error::{ApiError, Cause};
use crate::fieldpath::{self, FieldSet, Path};
use crate::meta::now_rfc3339;
use crate::resources::ResourceDesc;
use crate::strategy::Subresource;

/// The operation a managedFields entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, op: Operation, sub: Option<&str>) -> bool {
        self.manager == manager && self.operation == op && self.subresource.as_deref() == sub
    }

    fn to_json(&self) -> Value {
        entry_json(
            &self.manager,
            self.operation,
            &self.api_version,
            self.time.as_deref(),
            self.subresource.as_deref(),
            self.fields.to_fields_v1(),
        )
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let operation = match v.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Entry {
            manager: s("manager").unwrap_or_default(),
            operation,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").filter(|s| !s.is_empty()),
            fields: FieldSet::from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    /// apiserver pkg/util/managedfields/internal/conflict.go `printManager`.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {sub:?}");
        }
        // The manager's identity carries no time (`BuildManagerIdentifier` clears it), so an
        // Update manager prints as `"m" using v1`, never with an `at <time>`.
        match self.operation {
            Operation::Update => format!("{s} using {}", self.api_version),
            Operation::Apply => s,
        }
    }
}

/// One entry as stored, around its already encoded `fieldsV1`.
fn entry_json(
    manager: &str,
    operation: Operation,
    api_version: &str,
    time: Option<&str>,
    subresource: Option<&str>,
    fields_v1: Value,
) -> Value {
    // Built by hand: `json!` would deep-copy the FieldsV1 trie.
    let s = |v: &str| Value::String(v.to_string());
    let mut m = Map::new();
    m.insert("manager".into(), s(manager));
    m.insert("operation".into(), s(operation.as_str()));
    m.insert("apiVersion".into(), s(api_version));
    m.insert("fieldsType".into(), s("FieldsV1"));
    m.insert("fieldsV1".into(), fields_v1);
    if let Some(t) = time {
        m.insert("time".into(), s(t));
    }
    if let Some(sub) = subresource {
        m.insert("subresource".into(), s(sub));
    }
    Value::Object(m)
}

/// The entries stored in `obj` (malformed ones are dropped, as upstream resets
/// managedFields it cannot decode).
pub fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// Stores the entries in upstream's order: Apply before Update, then by time (oldest
/// first), manager, apiVersion and subresource (apimachinery
/// pkg/util/managedfields/internal/managedfields.go `sortEncodedManagedFields`). Times are
/// RFC 3339 in whole seconds, so comparing the strings compares the instants.
fn store_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.sort_by(entry_order);
    let kept: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    let value = (!kept.is_empty()).then_some(Value::Array(kept));
    crate::meta::set_meta(obj, "managedFields", value);
}

/// The order of [`store_entries`].
fn entry_order(p: &Entry, q: &Entry) -> std::cmp::Ordering {
    (
        p.operation.as_str(),
        p.time.as_deref().unwrap_or(""),
        &p.manager,
    )
        .cmp(&(
            q.operation.as_str(),
            q.time.as_deref().unwrap_or(""),
            &q.manager,
        ))
        .then_with(|| p.api_version.cmp(&q.api_version))
        .then_with(|| p.subresource.cmp(&q.subresource))
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    crate::meta::set_meta(&mut o, "managedFields", None);
    o
}

/// The top-level field a write through `sub` does not own: `status` on the main resource
/// and `spec` on `/status`, for types with a status subresource.
fn reset_field(desc: &ResourceDesc, sub: Subresource) -> Option<&'static str> {
    desc.status_subresource.then_some(match sub {
        Subresource::Main => "status",
        Subresource::Status => "spec",
    })
}

fn subresource_name(sub: Subresource) -> Option<&'static str> {
    match sub {
        Subresource::Main => None,
        Subresource::Status => Some("status"),
    }
}

/// The manager of a non-apply write: `fieldManager`, else the User-Agent up to the
/// first '/' (apiserver pkg/endpoints/handlers/rest.go `prefixFromUserAgent`), capped at
/// 128 bytes.
pub fn default_manager(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager.filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => {
            let prefix = user_agent.split('/').next().unwrap_or("");
            let mut end = prefix.len().min(128);
            while !prefix.is_char_boundary(end) {
                end -= 1;
            }
            let manager: String = prefix[..end].chars().filter(|c| !c.is_control()).collect();
            // No User-Agent (reqwest sends none by default) records "unknown" (apimachinery
            // pkg/util/managedfields/internal/buildmanagerinfo.go).
            if manager.is_empty() {
                "unknown".to_string()
            } else {
                manager
            }
        }
    }
}

/// Record an Update by `manager` that turned `old` (None on create) into `new`.
/// When `new` carries no managedFields the stored ones are kept.
pub fn record_update(
    desc: &ResourceDesc,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    sub: Subresource,
) {
    let kind = desc.kind;
    let sent = new.pointer("/metadata/managedFields");
    // A create without managedFields (every create a client makes): the one entry's
    // `fieldsV1` is encoded straight from the object, which is what building the field
    // set and encoding it gives (tests/properties.rs `fields_v1_of_matches_the_set`).
    if old.is_none()
        && sent.is_none()
        && let Some(mut fields_v1) = fieldpath::fields_v1_of(kind, new)
    {
        // Not owned on create either (the reset fields, below).
        if let Some(reset) = reset_field(desc, sub)
            && let Some(map) = fields_v1.as_object_mut()
        {
            map.remove(&format!("f:{reset}"));
        }
        let entry = fields_v1
            .as_object()
            .is_some_and(|m| !m.is_empty())
            .then(|| {
                let time = now_rfc3339();
                Value::Array(vec![entry_json(
                    manager,
                    Operation::Update,
                    &desc.api_version(),
                    Some(&time),
                    subresource_name(sub),
                    fields_v1,
                )])
            });
        crate::meta::set_meta(new, "managedFields", entry);
        return;
    }
    // Only the changed subtrees are walked (fieldpath::diff); field sets never include
    // metadata.managedFields (it is stripped metadata), so the objects need no copies.
    let (mut changed, mut removed) = match old {
        Some(o) => {
            let d = fieldpath::diff(kind, o, new);
            (d.changed, d.removed)
        }
        None => (FieldSet::of(kind, new), FieldSet::default()),
    };
    // Reset fields are neither recorded nor taken from other managers: structured-merge-diff's
    // Updater filters the comparison with the strategy's reset fields (apimachinery
    // pkg/util/managedfields/internal/structuredmerge.go `IgnoreFilter`), so a create or
    // update of the main resource owns no status, and a `/status` write no spec.
    if let Some(reset) = reset_field(desc, sub) {
        let keep =
            |p: &fieldpath::Path| p.first() != Some(&fieldpath::Element::Field(reset.into()));
        changed.0.retain(keep);
        removed.0.retain(keep);
    }
    let stored = old.and_then(|o| o.pointer("/metadata/managedFields"));
    if changed.is_empty() && removed.is_empty() && old.is_some() {
        // Nothing owned changed: keep the stored entries as they are, without decoding
        // and re-encoding them, unless the client sent different ones.
        match (sent, stored) {
            (Some(s), Some(o)) if s == o => return,
            (None, o) => {
                let keep = o.cloned();
                crate::meta::set_meta(new, "managedFields", keep);
                return;
            }
            _ => {}
        }
    }
    // The stored entries stay encoded where that gives the same result (below); the ones
    // sent along with `new` are moved out of it rather than copied.
    let raw: Vec<Value> = match (sent.is_some(), old) {
        (true, _) => take_managed_fields(new),
        (false, Some(old)) => old
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        (false, None) => Vec::new(),
    };
    let mut list: Vec<Held> = raw.into_iter().filter_map(Held::from_json).collect();
    if changed.is_empty() && removed.is_empty() {
        store_held(new, list);
        return;
    }
    let sub_name = subresource_name(sub);
    // Other managers lose what changed or went away: an entry still encoded is edited in
    // its trie (a few paths), a decoded one in its set; neither is copied.
    for h in list.iter_mut() {
        if h.entry.is(manager, Operation::Update, sub_name) {
            continue;
        }
        match &mut h.encoded {
            Some(trie) => {
                for p in changed.0.iter().chain(removed.0.iter()) {
                    fieldpath::remove_from_fields_v1(trie, p);
                }
            }
            None => h
                .entry
                .fields
                .0
                .retain(|p| !changed.contains(p) && !removed.contains(p)),
        }
    }
    let mut fields = match list
        .iter()
        .position(|h| h.entry.is(manager, Operation::Update, sub_name))
    {
        Some(i) => list.remove(i).into_fields(),
        None => FieldSet::default(),
    };
    fields.0.extend(changed.0);
    if !removed.is_empty() {
        fields.0.retain(|p| !removed.contains(p));
    }
    list.push(Held {
        entry: Entry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: desc.api_version(),
            time: Some(now_rfc3339()),
            subresource: sub_name.map(str::to_string),
            fields,
        },
        encoded: None,
    });
    store_held(new, list);
}

/// A stored entry during an update: its `fieldsV1` kept as stored when that is the
/// canonical encoding of its set (what [`store_entries`] would write back), else decoded.
/// Decoding and re-encoding every entry on every write was about a third of the CPU of
/// an update (a Node's kubelet entry holds some 70 paths, and each write of the
/// node-initialisation sequence takes one or two of them away).
struct Held {
    /// `fields` is empty while `encoded` is set.
    entry: Entry,
    encoded: Option<Map<String, Value>>,
}

impl Held {
    /// [`Entry::from_json`], keeping a canonical `fieldsV1` encoded.
    fn from_json(mut v: Value) -> Option<Held> {
        let fields_v1 = v.get_mut("fieldsV1").map(Value::take);
        if let Some(Value::Object(trie)) = fields_v1 {
            if fieldpath::is_canonical_fields_v1(&trie) {
                let entry = Entry::from_json(&v)?;
                return Some(Held {
                    entry,
                    encoded: Some(trie),
                });
            }
            let mut entry = Entry::from_json(&v)?;
            entry.fields = FieldSet::from_fields_v1(&Value::Object(trie));
            return Some(Held {
                entry,
                encoded: None,
            });
        }
        // Not an object: decodes to the empty set, as before.
        Entry::from_json(&v).map(|entry| Held {
            entry,
            encoded: None,
        })
    }

    fn into_fields(self) -> FieldSet {
        match self.encoded {
            Some(trie) => FieldSet::from_fields_v1(&Value::Object(trie)),
            None => self.entry.fields,
        }
    }

    fn is_empty(&self) -> bool {
        match &self.encoded {
            Some(trie) => trie.is_empty(),
            None => self.entry.fields.is_empty(),
        }
    }

    fn into_json(self) -> Value {
        match self.encoded {
            Some(trie) => {
                let e = self.entry;
                entry_json(
                    &e.manager,
                    e.operation,
                    &e.api_version,
                    e.time.as_deref(),
                    e.subresource.as_deref(),
                    Value::Object(trie),
                )
            }
            None => self.entry.to_json(),
        }
    }
}

/// Moves the `metadata.managedFields` items out of `obj` (none when it is not a list).
fn take_managed_fields(obj: &mut Value) -> Vec<Value> {
    match obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"))
    {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// [`store_entries`] for held entries: the same order, empty entries dropped.
fn store_held(obj: &mut Value, mut list: Vec<Held>) {
    list.sort_by(|p, q| entry_order(&p.entry, &q.entry));
    let kept: Vec<Value> = list
        .into_iter()
        .filter(|h| !h.is_empty())
        .map(Held::into_json)
        .collect();
    let value = (!kept.is_empty()).then_some(Value::Array(kept));
    crate::meta::set_meta(obj, "managedFields", value);
}

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// `printManager` of the owner.
    pub manager: String,
    pub path: Path,
}

/// Why an apply was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApplyError {
    /// The applied configuration is not an object with apiVersion and kind.
    #[error("{0}")]
    BadConfig(String),
    /// Other managers own fields the apply would change.
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
}

/// apiserver pkg/util/managedfields/internal/conflict.go `getConflictMessage`.
fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager,
            fieldpath::path_string(&c.path)
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", fieldpath::path_string(&c.path)));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

impl From<ApplyError> for ApiError {
    fn from(err: ApplyError) -> ApiError {
        match err {
            ApplyError::BadConfig(m) => ApiError::BadRequest(m),
            // apimachinery pkg/api/errors/errors.go `NewApplyConflict`.
            ApplyError::Conflicts(conflicts) => ApiError::ApplyConflict {
                message: conflict_message(&conflicts),
                causes: conflicts
                    .iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict".into(),
                        message: format!("conflict with {}", c.manager),
                        field: fieldpath::path_string(&c.path),
                    })
                    .collect(),
            },
        }
    }
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Parse an apply body: JSON (what kubectl and kube-rs send) or YAML (what a hand-written
/// `curl --data-binary @x.yaml -H 'Content-Type: application/apply-patch+yaml'` sends;
/// upstream decodes both with the YAML-or-JSON decoder of apimachinery `util/yaml`).
pub fn parse_config(body: &[u8]) -> Result<Value, ApplyError> {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(json_err) => {
            let text = std::str::from_utf8(body).map_err(|e| {
                ApplyError::BadConfig(format!("error decoding YAML: body is not UTF-8: {e}"))
            })?;
            let trimmed = text.trim_start();
            // A body that starts like JSON is JSON: report the JSON error, not YAML's.
            if trimmed.starts_with('{') || trimmed.starts_with('[') {
                return Err(ApplyError::BadConfig(format!(
                    "error decoding YAML: {json_err}"
                )));
            }
            serde_saphyr::from_str::<Value>(text).map_err(|e| {
                let line = e.to_string();
                let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
                ApplyError::BadConfig(format!("error decoding YAML: {line}"))
            })?
        }
    };
    let Value::Object(map) = &v else {
        return Err(ApplyError::BadConfig(
            "apply configuration must be an object".into(),
        ));
    };
    for key in ["apiVersion", "kind"] {
        if map
            .get(key)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApplyError::BadConfig(format!(
                "Object '{}' is missing in '{}'",
                if key == "kind" { "Kind" } else { "apiVersion" },
                v
            )));
        }
    }
    Ok(v)
}

/// Apply `config` as `manager` to `live` (None: the object does not exist yet) and
/// return the object to store, managedFields included.
pub fn apply(
    desc: &ResourceDesc,
    live: Option<&Value>,
    mut config: Value,
    manager: &str,
    sub: Subresource,
    force: bool,
) -> Result<Value, ApplyError> {
    let kind = desc.kind;
    strip_nulls(&mut config);
    // Reset fields: the main resource does not own status, `/status` does not own spec
    // (kubernetes pkg/registry/core/*/strategy.go GetResetFields).
    if let Some(reset) = reset_field(desc, sub)
        && let Some(map) = config.as_object_mut()
    {
        map.remove(reset);
    }
    crate::meta::set_meta(&mut config, "managedFields", None);

    let sub_name = subresource_name(sub);
    let mut list = live.map(entries).unwrap_or_default();
    let previous = list
        .iter()
        .position(|e| e.is(manager, Operation::Apply, sub_name))
        .map(|i| list.remove(i));
    let applied = FieldSet::of(kind, &config);
    let live_plain = live
        .map(without_managed_fields)
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut new = fieldpath::merge(kind, &live_plain, &config);

    // Prune what this manager applied before and no longer sends.
    if let Some(prev) = &previous {
        let stale = prev.fields.difference(&applied);
        for p in stale.0.iter() {
            let kept_by_others = list.iter().any(|e| e.fields.touches(p));
            if !kept_by_others && !applied.touches(p) {
                fieldpath::remove(kind, &mut new, p);
            }
        }
    }

    let changed = fieldpath::changed(kind, live.map(|_| &live_plain), &new);
    let mut conflicts = Vec::new();
    for e in &list {
        for p in e.fields.intersection(&changed).0 {
            conflicts.push(Conflict {
                manager: e.describe(),
                path: p,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    let removed = FieldSet::of(kind, &live_plain).difference(&FieldSet::of(kind, &new));
    let taken = changed.union(&removed);
    for e in list.iter_mut() {
        e.fields = e.fields.difference(&taken);
    }
    // An apply that changes nothing leaves the manager's time as it was, none for a new
    // manager (apimachinery pkg/util/managedfields/internal/managedfieldsupdater.go `Apply`:
    // the time is set only when structured-merge-diff returns a changed object).
    let unchanged = live.is_some() && new == live_plain;
    let time = match previous {
        _ if !unchanged => Some(now_rfc3339()),
        Some(prev) => prev.time,
        None => None,
    };
    list.push(Entry {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: desc.api_version(),
        time,
        subresource: sub_name.map(str::to_string),
        fields: applied,
    });
    store_entries(&mut new, list);
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use serde_json::json;

    fn cm() -> &'static ResourceDesc {
        lookup("", "v1", "configmaps").expect("configmaps")
    }

    fn cfg(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    fn owners(obj: &Value) -> Vec<(String, &'static str, Value)> {
        entries(obj)
            .into_iter()
            .map(|e| {
                (
                    e.manager.clone(),
                    e.operation.as_str(),
                    e.fields.to_fields_v1(),
                )
            })
            .collect()
    }

    #[test]
    fn a_no_op_apply_by_a_new_manager_carries_no_time() {
        let first = apply(
            cm(),
            None,
            cfg(json!({"a": "1"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("create");
        let same = apply(
            cm(),
            Some(&first),
            cfg(json!({"a": "1"})),
            "m2",
            Subresource::Main,
            true,
        )
        .expect("no-op");
        let m2 = entries(&same)
            .into_iter()
            .find(|e| e.manager == "m2")
            .expect("m2 is recorded");
        assert_eq!(m2.time, None);
        // Apply entries without a time sort first (as time zero).
        assert_eq!(entries(&same)[0].manager, "m2");
    }

    #[test]
    fn writes_do_not_own_the_fields_their_subresource_resets() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let mut created = json!({"metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"capacity": {"cpu": "1"}}});
        record_update(nodes, None, &mut created, "creator", Subresource::Main);
        assert_eq!(
            owners(&created),
            [(
                "creator".to_string(),
                "Update",
                json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:podCIDR": {}}})
            )]
        );
        let mut status = created.clone();
        status["status"]["capacity"]["cpu"] = json!("2");
        status["spec"]["podCIDR"] = json!("10.0.1.0/24");
        record_update(
            nodes,
            Some(&created),
            &mut status,
            "kubelet",
            Subresource::Status,
        );
        let kubelet = entries(&status)
            .into_iter()
            .find(|e| e.manager == "kubelet")
            .expect("kubelet");
        assert_eq!(
            kubelet.fields.to_fields_v1(),
            json!({"f:status": {"f:capacity": {"f:cpu": {}}}})
        );
    }

    #[test]
    fn apply_creates_then_prunes() {
        let first = apply(
            cm(),
            None,
            cfg(json!({"a": "1", "b": "2"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("create");
        assert_eq!(first["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            owners(&first),
            [(
                "m1".to_string(),
                "Apply",
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            )]
        );
        let second = apply(
            cm(),
            Some(&first),
            cfg(json!({"a": "1"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("prune");
        assert_eq!(second["data"], json!({"a": "1"}));
    }

    #[test]
    fn conflict_unless_forced() {
        let first = apply(
            cm(),
            None,
            cfg(json!({"a": "1"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("create");
        // Same value: shared ownership, no conflict.
        let shared = apply(
            cm(),
            Some(&first),
            cfg(json!({"a": "1"})),
            "m2",
            Subresource::Main,
            false,
        )
        .expect("shared");
        assert_eq!(entries(&shared).len(), 2);
        let err = apply(
            cm(),
            Some(&shared),
            cfg(json!({"a": "2"})),
            "m2",
            Subresource::Main,
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"m1\": .data.a"
        );
        let api: ApiError = err.into();
        let status = api.to_status();
        assert_eq!(status["code"], 409);
        assert_eq!(status["reason"], "Conflict");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldManagerConflict"
        );
        assert_eq!(status["details"]["causes"][0]["field"], ".data.a");
        let forced = apply(
            cm(),
            Some(&shared),
            cfg(json!({"a": "2"})),
            "m2",
            Subresource::Main,
            true,
        )
        .expect("force");
        assert_eq!(forced["data"]["a"], "2");
        assert_eq!(
            owners(&forced),
            [("m2".to_string(), "Apply", json!({"f:data": {"f:a": {}}}))]
        );
        // m1 no longer owns it, so m1 re-applying its old value conflicts with m2.
        let err = apply(
            cm(),
            Some(&forced),
            cfg(json!({"a": "1"})),
            "m1",
            Subresource::Main,
            false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("conflict with \"m2\""), "{err}");
    }

    #[test]
    fn pruning_keeps_fields_others_own() {
        let first = apply(
            cm(),
            None,
            cfg(json!({"a": "1"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("create");
        let shared = apply(
            cm(),
            Some(&first),
            cfg(json!({"a": "1"})),
            "m2",
            Subresource::Main,
            false,
        )
        .expect("shared");
        let dropped = apply(
            cm(),
            Some(&shared),
            cfg(json!({})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("drop");
        assert_eq!(dropped["data"], json!({"a": "1"}));
    }

    #[test]
    fn updates_take_ownership() {
        let first = apply(
            cm(),
            None,
            cfg(json!({"a": "1", "b": "2"})),
            "m1",
            Subresource::Main,
            false,
        )
        .expect("create");
        let mut updated = first.clone();
        updated["data"]["a"] = json!("9");
        updated["data"]["c"] = json!("3");
        record_update(
            cm(),
            Some(&first),
            &mut updated,
            "kubectl-edit",
            Subresource::Main,
        );
        let got = owners(&updated);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            ("m1".to_string(), "Apply", json!({"f:data": {"f:b": {}}}))
        );
        assert_eq!(got[1].0, "kubectl-edit");
        assert_eq!(got[1].2, json!({"f:data": {"f:a": {}, "f:c": {}}}));
        let e = entries(&updated).pop().expect("entry");
        // kube-apiserver v1.37.2 names an Update manager in a conflict without a time
        // (found by tests/differential/corpus.json "acquire an orphan Lease by apply").
        assert_eq!(e.describe(), "\"kubectl-edit\" using v1");
        // Entries are kept in upstream's order: Apply first, then oldest first, then by name.
        let mut sorted = json!({"metadata": {}});
        let entry = |m: &str, op: Operation, t: &str| Entry {
            manager: m.into(),
            operation: op,
            api_version: "v1".into(),
            time: Some(t.into()),
            subresource: None,
            fields: FieldSet::from_fields_v1(&json!({"f:data": {"f:x": {}}})),
        };
        store_entries(
            &mut sorted,
            vec![
                entry("z", Operation::Update, "2026-01-01T00:00:01Z"),
                entry("bob", Operation::Apply, "2026-01-01T00:00:05Z"),
                entry("a", Operation::Update, "2026-01-01T00:00:02Z"),
                entry("alice", Operation::Apply, "2026-01-01T00:00:05Z"),
            ],
        );
        let order: Vec<String> = entries(&sorted).into_iter().map(|e| e.manager).collect();
        assert_eq!(order, ["alice", "bob", "z", "a"]);
        // A no-op update changes nothing, not even the time.
        let mut again = updated.clone();
        record_update(cm(), Some(&updated), &mut again, "other", Subresource::Main);
        assert_eq!(again, updated);
    }

    #[test]
    fn config_must_name_its_type() {
        // YAML bodies decode like JSON ones.
        let yaml = parse_config(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: \"1\"\n",
        )
        .expect("yaml");
        assert_eq!(yaml["metadata"]["name"], "c");
        assert_eq!(yaml["data"]["n"], "1");
        // Broken YAML, YAML without kind, and broken JSON are 400s with a reason.
        assert!(parse_config(b"apiVersion: v1\nkind: [unclosed\n").is_err());
        assert!(parse_config(b"apiVersion: v1\n").is_err());
        let err = parse_config(b"{\"apiVersion\": ").expect_err("truncated json");
        assert!(err.to_string().contains("error decoding YAML"), "{err}");
        assert!(parse_config(br#"{"kind":"ConfigMap"}"#).is_err());
        assert!(parse_config(br#"[1]"#).is_err());
        assert!(parse_config(br#"{"apiVersion":"v1","kind":"ConfigMap"}"#).is_ok());
    }

    #[test]
    fn managers_from_user_agents() {
        assert_eq!(
            default_manager(None, "kubectl/v1.32.4 (linux/amd64)"),
            "kubectl"
        );
        assert_eq!(default_manager(Some("x"), "kubectl/v1"), "x");
        // kube-apiserver v1.37.2 records "unknown" for a request without a User-Agent
        // (found by the differential corpus, whose reqwest client sends none).
        assert_eq!(default_manager(Some(""), ""), "unknown");
        assert_eq!(default_manager(None, "\u{7}bell/1"), "bell");
        assert_eq!(default_manager(None, &"é".repeat(100)).len(), 128);
    }
}
