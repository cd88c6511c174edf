//! The Compute API handlers: locations, instances, the load-balancing and network
//! resources, operations; request parsing (body, paging, filters) and rendering.
//!
//! Behaviour matched (read upstream; nothing copied):
//! - cloud-provider-gcp `providers/gce/gce_loadbalancer_external.go` and
//!   `gce_{addresses,forwardingrule,targetpool,healthchecks,firewall,routes}.go`: the
//!   calls and fields the external load balancer and route controllers send, the errors
//!   they test (404 `notFound`, 409 `alreadyExists`, 400 `resourceInUseByAnotherResource`
//!   on `isInUsedByError`), and the address promotion (`ensureStaticIP` reserves the IP an
//!   ephemeral forwarding rule already holds, so an explicit `address` held by a
//!   forwarding rule is accepted);
//! - google.golang.org/api `compute/v1/compute-gen.go`: 64-bit ids (`id`, `targetId`) are
//!   JSON strings (`json:",string"`), 32-bit numbers are numbers; list replies are
//!   `{kind, id, items, nextPageToken, selfLink}`, `items` left out when empty;
//!   aggregated lists are `items: {"zones/z": {"instances": [...]}}` with a `warning` for
//!   empty scopes;
//! - k8s-cloud-provider `pkg/cloud/op.go`: operations are waited on with
//!   `POST .../operations/{op}/wait` (`OperationsUseWait = true`), then `status == DONE`
//!   and `error.errors[0]` + `httpErrorStatusCode` are read.
//!
//! Resources are stored as the JSON GCE returns; unknown fields are refused (400
//! `invalid`, as the API's JSON front end answers "Unknown name"), and output-only fields
//! a client echoes back (`id`, `selfLink`, ...) are recomputed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use mock_cloud::{Cidr, Mode};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::filter::Filter;
use crate::path::{self, ApiPath, PathError, Scope, Target};
use crate::store::{Cloud, Doc, EXTERNAL_POOL, INTERNAL_POOL, Instance, Key, Kind, now_rfc3339};
use crate::{BODY_LIMIT, Shared};

/// The most `maxResults` GCE accepts (and its default).
pub const MAX_RESULTS: usize = 500;

/// The fallback handler for every Compute path.
pub async fn dispatch(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let raw = parts.uri.path().to_string();
    let parsed = match path::parse(&raw) {
        Ok(p) => p,
        Err(PathError::Name(n)) => return ApiError::bad_name("resource", &n).into_response(),
        Err(_) => {
            return ApiError::NotFound(raw.trim_start_matches('/').to_string()).into_response();
        }
    };
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => return ApiError::TooLarge(BODY_LIMIT).into_response(),
    };
    let query = parts.uri.query().unwrap_or("").to_string();
    // GCE takes the project's number for its id too (cloud-provider-gcp
    // `tryConvertToProjectNames` reads the project by number).
    if parsed.project != s.config.project_id
        && parsed.project != s.config.project_number.to_string()
    {
        return ApiError::Forbidden(parsed.project).into_response();
    }
    // Operation waits block (outside the lock) until done or the cap.
    if let Target::Resource {
        collection,
        name: Some(op),
        action: Some(a),
        ..
    } = &parsed.target
        && collection == "operations"
        && a == "wait"
    {
        if parts.method != Method::POST {
            return ApiError::MethodNotAllowed(parts.method.to_string()).into_response();
        }
        return wait(&s, &parsed, op)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    let req = Req {
        method: parts.method,
        path: parsed,
        query,
        body,
    };
    let insert = req.method == Method::POST
        && matches!(
            &req.path.target,
            Target::Resource {
                name: None,
                action: None,
                ..
            }
        );
    match handle(&s, &req) {
        Ok(v) => {
            let created = insert
                .then(|| {
                    v["targetLink"]
                        .as_str()
                        .and_then(|l| l.rsplit('/').next())
                        .map(str::to_string)
                })
                .flatten();
            let mut r = axum::Json(v).into_response();
            if let Some(name) = created {
                r.extensions_mut().insert(Created(name));
            }
            r
        }
        Err(e) => e.into_response(),
    }
}

/// The name of the resource an insert created (a response extension the gate reads for
/// `not_found_after_create` rules).
#[derive(Debug, Clone)]
pub struct Created(pub String);

/// A parsed request.
pub struct Req {
    pub method: Method,
    pub path: ApiPath,
    pub query: String,
    pub body: axum::body::Bytes,
}

impl Req {
    /// The body as a JSON object: 400 `parseError` otherwise.
    pub fn object(&self) -> Result<Map<String, Value>, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::Required("resource".into()));
        }
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(ApiError::Parse("the body is not a JSON object".into())),
            Err(e) => Err(ApiError::Parse(format!(
                "Invalid JSON payload received. {e}"
            ))),
        }
    }
}

