//! Routes: the node-route controller (kubernetes/cloud-provider controllers/route/
//! route_controller.go; ccm-behaviour.md §1.6, cases RT-*). There is no kube-controller-manager
//! IPAM in the embedded cluster, so the harness assigns `spec.podCIDRs` as it would.
//!
//! The CCM runs with `--configure-cloud-routes=true --cluster-cidr=10.244.0.0/16
//! --route-reconciliation-period=1s` (upstream default 10s); RT-05 adds an IPv6 cluster
//! CIDR (dual-stack) and expects per provider what upstream does with an IPv6 pod CIDR:
//! - OpenStack (kubernetes/cloud-provider-openstack `pkg/openstack/routes.go` CreateRoute,
//!   `getAddrByNodeName`): the next hop is the node's InternalIP of the pod CIDR's family,
//!   so a dual-stack node gets two extraroutes, IPv4 via its IPv4 and IPv6 via its IPv6.
//! - AWS (kubernetes/cloud-provider-aws `pkg/providers/v1/aws_routes.go`): CreateRoute puts
//!   every pod CIDR in `DestinationCidrBlock` (IPv4 only in EC2; IPv6 needs
//!   `DestinationIpv6CidrBlock`) and ListRoutes reads only `DestinationCidrBlock`, so an
//!   IPv6 pod CIDR is never routed: the case is skipped there with that reason.
//!
//! The mock OpenStack's router has an IPv6 interface subnet (`fd00::/64`) and takes IPv6
//! extraroutes, so RT-05 runs there.

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Capability;
use ccm_harness::cloud::Feature;
use ccm_harness::env::NodeOptions;
use ccm_harness::{
    Case, CaseError, Environment, FaultSpec, InstanceSpec, Probe, Tag, ensure, eventually,
    holds_for,
};
use k8s_openapi::api::core::v1::Node;

use crate::common::initialized_node;

const CLUSTER_CIDR: &str = "10.244.0.0/16";
const ARGS: &[&str] = &[
    "--configure-cloud-routes=true",
    "--cluster-cidr=10.244.0.0/16",
    "--route-reconciliation-period=1s",
];
const REACT: Duration = Duration::from_secs(10);

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $args:expr, $start:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "Routes",
            title: $title,
            tags: $tags,
            ccm_args: $args,
            start_ccm: $start,
            needs: &[Capability::Routes],
            run: |env| {
                Box::pin(async move {
                    env.cloud().require(Feature::Routes)?;
                    $body(env).await
                })
            },
        }
    };
}

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "RT-01",
            "creates a route per pod CIDR and clears NetworkUnavailable",
            &[Mock],
            ARGS,
            true,
            rt01
        ),
        case!(
            "RT-02",
            "reports FailedToCreateRoute and NoRouteCreated, then retries",
            &[Mock],
            ARGS,
            true,
            rt02
        ),
        case!(
            "RT-03",
            "removes routes of deleted nodes and never touches routes outside the cluster CIDR",
            &[Mock],
            ARGS,
            true,
            rt03
        ),
        case!(
            "RT-04",
            "refuses to start with routes but no cluster CIDR, and makes no route calls when routes are off",
            &[Mock],
            &[],
            false,
            rt04
        ),
        case!(
            "RT-05",
            "routes both pod CIDRs of a dual-stack node, each via the node's address of its family",
            &[Mock],
            &[],
            false,
            rt05
        ),
    ]
}

/// RT-05's dual-stack cluster CIDRs and the node's pod CIDRs inside them.
const DUAL_STACK_ARGS: &[&str] = &[
    "--configure-cloud-routes=true",
    "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
    "--route-reconciliation-period=1s",
];
const POD_CIDR_V4: &str = "10.244.1.0/24";
const POD_CIDR_V6: &str = "fd00:10:244:1::/64";

fn network_unavailable(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "NetworkUnavailable"))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn routed_node(env: &mut Environment, name: &str, cidr: &str) -> Result<String, CaseError> {
    let (instance, _) = initialized_node(env, name, NodeOptions::default()).await?;
    env.set_pod_cidrs(name, &[cidr]).await?;
    Ok(instance.internal_ips.first().cloned().unwrap_or_default())
}

