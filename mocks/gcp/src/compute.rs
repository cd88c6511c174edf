//! The Compute API handlers: locations, instances, the load-balancing and network
//! resources, operations; request parsing and rendering. How lists page and filter is in
//! `listing`, what a write's body may hold and becomes (references, field schemas,
//! per-collection checks) in `bodies`.
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use mock_cloud::Mode;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::path::{self, ApiPath, PathError, Scope, Target};
use crate::state::{Cloud, Doc, Instance, Key, Kind};
use crate::{BODY_LIMIT, Shared};

mod bodies;
mod listing;

use bodies::{http_health_check_ref, instance_ref, prepare, target_pool_ref};
pub use bodies::{parse_port_range, rule_ports};
use listing::{aggregated, list_reply};
#[cfg(test)]
pub(crate) use listing::{decode_token, encode_token, list_query, page};

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

pub(super) fn key_for(kind: Kind, scope: &Scope, name: &str) -> Key {
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
