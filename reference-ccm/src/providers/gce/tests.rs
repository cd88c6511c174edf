//! The GCE provider against a small in-process Compute v1 + metadata server (axum, plain
//! http): config resolution, tokens, instances, the external load balancer's life cycle,
//! operations (PENDING → DONE, failed), 429 retries, 404s and routes.
//!
//! The fake keeps resources by their `projects/`-relative path, answers every mutation
//! with a `compute#operation` that `.../operations/<name>/wait` completes (optionally
//! after some RUNNING answers, or with an error), refuses to delete a health check or
//! target pool another resource still references (400 `resourceInUseByAnotherResource`,
//! as GCE does), pages lists two items at a time, applies the simple `eq` filters the
//! provider sends and records every write, wait and filter so tests assert on them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{Value, json};

use super::Gce;
use super::client::{ComputeClient, MetadataClient, RetryPolicy};
use super::config::{ConfigError, ConfigFile};
use crate::cloud::{CloudError, Instances, LoadBalancer, Route, Routes};
use crate::providers::Provider;

const PROJECT: &str = "proj";
const ZONE: &str = "us-central1-b";
const TOKEN: &str = "tok-meta";

#[derive(Default)]
struct Fake {
    base: String,
    resources: BTreeMap<String, Value>,
    /// `METHOD path` of every mutation that was applied.
    writes: Vec<String>,
    /// Paths of operation waits.
    waits: Vec<String>,
    /// `(path, filter)` of list calls.
    filters: Vec<(String, String)>,
    /// Compute requests seen (any method).
    requests: usize,
    metadata_calls: Vec<String>,
    ops: BTreeMap<String, (Value, u32)>,
    op_counter: u64,
    address_counter: u64,
    /// Answer this many next Compute requests with 429.
    throttle: u32,
    /// The next operations stay RUNNING for this many waits.
    pending_polls: u32,
    /// The next mutation's operation ends DONE with this error (code, http status).
    fail_next_op: Option<(String, u16)>,
    /// Required bearer token on Compute calls (None: no header allowed at all).
    token: Option<String>,
    /// Authorization headers seen on Compute calls.
    auth_seen: Vec<String>,
    /// Refuse to delete an address a forwarding rule holds (the harness's mock does;
    /// upstream expects GCE to demote it to ephemeral).
    addresses_in_use: bool,
}

type Shared = Arc<Mutex<Fake>>;

fn lock(f: &Shared) -> std::sync::MutexGuard<'_, Fake> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

fn google_error(status: StatusCode, reason: &str, message: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"error": {"code": status.as_u16(), "message": message,
            "errors": [{"reason": reason, "message": message, "domain": "global"}]}}),
        ),
    )
        .into_response()
}

/// A regexp-ish `eq` match good enough for the patterns the provider sends.
fn pattern_matches(pattern: &str, value: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix(".*") {
        value.ends_with(suffix)
    } else if let Some(prefix) = pattern.strip_suffix(".*") {
        value.starts_with(prefix)
    } else {
        value == pattern
    }
}