async fn wait_route(
    env: &Environment,
    cidr: &str,
    nexthop: &str,
    present: bool,
) -> Result<(), CaseError> {
    let what = format!(
        "route {cidr} via {nexthop} {}",
        if present { "present" } else { "gone" }
    );
    eventually(&what, REACT, || async {
        let routes = env.cloud().routes();
        let has = routes.iter().any(|(d, n)| d == cidr && n == nexthop);
        Ok(if has == present {
            Probe::Done(())
        } else {
            Probe::Pending(format!("routes: {routes:?}"))
        })
    })
    .await
}

async fn rt01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let ip = routed_node(env, "node-a", "10.244.1.0/24").await?;
    wait_route(env, "10.244.1.0/24", &ip, true).await?;
    env.node_eventually(
        "node-a",
        "NetworkUnavailable False/RouteCreated",
        REACT,
        |n| match network_unavailable(n) {
            Some((s, r)) if s == "False" && r == "RouteCreated" => Ok(()),
            other => Err(format!("NetworkUnavailable {other:?}")),
        },
    )
    .await?;
    // Steady state: no more route writes.
    let writes = env.cloud().route_writes();
    holds_for(
        "no route writes once routes match",
        Duration::from_secs(3),
        || async {
            let now = env.cloud().route_writes();
            Ok(if now == writes {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} more writes", now - writes))
            })
        },
    )
    .await?;
    Ok(vec![])
}

async fn rt02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Until cleared: cloud SDKs retry 5xx answers themselves (the AWS SDK up to 3 times),
    // so a fault with a small count could be absorbed before the CCM sees it.
    env.cloud().inject(FaultSpec::RouteWrite {
        status: 500,
        count: None,
    });
    let ip = routed_node(env, "node-a", "10.244.1.0/24").await?;
    let nodes_env: &Environment = env;
    eventually("a FailedToCreateRoute event", REACT, || async {
        let events = nodes_env.node_events("node-a").await?;
        Ok(
            if events
                .iter()
                .any(|e| e.reason.as_deref() == Some("FailedToCreateRoute"))
            {
                Probe::Done(())
            } else {
                Probe::Pending(format!(
                    "events {:?}",
                    events.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
                ))
            },
        )
    })
    .await?;
    let node = env.node("node-a").await?;
    let cond = network_unavailable(&node);
    ensure!(
        cond.as_ref().is_none_or(|(s, _)| s == "True"),
        "expected NetworkUnavailable True (or not yet written) while routes fail, observed {cond:?}"
    );
    // Once the cloud recovers, later periods retry and succeed.
    env.cloud().clear_faults();
    wait_route(env, "10.244.1.0/24", &ip, true).await?;
    env.node_eventually(
        "node-a",
        "NetworkUnavailable False after recovery",
        REACT,
        |n| match network_unavailable(n) {
            Some((s, _)) if s == "False" => Ok(()),
            other => Err(format!("NetworkUnavailable {other:?}")),
        },
    )
    .await?;
    Ok(vec![])
}

async fn rt03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let ip_a = routed_node(env, "node-a", "10.244.1.0/24").await?;
    let ip_b = routed_node(env, "node-b", "10.244.2.0/24").await?;
    wait_route(env, "10.244.1.0/24", &ip_a, true).await?;
    wait_route(env, "10.244.2.0/24", &ip_b, true).await?;
    // Someone else's route outside the cluster CIDR, and a stale one inside it.
    env.cloud().add_route("192.168.77.0/24", &ip_a)?;
    env.cloud().add_route("10.244.99.0/24", &ip_a)?;
    env.nodes()
        .delete("node-b", &Default::default())
        .await
        .map_err(|e| CaseError::infra("deleting node", e))?;
    wait_route(env, "10.244.2.0/24", &ip_b, false).await?;
    wait_route(env, "10.244.99.0/24", &ip_a, false).await?;
    let routes = env.cloud().routes();
    ensure!(
        routes.iter().any(|(d, _)| d == "192.168.77.0/24"),
        "expected the route outside {CLUSTER_CIDR} untouched, observed {routes:?}"
    );
    ensure!(
        routes
            .iter()
            .any(|(d, n)| d == "10.244.1.0/24" && n == &ip_a),
        "expected node-a's route kept, observed {routes:?}"
    );
    Ok(vec![])
}

