//! The OpenStack part of the control API under `/admin` (the journal, fault and reset
//! routes come from `mock-cloud`): servers can be listed, created, changed and deleted
//! without Keystone, so cases shape the cloud the CCM sees; Octavia's lifecycle modes
//! (immediate / reads N / seconds T / error / stuck, by default, type or load balancer)
//! are set here; load balancers are listed; and `GET /admin/leaks` reports what the
//! cloud APIs created that still exists.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use mock_cloud::{AdminRejection, parse_admin_json};
use serde_json::json;

use crate::state::{AdminError, ServerPatch, ServerSpec};
use crate::{Admin, LifecycleMode, LifecycleTarget};

pub(crate) fn routes(admin: Admin) -> Router {
    Router::new()
        .route("/servers", get(list).post(create))
        .route("/servers/{id}", get(show).patch(update).delete(remove))
        .route("/loadbalancers", get(list_lbs))
        .route("/leaks", get(leaks))
        .route("/lifecycle", get(lifecycle))
        .route("/lifecycle/default", put(set_default).delete(clear_default))
        .route("/lifecycle/types/{kind}", put(set_type).delete(clear_type))
        .route(
            "/lifecycle/loadbalancers/{id}",
            put(set_lb).delete(clear_lb),
        )
        .with_state(admin)
}

fn rejection(e: AdminError) -> AdminRejection {
    let status = match e {
        AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::AddressInUse(_) | AdminError::Exhausted(_) | AdminError::InvalidState(_) => {
            StatusCode::CONFLICT
        }
    };
    AdminRejection::new(status, e.to_string())
}

async fn list(State(admin): State<Admin>) -> Response {
    Json(json!({ "servers": admin.servers() })).into_response()
}

async fn show(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<Response, AdminRejection> {
    let server = admin
        .server(&id)
        .ok_or_else(|| rejection(AdminError::NotFound(id)))?;
    Ok(Json(server).into_response())
}

async fn create(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let spec: ServerSpec = parse_admin_json(body)?;
    let server = admin.create_server(spec).map_err(rejection)?;
    Ok((StatusCode::CREATED, Json(server)).into_response())
}

async fn update(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    let patch: ServerPatch = parse_admin_json(body)?;
    let server = admin.update_server(&id, patch).map_err(rejection)?;
    Ok(Json(server).into_response())
}

async fn remove(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminRejection> {
    admin.delete_server(&id).map_err(rejection)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_lbs(State(admin): State<Admin>) -> Response {
    Json(json!({ "loadbalancers": admin.load_balancers() })).into_response()
}

async fn leaks(State(admin): State<Admin>) -> Response {
    Json(admin.leaks()).into_response()
}

async fn lifecycle(State(admin): State<Admin>) -> Response {
    Json(admin.lifecycle()).into_response()
}

fn set_mode(
    admin: &Admin,
    target: LifecycleTarget,
    body: Option<Result<Bytes, BytesRejection>>,
) -> Result<Response, AdminRejection> {
    let mode: Option<LifecycleMode> = body.map(parse_admin_json).transpose()?;
    admin.set_lifecycle(target, mode).map_err(rejection)?;
    Ok(Json(admin.lifecycle()).into_response())
}

async fn set_default(
    State(admin): State<Admin>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::Default, Some(body))
}

async fn clear_default(State(admin): State<Admin>) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::Default, None)
}

async fn set_type(
    State(admin): State<Admin>,
    Path(kind): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::Type(kind), Some(body))
}

async fn clear_type(
    State(admin): State<Admin>,
    Path(kind): Path<String>,
) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::Type(kind), None)
}

async fn set_lb(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::LoadBalancer(id), Some(body))
}

