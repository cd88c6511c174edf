//! The schema of coordination.k8s.io/v1 `Lease` (leader election, node heartbeats).
//!
//! Why this exists: one table per API group; `schema` looks types up across all of them.

use super::def::{META, TypeDef, kind, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static COORDINATION_V1: &[TypeDef] = &[
    kind(
        "coordination.v1.Lease",
        ("coordination.k8s.io", "v1", "Lease"),
        "A lease, used for leader election and node heartbeats.",
        &[
            META,
            (
                "spec",
                "coordination.v1.LeaseSpec",
                "Specification of the lease.",
            ),
        ],
    ),
    ty(
        "coordination.v1.LeaseSpec",
        "Specification of a lease.",
        &[
            (
                "acquireTime",
                "time",
                "When the current lease was acquired.",
            ),
            (
                "holderIdentity",
                "string",
                "Identity of the current holder.",
            ),
            (
                "leaseDurationSeconds",
                "integer",
                "How long candidates wait before taking over.",
            ),
            (
                "leaseTransitions",
                "integer",
                "How often the lease changed holders.",
            ),
            (
                "preferredHolder",
                "string",
                "Holder the lease should pass to.",
            ),
            (
                "renewTime",
                "time",
                "When the holder last renewed the lease.",
            ),
            (
                "strategy",
                "string",
                "Strategy for picking the next holder.",
            ),
        ],
    ),
];
