//! The CCM away while the Service changes: stopped (LB-06, LB-07) or SIGKILLed mid-cleanup
//! (LB-06b, LB-07b), the finalizer lets the next CCM finish; and a second cluster's CCM on
//! the same cloud account, restarted, keeping to its own load balancer (LB-25).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::{CaseError, Environment, FaultSpec, Probe, ensure, eventually, holds_for};
use kube::api::DeleteParams;
use serde_json::json;

use super::*;

pub(super) async fn lb06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    env.stop_ccm().await;
    env.services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting Service", e))?;
    let lbs = env.cloud().load_balancers();
    ensure!(
        lbs.len() == 1,
        "expected the load balancer to survive while the CCM is down, observed {lbs:?}"
    );
    env.start_ccm().await?;
    wait_gone(env).await?;
    wait_no_lbs(env).await?;
    Ok(vec![])
}

pub(super) async fn lb06b(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    killed_mid_cleanup(env, Cleanup::Delete).await
}

pub(super) async fn lb07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    env.stop_ccm().await;
    patch_spec(env, json!({"type": "ClusterIP"})).await?;
    let lbs = env.cloud().load_balancers();
    ensure!(
        lbs.len() == 1,
        "expected the load balancer to survive while the CCM is down, observed {lbs:?}"
    );
    // k/k#78954: the finalizer makes the restarted CCM clean up what it missed.
    env.start_ccm().await?;
    svc_eventually(env, "finalizer and ingress gone after restart", |s| {
        if !has_finalizer(s) && ingress_ips(s).is_empty() {
            Ok(())
        } else {
            Err(format!(
                "finalizer {}, ingress {:?}",
                has_finalizer(s),
                ingress_ips(s)
            ))
        }
    })
    .await?;
    wait_no_lbs(env).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb07b(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    killed_mid_cleanup(env, Cleanup::TypeChange).await
}

enum Cleanup {
    Delete,
    TypeChange,
}

/// ccm-behaviour.md §6 item 6 (kubernetes/kubernetes#78124, #53451, #78954): the CCM is
/// SIGKILLed while the cloud refuses the load-balancer delete, so the cleanup is half
/// done; the next CCM must finish it from the finalizer alone.
async fn killed_mid_cleanup(env: &mut Environment, how: Cleanup) -> Result<CaseMetrics, CaseError> {
    env.start_replica("first", None, &[]).await?;
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    // Until cleared, as in LB-18: SDKs retry 5xx answers themselves.
    env.cloud().inject(FaultSpec::LoadBalancerWrite {
        method: "DELETE",
        status: 500,
        count: None,
    });
    match how {
        Cleanup::Delete => {
            env.services()
                .delete(SVC, &DeleteParams::default())
                .await
                .map_err(|e| CaseError::infra("deleting Service", e))?;
        }
        Cleanup::TypeChange => patch_spec(env, json!({"type": "ClusterIP"})).await?,
    }
    wait_reason(env, "SyncLoadBalancerFailed").await?;
    env.kill_replica("first").await;
    env.cloud().clear_faults();
    ensure!(
        !env.cloud().load_balancers().is_empty(),
        "expected the load balancer to survive the failed delete"
    );
    env.start_replica("second", None, &[]).await?;
    match how {
        Cleanup::Delete => wait_gone(env).await?,
        Cleanup::TypeChange => {
            svc_eventually(env, "finalizer and ingress gone after restart", |s| {
                if !has_finalizer(s) && ingress_ips(s).is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "finalizer {}, ingress {:?}",
                        has_finalizer(s),
                        ingress_ips(s)
                    ))
                }
            })
            .await?
        }
    }
    wait_no_lbs(env).await?;
    delete_and_check_leaks(env).await?;
    env.stop_replica("second").await;
    Ok(vec![])
}

pub(super) async fn lb25(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    let ours: Vec<String> = env
        .cloud()
        .load_balancers()
        .into_iter()
        .map(|l| l.id)
        .collect();
    ensure!(
        ours.len() == 1,
        "expected one load balancer, observed {ours:?}"
    );
    // A second cluster's CCM, same cloud account, same namespace/name (openstack#1273).
    // It gets its own API server with copies of the nodes and the Service: two clusters
    // never share Service objects (nor the annotations a CCM writes on them).
    let other = env.other_cluster(&[SVC]).await?;
    let other_flags = [
        "--cluster-name=other-cluster".to_string(),
        format!("--kubeconfig={}", other.kubeconfig.display()),
    ];
    let other_flags: Vec<&str> = other_flags.iter().map(String::as_str).collect();
    env.start_replica("other", None, &other_flags).await?;
    let theirs = eventually(
        "a second load balancer for the other cluster",
        LB_TIMEOUT,
        || async {
            let lbs = env.cloud().load_balancers();
            let other: Vec<String> = lbs
                .iter()
                .map(|l| l.id.clone())
                .filter(|id| !ours.contains(id))
                .collect();
            Ok(match other.as_slice() {
                [one] if lbs.len() == 2 => Probe::Done(one.clone()),
                _ => Probe::Pending(format!("{lbs:?}")),
            })
        },
    )
    .await
    .map_err(|e| env.with_ccm_log(e))?;
    // Our cluster lets go of its Service while the other CCM runs: only ours goes.
    patch_spec(env, json!({"type": "ClusterIP"})).await?;
    eventually(
        "only the other cluster's load balancer left",
        LB_TIMEOUT,
        || async {
            let ids: Vec<String> = env
                .cloud()
                .load_balancers()
                .into_iter()
                .map(|l| l.id)
                .collect();
            Ok(if ids == [theirs.clone()] {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{ids:?}"))
            })
        },
    )
    .await?;
    // The other cluster restarts its CCM: it re-ensures and keeps its own load balancer.
    env.stop_replica("other").await;
    env.start_replica("other", None, &other_flags).await?;
    holds_for(
        "the other cluster's load balancer kept, none created",
        Duration::from_secs(2),
        || async {
            let ids: Vec<String> = env
                .cloud()
                .load_balancers()
                .into_iter()
                .map(|l| l.id)
                .collect();
            Ok(if ids == [theirs.clone()] {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{ids:?}"))
            })
        },
    )
    .await?;
    // It deletes its Service; its CCM removes its load balancer and nothing leaks.
    other
        .services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting the other cluster's Service", e))?;
    wait_no_lbs(env).await?;
    wait_service_gone(other.services()).await?;
    env.stop_replica("other").await;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}
