//! Node cases as a black box: what every initialized Node must look like.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use crate::case::{CaseError, CaseMetrics};
use crate::node::{describe_taints, has_uninitialized_taint, label, provider_id};
use crate::wait::{Probe, eventually};

/// How long a freshly registered node may stay uninitialized (ccm-behaviour.md §4: 10 s
/// against a mock; a real cloud and a loaded machine get slack).
const INIT_WAIT: Duration = Duration::from_secs(20);

/// The GA topology labels the cloud-node controller sets and the beta label it writes
/// beside each (kubernetes/cloud-provider controllers/node/node_controller.go
/// `getNodeModifiersFromCloudProvider`; k8s.io/api core/v1 well_known_labels.go).
const LABEL_PAIRS: &[(&str, &str)] = &[
    (
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    ),
    (
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    ),
    (
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    ),
];

async fn list(nodes: &Api<Node>) -> Result<Vec<Node>, CaseError> {
    nodes
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| CaseError::infra("listing nodes", e))
}

/// NI-01 as a black box: every Node loses `node.cloudprovider.kubernetes.io/uninitialized`
/// and has a providerID (kubernetes/cloud-provider controllers/node/node_controller.go).
pub(super) async fn every_node_initialized(client: kube::Client) -> Result<CaseMetrics, CaseError> {
    let nodes: Api<Node> = Api::all(client);
    let count = eventually("every node initialized", INIT_WAIT, || {
        let nodes = nodes.clone();
        async move {
            let items = list(&nodes).await?;
            let pending: Vec<String> = items
                .iter()
                .filter(|n| has_uninitialized_taint(n) || provider_id(n).is_none_or(str::is_empty))
                .map(|n| {
                    format!(
                        "{} (providerID {:?}, taints {})",
                        n.metadata.name.as_deref().unwrap_or_default(),
                        provider_id(n),
                        describe_taints(n)
                    )
                })
                .collect();
            Ok(if items.is_empty() {
                Probe::Pending("no nodes".to_string())
            } else if pending.is_empty() {
                Probe::Done(items.len())
            } else {
                Probe::Pending(format!("not initialized: {}", pending.join("; ")))
            })
        }
    })
    .await?;
    Ok(vec![("nodes".to_string(), count.to_string())])
}

/// NI-02 as a black box: on every initialized Node each topology label the cloud reported
/// comes as a GA and beta pair with equal values. A cluster whose cloud reports none of
/// them cannot show it: skipped.
pub(super) async fn topology_labels_in_pairs(
    client: kube::Client,
) -> Result<CaseMetrics, CaseError> {
    let nodes: Api<Node> = Api::all(client);
    let items = list(&nodes).await?;
    let initialized: Vec<&Node> = items
        .iter()
        .filter(|n| !has_uninitialized_taint(n))
        .collect();
    let mut problems = Vec::new();
    let mut labelled = 0;
    for node in &initialized {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut any = false;
        for (ga, beta) in LABEL_PAIRS {
            match (label(node, ga), label(node, beta)) {
                (None, None) => {}
                (Some(g), Some(b)) if g == b => any = true,
                (g, b) => problems.push(format!("{name}: {ga}={g:?} but {beta}={b:?}")),
            }
        }
        labelled += usize::from(any);
    }
    if !problems.is_empty() {
        return Err(CaseError::with_detail(
            format!(
                "expected GA and beta topology labels in equal pairs, observed {}",
                problems[0]
            ),
            problems.join("\n"),
        ));
    }
    if labelled == 0 {
        return Err(CaseError::Skipped(format!(
            "no initialized node carries a zone, region or instance-type label ({} nodes, {} initialized): the cloud reports none",
            items.len(),
            initialized.len()
        )));
    }
    Ok(vec![("labelled_nodes".to_string(), labelled.to_string())])
}
