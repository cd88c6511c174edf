//! Cloud discovery and Azure AD as the CCM's and the SDKs' credentials reach them:
//! the metadata endpoints document, OpenID discovery (MSAL), MSAL's instance discovery,
//! client-credentials token requests (v2, v1 and ADFS), App Service managed identity, and
//! ARM's check of the bearer token on every call.
//!
//! Behaviour matched:
//! - `GET /metadata/endpoints?api-version=2019-05-01`: a JSON array of clouds, as
//!   cloud-provider-azure `pkg/azclient/cloud.go` reads it (`name`, `resourceManager`,
//!   `authentication.loginEndpoint`, `authentication.audiences[0]` required);
//! - MSAL Go (`apps/internal/oauth/ops/authority/authority.go`) reads
//!   `{authority}/v2.0/.well-known/openid-configuration` (AAD) or
//!   `{host}/adfs/.well-known/openid-configuration` (ADFS, no instance discovery) and POSTs
//!   the form to its `token_endpoint`; for other hosts it first asks
//!   `/common/discovery/instance`, which this mock also answers, pointing at itself;
//! - errors of the token endpoint are `{"error","error_description"}` with 400/401 (MSAL
//!   surfaces `invalid_client`);
//! - azidentity's App Service managed identity (`sdk/azidentity/managed_identity_client.go`)
//!   sends `GET $IDENTITY_ENDPOINT?api-version=2019-08-01&resource=…` with
//!   `X-IDENTITY-HEADER` and reads `access_token`, `expires_on` (unix seconds, a string);
//! - ARM answers a missing token 401 `AuthenticationFailed`, an unknown one
//!   `InvalidAuthenticationToken`, another audience `InvalidAuthenticationTokenAudience`,
//!   an expired one `ExpiredAuthenticationToken`, each with `WWW-Authenticate: Bearer …`.
//!
//! Tokens are JWT-shaped (`base64url(header).base64url(claims).signature`, claims `aud`,
//! `tid`, `oid`, `exp`...) so clients that peek at `exp` work; the mock verifies them by
//! its own table, not by signature.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};

use crate::Shared;
use crate::arm::ArmError;

/// The audience ARM accepts (with or without the trailing slash).
pub const AUDIENCE: &str = "https://management.core.windows.net/";
/// Also accepted: the public cloud's ARM URL as an audience.
pub const ALT_AUDIENCE: &str = "https://management.azure.com/";
/// The tenant name that selects the ADFS route.
pub const ADFS_TENANT: &str = "adfs";

/// An issued token.
#[derive(Debug, Clone)]
pub struct Token {
    pub audience: String,
    pub expires: jiff::Timestamp,
}

fn norm_audience(a: &str) -> String {
    a.trim()
        .trim_end_matches("/.default")
        .trim_end_matches('/')
        .to_ascii_lowercase()
}

