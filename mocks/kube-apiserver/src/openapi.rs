//! OpenAPI v3 documents for the served types, and the field validation they imply.
//!
//! kubectl needs them for three things: `apply`/`create` check that the server
//! supports `fieldValidation` on PATCH for the object's kind before sending
//! `fieldValidation=Strict` (cli-runtime pkg/resource/query_param_verifier_v3.go;
//! without any OpenAPI document apply fails unless `--validate=false`), `explain`
//! walks the component schemas (kubectl pkg/explain/v2), and client-go's openapi3
//! root reads the index (client-go openapi/client.go, `paths` ->
//! `serverRelativeURL`). The schemas come from a small hand-written table: the
//! top-level fields of every kind are exact (they also drive [`unknown_fields`]),
//! nested types list their main fields. Descriptions are our own short wording.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::resources::{RESOURCES, ResourceDesc};

/// One field of a schema: name, type spec, description.
///
/// Type specs: `string`, `integer`, `boolean`, `time` (date-time string), `map`
/// (string to string), `object` (free-form), `[]<spec>` (array), or the short
/// name of another [`TypeDef`] (`core.v1.NodeSpec`, `meta.v1.ObjectMeta`).
type Field = (&'static str, &'static str, &'static str);

/// A named object schema; `kind` is set for the served top-level types.
struct TypeDef {
    name: &'static str,
    kind: Option<(&'static str, &'static str, &'static str)>,
    description: &'static str,
    fields: &'static [Field],
}

const fn ty(name: &'static str, description: &'static str, fields: &'static [Field]) -> TypeDef {
    TypeDef {
        name,
        kind: None,
        description,
        fields,
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
    }
}

const META: Field = (
    "metadata",
    "meta.v1.ObjectMeta",
    "Standard object metadata.",
);

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
static TYPES: &[TypeDef] = &[
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
    ),
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
    ),
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
    ),
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
    ),
    ty(
        "core.v1.LoadBalancerStatus",
        "State of a load balancer.",
        &[(
            "ingress",
            "[]core.v1.LoadBalancerIngress",
            "Ingress points of the load balancer.",
        )],
    ),
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
    ),
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
    ),
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
    ),
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
    ),
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
    ),
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
    ),
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
    ),
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
    ),
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
fn full_name(short: &str) -> String {
    match short.strip_prefix("meta.") {
        Some(rest) => format!("io.k8s.apimachinery.pkg.apis.meta.{rest}"),
        None => format!("io.k8s.api.{short}"),
    }
}

fn type_def(short: &str) -> Option<&'static TypeDef> {
    TYPES.iter().find(|t| t.name == short)
}

fn kind_def(desc: &ResourceDesc) -> Option<&'static TypeDef> {
    TYPES
        .iter()
        .find(|t| t.kind == Some((desc.group, desc.version, desc.kind)))
}

fn field_schema(spec: &str, description: &str, refs: &mut BTreeSet<&'static str>) -> Value {
    let mut schema = match spec {
        "string" => json!({"type": "string"}),
        "integer" => json!({"type": "integer", "format": "int64"}),
        "boolean" => json!({"type": "boolean"}),
        "time" => json!({"type": "string", "format": "date-time"}),
        "map" => {
            json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
        }
        "object" => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        _ => match spec.strip_prefix("[]") {
            Some(item) => json!({"type": "array", "items": field_schema(item, "", refs)}),
            None => match type_def(spec) {
                Some(t) => {
                    refs.insert(t.name);
                    // Upstream v3 documents wrap references in allOf so that a
                    // description can sit next to them.
                    json!({"allOf": [{"$ref": format!("#/components/schemas/{}", full_name(t.name))}], "default": {}})
                }
                None => json!({"type": "object"}),
            },
        },
    };
    if !description.is_empty()
        && let Some(map) = schema.as_object_mut()
    {
        map.insert("description".into(), json!(description));
    }
    schema
}

