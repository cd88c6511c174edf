//! A small Azure Resource Manager client: cloud discovery, Entra ID / ADFS / managed
//! identity tokens, JSON requests with ARM's error format, throttling, long-running
//! operations and paging.
//!
//! Exists instead of an Azure SDK crate for the reason the AWS provider gives (build
//! budget) and because the reference CCM needs a dozen resource types, all plain JSON.
//! Behaviour matched, with where upstream does it:
//! - discovery: `GET <resourceManagerEndpoint>/metadata/endpoints?api-version=2019-05-01`,
//!   the entry whose `name` is `cloud` (or the first when `cloud` is empty) gives the
//!   ARM endpoint, `authentication.audiences[0]` and `authentication.loginEndpoint`
//!   (cloud-provider-azure `pkg/azclient/cloud.go`
//!   `OverrideAzureCloudConfigAndEnvConfigFromMetadataService`);
//! - tokens (`pkg/azclient/auth.go` builds azidentity credentials): client secret with
//!   `POST <login>/<tenant>/oauth2/v2.0/token` (`scope=<audience>/.default`), ADFS
//!   (tenant `adfs`) with `POST <login>/adfs/oauth2/token`, managed identity with
//!   `GET $IDENTITY_ENDPOINT?api-version=2019-08-01&resource=<audience>` and the
//!   `X-IDENTITY-HEADER` header (azidentity's App Service source). The token is cached,
//!   refreshed 5 minutes (or half its life) before it expires, and dropped after a 401 so
//!   the request is retried once with a new one (azcore `BearerTokenPolicy`);
//! - bearer tokens only over https, as azcore's `BearerTokenPolicy` refuses plain http
//!   (tests may allow http with [`ArmClient::allow_http_for_tests`]);
//! - trust: the CA bundle in `SSL_CERT_FILE`, which upstream's Go clients honour;
//! - errors: `{"error":{"code","message"}}` (azcore `ResponseError`);
//! - retries: 408/429/500/502/503/504 up to 3 times, waiting `Retry-After` when given,
//!   else exponential from 800 ms (azcore `policy.RetryOptions` defaults);
//! - throttling is the whole client's, not one request's: a 429's `Retry-After` holds
//!   back every read (GET) or every write (PUT/DELETE/POST) of the client until it ends,
//!   as upstream's `pkg/azclient/policy/retryrepectthrottled` `ThrottlingPolicy` does
//!   with its `RetryAfterReader`/`RetryAfterWriter`; and for [`RetryPolicy::throttled_for`]
//!   after the last 429 every request is paced to [`RetryPolicy::throttled_rate`] a
//!   second (a token bucket as large), so that the work piled up during a throttling
//!   storm does not leave in one burst when it ends. Never throttled, the client never
//!   waits;
//! - eventual consistency: a resource this client created (PUT answered 201) may read
//!   as 404 for a moment. Until a read has shown it, and for at most
//!   [`RetryPolicy::consistency_window`] after the create, [`ArmClient::get_opt_or_created`]
//!   does not take such a 404 for "gone" and answers the resource as this client's last
//!   write showed it; plain reads trust the 404, and so does every read once one has
//!   found the resource (a resource deleted behind the CCM's back is gone). A PUT's answer
//!   is the resource, as upstream takes it (`CreateOrUpdate` returns the PUT's body), so
//!   the final GET of a long-running PUT that reads 404 falls back on it. A DELETE, a 404
//!   on a write or a 412 forgets;
//! - long-running PUT/DELETE: poll `Azure-AsyncOperation` (else `Location`) until
//!   `Succeeded`, `Failed` or `Canceled`; a PUT is followed by a GET of the resource, as
//!   the SDK poller's final state (azcore `runtime.Poller`);
//! - lists follow `nextLink`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::Mutex;

use super::config::AzureConfig;

