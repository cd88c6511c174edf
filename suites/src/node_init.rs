//! NodeInit: the cloud-node controller initializes nodes registered by
//! `kubelet --cloud-provider=external` (kubernetes/cloud-provider
//! controllers/node/node_controller.go; ccm-behaviour.md §1.2, cases NI-*).
//!
//! NI-06 (empty cloud providerID), NI-08 (AdditionalLabels), NI-13 (nil metadata) and
//! NI-16 (a v1-only `Instances` provider) need answers no real cloud API makes a provider
//! give; upstream tests them with its fake cloud (kubernetes/cloud-provider `fake/fake.go`,
//! `controllers/node/node_controller_test.go`). Here the reference CCM's hidden
//! `--testing-provider-quirk` alters what its real provider answered (the mock cloud still
//! sees every lookup), so they run on every provider; any other CCM skips them. The one
//! exception is NI-08 on vSphere, whose CCM takes the labels to add as a flag
//! (`--node-labels`), so every CCM runs it there.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::env::{NodeIp, NodeOptions};
use ccm_harness::node::{addresses, describe_taints, has_uninitialized_taint, label, provider_id};
use ccm_harness::{
    Case, CaseError, Environment, FaultSpec, Instance, InstanceSpec, Probe, Tag, ensure,
    eventually, holds_for,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::common::{
    INIT_TIMEOUT, address_set, ccm_node_writes, initialized_node, show_addresses,
    start_ccm_with_quirks, synced_events,
};

const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "NodeInit",
            title: $title,
            tags: $tags,
            ccm_args: &[],
            start_ccm: true,
            needs: &[],
            run: |env| Box::pin($body(env)),
        }
    };
}

/// A case whose body starts the CCM itself, with quirks ([`start_ccm_with_quirks`]).
macro_rules! quirk_case {
    ($id:literal, $title:literal, $body:ident) => {
        Case {
            start_ccm: false,
            needs: &[],
            ..case!($id, $title, &[Tag::Mock], $body)
        }
    };
}

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "NI-01",
            "removes the uninitialized taint, sets the providerID and reports Synced",
            &[Conformance],
            ni01
        ),
        case!(
            "NI-02",
            "sets zone, region and instance-type labels, GA and beta alike",
            &[Conformance],
            ni02
        ),
        case!(
            "NI-03",
            "leaves the zone labels off when the cloud reports no zone",
            &[Mock],
            ni03
        ),
        case!(
            "NI-04",
            "keeps the taint while instance lookups fail and removes it after recovery",
            &[Mock],
            ni04
        ),
        case!(
            "NI-05",
            "keeps the taint and the node while the instance is unknown",
            &[Mock],
            ni05
        ),
        quirk_case!(
            "NI-06",
            "keeps the taint when the cloud sets no providerID unless the kubelet did",
            ni06
        ),
        case!(
            "NI-07",
            "never overwrites a providerID the kubelet set",
            &[Conformance],
            ni07
        ),
        quirk_case!(
            "NI-08",
            "adds additional labels outside the Kubernetes namespaces without overwriting",
            ni08
        ),
        case!(
            "NI-09",
            "puts the provided node IP first and drops the other internal IPs",
            &[Conformance],
            ni09
        ),
        case!(
            "NI-10",
            "keeps the taint while the provided node IP is unknown to the cloud",
            &[Conformance],
            ni10
        ),
        case!(
            "NI-11",
            "keeps the taint when the provided node IP annotation is invalid",
            &[Mock],
            ni11
        ),
        Case {
            // Starts the CCM itself, deployed for dual stack.
            start_ccm: false,
            needs: &[],
            ..case!(
                "NI-12",
                "puts both dual-stack provided node IPs first in annotation order",
                &[Mock],
                ni12
            )
        },
        quirk_case!(
            "NI-13",
            "keeps the taint without a hot loop when the cloud returns nil metadata",
            ni13
        ),
        case!(
            "NI-14",
            "makes no writes to initialized nodes after a CCM restart",
            &[Conformance],
            ni14
        ),
        case!(
            "NI-15",
            "reconciles GA topology labels from the beta ones on initialized nodes",
            &[Mock],
            ni15
        ),
        quirk_case!(
            "NI-16",
            "initializes nodes by name through a v1 Instances provider",
            ni16
        ),
        case!(
            "NI-17",
            "does not re-taint a node when its kubelet restarts",
            &[Conformance],
            ni17
        ),
        case!(
            "NI-18",
            "initializes 50 nodes registered at once",
            &[Conformance, Slow],
            ni18
        ),
    ]
}

