//! Field validation that upstream runs on every create and update of the kinds a CCM
//! touches, found missing by the differential corpus (`tests/differential/corpus.json`):
//! label keys and values, ConfigMap and Secret keys, TLS Secret keys, Node taints, Service
//! ports and types, load-balancer ingress IPs, Lease durations, EndpointSlice address types
//! and the namespace of an Event's object. Field paths and cause reasons follow upstream
//! (kubernetes pkg/apis/core/validation/validation.go and events.go,
//! pkg/apis/coordination/validation, pkg/apis/discovery/validation, apimachinery
//! pkg/api/validation/objectmeta.go and pkg/util/validation/validation.go); the messages
//! are our own wording of the same rule.

use serde_json::Value;

use base64::Engine as _;

use crate::error::{ApiError, Cause};
use crate::resources::ResourceDesc;

/// The causes of a 422 for `obj`, a create or the new state of an update.
pub fn validate(desc: &ResourceDesc, obj: &Value) -> Vec<Cause> {
    let mut causes = labels(obj);
    match (desc.group, desc.kind) {
        ("", "ConfigMap") => {
            for key in ["data", "binaryData"] {
                config_keys(obj, key, &mut causes);
            }
            config_map_size(obj, &mut causes);
        }
        ("", "Secret") => {
            config_keys(obj, "data", &mut causes);
            if str_at(obj, "/type") == "kubernetes.io/tls" {
                for key in ["tls.crt", "tls.key"] {
                    if obj.pointer("/data").and_then(|d| d.get(key)).is_none() {
                        causes.push(Cause::required(&format!("data[{key}]"), ""));
                    }
                }
            }
        }
        ("", "Node") => taints(obj, &mut causes),
        ("", "Service") => service(obj, &mut causes),
        ("", "Event") => event_namespace(obj, "/involvedObject/namespace", &mut causes),
        ("events.k8s.io", "Event") => {
            event_namespace(obj, "/regarding/namespace", &mut causes);
        }
        ("coordination.k8s.io", "Lease") => {
            if let Some(d) = obj
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64)
                && d <= 0
            {
                causes.push(Cause::invalid_rendered(
                    "spec.leaseDurationSeconds",
                    &d.to_string(),
                    "must be greater than 0",
                ));
            }
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            let t = str_at(obj, "/addressType");
            let supported = ["FQDN", "IPv4", "IPv6"];
            if !supported.contains(&t) {
                causes.push(Cause::not_supported("addressType", t, &supported));
            }
        }
        _ => {}
    }
    causes
}

/// What upstream's decoder refuses before validation, as a 400: a Secret's `data` values
/// must be standard base64 (`[]byte` fields in JSON).
pub fn decode(desc: &ResourceDesc, obj: &Value) -> Result<(), ApiError> {
    if (desc.group, desc.kind) != ("", "Secret") {
        return Ok(());
    }
    let data = obj.get("data").and_then(Value::as_object);
    for value in data.into_iter().flat_map(|d| d.values()) {
        let Some(text) = value.as_str() else {
            continue;
        };
        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(text) {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _) => at,
                base64::DecodeError::InvalidLastSymbol(at, _) => at,
                _ => text.len(),
            };
            return Err(ApiError::BadRequest(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {at}"
            )));
        }
    }
    Ok(())
}

/// Update-only rules: a Secret's type is immutable (`ValidateSecretUpdate`).
pub fn validate_update(desc: &ResourceDesc, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if (desc.group, desc.kind) == ("", "Secret") {
        let (was, is) = (
            str_or(old, "/type", "Opaque"),
            str_or(new, "/type", "Opaque"),
        );
        if was != is {
            causes.push(Cause::invalid("type", is, "field is immutable"));
        }
    }
    causes
}

fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn str_or<'a>(obj: &'a Value, ptr: &str, default: &'a str) -> &'a str {
    obj.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(default)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: alphanumerics inside, `-`, `_`, `.` allowed
/// in between.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// Why `s` is not a qualified name (`prefix/name` or `name`), as upstream lists it: an
/// empty name part fails both the emptiness and the pattern check.
fn qualified_name_errors(s: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty");
            } else if !is_dns_subdomain(prefix) {
                errors.push("prefix part must be a lowercase DNS subdomain");
            }
            *name
        }
        _ => {
            errors.push("a qualified name is an optional DNS subdomain prefix, '/', and a name");
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty");
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters");
    }
    if !is_name_part(name) {
        errors.push(
            "name part must be alphanumeric characters, '-', '_' or '.', starting and ending \
             with an alphanumeric character",
        );
    }
    errors
}