/// `api-version` of `Microsoft.Compute` calls (cloud-provider-azure `pkg/azclient`
/// virtualmachineclient recordings use 2025-04-01).
pub const COMPUTE_API: &str = "2025-04-01";
/// `api-version` of `Microsoft.Network` calls (`pkg/azclient` network clients).
pub const NETWORK_API: &str = "2025-05-01";
/// `api-version` of resource-provider reads.
pub const RESOURCES_API: &str = "2021-04-01";

#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    #[error("{method} {url}: {status} {code}: {message}")]
    Status {
        method: String,
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{method} {url}: {reason}")]
    Transport {
        method: String,
        url: String,
        reason: String,
    },
    #[error("decoding the response of {url}: {reason}")]
    Decode { url: String, reason: String },
    #[error("getting a token from {url}: {reason}")]
    Auth { url: String, reason: String },
    #[error("long-running operation {url} ended {status}: {code}: {message}")]
    Operation {
        url: String,
        status: String,
        code: String,
        message: String,
    },
    #[error("Azure client setup: {0}")]
    Setup(String),
}

impl ArmError {
    /// The ARM error code (`ResourceNotFound`, `PreconditionFailed`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            ArmError::Status { code, .. } | ArmError::Operation { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            ArmError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// 404 (upstream `errutils.CheckResourceExistsFromAzcoreError`).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// 412: the `If-Match` etag was stale.
    pub fn is_precondition_failed(&self) -> bool {
        self.status() == Some(412)
    }
}

/// How to retry throttled and failed requests.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// Waits between polls of a long-running operation (the last repeats).
    pub poll: Vec<Duration>,
    /// Give up on a long-running operation after this long.
    pub poll_deadline: Duration,
    /// How long after the last throttling answer (429) requests are paced.
    pub throttled_for: Duration,
    /// Requests a second while paced (and the token bucket's size); 0: never paced.
    pub throttled_rate: u32,
    /// How long a resource this client created may read as 404 without being taken
    /// for gone (ARM's eventual consistency).
    pub consistency_window: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base: Duration::from_millis(800),
            max: Duration::from_secs(60),
            poll: vec![
                Duration::from_millis(50),
                Duration::from_millis(200),
                Duration::from_millis(500),
                Duration::from_secs(1),
            ],
            poll_deadline: Duration::from_secs(300),
            throttled_for: Duration::from_secs(15),
            throttled_rate: 25,
            consistency_window: Duration::from_secs(10),
        }
    }
}

/// The client-wide answer to throttling: `Retry-After` gates and the pacing after a 429.
#[derive(Debug, Default)]
struct Pacer {
    /// No read (`[0]`) or write (`[1]`) leaves before this: the latest `Retry-After`.
    until: [Option<Instant>; 2],
    /// When the last 429 came.
    throttled_at: Option<Instant>,
    /// Token bucket while paced: tokens left (negative: reserved ahead) and when it was
    /// last filled.
    tokens: f64,
    filled: Option<Instant>,
}

impl Pacer {
    fn paced(&self, now: Instant, policy: &RetryPolicy) -> bool {
        policy.throttled_rate > 0
            && self
                .throttled_at
                .is_some_and(|t| now.saturating_duration_since(t) < policy.throttled_for)
    }

    /// How long a request (a write with `write`) leaving at `now` must wait first; its
    /// turn is reserved. Zero unless the client was throttled.
    fn reserve(&mut self, write: bool, now: Instant, policy: &RetryPolicy) -> Duration {
        let gate = self.until[usize::from(write)]
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
        if !self.paced(now, policy) {
            return gate;
        }
        let rate = f64::from(policy.throttled_rate);
        let filled = self.filled.unwrap_or(now);
        self.tokens =
            (self.tokens + now.saturating_duration_since(filled).as_secs_f64() * rate).min(rate);
        self.filled = Some(now);
        self.tokens -= 1.0;
        let turn = if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        };
        gate.max(turn)
    }

    /// A 429 (or a 503 with `Retry-After`) at `now`.
    fn throttled(
        &mut self,
        write: bool,
        now: Instant,
        retry_after: Option<Duration>,
        policy: &RetryPolicy,
    ) {
        if !self.paced(now, policy) {
            // Pacing starts with a full bucket.
            self.tokens = f64::from(policy.throttled_rate);
            self.filled = Some(now);
        }
        self.throttled_at = Some(now);
        if let Some(d) = retry_after {
            let until = now + d.min(policy.max);
            let slot = &mut self.until[usize::from(write)];
            *slot = Some(slot.map_or(until, |u| u.max(until)));
        }
    }
}

