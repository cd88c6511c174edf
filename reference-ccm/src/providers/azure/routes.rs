//! Azure routes: pod CIDRs as routes of the configured route table.
//!
//! Follows cloud-provider-azure `pkg/provider/azure_routes.go`:
//! - the CCM always runs with `ipv6DualStackEnabled` (`azure.go` sets it), so a route is
//!   named `<node>____<CIDR without ':', '.', '/'>` (`mapNodeNameToRouteName`,
//!   `cidrtoRfc1035`, `consts.RouteNameFmt`) and the node is the part before `____`
//!   (`MapRouteNameToNodeName`);
//! - the next hop (`VirtualAppliance`) is the first private IP of the node's primary NIC
//!   of the CIDR's family (`getPrivateIPsForMachine`, `findFirstIPByFamily`), read from
//!   ARM rather than from the Node;
//! - writes replace the whole route table (`delayedRouteUpdater.updateRoutes`), which is
//!   created when missing (`createRouteTable`); they are serialized here (upstream batches
//!   them) and carry `If-Match`, re-reading on 412; nothing is written when the route is
//!   already there with the same prefix and next hop; a route of the node under the
//!   single-stack name `<node>` is dropped when its dual-stack one is written
//!   (`cleanupOutdatedRoutes`);
//! - delete drops the route and the node's single-stack-named route. Upstream's second
//!   delete also matches every route whose name merely starts with the node name (other
//!   nodes like `node-10` for `node-1`, and the node's other family); that is not copied.
//! - list answers every route of the table; an absent table is an empty list.

use serde_json::{Value, json};

use super::Azure;
use super::client::NETWORK_API;
use super::instances;
use crate::cloud::{CloudError, Route, Routes};

/// `consts.RouteNameSeparator`.
pub const SEPARATOR: &str = "____";

/// `cidrtoRfc1035`.
pub fn cidr_to_rfc1035(cidr: &str) -> String {
    cidr.chars()
        .filter(|c| !matches!(c, ':' | '.' | '/'))
        .collect()
}

/// `mapNodeNameToRouteName` with dual stack enabled.
pub fn route_name(node: &str, cidr: &str) -> String {
    format!("{node}{SEPARATOR}{}", cidr_to_rfc1035(cidr))
}

/// `MapRouteNameToNodeName` with dual stack enabled.
pub fn node_of_route(route_name: &str) -> &str {
    route_name.split(SEPARATOR).next().unwrap_or_default()
}

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or_default()
}

impl Azure {
    fn route_table_path(&self) -> String {
        self.resource_path(
            &self.config.route_table_resource_group,
            "Microsoft.Network/routeTables",
            &self.config.route_table_name,
        )
    }

    /// Reads the table, creating it first when missing.
    async fn route_table(&self) -> Result<Value, CloudError> {
        let path = self.route_table_path();
        if let Some(rt) = self.client.get_opt(&path, NETWORK_API, &[]).await? {
            return Ok(rt);
        }
        let body = json!({"name": self.config.route_table_name, "location": self.config.location, "properties": {}});
        self.client.put(&path, NETWORK_API, &body, None).await?;
        Ok(self.client.get(&path, NETWORK_API, &[]).await?)
    }

    /// Read-modify-write of the route list; `change` answers whether it changed anything.
    async fn update_routes(
        &self,
        change: impl Fn(&mut Vec<Value>) -> bool,
    ) -> Result<(), CloudError> {
        let _guard = self.route_lock.lock().await;
        let path = self.route_table_path();
        for attempt in 0..3 {
            let mut rt = self.route_table().await?;
            let mut routes = rt
                .pointer("/properties/routes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !change(&mut routes) {
                return Ok(());
            }
            if !rt["properties"].is_object() {
                rt["properties"] = json!({});
            }
            rt["properties"]["routes"] = json!(routes);
            let etag = rt.get("etag").and_then(Value::as_str).map(str::to_owned);
            match self
                .client
                .put(&path, NETWORK_API, &rt, etag.as_deref())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The next hop for a node: the first private IP of its primary NIC in the CIDR's family.
    async fn next_hop(&self, node: &str, cidr: &str) -> Result<String, CloudError> {
        let vm = self.get_vm(node).await?;
        let nic = self.primary_nic(&vm).await?;
        let v6 = cidr.contains(':');
        instances::private_ips(&nic)
            .into_iter()
            .find(|ip| ip.contains(':') == v6)
            .ok_or_else(|| {
                CloudError::Other("no match found matching the ipfamily requested".to_owned())
            })
    }
}

impl Routes for Azure {
    async fn list_routes(&self, _cluster: &str) -> Result<Vec<Route>, CloudError> {
        let Some(rt) = self
            .client
            .get_opt(&self.route_table_path(), NETWORK_API, &[])
            .await?
        else {
            return Ok(Vec::new());
        };
        Ok(rt
            .pointer("/properties/routes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let name = name_of(r).to_owned();
                let hop = r
                    .pointer("/properties/nextHopIpAddress")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Route {
                    target_node: node_of_route(&name).to_owned(),
                    target_node_addresses: if hop.is_empty() {
                        Vec::new()
                    } else {
                        vec![crate::address::addr(crate::address::INTERNAL_IP, hop)]
                    },
                    destination_cidr: r
                        .pointer("/properties/addressPrefix")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    name,
                    blackhole: false,
                }
            })
            .collect())
    }

    async fn create_route(
        &self,
        _cluster: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let hop = self
            .next_hop(&route.target_node, &route.destination_cidr)
            .await?;
        let name = route_name(&route.target_node, &route.destination_cidr);
        let legacy = route.target_node.clone();
        let wanted = json!({"name": name, "properties": {
            "addressPrefix": route.destination_cidr,
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": hop,
        }});
        self.update_routes(|routes| {
            let before = routes.len();
            routes.retain(|r| name_of(r) != legacy);
            let mut dirty = routes.len() != before;
            let existing = routes
                .iter()
                .position(|r| name_of(r).eq_ignore_ascii_case(&name));
            let same = existing.is_some_and(|i| {
                let p = &routes[i]["properties"];
                let s = |k: &str| {
                    p.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_ascii_lowercase()
                };
                s("addressPrefix") == route.destination_cidr.to_ascii_lowercase()
                    && s("nextHopIpAddress") == hop.to_ascii_lowercase()
            });
            if !same {
                if let Some(i) = existing {
                    routes.remove(i);
                }
                routes.push(wanted.clone());
                dirty = true;
            }
            dirty
        })
        .await
    }

    async fn delete_route(&self, _cluster: &str, route: &Route) -> Result<(), CloudError> {
        let name = route_name(&route.target_node, &route.destination_cidr);
        let legacy = route.target_node.clone();
        self.update_routes(|routes| {
            let before = routes.len();
            routes.retain(|r| {
                let n = name_of(r);
                !(n.eq_ignore_ascii_case(&name) || n.starts_with(&name) || n == legacy)
            });
            routes.len() != before
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_names_follow_upstream() {
        // azure_routes_test.go style examples.
        assert_eq!(route_name("node", "10.244.0.0/24"), "node____102440024");
        assert_eq!(route_name("node", "fd00:1::/64"), "node____fd00164");
        assert_eq!(node_of_route("node____102440024"), "node");
        assert_eq!(node_of_route("node"), "node");
    }
}
