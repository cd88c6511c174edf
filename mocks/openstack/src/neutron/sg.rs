//! Neutron security groups and rules, which cloud-provider-openstack manages for load
//! balancer members when `manage-security-groups` is on (`pkg/openstack/loadbalancer_sg.go`).
//! The seed has the project's `default` group; a new group starts with the two egress
//! rules Neutron adds (`neutron/db/securitygroups_db.py` create_security_group). This is
//! the HTTP side; the records are in `sg_state`.

#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::common::{Pairs, bad_request, filtered_list, neutron_body, opt_str};
use super::l3_state::parse_cidr;
use super::sg_state::{Rule, SecGroups, SecurityGroup};
use crate::Shared;
use crate::envelope::neutron_error;
use crate::ids::new_id;
use crate::util::{iso_seconds, json};

fn rule_json(s: &Shared, r: &Rule) -> Value {
    json!({
        "id": r.id,
        "security_group_id": r.group_id,
        "direction": r.direction,
        "ethertype": r.ethertype,
        "protocol": r.protocol,
        "port_range_min": r.port_min,
        "port_range_max": r.port_max,
        "remote_ip_prefix": r.remote_ip_prefix,
        "remote_group_id": r.remote_group_id,
        "remote_address_group_id": null,
        "normalized_cidr": r.remote_ip_prefix,
        "description": r.description,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "belongs_to_default_sg": false,
        "tags": [],
        "created_at": iso_seconds(r.created),
        "updated_at": iso_seconds(r.created),
        "revision_number": 0,
    })
}

fn group_json(s: &Shared, sg: &SecGroups, g: &SecurityGroup) -> Value {
    let rules: Vec<Value> = sg
        .rules
        .values()
        .filter(|r| r.group_id == g.id)
        .map(|r| rule_json(s, r))
        .collect();
    json!({
        "id": g.id,
        "name": g.name,
        "description": g.description,
        "stateful": g.stateful,
        "shared": false,
        "security_group_rules": rules,
        "tenant_id": s.identity.project_id,
        "project_id": s.identity.project_id,
        "tags": [],
        "created_at": iso_seconds(g.created),
        "updated_at": iso_seconds(g.updated),
        "revision_number": 1,
    })
}

fn group_not_found(id: &str) -> Response {
    neutron_error(
        StatusCode::NOT_FOUND,
        "SecurityGroupNotFound",
        &format!("Security group {id} does not exist"),
    )
}

fn rule_not_found(id: &str) -> Response {
    neutron_error(
        StatusCode::NOT_FOUND,
        "SecurityGroupRuleNotFound",
        &format!("Security group rule {id} does not exist"),
    )
}

async fn list_groups(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    filtered_list(&s, "security_groups", query, |cloud| {
        let groups = cloud.secgroups.groups.values();
        groups
            .map(|g| (g.id.clone(), group_json(&s, &cloud.secgroups, g)))
            .collect()
    })
}

async fn create_group(
    State(s): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "security_group") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (name, description) = match (opt_str(&body, "name"), opt_str(&body, "description")) {
        (Ok(n), Ok(d)) => (n.unwrap_or(""), d.unwrap_or("")),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    if name == "default" {
        return neutron_error(
            StatusCode::CONFLICT,
            "SecurityGroupDefaultAlreadyExists",
            "Default security group already exists.",
        );
    }
    let mut cloud = s.cloud();
    let id = cloud.secgroups.add_group(name, description);
    let g = &cloud.secgroups.groups[&id];
    json(
        StatusCode::CREATED,
        json!({"security_group": group_json(&s, &cloud.secgroups, g)}),
    )
}

async fn show_group(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let cloud = s.cloud();
    match cloud.secgroups.groups.get(&id) {
        Some(g) => json(
            StatusCode::OK,
            json!({"security_group": group_json(&s, &cloud.secgroups, g)}),
        ),
        None => group_not_found(&id),
    }
}