async fn wait(s: &Shared, p: &ApiPath, op: &str) -> Result<Response, ApiError> {
    let deadline = Instant::now() + s.config.op_wait_timeout;
    let mut first = true;
    loop {
        let (v, done, reads) = {
            let mut cloud = s.cloud();
            let found = find_op(&cloud, p, op)?;
            let o = cloud
                .observe_op(&found, first)
                .ok_or_else(|| ApiError::NotFound(op.into()))?;
            let reads = matches!(o.lifecycle.mode(), Mode::Reads { .. });
            (cloud.render_op(&o), o.applied.is_some(), reads)
        };
        first = false;
        // A reads-mode operation advances only by looks: answer this one.
        if done || reads || Instant::now() >= deadline {
            return Ok(axum::Json(v).into_response());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The operation named in a path, checked to be in the path's scope.
fn find_op(cloud: &Cloud, p: &ApiPath, op: &str) -> Result<String, ApiError> {
    let Target::Resource { scope, .. } = &p.target else {
        return Err(ApiError::NotFound(op.into()));
    };
    let rel = cloud
        .ctx
        .rel(&format!("{}/operations/{op}", scope.prefix()));
    match cloud.ops.get(op) {
        Some(o) if &o.scope == scope => Ok(o.name.clone()),
        _ => Err(ApiError::NotFound(rel)),
    }
}

fn handle(s: &Shared, req: &Req) -> Result<Value, ApiError> {
    let mut cloud = s.cloud();
    let get_only = |m: &Method| {
        if m == Method::GET {
            Ok(())
        } else {
            Err(ApiError::MethodNotAllowed(m.to_string()))
        }
    };
    match &req.path.target {
        Target::Project => {
            get_only(&req.method)?;
            let c = &cloud.ctx;
            Ok(json!({
                "kind": "compute#project", "id": c.number.to_string(), "name": c.project,
                "selfLink": format!("{}/compute/v1/projects/{}", c.base, c.project),
                "defaultNetworkTier": "PREMIUM", "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
                "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": byte_fingerprint(c.number)},
            }))
        }
        Target::Location { collection, name } => {
            get_only(&req.method)?;
            let items = locations(&cloud, collection);
            match name {
                Some(n) => items
                    .into_iter()
                    .find(|v| v["name"] == json!(n))
                    .ok_or_else(|| ApiError::NotFound(cloud.ctx.rel(&format!("{collection}/{n}")))),
                None => {
                    let kind = if collection == "zones" {
                        "compute#zoneList"
                    } else {
                        "compute#regionList"
                    };
                    list_reply(&cloud, req, items, kind, &cloud.ctx.rel(collection))
                }
            }
        }
        Target::Aggregated { collection } => {
            get_only(&req.method)?;
            aggregated(&cloud, req, collection)
        }
        Target::Resource {
            scope,
            collection,
            name,
            action,
        } => {
            check_scope(&cloud, scope)?;
            match collection.as_str() {
                "instances" => instances(&cloud, req, scope, name.as_deref(), action.as_deref()),
                "operations" => {
                    operations(&mut cloud, req, scope, name.as_deref(), action.as_deref())
                }
                "machineTypes" => {
                    get_only(&req.method)?;
                    let n = name.as_deref().unwrap_or("e2-standard-2");
                    Ok(
                        json!({"kind": "compute#machineType", "name": n, "guestCpus": 2, "memoryMb": 8192,
                        "zone": scope.prefix(), "selfLink": cloud.ctx.url(&format!("{}/machineTypes/{n}", scope.prefix()))}),
                    )
                }
                c => {
                    let kind = Kind::from_collection(c).ok_or_else(|| {
                        ApiError::NotFound(cloud.ctx.rel(&format!("{}/{c}", scope.prefix())))
                    })?;
                    let wanted = if kind.regional() {
                        matches!(scope, Scope::Region(_))
                    } else {
                        *scope == Scope::Global
                    };
                    if !wanted {
                        return Err(ApiError::NotFound(
                            cloud.ctx.rel(&format!("{}/{c}", scope.prefix())),
                        ));
                    }
                    resources(
                        &mut cloud,
                        req,
                        kind,
                        scope,
                        name.as_deref(),
                        action.as_deref(),
                    )
                }
            }
        }
    }
}

/// 404 for a region or zone the mock does not have.
fn check_scope(cloud: &Cloud, scope: &Scope) -> Result<(), ApiError> {
    let ok = match scope {
        Scope::Global => true,
        Scope::Region(r) => *r == cloud.ctx.region,
        Scope::Zone(z) => cloud.ctx.has_zone(z),
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::NotFound(cloud.ctx.rel(&scope.prefix())))
    }
}

fn locations(cloud: &Cloud, collection: &str) -> Vec<Value> {
    let c = &cloud.ctx;
    let region_url = c.url(&format!("regions/{}", c.region));
    if collection == "zones" {
        c.zones
            .iter()
            .enumerate()
            .map(|(i, z)| {
                json!({"kind": "compute#zone", "id": (2000 + i).to_string(), "name": z, "status": "UP",
                    "description": z, "region": region_url, "selfLink": c.url(&format!("zones/{z}")),
                    "availableCpuPlatforms": ["Intel Cascade Lake"], "supportsPzs": false})
            })
            .collect()
    } else {
        let zones: Vec<String> = c
            .zones
            .iter()
            .map(|z| c.url(&format!("zones/{z}")))
            .collect();
        vec![
            json!({"kind": "compute#region", "id": "1000", "name": c.region, "status": "UP",
            "description": c.region, "zones": zones, "selfLink": region_url, "supportsPzs": false}),
        ]
    }
}

// ---- listing ----------------------------------------------------------------------

/// `maxResults`, `pageToken`, `filter` of a list call.
#[derive(Debug)]
pub struct ListQuery {
    pub filter: Filter,
    pub filter_text: String,
    pub max_results: usize,
    pub offset: usize,
}

/// Parses the list parameters; `listing` names the listing (a page token from another
/// listing or filter is refused).
pub fn list_query(query: &str, listing: &str) -> Result<ListQuery, ApiError> {
    let mut filter_text = String::new();
    let mut max_results = MAX_RESULTS;
    let mut token = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "filter" => filter_text = v.into_owned(),
            "maxResults" => {
                max_results = match v.parse::<usize>() {
                    Ok(0) => MAX_RESULTS,
                    Ok(n) if n <= MAX_RESULTS => n,
                    _ => {
                        return Err(ApiError::Invalid(format!(
                            "Invalid value for field 'maxResults': '{v}'. Must be less than or equal to {MAX_RESULTS}"
                        )));
                    }
                }
            }
            "pageToken" => token = Some(v.into_owned()),
            _ => {}
        }
    }
    let filter = Filter::parse(&filter_text).map_err(|e| ApiError::Invalid(e.to_string()))?;
    let fingerprint = fingerprint(listing, &filter_text);
    let offset = match token.as_deref() {
        None | Some("") => 0,
        Some(t) => decode_token(t, fingerprint).ok_or_else(|| {
            ApiError::Invalid(format!(
                "Invalid value for field 'pageToken': '{}'",
                t.chars().take(100).collect::<String>()
            ))
        })?,
    };
    Ok(ListQuery {
        filter,
        filter_text,
        max_results,
        offset,
    })
}

fn fingerprint(listing: &str, filter: &str) -> u64 {
    // FNV-1a: stable across runs and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in listing.bytes().chain([0u8]).chain(filter.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub fn encode_token(offset: usize, fp: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{offset}.{fp:016x}"))
}

/// The offset a page token carries, if it is one of this listing's.
pub fn decode_token(token: &str, fp: u64) -> Option<usize> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = std::str::from_utf8(&raw).ok()?;
    let (offset, f) = text.split_once('.')?;
    if f.len() != 16 || u64::from_str_radix(f, 16).ok()? != fp {
        return None;
    }
    if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) || offset.len() > 9 {
        return None;
    }
    offset.parse().ok()
}

/// One page of `items` (already in order) after the filter.
pub fn page(items: Vec<Value>, q: &ListQuery, listing: &str) -> (Vec<Value>, Option<String>) {
    let matching: Vec<Value> = items.into_iter().filter(|v| q.filter.matches(v)).collect();
    let end = q.offset.saturating_add(q.max_results).min(matching.len());
    let start = q.offset.min(matching.len());
    let next =
        (end < matching.len()).then(|| encode_token(end, fingerprint(listing, &q.filter_text)));
    (matching[start..end].to_vec(), next)
}

fn list_reply(
    cloud: &Cloud,
    req: &Req,
    items: Vec<Value>,
    kind: &str,
    rel: &str,
) -> Result<Value, ApiError> {
    let q = list_query(&req.query, rel)?;
    let (items, next) = page(items, &q, rel);
    let mut v = json!({"kind": kind, "id": rel, "selfLink": format!("{}/compute/v1/{rel}", cloud.ctx.base)});
    if !items.is_empty() {
        v["items"] = Value::Array(items);
    }
    if let Some(t) = next {
        v["nextPageToken"] = json!(t);
    }
    Ok(v)
}

fn aggregated(cloud: &Cloud, req: &Req, collection: &str) -> Result<Value, ApiError> {
    let ctx = &cloud.ctx;
    let mut all: Vec<(String, Value)> = Vec::new();
    let scopes: Vec<String> = match collection {
        "instances" => {
            for i in cloud.instances.values() {
                all.push((format!("zones/{}", i.zone), render_instance(cloud, i)));
            }
            ctx.zones.iter().map(|z| format!("zones/{z}")).collect()
        }
        c => {
            let kind = Kind::from_collection(c)
                .ok_or_else(|| ApiError::NotFound(ctx.rel(&format!("aggregated/{c}"))))?;
            for (k, d) in cloud.docs_of(kind, None) {
                all.push((k.scope.prefix(), render(cloud, k, d)));
            }
            if kind.regional() {
                vec![format!("regions/{}", ctx.region)]
            } else {
                vec!["global".into()]
            }
        }
    };
    all.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1["name"].as_str().cmp(&b.1["name"].as_str()))
    });
    let rel = ctx.rel(&format!("aggregated/{collection}"));
    let q = list_query(&req.query, &rel)?;
    let matching: Vec<(String, Value)> = all
        .into_iter()
        .filter(|(_, v)| q.filter.matches(v))
        .collect();
    let start = q.offset.min(matching.len());
    let end = q.offset.saturating_add(q.max_results).min(matching.len());
    let mut grouped: BTreeMap<String, Vec<Value>> =
        scopes.into_iter().map(|s| (s, Vec::new())).collect();
    for (scope, v) in &matching[start..end] {
        grouped.entry(scope.clone()).or_default().push(v.clone());
    }
    let items: Map<String, Value> = grouped
        .into_iter()
        .map(|(scope, list)| {
            let v = if list.is_empty() {
                json!({"warning": {"code": "NO_RESULTS_ON_PAGE",
                    "message": format!("There are no results for scope '{scope}' on this page."),
                    "data": [{"key": "scope", "value": scope}]}})
            } else {
                json!({ collection: list })
            };
            (scope, v)
        })
        .collect();
    let kind_word = match collection {
        "instances" => "instance".to_string(),
        c => Kind::from_collection(c)
            .map(|k| k.singular().to_string())
            .unwrap_or_default(),
    };
    let mut v = json!({"kind": format!("compute#{kind_word}AggregatedList"), "id": rel,
        "items": items, "selfLink": format!("{}/compute/v1/{rel}", ctx.base)});
    if end < matching.len() {
        v["nextPageToken"] = json!(encode_token(end, fingerprint(&rel, &q.filter_text)));
    }
    Ok(v)
}

