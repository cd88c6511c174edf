//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`) turned into the JSON
//! the handlers take.
//!
//! Go CCMs built on client-go send their writes as protobuf by default (cloud-provider
//! `--kube-api-content-type`), so an unmodified upstream CCM needs the server to read
//! them; and kubectl's typed `create` subcommands (`create namespace`, `create secret`,
//! `create deployment`...) send protobuf too. Every stored kind is decoded, Pods with
//! their status, plus `DeleteOptions`, TokenRequest and the review APIs
//! ([`decode_auth_api`]).
//! Responses stay JSON, which client-go accepts.
//!
//! Wire format (apimachinery pkg/runtime/serializer/protobuf/protobuf.go): the 4-byte
//! prefix `k8s\0`, then a `runtime.Unknown` message (typeMeta, raw, contentEncoding,
//! contentType) whose `raw` is the object's own message. Field numbers follow the
//! upstream `generated.proto` files (k8s.io/api and apimachinery). Decoding is driven
//! by the schema tables below, so its depth is bounded by the schema, not the input.
//!
//! JSON shape: Go's gogo-protobuf marshaller writes every non-pointer field, zero or
//! not, where JSON would omit it (`omitempty`). So zero scalars are dropped unless the
//! Go field is a pointer (marked `keep`), and a zero `Time` is dropped as JSON's
//! `null` would be.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::ResourceDesc;

/// The Content-Type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope prefix (apimachinery protobuf.go `protoEncodingPrefix`).
const MAGIC: &[u8] = b"k8s\0";

/// How a field's value becomes JSON.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    Int,
    /// `bytes` as base64 (Go's JSON encoding of `[]byte`).
    Bytes,
    Msg(&'static [Field]),
    /// A Go struct embedded with `json:",inline"`: its fields land in the parent object.
    Inline(&'static [Field]),
    /// `map<string, V>`.
    Map(&'static Kind),
    /// metav1.Time: `{seconds, nanos}` as RFC 3339 to the second.
    Time,
    /// metav1.MicroTime: as RFC 3339 with microseconds.
    MicroTime,
    /// resource.Quantity: its string.
    Quantity,
    /// intstr.IntOrString: a number or a string.
    IntOrString,
    /// metav1.FieldsV1: its raw JSON.
    FieldsV1,
}

#[derive(Clone, Copy)]
struct Field {
    num: u64,
    json: &'static str,
    kind: Kind,
    repeated: bool,
    /// The Go field is a pointer: a zero value is meaningful and kept.
    keep: bool,
}

const fn f(num: u64, json: &'static str, kind: Kind) -> Field {
    Field {
        num,
        json,
        kind,
        repeated: false,
        keep: false,
    }
}
const fn keep(num: u64, json: &'static str, kind: Kind) -> Field {
    Field {
        keep: true,
        ..f(num, json, kind)
    }
}
const fn rep(num: u64, json: &'static str, kind: Kind) -> Field {
    Field {
        repeated: true,
        ..f(num, json, kind)
    }
}

use Kind::{
    Bool, Bytes, FieldsV1, Int, IntOrString, Map as MapOf, MicroTime, Msg, Quantity, Str, Time,
};

/// Pods, pod templates, apps/v1 workloads, Namespace, Secret and ConfigMap: too many messages
/// to write by hand, so generated (tools/protobuf_tables.py).
#[rustfmt::skip]
mod workloads;

// --- meta.k8s.io/v1 (apimachinery pkg/apis/meta/v1/generated.proto) ---
const OWNER_REFERENCE: &[Field] = &[
    f(5, "apiVersion", Str),
    f(1, "kind", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
    keep(6, "controller", Bool),
    keep(7, "blockOwnerDeletion", Bool),
];
const MANAGED_FIELDS_ENTRY: &[Field] = &[
    f(1, "manager", Str),
    f(2, "operation", Str),
    f(3, "apiVersion", Str),
    f(4, "time", Time),
    f(6, "fieldsType", Str),
    f(7, "fieldsV1", FieldsV1),
    f(8, "subresource", Str),
];
const OBJECT_META: &[Field] = &[
    f(1, "name", Str),
    f(2, "generateName", Str),
    f(3, "namespace", Str),
    f(4, "selfLink", Str),
    f(5, "uid", Str),
    f(6, "resourceVersion", Str),
    f(7, "generation", Int),
    f(8, "creationTimestamp", Time),
    f(9, "deletionTimestamp", Time),
    keep(10, "deletionGracePeriodSeconds", Int),
    f(11, "labels", MapOf(&Str)),
    f(12, "annotations", MapOf(&Str)),
    rep(13, "ownerReferences", Msg(OWNER_REFERENCE)),
    rep(14, "finalizers", Str),
    rep(17, "managedFields", Msg(MANAGED_FIELDS_ENTRY)),
];
const CONDITION: &[Field] = &[
    f(1, "type", Str),
    f(2, "status", Str),
    f(3, "observedGeneration", Int),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
const PRECONDITIONS: &[Field] = &[keep(1, "uid", Str), keep(2, "resourceVersion", Str)];
const DELETE_OPTIONS: &[Field] = &[
    keep(1, "gracePeriodSeconds", Int),
    f(2, "preconditions", Msg(PRECONDITIONS)),
    keep(3, "orphanDependents", Bool),
    keep(4, "propagationPolicy", Str),
    rep(5, "dryRun", Str),
    keep(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
];

// --- authentication.k8s.io/v1 and authorization.k8s.io/v1 (k8s.io/api
// authentication/v1 and authorization/v1 generated.proto): the review APIs and
// TokenRequest, which client-go sends as protobuf like any write. `extra` and the
// field/label selector attributes are not transcribed (dropped, as unknown fields are).
const BOUND_OBJECT_REFERENCE: &[Field] = &[
    f(1, "kind", Str),
    f(2, "apiVersion", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
];
const TOKEN_REQUEST_SPEC: &[Field] = &[
    rep(1, "audiences", Str),
    keep(4, "expirationSeconds", Int),
    keep(3, "boundObjectRef", Msg(BOUND_OBJECT_REFERENCE)),
];
const TOKEN_REQUEST: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(TOKEN_REQUEST_SPEC)),
];
const TOKEN_REVIEW_SPEC: &[Field] = &[f(1, "token", Str), rep(2, "audiences", Str)];
const TOKEN_REVIEW: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(TOKEN_REVIEW_SPEC)),
];
const RESOURCE_ATTRIBUTES: &[Field] = &[
    f(1, "namespace", Str),
    f(2, "verb", Str),
    f(3, "group", Str),
    f(4, "version", Str),
    f(5, "resource", Str),
    f(6, "subresource", Str),
    f(7, "name", Str),
];
const NON_RESOURCE_ATTRIBUTES: &[Field] = &[f(1, "path", Str), f(2, "verb", Str)];
const SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    keep(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES)),
    keep(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES)),
    f(3, "user", Str),
    rep(4, "groups", Str),
    f(6, "uid", Str),
];
const SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(SUBJECT_ACCESS_REVIEW_SPEC)),
];
const SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    keep(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES)),
    keep(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES)),
];
const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
];
const SELF_SUBJECT_REVIEW: &[Field] = &[f(1, "metadata", Msg(OBJECT_META))];
const SELF_SUBJECT_RULES_REVIEW_SPEC: &[Field] = &[f(1, "namespace", Str)];
const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(SELF_SUBJECT_RULES_REVIEW_SPEC)),
];

