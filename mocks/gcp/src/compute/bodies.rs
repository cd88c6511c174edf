//! What a write's body may hold and becomes: the references it names (full URLs,
//! `projects/...` or scope-relative paths, checked to exist where GCE checks), each
//! collection's field schema (unknown fields are 400 `invalid`, as the API's JSON front
//! end answers "Unknown name"), and the per-collection preparation that fills computed
//! fields and refuses what GCE refuses (addresses, forwarding rules, firewalls, routes).
//! Apart from the handlers because it is most of what an insert does, and none of how it
//! is served.

use std::net::Ipv4Addr;

use mock_cloud::Cidr;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::path::{self, Scope};
use crate::state::{Cloud, EXTERNAL_POOL, INTERNAL_POOL, Key, Kind, now_rfc3339};

use super::{byte_fingerprint, key_for};

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
pub(super) fn instance_ref(
    cloud: &Cloud,
    s: &str,
    pool: &Key,
    must_exist: bool,
) -> Result<String, ApiError> {
    let r = parse_ref(cloud, s, "instance")?;
    let Scope::Zone(z) = &r.scope else {
        return Err(ApiError::Invalid(format!("'{s}' is not an instance")));
    };
    if r.collection != "instances" {
        return Err(ApiError::Invalid(format!("'{s}' is not an instance")));
    }
    if let Scope::Region(region) = &pool.scope
        && crate::state::Ctx::zone_region(z) != region
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

pub(super) fn http_health_check_ref(cloud: &Cloud, s: &str) -> Result<String, ApiError> {
    resource_ref(cloud, s, Kind::HttpHealthCheck, &Scope::Global)
}

pub(super) fn target_pool_ref(cloud: &Cloud, s: &str, region: &Scope) -> Result<String, ApiError> {
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
pub(super) fn prepare(
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
}
