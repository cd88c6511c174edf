//! A small Compute Engine v1 client and a metadata-server client: JSON requests, Google's
//! error envelope, retries, tokens, operations and paging.
//!
//! Exists instead of `google-cloud-compute-v1` for the build budget (DESIGN.md) and
//! because the provider uses a dozen plain-JSON resources. Behaviour matched, with where:
//! - errors: `{"error":{"code","message","errors":[{"reason","message","domain"}]}}`
//!   (google-api-go-client `googleapi.CheckResponse`), classified as upstream's helpers
//!   in cloud-provider-gcp `providers/gce/gce_util.go` test them: 404 `isNotFound`, 409
//!   conflict, 400 "being used by" `isInUsedByError` (reason
//!   `resourceInUseByAnotherResource`), 403 `isForbidden`;
//! - retries: 429, 408 and 5xx (and 403 `rateLimitExceeded`/`userRateLimitExceeded`),
//!   as google-api-go-client `internal/gensupport/retry.go` `shouldRetry`, with gax's
//!   exponential backoff (100 ms initial, doubling, capped at 30 s), a bounded number of
//!   attempts;
//! - mutations answer a `compute#operation` that is waited for with
//!   `POST .../operations/{name}/wait` (zonal, regional or global after the operation's
//!   `selfLink`, else its `zone`/`region` fields) until `status: DONE`, then the first of
//!   `error.errors` fails the call with the operation's `httpErrorStatusCode`
//!   (k8s-cloud-provider `pkg/cloud/op.go` with `OperationsUseWait = true`,
//!   `service.go` `wrapOperation`/`pollOperation`); polls are spaced by the operation
//!   rate limit (upstream `operationPollRateLimiter`, 5 qps);
//! - lists follow `nextPageToken` with `pageToken` and pass `filter` unchanged
//!   (k8s-cloud-provider `filter` syntax: `name eq <regexp>`, several as `(a) (b)`);
//! - tokens: the metadata server's `instance/service-accounts/default/token`
//!   (`access_token`, `expires_in`; golang.org/x/oauth2/google `computeSource`), or
//!   upstream's `AltTokenSource` (`providers/gce/token_source.go`: POST `token-body` to
//!   `token-url` with the metadata token, answer `{accessToken, expireTime}`), reused
//!   until 10 s before expiry (oauth2 `ReuseTokenSource`, `expiryDelta`); for
//!   `token-url = nil` upstream takes Google's default credentials (`clientOptions` →
//!   `FindDefaultCredentials`), whose last resort is the metadata server: here the
//!   metadata token when `GCE_METADATA_HOST` names one, and no Authorization header at
//!   all when it does not or its token endpoint fails (retried after a minute) — key
//!   files and gcloud's credentials are not modelled;
//! - metadata: `http://$GCE_METADATA_HOST/computeMetadata/v1/<path>` with
//!   `Metadata-Flavor: Google` (cloud.google.com/go/compute/metadata), default host
//!   `169.254.169.254`.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use tokio::sync::Mutex;

/// How Compute requests authenticate (the config's `token-url`, resolved by
/// `config::ConfigFile::resolve`). Defined with the client, which picks its token source
/// from it, so the config imports the client and not the other way round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenConfig {
    /// The metadata server's `instance/service-accounts/default/token` (upstream default).
    Metadata,
    /// `token-url = nil`: default credentials — the metadata token when
    /// `GCE_METADATA_HOST` is set, else no token at all.
    None,
    /// `AltTokenSource`: POST `body` to `url`, answer `{accessToken, expireTime}`.
    Alt { url: String, body: String },
}

