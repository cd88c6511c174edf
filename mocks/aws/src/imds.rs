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
//! `hostname`, `public-ipv4`, `public-hostname`, `mac`, `iam/info`, and `/latest/meta-data/`
//! listing them (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-categories.html).
//!
//! Dynamic data: `GET /latest/dynamic/instance-identity/document`, the instance identity
//! document (JSON, the fields and order of the EC2 user guide's "Instance identity
//! documents" page: `accountId`, `architecture`, `availabilityZone`, `billingProducts`,
//! `devpayProductCodes`, `marketplaceProductCodes`, `imageId`, `instanceId`,
//! `instanceType`, `kernelId`, `pendingTime`, `privateIp`, `ramdiskId`, `region`,
//! `version`), what the AWS CCM reads first at start (aws-sdk-go-v2
//! `feature/ec2/imds` `GetInstanceIdentityDocument`), and `/latest/dynamic/` listing it.
//!
//! The instance's role: `iam/security-credentials/` lists one role ([`ROLE`]) and
//! `iam/security-credentials/<role>` answers its temporary credentials as JSON (`Code`,
//! `LastUpdated`, `Type`, `AccessKeyId`, `SecretAccessKey`, `Token`, `Expiration`; the
//! "Retrieve security credentials from instance metadata" page of the EC2 user guide), so
//! an SDK with no static keys signs with them. The mock's SigV4 check accepts that key only
//! with its `X-Amz-Security-Token` (`gate.rs`). The credentials live as long as the mock;
//! `Expiration` says six hours from start.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};

use serde::{Deserialize, Serialize};

use crate::Shared;
use crate::state::{public_dns_name, zone_id};

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
    "iam/",
    "placement/",
    "public-hostname",
    "public-ipv4",
];

/// The instance profile's role name IMDS lists.
pub const ROLE: &str = "ccm-conformance-node";

/// The temporary credentials of the instance's role, as IMDS hands them out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCredentials {
    pub role: String,
    /// `ASIA...`, as STS temporary keys are.
    pub access_key_id: String,
    pub secret_access_key: String,
    /// What a client sends as `X-Amz-Security-Token`.
    pub token: String,
    /// RFC 3339.
    pub last_updated: String,
    pub expiration: String,
}

impl RoleCredentials {
    fn generate() -> Self {
        let now = jiff::Timestamp::now();
        let expiration = now
            .checked_add(jiff::SignedDuration::from_hours(6))
            .unwrap_or(now);
        let stamp = |t: jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        RoleCredentials {
            role: ROLE.to_string(),
            access_key_id: format!("ASIA{}", crate::random_alnum(16, true)),
            secret_access_key: crate::random_alnum(40, false),
            token: crate::random_alnum(96, false),
            last_updated: stamp(now),
            expiration: stamp(expiration),
        }
    }
}

/// Which instance the service speaks for, the tokens it handed out, and the role's
/// credentials.
pub(crate) struct ImdsState {
    instance: Mutex<Option<String>>,
    tokens: Mutex<HashMap<String, Instant>>,
    pub credentials: RoleCredentials,
}

impl Default for ImdsState {
    fn default() -> Self {
        ImdsState {
            instance: Mutex::default(),
            tokens: Mutex::default(),
            credentials: RoleCredentials::generate(),
        }
    }
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
        .route("/latest/dynamic/", get(dynamic_listing))
        .route("/latest/dynamic/{*path}", get(dynamic))
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

/// Whether the request carries a valid token (without one IMDSv2 answers 401).
fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| shared.imds.valid(t))
}

fn unauthorized() -> Response {
    text(StatusCode::UNAUTHORIZED, "Unauthorized")
}

async fn listing(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    text(StatusCode::OK, PATHS.join("\n"))
}

