//! Field paths and field sets, the vocabulary of server-side apply.
//!
//! Why this exists: server-side apply records which manager owns which field in
//! `metadata.managedFields`, in structured-merge-diff's `FieldsV1` trie (`f:` field,
//! `k:` keyed list item, `v:` set item, `i:` index, `.` for "the node itself"), and
//! reports conflicts with paths printed as `.spec.ports[port=80,protocol="TCP"]`.
//! This module turns objects into sets of owned paths, encodes and decodes the trie,
//! and reads or removes the value at a path. The list types (atomic, set, map with
//! keys) of the kinds we serve come from [`crate::schema`]; everything else is atomic,
//! as upstream treats lists without `+listType` (sigs.k8s.io/structured-merge-diff
//! fieldpath/serialize.go, fieldpath/element.go, typed/tofieldset.go).

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

pub use crate::schema::ListType;
use crate::schema::list_type;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    /// A field of a struct or map (`f:name`).
    Field(String),
    /// An item of an associative list, by its key fields (`k:{"port":80}`); pairs are
    /// (name, JSON-encoded value), sorted by name.
    Key(Vec<(String, String)>),
    /// An item of a set list, by its JSON-encoded value (`v:"a"`).
    Value(String),
    /// An item of an atomic list by position (`i:0`); only decoded, never produced.
    Index(usize),
}

/// A path from the object root.
pub type Path = Vec<Element>;

impl Element {
    /// The `FieldsV1` key of this element.
    fn encode(&self) -> String {
        match self {
            Element::Field(f) => format!("f:{f}"),
            Element::Key(pairs) => {
                let inner: Vec<String> = pairs
                    .iter()
                    .map(|(k, v)| {
                        let k = serde_json::to_string(k).unwrap_or_default();
                        format!("{k}:{v}")
                    })
                    .collect();
                format!("k:{{{}}}", inner.join(","))
            }
            Element::Value(v) => format!("v:{v}"),
            Element::Index(i) => format!("i:{i}"),
        }
    }

    /// Parse a `FieldsV1` key; `None` for anything malformed.
    fn decode(key: &str) -> Option<Element> {
        let (kind, rest) = key.split_once(':')?;
        match kind {
            "f" => Some(Element::Field(rest.to_string())),
            "v" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(Element::Value(v.to_string()))
            }
            "i" => rest.parse().ok().map(Element::Index),
            "k" => {
                let Value::Object(map) = serde_json::from_str(rest).ok()? else {
                    return None;
                };
                let mut pairs: Vec<(String, String)> =
                    map.into_iter().map(|(k, v)| (k, v.to_string())).collect();
                pairs.sort();
                Some(Element::Key(pairs))
            }
            _ => None,
        }
    }
}

/// structured-merge-diff `PathElement.String()`: `.name`, `[k=v,...]`, `[=v]`, `[i]`.
impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Element::Field(name) => write!(f, ".{name}"),
            Element::Key(pairs) => {
                let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", inner.join(","))
            }
            Element::Value(v) => write!(f, "[={v}]"),
            Element::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path as upstream prints it in conflict messages.
pub fn path_string(path: &[Element]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Key fields that have a default the server fills in (`protocol: TCP`), so an applied
/// item that leaves them out still matches the stored item.
fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".into()))
}

