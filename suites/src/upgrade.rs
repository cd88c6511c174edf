//! Upgrade: the moments a cluster changes CCM — from the in-tree provider to an external
//! CCM, one CCM version to the next and back, a kubelet switching to
//! `--cloud-provider=external`, a `--cluster-name` change — are where clusters lose load
//! balancers, get re-tainted nodes or lose them (ccm-behaviour.md §3, cases UP-*).
//!
//! Every case takes a baseline, then watches the whole transition with an
//! [`invariants::Recorder`]: every Node and Service version, every write the harness and
//! kubelets did not make, every cloud load-balancer create/delete, the CCM's Lease holder,
//! and a TCP probe on every ingress every 100 ms. The JUnit case carries
//! `longest_gap_seconds` and `unexpected_writes`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::cloud::Feature;
use ccm_harness::env::{LEADER_FLAGS, NodeOptions};
use ccm_harness::in_tree::{InTreeName, seed_load_balancer};
use ccm_harness::invariants::{CCM_LEASE, Recorder, TransitionReport, ingress_of};
use ccm_harness::kcm::{KcmConfig, SimKcm, ran_at};
use ccm_harness::node::provider_id;
use ccm_harness::{
    Case, CaseError, Environment, Instance, InstanceSpec, Probe, Tag, ensure, eventually,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{INIT_TIMEOUT, initialized_node};

/// The finalizer the service-lb controller puts on LoadBalancer Services.
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const PORT: u16 = 8080;
/// Waits for load balancers and traffic against the mock.
const LB_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the AWS mock holds the CCM's `CreateLoadBalancer` in UP-07: longer than an API
/// server restart takes, so the restart falls inside the call.
const AWS_CREATE_HOLD: Duration = Duration::from_secs(3);

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "Upgrade",
            title: $title,
            tags: $tags,
            ccm_args: &[],
            start_ccm: false,
            needs: &[],
            run: |env| Box::pin($body(env)),
        }
    };
}

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        case!(
            "UP-01",
            "adopts in-tree nodes and load balancers without a visible change",
            &[Mock],
            up01
        ),
        case!(
            "UP-02",
            "hands service-lb over from kube-controller-manager by leader migration, never running it twice",
            &[Mock],
            up02
        ),
        case!(
            "UP-03",
            "hands controllers over with the built-in default leader-migration config, never running one twice",
            &[Mock],
            up03
        ),
        case!(
            "UP-07",
            "converges after an API server restart mid-reconcile without duplicate cloud resources",
            &[Mock],
            up07
        ),
        case!(
            "UP-04",
            "rolls two replicas N to N+1 to N without recreating load balancers or touching nodes",
            &[Mock, Slow],
            up04
        ),
        case!(
            "UP-05",
            "keeps taints and addresses when kubelets switch to the external cloud provider",
            &[Mock],
            up05
        ),
        case!(
            "UP-06",
            "keeps load-balancer identity across a --cluster-name change",
            &[Mock],
            up06
        ),
    ]
}

/// A LoadBalancer Service on [`PORT`]; with `finalizer` as an in-tree cluster left it.
fn lb_service(name: &str, finalizer: bool) -> Result<Service, CaseError> {
    let mut meta = json!({"name": name});
    if finalizer {
        meta["finalizers"] = json!([FINALIZER]);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": meta,
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}]}
    }))
    .map_err(|e| CaseError::infra("building Service", e))
}

async fn create_service(env: &Environment, svc: &Service) -> Result<Service, CaseError> {
    env.services()
        .create(&PostParams::default(), svc)
        .await
        .map_err(|e| CaseError::infra("creating Service", e))
}

/// Waits until the Service has the finalizer and an ingress; returns the first ingress.
async fn wait_ingress(env: &Environment, name: &str) -> Result<String, CaseError> {
    let services = env.services();
    eventually(&format!("an ingress on Service {name}"), LB_TIMEOUT, || {
        let services = services.clone();
        async move {
            // Errors are waited out too: UP-07 asks right after an API server restart.
            let s = match services.get(name).await {
                Ok(s) => s,
                Err(e) => return Ok(Probe::Pending(format!("getting Service: {e}"))),
            };
            let fin = s
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
            Ok(match ingress_of(&s).first() {
                Some(ip) if fin => Probe::Done(ip.clone()),
                _ => Probe::Pending(format!("finalizer {fin}, ingress {:?}", ingress_of(&s))),
            })
        }
    })
    .await
}