async fn ni01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let started = Instant::now();
    let (instance, node) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let removal = started.elapsed();
    ensure!(
        provider_id(&node) == Some(instance.provider_id.as_str()),
        "expected providerID {}, observed {:?}",
        instance.provider_id,
        provider_id(&node)
    );
    eventually(
        "a Synced event for node-a",
        Duration::from_secs(10),
        || async {
            let n = synced_events(env, "node-a").await?;
            Ok(if n >= 1 {
                Probe::Done(())
            } else {
                Probe::Pending("no Synced event".into())
            })
        },
    )
    .await?;
    let events = env.node_events("node-a").await?;
    let synced = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Synced"))
        .cloned()
        .unwrap_or_default();
    ensure!(
        synced.type_.as_deref() == Some("Normal"),
        "expected the Synced event to be Normal, observed {:?}",
        synced.type_
    );
    Ok(vec![(
        "taint-removal-seconds".into(),
        format!("{:.3}", removal.as_secs_f64()),
    )])
}

async fn ni02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let spec = InstanceSpec {
        zone: Some("az-2".into()),
        instance_type: Some("m1.medium".into()),
        ..Default::default()
    };
    let (instance, node) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec),
            ..Default::default()
        },
    )
    .await?;
    let want = [
        ("topology.kubernetes.io/zone", instance.zone.as_str()),
        (
            "failure-domain.beta.kubernetes.io/zone",
            instance.zone.as_str(),
        ),
        ("topology.kubernetes.io/region", instance.region.as_str()),
        (
            "failure-domain.beta.kubernetes.io/region",
            instance.region.as_str(),
        ),
        (
            "node.kubernetes.io/instance-type",
            instance.instance_type.as_str(),
        ),
        (
            "beta.kubernetes.io/instance-type",
            instance.instance_type.as_str(),
        ),
    ];
    for (key, value) in want {
        ensure!(
            label(&node, key) == Some(value),
            "expected label {key}={value}, observed {:?}",
            label(&node, key)
        );
    }
    Ok(vec![])
}

async fn ni03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::NoZone)?;
    let spec = InstanceSpec {
        zone: Some(String::new()),
        ..Default::default()
    };
    let (instance, node) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec),
            ..Default::default()
        },
    )
    .await?;
    for key in [
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    ] {
        ensure!(
            label(&node, key).is_none(),
            "expected no {key} label for an empty zone, observed {:?}",
            label(&node, key)
        );
    }
    ensure!(
        label(&node, "node.kubernetes.io/instance-type") == Some(instance.instance_type.as_str()),
        "expected the instance-type label still set, observed {:?}",
        label(&node, "node.kubernetes.io/instance-type")
    );
    Ok(vec![])
}

async fn ni04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().inject(FaultSpec::InstanceLookup {
        instance_id: None,
        status: 500,
        count: Some(3),
    });
    let started = Instant::now();
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let faulted = env.cloud().faulted_calls();
    ensure!(
        faulted == 3,
        "expected the CCM to retry through all 3 injected 5xx answers before initializing, observed {faulted}"
    );
    eventually("one Synced event", Duration::from_secs(10), || async {
        let n = synced_events(env, "node-a").await?;
        Ok(if n == 1 {
            Probe::Done(())
        } else {
            Probe::Pending(format!("{n} Synced events"))
        })
    })
    .await?;
    Ok(vec![(
        "taint-removal-seconds".into(),
        format!("{:.3}", started.elapsed().as_secs_f64()),
    )])
}