/// The key element of `item` in a list keyed by `keys`; `None` when the item is not an
/// object.
pub fn item_key(item: &Value, keys: &[&str]) -> Option<Element> {
    let obj = item.as_object()?;
    let mut pairs: Vec<(String, String)> = keys
        .iter()
        .filter_map(|k| {
            let v = match obj.get(*k) {
                Some(v) => v.to_string(),
                None => key_default(k)?.to_string(),
            };
            Some((k.to_string(), v))
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    pairs.sort();
    Some(Element::Key(pairs))
}

/// Metadata that no manager owns (structured-merge-diff's stripped fields, apiserver
/// pkg/util/managedfields/internal/stripmeta.go).
const STRIPPED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// A set of owned paths. A path is a member when it is owned itself (leaves, atomic
/// lists, keyed and set items); parents of members are implied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

impl FieldSet {
    /// Every leaf and list item of `obj`, as upstream's `TypedValue.ToFieldSet`.
    /// `apiVersion`, `kind` and the system metadata are left out.
    pub fn of(kind: &str, obj: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Some(map) = obj.as_object() {
            for (k, v) in map {
                if k == "apiVersion" || k == "kind" {
                    continue;
                }
                if k == "metadata"
                    && let Some(meta) = v.as_object()
                {
                    for (mk, mv) in meta {
                        if !STRIPPED_META.contains(&mk.as_str()) {
                            let path = vec![Element::Field(k.clone()), Element::Field(mk.clone())];
                            let mut fields = vec![k.clone(), mk.clone()];
                            set.walk(kind, path, &mut fields, mv);
                        }
                    }
                    continue;
                }
                set.walk(
                    kind,
                    vec![Element::Field(k.clone())],
                    &mut vec![k.clone()],
                    v,
                );
            }
        }
        set
    }

    fn walk(&mut self, kind: &str, path: Path, fields: &mut Vec<String>, v: &Value) {
        match v {
            Value::Object(map) if !map.is_empty() => self.walk_map(kind, &path, fields, map),
            Value::Array(items) if !items.is_empty() => match list_type(kind, fields) {
                ListType::Map(keys) if items.iter().all(|i| item_key(i, keys).is_some()) => {
                    for item in items {
                        let Some(key) = item_key(item, keys) else {
                            continue;
                        };
                        let mut item_path = path.clone();
                        item_path.push(key);
                        self.0.insert(item_path.clone());
                        if let Some(map) = item.as_object() {
                            self.walk_map(kind, &item_path, fields, map);
                        }
                    }
                }
                ListType::Set => {
                    for item in items {
                        let mut item_path = path.clone();
                        item_path.push(Element::Value(item.to_string()));
                        self.0.insert(item_path);
                    }
                }
                _ => {
                    self.0.insert(path);
                }
            },
            _ => {
                self.0.insert(path);
            }
        }
    }

    fn walk_map(
        &mut self,
        kind: &str,
        path: &[Element],
        fields: &mut Vec<String>,
        map: &Map<String, Value>,
    ) {
        for (k, child) in map {
            let mut child_path = path.to_vec();
            child_path.push(Element::Field(k.clone()));
            fields.push(k.clone());
            self.walk(kind, child_path, fields, child);
            fields.pop();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, path: &[Element]) -> bool {
        self.0.contains(path)
    }

    /// Whether a member equals `path` or lies below it.
    pub fn touches(&self, path: &[Element]) -> bool {
        self.0.iter().any(|p| p.starts_with(path))
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// The `FieldsV1` trie. Built from the sorted set in one pass: the paths under one
    /// element are adjacent, so each trie node's key is encoded once.
    pub fn to_fields_v1(&self) -> Value {
        let paths: Vec<&[Element]> = self.0.iter().map(Vec::as_slice).collect();
        Value::Object(trie(&paths))
    }

    /// Decode a `FieldsV1` trie; malformed keys are skipped.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Some(map) = v.as_object() {
            decode_into(&mut set, &mut Vec::new(), map);
        }
        set
    }
}

/// `FieldSet::of(kind, obj).to_fields_v1()` built in one walk over `obj`, without the
/// set of paths in between: every create records one, and for a Node (about 70 owned
/// fields, each a `Vec` of elements in a `BTreeSet`) the set and its encoding were most
/// of the cost. `None` where a keyed list holds two items with the same key (the set
/// merges them; callers then take the set's way).
pub fn fields_v1_of(kind: &str, obj: &Value) -> Option<Value> {
    let mut root = Map::new();
    if let Some(map) = obj.as_object() {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            let mut fields = vec![k.clone()];
            if k == "metadata"
                && let Some(meta) = v.as_object()
            {
                let mut node = Map::new();
                for (mk, mv) in meta {
                    if !STRIPPED_META.contains(&mk.as_str()) {
                        fields.push(mk.clone());
                        let child = node_of(kind, &mut fields, mv)?;
                        fields.pop();
                        insert_node(&mut node, format!("f:{mk}"), child);
                    }
                }
                if !node.is_empty() {
                    root.insert(format!("f:{k}"), Value::Object(node));
                }
                continue;
            }
            let child = node_of(kind, &mut fields, v)?;
            insert_node(&mut root, format!("f:{k}"), child);
        }
    }
    Some(Value::Object(root))
}

/// The trie node of a value as [`FieldSet::walk`] sees it: whether its path is a member
/// itself, and the nodes below it.
fn node_of(kind: &str, fields: &mut Vec<String>, v: &Value) -> Option<(bool, Map<String, Value>)> {
    let mut children = Map::new();
    match v {
        Value::Object(map) if !map.is_empty() => {
            map_nodes(kind, fields, map, &mut children)?;
            Some((false, children))
        }
        Value::Array(items) if !items.is_empty() => match list_type(kind, fields) {
            ListType::Map(keys) if items.iter().all(|i| item_key(i, keys).is_some()) => {
                for item in items {
                    let key = item_key(item, keys)?.encode();
                    if children.contains_key(&key) {
                        return None;
                    }
                    let mut below = Map::new();
                    if let Some(map) = item.as_object() {
                        map_nodes(kind, fields, map, &mut below)?;
                    }
                    insert_node(&mut children, key, (true, below));
                }
                Some((false, children))
            }
            ListType::Set => {
                for item in items {
                    children.insert(
                        Element::Value(item.to_string()).encode(),
                        Value::Object(Map::new()),
                    );
                }
                Some((false, children))
            }
            _ => Some((true, children)),
        },
        _ => Some((true, children)),
    }
}

fn map_nodes(
    kind: &str,
    fields: &mut Vec<String>,
    map: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Option<()> {
    for (k, child) in map {
        fields.push(k.clone());
        let node = node_of(kind, fields, child)?;
        fields.pop();
        insert_node(out, format!("f:{k}"), node);
    }
    Some(())
}

/// Puts a node under `key` the way [`trie`] writes it: a member with children carries
/// ".", a member without is `{}`, a non-member without children is left out.
fn insert_node(
    parent: &mut Map<String, Value>,
    key: String,
    (member, mut children): (bool, Map<String, Value>),
) {
    if children.is_empty() && !member {
        return;
    }
    if member && !children.is_empty() {
        children.insert(".".into(), Value::Object(Map::new()));
    }
    parent.insert(key, Value::Object(children));
}

/// The trie of `paths` (sorted, non-empty): one key per distinct first element; a
/// member that also has children carries ".".
fn trie(paths: &[&[Element]]) -> Map<String, Value> {
    let mut node = Map::new();
    let mut i = 0;
    while i < paths.len() {
        let Some(first) = paths[i].first() else {
            i += 1;
            continue;
        };
        let mut member = false;
        let mut tails: Vec<&[Element]> = Vec::new();
        while let Some(p) = paths.get(i).filter(|p| p.first() == Some(first)) {
            if p.len() == 1 {
                member = true;
            } else {
                tails.push(&p[1..]);
            }
            i += 1;
        }
        let mut child = trie(&tails);
        if member && !tails.is_empty() {
            child.insert(".".into(), Value::Object(Map::new()));
        }
        node.insert(first.encode(), Value::Object(child));
    }
    node
}

/// Whether `trie` is exactly what encoding its decoded set gives ([`FieldSet::to_fields_v1`]
/// of [`FieldSet::from_fields_v1`]): every key decodes and encodes back to itself, every
/// value is an object, and "." marks only nodes that also have children. Checked without
/// building the set, so a stored entry an update does not touch, or touches in a few
/// places ([`remove_from_fields_v1`]), can be kept encoded.
pub fn is_canonical_fields_v1(trie: &Map<String, Value>) -> bool {
    canonical_node(trie, true)
}

fn canonical_node(map: &Map<String, Value>, root: bool) -> bool {
    if let Some(dot) = map.get(".")
        && (root || map.len() == 1 || dot.as_object().is_none_or(|d| !d.is_empty()))
    {
        return false;
    }
    map.iter().all(|(k, child)| {
        if k == "." {
            return true;
        }
        // `f:` keys always encode back to themselves; the others are compared.
        let key_ok = k.starts_with("f:") || Element::decode(k).is_some_and(|el| el.encode() == *k);
        key_ok && child.as_object().is_some_and(|c| canonical_node(c, false))
    })
}

/// Removes `path` from a canonical `FieldsV1` trie if it is a member (a no-op
/// otherwise), leaving the canonical trie of the set without it.
pub fn remove_from_fields_v1(node: &mut Map<String, Value>, path: &[Element]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let key = first.encode();
    let Some(Value::Object(child)) = node.get_mut(&key) else {
        return;
    };
    if rest.is_empty() {
        if child.is_empty() {
            node.remove(&key);
        } else {
            // A member with children stays as their parent; a non-member is not removed.
            child.remove(".");
        }
        return;
    }
    remove_from_fields_v1(child, rest);
    if child.is_empty() {
        node.remove(&key);
    } else if child.len() == 1 && child.contains_key(".") {
        child.clear();
    }
}

fn decode_into(set: &mut FieldSet, prefix: &mut Path, map: &Map<String, Value>) {
    for (k, child) in map {
        if k == "." {
            continue;
        }
        let Some(el) = Element::decode(k) else {
            continue;
        };
        prefix.push(el);
        match child.as_object() {
            Some(children) if children.keys().any(|c| c != ".") => {
                if children.contains_key(".") {
                    set.0.insert(prefix.clone());
                }
                decode_into(set, prefix, children);
            }
            _ => {
                set.0.insert(prefix.clone());
            }
        }
        prefix.pop();
    }
}

/// Whether `item` is the value whose JSON encoding is `encoded` (a set element).
fn is_encoded(item: &Value, encoded: &str) -> bool {
    serde_json::from_str::<Value>(encoded).is_ok_and(|v| v == *item)
}

/// The value at `path` in `obj`.
pub fn get<'a>(kind: &str, obj: &'a Value, path: &[Element]) -> Option<&'a Value> {
    let mut cur = obj;
    let mut fields: Vec<String> = Vec::new();
    for el in path {
        cur = match el {
            Element::Field(f) => {
                fields.push(f.clone());
                cur.as_object()?.get(f)?
            }
            Element::Key(_) => {
                let ListType::Map(keys) = list_type(kind, &fields) else {
                    return None;
                };
                cur.as_array()?
                    .iter()
                    .find(|i| item_key(i, keys).as_ref() == Some(el))?
            }
            Element::Value(v) => cur.as_array()?.iter().find(|i| is_encoded(i, v))?,
            Element::Index(i) => cur.as_array()?.get(*i)?,
        };
    }
    Some(cur)
}

