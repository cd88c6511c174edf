//! Nova (compute API v2.1): version discovery, servers (get, list, list with details and
//! Nova's filters and paging) and flavors — what a CCM's instance lookups call
//! (cloud-provider-openstack `pkg/openstack/instances.go`) — and the `reboot` server
//! action, so a case (or `openstack server reboot`) can reboot a node under the CCM: the
//! server is `REBOOT`/`HARD_REBOOT` for a while, then `ACTIVE`, its addresses unchanged. Microversions are honoured
//! where they change what a CCM reads (the embedded flavor from 2.47).

// Handlers build their error replies early and pass them up as `Err(Response)`; boxing
// them would only add noise.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use regex::Regex;
use serde_json::{Value, json};

use crate::Shared;
use crate::envelope::nova_error;
use crate::state::{
    AdminError, Cloud, FLAVORS, Flavor, PRIVATE_NETWORK, REBOOT_SECONDS, Server, flavor_by_id,
    vm_and_power_state,
};
use crate::util::{encode_query, iso_naive_micros, iso_seconds, json, last};

/// The microversion range we claim (2.96 is Nova 2024.1's maximum).
const MIN_VERSION: (u32, u32) = (2, 1);
const MAX_VERSION: (u32, u32) = (2, 96);
/// Nova's `osapi_max_limit` default.
const MAX_LIMIT: usize = 1000;

type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/compute", get(versions))
        .route("/compute/", get(versions))
        .route("/compute/v2.1", get(version))
        .route("/compute/v2.1/", get(version))
        .route("/compute/v2.1/servers", get(list_servers))
        .route("/compute/v2.1/servers/detail", get(list_servers_detail))
        .route("/compute/v2.1/servers/{id}", get(show_server))
        .route("/compute/v2.1/servers/{id}/action", post(server_action))
        .route("/compute/v2.1/flavors", get(list_flavors))
        .route("/compute/v2.1/flavors/detail", get(list_flavors_detail))
        .route("/compute/v2.1/flavors/{id}", get(show_flavor))
        .with_state(shared)
}

fn fmt_version((major, minor): (u32, u32)) -> String {
    format!("{major}.{minor}")
}

fn v21_doc(base: &str) -> Value {
    json!({
        "id": "v2.1",
        "status": "CURRENT",
        "version": fmt_version(MAX_VERSION),
        "min_version": fmt_version(MIN_VERSION),
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{base}/compute/v2.1/")}],
    })
}

async fn versions(State(s): State<Arc<Shared>>) -> Response {
    let v2 = json!({
        "id": "v2.0", "status": "SUPPORTED", "version": "", "min_version": "",
        "updated": "2011-01-21T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{}/compute/v2/", s.base)}],
    });
    json(StatusCode::OK, json!({"versions": [v2, v21_doc(&s.base)]}))
}

async fn version(State(s): State<Arc<Shared>>) -> Response {
    let mut doc = v21_doc(&s.base);
    doc["media-types"] = json!([{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}]);
    json(StatusCode::OK, json!({ "version": doc }))
}

fn parse_version(text: &str) -> Result<(u32, u32), Response> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("latest") {
        return Ok(MAX_VERSION);
    }
    let bad = || {
        nova_error(
            StatusCode::BAD_REQUEST,
            &format!("API Version String {text} is of invalid format."),
        )
    };
    let (major, minor) = text.split_once('.').ok_or_else(bad)?;
    let v = (
        major.parse().map_err(|_| bad())?,
        minor.parse().map_err(|_| bad())?,
    );
    if v < MIN_VERSION || v > MAX_VERSION {
        let message = format!(
            "Version {text} is not supported by the API. Minimum is {} and maximum is {}.",
            fmt_version(MIN_VERSION),
            fmt_version(MAX_VERSION)
        );
        return Err(nova_error(StatusCode::NOT_ACCEPTABLE, &message));
    }
    Ok(v)
}