/// The body of a TokenRequest (`kind` "TokenRequest") or of a review of kind `kind` as
/// JSON; 415 for another kind.
pub fn decode_auth_api(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let schema = match kind {
        "TokenRequest" => TOKEN_REQUEST,
        "TokenReview" => TOKEN_REVIEW,
        "SubjectAccessReview" | "LocalSubjectAccessReview" => SUBJECT_ACCESS_REVIEW,
        "SelfSubjectAccessReview" => SELF_SUBJECT_ACCESS_REVIEW,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        "SelfSubjectRulesReview" => SELF_SUBJECT_RULES_REVIEW,
        _ => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json (protobuf is not accepted for {kind})"
            )));
        }
    };
    decode_enveloped(body, schema)
}

// --- core/v1 (k8s.io/api core/v1/generated.proto) ---
const OBJECT_REFERENCE: &[Field] = &[
    f(1, "kind", Str),
    f(2, "namespace", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
    f(5, "apiVersion", Str),
    f(6, "resourceVersion", Str),
    f(7, "fieldPath", Str),
];
const TAINT: &[Field] = &[
    f(1, "key", Str),
    f(2, "value", Str),
    f(3, "effect", Str),
    f(4, "timeAdded", Time),
];
const CONFIG_MAP_NODE_CONFIG_SOURCE: &[Field] = &[
    f(1, "namespace", Str),
    f(2, "name", Str),
    f(3, "uid", Str),
    f(4, "resourceVersion", Str),
    f(5, "kubeletConfigKey", Str),
];
const NODE_CONFIG_SOURCE: &[Field] = &[f(2, "configMap", Msg(CONFIG_MAP_NODE_CONFIG_SOURCE))];
const NODE_SPEC: &[Field] = &[
    f(1, "podCIDR", Str),
    rep(7, "podCIDRs", Str),
    f(3, "providerID", Str),
    f(4, "unschedulable", Bool),
    rep(5, "taints", Msg(TAINT)),
    f(6, "configSource", Msg(NODE_CONFIG_SOURCE)),
    f(2, "externalID", Str),
];
const NODE_CONDITION: &[Field] = &[
    f(1, "type", Str),
    f(2, "status", Str),
    f(3, "lastHeartbeatTime", Time),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
const NODE_ADDRESS: &[Field] = &[f(1, "type", Str), f(2, "address", Str)];
const DAEMON_ENDPOINT: &[Field] = &[keep(1, "Port", Int)];
const NODE_DAEMON_ENDPOINTS: &[Field] = &[f(1, "kubeletEndpoint", Msg(DAEMON_ENDPOINT))];
const NODE_SWAP_STATUS: &[Field] = &[keep(1, "capacity", Int)];
const NODE_SYSTEM_INFO: &[Field] = &[
    f(1, "machineID", Str),
    f(2, "systemUUID", Str),
    f(3, "bootID", Str),
    f(4, "kernelVersion", Str),
    f(5, "osImage", Str),
    f(6, "containerRuntimeVersion", Str),
    f(7, "kubeletVersion", Str),
    f(8, "kubeProxyVersion", Str),
    f(9, "operatingSystem", Str),
    f(10, "architecture", Str),
    f(11, "swap", Msg(NODE_SWAP_STATUS)),
];
const CONTAINER_IMAGE: &[Field] = &[rep(1, "names", Str), f(2, "sizeBytes", Int)];
const ATTACHED_VOLUME: &[Field] = &[f(1, "name", Str), f(2, "devicePath", Str)];
const NODE_CONFIG_STATUS: &[Field] = &[
    f(1, "assigned", Msg(NODE_CONFIG_SOURCE)),
    f(2, "active", Msg(NODE_CONFIG_SOURCE)),
    f(3, "lastKnownGood", Msg(NODE_CONFIG_SOURCE)),
    f(4, "error", Str),
];
const NODE_RUNTIME_HANDLER_FEATURES: &[Field] = &[
    keep(1, "recursiveReadOnlyMounts", Bool),
    keep(2, "userNamespaces", Bool),
];
const NODE_RUNTIME_HANDLER: &[Field] = &[
    f(1, "name", Str),
    f(2, "features", Msg(NODE_RUNTIME_HANDLER_FEATURES)),
];
const NODE_FEATURES: &[Field] = &[keep(1, "supplementalGroupsPolicy", Bool)];
const NODE_STATUS: &[Field] = &[
    f(1, "capacity", MapOf(&Quantity)),
    f(2, "allocatable", MapOf(&Quantity)),
    f(3, "phase", Str),
    rep(4, "conditions", Msg(NODE_CONDITION)),
    rep(5, "addresses", Msg(NODE_ADDRESS)),
    f(6, "daemonEndpoints", Msg(NODE_DAEMON_ENDPOINTS)),
    f(7, "nodeInfo", Msg(NODE_SYSTEM_INFO)),
    rep(8, "images", Msg(CONTAINER_IMAGE)),
    rep(9, "volumesInUse", Str),
    rep(10, "volumesAttached", Msg(ATTACHED_VOLUME)),
    f(11, "config", Msg(NODE_CONFIG_STATUS)),
    rep(12, "runtimeHandlers", Msg(NODE_RUNTIME_HANDLER)),
    f(13, "features", Msg(NODE_FEATURES)),
    rep(14, "declaredFeatures", Str),
];
const NODE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(NODE_SPEC)),
    f(3, "status", Msg(NODE_STATUS)),
];
const SERVICE_PORT: &[Field] = &[
    f(1, "name", Str),
    f(2, "protocol", Str),
    keep(6, "appProtocol", Str),
    keep(3, "port", Int),
    f(4, "targetPort", IntOrString),
    f(5, "nodePort", Int),
];
const CLIENT_IP_CONFIG: &[Field] = &[keep(1, "timeoutSeconds", Int)];
const SESSION_AFFINITY_CONFIG: &[Field] = &[f(1, "clientIP", Msg(CLIENT_IP_CONFIG))];
const SERVICE_SPEC: &[Field] = &[
    rep(1, "ports", Msg(SERVICE_PORT)),
    f(2, "selector", MapOf(&Str)),
    f(3, "clusterIP", Str),
    rep(18, "clusterIPs", Str),
    f(4, "type", Str),
    rep(5, "externalIPs", Str),
    f(7, "sessionAffinity", Str),
    f(8, "loadBalancerIP", Str),
    rep(9, "loadBalancerSourceRanges", Str),
    f(10, "externalName", Str),
    f(11, "externalTrafficPolicy", Str),
    f(12, "healthCheckNodePort", Int),
    f(13, "publishNotReadyAddresses", Bool),
    f(14, "sessionAffinityConfig", Msg(SESSION_AFFINITY_CONFIG)),
    rep(19, "ipFamilies", Str),
    keep(17, "ipFamilyPolicy", Str),
    keep(20, "allocateLoadBalancerNodePorts", Bool),
    keep(21, "loadBalancerClass", Str),
    keep(22, "internalTrafficPolicy", Str),
    keep(23, "trafficDistribution", Str),
];
const PORT_STATUS: &[Field] = &[
    keep(1, "port", Int),
    f(2, "protocol", Str),
    keep(3, "error", Str),
];
const LOAD_BALANCER_INGRESS: &[Field] = &[
    f(1, "ip", Str),
    f(2, "hostname", Str),
    keep(3, "ipMode", Str),
    rep(4, "ports", Msg(PORT_STATUS)),
];
const LOAD_BALANCER_STATUS: &[Field] = &[rep(1, "ingress", Msg(LOAD_BALANCER_INGRESS))];
const SERVICE_STATUS: &[Field] = &[
    f(1, "loadBalancer", Msg(LOAD_BALANCER_STATUS)),
    rep(2, "conditions", Msg(CONDITION)),
];
const SERVICE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(SERVICE_SPEC)),
    f(3, "status", Msg(SERVICE_STATUS)),
];
const EVENT_SOURCE: &[Field] = &[f(1, "component", Str), f(2, "host", Str)];
const EVENT_SERIES: &[Field] = &[keep(1, "count", Int), f(2, "lastObservedTime", MicroTime)];
const CORE_EVENT: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "involvedObject", Msg(OBJECT_REFERENCE)),
    f(3, "reason", Str),
    f(4, "message", Str),
    f(5, "source", Msg(EVENT_SOURCE)),
    f(6, "firstTimestamp", Time),
    f(7, "lastTimestamp", Time),
    f(8, "count", Int),
    f(9, "type", Str),
    f(10, "eventTime", MicroTime),
    f(11, "series", Msg(EVENT_SERIES)),
    f(12, "action", Str),
    f(13, "related", Msg(OBJECT_REFERENCE)),
    f(14, "reportingComponent", Str),
    f(15, "reportingInstance", Str),
];

