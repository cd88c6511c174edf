//! Octavia's attribute tables: per kind, which fields a body may carry, of which type,
//! required on create or updatable, and the defaults Octavia fills in; plus the checks of
//! a create or update body against them (WSME's wording). Kept apart from the state
//! machine in `state` because they are data, and long.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::error::{LbError, invalid};
use super::model::Kind;

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Int(i64, i64),
    Bool,
    StrList,
    Obj,
    Enum(&'static [&'static str]),
    Ip,
    /// Stored as given (nested objects of the fully-populated create are taken out first).
    Any,
}

const REQ: u8 = 1;
const UPD: u8 = 2;

type Table = &'static [(&'static str, Ty, u8)];

const LISTENER_PROTOCOLS: &[&str] = &[
    "HTTP",
    "HTTPS",
    "TCP",
    "TERMINATED_HTTPS",
    "UDP",
    "SCTP",
    "PROMETHEUS",
];
const POOL_PROTOCOLS: &[&str] = &["HTTP", "HTTPS", "PROXY", "PROXYV2", "TCP", "UDP", "SCTP"];
const ALGORITHMS: &[&str] = &[
    "ROUND_ROBIN",
    "LEAST_CONNECTIONS",
    "SOURCE_IP",
    "SOURCE_IP_PORT",
];
const MONITOR_TYPES: &[&str] = &[
    "HTTP",
    "HTTPS",
    "PING",
    "TCP",
    "TLS-HELLO",
    "UDP-CONNECT",
    "SCTP",
];
const HTTP_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "PATCH", "CONNECT",
];

const COMMON: Table = &[
    ("name", Ty::Str, UPD),
    ("description", Ty::Str, UPD),
    ("admin_state_up", Ty::Bool, UPD),
    ("tags", Ty::StrList, UPD),
    ("project_id", Ty::Str, 0),
    ("tenant_id", Ty::Str, 0),
];

const LB_FIELDS: Table = &[
    ("vip_address", Ty::Ip, 0),
    ("vip_port_id", Ty::Str, 0),
    ("vip_subnet_id", Ty::Str, 0),
    ("vip_network_id", Ty::Str, 0),
    ("vip_qos_policy_id", Ty::Str, UPD),
    ("vip_sg_ids", Ty::StrList, 0),
    ("additional_vips", Ty::Any, 0),
    ("provider", Ty::Str, 0),
    ("flavor_id", Ty::Str, 0),
    ("availability_zone", Ty::Str, 0),
];

const LISTENER_FIELDS: Table = &[
    ("loadbalancer_id", Ty::Str, REQ),
    ("protocol", Ty::Enum(LISTENER_PROTOCOLS), REQ),
    ("protocol_port", Ty::Int(1, 65535), REQ),
    ("connection_limit", Ty::Int(-1, i64::MAX), UPD),
    ("default_pool_id", Ty::Str, UPD),
    ("default_tls_container_ref", Ty::Str, UPD),
    ("sni_container_refs", Ty::StrList, UPD),
    ("insert_headers", Ty::Obj, UPD),
    ("timeout_client_data", Ty::Int(0, 31_536_000_000), UPD),
    ("timeout_member_connect", Ty::Int(0, 31_536_000_000), UPD),
    ("timeout_member_data", Ty::Int(0, 31_536_000_000), UPD),
    ("timeout_tcp_inspect", Ty::Int(0, 31_536_000_000), UPD),
    ("allowed_cidrs", Ty::StrList, UPD),
    (
        "client_authentication",
        Ty::Enum(&["NONE", "OPTIONAL", "MANDATORY"]),
        UPD,
    ),
    ("client_ca_tls_container_ref", Ty::Str, UPD),
    ("client_crl_container_ref", Ty::Str, UPD),
    ("tls_ciphers", Ty::Str, UPD),
    ("tls_versions", Ty::StrList, UPD),
    ("alpn_protocols", Ty::StrList, UPD),
    ("hsts_max_age", Ty::Int(0, i64::MAX), UPD),
    ("hsts_include_subdomains", Ty::Bool, UPD),
    ("hsts_preload", Ty::Bool, UPD),
    ("l7policies", Ty::Any, 0),
];

const POOL_FIELDS: Table = &[
    ("loadbalancer_id", Ty::Str, 0),
    ("listener_id", Ty::Str, 0),
    ("protocol", Ty::Enum(POOL_PROTOCOLS), REQ),
    ("lb_algorithm", Ty::Enum(ALGORITHMS), REQ | UPD),
    ("session_persistence", Ty::Obj, UPD),
    ("tls_enabled", Ty::Bool, UPD),
    ("tls_container_ref", Ty::Str, UPD),
    ("ca_tls_container_ref", Ty::Str, UPD),
    ("crl_container_ref", Ty::Str, UPD),
    ("tls_ciphers", Ty::Str, UPD),
    ("tls_versions", Ty::StrList, UPD),
    ("alpn_protocols", Ty::StrList, UPD),
];