// ---- instances --------------------------------------------------------------------

/// An instance as GCE shows it (cloud-provider-gcp `providers/gce/gce_instances.go`
/// reads `networkInterfaces[].networkIP/accessConfigs[].natIP/ipv6*`, `machineType`,
/// `tags.items`, `zone`, `id`, `status`).
pub fn render_instance(cloud: &Cloud, i: &Instance) -> Value {
    let c = &cloud.ctx;
    let zone_rel = format!("zones/{}", i.zone);
    let nics: Vec<Value> = i
        .network_ips
        .iter()
        .enumerate()
        .map(|(n, ip)| {
            let mut nic = json!({
                "kind": "compute#networkInterface", "name": format!("nic{n}"),
                "network": c.network_url(), "subnetwork": c.subnetwork_url(),
                "networkIP": ip.to_string(), "stackType": "IPV4_ONLY",
                "fingerprint": byte_fingerprint(i.id ^ 0x5a5a ^ ((n as u64) << 32)),
                "accessConfigs": [], "ipv6AccessConfigs": [],
            });
            if let Some(nat) = i.nat_ips.get(n) {
                nic["accessConfigs"] = json!([{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                    "name": "External NAT", "natIP": nat.to_string(), "networkTier": "PREMIUM"}]);
            }
            nic
        })
        .collect();
    let mut tags = json!({"fingerprint": i.tags_fingerprint});
    if !i.tags.is_empty() {
        tags["items"] = json!(i.tags);
    }
    json!({
        "kind": "compute#instance", "id": i.id.to_string(), "name": i.name,
        "creationTimestamp": i.created, "description": "",
        "tags": tags,
        "machineType": c.url(&format!("{zone_rel}/machineTypes/{}", i.machine_type)),
        "status": i.status, "zone": c.url(&zone_rel),
        "canIpForward": false,
        "networkInterfaces": nics,
        "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
            "deviceName": "persistent-disk-0", "index": 0, "boot": true, "autoDelete": true,
            "source": c.url(&format!("{zone_rel}/disks/{}", i.name))}],
        "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": true, "preemptible": false},
        "selfLink": c.url(&format!("{zone_rel}/instances/{}", i.name)),
        "labels": {}, "labelFingerprint": "42WmSpB8rSM=", "cpuPlatform": "Intel Cascade Lake",
        "fingerprint": byte_fingerprint(i.id), "lastStartTimestamp": i.created,
    })
}

fn instances(
    cloud: &Cloud,
    req: &Req,
    scope: &Scope,
    name: Option<&str>,
    action: Option<&str>,
) -> Result<Value, ApiError> {
    let Scope::Zone(zone) = scope else {
        return Err(ApiError::NotFound(
            cloud.ctx.rel(&format!("{}/instances", scope.prefix())),
        ));
    };
    if req.method != Method::GET || action.is_some() {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} (the mock's instances are made through its admin API)",
            req.method
        )));
    }
    match name {
        Some(n) => cloud
            .instances
            .values()
            .find(|i| &i.zone == zone && (i.name == n || i.id.to_string() == n))
            .map(|i| render_instance(cloud, i))
            .ok_or_else(|| {
                ApiError::NotFound(cloud.ctx.rel(&format!("zones/{zone}/instances/{n}")))
            }),
        None => {
            let items = cloud
                .instances
                .values()
                .filter(|i| &i.zone == zone)
                .map(|i| render_instance(cloud, i))
                .collect();
            list_reply(
                cloud,
                req,
                items,
                "compute#instanceList",
                &cloud.ctx.rel(&format!("zones/{zone}/instances")),
            )
        }
    }
}

// ---- operations -------------------------------------------------------------------

fn operations(
    cloud: &mut Cloud,
    req: &Req,
    scope: &Scope,
    name: Option<&str>,
    action: Option<&str>,
) -> Result<Value, ApiError> {
    if scope != &Scope::Global && matches!(scope, Scope::Region(_) | Scope::Zone(_)) {
        // Checked by check_scope; operations exist in every scope.
    }
    match (name, action, &req.method) {
        (Some(op), None, m) if m == Method::GET => {
            let found = find_op(cloud, &req.path, op)?;
            let o = cloud
                .observe_op(&found, true)
                .ok_or_else(|| ApiError::NotFound(op.into()))?;
            Ok(cloud.render_op(&o))
        }
        (Some(op), None, m) if m == Method::DELETE => {
            let found = find_op(cloud, &req.path, op)?;
            cloud.ops.remove(&found);
            Ok(json!({}))
        }
        (None, None, m) if m == Method::GET => {
            let mut ops: Vec<_> = cloud
                .ops
                .values()
                .filter(|o| &o.scope == scope)
                .cloned()
                .collect();
            ops.sort_by(|a, b| a.name.cmp(&b.name));
            let items = ops.iter().map(|o| cloud.render_op(o)).collect();
            let rel = cloud.ctx.rel(&format!("{}/operations", scope.prefix()));
            list_reply(cloud, req, items, "compute#operationList", &rel)
        }
        (_, _, m) => Err(ApiError::MethodNotAllowed(m.to_string())),
    }
}

// ---- the written resources ----------------------------------------------------------

fn key_for(kind: Kind, scope: &Scope, name: &str) -> Key {
    Key {
        kind,
        scope: scope.clone(),
        name: name.to_string(),
    }
}

/// A `fingerprint`: GCE's are `format: byte` fields, base64 on the wire (gcloud's
/// apitools decodes them and refuses anything else; the Go client keeps the string).
pub fn byte_fingerprint(seed: u64) -> String {
    base64::engine::general_purpose::STANDARD.encode(seed.to_be_bytes())
}

/// A stored resource with its computed fields (an address's `status`/`users`).
pub fn render(cloud: &Cloud, key: &Key, doc: &Doc) -> Value {
    let mut v = doc.value.clone();
    if key.kind == Kind::Address {
        let ip = v["address"].as_str().unwrap_or_default().to_string();
        let users: Vec<String> = cloud
            .docs_of(Kind::ForwardingRule, None)
            .into_iter()
            .filter(|(_, d)| d.value["IPAddress"].as_str() == Some(ip.as_str()))
            .map(|(k, _)| cloud.ctx.key_url(k))
            .collect();
        v["status"] = json!(if users.is_empty() {
            "RESERVED"
        } else {
            "IN_USE"
        });
        if !users.is_empty() {
            v["users"] = json!(users);
        }
    }
    v
}

fn lookup<'a>(cloud: &'a Cloud, key: &Key) -> Option<(&'a Key, &'a Doc)> {
    if let Some((k, d)) = cloud.docs.get_key_value(key) {
        return Some((k, d));
    }
    // By numeric id.
    if path::valid_id(&key.name) {
        return cloud.docs.iter().find(|(k, d)| {
            k.kind == key.kind && k.scope == key.scope && d.id.to_string() == key.name
        });
    }
    None
}

