//! NodeAddresses: the periodic address sync of the cloud-node controller
//! (`UpdateNodeStatus` / `updateNodeAddress` in kubernetes/cloud-provider
//! controllers/node/node_controller.go; ccm-behaviour.md §1.2, cases NA-*).
//!
//! Every case runs the CCM with `--node-status-update-frequency=1s` (upstream default 5m;
//! ccm-behaviour.md suggests 5s for mocks; 1s keeps "10 periods" at 10 s).
//!
//! NA-07 reboots the node's machine through the harness, which holds the cloud in its
//! rebooting state (Nova `REBOOT`; vSphere Tools down with an empty `guest.net`, the case
//! cloud-provider-vsphere#479 is about; EC2 shows nothing) while the kubelet is down, so
//! the CCM's address sync and lifecycle monitor run against the rebooting machine.

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::invariants::Recorder;
use ccm_harness::node::{addresses, provider_id};
use ccm_harness::{
    Case, CaseError, Environment, FaultSpec, InstancePatch, InstanceSpec, Probe, Tag, ensure,
    eventually,
};
use k8s_openapi::api::core::v1::Node;

use crate::common::{
    address_set, ccm_node_writes, ccm_status_writes, initialized_node, show_addresses,
};

const PERIOD: Duration = Duration::from_secs(1);
const ARGS: &[&str] = &["--node-status-update-frequency=1s"];

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "NodeAddresses",
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
            "NA-01",
            "adds an address the cloud reports and never patches unchanged addresses",
            &[Mock],
            na01
        ),
        case!(
            "NA-02",
            "keeps the addresses when the cloud reports none",
            &[Mock],
            na02
        ),
        case!(
            "NA-03",
            "keeps the kubelet's Hostname address the cloud does not report",
            &[Mock],
            na03
        ),
        case!(
            "NA-04",
            "leaves tainted nodes out of the periodic sync",
            &[Mock],
            na04
        ),
        case!(
            "NA-05",
            "does not flap addresses of a node with a provided node IP",
            &[Mock],
            na05
        ),
        case!(
            "NA-06",
            "updates other nodes when one node's lookup fails",
            &[Mock],
            na06
        ),
        Case {
            id: "NA-07",
            suite: "NodeAddresses",
            title: "keeps the addresses and providerID of a node across a reboot of its VM",
            tags: &[Conformance],
            // The lifecycle monitor too at 1s (upstream 5s), so it checks the NotReady
            // node against the rebooting machine several times in the window.
            ccm_args: &[
                "--node-status-update-frequency=1s",
                "--node-monitor-period=1s",
            ],
            start_ccm: true,
            needs: &[],
            run: |env| Box::pin(na07(env)),
        },
    ]
}

async fn wait_address(
    env: &Environment,
    name: &str,
    pair: (&str, &str),
    within: Duration,
) -> Result<(), CaseError> {
    env.node_eventually(name, &format!("{} {}", pair.0, pair.1), within, |n| {
        if addresses(n).iter().any(|(t, a)| t == pair.0 && a == pair.1) {
            Ok(())
        } else {
            Err(show_addresses(n))
        }
    })
    .await
}

/// The node's addresses stay exactly `expected` for `period`.
async fn addresses_hold(
    env: &Environment,
    name: &str,
    expected: &[(String, String)],
    period: Duration,
) -> Result<(), CaseError> {
    env.node_holds(name, "unchanged addresses", period, |n| {
        if addresses(n) == expected {
            Ok(())
        } else {
            Err(show_addresses(n))
        }
    })
    .await
}

/// Waits until the CCM made `more` instance lookups beyond `since` (i.e. sync periods ran).
async fn wait_lookups(env: &Environment, since: usize, more: usize) -> Result<(), CaseError> {
    eventually(
        &format!("{more} more instance lookups (address sync periods)"),
        PERIOD * (more as u32 + 10),
        || async {
            let n = env.cloud().instance_lookups();
            Ok(if n >= since + more {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{} lookups", n - since))
            })
        },
    )
    .await
}

