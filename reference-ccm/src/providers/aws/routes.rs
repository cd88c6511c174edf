//! AWS `Routes`: pod CIDR routes in the cluster's VPC route table, with an instance as
//! the target.
//!
//! Mirrors `kubernetes/cloud-provider-aws` `pkg/providers/v1/aws_routes.go`: the route
//! table is `[Global] RouteTableID` or the single table carrying the cluster tag (none or
//! several is an error); `ListRoutes` reports instance routes (node name = the instance's
//! private DNS name) and blackhole routes (target gone); `CreateRoute` turns the
//! instance's source/dest check off, deletes a blackhole route for the same CIDR, then
//! creates the route; `DeleteRoute` deletes by destination.

use super::Aws;
use super::client::{Api, filter_params, list_params};
use super::instances::{CLUSTER_TAG_PREFIX, Ec2Instance};
use crate::cloud::{CloudError, Route, Routes};
use crate::providers::xml::Element;

fn kv(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_owned(), v.into())
}

impl Aws {
    async fn route_table(&self) -> Result<Element, CloudError> {
        let params = if !self.config.route_table_id.is_empty() {
            list_params(
                "RouteTableId",
                std::slice::from_ref(&self.config.route_table_id),
            )
        } else {
            let mut filters = Vec::new();
            if !self.config.vpc.is_empty() {
                filters.push(("vpc-id", vec![self.config.vpc.clone()]));
            }
            // Tables tagged for the cluster (current tag key, any value); without a
            // cluster id nothing narrows the search and exactly one table must exist.
            if !self.config.cluster_id.is_empty() {
                filters.push((
                    "tag-key",
                    vec![format!("{CLUSTER_TAG_PREFIX}{}", self.config.cluster_id)],
                ));
            }
            filter_params(&filters)
        };
        let root = self
            .client
            .call(Api::Ec2, "DescribeRouteTables", &params)
            .await?;
        let mut tables: Vec<Element> = root.items(&["routeTableSet"]).cloned().collect();
        match tables.len() {
            1 => Ok(tables.remove(0)),
            0 => Err(CloudError::Other(format!(
                "unable to find route table for AWS cluster: {}",
                self.config.cluster_id
            ))),
            n => Err(CloudError::Other(format!(
                "found {n} matching AWS route tables for AWS cluster: {}",
                self.config.cluster_id
            ))),
        }
    }

    async fn instance_by_node_name(&self, name: &str) -> Result<Ec2Instance, CloudError> {
        let node = k8s_openapi::api::core::v1::Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        self.get_instance(&node).await
    }
}

impl Routes for Aws {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        let table = self.route_table().await?;
        let mut routes = Vec::new();
        let mut ids = Vec::new();
        for r in table.items(&["routeSet"]) {
            let destination = r.text_at(&["destinationCidrBlock"]).to_owned();
            let instance = r.text_at(&["instanceId"]).to_owned();
            if destination.is_empty() {
                continue;
            }
            if r.text_at(&["state"]) == "blackhole" {
                routes.push(Route {
                    name: format!("{cluster}-{destination}"),
                    destination_cidr: destination,
                    blackhole: true,
                    ..Default::default()
                });
                continue;
            }
            if instance.is_empty() {
                continue;
            }
            ids.push(instance.clone());
            routes.push(Route {
                name: format!("{cluster}-{destination}"),
                target_node: instance,
                destination_cidr: destination,
                ..Default::default()
            });
        }
        if ids.is_empty() {
            return Ok(routes);
        }
        ids.sort();
        ids.dedup();
        let instances = self
            .describe_instances(list_params("InstanceId", &ids))
            .await?;
        for route in routes.iter_mut().filter(|r| !r.blackhole) {
            // Upstream maps the target instance to its node name (private DNS name).
            match instances.iter().find(|i| i.id == route.target_node) {
                Some(i) => {
                    route.target_node = i.private_dns_name.clone();
                    route.target_node_addresses = i.node_addresses();
                }
                None => {
                    route.target_node.clear();
                    route.blackhole = true;
                }
            }
        }
        Ok(routes)
    }

    async fn create_route(
        &self,
        _cluster: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let instance = self.instance_by_node_name(&route.target_node).await?;
        let table = self.route_table().await?;
        let table_id = table.text_at(&["routeTableId"]).to_owned();
        // Source/dest check off, or the instance drops pod traffic (configureInstanceSourceDestCheck).
        self.client
            .call(
                Api::Ec2,
                "ModifyInstanceAttribute",
                &[
                    kv("InstanceId", instance.id.clone()),
                    kv("SourceDestCheck.Value", "false"),
                ],
            )
            .await?;
        let blackhole = table.items(&["routeSet"]).any(|r| {
            r.text_at(&["destinationCidrBlock"]) == route.destination_cidr
                && r.text_at(&["state"]) == "blackhole"
        });
        if blackhole {
            self.client
                .call(
                    Api::Ec2,
                    "DeleteRoute",
                    &[
                        kv("RouteTableId", table_id.clone()),
                        kv("DestinationCidrBlock", route.destination_cidr.clone()),
                    ],
                )
                .await?;
        }
        self.client
            .call(
                Api::Ec2,
                "CreateRoute",
                &[
                    kv("RouteTableId", table_id),
                    kv("DestinationCidrBlock", route.destination_cidr.clone()),
                    kv("InstanceId", instance.id),
                ],
            )
            .await?;
        Ok(())
    }

    async fn delete_route(&self, _cluster: &str, route: &Route) -> Result<(), CloudError> {
        let table = self.route_table().await?;
        let table_id = table.text_at(&["routeTableId"]).to_owned();
        match self
            .client
            .call(
                Api::Ec2,
                "DeleteRoute",
                &[
                    kv("RouteTableId", table_id),
                    kv("DestinationCidrBlock", route.destination_cidr.clone()),
                ],
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("InvalidRoute.NotFound") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
