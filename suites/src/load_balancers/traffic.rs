//! Service spec changes judged through real connections to the ingress: ports and node
//! ports (LB-08), loadBalancerSourceRanges (LB-09), allocateLoadBalancerNodePorts (LB-10)
//! and externalTrafficPolicy Local (LB-11).

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::{CaseError, Environment, Probe, ensure, eventually, holds_for};
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use super::*;

fn first_node_port(s: &Service) -> Option<i32> {
    s.spec
        .as_ref()
        .and_then(|sp| sp.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.node_port)
}

pub(super) async fn lb08(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

pub(super) async fn lb09(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

pub(super) async fn lb10(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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

pub(super) async fn lb11(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
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
