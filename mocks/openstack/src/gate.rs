//! What happens to every request before it reaches a service: token check (what
//! keystonemiddleware does in front of Nova and Neutron), fault injection, and the journal
//! entry once the answer is known. Keeping it in one layer means no handler can forget it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

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

pub(crate) async fn gate(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let service = Service::of(&path);
    let mut fault_id = None;

    let response = 'answer: {
        let needs_token = matches!(
            service,
            Service::Compute | Service::Network | Service::LoadBalancer
        ) && !is_public_discovery(&path);
        if needs_token {
            let token = req
                .headers()
                .get("x-auth-token")
                .and_then(|v| v.to_str().ok());
            if !token.is_some_and(|t| shared.token_valid(t)) {
                let mut response = envelope::unauthorized();
                // keystonemiddleware points clients at Keystone this way.
                let challenge = format!("Keystone uri=\"{}/identity\"", shared.base);
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response.headers_mut().insert("www-authenticate", value);
                }
                break 'answer response;
            }
        }
        if service != Service::Admin
            && let Some(fired) = shared.faults.check(service.name(), method.as_str(), &path)
        {
            fault_id = Some(fired.rule_id);
            if let Some(delay) = fired.latency {
                tokio::time::sleep(delay).await;
            }
            if let Some(status) = fired.status {
                break 'answer envelope::fault(service, status, fired.message.as_deref());
            }
        }
        next.run(req).await
    };

    let status = response.status().as_u16();
    if method != axum::http::Method::GET {
        shared.dataplane_wake.notify_one();
    }
    shared.journal.record(
        service.name(),
        method.as_str(),
        &path,
        &query,
        status,
        fault_id,
    );
    tracing::debug!(service = service.name(), %method, %path, status, "request");
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::StatusCode;
    use mock_cloud::FaultRule;

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
    async fn compute_fault_fires_exactly_count_times_in_nova_envelope() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let id = m.admin().server_by_name("node-0").expect("seeded").id;
        let rule = m.admin().faults().add(FaultRule {
            service: Some("compute".into()),
            method: Some("GET".into()),
            path: Some("/servers/".into()),
            status: 500,
            message: Some("injected".into()),
            count: Some(2),
            latency_ms: None,
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
        m.admin().faults().add(FaultRule {
            service: Some("compute".into()),
            status: 404,
            ..Default::default()
        });
        m.admin().faults().add(FaultRule {
            service: Some("compute".into()),
            status: 429,
            ..Default::default()
        });
        m.admin().faults().add(FaultRule {
            service: Some("network".into()),
            status: 503,
            count: Some(1),
            ..Default::default()
        });
        m.admin().faults().add(FaultRule {
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
        m.admin().faults().add(FaultRule {
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
        m.admin().faults().add(FaultRule {
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
}
