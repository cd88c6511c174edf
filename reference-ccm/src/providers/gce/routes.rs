//! Pod-CIDR routes as `global/routes` with `nextHopInstance`, as
//! kubernetes/cloud-provider-gcp `providers/gce/gce_routes.go` manages them.
//!
//! Upstream, with where:
//! - `CreateRoute`: name `truncateClusterName(cluster) + "-" + nameHint` (the cluster name
//!   cut to 26 characters; the route controller passes the node's UID as the hint),
//!   `destRange` = the pod CIDR, `nextHopInstance` = `zones/<z>/instances/<n>` of the
//!   node's instance found by name in the managed zones (`getInstanceByName`),
//!   `network` = the network URL, priority 1000, description `k8s-node-route`; 409 is
//!   success;
//! - `ListRoutes`: one list with the k8s-cloud-provider filter
//!   `(name eq <prefix>-.*) (network eq <network URL>) (description eq k8s-node-route)`;
//!   the target node is the last segment of `nextHopInstance`;
//! - `DeleteRoute`: `DELETE global/routes/<name>`.
//!
//! Addition: a route GCE flags with the warning `NEXT_HOP_INSTANCE_NOT_FOUND` (its
//! instance is gone) is reported as a blackhole, so the route controller removes it;
//! upstream leaves that to the name-based reconcile.

use serde_json::{Value, json};

use super::Gce;
use super::client::last_segment;
use crate::cloud::{CloudError, Route, Routes};

/// `k8sNodeRouteTag`.
pub const ROUTE_DESCRIPTION: &str = "k8s-node-route";

/// `truncateClusterName`.
pub fn truncate_cluster_name(cluster: &str) -> &str {
    match cluster.char_indices().nth(26) {
        Some((i, _)) => &cluster[..i],
        None => cluster,
    }
}

/// The `ListRoutes` filter.
pub fn list_filter(cluster: &str, network_url: &str) -> String {
    format!(
        "(name eq {}-.*) (network eq {network_url}) (description eq {ROUTE_DESCRIPTION})",
        truncate_cluster_name(cluster)
    )
}

fn is_blackhole(route: &Value) -> bool {
    route
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|w| w.get("code").and_then(Value::as_str) == Some("NEXT_HOP_INSTANCE_NOT_FOUND"))
}

impl Routes for Gce {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        let routes = self
            .client
            .list(
                &format!("{}/global/routes", self.config.project_id),
                Some(&list_filter(cluster, &self.config.network_url)),
            )
            .await?;
        Ok(routes
            .iter()
            .map(|r| {
                let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
                Route {
                    name: field("name").to_owned(),
                    target_node: last_segment(field("nextHopInstance")).to_owned(),
                    target_node_addresses: Vec::new(),
                    destination_cidr: field("destRange").to_owned(),
                    blackhole: is_blackhole(r),
                }
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let (zone, instance) = self
            .find_instance(&route.target_node)
            .await?
            .ok_or(CloudError::InstanceNotFound)?;
        let name = instance
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&route.target_node);
        let body = json!({
            "name": format!("{}-{name_hint}", truncate_cluster_name(cluster)),
            "destRange": route.destination_cidr,
            "nextHopInstance": format!("zones/{zone}/instances/{name}"),
            "network": self.config.network_url,
            "priority": 1000,
            "description": ROUTE_DESCRIPTION,
        });
        match self
            .client
            .insert(&format!("{}/global/routes", self.config.project_id), &body)
            .await
        {
            Err(e) if !e.is_already_exists() => Err(e.into()),
            _ => Ok(()),
        }
    }

    async fn delete_route(&self, _cluster: &str, route: &Route) -> Result<(), CloudError> {
        self.client
            .delete(&format!(
                "{}/global/routes/{}",
                self.config.project_id, route.name
            ))
            .await
            .map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_and_truncation() {
        assert_eq!(
            truncate_cluster_name("a-very-long-cluster-name-that-goes-on"),
            "a-very-long-cluster-name-t"
        );
        assert_eq!(
            list_filter(
                "kubernetes",
                "http://h/compute/v1/projects/p/global/networks/default"
            ),
            "(name eq kubernetes-.*) (network eq http://h/compute/v1/projects/p/global/networks/default) (description eq k8s-node-route)"
        );
    }
}
