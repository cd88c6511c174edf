//! Neutron's L3 resources a CCM writes: floating IPs (a load balancer's public address,
//! cloud-provider-openstack `pkg/util/openstack/network.go`) and routers with extra routes
//! (pod CIDR routes, CPO `pkg/openstack/routes.go`). The seed has one router joining the
//! private network to the public one. Floating IPs come from the public pool the servers'
//! floating addresses use, so the two never collide.

#![allow(clippy::result_large_err)]

use std::net::IpAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::{Map, Value, json};

use super::common::{Pairs, bad_request, filtered_list, neutron_body, opt_str};
pub(crate) use super::l3_state::{FloatingIp, Route};
use super::l3_state::{RouterRes, in_cidr, parse_any_cidr};
use crate::Shared;
use crate::envelope::neutron_error;
use crate::ids::new_id;
use crate::state::Cloud;
use crate::util::{iso_seconds, json};

/// A Neutron error reply, `Err` side of the handlers.
type Reply = Result<Response, Response>;

fn not_found(kind: &str, what: &str, id: &str) -> Response {
    neutron_error(
        StatusCode::NOT_FOUND,
        kind,
        &format!("{what} {id} could not be found."),
    )
}

fn conflict(kind: &str, message: &str) -> Response {
    neutron_error(StatusCode::CONFLICT, kind, message)
}

fn fip_json(s: &Shared, cloud: &Cloud, f: &FloatingIp) -> Value {
    let router_id = f
        .port_id
        .as_ref()
        .and_then(|_| cloud.l3.routers.keys().next().cloned());
    json!({
        "id": f.id,
        "floating_ip_address": f.address.to_string(),
        "floating_network_id": f.network_id,
        "router_id": router_id,
        "port_id": f.port_id,
        "fixed_ip_address": f.fixed_ip.map(|ip| ip.to_string()),
        "status": if f.port_id.is_some() { "ACTIVE" } else { "DOWN" },
        "description": f.description,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "tags": [],
        "port_forwardings": [],
        "qos_policy_id": null,
        "dns_domain": "",
        "dns_name": "",
        "created_at": iso_seconds(f.created),
        "updated_at": iso_seconds(f.updated),
        "revision_number": 1,
    })
}

/// Resolves a `port_id` (+ optional `fixed_ip_address`) association.
fn association(
    cloud: &Cloud,
    fip_id: Option<&str>,
    port_id: &str,
    fixed: Option<&str>,
) -> Result<IpAddr, Response> {
    let port = cloud
        .ports
        .get(port_id)
        .ok_or_else(|| not_found("PortNotFound", "Port", port_id))?;
    let ip = match fixed {
        Some(f) => {
            let ip: IpAddr = f
                .parse()
                .map_err(|_| bad_request(&format!("Invalid input for fixed_ip_address: {f}")))?;
            if !port.fixed_ips.contains(&ip) {
                return Err(bad_request(&format!(
                    "Port {port_id} does not have fixed ip {ip}"
                )));
            }
            ip
        }
        None => *port
            .fixed_ips
            .first()
            .ok_or_else(|| bad_request(&format!("Port {port_id} does not have any fixed IPs")))?,
    };
    if let Some(other) = cloud.l3.floatingips.values().find(|f| {
        Some(f.id.as_str()) != fip_id
            && f.port_id.as_deref() == Some(port_id)
            && f.fixed_ip == Some(ip)
    }) {
        // neutron_lib FloatingIPPortAlreadyAssociated.
        return Err(conflict(
            "FloatingIPPortAlreadyAssociated",
            &format!(
                "Cannot associate floating IP {} ({}) with port {port_id} using fixed IP {ip}, as that fixed IP already has a floating IP on external network {}.",
                other.address, other.id, other.network_id
            ),
        ));
    }
    Ok(ip)
}

async fn create_fip(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match neutron_body(body, "floatingip") {
        Ok(b) => b,
        Err(r) => return r,
    };
    create_fip_inner(&s, &body).unwrap_or_else(|r| r)
}

