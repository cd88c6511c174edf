//! A small Google Cloud Storage client for publishing: the JSON API's three upload kinds,
//! object reads, and OAuth2 tokens from a service-account key or the metadata server.
//!
//! Why our own and not an SDK: publishing needs four calls, and the Rust GCS crates pull a
//! second TLS stack or gRPC into a workspace that builds everything on every CI run. What it
//! must get right (reference `testgrid-prow.md` §1, §8.6):
//! - JSON API uploads: `uploadType=multipart` (a `multipart/related` body: the JSON object
//!   resource with `contentType`, `contentEncoding` and custom `metadata`, then the bytes) for
//!   small files, `uploadType=resumable` (POST → `Location` session URI → `PUT` chunks with
//!   `Content-Range: bytes a-b/total`, non-final chunks multiples of 256 KiB, `308` until
//!   done) above [`RESUMABLE_THRESHOLD`]. Custom metadata goes in the resource, not in
//!   `x-goog-meta-*` request headers (which only some emulators accept).
//! - object names percent-encoded inside `/o/<name>` paths (`/` → `%2F`).
//! - retries with exponential backoff and jitter on 429, 5xx and transport errors
//!   (cloud.google.com/storage/docs/retry-strategy).
//! - `STORAGE_EMULATOR_HOST` (the variable the Google client libraries honour) switches the
//!   endpoint to an emulator and turns authentication off.
//! - tokens: `GOOGLE_APPLICATION_CREDENTIALS` names a service-account key; a JWT signed with
//!   RS256 is exchanged at its `token_uri` (RFC 7523 `jwt-bearer` grant, scope
//!   `devstorage.read_write`). Without it, the GCE/GKE metadata server
//!   (`GCE_METADATA_HOST` or `metadata.google.internal`) provides one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use tokio::sync::Mutex;

/// Files larger than this are uploaded with a resumable session (8 MiB).
pub const RESUMABLE_THRESHOLD: usize = 8 * 1024 * 1024;
/// Chunk size of resumable uploads: a multiple of 256 KiB as GCS requires.
pub const CHUNK_SIZE: usize = 8 * 1024 * 1024;
const CHUNK_QUANTUM: usize = 256 * 1024;
/// Attempts per request (the first try plus retries).
pub const MAX_ATTEMPTS: u32 = 5;
const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const PUBLIC_ENDPOINT: &str = "https://storage.googleapis.com";

/// Errors talking to GCS.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading credentials {path}: {reason}")]
    Credentials { path: String, reason: String },
    #[error("signing the token request: {0}")]
    Sign(String),
    #[error("getting an access token from {url}: {reason}")]
    Token { url: String, reason: String },
    #[error("{what}: HTTP {status}: {body}")]
    Status {
        what: String,
        status: u16,
        body: String,
    },
    #[error("{what}: {source}")]
    Http {
        what: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{what}: {reason}")]
    Protocol { what: String, reason: String },
}

/// The fields of a service-account key file we use.
#[derive(Debug, Clone, Deserialize)]
pub struct ServiceAccountKey {
    pub client_email: String,
    pub private_key: String,
    #[serde(default = "default_token_uri")]
    pub token_uri: String,
}

fn default_token_uri() -> String {
    "https://oauth2.googleapis.com/token".into()
}

/// How requests are authorised.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Emulators.
    None,
    ServiceAccount(ServiceAccountKey),
    /// The metadata server at this base URL (`http://metadata.google.internal`).
    Metadata(String),
}

/// Custom object metadata and headers of one upload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectInfo {
    pub content_type: String,
    pub content_encoding: Option<String>,
    /// Custom metadata (`x-goog-meta-<key>` on reads), e.g. `link` for presubmit aliases.
    pub metadata: BTreeMap<String, String>,
}

/// A GCS JSON-API client.
pub struct Client {
    http: reqwest::Client,
    endpoint: String,
    auth: Auth,
    token: Mutex<Option<(String, Instant)>>,
    /// Base delay of the exponential backoff (shortened in tests).
    backoff: Duration,
}

