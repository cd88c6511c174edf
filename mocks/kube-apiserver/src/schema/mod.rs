//! The schema facts of the served kinds, in one table per API group (`types()` walks
//! them all): for every kind and the types it nests, its fields with their types, and how
//! each list field merges.
//!
//! Why this exists: upstream states these facts once, in the Go types (k8s.io/api
//! `*/types.go`, apimachinery pkg/apis/meta/v1/types.go): field types, the
//! `patchStrategy`/`patchMergeKey` struct tags and the `+listType`/`+listMapKey`
//! markers. Three parts of this server read them: the OpenAPI documents and field
//! validation ([`crate::openapi`]), strategic merge patch ([`crate::patch::strategic`])
//! and server-side apply ([`crate::fieldpath`], [`crate::apply`]). Keeping them in one
//! table means a new kind or field is added here only. A list field found nowhere in the
//! table is atomic, as upstream treats untagged lists; a path is resolved by walking the
//! field types from the kind ([`list_at`]).
//!
//! Layout: [`def`] has the building blocks; the tables are one per API group (`core_v1`,
//! `events` for both Event kinds, `coordination`, `discovery`, `rbac`, `apps`, `meta_v1`),
//! searched in that order; the lookups are here.

mod apps;
mod coordination;
mod core_v1;
pub mod def;
mod discovery;
mod events;
mod meta_v1;
mod rbac;

use crate::resources::ResourceDesc;
use def::META;
pub(crate) use def::TypeDef;
pub use def::{List, ListStrategy, ListType};

/// The per-group tables, in lookup order: where two kinds share a name (core/v1 and
/// events.k8s.io/v1 `Event`) the first is the one [`list_at`] finds by name.
static TABLES: &[&[TypeDef]] = &[
    core_v1::CORE_V1,
    events::EVENTS,
    coordination::COORDINATION_V1,
    discovery::DISCOVERY_V1,
    rbac::RBAC_V1,
    apps::APPS_V1,
    meta_v1::META_V1,
];

/// Every type of every table, in lookup order.
pub(crate) fn types() -> impl Iterator<Item = &'static TypeDef> {
    TABLES.iter().flat_map(|table| table.iter())
}

impl TypeDef {
    /// The type of the object (or of the list items) in field `name`.
    fn field_type(&self, name: &str) -> Option<&'static TypeDef> {
        let (_, spec, _) = self.fields.iter().find(|f| f.0 == name)?;
        type_def(spec.trim_start_matches("[]"))
    }
}

/// The schema name upstream uses (`io.k8s.api.core.v1.Node`, ...).
pub(crate) fn full_name(short: &str) -> String {
    match short.strip_prefix("meta.") {
        Some(rest) => format!("io.k8s.apimachinery.pkg.apis.meta.{rest}"),
        None => format!("io.k8s.api.{short}"),
    }
}

pub(crate) fn type_def(short: &str) -> Option<&'static TypeDef> {
    types().find(|t| t.name == short)
}

pub(crate) fn kind_def(desc: &ResourceDesc) -> Option<&'static TypeDef> {
    types().find(|t| t.kind == Some((desc.group, desc.version, desc.kind)))
}

/// The schema of a kind by its name alone (`Node`, `Deployment`). Where two groups serve
/// a kind of the same name (core/v1 and events.k8s.io/v1 `Event`) the first is taken;
/// they nest no lists with merge semantics.
fn kind_by_name(kind: &str) -> Option<&'static TypeDef> {
    types().find(|t| matches!(t.kind, Some((_, _, k)) if k == kind))
}

/// The facts of the list at `path` (field names from the object root, list indices left
/// out: `["spec", "template", "spec", "containers"]`) in an object of `kind`, found by
/// walking the field types; `None` for a list without merge semantics or a path the
/// table does not describe. `metadata` is ObjectMeta in every kind, also in kinds without
/// a schema here.
pub fn list_at(kind: &str, path: &[String]) -> Option<&'static List> {
    let (last, parents) = path.split_last()?;
    let mut t = kind_by_name(kind);
    for (i, name) in parents.iter().enumerate() {
        t = if i == 0 && name == META.0 {
            type_def(META.1)
        } else {
            t?.field_type(name)
        };
    }
    t?.list(last)
}