fn filter_matches(filter: &str, item: &Value) -> bool {
    let preds: Vec<&str> = if filter.starts_with('(') {
        filter
            .split(") (")
            .map(|p| p.trim_matches(|c| c == '(' || c == ')'))
            .collect()
    } else {
        vec![filter]
    };
    preds.iter().all(|p| {
        let mut parts = p.splitn(3, ' ');
        let (Some(field), Some("eq"), Some(pattern)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let value = item.get(field).and_then(Value::as_str).unwrap_or_default();
        pattern_matches(pattern, value)
    })
}

impl Fake {
    fn url(&self, rel: &str) -> String {
        format!("{}/compute/v1/projects/{rel}", self.base)
    }

    fn put(&mut self, rel: &str, mut v: Value) {
        v["selfLink"] = json!(self.url(rel));
        v["name"] = json!(rel.rsplit('/').next().unwrap_or_default());
        self.resources.insert(rel.to_owned(), v);
    }

    /// A resource as GET answers it (routes get GCE's next-hop warning).
    fn read(&self, rel: &str) -> Option<Value> {
        let mut v = self.resources.get(rel)?.clone();
        if rel.contains("/global/routes/") {
            let hop = v["nextHopInstance"].as_str().unwrap_or_default().to_owned();
            let key = format!("{PROJECT}/{}", hop.trim_start_matches('/'));
            if !self.resources.contains_key(&key) {
                v["warnings"] = json!([{"code": "NEXT_HOP_INSTANCE_NOT_FOUND", "message": "gone"}]);
            }
        }
        Some(v)
    }

    fn operation(&mut self, target: &str, kind: &str) -> Value {
        self.op_counter += 1;
        let name = format!("op-{}", self.op_counter);
        let scope = if let Some(i) = target.find("/zones/") {
            let z = target[i + 7..].split('/').next().unwrap_or_default();
            format!("zones/{z}")
        } else if let Some(i) = target.find("/regions/") {
            let r = target[i + 9..].split('/').next().unwrap_or_default();
            format!("regions/{r}")
        } else {
            "global".to_owned()
        };
        let mut op = json!({"kind": "compute#operation", "name": name, "operationType": kind,
            "targetLink": self.url(target), "status": "PENDING",
            "selfLink": self.url(&format!("{PROJECT}/{scope}/operations/{name}"))});
        if let Some((code, status)) = self.fail_next_op.take() {
            op["error"] =
                json!({"errors": [{"code": code, "message": format!("{code} for {target}")}]});
            op["httpErrorStatusCode"] = json!(status);
        }
        let polls = self.pending_polls;
        self.ops.insert(name, (op.clone(), polls));
        op
    }

    fn in_use(&self, rel: &str) -> Option<String> {
        if self.addresses_in_use && rel.contains("/addresses/") {
            let ip = self.resources.get(rel).map(|a| a["address"].clone());
            return self
                .resources
                .iter()
                .find(|(k, v)| {
                    k.contains("/forwardingRules/") && Some(&v["IPAddress"]) == ip.as_ref()
                })
                .map(|(k, _)| k.clone());
        }
        let url = self.url(rel);
        self.resources.iter().find_map(|(k, v)| {
            let refs = v["healthChecks"].as_array().cloned().unwrap_or_default();
            let uses =
                refs.iter().any(|r| r.as_str() == Some(&url)) || v["target"].as_str() == Some(&url);
            uses.then(|| k.clone())
        })
    }
}

#[allow(clippy::too_many_lines)]
async fn handle(
    State(fake): State<Shared>,
    method: Method,
    uri: Uri,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut f = lock(&fake);
    let path = uri.path().to_owned();
    if let Some(rest) = path.strip_prefix("/computeMetadata/v1/") {
        if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
            return (StatusCode::FORBIDDEN, "missing Metadata-Flavor").into_response();
        }
        f.metadata_calls.push(rest.to_owned());
        return match rest {
            "project/project-id" => PROJECT.into_response(),
            "instance/zone" => format!("projects/123456/zones/{ZONE}").into_response(),
            "instance/network-interfaces/0/network" => {
                "projects/123456/networks/meta-net".into_response()
            }
            "instance/service-accounts/default/token" => axum::Json(
                json!({"access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"}),
            )
            .into_response(),
            _ => (StatusCode::NOT_FOUND, "not found").into_response(),
        };
    }
    if path == "/token" {
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
        if auth != Some(&format!("Bearer {TOKEN}")) || body.as_ref() != b"{\"x\":1}" {
            return google_error(StatusCode::UNAUTHORIZED, "unauthorized", "bad alt request");
        }
        return axum::Json(json!({"accessToken": "tok-alt", "expireTime": "2099-01-01T00:00:00Z"}))
            .into_response();
    }
    let Some(rel) = path.strip_prefix("/compute/v1/projects/") else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "no such API");
    };
    let rel = rel.to_owned();
    f.requests += 1;
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    f.auth_seen.push(auth.clone());
    let want = f
        .token
        .as_ref()
        .map(|t| format!("Bearer {t}"))
        .unwrap_or_default();
    if auth != want {
        return google_error(StatusCode::UNAUTHORIZED, "authError", "bad credentials");
    }
    if f.throttle > 0 {
        f.throttle -= 1;
        return google_error(
            StatusCode::TOO_MANY_REQUESTS,
            "rateLimitExceeded",
            "slow down",
        );
    }
    let json_body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match method {
        Method::GET => {
            if let Some(v) = f.read(&rel) {
                return axum::Json(v).into_response();
            }
            let collection = rel.rsplit('/').next().unwrap_or_default();
            if ![
                "instances",
                "zones",
                "routes",
                "addresses",
                "firewalls",
                "targetPools",
                "forwardingRules",
                "httpHealthChecks",
            ]
            .contains(&collection)
            {
                return google_error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!("The resource 'projects/{rel}' was not found"),
                );
            }
            let filter = query.get("filter").cloned().unwrap_or_default();
            f.filters.push((rel.clone(), filter.clone()));
            let prefix = format!("{rel}/");
            let items: Vec<Value> = f
                .resources
                .keys()
                .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
                .filter_map(|k| f.read(k))
                .filter(|v| filter.is_empty() || filter_matches(&filter, v))
                .collect();
            let skip: usize = query
                .get("pageToken")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let page: Vec<Value> = items.iter().skip(skip).take(2).cloned().collect();
            let mut answer = json!({"kind": "compute#list", "items": page});
            if skip + 2 < items.len() {
                answer["nextPageToken"] = json!((skip + 2).to_string());
            }
            axum::Json(answer).into_response()
        }
        Method::POST if rel.ends_with("/wait") => {
            f.waits.push(rel.clone());
            let name = rel
                .trim_end_matches("/wait")
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let Some((mut op, polls)) = f.ops.get(&name).cloned() else {
                return google_error(StatusCode::NOT_FOUND, "notFound", "no such operation");
            };
            if polls > 0 {
                op["status"] = json!("RUNNING");
                f.ops.insert(name, (op.clone(), polls - 1));
            } else {
                op["status"] = json!("DONE");
            }
            axum::Json(op).into_response()
        }
        Method::POST if rel.ends_with("/addInstance") || rel.ends_with("/removeInstance") => {
            let (pool_rel, verb) = rel.rsplit_once('/').unwrap_or_default();
            let (pool_rel, verb) = (pool_rel.to_owned(), verb.to_owned());
            let failing = f.fail_next_op.is_some();
            let op = f.operation(&pool_rel, verb.as_str());
            if !failing {
                let Some(mut pool) = f.resources.get(&pool_rel).cloned() else {
                    return google_error(StatusCode::NOT_FOUND, "notFound", "no pool");
                };
                let mut members: Vec<String> = pool["instances"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                for i in json_body["instances"].as_array().into_iter().flatten() {
                    let url = i["instance"].as_str().unwrap_or_default().to_owned();
                    if verb == "addInstance" {
                        if !members.contains(&url) {
                            members.push(url);
                        }
                    } else {
                        members.retain(|m| *m != url);
                    }
                }
                pool["instances"] = json!(members);
                f.resources.insert(pool_rel, pool);
                f.writes.push(format!("POST {rel}"));
            }
            axum::Json(op).into_response()
        }
        Method::POST => {
            let name = json_body["name"].as_str().unwrap_or_default().to_owned();
            let key = format!("{rel}/{name}");
            if f.resources.contains_key(&key) {
                return google_error(
                    StatusCode::CONFLICT,
                    "alreadyExists",
                    &format!("The resource 'projects/{key}' already exists"),
                );
            }
            let failing = f.fail_next_op.is_some();
            let op = f.operation(&key, "insert");
            if !failing {
                let mut v = json_body;
                if rel.ends_with("/addresses") && v.get("address").is_none() {
                    f.address_counter += 1;
                    v["address"] = json!(format!("127.70.0.{}", 10 + f.address_counter));
                }
                f.put(&key, v);
                f.writes.push(format!("POST {key}"));
            }
            axum::Json(op).into_response()
        }
        Method::PATCH | Method::PUT => {
            let Some(mut existing) = f.resources.get(&rel).cloned() else {
                return google_error(StatusCode::NOT_FOUND, "notFound", "not found");
            };
            if method == Method::PUT {
                existing = json_body;
            } else if let (Some(e), Some(b)) = (existing.as_object_mut(), json_body.as_object()) {
                for (k, v) in b {
                    e.insert(k.clone(), v.clone());
                }
            }
            let op = f.operation(&rel, "update");
            f.put(&rel, existing);
            f.writes.push(format!("{method} {rel}"));
            axum::Json(op).into_response()
        }
        Method::DELETE => {
            if !f.resources.contains_key(&rel) {
                return google_error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!("The resource 'projects/{rel}' was not found"),
                );
            }
            if let Some(user) = f.in_use(&rel) {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "resourceInUseByAnotherResource",
                    &format!(
                        "The resource 'projects/{rel}' is already being used by 'projects/{user}'"
                    ),
                );
            }
            let op = f.operation(&rel, "delete");
            f.resources.remove(&rel);
            f.writes.push(format!("DELETE {rel}"));
            axum::Json(op).into_response()
        }
        _ => google_error(StatusCode::METHOD_NOT_ALLOWED, "badRequest", "no"),
    }
}

