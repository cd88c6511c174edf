//! External mode (`run --kubeconfig`): the black-box checks a case can make against a
//! cluster the harness did not build, with no cloud control and no CCM of its own.
//!
//! Why separate from the case bodies: a case body gets an [`Environment`](crate::Environment)
//! with a mock cloud it can drive; an external cluster offers only its API. So the cases
//! that have a meaningful black-box form register it here by case id, and the runner uses
//! it in external mode instead of skipping. Everything else stays skipped with a reason.
//!
//! Forms so far: the node cases that only read Nodes ([`nodes`]) and the Service
//! load-balancer lifecycle ([`load_balancers`]), which creates its Services in a namespace
//! of its own and deletes it at the end.

mod load_balancers;
mod nodes;

use std::path::Path;

use crate::case::{CaseError, CaseMetrics};
use crate::env::client_for;
use crate::settings::Settings;

/// The label selector of every namespace external mode creates
/// (`app.kubernetes.io/created-by: ccm-conformance`).
pub const CREATED_BY_SELECTOR: &str = "app.kubernetes.io/created-by=ccm-conformance";

/// Case ids with an external form.
const CASES: &[&str] = &["NI-01", "NI-02", "LB-01", "LB-03", "LB-04"];

/// Whether `case_id` has an external-mode form.
pub fn has_check(case_id: &str) -> bool {
    CASES.contains(&case_id)
}

/// Runs the external form of `case_id` against the cluster of `kubeconfig`;
/// `None` when the case has none.
pub async fn run(
    case_id: &str,
    kubeconfig: &Path,
    settings: &Settings,
) -> Option<Result<CaseMetrics, CaseError>> {
    let cloud = settings.cloud_timeout;
    if !has_check(case_id) {
        return None;
    }
    let client = match client_for(kubeconfig, "ccm-conformance/external").await {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    Some(match case_id {
        "NI-01" => nodes::every_node_initialized(client).await,
        "NI-02" => nodes::topology_labels_in_pairs(client).await,
        "LB-01" => load_balancers::create(client, cloud).await,
        "LB-03" => load_balancers::to_cluster_ip_and_back(client, cloud).await,
        "LB-04" => load_balancers::delete_waits_for_the_cloud(client, cloud).await,
        _ => return None,
    })
}