fn resources(
    cloud: &mut Cloud,
    req: &Req,
    kind: Kind,
    scope: &Scope,
    name: Option<&str>,
    action: Option<&str>,
) -> Result<Value, ApiError> {
    let list_rel = cloud
        .ctx
        .rel(&format!("{}/{}", scope.prefix(), kind.collection()));
    let m = &req.method;
    match (name, action) {
        (None, None) if m == Method::GET => {
            let items = cloud
                .docs_of(kind, Some(scope))
                .into_iter()
                .map(|(k, d)| render(cloud, k, d))
                .collect();
            list_reply(
                cloud,
                req,
                items,
                &format!("compute#{}List", kind.singular()),
                &list_rel,
            )
        }
        (None, None) if m == Method::POST && !kind.read_only() => {
            let body = req.object()?;
            let name = match body.get("name") {
                Some(Value::String(n)) => n.clone(),
                Some(_) => {
                    return Err(ApiError::Invalid(
                        "Invalid value for field 'resource.name'".into(),
                    ));
                }
                None => return Err(ApiError::Required("resource.name".into())),
            };
            if !path::valid_name(&name) {
                return Err(ApiError::bad_name("resource.name", &name));
            }
            let key = key_for(kind, scope, &name);
            cloud.check_ready(&key)?;
            if cloud.docs.contains_key(&key) {
                return Err(ApiError::AlreadyExists(cloud.ctx.key_rel(&key)));
            }
            let id = cloud.new_id();
            let value = prepare(cloud, &key, body, id, None)?;
            cloud.docs.insert(key.clone(), Doc { value, id });
            let op = cloud.begin(&key, "insert", id, None);
            Ok(cloud.render_op(&op))
        }
        (Some(n), None) => {
            let key = key_for(kind, scope, n);
            let (key, doc) = lookup(cloud, &key)
                .map(|(k, d)| (k.clone(), d.clone()))
                .ok_or_else(|| ApiError::NotFound(cloud.ctx.key_rel(&key)))?;
            match m.as_str() {
                "GET" => Ok(render(cloud, &key, &doc)),
                "DELETE" if !kind.read_only() => {
                    cloud.check_ready(&key)?;
                    check_unused(cloud, &key, &doc)?;
                    cloud.docs.remove(&key);
                    let op = cloud.begin(&key, "delete", doc.id, Some(doc));
                    Ok(cloud.render_op(&op))
                }
                "PUT" | "PATCH"
                    if matches!(
                        kind,
                        Kind::HttpHealthCheck | Kind::HealthCheck | Kind::Firewall
                    ) =>
                {
                    let mut body = req.object()?;
                    if let Some(bn) = body.get("name")
                        && bn.as_str() != Some(key.name.as_str())
                    {
                        return Err(ApiError::Invalid(format!(
                            "Invalid value for field 'resource.name': {bn}. The name cannot be changed"
                        )));
                    }
                    if m == Method::PATCH
                        && let Value::Object(existing) = &doc.value
                    {
                        let mut merged = existing.clone();
                        for (k, v) in body {
                            if v.is_null() {
                                merged.remove(&k);
                            } else {
                                merged.insert(k, v);
                            }
                        }
                        body = merged;
                    }
                    body.insert("name".into(), json!(key.name));
                    cloud.check_ready(&key)?;
                    let value = prepare(cloud, &key, body, doc.id, Some(&doc.value))?;
                    cloud.docs.insert(key.clone(), Doc { value, id: doc.id });
                    let op_type = if m == Method::PUT { "update" } else { "patch" };
                    let op = cloud.begin(&key, op_type, doc.id, Some(doc));
                    Ok(cloud.render_op(&op))
                }
                _ => Err(ApiError::MethodNotAllowed(m.to_string())),
            }
        }
        (Some(n), Some(a)) if m == Method::POST => {
            let key = key_for(kind, scope, n);
            let (key, doc) = lookup(cloud, &key)
                .map(|(k, d)| (k.clone(), d.clone()))
                .ok_or_else(|| ApiError::NotFound(cloud.ctx.key_rel(&key)))?;
            let body = req.object()?;
            let mut value = doc.value.clone();
            match (kind, a) {
                (Kind::TargetPool, "addInstance" | "removeInstance") => {
                    // Adding needs the instance; removing does not: a pool keeps the URL
                    // of an instance deleted since, and upstream's `updateTargetPool`
                    // (providers/gce/gce_loadbalancer_external.go) removes every listed
                    // URL that is no longer a node's, deleted instances included. A 404
                    // there would stop every later update of the Service's pool.
                    let must_exist = a == "addInstance";
                    let urls = refs_in(cloud, &body, "instances", "instance", |c, r| {
                        instance_ref(c, r, &key, must_exist)
                    })?;
                    edit_list(&mut value, "instances", urls, a == "addInstance");
                }
                (Kind::TargetPool, "addHealthCheck" | "removeHealthCheck") => {
                    let urls = refs_in(
                        cloud,
                        &body,
                        "healthChecks",
                        "healthCheck",
                        http_health_check_ref,
                    )?;
                    edit_list(&mut value, "healthChecks", urls, a == "addHealthCheck");
                    if value["healthChecks"]
                        .as_array()
                        .is_some_and(|l| l.len() > 1)
                    {
                        return Err(ApiError::Invalid(
                            "A target pool may have at most one health check".into(),
                        ));
                    }
                }
                (Kind::ForwardingRule, "setTarget") => {
                    let target = match body.get("target") {
                        Some(Value::String(t)) => t.clone(),
                        _ => return Err(ApiError::Required("target".into())),
                    };
                    value["target"] = json!(target_pool_ref(cloud, &target, &key.scope)?);
                }
                _ => {
                    return Err(ApiError::NotFound(format!(
                        "{}/{a}",
                        cloud.ctx.key_rel(&key)
                    )));
                }
            }
            cloud.check_ready(&key)?;
            cloud.docs.insert(key.clone(), Doc { value, id: doc.id });
            let op = cloud.begin(&key, a, doc.id, Some(doc));
            Ok(cloud.render_op(&op))
        }
        _ => Err(ApiError::MethodNotAllowed(m.to_string())),
    }
}

