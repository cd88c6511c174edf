//! Process: the CCM as an operator runs it (ccm-behaviour.md §1.1 and §2, cases OP-*):
//! HTTPS `/healthz` and `/metrics` on `--secure-port`, `--controllers`, startup errors as
//! one line and a non-zero exit, configuration from a Secret, leader election on the Lease
//! `kube-system/cloud-controller-manager` (fail-over, exit on loss) and leader migration.
//! Leader-election cases shorten the lease (upstream 15 s/10 s/2 s) with the upstream flags
//! so a fail-over takes seconds. Every case ends with the cloud's leak report empty.

use std::time::{Duration, Instant};

use ccm_harness::case::CaseMetrics;
use ccm_harness::env::{LEADER_FLAGS, NodeOptions};
use ccm_harness::node::{describe_taints, has_uninitialized_taint};
use ccm_harness::probe::{https_get, lease_holder, secure_port};
use ccm_harness::{Case, CaseError, Environment, Probe, Tag, ensure, eventually, holds_for};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::common::{INIT_TIMEOUT, initialized_node};

const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_NAME: &str = "cloud-controller-manager";
const MIGRATION_LEASE: &str = "cloud-provider-extraction-migration";
const LEASE_DURATION: Duration = Duration::from_secs(3);
/// client-go logs this when it becomes leader (`successfully acquired lease` until
/// v0.36, structured `"Successfully acquired lease"` since; tools/leaderelection
/// `leaderelection.go`); our CCM uses the same words. Compared ignoring case.
const ACQUIRED: &str = "successfully acquired lease";

/// Whether a replica's log says it acquired the lease.
fn logged_acquired(env: &Environment, replica: &str) -> bool {
    env.replica_log_tail(replica, 400)
        .to_ascii_lowercase()
        .contains(ACQUIRED)
}
const SVC: &str = "web";

macro_rules! case {
    ($id:literal, $title:literal, $tags:expr, $start:expr, $body:ident) => {
        Case {
            id: $id,
            suite: "Process",
            title: $title,
            tags: $tags,
            ccm_args: &[],
            start_ccm: $start,
            needs: &[],
            run: |env| Box::pin($body(env)),
        }
    };
}

pub fn cases() -> Vec<Case> {
    use Tag::*;
    vec![
        Case {
            // Upstream authorizes /metrics through the API server unless the deployment
            // opens it (cloud-provider `options/options.go` always-allows only the health
            // paths); the case scrapes without credentials, as a deployment that adds it.
            ccm_args: &["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"],
            ..case!(
                "OP-01",
                "serves /healthz and /metrics with the upstream metric names over HTTPS",
                &[Conformance],
                true,
                op01
            )
        },
        case!(
            "OP-02",
            "refuses unknown --controllers entries and runs only the enabled controllers",
            &[Mock],
            false,
            op02
        ),
        case!(
            "OP-03",
            "fails over to the standby replica when the lease holder is killed",
            &[Mock],
            false,
            op03
        ),
        case!(
            "OP-04",
            "exits when its leader lease is taken by another holder",
            &[Mock],
            false,
            op04
        ),
        case!(
            "OP-06",
            "exits non-zero with a short error on a malformed cloud config or missing provider",
            &[Mock],
            false,
            op06
        ),
        case!(
            "OP-07",
            "starts without its credentials Secret and uses it once it exists",
            &[Mock],
            false,
            op07
        ),
        case!(
            "OP-08",
            "runs migrated controllers only while holding the migration lease",
            &[Mock],
            false,
            op08
        ),
        case!(
            "OP-09",
            "runs each controller as its own ServiceAccount with --use-service-account-credentials",
            &[Conformance],
            false,
            op09
        ),
        case!(
            "OP-05",
            "initializes nodes that are all uninitialized and NotReady",
            &[Mock],
            false,
            op05
        ),
    ]
}

fn lb_service() -> Result<Service, CaseError> {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": SVC},
        "spec": {"type": "LoadBalancer", "selector": {"app": SVC},
                 "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}
    }))
    .map_err(|e| CaseError::infra("building Service", e))
}

/// The leak report, without the instances behind the case's own nodes: a CCM never
/// creates instances, the harness does.
fn no_leaks(env: &Environment) -> Result<(), CaseError> {
    let leaks: Vec<String> = env
        .cloud()
        .leaks()
        .into_iter()
        .filter(|l| !l.starts_with("instance "))
        .collect();
    ensure!(
        leaks.is_empty(),
        "expected no cloud resources left, observed {leaks:?}"
    );
    Ok(())
}