// --- events.k8s.io/v1 ---
const EVENTS_V1_EVENT: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "eventTime", MicroTime),
    f(3, "series", Msg(EVENT_SERIES)),
    f(4, "reportingController", Str),
    f(5, "reportingInstance", Str),
    f(6, "action", Str),
    f(7, "reason", Str),
    f(8, "regarding", Msg(OBJECT_REFERENCE)),
    f(9, "related", Msg(OBJECT_REFERENCE)),
    f(10, "note", Str),
    f(11, "type", Str),
    f(12, "deprecatedSource", Msg(EVENT_SOURCE)),
    f(13, "deprecatedFirstTimestamp", Time),
    f(14, "deprecatedLastTimestamp", Time),
    f(15, "deprecatedCount", Int),
];

// --- coordination.k8s.io/v1 ---
const LEASE_SPEC: &[Field] = &[
    keep(1, "holderIdentity", Str),
    keep(2, "leaseDurationSeconds", Int),
    f(3, "acquireTime", MicroTime),
    f(4, "renewTime", MicroTime),
    keep(5, "leaseTransitions", Int),
    keep(6, "strategy", Str),
    keep(7, "preferredHolder", Str),
];
const LEASE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(LEASE_SPEC)),
];

// --- discovery.k8s.io/v1 ---
const ENDPOINT_CONDITIONS: &[Field] = &[
    keep(1, "ready", Bool),
    keep(2, "serving", Bool),
    keep(3, "terminating", Bool),
];
const FOR_NAME: &[Field] = &[f(1, "name", Str)];
const ENDPOINT_HINTS: &[Field] = &[
    rep(1, "forZones", Msg(FOR_NAME)),
    rep(2, "forNodes", Msg(FOR_NAME)),
];
const ENDPOINT: &[Field] = &[
    rep(1, "addresses", Str),
    f(2, "conditions", Msg(ENDPOINT_CONDITIONS)),
    keep(3, "hostname", Str),
    f(4, "targetRef", Msg(OBJECT_REFERENCE)),
    f(5, "deprecatedTopology", MapOf(&Str)),
    keep(6, "nodeName", Str),
    keep(7, "zone", Str),
    f(8, "hints", Msg(ENDPOINT_HINTS)),
];
const ENDPOINT_PORT: &[Field] = &[
    keep(1, "name", Str),
    keep(2, "protocol", Str),
    keep(3, "port", Int),
    keep(4, "appProtocol", Str),
];
const ENDPOINT_SLICE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(4, "addressType", Str),
    rep(2, "endpoints", Msg(ENDPOINT)),
    rep(3, "ports", Msg(ENDPOINT_PORT)),
];