fn create_fip_inner(s: &Shared, body: &Map<String, Value>) -> Reply {
    let network_id = opt_str(body, "floating_network_id")?
        .ok_or_else(|| bad_request("Invalid input for floating_network_id: missing"))?;
    let port_id = opt_str(body, "port_id")?;
    let fixed = opt_str(body, "fixed_ip_address")?;
    let wanted = opt_str(body, "floating_ip_address")?;
    let description = opt_str(body, "description")?.unwrap_or("").to_string();
    let mut cloud = s.cloud();
    let network = cloud
        .networks
        .iter()
        .find(|n| n.id == network_id)
        .ok_or_else(|| not_found("NetworkNotFound", "Network", network_id))?;
    if !network.external {
        return Err(bad_request(&format!(
            "Bad floatingip request: Network {network_id} is not a valid external network."
        )));
    }
    let fixed_ip = port_id
        .map(|p| association(&cloud, None, p, fixed))
        .transpose()?;
    let address = match wanted {
        Some(w) => {
            let ip: IpAddr = w
                .parse()
                .map_err(|_| bad_request(&format!("Invalid input for floating_ip_address: {w}")))?;
            if !in_cidr(ip, "127.20.0.0/16") {
                return Err(bad_request(&format!(
                    "IP address {ip} is not a valid IP for the specified subnet."
                )));
            }
            if !cloud.floating.take(ip) {
                return Err(conflict(
                    "IpAddressAlreadyAllocated",
                    &format!("IP address {ip} already allocated in subnet"),
                ));
            }
            ip
        }
        None => cloud.floating.allocate().map_err(|_| {
            conflict(
                "IpAddressGenerationFailure",
                "No more IP addresses available on network",
            )
        })?,
    };
    let now = jiff::Timestamp::now();
    let fip = FloatingIp {
        id: new_id(),
        address,
        network_id: network_id.to_string(),
        port_id: port_id.map(str::to_string),
        fixed_ip,
        description,
        created: now,
        updated: now,
    };
    let body = fip_json(s, &cloud, &fip);
    cloud.l3.floatingips.insert(fip.id.clone(), fip);
    Ok(json(StatusCode::CREATED, json!({ "floatingip": body })))
}

/// A floating IP on the external network associated with `port_id`, as a tenant tool (or
/// an earlier CCM) would have made it; its address.
pub(crate) fn seed_fip(cloud: &mut Cloud, port_id: &str) -> Result<IpAddr, String> {
    let network_id = cloud
        .networks
        .iter()
        .find(|n| n.external)
        .map(|n| n.id.clone())
        .ok_or("no external network")?;
    let fixed_ip = association(cloud, None, port_id, None)
        .map_err(|_| format!("port {port_id} cannot take a floating IP"))?;
    let address = cloud
        .floating
        .allocate()
        .map_err(|_| "no more floating IPs".to_string())?;
    let now = jiff::Timestamp::now();
    let fip = FloatingIp {
        id: new_id(),
        address,
        network_id,
        port_id: Some(port_id.to_string()),
        fixed_ip: Some(fixed_ip),
        description: String::new(),
        created: now,
        updated: now,
    };
    cloud.l3.floatingips.insert(fip.id.clone(), fip);
    Ok(address)
}

async fn list_fips(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    filtered_list(&s, "floatingips", query, |cloud| {
        let fips = cloud.l3.floatingips.values();
        fips.map(|f| (f.id.clone(), fip_json(&s, cloud, f)))
            .collect()
    })
}

async fn show_fip(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let cloud = s.cloud();
    match cloud.l3.floatingips.get(&id) {
        Some(f) => json(
            StatusCode::OK,
            json!({"floatingip": fip_json(&s, &cloud, f)}),
        ),
        None => not_found("FloatingIPNotFound", "Floating IP", &id),
    }
}

async fn update_fip(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "floatingip") {
        Ok(b) => b,
        Err(r) => return r,
    };
    update_fip_inner(&s, &id, &body).unwrap_or_else(|r| r)
}

fn update_fip_inner(s: &Shared, id: &str, body: &Map<String, Value>) -> Reply {
    for key in body.keys() {
        if !matches!(key.as_str(), "port_id" | "fixed_ip_address" | "description") {
            return Err(bad_request(&format!(
                "Cannot update read-only attribute {key}"
            )));
        }
    }
    let mut cloud = s.cloud();
    if !cloud.l3.floatingips.contains_key(id) {
        return Err(not_found("FloatingIPNotFound", "Floating IP", id));
    }
    let association = if body.contains_key("port_id") {
        match opt_str(body, "port_id")? {
            Some(port) => {
                let fixed = opt_str(body, "fixed_ip_address")?;
                Some(Some((
                    port.to_string(),
                    association(&cloud, Some(id), port, fixed)?,
                )))
            }
            None => Some(None),
        }
    } else {
        None
    };
    let description = opt_str(body, "description")?.map(str::to_string);
    let Some(fip) = cloud.l3.floatingips.get_mut(id) else {
        return Err(not_found("FloatingIPNotFound", "Floating IP", id));
    };
    match association {
        Some(Some((port, ip))) => {
            fip.port_id = Some(port);
            fip.fixed_ip = Some(ip);
        }
        Some(None) => {
            fip.port_id = None;
            fip.fixed_ip = None;
        }
        None => {}
    }
    if let Some(d) = description {
        fip.description = d;
    }
    fip.updated = jiff::Timestamp::now();
    let fip = fip.clone();
    Ok(json(
        StatusCode::OK,
        json!({"floatingip": fip_json(s, &cloud, &fip)}),
    ))
}