/// Deletes the test Service and waits until it and every cloud load balancer are gone.
async fn delete_service_and_wait(env: &Environment) -> Result<(), CaseError> {
    let _ = env.services().delete(SVC, &DeleteParams::default()).await;
    eventually(
        "the Service and its load balancer gone",
        INIT_TIMEOUT,
        || async {
            let svc = env
                .services()
                .get_opt(SVC)
                .await
                .map_err(|e| CaseError::infra("getting Service", e))?;
            let lbs = env.cloud().load_balancers();
            Ok(if svc.is_none() && lbs.is_empty() {
                Probe::Done(())
            } else {
                Probe::Pending(format!(
                    "Service present {}, cloud LBs {}",
                    svc.is_some(),
                    lbs.len()
                ))
            })
        },
    )
    .await
}

async fn op01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let port = secure_port(env, "ccm.log")
        .ok_or_else(|| CaseError::failed("no --secure-port on the CCM command line"))?;
    let (status, _) = https_get(port, "/healthz").await?;
    ensure!(
        status == 200,
        "expected /healthz 200 over HTTPS, observed {status}"
    );
    // Node metrics are observed once a node is initialized; the service controller's are
    // registered when it starts (cloud-provider controllers/{node,service}/metrics.go).
    let names = [
        "node_controller_cloud_provider_taint_removal_delay_seconds",
        "node_controller_initial_node_sync_delay_seconds",
        "service_controller_loadbalancer_sync_total",
        "service_controller_nodesync_error_total",
        "service_controller_nodesync_latency_seconds",
        "service_controller_update_loadbalancer_host_latency_seconds",
    ];
    // The histogram is observed after the taint-removing update returns, so the node can
    // be seen initialized a moment before it counts: wait for both.
    let counted = |body: &str| {
        body.lines().any(|l| {
            l.starts_with("node_controller_cloud_provider_taint_removal_delay_seconds_count")
                && !l.ends_with(" 0")
        })
    };
    eventually("the named metrics on /metrics", INIT_TIMEOUT, || async {
        let (status, body) = https_get(port, "/metrics").await?;
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !body.lines().any(|l| l.starts_with(n)))
            .collect();
        Ok(if status != 200 || !missing.is_empty() {
            Probe::Pending(format!("status {status}, missing {missing:?}"))
        } else if !counted(&body) {
            Probe::Pending("the taint-removal histogram does not count the initialized node".into())
        } else {
            Probe::Done(())
        })
    })
    .await?;
    no_leaks(env)?;
    Ok(vec![])
}

/// A startup that must fail: returns the failure message.
async fn failing_start(env: &mut Environment, extra: &[&str]) -> Result<String, CaseError> {
    match env.start_ccm_with(extra).await {
        Ok(()) => {
            env.stop_ccm().await;
            Err(CaseError::failed(format!(
                "expected the CCM to exit with {extra:?}, it became healthy"
            )))
        }
        Err(CaseError::Failed { message, .. }) => Ok(message),
        Err(other) => Err(other),
    }
}

async fn op02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let message = failing_start(env, &["--controllers=*,bogus-controller"]).await?;
    ensure!(
        message.contains("exited") && !message.contains("exit status: 0"),
        "expected a non-zero exit for an unknown controller, observed: {message}"
    );
    ensure!(
        message.contains("bogus-controller"),
        "expected the exit reason to name the unknown controller, observed: {message}"
    );
    env.start_ccm_with(&["--controllers=*,-service-lb-controller"])
        .await?;
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let calls = env.cloud().load_balancer_calls();
    env.services()
        .create(&PostParams::default(), &lb_service()?)
        .await
        .map_err(|e| CaseError::infra("creating Service", e))?;
    let services = env.services();
    let env: &Environment = env;
    holds_for(
        "no finalizer and no load-balancer call with the service controller disabled",
        Duration::from_secs(3),
        || {
            let services = services.clone();
            async move {
                let s = services
                    .get(SVC)
                    .await
                    .map_err(|e| CaseError::infra("getting Service", e))?;
                let now = env.cloud().load_balancer_calls();
                Ok(
                    if s.metadata.finalizers.unwrap_or_default().is_empty() && now == calls {
                        Probe::Done(())
                    } else {
                        Probe::Pending(format!("{} load-balancer calls", now - calls))
                    },
                )
            }
        },
    )
    .await?;
    delete_service_and_wait(env).await?;
    no_leaks(env)?;
    Ok(vec![])
}

