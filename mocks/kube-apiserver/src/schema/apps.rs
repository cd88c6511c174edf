//! The schemas of apps/v1 `Deployment` and `DaemonSet` and the types they nest.
//!
//! Why this exists: one table per API group; `schema` looks types up across all of them.

use super::def::{META, TypeDef, keyed, kind, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static APPS_V1: &[TypeDef] = &[
    kind(
        "apps.v1.Deployment",
        ("apps", "v1", "Deployment"),
        "Declarative updates for a set of identical pods.",
        &[
            META,
            (
                "spec",
                "apps.v1.DeploymentSpec",
                "Desired behaviour of the deployment.",
            ),
            (
                "status",
                "apps.v1.DeploymentStatus",
                "Most recently observed status of the deployment.",
            ),
        ],
    ),
    ty(
        "apps.v1.DeploymentSpec",
        "Desired behaviour of a deployment.",
        &[
            (
                "minReadySeconds",
                "integer",
                "Seconds a new pod must be ready to count as available.",
            ),
            ("paused", "boolean", "Whether rollouts are paused."),
            (
                "progressDeadlineSeconds",
                "integer",
                "Seconds before a stalled rollout is reported.",
            ),
            ("replicas", "integer", "Desired number of pods (default 1)."),
            (
                "revisionHistoryLimit",
                "integer",
                "Old replica sets kept for rollback (default 10).",
            ),
            (
                "selector",
                "meta.v1.LabelSelector",
                "Selects the pods; must match the template's labels; immutable.",
            ),
            (
                "strategy",
                "apps.v1.DeploymentStrategy",
                "How pods are replaced.",
            ),
            ("template", "core.v1.PodTemplateSpec", "The pods to run."),
        ],
    ),
    ty(
        "apps.v1.DeploymentStrategy",
        "How a deployment replaces pods.",
        &[
            (
                "rollingUpdate",
                "object",
                "maxUnavailable and maxSurge of a rolling update.",
            ),
            ("type", "string", "RollingUpdate (default) or Recreate."),
        ],
    ),
    ty(
        "apps.v1.DeploymentStatus",
        "Observed state of a deployment.",
        &[
            ("availableReplicas", "integer", "Pods available to serve."),
            ("collisionCount", "integer", "Hash collisions of templates."),
            (
                "conditions",
                "[]object",
                "Current conditions of the deployment.",
            ),
            (
                "observedGeneration",
                "integer",
                "Generation the controller last acted on.",
            ),
            ("readyReplicas", "integer", "Pods that are ready."),
            ("replicas", "integer", "Pods targeted by the deployment."),
            ("terminatingReplicas", "integer", "Pods being terminated."),
            (
                "unavailableReplicas",
                "integer",
                "Pods still needed for full availability.",
            ),
            (
                "updatedReplicas",
                "integer",
                "Pods running the latest template.",
            ),
        ],
    )
    .lists(&[("conditions", keyed(&["type"]))]),
    kind(
        "apps.v1.DaemonSet",
        ("apps", "v1", "DaemonSet"),
        "Runs one pod on each selected node.",
        &[
            META,
            (
                "spec",
                "apps.v1.DaemonSetSpec",
                "Desired behaviour of the daemon set.",
            ),
            (
                "status",
                "apps.v1.DaemonSetStatus",
                "Most recently observed status of the daemon set.",
            ),
        ],
    ),
    ty(
        "apps.v1.DaemonSetSpec",
        "Desired behaviour of a daemon set.",
        &[
            (
                "minReadySeconds",
                "integer",
                "Seconds a new pod must be ready to count as available.",
            ),
            (
                "revisionHistoryLimit",
                "integer",
                "Old revisions kept for rollback (default 10).",
            ),
            (
                "selector",
                "meta.v1.LabelSelector",
                "Selects the pods; must match the template's labels; immutable.",
            ),
            (
                "template",
                "core.v1.PodTemplateSpec",
                "The pod to run on each node.",
            ),
            (
                "updateStrategy",
                "apps.v1.DaemonSetUpdateStrategy",
                "How pods are replaced.",
            ),
        ],
    ),
    ty(
        "apps.v1.DaemonSetUpdateStrategy",
        "How a daemon set replaces pods.",
        &[
            (
                "rollingUpdate",
                "object",
                "maxUnavailable and maxSurge of a rolling update.",
            ),
            ("type", "string", "RollingUpdate (default) or OnDelete."),
        ],
    ),
    ty(
        "apps.v1.DaemonSetStatus",
        "Observed state of a daemon set.",
        &[
            ("collisionCount", "integer", "Hash collisions of templates."),
            (
                "conditions",
                "[]object",
                "Current conditions of the daemon set.",
            ),
            (
                "currentNumberScheduled",
                "integer",
                "Nodes running at least one daemon pod that should.",
            ),
            (
                "desiredNumberScheduled",
                "integer",
                "Nodes that should run the daemon pod.",
            ),
            (
                "numberAvailable",
                "integer",
                "Nodes whose daemon pod is available.",
            ),
            (
                "numberMisscheduled",
                "integer",
                "Nodes running the daemon pod that should not.",
            ),
            ("numberReady", "integer", "Nodes whose daemon pod is ready."),
            (
                "numberUnavailable",
                "integer",
                "Nodes whose daemon pod is not yet available.",
            ),
            (
                "observedGeneration",
                "integer",
                "Generation the controller last acted on.",
            ),
            (
                "updatedNumberScheduled",
                "integer",
                "Nodes running the latest template.",
            ),
        ],
    )
    .lists(&[("conditions", keyed(&["type"]))]),
];
