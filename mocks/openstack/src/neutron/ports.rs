//! Neutron ports, networks and subnets: read access (and port updates) with the filters
//! CCMs use — ports by `device_id` for node addresses (cloud-provider-openstack
//! `pkg/openstack/instances_addresses.go`), by `fixed_ips=ip_address=` for routes,
//! networks by `router:external` for load balancers.
//! Repeated filters are OR-ed, different filters AND-ed, as in Neutron.

// Handlers build their error replies early and pass them up as `Err(Response)`; boxing
// them would only add noise.
#![allow(clippy::result_large_err)]

use std::net::IpAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::common::{Pairs, bad_request, neutron_body, page, pairs};
use crate::Shared;
use crate::envelope::neutron_error;
use crate::state::{Network, Port, Subnet};
use crate::util::{iso_seconds, json, last, values};

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/network/v2.0/ports", get(list_ports))
        .route("/network/v2.0/ports/{id}", get(show_port).put(update_port))
        .route("/network/v2.0/networks", get(list_networks))
        .route("/network/v2.0/networks/{id}", get(show_network))
        .route("/network/v2.0/subnets", get(list_subnets))
        .route("/network/v2.0/subnets/{id}", get(show_subnet))
        .with_state(shared)
}

/// Whether `field` is one of the filter values (no values = no filter).
fn any_of(filter: &[&str], field: &str) -> bool {
    filter.is_empty() || filter.contains(&field)
}

fn parse_bool(field: &str, value: &str) -> Result<bool, Response> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad_request(&format!(
            "Invalid input for {field}. Reason: '{value}' is not a valid boolean value."
        ))),
    }
}

fn port_json(s: &Shared, port: &Port) -> Value {
    let fixed: Vec<Value> = port
        .fixed_ips
        .iter()
        .map(|ip| json!({"subnet_id": port.subnet_id, "ip_address": ip.to_string()}))
        .collect();
    json!({
        "id": port.id,
        "name": port.name,
        "description": "",
        "network_id": port.network_id,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "mac_address": port.mac,
        "admin_state_up": true,
        "status": port.status,
        "device_id": port.device_id,
        "device_owner": port.device_owner,
        "fixed_ips": fixed,
        "allowed_address_pairs": port
            .allowed_address_pairs
            .iter()
            .map(|(ip, mac)| json!({"ip_address": ip, "mac_address": mac}))
            .collect::<Vec<_>>(),
        "extra_dhcp_opts": [],
        "security_groups": [],
        "port_security_enabled": true,
        "binding:vnic_type": "normal",
        "tags": [],
        "created_at": iso_seconds(port.created),
        "updated_at": iso_seconds(port.updated),
        "revision_number": 1,
    })
}

/// `fixed_ips` filter values: `ip_address=X` and `subnet_id=Y` (each kind OR-ed, the kinds
/// AND-ed, as Neutron's `_get_ports_query` does).
struct FixedIpFilter {
    ips: Vec<IpAddr>,
    subnets: Vec<String>,
}

impl FixedIpFilter {
    fn parse(values: &[&str]) -> Result<Self, Response> {
        let mut filter = FixedIpFilter {
            ips: Vec::new(),
            subnets: Vec::new(),
        };
        for value in values {
            let invalid = || bad_request(&format!("Invalid input for fixed_ips: {value:?}"));
            let (key, v) = value.split_once('=').ok_or_else(invalid)?;
            match key {
                "ip_address" => filter.ips.push(v.trim().parse().map_err(|_| invalid())?),
                "subnet_id" => filter.subnets.push(v.to_string()),
                _ => return Err(invalid()),
            }
        }
        Ok(filter)
    }

    fn matches(&self, port: &Port) -> bool {
        (self.ips.is_empty() || port.fixed_ips.iter().any(|ip| self.ips.contains(ip)))
            && (self.subnets.is_empty()
                || (!port.fixed_ips.is_empty() && self.subnets.contains(&port.subnet_id)))
    }
}