/// A resource this client created, as last seen.
#[derive(Debug, Clone)]
struct Created {
    at: Instant,
    body: Value,
}

/// The precondition of a write.
#[derive(Debug, Clone, Copy)]
enum Precondition<'a> {
    None,
    /// `If-Match: <etag>`.
    IfMatch(&'a str),
    /// `If-None-Match: *`: create only.
    IfNoneMatch,
}

/// Where tokens come from.
#[derive(Debug, Clone)]
enum Credential {
    /// Client secret (Entra ID v2 or ADFS): the token URL and its form.
    Secret { url: String, form: String },
    /// App Service style managed identity.
    ManagedIdentity {
        endpoint: String,
        header: String,
        resource: String,
        client_id: String,
    },
}

#[derive(Debug, Clone)]
struct Token {
    value: String,
    refresh_at: Instant,
}

/// One authenticated ARM client shared by every worker.
#[derive(Debug)]
pub struct ArmClient {
    http: reqwest::Client,
    /// ARM base URL without trailing slash.
    base: String,
    credential: Credential,
    token: Mutex<Option<Token>>,
    retry: RetryPolicy,
    allow_http: bool,
    pub subscription: String,
    pacer: std::sync::Mutex<Pacer>,
    /// Resources this client created, by [`resource_key`].
    created: std::sync::Mutex<HashMap<String, Created>>,
}

/// What `/metadata/endpoints` told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEndpoints {
    pub resource_manager: String,
    pub login: String,
    pub audience: String,
}

impl ArmClient {
    /// Discovers the cloud and builds the client; the first token is fetched here so that
    /// bad credentials fail the start, as upstream's provider-registration read does.
    pub async fn connect(config: &AzureConfig) -> Result<Self, ArmError> {
        let http = build_http()?;
        let client = Self::with_http(config, http, false).await?;
        client.token().await?;
        Ok(client)
    }

