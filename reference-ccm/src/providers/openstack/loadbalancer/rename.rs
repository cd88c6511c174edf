//! A load balancer that outlives a `--cluster-name` change: its Octavia ID is recorded in
//! the Service annotation `loadbalancer.openstack.org/load-balancer-id` after every ensure
//! (upstream `loadbalancer_service_patcher.go`), and one found through it whose name
//! carries another cluster's name is renamed, children first, with a Warning
//! `LoadBalancerRename` (upstream `pkg/openstack/loadbalancer_rename.go`).
//!
//! Exists apart from create/reconcile/delete because it is the one part of the load
//! balancer that writes to Kubernetes (the annotation, the Event) rather than to Octavia.

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use super::wire::{MonitorEnvelope, OctaviaLb};
use super::{EVENT_COMPONENT, EVENT_LB_RENAME, LB_ID_ANNOTATION, NAME_SCHEME, Write, service_key};
use crate::cloud::LbError;
use crate::options::LbNameScheme;
use crate::providers::openstack::OpenStack;
use crate::providers::openstack::client::Service as Endpoint;

impl OpenStack {
    /// Renames the listeners, pools and monitors named after `lb`, then `lb` itself, to
    /// `new_name` (upstream `renameLoadBalancer`: children first, so a failed rename is
    /// retried until the LB's own name changes). Children are renamed by replacing the LB
    /// name they embed (`listener_<i>_<lb>`); tags equal to the old name are replaced.
    pub(super) async fn rename_load_balancer(
        &self,
        service: &Service,
        lb: OctaviaLb,
        new_name: &str,
    ) -> Result<OctaviaLb, LbError> {
        let old_name = lb.name.clone();
        let message = format!(
            "Loadbalancer {} has a name of {old_name} with incorrect cluster-name component. Renaming it to {new_name}.",
            lb.id
        );
        tracing::info!(service = %service_key(service), "{message}");
        self.warn(service, EVENT_LB_RENAME, &message).await;
        let renamed = |child: &str| child.replacen(&old_name, new_name, 1);
        let retag = |tags: &[String]| -> Vec<String> {
            tags.iter()
                .map(|t| {
                    if *t == old_name {
                        new_name.to_owned()
                    } else {
                        t.clone()
                    }
                })
                .collect()
        };
        for listener in self.listeners(&lb.id).await? {
            if let Some(pool) = match listener.default_pool_id.as_deref() {
                Some(id) => self.pool(id).await?,
                None => None,
            } {
                if let Some(monitor_id) = pool.healthmonitor_id.as_deref().filter(|m| !m.is_empty())
                {
                    let monitor: MonitorEnvelope = self
                        .client
                        .get_json(
                            Endpoint::LoadBalancer,
                            &format!("/lbaas/healthmonitors/{monitor_id}"),
                            &[],
                        )
                        .await?;
                    if monitor.healthmonitor.name.contains(&old_name) {
                        let body = json!({"healthmonitor": {"name": renamed(&monitor.healthmonitor.name)}});
                        self.lb_write(
                            &lb.id,
                            &format!("/lbaas/healthmonitors/{monitor_id}"),
                            Write::Put(&body),
                        )
                        .await?;
                    }
                }
                if pool.name.contains(&old_name) {
                    let body = json!({"pool": {"name": renamed(&pool.name)}});
                    self.lb_write(
                        &lb.id,
                        &format!("/lbaas/pools/{}", pool.id),
                        Write::Put(&body),
                    )
                    .await?;
                }
            }
            if listener.name.contains(&old_name) || listener.tags.contains(&old_name) {
                let body = json!({"listener": {
                    "name": renamed(&listener.name),
                    "tags": retag(&listener.tags),
                }});
                self.lb_write(
                    &lb.id,
                    &format!("/lbaas/listeners/{}", listener.id),
                    Write::Put(&body),
                )
                .await?;
            }
        }
        let body = json!({"loadbalancer": {"name": new_name, "tags": retag(&lb.tags)}});
        self.lb_write(
            &lb.id,
            &format!("/lbaas/loadbalancers/{}", lb.id),
            Write::Put(&body),
        )
        .await
        .map(|_| ())?;
        self.wait_active(&lb.id).await
    }

    /// Writes the LB's ID into the Service's annotation when it is not there yet (one
    /// merge patch of `metadata.annotations`, as upstream's `servicePatcher`). Without a
    /// Kubernetes client (tests) or under the v2 test scheme, nothing is written.
    pub(super) async fn record_lb_id(&self, service: &Service, id: &str) -> Result<(), LbError> {
        let current = service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LB_ID_ANNOTATION));
        if current.map(String::as_str) == Some(id)
            || NAME_SCHEME.get().copied().unwrap_or_default() == LbNameScheme::V2
        {
            return Ok(());
        }
        let Some(client) = self.kube.0.get() else {
            return Ok(());
        };
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let api: kube::Api<Service> = kube::Api::namespaced(client.clone(), namespace);
        let patch = json!({"metadata": {"annotations": {LB_ID_ANNOTATION: id}}});
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| LbError::Other(format!("recording {LB_ID_ANNOTATION}={id}: {e}")))
    }

    /// A Warning Event on the Service from the provider's own recorder.
    async fn warn(&self, service: &Service, reason: &str, message: &str) {
        if let Some(client) = self.kube.0.get() {
            crate::controllers::events::record_service(
                client,
                service,
                EVENT_COMPONENT,
                crate::controllers::events::EventType::Warning,
                reason,
                message,
            )
            .await;
        }
    }
}