async fn metadata(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    // The raw path, not axum's `Path` extractor: that refuses a segment that does not
    // percent-decode to UTF-8 (`%a0`) with its own 400 before the token is checked, where
    // IMDS answers 401 / 404 (found by the property tests). Every served path is ASCII.
    let path = uri
        .path()
        .strip_prefix("/latest/meta-data/")
        .unwrap_or_default();
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
        "iam" => Some("info\nsecurity-credentials/".into()),
        "iam/security-credentials" => Some(ROLE.into()),
        "iam/info" => {
            let c = &shared.imds.credentials;
            Some(
                serde_json::json!({
                    "Code": "Success",
                    "LastUpdated": c.last_updated,
                    "InstanceProfileArn": instance_profile_arn(&cloud.account_id),
                    "InstanceProfileId": INSTANCE_PROFILE_ID,
                })
                .to_string(),
            )
        }
        p if p.strip_prefix("iam/security-credentials/") == Some(ROLE) => {
            let c = &shared.imds.credentials;
            Some(
                serde_json::json!({
                    "Code": "Success",
                    "LastUpdated": c.last_updated,
                    "Type": "AWS-HMAC",
                    "AccessKeyId": c.access_key_id,
                    "SecretAccessKey": c.secret_access_key,
                    "Token": c.token,
                    "Expiration": c.expiration,
                })
                .to_string(),
            )
        }
        _ => None,
    };
    match value {
        Some(v) => text(StatusCode::OK, v),
        None => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// The instance profile holding [`ROLE`] (`iam/info`).
fn instance_profile_arn(account: &str) -> String {
    format!("arn:aws:iam::{account}:instance-profile/{ROLE}")
}

/// The instance profile's id (IAM ids of instance profiles start with `AIPA`).
const INSTANCE_PROFILE_ID: &str = "AIPAJ2CCMCONFORMANCE01";

async fn dynamic_listing(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    text(StatusCode::OK, "instance-identity/")
}

/// `/latest/dynamic/instance-identity/...`: the listing and the identity document.
async fn dynamic(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let path = uri
        .path()
        .strip_prefix("/latest/dynamic/")
        .unwrap_or_default();
    match path.trim_end_matches('/') {
        "instance-identity" => text(StatusCode::OK, "document"),
        "instance-identity/document" => match identity_document(&shared) {
            Some(doc) => {
                let mut r = text(StatusCode::OK, doc);
                // IMDS serves the document as text/plain, like every other path.
                r.headers_mut()
                    .insert("content-type", HeaderValue::from_static("text/plain"));
                r
            }
            None => text(StatusCode::NOT_FOUND, "Not Found"),
        },
        _ => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// The chosen instance's identity document, pretty-printed with `" : "` as IMDS does
/// (`None`: no instance chosen, or it is gone).
fn identity_document(shared: &Shared) -> Option<String> {
    let id = shared.imds.instance()?;
    let cloud = shared.cloud();
    let i = cloud.instance(&id)?;
    let doc = serde_json::json!({
        "accountId": cloud.account_id,
        "architecture": "x86_64",
        "availabilityZone": i.zone,
        "billingProducts": null,
        "devpayProductCodes": null,
        "marketplaceProductCodes": null,
        "imageId": i.image_id,
        "instanceId": i.id,
        "instanceType": i.instance_type,
        "kernelId": null,
        "pendingTime": i.launch_time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "privateIp": i.private_ip.to_string(),
        "ramdiskId": null,
        "region": cloud.region,
        "version": "2017-09-30",
    });
    // serde_json keeps insertion order only with `preserve_order`; write the document's
    // documented key order by hand.
    let keys = [
        "accountId",
        "architecture",
        "availabilityZone",
        "billingProducts",
        "devpayProductCodes",
        "marketplaceProductCodes",
        "imageId",
        "instanceId",
        "instanceType",
        "kernelId",
        "pendingTime",
        "privateIp",
        "ramdiskId",
        "region",
        "version",
    ];
    let lines: Vec<String> = keys
        .iter()
        .map(|k| format!("  \"{k}\" : {}", doc[*k]))
        .collect();
    Some(format!("{{\n{}\n}}", lines.join(",\n")))
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
        // The role and its credentials.
        let (status, roles) = call(
            &r,
            get_with("/latest/meta-data/iam/security-credentials/", Some(&token)),
        )
        .await;
        assert_eq!((status, roles.as_str()), (StatusCode::OK, ROLE));
        let (status, body) = call(
            &r,
            get_with(
                &format!("/latest/meta-data/iam/security-credentials/{ROLE}"),
                Some(&token),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let creds: serde_json::Value = serde_json::from_str(&body).expect("json");
        let want = &shared.imds.credentials;
        assert_eq!(creds["Code"], "Success");
        assert_eq!(creds["Type"], "AWS-HMAC");
        assert_eq!(creds["AccessKeyId"], want.access_key_id.as_str());
        assert_eq!(creds["SecretAccessKey"], want.secret_access_key.as_str());
        assert_eq!(creds["Token"], want.token.as_str());
        assert!(
            creds["Expiration"]
                .as_str()
                .is_some_and(|e| e.ends_with('Z'))
        );
        assert!(
            creds["LastUpdated"]
                .as_str()
                .is_some_and(|e| e.ends_with('Z'))
        );
        assert_eq!(
            call(
                &r,
                get_with(
                    "/latest/meta-data/iam/security-credentials/other",
                    Some(&token)
                )
            )
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

    /// aws-sdk-go-v2 `feature/ec2/imds` `GetInstanceIdentityDocument` (the AWS CCM's first
    /// call at start) reads `/latest/dynamic/instance-identity/document`, which the mock
    /// did not serve (404), and decodes `pendingTime` as RFC 3339; `GetIAMInfo` reads
    /// `iam/info`, which the `iam/` listing named but the mock answered 404. Fields as the
    /// EC2 user guide's "Instance identity documents" and "Instance metadata categories"
    /// pages show them.
    #[tokio::test]
    async fn identity_document_and_iam_info_describe_the_chosen_instance() {
        let shared = Arc::new(
            build_shared(
                Config {
                    nodes: 2,
                    ..Config::default()
                },
                "http://127.0.0.1:1".into(),
            )
            .expect("shared"),
        );
        let r = router(shared.clone());
        let req = Request::put("/latest/api/token")
            .header(TTL_HEADER, "21600")
            .body(Body::empty())
            .expect("request");
        let (status, token) = call(&r, req).await;
        assert_eq!(status, StatusCode::OK);
        let doc_path = "/latest/dynamic/instance-identity/document";
        assert_eq!(
            call(&r, get_with(doc_path, None)).await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            call(&r, get_with(doc_path, Some(&token))).await.0,
            StatusCode::NOT_FOUND,
            "no instance chosen"
        );
        let (id, zone, ip, image, itype) = {
            let cloud = shared.cloud();
            let i = &cloud.instances[1];
            (
                i.id.clone(),
                i.zone.clone(),
                i.private_ip.to_string(),
                i.image_id.clone(),
                i.instance_type.clone(),
            )
        };
        shared.imds.set_instance(Some(id.clone()));
        let (status, body) = call(&r, get_with(doc_path, Some(&token))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let doc: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(doc["instanceId"], id.as_str());
        assert_eq!(doc["availabilityZone"], zone.as_str());
        assert_eq!(doc["privateIp"], ip.as_str());
        assert_eq!(doc["imageId"], image.as_str());
        assert_eq!(doc["instanceType"], itype.as_str());
        assert_eq!(doc["region"], "us-west-2");
        assert_eq!(doc["accountId"], "123456789012");
        assert_eq!(doc["version"], "2017-09-30");
        assert!(doc["kernelId"].is_null() && doc["billingProducts"].is_null());
        let pending = doc["pendingTime"].as_str().expect("pendingTime");
        assert!(
            pending.parse::<jiff::Timestamp>().is_ok() && pending.ends_with('Z'),
            "{pending}"
        );
        assert!(body.starts_with("{\n  \"accountId\" : "), "{body}");
        let (status, listing) = call(&r, get_with("/latest/dynamic/", Some(&token))).await;
        assert_eq!(
            (status, listing.as_str()),
            (StatusCode::OK, "instance-identity/")
        );
        let (status, listing) = call(
            &r,
            get_with("/latest/dynamic/instance-identity/", Some(&token)),
        )
        .await;
        assert_eq!((status, listing.as_str()), (StatusCode::OK, "document"));

        let (status, body) = call(&r, get_with("/latest/meta-data/iam/info", Some(&token))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let info: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(info["Code"], "Success");
        assert_eq!(
            info["InstanceProfileArn"],
            format!("arn:aws:iam::123456789012:instance-profile/{ROLE}").as_str()
        );
        assert!(
            info["InstanceProfileId"]
                .as_str()
                .is_some_and(|v| v.starts_with("AIPA"))
        );
        assert!(
            info["LastUpdated"]
                .as_str()
                .is_some_and(|v| v.parse::<jiff::Timestamp>().is_ok())
        );
    }
}