impl Client {
    /// A client configured from the environment: `STORAGE_EMULATOR_HOST` (no auth), else
    /// `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server.
    pub fn from_env() -> Result<Self, Error> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if let Some(host) = var("STORAGE_EMULATOR_HOST") {
            let endpoint = if host.contains("://") {
                host
            } else {
                format!("http://{host}")
            };
            return Self::new(&endpoint, Auth::None);
        }
        if let Some(path) = var("GOOGLE_APPLICATION_CREDENTIALS") {
            let text = std::fs::read_to_string(&path).map_err(|e| Error::Credentials {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let key: ServiceAccountKey =
                serde_json::from_str(&text).map_err(|e| Error::Credentials {
                    path: path.clone(),
                    reason: format!("not a service-account key: {e}"),
                })?;
            return Self::new(PUBLIC_ENDPOINT, Auth::ServiceAccount(key));
        }
        let metadata = var("GCE_METADATA_HOST")
            .map(|h| format!("http://{h}"))
            .unwrap_or_else(|| "http://metadata.google.internal".into());
        Self::new(PUBLIC_ENDPOINT, Auth::Metadata(metadata))
    }

    /// A client for `endpoint` (e.g. `https://storage.googleapis.com`).
    pub fn new(endpoint: &str, auth: Auth) -> Result<Self, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|source| Error::Http {
                what: "building the HTTP client".into(),
                source,
            })?;
        Ok(Self {
            http,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            auth,
            token: Mutex::new(None),
            backoff: Duration::from_millis(500),
        })
    }

    /// Sets the base delay of the backoff (tests use milliseconds).
    pub fn with_backoff(mut self, base: Duration) -> Self {
        self.backoff = base;
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Uploads `body` as `bucket/name`: multipart up to [`RESUMABLE_THRESHOLD`], resumable
    /// above.
    pub async fn upload(
        &self,
        bucket: &str,
        name: &str,
        body: &[u8],
        info: &ObjectInfo,
    ) -> Result<(), Error> {
        if body.len() > RESUMABLE_THRESHOLD {
            self.upload_resumable(bucket, name, body, info, CHUNK_SIZE)
                .await
        } else {
            self.upload_multipart(bucket, name, body, info).await
        }
    }

    /// `uploadType=multipart`: resource and bytes in one `multipart/related` request.
    pub async fn upload_multipart(
        &self,
        bucket: &str,
        name: &str,
        body: &[u8],
        info: &ObjectInfo,
    ) -> Result<(), Error> {
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=multipart",
            self.endpoint,
            encode(bucket)
        );
        let boundary = format!("ccm-conformance-{:016x}", fastrand::u64(..));
        let payload = multipart_body(&boundary, &resource(name, info), body, &info.content_type);
        let what = format!("uploading gs://{bucket}/{name}");
        self.send_with_retries(&what, || {
            self.http
                .post(&url)
                .header(
                    "Content-Type",
                    format!("multipart/related; boundary={boundary}"),
                )
                .body(payload.clone())
        })
        .await?;
        Ok(())
    }

    /// `uploadType=resumable` with chunks of `chunk` bytes (rounded down to 256 KiB).
    pub async fn upload_resumable(
        &self,
        bucket: &str,
        name: &str,
        body: &[u8],
        info: &ObjectInfo,
        chunk: usize,
    ) -> Result<(), Error> {
        let what = format!("uploading gs://{bucket}/{name} (resumable)");
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=resumable",
            self.endpoint,
            encode(bucket)
        );
        let resource = resource(name, info).to_string();
        let resp = self
            .send_with_retries(&what, || {
                self.http
                    .post(&url)
                    .header("Content-Type", "application/json; charset=UTF-8")
                    .header("X-Upload-Content-Type", info.content_type.as_str())
                    .header("X-Upload-Content-Length", body.len().to_string())
                    .body(resource.clone())
            })
            .await?;
        let session = resp
            .headers()
            .get("Location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Error::Protocol {
                what: what.clone(),
                reason: "no Location header in the session response".into(),
            })?;
        let chunk = (chunk / CHUNK_QUANTUM).max(1) * CHUNK_QUANTUM;
        let total = body.len();
        let mut offset = 0usize;
        let mut failures = 0u32;
        loop {
            let end = (offset + chunk).min(total);
            let range = if total == 0 {
                "bytes */0".to_string()
            } else {
                format!("bytes {offset}-{}/{total}", end - 1)
            };
            let sent = self
                .authorized(self.http.put(&session))
                .await?
                .header("Content-Range", range)
                .body(body[offset..end].to_vec())
                .send()
                .await;
            let outcome = match sent {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) if r.status().as_u16() == 308 => {
                    offset = persisted(&r).unwrap_or(end);
                    failures = 0;
                    continue;
                }
                Ok(r) if retryable(r.status().as_u16()) => format!("HTTP {}", r.status()),
                Ok(r) => {
                    return Err(Error::Status {
                        what,
                        status: r.status().as_u16(),
                        body: r.text().await.unwrap_or_default(),
                    });
                }
                Err(e) => e.to_string(),
            };
            failures += 1;
            if failures >= MAX_ATTEMPTS {
                return Err(Error::Protocol {
                    what,
                    reason: format!("chunk at {offset} failed {failures} times: {outcome}"),
                });
            }
            tokio::time::sleep(self.delay(failures)).await;
            // Ask the session how much it has before resending.
            let status = self
                .authorized(self.http.put(&session))
                .await?
                .header("Content-Range", format!("bytes */{total}"))
                .send()
                .await;
            match status {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) if r.status().as_u16() == 308 => offset = persisted(&r).unwrap_or(0),
                _ => {}
            }
        }
    }

    /// The content of `bucket/name`, or `None` when it does not exist.
    pub async fn read(&self, bucket: &str, name: &str) -> Result<Option<Vec<u8>>, Error> {
        let url = format!(
            "{}/storage/v1/b/{}/o/{}?alt=media",
            self.endpoint,
            encode(bucket),
            encode(name)
        );
        let what = format!("reading gs://{bucket}/{name}");
        match self.send_with_retries(&what, || self.http.get(&url)).await {
            Ok(r) => r
                .bytes()
                .await
                .map(|b| Some(b.to_vec()))
                .map_err(|source| Error::Http { what, source }),
            Err(Error::Status { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Names of the objects under `prefix` (all pages of `objects.list`), in the order GCS
    /// returns them (lexicographic).
    pub async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            #[serde(default)]
            items: Vec<Item>,
            next_page_token: Option<String>,
        }
        #[derive(Deserialize)]
        struct Item {
            name: String,
        }
        let url = format!("{}/storage/v1/b/{}/o", self.endpoint, encode(bucket));
        let what = format!("listing gs://{bucket}/{prefix}");
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("prefix", prefix.to_string()),
                ("fields", "items(name),nextPageToken".into()),
            ];
            if let Some(t) = &token {
                query.push(("pageToken", t.clone()));
            }
            let resp = self
                .send_with_retries(&what, || self.http.get(&url).query(&query))
                .await?;
            let text = resp.text().await.map_err(|source| Error::Http {
                what: what.clone(),
                source,
            })?;
            let page: Page = serde_json::from_str(&text).map_err(|e| Error::Protocol {
                what: what.clone(),
                reason: format!("unexpected listing: {e}"),
            })?;
            names.extend(page.items.into_iter().map(|i| i.name));
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) if token.as_ref() != Some(&t) => token = Some(t),
                _ => return Ok(names),
            }
        }
    }

    async fn authorized(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, Error> {
        Ok(match self.token().await? {
            Some(token) => req.bearer_auth(token),
            None => req,
        })
    }

    /// Sends the request built by `build`, retrying 429, 5xx and transport errors.
    async fn send_with_retries(
        &self,
        what: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= MAX_ATTEMPTS;
            match self.authorized(build()).await?.send().await {
                Ok(r) if r.status().is_success() => return Ok(r),
                Ok(r) if retryable(r.status().as_u16()) && !last => {}
                Ok(r) => {
                    return Err(Error::Status {
                        what: what.to_string(),
                        status: r.status().as_u16(),
                        body: r.text().await.unwrap_or_default(),
                    });
                }
                Err(e) if !last && (e.is_connect() || e.is_timeout() || e.is_request()) => {}
                Err(source) => {
                    return Err(Error::Http {
                        what: what.to_string(),
                        source,
                    });
                }
            }
            tokio::time::sleep(self.delay(attempt)).await;
        }
    }

    /// `base * 2^(n-1)`, capped at 32 s, with up to 50 % jitter.
    fn delay(&self, n: u32) -> Duration {
        let exp = self
            .backoff
            .saturating_mul(1 << (n.saturating_sub(1)).min(6));
        let capped = exp.min(Duration::from_secs(32));
        capped + capped.mul_f64(fastrand::f64() * 0.5)
    }

    /// A bearer token (cached until a minute before it expires), or `None` without auth.
    async fn token(&self) -> Result<Option<String>, Error> {
        if matches!(self.auth, Auth::None) {
            return Ok(None);
        }
        let mut cached = self.token.lock().await;
        if let Some((token, until)) = cached.as_ref()
            && Instant::now() < *until
        {
            return Ok(Some(token.clone()));
        }
        let (token, lifetime) = match &self.auth {
            Auth::None => return Ok(None),
            Auth::ServiceAccount(key) => self.service_account_token(key).await?,
            Auth::Metadata(base) => self.metadata_token(base).await?,
        };
        let until = Instant::now() + lifetime.saturating_sub(Duration::from_secs(60));
        *cached = Some((token.clone(), until));
        Ok(Some(token))
    }

    async fn service_account_token(
        &self,
        key: &ServiceAccountKey,
    ) -> Result<(String, Duration), Error> {
        let now = crate::prow::now_epoch_seconds();
        let jwt = sign_jwt(key, now)?;
        let form = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={jwt}"
        );
        let resp = self
            .http
            .post(&key.token_uri)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await;
        token_from(resp, &key.token_uri).await
    }

    async fn metadata_token(&self, base: &str) -> Result<(String, Duration), Error> {
        let url = format!(
            "{}/computeMetadata/v1/instance/service-accounts/default/token",
            base.trim_end_matches('/')
        );
        let resp = self
            .http
            .get(&url)
            .header("Metadata-Flavor", "Google")
            .send()
            .await;
        token_from(resp, &url).await
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

async fn token_from(
    resp: Result<reqwest::Response, reqwest::Error>,
    url: &str,
) -> Result<(String, Duration), Error> {
    let bad = |reason: String| Error::Token {
        url: url.to_string(),
        reason,
    };
    let resp = resp.map_err(|e| bad(e.to_string()))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| bad(e.to_string()))?;
    if !status.is_success() {
        return Err(bad(format!("HTTP {status}: {text}")));
    }
    let t: TokenResponse =
        serde_json::from_str(&text).map_err(|e| bad(format!("unexpected answer: {e}")))?;
    Ok((
        t.access_token,
        Duration::from_secs(t.expires_in.unwrap_or(3600)),
    ))
}

