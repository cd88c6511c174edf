//! The schema facts of the served kinds, in one table ([`TYPES`]): for every kind and
//! the types it nests, its fields with their types, and how each list field merges.
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

use crate::resources::ResourceDesc;

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
const fn atomic() -> List {
    List {
        patch: ListStrategy::Atomic,
        list_type: ListType::Atomic,
        published: None,
    }
}

/// `patchStrategy:"merge"` on primitives, `+listType=set`.
const fn merge_set() -> List {
    List {
        patch: ListStrategy::MergeSet,
        list_type: ListType::Set,
        published: Some(("merge", None)),
    }
}

/// `patchStrategy:"merge" patchMergeKey:"<keys[0]>"`, `+listType=map` with `keys` as its
/// `+listMapKey`s.
const fn keyed(keys: &'static [&'static str]) -> List {
    List {
        patch: ListStrategy::MergeKey(keys[0]),
        list_type: ListType::Map(keys),
        published: Some(("merge", Some(keys[0]))),
    }
}

impl List {
    /// `+listType` differs from what the patch tags imply.
    const fn list_type(self, list_type: ListType) -> List {
        List { list_type, ..self }
    }

    /// `patchStrategy:"merge,retainKeys"`: published so; strategic merge here merges by
    /// key without clearing the retained keys.
    const fn retain_keys(self) -> List {
        List {
            published: match self.published {
                Some((_, key)) => Some(("merge,retainKeys", key)),
                None => None,
            },
            ..self
        }
    }

    /// The OpenAPI documents publish other patch metadata than the strategy used.
    const fn published(self, published: (&'static str, Option<&'static str>)) -> List {
        List {
            published: Some(published),
            ..self
        }
    }

    /// The OpenAPI documents publish no patch metadata for this list.
    const fn unpublished(self) -> List {
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

const fn ty(name: &'static str, description: &'static str, fields: &'static [Field]) -> TypeDef {
    TypeDef {
        name,
        kind: None,
        description,
        fields,
        lists: &[],
    }
}

const fn kind(
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
    const fn lists(self, lists: &'static [(&'static str, List)]) -> TypeDef {
        TypeDef { lists, ..self }
    }

    /// The facts of the list field `name`, if it has merge semantics.
    pub(crate) fn list(&self, name: &str) -> Option<&'static List> {
        self.lists.iter().find(|(f, _)| *f == name).map(|(_, l)| l)
    }

    /// The type of the object (or of the list items) in field `name`.
    fn field_type(&self, name: &str) -> Option<&'static TypeDef> {
        let (_, spec, _) = self.fields.iter().find(|f| f.0 == name)?;
        type_def(spec.trim_start_matches("[]"))
    }
}

