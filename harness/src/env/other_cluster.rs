//! A second cluster on the same cloud: its own API server holding copies of this
//! cluster's Nodes and of some of its Services.
//!
//! Exists for LB-25 (two clusters with different `--cluster-name` in one cloud project,
//! cloud-provider-openstack#1273). Two real clusters never share Service objects, so a
//! second CCM watching this cluster's API server would see annotations the first CCM
//! wrote — such as cloud-provider-openstack's `loadbalancer.openstack.org/load-balancer-id`
//! — which no second cluster could ever see. A copy in a second API server is what a
//! second cluster really is: same namespace and name, its own UID and no annotations.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{ClusterApi, Environment, HARNESS_USER_AGENT, client_for};
use crate::error::CaseError;

/// The second cluster: pass `--kubeconfig=<kubeconfig>` to a replica to run a CCM for it.
pub struct OtherCluster {
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
}

impl OtherCluster {
    /// Services in the second cluster's `default` namespace.
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), "default")
    }
}

impl Environment {
    /// Starts a second API server of the run's kind (stopped at teardown) and copies into it every Node
    /// (name, labels, providerID, addresses, conditions: initialized, as the other
    /// cluster's own CCM left them) and the named Services of `default` (type, ports with
    /// their nodePorts, selector; no annotations, finalizers or status).
    pub async fn other_cluster(&mut self, services: &[&str]) -> Result<OtherCluster, CaseError> {
        let n = self.other_apiservers.len();
        let api = ClusterApi::start(
            &self.settings,
            &self.dir.join(format!("control-plane-other-{n}")),
        )
        .await?;
        let kubeconfig = self.dir.join(format!("kubeconfig-other-{n}"));
        api.write_kubeconfig(&kubeconfig)?;
        self.other_apiservers.push(api);
        let client = client_for(&kubeconfig, HARNESS_USER_AGENT).await?;

        let their_nodes: Api<Node> = Api::all(client.clone());
        for node in self
            .nodes()
            .list(&ListParams::default())
            .await
            .map_err(|e| CaseError::infra("listing nodes", e))?
            .items
        {
            let name = node.metadata.name.clone().unwrap_or_default();
            let copy: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": node.metadata.labels},
                "spec": {"providerID": node.spec.as_ref().and_then(|s| s.provider_id.clone())},
            }))
            .map_err(|e| CaseError::infra("copying node", e))?;
            their_nodes
                .create(&PostParams::default(), &copy)
                .await
                .map_err(|e| CaseError::infra("creating node in the second cluster", e))?;
            let status = node.status.as_ref();
            let patch = json!({"status": {
                "addresses": status.and_then(|s| s.addresses.clone()),
                "conditions": status.and_then(|s| s.conditions.clone()),
            }});
            their_nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| CaseError::infra("copying node status", e))?;
        }
        let theirs = Api::<Service>::namespaced(client.clone(), "default");
        for name in services {
            let svc = self
                .services()
                .get(name)
                .await
                .map_err(|e| CaseError::infra("getting service to copy", e))?;
            let spec = svc.spec.unwrap_or_default();
            let copy: Service = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name},
                "spec": {"type": spec.type_, "ports": spec.ports, "selector": spec.selector},
            }))
            .map_err(|e| CaseError::infra("copying service", e))?;
            theirs
                .create(&PostParams::default(), &copy)
                .await
                .map_err(|e| CaseError::infra("creating service in the second cluster", e))?;
        }
        Ok(OtherCluster { kubeconfig, client })
    }
}