async fn clear_lb(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> Result<Response, AdminRejection> {
    set_mode(&admin, LifecycleTarget::LoadBalancer(id), None)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use serde_json::json;

    use super::*;
    use crate::testing::Mock;

    #[tokio::test]
    async fn list_create_patch_delete() {
        let m = Mock::seeded(2);
        let r = m.send("GET", "/admin/servers", &[], Body::empty()).await;
        let names: Vec<&str> = r.body["servers"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        assert_eq!(names, vec!["node-0", "node-1"]);

        let spec = json!({"name": "extra", "az": "az-1", "flavor": "m1.large", "floating_ips": [],
            "internal_ips": ["127.10.5.5"], "metadata": {"hostname": "extra.local"}});
        let r = m.admin_json("POST", "/admin/servers", spec).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["internal_ips"], json!(["127.10.5.5"]));
        assert_eq!(r.body["floating_ips"], json!([]));
        assert_eq!(r.body["az"], "az-1");
        let id = r.body["id"].as_str().expect("id").to_string();

        let r = m
            .admin_json(
                "PATCH",
                &format!("/admin/servers/{id}"),
                json!({"status": "SHUTOFF", "access_ipv4": "127.30.0.9"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["status"], "SHUTOFF");
        assert_eq!(r.body["access_ipv4"], "127.30.0.9");
        let token = m.token().await;
        let r2 = m.get(&format!("/compute/v2.1/servers/{id}"), &token).await;
        assert_eq!(r2.body["server"]["accessIPv4"], "127.30.0.9");
        assert_eq!(r2.body["server"]["OS-EXT-STS:vm_state"], "stopped");
        assert_eq!(r2.body["server"]["metadata"]["hostname"], "extra.local");
        let r = m
            .send("GET", &format!("/admin/servers/{id}"), &[], Body::empty())
            .await;
        assert_eq!(r.body["name"], "extra");

        let r = m
            .send(
                "DELETE",
                &format!("/admin/servers/{id}"),
                &[],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let r = m.get(&format!("/compute/v2.1/servers/{id}"), &token).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = m
            .send(
                "DELETE",
                &format!("/admin/servers/{id}"),
                &[],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert!(r.body["error"].is_string());
    }

    #[tokio::test]
    async fn bad_admin_input_is_4xx_json() {
        let m = Mock::seeded(1);
        let taken = m.admin().servers()[0].internal_ips[0].clone();
        for (body, status) in [
            (
                json!({"name": "x", "flavor": "nope"}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"name": "x", "unknown_field": 1}),
                StatusCode::BAD_REQUEST,
            ),
            (json!({"az": "x"}), StatusCode::BAD_REQUEST),
            (
                json!({"name": "x", "internal_ips": [taken]}),
                StatusCode::CONFLICT,
            ),
        ] {
            let r = m.admin_json("POST", "/admin/servers", body.clone()).await;
            assert_eq!(r.status, status, "{body}");
            assert!(r.body["error"].is_string(), "{body}");
        }
        let r = m.send("POST", "/admin/servers", &[], "{nope").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = m
            .admin_json("PATCH", "/admin/servers/none", json!({}))
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let big = format!("{{\"name\": \"{}\"}}", "x".repeat(crate::BODY_LIMIT));
        let r = m.send("POST", "/admin/servers", &[], big).await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(r.body["error"].is_string());
        assert_eq!(m.admin().servers().len(), 1);
    }

    #[tokio::test]
    async fn faults_over_http_fire_in_service_envelope() {
        let m = Mock::seeded(1);
        let token = m.token().await;
        let rule = json!({"service": "network", "path": "/ports$", "status": 500, "count": 1});
        let r = m.admin_json("POST", "/admin/faults", rule).await;
        assert_eq!(r.status, StatusCode::CREATED);
        let r = m.get("/network/v2.0/ports", &token).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(r.body["NeutronError"]["type"], "HTTPInternalServerError");
        assert_eq!(
            m.get("/network/v2.0/ports", &token).await.status,
            StatusCode::OK
        );
        let r = m.send("GET", "/admin/journal", &[], Body::empty()).await;
        let faulted = r.body["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| !e["fault"].is_null())
            .count();
        assert_eq!(faulted, 1);
    }

    #[tokio::test]
    async fn lifecycle_modes_and_lb_list_and_leaks_over_http() {
        let m = Mock::seeded(0);
        let r = m
            .admin_json(
                "PUT",
                "/admin/lifecycle/types/loadbalancer",
                json!({"mode": "reads", "n": 2}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(
            r.body["by_type"]["loadbalancer"],
            json!({"mode": "reads", "n": 2})
        );
        let r = m
            .admin_json(
                "PUT",
                "/admin/lifecycle/default",
                json!({"mode": "seconds", "t": 0.01}),
            )
            .await;
        assert_eq!(r.body["default"], json!({"mode": "seconds", "t": 0.01}));
        for (uri, body) in [
            ("/admin/lifecycle/types/widget", json!({"mode": "stuck"})),
            (
                "/admin/lifecycle/default",
                json!({"mode": "seconds", "t": -1}),
            ),
            ("/admin/lifecycle/default", json!({"mode": "sometimes"})),
        ] {
            let r = m.admin_json("PUT", uri, body.clone()).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{uri} {body}");
            assert!(r.body["error"].is_string());
        }
        let r = m
            .send(
                "DELETE",
                "/admin/lifecycle/types/loadbalancer",
                &[],
                Body::empty(),
            )
            .await;
        assert_eq!(r.body["by_type"], json!({}));

        let token = m.token().await;
        let subnet = m.shared.cloud().subnets[0].id.clone();
        let r = m
            .send(
                "POST",
                "/load-balancer/v2/lbaas/loadbalancers",
                &[("x-auth-token", &token)],
                json!({"loadbalancer": {"name": "a", "vip_subnet_id": subnet}}).to_string(),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        let r = m
            .send("GET", "/admin/loadbalancers", &[], Body::empty())
            .await;
        assert_eq!(r.body["loadbalancers"][0]["name"], "a");
        let r = m.send("GET", "/admin/leaks", &[], Body::empty()).await;
        assert_eq!(r.body["total"], 1);
        assert_eq!(r.body["by_type"]["loadbalancers"][0]["name"], "a");
        // Time-based: wait on the condition with a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let r = m
                .send("GET", "/admin/loadbalancers", &[], Body::empty())
                .await;
            if r.body["loadbalancers"][0]["provisioning_status"] == "ACTIVE" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never became ACTIVE");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // Reset forgets load balancers and modes.
        m.admin().reset();
        assert!(m.admin().load_balancers().is_empty());
        assert_eq!(m.admin().lifecycle(), crate::LifecyclePolicies::default());
    }

    #[tokio::test]
    async fn reset_restores_the_seed() {
        let m = Mock::seeded(2);
        let before = m.admin().servers();
        let first = before[0].id.clone();
        m.admin().delete_server(&first).expect("delete");
        m.admin()
            .create_server(crate::ServerSpec {
                name: "x".into(),
                ..Default::default()
            })
            .expect("create");
        m.admin().faults().add(mock_cloud::FaultJson {
            status: 500,
            ..Default::default()
        });
        let r = m.send("POST", "/admin/reset", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(m.admin().servers(), before);
        assert!(m.admin().faults().list().is_empty());
        // The journal was cleared before the reset request itself was recorded.
        assert_eq!(m.admin().journal().len(), 1);
        m.admin().reset();
        assert_eq!(m.admin().servers(), before);
        assert!(m.admin().journal().is_empty());
    }
}
