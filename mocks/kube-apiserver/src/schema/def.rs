//! The building blocks of the schema tables: list facts ([`List`], [`ListStrategy`],
//! [`ListType`]), fields and type definitions (`TypeDef`) and the `const fn`s the
//! tables are written with.
//!
//! Why this exists: every per-group table is written with these, and the lookups in
//! `schema` read them; they depend on nothing else.

/// How strategic merge patch treats a list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// No patch strategy: the patch list replaces the live list (also `+listType=atomic`).
    Atomic,
    /// `patchStrategy:"merge"` on a list of primitives: a set union; remove items with
    /// `$deleteFromPrimitiveList/<field>`.
    MergeSet,
    /// `patchStrategy:"merge" patchMergeKey:"<key>"` on a list of objects.
    MergeKey(&'static str),
}

impl ListStrategy {
    /// Upstream's `GetPatchMergeKey()`: empty unless keyed.
    pub fn merge_key(self) -> &'static str {
        match self {
            ListStrategy::MergeKey(k) => k,
            _ => "",
        }
    }

    /// Whether the list merges (upstream `patchStrategy == "merge"`).
    pub fn merges(self) -> bool {
        !matches!(self, ListStrategy::Atomic)
    }
}

/// How server-side apply treats a list (`+listType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map(&'static [&'static str]),
}

/// The facts of one list field: its strategic-merge strategy, its server-side-apply list
/// type, and the `x-kubernetes-patch-strategy`/`-merge-key` the OpenAPI documents
/// publish for it. Built with [`atomic`], [`merge_set`] or [`keyed`], which derive the
/// other two facts from the patch strategy as upstream's tags usually agree; the
/// methods state where they do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct List {
    pub patch: ListStrategy,
    pub list_type: ListType,
    published: Option<(&'static str, Option<&'static str>)>,
}

/// No patch strategy, `+listType=atomic`.
pub(super) const fn atomic() -> List {
    List {
        patch: ListStrategy::Atomic,
        list_type: ListType::Atomic,
        published: None,
    }
}

/// `patchStrategy:"merge"` on primitives, `+listType=set`.
pub(super) const fn merge_set() -> List {
    List {
        patch: ListStrategy::MergeSet,
        list_type: ListType::Set,
        published: Some(("merge", None)),
    }
}

/// `patchStrategy:"merge" patchMergeKey:"<keys[0]>"`, `+listType=map` with `keys` as its
/// `+listMapKey`s.
pub(super) const fn keyed(keys: &'static [&'static str]) -> List {
    List {
        patch: ListStrategy::MergeKey(keys[0]),
        list_type: ListType::Map(keys),
        published: Some(("merge", Some(keys[0]))),
    }
}

impl List {
    /// `+listType` differs from what the patch tags imply.
    pub(super) const fn list_type(self, list_type: ListType) -> List {
        List { list_type, ..self }
    }

    /// `patchStrategy:"merge,retainKeys"`: published so; strategic merge here merges by
    /// key without clearing the retained keys.
    pub(super) const fn retain_keys(self) -> List {
        List {
            published: match self.published {
                Some((_, key)) => Some(("merge,retainKeys", key)),
                None => None,
            },
            ..self
        }
    }

    /// The OpenAPI documents publish other patch metadata than the strategy used.
    pub(super) const fn published(self, published: (&'static str, Option<&'static str>)) -> List {
        List {
            published: Some(published),
            ..self
        }
    }

    /// The OpenAPI documents publish no patch metadata for this list.
    pub(super) const fn unpublished(self) -> List {
        List {
            published: None,
            ..self
        }
    }

    /// `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`, if published.
    pub fn openapi_patch(&self) -> Option<(&'static str, Option<&'static str>)> {
        self.published
    }
}

/// One field of a schema: name, type spec, description.
///
/// Type specs: `string`, `integer`, `boolean`, `time` (date-time string), `map`
/// (string to string), `object` (free-form), `[]<spec>` (array), or the short
/// name of another [`TypeDef`] (`core.v1.NodeSpec`, `meta.v1.ObjectMeta`).
pub(crate) type Field = (&'static str, &'static str, &'static str);

/// A named object schema; `kind` is set for the served top-level types. `lists` holds
/// the list fields with merge semantics; it may name list fields that `fields` leaves
/// out (the OpenAPI documents list the main fields only).
pub(crate) struct TypeDef {
    pub(crate) name: &'static str,
    pub(crate) kind: Option<(&'static str, &'static str, &'static str)>,
    pub(crate) description: &'static str,
    pub(crate) fields: &'static [Field],
    pub(crate) lists: &'static [(&'static str, List)],
}

pub(super) const fn ty(
    name: &'static str,
    description: &'static str,
    fields: &'static [Field],
) -> TypeDef {
    TypeDef {
        name,
        kind: None,
        description,
        fields,
        lists: &[],
    }
}

pub(super) const fn kind(
    name: &'static str,
    gvk: (&'static str, &'static str, &'static str),
    description: &'static str,
    fields: &'static [Field],
) -> TypeDef {
    TypeDef {
        name,
        kind: Some(gvk),
        description,
        fields,
        lists: &[],
    }
}

impl TypeDef {
    /// Sets the list facts (k8s.io/api struct tags of this type).
    pub(super) const fn lists(self, lists: &'static [(&'static str, List)]) -> TypeDef {
        TypeDef { lists, ..self }
    }

    /// The facts of the list field `name`, if it has merge semantics.
    pub(crate) fn list(&self, name: &str) -> Option<&'static List> {
        self.lists.iter().find(|(f, _)| *f == name).map(|(_, l)| l)
    }
}

pub(super) const META: Field = (
    "metadata",
    "meta.v1.ObjectMeta",
    "Standard object metadata.",
);