/// The strategic-merge metadata of a list field, as upstream's struct tags publish it in
/// OpenAPI (`patchStrategy`/`patchMergeKey` in kubernetes staging/src/k8s.io/api/*/types.go).
/// kubectl's client-side apply reads these from `/openapi/v3`: without them a list of
/// containers is atomic, and any defaulted field makes a re-apply replace the whole list.
fn patch_extension(type_name: &str, field: &str) -> Option<(&'static str, Option<&'static str>)> {
    let merge = |key| Some(("merge", key));
    match (type_name, field) {
        ("meta.v1.ObjectMeta", "finalizers") => merge(None),
        ("meta.v1.ObjectMeta", "ownerReferences") => merge(Some("uid")),
        ("core.v1.NodeSpec", "podCIDRs") => merge(None),
        (
            "core.v1.NodeStatus"
            | "core.v1.ServiceStatus"
            | "core.v1.PodStatus"
            | "core.v1.NamespaceStatus"
            | "apps.v1.DeploymentStatus"
            | "apps.v1.DaemonSetStatus",
            "conditions",
        ) => merge(Some("type")),
        ("core.v1.NodeStatus", "addresses") => merge(Some("type")),
        ("core.v1.ServiceSpec", "ports") => merge(Some("port")),
        ("core.v1.PodSpec", "containers" | "initContainers" | "imagePullSecrets") => {
            merge(Some("name"))
        }
        ("core.v1.PodSpec", "volumes") => Some(("merge,retainKeys", Some("name"))),
        ("core.v1.Container", "env") => merge(Some("name")),
        ("core.v1.Container", "ports") => merge(Some("containerPort")),
        ("core.v1.Container", "volumeMounts") => merge(Some("mountPath")),
        ("core.v1.ServiceAccount", "secrets") => merge(Some("name")),
        _ => None,
    }
}

fn type_schema(t: &TypeDef, refs: &mut BTreeSet<&'static str>) -> Value {
    let mut props = Map::new();
    if t.kind.is_some() {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "Versioned schema of this representation of the object."}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": "The REST resource this object represents."}),
        );
    }
    for (name, spec, description) in t.fields {
        let mut field = field_schema(spec, description, refs);
        if let Some((strategy, key)) = patch_extension(t.name, name)
            && let Some(map) = field.as_object_mut()
        {
            map.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            if let Some(key) = key {
                map.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
        }
        props.insert((*name).into(), field);
    }
    let mut schema = json!({"type": "object", "description": t.description, "properties": props});
    if let Some((group, version, kind)) = t.kind {
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": group, "version": version, "kind": kind}]);
    }
    schema
}

fn gvk(desc: &ResourceDesc) -> Value {
    json!({"group": desc.group, "version": desc.version, "kind": desc.kind})
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

/// Write parameters (inline, as kubectl's verifier reads `parameters[].name`).
fn write_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "When present, do not persist the change (value: All).",
        ),
        query_param("fieldManager", "Name of the actor making the change."),
        query_param(
            "fieldValidation",
            "How to treat unknown fields: Ignore, Warn (default) or Strict.",
        ),
    ]
}

fn operation(desc: &ResourceDesc, action: &str, op_id: String, schema_ref: &Value) -> Value {
    let mut op = json!({
        "operationId": op_id,
        "description": format!("{action} {}", desc.kind),
        "tags": [if desc.group.is_empty() { "core_v1".to_string() } else { format!("{}_{}", desc.group, desc.version) }],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(desc),
    });
    match action {
        "post" | "put" => {
            op["parameters"] = json!(write_params());
            op["requestBody"] =
                json!({"content": {"*/*": {"schema": schema_ref}}, "required": true});
        }
        "patch" => {
            let mut params = write_params();
            params.push(json!({"name": "force", "in": "query", "description": "Take over conflicting fields (server-side apply).", "schema": {"type": "boolean", "uniqueItems": true}}));
            op["parameters"] = json!(params);
            let body = json!({"schema": {"type": "object"}});
            op["requestBody"] = json!({"content": {
                "application/json-patch+json": body,
                "application/merge-patch+json": body,
                "application/strategic-merge-patch+json": body,
                "application/apply-patch+yaml": body,
            }, "required": true});
        }
        _ => {}
    }
    op
}