fn seed(f: &mut Fake) {
    for (zone, region) in [
        ("us-central1-a", "us-central1"),
        ("us-central1-b", "us-central1"),
        ("europe-west1-b", "europe-west1"),
    ] {
        let region_url = f.url(&format!("{PROJECT}/regions/{region}"));
        f.put(
            &format!("{PROJECT}/zones/{zone}"),
            json!({"region": region_url}),
        );
    }
    let machine = f.url(&format!(
        "{PROJECT}/zones/{ZONE}/machineTypes/e2-standard-4"
    ));
    f.put(
        &format!("{PROJECT}/zones/{ZONE}/instances/node-a"),
        json!({"machineType": machine, "zone": f.url(&format!("{PROJECT}/zones/{ZONE}")),
            "tags": {"items": ["node", "node-a", "other"]},
            "networkInterfaces": [{"networkIP": "10.0.0.2", "accessConfigs": [{"natIP": "127.80.0.2"}]}]}),
    );
    f.put(
        &format!("{PROJECT}/zones/{ZONE}/instances/node-b"),
        json!({"machineType": machine, "tags": {"items": ["node"]},
            "networkInterfaces": [{"networkIP": "10.0.0.3", "ipv6Address": "fd20::3"}]}),
    );
    f.put(
        &format!("{PROJECT}/zones/us-central1-a/instances/node-c"),
        json!({"machineType": machine, "tags": {"items": ["node"]},
            "networkInterfaces": [{"networkIP": "10.0.1.4"}]}),
    );
}

async fn serve() -> (Shared, String) {
    let fake: Shared = Arc::default();
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    let host = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    {
        let mut f = lock(&fake);
        f.base = format!("http://{host}");
        f.token = Some(TOKEN.to_owned());
        seed(&mut f);
    }
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(fake.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (fake, host)
}

fn conf(host: &str, extra: &str) -> String {
    format!(
        "[global]\nproject-id = {PROJECT}\nlocal-zone = {ZONE}\nnetwork-name = net-1\n\
         api-endpoint = http://{host}/compute/v1/\nnode-instance-prefix = node\n{extra}"
    )
}

async fn provider(host: &str, extra: &str) -> Gce {
    let (file, _) = match ConfigFile::parse(&conf(host, extra)) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let metadata = match MetadataClient::new(host) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let config = match file.resolve(&metadata).await {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let mut client = match ComputeClient::new(&config.api_endpoint, &config.token, metadata) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    client.set_retry(RetryPolicy::fast());
    match Gce::with_client(config, client).await {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    }
}

async fn start() -> (Shared, Gce) {
    let (fake, host) = serve().await;
    let gce = provider(&host, "").await;
    (fake, gce)
}

fn writes(fake: &Shared) -> Vec<String> {
    std::mem::take(&mut lock(fake).writes)
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}))
        .unwrap_or_default()
}

fn service(uid: &str, spec: Value) -> Service {
    let mut s = json!({"type": "LoadBalancer", "ports": [{"port": 8080, "nodePort": 30080, "protocol": "TCP"}]});
    if let (Some(o), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            o.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{}", &uid[..4]), "namespace": "default", "uid": uid},
        "spec": s
    }))
    .unwrap_or_default()
}

const UID1: &str = "11111111-2222-3333-4444-555555555555";
const UID2: &str = "22222222-2222-3333-4444-555555555555";
const LB1: &str = "a1111111122223333444455555555555";
const LB2: &str = "a2222222222223333444455555555555";