/// Whether ARM accepts tokens for this audience.
pub fn arm_audience(a: &str) -> bool {
    let a = norm_audience(a);
    a == norm_audience(AUDIENCE) || a == norm_audience(ALT_AUDIENCE)
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

impl Shared {
    /// Issues a token for `audience`.
    pub fn issue_token(&self, audience: &str) -> (String, Token) {
        let now = jiff::Timestamp::now();
        let ttl = jiff::SignedDuration::try_from(self.config.token_ttl).unwrap_or_default();
        let expires = now.checked_add(ttl).unwrap_or(now);
        let claims = json!({
            "aud": audience,
            "iss": format!("{}/{}/", self.base, self.config.tenant_id),
            "tid": self.config.tenant_id,
            "oid": self.object_id,
            "appid": self.config.client_id,
            "iat": now.as_second(),
            "nbf": now.as_second(),
            "exp": expires.as_second(),
        });
        let header = json!({"typ": "JWT", "alg": "RS256", "kid": "mock-azure"});
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
            "{}{}",
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4()
        ));
        let token = format!("{}.{}.{signature}", b64(&header), b64(&claims));
        let info = Token {
            audience: audience.to_string(),
            expires,
        };
        self.tokens().insert(token.clone(), info.clone());
        (token, info)
    }

    /// ARM's check of the `Authorization` header.
    pub fn check_bearer(&self, headers: &HeaderMap) -> Result<(), ArmError> {
        let unauthorized = |code: &str, message: &str| {
            ArmError::new(StatusCode::UNAUTHORIZED, code, message.to_string())
        };
        let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
            return Err(unauthorized(
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is missing.",
            ));
        };
        let Some(token) = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
        else {
            return Err(unauthorized(
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is not a Bearer token.",
            ));
        };
        let Some(info) = self.tokens().get(token).cloned() else {
            return Err(unauthorized(
                "InvalidAuthenticationToken",
                "The access token is invalid.",
            ));
        };
        if !arm_audience(&info.audience) {
            return Err(unauthorized(
                "InvalidAuthenticationTokenAudience",
                &format!(
                    "The access token has been obtained for wrong audience or resource '{}'. It should exactly match with one of the allowed audiences '{AUDIENCE}','{ALT_AUDIENCE}'.",
                    info.audience
                ),
            ));
        }
        if jiff::Timestamp::now() >= info.expires {
            return Err(unauthorized(
                "ExpiredAuthenticationToken",
                "The access token expiry UTC time is earlier than current UTC time.",
            ));
        }
        Ok(())
    }

    /// `WWW-Authenticate` of ARM's 401s.
    pub fn bearer_challenge(&self, error: &ArmError) -> HeaderValue {
        let value = format!(
            "Bearer authorization_uri=\"{}/{}\", error=\"invalid_token\", error_description=\"{}\"",
            self.base,
            self.config.tenant_id,
            error.message.replace('"', "'")
        );
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

/// The routes of this module.
pub fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metadata/endpoints", get(endpoints))
        .route("/common/discovery/instance", get(instance_discovery))
        .route("/msi/token", get(msi_token))
        .route("/adfs/.well-known/openid-configuration", get(adfs_openid))
        .route("/adfs/oauth2/token", post(adfs_token))
        .route(
            "/{tenant}/v2.0/.well-known/openid-configuration",
            get(openid_v2),
        )
        .route("/{tenant}/.well-known/openid-configuration", get(openid_v1))
        .route("/{tenant}/oauth2/v2.0/token", post(token_v2))
        .route("/{tenant}/oauth2/token", post(token_v1))
        .with_state(shared)
}

/// AAD's error body.
fn aad_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({
            "error": error,
            "error_description": description,
            "error_codes": [if status == StatusCode::UNAUTHORIZED { 7000215 } else { 900144 }],
            "timestamp": jiff::Timestamp::now().to_string(),
        })),
    )
        .into_response()
}

async fn endpoints(State(s): State<Arc<Shared>>, RawQuery(q): RawQuery) -> Response {
    if let Err(e) = crate::arm::api_version(q.as_deref().unwrap_or("")) {
        return e.into_response();
    }
    // cloud-provider-azure picks the entry whose `name` equals azure.json's `cloud`
    // (case-insensitive), or the first when `cloud` is empty (pkg/azclient
    // `OverrideAzureCloudConfigAndEnvConfigFromMetadataService`): the same endpoints
    // under the public cloud's names.
    let clouds: Vec<Value> = ["AzureCloud", "AzurePublicCloud"]
        .iter()
        .map(|name| cloud_metadata(&s.base, name))
        .collect();
    Json(Value::Array(clouds)).into_response()
}

fn cloud_metadata(base: &str, name: &str) -> Value {
    json!({
        "name": name,
        "portal": format!("{base}/"),
        "resourceManager": format!("{base}/"),
        "authentication": {
            "loginEndpoint": format!("{base}/"),
            "audiences": [AUDIENCE, ALT_AUDIENCE],
            "tenant": "common",
            "identityProvider": "AAD"
        },
        "media": format!("{base}/"),
        "graphAudience": format!("{base}/"),
        "graph": format!("{base}/"),
        "batch": format!("{base}/"),
        "gallery": format!("{base}/"),
        "sqlManagement": format!("{base}/"),
        "activeDirectoryDataLake": format!("{base}/"),
        "microsoftGraphResourceId": format!("{base}/"),
        "appInsightsResourceId": format!("{base}/"),
        "suffixes": {
            "acrLoginServer": "azurecr.io",
            "keyVaultDns": "vault.azure.net",
            "storage": "core.windows.net",
            "sqlServerHostname": "database.windows.net",
            "azureDataLakeStoreFileSystem": "azuredatalakestore.net",
            "azureDataLakeAnalyticsCatalogAndJob": "azuredatalakeanalytics.net",
            "mariadbServerEndpoint": "mariadb.database.azure.com",
            "mysqlServerEndpoint": "mysql.database.azure.com",
            "postgresqlServerEndpoint": "postgres.database.azure.com"
        }
    })
}

fn host_of(base: &str) -> String {
    base.split_once("://").map_or(base, |(_, h)| h).to_string()
}