/// Errors of Compute and metadata calls.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// 404 `notFound`.
    #[error("{context}: notFound (404): {message}")]
    NotFound { context: String, message: String },
    /// 409 `alreadyExists`.
    #[error("{context}: alreadyExists (409): {message}")]
    AlreadyExists { context: String, message: String },
    /// 400 `resourceInUseByAnotherResource` ("... is already being used by ...").
    #[error("{context}: resourceInUseByAnotherResource: {message}")]
    InUse { context: String, message: String },
    /// 429 / `rateLimitExceeded` still after every retry.
    #[error("{context}: rateLimitExceeded ({status}) after {attempts} attempts: {message}")]
    RateLimited {
        context: String,
        status: u16,
        attempts: u32,
        message: String,
    },
    /// Any other HTTP error (or failed operation) with its reason.
    #[error("{context}: {status} {reason}: {message}")]
    Status {
        context: String,
        status: u16,
        reason: String,
        message: String,
    },
    #[error("{context}: {reason}")]
    Transport { context: String, reason: String },
    #[error("{context}: decoding the answer: {reason}")]
    Decode { context: String, reason: String },
    #[error("getting a token from {url}: {reason}")]
    Auth { url: String, reason: String },
    #[error("operation {operation} not DONE after {waited:?}")]
    Timeout { operation: String, waited: Duration },
}