/// The strategic-merge strategy of the list at `path` in `kind` (see [`list_at`]).
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    list_at(kind, path).map_or(ListStrategy::Atomic, |l| l.patch)
}

/// The server-side-apply list type of the list at `path` in `kind` (see [`list_at`]).
pub fn list_type(kind: &str, path: &[String]) -> ListType {
    list_at(kind, path).map_or(ListType::Atomic, |l| l.list_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ListStrategy::{Atomic, MergeKey, MergeSet};

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn table() {
        let cases = [
            ("Node", "metadata.finalizers", MergeSet),
            ("Lease", "metadata.finalizers", MergeSet),
            ("Service", "metadata.ownerReferences", MergeKey("uid")),
            ("Node", "status.addresses", MergeKey("type")),
            ("Node", "status.conditions", MergeKey("type")),
            ("Node", "spec.taints", Atomic),
            ("Node", "spec.podCIDRs", MergeSet),
            ("Service", "spec.ports", MergeKey("port")),
            ("Service", "status.conditions", MergeKey("type")),
            ("Service", "status.loadBalancer.ingress", Atomic),
            ("Pod", "spec.containers", MergeKey("name")),
            ("Pod", "status.conditions", MergeKey("type")),
            ("Service", "status.addresses", Atomic),
            ("Event", "related", Atomic),
            ("Node", "unknown.list", Atomic),
            (
                "Deployment",
                "spec.template.spec.containers",
                MergeKey("name"),
            ),
            (
                "DaemonSet",
                "spec.template.spec.containers.env",
                MergeKey("name"),
            ),
            ("DaemonSet", "spec.template.spec.volumes", MergeKey("name")),
            ("DaemonSet", "spec.template.spec.tolerations", Atomic),
            ("DaemonSet", "spec.template.metadata.finalizers", MergeSet),
            ("Deployment", "status.conditions", MergeKey("type")),
            ("ServiceAccount", "secrets", MergeKey("name")),
            ("ClusterRole", "rules", Atomic),
            ("RoleBinding", "subjects", Atomic),
        ];
        for (kind, path, want) in cases {
            assert_eq!(list_strategy(kind, &p(path)), want, "{kind} {path}");
        }
    }

    #[test]
    fn list_types() {
        let cases: [(&str, &str, ListType); 12] = [
            (
                "Service",
                "spec.ports",
                ListType::Map(&["port", "protocol"]),
            ),
            (
                "Pod",
                "spec.containers.ports",
                ListType::Map(&["containerPort", "protocol"]),
            ),
            (
                "Pod",
                "spec.initContainers.ports",
                ListType::Map(&["containerPort", "protocol"]),
            ),
            (
                "Deployment",
                "spec.template.spec.containers.ports",
                ListType::Map(&["containerPort", "protocol"]),
            ),
            ("Node", "status.addresses", ListType::Atomic),
            ("Node", "status.conditions", ListType::Map(&["type"])),
            ("Node", "spec.podCIDRs", ListType::Set),
            ("Lease", "metadata.finalizers", ListType::Set),
            (
                "Widget",
                "metadata.ownerReferences",
                ListType::Map(&["uid"]),
            ),
            ("Widget", "spec.ports", ListType::Atomic),
            ("Pod", "spec.volumes", ListType::Map(&["name"])),
            ("Namespace", "status.conditions", ListType::Atomic),
        ];
        for (kind, path, want) in cases {
            assert_eq!(list_type(kind, &p(path)), want, "{kind} {path}");
        }
    }

    #[test]
    fn list_facts_name_types_of_the_table() {
        for t in types().filter(|t| !t.lists.is_empty()) {
            let reachable = types().any(|o| {
                o.fields
                    .iter()
                    .any(|f| f.1.trim_start_matches("[]") == t.name)
            });
            assert!(
                reachable || t.kind.is_some(),
                "{} has list facts but is neither a kind nor a field's type",
                t.name
            );
        }
    }
}
