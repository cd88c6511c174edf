//! The schemas of rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding,
//! ClusterRoleBinding and the types they nest.
//!
//! Why this exists: one table per API group; `schema` looks types up across all of them.

use super::def::{META, TypeDef, kind, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static RBAC_V1: &[TypeDef] = &[
    kind(
        "rbac.v1.Role",
        ("rbac.authorization.k8s.io", "v1", "Role"),
        "Namespaced permissions, granted by a RoleBinding.",
        &[
            META,
            ("rules", "[]rbac.v1.PolicyRule", "What the role allows."),
        ],
    ),
    kind(
        "rbac.v1.ClusterRole",
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        "Cluster-wide permissions, granted by a binding.",
        &[
            (
                "aggregationRule",
                "rbac.v1.AggregationRule",
                "Selects other cluster roles whose rules are merged into this one.",
            ),
            META,
            ("rules", "[]rbac.v1.PolicyRule", "What the role allows."),
        ],
    ),
    ty(
        "rbac.v1.PolicyRule",
        "One permission: verbs on resources or on non-resource URLs.",
        &[
            (
                "apiGroups",
                "[]string",
                "API groups of the resources; \"\" is core.",
            ),
            (
                "nonResourceURLs",
                "[]string",
                "URL paths such as /healthz (cluster roles only).",
            ),
            (
                "resourceNames",
                "[]string",
                "Names the rule is limited to; empty means all.",
            ),
            (
                "resources",
                "[]string",
                "Resources, e.g. nodes or nodes/status.",
            ),
            ("verbs", "[]string", "Allowed verbs; * means all."),
        ],
    ),
    ty(
        "rbac.v1.AggregationRule",
        "How a cluster role collects the rules of others.",
        &[(
            "clusterRoleSelectors",
            "[]meta.v1.LabelSelector",
            "Label selectors of the cluster roles to merge.",
        )],
    ),
    kind(
        "rbac.v1.RoleBinding",
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        "Grants a role to subjects in one namespace.",
        &[
            META,
            ("roleRef", "rbac.v1.RoleRef", "The role granted; immutable."),
            (
                "subjects",
                "[]rbac.v1.Subject",
                "Who the role is granted to.",
            ),
        ],
    ),
    kind(
        "rbac.v1.ClusterRoleBinding",
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        "Grants a cluster role to subjects cluster-wide.",
        &[
            META,
            (
                "roleRef",
                "rbac.v1.RoleRef",
                "The cluster role granted; immutable.",
            ),
            (
                "subjects",
                "[]rbac.v1.Subject",
                "Who the role is granted to.",
            ),
        ],
    ),
    ty(
        "rbac.v1.RoleRef",
        "The role a binding grants.",
        &[
            ("apiGroup", "string", "API group of the role."),
            ("kind", "string", "Role or ClusterRole."),
            ("name", "string", "Name of the role."),
        ],
    ),
    ty(
        "rbac.v1.Subject",
        "A user, group or service account.",
        &[
            (
                "apiGroup",
                "string",
                "API group of the subject kind; \"\" for service accounts.",
            ),
            ("kind", "string", "User, Group or ServiceAccount."),
            ("name", "string", "Name of the subject."),
            (
                "namespace",
                "string",
                "Namespace of a service account subject.",
            ),
        ],
    ),
];
