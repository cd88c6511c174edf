//! cloud-node-lifecycle-controller (kubernetes/cloud-provider controllers/nodelifecycle/
//! node_lifecycle_controller.go): every `--node-monitor-period` it looks at every Node.
//!
//! - Ready=True: remove the shutdown taint if present; the cloud is not asked.
//! - otherwise: ask the cloud whether the instance exists. An error means "don't know": the
//!   node is kept (deleting on API errors is the classic outage, k/k#71562). Gone: event
//!   `DeletingNode`, then DELETE the Node (`DeletingNodeFailed` warning if that fails,
//!   e.g. RBAC without `delete` on nodes, cloud-provider-openstack#3225; retried every
//!   period, since the node is still listed).
//!   Exists: if the instance is shut down, add `node.cloudprovider.kubernetes.io/shutdown`
//!   (NoSchedule). The taint is removed only once the node is Ready again.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Taint};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cloud::Instances;
use crate::controllers::events::{EventType, record};

/// Taint for nodes whose instance is shut down (cloud-provider api/well_known_taints.go).
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Event source of this controller.
pub const COMPONENT: &str = "cloud-node-lifecycle-controller";

/// What to do with one node, decided from its Ready condition and the cloud's answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Nothing,
    RemoveShutdownTaint,
    AddShutdownTaint,
    Delete,
}

pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

pub fn has_shutdown_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| t.key == SHUTDOWN_TAINT)
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// One node of `MonitorNodes`. `delete_on_error` is the TEST ONLY
/// `--testing-break=delete-nodes-on-cloud-errors`: an error from the cloud counts as "gone".
pub async fn decide<P: Instances>(cloud: &P, node: &Node, delete_on_error: bool) -> Decision {
    if is_ready(node) {
        return if has_shutdown_taint(node) {
            Decision::RemoveShutdownTaint
        } else {
            Decision::Nothing
        };
    }
    match cloud.instance_exists(node).await {
        Err(e) => {
            tracing::warn!(node = %node.name_any(), "error checking if node exists: {e}");
            if delete_on_error {
                Decision::Delete
            } else {
                Decision::Nothing
            }
        }
        Ok(false) => Decision::Delete,
        Ok(true) => match cloud.instance_shutdown(node).await {
            Ok(true) if !has_shutdown_taint(node) => Decision::AddShutdownTaint,
            Ok(_) => Decision::Nothing,
            Err(e) => {
                tracing::warn!(node = %node.name_any(), "error checking if node is shutdown: {e}");
                Decision::Nothing
            }
        },
    }
}

/// Runs `MonitorNodes` every `period` until the process ends.
pub async fn run<P: Instances>(
    client: Client,
    cloud: Arc<P>,
    period: Duration,
    delete_on_error: bool,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let events: Api<Event> = Api::namespaced(client, "default");
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let list = match nodes.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!("error listing nodes: {e}");
                continue;
            }
        };
        for node in list {
            let decision = decide(cloud.as_ref(), &node, delete_on_error).await;
            act(&nodes, &events, &node, decision).await;
        }
    }
}

async fn act(nodes: &Api<Node>, events: &Api<Event>, node: &Node, decision: Decision) {
    let name = node.name_any();
    match decision {
        Decision::Nothing => {}
        Decision::RemoveShutdownTaint | Decision::AddShutdownTaint => {
            let mut new: Vec<Taint> = taints(node)
                .into_iter()
                .filter(|t| t.key != SHUTDOWN_TAINT)
                .collect();
            if decision == Decision::AddShutdownTaint {
                new.push(Taint {
                    key: SHUTDOWN_TAINT.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                });
            }
            // Taints are an atomic list: patch the whole list, guarded by the resourceVersion
            // we read, as cloud-provider's node helpers do (a 409 retries next period).
            let patch = json!({
                "metadata": {"resourceVersion": node.resource_version()},
                "spec": {"taints": new},
            });
            if let Err(e) = nodes
                .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                tracing::warn!(node = %name, "updating the shutdown taint failed: {e}");
            }
        }
        Decision::Delete => {
            let message =
                format!("Deleting node {name} because it does not exist in the cloud provider");
            tracing::info!("{message}");
            record(
                events,
                node,
                COMPONENT,
                EventType::Normal,
                "DeletingNode",
                &message,
            )
            .await;
            if let Err(e) = nodes.delete(&name, &DeleteParams::default()).await {
                tracing::warn!(node = %name, "unable to delete node: {e}");
                // Upstream's wording (node_lifecycle_controller.go MonitorNodes); the next
                // period tries again, as upstream's wait.Until loop does.
                let message = format!("Failed deleting node {name}: {e}");
                record(
                    events,
                    node,
                    COMPONENT,
                    EventType::Warning,
                    "DeletingNodeFailed",
                    &message,
                )
                .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{CloudError, InstanceMetadata};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    /// A cloud that answers `exists` and `shutdown` as told.
    struct Fake {
        exists: Result<bool, ()>,
        shutdown: bool,
    }

    impl Instances for Fake {
        async fn instance_exists(&self, _: &Node) -> Result<bool, CloudError> {
            self.exists
                .map_err(|()| CloudError::Other("cloud down".into()))
        }
        async fn instance_shutdown(&self, _: &Node) -> Result<bool, CloudError> {
            Ok(self.shutdown)
        }
        async fn instance_metadata(
            &self,
            _: &Node,
        ) -> Result<Option<InstanceMetadata>, CloudError> {
            Ok(None)
        }
    }

    fn node(ready: &str, shutdown_taint: bool) -> Node {
        let taints = shutdown_taint.then(|| {
            vec![Taint {
                key: SHUTDOWN_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]
        });
        Node {
            spec: Some(NodeSpec {
                taints,
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn decisions_follow_upstream() {
        let gone = Fake {
            exists: Ok(false),
            shutdown: false,
        };
        let stopped = Fake {
            exists: Ok(true),
            shutdown: true,
        };
        let running = Fake {
            exists: Ok(true),
            shutdown: false,
        };
        let broken = Fake {
            exists: Err(()),
            shutdown: false,
        };
        // Ready nodes are never checked against the cloud (NL-02).
        assert_eq!(
            decide(&gone, &node("True", false), false).await,
            Decision::Nothing
        );
        assert_eq!(
            decide(&gone, &node("True", true), false).await,
            Decision::RemoveShutdownTaint
        );
        // NotReady and gone -> delete (NL-01); Unknown counts as not ready.
        assert_eq!(
            decide(&gone, &node("False", false), false).await,
            Decision::Delete
        );
        assert_eq!(
            decide(&gone, &node("Unknown", false), false).await,
            Decision::Delete
        );
        // Stopped -> taint once (NL-03); running but NotReady -> taint stays (NL-04).
        assert_eq!(
            decide(&stopped, &node("False", false), false).await,
            Decision::AddShutdownTaint
        );
        assert_eq!(
            decide(&stopped, &node("False", true), false).await,
            Decision::Nothing
        );
        assert_eq!(
            decide(&running, &node("False", true), false).await,
            Decision::Nothing
        );
        // Cloud errors never delete (NL-05).
        assert_eq!(
            decide(&broken, &node("Unknown", false), false).await,
            Decision::Nothing
        );
        // ... unless the testing break says an error means gone.
        assert_eq!(
            decide(&broken, &node("Unknown", false), true).await,
            Decision::Delete
        );
        assert_eq!(
            decide(&running, &node("False", false), true).await,
            Decision::Nothing
        );
    }
}