async fn instance_discovery(State(s): State<Arc<Shared>>) -> Response {
    let host = host_of(&s.base);
    Json(json!({
        "tenant_discovery_endpoint": format!("{}/{}/v2.0/.well-known/openid-configuration", s.base, s.config.tenant_id),
        "api-version": "1.1",
        "metadata": [{"preferred_network": host, "preferred_cache": host, "aliases": [host]}]
    }))
    .into_response()
}

fn known_tenant(s: &Shared, tenant: &str) -> bool {
    tenant.eq_ignore_ascii_case(&s.config.tenant_id)
        || ["common", "organizations"].contains(&tenant.to_ascii_lowercase().as_str())
}

fn unknown_tenant(tenant: &str) -> Response {
    aad_error(
        StatusCode::BAD_REQUEST,
        "invalid_tenant",
        &format!("AADSTS90002: Tenant '{tenant}' not found."),
    )
}

fn openid_doc(base: &str, authority: &str, token_endpoint: String) -> Value {
    json!({
        "issuer": format!("{base}/{authority}"),
        "authorization_endpoint": format!("{base}/{authority}/oauth2/authorize"),
        "token_endpoint": token_endpoint,
        "device_authorization_endpoint": format!("{base}/{authority}/oauth2/devicecode"),
        "jwks_uri": format!("{base}/{authority}/discovery/keys"),
        "response_types_supported": ["code", "id_token", "token"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        "scopes_supported": ["openid", "profile", "email", "offline_access"],
        "tenant_region_scope": "NA",
        "cloud_instance_name": "mock.azure",
    })
}

async fn openid_v2(State(s): State<Arc<Shared>>, Path(tenant): Path<String>) -> Response {
    if !known_tenant(&s, &tenant) {
        return unknown_tenant(&tenant);
    }
    let token = format!("{}/{tenant}/oauth2/v2.0/token", s.base);
    let mut doc = openid_doc(&s.base, &tenant, token);
    doc["issuer"] = Value::String(format!("{}/{}/v2.0", s.base, s.config.tenant_id));
    Json(doc).into_response()
}

async fn openid_v1(State(s): State<Arc<Shared>>, Path(tenant): Path<String>) -> Response {
    if !known_tenant(&s, &tenant) {
        return unknown_tenant(&tenant);
    }
    let token = format!("{}/{tenant}/oauth2/token", s.base);
    let mut doc = openid_doc(&s.base, &tenant, token);
    doc["issuer"] = Value::String(format!("{}/{}/", s.base, s.config.tenant_id));
    Json(doc).into_response()
}

async fn adfs_openid(State(s): State<Arc<Shared>>) -> Response {
    let token = format!("{}/adfs/oauth2/token", s.base);
    let mut doc = openid_doc(&s.base, "adfs", token);
    doc["issuer"] = Value::String(format!("{}/adfs", s.base));
    Json(doc).into_response()
}

/// The token endpoints' flavours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    V2,
    V1,
    Adfs,
}

async fn token_v2(
    State(s): State<Arc<Shared>>,
    Path(tenant): Path<String>,
    body: Bytes,
) -> Response {
    if !known_tenant(&s, &tenant) {
        return unknown_tenant(&tenant);
    }
    client_credentials(&s, Flavour::V2, &body)
}

async fn token_v1(
    State(s): State<Arc<Shared>>,
    Path(tenant): Path<String>,
    body: Bytes,
) -> Response {
    if !known_tenant(&s, &tenant) {
        return unknown_tenant(&tenant);
    }
    client_credentials(&s, Flavour::V1, &body)
}

async fn adfs_token(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    client_credentials(&s, Flavour::Adfs, &body)
}

/// The parsed token request form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenForm {
    pub grant_type: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
}

/// Parses an `application/x-www-form-urlencoded` token request (unknown keys, such as
/// MSAL's `claims` and `client_info`, are ignored).
pub fn parse_token_form(body: &[u8]) -> TokenForm {
    let mut form = TokenForm::default();
    for (k, v) in form_urlencoded::parse(body) {
        let v = Some(v.into_owned());
        match k.as_ref() {
            "grant_type" => form.grant_type = v,
            "client_id" => form.client_id = v,
            "client_secret" => form.client_secret = v,
            "scope" => form.scope = v,
            "resource" => form.resource = v,
            _ => {}
        }
    }
    form
}