/// Remove the value at `path` from `obj`; a missing path is not an error.
pub fn remove(kind: &str, obj: &mut Value, path: &[Element]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let fields: Vec<String> = parent_path
        .iter()
        .filter_map(|e| match e {
            Element::Field(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    let Some(parent) = get_mut(kind, obj, parent_path) else {
        return;
    };
    match last {
        Element::Field(f) => {
            if let Some(map) = parent.as_object_mut() {
                map.remove(f);
            }
        }
        Element::Key(_) => {
            if let (ListType::Map(keys), Some(items)) =
                (list_type(kind, &fields), parent.as_array_mut())
            {
                items.retain(|i| item_key(i, keys).as_ref() != Some(last));
            }
        }
        Element::Value(v) => {
            if let Some(items) = parent.as_array_mut() {
                items.retain(|i| !is_encoded(i, v));
            }
        }
        Element::Index(_) => {}
    }
}

fn get_mut<'a>(kind: &str, obj: &'a mut Value, path: &[Element]) -> Option<&'a mut Value> {
    let mut cur = obj;
    let mut fields: Vec<String> = Vec::new();
    for el in path {
        cur = match el {
            Element::Field(f) => {
                fields.push(f.clone());
                cur.as_object_mut()?.get_mut(f)?
            }
            Element::Key(_) => {
                let ListType::Map(keys) = list_type(kind, &fields) else {
                    return None;
                };
                cur.as_array_mut()?
                    .iter_mut()
                    .find(|i| item_key(i, keys).as_ref() == Some(el))?
            }
            Element::Value(v) => cur.as_array_mut()?.iter_mut().find(|i| is_encoded(i, v))?,
            Element::Index(i) => cur.as_array_mut()?.get_mut(*i)?,
        };
    }
    Some(cur)
}

/// Paths of `new` that are absent from `old` or hold a different value there
/// (structured-merge-diff `Compare`'s Added ∪ Modified). Keyed items count as changed
/// only when they are new; their fields are compared one by one.
pub fn changed(kind: &str, old: Option<&Value>, new: &Value) -> FieldSet {
    changed_in(kind, old, new, FieldSet::of(kind, new))
}

/// [`changed`] when the caller already has `FieldSet::of(kind, new)`.
pub fn changed_in(kind: &str, old: Option<&Value>, new: &Value, new_set: FieldSet) -> FieldSet {
    let Some(old) = old else {
        return new_set;
    };
    FieldSet(
        new_set
            .0
            .into_iter()
            .filter(|p| {
                let before = get(kind, old, p);
                match p.last() {
                    Some(Element::Key(_) | Element::Value(_)) => before.is_none(),
                    _ => before != get(kind, new, p),
                }
            })
            .collect(),
    )
}

/// What an update did to the owned fields: the paths [`changed`] returns, and the paths
/// of `old` that `new` no longer has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    pub changed: FieldSet,
    pub removed: FieldSet,
}