fn edit_list(value: &mut Value, field: &str, urls: Vec<String>, add: bool) {
    let mut list: Vec<String> = value[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for u in urls {
        let same = |x: &String| comparable(x) == comparable(&u);
        if add {
            if !list.iter().any(same) {
                list.push(u);
            }
        } else {
            list.retain(|x| !same(x));
        }
    }
    if list.is_empty() {
        if let Some(o) = value.as_object_mut() {
            o.remove(field);
        }
    } else {
        value[field] = json!(list);
    }
}

/// A link without host and version (cloud-provider-gcp `hostURLToComparablePath`).
fn comparable(url: &str) -> &str {
    url.find("projects/").map_or(url, |i| &url[i..])
}

/// `{field: [{item: url}, ...]}` of the target pool actions, resolved.
fn refs_in(
    cloud: &Cloud,
    body: &Map<String, Value>,
    field: &str,
    item: &str,
    resolve: impl Fn(&Cloud, &str) -> Result<String, ApiError>,
) -> Result<Vec<String>, ApiError> {
    let list = match body.get(field) {
        Some(Value::Array(l)) => l,
        Some(_) => {
            return Err(ApiError::Invalid(format!(
                "Invalid value for field '{field}'"
            )));
        }
        None => return Err(ApiError::Required(field.into())),
    };
    list.iter()
        .map(|x| match x.get(item).and_then(Value::as_str) {
            Some(s) => resolve(cloud, s),
            None => Err(ApiError::Required(format!("{field}[].{item}"))),
        })
        .collect()
}

/// In-use checks before a delete (cloud-provider-gcp `isInUsedByError` expects 400
/// `resourceInUseByAnotherResource`).
fn check_unused(cloud: &Cloud, key: &Key, doc: &Doc) -> Result<(), ApiError> {
    let me = cloud.ctx.key_rel(key);
    let user = |kind: Kind, field: &str, hit: &dyn Fn(&Value) -> bool| {
        cloud
            .docs_of(kind, None)
            .into_iter()
            .find(|(_, d)| d.value.get(field).is_some_and(hit))
            .map(|(k, _)| cloud.ctx.key_rel(k))
    };
    let is_me = |v: &Value| v.as_str().is_some_and(|s| comparable(s) == me);
    let _ = doc;
    let found = match key.kind {
        // Releasing a reserved address that a forwarding rule uses is allowed: the rule
        // keeps the IP as an ephemeral one. cloud-provider-gcp relies on it: it reserves
        // the load balancer's IP while it creates the forwarding rule and releases it
        // right after (`gce_loadbalancer_external.go` `ensureExternalLoadBalancer`,
        // `isSafeToReleaseIP`).
        Kind::Address => None,
        Kind::TargetPool => user(Kind::ForwardingRule, "target", &is_me),
        Kind::HttpHealthCheck => user(Kind::TargetPool, "healthChecks", &|v| {
            v.as_array().is_some_and(|l| l.iter().any(is_me))
        }),
        _ => None,
    };
    match found {
        Some(u) => Err(ApiError::InUse {
            kind: key.kind.singular(),
            resource: me,
            user: u,
        }),
        None => Ok(()),
    }
}

// ---- references -------------------------------------------------------------------

fn parse_ref(cloud: &Cloud, s: &str, want: &str) -> Result<path::Ref, ApiError> {
    let r = path::parse_ref(s).map_err(|_| {
        ApiError::Invalid(format!(
            "Invalid value for field '{want}': '{}'. The URL is malformed.",
            s.chars().take(200).collect::<String>()
        ))
    })?;
    if r.project.as_deref().is_some_and(|p| p != cloud.ctx.project) {
        return Err(ApiError::NotFound(r.relative(&cloud.ctx.project)));
    }
    Ok(r)
}

/// An instance reference of a target pool in `pool`'s region, as a full URL.
/// The canonical URL of instance reference `s` for target pool `pool`: in the pool's
/// region, and (with `must_exist`) an instance that exists.
fn instance_ref(cloud: &Cloud, s: &str, pool: &Key, must_exist: bool) -> Result<String, ApiError> {
    let r = parse_ref(cloud, s, "instance")?;
    let Scope::Zone(z) = &r.scope else {
        return Err(ApiError::Invalid(format!("'{s}' is not an instance")));
    };
    if r.collection != "instances" {
        return Err(ApiError::Invalid(format!("'{s}' is not an instance")));
    }
    if let Scope::Region(region) = &pool.scope
        && crate::store::Ctx::zone_region(z) != region
    {
        return Err(ApiError::Invalid(format!(
            "Instance '{}' is not in region '{region}' of the target pool",
            r.relative(&cloud.ctx.project)
        )));
    }
    if must_exist && cloud.instance_in(z, &r.name).is_none() {
        return Err(ApiError::NotFound(r.relative(&cloud.ctx.project)));
    }
    Ok(cloud.ctx.url(&format!("zones/{z}/instances/{}", r.name)))
}

fn http_health_check_ref(cloud: &Cloud, s: &str) -> Result<String, ApiError> {
    resource_ref(cloud, s, Kind::HttpHealthCheck, &Scope::Global)
}

fn target_pool_ref(cloud: &Cloud, s: &str, region: &Scope) -> Result<String, ApiError> {
    resource_ref(cloud, s, Kind::TargetPool, region)
}

/// A reference to an existing resource of `kind` in `scope`, as a full URL.
fn resource_ref(cloud: &Cloud, s: &str, kind: Kind, scope: &Scope) -> Result<String, ApiError> {
    let r = parse_ref(cloud, s, kind.singular())?;
    if r.collection != kind.collection() || &r.scope != scope {
        return Err(ApiError::Invalid(format!(
            "Invalid value for field '{}': '{s}'. Must be a {} in {}",
            kind.singular(),
            kind.singular(),
            scope.prefix()
        )));
    }
    let key = key_for(kind, &r.scope, &r.name);
    if cloud.docs.contains_key(&key) {
        Ok(cloud.ctx.key_url(&key))
    } else {
        Err(ApiError::NotFound(cloud.ctx.key_rel(&key)))
    }
}

fn network_ref(cloud: &Cloud, v: Option<&Value>) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(cloud.ctx.network_url()),
        Some(Value::String(s)) => resource_ref(cloud, s, Kind::Network, &Scope::Global),
        Some(_) => Err(ApiError::Invalid(
            "Invalid value for field 'resource.network'".into(),
        )),
    }
}

// ---- bodies -----------------------------------------------------------------------

/// The JSON types of fields.
#[derive(Clone, Copy)]
enum F {
    Str,
    Int(i64, i64),
    Bool,
    StrList,
    Obj,
    ObjList,
    /// Output only: accepted and recomputed.
    Out,
}

const COMMON: &[(&str, F)] = &[
    ("name", F::Str),
    ("description", F::Str),
    ("kind", F::Out),
    ("id", F::Out),
    ("selfLink", F::Out),
    ("selfLinkWithId", F::Out),
    ("creationTimestamp", F::Out),
    ("region", F::Out),
];

fn schema(kind: Kind) -> &'static [(&'static str, F)] {
    match kind {
        Kind::Address => &[
            ("address", F::Str),
            ("addressType", F::Str),
            ("networkTier", F::Str),
            ("ipVersion", F::Str),
            ("purpose", F::Str),
            ("subnetwork", F::Str),
            ("network", F::Str),
            ("prefixLength", F::Int(0, 128)),
            ("labels", F::Obj),
            ("labelFingerprint", F::Out),
            ("status", F::Out),
            ("users", F::Out),
        ],
        Kind::ForwardingRule => &[
            ("IPAddress", F::Str),
            ("IPProtocol", F::Str),
            ("portRange", F::Str),
            ("ports", F::StrList),
            ("allPorts", F::Bool),
            ("target", F::Str),
            ("loadBalancingScheme", F::Str),
            ("networkTier", F::Str),
            ("network", F::Str),
            ("subnetwork", F::Str),
            ("backendService", F::Str),
            ("ipVersion", F::Str),
            ("allowGlobalAccess", F::Bool),
            ("labels", F::Obj),
            ("serviceLabel", F::Str),
            ("fingerprint", F::Out),
            ("labelFingerprint", F::Out),
            ("serviceName", F::Out),
        ],
        Kind::TargetPool => &[
            ("instances", F::StrList),
            ("healthChecks", F::StrList),
            ("sessionAffinity", F::Str),
            ("failoverRatio", F::Out),
            ("backupPool", F::Str),
        ],
        Kind::HttpHealthCheck => &[
            ("host", F::Str),
            ("port", F::Int(1, 65535)),
            ("requestPath", F::Str),
            ("checkIntervalSec", F::Int(1, 300)),
            ("timeoutSec", F::Int(1, 300)),
            ("unhealthyThreshold", F::Int(1, 10)),
            ("healthyThreshold", F::Int(1, 10)),
        ],
        Kind::HealthCheck => &[
            ("type", F::Str),
            ("httpHealthCheck", F::Obj),
            ("httpsHealthCheck", F::Obj),
            ("http2HealthCheck", F::Obj),
            ("tcpHealthCheck", F::Obj),
            ("sslHealthCheck", F::Obj),
            ("grpcHealthCheck", F::Obj),
            ("checkIntervalSec", F::Int(1, 300)),
            ("timeoutSec", F::Int(1, 300)),
            ("unhealthyThreshold", F::Int(1, 10)),
            ("healthyThreshold", F::Int(1, 10)),
            ("logConfig", F::Obj),
        ],
        Kind::Firewall => &[
            ("network", F::Str),
            ("priority", F::Int(0, 65535)),
            ("sourceRanges", F::StrList),
            ("destinationRanges", F::StrList),
            ("sourceTags", F::StrList),
            ("targetTags", F::StrList),
            ("sourceServiceAccounts", F::StrList),
            ("targetServiceAccounts", F::StrList),
            ("allowed", F::ObjList),
            ("denied", F::ObjList),
            ("direction", F::Str),
            ("logConfig", F::Obj),
            ("disabled", F::Bool),
        ],
        Kind::Route => &[
            ("network", F::Str),
            ("destRange", F::Str),
            ("priority", F::Int(0, 65535)),
            ("tags", F::StrList),
            ("nextHopInstance", F::Str),
            ("nextHopIp", F::Str),
            ("nextHopGateway", F::Str),
            ("nextHopNetwork", F::Str),
            ("nextHopIlb", F::Str),
            ("nextHopVpnTunnel", F::Str),
            ("routeType", F::Out),
            ("warnings", F::Out),
        ],
        Kind::Network | Kind::Subnetwork => &[],
    }
}