#[tokio::test]
async fn config_file_wins_and_metadata_fills_the_gaps() {
    let (fake, host) = serve().await;
    let (file, warnings) = ConfigFile::parse(&conf(
        &host,
        "unknown-key = 1\nnode-tags = t1\nnode-tags = t2\n",
    ))
    .expect("parse");
    assert_eq!(
        warnings.len(),
        1,
        "unknown key ignored with a warning: {warnings:?}"
    );
    assert_eq!(file.node_tags, vec!["t1", "t2"]);
    let metadata = MetadataClient::new(&host).expect("metadata");
    let c = file.resolve(&metadata).await.expect("resolve");
    assert_eq!(c.project_id, PROJECT);
    assert_eq!(c.region, "us-central1");
    assert_eq!(
        c.network_url,
        format!("http://{host}/compute/v1/projects/{PROJECT}/global/networks/net-1")
    );
    assert!(
        lock(&fake).metadata_calls.is_empty(),
        "a complete gce.conf needs no metadata"
    );

    // Without project-id and network-name: from the metadata server.
    let (bare, _) = ConfigFile::parse(&format!(
        "[global]\napi-endpoint = http://{host}/compute/v1/\ntoken-url = nil\n"
    ))
    .expect("parse");
    let c = bare
        .resolve(&metadata)
        .await
        .expect("resolve from metadata");
    assert_eq!((c.project_id.as_str(), c.zone.as_str()), (PROJECT, ZONE));
    assert_eq!(c.region, "us-central1");
    assert!(
        c.network_url.ends_with("/global/networks/meta-net"),
        "{}",
        c.network_url
    );
    assert_eq!(c.token, super::config::TokenConfig::None);
    assert_eq!(
        lock(&fake).metadata_calls,
        vec![
            "instance/zone",
            "project/project-id",
            "instance/network-interfaces/0/network"
        ]
    );

    // Without project-id and no metadata server: a clear error.
    let nowhere = MetadataClient::new("127.0.0.1:1").expect("metadata");
    let err = bare.resolve(&nowhere).await.expect_err("no metadata");
    assert!(
        matches!(
            err,
            ConfigError::Metadata {
                what: "instance/zone",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn tokens_come_from_metadata_the_alt_source_or_default_credentials() {
    let (fake, host) = serve().await;
    let gce = provider(&host, "").await;
    assert!(
        gce.instance_exists(&node("node-a", None))
            .await
            .expect("exists")
    );
    assert!(
        gce.instance_exists(&node("node-a", None))
            .await
            .expect("exists")
    );
    assert_eq!(
        lock(&fake)
            .metadata_calls
            .iter()
            .filter(|c| c.ends_with("/token"))
            .count(),
        1,
        "the token is cached"
    );
    lock(&fake).token = Some("tok-alt".to_owned());
    let alt = provider(
        &host,
        &format!("token-url = http://{host}/token\ntoken-body = \"{{\\\"x\\\":1}}\"\n"),
    )
    .await;
    assert!(
        alt.instance_exists(&node("node-a", None))
            .await
            .expect("alt token")
    );
    // token-url = nil: default credentials, i.e. the metadata server's token...
    lock(&fake).token = Some(TOKEN.to_owned());
    let default = provider(&host, "token-url = nil\n").await;
    assert!(
        default
            .instance_exists(&node("node-a", None))
            .await
            .expect("default creds")
    );
    assert_eq!(
        lock(&fake).auth_seen.last().cloned(),
        Some(format!("Bearer {TOKEN}"))
    );
    // ...and no Authorization header at all when there is no metadata server.
    lock(&fake).token = None;
    let (file, _) = ConfigFile::parse(&conf(&host, "token-url = nil\n")).expect("parse");
    let nowhere = MetadataClient::new("127.0.0.1:1").expect("metadata");
    let config = file.resolve(&nowhere).await.expect("complete config");
    let client = ComputeClient::new(&config.api_endpoint, &config.token, nowhere).expect("client");
    let anonymous = Gce::with_client(config, client).await.expect("gce");
    assert!(
        anonymous
            .instance_exists(&node("node-a", None))
            .await
            .expect("no token")
    );
    assert_eq!(lock(&fake).auth_seen.last().map(String::as_str), Some(""));
}

#[tokio::test]
async fn instances_follow_upstream() {
    let (fake, gce) = start().await;
    let meta = gce
        .instance_metadata(&node("node-a", None))
        .await
        .expect("metadata")
        .expect("some");
    assert_eq!(meta.provider_id, format!("gce://{PROJECT}/{ZONE}/node-a"));
    assert_eq!(meta.instance_type, "e2-standard-4");
    assert_eq!(
        (meta.zone.as_str(), meta.region.as_str()),
        (ZONE, "us-central1")
    );
    let addrs: Vec<(String, String)> = meta
        .node_addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        addrs,
        vec![
            ("InternalIP".to_owned(), "10.0.0.2".to_owned()),
            ("ExternalIP".to_owned(), "127.80.0.2".to_owned()),
        ]
    );
    let b = gce
        .instance_metadata(&node(
            "whatever",
            Some(&format!("gce://{PROJECT}/{ZONE}/node-b")),
        ))
        .await
        .expect("by providerID")
        .expect("some");
    assert_eq!(b.provider_id, format!("gce://{PROJECT}/{ZONE}/node-b"));
    assert_eq!(b.node_addresses.len(), 2);
    assert_eq!(b.node_addresses[1].address, "fd20::3");

    assert!(
        gce.instance_exists(&node("node-a", None))
            .await
            .expect("exists")
    );
    assert!(
        !gce.instance_exists(&node("gone", None))
            .await
            .expect("missing")
    );
    assert!(
        !gce.instance_exists(&node("x", Some(&format!("gce://{PROJECT}/{ZONE}/gone"))))
            .await
            .expect("missing by id")
    );
    assert!(
        gce.instance_exists(&node("x", Some("gce://bad")))
            .await
            .is_err(),
        "a malformed providerID is an error"
    );
    // node-c lives in another zone of the region: only multizone finds it.
    assert!(
        !gce.instance_exists(&node("node-c", None))
            .await
            .expect("single zone")
    );
    assert!(matches!(
        gce.instance_metadata(&node("gone", None)).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        gce.instance_shutdown(&node("node-a", None)).await,
        Err(CloudError::NotImplemented)
    ));
    assert!(writes(&fake).is_empty(), "instances only read");

    let host = lock(&fake).base.trim_start_matches("http://").to_owned();
    let multi = provider(&host, "multizone = true\n").await;
    assert_eq!(multi.managed_zones(), ["us-central1-a", "us-central1-b"]);
    assert!(lock(&fake).filters.contains(&(
        format!("{PROJECT}/zones"),
        "region eq .*/regions/us-central1".to_owned()
    )));
    let c = multi
        .instance_metadata(&node("node-c", None))
        .await
        .expect("multizone")
        .expect("some");
    assert_eq!(
        c.provider_id,
        format!("gce://{PROJECT}/us-central1-a/node-c")
    );
}

#[tokio::test]
async fn compute_errors_retries_and_operations() {
    let (fake, gce) = start().await;
    let client = gce.client();
    // 404 → not found.
    let missing = format!("{PROJECT}/zones/{ZONE}/instances/nope");
    assert!(client.get(&missing).await.expect_err("404").is_not_found());
    assert!(client.get_opt(&missing).await.expect("none").is_none());
    // 429 twice, then the answer: retried with backoff.
    let before = lock(&fake).requests;
    lock(&fake).throttle = 2;
    assert!(
        client
            .get_opt(&format!("{PROJECT}/zones/{ZONE}/instances/node-a"))
            .await
            .expect("after 429s")
            .is_some()
    );
    assert_eq!(lock(&fake).requests - before, 3);
    // Throttled beyond the attempts: RateLimited.
    lock(&fake).throttle = 10;
    let err = client.get(&missing).await.expect_err("throttled");
    assert!(
        matches!(
            err,
            super::client::ComputeError::RateLimited { attempts: 4, .. }
        ),
        "{err}"
    );
    lock(&fake).throttle = 0;

    // An operation that stays RUNNING for two waits, then DONE.
    lock(&fake).pending_polls = 2;
    let route = Route {
        target_node: "node-a".into(),
        destination_cidr: "10.244.1.0/24".into(),
        ..Default::default()
    };
    gce.create_route("kubernetes", "uid-a", &route)
        .await
        .expect("create after waits");
    let waits = std::mem::take(&mut lock(&fake).waits);
    assert_eq!(waits.len(), 3, "{waits:?}");
    assert!(
        waits
            .iter()
            .all(|w| w.starts_with(&format!("{PROJECT}/global/operations/op-")))
    );
    lock(&fake).pending_polls = 0;

    // An operation that ends DONE with an error fails the call.
    lock(&fake).fail_next_op = Some(("QUOTA_EXCEEDED".to_owned(), 403));
    let err = gce
        .create_route("kubernetes", "uid-b", &route)
        .await
        .expect_err("op error");
    assert!(err.to_string().contains("QUOTA_EXCEEDED"), "{err}");
    assert_eq!(
        writes(&fake),
        vec![format!("POST {PROJECT}/global/routes/kubernetes-uid-a")]
    );
}

#[tokio::test]
async fn routes_create_list_delete() {
    let (fake, gce) = start().await;
    assert!(
        gce.list_routes("kubernetes")
            .await
            .expect("list")
            .is_empty()
    );
    for (n, cidr) in [("node-a", "10.244.1.0/24"), ("node-b", "10.244.2.0/24")] {
        let route = Route {
            target_node: n.into(),
            destination_cidr: cidr.into(),
            ..Default::default()
        };
        gce.create_route("kubernetes", &format!("uid-{n}"), &route)
            .await
            .expect("create");
    }
    // Already there: 409 is success, no second write.
    let again = Route {
        target_node: "node-a".into(),
        destination_cidr: "10.244.1.0/24".into(),
        ..Default::default()
    };
    gce.create_route("kubernetes", "uid-node-a", &again)
        .await
        .expect("again");
    assert_eq!(writes(&fake).len(), 2);
    let r = lock(&fake)
        .resources
        .get(&format!("{PROJECT}/global/routes/kubernetes-uid-node-a"))
        .cloned()
        .expect("route");
    assert_eq!(
        r["nextHopInstance"],
        format!("zones/{ZONE}/instances/node-a")
    );
    assert_eq!(r["description"], "k8s-node-route");
    assert_eq!(r["destRange"], "10.244.1.0/24");
    assert_eq!(r["network"], json!(gce.config().network_url));
    // Another cluster's route and a foreign route are not listed.
    {
        let mut f = lock(&fake);
        let net = gce.config().network_url.clone();
        f.put(&format!("{PROJECT}/global/routes/other-x"), json!({"network": net, "description": "k8s-node-route", "destRange": "10.9.0.0/24", "nextHopInstance": "zones/z/instances/n"}));
        f.put(
            &format!("{PROJECT}/global/routes/kubernetes-manual"),
            json!({"network": net, "description": "by hand", "destRange": "10.8.0.0/24"}),
        );
    }
    let listed = gce.list_routes("kubernetes").await.expect("list");
    let mut names: Vec<(String, String, String)> = listed
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                r.target_node.clone(),
                r.destination_cidr.clone(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            (
                "kubernetes-uid-node-a".into(),
                "node-a".into(),
                "10.244.1.0/24".into()
            ),
            (
                "kubernetes-uid-node-b".into(),
                "node-b".into(),
                "10.244.2.0/24".into()
            ),
        ]
    );
    assert!(listed.iter().all(|r| !r.blackhole));
    let filter = lock(&fake).filters.last().cloned().expect("filter");
    assert_eq!(
        filter.1,
        format!(
            "(name eq kubernetes-.*) (network eq {}) (description eq k8s-node-route)",
            gce.config().network_url
        )
    );
    // node-b's instance goes away: its route is a blackhole.
    lock(&fake)
        .resources
        .remove(&format!("{PROJECT}/zones/{ZONE}/instances/node-b"));
    let listed = gce.list_routes("kubernetes").await.expect("list");
    let hole: Vec<&Route> = listed.iter().filter(|r| r.blackhole).collect();
    assert_eq!(hole.len(), 1);
    assert_eq!(hole[0].target_node, "node-b");
    gce.delete_route("kubernetes", hole[0])
        .await
        .expect("delete");
    assert_eq!(
        writes(&fake),
        vec![format!(
            "DELETE {PROJECT}/global/routes/kubernetes-uid-node-b"
        )]
    );
    assert_eq!(gce.list_routes("kubernetes").await.expect("list").len(), 1);
}

#[tokio::test]
async fn load_balancer_life_cycle() {
    let (fake, gce) = start().await;
    let seeded: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    let svc = service(
        UID1,
        json!({"sessionAffinity": "ClientIP", "loadBalancerSourceRanges": ["10.1.2.3/8"]}),
    );
    let nodes = vec![node("node-a", None), node("node-b", None)];
    let status = gce
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure");
    let ip = status
        .ingress
        .as_ref()
        .and_then(|i| i.first())
        .and_then(|i| i.ip.clone())
        .unwrap_or_default();
    assert_eq!(ip, "127.70.0.11");
    let p = PROJECT;
    let r = "regions/us-central1";
    assert_eq!(
        writes(&fake),
        vec![
            format!("POST {p}/{r}/addresses/{LB1}"),
            format!("POST {p}/global/firewalls/k8s-fw-{LB1}"),
            format!("POST {p}/global/firewalls/k8s-kubernetes-node-http-hc"),
            format!("POST {p}/global/httpHealthChecks/k8s-kubernetes-node"),
            format!("POST {p}/{r}/targetPools/{LB1}"),
            format!("POST {p}/{r}/forwardingRules/{LB1}"),
            format!("DELETE {p}/{r}/addresses/{LB1}"),
        ],
        "cluster id = --cluster-name without a kube client"
    );
    let get = |k: &str| lock(&fake).resources.get(k).cloned().unwrap_or(Value::Null);
    let base = lock(&fake).base.clone();
    let fr = get(&format!("{p}/{r}/forwardingRules/{LB1}"));
    assert_eq!(fr["IPAddress"], ip);
    assert_eq!(fr["IPProtocol"], "TCP");
    assert_eq!(fr["portRange"], "8080-8080");
    assert_eq!(
        fr["target"],
        format!("{base}/compute/v1/projects/{p}/{r}/targetPools/{LB1}")
    );
    assert_eq!(
        fr["description"],
        r#"{"kubernetes.io/service-name":"default/web-1111"}"#
    );
    let tp = get(&format!("{p}/{r}/targetPools/{LB1}"));
    assert_eq!(tp["sessionAffinity"], "CLIENT_IP");
    assert_eq!(
        tp["instances"],
        json!([
            format!("{base}/compute/v1/projects/{p}/zones/{ZONE}/instances/node-a"),
            format!("{base}/compute/v1/projects/{p}/zones/{ZONE}/instances/node-b"),
        ])
    );
    assert_eq!(
        tp["healthChecks"],
        json!([format!(
            "{base}/compute/v1/projects/{p}/global/httpHealthChecks/k8s-kubernetes-node"
        )])
    );
    let hc = get(&format!("{p}/global/httpHealthChecks/k8s-kubernetes-node"));
    assert_eq!(
        (hc["port"].as_i64(), hc["requestPath"].as_str()),
        (Some(10256), Some("/healthz"))
    );
    assert_eq!(
        (
            hc["checkIntervalSec"].as_i64(),
            hc["timeoutSec"].as_i64(),
            hc["healthyThreshold"].as_i64(),
            hc["unhealthyThreshold"].as_i64()
        ),
        (Some(8), Some(1), Some(1), Some(3))
    );
    let fw = get(&format!("{p}/global/firewalls/k8s-fw-{LB1}"));
    assert_eq!(fw["sourceRanges"], json!(["10.0.0.0/8"]));
    assert_eq!(fw["destinationRanges"], json!([ip]));
    assert_eq!(
        fw["allowed"],
        json!([{"IPProtocol": "tcp", "ports": ["8080"]}])
    );
    assert_eq!(
        fw["targetTags"],
        json!(["node", "node-a"]),
        "longest prefix tag per instance"
    );
    assert_eq!(fw["network"], json!(gce.config().network_url));
    let hcfw = get(&format!("{p}/global/firewalls/k8s-kubernetes-node-http-hc"));
    assert_eq!(
        hcfw["sourceRanges"],
        json!([
            "130.211.0.0/22",
            "35.191.0.0/16",
            "209.85.152.0/22",
            "209.85.204.0/22"
        ])
    );
    assert_eq!(
        hcfw["allowed"],
        json!([{"IPProtocol": "tcp", "ports": ["10256"]}])
    );
    assert_eq!(
        hcfw["description"],
        r#"{"kubernetes.io/cluster-id":"kubernetes"}"#
    );

    // Unchanged Service: no write at all, same status.
    let again = gce
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("again");
    assert_eq!(again, status);
    assert_eq!(writes(&fake), Vec::<String>::new());
    assert_eq!(
        gce.get_load_balancer("kubernetes", &svc)
            .await
            .expect("get"),
        Some(status.clone())
    );

    // A second Service shares the node health check.
    let svc2 = service(UID2, json!({}));
    gce.ensure_load_balancer("kubernetes", &svc2, &nodes)
        .await
        .expect("second");
    let w = writes(&fake);
    assert!(
        !w.iter().any(|w| w.contains("httpHealthChecks")),
        "shared check reused: {w:?}"
    );
    assert_eq!(
        get(&format!("{p}/{r}/targetPools/{LB2}"))["sessionAffinity"],
        "NONE"
    );
    assert_eq!(
        get(&format!("{p}/global/firewalls/k8s-fw-{LB2}"))["sourceRanges"],
        json!(["0.0.0.0/0"])
    );

    // Node churn: exactly one pool write per Service.
    gce.update_load_balancer("kubernetes", &svc, &nodes[..1])
        .await
        .expect("remove");
    gce.update_load_balancer("kubernetes", &svc2, &nodes[..1])
        .await
        .expect("remove");
    assert_eq!(
        writes(&fake),
        vec![
            format!("POST {p}/{r}/targetPools/{LB1}/removeInstance"),
            format!("POST {p}/{r}/targetPools/{LB2}/removeInstance"),
        ]
    );
    gce.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("add");
    assert_eq!(
        writes(&fake),
        vec![format!("POST {p}/{r}/targetPools/{LB1}/addInstance")]
    );
    gce.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("same");
    assert!(writes(&fake).is_empty());

    // Delete the first: the shared check and its firewall stay for the second.
    gce.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete 1");
    let w = writes(&fake);
    assert_eq!(
        w,
        vec![
            format!("DELETE {p}/global/firewalls/k8s-fw-{LB1}"),
            format!("DELETE {p}/{r}/forwardingRules/{LB1}"),
            format!("DELETE {p}/{r}/targetPools/{LB1}"),
        ]
    );
    assert!(get(&format!("{p}/global/httpHealthChecks/k8s-kubernetes-node")).is_object());
    assert!(get(&format!("{p}/global/firewalls/k8s-kubernetes-node-http-hc")).is_object());
    assert_eq!(
        gce.get_load_balancer("kubernetes", &svc)
            .await
            .expect("gone"),
        None
    );

    gce.ensure_load_balancer_deleted("kubernetes", &svc2)
        .await
        .expect("delete 2");
    let left: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    assert_eq!(left, seeded, "nothing leaked");
    gce.ensure_load_balancer_deleted("kubernetes", &svc2)
        .await
        .expect("delete twice");
    assert!(writes(&fake).iter().all(|w| !w.contains("POST")));
}

#[tokio::test]
async fn local_traffic_policy_gets_its_own_health_check() {
    let (fake, gce) = start().await;
    let svc = service(
        UID1,
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000,
        "ports": [{"port": 8080, "protocol": "UDP"}, {"port": 8081, "protocol": "UDP"}, {"port": 9000, "protocol": "UDP"}]}),
    );
    gce.ensure_load_balancer("kubernetes", &svc, &[node("node-a", None)])
        .await
        .expect("ensure");
    let p = PROJECT;
    let get = |k: &str| lock(&fake).resources.get(k).cloned().unwrap_or(Value::Null);
    let hc = get(&format!("{p}/global/httpHealthChecks/{LB1}"));
    assert_eq!(
        (hc["port"].as_i64(), hc["requestPath"].as_str()),
        (Some(32000), Some("/healthz"))
    );
    assert!(get(&format!("{p}/global/httpHealthChecks/k8s-kubernetes-node")).is_null());
    let hcfw = get(&format!("{p}/global/firewalls/k8s-{LB1}-http-hc"));
    assert_eq!(
        hcfw["allowed"],
        json!([{"IPProtocol": "tcp", "ports": ["32000"]}])
    );
    let fr = get(&format!("{p}/regions/us-central1/forwardingRules/{LB1}"));
    assert_eq!(
        (fr["IPProtocol"].as_str(), fr["portRange"].as_str()),
        (Some("UDP"), Some("8080-9000"))
    );
    let fw = get(&format!("{p}/global/firewalls/k8s-fw-{LB1}"));
    assert_eq!(
        fw["allowed"],
        json!([{"IPProtocol": "udp", "ports": ["8080-8081", "9000"]}])
    );
    writes(&fake);
    gce.ensure_load_balancer("kubernetes", &svc, &[node("node-a", None)])
        .await
        .expect("again");
    assert!(writes(&fake).is_empty());
    gce.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete");
    let w = writes(&fake);
    assert!(
        w.contains(&format!("DELETE {p}/global/httpHealthChecks/{LB1}")),
        "{w:?}"
    );
    assert!(
        w.contains(&format!("DELETE {p}/global/firewalls/k8s-{LB1}-http-hc")),
        "{w:?}"
    );
}

