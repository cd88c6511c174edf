//! The schemas of meta/v1 (apimachinery) types every kind nests: ObjectMeta,
//! OwnerReference, LabelSelector, Condition.
//!
//! Why this exists: one table per API group; `schema` looks types up across all of them.

use super::def::{TypeDef, keyed, merge_set, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static META_V1: &[TypeDef] = &[
    ty(
        "meta.v1.LabelSelector",
        "A label query; the requirements are ANDed.",
        &[
            (
                "matchExpressions",
                "[]object",
                "Requirements with In, NotIn, Exists or DoesNotExist.",
            ),
            ("matchLabels", "map", "Labels that must be equal."),
        ],
    ),
    ty(
        "meta.v1.ObjectMeta",
        "Metadata every persisted object has.",
        &[
            (
                "annotations",
                "map",
                "Unstructured key-value data for tools.",
            ),
            (
                "creationTimestamp",
                "time",
                "When the object was created (set by the server).",
            ),
            (
                "deletionGracePeriodSeconds",
                "integer",
                "Grace period of a pending deletion.",
            ),
            (
                "deletionTimestamp",
                "time",
                "When deletion was requested (set by the server).",
            ),
            (
                "finalizers",
                "[]string",
                "Finalizers that must be removed before the object is deleted.",
            ),
            (
                "generateName",
                "string",
                "Prefix for a server-generated name.",
            ),
            ("generation", "integer", "Sequence number of spec changes."),
            ("labels", "map", "Key-value labels for selection."),
            (
                "managedFields",
                "[]object",
                "Field ownership, for server-side apply.",
            ),
            ("name", "string", "Name, unique within the namespace."),
            ("namespace", "string", "Namespace of the object."),
            (
                "ownerReferences",
                "[]meta.v1.OwnerReference",
                "Objects this object depends on.",
            ),
            (
                "resourceVersion",
                "string",
                "Opaque version for concurrency control (set by the server).",
            ),
            ("selfLink", "string", "Deprecated; not set."),
            ("uid", "string", "Unique identifier (set by the server)."),
        ],
    )
    .lists(&[
        // apimachinery pkg/apis/meta/v1/types.go.
        ("finalizers", merge_set()),
        ("ownerReferences", keyed(&["uid"])),
    ]),
    ty(
        "meta.v1.OwnerReference",
        "A reference to an owning object.",
        &[
            ("apiVersion", "string", "API version of the owner."),
            (
                "blockOwnerDeletion",
                "boolean",
                "Whether foreground deletion waits for this object.",
            ),
            (
                "controller",
                "boolean",
                "Whether the owner is the managing controller.",
            ),
            ("kind", "string", "Kind of the owner."),
            ("name", "string", "Name of the owner."),
            ("uid", "string", "UID of the owner."),
        ],
    ),
    ty(
        "meta.v1.Condition",
        "A standard status condition.",
        &[
            (
                "lastTransitionTime",
                "time",
                "Last time the status changed.",
            ),
            ("message", "string", "Human-readable details."),
            (
                "observedGeneration",
                "integer",
                "Generation the condition was set for.",
            ),
            ("reason", "string", "Machine-readable reason."),
            ("status", "string", "True, False or Unknown."),
            ("type", "string", "Type of the condition."),
        ],
    ),
];
