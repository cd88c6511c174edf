//! OpenStack routes: pod CIDRs as Neutron router extra routes.
//!
//! Exists for the node-route controller, following `kubernetes/cloud-provider-openstack`
//! `pkg/openstack/routes.go`: usable only with `[Route] router-id` and when
//! `GET /v2.0/extensions` lists `extraroute` or `extraroute-atomic`. Routes are the
//! router's `routes[{destination, nexthop}]`; with `extraroute-atomic` they are changed with
//! `PUT /routers/{id}/add_extraroutes` / `remove_extraroutes`, otherwise by writing the whole
//! list with `PUT /routers/{id}` (serialized here so two writers do not lose routes).
//! The next hop is the node's InternalIP of the destination's family. Not implemented:
//! `allowed_address_pairs` on the node's port (CPO does it too).

use serde::Deserialize;
use serde_json::json;

// `api` is also read by the provider's `mod.rs` (it holds the `RouteApi` it detected),
// so it imports nothing from this file.
pub(super) mod api;

pub use api::RouteApi;

use super::OpenStack;
use super::client::Service as Endpoint;
use crate::address::INTERNAL_IP;
use crate::cloud::{CloudError, Route, Routes};

#[derive(Debug, Deserialize)]
struct RouterEnvelope {
    router: Router,
}
#[derive(Debug, Deserialize)]
struct Router {
    #[serde(default)]
    routes: Vec<ExtraRoute>,
}
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct ExtraRoute {
    pub destination: String,
    pub nexthop: String,
}

/// The next hop for `route`: the target's InternalIP of the destination's family.
pub fn next_hop(route: &Route) -> Result<String, CloudError> {
    let v6 = route.destination_cidr.contains(':');
    route
        .target_node_addresses
        .iter()
        .filter(|a| a.type_ == INTERNAL_IP)
        .map(|a| a.address.clone())
        .find(|ip| ip.contains(':') == v6)
        .ok_or_else(|| {
            CloudError::Other(format!(
                "node {} has no {} InternalIP for route {}",
                route.target_node,
                if v6 { "IPv6" } else { "IPv4" },
                route.destination_cidr
            ))
        })
}

impl OpenStack {
    fn route_api(&self) -> Result<&RouteApi, CloudError> {
        self.routes
            .as_ref()
            .ok_or_else(|| CloudError::Other("routes are not supported".to_owned()))
    }

    async fn router_routes(&self) -> Result<Vec<ExtraRoute>, CloudError> {
        let router: RouterEnvelope = self
            .client
            .get_json(
                Endpoint::Network,
                &format!("/routers/{}", self.config.route.router_id),
                &[],
            )
            .await?;
        Ok(router.router.routes)
    }

    /// Adds or removes one route, atomically if possible.
    async fn change_route(&self, route: ExtraRoute, add: bool) -> Result<(), CloudError> {
        let api = self.route_api()?;
        let router = &self.config.route.router_id;
        if api.atomic {
            let action = if add {
                "add_extraroutes"
            } else {
                "remove_extraroutes"
            };
            self.client
                .put(
                    Endpoint::Network,
                    &format!("/routers/{router}/{action}"),
                    &json!({"router": {"routes": [route]}}),
                )
                .await?;
            return Ok(());
        }
        let _guard = api.lock.lock().await;
        let mut routes = self.router_routes().await?;
        let present = routes.contains(&route);
        if add == present {
            return Ok(());
        }
        if add {
            routes.push(route);
        } else {
            routes.retain(|r| *r != route);
        }
        self.client
            .put(
                Endpoint::Network,
                &format!("/routers/{router}"),
                &json!({"router": {"routes": routes}}),
            )
            .await?;
        Ok(())
    }
}

impl Routes for OpenStack {
    async fn list_routes(&self, _cluster: &str) -> Result<Vec<Route>, CloudError> {
        self.route_api()?;
        Ok(self
            .router_routes()
            .await?
            .into_iter()
            .map(|r| Route {
                name: format!("{}-{}", r.nexthop, r.destination),
                target_node: String::new(),
                target_node_addresses: vec![crate::address::addr(INTERNAL_IP, &r.nexthop)],
                destination_cidr: r.destination,
                blackhole: false,
            })
            .collect())
    }

    async fn create_route(
        &self,
        _cluster: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let nexthop = next_hop(route)?;
        self.change_route(
            ExtraRoute {
                destination: route.destination_cidr.clone(),
                nexthop,
            },
            true,
        )
        .await
    }

    async fn delete_route(&self, _cluster: &str, route: &Route) -> Result<(), CloudError> {
        let nexthop = next_hop(route)?;
        self.change_route(
            ExtraRoute {
                destination: route.destination_cidr.clone(),
                nexthop,
            },
            false,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::addr;

    #[test]
    fn next_hop_matches_family() {
        let route = Route {
            target_node: "n1".into(),
            target_node_addresses: vec![
                addr(crate::address::HOSTNAME, "n1"),
                addr(INTERNAL_IP, "fd00::5"),
                addr(INTERNAL_IP, "10.0.0.5"),
            ],
            destination_cidr: "10.244.1.0/24".into(),
            ..Default::default()
        };
        assert_eq!(next_hop(&route).ok().as_deref(), Some("10.0.0.5"));
        let v6 = Route {
            destination_cidr: "fd01::/64".into(),
            ..route.clone()
        };
        assert_eq!(next_hop(&v6).ok().as_deref(), Some("fd00::5"));
        let none = Route {
            target_node_addresses: vec![],
            ..route
        };
        assert!(next_hop(&none).is_err());
    }
}
