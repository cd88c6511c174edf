//! Per-kind list strategies for strategic merge patch.
//!
//! Why this exists: upstream reads `patchStrategy`/`patchMergeKey` struct tags from the Go
//! types (k8s.io/api core/v1/types.go, apimachinery pkg/apis/meta/v1/types.go). We serve JSON,
//! so the handful of tags that matter for the kinds we serve live in this table. A list that is
//! not in the table is atomic (replaced by the patch), which is also upstream's default for
//! untagged lists.

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

use ListStrategy::{Atomic, MergeKey, MergeSet};

/// Fields of ObjectMeta, valid on every kind (apimachinery pkg/apis/meta/v1/types.go).
const OBJECT_META: &[(&str, ListStrategy)] = &[
    ("metadata.finalizers", MergeSet),
    ("metadata.ownerReferences", MergeKey("uid")),
];

/// core/v1 Node (k8s.io/api core/v1/types.go `NodeSpec`, `NodeStatus`).
const NODE: &[(&str, ListStrategy)] = &[
    ("spec.podCIDRs", MergeSet),
    ("spec.taints", Atomic),
    ("status.addresses", MergeKey("type")),
    ("status.conditions", MergeKey("type")),
    ("status.images", Atomic),
    ("status.volumesInUse", Atomic),
    ("status.volumesAttached", Atomic),
];

/// core/v1 Service (`ServiceSpec.ports` is keyed by port; listMapKeys port+protocol).
const SERVICE: &[(&str, ListStrategy)] = &[
    ("spec.ports", MergeKey("port")),
    ("status.conditions", MergeKey("type")),
    ("status.loadBalancer.ingress", Atomic),
];

/// core/v1 Pod, the fields kubectl and the kubelet simulator are likely to patch.
const POD: &[(&str, ListStrategy)] = &[
    ("spec.containers", MergeKey("name")),
    ("spec.containers.ports", MergeKey("containerPort")),
    ("spec.containers.env", MergeKey("name")),
    ("spec.containers.volumeMounts", MergeKey("mountPath")),
    ("spec.initContainers", MergeKey("name")),
    ("spec.initContainers.ports", MergeKey("containerPort")),
    ("spec.initContainers.env", MergeKey("name")),
    ("spec.initContainers.volumeMounts", MergeKey("mountPath")),
    ("spec.ephemeralContainers", MergeKey("name")),
    ("spec.volumes", MergeKey("name")),
    ("spec.imagePullSecrets", MergeKey("name")),
    ("spec.hostAliases", MergeKey("ip")),
    ("status.conditions", MergeKey("type")),
    ("status.podIPs", MergeKey("ip")),
    ("status.hostIPs", MergeKey("ip")),
];

/// The strategy of the list at `path` (field names from the object root, list indices left
/// out: `["status", "addresses"]`) in an object of `kind` ("Node", "Service", ...).
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let dotted = path.join(".");
    let per_kind: &[(&str, ListStrategy)] = match kind {
        "Node" => NODE,
        "Service" => SERVICE,
        "Pod" => POD,
        // Lease, Event, Namespace, ConfigMap, ...: no merging lists beyond ObjectMeta.
        _ => &[],
    };
    OBJECT_META
        .iter()
        .chain(per_kind)
        .find(|(p, _)| *p == dotted)
        .map(|(_, s)| *s)
        .unwrap_or(Atomic)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ];
        for (kind, path, want) in cases {
            assert_eq!(list_strategy(kind, &p(path)), want, "{kind} {path}");
        }
    }
}
