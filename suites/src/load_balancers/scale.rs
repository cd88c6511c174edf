//! Many LoadBalancer Services and one node join: one backend write per Service, never more
//! than --concurrent-service-syncs at a time (LB-24, kubernetes/kubernetes#111539), read
//! from the cloud journal ([`super::journal`]).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::invariants::{QUIET_BEFORE_BASELINE, wait_services_quiet};
use ccm_harness::{CaseError, Environment, Probe, ensure, eventually, holds_for};
use kube::api::DeleteParams;
use serde_json::json;

use super::journal::{lb_journal_mark, lb_update_spans, max_overlap};
use super::*;

/// LB-24's scale: enough Services that a serial or unbounded node sync shows, few enough to
/// keep the default run fast (the `bench lb` command goes to 100).
const LB24_SERVICES: usize = 20;
const LB24_SYNCS: usize = 2;

pub(super) async fn lb24(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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
    // Where all Services share one backend pool (Azure), the join is one write for all.
    let (expected, per) = if env.cloud().load_balancers_share_backends() {
        (1, "for the shared backend pool")
    } else {
        (LB24_SERVICES, "per Service")
    };
    ensure!(
        updates.len() == expected && per_lb_max == 1,
        "expected one backend write {per} ({expected}), observed {} load balancers written, at most {per_lb_max} writes each",
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
