//! What happens to every request before it reaches a service: token check (what
//! keystonemiddleware does in front of Nova and Neutron), fault injection, and the journal
//! entry once the answer is known. The steps are the shared gate's
//! ([`mock_cloud::gate`]); this module says what OpenStack's requests are to it.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::Response;

use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{CallKind, Faults, Journal, LbOp, Throttle};

use crate::Shared;
use crate::envelope::{self, Service};

/// Version documents that the real services serve without a token (Nova's api-paste maps
/// `/` and `/v2.1` to unauthenticated version apps; Neutron's and Octavia's roots likewise).
fn is_public_discovery(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/'),
        "/compute" | "/compute/v2.1" | "/network" | "/load-balancer"
    )
}

/// A fault rule's `operation` and `resource` for an OpenStack request: the operation is
/// the method and the path after the service prefix with API versions dropped and ids
/// replaced by `{id}` (`"GET servers/{id}"`, `"POST lbaas/loadbalancers"`,
/// `"PUT routers/{id}/add_extraroutes"`); the resource is the last id in the path. Ids are
/// UUIDs, as everywhere in this mock.
#[cfg(test)]
pub(crate) fn operation_and_resource(method: &str, path: &str) -> (String, Option<String>) {
    let (target, resource) = target_and_resource(path);
    (format!("{method} {target}"), resource)
}

/// The operation without its method (`servers/{id}`) and the resource.
fn target_and_resource(path: &str) -> (String, Option<String>) {
    let mut resource = None;
    let mut parts = Vec::new();
    for segment in path.split('/').filter(|s| !s.is_empty()).skip(1) {
        if is_version(segment) && parts.is_empty() {
            continue;
        }
        if uuid::Uuid::try_parse(segment).is_ok() {
            resource = Some(segment.to_string());
            parts.push("{id}");
        } else {
            parts.push(segment);
        }
    }
    (parts.join("/"), resource)
}

/// What a request is in the terms cases ask about, by its service and its operation's
/// method and target (`servers/{id}`): Nova server reads are instance lookups, Neutron
/// router writes route writes, every other Neutron call supports a load balancer (ports,
/// floating IPs, security groups), and Octavia calls are load-balancer calls by
/// [`lb_op`].
pub(crate) fn call_kind(service: Service, method: &str, target: &str) -> CallKind {
    match service {
        Service::Compute if method == "GET" && target.starts_with("servers") => {
            CallKind::InstanceLookup
        }
        Service::Network if method != "GET" && target.starts_with("routers") => {
            CallKind::RouteWrite
        }
        Service::Network => CallKind::LoadBalancerSupport,
        Service::LoadBalancer => CallKind::LoadBalancer(lb_op(method, target)),
        _ => CallKind::Other,
    }
}

/// Octavia calls by what they do to a load balancer: reads; the create and delete of a
/// load balancer; the batch member update (its backends); every other write.
fn lb_op(method: &str, target: &str) -> LbOp {
    match (method, target) {
        ("GET", _) => LbOp::Read,
        ("POST", "lbaas/loadbalancers") => LbOp::Create,
        ("DELETE", "lbaas/loadbalancers/{id}") => LbOp::Delete,
        ("PUT", t) if t.ends_with("/members") => LbOp::BackendWrite,
        _ => LbOp::OtherWrite,
    }
}

fn is_version(segment: &str) -> bool {
    segment
        .strip_prefix('v')
        .is_some_and(|rest| !rest.is_empty() && rest.split('.').all(|n| n.parse::<u32>().is_ok()))
}

/// The id of what a create answered (`{"server": {"id": ...}}`, `{"loadbalancer": ...}`).
fn created_id(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (_, inner) = object.iter().next()?;
    inner.get("id")?.as_str().map(str::to_string)
}

/// Reports a successful create's id to the fault engine (for `not_found_after_create`);
/// only buffers the body when such a rule exists.
async fn note_created(shared: &Shared, response: Response) -> Response {
    if !response.status().is_success() || !shared.faults.wants_created() {
        return response;
    }
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, crate::BODY_LIMIT * 16).await {
        Ok(bytes) => {
            if let Some(id) = created_id(&bytes) {
                shared.faults.note_created(&id);
            }
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
        Err(_) => envelope::service_error(
            Service::Other,
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "response too large to inspect",
        ),
    }
}