/// `changed(kind, Some(old), new)` and `FieldSet::of(old) − FieldSet::of(new)`, computed in
/// one walk over both objects that descends only where they differ, so an update that
/// touches a few fields costs about as much as those fields rather than two whole-object
/// field sets and a lookup per path. Subtrees whose shapes differ (a map became a list,
/// keyed lists with duplicate keys) fall back to the whole-set rule on that subtree only.
pub fn diff(kind: &str, old: &Value, new: &Value) -> Diff {
    let mut d = Differ {
        kind,
        old_root: old,
        new_root: new,
        out: Diff::default(),
    };
    let old_entries = root_entries(old);
    let new_entries = root_entries(new);
    for (path, fields, nv) in &new_entries {
        match old_entries.iter().find(|(p, _, _)| p == path) {
            Some((_, _, ov)) => d.value(path, &mut fields.clone(), ov, nv),
            None => d
                .out
                .changed
                .walk(kind, path.clone(), &mut fields.clone(), nv),
        }
    }
    for (path, fields, ov) in &old_entries {
        if !new_entries.iter().any(|(p, _, _)| p == path) {
            d.out
                .removed
                .walk(kind, path.clone(), &mut fields.clone(), ov);
        }
    }
    d.out
}

/// The top-level values [`FieldSet::of`] walks, with their paths and field names.
fn root_entries(obj: &Value) -> Vec<(Path, Vec<String>, &Value)> {
    let mut out = Vec::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (k, v) in map {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        if k == "metadata"
            && let Some(meta) = v.as_object()
        {
            for (mk, mv) in meta {
                if !STRIPPED_META.contains(&mk.as_str()) {
                    let path = vec![Element::Field(k.clone()), Element::Field(mk.clone())];
                    out.push((path, vec![k.clone(), mk.clone()], mv));
                }
            }
            continue;
        }
        out.push((vec![Element::Field(k.clone())], vec![k.clone()], v));
    }
    out
}