impl ComputeError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ComputeError::NotFound { .. })
    }
    pub fn is_already_exists(&self) -> bool {
        matches!(self, ComputeError::AlreadyExists { .. })
    }
    pub fn is_in_use(&self) -> bool {
        matches!(self, ComputeError::InUse { .. })
    }
    pub fn status(&self) -> Option<u16> {
        match self {
            ComputeError::NotFound { .. } => Some(404),
            ComputeError::AlreadyExists { .. } => Some(409),
            ComputeError::InUse { .. } => Some(400),
            ComputeError::RateLimited { status, .. } | ComputeError::Status { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

/// Maps an HTTP status, Google reason and message to the error kind.
pub fn classify(context: String, status: u16, reason: &str, message: &str) -> ComputeError {
    let message = message.to_owned();
    let lower = reason.to_ascii_lowercase();
    if status == 404 || lower == "notfound" || lower == "resource_not_found" {
        ComputeError::NotFound { context, message }
    } else if status == 409 || lower == "alreadyexists" || lower == "already_exists" {
        ComputeError::AlreadyExists { context, message }
    } else if lower == "resourceinusebyanotherresource"
        || lower == "resource_in_use_by_another_resource"
        || (status == 400 && message.contains("being used by"))
    {
        ComputeError::InUse { context, message }
    } else {
        ComputeError::Status {
            context,
            status,
            reason: reason.to_owned(),
            message,
        }
    }
}

/// `(reason, message)` of Google's error envelope.
pub fn google_error(body: &[u8]) -> (String, String) {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let reason = json
        .pointer("/error/errors/0/reason")
        .or_else(|| json.pointer("/error/status"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let message = json
        .pointer("/error/message")
        .or_else(|| json.pointer("/error/errors/0/message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| snippet(body));
    (reason, message)
}

/// Retry and polling knobs.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Total tries of one request (first included).
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// Minimum spacing of operation polls.
    pub poll_interval: Duration,
    /// Give up waiting for an operation after this long.
    pub op_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 6,
            base: Duration::from_millis(100),
            max: Duration::from_secs(30),
            poll_interval: Duration::from_millis(200),
            op_deadline: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// Fast retries for tests.
    pub fn fast() -> Self {
        Self {
            attempts: 4,
            base: Duration::from_millis(2),
            max: Duration::from_millis(10),
            poll_interval: Duration::from_millis(1),
            op_deadline: Duration::from_secs(10),
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.base.saturating_mul(factor).min(self.max)
    }
}

fn http_client() -> Result<reqwest::Client, ComputeError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(150))
        .pool_max_idle_per_host(32)
        .build()
        .map_err(|e| ComputeError::Transport {
            context: "building the HTTP client".to_owned(),
            reason: e.to_string(),
        })
}

/// The metadata server (`cloud.google.com/go/compute/metadata`).
#[derive(Debug, Clone)]
pub struct MetadataClient {
    http: reqwest::Client,
    /// `http://<host>/computeMetadata/v1/`.
    base: String,
    /// Named by `GCE_METADATA_HOST` (or a test), not the link-local default.
    explicit: bool,
}

impl MetadataClient {
    /// `GCE_METADATA_HOST` (host[:port]) or the link-local default.
    pub fn from_env() -> Result<Self, ComputeError> {
        match std::env::var("GCE_METADATA_HOST")
            .ok()
            .filter(|h| !h.is_empty())
        {
            Some(host) => Self::new(&host),
            None => {
                let mut m = Self::new("169.254.169.254")?;
                m.explicit = false;
                Ok(m)
            }
        }
    }

    pub fn new(host: &str) -> Result<Self, ComputeError> {
        Ok(Self {
            http: http_client()?,
            base: format!("http://{host}/computeMetadata/v1/"),
            explicit: true,
        })
    }

    /// The text at `path` (relative to `computeMetadata/v1/`).
    pub async fn get(&self, path: &str) -> Result<String, ComputeError> {
        let url = format!("{}{path}", self.base);
        let context = format!("GET {url}");
        let response = self
            .http
            .get(&url)
            .header("Metadata-Flavor", "Google")
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| ComputeError::Transport {
                context: context.clone(),
                reason: error_chain(&e),
            })?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| ComputeError::Transport {
                context: context.clone(),
                reason: error_chain(&e),
            })?;
        if !(200..300).contains(&status) {
            return Err(classify(context, status, "", &snippet(&body)));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

#[derive(Debug, Clone)]
struct Token {
    value: String,
    refresh_at: Instant,
}

/// Where Compute tokens come from.
#[derive(Debug)]
enum TokenSource {
    /// `token-url = nil`: the metadata token if one is configured, else none.
    Default(Option<MetadataClient>),
    Metadata(MetadataClient),
    Alt {
        url: String,
        body: String,
        metadata: MetadataClient,
    },
}

/// One Compute client shared by every worker.
#[derive(Debug)]
pub struct ComputeClient {
    http: reqwest::Client,
    /// `<api-endpoint>projects/` (upstream `getProjectsBasePath`).
    projects_base: String,
    source: TokenSource,
    token: Mutex<Option<Token>>,
    retry: RetryPolicy,
    /// Operation polls, spaced by `retry.poll_interval`.
    last_poll: Mutex<Option<Instant>>,
}

impl ComputeClient {
    pub fn new(
        api_endpoint: &str,
        token: &TokenConfig,
        metadata: MetadataClient,
    ) -> Result<Self, ComputeError> {
        let mut base = api_endpoint.to_owned();
        if !base.ends_with('/') {
            base.push('/');
        }
        if !base.ends_with("/projects/") {
            base.push_str("projects/");
        }
        let source = match token {
            TokenConfig::None => TokenSource::Default(metadata.explicit.then_some(metadata)),
            TokenConfig::Metadata => TokenSource::Metadata(metadata),
            TokenConfig::Alt { url, body } => TokenSource::Alt {
                url: url.clone(),
                body: body.clone(),
                metadata,
            },
        };
        Ok(Self {
            http: http_client()?,
            projects_base: base,
            source,
            token: Mutex::new(None),
            retry: RetryPolicy::default(),
            last_poll: Mutex::new(None),
        })
    }

    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
    }

    /// `<api-endpoint>projects/`.
    pub fn projects_base(&self) -> &str {
        &self.projects_base
    }

    /// An absolute URL for `projects/...`-relative paths (`p/zones/...`), else as is.
    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{}", self.projects_base, path.trim_start_matches('/'))
        }
    }

    async fn token(&self) -> Result<Option<String>, ComputeError> {
        if matches!(self.source, TokenSource::Default(None)) {
            return Ok(None);
        }
        let mut guard = self.token.lock().await;
        if let Some(t) = guard.as_ref()
            && Instant::now() < t.refresh_at
        {
            return Ok(Some(t.value.clone()).filter(|v| !v.is_empty()));
        }
        let fresh = match &self.source {
            TokenSource::Default(None) => return Ok(None),
            TokenSource::Default(Some(m)) => match metadata_token(m).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("no default credentials, calling Compute without a token: {e}");
                    Token {
                        value: String::new(),
                        refresh_at: Instant::now() + Duration::from_secs(60),
                    }
                }
            },
            TokenSource::Metadata(m) => metadata_token(m).await?,
            TokenSource::Alt {
                url,
                body,
                metadata,
            } => self.alt_token(url, body, metadata).await?,
        };
        let value = fresh.value.clone();
        *guard = Some(fresh);
        Ok(Some(value).filter(|v| !v.is_empty()))
    }

    async fn alt_token(
        &self,
        url: &str,
        body: &str,
        metadata: &MetadataClient,
    ) -> Result<Token, ComputeError> {
        let auth = |reason: String| ComputeError::Auth {
            url: url.to_owned(),
            reason,
        };
        // Upstream's AltTokenSource posts with an oauth2 client on the metadata token.
        let bearer = metadata_token(metadata).await?;
        let response = self
            .http
            .post(url)
            .bearer_auth(&bearer.value)
            .body(body.to_owned())
            .send()
            .await
            .map_err(|e| auth(error_chain(&e)))?;
        let status = response.status();
        let reply = response.bytes().await.map_err(|e| auth(error_chain(&e)))?;
        if !status.is_success() {
            let (reason, message) = google_error(&reply);
            return Err(auth(format!("{status} {reason}: {message}")));
        }
        let json: Value = serde_json::from_slice(&reply).map_err(|e| auth(e.to_string()))?;
        let value = json
            .get("accessToken")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| auth("no accessToken in the answer".to_owned()))?
            .to_owned();
        let expire = json
            .get("expireTime")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .ok_or_else(|| auth("no RFC 3339 expireTime in the answer".to_owned()))?;
        let left = expire.duration_since(jiff::Timestamp::now());
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        Ok(Token {
            value,
            refresh_at: Instant::now() + left.saturating_sub(Duration::from_secs(10)),
        })
    }

    /// One request with retries and error decoding; the decoded JSON answer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, ComputeError> {
        let url = self.url(path);
        let context = format!("{method} {url}");
        let mut attempt = 1;
        loop {
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header(reqwest::header::ACCEPT, "application/json");
            if !query.is_empty() {
                request = request.query(query);
            }
            if let Some(token) = self.token().await? {
                request = request.bearer_auth(token);
            }
            if let Some(b) = body {
                request = request.json(b);
            } else if method == Method::POST {
                request = request.header(reqwest::header::CONTENT_LENGTH, "0");
            }
            let outcome = match request.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    match r.bytes().await {
                        Ok(b) => Ok((status, b)),
                        Err(e) => Err(error_chain(&e)),
                    }
                }
                Err(e) => Err(error_chain(&e)),
            };
            let (status, reply) = match outcome {
                Ok(x) => x,
                Err(reason) => {
                    if attempt < self.retry.attempts
                        && (reason.contains("connection refused")
                            || reason.contains("connection reset")
                            || reason.contains("broken pipe"))
                    {
                        tokio::time::sleep(self.retry.backoff(attempt)).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(ComputeError::Transport { context, reason });
                }
            };
            if (200..300).contains(&status) {
                if reply.is_empty() {
                    return Ok(Value::Null);
                }
                return serde_json::from_slice(&reply).map_err(|e| ComputeError::Decode {
                    context,
                    reason: e.to_string(),
                });
            }
            let (reason, message) = google_error(&reply);
            let rate_limited = status == 429
                || (status == 403
                    && matches!(
                        reason.as_str(),
                        "rateLimitExceeded" | "userRateLimitExceeded"
                    ));
            let retriable = rate_limited || status == 408 || (500..=599).contains(&status);
            if retriable && attempt < self.retry.attempts {
                let wait = self.retry.backoff(attempt);
                tracing::debug!(%url, status, ?wait, "Compute request retried");
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            if rate_limited {
                return Err(ComputeError::RateLimited {
                    context,
                    status,
                    attempts: attempt,
                    message,
                });
            }
            return Err(classify(context, status, &reason, &message));
        }
    }

    /// GET one resource.
    pub async fn get(&self, path: &str) -> Result<Value, ComputeError> {
        self.send(Method::GET, path, &[], None).await
    }

    /// GET one resource; `None` on 404.
    pub async fn get_opt(&self, path: &str) -> Result<Option<Value>, ComputeError> {
        match self.get(path).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every item of a list, following `nextPageToken`; `filter` as k8s-cloud-provider
    /// writes it.
    pub async fn list(&self, path: &str, filter: Option<&str>) -> Result<Vec<Value>, ComputeError> {
        let mut out = Vec::new();
        let mut token = String::new();
        for _ in 0..10_000 {
            let mut query: Vec<(&str, &str)> = Vec::new();
            if let Some(f) = filter {
                query.push(("filter", f));
            }
            if !token.is_empty() {
                query.push(("pageToken", &token));
            }
            let page = self.send(Method::GET, path, &query, None).await?;
            if let Some(items) = page.get("items").and_then(Value::as_array) {
                out.extend(items.iter().cloned());
            }
            match page
                .get("nextPageToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                Some(t) => token = t.to_owned(),
                None => return Ok(out),
            }
        }
        Err(ComputeError::Decode {
            context: format!("GET {}", self.url(path)),
            reason: "more than 10000 pages".to_owned(),
        })
    }

    /// POST (insert or a custom verb such as `addInstance`) and wait for the operation.
    pub async fn insert(&self, path: &str, body: &Value) -> Result<(), ComputeError> {
        let op = self.send(Method::POST, path, &[], Some(body)).await?;
        self.wait(op).await
    }

    /// PATCH and wait for the operation.
    pub async fn patch(&self, path: &str, body: &Value) -> Result<(), ComputeError> {
        let op = self.send(Method::PATCH, path, &[], Some(body)).await?;
        self.wait(op).await
    }

    /// PUT (full update) and wait for the operation.
    pub async fn update(&self, path: &str, body: &Value) -> Result<(), ComputeError> {
        let op = self.send(Method::PUT, path, &[], Some(body)).await?;
        self.wait(op).await
    }

    /// DELETE and wait for the operation (errors, 404 included, are the caller's).
    pub async fn delete(&self, path: &str) -> Result<(), ComputeError> {
        let op = self.send(Method::DELETE, path, &[], None).await?;
        self.wait(op).await
    }

    /// Waits for an operation to be DONE with `.../operations/{name}/wait`, then fails
    /// with its first error (k8s-cloud-provider `op.go` `isDone`).
    pub async fn wait(&self, mut op: Value) -> Result<(), ComputeError> {
        let started = Instant::now();
        let name = op
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let wait_path = operation_wait_path(&op);
        loop {
            let status = op.get("status").and_then(Value::as_str).unwrap_or_default();
            if status == "DONE" {
                return operation_error(&op);
            }
            let Some(path) = wait_path.as_deref() else {
                // Not an operation (some fakes answer the resource): nothing to wait for.
                return Ok(());
            };
            if started.elapsed() > self.retry.op_deadline {
                return Err(ComputeError::Timeout {
                    operation: name,
                    waited: started.elapsed(),
                });
            }
            self.pace_poll().await;
            op = self.send(Method::POST, path, &[], None).await?;
        }
    }

    /// Spaces operation polls (upstream's 5 qps `operationPollRateLimiter`).
    async fn pace_poll(&self) {
        let mut last = self.last_poll.lock().await;
        if let Some(t) = *last {
            let next = t + self.retry.poll_interval;
            let now = Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
        }
        *last = Some(Instant::now());
    }
}

