//! Octavia (load-balancer API v2) over HTTP: the discovery document, and load balancers,
//! listeners, pools, members and health monitors with the calls cloud-provider-openstack
//! makes (`pkg/util/openstack/loadbalancer.go`): the fully-populated create, `?name=`
//! lookups, batch member updates, cascade delete, the status tree. Served at both
//! `/load-balancer/v2` (openstacksdk) and `/load-balancer/v2.0` (gophercloud). The rules
//! (state machine, 409 while pending) live in `state`, the JSON views in `views`; this
//! module only speaks HTTP and WSME's error shape.

// Handlers pass early error replies up as `Err(Response)`; boxing them adds only noise.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{OriginalUri, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::Shared;
use crate::envelope::octavia_error;
use crate::octavia::error::LbError;
use crate::octavia::model::Kind;
use crate::util::{encode_query, json, last, values};

/// The newest API minor version we announce; CPO reads the last entry of the list, so it
/// is ascending (cloud-provider-openstack `pkg/openstack/loadbalancer.go`).
const MAX_MINOR: u32 = 27;

type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;
type Body = Result<Bytes, BytesRejection>;

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    let api = || {
        Router::new()
            .route("/", get(version))
            .route("/lbaas/loadbalancers", get(list_lbs).post(create_lb))
            .route(
                "/lbaas/loadbalancers/{id}",
                get(show_lb).put(update_lb).delete(delete_lb),
            )
            .route("/lbaas/loadbalancers/{id}/status", get(lb_status))
            .merge(top_level_child_routes(Kind::Listener, "/lbaas/listeners"))
            .merge(top_level_child_routes(Kind::Pool, "/lbaas/pools"))
            .merge(top_level_child_routes(
                Kind::Monitor,
                "/lbaas/healthmonitors",
            ))
            .route(
                "/lbaas/pools/{id}/members",
                get(list_members).post(create_member).put(batch_members),
            )
            .route(
                "/lbaas/pools/{pool}/members/{id}",
                get(show_member).put(update_member).delete(delete_member),
            )
            .with_state(shared.clone())
    };
    Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions))
        .with_state(shared.clone())
        .nest("/load-balancer/v2", api())
        .nest("/load-balancer/v2.0", api())
}

async fn versions(State(s): State<Arc<Shared>>) -> Response {
    let list: Vec<Value> = (0..=MAX_MINOR)
        .map(|minor| {
            json!({
                "id": format!("v2.{minor}"),
                "status": if minor == MAX_MINOR { "CURRENT" } else { "SUPPORTED" },
                "updated": "2016-12-11T00:00:00Z",
                "links": [{"href": format!("{}/load-balancer/v2", s.base), "rel": "self"}],
            })
        })
        .collect();
    json(StatusCode::OK, json!({ "versions": list }))
}

async fn version(State(s): State<Arc<Shared>>) -> Response {
    json(
        StatusCode::OK,
        json!({"version": {"id": format!("v2.{MAX_MINOR}"), "status": "CURRENT",
            "links": [{"href": format!("{}/load-balancer/v2", s.base), "rel": "self"}]}}),
    )
}

fn fail(e: LbError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    octavia_error(status, &e.to_string())
}

fn bad_request(message: &str) -> Response {
    octavia_error(StatusCode::BAD_REQUEST, message)
}

/// The object under `key` in a JSON body (`{"loadbalancer": {...}}`).
fn wrapped(body: Body, key: &str) -> Result<Map<String, Value>, Response> {
    let value = parse_body(body)?;
    match value.get(key) {
        Some(Value::Object(m)) => Ok(m.clone()),
        _ => Err(bad_request(&format!(
            "Invalid input: the request body must be an object with key {key:?}"
        ))),
    }
}