async fn delete_fip(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let mut cloud = s.cloud();
    match cloud.l3.floatingips.remove(&id) {
        Some(f) => {
            cloud.floating.release(&f.address);
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found("FloatingIPNotFound", "Floating IP", &id),
    }
}

fn router_json(s: &Shared, r: &RouterRes) -> Value {
    let routes: Vec<Value> = r
        .routes
        .iter()
        .map(|rt| json!({"destination": rt.destination, "nexthop": rt.nexthop.to_string()}))
        .collect();
    json!({
        "id": r.id,
        "name": r.name,
        "description": r.description,
        "status": "ACTIVE",
        "admin_state_up": r.admin_state_up,
        "external_gateway_info": {
            "network_id": r.external_network_id,
            "enable_snat": true,
            "external_fixed_ips": [{"subnet_id": r.external_subnet_id, "ip_address": r.external_ip.to_string()}],
        },
        "routes": routes,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "distributed": false,
        "ha": false,
        "availability_zones": [s.config.default_az],
        "availability_zone_hints": [],
        "flavor_id": null,
        "tags": [],
        "created_at": iso_seconds(r.created),
        "updated_at": iso_seconds(r.updated),
        "revision_number": 1,
    })
}

/// Parses `[{destination, nexthop}]`, checking what Neutron does: the destination is an
/// IPv4 or IPv6 CIDR and the nexthop an IP address (neutron-lib
/// `api/validators/__init__.py` `validate_hostroutes`), the nexthop is on a subnet the
/// router is attached to (`neutron/db/extraroute_db.py` `_validate_routes_nexthop`).
/// Beyond that the mock rejects a nexthop of the other family than the destination
/// (an IPv4 prefix via an IPv6 router) with the same `InvalidRoutes` 400, since no
/// router interface could forward it.
fn parse_routes(router: &RouterRes, value: &Value) -> Result<Vec<Route>, Response> {
    let list = value
        .as_array()
        .ok_or_else(|| bad_request("Invalid input for routes: expected a list"))?;
    let invalid = |item: &Value, reason: &str| {
        neutron_error(
            StatusCode::BAD_REQUEST,
            "InvalidRoutes",
            &format!("Invalid format for routes: {item}, {reason}"),
        )
    };
    let mut out = Vec::new();
    for item in list {
        let destination = item["destination"].as_str().unwrap_or_default();
        let nexthop = item["nexthop"].as_str().unwrap_or_default();
        let Some((net, len)) = parse_any_cidr(destination) else {
            return Err(bad_request(&format!(
                "Invalid input for routes. Reason: '{destination}' is not a valid IP subnet."
            )));
        };
        let Ok(hop) = nexthop.parse::<IpAddr>() else {
            return Err(bad_request(&format!(
                "Invalid input for routes. Reason: '{nexthop}' is not a valid IP address."
            )));
        };
        if hop.is_ipv6() != net.is_ipv6() {
            return Err(invalid(
                item,
                "the nexthop is not of the destination's IP version",
            ));
        }
        if !router.interface_cidrs.iter().any(|c| in_cidr(hop, c)) {
            return Err(invalid(item, "the nexthop is not connected with router"));
        }
        let route = Route {
            destination: format!("{net}/{len}"),
            nexthop: hop,
        };
        if !out.contains(&route) {
            out.push(route);
        }
    }
    Ok(out)
}

async fn list_routers(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    filtered_list(&s, "routers", query, |cloud| {
        let routers = cloud.l3.routers.values();
        routers
            .map(|r| (r.id.clone(), router_json(&s, r)))
            .collect()
    })
}

async fn show_router(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match s.cloud().l3.routers.get(&id) {
        Some(r) => json(StatusCode::OK, json!({"router": router_json(&s, r)})),
        None => not_found("RouterNotFound", "Router", &id),
    }
}

async fn update_router(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "router") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut cloud = s.cloud();
    let Some(router) = cloud.l3.routers.get_mut(&id) else {
        return not_found("RouterNotFound", "Router", &id);
    };
    let mut next = router.clone();
    for (key, value) in &body {
        match (key.as_str(), value) {
            ("name", Value::String(v)) => next.name = v.clone(),
            ("description", Value::String(v)) => next.description = v.clone(),
            ("admin_state_up", Value::Bool(v)) => next.admin_state_up = *v,
            ("routes", v) => match parse_routes(router, v) {
                Ok(routes) => next.routes = routes,
                Err(r) => return r,
            },
            (key, value) => {
                return bad_request(&format!("Invalid input for {key}: {value}"));
            }
        }
    }
    next.updated = jiff::Timestamp::now();
    *router = next;
    json(StatusCode::OK, json!({"router": router_json(&s, router)}))
}