fn client_credentials(s: &Shared, flavour: Flavour, body: &[u8]) -> Response {
    let form = parse_token_form(body);
    if form.grant_type.as_deref() != Some("client_credentials") {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "AADSTS70003: The app requested an unsupported grant type; only client_credentials is served.",
        );
    }
    if form.client_id.as_deref() != Some(s.config.client_id.as_str())
        || form.client_secret.as_deref() != Some(s.config.client_secret.as_str())
    {
        return aad_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "AADSTS7000215: Invalid client secret provided, or unknown client id.",
        );
    }
    let audience = match (&form.scope, &form.resource) {
        (Some(scope), _) => scope
            .split_whitespace()
            .find(|s| s.ends_with("/.default"))
            .map(|s| s.trim_end_matches(".default").to_string()),
        (None, Some(resource)) => Some(resource.clone()),
        (None, None) => None,
    };
    let Some(audience) = audience else {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "AADSTS1002012: The provided value for scope or resource is not valid; client credentials need '<resource>/.default'.",
        );
    };
    let (token, info) = s.issue_token(&audience);
    let expires_in = (info.expires.as_second() - jiff::Timestamp::now().as_second()).max(0);
    let mut answer = json!({
        "token_type": "Bearer",
        "access_token": token,
        "expires_in": expires_in,
        "ext_expires_in": expires_in,
    });
    if flavour != Flavour::V2 {
        answer["resource"] = Value::String(audience);
        answer["expires_on"] = Value::String(info.expires.as_second().to_string());
    }
    Json(answer).into_response()
}