fn parse_body(body: Body) -> Result<Value, Response> {
    let bytes = body.map_err(|e| octavia_error(e.status(), &e.body_text()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| bad_request(&format!("Invalid input: the body is not valid JSON: {e}")))
}

fn pairs(query: Pairs) -> Result<Vec<(String, String)>, Response> {
    query
        .map(|Query(p)| p)
        .map_err(|e| bad_request(&format!("Invalid query string: {e}")))
}

/// Query keys that are not attribute filters.
const RESERVED: &[&str] = &[
    "limit",
    "marker",
    "page_reverse",
    "sort",
    "sort_key",
    "sort_dir",
    "fields",
    "tags",
    "tags-any",
    "not-tags",
    "not-tags-any",
];

/// Whether `item` passes the attribute filter `key=value`. Octavia filters on any
/// attribute; relation filters (`loadbalancer_id`, `listener_id`, `pool_id`) match the
/// `[{id}]` lists.
fn matches(item: &Value, key: &str, value: &str) -> bool {
    let field = match key {
        "loadbalancer_id" if item.get(key).is_none() => "loadbalancers",
        "listener_id" if item.get(key).is_none() => "listeners",
        "pool_id" if item.get(key).is_none() => "pools",
        other => other,
    };
    match item.get(field) {
        None => true,
        Some(Value::String(s)) => s == value,
        Some(Value::Bool(b)) => value.eq_ignore_ascii_case(&b.to_string()),
        Some(Value::Number(n)) => n.to_string() == value,
        Some(Value::Null) => false,
        Some(Value::Array(items)) => items.iter().any(|i| i["id"] == value),
        Some(Value::Object(_)) => false,
    }
}

fn tag_filter(item: &Value, pairs: &[(String, String)]) -> bool {
    let tags: Vec<&str> = item["tags"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let list = |key: &str| -> Vec<&str> {
        values(pairs, key)
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter(|t| !t.is_empty())
            .collect()
    };
    let (all, any, not_all, not_any) = (
        list("tags"),
        list("tags-any"),
        list("not-tags"),
        list("not-tags-any"),
    );
    all.iter().all(|t| tags.contains(t))
        && (any.is_empty() || any.iter().any(|t| tags.contains(t)))
        && (not_all.is_empty() || !not_all.iter().all(|t| tags.contains(t)))
        && !not_any.iter().any(|t| tags.contains(t))
}

/// Filters, `fields`, and `limit`/`marker` paging with a `<collection>_links` next link.
fn list_reply(
    s: &Shared,
    path: &str,
    collection: &str,
    pairs: &[(String, String)],
    items: Vec<Value>,
) -> Response {
    let mut selected: Vec<Value> = items
        .into_iter()
        .filter(|item| {
            pairs
                .iter()
                .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
                .all(|(k, v)| matches(item, k, v))
                && tag_filter(item, pairs)
        })
        .collect();
    if let Some(marker) = last(pairs, "marker") {
        match selected.iter().position(|i| i["id"] == marker) {
            Some(pos) => {
                selected.drain(..=pos);
            }
            None => {
                return octavia_error(
                    StatusCode::NOT_FOUND,
                    &format!("Marker {marker} could not be found."),
                );
            }
        }
    }
    let mut links = Vec::new();
    match last(pairs, "limit").map(|l| l.trim().parse::<usize>()) {
        None | Some(Ok(0)) => {}
        Some(Ok(limit)) => {
            if selected.len() > limit {
                selected.truncate(limit);
                if let Some(last_id) = selected.last().and_then(|i| i["id"].as_str()) {
                    let mut next: Vec<(String, String)> = pairs
                        .iter()
                        .filter(|(k, _)| k != "marker")
                        .cloned()
                        .collect();
                    next.push(("marker".into(), last_id.to_string()));
                    let href = format!("{}{path}?{}", s.base, encode_query(&next));
                    links.push(json!({"rel": "next", "href": href}));
                }
            }
        }
        Some(Err(_)) => return bad_request("Invalid input for limit: not an integer"),
    }
    let fields: Vec<&str> = values(pairs, "fields")
        .into_iter()
        .flat_map(|f| f.split(','))
        .collect();
    if !fields.is_empty() {
        for item in &mut selected {
            if let Value::Object(m) = item {
                m.retain(|k, _| fields.contains(&k.as_str()));
            }
        }
    }
    json(
        StatusCode::OK,
        json!({ collection: selected, format!("{collection}_links"): links }),
    )
}

// ---- load balancers -------------------------------------------------------------------

fn lb_reply(s: &Shared, id: &str, status: StatusCode) -> Response {
    let cloud = s.cloud();
    match cloud.lbaas.lb(id) {
        Ok(lb) => json(
            status,
            json!({"loadbalancer": cloud.lbaas.lb_json(lb, &s.identity.project_id)}),
        ),
        Err(e) => fail(e),
    }
}

async fn list_lbs(
    State(s): State<Arc<Shared>>,
    OriginalUri(uri): OriginalUri,
    query: Pairs,
) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let items: Vec<Value> = {
        let mut cloud = s.cloud();
        cloud.settle_all_lbs(true);
        // `?name=` (how CCMs look their load balancers up) narrows the list before any
        // view is built; `list_reply` still applies every filter to what is left.
        let names: Vec<&str> = pairs
            .iter()
            .filter(|(k, _)| k == "name")
            .map(|(_, v)| v.as_str())
            .collect();
        cloud
            .lbaas
            .lbs_sorted()
            .into_iter()
            .filter(|lb| {
                names.is_empty()
                    || names.contains(
                        &lb.attrs
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    )
            })
            .map(|lb| cloud.lbaas.lb_json(lb, &s.identity.project_id))
            .collect()
    };
    list_reply(&s, uri.path(), "loadbalancers", &pairs, items)
}

async fn create_lb(State(s): State<Arc<Shared>>, body: Body) -> Response {
    let body = match wrapped(body, "loadbalancer") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let created = s.cloud().create_lb(body);
    match created {
        Ok(id) => lb_reply(&s, &id, StatusCode::CREATED),
        Err(e) => fail(e),
    }
}

async fn show_lb(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    s.cloud().settle_lb(&id, true);
    lb_reply(&s, &id, StatusCode::OK)
}

async fn update_lb(State(s): State<Arc<Shared>>, Path(id): Path<String>, body: Body) -> Response {
    let body = match wrapped(body, "loadbalancer") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let updated = s.cloud().update_lb(&id, body);
    match updated {
        Ok(()) => lb_reply(&s, &id, StatusCode::OK),
        Err(e) => fail(e),
    }
}

async fn delete_lb(State(s): State<Arc<Shared>>, Path(id): Path<String>, query: Pairs) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let cascade = last(&pairs, "cascade").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let deleted = s.cloud().delete_lb(&id, cascade);
    match deleted {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => fail(e),
    }
}

