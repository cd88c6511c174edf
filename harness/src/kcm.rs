//! A simulated kube-controller-manager for leader migration (KEP-2436, ccm-behaviour.md §3
//! B, cases UP-02/UP-03): there is no real KCM in the embedded cluster, so this task plays
//! its part — it holds the migration Lease (`cloud-provider-extraction-migration` in
//! kube-system) the way client-go's leader election does and, while it holds it, "runs"
//! the migrated controllers by recording when it started and stopped them. It touches no
//! cloud: any cloud call made while it ran a controller came from a second runner.
//!
//! Lease algorithm as in `client-go tools/leaderelection` (`tryAcquireOrRenew`): create when
//! missing; renew `renewTime` while holding; take over a lease of someone else only when
//! its `renewTime + leaseDurationSeconds` has passed. [`SimKcm::stop`] is a KCM process
//! going away (upgraded to `--cloud-provider=external`): it stops running the controllers at
//! once and does not release the Lease, so a CCM takes over after it expires.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The default migration Lease (controller-manager `pkg/leadermigration/options`).
pub const MIGRATION_LEASE: &str = "cloud-provider-extraction-migration";

/// How the simulated KCM contends for the Lease.
#[derive(Debug, Clone)]
pub struct KcmConfig {
    pub lease_name: String,
    pub namespace: String,
    pub lease_duration: Duration,
    pub retry_period: Duration,
    /// The controllers it runs while leading (e.g. `service-lb-controller`).
    pub controllers: Vec<String>,
}

impl Default for KcmConfig {
    fn default() -> Self {
        Self {
            lease_name: MIGRATION_LEASE.into(),
            namespace: "kube-system".into(),
            lease_duration: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
            controllers: vec![
                "node-route-controller".into(),
                "service-lb-controller".into(),
                "cloud-node-lifecycle-controller".into(),
            ],
        }
    }
}

/// One stretch of time the simulated KCM ran a controller.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub controller: String,
    pub started: Timestamp,
    /// `None` while still running.
    pub stopped: Option<Timestamp>,
}

#[derive(Default)]
struct State {
    runs: Vec<Run>,
    errors: Vec<String>,
}

/// A running simulated kube-controller-manager.
pub struct SimKcm {
    identity: String,
    state: Arc<Mutex<State>>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl SimKcm {
    /// Starts contending for the Lease with `client`.
    pub fn start(client: kube::Client, config: KcmConfig) -> SimKcm {
        let identity = format!("kcm-simulated_{}", uuid_like());
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = watch::channel(false);
        let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
        let task = tokio::spawn(contend(
            leases,
            config,
            identity.clone(),
            state.clone(),
            stopped,
        ));
        SimKcm {
            identity,
            state,
            stop,
            task: Some(task),
        }
    }

    /// The holder identity it writes into the Lease.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether it currently runs the migrated controllers.
    pub fn leading(&self) -> bool {
        lock(&self.state)
            .runs
            .last()
            .is_some_and(|r| r.stopped.is_none())
    }

    /// Every run so far.
    pub fn runs(&self) -> Vec<Run> {
        lock(&self.state).runs.clone()
    }

    /// API errors it met while contending (retried, as client-go does).
    pub fn errors(&self) -> Vec<String> {
        lock(&self.state).errors.clone()
    }

    /// The process goes away: controllers stop now, the Lease is left to expire.
    pub async fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        end_runs(&self.state);
    }
}

impl Drop for SimKcm {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn uuid_like() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Timestamp::now().as_nanosecond() as u128);
    format!("{:016x}", h.finish())
}

fn end_runs(state: &Mutex<State>) {
    let now = Timestamp::now();
    for r in lock(state).runs.iter_mut().filter(|r| r.stopped.is_none()) {
        r.stopped = Some(now);
    }
}

fn begin_runs(state: &Mutex<State>, controllers: &[String]) {
    let now = Timestamp::now();
    let mut s = lock(state);
    for c in controllers {
        s.runs.push(Run {
            controller: c.clone(),
            started: now,
            stopped: None,
        });
    }
}