async fn update_group(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "security_group") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut cloud = s.cloud();
    let Some(g) = cloud.secgroups.groups.get_mut(&id) else {
        return group_not_found(&id);
    };
    for (key, value) in &body {
        match (key.as_str(), value) {
            ("name", Value::String(v)) => g.name = v.clone(),
            ("description", Value::String(v)) => g.description = v.clone(),
            ("stateful", Value::Bool(v)) => g.stateful = *v,
            (key, value) => return bad_request(&format!("Invalid input for {key}: {value}")),
        }
    }
    g.updated = jiff::Timestamp::now();
    let g = g.clone();
    json(
        StatusCode::OK,
        json!({"security_group": group_json(&s, &cloud.secgroups, &g)}),
    )
}

async fn delete_group(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let mut cloud = s.cloud();
    let Some(g) = cloud.secgroups.groups.get(&id) else {
        return group_not_found(&id);
    };
    if g.name == "default" {
        return neutron_error(
            StatusCode::CONFLICT,
            "SecurityGroupCannotRemoveDefault",
            "Insufficient rights for removing default security group.",
        );
    }
    if cloud
        .secgroups
        .rules
        .values()
        .any(|r| r.remote_group_id.as_deref() == Some(id.as_str()) && r.group_id != id)
    {
        return neutron_error(
            StatusCode::CONFLICT,
            "SecurityGroupInUse",
            &format!("Security Group {id} in use."),
        );
    }
    cloud.secgroups.groups.remove(&id);
    cloud.secgroups.rules.retain(|_, r| r.group_id != id);
    StatusCode::NO_CONTENT.into_response()
}

fn parse_port(body: &Map<String, Value>, key: &str) -> Result<Option<u16>, Response> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                bad_request(&format!(
                    "Invalid input for {key}. Reason: '{v}' is not a valid port number."
                ))
            }),
    }
}

/// Validates a rule body as Neutron's API does (`neutron/extensions/securitygroup.py`,
/// `neutron/db/securitygroups_db.py` _validate_port_range / _validate_ip_prefix).
fn parse_rule(s: &Shared, body: &Map<String, Value>) -> Result<Rule, Response> {
    let group_id = opt_str(body, "security_group_id")?
        .ok_or_else(|| bad_request("Invalid input for security_group_id: missing"))?;
    let direction = opt_str(body, "direction")?.unwrap_or("");
    if !matches!(direction, "ingress" | "egress") {
        return Err(bad_request(&format!(
            "Invalid input for direction. Reason: '{direction}' is not in ['ingress', 'egress']."
        )));
    }
    let ethertype = opt_str(body, "ethertype")?.unwrap_or("IPv4");
    if !matches!(ethertype, "IPv4" | "IPv6") {
        return Err(bad_request(&format!(
            "Invalid input for ethertype. Reason: '{ethertype}' is not in ['IPv4', 'IPv6']."
        )));
    }
    let protocol = match body.get("protocol") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.to_ascii_lowercase()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => return Err(bad_request(&format!("Invalid protocol {other}"))),
    };
    if let Some(p) = &protocol {
        let named = [
            "tcp", "udp", "icmp", "icmpv6", "sctp", "any", "ah", "esp", "gre", "ipip",
        ];
        if !named.contains(&p.as_str()) && p.parse::<u8>().is_err() {
            return Err(neutron_error(
                StatusCode::BAD_REQUEST,
                "SecurityGroupRuleInvalidProtocol",
                &format!("Security group rule protocol {p} not supported."),
            ));
        }
    }
    let (port_min, port_max) = (
        parse_port(body, "port_range_min")?,
        parse_port(body, "port_range_max")?,
    );
    if port_min.is_some() || port_max.is_some() {
        if !matches!(
            protocol.as_deref(),
            Some("tcp" | "udp" | "sctp" | "icmp" | "icmpv6")
        ) {
            return Err(neutron_error(
                StatusCode::BAD_REQUEST,
                "SecurityGroupProtocolRequiredWithPorts",
                "Must also specify protocol if port range is given.",
            ));
        }
        if let (Some(lo), Some(hi)) = (port_min, port_max)
            && lo > hi
            && matches!(protocol.as_deref(), Some("tcp" | "udp" | "sctp"))
        {
            return Err(neutron_error(
                StatusCode::BAD_REQUEST,
                "SecurityGroupInvalidPortRange",
                "For TCP/UDP protocols, port_range_min must be <= port_range_max",
            ));
        }
    }
    let remote_ip_prefix = opt_str(body, "remote_ip_prefix")?
        .map(|p| {
            // Bare addresses mean a host route, as Neutron normalizes them.
            let cidr = if p.contains('/') {
                p.to_string()
            } else {
                format!("{p}/32")
            };
            parse_cidr(&cidr)
                .map(|(net, len)| format!("{net}/{len}"))
                .ok_or_else(|| {
                    bad_request(&format!(
                        "Invalid input for remote_ip_prefix. Reason: '{p}' is not a valid IP subnet."
                    ))
                })
        })
        .transpose()?;
    let remote_group_id = opt_str(body, "remote_group_id")?.map(str::to_string);
    if remote_ip_prefix.is_some() && remote_group_id.is_some() {
        return Err(neutron_error(
            StatusCode::BAD_REQUEST,
            "SecurityGroupRemoteGroupAndRemoteIpPrefix",
            "Only remote_ip_prefix or remote_group_id may be provided.",
        ));
    }
    let description = opt_str(body, "description")?.unwrap_or("").to_string();
    let cloud = s.cloud();
    if !cloud.secgroups.groups.contains_key(group_id) {
        return Err(group_not_found(group_id));
    }
    if let Some(rg) = &remote_group_id
        && !cloud.secgroups.groups.contains_key(rg)
    {
        return Err(group_not_found(rg));
    }
    Ok(Rule {
        id: new_id(),
        group_id: group_id.to_string(),
        direction: direction.to_string(),
        ethertype: ethertype.to_string(),
        protocol,
        port_min,
        port_max,
        remote_ip_prefix,
        remote_group_id,
        description,
        created: jiff::Timestamp::now(),
    })
}

