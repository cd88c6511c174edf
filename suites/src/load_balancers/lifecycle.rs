//! A load balancer's life with its Service: created with finalizer, events and an ingress
//! that carries traffic (LB-01, LB-02), removed when the Service stops being type
//! LoadBalancer (LB-03) or is deleted (LB-04), kept behind the finalizer while the cloud
//! refuses (LB-05, LB-18), and left to another controller (LB-19).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::{CaseError, Environment, FaultSpec, Probe, ensure, eventually, holds_for};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;

pub(super) async fn lb01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let started = std::time::Instant::now();
    create(env, &service(SVC, json!({}))?).await?;
    let ip = ready_ingress(env).await?;
    let ready = started.elapsed();
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let r = reasons(env).await?;
    let ensuring = r.iter().position(|x| x == "EnsuringLoadBalancer");
    let ensured = r.iter().position(|x| x == "EnsuredLoadBalancer");
    ensure!(
        ensuring.is_some() && ensuring < ensured,
        "expected EnsuringLoadBalancer before EnsuredLoadBalancer, observed {r:?}"
    );
    let lbs = env.cloud().load_balancers();
    ensure!(
        lbs.len() == 1,
        "expected exactly one cloud load balancer, observed {lbs:?}"
    );
    let svc = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    let first = svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .and_then(|i| i.into_iter().next())
        .unwrap_or_default();
    match (&first.ip, &first.hostname) {
        // LB-02: an ip ingress carries ipMode VIP or Proxy (KEP-1860).
        (Some(_), _) => {
            let mode = first.ip_mode.as_deref();
            ensure!(
                matches!(mode, Some("VIP") | Some("Proxy")),
                "expected ipMode VIP or Proxy on the ip ingress, observed {mode:?}"
            );
        }
        // A hostname ingress (AWS ELB DNS names) has no ipMode; it must resolve to the
        // cloud load balancer's address.
        (None, Some(host)) => {
            let resolved = env.cloud().resolve_ingress(host);
            ensure!(
                resolved
                    .as_ref()
                    .is_some_and(|r| lbs.iter().any(|lb| &lb.vip == r)),
                "expected hostname ingress {host} to resolve to the load balancer's address {:?}, observed {resolved:?}",
                lbs.first().map(|lb| &lb.vip)
            );
        }
        (None, None) => {
            return Err(CaseError::failed(format!(
                "expected an ip or hostname on the ingress, observed {first:?}"
            )));
        }
    }
    // Real traffic: the answer names a node behind the load balancer.
    let answers = reach(env, &ip, 8080, 6).await?;
    ensure!(
        answers.iter().all(|a| a == "node-a" || a == "node-b") && !answers.is_empty(),
        "expected answers from node-a/node-b through {ip}:8080, observed {answers:?}"
    );
    delete_and_check_leaks(env).await?;
    Ok(vec![(
        "lb-ready-seconds".into(),
        format!("{:.3}", ready.as_secs_f64()),
    )])
}