async fn contend(
    leases: Api<Lease>,
    config: KcmConfig,
    identity: String,
    state: Arc<Mutex<State>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut leading = false;
    let mut tick = tokio::time::interval(config.retry_period);
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tick.tick() => {}
        }
        match try_acquire_or_renew(&leases, &config, &identity).await {
            Ok(now_leading) => {
                if now_leading && !leading {
                    begin_runs(&state, &config.controllers);
                } else if !now_leading && leading {
                    end_runs(&state);
                }
                leading = now_leading;
            }
            Err(e) => lock(&state).errors.push(e.to_string()),
        }
    }
}

/// One round of client-go's `tryAcquireOrRenew`; `Ok(true)` when holding the Lease.
async fn try_acquire_or_renew(
    leases: &Api<Lease>,
    config: &KcmConfig,
    identity: &str,
) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let secs = i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let fresh = |transitions: i32| LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(secs),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    };
    let Some(mut lease) = leases.get_opt(&config.lease_name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.lease_name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(fresh(0)),
        };
        return match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let expires = spec.renew_time.as_ref().map(|t| t.0).and_then(|t| {
        t.checked_add(Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        ))
        .ok()
    });
    let ours = holder == identity;
    if !ours && !holder.is_empty() && expires.is_some_and(|e| e > now) {
        return Ok(false);
    }
    let mut next = if ours {
        let mut s = spec.clone();
        s.renew_time = Some(MicroTime(now));
        s.lease_duration_seconds = Some(secs);
        s
    } else {
        fresh(spec.lease_transitions.unwrap_or(0) + 1)
    };
    if ours {
        next.holder_identity = Some(identity.to_string());
    }
    lease.spec = Some(next);
    match leases
        .replace(&config.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Every `(controller, instant)` where `at` falls inside one of `runs` of that controller.
pub fn ran_at(runs: &[Run], at: Timestamp) -> impl Iterator<Item = &Run> {
    runs.iter()
        .filter(move |r| r.started <= at && r.stopped.is_none_or(|s| at <= s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ran_at_finds_open_and_closed_runs() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let runs = vec![
            Run {
                controller: "service-lb-controller".into(),
                started: t(10),
                stopped: Some(t(20)),
            },
            Run {
                controller: "service-lb-controller".into(),
                started: t(30),
                stopped: None,
            },
        ];
        assert_eq!(ran_at(&runs, t(15)).count(), 1);
        assert_eq!(ran_at(&runs, t(25)).count(), 0);
        assert_eq!(ran_at(&runs, t(5)).count(), 0);
        assert_eq!(ran_at(&runs, t(40)).count(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn holds_the_lease_until_stopped_then_a_contender_takes_over() {
        use crate::wait::{Probe, eventually, holds_for};
        crate::install_crypto_provider();
        let api = mock_kube_apiserver::ApiServer::start(mock_kube_apiserver::Config::default())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig).unwrap();
        let client = crate::env::client_for(&kubeconfig, "kcm-test")
            .await
            .unwrap();
        let mut first = SimKcm::start(client.clone(), KcmConfig::default());
        let leads = |k: &SimKcm| {
            let leading = k.leading();
            async move {
                Ok(if leading {
                    Probe::Done(())
                } else {
                    Probe::Pending("not leading".into())
                })
            }
        };
        eventually("the first KCM to lead", Duration::from_secs(5), || {
            leads(&first)
        })
        .await
        .unwrap();
        let second = SimKcm::start(client.clone(), KcmConfig::default());
        holds_for("the second KCM to wait", Duration::from_secs(1), || {
            let leading = second.leading();
            async move {
                Ok(if leading {
                    Probe::Pending("second leads while the first renews".into())
                } else {
                    Probe::Done(())
                })
            }
        })
        .await
        .unwrap();
        first.stop().await;
        let stopped = first.runs()[0].stopped.expect("run closed on stop");
        eventually(
            "the second KCM to take over",
            Duration::from_secs(8),
            || leads(&second),
        )
        .await
        .unwrap();
        let taken = second.runs()[0].started;
        assert!(
            taken.duration_since(stopped).as_secs_f64() >= 2.0,
            "took over {:?} after the stop, before the 3 s lease expired",
            taken.duration_since(stopped)
        );
        assert_eq!(first.runs().len(), 3, "one run per migrated controller");
        assert!(second.errors().is_empty(), "{:?}", second.errors());
        drop(second);
        api.shutdown().await;
    }
}
