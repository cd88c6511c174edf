//! NodeLifecycle: the cloud-node-lifecycle controller deletes Nodes whose instance is gone
//! and taints Nodes whose instance is shut down (kubernetes/cloud-provider
//! controllers/nodelifecycle/node_lifecycle_controller.go; ccm-behaviour.md §1.4, cases NL-*).
//!
//! The CCM runs with `--node-monitor-period=1s` (upstream default 5s). There is no
//! kube-controller-manager in the embedded cluster: "the node goes NotReady" is the simulated
//! kubelet stopping, which marks the conditions Unknown as KCM would after its grace period.
//!
//! NL-06 runs the CCM as its own user (a client certificate, as a ServiceAccount-bound
//! CCM would be) and takes `delete` on nodes away from it on the embedded API server, as
//! a ClusterRole without that rule does (cloud-provider-openstack#3225): the CCM must
//! report `DeletingNodeFailed`, try again every period and delete once allowed.
//! NL-07 replaces a node's machine: the old instance goes, a new one with the same name
//! (new ID, so a new providerID) comes up and its kubelet registers the same Node name
//! once the old Node is gone. Every provider looks a node with a providerID up by it
//! (cloud-provider-openstack instancesv2.go, cloud-provider-aws, cloud-provider-vsphere by
//! BIOS UUID), so the same-named replacement must not keep the old Node alive.

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::node::{describe_taints, provider_id};
use ccm_harness::{
    Case, CaseError, Environment, FaultSpec, InstancePatch, InstanceSpec, NodeOptions, Probe, Tag,
    ensure, eventually,
};
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
            needs: &[],
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
        Case {
            id: "NL-06",
            suite: "NodeLifecycle",
            title: "reports DeletingNodeFailed and retries every period while RBAC denies the delete",
            tags: &[Tag::Mock],
            ccm_args: ARGS,
            // Started by the case, as its own user.
            start_ccm: false,
            needs: &[],
            run: |env| Box::pin(nl06(env)),
        },
        case!(
            "NL-07",
            "replaces the Node of a replaced VM: old Node deleted, new one with the new providerID",
            &[Conformance],
            nl07
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
    env.wait_node_deleted("node-a", REACT).await?;
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
    if let Err(why) = env.cloud().supports(Feature::ShutdownDetection) {
        // As upstream's lifecycle controller does with a provider that cannot tell: the
        // instance exists, so the node stays, and nothing marks it shut down
        // (kubernetes/cloud-provider controllers/nodelifecycle: an error from
        // `shutdownInCloudProvider` is logged and the node left as it is).
        env.node_holds(
            "node-a",
            "the NotReady node kept without the shutdown taint",
            Duration::from_secs(3),
            not_shutdown_tainted,
        )
        .await?;
        return Ok(vec![("shutdown_detection".into(), format!("none: {why}"))]);
    }
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
    env.cloud().require(Feature::ShutdownDetection)?;
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

/// The CCM's identity in NL-06: the user a ServiceAccount token of upstream's manifests
/// (`cloud-controller-manager` in `kube-system`) authenticates as.
const CCM_USER: &str = "system:serviceaccount:kube-system:cloud-controller-manager";
/// The lifecycle monitor period of [`ARGS`].
const MONITOR_PERIOD: Duration = Duration::from_secs(1);

async fn nl06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let kubeconfig = env.kubeconfig_for_user(CCM_USER).await?;
    env.start_ccm_with(&[&format!("--kubeconfig={}", kubeconfig.display())])
        .await?;
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.deny(CCM_USER, "delete", "nodes").await?;
    env.cloud().delete_instance(&instance.id)?;
    env.stop_kubelet("node-a").await?;
    // Denied deletes in the audit log (only the CCM deletes nodes) and the Warning
    // events, counted the way either recorder leaves them: one Event per attempt, or one
    // whose `count` client-go's correlator raises.
    let denied = || {
        env.api_audit()
            .into_iter()
            .filter(|e| {
                e.verb == "delete"
                    && e.resource == "nodes"
                    && e.name.as_deref() == Some("node-a")
                    && e.status == 403
            })
            .map(|e| e.time)
            .collect::<Vec<_>>()
    };
    let warnings = eventually(
        "3 denied node deletes and 2 DeletingNodeFailed warnings",
        REACT * 2,
        || async {
            let attempts = denied().len();
            let events = env.node_events("node-a").await?;
            let failed: Vec<_> = events
                .iter()
                .filter(|e| e.reason.as_deref() == Some("DeletingNodeFailed"))
                .collect();
            let count: i32 = failed.iter().map(|e| e.count.unwrap_or(1)).sum();
            Ok(if attempts >= 3 && count >= 2 {
                Probe::Done(
                    failed
                        .iter()
                        .map(|e| (e.type_.clone(), e.message.clone()))
                        .collect::<Vec<_>>(),
                )
            } else {
                Probe::Pending(format!(
                    "{attempts} denied deletes, {count} DeletingNodeFailed events"
                ))
            })
        },
    )
    .await
    .map_err(|e| env.with_ccm_log(e))?;
    ensure!(
        warnings
            .iter()
            .all(|(t, _)| t.as_deref() == Some("Warning")),
        "expected DeletingNodeFailed events of type Warning, observed {warnings:?}"
    );
    ensure!(
        warnings
            .iter()
            .any(|(_, m)| m.as_deref().is_some_and(|m| m.contains("node-a"))),
        "expected the DeletingNodeFailed message to name node-a, observed {warnings:?}"
    );
    env.node("node-a").await?;
    // Retried every period: consecutive attempts at most a few periods apart.
    let times = denied();
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).total(jiff::Unit::Second).unwrap_or(f64::MAX))
        .collect();
    let longest = gaps.iter().copied().fold(0.0, f64::max);
    ensure!(
        longest <= (MONITOR_PERIOD * 4).as_secs_f64(),
        "expected a delete attempt every monitor period ({}s), observed gaps {gaps:?}",
        MONITOR_PERIOD.as_secs()
    );
    // Allowed again: the next period deletes the node.
    env.clear_denials().await?;
    env.wait_node_deleted("node-a", REACT).await?;
    Ok(vec![
        ("denied_delete_attempts".into(), times.len().to_string()),
        ("longest_retry_gap_seconds".into(), format!("{longest:.3}")),
    ])
}