async fn create_rule(
    State(s): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match neutron_body(body, "security_group_rule") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let rule = match parse_rule(&s, &body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let mut cloud = s.cloud();
    if let Some(dup) = cloud
        .secgroups
        .rules
        .values()
        .find(|r| r.key() == rule.key())
    {
        return neutron_error(
            StatusCode::CONFLICT,
            "SecurityGroupRuleExists",
            &format!("Security group rule already exists. Rule id is {}.", dup.id),
        );
    }
    let reply = rule_json(&s, &rule);
    cloud.secgroups.rules.insert(rule.id.clone(), rule);
    json(StatusCode::CREATED, json!({ "security_group_rule": reply }))
}

async fn list_rules(State(s): State<Arc<Shared>>, query: Pairs) -> Response {
    filtered_list(&s, "security_group_rules", query, |cloud| {
        let rules = cloud.secgroups.rules.values();
        rules.map(|r| (r.id.clone(), rule_json(&s, r))).collect()
    })
}

async fn show_rule(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match s.cloud().secgroups.rules.get(&id) {
        Some(r) => json(
            StatusCode::OK,
            json!({"security_group_rule": rule_json(&s, r)}),
        ),
        None => rule_not_found(&id),
    }
}

async fn delete_rule(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match s.cloud().secgroups.rules.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => rule_not_found(&id),
    }
}

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/network/v2.0/security-groups",
            get(list_groups).post(create_group),
        )
        .route(
            "/network/v2.0/security-groups/{id}",
            get(show_group).put(update_group).delete(delete_group),
        )
        .route(
            "/network/v2.0/security-group-rules",
            get(list_rules).post(create_rule),
        )
        .route(
            "/network/v2.0/security-group-rules/{id}",
            get(show_rule).delete(delete_rule),
        )
        .with_state(shared)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;
    use crate::testing::Mock;

    #[tokio::test]
    async fn groups_and_rules_crud() {
        let m = Mock::seeded(0);
        let token = m.token().await;
        let r = m
            .get("/network/v2.0/security-groups?name=default", &token)
            .await;
        assert_eq!(
            r.body["security_groups"][0]["security_group_rules"]
                .as_array()
                .map(Vec::len),
            Some(4)
        );
        let r = m
            .call(
                "POST",
                "/network/v2.0/security-groups",
                &token,
                json!({"security_group": {"name": "lb-sg"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let sg = r.body["security_group"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        assert_eq!(
            r.body["security_group"]["security_group_rules"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );

        let rules = "/network/v2.0/security-group-rules";
        let rule = json!({"security_group_rule": {"security_group_id": sg, "direction": "ingress",
            "protocol": "tcp", "port_range_min": 30000, "port_range_max": 30000, "remote_ip_prefix": "127.30.0.10"}});
        let r = m.call("POST", rules, &token, rule.clone()).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(
            r.body["security_group_rule"]["remote_ip_prefix"],
            "127.30.0.10/32"
        );
        assert_eq!(r.body["security_group_rule"]["ethertype"], "IPv4");
        let rule_id = r.body["security_group_rule"]["id"]
            .as_str()
            .expect("id")
            .to_string();
        let r = m.call("POST", rules, &token, rule).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(r.body["NeutronError"]["type"], "SecurityGroupRuleExists");
        for bad in [
            json!({"security_group_id": sg, "direction": "sideways"}),
            json!({"security_group_id": sg, "direction": "ingress", "port_range_min": 1}),
            json!({"security_group_id": sg, "direction": "ingress", "protocol": "tcp", "port_range_min": 9, "port_range_max": 1}),
            json!({"security_group_id": sg, "direction": "ingress", "protocol": "tcp", "port_range_min": 70000}),
            json!({"security_group_id": sg, "direction": "ingress", "remote_ip_prefix": "nope"}),
            json!({"security_group_id": sg, "direction": "ingress", "protocol": "bogus"}),
        ] {
            let r = m
                .call(
                    "POST",
                    rules,
                    &token,
                    json!({"security_group_rule": bad.clone()}),
                )
                .await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
            assert!(r.body["NeutronError"]["type"].is_string());
        }
        let r = m.call("POST",
            rules,
            &token,
            json!({"security_group_rule": {"security_group_id": "nope", "direction": "ingress"}}),
        )
        .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);

        let r = m
            .get(
                &format!("{rules}?security_group_id={sg}&direction=ingress"),
                &token,
            )
            .await;
        assert_eq!(
            r.body["security_group_rules"].as_array().map(Vec::len),
            Some(1)
        );
        let r = m
            .call(
                "PUT",
                &format!("/network/v2.0/security-groups/{sg}"),
                &token,
                json!({"security_group": {"description": "d"}}),
            )
            .await;
        assert_eq!(r.body["security_group"]["description"], "d");
        let leaks = m.admin().leaks();
        assert_eq!(leaks.by_type["security_groups"].len(), 1);
        assert_eq!(leaks.by_type["security_group_rules"].len(), 3);

        let r = m
            .send(
                "DELETE",
                &format!("{rules}/{rule_id}"),
                &[("x-auth-token", &token)],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let r = m.get(&format!("{rules}/{rule_id}"), &token).await;
        assert_eq!(r.body["NeutronError"]["type"], "SecurityGroupRuleNotFound");
        let r = m
            .send(
                "DELETE",
                &format!("/network/v2.0/security-groups/{sg}"),
                &[("x-auth-token", &token)],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(m.admin().leaks().total, 0);
        let r = m
            .get(&format!("/network/v2.0/security-groups/{sg}"), &token)
            .await;
        assert_eq!(r.body["NeutronError"]["type"], "SecurityGroupNotFound");
        let default = m
            .shared
            .cloud()
            .secgroups
            .groups
            .keys()
            .next()
            .cloned()
            .expect("default");
        let r = m
            .send(
                "DELETE",
                &format!("/network/v2.0/security-groups/{default}"),
                &[("x-auth-token", &token)],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
    }
}
