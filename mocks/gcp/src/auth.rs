//! Tokens and the metadata server.
//!
//! - `POST /token`: Google's OAuth token endpoint, as golang.org/x/oauth2 `google`
//!   (service-account JWT: `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` +
//!   `assertion`; user credentials: `grant_type=refresh_token`) and google-auth (Python)
//!   post it: a form with a `grant_type` gets `{access_token, expires_in, token_type}`.
//!   No signature is checked (the mock has no keys to check against).
//! - `/computeMetadata/v1/...`: the metadata server, as cloud.google.com/go/compute/metadata
//!   (`metadata.go`) reads it: every request must carry `Metadata-Flavor: Google` (403
//!   otherwise, as the real server answers) and every answer carries it; `GET /` answers
//!   200 with the header whatever the request (the on-GCE probe sends none). Values:
//!   `project/project-id`, `project/numeric-project-id`, `instance/{id,name,zone}`
//!   (`projects/<number>/zones/<zone>`), `instance/network-interfaces/[0/ip]`,
//!   `.../0/network`, `.../0/access-configs[/0/external-ip]`, `instance/machine-type`,
//!   `instance/tags` (JSON), `instance/service-accounts/` (listing, `?recursive=true`
//!   JSON), `.../default/{email,scopes,token}`, `universe/universe-domain`
//!   (`googleapis.com`). The metadata server describes the first instance.
//!   `instance/hostname` is 404 on purpose: cloud-provider-gcp
//!   (`providers/gce/gce_instances.go`, `isCurrentInstance` via
//!   `getInstanceIDViaMetadata`) then knows it does not run on a node and reads every
//!   node's addresses through the Compute API, which is what a conformance case checks.
//!
//! The Compute API accepts `Authorization: Bearer <token>` for a token issued here and
//! not expired, and a self-signed service-account JWT (google.golang.org/api signs its
//! own JWT instead of asking the token endpoint when it has a key file and no scopes
//! override; the mock cannot check the signature, so it checks the shape: three
//! base64url parts, a JSON payload with `iss`). Missing: 401 `required`; anything else:
//! 401 `authError`. `allow_anonymous` (upstream `token-url = nil`) lets calls without a
//! header through; a bad header is still refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use base64::Engine;
use serde_json::json;

use crate::Shared;
use crate::error::ApiError;

/// A token this mock issued.
#[derive(Debug, Clone)]
pub struct Token {
    pub expires: Instant,
}

/// Why a token request was refused (OAuth's `{"error","error_description"}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the body is not a form with a grant_type")]
    NoGrantType,
    #[error("unsupported grant_type {0:?}")]
    Unsupported(String),
    #[error("grant_type {0} needs {1}")]
    Missing(String, &'static str),
}

/// The grant types accepted and the field each needs.
const GRANTS: &[(&str, Option<&str>)] = &[
    (
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        Some("assertion"),
    ),
    ("refresh_token", Some("refresh_token")),
    ("client_credentials", None),
    (
        "urn:ietf:params:oauth:grant-type:token-exchange",
        Some("subject_token"),
    ),
];

/// Checks a token request form.
pub fn parse_token_form(body: &[u8]) -> Result<String, TokenError> {
    let fields: Vec<(String, String)> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let grant = get("grant_type")
        .filter(|g| !g.is_empty())
        .ok_or(TokenError::NoGrantType)?;
    let Some((_, needs)) = GRANTS.iter().find(|(g, _)| *g == grant) else {
        return Err(TokenError::Unsupported(grant.chars().take(100).collect()));
    };
    if let Some(field) = needs
        && get(field).is_none_or(str::is_empty)
    {
        return Err(TokenError::Missing(grant.to_string(), field));
    }
    Ok(grant.to_string())
}

impl Shared {
    /// Issues a token.
    pub fn issue_token(&self) -> (String, u64) {
        let token = format!("ya29.mock-{}", uuid::Uuid::new_v4().simple());
        let ttl = self.config.token_ttl;
        let now = Instant::now();
        let mut tokens = self.tokens();
        // Clients cache tokens, but a hot loop must not grow the table without bound.
        if tokens.len() >= MAX_TOKENS {
            tokens.retain(|_, t| t.expires > now);
        }
        tokens.insert(token.clone(), Token { expires: now + ttl });
        drop(tokens);
        (token, ttl.as_secs().max(1))
    }

