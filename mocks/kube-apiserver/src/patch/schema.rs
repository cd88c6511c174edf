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

/// core/v1 ServiceAccount (`secrets` keyed by name; `imagePullSecrets` has no strategy).
const SERVICE_ACCOUNT: &[(&str, ListStrategy)] = &[("secrets", MergeKey("name"))];

/// apps/v1 Deployment and DaemonSet status (k8s.io/api apps/v1/types.go); their pod
/// template follows [`POD`] through [`pod_template_path`].
const WORKLOAD: &[(&str, ListStrategy)] = &[("status.conditions", MergeKey("type"))];

/// For kinds with a pod template at `spec.template`, the path of a template list as the
/// Pod table spells it (`spec.template.spec.containers` -> `spec.containers`).
pub fn pod_template_path<'a>(kind: &str, dotted: &'a str) -> Option<&'a str> {
    match kind {
        "Deployment" | "DaemonSet" => dotted.strip_prefix("spec.template."),
        _ => None,
    }
}

/// The strategy of the list at `path` (field names from the object root, list indices left
/// out: `["status", "addresses"]`) in an object of `kind` ("Node", "Service", ...).
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let joined = path.join(".");
    let (kind, dotted) = match pod_template_path(kind, &joined) {
        // The template's own metadata lists are ObjectMeta's, found below under "Pod".
        Some(inner) => ("Pod", inner),
        None => (kind, joined.as_str()),
    };
    let per_kind: &[(&str, ListStrategy)] = match kind {
        "Node" => NODE,
        "Service" => SERVICE,
        "Pod" => POD,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Deployment" | "DaemonSet" => WORKLOAD,
        // Lease, Event, Namespace, ConfigMap, RBAC kinds...: no merging lists beyond
        // ObjectMeta (policy rules and subjects are atomic).
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
}