const MEMBER_FIELDS: Table = &[
    ("address", Ty::Ip, REQ),
    ("protocol_port", Ty::Int(1, 65535), REQ),
    ("weight", Ty::Int(0, 256), UPD),
    ("backup", Ty::Bool, UPD),
    ("subnet_id", Ty::Str, 0),
    ("monitor_address", Ty::Ip, UPD),
    ("monitor_port", Ty::Int(1, 65535), UPD),
    ("request_sriov", Ty::Bool, 0),
];

const MONITOR_FIELDS: Table = &[
    ("pool_id", Ty::Str, REQ),
    ("type", Ty::Enum(MONITOR_TYPES), REQ),
    ("delay", Ty::Int(0, i32::MAX as i64), REQ | UPD),
    ("timeout", Ty::Int(0, i32::MAX as i64), REQ | UPD),
    ("max_retries", Ty::Int(1, 10), REQ | UPD),
    ("max_retries_down", Ty::Int(1, 10), UPD),
    ("http_method", Ty::Enum(HTTP_METHODS), UPD),
    ("url_path", Ty::Str, UPD),
    ("expected_codes", Ty::Str, UPD),
    ("http_version", Ty::Any, UPD),
    ("domain_name", Ty::Str, UPD),
];

fn table(kind: Option<Kind>) -> Table {
    match kind {
        None => LB_FIELDS,
        Some(Kind::Listener) => LISTENER_FIELDS,
        Some(Kind::Pool) => POOL_FIELDS,
        Some(Kind::Member) => MEMBER_FIELDS,
        Some(Kind::Monitor) => MONITOR_FIELDS,
    }
}

fn lookup(kind: Option<Kind>, field: &str) -> Option<(Ty, u8)> {
    COMMON
        .iter()
        .chain(table(kind).iter())
        .find(|(name, _, _)| *name == field)
        .map(|(_, ty, flags)| (*ty, *flags))
}

/// WSME's wording for a bad value (`wsme/exc.py` InvalidInput).
pub(super) fn bad_value(field: &str, value: &Value, why: &str) -> LbError {
    invalid(format!(
        "Invalid input for field/attribute {field}. Value: '{value}'. {why}"
    ))
}

fn check_value(field: &str, ty: Ty, value: &Value) -> Result<(), LbError> {
    if value.is_null() {
        return Ok(());
    }
    let ok = match ty {
        Ty::Str => value.is_string(),
        Ty::Bool => value.is_boolean(),
        Ty::Obj => value.is_object(),
        Ty::Any => true,
        Ty::StrList => value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string)),
        Ty::Ip => value.as_str().is_some_and(|s| s.parse::<IpAddr>().is_ok()),
        Ty::Enum(allowed) => {
            if !value.as_str().is_some_and(|s| allowed.contains(&s)) {
                return Err(bad_value(
                    field,
                    value,
                    &format!("Value should be one of: {}", allowed.join(", ")),
                ));
            }
            true
        }
        Ty::Int(min, max) => match value.as_i64() {
            Some(n) if n < min => {
                return Err(bad_value(
                    field,
                    value,
                    &format!("Value should be greater or equal to {min}"),
                ));
            }
            Some(n) if n > max => {
                return Err(bad_value(
                    field,
                    value,
                    &format!("Value should be lower or equal to {max}"),
                ));
            }
            Some(_) => true,
            None => false,
        },
    };
    if ok {
        Ok(())
    } else {
        Err(bad_value(field, value, "Wrong type."))
    }
}

/// Checks a create body: known fields of the right type, required ones present (except
/// those in `implied`, which the URL or the parent supplies).
pub(super) fn check_create(
    kind: Option<Kind>,
    body: &Map<String, Value>,
    implied: &[&str],
) -> Result<(), LbError> {
    for (field, value) in body {
        let (ty, _) = lookup(kind, field)
            .ok_or_else(|| invalid(format!("Unknown attribute for argument: {field}")))?;
        check_value(field, ty, value)?;
    }
    for (field, _, flags) in COMMON.iter().chain(table(kind).iter()) {
        if flags & REQ != 0
            && !implied.contains(field)
            && body.get(*field).is_none_or(Value::is_null)
        {
            return Err(invalid(format!(
                "Invalid input for field/attribute {field}. Value: 'Unset'. Mandatory field missing."
            )));
        }
    }
    Ok(())
}