    /// The Compute API's check of `Authorization`.
    pub fn check_bearer(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(value) = headers.get("authorization") else {
            return if self.config.allow_anonymous {
                Ok(())
            } else {
                Err(ApiError::Unauthenticated)
            };
        };
        let value = value.to_str().map_err(|_| ApiError::BadCredentials)?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or(ApiError::BadCredentials)?;
        if let Some(t) = self.tokens().get(token)
            && t.expires > Instant::now()
        {
            return Ok(());
        }
        if self_signed_jwt(token) {
            return Ok(());
        }
        Err(ApiError::BadCredentials)
    }
}

/// Whether a token looks like a self-signed service-account JWT.
pub fn self_signed_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, sig] = parts.as_slice() else {
        return false;
    };
    let dec = |s: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .ok()
    };
    let (Some(h), Some(p)) = (dec(header), dec(payload)) else {
        return false;
    };
    if sig.is_empty() || dec(sig).is_none() {
        return false;
    }
    let h: Option<serde_json::Value> = serde_json::from_slice(&h).ok();
    let p: Option<serde_json::Value> = serde_json::from_slice(&p).ok();
    matches!((h, p), (Some(h), Some(p)) if h.get("alg").is_some() && p.get("iss").and_then(|i| i.as_str()).is_some())
}

async fn token(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    match parse_token_form(&body) {
        Ok(_) => {
            let (token, ttl) = s.issue_token();
            axum::Json(json!({"access_token": token, "expires_in": ttl, "token_type": "Bearer"}))
                .into_response()
        }
        Err(e) => {
            let code = match e {
                TokenError::Unsupported(_) => "unsupported_grant_type",
                _ => "invalid_request",
            };
            (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": code, "error_description": e.to_string()})),
            )
                .into_response()
        }
    }
}

/// The routes: `/token`, `/computeMetadata/v1/...`, `/`.
pub fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/token", post(token))
        .route("/", any(probe))
        .route("/computeMetadata/v1", any(metadata))
        .route("/computeMetadata/v1/", any(metadata))
        .route("/computeMetadata/v1/{*rest}", any(metadata))
        .with_state(shared)
}

fn flavored(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert("metadata-flavor", HeaderValue::from_static("Google"));
    h.insert("content-type", HeaderValue::from_static(content_type));
    h.insert("server", HeaderValue::from_static("Metadata Server for VM"));
    r
}

async fn probe() -> Response {
    flavored(
        StatusCode::OK,
        "application/text",
        "computeMetadata/\n".into(),
    )
}

/// Whether a metadata request carries the header the real server insists on.
pub fn has_flavor(headers: &HeaderMap) -> bool {
    headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) == Some("Google")
}

async fn metadata(State(s): State<Arc<Shared>>, req: Request) -> Response {
    if !has_flavor(req.headers()) {
        // Checked in the gate too (journaled); kept here for routers without it.
        return flavored(
            StatusCode::FORBIDDEN,
            "text/html",
            "Missing Metadata-Flavor:Google header.\n".into(),
        );
    }
    let suffix = req
        .uri()
        .path()
        .trim_start_matches("/computeMetadata/v1")
        .trim_start_matches('/')
        .to_string();
    let recursive = req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "recursive" && v == "true")
    });
    match metadata_value(&s, &suffix, recursive) {
        Some((json, body)) => flavored(
            StatusCode::OK,
            if json {
                "application/json"
            } else {
                "application/text"
            },
            body,
        ),
        None => flavored(
            StatusCode::NOT_FOUND,
            "text/html",
            format!("Not Found: {suffix}\n"),
        ),
    }
}