fn paths_for(desc: &ResourceDesc) -> Vec<(String, Value)> {
    let prefix = if desc.group.is_empty() {
        format!("/api/{}", desc.version)
    } else {
        format!("/apis/{}/{}", desc.group, desc.version)
    };
    let collection = if desc.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", desc.plural)
    } else {
        format!("{prefix}/{}", desc.plural)
    };
    let schema_ref = match kind_def(desc) {
        Some(t) => json!({"$ref": format!("#/components/schemas/{}", full_name(t.name))}),
        None => json!({"type": "object"}),
    };
    let id = |verb: &str| {
        let ns = if desc.namespaced { "Namespaced" } else { "" };
        // Upstream's operation ids: `rbac.authorization.k8s.io` -> `RbacAuthorization`.
        let group = if desc.group.is_empty() {
            "Core".to_string()
        } else {
            let trimmed = desc.group.trim_end_matches(".k8s.io");
            trimmed.split('.').map(capitalize).collect()
        };
        format!("{verb}{group}{}{ns}{}", capitalize(desc.version), desc.kind)
    };
    let path_param = |name: &str| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}});
    let mut ns_params = Vec::new();
    if desc.namespaced {
        ns_params.push(path_param("namespace"));
    }
    let mut item_params = vec![path_param("name")];
    item_params.extend(ns_params.iter().cloned());
    let mut out = vec![
        (
            collection.clone(),
            json!({
                "get": operation(desc, "list", id("list"), &json!({"type": "object"})),
                "post": operation(desc, "post", id("create"), &schema_ref),
                "parameters": ns_params,
            }),
        ),
        (
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(desc, "get", id("read"), &schema_ref),
                "put": operation(desc, "put", id("replace"), &schema_ref),
                "patch": operation(desc, "patch", id("patch"), &schema_ref),
                "delete": operation(desc, "delete", id("delete"), &json!({"type": "object"})),
                "parameters": item_params.clone(),
            }),
        ),
    ];
    if desc.status_subresource {
        out.push((
            format!("{collection}/{{name}}/status"),
            json!({
                "get": operation(desc, "get", format!("{}Status", id("read")), &schema_ref),
                "put": operation(desc, "put", format!("{}Status", id("replace")), &schema_ref),
                "patch": operation(desc, "patch", format!("{}Status", id("patch")), &schema_ref),
                "parameters": item_params,
            }),
        ));
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The group versions with stored resources (the review APIs have no schemas here).
fn served_group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.create_only) {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The index path of a group version: `api/v1` or `apis/<group>/<version>`.
fn index_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`, by the
/// path after `/openapi/v3/`.
pub fn group_version_doc(path: &str) -> Option<Value> {
    let (group, version) = served_group_versions()
        .into_iter()
        .find(|(g, v)| index_path(g, v) == path.trim_matches('/'))?;
    let mut paths = BTreeMap::new();
    let mut refs = BTreeSet::new();
    for desc in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !r.create_only)
    {
        paths.extend(paths_for(desc));
        if let Some(t) = kind_def(desc) {
            refs.insert(t.name);
        }
    }
    // The closure of referenced schemas.
    let mut schemas = Map::new();
    let mut todo: Vec<&str> = refs.iter().copied().collect();
    while let Some(name) = todo.pop() {
        let full = full_name(name);
        if schemas.contains_key(&full) {
            continue;
        }
        let Some(t) = type_def(name) else { continue };
        let mut found = BTreeSet::new();
        schemas.insert(full, type_schema(t, &mut found));
        todo.extend(found);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The media type of a protobuf `/openapi/v2` answer. Clients ask for it also spelled
/// `...spec.v2@v1.0+protobuf` (client-go discovery `openAPIV2mimePb`), which Go's
/// `mime` parser rejects in a response, so upstream answers with this spelling
/// (kube-openapi pkg/handler/handler.go).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header prefers protobuf over JSON for `/openapi/v2`: the first
/// listed range of either kind wins.
pub fn v2_wants_protobuf(accept: &str) -> bool {
    for range in accept.split(',') {
        let essence = range.split(';').next().unwrap_or("").trim();
        if essence.contains("com.github.proto-openapi.spec.v2") {
            return true;
        }
        if matches!(essence, "application/json" | "application/*" | "*/*") {
            return false;
        }
    }
    false
}

/// `GET /openapi/v2` as JSON: a valid Swagger 2.0 document without definitions.
///
/// Why it exists: kubectl validates a `kind: List` manifest on the client, and only
/// against OpenAPI v2 (kubectl pkg/validation/validation.go; cli-runtime's v3
/// field-validation check never supports `v1/List`). Without a v2 document, `kubectl
/// apply -f` of a List fails; with one that defines no kinds, kubectl skips the
/// client-side check of each item and sends it with `fieldValidation=Strict`, so the
/// server validates it as it does any other object. Schemas are served in v3 only.
pub fn v2_json() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": {},
    })
}

