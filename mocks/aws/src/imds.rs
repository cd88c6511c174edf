//! The EC2 instance metadata service (IMDSv2) for one chosen instance, on a listener of
//! its own: what a CCM (or an SDK's region/credential chain) running "on" that instance
//! reads when its config leaves the zone or instance id out. IMDSv2 only, as instances
//! launched with `HttpTokens=required` answer:
//!
//! - `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1..=21600) ->
//!   a token; a missing or bad TTL is 400, and a request carrying `X-Forwarded-For` is 403
//!   (IMDS refuses token requests that went through a proxy).
//! - `GET /latest/meta-data/<path>` with `X-aws-ec2-metadata-token` -> text; no token or an
//!   unknown/expired one is 401; unknown paths, no chosen instance, or no public IP are 404.
//!
//! Paths: `instance-id`, `instance-type`, `placement/availability-zone`,
//! `placement/availability-zone-id`, `placement/region`, `local-ipv4`, `local-hostname`,
//! `hostname`, `public-ipv4`, `public-hostname`, `mac`, and `/latest/meta-data/` listing them
//! (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-categories.html).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};

use crate::Shared;
use crate::model::{public_dns_name, zone_id};

/// Longest token lifetime IMDS grants (6 hours).
const MAX_TTL_SECONDS: u64 = 21_600;

const TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";
const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";

/// The metadata paths served, as `/latest/meta-data/` lists them.
const PATHS: &[&str] = &[
    "hostname",
    "instance-id",
    "instance-type",
    "local-hostname",
    "local-ipv4",
    "mac",
    "placement/",
    "public-hostname",
    "public-ipv4",
];

/// Which instance the service speaks for, and the tokens it handed out.
#[derive(Default)]
pub(crate) struct ImdsState {
    instance: Mutex<Option<String>>,
    tokens: Mutex<HashMap<String, Instant>>,
}

impl ImdsState {
    pub fn set_instance(&self, id: Option<String>) {
        *self.instance.lock().unwrap_or_else(|p| p.into_inner()) = id;
    }

    pub fn instance(&self) -> Option<String> {
        self.instance
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn issue(&self, ttl: Duration) -> String {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let now = Instant::now();
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.retain(|_, expiry| *expiry > now);
        tokens.insert(token.clone(), now + ttl);
        token
    }

    fn valid(&self, token: &str) -> bool {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .is_some_and(|expiry| *expiry > Instant::now())
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/latest/api/token", put(token))
        .route("/latest/meta-data/", get(listing))
        .route("/latest/meta-data/{*path}", get(metadata))
        .fallback(|| async { text(StatusCode::NOT_FOUND, "Not Found") })
        .with_state(shared)
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (status, [("content-type", "text/plain")], body.into()).into_response()
}

async fn token(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if headers.contains_key("x-forwarded-for") {
        return text(StatusCode::FORBIDDEN, "Forbidden");
    }
    let ttl = headers
        .get(TTL_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|t| (1..=MAX_TTL_SECONDS).contains(t));
    match ttl {
        Some(t) => {
            let token = shared.imds.issue(Duration::from_secs(t));
            let mut r = text(StatusCode::OK, token);
            if let Ok(v) = t.to_string().parse() {
                r.headers_mut().insert(TTL_HEADER, v);
            }
            r
        }
        None => text(StatusCode::BAD_REQUEST, "Bad Request"),
    }
}

/// `Err` is the refusal to answer: 401 without a valid token.
fn authorized(shared: &Shared, headers: &HeaderMap) -> Result<(), Response> {
    let ok = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| shared.imds.valid(t));
    if ok {
        Ok(())
    } else {
        Err(text(StatusCode::UNAUTHORIZED, "Unauthorized"))
    }
}

async fn listing(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorized(&shared, &headers) {
        return r;
    }
    text(StatusCode::OK, PATHS.join("\n"))
}

async fn metadata(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(path): Path<String>,
) -> Response {
    if let Err(r) = authorized(&shared, &headers) {
        return r;
    }
    let Some(id) = shared.imds.instance() else {
        return text(StatusCode::NOT_FOUND, "Not Found");
    };
    let cloud = shared.cloud();
    let Some(i) = cloud.instance(&id) else {
        return text(StatusCode::NOT_FOUND, "Not Found");
    };
    let local_hostname = cloud.private_dns_of(i);
    let value = match path.trim_end_matches('/') {
        "instance-id" => Some(i.id.clone()),
        "instance-type" => Some(i.instance_type.clone()),
        "placement" => Some("availability-zone\navailability-zone-id\nregion".into()),
        "placement/availability-zone" => Some(i.zone.clone()),
        "placement/availability-zone-id" => Some(zone_id(&i.zone)),
        "placement/region" => Some(cloud.region.clone()),
        "local-ipv4" => Some(i.private_ip.to_string()),
        "local-hostname" | "hostname" => Some(local_hostname),
        "public-ipv4" => i.public_ip.map(|ip| ip.to_string()),
        "public-hostname" => i.public_ip.map(|ip| public_dns_name(&cloud.region, ip)),
        "mac" => Some(crate::ec2::mac_of(i)),
        _ => None,
    };
    match value {
        Some(v) => text(StatusCode::OK, v),
        None => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;
    use crate::{Config, build_shared};

    async fn call(router: &Router, req: Request<Body>) -> (StatusCode, String) {
        let resp = router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).to_string())
    }