/// `PUT /routers/{id}/add_extraroutes` and `remove_extraroutes` (extension
/// `extraroute-atomic`): `{"router": {"routes": [...]}}`, answering the whole router.
async fn change_routes(
    s: &Shared,
    id: &str,
    body: Result<Bytes, BytesRejection>,
    add: bool,
) -> Response {
    let body = match neutron_body(body, "router") {
        Ok(b) => b,
        Err(r) => return r,
    };
    if body.keys().any(|k| k != "routes") {
        return bad_request("Only routes may be given to add_extraroutes/remove_extraroutes");
    }
    let mut cloud = s.cloud();
    let Some(router) = cloud.l3.routers.get_mut(id) else {
        return not_found("RouterNotFound", "Router", id);
    };
    let routes = match parse_routes(router, body.get("routes").unwrap_or(&Value::Null)) {
        Ok(r) => r,
        Err(r) => return r,
    };
    for route in routes {
        let present = router.routes.contains(&route);
        if add && !present {
            router.routes.push(route);
        } else if !add && present {
            router.routes.retain(|r| *r != route);
        }
    }
    router.updated = jiff::Timestamp::now();
    json(StatusCode::OK, json!({"router": router_json(s, router)}))
}

async fn add_routes(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    change_routes(&s, &id, body, true).await
}

