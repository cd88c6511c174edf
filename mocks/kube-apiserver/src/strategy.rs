//! Per-kind rules applied on create and update (upstream "strategies").
//!
//! The generic store treats every object the same; the few kind-specific rules
//! real clients notice live here: status subresource isolation, create-time
//! defaults, and immutable fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::meta::set_meta;
use crate::resources::{NameRule, ResourceDesc};
use crate::selector::{LabelSelector, from_label_selector};

/// Which endpoint a write came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}

/// Create-time defaults and resets.
pub fn prepare_create(desc: &ResourceDesc, obj: &mut Value) {
    fold_string_data(desc, obj);
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match (desc.group, desc.kind) {
        // kubernetes pkg/registry/core/namespace/strategy.go PrepareForCreate.
        ("", "Namespace") => {
            map.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            map.insert("status".into(), json!({"phase": "Active"}));
        }
        // kubernetes pkg/registry/core/service/strategy.go PrepareForCreate clears status.
        ("", "Service") => {
            map.insert("status".into(), json!({"loadBalancer": {}}));
            default_service_spec(map);
        }
        // kubernetes pkg/registry/core/pod/strategy.go PrepareForCreate resets status and
        // sets the QoS class (pkg/apis/core/helper/qos `ComputePodQOS`).
        ("", "Pod") => {
            let mut spec = map.get("spec").cloned().unwrap_or_else(|| json!({}));
            if let Some(spec) = spec.as_object_mut() {
                default_pod_resources(spec);
            }
            map.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": qos_class(&spec)}),
            );
        }
        // kubernetes pkg/registry/apps/deployment/strategy.go PrepareForCreate: an empty
        // status (every field omitempty) and generation 1.
        ("apps", "Deployment") => {
            map.insert("status".into(), json!({}));
        }
        // kubernetes pkg/registry/apps/daemonset/strategy.go PrepareForCreate: an empty
        // status, whose four counters are not omitempty, and generation 1.
        ("apps", "DaemonSet") => {
            map.insert(
                "status".into(),
                json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                       "desiredNumberScheduled": 0, "numberReady": 0}),
            );
        }
        _ => {}
    }
    if tracks_generation(desc) {
        set_meta(obj, "generation", Some(json!(1)));
    }
    apply_defaults(desc, obj);
}

/// Kinds whose strategy sets `metadata.generation` (1 on create, +1 per spec change);
/// the others leave it unset.
fn tracks_generation(desc: &ResourceDesc) -> bool {
    desc.group == "apps"
}

/// Insert `value` at `key` when it is absent or null.
fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Set a string field left at Go's zero value (absent, null or "") to `value`.
fn default_string(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        map.insert(key.into(), json!(value));
    }
}