/// How [`FieldSet::walk`] treats a value.
enum Shape<'a> {
    Map(&'a Map<String, Value>),
    Keyed(&'static [&'static str], &'a [Value]),
    Set(&'a [Value]),
    Leaf,
}

fn shape<'a>(kind: &str, fields: &[String], v: &'a Value) -> Shape<'a> {
    match v {
        Value::Object(map) if !map.is_empty() => Shape::Map(map),
        Value::Array(items) if !items.is_empty() => match list_type(kind, fields) {
            ListType::Map(keys) if items.iter().all(|i| item_key(i, keys).is_some()) => {
                Shape::Keyed(keys, items)
            }
            ListType::Set => Shape::Set(items),
            _ => Shape::Leaf,
        },
        _ => Shape::Leaf,
    }
}

/// Items of a keyed list by key; `None` when two items share a key.
fn keyed_items<'a>(items: &'a [Value], keys: &[&str]) -> Option<Vec<(Element, &'a Value)>> {
    let mut out: Vec<(Element, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let key = item_key(item, keys)?;
        if out.iter().any(|(k, _)| *k == key) {
            return None;
        }
        out.push((key, item));
    }
    Some(out)
}

struct Differ<'r> {
    kind: &'r str,
    old_root: &'r Value,
    new_root: &'r Value,
    out: Diff,
}