/// [`v2_json`] encoded as the gnostic `openapi_v2.Document` message (gnostic-models
/// openapiv2/OpenAPIv2.proto: swagger = 1, info = 2 {title = 1, version = 2},
/// paths = 8), as kubectl requests it.
pub fn v2_protobuf() -> Vec<u8> {
    fn field(num: u8, payload: &[u8]) -> Vec<u8> {
        // Every payload here is shorter than 128 bytes: a one-byte length.
        let len = u8::try_from(payload.len()).unwrap_or(u8::MAX);
        [&[(num << 3) | 2, len][..], payload].concat()
    }
    let info = [
        field(1, b"Kubernetes"),
        field(2, crate::discovery::GIT_VERSION.as_bytes()),
    ]
    .concat();
    [field(1, b"2.0"), field(2, &info), field(8, b"")].concat()
}

/// A short stable content hash (FNV-1a), for the `hash` query of the index URLs
/// (client-go caches documents by it).
fn content_hash(doc: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in doc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `GET /openapi/v3`: every group version with its document URL.
pub fn index() -> Value {
    let mut paths = Map::new();
    for (g, v) in served_group_versions() {
        let path = index_path(g, v);
        let hash = group_version_doc(&path)
            .map(|d| content_hash(&d))
            .unwrap_or_default();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// How a write treats fields the schema does not know (the `fieldValidation`
/// query parameter, apimachinery pkg/apis/meta/v1 types.go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// Parse the query value; empty means Warn, the server default (apiserver
    /// pkg/endpoints/handlers/rest.go `fieldValidation`).
    pub fn parse(s: &str) -> Option<FieldValidation> {
        match s {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// Unknown fields at the top level and in `metadata`, as upstream's strict decoder
/// names them (`unknown field "spec2"`, `unknown field "metadata.foo"`). Nested
/// fields are not checked: the nested schemas here are not exhaustive.
pub fn unknown_fields(desc: &ResourceDesc, obj: &Value) -> Vec<String> {
    let Some(t) = kind_def(desc) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for key in map.keys() {
        if key != "apiVersion" && key != "kind" && !t.fields.iter().any(|f| f.0 == key) {
            out.push(key.clone());
        }
    }
    if let (Some(meta), Some(meta_def)) = (
        map.get("metadata").and_then(Value::as_object),
        type_def("meta.v1.ObjectMeta"),
    ) {
        for key in meta.keys() {
            if !meta_def.fields.iter().any(|f| f.0 == key) {
                out.push(format!("metadata.{key}"));
            }
        }
    }
    out
}

/// The first top-level field whose JSON type cannot decode into its Go type (`string`,
/// `boolean`, `integer`, and `map` of strings; `null` decodes to the zero value), as
/// encoding/json words it: `json: cannot unmarshal number into Go struct field
/// Secret.stringData of type string`. Nested types are not checked.
pub fn type_error(desc: &ResourceDesc, obj: &Value) -> Option<String> {
    let t = kind_def(desc)?;
    let map = obj.as_object()?;
    let json_type = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mismatch = |field: &str, v: &Value, go: &str| {
        format!(
            "json: cannot unmarshal {} into Go struct field {}.{field} of type {go}",
            json_type(v),
            desc.kind
        )
    };
    for (name, spec, _) in t.fields {
        let Some(v) = map.get(*name).filter(|v| !v.is_null()) else {
            continue;
        };
        let wrong = match *spec {
            "string" if !v.is_string() => Some((v, "string".to_string())),
            "boolean" if !v.is_boolean() => Some((v, "bool".to_string())),
            "integer" if !(v.is_i64() || v.is_u64()) => Some((v, "int32".to_string())),
            "map" => match v.as_object() {
                None => Some((v, "map[string]string".to_string())),
                Some(m) => m
                    .values()
                    .find(|x| !x.is_string() && !x.is_null())
                    .map(|x| (x, "string".to_string())),
            },
            list if list.starts_with("[]") && !v.is_array() => Some((v, go_type(list))),
            named if type_def(named).is_some() && !v.is_object() => Some((v, go_type(named))),
            _ => None,
        };
        if let Some((v, go)) = wrong {
            return Some(mismatch(name, v, &go));
        }
    }
    None
}

/// The Go type a type spec decodes into, as encoding/json names it in errors: `string`,
/// `[]v1.PolicyRule`, `v1.DeploymentSpec`.
fn go_type(spec: &str) -> String {
    if let Some(item) = spec.strip_prefix("[]") {
        return format!("[]{}", go_type(item));
    }
    match spec {
        "string" | "time" => "string".into(),
        "boolean" => "bool".into(),
        "integer" => "int32".into(),
        "map" => "map[string]string".into(),
        "object" => "interface {}".into(),
        // `<group>.<version>.<Type>`: Go prints the package (the version) and the type.
        named => {
            let mut parts = named.rsplit('.');
            let ty = parts.next().unwrap_or(named);
            let version = parts.next().unwrap_or("v1");
            format!("{version}.{ty}")
        }
    }
}

/// Remove the fields [`unknown_fields`] reports, as upstream's typed decoding
/// drops them (so they are never stored).
pub fn prune_unknown(obj: &mut Value, unknown: &[String]) {
    for field in unknown {
        match field.strip_prefix("metadata.") {
            Some(meta_key) => {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove(meta_key);
                }
            }
            None => {
                if let Some(map) = obj.as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    #[test]
    fn every_served_kind_has_a_schema_and_every_ref_resolves() {
        for desc in RESOURCES.iter().filter(|r| !r.create_only) {
            assert!(kind_def(desc).is_some(), "{}", desc.kind);
        }
        for t in TYPES {
            for (name, spec, _) in t.fields {
                let base = spec.trim_start_matches("[]");
                let builtin = matches!(
                    base,
                    "string" | "integer" | "boolean" | "time" | "map" | "object"
                );
                assert!(
                    builtin || type_def(base).is_some(),
                    "{}.{name}: {spec}",
                    t.name
                );
            }
        }
    }

    #[test]
    fn index_points_at_documents() {
        let idx = index();
        let url = idx["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .expect("url");
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
        assert!(idx["paths"]["apis/coordination.k8s.io/v1"].is_object());
        assert!(group_version_doc("apis/nope/v1").is_none());
    }

    #[test]
    fn core_document_supports_field_validation_on_node_patch() {
        let doc = group_version_doc("api/v1").expect("doc");
        let patch = &doc["paths"]["/api/v1/nodes/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Node");
        assert!(
            patch["parameters"]
                .as_array()
                .expect("params")
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        let node = &doc["components"]["schemas"]["io.k8s.api.core.v1.Node"];
        assert_eq!(node["x-kubernetes-group-version-kind"][0]["kind"], "Node");
        assert_eq!(
            node["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.NodeSpec"
        );
        let spec = &doc["components"]["schemas"]["io.k8s.api.core.v1.NodeSpec"];
        assert_eq!(spec["properties"]["providerID"]["type"], "string");
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Taint"].is_object());
        assert!(
            doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
                .is_object()
        );
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/services/{name}/status"].is_object());
    }

    #[test]
    fn new_kinds_are_documented_with_exact_top_level_fields() {
        let top = |group: &str, plural: &str| -> Vec<&'static str> {
            let desc = lookup(group, "v1", plural).expect("resource");
            kind_def(desc)
                .expect("schema")
                .fields
                .iter()
                .map(|f| f.0)
                .collect()
        };
        let rbac = "rbac.authorization.k8s.io";
        assert_eq!(
            top("", "serviceaccounts"),
            [
                "automountServiceAccountToken",
                "imagePullSecrets",
                "metadata",
                "secrets"
            ]
        );
        assert_eq!(top(rbac, "roles"), ["metadata", "rules"]);
        assert_eq!(
            top(rbac, "clusterroles"),
            ["aggregationRule", "metadata", "rules"]
        );
        assert_eq!(
            top(rbac, "rolebindings"),
            ["metadata", "roleRef", "subjects"]
        );
        assert_eq!(
            top(rbac, "clusterrolebindings"),
            ["metadata", "roleRef", "subjects"]
        );
        assert_eq!(top("apps", "deployments"), ["metadata", "spec", "status"]);
        assert_eq!(top("apps", "daemonsets"), ["metadata", "spec", "status"]);

        let doc = group_version_doc("apis/apps/v1").expect("apps doc");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert!(
            doc["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}/status"]
                .is_object()
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"].is_object());
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.PodTemplateSpec"].is_object());
        // Strategic-merge metadata kubectl's client-side apply needs.
        let containers =
            &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(
            containers["x-kubernetes-patch-merge-key"], "name",
            "{containers}"
        );
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let rbac_doc = group_version_doc("apis/rbac.authorization.k8s.io/v1").expect("rbac doc");
        assert!(
            rbac_doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"].is_object()
        );
        assert!(rbac_doc["components"]["schemas"]["io.k8s.api.rbac.v1.PolicyRule"].is_object());
        assert!(index()["paths"]["apis/apps/v1"].is_object());
    }

    #[test]
    fn v2_document_is_valid_and_empty() {
        let pb = v2_protobuf();
        assert_eq!(&pb[..5], b"\x0a\x032.0");
        assert_eq!(&pb[pb.len() - 2..], b"\x42\x00");
        assert_eq!(v2_json()["swagger"], "2.0");
        assert!(v2_wants_protobuf(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(v2_wants_protobuf(
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"
        ));
        assert!(!v2_wants_protobuf(
            "application/json, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        ));
        assert!(!v2_wants_protobuf(""));
    }

    #[test]
    fn type_errors_name_go_types() {
        let deploy = lookup("apps", "v1", "deployments").expect("deployments");
        assert_eq!(
            type_error(deploy, &json!({"spec": "x"})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec"
            )
        );
        let roles =
            lookup("rbac.authorization.k8s.io", "v1", "clusterroles").expect("clusterroles");
        assert_eq!(
            type_error(roles, &json!({"rules": {}})).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field ClusterRole.rules of type []v1.PolicyRule"
            )
        );
        assert_eq!(
            type_error(roles, &json!({"rules": [], "aggregationRule": null})),
            None
        );
    }

    #[test]
    fn unknown_fields_top_level_and_metadata() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let mut obj = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "bogus": 1},
                             "spec": {"anything": true}, "spek": {}});
        let unknown = unknown_fields(nodes, &obj);
        assert_eq!(unknown, ["spek", "metadata.bogus"]);
        prune_unknown(&mut obj, &unknown);
        assert!(unknown_fields(nodes, &obj).is_empty());
        assert_eq!(obj["spec"]["anything"], true);
        let cms = lookup("", "v1", "configmaps").expect("cm");
        assert_eq!(
            unknown_fields(cms, &json!({"data": {}, "spec": {}})),
            ["spec"]
        );
        assert_eq!(FieldValidation::parse(""), Some(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse("strict"), None);
    }
}
