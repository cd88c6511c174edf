//! Workload (Deployment, DaemonSet) rules: the pod defaults of their templates and the
//! validation of selectors and templates.
//!
//! Why this exists: kubernetes pkg/apis/apps/validation `ValidateDeploymentSpec` and
//! `ValidateDaemonSetSpec` give the errors clients most often run into with workloads.

use serde_json::{Map, Value};

use super::fields::{list_len, rendered};
use super::pods::default_pod_spec;
use crate::error::Cause;
use crate::resources::ResourceDesc;
use crate::selector::{LabelSelector, from_label_selector};

/// The pod template of a workload gets the pod defaults a client reads back (kubernetes
/// pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec`, `SetDefaults_Container`,
/// `SetDefaults_ContainerPort`).
pub(super) fn default_template(spec: &mut Map<String, Value>) {
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

pub(super) fn validate_workload(desc: &ResourceDesc, obj: &Value, causes: &mut Vec<Cause>) {
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