/// Checks every field's type; integers may come as numeric strings (proto3 JSON writes
/// 64-bit numbers so) and are stored as numbers. Output-only fields are dropped.
fn check_types(kind: Kind, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for (k, v) in body {
        let Some((_, ty)) = COMMON.iter().chain(schema(kind)).find(|(n, _)| *n == k) else {
            return Err(ApiError::Invalid(format!(
                "Invalid JSON payload received. Unknown name \"{}\": Cannot find field.",
                k.chars().take(100).collect::<String>()
            )));
        };
        let shown = truncate(&v);
        let bad = || ApiError::Invalid(format!("Invalid value for field 'resource.{k}': {shown}"));
        let v = match (ty, v) {
            (F::Out, _) => continue,
            (_, Value::Null) => continue,
            (F::Str, v @ Value::String(_))
            | (F::Bool, v @ Value::Bool(_))
            | (F::Obj, v @ Value::Object(_)) => v,
            (F::Int(lo, hi), v) => {
                let n = match &v {
                    Value::Number(n) => n.as_i64(),
                    Value::String(s) => s.parse::<i64>().ok(),
                    _ => None,
                };
                match n {
                    Some(n) if (*lo..=*hi).contains(&n) => json!(n),
                    _ => return Err(bad()),
                }
            }
            (F::StrList, Value::Array(items)) if items.iter().all(Value::is_string) => {
                Value::Array(items)
            }
            (F::ObjList, Value::Array(items)) if items.iter().all(Value::is_object) => {
                Value::Array(items)
            }
            _ => return Err(bad()),
        };
        out.insert(k, v);
    }
    Ok(out)
}

fn truncate(v: &Value) -> String {
    v.to_string().chars().take(100).collect()
}

fn one_of(
    m: &Map<String, Value>,
    field: &str,
    allowed: &[&str],
    default: &str,
) -> Result<String, ApiError> {
    match m.get(field).and_then(Value::as_str) {
        None => Ok(default.to_string()),
        Some(s) if allowed.contains(&s) => Ok(s.to_string()),
        Some(s) => Err(ApiError::Invalid(format!(
            "Invalid value for field 'resource.{field}': '{}'. Must be one of [{}]",
            s.chars().take(60).collect::<String>(),
            allowed.join(", ")
        ))),
    }
}

fn int_or(m: &Map<String, Value>, field: &str, default: i64) -> i64 {
    m.get(field).and_then(Value::as_i64).unwrap_or(default)
}

/// A port range `a` or `a-b` (1..=65535), as `(a, b)`.
pub fn parse_port_range(s: &str) -> Option<(u16, u16)> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let p = |x: &str| -> Option<u16> {
        if x.is_empty() || x.len() > 5 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        x.parse::<u16>().ok().filter(|n| *n >= 1)
    };
    let (a, b) = (p(a)?, p(b)?);
    (a <= b).then_some((a, b))
}

/// Validates a body and makes the stored document (server fields filled).
fn prepare(
    cloud: &Cloud,
    key: &Key,
    body: Map<String, Value>,
    id: u64,
    existing: Option<&Value>,
) -> Result<Value, ApiError> {
    let mut m = check_types(key.kind, body)?;
    let ctx = &cloud.ctx;
    match key.kind {
        Kind::Address => prepare_address(cloud, key, &mut m)?,
        Kind::ForwardingRule => prepare_forwarding_rule(cloud, key, &mut m)?,
        Kind::TargetPool => {
            let aff = one_of(
                &m,
                "sessionAffinity",
                &["NONE", "CLIENT_IP", "CLIENT_IP_PROTO"],
                "NONE",
            )?;
            m.insert("sessionAffinity".into(), json!(aff));
            if let Some(Value::Array(list)) = m.get("instances").cloned() {
                let mut urls: Vec<String> = Vec::new();
                for s in list.iter().filter_map(Value::as_str) {
                    let u = instance_ref(cloud, s, key, true)?;
                    if !urls.contains(&u) {
                        urls.push(u);
                    }
                }
                m.insert("instances".into(), json!(urls));
            }
            if let Some(Value::Array(list)) = m.get("healthChecks").cloned() {
                if list.len() > 1 {
                    return Err(ApiError::Invalid(
                        "A target pool may have at most one health check".into(),
                    ));
                }
                let urls = list
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| http_health_check_ref(cloud, s))
                    .collect::<Result<Vec<_>, _>>()?;
                m.insert("healthChecks".into(), json!(urls));
            }
            if let Some(b) = m.get("backupPool").and_then(Value::as_str) {
                let u = target_pool_ref(cloud, b, &key.scope)?;
                m.insert("backupPool".into(), json!(u));
            }
        }
        Kind::HttpHealthCheck => {
            let path = m
                .get("requestPath")
                .and_then(Value::as_str)
                .unwrap_or("/")
                .to_string();
            if !path.starts_with('/') {
                return Err(ApiError::Invalid(format!(
                    "Invalid value for field 'resource.requestPath': '{path}'"
                )));
            }
            m.insert("requestPath".into(), json!(path));
            for (f, d) in [
                ("port", 80),
                ("checkIntervalSec", 5),
                ("timeoutSec", 5),
                ("unhealthyThreshold", 2),
                ("healthyThreshold", 2),
            ] {
                let v = int_or(&m, f, d);
                m.insert(f.into(), json!(v));
            }
            if int_or(&m, "timeoutSec", 5) > int_or(&m, "checkIntervalSec", 5) {
                return Err(ApiError::Invalid("Invalid value for field 'resource.timeoutSec': must be less than or equal to checkIntervalSec".into()));
            }
        }
        Kind::HealthCheck => {
            let ty = match m.get("type").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None if m.contains_key("httpHealthCheck") => "HTTP".into(),
                None => return Err(ApiError::Required("resource.type".into())),
            };
            let sub = match ty.as_str() {
                "HTTP" => "httpHealthCheck",
                "HTTPS" => "httpsHealthCheck",
                "HTTP2" => "http2HealthCheck",
                "TCP" => "tcpHealthCheck",
                "SSL" => "sslHealthCheck",
                "GRPC" => "grpcHealthCheck",
                other => {
                    return Err(ApiError::Invalid(format!(
                        "Invalid value for field 'resource.type': '{}'",
                        other.chars().take(40).collect::<String>()
                    )));
                }
            };
            m.insert("type".into(), json!(ty));
            let mut s = m
                .get(sub)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            match s.get("port") {
                None => {
                    if s.get("portSpecification").and_then(Value::as_str)
                        != Some("USE_SERVING_PORT")
                    {
                        s.insert("port".into(), json!(80));
                    }
                }
                Some(p) if p.as_u64().is_some_and(|p| (1..=65535).contains(&p)) => {}
                Some(p) => {
                    return Err(ApiError::Invalid(format!(
                        "Invalid value for field 'resource.{sub}.port': {}",
                        truncate(p)
                    )));
                }
            }
            if sub.starts_with("http") && !s.contains_key("requestPath") {
                s.insert("requestPath".into(), json!("/"));
            }
            if !s.contains_key("proxyHeader") && sub != "grpcHealthCheck" {
                s.insert("proxyHeader".into(), json!("NONE"));
            }
            m.insert(sub.into(), Value::Object(s));
            for (f, d) in [
                ("checkIntervalSec", 5),
                ("timeoutSec", 5),
                ("unhealthyThreshold", 2),
                ("healthyThreshold", 2),
            ] {
                let v = int_or(&m, f, d);
                m.insert(f.into(), json!(v));
            }
        }
        Kind::Firewall => prepare_firewall(cloud, &mut m)?,
        Kind::Route => prepare_route(cloud, &mut m)?,
        Kind::Network | Kind::Subnetwork => {}
    }
    let created = existing
        .and_then(|e| e.get("creationTimestamp").cloned())
        .unwrap_or_else(|| json!(now_rfc3339()));
    m.insert(
        "kind".into(),
        json!(format!("compute#{}", key.kind.singular())),
    );
    m.insert("id".into(), json!(id.to_string()));
    m.insert("name".into(), json!(key.name));
    m.insert("creationTimestamp".into(), created);
    m.insert("selfLink".into(), json!(ctx.key_url(key)));
    if let Some(u) = ctx.scope_url(&key.scope) {
        m.insert("region".into(), json!(u));
    }
    if !m.contains_key("description") {
        m.insert("description".into(), json!(""));
    }
    Ok(Value::Object(m))
}

