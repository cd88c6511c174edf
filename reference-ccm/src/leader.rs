//! Leader election on a coordination.k8s.io/v1 Lease, the way client-go does it.
//!
//! Exists so two replicas never run controllers at once and so the harness can test
//! fail-over against the same lease upstream CCMs use. Algorithm of `client-go`
//! `tools/leaderelection/leaderelection.go` + `resourcelock/leaselock.go`: GET; if
//! NotFound, POST; else PUT with the read resourceVersion. A lease held by someone else
//! is taken only once it has not changed for `lease duration` as observed locally.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// Settings from the `--leader-elect-*` flags.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// `<hostname>_<uuid>` as upstream CCMs build their identity.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// Last lease spec seen and when it was first seen (client-go `observedTime`).
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// Blocks until this process holds the lease.
    pub async fn acquire(&mut self) {
        tracing::info!(lease = %format!("{}/{}", self.config.namespace, self.config.name), "attempting to acquire leader lease");
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(identity = %self.config.identity, "successfully acquired lease");
                    return;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!("error retrieving resource lock: {e}"),
            }
            tokio::time::sleep(jittered(self.config.retry_period)).await;
        }
    }

    /// Renews every retry period; returns when renewal failed for the renew deadline.
    pub async fn renew_until_lost(&mut self) {
        let mut last_success = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_success = Instant::now(),
                Ok(false) => {
                    tracing::warn!("lease is held by another identity");
                    return;
                }
                Err(e) => tracing::warn!("failed to renew lease: {e}"),
            }
            if last_success.elapsed() >= self.config.renew_deadline {
                return;
            }
        }
    }

    fn kube_err(&self, source: kube::Error) -> LeaderError {
        LeaderError::Kube {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// One client-go `tryAcquireOrRenew`. `Ok(true)` = we hold the lease now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = jiff::Timestamp::now();
        let duration_secs = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(existing) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.kube_err(e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observed = created.spec.map(|s| (s, Instant::now()));
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.kube_err(e)),
            };
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec);
        if changed {
            self.observed = Some((spec.clone(), Instant::now()));
        }
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let we_hold = holder == self.config.identity;
        let held_duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let observed_at = self
            .observed
            .as_ref()
            .map(|(_, t)| *t)
            .unwrap_or_else(Instant::now);
        if !holder.is_empty() && !we_hold && observed_at.elapsed() < held_duration {
            return Ok(false);
        }
        let mut new_spec = spec.clone();
        new_spec.holder_identity = Some(self.config.identity.clone());
        new_spec.lease_duration_seconds = Some(duration_secs);
        new_spec.renew_time = Some(MicroTime(now));
        if !we_hold {
            new_spec.acquire_time = Some(MicroTime(now));
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        let mut lease = existing;
        lease.spec = Some(new_spec);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observed = updated.spec.map(|s| (s, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.kube_err(e)),
        }
    }
}

/// Renews until the lease is lost, then exits the process with status 1, as upstream
/// (`klog.Fatalf("leaderelection lost")` in cloud-provider `app/controllermanager.go`):
/// controllers must never keep running without the lease.
pub async fn exit_when_lost(mut elector: LeaderElector) {
    elector.renew_until_lost().await;
    tracing::error!(
        lease = %format!("{}/{}", elector.config.namespace, elector.config.name),
        "leaderelection lost"
    );
    std::process::exit(1);
}

/// client-go `wait.Jitter(retryPeriod, 1.2)`.
fn jittered(d: Duration) -> Duration {
    let nanos = u64::from(uuid::Uuid::new_v4().as_u128() as u16);
    d + d.mul_f64(1.2 * (nanos as f64 / f64::from(u16::MAX)))
}
