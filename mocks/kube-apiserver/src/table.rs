//! `meta.k8s.io` Table responses: the columns `kubectl get` prints.
//!
//! kubectl asks for a Table on `get` and prints whatever columns the server sends;
//! a plain list only yields `NAME AGE`. The server always renders every column
//! (the "wide" ones have priority 1 and kubectl hides them unless `-o wide`), as
//! upstream's printers do with `GenerateOptions{Wide: true}` (kubernetes
//! pkg/registry/core/*/storage, pkg/printers/internalversion/printers.go). The
//! cell formats here follow those printers; the code and wording are our own.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::resources::ResourceDesc;

/// What each row carries in `object` (`includeObject`, apimachinery
/// pkg/apis/meta/v1 `IncludeObjectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parse the `includeObject` query value; empty means the default.
    pub fn parse(s: &str) -> Option<IncludeObject> {
        match s {
            "" | "Metadata" => Some(IncludeObject::Metadata),
            "None" => Some(IncludeObject::None),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// How to render one Table.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// `v1` or `v1beta1` (the Table's and the row objects' meta.k8s.io version).
    pub version: &'static str,
    pub include_object: IncludeObject,
    /// Leave out `columnDefinitions` (watch events after the first).
    pub no_headers: bool,
    /// Ages are measured against this instant.
    pub now: jiff::Timestamp,
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

const fn col(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty: "string",
        format: "",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        priority: 1,
        ..col(name, description)
    }
}

const fn int(name: &'static str, description: &'static str) -> Column {
    Column {
        ty: "integer",
        ..col(name, description)
    }
}

const NAME: Column = Column {
    format: "name",
    ..col(
        "Name",
        "Unique name of the object within its namespace or the cluster.",
    )
};
const AGE: Column = col("Age", "Time since the object was created.");

const NODE_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Status",
        "Readiness of the node, and whether scheduling is disabled.",
    ),
    col("Roles", "Roles from node-role.kubernetes.io/* labels."),
    AGE,
    col("Version", "Kubelet version reported by the node."),
    wide("Internal-IP", "First InternalIP address of the node."),
    wide("External-IP", "First ExternalIP address of the node."),
    wide("OS-Image", "Operating system image reported by the node."),
    wide("Kernel-Version", "Kernel version reported by the node."),
    wide("Container-Runtime", "Container runtime name and version."),
];
const SERVICE_COLUMNS: &[Column] = &[
    NAME,
    col("Type", "How the service is exposed."),
    col("Cluster-IP", "Cluster-internal address of the service."),
    col(
        "External-IP",
        "Addresses the service is reachable at from outside.",
    ),
    col("Port(s)", "Ports, with node ports, and protocols."),
    AGE,
    wide("Selector", "Label selector of the backing pods."),
];
const POD_COLUMNS: &[Column] = &[
    NAME,
    col("Ready", "Ready containers out of all containers."),
    col("Status", "Phase or most relevant container state."),
    col("Restarts", "Total container restarts."),
    AGE,
    wide("IP", "Pod IP address."),
    wide("Node", "Node the pod is bound to."),
    wide("Nominated Node", "Node nominated by preemption."),
    wide("Readiness Gates", "Readiness gates that are satisfied."),
];
const EVENT_COLUMNS: &[Column] = &[
    col("Last Seen", "Time since the event was last seen."),
    col("Type", "Normal or Warning."),
    col("Reason", "Machine-readable reason for the event."),
    col("Object", "The object the event is about."),
    wide("Subobject", "Field path inside the object."),
    wide("Source", "Component that reported the event."),
    col("Message", "Human-readable description."),
    wide("First Seen", "Time since the event was first seen."),
    Column {
        priority: 1,
        ..int("Count", "How often the event occurred.")
    },
    wide("Name", "Name of the event object."),
];
const LEASE_COLUMNS: &[Column] = &[NAME, col("Holder", "Current holder of the lease."), AGE];
const NAMESPACE_COLUMNS: &[Column] = &[NAME, col("Status", "Phase of the namespace."), AGE];
// The Data columns are declared `string` although their cells are numbers (kubernetes
// pkg/printers/internalversion/printers.go, configMap and secret column definitions).
const CONFIGMAP_COLUMNS: &[Column] = &[NAME, col("Data", "Number of data entries."), AGE];
const SECRET_COLUMNS: &[Column] = &[
    NAME,
    col("Type", "Type of the secret."),
    col("Data", "Number of data entries."),
    AGE,
];
const ENDPOINTSLICE_COLUMNS: &[Column] = &[
    NAME,
    col("AddressType", "Address family of the endpoints."),
    col("Ports", "Port numbers of the slice."),
    col("Endpoints", "First endpoint addresses."),
    AGE,
];
const CONTAINERS: Column = wide("Containers", "Names of the containers in the pod template.");
const IMAGES: Column = wide("Images", "Images of the containers in the pod template.");
const SELECTOR: Column = wide("Selector", "Label selector of the pods it manages.");
// Service accounts print only Name and Age since the Secrets column was dropped upstream.
const SERVICE_ACCOUNT_COLUMNS: &[Column] = &[NAME, AGE];
const DEPLOYMENT_COLUMNS: &[Column] = &[
    NAME,
    col("Ready", "Ready replicas out of desired replicas."),
    col("Up-to-date", "Replicas running the latest template."),
    col("Available", "Replicas available to serve."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
const DAEMONSET_COLUMNS: &[Column] = &[
    NAME,
    int("Desired", "Nodes that should run the daemon pod."),
    int("Current", "Nodes running at least one daemon pod."),
    int("Ready", "Nodes whose daemon pod is ready."),
    int("Up-to-date", "Nodes running the latest template."),
    int("Available", "Nodes whose daemon pod is available."),
    col("Node Selector", "Labels a node must have to run the pod."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
const BINDING_COLUMNS: &[Column] = &[
    NAME,
    col("Role", "Kind and name of the role granted."),
    AGE,
    wide("Users", "Users the binding names."),
    wide("Groups", "Groups the binding names."),
    wide(
        "ServiceAccounts",
        "Service accounts the binding names, as namespace/name.",
    ),
];
// apiserver pkg/registry/rest/table.go default convertor: Name and Created At.
const DEFAULT_COLUMNS: &[Column] = &[
    NAME,
    Column {
        ty: "date",
        ..col("Created At", "Time the object was created.")
    },
];

fn columns(desc: &ResourceDesc) -> &'static [Column] {
    match (desc.group, desc.kind) {
        ("", "Node") => NODE_COLUMNS,
        ("", "Service") => SERVICE_COLUMNS,
        ("", "Pod") => POD_COLUMNS,
        ("", "Event") | ("events.k8s.io", "Event") => EVENT_COLUMNS,
        ("coordination.k8s.io", "Lease") => LEASE_COLUMNS,
        ("", "Namespace") => NAMESPACE_COLUMNS,
        ("", "ConfigMap") => CONFIGMAP_COLUMNS,
        ("", "Secret") => SECRET_COLUMNS,
        ("discovery.k8s.io", "EndpointSlice") => ENDPOINTSLICE_COLUMNS,
        ("", "ServiceAccount") => SERVICE_ACCOUNT_COLUMNS,
        ("apps", "Deployment") => DEPLOYMENT_COLUMNS,
        ("apps", "DaemonSet") => DAEMONSET_COLUMNS,
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => BINDING_COLUMNS,
        // Role and ClusterRole have no printer upstream.
        _ => DEFAULT_COLUMNS,
    }
}

fn cells(desc: &ResourceDesc, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let name = json!(s(obj, "/metadata/name"));
    let age = json!(age_since(obj.pointer("/metadata/creationTimestamp"), now));
    match (desc.group, desc.kind) {
        ("", "Node") => node_cells(obj, name, age),
        ("", "Service") => service_cells(obj, name, age),
        ("", "Pod") => pod_cells(obj, name, age),
        ("", "Event") => event_cells(obj, now),
        ("events.k8s.io", "Event") => event_cells(&core_event(obj), now),
        ("coordination.k8s.io", "Lease") => {
            vec![name, json!(s(obj, "/spec/holderIdentity")), age]
        }
        ("", "Namespace") => vec![name, json!(s(obj, "/status/phase")), age],
        ("", "ConfigMap") => {
            vec![
                name,
                json!(len(obj, "/data") + len(obj, "/binaryData")),
                age,
            ]
        }
        ("", "Secret") => vec![name, json!(s(obj, "/type")), json!(len(obj, "/data")), age],
        ("discovery.k8s.io", "EndpointSlice") => endpointslice_cells(obj, name, age),
        ("", "ServiceAccount") => vec![name, age],
        ("apps", "Deployment") => deployment_cells(obj, name, age),
        ("apps", "DaemonSet") => daemonset_cells(obj, name, age),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            binding_cells(obj, name, age)
        }
        _ => vec![name, json!(s(obj, "/metadata/creationTimestamp"))],
    }
}

/// The string at `pointer`, or "".
fn s<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn or<'a>(value: &'a str, fallback: &'a str) -> &'a str {
    if value.is_empty() { fallback } else { value }
}

fn arr<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn len(obj: &Value, pointer: &str) -> usize {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

/// upstream `translateTimestampSince`: `<unknown>` without a timestamp.
fn age_since(ts: Option<&Value>, now: jiff::Timestamp) -> String {
    match ts
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

/// apimachinery pkg/util/duration `HumanDuration`, for a number of seconds: more
/// precision for short ages, less for long ones.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

fn node_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    // printNode: only the Ready condition counts; then SchedulingDisabled.
    let mut status: Vec<String> = arr(obj, "/status/conditions")
        .iter()
        .filter(|c| s(c, "/type") == "Ready")
        .take(1)
        .map(|c| {
            if s(c, "/status") == "True" {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            }
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled".into());
    }
    // findNodeRoles: node-role.kubernetes.io/<role> keys and kubernetes.io/role values.
    let mut roles = BTreeSet::new();
    for (k, v) in crate::meta::labels(obj) {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == "kubernetes.io/role" && !v.is_empty() {
            roles.insert(v);
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |ty: &str| {
        arr(obj, "/status/addresses")
            .iter()
            .find(|a| s(a, "/type") == ty)
            .map(|a| s(a, "/address"))
            .unwrap_or("<none>")
            .to_string()
    };
    let info = |field: &str| or(s(obj, &format!("/status/nodeInfo/{field}")), "<unknown>");
    vec![
        name,
        json!(status.join(",")),
        json!(roles),
        age,
        json!(s(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn strings(values: &[Value]) -> Vec<&str> {
    values.iter().filter_map(Value::as_str).collect()
}

fn service_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ty = or(s(obj, "/spec/type"), "ClusterIP");
    let cluster_ip = arr(obj, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| or(s(obj, "/spec/clusterIP"), "<none>"));
    let external_ips = strings(arr(obj, "/spec/externalIPs"));
    // getServiceExternalIP; the server renders wide, so no 16-character truncation.
    let external = match ty {
        "ClusterIP" | "NodePort" if external_ips.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external_ips.join(","),
        "LoadBalancer" => {
            let mut all: Vec<&str> = arr(obj, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| or(s(i, "/ip"), s(i, "/hostname")))
                .filter(|a| !a.is_empty())
                .collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => s(obj, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    // makePortString: port[:nodePort]/protocol.
    let ports: Vec<String> = arr(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = or(s(p, "/protocol"), "TCP");
            match p
                .get("nodePort")
                .and_then(Value::as_i64)
                .filter(|n| *n != 0)
            {
                Some(node_port) => format!("{port}:{node_port}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    let selector: Vec<String> = obj
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            let sorted: std::collections::BTreeMap<_, _> = m.iter().collect();
            sorted
                .into_iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let selector = if selector.is_empty() {
        "<none>".to_string()
    } else {
        selector.join(",")
    };
    vec![
        name,
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age,
        json!(selector),
    ]
}

fn pod_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    // A simplified printPod: phase or status reason, overridden by a waiting or
    // terminated container reason; Terminating once deletion has started.
    let total = arr(obj, "/spec/containers").len();
    let mut ready = 0;
    let mut restarts = 0;
    let mut reason = or(s(obj, "/status/reason"), s(obj, "/status/phase")).to_string();
    for cs in arr(obj, "/status/containerStatuses").iter().rev() {
        restarts += cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let waiting = s(cs, "/state/waiting/reason");
        let terminated = s(cs, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if !terminated.is_empty() {
            reason = terminated.to_string();
        } else if cs.get("ready") == Some(&Value::Bool(true))
            && cs.pointer("/state/running").is_some()
        {
            ready += 1;
        }
    }
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    let gates = arr(obj, "/spec/readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_conditions = gates
            .iter()
            .filter(|g| {
                arr(obj, "/status/conditions")
                    .iter()
                    .any(|c| s(c, "/type") == s(g, "/conditionType") && s(c, "/status") == "True")
            })
            .count();
        format!("{true_conditions}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        age,
        json!(or(s(obj, "/status/podIP"), "<none>")),
        json!(or(s(obj, "/spec/nodeName"), "<none>")),
        json!(or(s(obj, "/status/nominatedNodeName"), "<none>")),
        json!(gates),
    ]
}

/// An events.k8s.io/v1 Event in core/v1 field names (upstream prints both
/// through the core printer after conversion).
fn core_event(obj: &Value) -> Value {
    let get = |k: &str| obj.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "metadata": get("metadata"),
        "involvedObject": get("regarding"),
        "reason": get("reason"),
        "message": get("note"),
        "type": get("type"),
        "source": get("deprecatedSource"),
        "firstTimestamp": get("deprecatedFirstTimestamp"),
        "lastTimestamp": get("deprecatedLastTimestamp"),
        "count": get("deprecatedCount"),
        "eventTime": get("eventTime"),
        "series": obj.get("series").map(|series| json!({
            "count": series.get("count").cloned().unwrap_or(Value::Null),
            "lastObservedTime": series.get("lastObservedTime").cloned().unwrap_or(Value::Null),
        })),
        "reportingComponent": get("reportingController"),
        "reportingInstance": get("reportingInstance"),
    })
}

fn event_cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    // printEvent: first/last seen fall back to eventTime; a series overrides both
    // last seen and count; a missing count is 1.
    let first_seen = match obj.get("firstTimestamp").filter(|v| v.is_string()) {
        Some(ts) => age_since(Some(ts), now),
        None => age_since(obj.get("eventTime"), now),
    };
    let mut last_seen = match obj.get("lastTimestamp").filter(|v| v.is_string()) {
        Some(ts) => age_since(Some(ts), now),
        None => first_seen.clone(),
    };
    let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = obj.get("series").filter(|v| v.is_object()) {
        last_seen = age_since(series.get("lastObservedTime"), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(obj, "/involvedObject/kind").to_ascii_lowercase();
    let target = match s(obj, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    // formatEventSource: component[, host], else the reporting controller.
    let component = or(s(obj, "/source/component"), s(obj, "/reportingComponent"));
    let host = or(s(obj, "/source/host"), s(obj, "/reportingInstance"));
    let source = match (component, host) {
        ("", "") => "<unknown>".to_string(),
        (c, "") => c.to_string(),
        (c, h) => format!("{c}, {h}"),
    };
    vec![
        json!(last_seen),
        json!(s(obj, "/type")),
        json!(s(obj, "/reason")),
        json!(target),
        json!(s(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(obj, "/message").trim()),
        json!(first_seen),
        json!(count),
        json!(s(obj, "/metadata/name")),
    ]
}

fn endpointslice_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ports: Vec<String> = arr(obj, "/ports")
        .iter()
        .map(|p| match p.get("port").and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => "<unset>".to_string(),
        })
        .collect();
    let addresses: Vec<&str> = arr(obj, "/endpoints")
        .iter()
        .flat_map(|e| strings(arr(e, "/addresses")))
        .collect();
    let endpoints = match addresses.len() {
        0 => "<unset>".to_string(),
        n if n <= 3 => addresses.join(","),
        n => format!("{} + {} more...", addresses[..3].join(","), n - 3),
    };
    vec![
        name,
        json!(s(obj, "/addressType")),
        json!(if ports.is_empty() {
            "<unset>".to_string()
        } else {
            ports.join(",")
        }),
        json!(endpoints),
        age,
    ]
}

/// A number at `pointer`, 0 when absent.
fn num(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// upstream `layoutContainerCells`: container names and images, comma-joined.
fn container_cells(obj: &Value) -> (Value, Value) {
    let containers = arr(obj, "/spec/template/spec/containers");
    let join = |field: &str| {
        let parts: Vec<&str> = containers.iter().map(|c| s(c, field)).collect();
        json!(parts.join(","))
    };
    (join("/name"), join("/image"))
}

/// The canonical text of the `spec.selector` label selector (upstream
/// `LabelSelectorAsSelector(..).String()`), or `None` when it does not parse.
fn selector_text(obj: &Value) -> Option<String> {
    crate::selector::from_label_selector(obj.pointer("/spec/selector"))
        .ok()
        .map(|sel| sel.map(|s| s.to_string()).unwrap_or_default())
}

fn deployment_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    // printDeployment: READY is ready/desired; the selector as text, `<invalid>` when broken.
    let (containers, images) = container_cells(obj);
    vec![
        name,
        json!(format!(
            "{}/{}",
            num(obj, "/status/readyReplicas"),
            num(obj, "/spec/replicas")
        )),
        json!(num(obj, "/status/updatedReplicas")),
        json!(num(obj, "/status/availableReplicas")),
        age,
        containers,
        images,
        json!(selector_text(obj).unwrap_or_else(|| "<invalid>".into())),
    ]
}

fn daemonset_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    // printDaemonSet: status counters, the template's node selector (`FormatLabels`) and the
    // selector (`FormatLabelSelector`: `<none>` when empty, `<error>` when broken).
    let node_selector: std::collections::BTreeMap<&str, &str> = obj
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let node_selector = if node_selector.is_empty() {
        "<none>".to_string()
    } else {
        node_selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector = match selector_text(obj) {
        None => "<error>".to_string(),
        Some(t) if t.is_empty() => "<none>".to_string(),
        Some(t) => t,
    };
    let (containers, images) = container_cells(obj);
    vec![
        name,
        json!(num(obj, "/status/desiredNumberScheduled")),
        json!(num(obj, "/status/currentNumberScheduled")),
        json!(num(obj, "/status/numberReady")),
        json!(num(obj, "/status/updatedNumberScheduled")),
        json!(num(obj, "/status/numberAvailable")),
        json!(node_selector),
        age,
        containers,
        images,
        json!(selector),
    ]
}

fn binding_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    // printRoleBinding / printClusterRoleBinding with rbac `SubjectsStrings`.
    let role = format!("{}/{}", s(obj, "/roleRef/kind"), s(obj, "/roleRef/name"));
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in arr(obj, "/subjects") {
        match s(subject, "/kind") {
            "ServiceAccount" => accounts.push(format!(
                "{}/{}",
                s(subject, "/namespace"),
                s(subject, "/name")
            )),
            "User" => users.push(s(subject, "/name").to_string()),
            "Group" => groups.push(s(subject, "/name").to_string()),
            _ => {}
        }
    }
    vec![
        name,
        json!(role),
        age,
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(accounts.join(", ")),
    ]
}

fn row(desc: &ResourceDesc, obj: &Value, opts: &TableOptions) -> Value {
    let mut row = json!({"cells": cells(desc, obj, opts.now)});
    match opts.include_object {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": format!("meta.k8s.io/{}", opts.version),
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            });
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

/// A Table of `objects` (one object for a GET, all items for a LIST, one
/// object per watch event). `list_meta` is the list's `metadata`.
pub fn table(
    desc: &ResourceDesc,
    objects: &[&Value],
    list_meta: Value,
    opts: &TableOptions,
) -> Value {
    let column_definitions = if opts.no_headers {
        Value::Null
    } else {
        columns(desc)
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.ty,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect()
    };
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{}", opts.version),
        "metadata": list_meta,
        "columnDefinitions": column_definitions,
        "rows": objects.iter().map(|o| row(desc, o, opts)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    fn now() -> jiff::Timestamp {
        "2026-01-02T00:00:00Z".parse().expect("timestamp")
    }

    fn opts() -> TableOptions {
        TableOptions {
            version: "v1",
            include_object: IncludeObject::Metadata,
            no_headers: false,
            now: now(),
        }
    }

    fn one(plural: &str, group: &str, obj: Value) -> Value {
        let desc = lookup(group, "v1", plural).expect("resource");
        table(desc, &[&obj], json!({}), &opts())
    }

    fn cells_by_column(t: &Value) -> Vec<(String, Value)> {
        let names = t["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().expect("name").to_string());
        names
            .zip(
                t["rows"][0]["cells"]
                    .as_array()
                    .expect("cells")
                    .iter()
                    .cloned(),
            )
            .collect()
    }

    fn cell(t: &Value, column: &str) -> Value {
        cells_by_column(t)
            .into_iter()
            .find(|(n, _)| n == column)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no column {column}"))
    }

    #[test]
    fn human_duration_matches_upstream_cases() {
        // apimachinery pkg/util/duration/duration_test.go boundaries.
        let cases = [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (48 * 3600 + 3600, "2d1h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn node_row_has_status_roles_and_wide_columns() {
        let t = one(
            "nodes",
            "",
            json!({
                "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T23:55:00Z",
                    "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x",
                               "kubernetes.io/role": "worker"}},
                "spec": {"unschedulable": true},
                "status": {
                    "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}],
                    "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}],
                    "nodeInfo": {"kubeletVersion": "v1.34.0", "osImage": "Ubuntu"},
                },
            }),
        );
        assert_eq!(cell(&t, "Name"), "n1");
        assert_eq!(cell(&t, "Status"), "NotReady,SchedulingDisabled");
        assert_eq!(cell(&t, "Roles"), "control-plane,worker");
        assert_eq!(cell(&t, "Age"), "5m");
        assert_eq!(cell(&t, "Version"), "v1.34.0");
        assert_eq!(cell(&t, "Internal-IP"), "10.0.0.1");
        assert_eq!(cell(&t, "External-IP"), "<none>");
        assert_eq!(cell(&t, "OS-Image"), "Ubuntu");
        assert_eq!(cell(&t, "Kernel-Version"), "<unknown>");
        assert_eq!(t["columnDefinitions"][5]["priority"], 1);
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "n1");
        assert!(t["rows"][0]["object"].get("spec").is_none());

        let bare = one("nodes", "", json!({"metadata": {"name": "n2"}}));
        assert_eq!(cell(&bare, "Status"), "Unknown");
        assert_eq!(cell(&bare, "Roles"), "<none>");
        assert_eq!(cell(&bare, "Age"), "<unknown>");
    }

    #[test]
    fn service_rows() {
        let lb = one(
            "services",
            "",
            json!({"metadata": {"name": "web"},
                "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                         "ports": [{"port": 80, "nodePort": 31234, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                         "selector": {"b": "2", "a": "1"}},
                "status": {"loadBalancer": {}}}),
        );
        assert_eq!(cell(&lb, "Type"), "LoadBalancer");
        assert_eq!(cell(&lb, "Cluster-IP"), "10.96.0.10");
        assert_eq!(cell(&lb, "External-IP"), "<pending>");
        assert_eq!(cell(&lb, "Port(s)"), "80:31234/TCP,53/UDP");
        assert_eq!(cell(&lb, "Selector"), "a=1,b=2");

        let ready = one(
            "services",
            "",
            json!({"metadata": {"name": "web"},
                "spec": {"type": "LoadBalancer", "externalIPs": ["5.5.5.5"]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example"}]}}}),
        );
        assert_eq!(cell(&ready, "External-IP"), "1.2.3.4,lb.example,5.5.5.5");
        assert_eq!(cell(&ready, "Cluster-IP"), "<none>");
        assert_eq!(cell(&ready, "Port(s)"), "<none>");
        assert_eq!(cell(&ready, "Selector"), "<none>");

        let plain = one(
            "services",
            "",
            json!({"metadata": {"name": "x"}, "spec": {}}),
        );
        assert_eq!(cell(&plain, "Type"), "ClusterIP");
        assert_eq!(cell(&plain, "External-IP"), "<none>");
    }

    #[test]
    fn lease_event_and_data_rows() {
        let lease = one(
            "leases",
            "coordination.k8s.io",
            json!({"metadata": {"name": "ccm"}, "spec": {"holderIdentity": "pod-a"}}),
        );
        assert_eq!(
            cells_by_column(&lease)
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>(),
            ["Name", "Holder", "Age"]
        );
        assert_eq!(cell(&lease, "Holder"), "pod-a");

        let event = one(
            "events",
            "",
            json!({"metadata": {"name": "n1.abc"}, "type": "Normal", "reason": "Synced",
                   "involvedObject": {"kind": "Node", "name": "n1"}, "message": " done ",
                   "firstTimestamp": "2026-01-01T00:00:00Z", "source": {"component": "ccm"}}),
        );
        assert_eq!(cell(&event, "Object"), "node/n1");
        assert_eq!(cell(&event, "Last Seen"), "24h");
        assert_eq!(cell(&event, "Message"), "done");
        assert_eq!(cell(&event, "Count"), 1);
        assert_eq!(cell(&event, "Source"), "ccm");

        let new_event = one(
            "events",
            "events.k8s.io",
            json!({"metadata": {"name": "e"}, "note": "hi", "regarding": {"kind": "Service", "name": "s"},
                   "eventTime": "2026-01-01T23:59:00.000000Z", "series": {"count": 3, "lastObservedTime": "2026-01-01T23:59:30.000000Z"}}),
        );
        assert_eq!(cell(&new_event, "Object"), "service/s");
        assert_eq!(cell(&new_event, "Count"), 3);
        assert_eq!(cell(&new_event, "Last Seen"), "30s");
        assert_eq!(cell(&new_event, "First Seen"), "60s");

        let cm = one(
            "configmaps",
            "",
            json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}}),
        );
        assert_eq!(cell(&cm, "Data"), 3);
        let secret = one(
            "secrets",
            "",
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": ""}}),
        );
        assert_eq!(cell(&secret, "Type"), "Opaque");
        assert_eq!(cell(&secret, "Data"), 1);
        // The Data columns are declared strings, their cells numbers, as kube-apiserver
        // v1.37.2 answers (differential corpus "ConfigMaps as a Table").
        for t in [&cm, &secret] {
            let data = t["columnDefinitions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["name"] == "Data"))
                .expect("a Data column");
            assert_eq!(data["type"], "string");
        }
        let ns = one(
            "namespaces",
            "",
            json!({"metadata": {"name": "x"}, "status": {"phase": "Active"}}),
        );
        assert_eq!(cell(&ns, "Status"), "Active");
    }

    #[test]
    fn pod_and_endpointslice_rows() {
        let pod = one(
            "pods",
            "",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{}, {}], "nodeName": "n1"},
                   "status": {"phase": "Running", "containerStatuses": [
                       {"ready": true, "restartCount": 2, "state": {"running": {}}},
                       {"ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
        );
        assert_eq!(cell(&pod, "Ready"), "1/2");
        assert_eq!(cell(&pod, "Status"), "CrashLoopBackOff");
        assert_eq!(cell(&pod, "Restarts"), "3");
        assert_eq!(cell(&pod, "Node"), "n1");
        assert_eq!(cell(&pod, "IP"), "<none>");

        let slice = one(
            "endpointslices",
            "discovery.k8s.io",
            json!({"metadata": {"name": "s"}, "addressType": "IPv4", "ports": [{"port": 80}, {}],
                   "endpoints": [{"addresses": ["1.1.1.1", "1.1.1.2"]}, {"addresses": ["1.1.1.3", "1.1.1.4"]}]}),
        );
        assert_eq!(cell(&slice, "Ports"), "80,<unset>");
        assert_eq!(
            cell(&slice, "Endpoints"),
            "1.1.1.1,1.1.1.2,1.1.1.3 + 1 more..."
        );
    }

    fn column_names(t: &Value) -> Vec<String> {
        cells_by_column(t).into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn workload_rows() {
        let deploy = one(
            "deployments",
            "apps",
            json!({"metadata": {"name": "ccm", "creationTimestamp": "2026-01-01T23:59:00Z"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "ccm"},
                            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                            "template": {"spec": {"containers": [{"name": "a", "image": "i:1"}, {"name": "b", "image": "i:2"}]}}},
                   "status": {"readyReplicas": 1, "updatedReplicas": 2}}),
        );
        assert_eq!(
            column_names(&deploy),
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(cell(&deploy, "Ready"), "1/2");
        assert_eq!(cell(&deploy, "Up-to-date"), 2);
        assert_eq!(cell(&deploy, "Available"), 0);
        assert_eq!(cell(&deploy, "Age"), "60s");
        assert_eq!(cell(&deploy, "Containers"), "a,b");
        assert_eq!(cell(&deploy, "Images"), "i:1,i:2");
        assert_eq!(cell(&deploy, "Selector"), "app=ccm,tier in (a,b)");
        assert_eq!(deploy["columnDefinitions"][5]["priority"], 1);

        let ds = one(
            "daemonsets",
            "apps",
            json!({"metadata": {"name": "ccm"},
                   "spec": {"selector": {}, "template": {"spec": {"nodeSelector": {"b": "2", "a": "1"},
                            "containers": [{"name": "c", "image": "img"}]}}},
                   "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 2, "numberReady": 1}}),
        );
        assert_eq!(
            column_names(&ds),
            [
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(cell(&ds, "Desired"), 3);
        assert_eq!(cell(&ds, "Current"), 2);
        assert_eq!(cell(&ds, "Ready"), 1);
        assert_eq!(cell(&ds, "Up-to-date"), 0);
        assert_eq!(cell(&ds, "Node Selector"), "a=1,b=2");
        assert_eq!(cell(&ds, "Selector"), "<none>");
        let bare = one("daemonsets", "apps", json!({"metadata": {"name": "x"}}));
        assert_eq!(cell(&bare, "Node Selector"), "<none>");
    }

    #[test]
    fn rbac_and_service_account_rows() {
        let crb = one(
            "clusterrolebindings",
            "rbac.authorization.k8s.io",
            json!({"metadata": {"name": "system:ccm"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:ccm"},
                   "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system"},
                                {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                                {"kind": "Group", "name": "ops"}]}),
        );
        assert_eq!(
            column_names(&crb),
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(cell(&crb, "Role"), "ClusterRole/system:ccm");
        assert_eq!(cell(&crb, "Users"), "alice, bob");
        assert_eq!(cell(&crb, "Groups"), "ops");
        assert_eq!(cell(&crb, "ServiceAccounts"), "kube-system/ccm");

        let role = one(
            "clusterroles",
            "rbac.authorization.k8s.io",
            json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-01T00:00:00Z"}}),
        );
        assert_eq!(column_names(&role), ["Name", "Created At"]);
        assert_eq!(cell(&role, "Created At"), "2026-01-01T00:00:00Z");

        let sa = one("serviceaccounts", "", json!({"metadata": {"name": "ccm"}}));
        assert_eq!(column_names(&sa), ["Name", "Age"]);
    }

    #[test]
    fn include_object_and_no_headers() {
        let desc = lookup("", "v1", "nodes").expect("nodes");
        let node = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}});
        let full = table(
            desc,
            &[&node],
            json!({"resourceVersion": "5"}),
            &TableOptions {
                include_object: IncludeObject::Object,
                no_headers: true,
                ..opts()
            },
        );
        assert_eq!(full["rows"][0]["object"], node);
        assert!(full["columnDefinitions"].is_null());
        assert_eq!(full["metadata"]["resourceVersion"], "5");
        let none = table(
            desc,
            &[&node],
            json!({}),
            &TableOptions {
                include_object: IncludeObject::None,
                ..opts()
            },
        );
        assert!(none["rows"][0].get("object").is_none());
        assert_eq!(IncludeObject::parse("bogus"), None);
        assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
    }
}