/// Waits until `target` answers a TCP connection with a line.
async fn wait_traffic(target: &str) -> Result<(), CaseError> {
    eventually(
        &format!("an answer through {target}"),
        LB_TIMEOUT,
        || async {
            Ok(
                match ccm_harness::traffic::tcp_line(target, Duration::from_secs(1)).await {
                    Ok(Some(_)) => Probe::Done(()),
                    _ => Probe::Pending(format!("no answer from {target}")),
                },
            )
        },
    )
    .await
}

/// Sum of event counts with `reason` on Service `name`.
async fn event_count(env: &Environment, name: &str, reason: &str) -> Result<i32, CaseError> {
    Ok(env
        .service_events(name)
        .await?
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.count.unwrap_or(1).max(1))
        .sum())
}

/// Waits until the CCM finished a sync of Service `name` after `before` such syncs
/// (`EnsuredLoadBalancer` or `SyncLoadBalancerFailed` events).
async fn wait_synced(env: &Environment, name: &str, before: i32) -> Result<(), CaseError> {
    eventually(
        &format!("the CCM to sync Service {name}"),
        LB_TIMEOUT,
        || async {
            let n = event_count(env, name, "EnsuredLoadBalancer").await?
                + event_count(env, name, "SyncLoadBalancerFailed").await?;
            Ok(if n > before {
                Probe::Done(())
            } else {
                Probe::Pending(format!("{n} ensured/failed events"))
            })
        },
    )
    .await
}

/// What an in-tree cluster left behind.
struct InTreeCluster {
    nodes: Vec<Instance>,
    /// `(service, ip:port)` for every LoadBalancer Service.
    targets: Vec<(String, String)>,
}

impl InTreeCluster {
    fn probe_targets(&self) -> Vec<String> {
        self.targets.iter().map(|(_, t)| t.clone()).collect()
    }
}

/// Two in-tree nodes; Service `web` with a load balancer named the current in-tree way and
/// `api` with the oldest (`a<uid>`) name; both with finalizer, ingress and live traffic.
async fn in_tree_cluster(env: &mut Environment) -> Result<InTreeCluster, CaseError> {
    let mut nodes = Vec::new();
    for name in ["node-a", "node-b"] {
        nodes.push(env.add_in_tree_node(name, InstanceSpec::default()).await?);
    }
    let mut targets = Vec::new();
    // A cloud without load balancers (vSphere) left only its nodes behind.
    let services: &[(&str, InTreeName)] = if env.cloud().supports(Feature::LoadBalancers).is_ok() {
        &[
            ("web", InTreeName::ClusterScoped),
            ("api", InTreeName::ServiceUid),
        ]
    } else {
        &[]
    };
    for &(name, scheme) in services {
        let svc = create_service(env, &lb_service(name, true)?).await?;
        let lb = seed_load_balancer(env, scheme, &svc, &nodes).await?;
        // What the in-tree service controller wrote.
        let status = json!({"status": {"loadBalancer": {"ingress": [lb.ingress]}}});
        env.services()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| CaseError::infra("setting the in-tree ingress", e))?;
        targets.push((name.to_string(), format!("{}:{PORT}", lb.address)));
    }
    for (_, target) in &targets {
        wait_traffic(target).await?;
    }
    Ok(InTreeCluster { nodes, targets })
}

/// Fails unless each Service was re-ensured at most `allowed` times in the window, plus
/// once for a Service whose load-balancer ID the CCM recorded in the window (the
/// annotation change is a `needsUpdate` trigger upstream).
fn check_ensures(report: &TransitionReport, allowed: i32) -> Result<(), CaseError> {
    for (svc, n) in &report.ensures {
        let allowed = allowed + i32::from(report.ids_recorded.contains(svc));
        ensure!(
            *n <= allowed,
            "expected Service {svc} re-ensured at most {allowed} time(s), observed {n} \
             EnsuringLoadBalancer events; {}",
            report.describe().lines().last().unwrap_or_default()
        );
    }
    Ok(())
}