#[tokio::test]
async fn unsupported_services_get_clear_errors() {
    let (fake, gce) = start().await;
    let nodes = [node("node-a", None)];
    let mixed = service(
        UID1,
        json!({"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
    );
    let err = gce
        .ensure_load_balancer("kubernetes", &mixed, &nodes)
        .await
        .expect_err("mixed");
    assert!(
        err.to_string().contains("mixed protocol is not supported"),
        "{err}"
    );
    let mut internal = service(UID1, json!({}));
    internal.metadata.annotations = Some(
        [(
            "networking.gke.io/load-balancer-type".to_owned(),
            "Internal".to_owned(),
        )]
        .into(),
    );
    let err = gce
        .ensure_load_balancer("kubernetes", &internal, &nodes)
        .await
        .expect_err("internal");
    assert!(err.to_string().contains("not implemented"), "{err}");
    let err = gce
        .ensure_load_balancer("kubernetes", &service(UID1, json!({})), &[])
        .await
        .expect_err("no hosts");
    assert!(err.to_string().contains("no hosts"), "{err}");
    assert!(writes(&fake).is_empty());
}

/// `externalTrafficPolicy` flips recreate the pool and forwarding rule with the other
/// health check (upstream's `tpNeedsRecreation`), keeping the IP by re-reserving the
/// rule's address first.
#[tokio::test]
async fn traffic_policy_change_swaps_the_health_check_and_keeps_the_ip() {
    let (fake, gce) = start().await;
    let nodes = [node("node-a", None)];
    let cluster = service(UID1, json!({}));
    let first = gce
        .ensure_load_balancer("kubernetes", &cluster, &nodes)
        .await
        .expect("cluster");
    writes(&fake);
    let local = service(
        UID1,
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    );
    let second = gce
        .ensure_load_balancer("kubernetes", &local, &nodes)
        .await
        .expect("local");
    assert_eq!(first, second, "same IP");
    let (p, r) = (PROJECT, "regions/us-central1");
    assert_eq!(
        writes(&fake),
        vec![
            format!("POST {p}/{r}/addresses/{LB1}"),
            format!("DELETE {p}/{r}/forwardingRules/{LB1}"),
            format!("DELETE {p}/{r}/targetPools/{LB1}"),
            format!("DELETE {p}/global/httpHealthChecks/k8s-kubernetes-node"),
            format!("DELETE {p}/global/firewalls/k8s-kubernetes-node-http-hc"),
            format!("POST {p}/global/firewalls/k8s-{LB1}-http-hc"),
            format!("POST {p}/global/httpHealthChecks/{LB1}"),
            format!("POST {p}/{r}/targetPools/{LB1}"),
            format!("POST {p}/{r}/forwardingRules/{LB1}"),
            format!("DELETE {p}/{r}/addresses/{LB1}"),
        ]
    );
    let back = gce
        .ensure_load_balancer("kubernetes", &cluster, &nodes)
        .await
        .expect("cluster again");
    assert_eq!(back, first);
    let w = writes(&fake);
    assert!(
        w.contains(&format!("DELETE {p}/global/httpHealthChecks/{LB1}")),
        "{w:?}"
    );
    assert!(
        w.contains(&format!(
            "POST {p}/global/httpHealthChecks/k8s-kubernetes-node"
        )),
        "{w:?}"
    );
}

/// The cluster id lives in ConfigMap `kube-system/ingress-uid`: created with a random
/// `uid`/`provider-uid` when missing, read (provider-uid first) when present, read once.
#[tokio::test]
async fn cluster_id_comes_from_the_ingress_uid_config_map() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube_client = |server: &MockServer| -> kube::Client {
        let url: http::Uri = match server.uri().parse() {
            Ok(u) => u,
            Err(e) => panic!("{e}"),
        };
        match kube::Client::try_from(kube::Config::new(url)) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    };
    let cm_path = "/api/v1/namespaces/kube-system/configmaps/ingress-uid";

    // Missing: created, then kept.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(cm_path))
        .respond_with(
            ResponseTemplate::new(404).set_body_json(json!({"kind": "Status",
            "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
            "message": "configmaps \"ingress-uid\" not found"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/namespaces/kube-system/configmaps"))
        .respond_with(
            ResponseTemplate::new(201).set_body_json(json!({"kind": "ConfigMap",
            "apiVersion": "v1", "metadata": {"name": "ingress-uid", "namespace": "kube-system"}})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (_fake, gce) = start().await;
    gce.initialize(kube_client(&server));
    let id = gce.cluster_id("kubernetes").await.expect("created");
    assert_eq!(id.len(), 16);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    assert_eq!(gce.cluster_id("kubernetes").await.expect("cached"), id);
    let requests = server.received_requests().await.unwrap_or_default();
    let created: Value = requests
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .and_then(|r| serde_json::from_slice(&r.body).ok())
        .unwrap_or_default();
    assert_eq!(created["data"], json!({"uid": id, "provider-uid": id}));
    server.verify().await;

    // Present: provider-uid wins.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(cm_path))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"kind": "ConfigMap",
            "apiVersion": "v1", "metadata": {"name": "ingress-uid", "namespace": "kube-system"},
            "data": {"uid": "aaaa", "provider-uid": "bbbb"}})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (fake, gce) = start().await;
    gce.initialize(kube_client(&server));
    assert_eq!(gce.cluster_id("kubernetes").await.expect("read"), "bbbb");
    let status = gce
        .ensure_load_balancer(
            "kubernetes",
            &service(UID1, json!({})),
            &[node("node-a", None)],
        )
        .await;
    assert!(status.is_ok(), "{status:?}");
    assert!(
        lock(&fake)
            .resources
            .contains_key(&format!("{PROJECT}/global/httpHealthChecks/k8s-bbbb-node"))
    );
    server.verify().await;
}

/// A Compute that refuses to release an address a forwarding rule holds: the address
/// stays reserved, re-ensures still write nothing, and deletion removes it last.
#[tokio::test]
async fn an_address_that_cannot_be_released_is_deleted_with_the_load_balancer() {
    let (fake, gce) = start().await;
    lock(&fake).addresses_in_use = true;
    let seeded: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    let svc = service(UID1, json!({}));
    let nodes = [node("node-a", None)];
    let status = gce
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure despite the refused release");
    let (p, r) = (PROJECT, "regions/us-central1");
    let w = writes(&fake);
    assert!(
        !w.contains(&format!("DELETE {p}/{r}/addresses/{LB1}")),
        "{w:?}"
    );
    assert!(
        lock(&fake)
            .resources
            .contains_key(&format!("{p}/{r}/addresses/{LB1}"))
    );
    let again = gce
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("again");
    assert_eq!(again, status);
    assert!(writes(&fake).is_empty());
    gce.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete");
    assert_eq!(
        writes(&fake).last().cloned(),
        Some(format!("DELETE {p}/{r}/addresses/{LB1}"))
    );
    let left: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    assert_eq!(left, seeded);
}

/// A load balancer left half-built (here: an update that deleted the forwarding rule to
/// recreate it, then failed with the address reserved, and the Service switched to
/// `externalTrafficPolicy: Local` before any other sync) still exists for the service
/// controller while the Service has the finalizer (upstream `GetLoadBalancer` checks
/// `NetLBFinalizerV1`), and its deletion removes everything: firewall, address, pool, and
/// the shared node health check with its firewall once no pool uses it.
#[tokio::test]
async fn a_half_built_load_balancer_is_found_and_deleted_completely() {
    let (fake, gce) = start().await;
    let seeded: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    let nodes = [node("node-a", None)];
    let cluster = service(UID1, json!({}));
    let status = gce
        .ensure_load_balancer("kubernetes", &cluster, &nodes)
        .await
        .expect("ensure");
    let ip = status
        .ingress
        .as_ref()
        .and_then(|i| i.first())
        .and_then(|i| i.ip.clone())
        .unwrap_or_default();
    let (p, r) = (PROJECT, "regions/us-central1");
    {
        let mut f = lock(&fake);
        f.resources
            .remove(&format!("{p}/{r}/forwardingRules/{LB1}"));
        f.put(
            &format!("{p}/{r}/addresses/{LB1}"),
            json!({"address": ip, "description": "orphaned by a failed update"}),
        );
    }
    writes(&fake);

    // Without the finalizer there is nothing to clean up for the controller ...
    let mut local = service(
        UID1,
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    );
    assert_eq!(
        gce.get_load_balancer("kubernetes", &local)
            .await
            .expect("get"),
        None
    );
    // ... with it, the load balancer still exists although its forwarding rule is gone.
    local.metadata.finalizers = Some(vec!["service.kubernetes.io/load-balancer-cleanup".into()]);
    assert!(
        gce.get_load_balancer("kubernetes", &local)
            .await
            .expect("get")
            .is_some()
    );

    gce.ensure_load_balancer_deleted("kubernetes", &local)
        .await
        .expect("delete");
    let w = writes(&fake);
    for gone in [
        format!("DELETE {p}/global/firewalls/k8s-fw-{LB1}"),
        format!("DELETE {p}/{r}/targetPools/{LB1}"),
        format!("DELETE {p}/global/httpHealthChecks/k8s-kubernetes-node"),
        format!("DELETE {p}/global/firewalls/k8s-kubernetes-node-http-hc"),
        format!("DELETE {p}/{r}/addresses/{LB1}"),
    ] {
        assert!(w.contains(&gone), "{gone} missing from {w:?}");
    }
    let left: Vec<String> = lock(&fake).resources.keys().cloned().collect();
    assert_eq!(left, seeded, "nothing leaked");
}

/// An address of the load balancer's name holding another IP than its forwarding rule
/// (an ensure cut off after reserving it: here put in place by hand) no longer wedges the
/// load balancer: the next recreate of the forwarding rule releases it, reserves the
/// rule's IP again and keeps the ingress. Upstream's `ensureStaticIP` fails every sync
/// with "error getting static IP address" there.
#[tokio::test]
async fn a_stale_address_of_the_load_balancers_name_is_released_and_the_ip_kept() {
    let (fake, gce) = start().await;
    let nodes = [node("node-a", None)];
    let svc = service(UID1, json!({}));
    let status = gce
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure");
    let (p, r) = (PROJECT, "regions/us-central1");
    lock(&fake).put(
        &format!("{p}/{r}/addresses/{LB1}"),
        json!({"address": "203.0.113.99", "description": "left by an interrupted ensure"}),
    );
    writes(&fake);
    // A port change recreates the forwarding rule, which reserves its IP again.
    let moved = service(
        UID1,
        json!({"ports": [{"port": 8081, "nodePort": 30080, "protocol": "TCP"}]}),
    );
    let again = gce
        .ensure_load_balancer("kubernetes", &moved, &nodes)
        .await
        .expect("the stale address does not wedge the load balancer");
    assert_eq!(again, status, "the ingress IP is kept");
    let w = writes(&fake);
    assert!(
        w.contains(&format!("DELETE {p}/{r}/addresses/{LB1}")),
        "{w:?}"
    );
    let addr = lock(&fake)
        .resources
        .get(&format!("{p}/{r}/addresses/{LB1}"))
        .map(|a| a["address"].clone());
    assert_ne!(addr, Some(json!("203.0.113.99")), "{addr:?}");
}