// --- core/v1 ServiceAccount ---
const LOCAL_OBJECT_REFERENCE: &[Field] = &[f(1, "name", Str)];
const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    rep(2, "secrets", Msg(OBJECT_REFERENCE)),
    rep(3, "imagePullSecrets", Msg(LOCAL_OBJECT_REFERENCE)),
    keep(4, "automountServiceAccountToken", Bool),
];

// --- meta.k8s.io/v1 LabelSelector, then rbac.authorization.k8s.io/v1 (k8s.io/api
// rbac/v1/generated.proto) ---
const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    keep(1, "key", Str),
    keep(2, "operator", Str),
    rep(3, "values", Str),
];
const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", MapOf(&Str)),
    rep(2, "matchExpressions", Msg(LABEL_SELECTOR_REQUIREMENT)),
];
const POLICY_RULE: &[Field] = &[
    rep(1, "verbs", Str),
    rep(2, "apiGroups", Str),
    rep(3, "resources", Str),
    rep(4, "resourceNames", Str),
    rep(5, "nonResourceURLs", Str),
];
const AGGREGATION_RULE: &[Field] = &[rep(1, "clusterRoleSelectors", Msg(LABEL_SELECTOR))];
const ROLE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    rep(2, "rules", Msg(POLICY_RULE)),
];
const CLUSTER_ROLE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    rep(2, "rules", Msg(POLICY_RULE)),
    f(3, "aggregationRule", Msg(AGGREGATION_RULE)),
];
// RoleRef's fields are not omitempty in JSON, so they are kept when empty.
const ROLE_REF: &[Field] = &[
    keep(1, "apiGroup", Str),
    keep(2, "kind", Str),
    keep(3, "name", Str),
];
const SUBJECT: &[Field] = &[
    keep(1, "kind", Str),
    f(2, "apiGroup", Str),
    keep(3, "name", Str),
    f(4, "namespace", Str),
];
const BINDING: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    rep(2, "subjects", Msg(SUBJECT)),
    f(3, "roleRef", Msg(ROLE_REF)),
];