/// The object at `key`, created (or replacing a null) when absent; None when it holds
/// something else, which validation or the type check reports.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    default_field(map, key, json!({}));
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The defaults a client can observe, applied on every write as upstream's decoder does:
/// kubernetes pkg/apis/apps/v1/defaults.go (`SetDefaults_Deployment`,
/// `SetDefaults_DaemonSet`), pkg/apis/rbac/v1/defaults.go (`roleRef.apiGroup` and
/// subjects' `apiGroup`), a Secret's `type` (pkg/apis/core/v1/defaults.go), and the
/// service-account strategy's `cleanSecretReferences`
/// (pkg/registry/core/serviceaccount/strategy.go), and the pod defaults of workload templates.
fn apply_defaults(desc: &ResourceDesc, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match (desc.group, desc.kind) {
        ("apps", "Deployment") => {
            let Some(spec) = child(map, "spec") else {
                return;
            };
            default_field(spec, "replicas", json!(1));
            default_field(spec, "revisionHistoryLimit", json!(10));
            default_field(spec, "progressDeadlineSeconds", json!(600));
            default_template(spec);
            let Some(strategy) = child(spec, "strategy") else {
                return;
            };
            default_field(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate"))
                && let Some(rolling) = child(strategy, "rollingUpdate")
            {
                default_field(rolling, "maxUnavailable", json!("25%"));
                default_field(rolling, "maxSurge", json!("25%"));
            }
        }
        ("apps", "DaemonSet") => {
            let Some(spec) = child(map, "spec") else {
                return;
            };
            default_field(spec, "revisionHistoryLimit", json!(10));
            default_template(spec);
            let Some(strategy) = child(spec, "updateStrategy") else {
                return;
            };
            default_field(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate"))
                && let Some(rolling) = child(strategy, "rollingUpdate")
            {
                default_field(rolling, "maxUnavailable", json!(1));
                default_field(rolling, "maxSurge", json!(0));
            }
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            if let Some(role_ref) = map.get_mut("roleRef").and_then(Value::as_object_mut) {
                default_string(role_ref, "apiGroup", desc.group);
            }
            let subjects = map.get_mut("subjects").and_then(Value::as_array_mut);
            for subject in subjects
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
                if matches!(kind, "User" | "Group") {
                    default_string(subject, "apiGroup", desc.group);
                }
            }
        }
        // kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec`, `SetDefaults_Pod`
        // (requests default to limits), plus what the Priority admission plugin writes
        // into a pod without a priority class (plugin/pkg/admission/priority).
        ("", "Pod") => {
            let Some(spec) = child(map, "spec") else {
                return;
            };
            default_pod_spec(spec);
            default_pod_resources(spec);
            default_field(spec, "enableServiceLinks", json!(true));
            default_field(spec, "priority", json!(0));
            default_field(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        // Go serializes NodeStatus's non-pointer structs whole: `daemonEndpoints` with a
        // zero port and `nodeInfo` with its ten (not omitempty) strings, sent or not
        // (k8s.io/api core/v1 types.go `NodeStatus`, `NodeDaemonEndpoints`, `NodeSystemInfo`).
        ("", "Node") => {
            let Some(status) = child(map, "status") else {
                return;
            };
            if let Some(endpoints) = child(status, "daemonEndpoints")
                && let Some(kubelet) = child(endpoints, "kubeletEndpoint")
            {
                default_field(kubelet, "Port", json!(0));
            }
            if let Some(info) = child(status, "nodeInfo") {
                for key in [
                    "machineID",
                    "systemUUID",
                    "bootID",
                    "kernelVersion",
                    "osImage",
                    "containerRuntimeVersion",
                    "kubeletVersion",
                    "kubeProxyVersion",
                    "operatingSystem",
                    "architecture",
                ] {
                    default_field(info, key, json!(""));
                }
            }
        }
        // kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_Secret`.
        ("", "Secret") => default_string(map, "type", "Opaque"),
        // Every field of an ObjectReference is omitempty: an empty `namespace` sent for a
        // cluster-scoped object reads back as absent.
        ("", "Event") => {
            if let Some(obj) = map.get_mut("involvedObject").and_then(Value::as_object_mut) {
                obj.retain(|_, v| v.as_str() != Some(""));
            }
        }
        // MicroTime fields are re-encoded the way Go writes them back: UTC, `Z`, six digits.
        ("coordination.k8s.io", "Lease") => {
            if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
                for key in ["acquireTime", "renewTime"] {
                    canonical_micro_time(spec, key);
                }
            }
        }
        ("events.k8s.io", "Event") => {
            canonical_micro_time(map, "eventTime");
            if let Some(series) = map.get_mut("series").and_then(Value::as_object_mut) {
                canonical_micro_time(series, "lastObservedTime");
            }
        }
        // `SetDefaults_Service` runs on every decode, so a port added by an update or a
        // patch gets its protocol and targetPort like one sent on create.
        ("", "Service") => default_service_spec(map),
        // `SetDefaults_Namespace`: the immutable `kubernetes.io/metadata.name` label,
        // set (and reset) to the namespace's name on every write.
        ("", "Namespace") => {
            let name = map
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string);
            if let (Some(name), Some(md)) = (name, child(map, "metadata")) {
                let labels = md.entry("labels").or_insert_with(|| json!({}));
                if !labels.is_object() {
                    *labels = json!({});
                }
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        ("", "ServiceAccount") => {
            // Secret references keep only their name.
            let secrets = map.get_mut("secrets").and_then(Value::as_array_mut);
            for secret in secrets.into_iter().flatten() {
                if let Some(name) = secret.get("name").cloned() {
                    *secret = json!({"name": name});
                } else if secret.is_object() {
                    *secret = json!({});
                }
            }
        }
        _ => {}
    }
}

/// The pod template of a workload gets the pod defaults a client reads back (kubernetes
/// pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec`, `SetDefaults_Container`,
/// `SetDefaults_ContainerPort`).
fn default_template(spec: &mut Map<String, Value>) {
    let Some(pod) = spec
        .get_mut("template")
        .and_then(Value::as_object_mut)
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    default_pod_spec(pod);
}

fn default_pod_spec(pod: &mut Map<String, Value>) {
    default_field(pod, "restartPolicy", json!("Always"));
    default_field(pod, "terminationGracePeriodSeconds", json!(30));
    default_field(pod, "dnsPolicy", json!("ClusterFirst"));
    default_field(pod, "securityContext", json!({}));
    default_field(pod, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let containers = pod.get_mut(list).and_then(Value::as_array_mut);
        for c in containers
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let policy = if image_pulls_always(image) {
                "Always"
            } else {
                "IfNotPresent"
            };
            default_field(c, "imagePullPolicy", json!(policy));
            default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
            default_field(c, "terminationMessagePolicy", json!("File"));
            default_field(c, "resources", json!({}));
            let ports = c.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                default_field(port, "protocol", json!("TCP"));
            }
        }
    }
}

/// A container's requests default to its limits (`SetDefaults_Pod`).
fn default_pod_resources(pod: &mut Map<String, Value>) {
    for list in ["initContainers", "containers"] {
        let containers = pod.get_mut(list).and_then(Value::as_array_mut);
        for c in containers
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let Some(requests) = child(resources, "requests") else {
                continue;
            };
            for (name, q) in limits {
                default_field(requests, &name, q);
            }
        }
    }
}