    fn get_with(path: &str, token: Option<&str>) -> Request<Body> {
        let mut b = Request::get(path);
        if let Some(t) = token {
            b = b.header(TOKEN_HEADER, t);
        }
        b.body(Body::empty()).expect("request")
    }

    #[tokio::test]
    async fn tokens_gate_the_metadata_of_the_chosen_instance() {
        let shared = Arc::new(
            build_shared(
                Config {
                    nodes: 1,
                    ..Config::default()
                },
                "http://127.0.0.1:1".into(),
            )
            .expect("shared"),
        );
        let r = router(shared.clone());
        let put_token = |ttl: Option<&str>, forwarded: bool| {
            let mut b = Request::put("/latest/api/token");
            if let Some(t) = ttl {
                b = b.header(TTL_HEADER, t);
            }
            if forwarded {
                b = b.header("x-forwarded-for", "10.0.0.1");
            }
            b.body(Body::empty()).expect("request")
        };
        assert_eq!(
            call(&r, put_token(None, false)).await.0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            call(&r, put_token(Some("0"), false)).await.0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            call(&r, put_token(Some("21601"), false)).await.0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            call(&r, put_token(Some("60"), true)).await.0,
            StatusCode::FORBIDDEN
        );
        let (status, token) = call(&r, put_token(Some("60"), false)).await;
        assert_eq!(status, StatusCode::OK);

        let id_path = "/latest/meta-data/instance-id";
        assert_eq!(
            call(&r, get_with(id_path, None)).await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            call(&r, get_with(id_path, Some("forged"))).await.0,
            StatusCode::UNAUTHORIZED
        );
        // No instance chosen yet.
        assert_eq!(
            call(&r, get_with(id_path, Some(&token))).await.0,
            StatusCode::NOT_FOUND
        );
        let (id, zone, ip, dns, public) = {
            let cloud = shared.cloud();
            let i = &cloud.instances[0];
            (
                i.id.clone(),
                i.zone.clone(),
                i.private_ip.to_string(),
                cloud.private_dns_of(i),
                i.public_ip.map(|p| p.to_string()),
            )
        };
        shared.imds.set_instance(Some(id.clone()));
        for (path, want) in [
            ("instance-id", id.as_str()),
            ("placement/availability-zone", zone.as_str()),
            ("placement/region", "us-west-2"),
            ("local-ipv4", ip.as_str()),
            ("local-hostname", dns.as_str()),
            ("public-ipv4", public.as_deref().unwrap_or_default()),
        ] {
            let (status, body) = call(
                &r,
                get_with(&format!("/latest/meta-data/{path}"), Some(&token)),
            )
            .await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, want), "{path}");
        }
        let (status, listing) = call(&r, get_with("/latest/meta-data/", Some(&token))).await;
        assert_eq!(status, StatusCode::OK);
        assert!(listing.lines().any(|l| l == "instance-id"), "{listing}");
        assert_eq!(
            call(&r, get_with("/latest/meta-data/nope", Some(&token)))
                .await
                .0,
            StatusCode::NOT_FOUND
        );
        // Without a public IP, public-ipv4 is not there.
        shared
            .cloud()
            .update_instance(
                &id,
                crate::InstancePatch {
                    public_ip: Some(false),
                    ..Default::default()
                },
            )
            .expect("update");
        assert_eq!(
            call(&r, get_with("/latest/meta-data/public-ipv4", Some(&token)))
                .await
                .0,
            StatusCode::NOT_FOUND
        );
    }
}