async fn list_ports(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let fixed = match FixedIpFilter::parse(&values(&pairs, "fixed_ips")) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let device_ids = values(&pairs, "device_id");
    let (ids, network_ids, statuses) = (
        values(&pairs, "id"),
        values(&pairs, "network_id"),
        values(&pairs, "status"),
    );
    let (owners, macs) = (
        values(&pairs, "device_owner"),
        values(&pairs, "mac_address"),
    );
    let names = values(&pairs, "name");
    let items: Vec<(String, Value)> = {
        let cloud = s.cloud();
        // By device: go through the servers' port lists instead of scanning every port.
        let candidates: Vec<&Port> = if device_ids.is_empty() {
            cloud.ports.values().collect()
        } else {
            let mut ports: Vec<&Port> = device_ids
                .iter()
                .filter_map(|d| cloud.servers.get(*d))
                .flat_map(|server| server.port_ids.iter().filter_map(|id| cloud.ports.get(id)))
                .collect();
            // Devices that are not servers (load balancer VIPs, routers): scan.
            if device_ids.iter().any(|d| !cloud.servers.contains_key(*d)) {
                ports.extend(
                    cloud
                        .ports
                        .values()
                        .filter(|p| device_ids.contains(&p.device_id.as_str())),
                );
            }
            ports.sort_by(|a, b| a.id.cmp(&b.id));
            ports.dedup_by(|a, b| a.id == b.id);
            ports
        };
        candidates
            .into_iter()
            .filter(|p| {
                any_of(&ids, &p.id)
                    && any_of(&network_ids, &p.network_id)
                    && any_of(&statuses, &p.status)
                    && any_of(&owners, &p.device_owner)
                    && any_of(&macs, &p.mac)
                    && any_of(&names, &p.name)
                    && fixed.matches(p)
            })
            .map(|p| (p.id.clone(), port_json(&s, p)))
            .collect()
    };
    page(&s, "ports", &pairs, items).unwrap_or_else(|r| r)
}

async fn show_port(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let port = s.cloud().ports.get(&id).map(|p| port_json(&s, p));
    match port {
        Some(port) => json(StatusCode::OK, json!({ "port": port })),
        None => neutron_error(
            StatusCode::NOT_FOUND,
            "PortNotFound",
            &format!("Port {id} could not be found."),
        ),
    }
}

/// `PUT /v2.0/ports/{id}`: `name`, `description` and `allowed_address_pairs` (each an
/// `ip_address` that may be a CIDR, and an optional `mac_address` defaulting to the port's,
/// as Neutron's `allowedaddresspairs` extension does). cloud-provider-openstack adds a
/// route's pod CIDR to the node port's pairs (`routes.go` updateAllowedAddressPairs).
async fn update_port(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "port") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let pairs = match body.get("allowed_address_pairs") {
        None => None,
        Some(Value::Array(items)) => {
            let mut pairs = Vec::new();
            for item in items {
                let Some(ip) = item.get("ip_address").and_then(Value::as_str) else {
                    return bad_request(
                        "Invalid input for allowed_address_pairs: ip_address is required",
                    );
                };
                let valid = ip.parse::<IpAddr>().is_ok()
                    || ip.split_once('/').is_some_and(|(a, len)| {
                        let max = match a.parse::<IpAddr>() {
                            Ok(IpAddr::V4(_)) => 32,
                            Ok(IpAddr::V6(_)) => 128,
                            Err(_) => return false,
                        };
                        len.parse::<u8>().is_ok_and(|l| l <= max)
                    });
                if !valid {
                    return bad_request(&format!(
                        "Invalid input for allowed_address_pairs: '{ip}' is not a valid IP address"
                    ));
                }
                let mac = item
                    .get("mac_address")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                pairs.push((ip.to_string(), mac));
            }
            Some(pairs)
        }
        Some(_) => return bad_request("Invalid input for allowed_address_pairs: not a list"),
    };
    for key in body.keys() {
        if !matches!(
            key.as_str(),
            "allowed_address_pairs" | "name" | "description"
        ) {
            return bad_request(&format!("Cannot update read-only attribute {key}"));
        }
    }
    let port = {
        let mut cloud = s.cloud();
        let Some(port) = cloud.ports.get_mut(&id) else {
            return neutron_error(
                StatusCode::NOT_FOUND,
                "PortNotFound",
                &format!("Port {id} could not be found."),
            );
        };
        if let Some(pairs) = pairs {
            port.allowed_address_pairs = pairs
                .into_iter()
                .map(|(ip, mac)| (ip, mac.unwrap_or_else(|| port.mac.clone())))
                .collect();
        }
        if let Some(name) = body.get("name").and_then(Value::as_str) {
            port.name = name.to_string();
        }
        port.updated = jiff::Timestamp::now();
        port_json(&s, port)
    };
    json(StatusCode::OK, json!({ "port": port }))
}