fn prepare_address(cloud: &Cloud, key: &Key, m: &mut Map<String, Value>) -> Result<(), ApiError> {
    let ty = one_of(m, "addressType", &["EXTERNAL", "INTERNAL"], "EXTERNAL")?;
    let tier = one_of(m, "networkTier", &["PREMIUM", "STANDARD"], "PREMIUM")?;
    let ip = match m.get("address").and_then(Value::as_str) {
        Some(s) => {
            let ip: Ipv4Addr = s.parse().map_err(|_| {
                ApiError::Invalid(format!("Invalid value for field 'resource.address': '{}'. Must be a valid IPv4 address", s.chars().take(60).collect::<String>()))
            })?;
            // An address held by a forwarding rule may be promoted to static; one held by
            // another address or an instance may not.
            let held = cloud
                .docs_of(Kind::Address, None)
                .into_iter()
                .any(|(k, d)| k != key && d.value["address"].as_str() == Some(s))
                || cloud.instances.values().any(|i| i.holds(ip));
            if held {
                return Err(ApiError::BadRequest(format!(
                    "IP_IN_USE_BY_ANOTHER_RESOURCE: the IP address {ip} is already being used by another resource"
                )));
            }
            ip
        }
        None => {
            let pool = if ty == "INTERNAL" {
                INTERNAL_POOL
            } else {
                EXTERNAL_POOL
            };
            cloud.allocate(pool).ok_or_else(|| {
                ApiError::BadRequest("IP_SPACE_EXHAUSTED: no free address left".into())
            })?
        }
    };
    m.insert("address".into(), json!(ip.to_string()));
    m.insert("addressType".into(), json!(ty));
    if ty == "EXTERNAL" {
        m.insert("networkTier".into(), json!(tier));
    } else {
        m.insert("subnetwork".into(), json!(cloud.ctx.subnetwork_url()));
        m.insert("purpose".into(), json!("GCE_ENDPOINT"));
    }
    Ok(())
}

fn prepare_forwarding_rule(
    cloud: &Cloud,
    key: &Key,
    m: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let proto = one_of(
        m,
        "IPProtocol",
        &["TCP", "UDP", "ESP", "AH", "SCTP", "ICMP", "L3_DEFAULT"],
        "TCP",
    )?;
    let scheme = one_of(
        m,
        "loadBalancingScheme",
        &[
            "EXTERNAL",
            "EXTERNAL_MANAGED",
            "INTERNAL",
            "INTERNAL_MANAGED",
            "INTERNAL_SELF_MANAGED",
        ],
        "EXTERNAL",
    )?;
    let tier = one_of(m, "networkTier", &["PREMIUM", "STANDARD"], "PREMIUM")?;
    let mut ports: Vec<(u16, u16)> = Vec::new();
    match (
        m.get("portRange").and_then(Value::as_str),
        m.get("ports").and_then(Value::as_array),
    ) {
        (Some(_), Some(_)) => {
            return Err(ApiError::Invalid(
                "Only one of portRange and ports may be set".into(),
            ));
        }
        (Some(r), None) => {
            let (a, b) = parse_port_range(r).ok_or_else(|| {
                ApiError::Invalid(format!(
                    "Invalid value for field 'resource.portRange': '{}'",
                    r.chars().take(40).collect::<String>()
                ))
            })?;
            m.insert("portRange".into(), json!(format!("{a}-{b}")));
            ports.push((a, b));
        }
        (None, Some(list)) => {
            if list.len() > 5 {
                return Err(ApiError::Invalid(
                    "Invalid value for field 'resource.ports': at most 5 ports".into(),
                ));
            }
            for p in list.iter().filter_map(Value::as_str) {
                let r = parse_port_range(p).filter(|(a, b)| a == b).ok_or_else(|| {
                    ApiError::Invalid(format!(
                        "Invalid value for field 'resource.ports': '{}'",
                        p.chars().take(40).collect::<String>()
                    ))
                })?;
                ports.push(r);
            }
        }
        (None, None) => ports.push((1, 65535)),
    }
    if m.get("backendService").is_some() {
        let s = m
            .get("backendService")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(ApiError::NotFound(
            parse_ref(cloud, s, "backendService")?.relative(&cloud.ctx.project),
        ));
    }
    if let Some(t) = m.get("target").and_then(Value::as_str) {
        let u = target_pool_ref(cloud, t, &key.scope)?;
        m.insert("target".into(), json!(u));
    }
    let internal = scheme.starts_with("INTERNAL");
    let ip = match m.get("IPAddress").and_then(Value::as_str) {
        Some(s) if s.parse::<Ipv4Addr>().is_ok() => s.parse::<Ipv4Addr>().ok(),
        Some(s) => {
            let u = resource_ref(cloud, s, Kind::Address, &key.scope)?;
            let r = path::parse_ref(&u).map_err(|_| ApiError::Invalid("IPAddress".into()))?;
            cloud
                .docs
                .get(&key_for(Kind::Address, &r.scope, &r.name))
                .and_then(|d| d.value["address"].as_str())
                .and_then(|a| a.parse().ok())
        }
        None => None,
    };
    let ip = match ip {
        Some(ip) => {
            if cloud.instances.values().any(|i| i.holds(ip)) {
                return Err(ApiError::BadRequest(format!(
                    "IP_IN_USE_BY_ANOTHER_RESOURCE: {ip} is an instance's address"
                )));
            }
            for (k, d) in cloud.docs_of(Kind::ForwardingRule, None) {
                if k == key
                    || d.value["IPAddress"].as_str() != Some(&ip.to_string())
                    || d.value["IPProtocol"].as_str() != Some(&proto)
                {
                    continue;
                }
                let theirs = rule_ports(&d.value);
                if ports
                    .iter()
                    .any(|(a, b)| theirs.iter().any(|(c, e)| a <= e && c <= b))
                {
                    return Err(ApiError::BadRequest(format!(
                        "IP_IN_USE_BY_ANOTHER_RESOURCE: {ip} {proto} ports are used by '{}'",
                        cloud.ctx.key_rel(k)
                    )));
                }
            }
            ip
        }
        None => {
            let pool = if internal {
                INTERNAL_POOL
            } else {
                EXTERNAL_POOL
            };
            cloud.allocate(pool).ok_or_else(|| {
                ApiError::BadRequest("IP_SPACE_EXHAUSTED: no free address left".into())
            })?
        }
    };
    m.insert("IPAddress".into(), json!(ip.to_string()));
    m.insert("IPProtocol".into(), json!(proto));
    m.insert("loadBalancingScheme".into(), json!(scheme));
    if internal {
        let net = network_ref(cloud, m.get("network"))?;
        m.insert("network".into(), json!(net));
        m.insert("subnetwork".into(), json!(cloud.ctx.subnetwork_url()));
    } else {
        m.insert("networkTier".into(), json!(tier));
    }
    m.insert(
        "fingerprint".into(),
        json!(byte_fingerprint(
            cloud.next_id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )),
    );
    Ok(())
}

