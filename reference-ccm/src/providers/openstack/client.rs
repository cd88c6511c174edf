//! A small OpenStack HTTP client: Keystone v3 auth, catalog lookup, authenticated GETs.
//!
//! Exists instead of `openstack_sdk` because the reference CCM needs five read calls and
//! the exact gophercloud behaviour (version discovery, one re-auth on 401, no retry on
//! 429) more than a full SDK; one pooled `reqwest::Client` and one token serve every
//! worker. Wire shapes and rules: gophercloud `openstack/client.go` (auth),
//! `openstack/utils/choose_version.go` (discovery), `openstack/endpoint_location.go`
//! (catalog), `provider_client.go` (401 -> reauth once, other codes surface as errors).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{Mutex, RwLock};

use super::config::GlobalOpts;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{method} {url}: resource not found (404)")]
    NotFound { method: &'static str, url: String },
    #[error("{method} {url}: unexpected status {status}: {body}")]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        body: String,
    },
    #[error("{method} {url}: {reason}")]
    Transport {
        method: &'static str,
        url: String,
        reason: String,
    },
    #[error("decoding the response of {url}: {reason}")]
    Decode { url: String, reason: String },
    #[error("keystone authentication at {url} failed: {reason}")]
    Auth { url: String, reason: String },
    #[error(
        "no {service} endpoint (interface {interface}, region {region:?}) in the service catalog"
    )]
    NoEndpoint {
        service: &'static str,
        interface: String,
        region: String,
    },
    #[error("building the HTTP client: {0}")]
    Setup(String),
}

/// Which catalog entry a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Compute,
    Network,
    /// Octavia (catalog type `load-balancer`); optional in the catalog.
    LoadBalancer,
}

impl Service {
    fn catalog_type(self) -> &'static str {
        match self {
            Service::Compute => "compute",
            Service::Network => "network",
            Service::LoadBalancer => "load-balancer",
        }
    }
}

impl ClientError {
    /// HTTP 409: Octavia answers it for writes while a load balancer is PENDING_*.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ClientError::Status { status: 409, .. })
    }
}

#[derive(Debug)]
struct Session {
    token: String,
    compute: String,
    network: String,
    load_balancer: Option<String>,
}

/// Authenticated client shared by every worker.
#[derive(Debug)]
pub struct OpenStackClient {
    http: reqwest::Client,
    opts: GlobalOpts,
    /// The Keystone v3 base (`.../v3`), after discovery.
    identity_v3: String,
    session: RwLock<Arc<Session>>,
    reauth: Mutex<()>,
}