async fn up01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let cluster = in_tree_cluster(env).await?;
    let recorder = Recorder::start(env, &cluster.probe_targets()).await?;
    env.start_ccm().await?;
    for (svc, _) in &cluster.targets {
        wait_synced(env, svc, 0).await?;
    }
    recorder.observe(env.hold()).await;
    env.ccm_alive()?;
    let report = recorder.finish(env).await?;
    report
        .check("adopting in-tree state")
        .map_err(|e| env.with_ccm_log(e))?;
    check_ensures(&report, 1)?;
    let _ = &cluster.nodes;
    Ok(report.metrics())
}

async fn up05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut nodes = Vec::new();
    for name in ["node-a", "node-b"] {
        nodes.push(env.add_in_tree_node(name, InstanceSpec::default()).await?);
    }
    // The documented order: the CCM is deployed first, then kubelets are restarted.
    env.start_ccm().await?;
    let recorder = Recorder::start(env, &[]).await?;
    for n in &nodes {
        env.switch_kubelet_to_external(&n.name).await?;
    }
    recorder.observe(env.hold()).await;
    // A node that joins after the switch registers tainted and is initialized normally.
    let (instance, node) = initialized_node(env, "node-c", NodeOptions::default()).await?;
    ensure!(
        provider_id(&node) == Some(instance.provider_id.as_str()),
        "expected the new node-c initialized with providerID {}, observed {:?}",
        instance.provider_id,
        provider_id(&node)
    );
    env.ccm_alive()?;
    let report = recorder.finish(env).await?;
    report
        .check("switching kubelets to --cloud-provider=external")
        .map_err(|e| env.with_ccm_log(e))?;
    Ok(report.metrics())
}

/// Waits until a live replica holds the CCM Lease: renewed after `since`.
async fn wait_live_leader(env: &Environment, since: jiff::Timestamp) -> Result<String, CaseError> {
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    eventually(
        "a live replica to hold the CCM Lease",
        Duration::from_secs(20),
        || {
            let leases = leases.clone();
            async move {
                let spec = leases
                    .get_opt(CCM_LEASE)
                    .await
                    .map_err(|e| CaseError::infra("getting the CCM Lease", e))?
                    .and_then(|l| l.spec);
                let renewed = spec
                    .as_ref()
                    .and_then(|s| s.renew_time.as_ref())
                    .map(|t| t.0);
                let holder = spec.and_then(|s| s.holder_identity).unwrap_or_default();
                Ok(match renewed {
                    Some(t) if t > since && !holder.is_empty() => Probe::Done(holder),
                    _ => Probe::Pending(format!("holder {holder:?} renewed at {renewed:?}")),
                })
            }
        },
    )
    .await
}

async fn up04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let old = env.settings().ccm_old().to_path_buf();
    let new = env.settings().ccm_new().to_path_buf();
    for name in ["a", "b"] {
        env.start_replica(name, Some(&old), LEADER_FLAGS).await?;
    }
    for name in ["node-a", "node-b"] {
        env.add_node(name, NodeOptions::default()).await?;
        env.wait_initialized(name, INIT_TIMEOUT).await?;
    }
    // Without load balancers (vSphere) the roll is judged on the nodes alone.
    let mut targets = Vec::new();
    if env.cloud().supports(Feature::LoadBalancers).is_ok() {
        create_service(env, &lb_service("web", false)?).await?;
        let ip = wait_ingress(env, "web").await?;
        let target = format!("{ip}:{PORT}");
        wait_traffic(&target).await?;
        targets.push(target);
    }
    let recorder = Recorder::start(env, &targets).await?;
    let steps: [(&str, &Path, &str); 4] = [
        ("b", &new, "N+1"),
        ("a", &new, "N+1"),
        ("b", &old, "N"),
        ("a", &old, "N"),
    ];
    for (name, binary, version) in steps {
        env.stop_replica(name).await;
        let stopped = jiff::Timestamp::now();
        env.start_replica(name, Some(binary), LEADER_FLAGS)
            .await
            .map_err(|e| {
                e.map_message(|message| format!("rolling replica {name} to {version}: {message}"))
            })?;
        wait_live_leader(env, stopped).await?;
        recorder.observe(Duration::from_secs(1)).await;
    }
    recorder.observe(env.hold()).await;
    for name in ["a", "b"] {
        ensure!(
            env.replica_alive(name),
            "expected replica {name} running after the roll, observed it exited:\n{}",
            env.replica_log_tail(name, 20)
        );
    }
    let report = recorder.finish(env).await?;
    report
        .check("rolling N -> N+1 -> N")
        .map_err(|e| with_replica_logs(env, e))?;
    // Each new leader re-ensures every load balancer once at startup, no more.
    let new_leaders = report.leaders.len().saturating_sub(1) as i32;
    check_ensures(&report, new_leaders.max(1))?;
    let mut metrics = report.metrics();
    metrics.push(("leader_changes".into(), new_leaders.to_string()));
    Ok(metrics)
}