    /// Like [`ArmClient::connect`] but accepting plain-http endpoints (unit tests only).
    pub async fn allow_http_for_tests(config: &AzureConfig) -> Result<Self, ArmError> {
        let http = build_http()?;
        let mut client = Self::with_http(config, http, true).await?;
        client.retry = RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(5),
            max: Duration::from_millis(20),
            poll: vec![Duration::from_millis(5)],
            poll_deadline: Duration::from_secs(10),
            throttled_for: Duration::from_secs(1),
            throttled_rate: 1_000,
            consistency_window: Duration::from_secs(10),
        };
        Ok(client)
    }

    async fn with_http(
        config: &AzureConfig,
        http: reqwest::Client,
        allow_http: bool,
    ) -> Result<Self, ArmError> {
        let endpoint = config.resource_manager_endpoint.trim_end_matches('/');
        if !allow_http && !endpoint.starts_with("https://") {
            return Err(ArmError::Setup(format!(
                "resourceManagerEndpoint {endpoint:?} is not https: bearer tokens are only sent over TLS (as azcore's BearerTokenPolicy)"
            )));
        }
        let endpoints = discover(&http, endpoint, &config.cloud).await?;
        if !allow_http && !endpoints.resource_manager.starts_with("https://") {
            return Err(ArmError::Setup(format!(
                "discovered resourceManager {:?} is not https",
                endpoints.resource_manager
            )));
        }
        let scope = format!("{}/.default", endpoints.audience.trim_end_matches('/'));
        let login = endpoints.login.trim_end_matches('/');
        let credential = if config.use_managed_identity_extension {
            let endpoint = std::env::var("IDENTITY_ENDPOINT").unwrap_or_default();
            let header = std::env::var("IDENTITY_HEADER").unwrap_or_default();
            if endpoint.is_empty() || header.is_empty() {
                return Err(ArmError::Setup(
                    "useManagedIdentityExtension needs IDENTITY_ENDPOINT and IDENTITY_HEADER (App Service managed identity); IMDS is not implemented"
                        .to_owned(),
                ));
            }
            Credential::ManagedIdentity {
                endpoint,
                header,
                resource: endpoints.audience.clone(),
                client_id: config.user_assigned_identity_id.clone(),
            }
        } else {
            let url = if config.is_adfs() {
                format!("{login}/adfs/oauth2/token")
            } else {
                format!("{login}/{}/oauth2/v2.0/token", config.tenant_id)
            };
            let mut form = form_encode(&[
                ("grant_type", "client_credentials"),
                ("client_id", &config.aad_client_id),
                ("client_secret", &config.aad_client_secret),
                ("scope", &scope),
            ]);
            if config.is_adfs() {
                // ADFS is a v1-style endpoint: it also reads `resource`.
                form.push('&');
                form.push_str(&form_encode(&[("resource", &endpoints.audience)]));
            }
            Credential::Secret { url, form }
        };
        Ok(Self {
            http,
            base: endpoints.resource_manager.trim_end_matches('/').to_owned(),
            credential,
            token: Mutex::new(None),
            retry: RetryPolicy::default(),
            allow_http,
            subscription: config.subscription_id.clone(),
            pacer: std::sync::Mutex::default(),
            created: std::sync::Mutex::default(),
        })
    }

    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
    }

    /// The ARM base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A valid token, fetched when none is cached or it is about to expire.
    async fn token(&self) -> Result<String, ArmError> {
        let mut guard = self.token.lock().await;
        if let Some(t) = guard.as_ref()
            && Instant::now() < t.refresh_at
        {
            return Ok(t.value.clone());
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *guard = Some(fresh);
        Ok(value)
    }

    async fn invalidate_token(&self, stale: &str) {
        let mut guard = self.token.lock().await;
        if guard.as_ref().is_some_and(|t| t.value == stale) {
            *guard = None;
        }
    }

    async fn fetch_token(&self) -> Result<Token, ArmError> {
        let (url, request) = match &self.credential {
            Credential::Secret { url, form } => (
                url.clone(),
                self.http
                    .post(url)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(form.clone()),
            ),
            Credential::ManagedIdentity {
                endpoint,
                header,
                resource,
                client_id,
            } => {
                let mut query = vec![("api-version", "2019-08-01"), ("resource", resource)];
                if !client_id.is_empty() {
                    query.push(("client_id", client_id));
                }
                (
                    endpoint.clone(),
                    self.http
                        .get(endpoint)
                        .query(&query)
                        .header("X-IDENTITY-HEADER", header),
                )
            }
        };
        let auth = |reason: String| ArmError::Auth {
            url: url.clone(),
            reason,
        };
        let response = request
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| auth(error_chain(&e)))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| auth(error_chain(&e)))?;
        let json: Value = serde_json::from_slice(&body)
            .map_err(|_| auth(format!("status {status}: {}", snippet(&body))))?;
        if !status.is_success() {
            // OAuth errors are `{"error":"invalid_client","error_description":...}`.
            let code = json
                .get("error")
                .and_then(|e| e.as_str().or_else(|| e.get("code").and_then(Value::as_str)))
                .unwrap_or_default();
            let description = json
                .get("error_description")
                .or_else(|| json.pointer("/error/message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(auth(format!("status {status}: {code}: {description}")));
        }
        let value = json
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| auth("no access_token in the answer".to_owned()))?
            .to_owned();
        let number = |v: &Value| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok());
        let lifetime = if let Some(secs) = json.get("expires_in").and_then(number) {
            Duration::from_secs(secs)
        } else if let Some(on) = json.get("expires_on").and_then(number) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Duration::from_secs(on.saturating_sub(now))
        } else {
            Duration::from_secs(300)
        };
        let margin = Duration::from_secs(300).min(lifetime / 2);
        Ok(Token {
            value,
            refresh_at: Instant::now() + lifetime.saturating_sub(margin),
        })
    }

    /// `<base><path>` for a path starting with `/`, or an absolute URL as is.
    fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        }
    }

    /// One request with retries, token refresh and ARM error decoding. `api` is added as
    /// `api-version` unless the URL already has one (nextLink, operation URLs).
    async fn send(
        &self,
        method: Method,
        path: &str,
        api: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        precondition: Precondition<'_>,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes, String), ArmError> {
        let url = self.url(path);
        if !self.allow_http && !url.starts_with("https://") {
            return Err(ArmError::Setup(format!(
                "refusing to send a bearer token to non-https {url}"
            )));
        }
        let write = method != Method::GET && method != Method::HEAD;
        let mut reauthed = false;
        let mut attempt = 0;
        loop {
            self.pace(write).await;
            let token = self.token().await?;
            let mut request = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(&token)
                .header(reqwest::header::ACCEPT, "application/json");
            if !url.contains("api-version=") && !api.is_empty() {
                request = request.query(&[("api-version", api)]);
            }
            if !query.is_empty() {
                request = request.query(query);
            }
            match precondition {
                Precondition::None => {}
                Precondition::IfMatch(etag) => {
                    request = request.header(reqwest::header::IF_MATCH, etag);
                }
                Precondition::IfNoneMatch => {
                    request = request.header(reqwest::header::IF_NONE_MATCH, "*");
                }
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let transport = |e: reqwest::Error| ArmError::Transport {
                method: method.to_string(),
                url: url.clone(),
                reason: error_chain(&e),
            };
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) if attempt < self.retry.attempts && !e.is_builder() => {
                    attempt += 1;
                    tracing::debug!(%url, error = %error_chain(&e), "ARM request retried");
                    tokio::time::sleep(self.backoff(attempt, None)).await;
                    continue;
                }
                Err(e) => return Err(transport(e)),
            };
            let status = response.status();
            let headers = response.headers().clone();
            let reply = response.bytes().await.map_err(transport)?;
            if status == StatusCode::UNAUTHORIZED && !reauthed {
                reauthed = true;
                self.invalidate_token(&token).await;
                continue;
            }
            let server_wait = retry_after(&headers);
            if status == StatusCode::TOO_MANY_REQUESTS
                || (status == StatusCode::SERVICE_UNAVAILABLE && server_wait.is_some())
            {
                self.throttled(write, server_wait);
            }
            if matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504)
                && attempt < self.retry.attempts
            {
                attempt += 1;
                let wait = self.backoff(attempt, server_wait);
                tracing::debug!(%url, %status, ?wait, "ARM request retried");
                tokio::time::sleep(wait).await;
                continue;
            }
            if !status.is_success() {
                let (code, message) = arm_error(&reply);
                return Err(ArmError::Status {
                    method: method.to_string(),
                    url,
                    status: status.as_u16(),
                    code,
                    message,
                });
            }
            return Ok((status, headers, reply, url));
        }
    }

    /// Waits for the request's turn: only after a throttling answer (see [`Pacer`]).
    async fn pace(&self, write: bool) {
        let wait = match self.pacer.lock() {
            Ok(mut p) => p.reserve(write, Instant::now(), &self.retry),
            Err(_) => Duration::ZERO,
        };
        if !wait.is_zero() {
            tracing::debug!(?wait, write, "ARM request held back after throttling");
            tokio::time::sleep(wait).await;
        }
    }

    fn throttled(&self, write: bool, retry_after: Option<Duration>) {
        if let Ok(mut p) = self.pacer.lock() {
            p.throttled(write, Instant::now(), retry_after, &self.retry);
        }
    }

    /// The resource at `path` as this client's last write showed it, when this client
    /// created it less than [`RetryPolicy::consistency_window`] ago and no read has found
    /// it since.
    pub fn recently_created(&self, path: &str) -> Option<Value> {
        let key = resource_key(&self.base, path);
        let mut created = self.created.lock().ok()?;
        created.retain(|_, c| c.at.elapsed() < self.retry.consistency_window);
        created.get(&key).map(|c| c.body.clone())
    }

    /// Records what a write showed of `path`: a new entry only with `create`.
    fn saw(&self, path: &str, body: &Value, create: bool) {
        if !body.is_object() {
            return;
        }
        let key = resource_key(&self.base, path);
        if let Ok(mut created) = self.created.lock() {
            match created.get_mut(&key) {
                Some(c) if !create => c.body = body.clone(),
                Some(_) | None if create => {
                    created.insert(
                        key,
                        Created {
                            at: Instant::now(),
                            body: body.clone(),
                        },
                    );
                }
                _ => {}
            }
        }
    }

    fn forget(&self, path: &str) {
        let key = resource_key(&self.base, path);
        if let Ok(mut created) = self.created.lock() {
            created.remove(&key);
        }
    }

    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(d) = retry_after {
            return d.min(self.retry.max);
        }
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.retry.base.saturating_mul(factor).min(self.retry.max)
    }

    /// GET a resource.
    pub async fn get(
        &self,
        path: &str,
        api: &str,
        query: &[(&str, &str)],
    ) -> Result<Value, ArmError> {
        let (_, _, body, url) = self
            .send(Method::GET, path, api, query, None, Precondition::None)
            .await?;
        let value = decode(&url, &body)?;
        // Visible now: a later 404 means it is gone.
        self.forget(path);
        Ok(value)
    }

    /// GET a resource; a 404 moments after this client created it, before any read found
    /// it ([`ArmClient::recently_created`]), answers the resource as this client's last
    /// write showed it (ARM's eventual consistency), any other 404 `None`. For reads whose
    /// "not found" would leave something behind or make it again.
    pub async fn get_opt_or_created(
        &self,
        path: &str,
        api: &str,
    ) -> Result<Option<Value>, ArmError> {
        match self.get(path, api, &[]).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => {
                let known = self.recently_created(path);
                if known.is_some() {
                    tracing::debug!(
                        path,
                        "read as not found moments after this client created it; its last known state is used"
                    );
                }
                Ok(known)
            }
            Err(e) => Err(e),
        }
    }

    /// GET a resource; `None` when it does not exist.
    pub async fn get_opt(
        &self,
        path: &str,
        api: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<Value>, ArmError> {
        match self.get(path, api, query).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every item of a list, following `nextLink`.
    pub async fn list(&self, path: &str, api: &str) -> Result<Vec<Value>, ArmError> {
        let mut out = Vec::new();
        let mut next = Some(path.to_owned());
        let mut pages = 0;
        while let Some(page) = next.take() {
            pages += 1;
            if pages > 10_000 {
                return Err(ArmError::Decode {
                    url: page,
                    reason: "more than 10000 pages; nextLink loops?".to_owned(),
                });
            }
            let body = self.get(&page, api, &[]).await?;
            if let Some(items) = body.get("value").and_then(Value::as_array) {
                out.extend(items.iter().cloned());
            }
            next = body
                .get("nextLink")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
        }
        Ok(out)
    }

    /// PUT (create or replace) with an optional `If-Match`, waits for the operation and
    /// answers the resource as it then is.
    pub async fn put(
        &self,
        path: &str,
        api: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<Value, ArmError> {
        let precondition = if_match.map_or(Precondition::None, Precondition::IfMatch);
        self.write(path, api, body, precondition).await
    }

    /// PUT with `If-None-Match: *`: creates the resource, or fails with 412 when it
    /// already exists (so a create that a stale "not found" read asked for never
    /// replaces what is there).
    pub async fn create(&self, path: &str, api: &str, body: &Value) -> Result<Value, ArmError> {
        self.write(path, api, body, Precondition::IfNoneMatch).await
    }

    async fn write(
        &self,
        path: &str,
        api: &str,
        body: &Value,
        precondition: Precondition<'_>,
    ) -> Result<Value, ArmError> {
        let (status, headers, reply, url) = match self
            .send(Method::PUT, path, api, &[], Some(body), precondition)
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                if e.is_not_found() || e.is_precondition_failed() {
                    // What this client remembered of it is not what is there.
                    self.forget(path);
                }
                return Err(e);
            }
        };
        let answer = decode(&url, &reply)?;
        self.saw(path, &answer, status == StatusCode::CREATED);
        if self.wait_operation(&headers).await? {
            if let Some(mut known) = self.recently_created(path)
                && known["properties"].is_object()
            {
                known["properties"]["provisioningState"] = Value::from("Succeeded");
                self.saw(path, &known, false);
            }
            // The operation succeeded: a 404 now is ARM's eventual consistency, and the
            // PUT's answer is the resource.
            return match self.get(path, api, &[]).await {
                Err(e) if e.is_not_found() => self.recently_created(path).ok_or(e),
                other => other,
            };
        }
        Ok(answer)
    }

    /// DELETE; success also when the resource is already gone (204/404).
    pub async fn delete(&self, path: &str, api: &str) -> Result<(), ArmError> {
        match self
            .send(Method::DELETE, path, api, &[], None, Precondition::None)
            .await
        {
            Ok((_, headers, _, _)) => {
                self.wait_operation(&headers).await?;
                self.forget(path);
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                self.forget(path);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Polls `Azure-AsyncOperation` (else `Location`) to the end; `true` when there was an
    /// operation to wait for.
    async fn wait_operation(&self, headers: &reqwest::header::HeaderMap) -> Result<bool, ArmError> {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let (url, async_op) = match (header("azure-asyncoperation"), header("location")) {
            (Some(u), _) => (u, true),
            (None, Some(u)) => (u, false),
            (None, None) => return Ok(false),
        };
        let started = Instant::now();
        let mut polls = 0usize;
        // The first poll waits only for the initial answer's `Retry-After`, as azcore's
        // `runtime.Poller.PollUntilDone` does; later ones fall back to the schedule.
        let mut wait = Some(retry_after(headers).unwrap_or(Duration::ZERO));
        loop {
            let delay = wait.unwrap_or_else(|| {
                self.retry
                    .poll
                    .get(polls)
                    .or(self.retry.poll.last())
                    .copied()
                    .unwrap_or(Duration::from_secs(1))
            });
            tokio::time::sleep(delay.min(Duration::from_secs(10))).await;
            polls += 1;
            let (status, headers, body, _) = self
                .send(Method::GET, &url, "", &[], None, Precondition::None)
                .await?;
            wait = retry_after(&headers);
            if async_op {
                let json: Value = decode(&url, &body)?;
                let state = json
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match state.to_ascii_lowercase().as_str() {
                    "succeeded" => return Ok(true),
                    "failed" | "canceled" | "cancelled" => {
                        let code = json
                            .pointer("/error/code")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        let message = json
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        return Err(ArmError::Operation {
                            url,
                            status: state.to_owned(),
                            code,
                            message,
                        });
                    }
                    _ => {}
                }
            } else if status != StatusCode::ACCEPTED {
                return Ok(true);
            }
            if started.elapsed() > self.retry.poll_deadline {
                return Err(ArmError::Operation {
                    url,
                    status: "timeout".to_owned(),
                    code: "PollingTimedOut".to_owned(),
                    message: format!("still running after {:?}", self.retry.poll_deadline),
                });
            }
        }
    }
}

/// reqwest with the `SSL_CERT_FILE` bundle as extra roots.
fn build_http() -> Result<reqwest::Client, ArmError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(64);
    if let Ok(path) = std::env::var("SSL_CERT_FILE")
        && !path.is_empty()
    {
        let pem = std::fs::read(&path)
            .map_err(|e| ArmError::Setup(format!("reading SSL_CERT_FILE {path}: {e}")))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ArmError::Setup(format!("parsing SSL_CERT_FILE {path}: {e}")))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| ArmError::Setup(e.to_string()))
}

/// `/metadata/endpoints` (pkg/azclient/cloud.go).
async fn discover(
    http: &reqwest::Client,
    endpoint: &str,
    cloud: &str,
) -> Result<CloudEndpoints, ArmError> {
    let url = format!("{endpoint}/metadata/endpoints?api-version=2019-05-01");
    let setup = |reason: String| ArmError::Setup(format!("cloud discovery at {url}: {reason}"));
    let response = http
        .get(&url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| setup(error_chain(&e)))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| setup(error_chain(&e)))?;
    if !status.is_success() {
        return Err(setup(format!("status {status}: {}", snippet(&body))));
    }
    let json: Value = serde_json::from_slice(&body).map_err(|e| setup(e.to_string()))?;
    parse_endpoints(&json, endpoint, cloud).map_err(setup)
}