impl Differ<'_> {
    fn value(&mut self, path: &[Element], fields: &mut Vec<String>, old: &Value, new: &Value) {
        if old == new {
            return;
        }
        let kind = self.kind;
        match (shape(kind, fields, old), shape(kind, fields, new)) {
            (Shape::Map(o), Shape::Map(n)) => self.map(path, fields, o, n),
            (Shape::Leaf, Shape::Leaf) => {
                self.out.changed.0.insert(path.to_vec());
            }
            (Shape::Set(o), Shape::Set(n)) => {
                for item in n {
                    if !o.contains(item) {
                        let mut p = path.to_vec();
                        p.push(Element::Value(item.to_string()));
                        self.out.changed.0.insert(p);
                    }
                }
                let new_encoded: BTreeSet<String> = n.iter().map(Value::to_string).collect();
                for item in o {
                    let encoded = item.to_string();
                    if !new_encoded.contains(&encoded) {
                        let mut p = path.to_vec();
                        p.push(Element::Value(encoded));
                        self.out.removed.0.insert(p);
                    }
                }
            }
            (Shape::Keyed(keys, o), Shape::Keyed(_, n)) => {
                match (keyed_items(o, keys), keyed_items(n, keys)) {
                    (Some(o), Some(n)) => self.keyed(path, fields, &o, &n),
                    _ => self.whole(path, fields, old, new),
                }
            }
            _ => self.whole(path, fields, old, new),
        }
    }

    fn map(
        &mut self,
        path: &[Element],
        fields: &mut Vec<String>,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) {
        let kind = self.kind;
        for (k, nv) in new {
            let mut child = path.to_vec();
            child.push(Element::Field(k.clone()));
            fields.push(k.clone());
            match old.get(k) {
                Some(ov) => self.value(&child, fields, ov, nv),
                None => self.out.changed.walk(kind, child, fields, nv),
            }
            fields.pop();
        }
        for (k, ov) in old {
            if !new.contains_key(k) {
                let mut child = path.to_vec();
                child.push(Element::Field(k.clone()));
                fields.push(k.clone());
                self.out.removed.walk(kind, child, fields, ov);
                fields.pop();
            }
        }
    }

    /// Keyed items: the item's own path is new or gone, its fields compare one by one.
    fn keyed(
        &mut self,
        path: &[Element],
        fields: &mut Vec<String>,
        old: &[(Element, &Value)],
        new: &[(Element, &Value)],
    ) {
        for (key, nv) in new {
            let mut item = path.to_vec();
            item.push(key.clone());
            let empty = Map::new();
            let n = nv.as_object().unwrap_or(&empty);
            match old.iter().find(|(k, _)| k == key) {
                Some((_, ov)) => {
                    if ov != nv {
                        let o = ov.as_object().unwrap_or(&empty);
                        self.map(&item, fields, o, n);
                    }
                }
                None => {
                    self.out.changed.0.insert(item.clone());
                    self.out.changed.walk_map(self.kind, &item, fields, n);
                }
            }
        }
        for (key, ov) in old {
            if !new.iter().any(|(k, _)| k == key) {
                let mut item = path.to_vec();
                item.push(key.clone());
                let empty = Map::new();
                let o = ov.as_object().unwrap_or(&empty);
                self.out.removed.0.insert(item.clone());
                self.out.removed.walk_map(self.kind, &item, fields, o);
            }
        }
    }

    /// The whole-set rule on one subtree.
    fn whole(&mut self, path: &[Element], fields: &mut Vec<String>, old: &Value, new: &Value) {
        let mut old_set = FieldSet::default();
        old_set.walk(self.kind, path.to_vec(), fields, old);
        let mut new_set = FieldSet::default();
        new_set.walk(self.kind, path.to_vec(), fields, new);
        for p in old_set.0.difference(&new_set.0) {
            self.out.removed.0.insert(p.clone());
        }
        for p in new_set.0 {
            let before = get(self.kind, self.old_root, &p);
            let is_changed = match p.last() {
                Some(Element::Key(_) | Element::Value(_)) => before.is_none(),
                _ => before != get(self.kind, self.new_root, &p),
            };
            if is_changed {
                self.out.changed.0.insert(p);
            }
        }
    }
}