async fn lb_status(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let mut cloud = s.cloud();
    cloud.settle_lb(&id, true);
    match cloud.lbaas.lb(&id) {
        Ok(lb) => json(StatusCode::OK, cloud.lbaas.status_tree(lb)),
        Err(e) => fail(e),
    }
}

// ---- children -----------------------------------------------------------------------

fn child_reply(s: &Shared, kind: Kind, id: &str, status: StatusCode) -> Response {
    let cloud = s.cloud();
    match cloud.lbaas.child(kind, id) {
        Ok(c) => json(
            status,
            json!({ kind.key(): cloud.lbaas.child_json(c, &s.identity.project_id) }),
        ),
        Err(e) => fail(e),
    }
}

fn list_children(s: &Shared, kind: Kind, path: &str, query: Pairs, pool: Option<&str>) -> Response {
    let pairs = match pairs(query) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let items: Vec<Value> = {
        let mut cloud = s.cloud();
        cloud.settle_all_lbs(false);
        if let Some(pool_id) = pool
            && let Err(e) = cloud.lbaas.child(Kind::Pool, pool_id)
        {
            return fail(e);
        }
        cloud
            .lbaas
            .sorted(kind, None)
            .filter(|c| pool.is_none_or(|p| c.pool_id.as_deref() == Some(p)))
            .map(|c| cloud.lbaas.child_json(c, &s.identity.project_id))
            .collect()
    };
    list_reply(s, path, kind.collection(), &pairs, items)
}

fn show_child(s: &Shared, kind: Kind, id: &str, pool: Option<&str>) -> Response {
    {
        let mut cloud = s.cloud();
        let lb_id = match cloud.lbaas.child(kind, id) {
            Ok(c) if pool.is_none_or(|p| c.pool_id.as_deref() == Some(p)) => c.lb_id.clone(),
            Ok(_) => {
                return fail(LbError::NotFound {
                    resource: kind.resource(),
                    id: id.to_string(),
                });
            }
            Err(e) => return fail(e),
        };
        // Clients waiting on a child poll the child, so this counts as a read of its LB.
        cloud.settle_lb(&lb_id, true);
    }
    child_reply(s, kind, id, StatusCode::OK)
}

fn create_child(s: &Shared, kind: Kind, pool: Option<&str>, body: Body) -> Response {
    let body = match wrapped(body, kind.key()) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let created = s.cloud().create_child(kind, pool, body);
    match created {
        Ok(id) => child_reply(s, kind, &id, StatusCode::CREATED),
        Err(e) => fail(e),
    }
}

