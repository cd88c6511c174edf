//! Reading a Node the way cases and invariants ask about it: its taints, addresses, labels
//! and providerID, and the cloud labels an in-tree kubelet would have put on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use mock_kubelet::UNINITIALIZED_TAINT;

use crate::cloud::Instance;

/// The cloud labels an in-tree kubelet put on its Node: GA and beta topology and
/// instance-type labels (kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go
/// `initialNode`); zone labels only when the instance has a zone.
pub fn in_tree_labels(instance: &Instance) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut put = |keys: [&str; 2], value: &str| {
        if !value.is_empty() {
            for k in keys {
                labels.insert(k.to_string(), value.to_string());
            }
        }
    };
    put(
        [
            "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/zone",
        ],
        &instance.zone,
    );
    put(
        [
            "topology.kubernetes.io/region",
            "failure-domain.beta.kubernetes.io/region",
        ],
        &instance.region,
    );
    put(
        [
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/instance-type",
        ],
        &instance.instance_type,
    );
    labels
}

pub fn has_uninitialized_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
}

pub fn describe_taints(node: &Node) -> String {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.is_empty() {
        return "none".into();
    }
    taints
        .iter()
        .map(|t| {
            format!(
                "{}={}:{}",
                t.key,
                t.value.clone().unwrap_or_default(),
                t.effect
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The node's addresses as (type, address) pairs, in order.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}