/// `metadata.labels`: qualified-name keys, values empty or name-part-like of at most 63.
fn labels(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) else {
        return causes;
    };
    for (key, value) in labels {
        for e in qualified_name_errors(key) {
            causes.push(Cause::invalid("metadata.labels", key, e));
        }
        let value = value.as_str().unwrap_or("");
        if value.len() > 63 {
            causes.push(Cause::invalid(
                "metadata.labels",
                value,
                "must be no more than 63 characters",
            ));
        }
        if !value.is_empty() && !is_name_part(value) {
            causes.push(Cause::invalid(
                "metadata.labels",
                value,
                "a label value must be empty or alphanumeric characters, '-', '_' or '.', \
                 starting and ending with an alphanumeric character",
            ));
        }
    }
    causes
}

/// Keys of a ConfigMap's or Secret's data: `[-._a-zA-Z0-9]+`, at most 253, not `.`/`..`.
fn config_keys(obj: &Value, field: &str, causes: &mut Vec<Cause>) {
    let Some(map) = obj.get(field).and_then(Value::as_object) else {
        return;
    };
    for key in map.keys() {
        let path = format!("{field}[{key}]");
        let charset = !key.is_empty()
            && key
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
        if !charset {
            causes.push(Cause::invalid(
                &path,
                key,
                "a config key must be alphanumeric characters, '-', '_' or '.'",
            ));
        } else if key.len() > 253 {
            causes.push(Cause::invalid(
                &path,
                key,
                "must be no more than 253 characters",
            ));
        } else if key == "." || key == ".." {
            causes.push(Cause::invalid(&path, key, "must not be '.' or '..'"));
        }
    }
}

/// A ConfigMap holds at most 1 MiB of values (`data` plus decoded `binaryData`); upstream
/// reports it on the empty path, which renders as `[]`.
fn config_map_size(obj: &Value, causes: &mut Vec<Cause>) {
    const MAX: usize = 1024 * 1024;
    let strings = |key: &str| {
        obj.get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
    };
    let text: usize = strings("data").iter().map(|v| v.len()).sum();
    let binary: usize = strings("binaryData").iter().map(|v| v.len() / 4 * 3).sum();
    if text + binary > MAX {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {MAX} bytes"),
            field: "[]".into(),
        });
    }
}

/// Node taints: a qualified-name key and a known effect. Upstream reports them under
/// `metadata.taints`, not `spec.taints` (`ValidateNodeSpecificAnnotations` shares the
/// path), and so does this.
fn taints(obj: &Value, causes: &mut Vec<Cause>) {
    let taints = obj.pointer("/spec/taints").and_then(Value::as_array);
    for (i, taint) in taints.into_iter().flatten().enumerate() {
        let key = str_at(taint, "/key");
        for e in qualified_name_errors(key) {
            causes.push(Cause::invalid(&format!("metadata.taints[{i}].key"), key, e));
        }
        let effect = str_at(taint, "/effect");
        let supported = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        if !supported.contains(&effect) {
            causes.push(Cause::not_supported(
                &format!("metadata.taints[{i}].effect"),
                effect,
                &supported,
            ));
        }
    }
}

fn valid_port(v: Option<&Value>) -> Option<bool> {
    v.and_then(Value::as_i64).map(|p| (1..=65535).contains(&p))
}