// --- runtime.Unknown (apimachinery pkg/runtime/generated.proto) ---
const TYPE_META: &[Field] = &[f(1, "apiVersion", Str), f(2, "kind", Str)];
const UNKNOWN: &[Field] = &[
    f(1, "typeMeta", Msg(TYPE_META)),
    f(2, "raw", Bytes),
    f(3, "contentEncoding", Str),
    f(4, "contentType", Str),
];

/// The schema of `desc`'s objects, when protobuf bodies are accepted for it.
fn schema_for(desc: &ResourceDesc) -> Option<&'static [Field]> {
    Some(match (desc.group, desc.kind) {
        ("", "Node") => NODE,
        ("", "Service") => SERVICE,
        ("", "Event") => CORE_EVENT,
        ("events.k8s.io", "Event") => EVENTS_V1_EVENT,
        ("coordination.k8s.io", "Lease") => LEASE,
        ("discovery.k8s.io", "EndpointSlice") => ENDPOINT_SLICE,
        ("", "ServiceAccount") => SERVICE_ACCOUNT,
        ("rbac.authorization.k8s.io", "Role") => ROLE,
        ("rbac.authorization.k8s.io", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => BINDING,
        ("", "Namespace") => workloads::NAMESPACE,
        ("", "Secret") => workloads::SECRET,
        ("", "ConfigMap") => workloads::CONFIG_MAP,
        ("", "Pod") => workloads::POD,
        ("apps", "Deployment") => workloads::DEPLOYMENT,
        ("apps", "DaemonSet") => workloads::DAEMON_SET,
        _ => return None,
    })
}