/// `projects/<p>/{zones/<z>/|regions/<r>/|global/}operations/<name>/wait`, from the
/// operation's `selfLink` (k8s-cloud-provider `wrapOperation` parses it), else from its
/// `zone`/`region` fields; `None` when it is no operation.
pub fn operation_wait_path(op: &Value) -> Option<String> {
    let field = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or_default();
    let name = field("name");
    if name.is_empty() || (field("kind") != "compute#operation" && field("status").is_empty()) {
        return None;
    }
    let self_link = field("selfLink");
    if let Some(i) = self_link.find("/projects/") {
        let rel = &self_link[i + "/projects/".len()..];
        return Some(format!("{rel}/wait"));
    }
    let project = project_of(field("targetLink"))
        .or_else(|| project_of(field("zone")))
        .or_else(|| project_of(field("region")))
        .unwrap_or_default();
    let scope = if !field("zone").is_empty() {
        format!("zones/{}", last_segment(field("zone")))
    } else if !field("region").is_empty() {
        format!("regions/{}", last_segment(field("region")))
    } else {
        "global".to_owned()
    };
    Some(format!("{project}/{scope}/operations/{name}/wait"))
}

fn project_of(url: &str) -> Option<String> {
    let i = url.find("projects/")?;
    let rest = &url[i + "projects/".len()..];
    rest.split('/')
        .next()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// The error of a DONE operation, if any.
fn operation_error(op: &Value) -> Result<(), ComputeError> {
    let Some(first) = op.pointer("/error/errors/0") else {
        return Ok(());
    };
    let code = first
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = first
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let status = op
        .get("httpErrorStatusCode")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or(0);
    let context = format!(
        "operation {} ({} {})",
        op.get("name").and_then(Value::as_str).unwrap_or_default(),
        op.get("operationType")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        op.get("targetLink")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    Err(classify(
        context,
        status,
        code,
        &format!("{code} - {message}"),
    ))
}

/// The metadata token (`computeSource`: `expires_in` must be non-zero).
async fn metadata_token(m: &MetadataClient) -> Result<Token, ComputeError> {
    let path = "instance/service-accounts/default/token";
    let text = m.get(path).await.map_err(|e| ComputeError::Auth {
        url: format!("{}{path}", m.base),
        reason: e.to_string(),
    })?;
    let auth = |reason: &str| ComputeError::Auth {
        url: format!("{}{path}", m.base),
        reason: reason.to_owned(),
    };
    let json: Value = serde_json::from_str(&text).map_err(|e| auth(&e.to_string()))?;
    let value = json
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| auth("incomplete token received from metadata: no access_token"))?
        .to_owned();
    let secs = json
        .get("expires_in")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        .ok_or_else(|| auth("incomplete token received from metadata: no expires_in"))?;
    Ok(Token {
        value,
        refresh_at: Instant::now()
            + Duration::from_secs(secs).saturating_sub(Duration::from_secs(10)),
    })
}

/// The part after the last `/` (upstream `lastComponent`).
pub fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
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
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(300)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_and_operation_paths() {
        let (r, m) = google_error(
            br#"{"error":{"code":404,"message":"gone","errors":[{"reason":"notFound","message":"gone","domain":"global"}]}}"#,
        );
        assert_eq!((r.as_str(), m.as_str()), ("notFound", "gone"));
        assert!(classify("x".into(), 404, &r, &m).is_not_found());
        assert!(classify("x".into(), 409, "alreadyExists", "").is_already_exists());
        assert!(classify("x".into(), 400, "resourceInUseByAnotherResource", "").is_in_use());
        assert!(classify("x".into(), 400, "", "is already being used by 'tp'").is_in_use());
        let op = json!({"kind": "compute#operation", "name": "op-1", "status": "PENDING",
            "selfLink": "http://h/compute/v1/projects/p/regions/r1/operations/op-1"});
        assert_eq!(
            operation_wait_path(&op).as_deref(),
            Some("p/regions/r1/operations/op-1/wait")
        );
        let op = json!({"kind": "compute#operation", "name": "op-2", "status": "RUNNING",
            "zone": "http://h/compute/v1/projects/p/zones/z-a", "targetLink": "http://h/compute/v1/projects/p/zones/z-a/instances/i"});
        assert_eq!(
            operation_wait_path(&op).as_deref(),
            Some("p/zones/z-a/operations/op-2/wait")
        );
        let op = json!({"kind": "compute#operation", "name": "op-3", "status": "PENDING",
            "targetLink": "http://h/compute/v1/projects/p/global/routes/x"});
        assert_eq!(
            operation_wait_path(&op).as_deref(),
            Some("p/global/operations/op-3/wait")
        );
        assert_eq!(operation_wait_path(&json!({"name": "tp"})), None);
    }
}