/// Which replica logged that it acquired the lease.
fn leader_among(env: &Environment, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| logged_acquired(env, n))
        .map(|n| n.to_string())
}

async fn wait_holder(env: &Environment, lease: &str) -> Result<String, CaseError> {
    eventually(
        &format!("a holder of lease {LEASE_NAMESPACE}/{lease}"),
        INIT_TIMEOUT,
        || async {
            Ok(match lease_holder(env, LEASE_NAMESPACE, lease).await? {
                Some(h) => Probe::Done(h),
                None => Probe::Pending("no holder".into()),
            })
        },
    )
    .await
}

async fn op03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.start_replica("a", None, LEADER_FLAGS).await?;
    env.start_replica("b", None, LEADER_FLAGS).await?;
    let holder = wait_holder(env, LEASE_NAME).await?;
    // Upstream identity: `<hostname>_<uuid>`.
    let uuid_part = holder.rsplit('_').next().unwrap_or_default();
    ensure!(
        holder.contains('_') && uuid_part.len() == 36,
        "expected a holder identity <hostname>_<uuid>, observed {holder:?}"
    );
    let leader = eventually("a replica logging that it leads", INIT_TIMEOUT, || async {
        Ok(match leader_among(env, &["a", "b"]) {
            Some(l) => Probe::Done(l),
            None => Probe::Pending("no replica logged the acquisition".into()),
        })
    })
    .await?;
    let standby = if leader == "a" { "b" } else { "a" };
    ensure!(
        !logged_acquired(env, standby),
        "expected exactly one leader, both replicas logged {ACQUIRED:?}"
    );
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    env.kill_replica(&leader).await;
    let killed = Instant::now();
    // Takeover within the lease duration plus a few retry periods (upstream: ≤ ~17 s).
    let limit = LEASE_DURATION * 3;
    let new_holder = eventually("the standby to take the lease", limit, || async {
        Ok(
            match lease_holder(env, LEASE_NAMESPACE, LEASE_NAME).await? {
                Some(h) if h != holder => Probe::Done(h),
                other => Probe::Pending(format!("holder {other:?}")),
            },
        )
    })
    .await?;
    let failover = killed.elapsed();
    ensure!(
        env.replica_alive(standby),
        "expected the standby to keep running, it exited: {}",
        env.replica_log_tail(standby, 5)
    );
    ensure!(
        new_holder != holder,
        "expected a new holder identity, observed {new_holder:?}"
    );
    // The new leader runs the controllers: a node added now is initialized.
    env.add_node("node-b", NodeOptions::default()).await?;
    env.wait_initialized("node-b", INIT_TIMEOUT)
        .await
        .map_err(|e| with_replica_log(env, standby, e))?;
    no_leaks(env)?;
    Ok(vec![(
        "failover-seconds".into(),
        format!("{:.3}", failover.as_secs_f64()),
    )])
}

fn with_replica_log(env: &Environment, name: &str, err: CaseError) -> CaseError {
    err.and_detail(|detail| {
        format!(
            "{detail}\n--- replica {name} log (tail) ---\n{}",
            env.replica_log_tail(name, 30)
        )
    })
}