/// Whether a `Content-Type` media type is Kubernetes protobuf.
pub fn is_protobuf(media_type: &str) -> bool {
    media_type.eq_ignore_ascii_case(CONTENT_TYPE)
}

/// The body of a create or update of `desc` as JSON. 415 for a type this server does
/// not decode, 400 for a malformed body.
pub fn decode_object(desc: &ResourceDesc, body: &[u8]) -> Result<Value, ApiError> {
    let schema = schema_for(desc).ok_or_else(|| {
        ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json (protobuf is not accepted for {})",
            desc.plural
        ))
    })?;
    decode_enveloped(body, schema)
}

/// A protobuf `DeleteOptions` body as JSON (client-go encodes DELETE bodies with the
/// client's content type).
pub fn decode_delete_options(body: &[u8]) -> Result<Value, ApiError> {
    decode_enveloped(body, DELETE_OPTIONS)
}

fn decode_enveloped(body: &[u8], schema: &'static [Field]) -> Result<Value, ApiError> {
    let inner = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "provided data does not appear to be a protobuf message, expected prefix {MAGIC:?}"
        ))
    })?;
    let envelope = decode_message(inner, UNKNOWN).map_err(bad_body)?;
    let encoding = envelope.get("contentEncoding").and_then(Value::as_str);
    if encoding.is_some_and(|e| !e.is_empty()) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "unsupported protobuf contentEncoding {encoding:?}"
        )));
    }
    let raw = match envelope.get("raw").and_then(Value::as_str) {
        Some(b64) => base64_decode(b64).map_err(bad_body)?,
        None => Vec::new(),
    };
    let mut obj = decode_message(&raw, schema).map_err(bad_body)?;
    if let Some(tm) = envelope.get("typeMeta") {
        for key in ["apiVersion", "kind"] {
            if let Some(v) = tm
                .get(key)
                .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            {
                obj.insert(key.to_string(), v.clone());
            }
        }
    }
    Ok(Value::Object(obj))
}

fn bad_body(e: DecodeError) -> ApiError {
    ApiError::BadRequest(format!(
        "the protobuf request body could not be decoded: {e}"
    ))
}

fn base64_decode(s: &str) -> Result<Vec<u8>, DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|_| DecodeError("raw bytes"))
}

/// Why a protobuf message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {0}")]
pub struct DecodeError(&'static str);

/// A protobuf reader over one message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&byte, rest) = self.buf.split_first().ok_or(DecodeError("varint"))?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError("length"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn length_delimited(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError("length"))?;
        self.take(len)
    }
}

/// A field's raw value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn decode_message(buf: &[u8], schema: &[Field]) -> Result<Map<String, Value>, DecodeError> {
    let mut reader = Reader { buf };
    let mut out = Map::new();
    while !reader.buf.is_empty() {
        let key = reader.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(reader.varint()?),
            1 => {
                reader.take(8)?;
                Wire::Fixed
            }
            2 => Wire::Bytes(reader.length_delimited()?),
            5 => {
                reader.take(4)?;
                Wire::Fixed
            }
            _ => return Err(DecodeError("wire type")),
        };
        // Fields this schema does not know are skipped, as a JSON decoder drops them.
        let Some(field) = schema.iter().find(|f| f.num == key >> 3) else {
            continue;
        };
        if let (Kind::Inline(inner), Wire::Bytes(b)) = (field.kind, &wire) {
            out.extend(decode_message(b, inner)?);
            continue;
        }
        // Repeated scalars may arrive packed (one length-delimited run of varints).
        if let (true, Kind::Int | Kind::Bool, Wire::Bytes(b)) = (field.repeated, field.kind, &wire)
        {
            let mut packed = Reader { buf: b };
            let items = out
                .entry(field.json)
                .or_insert_with(|| Value::Array(Vec::new()));
            while !packed.buf.is_empty() {
                let value = decode_value(field.kind, Wire::Varint(packed.varint()?))?;
                if let Value::Array(items) = items {
                    items.push(value);
                }
            }
            continue;
        }
        let value = decode_value(field.kind, wire)?;
        if field.repeated {
            match out
                .entry(field.json)
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                Value::Array(items) => items.push(value),
                other => *other = Value::Array(vec![value]),
            }
        } else if let (Kind::Map(_), Value::Object(entry)) = (field.kind, &value) {
            let map = out
                .entry(field.json)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map {
                map.extend(entry.clone());
            }
        } else {
            out.insert(field.json.to_string(), value);
        }
    }
    // Zero values of non-pointer Go fields are what JSON's omitempty leaves out.
    for field in schema.iter().filter(|f| !f.keep && !f.repeated) {
        let drop = match out.get(field.json) {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Bool(b)) => !b,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::Null) => true,
            _ => false,
        };
        if drop {
            out.remove(field.json);
        }
    }
    out.retain(|_, v| !v.is_null());
    Ok(out)
}