async fn remove_routes(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    change_routes(&s, &id, body, false).await
}

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/network/v2.0/floatingips", get(list_fips).post(create_fip))
        .route(
            "/network/v2.0/floatingips/{id}",
            get(show_fip).put(update_fip).delete(delete_fip),
        )
        .route("/network/v2.0/routers", get(list_routers))
        .route(
            "/network/v2.0/routers/{id}",
            get(show_router).put(update_router),
        )
        .route(
            "/network/v2.0/routers/{id}/add_extraroutes",
            put(add_routes),
        )
        .route(
            "/network/v2.0/routers/{id}/remove_extraroutes",
            put(remove_routes),
        )
        .with_state(shared)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;
    use crate::testing::Mock;

    fn public(m: &Mock) -> String {
        m.shared.cloud().networks[1].id.clone()
    }

    #[tokio::test]
    async fn floating_ip_crud_association_and_filters() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let port = m
            .shared
            .cloud()
            .ports
            .values()
            .find(|p| p.device_owner == "compute:nova")
            .map(|p| p.id.clone())
            .expect("port");
        let fips = "/network/v2.0/floatingips";
        let r = m
            .call(
                "POST",
                fips,
                &token,
                json!({"floatingip": {"floating_network_id": public(&m), "port_id": port}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let fip = r.body["floatingip"].clone();
        // The seeded server already holds 127.20.0.10.
        assert_eq!(fip["floating_ip_address"], "127.20.0.11");
        assert_eq!(fip["fixed_ip_address"], "127.10.0.10");
        assert_eq!(fip["status"], "ACTIVE");
        assert!(fip["router_id"].is_string());
        let id = fip["id"].as_str().expect("id").to_string();
        let r = m
            .call(
                "POST",
                fips,
                &token,
                json!({"floatingip": {"floating_network_id": public(&m), "port_id": port}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(
            r.body["NeutronError"]["type"],
            "FloatingIPPortAlreadyAssociated"
        );

        let r = m.get(&format!("{fips}?port_id={port}"), &token).await;
        assert_eq!(r.body["floatingips"].as_array().map(Vec::len), Some(1));
        let r = m
            .get(
                &format!(
                    "{fips}?floating_ip_address=127.20.0.11&floating_network_id={}",
                    public(&m)
                ),
                &token,
            )
            .await;
        assert_eq!(r.body["floatingips"][0]["id"], id);
        let r = m.get(&format!("{fips}?port_id=other"), &token).await;
        assert_eq!(r.body["floatingips"].as_array().map(Vec::len), Some(0));

        // Disassociate, then associate again by PUT.
        let r = m
            .call(
                "PUT",
                &format!("{fips}/{id}"),
                &token,
                json!({"floatingip": {"port_id": null}}),
            )
            .await;
        assert_eq!(r.body["floatingip"]["status"], "DOWN");
        assert!(r.body["floatingip"]["fixed_ip_address"].is_null());
        let r = m
            .call(
                "PUT",
                &format!("{fips}/{id}"),
                &token,
                json!({"floatingip": {"port_id": port}}),
            )
            .await;
        assert_eq!(r.body["floatingip"]["port_id"], port);
        let r = m
            .call(
                "PUT",
                &format!("{fips}/{id}"),
                &token,
                json!({"floatingip": {"port_id": "nope"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["NeutronError"]["type"], "PortNotFound");
        let r = m
            .call(
                "PUT",
                &format!("{fips}/{id}"),
                &token,
                json!({"floatingip": {"floating_ip_address": "1.2.3.4"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);

        // An explicit address: taken -> 409, free -> used.
        let r = m.call("POST", fips, &token, json!({"floatingip": {"floating_network_id": public(&m), "floating_ip_address": "127.20.0.10"}})).await;
        assert_eq!(r.body["NeutronError"]["type"], "IpAddressAlreadyAllocated");
        let r = m.call("POST", fips, &token, json!({"floatingip": {"floating_network_id": public(&m), "floating_ip_address": "127.20.9.9"}})).await;
        assert_eq!(r.status, StatusCode::CREATED);
        let other = r.body["floatingip"]["id"].as_str().expect("id").to_string();
        let private = m.shared.cloud().networks[0].id.clone();
        let r = m
            .call(
                "POST",
                fips,
                &token,
                json!({"floatingip": {"floating_network_id": private}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m
            .send("POST", fips, &[("x-auth-token", &token)], "{nope")
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.body["NeutronError"].is_object());

        assert_eq!(m.admin().leaks().by_type["floatingips"].len(), 2);
        for fid in [&id, &other] {
            let r = m
                .send(
                    "DELETE",
                    &format!("{fips}/{fid}"),
                    &[("x-auth-token", &token)],
                    Body::empty(),
                )
                .await;
            assert_eq!(r.status, StatusCode::NO_CONTENT);
        }
        let r = m.get(&format!("{fips}/{id}"), &token).await;
        assert_eq!(r.body["NeutronError"]["type"], "FloatingIPNotFound");
        assert_eq!(m.admin().leaks().total, 0);
        // Released addresses can be taken again.
        let r = m.call("POST", fips, &token, json!({"floatingip": {"floating_network_id": public(&m), "floating_ip_address": "127.20.9.9"}})).await;
        assert_eq!(r.status, StatusCode::CREATED);
    }

    #[tokio::test]
    async fn router_extra_routes_add_remove_update() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m.get("/network/v2.0/routers?name=router1", &token).await;
        let router = r.body["routers"][0].clone();
        assert_eq!(router["external_gateway_info"]["network_id"], public(&m));
        assert_eq!(router["routes"], json!([]));
        let id = router["id"].as_str().expect("id").to_string();
        let add = format!("/network/v2.0/routers/{id}/add_extraroutes");
        let routes = json!({"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "127.10.0.10"},
            {"destination": "10.244.1.0/24", "nexthop": "127.10.0.11"}]}});
        let r = m.call("PUT", &add, &token, routes.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["router"]["routes"].as_array().map(Vec::len), Some(2));
        // Adding again is a no-op.
        let r = m.call("PUT", &add, &token, routes).await;
        assert_eq!(r.body["router"]["routes"].as_array().map(Vec::len), Some(2));
        assert_eq!(m.admin().leaks().by_type["extra_routes"].len(), 2);
        let r = m.call("PUT", &format!("/network/v2.0/routers/{id}/remove_extraroutes"), &token,
            json!({"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "127.10.0.10"}]}})).await;
        assert_eq!(
            r.body["router"]["routes"],
            json!([{"destination": "10.244.1.0/24", "nexthop": "127.10.0.11"}])
        );
        let r = m.call("PUT",
            &add,
            &token,
            json!({"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "8.8.8.8"}]}}),
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["NeutronError"]["type"], "InvalidRoutes");
        let r = m
            .call(
                "PUT",
                &add,
                &token,
                json!({"router": {"routes": [{"destination": "bogus", "nexthop": "127.10.0.1"}]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        // A full update replaces the routes.
        let r = m
            .call(
                "PUT",
                &format!("/network/v2.0/routers/{id}"),
                &token,
                json!({"router": {"routes": [], "name": "r"}}),
            )
            .await;
        assert_eq!(r.body["router"]["routes"], json!([]));
        assert_eq!(r.body["router"]["name"], "r");
        assert_eq!(m.admin().leaks().total, 0);
        let r = m.get("/network/v2.0/routers/nope", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["NeutronError"]["type"], "RouterNotFound");
        let r = m
            .call(
                "PUT",
                "/network/v2.0/routers/nope/add_extraroutes",
                &token,
                json!({"router": {"routes": []}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
    }

    async fn router_path(m: &Mock, token: &str) -> String {
        let r = m.get("/network/v2.0/routers?name=router1", token).await;
        let id = r.body["routers"][0]["id"].as_str().expect("id").to_string();
        format!("/network/v2.0/routers/{id}")
    }

    #[tokio::test]
    async fn ipv6_extra_routes_add_update_remove() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let router = router_path(&m, &token).await;
        let v6 = json!({"destination": "fd00:10:244:1::/64", "nexthop": "fd00::9:1"});
        let v4 = json!({"destination": "10.244.1.0/24", "nexthop": "127.10.0.11"});
        let r = m
            .call(
                "PUT",
                &format!("{router}/add_extraroutes"),
                &token,
                json!({"router": {"routes": [v4.clone(), v6.clone()]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["router"]["routes"], json!([v4.clone(), v6.clone()]));
        // Non-canonical spelling is stored canonically, so removal by the canonical form works.
        let r = m
            .call(
                "PUT",
                &format!("{router}/remove_extraroutes"),
                &token,
                json!({"router": {"routes": [{"destination": "FD00:10:244:1:0::/64", "nexthop": "fd00:0::9:1"}]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["router"]["routes"], json!([v4.clone()]));
        // The whole-list update (plain `extraroute`) takes IPv6 too.
        let r = m
            .call(
                "PUT",
                &router,
                &token,
                json!({"router": {"routes": [v6.clone()]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["router"]["routes"], json!([v6]));
        // An IPv6 nexthop off the router's IPv6 subnet is not connected.
        let r = m
            .call(
                "PUT",
                &format!("{router}/add_extraroutes"),
                &token,
                json!({"router": {"routes": [{"destination": "fd01::/64", "nexthop": "fd01::1"}]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["NeutronError"]["type"], "InvalidRoutes");
        let message = r.body["NeutronError"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains("not connected with router"), "{message}");
        // A prefix length past 128 is not a subnet.
        let r = m
            .call(
                "PUT",
                &format!("{router}/add_extraroutes"),
                &token,
                json!({"router": {"routes": [{"destination": "fd01::/129", "nexthop": "fd00::1"}]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_ne!(r.body["NeutronError"]["type"], "InvalidRoutes");
    }

    #[tokio::test]
    async fn extra_route_family_mismatch_is_rejected() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let router = router_path(&m, &token).await;
        for (destination, nexthop) in [
            ("10.244.1.0/24", "fd00::9:1"),
            ("fd00:10:244:1::/64", "127.10.0.11"),
        ] {
            for (method, path, body) in [
                (
                    "PUT",
                    format!("{router}/add_extraroutes"),
                    json!({"router": {"routes": [{"destination": destination, "nexthop": nexthop}]}}),
                ),
                (
                    "PUT",
                    router.clone(),
                    json!({"router": {"routes": [{"destination": destination, "nexthop": nexthop}]}}),
                ),
            ] {
                let r = m.call(method, &path, &token, body).await;
                assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
                assert_eq!(r.body["NeutronError"]["type"], "InvalidRoutes");
                let message = r.body["NeutronError"]["message"]
                    .as_str()
                    .unwrap_or_default();
                assert!(message.contains("IP version"), "{message}");
            }
        }
        let r = m.get(&router, &token).await;
        assert_eq!(r.body["router"]["routes"], json!([]));
    }
}