/// The uninitialized taint stays on every node in `names` for the whole hold window.
async fn taint_holds(env: &Environment, names: &[&str]) -> Result<(), CaseError> {
    for name in names {
        // A removed taint is never put back, so finding it on the other nodes at the end
        // of the first node's window shows it stayed on them the whole time.
        let period = if name == &names[0] {
            env.hold()
        } else {
            Duration::ZERO
        };
        env.node_holds(name, "the uninitialized taint", period, |n| {
            if has_uninitialized_taint(n) {
                Ok(())
            } else {
                Err(format!("taints: {}", describe_taints(n)))
            }
        })
        .await?;
    }
    Ok(())
}

async fn ni05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.add_node("node-a", NodeOptions::without_instance())
        .await?;
    taint_holds(env, &["node-a"]).await?;
    let lookups = env.cloud().instance_lookups();
    ensure!(
        lookups >= 1,
        "expected the CCM to look the instance up, observed no lookup"
    );
    ensure!(
        lookups <= 200,
        "expected bounded retries (exponential backoff), observed {lookups} lookups in {:?}",
        env.hold()
    );
    let synced = synced_events(env, "node-a").await?;
    ensure!(
        synced == 0,
        "expected no Synced event for an unknown instance, observed {synced}"
    );
    Ok(vec![("instance-lookups".into(), lookups.to_string())])
}

async fn ni07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // A valid providerID of another form (the regional one cloud-provider-openstack accepts)
    // for the same instance: the CCM would compute a different string, and must keep this.
    let instance = env.cloud().create_instance(InstanceSpec::named("node-a"))?;
    let preset = format!(
        "{}://{}/{}",
        env.provider.name(),
        instance.region,
        instance.id
    );
    let preset = env
        .cloud()
        .alternate_provider_id(&instance)
        .unwrap_or(preset);
    // The kubelet runs on that instance, so it reports the machine's system UUID as a
    // real kubelet does (the vSphere CCM finds VMs by it).
    env.add_node_on(
        "node-a",
        &instance,
        NodeOptions {
            kubelet_provider_id: Some(preset.clone()),
            ..Default::default()
        },
    )
    .await?;
    let node = env.wait_initialized("node-a", INIT_TIMEOUT).await?;
    ensure!(
        provider_id(&node) == Some(preset.as_str()),
        "expected providerID kept as {preset}, observed {:?}",
        provider_id(&node)
    );
    Ok(vec![])
}

/// Registers `name` with an instance whose providerID the kubelet sets itself
/// (`--provider-id`), the value the provider's CCM would compute.
async fn node_with_kubelet_provider_id(
    env: &mut Environment,
    name: &str,
    spec: InstanceSpec,
) -> Result<Instance, CaseError> {
    let instance = env.cloud().create_instance(InstanceSpec {
        name: name.into(),
        ..spec
    })?;
    env.add_node(
        name,
        NodeOptions {
            instance: None,
            kubelet_provider_id: Some(instance.provider_id.clone()),
            ..Default::default()
        },
    )
    .await?;
    Ok(instance)
}

async fn ni06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    start_ccm_with_quirks(env, "an empty providerID", &["empty-provider-id"]).await?;
    env.add_node("node-a", NodeOptions::default()).await?;
    let b = node_with_kubelet_provider_id(env, "node-b", InstanceSpec::default()).await?;
    // With the kubelet's providerID the node is initialized and keeps it
    // (node_controller.go getInstanceMetadata: metadata.ProviderID = node's).
    let node = env.wait_initialized("node-b", INIT_TIMEOUT).await?;
    ensure!(
        provider_id(&node) == Some(b.provider_id.as_str()),
        "expected node-b to keep the kubelet's providerID {}, observed {:?}",
        b.provider_id,
        provider_id(&node)
    );
    // Without one anywhere the taint stays (k/k#123713): an untainted node without a
    // providerID would never get one.
    let lookups_before = env.cloud().instance_lookups();
    taint_holds(env, &["node-a"]).await?;
    let node = env.node("node-a").await?;
    ensure!(
        provider_id(&node).unwrap_or_default().is_empty(),
        "expected node-a to have no providerID, observed {:?}",
        provider_id(&node)
    );
    let synced = synced_events(env, "node-a").await?;
    ensure!(
        synced == 0,
        "expected no Synced event for node-a, observed {synced}"
    );
    Ok(vec![(
        "instance-lookups-while-held".into(),
        (env.cloud().instance_lookups() - lookups_before).to_string(),
    )])
}

