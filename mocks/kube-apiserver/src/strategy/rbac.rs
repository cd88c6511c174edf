//! RBAC rules: validation of policy rules, role references and subjects
//! (kubernetes pkg/apis/rbac/validation).
//!
//! Why this exists: with RBAC on, these objects decide who may do what, and a CCM's
//! install manifests create them; upstream's wording of their errors is kept here.

use serde_json::Value;

use super::fields::{list_len, rendered};
use crate::error::Cause;
use crate::resources::{NameRule, ResourceDesc};

pub(super) fn validate_rule(rule: &Value, namespaced: bool, path: &str, causes: &mut Vec<Cause>) {
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

pub(super) fn validate_binding(desc: &ResourceDesc, obj: &Value, causes: &mut Vec<Cause>) {
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