async fn msi_token(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let header = headers
        .get("x-identity-header")
        .and_then(|v| v.to_str().ok());
    if header != Some(s.config.identity_header.as_str()) {
        let (status, message) = match header {
            None => (
                StatusCode::BAD_REQUEST,
                "Required header X-IDENTITY-HEADER is missing.",
            ),
            Some(_) => (
                StatusCode::UNAUTHORIZED,
                "X-IDENTITY-HEADER does not match.",
            ),
        };
        return (
            status,
            Json(json!({"statusCode": status.as_u16(), "message": message})),
        )
            .into_response();
    }
    if q.get("api-version").map(String::as_str) != Some("2019-08-01") {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"statusCode": 400, "message": "api-version must be 2019-08-01."})),
        )
            .into_response();
    }
    let Some(resource) = q.get("resource").filter(|r| !r.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"statusCode": 400, "message": "The resource parameter is required."})),
        )
            .into_response();
    };
    let (token, info) = s.issue_token(resource.trim_end_matches("/.default"));
    Json(json!({
        "access_token": token,
        "expires_on": info.expires.as_second().to_string(),
        "resource": resource,
        "token_type": "Bearer",
        "client_id": s.config.client_id,
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences() {
        assert!(arm_audience("https://management.core.windows.net/"));
        assert!(arm_audience("https://management.core.windows.net"));
        assert!(arm_audience("https://management.azure.com/.default"));
        assert!(!arm_audience("https://storage.azure.com/"));
    }

    #[test]
    fn token_form_ignores_unknown_keys() {
        let f = parse_token_form(b"grant_type=client_credentials&client_id=a&client_secret=b%26c&scope=x%2F.default&claims=%7B%7D");
        assert_eq!(f.client_secret.as_deref(), Some("b&c"));
        assert_eq!(f.scope.as_deref(), Some("x/.default"));
    }
}

#[cfg(test)]
mod router_tests {
    use axum::http::StatusCode;

    use crate::testing::Mock;

    const FORM: &str = "application/x-www-form-urlencoded";

    #[tokio::test]
    async fn discovery_points_at_the_mock() {
        let m = Mock::seeded(0);
        let r = m
            .send("GET", "/metadata/endpoints?api-version=2019-05-01", &[], "")
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let cloud = &r.body[0];
        assert_eq!(cloud["resourceManager"], "https://127.0.0.1:4443/");
        assert_eq!(
            cloud["authentication"]["loginEndpoint"],
            "https://127.0.0.1:4443/"
        );
        assert_eq!(
            cloud["authentication"]["audiences"][0],
            "https://management.core.windows.net/"
        );
        let tenant = &m.shared.config.tenant_id;
        let r = m
            .send(
                "GET",
                &format!("/{tenant}/v2.0/.well-known/openid-configuration"),
                &[],
                "",
            )
            .await;
        assert_eq!(
            r.body["token_endpoint"],
            format!("https://127.0.0.1:4443/{tenant}/oauth2/v2.0/token")
        );
        let r = m
            .send("GET", "/adfs/.well-known/openid-configuration", &[], "")
            .await;
        assert_eq!(r.body["issuer"], "https://127.0.0.1:4443/adfs");
        assert_eq!(
            r.body["token_endpoint"],
            "https://127.0.0.1:4443/adfs/oauth2/token"
        );
        let r = m
            .send(
                "GET",
                "/common/discovery/instance?api-version=1.1&authorization_endpoint=x",
                &[],
                "",
            )
            .await;
        assert_eq!(r.body["metadata"][0]["aliases"][0], "127.0.0.1:4443");
        let r = m
            .send(
                "GET",
                "/nope/v2.0/.well-known/openid-configuration",
                &[],
                "",
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["error"], "invalid_tenant");
    }

    #[tokio::test]
    async fn client_credentials_v2_v1_and_adfs() {
        let m = Mock::seeded(0);
        let c = &m.shared.config;
        let tenant = c.tenant_id.clone();
        let good = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope=https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default",
            c.client_id, c.client_secret
        );
        let r = m
            .send(
                "POST",
                &format!("/{tenant}/oauth2/v2.0/token"),
                &[("content-type", FORM)],
                good.clone(),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["token_type"], "Bearer");
        assert!(r.body["expires_in"].as_i64().is_some_and(|n| n > 3500));
        assert_eq!(
            r.body["access_token"]
                .as_str()
                .map(|t| t.split('.').count()),
            Some(3)
        );
        let v1 = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&resource=https%3A%2F%2Fmanagement.core.windows.net%2F",
            c.client_id, c.client_secret
        );
        let r = m
            .send(
                "POST",
                &format!("/{tenant}/oauth2/token"),
                &[("content-type", FORM)],
                v1.clone(),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body["expires_on"].is_string());
        let r = m
            .send("POST", "/adfs/oauth2/token", &[("content-type", FORM)], v1)
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let bad = good.replace(&c.client_secret, "wrong");
        let r = m
            .send(
                "POST",
                &format!("/{tenant}/oauth2/v2.0/token"),
                &[("content-type", FORM)],
                bad,
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.body["error"], "invalid_client");
        let r = m
            .send(
                "POST",
                &format!("/{tenant}/oauth2/v2.0/token"),
                &[("content-type", FORM)],
                "grant_type=password",
            )
            .await;
        assert_eq!(r.body["error"], "unsupported_grant_type");
        let journal = m.shared.journal.entries();
        assert_eq!(journal[0].operation.as_deref(), Some("POST token"));
        assert_eq!(journal[0].service, "identity");
    }

    #[tokio::test]
    async fn managed_identity_needs_the_header() {
        let m = Mock::seeded(0);
        let header = m.shared.config.identity_header.clone();
        let uri = "/msi/token?api-version=2019-08-01&resource=https%3A%2F%2Fmanagement.core.windows.net%2F";
        let r = m
            .send("GET", uri, &[("x-identity-header", &header)], "")
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let token = r.body["access_token"].as_str().expect("token").to_string();
        assert!(
            r.body["expires_on"]
                .as_str()
                .is_some_and(|s| s.parse::<i64>().is_ok())
        );
        let list = m.rg_path("Microsoft.Compute/virtualMachines");
        assert_eq!(
            m.arm("GET", &list, &token, None).await.status,
            StatusCode::OK
        );
        assert_eq!(
            m.send("GET", uri, &[("x-identity-header", "nope")], "")
                .await
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            m.send("GET", uri, &[], "").await.status,
            StatusCode::BAD_REQUEST
        );
    }

    #[tokio::test]
    async fn arm_refuses_missing_unknown_foreign_and_expired_tokens() {
        let m = Mock::new(crate::Config {
            nodes: 1,
            token_ttl: std::time::Duration::from_secs(0),
            ..crate::Config::default()
        });
        let uri = format!(
            "{}?{}",
            m.rg_path("Microsoft.Compute/virtualMachines"),
            crate::testing::API
        );
        let r = m.send("GET", &uri, &[], "").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.body["error"]["code"], "AuthenticationFailed");
        assert!(
            r.header("www-authenticate")
                .is_some_and(|h| h.starts_with("Bearer "))
        );
        let r = m
            .send("GET", &uri, &[("authorization", "Bearer a.b.c")], "")
            .await;
        assert_eq!(r.body["error"]["code"], "InvalidAuthenticationToken");
        let (storage, _) = m.shared.issue_token("https://storage.azure.com/");
        let r = m.arm("GET", &uri, &storage, None).await;
        assert_eq!(
            r.body["error"]["code"],
            "InvalidAuthenticationTokenAudience"
        );
        let (expired, _) = m.shared.issue_token(crate::AUDIENCE);
        let r = m.arm("GET", &uri, &expired, None).await;
        assert_eq!(r.body["error"]["code"], "ExpiredAuthenticationToken");
        // Refusals are journaled, with the call's operation.
        let last = m.shared.journal.entries().pop().expect("entry");
        assert_eq!(
            (last.status, last.operation.as_deref()),
            (401, Some("GET Microsoft.Compute/virtualMachines"))
        );
    }
}