/// Whether the CCM refuses to run with `flags`: it fails to start, or exits soon after.
/// Upstream serves `/healthz` before it starts its controllers and only then rejects a bad
/// `--cluster-cidr` (cloud-provider `app/core.go` `startRouteController`, fatal in
/// `app/controllermanager.go`), so a healthy start is not yet an acceptance.
async fn refuses(env: &mut Environment, flags: &[&str]) -> Result<bool, CaseError> {
    if env.start_ccm_with(flags).await.is_err() {
        return Ok(true);
    }
    let env: &mut Environment = env;
    let exited = eventually("the CCM to exit", Duration::from_secs(5), || {
        let alive = env.ccm_alive();
        async move {
            Ok(match alive {
                Err(_) => Probe::Done(()),
                Ok(()) => Probe::Pending("still running".into()),
            })
        }
    })
    .await
    .is_ok();
    env.stop_ccm().await;
    Ok(exited)
}

async fn rt04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Routes supported (router-id configured) and --configure-cloud-routes, but no cluster CIDR.
    ensure!(
        refuses(env, &["--configure-cloud-routes=true", "--cluster-cidr="]).await?,
        "expected the CCM to refuse to start without --cluster-cidr while routes are on"
    );
    for bad in [
        "10.244.0.0/16,10.245.0.0/16",
        "10.244.0.0/16,fd00::/48,10.246.0.0/16",
    ] {
        let arg = format!("--cluster-cidr={bad}");
        ensure!(
            refuses(env, &["--configure-cloud-routes=true", &arg]).await?,
            "expected the CCM to refuse --cluster-cidr={bad}"
        );
    }
    // Routes off: the CCM runs and never writes a route, even for a node with a pod CIDR.
    env.start_ccm_with(&[
        "--configure-cloud-routes=false",
        "--route-reconciliation-period=1s",
    ])
    .await?;
    routed_node(env, "node-a", "10.244.1.0/24").await?;
    let env: &Environment = env;
    holds_for(
        "no route calls with --configure-cloud-routes=false",
        Duration::from_secs(3),
        || async {
            let w = env.cloud().route_writes();
            Ok(if w == 0 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{w} route writes"))
            })
        },
    )
    .await?;
    Ok(vec![])
}

async fn rt05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // AWS: upstream cannot route an IPv6 pod CIDR (module docs).
    env.cloud().require(Feature::DualStackRoutes)?;
    env.cloud().require(Feature::DualStackAddresses)?;
    env.start_ccm_with(DUAL_STACK_ARGS).await?;
    let spare = env.cloud().spare_internal_ips(1)?;
    let (v4, v6) = (spare[0].clone(), "fd00::9:1".to_string());
    let options = NodeOptions {
        instance: Some(InstanceSpec {
            internal_ips: Some(vec![v4.clone(), v6.clone()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    initialized_node(env, "node-a", options).await?;
    // The IPv6 address must be on the Node for a provider to pick it as next hop.
    env.node_eventually("node-a", &format!("InternalIP {v6}"), REACT, |n| {
        let has = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP" && a.address == v6));
        if has {
            Ok(())
        } else {
            Err(format!(
                "addresses {:?}",
                n.status.as_ref().and_then(|s| s.addresses.clone())
            ))
        }
    })
    .await?;
    env.set_pod_cidrs("node-a", &[POD_CIDR_V4, POD_CIDR_V6])
        .await?;
    wait_route(env, POD_CIDR_V4, &v4, true).await?;
    wait_route(env, POD_CIDR_V6, &v6, true).await?;
    env.node_eventually(
        "node-a",
        "NetworkUnavailable False/RouteCreated once both CIDRs are routed",
        REACT,
        |n| match network_unavailable(n) {
            Some((s, r)) if s == "False" && r == "RouteCreated" => Ok(()),
            other => Err(format!("NetworkUnavailable {other:?}")),
        },
    )
    .await?;
    let routes = env.cloud().routes();
    let ours: Vec<_> = routes
        .iter()
        .filter(|(d, _)| d == POD_CIDR_V4 || d == POD_CIDR_V6)
        .collect();
    ensure!(
        ours.len() == 2,
        "expected exactly two routes for node-a's pod CIDRs, observed {routes:?}"
    );
    // Steady state: a dual-stack route set is not rewritten every period.
    let writes = env.cloud().route_writes();
    holds_for(
        "no route writes once both routes exist",
        Duration::from_secs(3),
        || async {
            let now = env.cloud().route_writes();
            Ok(if now == writes {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} more writes", now - writes))
            })
        },
    )
    .await?;
    Ok(vec![])
}
