//! Backends that follow the nodes: a node joining or excluded by label (LB-14), NotReady and
//! autoscaler-deleted nodes (LB-15), a providerID change (LB-16), no eligible node at all
//! (LB-17).

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::{CaseError, Environment, Probe, eventually, holds_for};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::common::initialized_node;

/// Merge-patches a node as an operator (or another controller) would.
async fn patch_node(
    env: &Environment,
    name: &str,
    patch: &serde_json::Value,
    what: &str,
) -> Result<(), CaseError> {
    env.nodes()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| CaseError::infra(what, e))
}

/// The number of `reason` events once it has held still for a second (a sync already under
/// way has written its Event); polled, bounded by [`LB_TIMEOUT`].
async fn settled_count(env: &Environment, reason: &str) -> Result<usize, CaseError> {
    let deadline = std::time::Instant::now() + LB_TIMEOUT;
    let mut last = count_reason(&reasons(env).await?, reason);
    let mut since = std::time::Instant::now();
    loop {
        if since.elapsed() >= Duration::from_secs(1) {
            return Ok(last);
        }
        if std::time::Instant::now() > deadline {
            return Err(CaseError::failed(format!(
                "{reason} events kept changing for {LB_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = count_reason(&reasons(env).await?, reason);
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
    }
}

pub(super) async fn lb14(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let writes = env.cloud().load_balancer_writes();
    // Registered with --node-ip, as real kubelets are: the node has its InternalIP from the
    // start, so the node-add sync can make it a member right away.
    initialized_node(
        env,
        "node-c",
        NodeOptions {
            node_ip: Some(NodeIp::FirstInternal),
            ..Default::default()
        },
    )
    .await?;
    wait_more_events(env, "UpdatedLoadBalancer", 0, " after a node joined").await?;
    // The node may join before initialization gives it a providerID: a CCM that cannot
    // place a node without one writes nothing then, and the providerID change triggers
    // the next sync (upstream's service controller resyncs on it; cloud-provider-aws logs
    // `node ... did not have ProviderID set`).
    eventually(
        "the new node's backend written to the cloud",
        LB_TIMEOUT,
        || async {
            let now = env.cloud().load_balancer_writes();
            Ok(if now > writes {
                Probe::Done(())
            } else {
                Probe::Pending(format!(
                    "{} backend writes since the node joined",
                    now - writes
                ))
            })
        },
    )
    .await?;
    // Let that second sync's Event land before counting the exclusion's.
    let before = settled_count(env, "UpdatedLoadBalancer").await?;
    let exclude = json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}});
    patch_node(env, "node-c", &exclude, "labelling node").await?;
    wait_more_events(
        env,
        "UpdatedLoadBalancer",
        before,
        " after the exclusion label",
    )
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb15(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let with_ip = || NodeOptions {
        node_ip: Some(NodeIp::FirstInternal),
        ..Default::default()
    };
    initialized_node(env, "node-a", with_ip()).await?;
    initialized_node(env, "node-b", with_ip()).await?;
    create(env, &service(SVC, json!({}))?).await?;
    let ip = ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let updated = |r: &[String]| count_reason(r, "UpdatedLoadBalancer");
    let writes = env.cloud().load_balancer_writes();
    // KEP-3458: readiness is not a node-sync trigger; the NotReady node stays a backend.
    env.set_node_ready("node-b", false).await?;
    let taint = json!({"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]}});
    patch_node(env, "node-b", &taint, "tainting node").await?;
    let env_ro: &Environment = env;
    let before = updated(&reasons(env_ro).await?);
    holds_for(
        "no backend update for readiness or the autoscaler taint alone",
        Duration::from_secs(2),
        || async {
            let n = updated(&reasons(env_ro).await?);
            let w = env_ro.cloud().load_balancer_writes();
            Ok(if n == before && w == writes {
                Probe::Done(())
            } else {
                Probe::Pending(format!(
                    "{} updates, {} cloud writes",
                    n - before,
                    w - writes
                ))
            })
        },
    )
    .await?;
    // The next node sync (a node joins) drops the tainted node, keeps the others.
    initialized_node(env, "node-c", with_ip()).await?;
    let env: &Environment = env;
    let addr = format!("{ip}:8080");
    eventually("backends node-a and node-c only", LB_TIMEOUT, || async {
        let mut seen = BTreeSet::new();
        for _ in 0..8 {
            if let Ok(Some(line)) =
                ccm_harness::traffic::tcp_line(&addr, Duration::from_secs(1)).await
            {
                seen.insert(line);
            }
        }
        let want: BTreeSet<String> = ["node-a".to_string(), "node-c".to_string()].into();
        Ok(if seen == want {
            Probe::Done(())
        } else {
            Probe::Pending(format!("answers from {seen:?}"))
        })
    })
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb16(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // The node controller is off: nodes keep the uninitialized taint and stay backends
    // (KEP-3458); --node-ip gives them their InternalIP.
    let mut provider_ids = Vec::new();
    for name in ["node-a", "node-b"] {
        let instance = env
            .add_node(
                name,
                NodeOptions {
                    node_ip: Some(NodeIp::FirstInternal),
                    ..Default::default()
                },
            )
            .await?
            .ok_or_else(|| CaseError::failed("node options created no instance"))?;
        provider_ids.push((name, instance.provider_id));
    }
    let env: &Environment = env;
    // node-b gets its providerID before the Service exists (cloud-provider-openstack finds
    // the VIP subnet through a node's instance); node-a's comes later and is the change.
    let (name_b, pid_b) = &provider_ids[1];
    env.nodes()
        .patch(
            name_b,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"providerID": pid_b}})),
        )
        .await
        .map_err(|e| CaseError::infra("setting providerID", e))?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let updated = |r: &[String]| count_reason(r, "UpdatedLoadBalancer");
    // Let node-add syncs settle before counting.
    let settled = updated(&reasons(env).await?);
    holds_for("no pending node sync", Duration::from_secs(1), || async {
        let n = updated(&reasons(env).await?);
        Ok(if n == settled {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{} more updates", n - settled))
        })
    })
    .await?;
    // kubernetes/cloud-provider controllers/service/controller.go: a providerID change is
    // one of the node updates that trigger a node sync.
    let (name, pid) = &provider_ids[0];
    let patch = json!({"spec": {"providerID": pid}});
    patch_node(env, name, &patch, "setting providerID").await?;
    wait_more_events(
        env,
        "UpdatedLoadBalancer",
        settled,
        " after a providerID change",
    )
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb17(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let env: &Environment = env;
    let exclude = json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}});
    patch_node(env, "node-a", &exclude, "labelling node").await?;
    create(env, &service(SVC, json!({}))?).await?;
    wait_reason(env, "UnAvailableLoadBalancer").await?;
    // Upstream still calls EnsureLoadBalancer with zero hosts: the provider then builds a
    // load balancer or refuses (cloud-provider-openstack needs a node port to pick the VIP
    // subnet without [LoadBalancer] subnet-id) -- either way the ensure is visible.
    eventually(
        "an ensure despite no eligible node (a load balancer or an ensure outcome event)",
        LB_TIMEOUT,
        || async {
            let lbs = env.cloud().load_balancers();
            let r = reasons(env).await?;
            let outcome = r
                .iter()
                .any(|x| x == "EnsuredLoadBalancer" || x == "SyncLoadBalancerFailed");
            Ok(if !lbs.is_empty() || outcome {
                Probe::Done(())
            } else {
                Probe::Pending(format!("no load balancer, events {r:?}"))
            })
        },
    )
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}