async fn ni08(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const EXISTING: &str = "example.com/existing";
    // Register first, give the node a label of its own, then let the CCM see it.
    env.add_node("node-a", NodeOptions::default()).await?;
    let patch = json!({"metadata": {"labels": {EXISTING: "kubelet"}}});
    env.nodes()
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CaseError::infra("labelling node-a", e))?;
    // Upstream drops every key matching `(kubernetes|k8s).io/` (getNodeModifiersFromCloudProvider).
    let dropped = [
        "x.k8s.io/a",
        "kubernetes.io/a",
        "node-role.kubernetes.io/control-plane",
    ];
    let mut labels: Vec<String> = dropped.iter().map(|k| format!("{k}=cloud")).collect();
    labels.push(format!("{EXISTING}=cloud"));
    labels.push("example.com/a=cloud".into());
    if let Some(flag) = env.cloud().additional_labels_flag(&labels) {
        env.start_ccm_with(&[&flag]).await?;
    } else {
        let quirk = format!("additional-labels={}", labels.join(";"));
        start_ccm_with_quirks(env, "AdditionalLabels", &[&quirk]).await?;
    }
    let node = env.wait_initialized("node-a", INIT_TIMEOUT).await?;
    ensure!(
        label(&node, "example.com/a") == Some("cloud"),
        "expected additional label example.com/a=cloud, observed {:?}",
        label(&node, "example.com/a")
    );
    ensure!(
        label(&node, EXISTING) == Some("kubelet"),
        "expected {EXISTING}=kubelet kept (never overwritten), observed {:?}",
        label(&node, EXISTING)
    );
    for key in dropped {
        ensure!(
            label(&node, key).is_none(),
            "expected {key} dropped (Kubernetes namespace), observed {:?}",
            label(&node, key)
        );
    }
    Ok(vec![])
}

/// Syncs a per-node exponential backoff of 5 ms doubling (client-go's default controller
/// rate limiter, which upstream's cloud-node controller uses) allows within `window`: the
/// n-th retry comes 5 ms * (2^n - 1) after the first failure.
fn backoff_budget(window: Duration) -> u32 {
    let steps = window.as_secs_f64() / 0.005 + 1.0;
    steps.log2().floor() as u32
}

