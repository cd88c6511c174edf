//! The Service load-balancer lifecycle as a black box (LB-01, LB-03, LB-04): what any
//! CCM's service controller must do, seen only through the Kubernetes API
//! (kubernetes/cloud-provider controllers/service/controller.go; upstream e2e
//! test/e2e/network/loadbalancer.go).
//!
//! Each case works in a namespace of its own, `ccm-conformance-<case>-<suffix>`, with one
//! Service selecting no pods, and deletes both at the end. What it cannot see without a
//! workload or cloud credentials: traffic through the load balancer (there are no pods to
//! answer) and the cloud side of a delete (only that the CCM let the Service go, which it
//! does once the cloud confirmed). Waits on the cloud are bounded by
//! [`Settings::cloud_timeout`](crate::settings::Settings::cloud_timeout), 20 min by default
//! as upstream e2e allows a real cloud.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::case::{CaseError, CaseMetrics};
use crate::invariants::LB_FINALIZER;
use crate::wait::{Probe, eventually_every};

/// How often the API is polled (upstream e2e polls every 2 s; a little faster keeps a
/// run against a quick cluster short).
const POLL: Duration = Duration::from_secs(1);
const SVC: &str = "lb";

/// The namespace and Service of one case; [`Fixture::cleanup`] deletes both.
struct Fixture {
    namespaces: Api<Namespace>,
    services: Api<Service>,
    events: Api<Event>,
    namespace: String,
    /// How long the cloud may take to create or delete the load balancer.
    timeout: Duration,
}

impl Fixture {
    async fn new(client: kube::Client, case: &str, timeout: Duration) -> Result<Self, CaseError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let namespace = format!(
            "ccm-conformance-{}-{:06x}",
            case.to_ascii_lowercase(),
            (nanos ^ std::process::id()) & 0xff_ffff
        );
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/created-by": "ccm-conformance"}}
        }))
        .map_err(|e| CaseError::infra("building Namespace", e))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|e| CaseError::infra("creating the case's namespace", e))?;
        Ok(Self {
            services: Api::namespaced(client.clone(), &namespace),
            events: Api::namespaced(client, &namespace),
            namespaces,
            namespace,
            timeout,
        })
    }

    async fn create_service(&self) -> Result<Service, CaseError> {
        let svc: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": SVC},
            "spec": {"type": "LoadBalancer", "selector": {"app": "ccm-conformance-none"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}
        }))
        .map_err(|e| CaseError::infra("building Service", e))?;
        self.services
            .create(&PostParams::default(), &svc)
            .await
            .map_err(|e| CaseError::infra("creating Service", e))
    }

    async fn get(&self) -> Result<Option<Service>, CaseError> {
        self.services
            .get_opt(SVC)
            .await
            .map_err(|e| CaseError::infra("getting Service", e))
    }

    async fn set_type(&self, ty: &str) -> Result<(), CaseError> {
        self.services
            .patch(
                SVC,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"type": ty}})),
            )
            .await
            .map(|_| ())
            .map_err(|e| CaseError::infra(&format!("changing the Service to {ty}"), e))
    }

    /// Reasons of the Service's events, oldest first.
    async fn reasons(&self) -> Result<Vec<String>, CaseError> {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Service,involvedObject.name={SVC}"
        ));
        let mut items = self
            .events
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|e| CaseError::infra("listing events", e))?;
        items.sort_by_key(|e| {
            (
                e.first_timestamp.clone().map(|t| t.0),
                e.metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok()),
            )
        });
        Ok(items.into_iter().filter_map(|e| e.reason).collect())
    }

    /// Waits for the Service's first ingress entry and returns the Service.
    async fn wait_ingress(&self) -> Result<Service, CaseError> {
        eventually_every("a load-balancer ingress", self.timeout, POLL, || async {
            Ok(match self.get().await? {
                Some(s) if !ingress(&s).is_empty() => Probe::Done(s),
                Some(s) => Probe::Pending(format!(
                    "no ingress yet; finalizers {:?}",
                    s.metadata.finalizers.unwrap_or_default()
                )),
                None => Probe::Pending("the Service is gone".into()),
            })
        })
        .await
    }

    async fn wait_reason(&self, reason: &str) -> Result<(), CaseError> {
        eventually_every(&format!("a {reason} event"), self.timeout, POLL, || async {
            let r = self.reasons().await?;
            Ok(if r.iter().any(|x| x == reason) {
                Probe::Done(())
            } else {
                Probe::Pending(format!("events {r:?}"))
            })
        })
        .await
    }

    /// Deletes the Service and waits until the API has let it go.
    async fn delete_and_wait_gone(&self) -> Result<(), CaseError> {
        self.services
            .delete(SVC, &DeleteParams::default())
            .await
            .map_err(|e| CaseError::infra("deleting Service", e))?;
        eventually_every("the Service to be gone", self.timeout, POLL, || async {
            Ok(match self.get().await? {
                None => Probe::Done(()),
                Some(s) => Probe::Pending(format!(
                    "still there (deleting: {}), finalizers {:?}",
                    s.metadata.deletion_timestamp.is_some(),
                    s.metadata.finalizers.unwrap_or_default()
                )),
            })
        })
        .await
    }

    /// Best effort, whatever the case's outcome: the Service (its finalizer, if the CCM
    /// is broken, keeps it until someone intervenes) and the namespace.
    async fn cleanup(self) {
        let _ = self.services.delete(SVC, &DeleteParams::default()).await;
        let _ = self
            .namespaces
            .delete(&self.namespace, &DeleteParams::default())
            .await;
    }
}

fn ingress(s: &Service) -> Vec<k8s_openapi::api::core::v1::LoadBalancerIngress> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
}

