//! The schemas of the core/v1 kinds served here (Node, Service, Pod, Namespace,
//! ConfigMap, Secret, ServiceAccount) and the types they nest; core/v1 Event is in
//! `events`.
//!
//! Why this exists: one table per API group keeps each group's facts together and each
//! file short; `schema` looks types up across all of them.

use super::def::{ListType, META, TypeDef, atomic, keyed, kind, merge_set, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static CORE_V1: &[TypeDef] = &[
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
];