async fn op04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    env.start_replica("a", None, LEADER_FLAGS).await?;
    wait_holder(env, LEASE_NAME).await?;
    let leases: Api<Lease> = Api::namespaced(env.client(), LEASE_NAMESPACE);
    // Another holder takes the lease (what a partitioned leader finds when it comes back).
    // The holder renews every retry period, so the read-modify-write can lose the race:
    // a 409 Conflict means read again and retry, as any client of a Lease does.
    eventually("the lease taken by another holder", INIT_TIMEOUT, || {
        let leases = leases.clone();
        async move {
            let mut lease = leases
                .get(LEASE_NAME)
                .await
                .map_err(|e| CaseError::infra("getting the lease", e))?;
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some("thief_00000000-0000-0000-0000-000000000000".into());
            spec.lease_duration_seconds = Some(60);
            spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
            match leases
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => Ok(Probe::Done(())),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Ok(Probe::Pending(format!("conflict: {}", e.message)))
                }
                Err(e) => Err(CaseError::infra("taking the lease", e)),
            }
        }
    })
    .await?;
    let limit = LEASE_DURATION * 3;
    let started = Instant::now();
    loop {
        if !env.replica_alive("a") {
            break;
        }
        if started.elapsed() > limit {
            return Err(CaseError::with_detail(
                format!("expected the CCM to exit within {limit:?} of losing its lease"),
                env.replica_log_tail("a", 30),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = env.replica_log_tail("a", 20);
    ensure!(
        log.contains("leaderelection lost") || log.contains("lost"),
        "expected the CCM to log that it lost the lease, observed:\n{log}"
    );
    no_leaks(env)?;
    Ok(vec![])
}

async fn op06(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let bad = env.dir().join("malformed-cloud.conf");
    std::fs::write(&bad, "[Global\nauth-url = x\n")
        .map_err(|e| CaseError::infra("writing a malformed cloud config", e))?;
    let flag = format!("--cloud-config={}", bad.display());
    let message = failing_start(env, &[&flag]).await?;
    // Non-zero, not a particular code: upstream CCMs end on klog's Fatal (exit 255) or on
    // cobra's error (exit 1), cloud-provider `app/controllermanager.go`.
    ensure!(
        message.contains("exited") && !message.contains("exit status: 0"),
        "expected a non-zero exit for a malformed cloud config, observed: {message}"
    );
    let tail = ccm_harness::ccm::tail_of(&env.dir().join("ccm.log"), 200);
    // klog's Info and Warning lines (`I1126 ...`, `W1126 ...`) are start-up chatter every
    // upstream CCM prints before it reads its config; the error is what remains.
    let chatter = |l: &str| {
        let b = l.as_bytes();
        b.len() > 5 && matches!(b[0], b'I' | b'W') && b[1..5].iter().all(u8::is_ascii_digit)
    };
    let errors: Vec<&str> = tail
        .lines()
        .skip_while(|l| !l.starts_with("==> ") || !l.contains("malformed-cloud.conf"))
        .skip(1)
        .filter(|l| !l.trim().is_empty() && !chatter(l))
        .collect();
    // A short error, not a usage dump or a stack trace. Upstream's vSphere CCM reports the
    // parse error of each format it tried (YAML, then the legacy INI: cloud-provider-vsphere
    // `pkg/common/config/config.go` ReadConfig), so two lines are upstream behaviour.
    let noise = |l: &&str| l.contains("goroutine ") || l.contains("panic") || l.contains("Usage:");
    ensure!(
        (1..=2).contains(&errors.len()) && !errors.iter().any(noise),
        "expected the malformed config reported in one or two lines, observed {} lines: {errors:?}",
        errors.len()
    );
    let message = failing_start(env, &["--cloud-provider="]).await?;
    ensure!(
        message.contains("exited") && !message.contains("exit status: 0"),
        "expected a non-zero exit without --cloud-provider, observed: {message}"
    );
    no_leaks(env)?;
    Ok(vec![])
}

/// Credentials from a Secret the cloud config names. Upstream has this on vSphere only
/// (cloud-provider-vsphere `global.secretName`/`secretNamespace`, pkg/common/config/
/// config_yaml.go; read through pkg/common/credentialmanager when a login is needed,
/// pkg/common/connectionmanager/connectionmanager.go `Connect`): the CCM starts without
/// the Secret, keeps nodes tainted while it has no credentials, and initializes them once
/// the Secret exists, without a restart. (The in-tree OpenStack provider's `[Global]
/// secret-name` has no successor in cloud-provider-openstack, which reads cloud.conf only
/// from --cloud-config: pkg/openstack/openstack.go `ReadConfig`.)
async fn op07(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const SECRET: &str = "cloud-credentials";
    let (config, data) = env
        .cloud()
        .secret_credentials_config(LEASE_NAMESPACE, SECRET)
        .map_err(|why| CaseError::Skipped(format!("no credentials Secret: {why}")))?;
    let path = env.dir().join("cloud-secret.conf");
    std::fs::write(&path, config).map_err(|e| CaseError::infra("writing cloud config", e))?;
    let flag = format!("--cloud-config={}", path.display());
    env.start_ccm_with(&[&flag]).await?;
    env.add_node("node-a", NodeOptions::default()).await?;
    env.node_holds(
        "node-a",
        "the uninitialized taint while the Secret is missing",
        env.hold(),
        |n| {
            if has_uninitialized_taint(n) {
                Ok(())
            } else {
                Err(format!(
                    "initialized without credentials: {}",
                    describe_taints(n)
                ))
            }
        },
    )
    .await?;
    env.ccm_alive()?;
    let secrets: Api<Secret> = Api::namespaced(env.client(), LEASE_NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": LEASE_NAMESPACE},
        "stringData": data,
    }))
    .map_err(|e| CaseError::infra("building Secret", e))?;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| CaseError::infra("creating Secret", e))?;
    // The lookups failed for `hold`, so the controller's per-node backoff (client-go's
    // default, 5 ms doubling) may wait about as long again before the next try.
    env.wait_initialized("node-a", INIT_TIMEOUT + 2 * env.hold())
        .await?;
    no_leaks(env)?;
    Ok(vec![])
}