fn with_replica_logs(env: &Environment, err: CaseError) -> CaseError {
    err.and_detail(|detail| {
        let mut detail = detail.to_string();
        for name in ["a", "b"] {
            detail.push_str(&format!(
                "\n--- replica {name} (tail) ---\n{}",
                env.replica_log_tail(name, 15)
            ));
        }
        detail
    })
}

/// A `--cluster-name` change. Upstream cloud-provider-openstack keeps identity by looking
/// its load balancer up through the ID it recorded on the Service and renaming it
/// (`pkg/openstack/loadbalancer_rename.go`); providers whose names derive from the Service
/// UID (AWS `a<uid>`) never notice. Whether the cloud name changed is a metric only: a CCM
/// may keep identity without renaming.
async fn up06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.cloud().require(Feature::LoadBalancers)?;
    env.cloud()
        .require(Feature::LoadBalancersSurviveClusterRename)?;
    env.start_ccm().await?;
    for name in ["node-a", "node-b"] {
        initialized_node(env, name, NodeOptions::default()).await?;
    }
    create_service(env, &lb_service("web", false)?).await?;
    let ip = wait_ingress(env, "web").await?;
    let target = format!("{ip}:{PORT}");
    wait_traffic(&target).await?;
    let recorder = Recorder::start(env, std::slice::from_ref(&target)).await?;
    let names = |env: &Environment| -> BTreeSet<String> {
        env.cloud()
            .load_balancers()
            .into_iter()
            .map(|l| l.name)
            .collect()
    };
    let names_before = names(env);
    let synced = event_count(env, "web", "EnsuredLoadBalancer").await?
        + event_count(env, "web", "SyncLoadBalancerFailed").await?;
    env.start_ccm_with(&["--cluster-name=ccm-conformance-renamed"])
        .await?;
    wait_synced(env, "web", synced).await?;
    recorder.observe(env.hold()).await;
    let report = recorder.finish(env).await?;
    if let Err(e @ CaseError::Failed { .. }) = report.check("changing --cluster-name") {
        return Err(e.map_message(|message| {
            format!(
                "the CCM does not keep load-balancer identity across a --cluster-name change \
                 (clients of the old ingress lose the service): {message}"
            )
        }));
    }
    let mut metrics = report.metrics();
    let renamed = names(env) != names_before;
    metrics.push(("lb_renamed".into(), renamed.to_string()));
    Ok(metrics)
}

/// A leader-migration config with the canonical controller names (ccm-behaviour.md §3 B:
/// ship explicit configs with canonical names), every migrated controller for either
/// component. No `resourceLock`: Kubernetes 1.37 removed the field from
/// `controllermanager.config.k8s.io/v1` (k8s.io/controller-manager v0.37 `config/v1/types.go`;
/// a 1.37 CCM refuses it in strict decoding) and earlier releases default it to `leases`.
pub const CANONICAL_MIGRATION_CONFIG: &str = "\
kind: LeaderMigrationConfiguration
apiVersion: controllermanager.config.k8s.io/v1
leaderName: cloud-provider-extraction-migration
controllerLeaders:
- name: node-route-controller
  component: '*'
- name: service-lb-controller
  component: '*'
- name: cloud-node-lifecycle-controller
  component: '*'
";

async fn up02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    leader_migration(env, Some(CANONICAL_MIGRATION_CONFIG)).await
}

async fn up03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    leader_migration(env, None).await
}

/// Starts a replica with leader migration; a CCM that does not know the flag is a skip.
async fn start_migrating_replica(
    env: &mut Environment,
    name: &str,
    flags: &[&str],
) -> Result<(), CaseError> {
    match env.start_replica(name, None, flags).await {
        Err(CaseError::Failed {
            message, detail, ..
        }) if (message.contains("exited during startup")
            && (message.contains("enable-leader-migration")
                || detail.contains("enable-leader-migration"))) =>
        {
            Err(CaseError::Skipped(format!(
                "CCM does not support --enable-leader-migration: {message}"
            )))
        }
        other => other,
    }
}