async fn ni13(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const WINDOW: Duration = Duration::from_secs(20);
    start_ccm_with_quirks(env, "nil metadata with a nil error", &["nil-metadata"]).await?;
    let base = env.cloud().instance_lookups();
    env.add_node("node-a", NodeOptions::default()).await?;
    // The first sync asks the cloud once; wait for it and for a quiet second after it, so
    // `per_sync` (lookups so far) bounds what one sync costs on this provider.
    let mut last = (base, Instant::now());
    let per_sync = eventually(
        "the CCM to look node-a up and then go quiet",
        Duration::from_secs(15),
        || {
            let now = env.cloud().instance_lookups();
            if now != last.0 {
                last = (now, Instant::now());
            }
            let quiet = last.1.elapsed() >= Duration::from_secs(1);
            async move {
                Ok(if now > base && quiet {
                    Probe::Done(now - base)
                } else {
                    Probe::Pending(format!("{} lookups, still changing", now - base))
                })
            }
        },
    )
    .await?;
    // Upstream returns success on nil metadata: no retry until the next node event. A CCM
    // may retry, but no faster than the controller's default per-node backoff; so in the
    // window allow one sync per node write seen, the backoff's retries, and one in flight.
    let mark = env.audit_mark();
    let start = env.cloud().instance_lookups();
    let started = Instant::now();
    let node_writes = |env: &Environment| {
        env.api_audit()
            .iter()
            .filter(|e| {
                e.seq > mark
                    && e.resource == "nodes"
                    && e.name.as_deref() == Some("node-a")
                    && matches!(e.verb.as_str(), "create" | "update" | "patch")
            })
            .count()
    };
    let bound = |env: &Environment, elapsed: Duration| {
        (node_writes(env) + backoff_budget(elapsed) as usize + 1) * per_sync
    };
    let env_ref: &Environment = env;
    holds_for(
        "the taint kept and cloud lookups within the backoff bound",
        WINDOW,
        || async move {
            let node = env_ref.node("node-a").await?;
            let lookups = env_ref.cloud().instance_lookups() - start;
            let allowed = bound(env_ref, started.elapsed());
            Ok(if !has_uninitialized_taint(&node) {
                Probe::Pending(format!("taint removed: {}", describe_taints(&node)))
            } else if lookups > allowed {
                Probe::Pending(format!(
                    "{lookups} lookups in {:?}, allowed {allowed} ({per_sync} per sync)\n{}",
                    started.elapsed(),
                    env_ref.cloud().journal_text(30)
                ))
            } else {
                Probe::Done(())
            })
        },
    )
    .await?;
    let lookups = env.cloud().instance_lookups() - start;
    let allowed = bound(env, WINDOW);
    let writes = ccm_node_writes(env, "node-a");
    ensure!(
        writes == 0,
        "expected no CCM writes to node-a on nil metadata, observed {writes}: {:?}",
        last_writes(env)
    );
    let synced = synced_events(env, "node-a").await?;
    ensure!(
        synced == 0,
        "expected no Synced event for node-a, observed {synced}"
    );
    Ok(vec![
        ("instance-lookups-in-window".into(), lookups.to_string()),
        ("instance-lookups-allowed".into(), allowed.to_string()),
        ("lookups-per-sync".into(), per_sync.to_string()),
        ("window-seconds".into(), WINDOW.as_secs().to_string()),
    ])
}

async fn ni16(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    start_ccm_with_quirks(env, "v1 Instances answers", &["v1-instances"]).await?;
    let spec = InstanceSpec {
        zone: Some("az-2".into()),
        instance_type: Some("m1.medium".into()),
        ..Default::default()
    };
    // node-a: no providerID anywhere and InstanceID NotImplemented -> found by name only.
    let (a, node_a) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec.clone()),
            ..Default::default()
        },
    )
    .await?;
    ensure!(
        provider_id(&node_a).unwrap_or_default().is_empty(),
        "expected node-a initialized without a providerID (v1 InstanceID not implemented), \
         observed {:?}",
        provider_id(&node_a)
    );
    // node-b: the kubelet's providerID, with which every by-providerID call fails.
    let b = node_with_kubelet_provider_id(env, "node-b", spec).await?;
    let node_b = env.wait_initialized("node-b", INIT_TIMEOUT).await?;
    ensure!(
        provider_id(&node_b) == Some(b.provider_id.as_str()),
        "expected node-b to keep the kubelet's providerID {}, observed {:?}",
        b.provider_id,
        provider_id(&node_b)
    );
    // Type, zone and region (and addresses) can only have come from the by-name calls.
    for (name, instance) in [("node-a", &a), ("node-b", &b)] {
        let want: Vec<(String, String)> = instance
            .cloud_addresses()
            .into_iter()
            .chain([("Hostname".to_string(), name.to_string())])
            .collect();
        let node = env
            .node_eventually(
                name,
                "the cloud's addresses",
                Duration::from_secs(10),
                |n| {
                    if address_set(&addresses(n)) == address_set(&want) {
                        Ok(n.clone())
                    } else {
                        Err(show_addresses(n))
                    }
                },
            )
            .await?;
        for (key, value) in [
            ("node.kubernetes.io/instance-type", &instance.instance_type),
            ("beta.kubernetes.io/instance-type", &instance.instance_type),
            ("topology.kubernetes.io/zone", &instance.zone),
            ("failure-domain.beta.kubernetes.io/zone", &instance.zone),
            ("topology.kubernetes.io/region", &instance.region),
            ("failure-domain.beta.kubernetes.io/region", &instance.region),
        ] {
            ensure!(
                label(&node, key) == Some(value.as_str()),
                "expected {name} label {key}={value}, observed {:?}",
                label(&node, key)
            );
        }
    }
    Ok(vec![(
        "instance-lookups".into(),
        env.cloud().instance_lookups().to_string(),
    )])
}