fn bytes<'a>(wire: Wire<'a>) -> Result<&'a [u8], DecodeError> {
    match wire {
        Wire::Bytes(b) => Ok(b),
        _ => Err(DecodeError("length-delimited field")),
    }
}

fn decode_value(kind: Kind, wire: Wire<'_>) -> Result<Value, DecodeError> {
    Ok(match kind {
        Kind::Str => {
            let b = bytes(wire)?;
            Value::String(String::from_utf8(b.to_vec()).map_err(|_| DecodeError("string"))?)
        }
        Kind::Bool => match wire {
            Wire::Varint(v) => Value::Bool(v != 0),
            _ => return Err(DecodeError("bool")),
        },
        // int32 and int64 alike: negative numbers are sign-extended to 64 bits.
        Kind::Int => match wire {
            Wire::Varint(v) => json!(v as i64),
            _ => return Err(DecodeError("integer")),
        },
        Kind::Bytes => {
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes(wire)?))
        }
        Kind::Msg(schema) | Kind::Inline(schema) => {
            Value::Object(decode_message(bytes(wire)?, schema)?)
        }
        Kind::Map(value_kind) => {
            let entry = decode_map_entry(bytes(wire)?, *value_kind)?;
            Value::Object(entry)
        }
        Kind::Time | Kind::MicroTime => {
            let t = decode_message(bytes(wire)?, TIMESTAMP)?;
            let seconds = t.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            let nanos = t.get("nanos").and_then(Value::as_i64).unwrap_or(0);
            format_time(seconds, nanos, matches!(kind, Kind::MicroTime))?
        }
        Kind::Quantity => {
            let q = decode_message(bytes(wire)?, QUANTITY)?;
            q.get("string").cloned().unwrap_or_else(|| json!("0"))
        }
        Kind::IntOrString => {
            let v = decode_message(bytes(wire)?, INT_OR_STRING)?;
            match v.get("type").and_then(Value::as_i64) {
                Some(1) => v.get("strVal").cloned().unwrap_or_else(|| json!("")),
                _ => v.get("intVal").cloned().unwrap_or_else(|| json!(0)),
            }
        }
        Kind::FieldsV1 => {
            let v = decode_message(bytes(wire)?, FIELDS_V1)?;
            let raw = match v.get("raw").and_then(Value::as_str) {
                Some(b64) => base64_decode(b64)?,
                None => return Ok(Value::Null),
            };
            serde_json::from_slice(&raw).map_err(|_| DecodeError("fieldsV1"))?
        }
    })
}

const TIMESTAMP: &[Field] = &[keep(1, "seconds", Int), keep(2, "nanos", Int)];
const QUANTITY: &[Field] = &[keep(1, "string", Str)];
const INT_OR_STRING: &[Field] = &[
    keep(1, "type", Int),
    keep(2, "intVal", Int),
    keep(3, "strVal", Str),
];
const FIELDS_V1: &[Field] = &[keep(1, "raw", Bytes)];
const MAP_KEY: &[Field] = &[keep(1, "key", Str)];

fn decode_map_entry(buf: &[u8], value_kind: Kind) -> Result<Map<String, Value>, DecodeError> {
    let key = decode_message(buf, MAP_KEY)?
        .get("key")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let value_field = [keep(2, "value", value_kind)];
    let mut entry = decode_message(buf, &value_field)?;
    let value = entry.remove("value").unwrap_or_else(|| match value_kind {
        // An empty string, or empty bytes (base64 of nothing).
        Kind::Str | Kind::Bytes => json!(""),
        _ => Value::Null,
    });
    let mut out = Map::new();
    out.insert(key, value);
    Ok(out)
}