fn network_json(s: &Shared, network: &Network) -> Value {
    json!({
        "id": network.id,
        "name": network.name,
        "description": "",
        "status": "ACTIVE",
        "admin_state_up": true,
        "subnets": [network.subnet_id],
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "shared": false,
        "router:external": network.external,
        "mtu": 1450,
        "port_security_enabled": true,
        "availability_zones": [s.config.default_az],
        "availability_zone_hints": [],
        "ipv4_address_scope": null,
        "ipv6_address_scope": null,
        "is_default": network.external,
        "tags": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "revision_number": 1,
    })
}

async fn list_networks(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let external = match last(&pairs, "router:external")
        .map(|v| parse_bool("router:external", v))
        .transpose()
    {
        Ok(e) => e,
        Err(r) => return r,
    };
    let (ids, names, statuses) = (
        values(&pairs, "id"),
        values(&pairs, "name"),
        values(&pairs, "status"),
    );
    let mut items: Vec<(String, Value)> = s
        .cloud()
        .networks
        .iter()
        .filter(|n| {
            any_of(&ids, &n.id)
                && any_of(&names, n.name)
                && any_of(&statuses, "ACTIVE")
                && external.is_none_or(|e| e == n.external)
        })
        .map(|n| (n.id.clone(), network_json(&s, n)))
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    page(&s, "networks", &pairs, items).unwrap_or_else(|r| r)
}

async fn show_network(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let network = s
        .cloud()
        .networks
        .iter()
        .find(|n| n.id == id)
        .map(|n| network_json(&s, n));
    match network {
        Some(n) => json(StatusCode::OK, json!({ "network": n })),
        None => neutron_error(
            StatusCode::NOT_FOUND,
            "NetworkNotFound",
            &format!("Network {id} could not be found."),
        ),
    }
}

fn subnet_json(s: &Shared, subnet: &Subnet) -> Value {
    json!({
        "id": subnet.id,
        "name": subnet.name,
        "description": "",
        "network_id": subnet.network_id,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "ip_version": 4,
        "cidr": subnet.cidr,
        "gateway_ip": subnet.gateway.to_string(),
        "allocation_pools": [{"start": subnet.first.to_string(), "end": subnet.last.to_string()}],
        "enable_dhcp": true,
        "dns_nameservers": [],
        "host_routes": [],
        "ipv6_address_mode": null,
        "ipv6_ra_mode": null,
        "subnetpool_id": null,
        "service_types": [],
        "tags": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "revision_number": 0,
    })
}

async fn list_subnets(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (ids, names, network_ids) = (
        values(&pairs, "id"),
        values(&pairs, "name"),
        values(&pairs, "network_id"),
    );
    let (cidrs, versions) = (values(&pairs, "cidr"), values(&pairs, "ip_version"));
    let mut items: Vec<(String, Value)> = s
        .cloud()
        .subnets
        .iter()
        .filter(|n| {
            any_of(&ids, &n.id)
                && any_of(&names, n.name)
                && any_of(&network_ids, &n.network_id)
                && any_of(&cidrs, n.cidr)
                && any_of(&versions, "4")
        })
        .map(|n| (n.id.clone(), subnet_json(&s, n)))
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    page(&s, "subnets", &pairs, items).unwrap_or_else(|r| r)
}

