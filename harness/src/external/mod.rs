//! External mode (`run --kubeconfig`): the black-box checks a case can make against a
//! cluster the harness did not build, with no cloud control and no CCM of its own.
//!
//! Why separate from the case bodies: a case body gets an [`Environment`](crate::Environment)
//! with a mock cloud it can drive; an external cluster offers only its API. So the cases
//! that have a meaningful read-only form register it here by case id, and the runner uses
//! it in external mode instead of skipping. Everything else stays skipped with a reason.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use crate::case::{CaseError, CaseMetrics};
use crate::env::{client_for, describe_taints, has_uninitialized_taint, provider_id};
use crate::wait::{Probe, eventually};

/// How long a freshly registered node may stay uninitialized (ccm-behaviour.md §4: 10 s
/// against a mock; a real cloud and a loaded machine get slack).
const INIT_WAIT: Duration = Duration::from_secs(20);

/// Whether `case_id` has an external-mode form.
pub fn has_check(case_id: &str) -> bool {
    matches!(case_id, "NI-01")
}

/// Runs the external form of `case_id` against the cluster of `kubeconfig`;
/// `None` when the case has none.
pub async fn run(case_id: &str, kubeconfig: &Path) -> Option<Result<CaseMetrics, CaseError>> {
    if !has_check(case_id) {
        return None;
    }
    let client = match client_for(kubeconfig, "ccm-conformance/external").await {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    Some(match case_id {
        "NI-01" => every_node_initialized(client).await,
        _ => return None,
    })
}

/// NI-01 as a black box: every Node loses `node.cloudprovider.kubernetes.io/uninitialized`
/// and has a providerID (kubernetes/cloud-provider controllers/node/node_controller.go).
async fn every_node_initialized(client: kube::Client) -> Result<CaseMetrics, CaseError> {
    let nodes: Api<Node> = Api::all(client);
    let count = eventually("every node initialized", INIT_WAIT, || {
        let nodes = nodes.clone();
        async move {
            let list = nodes
                .list(&ListParams::default())
                .await
                .map_err(|e| CaseError::infra("listing nodes", e))?;
            let pending: Vec<String> = list
                .items
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
            Ok(if list.items.is_empty() {
                Probe::Pending("no nodes".to_string())
            } else if pending.is_empty() {
                Probe::Done(list.items.len())
            } else {
                Probe::Pending(format!("not initialized: {}", pending.join("; ")))
            })
        }
    })
    .await?;
    Ok(vec![("nodes".to_string(), count.to_string())])
}
