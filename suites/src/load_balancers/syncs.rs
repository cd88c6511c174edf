//! Which changes reach the cloud: one ensure per relevant Service change and none for a
//! selector (LB-12), nothing at all for a Service with a loadBalancerClass (LB-13), and a
//! restart's re-ensure that writes no unchanged Service (LB-20).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::{CaseError, Environment, Probe, ensure, eventually, holds_for};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;

pub(super) async fn lb12(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let count = |r: &[String]| r.iter().filter(|x| *x == "EnsuringLoadBalancer").count();
    let before = count(&reasons(env).await?);
    // A selector change is not a needsUpdate trigger: no cloud call at all.
    let calls = env.cloud().load_balancer_calls();
    let selector = json!({"spec": {"selector": {"app": "other"}}});
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&selector))
        .await
        .map_err(|e| CaseError::infra("patching Service", e))?;
    holds_for(
        "no load-balancer call after a selector change",
        Duration::from_secs(2),
        || async {
            let now = env.cloud().load_balancer_calls();
            Ok(if now == calls {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} calls", now - calls))
            })
        },
    )
    .await?;
    // An annotation change is: exactly one more ensure.
    let annotate = json!({"metadata": {"annotations": {"example.com/touch": "1"}}});
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&annotate))
        .await
        .map_err(|e| CaseError::infra("patching Service", e))?;
    eventually("one more EnsuringLoadBalancer", LB_TIMEOUT, || async {
        let n = count(&reasons(env).await?);
        Ok(if n > before {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{n} ensures"))
        })
    })
    .await?;
    holds_for(
        "exactly one ensure for one change",
        Duration::from_secs(2),
        || async {
            let n = count(&reasons(env).await?);
            Ok(if n == before + 1 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} ensures after one change", n - before))
            })
        },
    )
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb13(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    let calls = env.cloud().load_balancer_calls();
    create(
        env,
        &service(SVC, json!({"loadBalancerClass": "example.com/other"}))?,
    )
    .await?;
    let services = env.services();
    holds_for(
        "no finalizer, event or cloud call for a classed Service",
        Duration::from_secs(3),
        || {
            let services = services.clone();
            async move {
                let s = services
                    .get(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?;
                let r = reasons(env).await?;
                let now = env.cloud().load_balancer_calls();
                Ok(if !has_finalizer(&s) && r.is_empty() && now == calls {
                    Probe::Done(())
                } else {
                    Probe::Pending(format!(
                        "finalizer {}, events {r:?}, cloud calls {}",
                        has_finalizer(&s),
                        now - calls
                    ))
                })
            }
        },
    )
    .await?;
    env.services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting Service", e))?;
    wait_gone(env).await?;
    ensure!(
        env.cloud().load_balancer_calls() == calls,
        "expected no cloud call across create and delete"
    );
    Ok(vec![])
}

pub(super) async fn lb20(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let service_writes = |env: &Environment| {
        env.ccm_writes()
            .iter()
            .filter(|e| e.resource == "services" && e.name.as_deref() == Some(SVC))
            .count()
    };
    let ensured = count_reason(&reasons(env).await?, "EnsuredLoadBalancer");
    let lbs = env.cloud().load_balancers();
    // Startup re-ensures every LB Service (there is no periodic re-ensure otherwise).
    env.start_ccm().await?;
    let before = service_writes(env);
    wait_ensured_after(env, ensured).await?;
    let env: &Environment = env;
    holds_for(
        "no Service or status write for an identical status",
        Duration::from_secs(1),
        || async {
            let n = service_writes(env);
            Ok(if n == before {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} Service writes after restart", n - before))
            })
        },
    )
    .await?;
    let now = env.cloud().load_balancers();
    ensure!(
        now.iter().map(|l| &l.id).eq(lbs.iter().map(|l| &l.id)),
        "expected the same cloud load balancer after restart, observed {lbs:?} then {now:?}"
    );
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}