fn update_child(s: &Shared, kind: Kind, id: &str, body: Body) -> Response {
    let body = match wrapped(body, kind.key()) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let updated = s.cloud().update_child(kind, id, body);
    match updated {
        Ok(()) => child_reply(s, kind, id, StatusCode::OK),
        Err(e) => fail(e),
    }
}

fn delete_child(s: &Shared, kind: Kind, id: &str) -> Response {
    let deleted = s.cloud().delete_child(kind, id);
    match deleted {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => fail(e),
    }
}

/// `collection` and `collection/{id}` for a child kind that is addressed on its own
/// (listeners, pools, health monitors; members live under their pool): one set of
/// handlers, parameterised by the kind, instead of five functions per kind.
fn top_level_child_routes(kind: Kind, collection: &str) -> Router<Arc<Shared>> {
    let list = move |State(s): State<Arc<Shared>>, OriginalUri(uri): OriginalUri, q: Pairs| async move {
        list_children(&s, kind, uri.path(), q, None)
    };
    let create = move |State(s): State<Arc<Shared>>, body: Body| async move {
        create_child(&s, kind, None, body)
    };
    let show = move |State(s): State<Arc<Shared>>, Path(id): Path<String>| async move {
        show_child(&s, kind, &id, None)
    };
    let update = move |State(s): State<Arc<Shared>>, Path(id): Path<String>, body: Body| async move {
        update_child(&s, kind, &id, body)
    };
    let delete = move |State(s): State<Arc<Shared>>, Path(id): Path<String>| async move {
        delete_child(&s, kind, &id)
    };
    Router::new()
        .route(collection, get(list).post(create))
        .route(
            &format!("{collection}/{{id}}"),
            get(show).put(update).delete(delete),
        )
}

async fn list_members(
    State(s): State<Arc<Shared>>,
    Path(pool): Path<String>,
    OriginalUri(uri): OriginalUri,
    q: Pairs,
) -> Response {
    list_children(&s, Kind::Member, uri.path(), q, Some(&pool))
}
async fn create_member(
    State(s): State<Arc<Shared>>,
    Path(pool): Path<String>,
    body: Body,
) -> Response {
    create_child(&s, Kind::Member, Some(&pool), body)
}
async fn show_member(
    State(s): State<Arc<Shared>>,
    Path((pool, id)): Path<(String, String)>,
) -> Response {
    show_child(&s, Kind::Member, &id, Some(&pool))
}
async fn update_member(
    State(s): State<Arc<Shared>>,
    Path((pool, id)): Path<(String, String)>,
    body: Body,
) -> Response {
    if let Err(r) = member_in_pool(&s, &pool, &id) {
        return r;
    }
    update_child(&s, Kind::Member, &id, body)
}
async fn delete_member(
    State(s): State<Arc<Shared>>,
    Path((pool, id)): Path<(String, String)>,
) -> Response {
    if let Err(r) = member_in_pool(&s, &pool, &id) {
        return r;
    }
    delete_child(&s, Kind::Member, &id)
}

fn member_in_pool(s: &Shared, pool: &str, id: &str) -> Result<(), Response> {
    let cloud = s.cloud();
    cloud.lbaas.child(Kind::Pool, pool).map_err(fail)?;
    match cloud.lbaas.child(Kind::Member, id) {
        Ok(m) if m.pool_id.as_deref() == Some(pool) => Ok(()),
        _ => Err(fail(LbError::NotFound {
            resource: Kind::Member.resource(),
            id: id.to_string(),
        })),
    }
}