/// The RS256-signed JWT of the `jwt-bearer` grant (RFC 7523; Google's
/// "Using OAuth 2.0 for Server to Server Applications").
pub fn sign_jwt(key: &ServiceAccountKey, now: u64) -> Result<String, Error> {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "iss": key.client_email,
        "scope": SCOPE,
        "aud": key.token_uri,
        "iat": now,
        "exp": now + 3600,
    });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{claims}");
    let der = pem_to_der(&key.private_key)?;
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der)
        .map_err(|e| Error::Sign(format!("private_key is not a PKCS#8 RSA key: {e}")))?;
    let mut sig = vec![0u8; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .map_err(|e| Error::Sign(e.to_string()))?;
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig)))
}

/// The DER inside a `-----BEGIN PRIVATE KEY-----` block.
fn pem_to_der(pem: &str) -> Result<Vec<u8>, Error> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("-----BEGIN PRIVATE KEY"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    if body.is_empty() {
        return Err(Error::Sign(
            "private_key holds no \"BEGIN PRIVATE KEY\" (PKCS#8) block".into(),
        ));
    }
    STANDARD
        .decode(body)
        .map_err(|e| Error::Sign(format!("private_key is not base64: {e}")))
}

/// The JSON object resource of an upload.
fn resource(name: &str, info: &ObjectInfo) -> serde_json::Value {
    let mut r = serde_json::json!({ "name": name, "contentType": info.content_type });
    if let Some(enc) = &info.content_encoding {
        r["contentEncoding"] = enc.as_str().into();
    }
    if !info.metadata.is_empty() {
        r["metadata"] = serde_json::to_value(&info.metadata).unwrap_or_default();
    }
    r
}