/// The requested microversion: `OpenStack-API-Version: compute X.Y` wins over the legacy
/// `X-OpenStack-Nova-API-Version: X.Y`; none means 2.1 (`nova/api/openstack/wsgi.py`).
fn microversion(headers: &HeaderMap) -> Result<(u32, u32), Response> {
    if let Some(value) = headers
        .get("openstack-api-version")
        .and_then(|v| v.to_str().ok())
    {
        for item in value.split(',') {
            let mut words = item.split_whitespace();
            if words
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("compute"))
            {
                return parse_version(words.next().unwrap_or(""));
            }
        }
    }
    if let Some(value) = headers
        .get("x-openstack-nova-api-version")
        .and_then(|v| v.to_str().ok())
    {
        return parse_version(value);
    }
    Ok(MIN_VERSION)
}

/// A reply with the microversion headers Nova sends.
fn reply(mv: (u32, u32), status: StatusCode, body: Value) -> Response {
    let mut response = json(status, body);
    let v = fmt_version(mv);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("compute {v}")) {
        headers.insert("openstack-api-version", value);
    }
    if let Ok(value) = HeaderValue::from_str(&v) {
        headers.insert("x-openstack-nova-api-version", value);
    }
    headers.insert(
        "vary",
        HeaderValue::from_static("OpenStack-API-Version, X-OpenStack-Nova-API-Version"),
    );
    response
}

fn links(s: &Shared, kind: &str, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{}/{kind}/{id}", s.compute_url())},
        {"rel": "bookmark", "href": format!("{}/compute/{kind}/{id}", s.base)},
    ])
}

fn server_flavor(s: &Shared, flavor: &Flavor, mv: (u32, u32)) -> Value {
    if mv >= (2, 47) {
        json!({
            "vcpus": flavor.vcpus, "ram": flavor.ram_mb, "disk": flavor.disk_gb, "ephemeral": 0, "swap": 0,
            "original_name": flavor.name, "extra_specs": {},
        })
    } else {
        json!({
            "id": flavor.id,
            "links": [{"rel": "bookmark", "href": format!("{}/compute/flavors/{}", s.base, flavor.id)}],
        })
    }
}

fn server_detail(s: &Shared, cloud: &Cloud, server: &Server, mv: (u32, u32)) -> Value {
    let mut entries = Vec::new();
    let mut mac = String::new();
    for port in server.port_ids.iter().filter_map(|id| cloud.ports.get(id)) {
        if mac.is_empty() {
            mac = port.mac.clone();
        }
        for ip in &port.fixed_ips {
            entries.push(json!({
                "version": if ip.is_ipv6() { 6 } else { 4 }, "addr": ip.to_string(),
                "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port.mac,
            }));
        }
    }
    for ip in &server.floating_ips {
        entries.push(json!({
            "version": if ip.is_ipv6() { 6 } else { 4 }, "addr": ip.to_string(),
            "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": mac,
        }));
    }
    let mut addresses = serde_json::Map::new();
    if !entries.is_empty() {
        addresses.insert(PRIVATE_NETWORK.to_string(), Value::Array(entries));
    }
    let (vm_state, power_state) = vm_and_power_state(&server.status);
    let task_state = match server.status.as_str() {
        "BUILD" => json!("spawning"),
        "REBOOT" => json!("rebooting"),
        "HARD_REBOOT" => json!("rebooting_hard"),
        "MIGRATING" => json!("migrating"),
        "RESIZE" => json!("resize_prep"),
        _ => Value::Null,
    };
    json!({
        "id": server.id,
        "name": server.name,
        "status": server.status,
        "tenant_id": s.identity.project_id,
        "user_id": s.identity.user_id,
        "metadata": server.metadata,
        "hostId": s.host_id,
        "image": "",
        "flavor": server_flavor(s, server.flavor, mv),
        "created": iso_seconds(server.created),
        "updated": iso_seconds(server.updated),
        "addresses": addresses,
        "accessIPv4": server.access_ipv4.clone().unwrap_or_default(),
        "accessIPv6": server.access_ipv6.clone().unwrap_or_default(),
        "links": links(s, "servers", &server.id),
        "key_name": null,
        "progress": 0,
        "config_drive": "",
        "security_groups": [{"name": "default"}],
        "OS-DCF:diskConfig": "MANUAL",
        "OS-EXT-AZ:availability_zone": server.az,
        "OS-EXT-STS:vm_state": vm_state,
        "OS-EXT-STS:power_state": power_state,
        "OS-EXT-STS:task_state": task_state,
        "OS-SRV-USG:launched_at": iso_naive_micros(server.created),
        "OS-SRV-USG:terminated_at": null,
        "os-extended-volumes:volumes_attached": [],
    })
}