/// OpenStack's side of the shared request gate ([`mock_cloud::gate`]).
///
/// Journal entries and fault rules see: service = the API (`identity`, `compute`,
/// `network`, `load-balancer`, `admin`, `other`); operation = [`operation_and_resource`]'s
/// `"METHOD collection/{id}/..."` (e.g. `"POST lbaas/loadbalancers"`, `"GET servers/{id}"`,
/// `"GET "` for a service's version document); resource = the last UUID in the path;
/// kind = [`call_kind`]. Admin routes are never faulted and have neither (journaled as
/// service `admin`, kind `Other`). A missing or invalid token on
/// Nova/Neutron/Octavia is answered 401 before fault rules (and journaled). Every request
/// other than a GET wakes the data plane.
impl Gate for Shared {
    type Extra = Service;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn wake(&self) -> Option<&Wake> {
        Some(&self.wake)
    }

    async fn classify(&self, req: Request) -> Classified<Service> {
        let path = req.uri().path().to_string();
        let method = req.method().clone();
        let service = Service::of(&path);
        let gated = service != Service::Admin;
        let mut call = Call {
            gated,
            wakes: method != axum::http::Method::GET,
            ..Call::new(service.name(), &method, req.uri(), service)
        };
        if gated {
            let (target, resource) = target_and_resource(&path);
            call.kind = call_kind(service, method.as_str(), &target);
            call.operation = Some(format!("{method} {target}"));
            call.resource = resource;
        }
        let needs_token = matches!(
            service,
            Service::Compute | Service::Network | Service::LoadBalancer
        ) && !is_public_discovery(&call.path);
        if needs_token {
            let token = req
                .headers()
                .get("x-auth-token")
                .and_then(|v| v.to_str().ok());
            if !token.is_some_and(|t| self.token_valid(t)) {
                let mut response = envelope::unauthorized();
                // keystonemiddleware points clients at Keystone this way.
                let challenge = format!("Keystone uri=\"{}/identity\"", self.base);
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response.headers_mut().insert("www-authenticate", value);
                }
                return Classified::Answer(call, response);
            }
        }
        Classified::Pass(call, req)
    }

    /// OpenStack services answer throttling with 429 and `Retry-After` (the envelope adds
    /// the header).
    fn throttle(_service: &str) -> Throttle {
        Throttle::TOO_MANY_REQUESTS
    }

    fn render_error(
        &self,
        call: &Call<Service>,
        status: u16,
        _code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        envelope::fault(call.extra, status, message)
    }

    async fn served(&self, call: &Call<Service>, response: Response) -> Response {
        if call.method == "POST" {
            note_created(self, response).await
        } else {
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::StatusCode;
    use mock_cloud::{CallKind, FaultJson, LbOp};

    use crate::testing::Mock;

    #[tokio::test]
    async fn services_need_a_valid_token() {
        let m = Mock::seeded(1);
        for path in [
            "/compute/v2.1/servers/detail",
            "/network/v2.0/ports",
            "/load-balancer/v2/lbaas/loadbalancers",
        ] {
            let r = m.send("GET", path, &[], Body::empty()).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(r.body["error"]["code"], 401);
            assert!(r.headers.get("www-authenticate").is_some());
            let r = m.get(path, "bogus").await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
        }
    }

    #[tokio::test]
    async fn journal_records_every_request() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        m.get("/compute/v2.1/servers/detail?name=%5Enode-0%24", &token)
            .await;
        m.send("GET", "/network/v2.0/ports", &[], Body::empty())
            .await;
        let entries = m.shared.journal.entries();
        let summary: Vec<(&str, &str, u16)> = entries
            .iter()
            .map(|e| (e.service.as_str(), e.path.as_str(), e.status))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("identity", "/identity/v3/auth/tokens", 201),
                ("compute", "/compute/v2.1/servers/detail", 200),
                ("network", "/network/v2.0/ports", 401),
            ]
        );
        assert_eq!(entries[1].query, "name=%5Enode-0%24");
        assert_eq!(entries[1].method, "GET");
    }

    #[tokio::test]
    async fn journal_carries_operation_and_resource() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let id = m.admin().server_by_name("node-0").expect("seeded").id;
        m.get(&format!("/compute/v2.1/servers/{id}"), &token).await;
        m.send("GET", "/admin/servers", &[], Body::empty()).await;
        let entries = m.shared.journal.entries();
        let ops: Vec<(&str, Option<&str>, Option<&str>)> = entries
            .iter()
            .map(|e| {
                (
                    e.service.as_str(),
                    e.operation.as_deref(),
                    e.resource.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                ("identity", Some("POST auth/tokens"), None),
                ("compute", Some("GET servers/{id}"), Some(id.as_str())),
                ("admin", None, None),
            ]
        );
    }

    /// The table harness/src/cloud/openstack.rs read journal entries by before the gate
    /// said what a call was (`classify` over the journaled service and operation), kept
    /// as the reference the gate's kinds are checked against.
    fn harness_table(e: &mock_cloud::JournalEntry) -> CallKind {
        fn lb_op(method: &str, target: &str) -> LbOp {
            match (method, target) {
                ("GET", _) => LbOp::Read,
                ("POST", "lbaas/loadbalancers") => LbOp::Create,
                ("DELETE", "lbaas/loadbalancers/{id}") => LbOp::Delete,
                ("PUT", t) if t.ends_with("/members") => LbOp::BackendWrite,
                _ => LbOp::OtherWrite,
            }
        }
        let operation = e.operation.as_deref().unwrap_or_default();
        let (method, target) = operation.split_once(' ').unwrap_or(("", operation));
        match e.service.as_str() {
            "compute" if method == "GET" && target.starts_with("servers") => {
                CallKind::InstanceLookup
            }
            "network" if method != "GET" && target.starts_with("routers") => CallKind::RouteWrite,
            "network" => CallKind::LoadBalancerSupport,
            "load-balancer" => CallKind::LoadBalancer(lb_op(method, target)),
            _ => CallKind::Other,
        }
    }

    #[tokio::test]
    async fn journaled_kinds_are_the_harness_table() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let server = m.admin().server_by_name("node-0").expect("seeded").id;
        let id = "0b5c6f0e-1d2a-4c3b-9e8f-7a6b5c4d3e2f";
        let lb = CallKind::LoadBalancer;
        let requests: Vec<(&str, String, CallKind)> = vec![
            (
                "GET",
                "/compute/v2.1/servers/detail".into(),
                CallKind::InstanceLookup,
            ),
            (
                "GET",
                format!("/compute/v2.1/servers/{server}"),
                CallKind::InstanceLookup,
            ),
            ("GET", "/compute/v2.1/flavors".into(), CallKind::Other),
            ("GET", "/compute".into(), CallKind::Other),
            (
                "POST",
                format!("/compute/v2.1/servers/{server}/action"),
                CallKind::Other,
            ),
            (
                "GET",
                "/network/v2.0/ports".into(),
                CallKind::LoadBalancerSupport,
            ),
            (
                "POST",
                "/network/v2.0/floatingips".into(),
                CallKind::LoadBalancerSupport,
            ),
            (
                "GET",
                format!("/network/v2.0/routers/{id}"),
                CallKind::LoadBalancerSupport,
            ),
            (
                "PUT",
                format!("/network/v2.0/routers/{id}/add_extraroutes"),
                CallKind::RouteWrite,
            ),
            (
                "PUT",
                format!("/network/v2.0/routers/{id}/remove_extraroutes"),
                CallKind::RouteWrite,
            ),
            ("GET", "/network".into(), CallKind::LoadBalancerSupport),
            (
                "POST",
                "/load-balancer/v2/lbaas/loadbalancers".into(),
                lb(LbOp::Create),
            ),
            (
                "GET",
                "/load-balancer/v2.0/lbaas/loadbalancers".into(),
                lb(LbOp::Read),
            ),
            (
                "GET",
                format!("/load-balancer/v2/lbaas/loadbalancers/{id}"),
                lb(LbOp::Read),
            ),
            (
                "DELETE",
                format!("/load-balancer/v2/lbaas/loadbalancers/{id}"),
                lb(LbOp::Delete),
            ),
            (
                "PUT",
                format!("/load-balancer/v2/lbaas/loadbalancers/{id}"),
                lb(LbOp::OtherWrite),
            ),
            (
                "PUT",
                format!("/load-balancer/v2/lbaas/pools/{id}/members"),
                lb(LbOp::BackendWrite),
            ),
            (
                "POST",
                format!("/load-balancer/v2/lbaas/pools/{id}/members"),
                lb(LbOp::OtherWrite),
            ),
            (
                "POST",
                "/load-balancer/v2/lbaas/listeners".into(),
                lb(LbOp::OtherWrite),
            ),
            (
                "DELETE",
                format!("/load-balancer/v2/lbaas/pools/{id}"),
                lb(LbOp::OtherWrite),
            ),
            ("GET", "/load-balancer".into(), lb(LbOp::Read)),
            ("GET", "/identity/v3".into(), CallKind::Other),
            ("GET", "/admin/servers".into(), CallKind::Other),
            ("GET", "/nothing".into(), CallKind::Other),
        ];
        let body = serde_json::json!({});
        for (method, uri, _) in &requests {
            m.call(method, uri, &token, body.clone()).await;
        }
        // Refused before a service saw it (no token): classified all the same.
        m.send("GET", "/compute/v2.1/servers/detail", &[], Body::empty())
            .await;
        m.send(
            "DELETE",
            &format!("/network/v2.0/routers/{id}"),
            &[],
            Body::empty(),
        )
        .await;
        let entries = m.shared.journal.entries();
        assert_eq!(
            entries.len(),
            requests.len() + 3,
            "token, requests, refusals"
        );
        for e in &entries {
            assert_eq!(
                e.kind,
                harness_table(e),
                "{} {} {}",
                e.service,
                e.method,
                e.path
            );
        }
        let journaled: Vec<CallKind> = entries[1..=requests.len()].iter().map(|e| e.kind).collect();
        let wanted: Vec<CallKind> = requests.iter().map(|r| r.2).collect();
        assert_eq!(journaled, wanted);
        let refused = &entries[requests.len() + 1..];
        assert_eq!(
            (refused[0].status, refused[0].kind, refused[1].kind),
            (401, CallKind::InstanceLookup, CallKind::RouteWrite)
        );
    }

    #[tokio::test]
    async fn compute_fault_fires_exactly_count_times_in_nova_envelope() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let id = m.admin().server_by_name("node-0").expect("seeded").id;
        let rule = m.admin().faults().add(FaultJson {
            service: Some("compute".into()),
            method: Some("GET".into()),
            path: Some("/servers/".into()),
            status: 500,
            message: Some("injected".into()),
            count: Some(2),
            latency_ms: None,
            ..Default::default()
        });
        let uri = format!("/compute/v2.1/servers/{id}");
        for _ in 0..2 {
            let r = m.get(&uri, &token).await;
            assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(r.body["computeFault"]["code"], 500);
            assert_eq!(r.body["computeFault"]["message"], "injected");
        }
        assert_eq!(m.get(&uri, &token).await.status, StatusCode::OK);
        let faulted = m.shared.journal.count(|e| e.fault == Some(rule));
        assert_eq!(faulted, 2);
        assert!(m.admin().faults().list().is_empty());
    }

    #[tokio::test]
    async fn faults_use_each_services_envelope() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        m.admin().faults().add(FaultJson {
            service: Some("compute".into()),
            status: 404,
            ..Default::default()
        });
        m.admin().faults().add(FaultJson {
            service: Some("compute".into()),
            status: 429,
            ..Default::default()
        });
        m.admin().faults().add(FaultJson {
            service: Some("network".into()),
            status: 503,
            count: Some(1),
            ..Default::default()
        });
        m.admin().faults().add(FaultJson {
            service: Some("identity".into()),
            status: 500,
            count: Some(1),
            ..Default::default()
        });
        let r = m.get("/compute/v2.1/servers/detail", &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["itemNotFound"]["code"], 404);
        let r = m.get("/network/v2.0/ports", &token).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.body["NeutronError"]["type"], "HTTPServiceUnavailable");
        assert!(r.headers.get("retry-after").is_some());
        let r = m.auth(m.password_auth("secret")).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(r.body["error"]["code"], 500);
        // The first (oldest) compute rule keeps winning; the 429 one never fires.
        assert_eq!(
            m.get("/compute/v2.1/flavors", &token).await.status,
            StatusCode::NOT_FOUND
        );
        let faults = m.admin().faults();
        faults.remove(faults.list()[0].id).expect("remove");
        let r = m.get("/compute/v2.1/flavors", &token).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.body["overLimit"]["code"], 429);
    }

    #[tokio::test]
    async fn latency_rule_delays_then_serves() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        m.admin().faults().add(FaultJson {
            path: Some("/flavors$".into()),
            latency_ms: Some(50),
            count: Some(1),
            ..Default::default()
        });
        let started = std::time::Instant::now();
        let r = m.get("/compute/v2.1/flavors", &token).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(
            m.shared
                .journal
                .count(|e| e.fault.is_some() && e.status == 200),
            1
        );
    }

    #[tokio::test]
    async fn admin_requests_are_never_faulted() {
        let m = Mock::seeded(1);
        m.admin().faults().add(FaultJson {
            status: 500,
            ..Default::default()
        });
        let r = m.send("GET", "/admin/servers", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn unknown_top_level_path_is_json_404() {
        let m = Mock::seeded(0);
        let r = m.send("GET", "/nothing", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert!(r.body["error"].is_string());
    }

    #[test]
    fn operations_name_the_route_and_resources_the_id() {
        use super::operation_and_resource;
        let id = "0b5c6f0e-1d2a-4c3b-9e8f-7a6b5c4d3e2f";
        assert_eq!(
            operation_and_resource("GET", &format!("/compute/v2.1/servers/{id}")),
            ("GET servers/{id}".to_string(), Some(id.to_string()))
        );
        assert_eq!(
            operation_and_resource("POST", "/load-balancer/v2.0/lbaas/loadbalancers"),
            ("POST lbaas/loadbalancers".to_string(), None)
        );
        assert_eq!(
            operation_and_resource(
                "PUT",
                &format!("/network/v2.0/routers/{id}/add_extraroutes")
            )
            .0,
            "PUT routers/{id}/add_extraroutes"
        );
        assert_eq!(operation_and_resource("GET", "/compute").0, "GET ");
    }

    #[tokio::test]
    async fn operation_and_resource_rules_match_one_server() {
        let m = Mock::seeded(2);
        let token = m.token().await;
        let a = m.admin().server_by_name("node-0").expect("seeded").id;
        let b = m.admin().server_by_name("node-1").expect("seeded").id;
        m.admin().faults().add(mock_cloud::FaultJson {
            operation: Some("GET servers/{id}".into()),
            resource: Some(a.clone()),
            status: 503,
            ..Default::default()
        });
        let r = m.get(&format!("/compute/v2.1/servers/{a}"), &token).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        let r = m.get(&format!("/compute/v2.1/servers/{b}"), &token).await;
        assert_eq!(r.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn throttle_preset_is_429_with_retry_after() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        m.admin().faults().add(mock_cloud::FaultJson {
            kind: Some(mock_cloud::FaultKind::Throttle),
            count: Some(1),
            ..Default::default()
        });
        let r = m.get("/network/v2.0/ports", &token).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.body["NeutronError"]["type"], "HTTPTooManyRequests");
        assert!(r.headers.get("retry-after").is_some());
    }

    #[tokio::test]
    async fn just_created_load_balancer_is_not_found_for_two_reads() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        m.admin().faults().add(mock_cloud::FaultJson {
            service: Some("load-balancer".into()),
            kind: Some(mock_cloud::FaultKind::NotFoundAfterCreate),
            window_reads: Some(2),
            ..Default::default()
        });
        let subnet = m.get("/network/v2.0/subnets", &token).await.body["subnets"][0]["id"]
            .as_str()
            .expect("subnet")
            .to_string();
        let body = serde_json::json!({"loadbalancer": {"name": "x", "vip_subnet_id": subnet}});
        let created = m
            .send(
                "POST",
                "/load-balancer/v2/lbaas/loadbalancers",
                &[
                    ("x-auth-token", &token),
                    ("content-type", "application/json"),
                ],
                body.to_string(),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let id = created.body["loadbalancer"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        let uri = format!("/load-balancer/v2/lbaas/loadbalancers/{id}");
        for _ in 0..2 {
            let r = m.get(&uri, &token).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND);
            assert!(r.body["faultstring"].is_string());
        }
        assert_eq!(m.get(&uri, &token).await.status, StatusCode::OK);
        // Lists are not affected: the LB was there all along.
        let list = m.get("/load-balancer/v2/lbaas/loadbalancers", &token).await;
        assert_eq!(list.body["loadbalancers"].as_array().map(Vec::len), Some(1));
    }
}
