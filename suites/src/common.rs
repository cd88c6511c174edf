//! Helpers the suites share: registering an initialized node, reading what the CCM wrote.

use std::path::Path;
use std::time::Duration;

use ccm_harness::env::NodeOptions;
use ccm_harness::node::addresses;
use ccm_harness::{CaseError, Environment, Instance};
use k8s_openapi::api::core::v1::Node;

/// How long node initialization may take against a mock (ccm-behaviour.md §4: 10 s; a
/// loaded 2-core CI machine gets some slack).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Registers `name` with an instance and waits until the CCM initialized it.
pub async fn initialized_node(
    env: &mut Environment,
    name: &str,
    options: NodeOptions,
) -> Result<(Instance, Node), CaseError> {
    let instance = env
        .add_node(name, options)
        .await?
        .ok_or_else(|| CaseError::failed("node options created no instance"))?;
    let node = env.wait_initialized(name, INIT_TIMEOUT).await?;
    Ok((instance, node))
}

/// Status patches/updates the CCM made to this node.
pub fn ccm_status_writes(env: &Environment, node: &str) -> usize {
    env.ccm_writes()
        .iter()
        .filter(|e| {
            e.resource == "nodes"
                && e.name.as_deref() == Some(node)
                && e.subresource.as_deref() == Some("status")
        })
        .count()
}

/// Every write the CCM made to this node (main resource and status).
pub fn ccm_node_writes(env: &Environment, node: &str) -> usize {
    env.ccm_writes()
        .iter()
        .filter(|e| e.resource == "nodes" && e.name.as_deref() == Some(node))
        .count()
}

/// `Synced` events for the node.
pub async fn synced_events(env: &Environment, node: &str) -> Result<i32, CaseError> {
    let events = env.node_events(node).await?;
    Ok(events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Synced"))
        .map(|e| e.count.unwrap_or(1))
        .sum())
}

pub fn show_addresses(node: &Node) -> String {
    addresses(node)
        .iter()
        .map(|(t, a)| format!("{t}={a}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorted (type, address) pairs, to compare as sets.
pub fn address_set(pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut v = pairs.to_vec();
    v.sort();
    v
}

/// Whether `ccm` is the reference CCM binary (the one `cargo test` builds).
pub fn is_reference_ccm(ccm: &Path) -> bool {
    ccm.file_name().and_then(|n| n.to_str()) == Some("reference-ccm")
}

/// Starts the CCM under test with the reference CCM's hidden `--testing-provider-quirk`
/// flags, for cases whose cloud answer (`what`) no real cloud API gives. Any other CCM
/// cannot be told to answer that way: the case is skipped, naming upstream's coverage.
pub async fn start_ccm_with_quirks(
    env: &mut Environment,
    what: &str,
    quirks: &[&str],
) -> Result<(), CaseError> {
    if !is_reference_ccm(&env.settings().ccm) {
        return Err(CaseError::Skipped(format!(
            "needs a CCM that can be told to return {what} (the reference CCM's \
             --testing-provider-quirk); upstream covers this with k8s.io/cloud-provider/fake \
             in controllers/node/node_controller_test.go"
        )));
    }
    let flags: Vec<String> = quirks
        .iter()
        .map(|q| format!("--testing-provider-quirk={q}"))
        .collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    env.start_ccm_with(&flags).await
}
