//! LoadBalancer: the service-lb controller (kubernetes/cloud-provider
//! controllers/service/controller.go; ccm-behaviour.md §1.5, cases LB-*), judged through the
//! API (finalizer, events, status), the cloud (load balancers, journal, leaks) and real
//! traffic through the mock load balancer to the simulated kube-proxy on each node.

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::invariants::{QUIET_BEFORE_BASELINE, wait_services_quiet};
use ccm_harness::{
    Case, CaseError, Environment, FaultSpec, Probe, Tag, ensure, eventually, holds_for,
};
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::initialized_node;

pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Creating an LB against the mock (immediate lifecycle) takes well under a second; upstream
/// e2e allows 20 min against real clouds.
const LB_TIMEOUT: Duration = Duration::from_secs(20);
const SVC: &str = "web";

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $body:ident) => {
        case!($id, $title, $tags, $body, ccm_args: &[], start_ccm: true)
    };
    ($id:literal, $title:literal, $tags:expr, $body:ident,
     ccm_args: $args:expr, start_ccm: $start:expr) => {
        Case {
            id: $id,
            suite: "LoadBalancer",
            title: $title,
            tags: $tags,
            ccm_args: $args,
            start_ccm: $start,
            run: |env| {
                Box::pin(async move {
                    env.cloud()
                        .require(ccm_harness::cloud::Feature::LoadBalancers)?;
                    $body(env).await
                })
            },
        }
    };
}

// After the macro, so the submodule's cases use it too.
mod rollouts;

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "LB-01",
            "creates a load balancer with finalizer, events and an ingress that carries traffic",
            &[Conformance],
            lb01
        ),
        case!(
            "LB-03",
            "removes the load balancer when the Service stops being type LoadBalancer",
            &[Conformance],
            lb03
        ),
        case!(
            "LB-04",
            "keeps a deleted Service until its load balancer is gone",
            &[Conformance],
            lb04
        ),
        case!(
            "LB-05",
            "keeps the finalizer while the cloud refuses to delete, then cleans up",
            &[Mock],
            lb05
        ),
        case!(
            "LB-06",
            "deletes the load balancer of a Service deleted while the CCM was down",
            &[Mock],
            lb06
        ),
        case!(
            "LB-07",
            "deletes the load balancer of a Service turned ClusterIP while the CCM was down",
            &[Mock],
            lb07
        ),
        case!(
            "LB-08",
            "follows nodePort and port changes with the same ingress",
            &[Conformance],
            lb08
        ),
        case!(
            "LB-09",
            "lets only clients inside loadBalancerSourceRanges through",
            &[Conformance],
            lb09
        ),
        case!(
            "LB-12",
            "re-ensures once per relevant change and never for a selector change",
            &[Mock],
            lb12
        ),
        case!(
            "LB-13",
            "ignores Services with a loadBalancerClass entirely",
            &[Mock],
            lb13
        ),
        case!(
            "LB-14",
            "updates the backends when a node joins or is excluded by label",
            &[Mock],
            lb14
        ),
        case!(
            "LB-15",
            "keeps NotReady nodes as backends and drops autoscaler-deleted nodes at the next sync",
            &[Mock],
            lb15
        ),
        case!(
            "LB-17",
            "warns UnAvailableLoadBalancer and still ensures when no node is eligible",
            &[Mock],
            lb17
        ),
        case!(
            "LB-18",
            "reports SyncLoadBalancerFailed and keeps the finalizer when ensure fails",
            &[Mock],
            lb18
        ),
        case!(
            "LB-20",
            "re-ensures at restart without writing an unchanged Service",
            &[Mock],
            lb20
        ),
        case!(
            "LB-25",
            "keeps the load balancers of two clusters with different --cluster-name apart",
            &[Mock],
            lb25
        ),
    ]
    .into_iter()
    .chain(more_cases())
    .collect()
}

