//! The load balancer deleted behind the CCM's back, as an operator with the cloud's own
//! tools would: not healed until the Service changes (LB-21), and no
//! UpdateLoadBalancerFailed for a load balancer that is already gone (LB-26).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::{CaseError, Environment, Probe, ensure, eventually, holds_for};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::common::initialized_node;

/// Deletes the case's load balancer behind the CCM's back, as an operator with the cloud's
/// own tools would (see `ccm_harness::out_of_band`). Returns the CCM's resources that the
/// delete left behind (AWS: the ELB's `k8s-elb-<name>` security group; Octavia's cascade
/// delete leaves none).
async fn delete_out_of_band(env: &Environment) -> Result<Vec<String>, CaseError> {
    let lb = env
        .cloud()
        .load_balancers()
        .into_iter()
        .next()
        .ok_or_else(|| CaseError::failed("expected a load balancer in the cloud"))?;
    env.cloud().delete_load_balancer_out_of_band(&lb.id).await?;
    wait_no_lbs(env).await?;
    Ok(env.cloud().leaks())
}

pub(super) async fn lb21(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    create(env, &service(SVC, json!({}))?).await?;
    let ip = ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    delete_out_of_band(env).await?;
    // Informational (cloud-provider-openstack#1597): resyncs carry identical objects, so
    // nothing re-ensures and the ingress goes stale.
    holds_for(
        "the load balancer stays gone while the Service is unchanged",
        Duration::from_secs(2),
        || async {
            let lbs = env.cloud().load_balancers();
            Ok(if lbs.is_empty() {
                Probe::Done(())
            } else {
                Probe::Pending(format!("recreated: {lbs:?}"))
            })
        },
    )
    .await?;
    let s = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    ensure!(
        ingress_ips(&s) == vec![ip.clone()],
        "expected the stale ingress {ip} kept, observed {:?}",
        ingress_ips(&s)
    );
    // Any needsUpdate change heals it.
    let annotate = json!({"metadata": {"annotations": {"example.com/heal": "1"}}});
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&annotate))
        .await
        .map_err(|e| CaseError::infra("patching Service", e))?;
    eventually("a load balancer again", LB_TIMEOUT, || async {
        let lbs = env.cloud().load_balancers();
        Ok(if lbs.len() == 1 {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{lbs:?}"))
        })
    })
    .await?;
    let vip = env
        .cloud()
        .load_balancers()
        .first()
        .map(|lb| lb.vip.clone())
        .unwrap_or_default();
    let cloud = env.cloud();
    let ip = svc_eventually(env, "the ingress of the new load balancer", |s| {
        let now = ingress_ips(s);
        match now.first() {
            Some(a) if *a == vip || cloud.resolve_ingress(a).as_deref() == Some(vip.as_str()) => {
                Ok(a.clone())
            }
            _ => Err(format!("ingress {now:?}, new VIP {vip}")),
        }
    })
    .await?;
    reach(env, &ip, 8080, 2).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb26(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let orphaned = delete_out_of_band(env).await?;
    let before = count_reason(&reasons(env).await?, "UpdatedLoadBalancer");
    // Where the provider answers the update of a vanished load balancer with success
    // (cloud-provider-azure `shouldUpdateLoadBalancer` skips it and returns nil), the
    // controller records UpdatedLoadBalancer; only the failure event is wrong everywhere.
    let update_fails = env
        .cloud()
        .supports(Feature::UpdateFailsForMissingLoadBalancer)
        .is_ok();
    let calls = env.cloud().load_balancer_calls();
    // A node joins: UpdateLoadBalancer fails (nothing to update), GetLoadBalancer says
    // gone, so upstream (controllers/service/controller.go lockedUpdateLoadBalancerHosts)
    // records no UpdateLoadBalancerFailed (kubernetes/kubernetes#109180).
    initialized_node(
        env,
        "node-c",
        NodeOptions {
            node_ip: Some(NodeIp::FirstInternal),
            ..Default::default()
        },
    )
    .await?;
    let env: &Environment = env;
    eventually("the node sync to reach the cloud", LB_TIMEOUT, || async {
        let now = env.cloud().load_balancer_calls();
        Ok(if now > calls {
            Probe::Done(())
        } else {
            Probe::Pending("no load-balancer call".into())
        })
    })
    .await?;
    holds_for(
        "no UpdateLoadBalancerFailed for a load balancer that is gone",
        Duration::from_secs(2),
        || async {
            let r = reasons(env).await?;
            Ok(
                if count_reason(&r, "UpdateLoadBalancerFailed") == 0
                    && (!update_fails || count_reason(&r, "UpdatedLoadBalancer") == before)
                {
                    Probe::Done(())
                } else {
                    Probe::Pending(format!("events {r:?}"))
                },
            )
        },
    )
    .await?;
    // Deleting the Service: GetLoadBalancer says gone, so upstream never calls
    // EnsureLoadBalancerDeleted (kubernetes/cloud-provider controllers/service/controller.go
    // syncLoadBalancerIfNeeded) and what the operator's delete orphaned stays (on AWS the
    // ELB's security group). Anything else left over is a leak.
    let _ = env.services().delete(SVC, &DeleteParams::default()).await;
    wait_gone(env).await?;
    wait_no_lbs(env).await?;
    let leaks: Vec<String> = env
        .cloud()
        .leaks()
        .into_iter()
        .filter(|l| !orphaned.contains(l))
        .collect();
    ensure!(
        leaks.is_empty(),
        "expected no cloud resources left but those the out-of-band delete orphaned \
         ({orphaned:?}), observed {leaks:?}"
    );
    Ok(vec![(
        "orphaned_by_out_of_band_delete".into(),
        orphaned.len().to_string(),
    )])
}