pub(super) async fn lb03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    let to_cluster_ip = json!({"spec": {"type": "ClusterIP"}});
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&to_cluster_ip))
        .await
        .map_err(|e| CaseError::infra("patching Service", e))?;
    svc_eventually(env, "finalizer and ingress gone", |s| {
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
    wait_reason(env, "DeletedLoadBalancer").await?;
    let r = reasons(env).await?;
    ensure!(
        r.iter().any(|x| x == "DeletingLoadBalancer"),
        "expected DeletingLoadBalancer, observed {r:?}"
    );
    let to_lb = json!({"spec": {"type": "LoadBalancer"}});
    env.services()
        .patch(SVC, &PatchParams::default(), &Patch::Merge(&to_lb))
        .await
        .map_err(|e| CaseError::infra("patching Service", e))?;
    ready_ingress(env).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    env.services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting Service", e))?;
    // Until the cloud LB is gone the Service must still exist (finalizer).
    let services = env.services();
    eventually(
        "the Service gone after its load balancer",
        LB_TIMEOUT,
        || {
            let services = services.clone();
            async move {
                let svc = services
                    .get_opt(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?;
                let lbs = env.cloud().load_balancers();
                match svc {
                    Some(_) => Ok(Probe::Pending(format!(
                        "Service still there; cloud LBs {}",
                        lbs.len()
                    ))),
                    None if lbs.is_empty() => Ok(Probe::Done(())),
                    None => Err(CaseError::failed(format!(
                        "the Service was gone while its load balancer still existed: {lbs:?}"
                    ))),
                }
            }
        },
    )
    .await?;
    let leaks = env.cloud().leaks();
    ensure!(
        leaks.is_empty(),
        "expected no cloud resources left, observed {leaks:?}"
    );
    Ok(vec![])
}

pub(super) async fn lb05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    env.cloud().inject(FaultSpec::LoadBalancerWrite {
        method: "DELETE",
        status: 500,
        count: None,
    });
    env.services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting Service", e))?;
    let services = env.services();
    holds_for(
        "the Service to stay Terminating with its finalizer",
        Duration::from_secs(3),
        || {
            let services = services.clone();
            async move {
                Ok(
                    match services
                        .get_opt(SVC)
                        .await
                        .map_err(|e| CaseError::infra("getting Service", e))?
                    {
                        Some(s) if has_finalizer(&s) && s.metadata.deletion_timestamp.is_some() => {
                            Probe::Done(())
                        }
                        other => {
                            Probe::Pending(format!("{:?}", other.map(|s| s.metadata.finalizers)))
                        }
                    },
                )
            }
        },
    )
    .await?;
    ensure!(
        env.cloud().faulted_calls() >= 1,
        "expected the CCM to try deleting the load balancer"
    );
    env.cloud().clear_faults();
    // Backoff is 5 s, 10 s, ...: recovery within the next retries.
    eventually(
        "the Service gone after the cloud recovers",
        Duration::from_secs(40),
        || async {
            Ok(
                match env
                    .services()
                    .get_opt(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?
                {
                    None => Probe::Done(()),
                    Some(_) => Probe::Pending("still Terminating".into()),
                },
            )
        },
    )
    .await?;
    wait_no_lbs(env).await?;
    Ok(vec![])
}

pub(super) async fn lb18(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    // Until cleared: cloud SDKs retry 5xx answers themselves (the AWS SDK up to 3 times),
    // so a fault with a small count could be absorbed before the CCM sees it.
    env.cloud().inject(FaultSpec::LoadBalancerWrite {
        method: "POST",
        status: 500,
        count: None,
    });
    create(env, &service(SVC, json!({}))?).await?;
    wait_reason(env, "SyncLoadBalancerFailed").await?;
    env.cloud().clear_faults();
    let s = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    ensure!(
        has_finalizer(&s),
        "expected the finalizer kept after a failed ensure"
    );
    // The retry (5 s backoff) succeeds.
    ready_ingress(env).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

pub(super) async fn lb19(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Only some providers hand a Service's load balancer to another controller:
    // cloud-provider-aws pkg/providers/v1/aws_loadbalancer.go returns ImplementedElsewhere
    // for `aws-load-balancer-type: external` (the AWS Load Balancer Controller's Services).
    let annotations = json!(env.cloud().implemented_elsewhere_annotations()?);
    two_nodes(env).await?;
    let env: &Environment = env;
    let mut svc = service(SVC, json!({}))?;
    svc.metadata.annotations = serde_json::from_value(annotations)
        .map_err(|e| CaseError::infra("building annotations", e))?;
    create(env, &svc).await?;
    svc_eventually(env, "the finalizer", |s| {
        if has_finalizer(s) {
            Ok(())
        } else {
            Err("no finalizer".into())
        }
    })
    .await?;
    let services = env.services();
    holds_for(
        "no status, no EnsuredLoadBalancer and no cloud load balancer",
        Duration::from_secs(2),
        || {
            let services = services.clone();
            async move {
                let s = services
                    .get(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?;
                let r = reasons(env).await?;
                let lbs = env.cloud().load_balancers();
                Ok(
                    if ingress_ips(&s).is_empty()
                        && count_reason(&r, "EnsuredLoadBalancer") == 0
                        && lbs.is_empty()
                    {
                        Probe::Done(())
                    } else {
                        Probe::Pending(format!(
                            "ingress {:?}, events {r:?}, cloud {lbs:?}",
                            ingress_ips(&s)
                        ))
                    },
                )
            }
        },
    )
    .await?;
    // The delete path still runs (EnsureLoadBalancerDeleted tolerates ImplementedElsewhere)
    // and lets the Service go.
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

/// LB-27: whatever failed ensures made before the load balancer itself (AWS's security
/// group, Azure's public IP, GCE's firewall rules, target pool and health check) goes with
/// the Service when it is deleted before its load balancer ever existed. The creates fail
/// until the end, so only the delete path can clean up; the service controller runs it
/// only for a load balancer GetLoadBalancer says exists (k8s.io/cloud-provider
/// controllers/service `syncLoadBalancerIfNeeded`), so a provider that answers from the
/// load balancer alone leaks the rest.
pub(super) async fn lb27(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    env.cloud().inject(FaultSpec::LoadBalancerWrite {
        method: "POST",
        status: 500,
        count: None,
    });
    create(env, &service(SVC, json!({}))?).await?;
    // The create was tried and refused: what an ensure makes first exists by now. (Not
    // the SyncLoadBalancerFailed event: an SDK that retries 5xx answers for longer than
    // the case waits would hide the question behind its retries.)
    eventually(
        "a load-balancer create the cloud refused",
        Duration::from_secs(20),
        || async {
            let refused = env.cloud().faulted_calls();
            Ok(if refused >= 1 {
                Probe::Done(())
            } else {
                Probe::Pending("no refused create yet".into())
            })
        },
    )
    .await?;
    // Deleted with the creates still failing: a delete path that needs none must finish,
    // once the ensure in flight has given up (an SDK's retries of the refused create take
    // up to 35 s on Azure: 5, 10 and 20 s).
    env.services()
        .delete(SVC, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("deleting Service", e))?;
    super::wait_service_gone_within(env.services(), Duration::from_secs(90)).await?;
    env.cloud().clear_faults();
    let leaks = env.cloud().leaks();
    ensure!(
        leaks.is_empty(),
        "expected nothing the failed ensures made left in the cloud, observed {leaks:?}"
    );
    Ok(vec![])
}