impl OpenStackClient {
    /// Builds the HTTP client, discovers Keystone v3 and authenticates: every startup
    /// error (bad URL, unreachable, bad credentials, no endpoint) surfaces here.
    pub async fn connect(opts: &GlobalOpts) -> Result<Self, ClientError> {
        // reqwest is built without a provider; the process uses ring (already-installed is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256);
        if !opts.ca_file.is_empty() {
            let pem = std::fs::read(&opts.ca_file).map_err(|e| {
                ClientError::Setup(format!("reading ca-file {}: {e}", opts.ca_file))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                ClientError::Setup(format!("parsing ca-file {}: {e}", opts.ca_file))
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if opts.tls_insecure {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let http = builder
            .build()
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        let identity_v3 = discover_identity_v3(&http, &opts.auth_url).await?;
        let session = authenticate(&http, &identity_v3, opts).await?;
        Ok(Self {
            http,
            opts: opts.clone(),
            identity_v3,
            session: RwLock::new(Arc::new(session)),
            reauth: Mutex::new(()),
        })
    }

    /// GET `<service endpoint><path>` with query parameters, decoded as JSON.
    /// 401 -> authenticate again (once, shared by concurrent callers) and retry once.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, ClientError> {
        let (url, body) = self
            .send(reqwest::Method::GET, service, path, query, None)
            .await?;
        decode(&url, &body)
    }

    /// POST a JSON body; the reply (201/202/200) decoded as JSON.
    pub async fn post_json<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        body: &Value,
    ) -> Result<T, ClientError> {
        let (url, reply) = self
            .send(reqwest::Method::POST, service, path, &[], Some(body))
            .await?;
        decode(&url, &reply)
    }

    /// PUT a JSON body; the reply is not decoded (Octavia's batch member update is 202
    /// with no body).
    pub async fn put(&self, service: Service, path: &str, body: &Value) -> Result<(), ClientError> {
        self.send(reqwest::Method::PUT, service, path, &[], Some(body))
            .await
            .map(|_| ())
    }

    /// DELETE with query parameters; 404 surfaces as [`ClientError::NotFound`].
    pub async fn delete(
        &self,
        service: Service,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.send(reqwest::Method::DELETE, service, path, query, None)
            .await
            .map(|_| ())
    }

    /// One authenticated request. Any 2xx is success (gophercloud accepts per-call code
    /// lists; every code we call with is 2xx). 401 -> authenticate again (once, shared by
    /// concurrent callers) and retry once; 404 -> `NotFound`; other codes -> `Status`.
    async fn send(
        &self,
        method: reqwest::Method,
        service: Service,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(String, bytes::Bytes), ClientError> {
        // cloud-provider-openstack pkg/metrics: one observation per API call, labelled
        // `<resource>_<verb>`, errors counted apart.
        let label = request_label(&method, path);
        let started = std::time::Instant::now();
        let result = self.send_once(method, service, path, query, body).await;
        let metrics = super::metrics::global();
        metrics
            .request_duration_seconds
            .observe_with(&label, started.elapsed().as_secs_f64());
        metrics.requests_total.inc_with(&label);
        if result.is_err() {
            metrics.request_errors_total.inc_with(&label);
        }
        result
    }

    async fn send_once(
        &self,
        method: reqwest::Method,
        service: Service,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(String, bytes::Bytes), ClientError> {
        let method_name = method_name(&method);
        let mut reauthed = false;
        loop {
            let session = self.session.read().await.clone();
            let base = match service {
                Service::Compute => &session.compute,
                Service::Network => &session.network,
                Service::LoadBalancer => match &session.load_balancer {
                    Some(base) => base,
                    None => {
                        return Err(ClientError::NoEndpoint {
                            service: service.catalog_type(),
                            interface: self.opts.endpoint_type.clone(),
                            region: self.opts.region.clone(),
                        });
                    }
                },
            };
            let url = format!("{base}{path}");
            let mut request = self
                .http
                .request(method.clone(), &url)
                .query(query)
                .header("X-Auth-Token", &session.token)
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| ClientError::Transport {
                method: method_name,
                url: url.clone(),
                reason: error_chain(&e),
            })?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !reauthed {
                reauthed = true;
                self.reauthenticate(&session).await?;
                continue;
            }
            if status == StatusCode::NOT_FOUND {
                return Err(ClientError::NotFound {
                    method: method_name,
                    url,
                });
            }
            let reply = response.bytes().await.map_err(|e| ClientError::Transport {
                method: method_name,
                url: url.clone(),
                reason: error_chain(&e),
            })?;
            if !status.is_success() {
                return Err(ClientError::Status {
                    method: method_name,
                    url,
                    status: status.as_u16(),
                    body: snippet(&reply),
                });
            }
            return Ok((url, reply));
        }
    }

    /// Whether the catalog had an endpoint for `service`.
    pub async fn has_endpoint(&self, service: Service) -> bool {
        match service {
            Service::LoadBalancer => self.session.read().await.load_balancer.is_some(),
            Service::Compute | Service::Network => true,
        }
    }

    /// Replaces the session unless another caller already did since `stale` was read.
    async fn reauthenticate(&self, stale: &Arc<Session>) -> Result<(), ClientError> {
        let _guard = self.reauth.lock().await;
        if !Arc::ptr_eq(&*self.session.read().await, stale) {
            return Ok(());
        }
        tracing::info!("OpenStack token rejected (401); authenticating again");
        let fresh = authenticate(&self.http, &self.identity_v3, &self.opts).await?;
        *self.session.write().await = Arc::new(fresh);
        Ok(())
    }
}

/// `<resource>_<verb>` for a request path, in the spirit of cloud-provider-openstack's
/// metric labels (`server_get`, `loadbalancer_create`, ...): the last collection name in
/// the path, singular, then `get` (one item) / `list` / `create` / `update` / `delete`.
pub fn request_label(method: &reqwest::Method, path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is_collection = |s: &str| {
        s.len() > 1
            && s.ends_with('s')
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '-')
    };
    let pos = segments.iter().rposition(|s| is_collection(s));
    let (resource, item) = match pos {
        Some(i) => (
            segments[i].trim_end_matches('s').replace('-', "_"),
            segments.get(i + 1).is_some_and(|s| *s != "detail"),
        ),
        None => ("other".to_owned(), false),
    };
    let verb = match *method {
        reqwest::Method::GET if item => "get",
        reqwest::Method::GET => "list",
        reqwest::Method::POST => "create",
        reqwest::Method::PUT | reqwest::Method::PATCH => "update",
        reqwest::Method::DELETE => "delete",
        _ => "other",
    };
    format!("{resource}_{verb}")
}

fn method_name(method: &reqwest::Method) -> &'static str {
    match *method {
        reqwest::Method::POST => "POST",
        reqwest::Method::PUT => "PUT",
        reqwest::Method::DELETE => "DELETE",
        reqwest::Method::PATCH => "PATCH",
        _ => "GET",
    }
}

fn decode<T: DeserializeOwned>(url: &str, body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| ClientError::Decode {
        url: url.to_owned(),
        reason: e.to_string(),
    })
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

/// gophercloud `ChooseVersion`: an auth URL ending in `/v3` is used as is; otherwise
/// `GET <auth-url>` (200 or 300) lists versions and the v3 entry's self link wins.
async fn discover_identity_v3(
    http: &reqwest::Client,
    auth_url: &str,
) -> Result<String, ClientError> {
    let trimmed = auth_url.trim_end_matches('/');
    if trimmed.ends_with("/v3") {
        return Ok(trimmed.to_owned());
    }
    let auth = |reason: String| ClientError::Auth {
        url: auth_url.to_owned(),
        reason,
    };
    let response = http
        .get(auth_url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| auth(error_chain(&e)))?;
    let status = response.status();
    if status != StatusCode::OK && status != StatusCode::MULTIPLE_CHOICES {
        return Err(auth(format!("version discovery returned {status}")));
    }
    let body: Value = response
        .json()
        .await
        .map_err(|e| auth(format!("version discovery: {e}")))?;
    let versions = body
        .pointer("/versions/values")
        .or_else(|| body.get("versions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in versions {
        let id = v.get("id").and_then(Value::as_str).unwrap_or_default();
        if !id.starts_with("v3") {
            continue;
        }
        let href = v
            .get("links")
            .and_then(Value::as_array)
            .and_then(|links| {
                links
                    .iter()
                    .find(|l| l.get("rel").and_then(Value::as_str) == Some("self"))
            })
            .and_then(|l| l.get("href"))
            .and_then(Value::as_str);
        return Ok(match href {
            Some(h) => h.trim_end_matches('/').to_owned(),
            None => format!("{trimmed}/v3"),
        });
    }
    Err(auth(
        "no identity v3 endpoint in version discovery".to_owned(),
    ))
}

/// The Keystone v3 auth body: password (user by id, or name + domain) with project
/// scope, or an application credential (which carries its own scope).
pub(crate) fn auth_body(opts: &GlobalOpts) -> Value {
    let domain = |id: &str, name: &str| -> Option<Value> {
        if !id.is_empty() {
            Some(json!({ "id": id }))
        } else if !name.is_empty() {
            Some(json!({ "name": name }))
        } else {
            None
        }
    };
    if !opts.application_credential_id.is_empty() || !opts.application_credential_name.is_empty() {
        let mut cred = json!({ "secret": opts.application_credential_secret });
        if !opts.application_credential_id.is_empty() {
            cred["id"] = json!(opts.application_credential_id);
        } else {
            cred["name"] = json!(opts.application_credential_name);
            let mut user = if opts.user_id.is_empty() {
                json!({"name": opts.username})
            } else {
                json!({"id": opts.user_id})
            };
            if let Some(d) = domain(&opts.user_domain_id, &opts.user_domain_name)
                .or_else(|| domain(&opts.domain_id, &opts.domain_name))
            {
                user["domain"] = d;
            }
            cred["user"] = user;
        }
        return json!({ "auth": { "identity": {
            "methods": ["application_credential"], "application_credential": cred } } });
    }
    let mut user = if opts.user_id.is_empty() {
        json!({ "name": opts.username, "password": opts.password })
    } else {
        json!({ "id": opts.user_id, "password": opts.password })
    };
    if opts.user_id.is_empty()
        && let Some(d) = domain(&opts.user_domain_id, &opts.user_domain_name)
            .or_else(|| domain(&opts.domain_id, &opts.domain_name))
    {
        user["domain"] = d;
    }
    let mut body = json!({ "auth": { "identity": { "methods": ["password"], "password": { "user": user } } } });
    let project = if !opts.project_id.is_empty() {
        Some(json!({ "id": opts.project_id }))
    } else if !opts.project_name.is_empty() {
        let mut p = json!({ "name": opts.project_name });
        if let Some(d) = domain(&opts.project_domain_id, &opts.project_domain_name)
            .or_else(|| domain(&opts.domain_id, &opts.domain_name))
        {
            p["domain"] = d;
        }
        Some(p)
    } else {
        None
    };
    if let Some(p) = project {
        body["auth"]["scope"] = json!({ "project": p });
    }
    body
}

#[derive(Debug, Deserialize)]
struct TokenEnvelope {
    token: TokenBody,
}
#[derive(Debug, Deserialize)]
struct TokenBody {
    #[serde(default)]
    catalog: Vec<CatalogEntry>,
}
#[derive(Debug, Deserialize)]
struct CatalogEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}
#[derive(Debug, Deserialize)]
struct Endpoint {
    #[serde(default)]
    interface: String,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    region_id: Option<String>,
    url: String,
}

async fn authenticate(
    http: &reqwest::Client,
    identity_v3: &str,
    opts: &GlobalOpts,
) -> Result<Session, ClientError> {
    let url = format!("{identity_v3}/auth/tokens");
    let auth = |reason: String| ClientError::Auth {
        url: url.clone(),
        reason,
    };
    let response = http
        .post(&url)
        .header(reqwest::header::ACCEPT, "application/json")
        .json(&auth_body(opts))
        .send()
        .await
        .map_err(|e| auth(error_chain(&e)))?;
    let status = response.status();
    if status != StatusCode::CREATED && status != StatusCode::OK {
        let body = response.bytes().await.unwrap_or_default();
        return Err(auth(format!("status {status}: {}", snippet(&body))));
    }
    let token = response
        .headers()
        .get("X-Subject-Token")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| auth("response has no X-Subject-Token header".to_owned()))?;
    let body: TokenEnvelope = response
        .json()
        .await
        .map_err(|e| auth(format!("decoding token: {e}")))?;
    let find = |kind: &'static str| -> Result<String, ClientError> {
        body.token
            .catalog
            .iter()
            .filter(|e| e.kind == kind)
            .flat_map(|e| e.endpoints.iter())
            .find(|ep| {
                ep.interface == opts.endpoint_type
                    && (opts.region.is_empty()
                        || ep.region.as_deref() == Some(opts.region.as_str())
                        || ep.region_id.as_deref() == Some(opts.region.as_str()))
            })
            .map(|ep| ep.url.trim_end_matches('/').to_owned())
            .ok_or_else(|| ClientError::NoEndpoint {
                service: kind,
                interface: opts.endpoint_type.clone(),
                region: opts.region.clone(),
            })
    };
    let compute = find("compute")?;
    let network_root = find("network")?;
    // gophercloud's network client puts `v2.0/` under the catalog URL.
    let network = if network_root.ends_with("/v2.0") {
        network_root
    } else {
        format!("{network_root}/v2.0")
    };
    // Octavia is optional (no catalog entry -> no load balancers). gophercloud v2's
    // `NewLoadBalancerV2` puts `v2/` under the catalog URL.
    let load_balancer = find("load-balancer").ok().map(|root| {
        if root.ends_with("/v2") || root.ends_with("/v2.0") {
            root
        } else {
            format!("{root}/v2")
        }
    });
    Ok(Session {
        token,
        compute,
        network,
        load_balancer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_labels() {
        use reqwest::Method;
        assert_eq!(request_label(&Method::GET, "/servers/abc"), "server_get");
        assert_eq!(
            request_label(&Method::GET, "/servers/detail"),
            "server_list"
        );
        assert_eq!(
            request_label(&Method::POST, "/v2/lbaas/loadbalancers"),
            "loadbalancer_create"
        );
        assert_eq!(
            request_label(&Method::PUT, "/v2/lbaas/pools/p1/members"),
            "member_update"
        );
        assert_eq!(
            request_label(&Method::DELETE, "/v2.0/floatingips/f"),
            "floatingip_delete"
        );
    }
}