async fn op08(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    // Another component (a kube-controller-manager) holds the migration lease.
    let leases: Api<Lease> = Api::namespaced(env.client(), LEASE_NAMESPACE);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let foreign = Lease {
        metadata: ObjectMeta {
            name: Some(MIGRATION_LEASE.into()),
            namespace: Some(LEASE_NAMESPACE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("kube-controller-manager_simulated".into()),
            lease_duration_seconds: Some(600),
            renew_time: Some(now.clone()),
            acquire_time: Some(now),
            ..Default::default()
        }),
    };
    leases
        .create(&PostParams::default(), &foreign)
        .await
        .map_err(|e| CaseError::infra("creating the migration lease", e))?;
    let mut flags = LEADER_FLAGS.to_vec();
    flags.extend(["--enable-leader-migration", "--node-monitor-period=500ms"]);
    env.start_replica("a", None, &flags).await?;
    wait_holder(env, LEASE_NAME).await?;
    // cloud-node is never migrated: it runs under the main lease.
    let instance = env
        .add_node("node-a", NodeOptions::default())
        .await?
        .ok_or_else(|| CaseError::failed("node options created no instance"))?;
    env.wait_initialized("node-a", INIT_TIMEOUT)
        .await
        .map_err(|e| with_replica_log(env, "a", e))?;
    // cloud-node-lifecycle is migrated (default config): while the other component holds
    // the migration lease, a NotReady node whose instance is gone is left alone.
    env.stop_kubelet("node-a").await?;
    env.cloud().delete_instance(&instance.id)?;
    env.node_holds(
        "node-a",
        "no deletion while another component holds the migration lease",
        Duration::from_secs(3),
        |_| Ok(()),
    )
    .await?;
    // The other component steps down: the CCM takes the migration lease and the lifecycle
    // controller starts.
    leases
        .delete(MIGRATION_LEASE, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::infra("releasing the migration lease", e))?;
    let holder = eventually(
        "the CCM to hold the migration lease",
        INIT_TIMEOUT,
        || async {
            Ok(
                match lease_holder(env, LEASE_NAMESPACE, MIGRATION_LEASE).await? {
                    Some(h) if !h.starts_with("kube-controller-manager") => Probe::Done(h),
                    other => Probe::Pending(format!("holder {other:?}")),
                },
            )
        },
    )
    .await?;
    let main = lease_holder(env, LEASE_NAMESPACE, LEASE_NAME).await?;
    ensure!(
        main.as_deref() == Some(holder.as_str()),
        "expected one identity on both leases, observed main {main:?}, migration {holder:?}"
    );
    let nodes = env.nodes();
    eventually(
        "node-a deleted by the lifecycle controller",
        INIT_TIMEOUT,
        || {
            let nodes = nodes.clone();
            async move {
                Ok(
                    match nodes
                        .get_opt("node-a")
                        .await
                        .map_err(|e| CaseError::infra("getting node", e))?
                    {
                        None => Probe::Done(()),
                        Some(_) => Probe::Pending("node-a still there".into()),
                    },
                )
            }
        },
    )
    .await
    .map_err(|e| with_replica_log(env, "a", e))?;
    no_leaks(env)?;
    Ok(vec![])
}

