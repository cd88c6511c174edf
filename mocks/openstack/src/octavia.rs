//! Octavia, for now only its discovery document (so catalog-driven clients that probe
//! every service root succeed); the load-balancer API itself arrives with issue 4 and
//! answers 501 in Octavia's error shape until then.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{any, get};
use serde_json::{Value, json};

use crate::Shared;
use crate::envelope::octavia_error;
use crate::util::json;

/// The newest API minor version we announce; CPO reads the last entry of the list, so it
/// is ascending (cloud-provider-openstack `pkg/openstack/loadbalancer.go`).
const MAX_MINOR: u32 = 27;

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions))
        .route("/load-balancer/v2", any(not_implemented))
        .route("/load-balancer/v2/{*rest}", any(not_implemented))
        .route("/load-balancer/v2.0", any(not_implemented))
        .route("/load-balancer/v2.0/{*rest}", any(not_implemented))
        .with_state(shared)
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

async fn not_implemented() -> Response {
    octavia_error(
        StatusCode::NOT_IMPLEMENTED,
        "The load-balancer API is not implemented by this mock yet.",
    )
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;
    use crate::testing::Mock;

    #[tokio::test]
    async fn versions_ascending_and_api_not_implemented() {
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
        let r = m.get("/load-balancer/v2/lbaas/loadbalancers", &token).await;
        assert_eq!(r.status, StatusCode::NOT_IMPLEMENTED);
        assert_eq!(r.body["faultcode"], "Server");
    }
}