fn has_finalizer(s: &Service) -> bool {
    s.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LB_FINALIZER))
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(CaseError::failed(format!($($msg)+)));
        }
    };
}

/// Runs `body` on a fresh fixture and cleans up after it either way.
async fn with_fixture<F>(
    client: kube::Client,
    case: &str,
    timeout: Duration,
    body: F,
) -> Result<CaseMetrics, CaseError>
where
    F: AsyncFnOnce(&Fixture) -> Result<CaseMetrics, CaseError>,
{
    let fixture = Fixture::new(client, case, timeout).await?;
    let result = body(&fixture).await;
    fixture.cleanup().await;
    result
}

/// The checks LB-01 and LB-02 make on a newly ensured Service: the finalizer, the events
/// in order, an ingress with an ip (and ipMode VIP or Proxy, KEP-1860) or a hostname.
async fn ensured(f: &Fixture) -> Result<(Service, Duration), CaseError> {
    let started = std::time::Instant::now();
    f.create_service().await?;
    let svc = f.wait_ingress().await?;
    let ready = started.elapsed();
    ensure!(
        has_finalizer(&svc),
        "expected finalizer {LB_FINALIZER} on a Service with a load balancer, observed {:?}",
        svc.metadata.finalizers
    );
    f.wait_reason("EnsuredLoadBalancer").await?;
    let r = f.reasons().await?;
    let ensuring = r.iter().position(|x| x == "EnsuringLoadBalancer");
    let ensured = r.iter().position(|x| x == "EnsuredLoadBalancer");
    ensure!(
        ensuring.is_some() && ensuring < ensured,
        "expected EnsuringLoadBalancer before EnsuredLoadBalancer, observed {r:?}"
    );
    for entry in ingress(&svc) {
        match (&entry.ip, &entry.hostname) {
            (Some(_), _) => ensure!(
                matches!(entry.ip_mode.as_deref(), Some("VIP" | "Proxy")),
                "expected ipMode VIP or Proxy on an ip ingress, observed {entry:?}"
            ),
            (None, Some(_)) => ensure!(
                entry.ip_mode.is_none(),
                "expected no ipMode on a hostname-only ingress, observed {entry:?}"
            ),
            (None, None) => ensure!(
                false,
                "expected an ip or hostname on every ingress entry, observed {entry:?}"
            ),
        }
    }
    Ok((svc, ready))
}

/// LB-01 (with LB-02's ipMode rule), then the Service is deleted and must go.
pub(super) async fn create(
    client: kube::Client,
    timeout: Duration,
) -> Result<CaseMetrics, CaseError> {
    with_fixture(client, "LB-01", timeout, async |f: &Fixture| {
        let (svc, ready) = ensured(f).await?;
        f.delete_and_wait_gone().await?;
        let first = ingress(&svc).into_iter().next().unwrap_or_default();
        Ok(vec![
            (
                "ingress_ready_seconds".into(),
                format!("{:.3}", ready.as_secs_f64()),
            ),
            (
                "ingress".into(),
                first.ip.or(first.hostname).unwrap_or_default(),
            ),
            (
                "traffic".into(),
                "not checked: no workload in external mode".into(),
            ),
        ])
    })
    .await
}

/// LB-03: LoadBalancer → ClusterIP empties the ingress, removes the finalizer and reports
/// DeletingLoadBalancer/DeletedLoadBalancer; back to LoadBalancer adds the finalizer again.
pub(super) async fn to_cluster_ip_and_back(
    client: kube::Client,
    timeout: Duration,
) -> Result<CaseMetrics, CaseError> {
    with_fixture(client, "LB-03", timeout, async |f: &Fixture| {
        ensured(f).await?;
        f.set_type("ClusterIP").await?;
        eventually_every(
            "no ingress and no finalizer after the change to ClusterIP",
            f.timeout,
            POLL,
            || async {
                Ok(match f.get().await? {
                    Some(s) if ingress(&s).is_empty() && !has_finalizer(&s) => Probe::Done(()),
                    Some(s) => Probe::Pending(format!(
                        "ingress {:?}, finalizers {:?}",
                        ingress(&s),
                        s.metadata.finalizers
                    )),
                    None => Probe::Pending("the Service is gone".into()),
                })
            },
        )
        .await?;
        f.wait_reason("DeletedLoadBalancer").await?;
        let r = f.reasons().await?;
        let deleting = r.iter().position(|x| x == "DeletingLoadBalancer");
        let deleted = r.iter().position(|x| x == "DeletedLoadBalancer");
        ensure!(
            deleting.is_some() && deleting < deleted,
            "expected DeletingLoadBalancer before DeletedLoadBalancer, observed {r:?}"
        );
        f.set_type("LoadBalancer").await?;
        let svc = f.wait_ingress().await?;
        ensure!(
            has_finalizer(&svc),
            "expected finalizer {LB_FINALIZER} back after the change to LoadBalancer, observed {:?}",
            svc.metadata.finalizers
        );
        f.delete_and_wait_gone().await?;
        Ok(Vec::new())
    })
    .await
}

/// LB-04: a deleted Service stays (deletionTimestamp, finalizer) until the CCM confirmed
/// the cloud load balancer gone, then the API answers 404; the CCM reports it with
/// DeletedLoadBalancer.
pub(super) async fn delete_waits_for_the_cloud(
    client: kube::Client,
    timeout: Duration,
) -> Result<CaseMetrics, CaseError> {
    with_fixture(client, "LB-04", timeout, async |f: &Fixture| {
        ensured(f).await?;
        let started = std::time::Instant::now();
        f.delete_and_wait_gone().await?;
        let gone = started.elapsed();
        f.wait_reason("DeletedLoadBalancer").await?;
        Ok(vec![(
            "delete_seconds".into(),
            format!("{:.3}", gone.as_secs_f64()),
        )])
    })
    .await
}