/// OP-09: with `--use-service-account-credentials` each controller calls the API as a
/// ServiceAccount of its own in kube-system, got or created by the CCM, with tokens from
/// the TokenRequest API (k8s.io/cloud-provider options/options.go and
/// app/controllermanager.go; k8s.io/controller-manager pkg/clientbuilder
/// client_builder_dynamic.go): the cloud-node controller's writes come from
/// `system:serviceaccount:kube-system:node-controller`, not from the CCM's own user. The
/// CCM runs as a user of its own (a client certificate outside `system:masters`, allowed
/// everything by RBAC); the controllers' ServiceAccounts get their rights through their
/// group, as a provider's install manifests grant them (a real kube-apiserver's bootstrap
/// `system:controller:*` roles grant some too; the embedded server seeds none).
async fn op09(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const CCM_USER: &str = "system:serviceaccount:kube-system:cloud-controller-manager";
    const NODE_CONTROLLER: &str = "system:serviceaccount:kube-system:node-controller";
    let kubeconfig = env.kubeconfig_for_user(CCM_USER).await?;
    grant_all_to_group(env, "system:serviceaccounts:kube-system").await?;
    env.start_ccm_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        "--use-service-account-credentials",
    ])
    .await?;
    initialized_node(env, "node-a", NodeOptions::default()).await?;
    let node_writes: Vec<_> = env
        .ccm_writes()
        .into_iter()
        .filter(|e| e.resource == "nodes" && e.name.as_deref() == Some("node-a"))
        .collect();
    ensure!(
        !node_writes.is_empty(),
        "expected the CCM's writes to node-a in the audit log, observed none"
    );
    let by_others: Vec<String> = node_writes
        .iter()
        .filter(|e| e.user != NODE_CONTROLLER)
        .map(|e| format!("{} {} by {:?}", e.verb, e.path, e.user))
        .collect();
    ensure!(
        by_others.is_empty(),
        "expected every write to node-a from {NODE_CONTROLLER}, observed {by_others:?}"
    );
    let tokens = env
        .api_audit()
        .into_iter()
        .filter(|e| {
            e.verb == "create"
                && e.resource == "serviceaccounts"
                && e.subresource.as_deref() == Some("token")
                && e.name.as_deref() == Some("node-controller")
                && (200..300).contains(&e.status)
        })
        .count();
    ensure!(
        tokens >= 1,
        "expected a TokenRequest for the node-controller ServiceAccount, observed none"
    );
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(env.client(), LEASE_NAMESPACE);
    ensure!(
        accounts
            .get_opt("node-controller")
            .await
            .map_err(|e| CaseError::infra("getting the ServiceAccount", e))?
            .is_some(),
        "expected the ServiceAccount kube-system/node-controller, observed none"
    );
    no_leaks(env)?;
    Ok(vec![("token_requests".into(), tokens.to_string())])
}

/// A ClusterRole allowing everything, bound to `group`.
async fn grant_all_to_group(env: &Environment, group: &str) -> Result<(), CaseError> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    const NAME: &str = "ccm-conformance:controllers";
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": NAME},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}
        ]
    }))
    .map_err(|e| CaseError::infra("building the ClusterRole", e))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": NAME},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .map_err(|e| CaseError::infra("building the ClusterRoleBinding", e))?;
    Api::<ClusterRole>::all(env.client())
        .create(&PostParams::default(), &role)
        .await
        .map_err(|e| CaseError::infra("creating the ClusterRole", e))?;
    Api::<ClusterRoleBinding>::all(env.client())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| CaseError::infra("creating the ClusterRoleBinding", e))?;
    Ok(())
}

/// OP-05 (ccm-behaviour.md §6 item 17, the Kubernetes blog of 2025-02-14): a CCM must not
/// wait for a Ready node; in a fresh cluster every node is tainted uninitialized and
/// NotReady until it runs. (Where the CCM runs as a Pod its tolerations decide whether it
/// can be scheduled at all; the harness runs it as a process, so this case covers the part
/// the CCM itself owns: it initializes them all, and none has to become Ready first.)
async fn op05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
    for name in NODES {
        env.add_node(name, NodeOptions::default()).await?;
        env.set_node_ready(name, false).await?;
    }
    env.start_ccm().await?;
    let started = Instant::now();
    for name in NODES {
        let node = env.wait_initialized(name, INIT_TIMEOUT).await?;
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        ensure!(
            ready.as_deref() != Some("True"),
            "expected {name} still NotReady when initialized (the case must not pass by readiness), observed Ready={ready:?}"
        );
        ensure!(
            node.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some(),
            "expected {name} to get a providerID"
        );
    }
    Ok(vec![(
        "init_all_seconds".into(),
        format!("{:.3}", started.elapsed().as_secs_f64()),
    )])
}