/// KEP-2436 rolling migration: a (simulated) kube-controller-manager holds the migration
/// Lease and runs the migrated controllers; two CCM replicas with `--enable-leader-migration`
/// come up beside it; the KCM goes away (upgraded to `--cloud-provider=external`); the CCM
/// takes the migrated controllers over; then the CCM replicas are rolled one at a time.
/// Checked: cloud-node runs in the CCM while the KCM still holds the migration Lease; no
/// load-balancer call while the KCM ran service-lb (a second runner); the CCM does run it
/// after the hand-over. The route controller is not exercised (routes are off by default
/// in the harness).
async fn leader_migration(
    env: &mut Environment,
    config: Option<&str>,
) -> Result<CaseMetrics, CaseError> {
    let mut flags: Vec<String> = LEADER_FLAGS.iter().map(|s| s.to_string()).collect();
    flags.push("--enable-leader-migration=true".into());
    if let Some(text) = config {
        let path = env.dir().join("leader-migration.yaml");
        std::fs::write(&path, text)
            .map_err(|e| CaseError::infra("writing the leader-migration config", e))?;
        flags.push(format!("--leader-migration-config={}", path.display()));
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // The migrated controller the case watches for a second runner is service-lb; a cloud
    // without load balancers (vSphere) is judged on cloud-node-lifecycle instead.
    if env.cloud().supports(Feature::LoadBalancers).is_err() {
        return leader_migration_nodes(env, &flags).await;
    }

    let mut kcm = SimKcm::start(env.client(), KcmConfig::default());
    eventually(
        "the simulated KCM to hold the migration Lease",
        LB_TIMEOUT,
        || {
            let leading = kcm.leading();
            async move {
                Ok(if leading {
                    Probe::Done(())
                } else {
                    Probe::Pending("not leading yet".into())
                })
            }
        },
    )
    .await?;
    for name in ["a", "b"] {
        start_migrating_replica(env, name, &flags).await?;
    }
    // cloud-node is never migrated: it runs in the CCM under its main Lease.
    env.add_node("node-a", NodeOptions::default()).await?;
    env.wait_initialized("node-a", INIT_TIMEOUT)
        .await
        .map_err(|e| with_replica_logs(env, e))?;
    ensure!(
        kcm.leading(),
        "expected the simulated KCM to still hold the migration Lease, observed it lost it: {:?}",
        kcm.errors()
    );
    create_service(env, &lb_service("web", false)?).await?;
    // While the KCM runs service-lb the CCM must not: no ingress, no cloud call.
    let services = env.services();
    ccm_harness::holds_for(
        "service-lb to stay with kube-controller-manager",
        env.hold().min(Duration::from_secs(3)),
        || {
            let services = services.clone();
            let calls = env.cloud().load_balancer_call_times().map(|c| c.len());
            async move {
                let s = services
                    .get("web")
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?;
                Ok(match (ingress_of(&s).is_empty(), calls) {
                    (true, None | Some(0)) => Probe::Done(()),
                    (_, calls) => Probe::Pending(format!(
                        "the CCM ran service-lb while the KCM held the migration Lease: \
                         ingress {:?}, {} load-balancer call(s)",
                        ingress_of(&s),
                        calls.unwrap_or(0)
                    )),
                })
            }
        },
    )
    .await
    .map_err(|e| with_replica_logs(env, e))?;
    // The KCM is upgraded to --cloud-provider=external: the CCM takes over.
    kcm.stop().await;
    let handed_over = std::time::Instant::now();
    let ip = wait_ingress(env, "web")
        .await
        .map_err(|e| with_replica_logs(env, e))?;
    let handover = handed_over.elapsed();
    let target = format!("{ip}:{PORT}");
    wait_traffic(&target).await?;
    // Roll the CCM replicas one at a time: the Leases move, nothing runs twice.
    let recorder = Recorder::start(env, std::slice::from_ref(&target)).await?;
    for name in ["a", "b"] {
        env.stop_replica(name).await;
        let stopped = jiff::Timestamp::now();
        start_migrating_replica(env, name, &flags).await?;
        wait_live_leader(env, stopped).await?;
    }
    recorder.observe(env.hold()).await;
    let report = recorder.finish(env).await?;
    report
        .check("rolling the CCM replicas after the migration")
        .map_err(|e| with_replica_logs(env, e))?;
    let runs = kcm.runs();
    let mut double = Vec::new();
    for at in env.cloud().load_balancer_call_times().unwrap_or_default() {
        for run in ran_at(&runs, at).filter(|r| r.controller == "service-lb-controller") {
            double.push(format!(
                "load-balancer call at {at} while the KCM ran {run:?}"
            ));
        }
    }
    ensure!(
        double.is_empty(),
        "expected at most one runner of service-lb-controller, observed the CCM calling the \
         cloud while kube-controller-manager ran it: {}",
        double.join("; ")
    );
    let mut metrics = report.metrics();
    metrics.push((
        "migration_handover_seconds".into(),
        format!("{:.3}", handover.as_secs_f64()),
    ));
    metrics.push(("double_runs".into(), double.len().to_string()));
    Ok(metrics)
}

/// How long the case watches for the CCM running cloud-node-lifecycle while the KCM holds
/// the migration Lease: more than one `--node-monitor-period` (5 s upstream default).
const LIFECYCLE_WATCH: Duration = Duration::from_secs(6);

/// [`leader_migration`] judged on cloud-node-lifecycle (the migrated controller every
/// provider runs): a node whose VM is gone and whose kubelet stopped must stay while the
/// simulated KCM holds the migration Lease (the KCM only records its runs, so a deletion
/// then came from a second runner), and the CCM deletes it once it took the Lease over.
async fn leader_migration_nodes(
    env: &mut Environment,
    flags: &[&str],
) -> Result<CaseMetrics, CaseError> {
    let mut kcm = SimKcm::start(env.client(), KcmConfig::default());
    eventually(
        "the simulated KCM to hold the migration Lease",
        LB_TIMEOUT,
        || {
            let leading = kcm.leading();
            async move {
                Ok(if leading {
                    Probe::Done(())
                } else {
                    Probe::Pending("not leading yet".into())
                })
            }
        },
    )
    .await?;
    for name in ["a", "b"] {
        start_migrating_replica(env, name, flags).await?;
    }
    // cloud-node is never migrated: it runs in the CCM under its main Lease.
    let mut doomed = None;
    for name in ["node-a", "node-b"] {
        let (instance, _) = initialized_node(env, name, NodeOptions::default())
            .await
            .map_err(|e| with_replica_logs(env, e))?;
        doomed = Some(instance);
    }
    ensure!(
        kcm.leading(),
        "expected the simulated KCM to still hold the migration Lease, observed it lost it: {:?}",
        kcm.errors()
    );
    if let Some(instance) = &doomed {
        env.cloud().delete_instance(&instance.id)?;
    }
    env.stop_kubelet("node-b").await?;
    env.node_holds(
        "node-b",
        "cloud-node-lifecycle to stay with kube-controller-manager (node-b kept)",
        LIFECYCLE_WATCH,
        |_| Ok(()),
    )
    .await
    .map_err(|e| with_replica_logs(env, e))?;
    // The KCM is upgraded to --cloud-provider=external: the CCM takes over.
    kcm.stop().await;
    let handed_over = std::time::Instant::now();
    // The CCM deletes node-b after taking cloud-node-lifecycle over.
    env.wait_node_deleted("node-b", LB_TIMEOUT + LIFECYCLE_WATCH)
        .await
        .map_err(|e| with_replica_logs(env, e))?;
    let handover = handed_over.elapsed();
    // Roll the CCM replicas one at a time: node-a sees nothing.
    let recorder = Recorder::start(env, &[]).await?;
    for name in ["a", "b"] {
        env.stop_replica(name).await;
        let stopped = jiff::Timestamp::now();
        start_migrating_replica(env, name, flags).await?;
        wait_live_leader(env, stopped).await?;
    }
    recorder.observe(env.hold()).await;
    let report = recorder.finish(env).await?;
    report
        .check("rolling the CCM replicas after the migration")
        .map_err(|e| with_replica_logs(env, e))?;
    let mut metrics = report.metrics();
    metrics.push((
        "migration_handover_seconds".into(),
        format!("{:.3}", handover.as_secs_f64()),
    ));
    Ok(metrics)
}

/// The control plane restarts while the CCM is creating a load balancer: the CCM
/// reconnects, finishes, and ends with exactly one load balancer whose address is the
/// ingress; a node that joins afterwards is initialized (its watches came back).
/// "Mid-reconcile" per cloud: OpenStack, the Octavia load balancer is still PENDING_CREATE
/// (the CCM polls it); AWS, whose classic ELBs are created synchronously, the CCM's
/// `CreateLoadBalancer` call is held by the mock for [`AWS_CREATE_HOLD`] and the API server
/// restarts while it waits.
async fn up07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.start_ccm().await?;
    for name in ["node-a", "node-b"] {
        initialized_node(env, name, NodeOptions::default()).await?;
    }
    if env.cloud().supports(Feature::LoadBalancers).is_err() {
        return up07_nodes_only(env).await;
    }
    let hold = env.cloud().hold_load_balancer_creates(AWS_CREATE_HOLD);
    if hold.is_none() {
        env.slow_load_balancers(3)?;
    }
    create_service(env, &lb_service("web", false)?).await?;
    eventually(
        "the CCM to start creating the load balancer",
        LB_TIMEOUT,
        || async {
            if let Some(hold) = &hold {
                let held = hold.held();
                return Ok(if held > 0 {
                    Probe::Done(())
                } else {
                    Probe::Pending("no CreateLoadBalancer call yet".into())
                });
            }
            let lbs = env.cloud().load_balancers();
            Ok(match lbs.first() {
                Some(lb) if lb.state.starts_with("PENDING") => Probe::Done(()),
                _ => Probe::Pending(format!("load balancers: {lbs:?}")),
            })
        },
    )
    .await?;
    let restarted = std::time::Instant::now();
    let down = env.restart_apiserver().await?;
    if let Some(hold) = hold {
        hold.release();
    }
    let ingress = wait_ingress(env, "web")
        .await
        .map_err(|e| env.with_ccm_log(e))?;
    let converged = restarted.elapsed();
    let lbs = env.cloud().load_balancers();
    // AWS ingresses are DNS names that stand for the VIP.
    let ip = env
        .cloud()
        .resolve_ingress(&ingress)
        .unwrap_or_else(|| ingress.clone());
    ensure!(
        lbs.len() == 1 && lbs[0].vip == ip,
        "expected exactly one load balancer with address {ip} (ingress {ingress}) after the \
         restart, observed {lbs:?}"
    );
    let ip = ingress;
    wait_traffic(&format!("{ip}:{PORT}")).await?;
    // The restart cut the CCM's node watch too, and a watch retries with client-go's
    // reflector backoff (kube-runtime's default: 0.8 s doubling to 30 s): a node added
    // now may wait one full step before the CCM sees it (CI saw 20 s pass under load).
    env.add_node("node-c", NodeOptions::default()).await?;
    env.wait_initialized("node-c", INIT_TIMEOUT + WATCH_BACKOFF_MAX)
        .await
        .map_err(|e| env.with_ccm_log(e))?;
    env.ccm_alive()?;
    Ok(restart_metrics(down, converged))
}