async fn na01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::SeparateExternalAddresses)?;
    // Starts without an ExternalIP, so the node never holds two addresses of one type:
    // upstream's change detection (cloud-provider node/helpers/address.go
    // nodeAddressesChangeDetected) maps addresses by type and so re-patches such nodes every
    // period; that is upstream behaviour, not what this case is about.
    let spec = InstanceSpec {
        external_ips: Some(vec![]),
        ..Default::default()
    };
    let (instance, _) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec),
            ..Default::default()
        },
    )
    .await?;
    let external = env.cloud().spare_external_ips(1).remove(0);
    env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            external_ips: Some(vec![external.clone()]),
            ..Default::default()
        },
    )?;
    wait_address(
        env,
        "node-a",
        ("ExternalIP", external.as_str()),
        PERIOD * 2 + Duration::from_secs(3),
    )
    .await?;
    let node = env.node("node-a").await?;
    let before = ccm_status_writes(env, "node-a");
    let lookups = env.cloud().instance_lookups();
    addresses_hold(env, "node-a", &addresses(&node), PERIOD * 10).await?;
    let after = ccm_status_writes(env, "node-a");
    ensure!(
        after == before,
        "expected no status writes over 10 unchanged periods, observed {}",
        after - before
    );
    let synced = env.cloud().instance_lookups() - lookups;
    ensure!(
        synced >= 5,
        "expected the sync to keep looking the instance up over 10 periods, observed {synced} lookups"
    );
    Ok(vec![])
}

async fn na02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::NoAddresses)?;
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let node = wait_settled(env, "node-a", &instance.cloud_addresses()).await?;
    env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            internal_ips: Some(vec![]),
            external_ips: Some(vec![]),
            ..Default::default()
        },
    )?;
    let lookups = env.cloud().instance_lookups();
    let expected = addresses(&node);
    addresses_hold(env, "node-a", &expected, PERIOD * 3).await?;
    wait_lookups(env, lookups, 2).await?;
    addresses_hold(env, "node-a", &expected, PERIOD).await?;
    Ok(vec![])
}

/// Waits until every cloud address is on the node (initialization patches them right after
/// the taint goes) and returns the node.
async fn wait_settled(
    env: &Environment,
    name: &str,
    cloud: &[(String, String)],
) -> Result<Node, CaseError> {
    env.node_eventually(
        name,
        "the cloud's addresses",
        Duration::from_secs(10),
        |n| {
            let have = addresses(n);
            if cloud.iter().all(|p| have.contains(p)) {
                Ok(n.clone())
            } else {
                Err(show_addresses(n))
            }
        },
    )
    .await
}

async fn na03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let node = wait_settled(env, "node-a", &instance.cloud_addresses()).await?;
    let hostname = ("Hostname".to_string(), "node-a".to_string());
    ensure!(
        addresses(&node).contains(&hostname),
        "expected Hostname node-a after init, observed {}",
        show_addresses(&node)
    );
    let external = env.cloud().spare_external_ips(2).remove(1);
    let changed = env.cloud().update_instance(
        &instance.id,
        InstancePatch {
            external_ips: Some(vec![external.clone()]),
            ..Default::default()
        },
    )?;
    wait_address(
        env,
        "node-a",
        ("ExternalIP", external.as_str()),
        PERIOD * 2 + Duration::from_secs(3),
    )
    .await?;
    let node = env.node("node-a").await?;
    ensure!(
        addresses(&node).contains(&hostname),
        "expected Hostname node-a kept after a sync, observed {}",
        show_addresses(&node)
    );
    // Everything the cloud reports now (on AWS also InternalDNS/ExternalDNS), plus the
    // kubelet's Hostname (reported by the cloud too on AWS: counted once).
    let mut want = changed.cloud_addresses();
    if !want.contains(&hostname) {
        want.push(hostname);
    }
    ensure!(
        address_set(&addresses(&node)) == address_set(&want),
        "expected exactly the cloud's addresses plus Hostname, observed {}",
        show_addresses(&node)
    );
    Ok(vec![])
}

async fn na04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Tainted for good: its provided node IP is unknown to the cloud.
    env.add_node(
        "node-a",
        NodeOptions {
            node_ip: Some(NodeIp::UnknownToCloud),
            ..Default::default()
        },
    )
    .await?;
    let node = env.node("node-a").await?;
    let lookups = env.cloud().instance_lookups();
    wait_lookups(env, lookups, 2).await?;
    addresses_hold(env, "node-a", &addresses(&node), PERIOD * 3).await?;
    let writes = ccm_node_writes(env, "node-a");
    ensure!(
        writes == 0,
        "expected no CCM writes to a tainted node, observed {writes}"
    );
    Ok(vec![])
}

async fn na05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let options = NodeOptions {
        node_ip: Some(NodeIp::FirstInternal),
        status_report_interval: Some(PERIOD),
        ..Default::default()
    };
    let (instance, _) = initialized_node(env, "node-a", options).await?;
    // The node IP is the instance's only internal IP, so every cloud address stays.
    let node = wait_settled(env, "node-a", &instance.cloud_addresses()).await?;
    let before = ccm_status_writes(env, "node-a");
    addresses_hold(env, "node-a", &addresses(&node), PERIOD * 10).await?;
    let after = ccm_status_writes(env, "node-a");
    ensure!(
        after == before,
        "expected no address writes over 10 periods with a provided node IP, observed {}",
        after - before
    );
    Ok(vec![])
}