pub(super) fn check_update(kind: Option<Kind>, body: &Map<String, Value>) -> Result<(), LbError> {
    for (field, value) in body {
        let (ty, flags) = lookup(kind, field)
            .ok_or_else(|| invalid(format!("Unknown attribute for argument: {field}")))?;
        if flags & UPD == 0 {
            return Err(invalid(format!("Attribute {field} cannot be updated.")));
        }
        check_value(field, ty, value)?;
    }
    Ok(())
}

pub(super) fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// Defaults Octavia fills in (`octavia/api/v2/types/*.py`).
pub(super) fn defaults(kind: Option<Kind>) -> Map<String, Value> {
    let v = match kind {
        None => json!({"name": "", "description": "", "admin_state_up": true, "tags": [],
            "provider": "amphora", "flavor_id": null, "availability_zone": null,
            "vip_qos_policy_id": null, "additional_vips": [], "vip_vnic_type": "normal"}),
        Some(Kind::Listener) => json!({"name": "", "description": "", "admin_state_up": true,
            "tags": [], "connection_limit": -1, "default_pool_id": null,
            "default_tls_container_ref": null, "sni_container_refs": [], "insert_headers": {},
            "timeout_client_data": 50000, "timeout_member_connect": 5000,
            "timeout_member_data": 50000, "timeout_tcp_inspect": 0, "allowed_cidrs": null,
            "client_authentication": "NONE", "client_ca_tls_container_ref": null,
            "client_crl_container_ref": null, "tls_ciphers": null, "tls_versions": null,
            "alpn_protocols": null, "l7policies": [], "hsts_max_age": null,
            "hsts_include_subdomains": false, "hsts_preload": false}),
        Some(Kind::Pool) => json!({"name": "", "description": "", "admin_state_up": true,
            "tags": [], "session_persistence": null, "tls_enabled": false,
            "tls_container_ref": null, "ca_tls_container_ref": null, "crl_container_ref": null,
            "tls_ciphers": null, "tls_versions": null, "alpn_protocols": null}),
        Some(Kind::Member) => json!({"name": "", "admin_state_up": true, "tags": [],
            "weight": 1, "backup": false, "subnet_id": null, "monitor_address": null,
            "monitor_port": null, "vnic_type": "normal"}),
        Some(Kind::Monitor) => json!({"name": "", "admin_state_up": true, "tags": [],
            "max_retries_down": 3, "http_method": null, "url_path": null,
            "expected_codes": null, "http_version": null, "domain_name": null}),
    };
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Fields that are relations or computed, never stored in `attrs`.
const NOT_STORED: &[&str] = &[
    "loadbalancer_id",
    "listener_id",
    "pool_id",
    "project_id",
    "tenant_id",
    "vip_address",
    "vip_port_id",
    "vip_subnet_id",
    "vip_network_id",
    "vip_sg_ids",
];

pub(super) fn merge(attrs: &mut Map<String, Value>, body: &Map<String, Value>) {
    for (k, v) in body {
        if !NOT_STORED.contains(&k.as_str()) {
            attrs.insert(k.clone(), v.clone());
        }
    }
}

pub(super) fn as_object(value: &Value, what: &str) -> Result<Map<String, Value>, LbError> {
    value
        .as_object()
        .cloned()
        .ok_or_else(|| invalid(format!("Invalid input for {what}: expected an object")))
}

pub(super) fn take_list(
    body: &mut Map<String, Value>,
    key: &str,
) -> Result<Vec<Map<String, Value>>, LbError> {
    match body.remove(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|i| as_object(i, key)).collect(),
        Some(other) => Err(bad_value(key, &other, "Value should be a list.")),
    }
}

pub(super) fn take_object(
    body: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<Map<String, Value>>, LbError> {
    match body.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => as_object(&v, key).map(Some),
    }
}

/// A fully-populated create's children, validated before anything is stored.
pub(super) struct TreeListener {
    pub(super) body: Map<String, Value>,
    pub(super) pool: Option<TreePool>,
}

pub(super) struct TreePool {
    pub(super) body: Map<String, Value>,
    pub(super) members: Vec<Map<String, Value>>,
    pub(super) monitor: Option<Map<String, Value>>,
}

pub(super) fn parse_tree_pool(mut body: Map<String, Value>) -> Result<TreePool, LbError> {
    let members = take_list(&mut body, "members")?;
    let monitor = take_object(&mut body, "healthmonitor")?;
    check_create(Some(Kind::Pool), &body, &[])?;
    for m in &members {
        check_create(Some(Kind::Member), m, &[])?;
    }
    if let Some(hm) = &monitor {
        check_create(Some(Kind::Monitor), hm, &["pool_id"])?;
    }
    Ok(TreePool {
        body,
        members,
        monitor,
    })
}