/// Structured merge of an applied configuration into the live object: maps merge
/// field by field, associative lists by key, set lists by value, everything else is
/// replaced (structured-merge-diff merge/update.go with `typed.Merge`).
pub fn merge(kind: &str, live: &Value, config: &Value) -> Value {
    merge_at(kind, &mut Vec::new(), live, config)
}

fn merge_at(kind: &str, fields: &mut Vec<String>, live: &Value, config: &Value) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                fields.push(k.clone());
                let merged = match l.get(k) {
                    Some(lv) => merge_at(kind, fields, lv, cv),
                    None => cv.clone(),
                };
                fields.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => match list_type(kind, fields) {
            ListType::Map(keys) if l.iter().chain(c).all(|i| item_key(i, keys).is_some()) => {
                let mut out = l.clone();
                for item in c {
                    let key = item_key(item, keys);
                    match out.iter().position(|o| item_key(o, keys) == key) {
                        Some(i) => out[i] = merge_at(kind, fields, &out[i], item),
                        None => out.push(item.clone()),
                    }
                }
                Value::Array(out)
            }
            ListType::Set => {
                let mut out = l.clone();
                for item in c {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                Value::Array(out)
            }
            _ => config.clone(),
        },
        _ => config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> Element {
        Element::Field(name.into())
    }

    #[test]
    fn field_set_of_a_service() {
        let svc = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "labels": {"app": "a"}, "resourceVersion": "3"},
            "spec": {"ports": [{"port": 80, "name": "http"}], "selector": {"app": "a"}},
        });
        let set = FieldSet::of("Service", &svc);
        let got = set.to_fields_v1();
        assert_eq!(
            got,
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}},
                    "f:selector": {"f:app": {}},
                },
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&got), set);
        let item = vec![
            f("spec"),
            f("ports"),
            Element::Key(vec![
                ("port".into(), "80".into()),
                ("protocol".into(), "\"TCP\"".into()),
            ]),
        ];
        assert!(set.contains(&item));
        assert_eq!(path_string(&item), ".spec.ports[port=80,protocol=\"TCP\"]");
        assert_eq!(
            get("Service", &svc, &item).map(|v| &v["name"]),
            Some(&json!("http"))
        );
    }

    #[test]
    fn conditions_are_keyed_and_finalizers_are_sets() {
        let node = json!({
            "metadata": {"finalizers": ["a"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "InternalIP"}]},
        });
        let v1 = FieldSet::of("Node", &node).to_fields_v1();
        assert_eq!(
            v1,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}},
                "f:status": {
                    "f:addresses": {},
                    "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
                },
            })
        );
        assert_eq!(fields_v1_of("Node", &node), Some(v1));
    }

    #[test]
    fn canonical_tries_and_edits_in_place() {
        let canonical = |v: Value| is_canonical_fields_v1(v.as_object().expect("object"));
        assert!(canonical(json!({})));
        assert!(canonical(
            json!({"f:a": {}, "f:b": {".": {}, "f:c": {}}, "k:{\"type\":\"Ready\"}": {}})
        ));
        // Each of these decodes and encodes to something else.
        for odd in [
            json!({".": {}}),
            json!({"f:a": {".": {}}}),
            json!({"f:a": {".": 1, "f:b": {}}}),
            json!({"f:a": 1}),
            json!({"i:007": {}}),
            json!({"k:{\"type\": \"Ready\"}": {}}),
            json!({"x:y": {}}),
        ] {
            assert!(!canonical(odd.clone()), "{odd}");
            assert_ne!(FieldSet::from_fields_v1(&odd).to_fields_v1(), odd);
        }
        // A member with children keeps them; a parent left with no members goes.
        let mut trie = json!({"f:a": {".": {}, "f:b": {}}, "f:c": {"f:d": {}}})
            .as_object()
            .cloned()
            .expect("object");
        remove_from_fields_v1(&mut trie, &[f("a")]);
        remove_from_fields_v1(&mut trie, &[f("c"), f("d")]);
        remove_from_fields_v1(&mut trie, &[f("x"), f("y")]);
        assert_eq!(Value::Object(trie.clone()), json!({"f:a": {"f:b": {}}}));
        let mut member = json!({"f:a": {".": {}, "f:b": {}}})
            .as_object()
            .cloned()
            .expect("object");
        remove_from_fields_v1(&mut member, &[f("a"), f("b")]);
        assert_eq!(Value::Object(member), json!({"f:a": {}}));
    }

    #[test]
    fn fields_v1_of_encodes_like_the_set() {
        let svc = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "uid": "u", "labels": {"app": "a"}, "annotations": {}},
            "spec": {"ports": [{"port": 80, "name": "h", "targetPort": 8080}, {"port": 53, "protocol": "UDP"}],
                     "selector": {"app": "a"}, "clusterIPs": [], "type": "ClusterIP"},
        });
        assert_eq!(
            fields_v1_of("Service", &svc),
            Some(FieldSet::of("Service", &svc).to_fields_v1())
        );
        // Only stripped metadata: no `f:metadata` at all, as the set has no path there.
        let bare = json!({"metadata": {"name": "n"}, "spec": {}});
        assert_eq!(fields_v1_of("Node", &bare), Some(json!({"f:spec": {}})));
        assert_eq!(
            FieldSet::of("Node", &bare).to_fields_v1(),
            json!({"f:spec": {}})
        );
        // Two conditions of one type: the set merges them, the direct walk declines.
        let twice = json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Ready", "reason": "r"}]}});
        assert_eq!(fields_v1_of("Node", &twice), None);
    }

    #[test]
    fn malformed_fields_v1_is_skipped_not_fatal() {
        let set = FieldSet::from_fields_v1(&json!({"x:1": {}, "k:[1]": {}, "f:a": 5, "v:{": {}}));
        assert_eq!(set.0.len(), 1);
        assert!(set.contains(&[f("a")]));
    }

    #[test]
    fn merge_and_remove() {
        let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001}], "type": "NodePort"},
                          "metadata": {"finalizers": ["a"]}});
        let config = json!({"spec": {"ports": [{"port": 80, "name": "h"}, {"port": 81}]},
                            "metadata": {"finalizers": ["b", "a"]}});
        let mut merged = merge("Service", &live, &config);
        assert_eq!(
            merged,
            json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001, "name": "h"}, {"port": 81}], "type": "NodePort"},
                   "metadata": {"finalizers": ["a", "b"]}})
        );
        let changed = changed("Service", Some(&live), &merged);
        let paths: Vec<String> = changed.0.iter().map(|p| path_string(p)).collect();
        assert_eq!(
            paths,
            [
                ".metadata.finalizers[=\"b\"]",
                ".spec.ports[port=80,protocol=\"TCP\"].name",
                ".spec.ports[port=81,protocol=\"TCP\"]",
                ".spec.ports[port=81,protocol=\"TCP\"].port",
            ]
        );
        let item81 = vec![
            f("spec"),
            f("ports"),
            item_key(&json!({"port": 81}), &["port", "protocol"]).expect("key"),
        ];
        remove("Service", &mut merged, &item81);
        remove("Service", &mut merged, &[f("spec"), f("type")]);
        remove("Service", &mut merged, &[f("nope"), f("x")]);
        assert_eq!(
            merged["spec"],
            json!({"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001, "name": "h"}]})
        );
    }
}