async fn ni09(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Two internal IPs the cloud accepts (on AWS: primary and secondary private IP of the
    // primary ENI); the provided node IP is the first.
    let spare = env.cloud().spare_internal_ips(2)?;
    let (a, b) = (spare[0].as_str(), spare[1].as_str());
    let spec = InstanceSpec {
        internal_ips: Some(vec![a.into(), b.into()]),
        ..Default::default()
    };
    let (instance, _) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec),
            node_ip: Some(NodeIp::Literal(a.into())),
            ..Default::default()
        },
    )
    .await?;
    let e = instance
        .external_ips
        .first()
        .cloned()
        .ok_or_else(|| CaseError::failed("the instance got no external IP"))?;
    let e = e.as_str();
    // The addresses arrive with the status patch right after the taint goes.
    let node = env
        .node_eventually(
            "node-a",
            &format!("ExternalIP {e}"),
            Duration::from_secs(10),
            |n| {
                if addresses(n)
                    .iter()
                    .any(|(t, x)| t == "ExternalIP" && x == e)
                {
                    Ok(n.clone())
                } else {
                    Err(show_addresses(n))
                }
            },
        )
        .await?;
    let got = addresses(&node);
    ensure!(
        got.first() == Some(&("InternalIP".to_string(), a.to_string())),
        "expected InternalIP {a} first, observed {}",
        show_addresses(&node)
    );
    ensure!(
        !got.iter().any(|(_, x)| x == b),
        "expected InternalIP {b} dropped, observed {}",
        show_addresses(&node)
    );
    ensure!(
        got.contains(&("ExternalIP".to_string(), e.to_string())),
        "expected ExternalIP {e} kept, observed {}",
        show_addresses(&node)
    );
    ensure!(
        got.contains(&("Hostname".to_string(), "node-a".to_string())),
        "expected Hostname node-a kept, observed {}",
        show_addresses(&node)
    );
    // Upstream (cloud-provider node/helpers/address.go GetNodeAddressesFromNodeIP) keeps
    // the provided IP and every address of another type; only other InternalIPs go.
    let mut want: Vec<(String, String)> = instance
        .cloud_addresses()
        .into_iter()
        .filter(|(t, x)| {
            x == a
                || !instance
                    .cloud_addresses()
                    .iter()
                    .any(|(u, y)| u == t && y == a)
        })
        .collect();
    want.push(("Hostname".to_string(), "node-a".to_string()));
    want.dedup();
    ensure!(
        address_set(&got) == address_set(&want),
        "expected exactly {want:?}, observed {}",
        show_addresses(&node)
    );
    Ok(vec![])
}

async fn ni10(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.add_node(
        "node-a",
        NodeOptions {
            node_ip: Some(NodeIp::UnknownToCloud),
            ..Default::default()
        },
    )
    .await?;
    taint_holds(env, &["node-a"]).await?;
    Ok(vec![])
}

async fn ni11(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let bad = [
        ("node-a", "not-an-ip"),
        ("node-b", "127.10.9.1,127.10.9.2"),
        ("node-c", "0.0.0.0,fd00::1"),
    ];
    for (name, value) in bad {
        let annotations = BTreeMap::from([(PROVIDED_NODE_IP.to_string(), value.to_string())]);
        env.add_node(
            name,
            NodeOptions {
                annotations,
                ..Default::default()
            },
        )
        .await?;
    }
    taint_holds(env, &["node-a", "node-b", "node-c"]).await?;
    Ok(vec![])
}