async fn show_server(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let mv = match microversion(&headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    let body = {
        let cloud = s.cloud();
        cloud
            .servers
            .get(&id)
            .map(|server| server_detail(&s, &cloud, server, mv))
    };
    match body {
        Some(server) => reply(mv, StatusCode::OK, json!({ "server": server })),
        None => nova_error(
            StatusCode::NOT_FOUND,
            &format!("Instance {id} could not be found."),
        ),
    }
}

/// `POST /servers/{id}/action`: one action per request body (`{"reboot": {"type":
/// "SOFT"}}`). Only `reboot` is modelled; other actions answer 400 as Nova does for an
/// action it does not know. A reboot answers 202 with no body
/// (nova/api/openstack/compute/servers.py `_action_reboot`).
async fn server_action(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let mv = match microversion(&headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    let doc: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return bad_request("Malformed request body"),
    };
    let Some((action, args)) = doc
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        return bad_request("Malformed request body");
    };
    if action != "reboot" {
        return bad_request(&format!("There is no such action: {action}"));
    }
    // The schema (nova/api/openstack/compute/schemas/servers.py `reboot`) takes the type
    // in upper, capitalised or lower case and nothing else.
    let hard = match args.get("type").and_then(Value::as_str) {
        Some("HARD" | "Hard" | "hard") => true,
        Some("SOFT" | "Soft" | "soft") => false,
        _ => {
            return bad_request(
                "Invalid input for field/attribute type. Value: None. None is not one of ['HARD', 'Hard', 'hard', 'SOFT', 'Soft', 'soft']",
            );
        }
    };
    let result =
        s.cloud()
            .reboot_server(&id, hard, mock_cloud::Mode::Seconds { t: REBOOT_SECONDS });
    match result {
        Ok(_) => {
            let mut response = reply(mv, StatusCode::ACCEPTED, Value::Null);
            *response.body_mut() = axum::body::Body::empty();
            response
                .headers_mut()
                .remove(axum::http::header::CONTENT_TYPE);
            response
        }
        Err(AdminError::NotFound(_)) => nova_error(
            StatusCode::NOT_FOUND,
            &format!("Instance {id} could not be found."),
        ),
        Err(e) => nova_error(StatusCode::CONFLICT, &e.to_string()),
    }
}

async fn list_servers(State(s): State<Arc<Shared>>, headers: HeaderMap, query: Pairs) -> Response {
    list(&s, &headers, query, false)
}

async fn list_servers_detail(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Pairs,
) -> Response {
    list(&s, &headers, query, true)
}

fn bad_request(message: &str) -> Response {
    nova_error(StatusCode::BAD_REQUEST, message)
}