/// `PUT /pools/{id}/members` `{"members": [...]}` -> 202, no body.
async fn batch_members(
    State(s): State<Arc<Shared>>,
    Path(pool): Path<String>,
    body: Body,
) -> Response {
    let members = match parse_body(body) {
        Ok(v) => match v.get("members") {
            Some(Value::Array(list)) => list.clone(),
            _ => return bad_request("Invalid input: the request body must have a members list"),
        },
        Err(r) => return r,
    };
    let done = s.cloud().batch_members(&pool, members);
    match done {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use serde_json::json;

    use super::*;
    use crate::testing::{BASE, Mock};

    fn subnet(m: &Mock) -> String {
        m.shared.cloud().subnets[0].id.clone()
    }

    /// Octavia renders `created_at` / `updated_at` as naive datetimes to the second
    /// (load-balancer API reference samples: `"created_at": "2017-02-28T00:41:44"`); the
    /// mock sent `...Z`. gophercloud's `loadbalancers`/`pools` decoders try that
    /// `RFC3339NoZ` form first, so it is the one to serve.
    #[tokio::test]
    async fn timestamps_use_octavias_naive_format() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let naive = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$").expect("regex");
        let r = m
            .call(
                "POST",
                "/load-balancer/v2.0/lbaas/loadbalancers",
                &token,
                json!({"loadbalancer": {"vip_subnet_id": subnet(&m), "listeners": [{
                    "protocol": "TCP", "protocol_port": 80, "default_pool": {
                        "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                        "members": [{"address": "127.10.0.10", "protocol_port": 30080}]}}]}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["loadbalancer"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        let pool = r.body["loadbalancer"]["pools"][0]["id"]
            .as_str()
            .expect("pool")
            .to_string();
        let lb = m
            .get(
                &format!("/load-balancer/v2.0/lbaas/loadbalancers/{id}"),
                &token,
            )
            .await;
        let members = m
            .get(
                &format!("/load-balancer/v2.0/lbaas/pools/{pool}/members"),
                &token,
            )
            .await;
        let listeners = m.get("/load-balancer/v2.0/lbaas/listeners", &token).await;
        for (what, v) in [
            ("loadbalancer", &lb.body["loadbalancer"]),
            ("member", &members.body["members"][0]),
            ("listener", &listeners.body["listeners"][0]),
        ] {
            for key in ["created_at", "updated_at"] {
                let t = v[key].as_str().unwrap_or_default();
                assert!(naive.is_match(t), "{what} {key}: {t:?} in {v}");
            }
        }
    }

    fn assert_wsme(r: &crate::testing::Reply, status: StatusCode, text: &str) {
        assert_eq!(r.status, status, "{}", r.body);
        assert_eq!(
            r.body["faultcode"],
            if status.is_server_error() {
                "Server"
            } else {
                "Client"
            }
        );
        assert!(r.body["debuginfo"].is_null());
        let got = r.body["faultstring"].as_str().unwrap_or_default();
        assert!(got.contains(text), "{got:?} should contain {text:?}");
    }

    #[tokio::test]
    async fn versions_ascending_and_both_prefixes_serve() {
        let m = Mock::seeded(0);
        let r = m.send("GET", "/load-balancer/", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
        let list = r.body["versions"].as_array().expect("list");
        assert_eq!(list[0]["id"], "v2.0");
        assert_eq!(
            list.last().map(|v| v["status"].clone()),
            Some(json!("CURRENT"))
        );
        let token = m.token().await;
        for prefix in ["/load-balancer/v2", "/load-balancer/v2.0"] {
            let r = m
                .get(&format!("{prefix}/lbaas/loadbalancers"), &token)
                .await;
            assert_eq!(r.status, StatusCode::OK);
            assert_eq!(r.body["loadbalancers"], json!([]));
            assert_eq!(r.body["loadbalancers_links"], json!([]));
        }
        let r = m.get("/load-balancer/v2/lbaas/loadbalancers", "bad").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn fully_populated_create_then_reads_settle_and_filters() {
        let m = Mock::seeded(1);
        m.shared.cloud().lbaas.policies.default = mock_cloud::Mode::Reads { n: 1 };
        let token = m.token().await;
        let body = json!({"loadbalancer": {"name": "kube_service_c_ns_svc", "vip_subnet_id": subnet(&m),
            "tags": ["kube_service_c_ns_svc"],
            "listeners": [{"name": "listener_0", "protocol": "TCP", "protocol_port": 80,
                "default_pool": {"name": "pool_0", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                    "members": [{"address": "127.10.0.10", "protocol_port": 30080}],
                    "healthmonitor": {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1}}}]}});
        let r = m
            .call(
                "POST",
                "/load-balancer/v2.0/lbaas/loadbalancers",
                &token,
                body,
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let lb = &r.body["loadbalancer"];
        assert_eq!(lb["provisioning_status"], "PENDING_CREATE");
        assert_eq!(lb["operating_status"], "OFFLINE");
        assert_eq!(lb["vip_address"], "127.30.0.10");
        assert_eq!(lb["listeners"].as_array().map(Vec::len), Some(1));
        assert_eq!(lb["pools"].as_array().map(Vec::len), Some(1));
        let id = lb["id"].as_str().expect("id").to_string();
        let vip_port = lb["vip_port_id"].as_str().expect("port").to_string();
        let r = m
            .get(&format!("/network/v2.0/ports/{vip_port}"), &token)
            .await;
        assert_eq!(r.body["port"]["device_id"], format!("lb-{id}"));

        // A write while pending is refused with Octavia's body.
        let r = m
            .call(
                "PUT",
                &format!("/load-balancer/v2/lbaas/loadbalancers/{id}"),
                &token,
                json!({"loadbalancer": {"tags": ["x"]}}),
            )
            .await;
        assert_wsme(
            &r,
            StatusCode::CONFLICT,
            &format!("Load Balancer {id} is immutable and cannot be updated."),
        );
        let uri = format!("/load-balancer/v2/lbaas/loadbalancers/{id}");
        assert_eq!(
            m.get(&uri, &token).await.body["loadbalancer"]["provisioning_status"],
            "PENDING_CREATE"
        );
        let r = m.get(&uri, &token).await;
        assert_eq!(r.body["loadbalancer"]["provisioning_status"], "ACTIVE");
        assert_eq!(r.body["loadbalancer"]["operating_status"], "ONLINE");

        let r = m
            .get(
                "/load-balancer/v2/lbaas/loadbalancers?name=kube_service_c_ns_svc",
                &token,
            )
            .await;
        assert_eq!(r.body["loadbalancers"].as_array().map(Vec::len), Some(1));
        let r = m
            .get("/load-balancer/v2/lbaas/loadbalancers?name=other", &token)
            .await;
        assert_eq!(r.body["loadbalancers"].as_array().map(Vec::len), Some(0));
        let r = m
            .get(
                "/load-balancer/v2/lbaas/loadbalancers?tags=kube_service_c_ns_svc&fields=id",
                &token,
            )
            .await;
        assert_eq!(r.body["loadbalancers"], json!([{"id": id}]));
        let r = m
            .get(
                &format!("/load-balancer/v2/lbaas/listeners?loadbalancer_id={id}"),
                &token,
            )
            .await;
        let listener = r.body["listeners"][0].clone();
        assert_eq!(listener["protocol_port"], 80);
        assert_eq!(listener["provisioning_status"], "ACTIVE");
        let pool_id = listener["default_pool_id"]
            .as_str()
            .expect("pool")
            .to_string();
        let r = m
            .get(
                &format!(
                    "/load-balancer/v2/lbaas/pools?loadbalancer_id={id}&listener_id={}",
                    listener["id"].as_str().unwrap_or_default()
                ),
                &token,
            )
            .await;
        assert_eq!(r.body["pools"][0]["id"], pool_id);
        assert!(r.body["pools"][0]["healthmonitor_id"].is_string());
        let r = m
            .get(
                &format!("/load-balancer/v2/lbaas/pools/{pool_id}/members"),
                &token,
            )
            .await;
        assert_eq!(r.body["members"][0]["operating_status"], "ONLINE");

        let r = m
            .get(
                &format!("/load-balancer/v2/lbaas/loadbalancers/{id}/status"),
                &token,
            )
            .await;
        let tree = &r.body["statuses"]["loadbalancer"];
        assert_eq!(tree["provisioning_status"], "ACTIVE");
        assert_eq!(
            tree["listeners"][0]["pools"][0]["members"][0]["address"],
            "127.10.0.10"
        );
        assert_eq!(
            tree["listeners"][0]["pools"][0]["health_monitor"]["type"],
            "TCP"
        );

        // Update with tags: PENDING_UPDATE, then ACTIVE.
        let r = m
            .call(
                "PUT",
                &uri,
                &token,
                json!({"loadbalancer": {"tags": ["a", "b"], "description": "d"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(
            r.body["loadbalancer"]["provisioning_status"],
            "PENDING_UPDATE"
        );
        assert_eq!(r.body["loadbalancer"]["tags"], json!(["a", "b"]));
        let r = m
            .call(
                "PUT",
                &uri,
                &token,
                json!({"loadbalancer": {"vip_address": "127.30.0.99"}}),
            )
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "vip_address");
    }

    #[tokio::test]
    async fn children_crud_batch_members_and_cascade_delete() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let lbs = "/load-balancer/v2/lbaas/loadbalancers";
        let r = m
            .call(
                "POST",
                lbs,
                &token,
                json!({"loadbalancer": {"vip_subnet_id": subnet(&m)}}),
            )
            .await;
        let id = r.body["loadbalancer"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        let r = m.call("POST", "/load-balancer/v2/lbaas/listeners", &token,
            json!({"listener": {"loadbalancer_id": id, "protocol": "TCP", "protocol_port": 443}})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let listener = r.body["listener"]["id"]
            .as_str()
            .expect("listener")
            .to_string();
        let r = m.call("POST", "/load-balancer/v2/lbaas/listeners", &token,
            json!({"listener": {"loadbalancer_id": id, "protocol": "TCP", "protocol_port": 443}})).await;
        assert_wsme(&r, StatusCode::CONFLICT, "already using protocol_port 443");
        let r = m.call("POST", "/load-balancer/v2/lbaas/pools", &token,
            json!({"pool": {"listener_id": listener, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let pool = r.body["pool"]["id"].as_str().expect("pool").to_string();
        let members = format!("/load-balancer/v2/lbaas/pools/{pool}/members");
        let r = m
            .call(
                "POST",
                &members,
                &token,
                json!({"member": {"address": "127.10.0.5", "protocol_port": 30000}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["member"]["operating_status"], "OFFLINE");
        let first = r.body["member"]["id"].as_str().expect("member").to_string();
        let r = m
            .call(
                "POST",
                &members,
                &token,
                json!({"member": {"address": "127.10.0.5", "protocol_port": 30000}}),
            )
            .await;
        assert_wsme(&r, StatusCode::CONFLICT, "already using ip 127.10.0.5");

        // Batch: keep .5 (updated), add .6, nothing removed yet.
        let r = m
            .call(
                "PUT",
                &members,
                &token,
                json!({"members": [
            {"address": "127.10.0.5", "protocol_port": 30000, "weight": 5},
            {"address": "127.10.0.6", "protocol_port": 30000}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        let r = m.get(&members, &token).await;
        let list = r.body["members"].as_array().expect("members").clone();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["id"], first);
        assert_eq!(list[0]["weight"], 5);
        // Batch down to one: the other goes.
        let r = m
            .call(
                "PUT",
                &members,
                &token,
                json!({"members": [{"address": "127.10.0.6", "protocol_port": 30000}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED);
        let r = m.get(&members, &token).await;
        assert_eq!(r.body["members"].as_array().map(Vec::len), Some(1));
        let r = m.get(&format!("{members}/{first}"), &token).await;
        assert_wsme(
            &r,
            StatusCode::NOT_FOUND,
            &format!("Member {first} not found."),
        );

        let r = m.call("POST", "/load-balancer/v2/lbaas/healthmonitors", &token,
            json!({"healthmonitor": {"pool_id": pool, "type": "HTTP", "delay": 5, "timeout": 3, "max_retries": 2}})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["healthmonitor"]["url_path"], "/");
        let hm = r.body["healthmonitor"]["id"]
            .as_str()
            .expect("hm")
            .to_string();
        let r = m
            .call(
                "PUT",
                &format!("/load-balancer/v2/lbaas/healthmonitors/{hm}"),
                &token,
                json!({"healthmonitor": {"delay": 10}}),
            )
            .await;
        assert_eq!(r.body["healthmonitor"]["delay"], 10);
        let r = m
            .call(
                "PUT",
                &format!("/load-balancer/v2/lbaas/listeners/{listener}"),
                &token,
                json!({"listener": {"protocol_port": 1}}),
            )
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "cannot be updated");

        let r = m
            .call("DELETE", &format!("{lbs}/{id}"), &token, Value::Null)
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "it has children");
        let r = m
            .call(
                "DELETE",
                &format!("{lbs}/{id}?cascade=true"),
                &token,
                Value::Null,
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let r = m.get(&format!("{lbs}/{id}"), &token).await;
        assert_wsme(
            &r,
            StatusCode::NOT_FOUND,
            &format!("Load Balancer {id} not found."),
        );
        let r = m
            .get(&format!("/load-balancer/v2/lbaas/pools/{pool}"), &token)
            .await;
        assert_wsme(&r, StatusCode::NOT_FOUND, "Pool");
        // The VIP port went with the load balancer; the router's ports stay.
        assert_eq!(m.shared.cloud().ports.len(), crate::state::ROUTER_PORTS);
    }

    #[tokio::test]
    async fn delete_passes_through_pending_delete_then_404() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let lbs = "/load-balancer/v2/lbaas/loadbalancers";
        let r = m
            .call(
                "POST",
                lbs,
                &token,
                json!({"loadbalancer": {"vip_subnet_id": subnet(&m)}}),
            )
            .await;
        let id = r.body["loadbalancer"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        let r = m.get(&format!("{lbs}/{id}"), &token).await;
        assert_eq!(r.body["loadbalancer"]["provisioning_status"], "ACTIVE");
        m.admin()
            .set_lifecycle(
                crate::LifecycleTarget::LoadBalancer(id.clone()),
                Some(mock_cloud::Mode::Stuck),
            )
            .expect("stuck");
        let r = m
            .call("DELETE", &format!("{lbs}/{id}"), &token, Value::Null)
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        for _ in 0..3 {
            let r = m.get(&format!("{lbs}/{id}"), &token).await;
            assert_eq!(
                r.body["loadbalancer"]["provisioning_status"],
                "PENDING_DELETE"
            );
        }
        let r = m
            .call("DELETE", &format!("{lbs}/{id}"), &token, Value::Null)
            .await;
        assert_wsme(&r, StatusCode::CONFLICT, "immutable");
        // Releasing the LB's own override applies to the transition under way.
        let r = m
            .admin_json(
                "PUT",
                &format!("/admin/lifecycle/loadbalancers/{id}"),
                json!({"mode": "immediate"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(
            m.get(&format!("{lbs}/{id}"), &token).await.status,
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn bad_bodies_are_wsme_400_and_413() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let lbs = "/load-balancer/v2/lbaas/loadbalancers";
        let r = m
            .send("POST", lbs, &[("x-auth-token", &token)], "{nope")
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "not valid JSON");
        let r = m.call("POST", lbs, &token, json!({"lb": {}})).await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "loadbalancer");
        let r = m
            .call("POST", lbs, &token, json!({"loadbalancer": {}}))
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "VIP must contain one of");
        let r = m.call("POST", lbs, &token, json!({"loadbalancer": {"vip_subnet_id": subnet(&m), "listeners": [{"protocol": "TCP", "protocol_port": 70000}]}})).await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "protocol_port");
        let r = m.call("POST", "/load-balancer/v2/lbaas/listeners", &token, json!({"listener": {"loadbalancer_id": "nope", "protocol": "TCP", "protocol_port": 80}})).await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "nope");
        let big = format!(
            "{{\"loadbalancer\": {{\"name\": \"{}\"}}}}",
            "x".repeat(crate::BODY_LIMIT)
        );
        let r = m.send("POST", lbs, &[("x-auth-token", &token)], big).await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(r.body["faultcode"], "Client");
        let r = m
            .get("/load-balancer/v2/lbaas/pools/nope/members", &token)
            .await;
        assert_wsme(&r, StatusCode::NOT_FOUND, "Pool nope not found.");
        let r = m
            .get("/load-balancer/v2/lbaas/healthmonitors/nope", &token)
            .await;
        assert_wsme(&r, StatusCode::NOT_FOUND, "Health Monitor nope not found.");
        let r = m
            .get("/load-balancer/v2/lbaas/loadbalancers?limit=x", &token)
            .await;
        assert_wsme(&r, StatusCode::BAD_REQUEST, "limit");
    }

    #[tokio::test]
    async fn list_paging_links() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        for i in 0..3 {
            m.call("POST", "/load-balancer/v2/lbaas/loadbalancers", &token,
                json!({"loadbalancer": {"name": format!("lb{i}"), "vip_network_id": m.shared.cloud().networks[0].id}})).await;
        }
        let r = m
            .get("/load-balancer/v2/lbaas/loadbalancers?limit=2", &token)
            .await;
        assert_eq!(r.body["loadbalancers"].as_array().map(Vec::len), Some(2));
        let next = r.body["loadbalancers_links"][0]["href"]
            .as_str()
            .expect("next")
            .to_string();
        assert!(
            next.starts_with(&format!("{BASE}/load-balancer/v2/lbaas/loadbalancers?")),
            "{next}"
        );
        let r = m.get(next.trim_start_matches(BASE), &token).await;
        assert_eq!(r.body["loadbalancers"][0]["name"], "lb2");
        assert_eq!(r.body["loadbalancers_links"], json!([]));
    }
}