async fn ni12(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::DualStackAddresses)?;
    // As a dual-stack cluster deploys its CCM (vSphere: `ipFamily: [ipv4, ipv6]`).
    env.deploy_dual_stack()?;
    env.start_ccm().await?;
    let spare = env.cloud().spare_internal_ips(1)?;
    let (v4, v6) = (spare[0].as_str(), "fd00::9:1");
    let spec = InstanceSpec {
        internal_ips: Some(vec![v4.into(), v6.into()]),
        ..Default::default()
    };
    let annotation = format!("{v6},{v4}");
    let (_, node) = initialized_node(
        env,
        "node-a",
        NodeOptions {
            instance: Some(spec),
            node_ip: Some(NodeIp::Literal(annotation)),
            ..Default::default()
        },
    )
    .await?;
    // The kubelet registered the pair already; the CCM's status patch (which adds the
    // ExternalIP) follows the taint removal, so wait for it before judging the order.
    let _ = node;
    env.node_eventually(
        "node-a",
        &format!("{v6} then {v4} first"),
        Duration::from_secs(10),
        |n| {
            let got = addresses(n);
            let first: Vec<&str> = got.iter().take(2).map(|(_, a)| a.as_str()).collect();
            let from_ccm = got.iter().any(|(t, _)| t == "ExternalIP");
            if first == [v6, v4] && from_ccm {
                Ok(())
            } else {
                Err(show_addresses(n))
            }
        },
    )
    .await?;
    Ok(vec![])
}

async fn ni14(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    initialized_node(env, "node-b", NodeOptions::default()).await?;
    for name in ["node-a", "node-b"] {
        let env: &Environment = env;
        eventually("a Synced event", Duration::from_secs(10), || async move {
            let n = synced_events(env, name).await?;
            Ok(if n >= 1 {
                Probe::Done(())
            } else {
                Probe::Pending(format!("no Synced event for {name}"))
            })
        })
        .await?;
    }
    // Let the first CCM's follow-up writes (status patch after the update) land before counting.
    let settle = Duration::from_millis(500);
    let _ = holds_for("settling", settle, || async { Ok(Probe::Done(())) }).await;
    let before = ccm_node_writes(env, "node-a") + ccm_node_writes(env, "node-b");
    let lookups_before = env.cloud().instance_lookups();
    env.start_ccm().await?;
    // The restarted CCM must look at the nodes yet write nothing: upstream's periodic
    // address sync (UpdateNodeStatus) runs once right at start, so the cloud sees lookups.
    eventually(
        "the restarted CCM to sync addresses with the cloud",
        Duration::from_secs(15),
        || async {
            Ok(if env.cloud().instance_lookups() > lookups_before {
                Probe::Done(())
            } else {
                Probe::Pending("no activity".into())
            })
        },
    )
    .await?;
    holds_for("no CCM writes to initialized nodes", env.hold(), || async {
        let now = ccm_node_writes(env, "node-a") + ccm_node_writes(env, "node-b");
        Ok(if now == before {
            Probe::Done(())
        } else {
            Probe::Pending(format!(
                "{} new writes: {:?}",
                now - before,
                last_writes(env)
            ))
        })
    })
    .await?;
    for name in ["node-a", "node-b"] {
        let n = synced_events(env, name).await?;
        ensure!(
            n == 1,
            "expected exactly one Synced event for {name} across the restart, observed {n}"
        );
    }
    Ok(vec![])
}