/// A forwarding rule's port ranges (`portRange`, else `ports`, else all).
pub fn rule_ports(v: &Value) -> Vec<(u16, u16)> {
    if let Some(r) = v["portRange"].as_str().and_then(parse_port_range) {
        return vec![r];
    }
    let list: Vec<(u16, u16)> = v["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().and_then(parse_port_range))
        .collect();
    if list.is_empty() {
        vec![(1, 65535)]
    } else {
        list
    }
}

fn cidrs(m: &Map<String, Value>, field: &str) -> Result<(), ApiError> {
    for s in m
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if Cidr::parse(s).is_err() {
            return Err(ApiError::Invalid(format!(
                "Invalid value for field 'resource.{field}': '{}'. Must be a CIDR address range",
                s.chars().take(60).collect::<String>()
            )));
        }
    }
    Ok(())
}

const FIREWALL_PROTOCOLS: &[&str] = &["tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"];

fn prepare_firewall(cloud: &Cloud, m: &mut Map<String, Value>) -> Result<(), ApiError> {
    let net = network_ref(cloud, m.get("network"))?;
    m.insert("network".into(), json!(net));
    let direction = one_of(m, "direction", &["INGRESS", "EGRESS"], "INGRESS")?;
    m.insert("direction".into(), json!(direction));
    let priority = int_or(m, "priority", 1000);
    m.insert("priority".into(), json!(priority));
    cidrs(m, "sourceRanges")?;
    cidrs(m, "destinationRanges")?;
    let nonempty = |m: &Map<String, Value>, f: &str| {
        m.get(f)
            .and_then(Value::as_array)
            .is_some_and(|l| !l.is_empty())
    };
    match (nonempty(m, "allowed"), nonempty(m, "denied")) {
        (true, true) => {
            return Err(ApiError::Invalid(
                "Only one of allowed and denied may be set".into(),
            ));
        }
        (false, false) => return Err(ApiError::Required("resource.allowed".into())),
        _ => {}
    }
    for field in ["allowed", "denied"] {
        for rule in m.get(field).and_then(Value::as_array).into_iter().flatten() {
            let proto = match rule.get("IPProtocol") {
                Some(Value::String(p)) => p.to_ascii_lowercase(),
                None => return Err(ApiError::Required(format!("resource.{field}[].IPProtocol"))),
                Some(other) => {
                    return Err(ApiError::Invalid(format!(
                        "Invalid value for field 'resource.{field}[].IPProtocol': {}",
                        truncate(other)
                    )));
                }
            };
            let numeric = proto.parse::<u8>().is_ok();
            if !FIREWALL_PROTOCOLS.contains(&proto.as_str()) && !numeric {
                return Err(ApiError::Invalid(format!(
                    "Invalid value for field 'resource.{field}[].IPProtocol': '{}'",
                    proto.chars().take(30).collect::<String>()
                )));
            }
            if let Some(k) = rule
                .as_object()
                .and_then(|o| o.keys().find(|k| *k != "IPProtocol" && *k != "ports"))
            {
                return Err(ApiError::Invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{}\"",
                    k.chars().take(60).collect::<String>()
                )));
            }
            match rule.get("ports") {
                None => {}
                Some(Value::Array(ports)) => {
                    if !ports.is_empty()
                        && !matches!(proto.as_str(), "tcp" | "udp" | "sctp" | "all")
                    {
                        return Err(ApiError::Invalid(format!(
                            "Ports may only be given for tcp, udp or sctp, not {proto}"
                        )));
                    }
                    for p in ports {
                        if p.as_str().is_none_or(|s| parse_port_range(s).is_none()) {
                            return Err(ApiError::Invalid(format!(
                                "Invalid value for field 'resource.{field}[].ports[]': {}",
                                truncate(p)
                            )));
                        }
                    }
                }
                Some(other) => {
                    return Err(ApiError::Invalid(format!(
                        "Invalid value for field 'resource.{field}[].ports': {}",
                        truncate(other)
                    )));
                }
            }
        }
    }
    if direction == "INGRESS"
        && !nonempty(m, "sourceRanges")
        && !nonempty(m, "sourceTags")
        && !nonempty(m, "sourceServiceAccounts")
    {
        m.insert("sourceRanges".into(), json!(["0.0.0.0/0"]));
    }
    if direction == "EGRESS" && !nonempty(m, "destinationRanges") {
        m.insert("destinationRanges".into(), json!(["0.0.0.0/0"]));
    }
    m.entry("disabled").or_insert(json!(false));
    m.entry("logConfig").or_insert(json!({"enable": false}));
    Ok(())
}

fn prepare_route(cloud: &Cloud, m: &mut Map<String, Value>) -> Result<(), ApiError> {
    let Some(net) = m.get("network").cloned() else {
        return Err(ApiError::Required("resource.network".into()));
    };
    let net = network_ref(cloud, Some(&net))?;
    m.insert("network".into(), json!(net));
    match m.get("destRange").and_then(Value::as_str) {
        None => return Err(ApiError::Required("resource.destRange".into())),
        Some(d) if Cidr::parse(d).is_err() || !d.contains('/') => {
            return Err(ApiError::Invalid(format!(
                "Invalid value for field 'resource.destRange': '{}'",
                d.chars().take(60).collect::<String>()
            )));
        }
        Some(_) => {}
    }
    let hops: Vec<&str> = [
        "nextHopInstance",
        "nextHopIp",
        "nextHopGateway",
        "nextHopNetwork",
        "nextHopIlb",
        "nextHopVpnTunnel",
    ]
    .into_iter()
    .filter(|h| m.contains_key(*h))
    .collect();
    if hops.len() != 1 {
        return Err(ApiError::Invalid(
            "Exactly one next hop must be given".into(),
        ));
    }
    match hops[0] {
        "nextHopInstance" => {
            let s = m["nextHopInstance"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let r = parse_ref(cloud, &s, "nextHopInstance")?;
            let Scope::Zone(z) = &r.scope else {
                return Err(ApiError::Invalid(format!("'{s}' is not an instance")));
            };
            if r.collection != "instances" || cloud.instance_in(z, &r.name).is_none() {
                return Err(ApiError::NotFound(r.relative(&cloud.ctx.project)));
            }
            m.insert(
                "nextHopInstance".into(),
                json!(cloud.ctx.url(&format!("zones/{z}/instances/{}", r.name))),
            );
        }
        "nextHopIp"
            if m["nextHopIp"]
                .as_str()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
                .is_none() =>
        {
            return Err(ApiError::Invalid(
                "Invalid value for field 'resource.nextHopIp'".into(),
            ));
        }
        _ => {}
    }
    let priority = int_or(m, "priority", 1000);
    m.insert("priority".into(), json!(priority));
    m.insert("routeType".into(), json!("STATIC"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("80"), Some((80, 80)));
        assert_eq!(parse_port_range("80-90"), Some((80, 90)));
        assert_eq!(parse_port_range("90-80"), None);
        assert_eq!(parse_port_range("0"), None);
        assert_eq!(parse_port_range("65536"), None);
        assert_eq!(parse_port_range("+8"), None);
    }

    #[test]
    fn tokens_belong_to_their_listing() {
        let t = encode_token(5, fingerprint("l", "f"));
        assert_eq!(decode_token(&t, fingerprint("l", "f")), Some(5));
        assert_eq!(decode_token(&t, fingerprint("l", "g")), None);
        assert_eq!(decode_token("garbage", 1), None);
    }

    #[test]
    fn max_results_bounds() {
        assert!(list_query("maxResults=501", "x").is_err());
        assert_eq!(
            list_query("maxResults=0", "x").expect("q").max_results,
            MAX_RESULTS
        );
        assert!(list_query("filter=name%20%3E%201", "x").is_err());
    }
}