/// The longest wait of a watch's retry backoff (client-go reflector, kube-runtime default).
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// UP-07 on a cloud without load balancers (vSphere): the API server restarts while two
/// freshly registered nodes wait for initialization; after it is back both are
/// initialized, a node added later is too, and the CCM never exited.
async fn up07_nodes_only(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    for name in ["node-c", "node-d"] {
        env.add_node(name, NodeOptions::default()).await?;
    }
    let restarted = std::time::Instant::now();
    let down = env.restart_apiserver().await?;
    for name in ["node-c", "node-d"] {
        env.wait_initialized(name, INIT_TIMEOUT)
            .await
            .map_err(|e| env.with_ccm_log(e))?;
    }
    let converged = restarted.elapsed();
    initialized_node(env, "node-e", NodeOptions::default()).await?;
    env.ccm_alive()?;
    Ok(restart_metrics(down, converged))
}

/// UP-07's JUnit properties: how long the API server was down and how long the CCM took
/// to converge after it came back.
fn restart_metrics(down: Duration, converged: Duration) -> CaseMetrics {
    vec![
        (
            "apiserver_down_seconds".into(),
            format!("{:.3}", down.as_secs_f64()),
        ),
        (
            "converged_seconds".into(),
            format!("{:.3}", converged.as_secs_f64()),
        ),
    ]
}
