//! NodeLifecycle: the cloud-node-lifecycle controller deletes Nodes whose instance is gone
//! and taints Nodes whose instance is shut down (kubernetes/cloud-provider
//! controllers/nodelifecycle/node_lifecycle_controller.go; ccm-behaviour.md §1.4, cases NL-*).
//!
//! The CCM runs with `--node-monitor-period=1s` (upstream default 5s). There is no
//! kube-controller-manager in the embedded cluster: "the node goes NotReady" is the simulated
//! kubelet stopping, which marks the conditions Unknown as KCM would after its grace period.
//! NL-06 (RBAC denies delete) needs authorization in the API server and comes later.

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::env::{NodeOptions, describe_taints};
use ccm_harness::{Case, CaseError, Environment, FaultSpec, InstancePatch, Tag, ensure};
use k8s_openapi::api::core::v1::Node;

use crate::common::initialized_node;

const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
const ARGS: &[&str] = &["--node-monitor-period=1s"];
/// Two monitor periods plus slack for a loaded machine.
const REACT: Duration = Duration::from_secs(10);

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "NodeLifecycle",
            title: $title,
            tags: $tags,
            ccm_args: ARGS,
            start_ccm: true,
            run: |env| Box::pin($body(env)),
        }
    };
}

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "NL-01",
            "deletes a NotReady node whose instance is gone and reports DeletingNode",
            &[Conformance],
            nl01
        ),
        case!(
            "NL-02",
            "keeps a Ready node whose instance is gone",
            &[Mock],
            nl02
        ),
        case!(
            "NL-03",
            "taints a NotReady node whose instance is shut down and keeps it",
            &[Mock],
            nl03
        ),
        case!(
            "NL-04",
            "removes the shutdown taint only once the node is Ready again",
            &[Mock],
            nl04
        ),
        case!(
            "NL-05",
            "never deletes a node while the cloud cannot say whether its instance exists",
            &[Mock],
            nl05
        ),
    ]
}

fn has_shutdown_taint(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == SHUTDOWN_TAINT))
}

fn shutdown_tainted(n: &Node) -> Result<(), String> {
    if has_shutdown_taint(n) {
        Ok(())
    } else {
        Err(format!("taints: {}", describe_taints(n)))
    }
}

fn not_shutdown_tainted(n: &Node) -> Result<(), String> {
    if has_shutdown_taint(n) {
        Err(format!("taints: {}", describe_taints(n)))
    } else {
        Ok(())
    }
}

async fn nl01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.cloud().delete_instance(&instance.id)?;
    env.stop_kubelet("node-a").await?;
    let nodes = env.nodes();
    ccm_harness::eventually("node-a deleted", REACT, || {
        let nodes = nodes.clone();
        async move {
            let n = nodes
                .get_opt("node-a")
                .await
                .map_err(|e| CaseError::infra("getting node", e))?;
            Ok(match n {
                None => ccm_harness::Probe::Done(()),
                Some(_) => ccm_harness::Probe::Pending("node-a still exists".into()),
            })
        }
    })
    .await?;
    let events = env.node_events("node-a").await?;
    let deleting = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("DeletingNode"));
    ensure!(
        deleting.is_some(),
        "expected a DeletingNode event, observed reasons {:?}",
        events.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
    );
    Ok(vec![])
}

async fn nl02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.cloud().delete_instance(&instance.id)?;
    env.node_holds("node-a", "the Ready node kept", env.hold(), |_| Ok(()))
        .await?;
    Ok(vec![])
}

async fn nl03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            running: Some(false),
            ..Default::default()
        },
    )?;
    env.stop_kubelet("node-a").await?;
    env.node_eventually("node-a", "the shutdown taint", REACT, shutdown_tainted)
        .await?;
    let node = env.node("node-a").await?;
    let taint = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .find(|t| t.key == SHUTDOWN_TAINT);
    ensure!(
        taint.as_ref().is_some_and(|t| t.effect == "NoSchedule"),
        "expected the shutdown taint with effect NoSchedule, observed {taint:?}"
    );
    env.node_holds(
        "node-a",
        "the shut-down node kept",
        Duration::from_secs(2),
        shutdown_tainted,
    )
    .await?;
    Ok(vec![])
}

async fn nl04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            running: Some(false),
            ..Default::default()
        },
    )?;
    env.stop_kubelet("node-a").await?;
    env.node_eventually("node-a", "the shutdown taint", REACT, shutdown_tainted)
        .await?;
    // The instance runs again but the node is still NotReady: the taint stays.
    env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            running: Some(true),
            ..Default::default()
        },
    )?;
    env.node_holds(
        "node-a",
        "the shutdown taint while NotReady",
        Duration::from_secs(3),
        shutdown_tainted,
    )
    .await?;
    // The kubelet comes back: Ready, and the taint goes within a couple of periods.
    env.restart_kubelet("node-a").await?;
    env.node_eventually(
        "node-a",
        "no shutdown taint once Ready",
        REACT,
        not_shutdown_tainted,
    )
    .await?;
    Ok(vec![])
}

async fn nl05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.cloud().inject(FaultSpec::InstanceLookup {
        instance_id: Some(instance.id.clone()),
        status: 500,
        count: None,
    });
    env.cloud().delete_instance(&instance.id)?;
    env.stop_kubelet("node-a").await?;
    let before = env.cloud().faulted_calls();
    env.node_holds(
        "node-a",
        "the node kept while the cloud errors",
        env.hold(),
        |_| Ok(()),
    )
    .await?;
    let asked = env.cloud().faulted_calls() - before;
    ensure!(
        asked >= 2,
        "expected the controller to keep asking the cloud (>= 2 failed lookups), observed {asked}"
    );
    Ok(vec![])
}