/// `(is_json, body)` of a metadata path, `None` for 404.
pub fn metadata_value(s: &Shared, suffix: &str, recursive: bool) -> Option<(bool, String)> {
    let c = &s.config;
    let email = format!("ccm@{}.iam.gserviceaccount.com", c.project_id);
    let scopes =
        "https://www.googleapis.com/auth/cloud-platform\nhttps://www.googleapis.com/auth/compute\n";
    let (name, zone, id, ip, nat, tags, machine_type) = {
        let cloud = s.cloud();
        let i = cloud.instances.values().next();
        (
            i.map(|i| i.name.clone()),
            i.map(|i| i.zone.clone()).unwrap_or_else(|| c.zone.clone()),
            i.map(|i| i.id),
            i.map(|i| i.network_ips.clone()).unwrap_or_default(),
            i.map(|i| i.nat_ips.clone()).unwrap_or_default(),
            i.map(|i| i.tags.clone()).unwrap_or_default(),
            i.map_or_else(|| "e2-standard-2".to_string(), |i| i.machine_type.clone()),
        )
    };
    let text = |v: String| Some((false, v));
    let sa = json!({"aliases": ["default"], "email": email, "scopes": scopes.lines().collect::<Vec<_>>()});
    match suffix.trim_end_matches('/') {
        "" => text("instance/\nproject/\nuniverse/\n".into()),
        "project/project-id" => text(c.project_id.clone()),
        "project/numeric-project-id" => text(c.project_number.to_string()),
        "project" => text("attributes/\nnumeric-project-id\nproject-id\n".into()),
        "project/attributes" | "instance/attributes" => text(String::new()),
        "universe/universe-domain" => text("googleapis.com".into()),
        "instance/zone" => text(format!("projects/{}/zones/{zone}", c.project_number)),
        "instance/name" => name.map(|n| (false, n)),
        "instance/id" => id.map(|i| (false, i.to_string())),
        "instance/hostname" => None,
        "instance/tags" => Some((true, serde_json::to_string(&tags).unwrap_or_default())),
        "instance/machine-type" => text(format!(
            "projects/{}/machineTypes/{machine_type}",
            c.project_number
        )),
        "instance/network-interfaces" => text((0..ip.len()).map(|n| format!("{n}/\n")).collect()),
        "instance/service-accounts" if recursive => {
            Some((true, json!({"default": sa, email.clone(): sa}).to_string()))
        }
        "instance/service-accounts" => text(format!("default/\n{email}/\n")),
        p if p.starts_with("instance/network-interfaces/") => {
            let rest = p.strip_prefix("instance/network-interfaces/")?;
            let (n, what) = rest.split_once('/').unwrap_or((rest, ""));
            let n: usize = n.parse().ok()?;
            ip.get(n)?;
            match what {
                "" => text("access-configs/\nip\nnetwork\n".into()),
                "ip" => text(ip[n].to_string()),
                "network" => text(format!(
                    "projects/{}/networks/{}",
                    c.project_number, c.network
                )),
                "access-configs" => text(if nat.get(n).is_some() {
                    "0/\n".into()
                } else {
                    String::new()
                }),
                "access-configs/0" => nat.get(n).map(|_| (false, "external-ip\ntype\n".into())),
                "access-configs/0/external-ip" => nat.get(n).map(|i| (false, i.to_string())),
                "access-configs/0/type" => nat.get(n).map(|_| (false, "ONE_TO_ONE_NAT".into())),
                _ => None,
            }
        }
        p => {
            let rest = p.strip_prefix("instance/service-accounts/")?;
            let (acct, what) = rest.split_once('/').unwrap_or((rest, ""));
            if acct != "default" && acct != email {
                return None;
            }
            match what {
                "" if recursive => Some((true, sa.to_string())),
                "" => text("aliases\nemail\nidentity\nscopes\ntoken\n".into()),
                "email" => text(email),
                "aliases" => text("default\n".into()),
                "scopes" => text(scopes.into()),
                "token" => {
                    let (token, ttl) = s.issue_token();
                    Some((
                        true,
                        json!({"access_token": token, "expires_in": ttl, "token_type": "Bearer"})
                            .to_string(),
                    ))
                }
                _ => None,
            }
        }
    }
}

/// Issued tokens kept before expired ones are dropped.
const MAX_TOKENS: usize = 10_000;

/// How long a metadata token lives by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_forms() {
        assert!(parse_token_form(b"grant_type=refresh_token&refresh_token=x").is_ok());
        assert!(
            parse_token_form(
                b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c"
            )
            .is_ok()
        );
        assert_eq!(parse_token_form(b"x=1"), Err(TokenError::NoGrantType));
        assert!(matches!(
            parse_token_form(b"grant_type=password"),
            Err(TokenError::Unsupported(_))
        ));
        assert!(matches!(
            parse_token_form(b"grant_type=refresh_token"),
            Err(TokenError::Missing(..))
        ));
    }

    #[test]
    fn jwts() {
        let e = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let good = format!(
            "{}.{}.c2ln",
            e(json!({"alg": "RS256"})),
            e(json!({"iss": "sa@x"}))
        );
        assert!(self_signed_jwt(&good));
        let no_iss = format!(
            "{}.{}.c2ln",
            e(json!({"alg": "RS256"})),
            e(json!({"sub": "x"}))
        );
        assert!(!self_signed_jwt(&no_iss));
        assert!(!self_signed_jwt("not-a-token"));
        assert!(!self_signed_jwt("a.b.c"));
    }
}