/// Picks the metadata entry for `cloud` (first if empty). A missing `resourceManager`
/// means the endpoint itself (upstream's Azure Stack fallback).
pub fn parse_endpoints(
    json: &Value,
    endpoint: &str,
    cloud: &str,
) -> Result<CloudEndpoints, String> {
    let entries: Vec<&Value> = match json {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let entry = entries
        .into_iter()
        .find(|e| {
            cloud.is_empty()
                || e.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.eq_ignore_ascii_case(cloud))
        })
        .ok_or_else(|| format!("no entry named {cloud:?}"))?;
    let resource_manager = entry
        .get("resourceManager")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(endpoint)
        .to_owned();
    let audience = entry
        .pointer("/authentication/audiences/0")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("no authentication.audiences")?
        .to_owned();
    let login = entry
        .pointer("/authentication/loginEndpoint")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("no authentication.loginEndpoint")?
        .to_owned();
    Ok(CloudEndpoints {
        resource_manager,
        login,
        audience,
    })
}

/// How long the server asks to wait: `retry-after-ms` or `x-ms-retry-after-ms` in
/// milliseconds first, as azcore reads them (`sdk/azcore/internal/shared` `RetryAfter`),
/// then `Retry-After` in seconds (or an HTTP date, read as "now").
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    for name in ["retry-after-ms", "x-ms-retry-after-ms"] {
        if let Some(ms) = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some(Duration::from_millis(ms));
        }
    }
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    match v.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => Some(Duration::ZERO),
    }
}

/// The key of a resource path (or URL under `base`): no query, no trailing slash, lower
/// case (ARM paths are case-insensitive).
fn resource_key(base: &str, path: &str) -> String {
    let path = path.strip_prefix(base).unwrap_or(path);
    let path = path.split('?').next().unwrap_or_default();
    path.trim_end_matches('/').to_ascii_lowercase()
}

/// `(code, message)` of an ARM error body.
pub fn arm_error(body: &[u8]) -> (String, String) {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| {
        json.pointer(&format!("/error/{name}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (field("code"), field("message")) {
        (Some(c), m) => (c, m.unwrap_or_default()),
        (None, _) => (String::new(), snippet(body)),
    }
}

fn decode(url: &str, body: &[u8]) -> Result<Value, ArmError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| ArmError::Decode {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else if b == b' ' {
                out.push('+');
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        cur = inner.source();
    }
    s
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(300).collect()
}

/// Shared handle.
pub type Arm = Arc<ArmClient>;

#[cfg(test)]
mod tests;