/// metav1.Time / MicroTime as their JSON strings; the zero time is `null`.
fn format_time(seconds: i64, nanos: i64, micro: bool) -> Result<Value, DecodeError> {
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let nanos = i32::try_from(nanos).map_err(|_| DecodeError("time"))?;
    let ts = jiff::Timestamp::new(seconds, nanos).map_err(|_| DecodeError("time"))?;
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(Value::String(if micro {
        format!("{base}.{:06}Z", ts.subsec_microsecond())
    } else {
        format!("{base}Z")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    /// A hand-encoded protobuf field.
    fn field(num: u64, wire: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = varint((num << 3) | wire);
        if wire == 2 {
            out.extend(varint(payload.len() as u64));
        }
        out.extend_from_slice(payload);
        out
    }

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            field(1, 2, api_version.as_bytes()),
            field(2, 2, kind.as_bytes()),
        ]
        .concat();
        let unknown = [
            field(1, 2, &type_meta),
            field(2, 2, raw),
            field(3, 2, b""),
            field(4, 2, b""),
        ]
        .concat();
        [MAGIC, &unknown].concat()
    }

    #[test]
    fn decodes_a_lease_with_go_zero_values_and_micro_times() {
        let renew = [
            field(1, 0, &varint(1_700_000_000)),
            field(2, 0, &varint(123_456_000)),
        ]
        .concat();
        let spec = [
            field(1, 2, b"me"),
            field(2, 0, &varint(15)),
            field(4, 2, &renew),
            field(5, 0, &varint(0)),
        ]
        .concat();
        let meta = [
            field(1, 2, b"l1"),
            field(2, 2, b""),
            field(3, 2, b"kube-system"),
            field(7, 0, &varint(0)),
            field(8, 2, b""),
        ]
        .concat();
        let lease = [field(1, 2, &meta), field(2, 2, &spec)].concat();
        let desc = lookup("coordination.k8s.io", "v1", "leases").expect("leases");
        let obj = decode_object(desc, &envelope("coordination.k8s.io/v1", "Lease", &lease))
            .expect("decode");
        assert_eq!(
            obj,
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "l1", "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": "me",
                    "leaseDurationSeconds": 15,
                    "renewTime": "2023-11-14T22:13:20.123456Z",
                    "leaseTransitions": 0,
                },
            })
        );
    }

    #[test]
    fn negative_ints_maps_and_int_or_string() {
        let port_name = [field(1, 0, &varint(1)), field(3, 2, b"http")].concat();
        let port = [field(3, 0, &varint(80)), field(4, 2, &port_name)].concat();
        let selector = [field(1, 2, b"app"), field(2, 2, b"web")].concat();
        let spec = [
            field(1, 2, &port),
            field(2, 2, &selector),
            field(12, 0, &varint(-1i64 as u64)),
        ]
        .concat();
        let svc = [field(2, 2, &spec)].concat();
        let desc = lookup("", "v1", "services").expect("services");
        let obj = decode_object(desc, &envelope("v1", "Service", &svc)).expect("decode");
        assert_eq!(
            obj["spec"]["ports"][0],
            json!({"port": 80, "targetPort": "http"})
        );
        assert_eq!(obj["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(obj["spec"]["healthCheckNodePort"], -1);
    }

    #[test]
    fn unsupported_types_are_415_and_garbage_is_400() {
        let reviews = lookup("authentication.k8s.io", "v1", "tokenreviews").expect("reviews");
        assert_eq!(
            decode_object(
                reviews,
                &envelope("authentication.k8s.io/v1", "TokenReview", b"")
            )
            .map_err(|e| e.code()),
            Err(415),
            "reviews are decoded by decode_auth_api, not as stored objects"
        );
        assert_eq!(
            decode_auth_api("Nope", &envelope("v1", "Nope", b"")).map_err(|e| e.code()),
            Err(415)
        );
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        for body in [
            &b"{}"[..],
            b"k8s\0\x0a\xff",
            b"k8s\0\x12\x05ab",
            b"k8s\0\x0b",
            b"k8s\0\x12\x02\x0a\x7f",
        ] {
            assert_eq!(
                decode_object(nodes, body).map_err(|e| e.code()),
                Err(400),
                "{body:?}"
            );
        }
        // A varint that never ends.
        let mut long = MAGIC.to_vec();
        long.extend([0x08].iter().chain([0xff; 12].iter()));
        assert_eq!(decode_object(nodes, &long).map_err(|e| e.code()), Err(400));
    }

    #[test]
    fn delete_options() {
        let pre = [field(1, 2, b"u-1")].concat();
        let body = [
            field(2, 2, &pre),
            field(5, 2, b"All"),
            field(1, 0, &varint(0)),
        ]
        .concat();
        let v = decode_delete_options(&envelope("meta.k8s.io/v1", "DeleteOptions", &body))
            .expect("decode");
        assert_eq!(v["preconditions"]["uid"], "u-1");
        assert_eq!(v["dryRun"], json!(["All"]));
        assert_eq!(v["gracePeriodSeconds"], 0);
    }
}
