//! Discovery documents and `/version`, generated from the resource table.
//!
//! kubectl, client-go and kube-rs ask `/api` and `/apis` for aggregated discovery
//! (`apidiscovery.k8s.io/v2`, one document listing every resource) and fall back to
//! the legacy per-group documents when the response Content-Type is plain
//! `application/json` (client-go discovery/discovery_client.go). Both are served:
//! [`aggregated`] for the former, the other functions for the latter.

use serde_json::{Value, json};

use crate::resources::{RESOURCES, ResourceDesc, groups};

/// The version this server claims to be.
pub const GIT_VERSION: &str = "v1.34.0";

/// `GET /version` (apimachinery pkg/version/types.go `Info`).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "emulationMajor": "1",
        "emulationMinor": "34",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "33",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `GET /api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `GET /apis`.
pub fn api_groups() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`, if the group exists.
pub fn api_group(group: &str) -> Option<Value> {
    let (g, v) = groups().into_iter().find(|(g, _)| *g == group)?;
    let mut doc = group_doc(g, v);
    if let Some(map) = doc.as_object_mut() {
        map.insert("kind".into(), json!("APIGroup"));
        map.insert("apiVersion".into(), json!("v1"));
    }
    Some(doc)
}

/// Verbs served on every resource collection and item.
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a resource. Namespaces are deleted one by one, through their finalizer:
/// kubernetes pkg/registry/core/namespace/storage/storage.go serves no DeleteCollection.
fn verbs(r: &ResourceDesc) -> Vec<&'static str> {
    if r.create_only {
        return vec!["create"];
    }
    VERBS
        .iter()
        .copied()
        .filter(|v| !(*v == "deletecollection" && r.group.is_empty() && r.plural == "namespaces"))
        .collect()
}

fn resource_doc(r: &ResourceDesc) -> Value {
    json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": verbs(r),
        "shortNames": r.short_names,
    })
}

/// `GET /api/v1` or `GET /apis/{group}/{version}`, if that group version exists.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut doc = resource_doc(r);
        if let Some(map) = doc.as_object_mut() {
            if r.short_names.is_empty() {
                map.remove("shortNames");
            }
            if !r.categories.is_empty() {
                map.insert("categories".into(), json!(r.categories));
            }
        }
        resources.push(doc);
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if is_service_accounts(r) {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn resource_discovery(r: &ResourceDesc) -> Value {
    let mut doc = json!({
        "resource": r.plural,
        "responseKind": gvk(r.group, r.version, r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(r),
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    if r.status_subresource {
        doc["subresources"] = json!([{
            "subresource": "status",
            "responseKind": gvk(r.group, r.version, r.kind),
            "verbs": ["get", "patch", "update"],
        }]);
    }
    if is_service_accounts(r) {
        doc["subresources"] = json!([{
            "subresource": "token",
            "responseKind": gvk("authentication.k8s.io", "v1", "TokenRequest"),
            "verbs": ["create"],
        }]);
    }
    doc
}

/// ServiceAccounts serve the `token` subresource (TokenRequest, [`crate::review`]).
fn is_service_accounts(r: &ResourceDesc) -> bool {
    r.group.is_empty() && r.plural == "serviceaccounts"
}

/// `GET /api` (`core = true`) or `GET /apis` as an `apidiscovery.k8s.io/v2`
/// `APIGroupDiscoveryList` (apiserver pkg/endpoints/discovery/aggregated; types in
/// k8s.io/api/apidiscovery/v2). The core group has an empty name.
pub fn aggregated(core: bool) -> Value {
    let mut names: Vec<&str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group.is_empty() == core) {
        if !names.contains(&r.group) {
            names.push(r.group);
        }
    }
    let items: Vec<Value> = names
        .into_iter()
        .map(|group| {
            let mut versions: Vec<&str> = Vec::new();
            for r in RESOURCES.iter().filter(|r| r.group == group) {
                if !versions.contains(&r.version) {
                    versions.push(r.version);
                }
            }
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|version| {
                    let resources: Vec<Value> = RESOURCES
                        .iter()
                        .filter(|r| r.group == group && r.version == version)
                        .map(resource_discovery)
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            // ObjectMeta's empty name and zero creationTimestamp are omitted, as
            // kube-apiserver serializes them (the core group's metadata is `{}`).
            let metadata = if group.is_empty() {
                json!({})
            } else {
                json!({"name": group})
            };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_core_and_groups() {
        let core = aggregated(true);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        let items = core["items"].as_array().expect("items");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"], json!({}));
        let nodes = items[0]["versions"][0]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["resource"] == "nodes")
            .expect("nodes")
            .clone();
        assert_eq!(nodes["scope"], "Cluster");
        assert_eq!(nodes["responseKind"]["kind"], "Node");
        assert_eq!(nodes["shortNames"][0], "no");
        assert_eq!(nodes["subresources"][0]["subresource"], "status");

        let groups = aggregated(false);
        let names: Vec<&str> = groups["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|g| g["metadata"]["name"].as_str())
            .collect();
        assert!(names.contains(&"coordination.k8s.io"));
        assert!(names.contains(&"apps"));
        assert!(names.contains(&"rbac.authorization.k8s.io"));
        assert!(!names.contains(&""));
        let apps = groups["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .expect("apps");
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["resource"] == "deployments")
            .expect("deployments");
        assert_eq!(deploy["categories"], json!(["all"]));
        assert_eq!(deploy["shortNames"], json!(["deploy"]));
        assert_eq!(deploy["subresources"][0]["subresource"], "status");
    }

    #[test]
    fn core_lists_node_status() {
        let doc = resource_list("", "v1").expect("core");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"nodes"));
        assert!(names.contains(&"nodes/status"));
        assert!(names.contains(&"namespaces"));
        assert!(names.contains(&"serviceaccounts"));
        assert!(resource_list("nope", "v1").is_none());
        let pods = doc["resources"]
            .as_array()
            .expect("array")
            .iter()
            .find(|r| r["name"] == "pods")
            .expect("pods");
        assert_eq!(pods["categories"], json!(["all"]));
        let rbac = resource_list("rbac.authorization.k8s.io", "v1").expect("rbac");
        let crb = rbac["resources"]
            .as_array()
            .expect("array")
            .iter()
            .find(|r| r["name"] == "clusterrolebindings")
            .expect("clusterrolebindings");
        assert_eq!(crb["namespaced"], false);
        assert!(crb.get("shortNames").is_none() && crb.get("categories").is_none());
    }

    #[test]
    fn groups_include_coordination() {
        let doc = api_groups();
        assert!(
            doc["groups"]
                .as_array()
                .expect("array")
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io")
        );
        assert_eq!(
            api_group("coordination.k8s.io").expect("group")["kind"],
            "APIGroup"
        );
    }
}
