//! Per-kind rules applied on create and update (upstream "strategies").
//!
//! The generic store treats every object the same; the few kind-specific rules
//! real clients notice live here: status subresource isolation, create-time
//! defaults, and immutable fields.
//!
//! Layout: the entry points the store calls (`prepare_create`, `prepare_update`,
//! `update_generation`, `validate_create`, `validate_update`) are here and dispatch on the
//! kind; the rules of the larger kind families live in `pods`, `services`, `workloads`
//! and `rbac`, written with the helpers of `fields`.

mod fields;
mod pods;
mod rbac;
mod services;
mod workloads;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::meta::set_meta;
use crate::resources::ResourceDesc;
use fields::{child, default_field, default_string, list_len, rendered};
use pods::{default_pod_resources, default_pod_spec, qos_class, validate_pod_update};
use rbac::{validate_binding, validate_rule};
pub use services::patch_allocated_values;
use services::{default_service_spec, drop_type_dependent_fields};
use workloads::{default_template, validate_workload};

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