/// Service ports (names when more than one, port and numeric targetPort ranges), type,
/// duplicate port/protocol pairs, and load-balancer ingress IPs.
fn service(obj: &Value, causes: &mut Vec<Cause>) {
    let ports: &[Value] = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let range = "must be between 1 and 65535, inclusive";
    for (i, port) in ports.iter().enumerate() {
        let path = |f: &str| format!("spec.ports[{i}].{f}");
        if ports.len() > 1 && str_at(port, "/name").is_empty() {
            causes.push(Cause::required(&path("name"), ""));
        }
        if valid_port(port.get("port")) == Some(false) {
            causes.push(Cause::invalid_rendered(
                &path("port"),
                &port["port"].to_string(),
                range,
            ));
        }
        if valid_port(port.get("targetPort")) == Some(false) {
            causes.push(Cause::invalid_rendered(
                &path("targetPort"),
                &port["targetPort"].to_string(),
                range,
            ));
        }
    }
    let t = str_or(obj, "/spec/type", "ClusterIP");
    let supported = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !supported.contains(&t) {
        causes.push(Cause::not_supported("spec.type", t, &supported));
    }
    let mut seen = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let key = (port.get("port").cloned(), str_or(port, "/protocol", "TCP"));
        if seen.contains(&key) {
            causes.push(Cause {
                reason: "FieldValueDuplicate".into(),
                message: format!(
                    "Duplicate value: port {} and protocol {}",
                    rendered(&key.0),
                    key.1
                ),
                field: format!("spec.ports[{i}]"),
            });
        } else {
            seen.push(key);
        }
    }
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    // Only a LoadBalancer Service may carry load-balancer ingress
    // (`ValidateLoadBalancerStatus`).
    if ingress.is_some_and(|i| !i.is_empty()) && t != "LoadBalancer" {
        causes.push(Cause::forbidden(
            "status.loadBalancer.ingress",
            "may only be used when `spec.type` is 'LoadBalancer'",
        ));
    }
    for (i, ing) in ingress.into_iter().flatten().enumerate() {
        let ip = str_at(ing, "/ip");
        if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
            causes.push(Cause::invalid(
                &format!("status.loadBalancer.ingress[{i}].ip"),
                ip,
                "must be a valid IP address",
            ));
        }
    }
}

fn rendered(v: &Option<Value>) -> String {
    v.as_ref().map_or_else(|| "null".into(), Value::to_string)
}