fn service(name: &str, extra_spec: serde_json::Value) -> Result<Service, CaseError> {
    let mut spec = json!({
        "type": "LoadBalancer",
        "selector": {"app": name},
        "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]
    });
    if let (Some(dst), Some(src)) = (spec.as_object_mut(), extra_spec.as_object()) {
        dst.extend(src.clone());
    }
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}),
    )
    .map_err(|e| CaseError::infra("building Service", e))
}

async fn two_nodes(env: &mut Environment) -> Result<(), CaseError> {
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    initialized_node(env, "node-b", NodeOptions::default()).await?;
    Ok(())
}

async fn create(env: &Environment, svc: &Service) -> Result<Service, CaseError> {
    env.services()
        .create(&PostParams::default(), svc)
        .await
        .map_err(|e| CaseError::infra("creating Service", e))
}

fn has_finalizer(s: &Service) -> bool {
    s.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

fn ingress_ips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| {
            i.iter()
                .filter_map(|i| i.ip.clone().or(i.hostname.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn svc_eventually<T>(
    env: &Environment,
    what: &str,
    check: impl Fn(&Service) -> Result<T, String>,
) -> Result<T, CaseError> {
    let services = env.services();
    let check = &check;
    eventually(what, LB_TIMEOUT, || {
        let services = services.clone();
        async move {
            let s = services
                .get(SVC)
                .await
                .map_err(|e| CaseError::infra("getting Service", e))?;
            Ok(match check(&s) {
                Ok(v) => Probe::Done(v),
                Err(seen) => Probe::Pending(seen),
            })
        }
    })
    .await
}

/// Waits for the finalizer and an ingress, then for the Service to settle: a provider
/// that records its load balancer's ID on the Service (cloud-provider-openstack) causes
/// one more sync, which must not land inside whatever the case measures next.
async fn ready_ingress(env: &Environment) -> Result<String, CaseError> {
    let ip = svc_eventually(env, "an ingress address", |s| {
        match ingress_ips(s).first() {
            Some(ip) if has_finalizer(s) => Ok(ip.clone()),
            _ => Err(format!(
                "finalizer {}, ingress {:?}",
                has_finalizer(s),
                ingress_ips(s)
            )),
        }
    })
    .await?;
    wait_services_quiet(env, &[SVC.to_string()], QUIET_BEFORE_BASELINE).await?;
    Ok(ip)
}

/// The reasons of the Service's events, one per occurrence, oldest write first.
/// client-go's recorder (which upstream CCMs use) folds a repeat of an identical event into
/// the existing Event object and raises its `count` (client-go `tools/record`
/// `events_cache.go`, `EventCorrelator`), so an occurrence is a unit of `count`, not an
/// object.
async fn reasons(env: &Environment) -> Result<Vec<String>, CaseError> {
    Ok(env
        .service_events(SVC)
        .await?
        .into_iter()
        .flat_map(|e| {
            let n = e.count.unwrap_or(1).max(1) as usize;
            e.reason
                .into_iter()
                .flat_map(move |r| std::iter::repeat_n(r, n))
        })
        .collect())
}

async fn wait_reason(env: &Environment, reason: &str) -> Result<(), CaseError> {
    eventually(&format!("a {reason} event"), LB_TIMEOUT, || async {
        let r = reasons(env).await?;
        Ok(if r.iter().any(|x| x == reason) {
            Probe::Done(())
        } else {
            Probe::Pending(format!("events: {r:?}"))
        })
    })
    .await
}

async fn wait_no_lbs(env: &Environment) -> Result<(), CaseError> {
    eventually("no load balancer left in the cloud", LB_TIMEOUT, || async {
        let lbs = env.cloud().load_balancers();
        Ok(if lbs.is_empty() {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{lbs:?}"))
        })
    })
    .await
}

async fn wait_gone(env: &Environment) -> Result<(), CaseError> {
    let services = env.services();
    eventually("the Service to be gone", LB_TIMEOUT, || {
        let services = services.clone();
        async move {
            Ok(
                match services
                    .get_opt(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?
                {
                    None => Probe::Done(()),
                    Some(s) => Probe::Pending(format!(
                        "still there, finalizers {:?}",
                        s.metadata.finalizers
                    )),
                },
            )
        }
    })
    .await
}

/// Deletes the Service, waits for the cloud to be clean: every LB case ends with no leak.
async fn delete_and_check_leaks(env: &Environment) -> Result<(), CaseError> {
    let _ = env.services().delete(SVC, &DeleteParams::default()).await;
    wait_gone(env).await?;
    wait_no_lbs(env).await?;
    let leaks = env.cloud().leaks();
    ensure!(
        leaks.is_empty(),
        "expected no cloud resources left, observed {leaks:?}"
    );
    Ok(())
}

async fn lb01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

/// Connects `tries` times to `ip:port` and collects the first line of each answer.
async fn reach(
    env: &Environment,
    ip: &str,
    port: u16,
    tries: usize,
) -> Result<BTreeSet<String>, CaseError> {
    let _ = env;
    let addr = format!("{ip}:{port}");
    eventually(&format!("an answer through {addr}"), LB_TIMEOUT, || {
        let addr = addr.clone();
        async move {
            let mut seen = BTreeSet::new();
            for _ in 0..tries {
                if let Ok(Some(line)) =
                    ccm_harness::traffic::tcp_line(&addr, Duration::from_secs(2)).await
                {
                    seen.insert(line);
                }
            }
            Ok(if seen.is_empty() {
                Probe::Pending(format!("no answer from {addr}"))
            } else {
                Probe::Done(seen)
            })
        }
    })
    .await
}

async fn lb03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb12(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb13(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb14(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb18(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn patch_spec(env: &Environment, spec: serde_json::Value) -> Result<(), CaseError> {
    env.services()
        .patch(
            SVC,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .map(drop)
        .map_err(|e| CaseError::infra("patching Service", e))
}

async fn lb07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

fn count_reason(reasons: &[String], reason: &str) -> usize {
    reasons.iter().filter(|r| *r == reason).count()
}

/// Waits for one more `EnsuredLoadBalancer` than `before`.
async fn wait_ensured_after(env: &Environment, before: usize) -> Result<(), CaseError> {
    wait_more_events(env, "EnsuredLoadBalancer", before, "").await
}

/// Waits until the Service has more than `before` events with `reason`; `after` names
/// what should have caused it (for the failure message).
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

async fn wait_more_events(
    env: &Environment,
    reason: &str,
    before: usize,
    after: &str,
) -> Result<(), CaseError> {
    eventually(&format!("one more {reason}{after}"), LB_TIMEOUT, || async {
        let n = count_reason(&reasons(env).await?, reason);
        Ok(if n > before {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{n} {reason} events"))
        })
    })
    .await
}

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

fn first_node_port(s: &Service) -> Option<i32> {
    s.spec
        .as_ref()
        .and_then(|sp| sp.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.node_port)
}

async fn lb08(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    create(env, &service(SVC, json!({}))?).await?;
    let ip = ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    reach(env, &ip, 8080, 2).await?;
    let svc = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    let old_node_port = first_node_port(&svc).unwrap_or(0);
    let new_node_port = if old_node_port == 31234 { 31235 } else { 31234 };
    let ensured = count_reason(&reasons(env).await?, "EnsuredLoadBalancer");
    patch_spec(
        env,
        json!({"ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP", "nodePort": new_node_port}]}),
    )
    .await?;
    wait_ensured_after(env, ensured).await?;
    reach(env, &ip, 8080, 2).await?;
    // Then the service port: the listener moves, the ingress stays.
    let ensured = count_reason(&reasons(env).await?, "EnsuredLoadBalancer");
    patch_spec(
        env,
        json!({"ports": [{"name": "http", "port": 8081, "targetPort": 8080, "protocol": "TCP", "nodePort": new_node_port}]}),
    )
    .await?;
    wait_ensured_after(env, ensured).await?;
    let answers = reach(env, &ip, 8081, 2).await?;
    ensure!(
        !answers.is_empty(),
        "expected answers on the new port 8081 of {ip}"
    );
    let now = ready_ingress(env).await?;
    ensure!(
        now == ip,
        "expected the same ingress after port changes, observed {ip} then {now}"
    );
    let old_addr = format!("{ip}:8080");
    eventually("the old port 8080 closed", LB_TIMEOUT, || {
        let old_addr = old_addr.clone();
        async move {
            Ok(
                match ccm_harness::traffic::tcp_line(&old_addr, Duration::from_secs(1))
                    .await
                    .map_err(|e| CaseError::infra("connecting", e))?
                {
                    None => Probe::Done(()),
                    Some(line) => Probe::Pending(format!("{old_addr} still answers {line}")),
                },
            )
        }
    })
    .await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

/// Whether a client at `source` gets an answer through `ip:8080`, waiting until it is
/// `want` and then checking it stays so for a few connections.
async fn expect_reach(
    env: &Environment,
    ip: &str,
    source: &str,
    want: bool,
) -> Result<(), CaseError> {
    let _ = env;
    let addr = format!("{ip}:8080");
    let src: std::net::IpAddr = source
        .parse()
        .map_err(|e| CaseError::infra("client address", e))?;
    let what = if want { "answered" } else { "refused" };
    let probe = || {
        let addr = addr.clone();
        async move {
            let line =
                ccm_harness::probe::tcp_line_from(src, &addr, Duration::from_secs(1)).await?;
            Ok(if line.is_some() == want {
                Probe::Done(())
            } else {
                Probe::Pending(format!("client {source} -> {addr}: {line:?}"))
            })
        }
    };
    eventually(
        &format!("client {source} to be {what} through {addr}"),
        LB_TIMEOUT,
        probe,
    )
    .await?;
    holds_for(
        &format!("client {source} {what} through {addr}"),
        Duration::from_millis(500),
        probe,
    )
    .await
}

async fn lb09(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    // Clients inside 127/8: one inside the range, one outside.
    let (inside, outside) = ("127.0.0.2", "127.0.0.3");
    create(
        env,
        &service(SVC, json!({"loadBalancerSourceRanges": ["127.0.0.2/32"]}))?,
    )
    .await?;
    let ip = ready_ingress(env).await?;
    expect_reach(env, &ip, inside, true).await?;
    expect_reach(env, &ip, outside, false).await?;
    // Upstream e2e: allow-all split in two halves, deny-all with an unroutable /32, cleared.
    patch_spec(
        env,
        json!({"loadBalancerSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]}),
    )
    .await?;
    expect_reach(env, &ip, outside, true).await?;
    expect_reach(env, &ip, inside, true).await?;
    patch_spec(env, json!({"loadBalancerSourceRanges": ["255.0.0.0/32"]})).await?;
    expect_reach(env, &ip, inside, false).await?;
    expect_reach(env, &ip, outside, false).await?;
    patch_spec(env, json!({"loadBalancerSourceRanges": null})).await?;
    expect_reach(env, &ip, outside, true).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

async fn lb25(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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
    env.stop_replica("other").await;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

async fn lb17(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb20(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb15(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

// ---- LB-10, 11, 16, 19, 21, 24, 26 (ccm-behaviour.md §4 and §6) ----

/// The cases above; `cases()` appends them so the list keeps the suite order.
pub fn more_cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "LB-10",
            "serves without node ports when allocateLoadBalancerNodePorts is false, keeps the ingress when they are allocated",
            &[Conformance],
            lb10
        ),
        case!(
            "LB-11",
            "gives an externalTrafficPolicy=Local Service a health-check node port and keeps serving",
            &[Conformance],
            lb11
        ),
        // Without the node controller nobody but the case sets providerID, so the only
        // providerID change is the one the case makes.
        case!(
            "LB-16",
            "updates the backends when a node's providerID is set",
            &[Mock],
            lb16,
            ccm_args: &["--controllers=*,-cloud-node-controller"],
            start_ccm: true
        ),
        case!(
            "LB-19",
            "keeps the finalizer but writes no status when the load balancer is implemented elsewhere",
            &[Mock],
            lb19
        ),
        case!(
            "LB-21",
            "does not heal an out-of-band deleted load balancer until the Service changes",
            &[Mock],
            lb21
        ),
        case!(
            "LB-24",
            "updates each of many Services once per node join, never more than --concurrent-service-syncs at a time",
            &[Mock],
            lb24,
            ccm_args: &["--concurrent-service-syncs=2"],
            start_ccm: true
        ),
        case!(
            "LB-06b",
            "deletes the load balancer of a Service whose CCM was killed mid-delete",
            &[Mock],
            lb06b,
            ccm_args: &[],
            start_ccm: false
        ),
        case!(
            "LB-07b",
            "deletes the load balancer of a Service whose CCM was killed mid-type-change",
            &[Mock],
            lb07b,
            ccm_args: &[],
            start_ccm: false
        ),
        case!(
            "LB-26",
            "reports no UpdateLoadBalancerFailed when the load balancer is already gone",
            &[Mock],
            lb26
        ),
    ]
    .into_iter()
    .chain(rollouts::cases())
    .collect()
}

async fn lb10(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    create(
        env,
        &service(SVC, json!({"allocateLoadBalancerNodePorts": false}))?,
    )
    .await?;
    // The finalizer shows the controller took the Service on.
    svc_eventually(env, "the finalizer", |s| {
        if has_finalizer(s) {
            Ok(())
        } else {
            Err("no finalizer".into())
        }
    })
    .await?;
    let s = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    ensure!(
        first_node_port(&s).unwrap_or(0) == 0,
        "expected no node port with allocateLoadBalancerNodePorts=false, observed {:?}",
        first_node_port(&s)
    );
    // Providers whose backends are node ports (OpenStack members, classic ELB instances)
    // cannot serve yet; one that can has an ingress now, and it must survive the flip.
    let before = ingress_ips(&s);
    // kubernetes/kubernetes pkg/registry/core/service: flipping the field to true
    // allocates node ports; the ports change is a needsUpdate trigger.
    patch_spec(env, json!({"allocateLoadBalancerNodePorts": true})).await?;
    svc_eventually(
        env,
        "a node port after the flip",
        |s| match first_node_port(s) {
            Some(p) if p > 0 => Ok(()),
            other => Err(format!("nodePort {other:?}")),
        },
    )
    .await?;
    let ip = ready_ingress(env).await?;
    ensure!(
        before.is_empty() || before == vec![ip.clone()],
        "expected the ingress unchanged after node ports were allocated, observed {before:?} then {ip}"
    );
    reach(env, &ip, 8080, 2).await?;
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

/// The simulated kube-proxy answers the health-check node port 200 only on the nodes this
/// annotation names (mocks/kubelet kube_proxy.rs `LOCAL_ENDPOINTS_ANNOTATION`).
const LOCAL_ENDPOINTS: &str = "ccm-conformance.io/local-endpoints";

async fn lb11(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let env: &Environment = env;
    let mut svc = service(SVC, json!({"externalTrafficPolicy": "Local"}))?;
    svc.metadata.annotations = Some([(LOCAL_ENDPOINTS.to_string(), "node-a".to_string())].into());
    create(env, &svc).await?;
    let ip = ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let s = env
        .services()
        .get(SVC)
        .await
        .map_err(|e| CaseError::infra("getting Service", e))?;
    let hc = s.spec.as_ref().and_then(|sp| sp.health_check_node_port);
    ensure!(
        hc.is_some_and(|p| p > 0),
        "expected a healthCheckNodePort for externalTrafficPolicy=Local, observed {hc:?}"
    );
    // Where the load balancer health-checks the healthCheckNodePort (AWS's classic ELB:
    // HTTP:<healthCheckNodePort>/healthz), only node-a (the one with a local endpoint) gets
    // traffic; elsewhere every member does, and only reachability is checked.
    if env
        .cloud()
        .supports(ccm_harness::cloud::Feature::LocalTrafficHealthChecks)
        .is_ok()
    {
        let addr = format!("{ip}:8080");
        eventually("answers from node-a only", LB_TIMEOUT * 3, || async {
            let mut seen = BTreeSet::new();
            for _ in 0..8 {
                if let Ok(Some(line)) =
                    ccm_harness::traffic::tcp_line(&addr, Duration::from_secs(1)).await
                {
                    seen.insert(line);
                }
            }
            Ok(if seen == BTreeSet::from(["node-a".to_string()]) {
                Probe::Done(())
            } else {
                Probe::Pending(format!("answers from {seen:?}"))
            })
        })
        .await?;
    } else {
        reach(env, &ip, 8080, 2).await?;
    }
    delete_and_check_leaks(env).await?;
    Ok(vec![])
}

async fn lb16(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb19(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb21(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

async fn lb26(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    create(env, &service(SVC, json!({}))?).await?;
    ready_ingress(env).await?;
    wait_reason(env, "EnsuredLoadBalancer").await?;
    let orphaned = delete_out_of_band(env).await?;
    let before = count_reason(&reasons(env).await?, "UpdatedLoadBalancer");
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
                    && count_reason(&r, "UpdatedLoadBalancer") == before
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

/// LB-24's scale: enough Services that a serial or unbounded node sync shows, few enough to
/// keep the default run fast (the `bench lb` command goes to 100).
const LB24_SERVICES: usize = 20;
const LB24_SYNCS: usize = 2;

async fn lb24(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    two_nodes(env).await?;
    let names: Vec<String> = (0..LB24_SERVICES).map(|i| format!("web-{i}")).collect();
    for name in &names {
        create(env, &service(name, json!({}))?).await?;
    }
    let env_ro: &Environment = env;
    eventually("every Service has an ingress", LB_TIMEOUT * 3, || async {
        let list = env_ro
            .services()
            .list(&Default::default())
            .await
            .map_err(|e| CaseError::infra("listing Services", e))?;
        let ready = list
            .items
            .iter()
            .filter(|s| !ingress_ips(s).is_empty())
            .count();
        Ok(if ready >= LB24_SERVICES {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{ready} of {LB24_SERVICES} with an ingress"))
        })
    })
    .await?;
    // The syncs a provider's own annotation writes cause must be over before counting.
    wait_services_quiet(env_ro, &names, QUIET_BEFORE_BASELINE).await?;
    let mark = lb_journal_mark(env_ro);
    // The kubelet sets --provider-id itself, so the join is one node event (the node
    // controller's initialization changes no providerID): one node sync.
    let instance = env
        .cloud()
        .create_instance(ccm_harness::InstanceSpec::named("node-c"))?;
    let ip = instance
        .internal_ips
        .first()
        .cloned()
        .ok_or_else(|| CaseError::failed("the new instance has no internal IP"))?;
    env.add_node(
        "node-c",
        NodeOptions {
            instance: None,
            node_ip: Some(NodeIp::Literal(ip)),
            kubelet_provider_id: Some(instance.provider_id.clone()),
            ..Default::default()
        },
    )
    .await?;
    let env: &Environment = env;
    let started = std::time::Instant::now();
    eventually(
        "UpdatedLoadBalancer on every Service",
        LB_TIMEOUT * 3,
        || async {
            let mut missing = 0;
            for name in &names {
                let events = env.service_events(name).await?;
                if !events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("UpdatedLoadBalancer"))
                {
                    missing += 1;
                }
            }
            Ok(if missing == 0 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{missing} Services not updated yet"))
            })
        },
    )
    .await?;
    let elapsed = started.elapsed();
    // A second (unwanted) round would show as a second backend write.
    holds_for(
        "no second backend write for one node join",
        Duration::from_secs(1),
        || async {
            let max = lb_update_spans(env, mark)
                .iter()
                .map(|u| u.writes)
                .max()
                .unwrap_or(0);
            Ok(if max <= 1 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("a load balancer got {max} backend writes"))
            })
        },
    )
    .await?;
    let updates = lb_update_spans(env, mark);
    let per_lb_max = updates.iter().map(|u| u.writes).max().unwrap_or(0);
    let parallel = max_overlap(&updates);
    ensure!(
        updates.len() == LB24_SERVICES && per_lb_max == 1,
        "expected one backend write per Service ({LB24_SERVICES}), observed {} load balancers written, at most {per_lb_max} writes each",
        updates.len()
    );
    ensure!(
        parallel <= LB24_SYNCS,
        "expected at most --concurrent-service-syncs={LB24_SYNCS} updates at once, observed {parallel}"
    );
    let mut events = 0;
    for name in &names {
        events += env
            .service_events(name)
            .await?
            .iter()
            .filter(|e| e.reason.as_deref() == Some("UpdatedLoadBalancer"))
            .map(|e| e.count.unwrap_or(1))
            .sum::<i32>();
    }
    ensure!(
        events as usize == LB24_SERVICES,
        "expected one UpdatedLoadBalancer per Service, observed {events} for {LB24_SERVICES}"
    );
    for name in &names {
        let _ = env.services().delete(name, &DeleteParams::default()).await;
    }
    eventually("every load balancer deleted", LB_TIMEOUT * 3, || async {
        let n = env.cloud().load_balancers().len();
        Ok(if n == 0 {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{n} left"))
        })
    })
    .await?;
    Ok(vec![
        (
            "node_sync_seconds".into(),
            format!("{:.3}", elapsed.as_secs_f64()),
        ),
        ("max_parallel_updates".into(), parallel.to_string()),
    ])
}

pub(crate) use ccm_harness::cloud::LbUpdate;

/// Where the load-balancer journal stands now, for [`lb_update_spans`].
pub(crate) fn lb_journal_mark(env: &Environment) -> u64 {
    env.cloud().journal_mark()
}

/// Load-balancer calls after `mark`, grouped per load balancer, keeping the load balancers
/// that got a backend write.
pub(crate) fn lb_update_spans(env: &Environment, mark: u64) -> Vec<LbUpdate> {
    env.cloud().lb_updates_since(mark)
}

/// The largest number of updates whose [start, end] spans overlap at one instant.
pub(crate) fn max_overlap(updates: &[LbUpdate]) -> usize {
    let mut edges: Vec<(jiff::Timestamp, i32)> = updates
        .iter()
        .flat_map(|u| [(u.start, 1), (u.end, -1)])
        .collect();
    // Starts before ends at the same instant: touching spans count as overlapping.
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        max = max.max(now);
    }
    usize::try_from(max).unwrap_or(0)
}

async fn lb06b(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    killed_mid_cleanup(env, Cleanup::Delete).await
}

async fn lb07b(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

#[cfg(test)]
mod lb24_tests {
    use super::*;

    fn at(ms: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    fn span(start: i64, end: i64) -> LbUpdate {
        LbUpdate {
            start: at(start),
            end: at(end),
            writes: 1,
        }
    }

    #[test]
    fn overlap_counts_spans_open_at_the_same_instant() {
        assert_eq!(max_overlap(&[]), 0);
        assert_eq!(max_overlap(&[span(0, 10), span(20, 30)]), 1);
        assert_eq!(max_overlap(&[span(0, 10), span(5, 30), span(8, 9)]), 3);
        assert_eq!(max_overlap(&[span(0, 10), span(10, 20)]), 2);
    }
}