/// `GET /servers[/detail]` with `name` (an unanchored regex search, as Nova does it),
/// `status`, `limit` and `marker`; newest first; a `servers_links` next link when the page
/// is full (`nova/api/openstack/common.py` `_get_collection_links`).
fn list(s: &Shared, headers: &HeaderMap, query: Pairs, detail: bool) -> Response {
    let mv = match microversion(headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    let pairs = match query {
        Ok(Query(pairs)) => pairs,
        Err(e) => return bad_request(&format!("Invalid query string: {e}")),
    };
    let name = match last(&pairs, "name").map(Regex::new).transpose() {
        Ok(re) => re,
        Err(e) => return bad_request(&format!("Invalid regular expression in name filter: {e}")),
    };
    let status = last(&pairs, "status").map(str::to_ascii_uppercase);
    let limit = match last(&pairs, "limit").map(|l| l.trim().parse::<i64>()) {
        None => MAX_LIMIT,
        Some(Ok(l)) if l >= 0 => usize::try_from(l).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
        Some(Ok(_)) => return bad_request("limit param must be positive"),
        Some(Err(_)) => return bad_request("limit param must be an integer"),
    };
    let marker = last(&pairs, "marker");

    let (items, last_id) = {
        let cloud = s.cloud();
        let upper = match marker {
            Some(m) => match cloud.servers.get(m) {
                Some(server) => server.seq,
                None => return bad_request(&format!("marker [{m}] not found")),
            },
            None => u64::MAX,
        };
        let mut items = Vec::new();
        let mut last_id = None;
        for id in cloud.order.range(..upper).rev().map(|(_, id)| id) {
            if items.len() >= limit {
                break;
            }
            let Some(server) = cloud.servers.get(id) else {
                continue;
            };
            if name.as_ref().is_some_and(|re| !re.is_match(&server.name)) {
                continue;
            }
            if status.as_ref().is_some_and(|st| *st != server.status) {
                continue;
            }
            items.push(if detail {
                server_detail(s, &cloud, server, mv)
            } else {
                json!({"id": server.id, "name": server.name, "links": links(s, "servers", &server.id)})
            });
            last_id = Some(server.id.clone());
        }
        (items, last_id)
    };

    let mut body = json!({});
    if let (true, Some(last_id)) = (limit > 0 && items.len() == limit, last_id) {
        let mut next: Vec<(String, String)> = pairs
            .iter()
            .filter(|(k, _)| k != "marker")
            .cloned()
            .collect();
        next.push(("marker".to_string(), last_id));
        let path = if detail { "servers/detail" } else { "servers" };
        body["servers_links"] = json!([{"rel": "next", "href": format!("{}/{path}?{}", s.compute_url(), encode_query(&next))}]);
    }
    body["servers"] = Value::Array(items);
    reply(mv, StatusCode::OK, body)
}

fn flavor_detail(s: &Shared, flavor: &Flavor, mv: (u32, u32)) -> Value {
    let mut doc = json!({
        "id": flavor.id,
        "name": flavor.name,
        "ram": flavor.ram_mb,
        "vcpus": flavor.vcpus,
        "disk": flavor.disk_gb,
        // Before 2.75 a zero swap is shown as "" (api-ref "List Flavors With Details").
        "swap": if mv >= (2, 75) { json!(0) } else { json!("") },
        "OS-FLV-EXT-DATA:ephemeral": 0,
        "OS-FLV-DISABLED:disabled": false,
        "os-flavor-access:is_public": true,
        "rxtx_factor": 1.0,
        "links": links(s, "flavors", flavor.id),
    });
    if mv >= (2, 55) {
        doc["description"] = Value::Null;
    }
    if mv >= (2, 61) {
        doc["extra_specs"] = json!({});
    }
    doc
}

async fn list_flavors(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let mv = match microversion(&headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    let flavors: Vec<Value> = FLAVORS
        .iter()
        .map(|f| json!({"id": f.id, "name": f.name, "links": links(&s, "flavors", f.id)}))
        .collect();
    reply(mv, StatusCode::OK, json!({ "flavors": flavors }))
}

async fn list_flavors_detail(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let mv = match microversion(&headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    let flavors: Vec<Value> = FLAVORS.iter().map(|f| flavor_detail(&s, f, mv)).collect();
    reply(mv, StatusCode::OK, json!({ "flavors": flavors }))
}

async fn show_flavor(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let mv = match microversion(&headers) {
        Ok(mv) => mv,
        Err(response) => return response,
    };
    match flavor_by_id(&id) {
        Some(f) => reply(
            mv,
            StatusCode::OK,
            json!({ "flavor": flavor_detail(&s, f, mv) }),
        ),
        None => nova_error(
            StatusCode::NOT_FOUND,
            &format!("Flavor {id} could not be found."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;
    use crate::state::ServerSpec;
    use crate::testing::{BASE, Mock};

    /// gophercloud v2 (`compute/v2/servers` `Server.UnmarshalJSON`) parses
    /// `OS-SRV-USG:launched_at` with `RFC3339MilliNoZ` and rejected the `...Z` this mock
    /// sent ("extra text: Z", failing every server list); Nova sends a naive datetime with
    /// microseconds (compute API reference, "List Servers Detailed" sample:
    /// `"OS-SRV-USG:launched_at": "2017-02-14T19:23:59.895661"`), while `created` and
    /// `updated` carry a `Z`.
    #[tokio::test]
    async fn timestamps_use_novas_formats() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let naive_micros =
            regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$").expect("regex");
        let zulu = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").expect("regex");
        let node = m.admin().server_by_name("node-0").expect("seeded");
        for (uri, server) in [
            ("/compute/v2.1/servers/detail".to_string(), "/servers/0"),
            (format!("/compute/v2.1/servers/{}", node.id), "/server"),
        ] {
            let r = m.get(&uri, &token).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            let s = r.body.pointer(server).expect("server");
            let launched = s["OS-SRV-USG:launched_at"].as_str().unwrap_or_default();
            assert!(
                naive_micros.is_match(launched),
                "{uri}: launched_at {launched:?}"
            );
            assert!(s["OS-SRV-USG:terminated_at"].is_null());
            for key in ["created", "updated"] {
                let v = s[key].as_str().unwrap_or_default();
                assert!(zulu.is_match(v), "{uri}: {key} {v:?}");
            }
        }
    }

    #[tokio::test]
    async fn version_documents_need_no_token() {
        let m = Mock::seeded(0);
        let r = m.send("GET", "/compute", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["versions"][1]["id"], "v2.1");
        assert_eq!(r.body["versions"][1]["status"], "CURRENT");
        let r = m.send("GET", "/compute/v2.1/", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["version"]["min_version"], "2.1");
    }

    #[tokio::test]
    async fn reboot_action_shows_reboot_then_active_with_the_same_addresses() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let action = format!("/compute/v2.1/servers/{}/action", node.id);
        let show = format!("/compute/v2.1/servers/{}", node.id);
        let before = m.get(&show, &token).await.body["server"]["addresses"].clone();

        let r = m
            .call("POST", &action, &token, json!({"reboot": {"type": "SOFT"}}))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        assert_eq!(r.body, Value::Null, "202 without a body");
        let s = m.get(&show, &token).await.body["server"].clone();
        assert_eq!(s["status"], "REBOOT");
        assert_eq!(s["OS-EXT-STS:task_state"], "rebooting");
        assert_eq!(s["OS-EXT-STS:vm_state"], "active");
        assert_eq!(s["addresses"], before);

        // A second soft reboot conflicts; a hard one takes over.
        let r = m
            .call("POST", &action, &token, json!({"reboot": {"type": "soft"}}))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert!(
            r.body["conflictingRequest"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("task_state rebooting")),
            "{}",
            r.body
        );
        let r = m
            .call("POST", &action, &token, json!({"reboot": {"type": "HARD"}}))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        let s = m.get(&show, &token).await.body["server"].clone();
        assert_eq!(
            (s["status"].as_str(), s["OS-EXT-STS:task_state"].as_str()),
            (Some("HARD_REBOOT"), Some("rebooting_hard"))
        );

        // An API reboot ends by itself after REBOOT_SECONDS.
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_secs_f64(REBOOT_SECONDS + 10.0);
        loop {
            let s = m.get(&show, &token).await.body["server"].clone();
            if s["status"] == "ACTIVE" {
                assert_eq!(s["OS-EXT-STS:task_state"], Value::Null);
                assert_eq!(s["addresses"], before);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still {}",
                s["status"]
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn reboot_held_by_the_admin_lasts_until_released() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let info = m
            .admin()
            .reboot_server(&node.id, false, true)
            .expect("reboot");
        assert_eq!(info.status, "REBOOT");
        let r = m
            .get("/compute/v2.1/servers/detail?status=REBOOT", &token)
            .await;
        assert_eq!(r.body["servers"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            m.admin().server(&node.id).map(|s| s.status),
            Some("REBOOT".to_string())
        );
        let info = m.admin().finish_reboot(&node.id).expect("finish");
        assert_eq!(info.status, "ACTIVE");
        assert_eq!(info.internal_ips, node.internal_ips);
        assert!(matches!(
            m.admin().finish_reboot(&node.id),
            Err(AdminError::InvalidState(_))
        ));
    }

    #[tokio::test]
    async fn reboot_errors_use_the_nova_envelope() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let action = format!("/compute/v2.1/servers/{}/action", node.id);
        for body in [
            json!({"reboot": {"type": "WARM"}}),
            json!({"reboot": {}}),
            json!({"reboot": {"type": "SOFT"}, "pause": null}),
        ] {
            let r = m.call("POST", &action, &token, body.clone()).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(r.body["badRequest"]["message"].is_string(), "{}", r.body);
        }
        let r = m
            .call("POST", &action, &token, json!({"pause": null}))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m
            .call(
                "POST",
                "/compute/v2.1/servers/nope/action",
                &token,
                json!({"reboot": {"type": "HARD"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert!(r.body["itemNotFound"].is_object(), "{}", r.body);
        m.admin()
            .update_server(
                &node.id,
                crate::state::ServerPatch {
                    status: Some("SHUTOFF".into()),
                    ..Default::default()
                },
            )
            .expect("stop");
        let r = m
            .call("POST", &action, &token, json!({"reboot": {"type": "SOFT"}}))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(
            r.body["conflictingRequest"]["message"],
            format!(
                "Cannot 'reboot' instance {} while it is in vm_state stopped",
                node.id
            )
        );
        // A hard reboot starts a stopped server.
        let r = m
            .call("POST", &action, &token, json!({"reboot": {"type": "HARD"}}))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED);
        // Nothing is rebooted without a token.
        let r = m
            .send(
                "POST",
                &action,
                &[("content-type", "application/json")],
                Body::from("{}"),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn show_server_in_2_1_shape() {
        let m = Mock::seeded(2);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-1").expect("seeded");
        let r = m
            .get(&format!("/compute/v2.1/servers/{}", node.id), &token)
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.headers["openstack-api-version"], "compute 2.1");
        let s = &r.body["server"];
        assert_eq!(s["id"], node.id);
        assert_eq!(s["name"], "node-1");
        assert_eq!(s["status"], "ACTIVE");
        assert_eq!(s["OS-EXT-AZ:availability_zone"], "nova");
        assert_eq!(s["OS-EXT-STS:vm_state"], "active");
        assert_eq!(s["OS-EXT-STS:power_state"], 1);
        assert_eq!(s["flavor"]["id"], "2");
        assert_eq!(
            s["flavor"]["links"][0]["href"],
            format!("{BASE}/compute/flavors/2")
        );
        assert_eq!(s["accessIPv4"], "");
        assert_eq!(s["tenant_id"], m.shared.identity.project_id);
        let addrs = s["addresses"]["private"].as_array().expect("addresses");
        assert_eq!(addrs.len(), 2);
        assert_eq!(addrs[0]["addr"], node.internal_ips[0]);
        assert_eq!(addrs[0]["OS-EXT-IPS:type"], "fixed");
        assert_eq!(addrs[0]["version"], 4);
        assert_eq!(addrs[1]["addr"], node.floating_ips[0]);
        assert_eq!(addrs[1]["OS-EXT-IPS:type"], "floating");
        assert!(
            addrs[1]["OS-EXT-IPS-MAC:mac_addr"]
                .as_str()
                .is_some_and(|m| m.starts_with("fa:16:3e:"))
        );
        assert_eq!(
            s["links"][0]["href"],
            format!("{BASE}/compute/v2.1/servers/{}", node.id)
        );
    }

    #[tokio::test]
    async fn microversion_2_47_embeds_the_flavor() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let node = m.admin().server_by_name("node-0").expect("seeded");
        let uri = format!("/compute/v2.1/servers/{}", node.id);
        for header in [
            ("openstack-api-version", "compute 2.47"),
            ("x-openstack-nova-api-version", "latest"),
        ] {
            let r = m.get_with(&uri, &token, &[header]).await;
            assert_eq!(r.status, StatusCode::OK);
            assert_eq!(r.body["server"]["flavor"]["original_name"], "m1.small");
            assert_eq!(r.body["server"]["flavor"]["vcpus"], 1);
        }
        let r = m
            .get_with(&uri, &token, &[("openstack-api-version", "compute 3.0")])
            .await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(r.body["computeFault"]["code"], 406);
        let r = m
            .get_with(&uri, &token, &[("openstack-api-version", "compute two")])
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.body["badRequest"]["message"].is_string());
    }

    #[tokio::test]
    async fn missing_server_is_item_not_found() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m.get("/compute/v2.1/servers/nope", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["itemNotFound"]["code"], 404);
        assert_eq!(
            r.body["itemNotFound"]["message"],
            "Instance nope could not be found."
        );
    }

    #[tokio::test]
    async fn name_filter_is_a_regex_search() {
        let m = Mock::seeded(12);
        let token = m.token().await;
        let r = m
            .get("/compute/v2.1/servers/detail?name=%5Enode-1%24", &token)
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let names: Vec<&str> = r.body["servers"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        assert_eq!(names, vec!["node-1"]);
        assert!(r.body["servers"][0]["addresses"].is_object());
        // Unanchored: node-1, node-10, node-11.
        let r = m.get("/compute/v2.1/servers?name=node-1", &token).await;
        assert_eq!(r.body["servers"].as_array().map(Vec::len), Some(3));
        assert!(r.body["servers"][0].get("addresses").is_none());
        let r = m
            .get("/compute/v2.1/servers/detail?name=%5E(node", &token)
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(
            r.body["badRequest"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("regular expression"))
        );
    }

    #[tokio::test]
    async fn status_filter() {
        let m = Mock::seeded(2);
        let token = m.token().await;
        m.admin()
            .create_server(ServerSpec {
                name: "off".into(),
                status: Some("SHUTOFF".into()),
                ..Default::default()
            })
            .expect("create");
        let r = m
            .get("/compute/v2.1/servers/detail?status=shutoff", &token)
            .await;
        let list = r.body["servers"].as_array().expect("list");
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["OS-EXT-STS:power_state"], 4);
        let r = m
            .get("/compute/v2.1/servers/detail?status=ACTIVE", &token)
            .await;
        assert_eq!(r.body["servers"].as_array().map(Vec::len), Some(2));
    }

    #[tokio::test]
    async fn paging_with_limit_and_marker_visits_every_server_once() {
        let m = Mock::seeded(7);
        let token = m.token().await;
        let mut seen = Vec::new();
        let mut uri = "/compute/v2.1/servers/detail?limit=3".to_string();
        for _ in 0..10 {
            let r = m.get(&uri, &token).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            seen.extend(
                r.body["servers"]
                    .as_array()
                    .expect("list")
                    .iter()
                    .filter_map(|s| s["name"].as_str().map(String::from)),
            );
            match r.body["servers_links"][0]["href"].as_str() {
                Some(next) => {
                    assert!(
                        next.starts_with(&format!("{BASE}/compute/v2.1/servers/detail?")),
                        "{next}"
                    );
                    uri = next.trim_start_matches(BASE).to_string();
                }
                None => break,
            }
        }
        // Newest first, as Nova sorts by created_at desc.
        let expected: Vec<String> = (0..7).rev().map(|i| format!("node-{i}")).collect();
        assert_eq!(seen, expected);
        let r = m.get("/compute/v2.1/servers?marker=nope", &token).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m.get("/compute/v2.1/servers?limit=-1", &token).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m.get("/compute/v2.1/servers?limit=x", &token).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn flavors() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m.get("/compute/v2.1/flavors/3", &token).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["flavor"]["name"], "m1.medium");
        assert_eq!(r.body["flavor"]["vcpus"], 2);
        assert_eq!(r.body["flavor"]["ram"], 4096);
        assert_eq!(r.body["flavor"]["swap"], "");
        let r = m.get("/compute/v2.1/flavors/detail", &token).await;
        assert_eq!(r.body["flavors"].as_array().map(Vec::len), Some(5));
        let r = m.get("/compute/v2.1/flavors", &token).await;
        assert_eq!(r.body["flavors"][0]["name"], "m1.tiny");
        let r = m.get("/compute/v2.1/flavors/99", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(
            r.body["itemNotFound"]["message"],
            "Flavor 99 could not be found."
        );
    }

    #[tokio::test]
    async fn unknown_route_and_method_use_nova_envelope() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m.get("/compute/v2.1/images", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["itemNotFound"]["code"], 404);
        let r = m
            .send(
                "DELETE",
                "/compute/v2.1/flavors/1",
                &[("x-auth-token", &token)],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.body["badMethod"]["code"], 405);
    }
}