async fn na06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (a, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let (b, _) = initialized_node(env, "node-b", NodeOptions::default()).await?;
    let node_a = wait_settled(env, "node-a", &a.cloud_addresses()).await?;
    wait_settled(env, "node-b", &b.cloud_addresses()).await?;
    env.cloud().inject(FaultSpec::InstanceLookup {
        instance_id: Some(a.id.clone()),
        status: 500,
        count: None,
    });
    let mut spare = env.cloud().spare_external_ips(4);
    let (for_b, for_a) = (spare.remove(3), spare.remove(2));
    env.cloud().update_instance(
        &a.id,
        InstancePatch {
            external_ips: Some(vec![for_a]),
            ..Default::default()
        },
    )?;
    env.cloud().update_instance(
        &b.id,
        InstancePatch {
            external_ips: Some(vec![for_b.clone()]),
            ..Default::default()
        },
    )?;
    wait_address(
        env,
        "node-b",
        ("ExternalIP", for_b.as_str()),
        // The failing lookup may hold the sync up for its SDK's retries before node-b's
        // turn (aws-sdk-go-v2's standard retryer: 3 attempts with exponential backoff; the
        // AWS CCM then retries a failed DescribeInstances batch one instance at a time,
        // cloud-provider-aws pkg/providers/v1/describe_instance_batch.go).
        PERIOD * 2 + Duration::from_secs(10),
    )
    .await?;
    addresses_hold(env, "node-a", &addresses(&node_a), PERIOD * 2).await?;
    let faulted = env.cloud().faulted_calls();
    ensure!(
        faulted >= 1,
        "expected node-a's lookups to fail, observed {faulted} failed calls"
    );
    Ok(vec![])
}

/// The node's InternalIP and ExternalIP addresses, sorted.
fn ip_addresses(node: &Node) -> Vec<(String, String)> {
    address_set(
        &addresses(node)
            .into_iter()
            .filter(|(t, _)| t == "InternalIP" || t == "ExternalIP")
            .collect::<Vec<_>>(),
    )
}

fn ready(node: &Node) -> Result<(), String> {
    let condition = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    match condition.as_deref() {
        Some("True") => Ok(()),
        other => Err(format!("Ready={other:?}")),
    }
}

async fn na07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (instance, _) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let before = wait_settled(env, "node-a", &instance.cloud_addresses()).await?;
    let ips = ip_addresses(&before);
    ensure!(
        ips.iter().any(|(t, _)| t == "InternalIP") && ips.iter().any(|(t, _)| t == "ExternalIP"),
        "expected an InternalIP and an ExternalIP before the reboot, observed {}",
        show_addresses(&before)
    );
    // Watches every version of the node from here on: providerID, addresses (as a set),
    // labels unchanged, never tainted again, never deleted; and no CCM write but status.
    let recorder = Recorder::start(env, &[]).await?;
    let lookups = env.cloud().instance_lookups();
    env.begin_node_reboot("node-a").await?;
    // The address sync and the lifecycle monitor (the node is NotReady now) keep asking
    // the cloud about the rebooting machine.
    wait_lookups(env, lookups, 6).await?;
    recorder.observe(PERIOD * 2).await;
    let during = env.cloud().instance_lookups() - lookups;
    let held = env.cloud().rebooting(&instance.id);
    env.finish_node_reboot("node-a").await?;
    env.node_eventually(
        "node-a",
        "Ready after the reboot",
        Duration::from_secs(20),
        ready,
    )
    .await?;
    // A few syncs of the machine that is up again.
    let after_lookups = env.cloud().instance_lookups();
    wait_lookups(env, after_lookups, 2).await?;
    recorder.observe(PERIOD).await;
    let report = recorder.finish(env).await?;
    let mut metrics = report.metrics();
    metrics.push(("lookups_during_reboot".into(), during.to_string()));
    metrics.push(("cloud_showed_reboot".into(), held.to_string()));
    report
        .check("a VM reboot")
        .map_err(|e| env.with_ccm_log(e))?;
    let after = env.node("node-a").await?;
    ensure!(
        provider_id(&after) == provider_id(&before),
        "expected providerID {:?} after the reboot, observed {:?}",
        provider_id(&before),
        provider_id(&after)
    );
    ensure!(
        ip_addresses(&after) == ips,
        "expected InternalIP/ExternalIP {ips:?} after the reboot, observed {}",
        show_addresses(&after)
    );
    Ok(metrics)
}