/// `multipart/related`: the resource as JSON, then the bytes (cloud.google.com/storage/docs/
/// uploading-objects, "multipart upload").
fn multipart_body(
    boundary: &str,
    resource: &serde_json::Value,
    body: &[u8],
    content_type: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 512);
    out.extend_from_slice(
        format!("--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{resource}\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n")
            .as_bytes(),
    );
    out.extend_from_slice(body);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

/// The next offset from a `308`'s `Range: bytes=0-N` (none: nothing persisted).
fn persisted(r: &reqwest::Response) -> Option<usize> {
    let range = r.headers().get("Range")?.to_str().ok()?;
    let last: usize = range.strip_prefix("bytes=0-")?.trim().parse().ok()?;
    Some(last + 1)
}

fn retryable(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// Percent-encodes a path segment: everything but unreserved characters, so `/` → `%2F`
/// (reference §8.6).
pub fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded_as_one_segment() {
        assert_eq!(
            encode("logs/job/1/a b#c.txt"),
            "logs%2Fjob%2F1%2Fa%20b%23c.txt"
        );
        assert_eq!(encode("ü"), "%C3%BC");
    }

    #[test]
    fn multipart_body_has_resource_then_bytes() {
        let info = ObjectInfo {
            content_type: "application/json".into(),
            content_encoding: Some("gzip".into()),
            metadata: [("link".to_string(), "gs://b/x".to_string())].into(),
        };
        let body = multipart_body("B", &resource("a/b.json", &info), b"{}", "application/json");
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("--B\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{"));
        assert!(text.contains(r#""metadata":{"link":"gs://b/x"}"#), "{text}");
        assert!(text.contains(r#""contentEncoding":"gzip""#), "{text}");
        assert!(
            text.ends_with("\r\n--B\r\nContent-Type: application/json\r\n\r\n{}\r\n--B--\r\n"),
            "{text}"
        );
    }

    #[test]
    fn retry_policy_and_backoff() {
        for s in [408, 429, 500, 503] {
            assert!(retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 412] {
            assert!(!retryable(s), "{s}");
        }
        let c = Client::new("http://x", Auth::None)
            .unwrap()
            .with_backoff(Duration::from_millis(100));
        let d1 = c.delay(1);
        let d3 = c.delay(3);
        assert!(d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(150));
        assert!(d3 >= Duration::from_millis(400) && d3 <= Duration::from_millis(600));
        assert!(c.delay(30) <= Duration::from_secs(48));
    }

    #[test]
    fn bad_keys_are_errors_not_panics() {
        let key = ServiceAccountKey {
            client_email: "a@b".into(),
            private_key: "nope".into(),
            token_uri: default_token_uri(),
        };
        assert!(matches!(sign_jwt(&key, 1), Err(Error::Sign(_))));
        let key = ServiceAccountKey {
            private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".into(),
            ..key
        };
        assert!(matches!(sign_jwt(&key, 1), Err(Error::Sign(_))));
    }

    /// A real RSA key from `openssl`, signature checked with the public key.
    #[test]
    fn jwt_is_rs256_signed_with_the_key() {
        let Ok(out) = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .output()
        else {
            eprintln!("openssl not on PATH: skipping the signature check");
            return;
        };
        let pem = String::from_utf8(out.stdout).unwrap();
        let key = ServiceAccountKey {
            client_email: "sa@p.iam.gserviceaccount.com".into(),
            private_key: pem.clone(),
            token_uri: "https://oauth2.example/token".into(),
        };
        let jwt = sign_jwt(&key, 1_700_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "sa@p.iam.gserviceaccount.com");
        assert_eq!(claims["aud"], "https://oauth2.example/token");
        assert_eq!(claims["exp"], 1_700_003_600u64);
        assert_eq!(claims["scope"], SCOPE);
        let der = pem_to_der(&pem).unwrap();
        let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            pair.public().as_ref().to_vec(),
        );
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .expect("signature verifies");
    }

    /// Token exchange, caching, retries on 503 and the request shapes, against wiremock.
    #[tokio::test]
    async fn service_account_flow_retries_and_caches_the_token() {
        use wiremock::matchers::{body_string_contains, header, method, path, query_param};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let Ok(out) = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .output()
        else {
            eprintln!("openssl not on PATH: skipping");
            return;
        };
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .and(body_string_contains(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer",
            ))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(serde_json::json!({"access_token": "tok", "expires_in": 3600})),
            )
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/upload/storage/v1/b/bkt/o"))
            .and(query_param("uploadType", "multipart"))
            .respond_with(ResponseTemplate::new(503))
            .up_to_n_times(2)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/upload/storage/v1/b/bkt/o"))
            .and(query_param("uploadType", "multipart"))
            .and(header("authorization", "Bearer tok"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({})))
            .expect(1)
            .mount(&server)
            .await;
        let key = ServiceAccountKey {
            client_email: "sa@p".into(),
            private_key: String::from_utf8(out.stdout).unwrap(),
            token_uri: format!("{}/token", server.uri()),
        };
        let c = Client::new(&server.uri(), Auth::ServiceAccount(key))
            .unwrap()
            .with_backoff(Duration::from_millis(1));
        let info = ObjectInfo {
            content_type: "text/plain".into(),
            ..Default::default()
        };
        c.upload("bkt", "a/b.txt", b"hi", &info).await.unwrap();
        let requests = server.received_requests().await.unwrap();
        let uploads = requests
            .iter()
            .filter(|r| r.url.path().starts_with("/upload"))
            .count();
        assert_eq!(uploads, 3, "two 503s, then success");
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(403).set_body_string("denied"))
            .expect(1)
            .mount(&server)
            .await;
        let c = Client::new(&server.uri(), Auth::None).unwrap();
        let info = ObjectInfo::default();
        let err = c.upload("bkt", "x", b"", &info).await.unwrap_err();
        assert!(matches!(err, Error::Status { status: 403, .. }), "{err}");
    }
}