/// An Event lives in its object's namespace; one about a cluster-scoped object (no
/// namespace) lives in `default` (or, for new-style events with an eventTime,
/// `kube-system` too).
fn event_namespace(obj: &Value, object_ns: &str, causes: &mut Vec<Cause>) {
    let ns = str_at(obj, "/metadata/namespace");
    let theirs = str_at(obj, object_ns);
    let new_style = !str_at(obj, "/eventTime").is_empty();
    let ok = match (theirs.is_empty(), new_style) {
        (true, false) => ns.is_empty() || ns == "default",
        (true, true) => ns == "default" || ns == "kube-system",
        (false, _) => ns == theirs,
    };
    if !ok {
        causes.push(Cause::invalid(
            "involvedObject.namespace",
            theirs,
            "does not match event.namespace",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use serde_json::json;

    fn fields(group: &str, plural: &str, obj: Value) -> Vec<(String, String)> {
        let desc = lookup(group, "v1", plural).expect("a served resource");
        validate(desc, &obj)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect()
    }

    fn pair(f: &str, r: &str) -> (String, String) {
        (f.into(), r.into())
    }

    #[test]
    fn labels_and_config_keys() {
        let cm = json!({"metadata": {"name": "c", "labels": {"-bad-": "v", "ok": "bad value",
            "example.com/fine": "x.y_z"}}, "data": {"bad key!": "v", "good.key_1": "v"}});
        let mut got = fields("", "configmaps", cm);
        got.sort();
        assert_eq!(
            got,
            vec![
                pair("data[bad key!]", "FieldValueInvalid"),
                pair("metadata.labels", "FieldValueInvalid"),
                pair("metadata.labels", "FieldValueInvalid"),
            ]
        );
        assert!(qualified_name_errors("kubernetes.io/service-name").is_empty());
        assert_eq!(qualified_name_errors("").len(), 2);
        assert!(!qualified_name_errors("Bad.Prefix/x").is_empty());
    }

    #[test]
    fn config_maps_hold_at_most_one_mebibyte_and_secrets_need_base64() {
        let big = json!({"data": {"k": "x".repeat(1024 * 1024 + 1)}});
        assert_eq!(
            fields("", "configmaps", big),
            vec![pair("[]", "FieldValueTooLong")]
        );
        assert!(
            fields(
                "",
                "configmaps",
                json!({"data": {"k": "x".repeat(1024 * 1024)}})
            )
            .is_empty()
        );
        let secrets = lookup("", "v1", "secrets").expect("secrets");
        assert!(decode(secrets, &json!({"data": {"k": "cGFzcw=="}})).is_ok());
        let err = decode(secrets, &json!({"data": {"k": "not base64!"}})).expect_err("400");
        assert_eq!(err.code(), 400);
        assert!(err.to_string().ends_with("at input byte 3"), "{err}");
    }

    #[test]
    fn tls_secrets_need_their_keys_and_types_are_immutable() {
        let s =
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"x": "eA=="}});
        assert_eq!(
            fields("", "secrets", s),
            vec![
                pair("data[tls.crt]", "FieldValueRequired"),
                pair("data[tls.key]", "FieldValueRequired")
            ]
        );
        let desc = lookup("", "v1", "secrets").expect("secrets");
        let old = json!({"type": "Opaque"});
        assert!(validate_update(desc, &old, &json!({})).is_empty());
        assert_eq!(
            validate_update(desc, &old, &json!({"type": "Opaque2"}))[0].field,
            "type"
        );
    }

    #[test]
    fn taints_are_reported_under_metadata() {
        let node = json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "k", "effect": "Sometimes"}, {"key": "ok", "effect": "NoExecute"}]}});
        assert_eq!(
            fields("", "nodes", node),
            vec![pair("metadata.taints[0].effect", "FieldValueNotSupported")]
        );
    }

    #[test]
    fn service_ports_types_and_ingress() {
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "Magic", "ports": [
            {"port": 70000, "targetPort": 70000}, {"port": 70000, "targetPort": 70000}]}});
        assert_eq!(
            fields("", "services", svc),
            vec![
                pair("spec.ports[0].name", "FieldValueRequired"),
                pair("spec.ports[0].port", "FieldValueInvalid"),
                pair("spec.ports[0].targetPort", "FieldValueInvalid"),
                pair("spec.ports[1].name", "FieldValueRequired"),
                pair("spec.ports[1].port", "FieldValueInvalid"),
                pair("spec.ports[1].targetPort", "FieldValueInvalid"),
                pair("spec.type", "FieldValueNotSupported"),
                pair("spec.ports[1]", "FieldValueDuplicate"),
            ]
        );
        let named = json!({"spec": {"type": "LoadBalancer", "ports": [{"name": "a", "port": 80, "targetPort": "http"},
            {"name": "b", "port": 80, "protocol": "UDP"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"}]}}});
        assert!(fields("", "services", named).is_empty());
        let not_lb = json!({"spec": {"type": "NodePort"},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}});
        assert_eq!(
            fields("", "services", not_lb),
            vec![pair("status.loadBalancer.ingress", "FieldValueForbidden")]
        );
        let bad_ip = json!({"spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}});
        assert_eq!(
            fields("", "services", bad_ip),
            vec![pair(
                "status.loadBalancer.ingress[0].ip",
                "FieldValueInvalid"
            )]
        );
    }

    #[test]
    fn events_live_in_their_objects_namespace() {
        let ev = |ns: &str, obj_ns: &str| {
            json!({"metadata": {"name": "e", "namespace": ns},
                   "involvedObject": {"kind": "X", "name": "x", "namespace": obj_ns}})
        };
        assert!(fields("", "events", ev("diff", "diff")).is_empty());
        assert!(fields("", "events", ev("default", "")).is_empty());
        assert_eq!(
            fields("", "events", ev("diff", "")),
            vec![pair("involvedObject.namespace", "FieldValueInvalid")]
        );
        assert_eq!(fields("", "events", ev("diff", "other")).len(), 1);
    }

    #[test]
    fn leases_and_endpoint_slices() {
        let lease = json!({"spec": {"leaseDurationSeconds": -1}});
        assert_eq!(
            fields("coordination.k8s.io", "leases", lease),
            vec![pair("spec.leaseDurationSeconds", "FieldValueInvalid")]
        );
        let slice = json!({"addressType": "IPv5"});
        assert_eq!(
            fields("discovery.k8s.io", "endpointslices", slice),
            vec![pair("addressType", "FieldValueNotSupported")]
        );
        assert!(
            fields(
                "discovery.k8s.io",
                "endpointslices",
                json!({"addressType": "IPv4"})
            )
            .is_empty()
        );
    }
}