async fn show_subnet(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let subnet = s
        .cloud()
        .subnets
        .iter()
        .find(|n| n.id == id)
        .map(|n| subnet_json(&s, n));
    match subnet {
        Some(n) => json(StatusCode::OK, json!({ "subnet": n })),
        None => neutron_error(
            StatusCode::NOT_FOUND,
            "SubnetNotFound",
            &format!("Subnet {id} could not be found."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ServerSpec;
    use crate::testing::{BASE, Mock};

    /// What openstack-cloud-controller-manager's route support asks at start: the router's
    /// ports (`device_id=<router>`) name the networks it routes on; then the node's port
    /// by fixed IP on such a network (`routes.go` getRouterNetworkIDs, getPortByIP).
    #[tokio::test]
    async fn router_ports_name_the_routed_networks() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let router = m.admin().routers()[0].id.clone();
        let r = m
            .get(&format!("/network/v2.0/ports?device_id={router}"), &token)
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let ports = r.body["ports"].as_array().expect("ports").clone();
        let owners: Vec<&str> = ports
            .iter()
            .filter_map(|p| p["device_owner"].as_str())
            .collect();
        assert!(owners.contains(&"network:router_interface"), "{owners:?}");
        assert!(owners.contains(&"network:router_gateway"), "{owners:?}");
        let interface = ports
            .iter()
            .find(|p| p["device_owner"] == "network:router_interface")
            .expect("interface");
        assert_eq!(interface["fixed_ips"][0]["ip_address"], "127.10.0.1");
        let network = interface["network_id"]
            .as_str()
            .expect("network")
            .to_string();
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let r = m
            .get(
                &format!(
                    "/network/v2.0/ports?fixed_ips=ip_address%3D{}&network_id={network}",
                    node.internal_ips[0]
                ),
                &token,
            )
            .await;
        let found = r.body["ports"].as_array().expect("ports");
        assert_eq!(found.len(), 1, "{}", r.body);
        assert_eq!(found[0]["device_id"], node.id);
    }

    /// What openstack-cloud-controller-manager sends to let a node's port carry a route's
    /// pod CIDR (`routes.go` updateAllowedAddressPairs), and the refusals around it.
    #[tokio::test]
    async fn port_update_sets_allowed_address_pairs() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let r = m
            .get(
                &format!("/network/v2.0/ports?device_id={}", node.id),
                &token,
            )
            .await;
        let port = r.body["ports"][0]["id"].as_str().expect("port").to_string();
        let mac = r.body["ports"][0]["mac_address"].clone();
        let uri = format!("/network/v2.0/ports/{port}");
        let body = json!({"port": {"allowed_address_pairs": [{"ip_address": "10.244.1.0/24"}]}});
        let r = m.call("PUT", &uri, &token, body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(
            r.body["port"]["allowed_address_pairs"],
            json!([{"ip_address": "10.244.1.0/24", "mac_address": mac}])
        );
        let r = m.get(&uri, &token).await;
        assert_eq!(
            r.body["port"]["allowed_address_pairs"][0]["ip_address"],
            "10.244.1.0/24"
        );
        for bad in [
            json!({"port": {"allowed_address_pairs": [{"ip_address": "10.244.1.0/99"}]}}),
            json!({"port": {"allowed_address_pairs": "10.0.0.0/8"}}),
            json!({"port": {"fixed_ips": []}}),
            json!({"nope": {}}),
        ] {
            let r = m.call("PUT", &uri, &token, bad.clone()).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.body);
            assert_eq!(r.body["NeutronError"]["type"], "HTTPBadRequest", "{bad}");
        }
        // Nothing half-applied by the refused updates.
        let r = m.get(&uri, &token).await;
        assert_eq!(
            r.body["port"]["allowed_address_pairs"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        let r = m
            .call(
                "PUT",
                "/network/v2.0/ports/nope",
                &token,
                json!({"port": {"name": "x"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["NeutronError"]["type"], "PortNotFound");
    }

    #[tokio::test]
    async fn ports_by_device_id() {
        let m = Mock::seeded(3);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-2").expect("seeded");
        let r = m
            .get(
                &format!("/network/v2.0/ports?device_id={}", node.id),
                &token,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let ports = r.body["ports"].as_array().expect("ports");
        assert_eq!(ports.len(), 1);
        let port = &ports[0];
        assert_eq!(port["status"], "ACTIVE");
        assert_eq!(port["device_id"], node.id);
        assert_eq!(port["device_owner"], "compute:nova");
        assert_eq!(port["fixed_ips"][0]["ip_address"], node.internal_ips[0]);
        let subnet_id = port["fixed_ips"][0]["subnet_id"]
            .as_str()
            .expect("subnet")
            .to_string();
        let r = m
            .get(&format!("/network/v2.0/subnets/{subnet_id}"), &token)
            .await;
        assert_eq!(r.body["subnet"]["cidr"], "127.10.0.0/16");

        let id = port["id"].as_str().expect("id").to_string();
        let r = m.get(&format!("/network/v2.0/ports/{id}"), &token).await;
        assert_eq!(r.body["port"]["id"], id);
        let r = m.get("/network/v2.0/ports/nope", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["NeutronError"]["type"], "PortNotFound");
        assert_eq!(
            r.body["NeutronError"]["message"],
            "Port nope could not be found."
        );
        assert_eq!(r.body["NeutronError"]["detail"], "");
        let r = m.get("/network/v2.0/ports?device_id=unknown", &token).await;
        assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(0));
    }

    #[tokio::test]
    async fn ports_by_fixed_ip_network_and_status() {
        let m = Mock::seeded(3);
        let token = m.token().await;
        let a = m.admin().server_by_name("node-0").expect("a");
        let b = m.admin().server_by_name("node-1").expect("b");
        let uri = format!(
            "/network/v2.0/ports?fixed_ips=ip_address%3D{}&fixed_ips=ip_address={}",
            a.internal_ips[0], b.internal_ips[0]
        );
        let r = m.get(&uri, &token).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let mut devices: Vec<&str> = r.body["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .filter_map(|p| p["device_id"].as_str())
            .collect();
        devices.sort_unstable();
        let mut expected = vec![a.id.as_str(), b.id.as_str()];
        expected.sort_unstable();
        assert_eq!(devices, expected);

        let r = m.get("/network/v2.0/networks?name=private", &token).await;
        let private = r.body["networks"][0]["id"]
            .as_str()
            .expect("net")
            .to_string();
        let r = m
            .get(
                &format!("/network/v2.0/ports?network_id={private}&status=ACTIVE&device_owner=compute:nova"),
                &token,
            )
            .await;
        assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(3));
        let r = m.get("/network/v2.0/ports?status=DOWN", &token).await;
        assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(0));
        let r = m.get("/network/v2.0/ports?fixed_ips=bogus", &token).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["NeutronError"]["type"], "HTTPBadRequest");
    }

    #[tokio::test]
    async fn ports_paging() {
        let m = Mock::seeded(5);
        let token = m.token().await;
        let mut seen = 0;
        let mut uri = "/network/v2.0/ports?limit=2".to_string();
        for _ in 0..10 {
            let r = m.get(&uri, &token).await;
            seen += r.body["ports"].as_array().map(Vec::len).unwrap_or(0);
            match r.body["ports_links"][0]["href"].as_str() {
                Some(next) => uri = next.trim_start_matches(BASE).to_string(),
                None => break,
            }
        }
        assert_eq!(seen, 5 + crate::state::ROUTER_PORTS);
    }

    #[tokio::test]
    async fn networks_and_subnets() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m
            .get("/network/v2.0/networks?router:external=true", &token)
            .await;
        let nets = r.body["networks"].as_array().expect("nets");
        assert_eq!(nets.len(), 1);
        assert_eq!(nets[0]["name"], "public");
        assert_eq!(nets[0]["router:external"], true);
        let public = nets[0]["id"].as_str().expect("id").to_string();
        let r = m
            .get(
                &format!("/network/v2.0/subnets?network_id={public}"),
                &token,
            )
            .await;
        assert_eq!(r.body["subnets"][0]["cidr"], "127.20.0.0/16");
        let r = m
            .get(&format!("/network/v2.0/networks/{public}"), &token)
            .await;
        assert_eq!(r.body["network"]["name"], "public");
        let r = m.get("/network/v2.0/networks", &token).await;
        assert_eq!(r.body["networks"].as_array().map(Vec::len), Some(2));
        let r = m
            .get("/network/v2.0/networks?router:external=maybe", &token)
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m.get("/network/v2.0/networks/nope", &token).await;
        assert_eq!(r.body["NeutronError"]["type"], "NetworkNotFound");
        let r = m.get("/network/v2.0/subnets/nope", &token).await;
        assert_eq!(r.body["NeutronError"]["type"], "SubnetNotFound");
    }

    #[tokio::test]
    async fn deleted_server_takes_its_port_along() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let s = m
            .admin()
            .create_server(ServerSpec {
                name: "x".into(),
                ..Default::default()
            })
            .expect("create");
        m.admin().delete_server(&s.id).expect("delete");
        let r = m
            .get(&format!("/network/v2.0/ports?device_id={}", s.id), &token)
            .await;
        assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(0));
        let r = m.get("/network/v2.0/ports", &token).await;
        assert_eq!(
            r.body["ports"].as_array().map(Vec::len),
            Some(crate::state::ROUTER_PORTS),
            "only the router's ports are left"
        );
    }
}