/// A quantity (`100m`, `1.5`, `128Mi`, `2G`, `1e3`) as a number, for comparisons.
fn quantity(q: &Value) -> Option<f64> {
    let text = match q {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    text.parse::<f64>().ok()
}

/// The QoS class of a pod spec (kubernetes pkg/apis/core/helper/qos/qos.go
/// `ComputePodQOS`, container resources only): BestEffort without any cpu or memory
/// request or limit; Guaranteed when every container limits both and requests equal
/// limits; Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    const SUPPORTED: [&str; 2] = ["cpu", "memory"];
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut limited = 0;
            for (kind, sums) in [("requests", &mut requests), ("limits", &mut limits)] {
                for name in SUPPORTED {
                    let q = c
                        .pointer(&format!("/resources/{kind}/{name}"))
                        .and_then(quantity)
                        .filter(|q| *q > 0.0);
                    if let Some(q) = q {
                        *sums.entry(name).or_default() += q;
                        if kind == "limits" {
                            limited += 1;
                        }
                    }
                }
            }
            if limited < SUPPORTED.len() {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let equal = SUPPORTED
        .iter()
        .all(|name| match (requests.get(name), limits.get(name)) {
            (Some(r), Some(l)) => (r - l).abs() < 1e-9,
            (None, Some(_)) => true,
            _ => false,
        });
    if guaranteed && equal {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `Always` for an image without a tag or digest, or tagged `latest`.
fn image_pulls_always(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// A `metav1.MicroTime` as Go marshals it (apimachinery pkg/apis/meta/v1/micro_time.go):
/// RFC 3339 in UTC with exactly six fractional digits, so `…+00:00` or `…+02:00` sent by a
/// client reads back as `…000000Z`. Values that do not parse are left for the decoder.
pub fn micro_time(value: &str) -> Option<String> {
    let ts: jiff::Timestamp = value.parse().ok()?;
    Some(ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}

fn canonical_micro_time(map: &mut Map<String, Value>, key: &str) {
    if let Some(canonical) = map.get(key).and_then(Value::as_str).and_then(micro_time) {
        map.insert(key.into(), json!(canonical));
    }
}

/// A Secret's `stringData` is write-only: every entry is stored base64-encoded in `data`,
/// over a `data` key of the same name, and `stringData` itself is dropped, so no reader
/// (a watch, a GET, a CCM's Secret lister) ever sees it (kubernetes pkg/apis/core/v1/
/// conversion.go `Convert_v1_Secret_To_core_Secret`). Non-string values are left for
/// validation to refuse.
fn fold_string_data(desc: &ResourceDesc, obj: &mut Value) {
    use base64::Engine as _;
    if !(desc.group.is_empty() && desc.kind == "Secret") {
        return;
    }
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.get("stringData") else {
        return;
    };
    if strings.values().any(|v| !v.is_string()) {
        return;
    }
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    if !matches!(map.get("data"), Some(Value::Object(_))) {
        map.insert("data".into(), json!({}));
    }
    if let Some(Value::Object(data)) = map.get_mut("data") {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, Value::String(encoded));
        }
    }
}

/// The defaults of kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_Service`
/// that need no allocator (cluster IPs and node ports are not allocated here).
fn default_service_spec(map: &mut serde_json::Map<String, Value>) {
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    spec.entry("type").or_insert_with(|| json!("ClusterIP"));
    spec.entry("sessionAffinity")
        .or_insert_with(|| json!("None"));
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| json!("Cluster"));
    let is_external = matches!(
        spec.get("type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    );
    if is_external {
        spec.entry("externalTrafficPolicy")
            .or_insert_with(|| json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert_with(|| json!("TCP"));
            if let Some(p) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(p);
            }
        }
    }
    // An ingress IP of a LoadBalancer defaults its ipMode to VIP.
    let is_lb = spec.get("type").and_then(Value::as_str) == Some("LoadBalancer");
    let ingress = map
        .get_mut("status")
        .and_then(|s| s.get_mut("loadBalancer"))
        .and_then(|l| l.get_mut("ingress"))
        .and_then(Value::as_array_mut);
    for ing in ingress
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let has_ip = ing
            .get("ip")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty());
        if is_lb && has_ip {
            ing.entry("ipMode").or_insert_with(|| json!("VIP"));
        }
    }
}

/// Status isolation on update (kubernetes pkg/registry/core/{node,service}/strategy.go):
/// the main resource cannot change status, `/status` cannot change spec; metadata
/// changes through `/status` are kept.
///
/// Deployments also keep their labels through `/status` (kubernetes
/// pkg/registry/apps/deployment/strategy.go `deploymentStatusStrategy`). Defaults are
/// applied again, as upstream decodes every write with them.
pub fn prepare_update(desc: &ResourceDesc, sub: Subresource, old: &Value, new: &mut Value) {
    fold_string_data(desc, new);
    apply_defaults(desc, new);
    if !desc.status_subresource {
        return;
    }
    let reset = match sub {
        Subresource::Main => "status",
        Subresource::Status => "spec",
    };
    if sub == Subresource::Status && (desc.group, desc.kind) == ("apps", "Deployment") {
        let labels = old.pointer("/metadata/labels").cloned();
        set_meta(new, "labels", labels);
    }
    let Some(map) = new.as_object_mut() else {
        return;
    };
    match old.get(reset) {
        Some(v) => {
            map.insert(reset.into(), v.clone());
        }
        None => {
            map.remove(reset);
        }
    }
    // A Service that stops being a LoadBalancer loses its load-balancer status with the
    // same write (kubernetes pkg/registry/core/service/strategy.go
    // `dropTypeDependentFields`), so no ingress outlives the type that allows it.
    if sub == Subresource::Main && (desc.group, desc.kind) == ("", "Service") {
        drop_type_dependent_fields(old, map);
    }
}

/// What a Service's new type no longer needs, when the write did not also change it
/// (kubernetes pkg/registry/core/service/strategy.go `dropTypeDependentFields`): the
/// load-balancer status, an unchanged externalTrafficPolicy once neither NodePort nor
/// LoadBalancer, an unchanged allocateLoadBalancerNodePorts once not a LoadBalancer.
/// Node ports and the health-check node port are released by the allocator.
fn drop_type_dependent_fields(old: &Value, new: &mut Map<String, Value>) {
    let type_of = |spec: Option<&Value>| {
        spec.and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string()
    };
    let (was, is) = (type_of(old.get("spec")), type_of(new.get("spec")));
    let external = |t: &str| matches!(t, "NodePort" | "LoadBalancer");
    if is != "LoadBalancer"
        && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
        && status.contains_key("loadBalancer")
    {
        status.insert("loadBalancer".into(), json!({}));
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let unchanged = |spec: &Map<String, Value>, key: &str| {
        spec.get(key).is_some() && spec.get(key) == old.pointer(&format!("/spec/{key}"))
    };
    if external(&was) && !external(&is) && unchanged(spec, "externalTrafficPolicy") {
        spec.remove("externalTrafficPolicy");
    }
    if was == "LoadBalancer"
        && is != "LoadBalancer"
        && unchanged(spec, "allocateLoadBalancerNodePorts")
    {
        spec.remove("allocateLoadBalancerNodePorts");
    }
}

/// Generation on update, after the store has copied the old one: +1 when a write to
/// the main resource changes the spec (kubernetes pkg/registry/apps/daemonset/strategy.go
/// `PrepareForUpdate`) or, for Deployments, the spec or the annotations
/// (pkg/registry/apps/deployment/strategy.go). Missing, null and empty annotations are
/// equal, as upstream's semantic equality treats nil and empty maps.
pub fn update_generation(desc: &ResourceDesc, sub: Subresource, old: &Value, new: &mut Value) {
    if sub != Subresource::Main || !tracks_generation(desc) {
        return;
    }
    let annotations = |v: &Value| {
        v.pointer("/metadata/annotations")
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            .cloned()
    };
    let changed = old.get("spec") != new.get("spec")
        || (desc.kind == "Deployment" && annotations(old) != annotations(new));
    if changed {
        let generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        set_meta(new, "generation", Some(json!(generation + 1)));
    }
}

/// Keep the values the registry allocated when an update leaves them empty, so that
/// `kubectl replace` of a Service without `clusterIP` or node ports is not an
/// immutable-field error (kubernetes pkg/registry/core/service/storage/storage.go
/// `patchAllocatedValues`): cluster IPs while both versions need one, node ports by
/// port name while both need them (unless the old port is used by another port of the
/// new object), and the health-check node port.
pub fn patch_allocated_values(desc: &ResourceDesc, old: &Value, new: &mut Value) {
    if !(desc.group.is_empty() && desc.kind == "Service") {
        return;
    }
    let Some(old_spec) = old.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let svc_type = |s: &serde_json::Map<String, Value>| {
        s.get("type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string()
    };
    let (old_type, new_type) = (svc_type(old_spec), svc_type(spec));
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Number(n)) => n.as_u64() == Some(0),
        _ => false,
    };
    // needsClusterIP: every type but ExternalName.
    if old_type != "ExternalName" && new_type != "ExternalName" {
        for field in ["clusterIP", "clusterIPs"] {
            if empty(spec.get(field)) && !empty(old_spec.get(field)) {
                spec.insert(field.into(), old_spec[field].clone());
            }
        }
    }
    // needsNodePort: NodePort, or LoadBalancer that allocates node ports.
    let needs_node_port = |t: &str, s: &serde_json::Map<String, Value>| {
        t == "NodePort"
            || (t == "LoadBalancer"
                && s.get("allocateLoadBalancerNodePorts") != Some(&json!(false)))
    };
    if needs_node_port(&old_type, old_spec) && needs_node_port(&new_type, spec) {
        let node_port_of = |p: &Value| p.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
        let ports_of = |s: &serde_json::Map<String, Value>| -> Vec<Value> {
            s.get("ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let old_ports = ports_of(old_spec);
        let new_used: Vec<u64> = ports_of(spec).iter().map(node_port_of).collect();
        let name_of = |p: &Value| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut() {
                if node_port_of(port) != 0 {
                    continue;
                }
                let name = name_of(port);
                let Some(old_np) = old_ports
                    .iter()
                    .find(|p| name_of(p) == name)
                    .map(node_port_of)
                    .filter(|np| *np != 0 && !new_used.contains(np))
                else {
                    continue;
                };
                if let Some(map) = port.as_object_mut() {
                    map.insert("nodePort".into(), json!(old_np));
                }
            }
        }
    }
    // needsHCNodePort: LoadBalancer with externalTrafficPolicy Local.
    let needs_hc = |t: &str, s: &serde_json::Map<String, Value>| {
        t == "LoadBalancer"
            && s.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
    };
    if needs_hc(&old_type, old_spec)
        && needs_hc(&new_type, spec)
        && empty(spec.get("healthCheckNodePort"))
        && let Some(hc) = old_spec.get("healthCheckNodePort")
    {
        spec.insert("healthCheckNodePort".into(), hc.clone());
    }
}

/// Kind-specific validation of a new object; returns the causes of a 422.
pub fn validate_create(desc: &ResourceDesc, obj: &Value) -> Vec<Cause> {
    validate_object(desc, obj)
}

/// The rules a client most often runs into, with upstream's paths and wording:
/// workload selectors and templates (kubernetes pkg/apis/apps/validation
/// `ValidateDeploymentSpec`, `ValidateDaemonSetSpec`), policy rules, role references and
/// subjects (pkg/apis/rbac/validation). Pod specs are not validated beyond having
/// containers (and, on update, changing only what `ValidatePodUpdate` allows).
fn validate_object(desc: &ResourceDesc, obj: &Value) -> Vec<Cause> {
    let mut causes = crate::validation::validate(desc, obj);
    match (desc.group, desc.kind) {
        ("apps", "Deployment" | "DaemonSet") => validate_workload(desc, obj, &mut causes),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            let rules = obj.get("rules").and_then(Value::as_array);
            for (i, rule) in rules.into_iter().flatten().enumerate() {
                validate_rule(rule, desc.namespaced, &format!("rules[{i}]"), &mut causes);
            }
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            validate_binding(desc, obj, &mut causes);
        }
        // kubernetes pkg/apis/core/validation `ValidatePodSpec`: at least one container.
        ("", "Pod") if list_len(obj.get("spec").unwrap_or(&Value::Null), "containers") == 0 => {
            causes.push(Cause::required("spec.containers", ""));
        }
        _ => {}
    }
    causes
}

/// The fields of a pod spec an update may change (kubernetes pkg/apis/core/validation
/// `updatablePodSpecFields`).
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`'s spec rule: the new spec with its updatable fields taken from the
/// old one must equal the old spec. The cause's message names the spec fields that
/// differ where upstream prints a Go diff of the two specs.
fn validate_pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (Some(old_spec), Some(new_spec)) = (
        old.get("spec").and_then(Value::as_object),
        new.get("spec").and_then(Value::as_object),
    ) else {
        return;
    };
    let mut munged = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let old_list = old_spec.get(list).and_then(Value::as_array);
        let new_list = munged.get_mut(list).and_then(Value::as_array_mut);
        if let (Some(old_list), Some(new_list)) = (old_list, new_list)
            && old_list.len() == new_list.len()
        {
            for (n, o) in new_list.iter_mut().zip(old_list) {
                if let (Some(n), Some(image)) = (n.as_object_mut(), o.get("image")) {
                    n.insert("image".into(), image.clone());
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match old_spec.get(key) {
            Some(v) => {
                munged.insert(key.into(), v.clone());
            }
            None => {
                munged.remove(key);
            }
        }
    }
    if &munged == old_spec {
        return;
    }
    let mut changed: Vec<&str> = munged
        .keys()
        .chain(old_spec.keys())
        .filter(|k| munged.get(*k) != old_spec.get(*k))
        .map(String::as_str)
        .collect();
    changed.sort_unstable();
    changed.dedup();
    causes.push(Cause::forbidden(
        "spec",
        &format!(
            "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\nchanged: {}",
            changed.join(", ")
        ),
    ));
}

fn list_len(v: &Value, key: &str) -> usize {
    v.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

fn rendered(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".into(), Value::to_string)
}

fn validate_workload(desc: &ResourceDesc, obj: &Value, causes: &mut Vec<Cause>) {
    let lower = desc.kind.to_ascii_lowercase();
    let selector_value = obj.pointer("/spec/selector").filter(|v| !v.is_null());
    if desc.kind == "Deployment" && selector_value.is_none() {
        causes.push(Cause::required("spec.selector", ""));
    }
    if let Some(sel) = selector_value {
        let terms = list_len(sel, "matchExpressions")
            + sel
                .get("matchLabels")
                .and_then(Value::as_object)
                .map_or(0, Map::len);
        if terms == 0 {
            causes.push(Cause::invalid_rendered(
                "spec.selector",
                &sel.to_string(),
                &format!("empty selector is invalid for {lower}"),
            ));
        }
    }
    match from_label_selector(selector_value) {
        Err(e) => causes.push(Cause::invalid_rendered(
            "spec.selector",
            &rendered(selector_value),
            &format!("invalid label selector: {}", e.0),
        )),
        // An empty selector is reported above; an absent one matches nothing.
        Ok(selector) => {
            let labels = obj.pointer("/spec/template/metadata/labels");
            let set: std::collections::BTreeMap<String, String> = labels
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let matches = selector.is_some_and(|s: LabelSelector| s.is_empty() || s.matches(&set));
            if !matches {
                causes.push(Cause::invalid_rendered(
                    "spec.template.metadata.labels",
                    &rendered(labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    if obj
        .pointer("/spec/template/spec/containers")
        .map_or(0, |c| c.as_array().map_or(0, Vec::len))
        == 0
    {
        causes.push(Cause::required("spec.template.spec.containers", ""));
    }
}

fn validate_rule(rule: &Value, namespaced: bool, path: &str, causes: &mut Vec<Cause>) {
    if list_len(rule, "verbs") == 0 {
        causes.push(Cause::required(
            &format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if list_len(rule, "nonResourceURLs") > 0 {
        let urls = rendered(rule.get("nonResourceURLs"));
        if namespaced {
            causes.push(Cause::invalid_rendered(
                &format!("{path}.nonResourceURLs"),
                &urls,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|k| list_len(rule, k) > 0)
        {
            causes.push(Cause::invalid_rendered(
                &format!("{path}.nonResourceURLs"),
                &urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if list_len(rule, "apiGroups") == 0 {
        causes.push(Cause::required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list_len(rule, "resources") == 0 {
        causes.push(Cause::required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

fn validate_binding(desc: &ResourceDesc, obj: &Value, causes: &mut Vec<Cause>) {
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = text(obj, "/roleRef/apiGroup");
    if group != desc.group {
        causes.push(Cause::not_supported(
            "roleRef.apiGroup",
            &group,
            &[desc.group],
        ));
    }
    let kind = text(obj, "/roleRef/kind");
    let kinds: &[&str] = if desc.namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind.as_str()) {
        causes.push(Cause::not_supported("roleRef.kind", &kind, kinds));
    }
    let name = text(obj, "/roleRef/name");
    if name.is_empty() {
        causes.push(Cause::required("roleRef.name", ""));
    } else {
        causes.extend(
            crate::meta::validate_name(&name, NameRule::PathSegment)
                .into_iter()
                .map(|c| Cause {
                    field: "roleRef.name".into(),
                    ..c
                }),
        );
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        let path = |f: &str| format!("subjects[{i}].{f}");
        let name = text(subject, "/name");
        let group = text(subject, "/apiGroup");
        if name.is_empty() {
            causes.push(Cause::required(&path("name"), ""));
        }
        match text(subject, "/kind").as_str() {
            "ServiceAccount" => {
                if !name.is_empty() {
                    causes.extend(
                        crate::meta::validate_name(&name, NameRule::Subdomain)
                            .into_iter()
                            .map(|c| Cause {
                                field: path("name"),
                                ..c
                            }),
                    );
                }
                if !group.is_empty() {
                    causes.push(Cause::not_supported(&path("apiGroup"), &group, &[""]));
                }
                if !desc.namespaced && text(subject, "/namespace").is_empty() {
                    causes.push(Cause::required(&path("namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != desc.group {
                    causes.push(Cause::not_supported(
                        &path("apiGroup"),
                        &group,
                        &[desc.group],
                    ));
                }
            }
            other => causes.push(Cause::not_supported(
                &path("kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

/// Kind-specific update validation; returns the causes of a 422. Includes the checks of
/// [`validate_create`], as upstream's `ValidateXUpdate` does.
pub fn validate_update(desc: &ResourceDesc, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = validate_object(desc, new);
    causes.extend(crate::validation::validate_update(desc, old, new));
    match (desc.group, desc.kind) {
        // kubernetes pkg/apis/rbac/validation `ValidateRoleBindingUpdate`.
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding")
            if old.get("roleRef") != new.get("roleRef") =>
        {
            causes.push(Cause::invalid_rendered(
                "roleRef",
                &rendered(new.get("roleRef")),
                "cannot change roleRef",
            ));
        }
        ("", "Pod") => validate_pod_update(old, new, &mut causes),
        // kubernetes pkg/apis/core/validation `ValidateConfigMapUpdate`,
        // `ValidateSecretUpdate`: an immutable object keeps its data and stays immutable.
        ("", "ConfigMap" | "Secret") if old.get("immutable") == Some(&json!(true)) => {
            let immutable = "field is immutable when `immutable` is set";
            if new.get("immutable") != Some(&json!(true)) {
                causes.push(Cause::forbidden("immutable", immutable));
            }
            for key in ["data", "binaryData"] {
                if old.get(key) != new.get(key) {
                    causes.push(Cause::forbidden(key, immutable));
                }
            }
        }
        // kubernetes pkg/apis/apps/validation: the selector is immutable in apps/v1.
        ("apps", "Deployment" | "DaemonSet")
            if old.pointer("/spec/selector") != new.pointer("/spec/selector") =>
        {
            causes.push(Cause::invalid_rendered(
                "spec.selector",
                &rendered(new.pointer("/spec/selector")),
                "field is immutable",
            ));
        }
        _ => {}
    }
    if desc.group.is_empty() && desc.kind == "Node" {
        // kubernetes pkg/apis/core/validation/validation.go ValidateNodeUpdate:
        // providerID may only go from "" to a value.
        let old_id = old
            .pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_id = new
            .pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !old_id.is_empty() && old_id != new_id {
            causes.push(Cause::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
    if desc.group.is_empty() && desc.kind == "Service" {
        let old_ip = old
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_ip = new
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        // Upstream first carries a changed clusterIP into clusterIPs[0] and then refuses
        // the change there (kubernetes pkg/registry/core/service/storage
        // `normalizeClusterIPs`, then `ValidateServiceUpdate`), so that is the field a client
        // sees.
        if !old_ip.is_empty() && old_ip != new_ip {
            causes.push(Cause::invalid_rendered(
                "spec.clusterIPs[0]",
                &format!("[{new_ip:?}]"),
                "may not change once set",
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let pod = |resources: Value| json!({"containers": [{"name": "c", "resources": resources}]});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1000m", "memory": "1024Mi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed",
            "requests default to limits"
        );
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "2", "memory": "1Gi"},
                "requests": {"cpu": "1", "memory": "1Gi"}}))),
            "Burstable"
        );
    }

    #[test]
    fn pod_specs_change_only_where_upstream_allows() {
        let old =
            json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a:1"}]}});
        let mut causes = Vec::new();
        let image = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a:2"}],
            "activeDeadlineSeconds": 5}});
        validate_pod_update(&old, &image, &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        let moved =
            json!({"spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "a:1"}]}});
        validate_pod_update(&old, &moved, &mut causes);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec");
        assert!(
            causes[0].message.contains("changed: nodeName"),
            "{}",
            causes[0].message
        );
    }
    use crate::resources::lookup;

    #[test]
    fn a_service_that_stops_being_a_load_balancer_loses_its_ingress() {
        let svc = lookup("", "v1", "services").expect("services");
        let old = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "allocateLoadBalancerNodePorts": true},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        let mut new = json!({"spec": {"type": "ClusterIP", "externalTrafficPolicy": "Local",
            "allocateLoadBalancerNodePorts": true}});
        prepare_update(svc, Subresource::Main, &old, &mut new);
        assert_eq!(new["status"], json!({"loadBalancer": {}}));
        assert!(new["spec"].get("externalTrafficPolicy").is_none(), "{new}");
        assert!(
            new["spec"].get("allocateLoadBalancerNodePorts").is_none(),
            "{new}"
        );
        // A status write to a LoadBalancer defaults the ingress' ipMode.
        let mut status = json!({"spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"}]}}});
        prepare_update(svc, Subresource::Status, &old, &mut status);
        assert_eq!(
            status["status"]["loadBalancer"]["ingress"],
            json!([{"ip": "1.2.3.4", "ipMode": "VIP"}, {"hostname": "h"}])
        );
        let mut still = json!({"spec": {"type": "LoadBalancer"}});
        prepare_update(svc, Subresource::Main, &old, &mut still);
        assert_eq!(still["status"], old["status"]);
    }

    #[test]
    fn workload_templates_get_pod_defaults() {
        let desc = lookup("apps", "v1", "daemonsets").expect("daemonsets");
        let mut ds = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "i:latest", "ports": [{"containerPort": 80}]},
                           {"name": "d", "image": "reg:5000/i"}],
            "initContainers": [{"name": "e", "image": "x:1", "imagePullPolicy": "Never"}]}}}});
        apply_defaults(desc, &mut ds);
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["schedulerName"], "default-scheduler");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(pod["containers"][1]["imagePullPolicy"], "Always");
        assert_eq!(pod["containers"][1]["terminationMessagePolicy"], "File");
        assert_eq!(pod["initContainers"][0]["imagePullPolicy"], "Never");
        assert!(image_pulls_always("nginx"));
        assert!(!image_pulls_always("nginx:1.27"));
        assert!(!image_pulls_always("nginx@sha256:abc"));
    }

    #[test]
    fn micro_times_read_back_in_utc_with_six_digits() {
        assert_eq!(
            micro_time("2026-01-01T00:00:00.000000+00:00").as_deref(),
            Some("2026-01-01T00:00:00.000000Z")
        );
        assert_eq!(
            micro_time("2026-01-01T02:00:00.5+02:00").as_deref(),
            Some("2026-01-01T00:00:00.500000Z")
        );
        assert_eq!(micro_time("yesterday"), None);
        let desc = lookup("coordination.k8s.io", "v1", "leases").expect("leases");
        let mut lease = json!({"spec": {"renewTime": "2026-01-01T00:00:10.000000+00:00",
            "holderIdentity": "a"}});
        apply_defaults(desc, &mut lease);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:10.000000Z");
    }

    #[test]
    fn namespaces_carry_their_name_label_and_service_ports_their_defaults_on_update() {
        let ns = lookup("", "v1", "namespaces").expect("namespaces");
        let mut obj = json!({"metadata": {"name": "diff", "labels": {"a": "b",
            "kubernetes.io/metadata.name": "other"}}});
        apply_defaults(ns, &mut obj);
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"a": "b", "kubernetes.io/metadata.name": "diff"})
        );
        let svc = lookup("", "v1", "services").expect("services");
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}});
        let mut new = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"name": "b", "port": 8443}]}});
        prepare_update(svc, Subresource::Main, &old, &mut new);
        assert_eq!(
            new["spec"]["ports"][1],
            json!({"name": "b", "port": 8443,
            "protocol": "TCP", "targetPort": 8443})
        );
    }

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let secrets = lookup("", "v1", "secrets").expect("secrets");
        let mut obj = json!({
            "metadata": {"name": "s"},
            "data": {"a": "b2xk", "keep": "eA=="},
            "stringData": {"a": "new", "host.username": "user"}
        });
        prepare_create(secrets, &mut obj);
        assert_eq!(
            obj,
            json!({
                "metadata": {"name": "s"},
                "data": {"a": "bmV3", "keep": "eA==", "host.username": "dXNlcg=="},
                "type": "Opaque"
            })
        );
        // Updates too; without `data` it is created.
        let mut new = json!({"metadata": {"name": "s"}, "stringData": {"k": ""}, "type": "x"});
        prepare_update(secrets, Subresource::Main, &obj, &mut new);
        assert_eq!(
            new,
            json!({"metadata": {"name": "s"}, "data": {"k": ""}, "type": "x"})
        );
        // Other kinds keep a field of that name.
        let maps = lookup("", "v1", "configmaps").expect("configmaps");
        let mut cm = json!({"stringData": {"k": "v"}});
        prepare_create(maps, &mut cm);
        assert_eq!(cm, json!({"stringData": {"k": "v"}}));
    }

    #[test]
    fn workload_defaults_generation_and_status() {
        let deploy = lookup("apps", "v1", "deployments").expect("deployments");
        let mut obj = json!({
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c"}]}},
                     "strategy": {}},
            "status": {"replicas": 9},
        });
        prepare_create(deploy, &mut obj);
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(obj["status"], json!({}));
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(obj["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(
            obj["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert!(validate_create(deploy, &obj).is_empty());

        // A Recreate strategy gets no rolling-update parameters.
        let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}});
        prepare_create(deploy, &mut recreate);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(recreate["spec"]["replicas"], 0);

        // Spec and annotation changes bump the generation; label and status changes do not.
        let mut same = obj.clone();
        same["metadata"]["labels"] = json!({"x": "y"});
        update_generation(deploy, Subresource::Main, &obj, &mut same);
        assert_eq!(same["metadata"]["generation"], 1);
        let mut annotated = obj.clone();
        annotated["metadata"]["annotations"] = json!({});
        update_generation(deploy, Subresource::Main, &obj, &mut annotated);
        assert_eq!(annotated["metadata"]["generation"], 1);
        annotated["metadata"]["annotations"] = json!({"a": "b"});
        update_generation(deploy, Subresource::Main, &obj, &mut annotated);
        assert_eq!(annotated["metadata"]["generation"], 2);
        let mut scaled = obj.clone();
        scaled["spec"]["replicas"] = json!(3);
        update_generation(deploy, Subresource::Status, &obj, &mut scaled);
        assert_eq!(scaled["metadata"]["generation"], 1);
        update_generation(deploy, Subresource::Main, &obj, &mut scaled);
        assert_eq!(scaled["metadata"]["generation"], 2);

        // /status keeps spec and labels; the main resource keeps status.
        let mut status = obj.clone();
        status["spec"]["replicas"] = json!(5);
        status["metadata"]["labels"] = json!({"new": "label"});
        status["status"] = json!({"readyReplicas": 1});
        prepare_update(deploy, Subresource::Status, &obj, &mut status);
        assert_eq!(status["spec"]["replicas"], 1);
        assert_eq!(status["metadata"].get("labels"), None);
        assert_eq!(status["status"]["readyReplicas"], 1);
        let mut main = obj.clone();
        main["status"] = json!({"readyReplicas": 1});
        prepare_update(deploy, Subresource::Main, &obj, &mut main);
        assert_eq!(main["status"], json!({}));

        let ds = lookup("apps", "v1", "daemonsets").expect("daemonsets");
        let mut obj = json!({"spec": {}});
        prepare_create(ds, &mut obj);
        assert_eq!(
            obj["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(obj["status"]["numberReady"], 0);
        assert_eq!(obj["metadata"]["generation"], 1);
        let mut annotated = obj.clone();
        annotated["metadata"]["annotations"] = json!({"a": "b"});
        update_generation(ds, Subresource::Main, &obj, &mut annotated);
        assert_eq!(annotated["metadata"]["generation"], 1);
    }

    #[test]
    fn workload_validation() {
        let deploy = lookup("apps", "v1", "deployments").expect("deployments");
        let fields =
            |causes: Vec<Cause>| -> Vec<String> { causes.into_iter().map(|c| c.field).collect() };
        assert_eq!(
            fields(validate_create(deploy, &json!({"spec": {}}))),
            [
                "spec.selector",
                "spec.template.metadata.labels",
                "spec.template.spec.containers"
            ]
        );
        let mismatch = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{}]}}}});
        let causes = validate_create(deploy, &mismatch);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message,
            r#"Invalid value: {"app":"b"}: `selector` does not match template `labels`"#
        );
        let empty = json!({"spec": {"selector": {}, "template": {"spec": {"containers": [{}]}}}});
        assert_eq!(fields(validate_create(deploy, &empty)), ["spec.selector"]);
        let bad_op = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Is"}]},
            "template": {"spec": {"containers": [{}]}}}});
        assert_eq!(fields(validate_create(deploy, &bad_op)), ["spec.selector"]);

        // The selector is immutable.
        let ok = json!({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{}]}}}});
        assert!(validate_create(deploy, &ok).is_empty());
        let mut moved = ok.clone();
        moved["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
        let causes = validate_update(deploy, &ok, &moved);
        assert_eq!(causes.len(), 1);
        assert!(
            causes[0].message.ends_with("field is immutable"),
            "{causes:?}"
        );

        // A DaemonSet without a selector matches no template.
        let ds = lookup("apps", "v1", "daemonsets").expect("daemonsets");
        assert_eq!(
            fields(validate_create(
                ds,
                &json!({"spec": {"template": {"spec": {"containers": [{}]}}}})
            )),
            ["spec.template.metadata.labels"]
        );
    }

    #[test]
    fn rbac_defaults_and_validation() {
        let rbac = "rbac.authorization.k8s.io";
        let crb = lookup(rbac, "v1", "clusterrolebindings").expect("crb");
        let mut obj = json!({
            "roleRef": {"kind": "ClusterRole", "name": "system:ccm"},
            "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system"},
                         {"kind": "User", "name": "u"}],
        });
        prepare_create(crb, &mut obj);
        assert_eq!(obj["roleRef"]["apiGroup"], rbac);
        assert_eq!(obj["subjects"][0].get("apiGroup"), None);
        assert_eq!(obj["subjects"][1]["apiGroup"], rbac);
        assert!(validate_create(crb, &obj).is_empty());
        assert!(obj["metadata"].get("generation").is_none());

        let bad = json!({"roleRef": {"apiGroup": rbac, "kind": "Role", "name": ""},
                         "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name"}, {"kind": "Robot", "name": "r"}]});
        let causes = validate_create(crb, &bad);
        let summary: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("roleRef.kind", "FieldValueNotSupported"),
                ("roleRef.name", "FieldValueRequired"),
                ("subjects[0].name", "FieldValueInvalid"),
                ("subjects[0].namespace", "FieldValueRequired"),
                ("subjects[1].kind", "FieldValueNotSupported"),
            ]
        );
        assert_eq!(
            causes[0].message,
            r#"Unsupported value: "Role": supported values: "ClusterRole""#
        );
        // A RoleBinding may name a Role, and its service accounts need no namespace.
        let rb = lookup(rbac, "v1", "rolebindings").expect("rb");
        let mut ok = json!({"roleRef": {"kind": "Role", "name": "extension-apiserver-authentication-reader"},
                            "subjects": [{"kind": "ServiceAccount", "name": "ccm"}]});
        prepare_create(rb, &mut ok);
        assert!(validate_create(rb, &ok).is_empty());
        let mut changed = ok.clone();
        changed["roleRef"]["name"] = json!("other");
        assert_eq!(validate_update(rb, &ok, &changed).len(), 1);

        let cr = lookup(rbac, "v1", "clusterroles").expect("cr");
        let rules = json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]},
                                     {"verbs": [], "nonResourceURLs": ["/healthz"]},
                                     {"verbs": ["get"]}]});
        let fields: Vec<String> = validate_create(cr, &rules)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["rules[1].verbs", "rules[2].apiGroups", "rules[2].resources"]
        );
        let role = lookup(rbac, "v1", "roles").expect("roles");
        let urls = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(validate_create(role, &urls).len(), 1);
        assert!(validate_create(cr, &urls).is_empty());
    }

    #[test]
    fn service_account_secret_references_keep_only_names() {
        let sa = lookup("", "v1", "serviceaccounts").expect("serviceaccounts");
        let mut obj = json!({"secrets": [{"name": "s", "namespace": "x", "uid": "u"}]});
        prepare_create(sa, &mut obj);
        assert_eq!(obj["secrets"], json!([{"name": "s"}]));
        assert!(obj.get("metadata").is_none());
    }

    #[test]
    fn node_status_isolation() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let old = json!({"spec": {"podCIDR": "a"}, "status": {"phase": "x"}});
        let mut main = json!({"spec": {"podCIDR": "b"}, "status": {"phase": "y"}});
        prepare_update(nodes, Subresource::Main, &old, &mut main);
        assert_eq!(
            main,
            json!({"spec": {"podCIDR": "b"}, "status": {"phase": "x"}})
        );
        let mut status = json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "y"}});
        prepare_update(nodes, Subresource::Status, &old, &mut status);
        assert_eq!(status["metadata"], json!({"labels": {"a": "b"}}));
        assert_eq!(status["spec"], json!({"podCIDR": "a"}));
        assert_eq!(status["status"]["phase"], "y");
        // The Go zero values of NodeStatus's structs, as kube-apiserver writes them.
        assert_eq!(
            status["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        assert_eq!(status["status"]["nodeInfo"]["kubeletVersion"], "");
    }

    #[test]
    fn provider_id_is_immutable_once_set() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let empty = json!({"spec": {}});
        let set = json!({"spec": {"providerID": "openstack:///1"}});
        let other = json!({"spec": {"providerID": "openstack:///2"}});
        assert!(validate_update(nodes, &empty, &set).is_empty());
        assert!(validate_update(nodes, &set, &set).is_empty());
        assert_eq!(validate_update(nodes, &set, &other).len(), 1);
    }

    #[test]
    fn service_defaults() {
        let svc = lookup("", "v1", "services").expect("services");
        let mut obj =
            json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}, "status": {"x": 1}});
        prepare_create(svc, &mut obj);
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(obj["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(obj["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(obj["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn allocated_values_survive_updates_that_omit_them() {
        let svc = lookup("", "v1", "services").expect("services");
        let old = json!({"spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "healthCheckNodePort": 31000,
            "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                      {"name": "https", "port": 443, "nodePort": 30443}],
        }});
        let mut new = json!({"spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "",
            // `https` now explicitly uses http's old node port, so http cannot get it back.
            "ports": [{"name": "http", "port": 8080},
                      {"name": "https", "port": 443, "nodePort": 30080},
                      {"name": "new", "port": 9}],
        }});
        patch_allocated_values(svc, &old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.7");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.7"]));
        assert_eq!(new["spec"]["healthCheckNodePort"], 31000);
        assert_eq!(new["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(new["spec"]["ports"][1]["nodePort"], 30080);
        assert_eq!(new["spec"]["ports"][2].get("nodePort"), None);
        assert!(validate_update(svc, &old, &new).is_empty());

        // Switching to ExternalName or ClusterIP needs neither IP nor node ports kept.
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
        patch_allocated_values(svc, &old, &mut external);
        assert_eq!(external["spec"].get("clusterIP"), None);
        let mut cluster_ip =
            json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}]}});
        patch_allocated_values(svc, &old, &mut cluster_ip);
        assert_eq!(cluster_ip["spec"]["clusterIP"], "10.0.0.7");
        assert_eq!(cluster_ip["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(cluster_ip["spec"].get("healthCheckNodePort"), None);
    }
}