fn last_writes(env: &Environment) -> Vec<String> {
    let writes = env.ccm_writes();
    writes[writes.len().saturating_sub(5)..]
        .iter()
        .map(|e| {
            format!(
                "{} {}/{}{}",
                e.verb,
                e.resource,
                e.name.clone().unwrap_or_default(),
                e.subresource
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

async fn ni15(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let nodes = env.nodes();
    let set = |labels: serde_json::Value| {
        let nodes = nodes.clone();
        async move {
            let patch = json!({"metadata": {"labels": labels}});
            nodes
                .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| CaseError::infra("patching labels", e))
        }
    };
    let ga_zone = "topology.kubernetes.io/zone";
    let beta_zone = "failure-domain.beta.kubernetes.io/zone";
    let zone_is = |want: &'static str| {
        move |n: &Node| {
            if label(n, ga_zone) == Some(want) {
                Ok(())
            } else {
                Err(format!("{ga_zone}={:?}", label(n, ga_zone)))
            }
        }
    };
    // beta z1, GA missing -> GA = z1
    set(json!({beta_zone: "z1", ga_zone: null})).await?;
    env.node_eventually(
        "node-a",
        "GA zone copied from beta",
        Duration::from_secs(10),
        zone_is("z1"),
    )
    .await?;
    // GA z2 -> back to the beta value
    set(json!({ga_zone: "z2"})).await?;
    env.node_eventually(
        "node-a",
        "GA zone reset to beta",
        Duration::from_secs(10),
        zone_is("z1"),
    )
    .await?;
    // beta missing -> GA untouched
    set(json!({beta_zone: null, ga_zone: "z3"})).await?;
    env.node_holds(
        "node-a",
        "GA zone untouched without a beta label",
        Duration::from_secs(2),
        zone_is("z3"),
    )
    .await?;
    Ok(vec![])
}

async fn ni17(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let (_, node) = initialized_node(env, "node-a", NodeOptions::default()).await?;
    let before = provider_id(&node).map(str::to_string);
    env.restart_kubelet("node-a").await?;
    env.node_holds(
        "node-a",
        "no uninitialized taint after the kubelet restart",
        env.hold(),
        |n| {
            if has_uninitialized_taint(n) {
                Err(format!("taints: {}", describe_taints(n)))
            } else if provider_id(n).map(str::to_string) != before {
                Err(format!("providerID changed to {:?}", provider_id(n)))
            } else {
                Ok(())
            }
        },
    )
    .await?;
    Ok(vec![])
}

async fn ni18(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const N: usize = 50;
    let mut registered = BTreeMap::new();
    for i in 0..N {
        let name = format!("node-{i:02}");
        env.add_node(&name, NodeOptions::default()).await?;
        registered.insert(name, Instant::now());
    }
    let removed: std::sync::Mutex<BTreeMap<String, Duration>> = Default::default();
    let nodes = env.nodes();
    eventually(
        &format!("all {N} nodes initialized"),
        Duration::from_secs(60),
        || {
            let nodes = nodes.clone();
            let (registered, removed) = (&registered, &removed);
            async move {
                let list = nodes
                    .list(&Default::default())
                    .await
                    .map_err(|e| CaseError::infra("listing nodes", e))?;
                let mut removed = removed.lock().unwrap_or_else(|p| p.into_inner());
                for n in &list.items {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    if !has_uninitialized_taint(n)
                        && !removed.contains_key(&name)
                        && let Some(t) = registered.get(&name)
                    {
                        removed.insert(name, t.elapsed());
                    }
                }
                Ok(if removed.len() == N {
                    Probe::Done(())
                } else {
                    Probe::Pending(format!("{}/{N} initialized", removed.len()))
                })
            }
        },
    )
    .await?;
    let removed = removed.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut d: Vec<f64> = removed.values().map(|d| d.as_secs_f64()).collect();
    d.sort_by(f64::total_cmp);
    let pct = |p: f64| d[((d.len() as f64 * p).ceil() as usize).clamp(1, d.len()) - 1];
    Ok(vec![
        (
            "taint-removal-p50-seconds".into(),
            format!("{:.3}", pct(0.50)),
        ),
        (
            "taint-removal-p99-seconds".into(),
            format!("{:.3}", pct(0.99)),
        ),
    ])
}