async fn nl07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::ReplacementGetsNewProviderId)?;
    let (old, node) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let old_uid = node.metadata.uid.clone();
    ensure!(
        provider_id(&node) == Some(old.provider_id.as_str()),
        "expected providerID {} on the first node, observed {:?}",
        old.provider_id,
        provider_id(&node)
    );
    // The machine is replaced: the old one goes, a new one with the same name comes up
    // while the old Node still exists (NotReady: its kubelet is gone with the machine).
    env.cloud().delete_instance(&old.id)?;
    env.stop_kubelet("node-a").await?;
    let new = env.cloud().create_instance(InstanceSpec::named("node-a"))?;
    ensure!(
        new.id != old.id && new.provider_id != old.provider_id,
        "expected the replacement to get a new ID, observed {} after {}",
        new.id,
        old.id
    );
    let started = std::time::Instant::now();
    env.wait_node_deleted("node-a", REACT)
        .await
        .map_err(|e| env.with_ccm_log(e))?;
    let deleted_after = started.elapsed();
    // The new machine's kubelet (--cloud-provider=external) registers the same name.
    env.add_node_on("node-a", &new, NodeOptions::default())
        .await?;
    let fresh = env
        .wait_initialized("node-a", crate::common::INIT_TIMEOUT)
        .await?;
    ensure!(
        fresh.metadata.uid != old_uid,
        "expected a new Node object, observed the old uid {old_uid:?}"
    );
    ensure!(
        provider_id(&fresh) == Some(new.provider_id.as_str()),
        "expected the new providerID {}, observed {:?} (old was {})",
        new.provider_id,
        provider_id(&fresh),
        old.provider_id
    );
    // And the lifecycle controller leaves the new Node alone.
    env.node_holds(
        "node-a",
        "the replacement node kept",
        MONITOR_PERIOD * 3,
        |n| {
            if provider_id(n) == Some(new.provider_id.as_str()) {
                Ok(())
            } else {
                Err(format!("providerID {:?}", provider_id(n)))
            }
        },
    )
    .await?;
    Ok(vec![(
        "old_node_deleted_seconds".into(),
        format!("{:.3}", deleted_after.as_secs_f64()),
    )])
}