const META: Field = (
    "metadata",
    "meta.v1.ObjectMeta",
    "Standard object metadata.",
);

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(crate) static TYPES: &[TypeDef] = &[
    kind(
        "core.v1.Node",
        ("", "v1", "Node"),
        "A worker machine in the cluster.",
        &[
            META,
            ("spec", "core.v1.NodeSpec", "How the node is configured."),
            (
                "status",
                "core.v1.NodeStatus",
                "Most recently observed state of the node.",
            ),
        ],
    ),
    ty(
        "core.v1.NodeSpec",
        "Configuration of a node.",
        &[
            (
                "configSource",
                "object",
                "Deprecated dynamic kubelet config source.",
            ),
            ("externalID", "string", "Deprecated external identifier."),
            ("podCIDR", "string", "Pod IP range assigned to the node."),
            (
                "podCIDRs",
                "[]string",
                "Pod IP ranges assigned to the node, one per family.",
            ),
            (
                "providerID",
                "string",
                "Cloud provider identifier: <ProviderName>://<ProviderSpecificNodeID>.",
            ),
            (
                "taints",
                "[]core.v1.Taint",
                "Taints that repel pods without matching tolerations.",
            ),
            (
                "unschedulable",
                "boolean",
                "Whether new pods may be scheduled onto the node.",
            ),
        ],
    )
    .lists(&[("podCIDRs", merge_set()), ("taints", atomic())]),
    ty(
        "core.v1.Taint",
        "A taint on a node.",
        &[
            (
                "effect",
                "string",
                "NoSchedule, PreferNoSchedule or NoExecute.",
            ),
            ("key", "string", "Taint key."),
            ("timeAdded", "time", "When a NoExecute taint was added."),
            ("value", "string", "Taint value."),
        ],
    ),
    ty(
        "core.v1.NodeStatus",
        "Observed state of a node.",
        &[
            (
                "addresses",
                "[]core.v1.NodeAddress",
                "Addresses the node is reachable at.",
            ),
            ("allocatable", "map", "Resources available to pods."),
            ("capacity", "map", "Total resources of the node."),
            (
                "conditions",
                "[]core.v1.NodeCondition",
                "Current service state of the node.",
            ),
            ("config", "object", "Status of the assigned kubelet config."),
            ("daemonEndpoints", "object", "Ports of daemons on the node."),
            ("features", "object", "Features the node supports."),
            ("images", "[]object", "Container images on the node."),
            (
                "nodeInfo",
                "core.v1.NodeSystemInfo",
                "Identifying information about the node.",
            ),
            ("phase", "string", "Deprecated lifecycle phase."),
            ("runtimeHandlers", "[]object", "Available runtime handlers."),
            (
                "volumesAttached",
                "[]object",
                "Volumes attached to the node.",
            ),
            ("volumesInUse", "[]string", "Volumes in use on the node."),
        ],
    )
    .lists(&[
        // k8s.io/api core/v1/types.go `NodeStatus`: `+listType=atomic` although strategic
        // merge keys them on `type`.
        ("addresses", keyed(&["type"]).list_type(ListType::Atomic)),
        ("conditions", keyed(&["type"])),
        ("images", atomic()),
        ("volumesInUse", atomic()),
        ("volumesAttached", atomic()),
    ]),
    ty(
        "core.v1.NodeAddress",
        "One address of a node.",
        &[
            ("address", "string", "The address."),
            (
                "type",
                "string",
                "Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.",
            ),
        ],
    ),
    ty(
        "core.v1.NodeCondition",
        "One condition of a node.",
        &[
            (
                "lastHeartbeatTime",
                "time",
                "Last time the condition was probed.",
            ),
            (
                "lastTransitionTime",
                "time",
                "Last time the status changed.",
            ),
            ("message", "string", "Human-readable details."),
            (
                "reason",
                "string",
                "Machine-readable reason for the last transition.",
            ),
            ("status", "string", "True, False or Unknown."),
            ("type", "string", "Type of the condition, e.g. Ready."),
        ],
    ),
    ty(
        "core.v1.NodeSystemInfo",
        "Software versions reported by a node.",
        &[
            ("architecture", "string", "CPU architecture."),
            ("bootID", "string", "Boot identifier."),
            (
                "containerRuntimeVersion",
                "string",
                "Container runtime name and version.",
            ),
            ("kernelVersion", "string", "Kernel version."),
            (
                "kubeProxyVersion",
                "string",
                "Deprecated kube-proxy version.",
            ),
            ("kubeletVersion", "string", "Kubelet version."),
            ("machineID", "string", "Machine identifier."),
            ("operatingSystem", "string", "Operating system."),
            ("osImage", "string", "Operating system image."),
            ("systemUUID", "string", "System UUID."),
        ],
    ),
    kind(
        "core.v1.Service",
        ("", "v1", "Service"),
        "A named abstraction of a network service.",
        &[
            META,
            (
                "spec",
                "core.v1.ServiceSpec",
                "Desired behaviour of the service.",
            ),
            (
                "status",
                "core.v1.ServiceStatus",
                "Most recently observed status of the service.",
            ),
        ],
    ),
    ty(
        "core.v1.ServiceSpec",
        "Desired behaviour of a service.",
        &[
            (
                "allocateLoadBalancerNodePorts",
                "boolean",
                "Whether LoadBalancer services get node ports.",
            ),
            ("clusterIP", "string", "Cluster-internal address."),
            (
                "clusterIPs",
                "[]string",
                "Cluster-internal addresses, one per family.",
            ),
            (
                "externalIPs",
                "[]string",
                "Extra addresses traffic is accepted on.",
            ),
            (
                "externalName",
                "string",
                "DNS name for ExternalName services.",
            ),
            ("externalTrafficPolicy", "string", "Cluster or Local."),
            (
                "healthCheckNodePort",
                "integer",
                "Health check port for Local traffic policy.",
            ),
            ("internalTrafficPolicy", "string", "Cluster or Local."),
            ("ipFamilies", "[]string", "IP families of the service."),
            (
                "ipFamilyPolicy",
                "string",
                "SingleStack, PreferDualStack or RequireDualStack.",
            ),
            (
                "loadBalancerClass",
                "string",
                "Which load balancer implementation handles the service.",
            ),
            (
                "loadBalancerIP",
                "string",
                "Deprecated requested load balancer address.",
            ),
            (
                "loadBalancerSourceRanges",
                "[]string",
                "Client CIDRs allowed through the load balancer.",
            ),
            (
                "ports",
                "[]core.v1.ServicePort",
                "Ports the service exposes.",
            ),
            (
                "publishNotReadyAddresses",
                "boolean",
                "Whether not-ready endpoints are published.",
            ),
            ("selector", "map", "Labels of the pods traffic goes to."),
            ("sessionAffinity", "string", "ClientIP or None."),
            (
                "sessionAffinityConfig",
                "object",
                "Session affinity settings.",
            ),
            (
                "trafficDistribution",
                "string",
                "Preference for traffic distribution.",
            ),
            (
                "type",
                "string",
                "ClusterIP, NodePort, LoadBalancer or ExternalName.",
            ),
        ],
    )
    .lists(&[
        // `ServiceSpec.ports`: keyed by port for strategic merge,
        // `+listType=map +listMapKey=port +listMapKey=protocol`.
        (
            "ports",
            keyed(&["port"]).list_type(ListType::Map(&["port", "protocol"])),
        ),
    ]),
    ty(
        "core.v1.ServicePort",
        "One port of a service.",
        &[
            ("appProtocol", "string", "Application protocol."),
            ("name", "string", "Name of the port."),
            ("nodePort", "integer", "Port on every node."),
            ("port", "integer", "Port the service exposes."),
            ("protocol", "string", "TCP, UDP or SCTP."),
            ("targetPort", "string", "Port or port name on the pods."),
        ],
    ),
    ty(
        "core.v1.ServiceStatus",
        "Observed state of a service.",
        &[
            (
                "conditions",
                "[]meta.v1.Condition",
                "Current conditions of the service.",
            ),
            (
                "loadBalancer",
                "core.v1.LoadBalancerStatus",
                "Load balancer state, if any.",
            ),
        ],
    )
    .lists(&[("conditions", keyed(&["type"]))]),
    ty(
        "core.v1.LoadBalancerStatus",
        "State of a load balancer.",
        &[(
            "ingress",
            "[]core.v1.LoadBalancerIngress",
            "Ingress points of the load balancer.",
        )],
    )
    .lists(&[("ingress", atomic())]),
    ty(
        "core.v1.LoadBalancerIngress",
        "One ingress point of a load balancer.",
        &[
            ("hostname", "string", "DNS name of the ingress point."),
            ("ip", "string", "IP address of the ingress point."),
            ("ipMode", "string", "VIP or Proxy."),
            ("ports", "[]object", "Port status of the ingress point."),
        ],
    ),
    kind(
        "core.v1.Pod",
        ("", "v1", "Pod"),
        "A group of containers run together on a node.",
        &[
            META,
            ("spec", "core.v1.PodSpec", "Desired behaviour of the pod."),
            (
                "status",
                "core.v1.PodStatus",
                "Most recently observed status of the pod.",
            ),
        ],
    ),
    ty(
        "core.v1.PodSpec",
        "Desired behaviour of a pod (main fields).",
        &[
            (
                "containers",
                "[]core.v1.Container",
                "Containers of the pod.",
            ),
            (
                "hostNetwork",
                "boolean",
                "Whether the pod uses the node's network namespace.",
            ),
            (
                "initContainers",
                "[]core.v1.Container",
                "Containers run before the others.",
            ),
            ("nodeName", "string", "Node the pod is bound to."),
            (
                "nodeSelector",
                "map",
                "Labels a node must carry to run the pod.",
            ),
            ("priority", "integer", "Scheduling priority."),
            ("restartPolicy", "string", "Always, OnFailure or Never."),
            ("schedulerName", "string", "Scheduler that places the pod."),
            (
                "serviceAccountName",
                "string",
                "Service account the pod runs as.",
            ),
            ("tolerations", "[]object", "Tolerated taints."),
            ("volumes", "[]object", "Volumes the containers may mount."),
            (
                "affinity",
                "object",
                "Scheduling constraints on nodes and pods.",
            ),
            ("dnsPolicy", "string", "How the pod resolves names."),
            (
                "imagePullSecrets",
                "[]core.v1.LocalObjectReference",
                "Secrets used to pull the images.",
            ),
            ("priorityClassName", "string", "Priority class of the pod."),
            ("securityContext", "object", "Pod-wide security settings."),
            (
                "terminationGracePeriodSeconds",
                "integer",
                "Seconds the pod gets to stop gracefully.",
            ),
        ],
    )
    .lists(&[
        ("containers", keyed(&["name"])),
        ("initContainers", keyed(&["name"])),
        ("ephemeralContainers", keyed(&["name"])),
        ("volumes", keyed(&["name"]).retain_keys()),
        ("imagePullSecrets", keyed(&["name"])),
        ("hostAliases", keyed(&["ip"])),
    ]),
    ty(
        "core.v1.Container",
        "One container of a pod (main fields).",
        &[
            ("args", "[]string", "Arguments to the entrypoint."),
            ("command", "[]string", "Entrypoint."),
            ("env", "[]object", "Environment variables."),
            ("image", "string", "Container image."),
            ("name", "string", "Name of the container."),
            ("ports", "[]object", "Ports the container exposes."),
            ("resources", "object", "Compute resources."),
        ],
    )
    .lists(&[
        // `+listType=map +listMapKey=containerPort +listMapKey=protocol`.
        (
            "ports",
            keyed(&["containerPort"]).list_type(ListType::Map(&["containerPort", "protocol"])),
        ),
        ("env", keyed(&["name"])),
        ("volumeMounts", keyed(&["mountPath"])),
    ]),
    ty(
        "core.v1.PodStatus",
        "Observed state of a pod (main fields).",
        &[
            ("conditions", "[]object", "Current conditions of the pod."),
            ("containerStatuses", "[]object", "Status of each container."),
            ("hostIP", "string", "Address of the node."),
            ("message", "string", "Human-readable details."),
            (
                "nominatedNodeName",
                "string",
                "Node nominated by preemption.",
            ),
            (
                "phase",
                "string",
                "Pending, Running, Succeeded, Failed or Unknown.",
            ),
            ("podIP", "string", "Address of the pod."),
            ("podIPs", "[]object", "Addresses of the pod."),
            ("qosClass", "string", "Quality of service class."),
            ("reason", "string", "Machine-readable reason for the state."),
            (
                "startTime",
                "time",
                "When the kubelet acknowledged the pod.",
            ),
        ],
    )
    .lists(&[
        ("conditions", keyed(&["type"])),
        // Upstream publishes `merge`/`ip` for podIPs; our documents never did (kept so
        // that `/openapi/v3` stays as it was).
        ("podIPs", keyed(&["ip"]).unpublished()),
        ("hostIPs", keyed(&["ip"])),
    ]),
    kind(
        "core.v1.Namespace",
        ("", "v1", "Namespace"),
        "A scope for names.",
        &[
            META,
            (
                "spec",
                "core.v1.NamespaceSpec",
                "Desired behaviour of the namespace.",
            ),
            (
                "status",
                "core.v1.NamespaceStatus",
                "Observed state of the namespace.",
            ),
        ],
    ),
    ty(
        "core.v1.NamespaceSpec",
        "Desired behaviour of a namespace.",
        &[(
            "finalizers",
            "[]string",
            "Finalizers that must run before deletion.",
        )],
    ),
    ty(
        "core.v1.NamespaceStatus",
        "Observed state of a namespace.",
        &[
            (
                "conditions",
                "[]object",
                "Current conditions of the namespace.",
            ),
            ("phase", "string", "Active or Terminating."),
        ],
    )
    .lists(&[
        // Published as upstream tags it (`merge`/`type`), but strategic merge and apply
        // here have always replaced namespace conditions whole; kept as it was.
        ("conditions", atomic().published(("merge", Some("type")))),
    ]),
    kind(
        "core.v1.ConfigMap",
        ("", "v1", "ConfigMap"),
        "Non-confidential key-value data.",
        &[
            ("binaryData", "map", "Binary values, base64-encoded."),
            ("data", "map", "String values."),
            (
                "immutable",
                "boolean",
                "Whether the data can no longer change.",
            ),
            META,
        ],
    ),
    kind(
        "core.v1.Secret",
        ("", "v1", "Secret"),
        "Confidential key-value data.",
        &[
            ("data", "map", "Values, base64-encoded."),
            (
                "immutable",
                "boolean",
                "Whether the data can no longer change.",
            ),
            META,
            (
                "stringData",
                "map",
                "Write-only plain string values merged into data.",
            ),
            ("type", "string", "Type of the secret, e.g. Opaque."),
        ],
    ),
    kind(
        "core.v1.Event",
        ("", "v1", "Event"),
        "A report of something that happened in the cluster.",
        &[
            ("action", "string", "What was done, or failed."),
            ("count", "integer", "How often the event occurred."),
            (
                "eventTime",
                "time",
                "When the event was first observed (microseconds).",
            ),
            (
                "firstTimestamp",
                "time",
                "When the event was first recorded.",
            ),
            (
                "involvedObject",
                "core.v1.ObjectReference",
                "The object the event is about.",
            ),
            ("lastTimestamp", "time", "When the event was last recorded."),
            ("message", "string", "Human-readable description."),
            META,
            ("reason", "string", "Machine-readable reason."),
            ("related", "core.v1.ObjectReference", "A secondary object."),
            (
                "reportingComponent",
                "string",
                "Controller that emitted the event.",
            ),
            (
                "reportingInstance",
                "string",
                "Instance of that controller.",
            ),
            (
                "series",
                "core.v1.EventSeries",
                "Data about a series of similar events.",
            ),
            (
                "source",
                "core.v1.EventSource",
                "Component that reported the event.",
            ),
            ("type", "string", "Normal or Warning."),
        ],
    ),
    ty(
        "core.v1.ObjectReference",
        "A reference to an object.",
        &[
            ("apiVersion", "string", "API version of the referent."),
            ("fieldPath", "string", "Field inside the referent."),
            ("kind", "string", "Kind of the referent."),
            ("name", "string", "Name of the referent."),
            ("namespace", "string", "Namespace of the referent."),
            (
                "resourceVersion",
                "string",
                "Resource version of the referent.",
            ),
            ("uid", "string", "UID of the referent."),
        ],
    ),
    ty(
        "core.v1.EventSeries",
        "A series of similar events.",
        &[
            ("count", "integer", "Occurrences in the series so far."),
            (
                "lastObservedTime",
                "time",
                "When the last occurrence was seen.",
            ),
        ],
    ),
    ty(
        "core.v1.EventSource",
        "Who reported an event.",
        &[
            ("component", "string", "Reporting component."),
            ("host", "string", "Node name."),
        ],
    ),
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
    kind(
        "events.v1.Event",
        ("events.k8s.io", "v1", "Event"),
        "A report of something that happened in the cluster.",
        &[
            ("action", "string", "What was done, or failed."),
            (
                "deprecatedCount",
                "integer",
                "Count, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedFirstTimestamp",
                "time",
                "First timestamp, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedLastTimestamp",
                "time",
                "Last timestamp, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedSource",
                "core.v1.EventSource",
                "Source, for core/v1 Event compatibility.",
            ),
            (
                "eventTime",
                "time",
                "When the event was first observed (microseconds).",
            ),
            META,
            ("note", "string", "Human-readable description."),
            ("reason", "string", "Machine-readable reason."),
            (
                "regarding",
                "core.v1.ObjectReference",
                "The object the event is about.",
            ),
            ("related", "core.v1.ObjectReference", "A secondary object."),
            (
                "reportingController",
                "string",
                "Controller that emitted the event.",
            ),
            (
                "reportingInstance",
                "string",
                "Instance of that controller.",
            ),
            (
                "series",
                "events.v1.EventSeries",
                "Data about a series of similar events.",
            ),
            ("type", "string", "Normal or Warning."),
        ],
    ),
    ty(
        "events.v1.EventSeries",
        "A series of similar events.",
        &[
            ("count", "integer", "Occurrences in the series so far."),
            (
                "lastObservedTime",
                "time",
                "When the last occurrence was seen.",
            ),
        ],
    ),
    kind(
        "discovery.v1.EndpointSlice",
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        "A subset of the endpoints of a service.",
        &[
            ("addressType", "string", "IPv4, IPv6 or FQDN."),
            ("endpoints", "[]discovery.v1.Endpoint", "The endpoints."),
            META,
            (
                "ports",
                "[]discovery.v1.EndpointPort",
                "Ports of every endpoint.",
            ),
        ],
    ),
    ty(
        "discovery.v1.Endpoint",
        "One endpoint.",
        &[
            ("addresses", "[]string", "Addresses of the endpoint."),
            (
                "conditions",
                "object",
                "Ready, serving and terminating flags.",
            ),
            ("hostname", "string", "Hostname of the endpoint."),
            ("nodeName", "string", "Node hosting the endpoint."),
            (
                "targetRef",
                "core.v1.ObjectReference",
                "Object backing the endpoint.",
            ),
            ("zone", "string", "Zone of the endpoint."),
        ],
    ),
    ty(
        "discovery.v1.EndpointPort",
        "One port of an endpoint slice.",
        &[
            ("appProtocol", "string", "Application protocol."),
            ("name", "string", "Name of the port."),
            ("port", "integer", "Port number."),
            ("protocol", "string", "TCP, UDP or SCTP."),
        ],
    ),
    kind(
        "core.v1.ServiceAccount",
        ("", "v1", "ServiceAccount"),
        "An identity for processes that run in pods.",
        &[
            (
                "automountServiceAccountToken",
                "boolean",
                "Whether pods get an API token mounted by default.",
            ),
            (
                "imagePullSecrets",
                "[]core.v1.LocalObjectReference",
                "Secrets pods of this account use to pull images.",
            ),
            META,
            (
                "secrets",
                "[]core.v1.ObjectReference",
                "Legacy list of secrets the account may use.",
            ),
        ],
    )
    .lists(&[
        // `imagePullSecrets` has no strategy.
        ("secrets", keyed(&["name"])),
    ]),
    ty(
        "core.v1.LocalObjectReference",
        "A reference to an object in the same namespace.",
        &[("name", "string", "Name of the referent.")],
    ),
    ty(
        "core.v1.PodTemplateSpec",
        "The pods a workload creates.",
        &[
            META,
            ("spec", "core.v1.PodSpec", "Desired behaviour of the pods."),
        ],
    ),
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

/// The schema name upstream uses (`io.k8s.api.core.v1.Node`, ...).
pub(crate) fn full_name(short: &str) -> String {
    match short.strip_prefix("meta.") {
        Some(rest) => format!("io.k8s.apimachinery.pkg.apis.meta.{rest}"),
        None => format!("io.k8s.api.{short}"),
    }
}

pub(crate) fn type_def(short: &str) -> Option<&'static TypeDef> {
    TYPES.iter().find(|t| t.name == short)
}

pub(crate) fn kind_def(desc: &ResourceDesc) -> Option<&'static TypeDef> {
    TYPES
        .iter()
        .find(|t| t.kind == Some((desc.group, desc.version, desc.kind)))
}

/// The schema of a kind by its name alone (`Node`, `Deployment`). Where two groups serve
/// a kind of the same name (core/v1 and events.k8s.io/v1 `Event`) the first is taken;
/// they nest no lists with merge semantics.
fn kind_by_name(kind: &str) -> Option<&'static TypeDef> {
    TYPES
        .iter()
        .find(|t| matches!(t.kind, Some((_, _, k)) if k == kind))
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
        for t in TYPES.iter().filter(|t| !t.lists.is_empty()) {
            let reachable = TYPES.iter().any(|o| {
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
