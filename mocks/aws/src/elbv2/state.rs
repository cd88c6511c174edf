//! The operations on ELBv2's resources (load balancers with their lifecycle, target groups,
//! listeners, tags; the records are in `model.rs`). Requests arrive already parsed into the
//! typed requests below (see `api.rs`); this module knows nothing of query parameters or
//! XML.

use std::collections::BTreeMap;

use mock_cloud::{Lifecycle, Phase};

use super::model::{HealthCheck, Listener, LoadBalancer, Tags, TargetGroup};
use crate::error::AwsError;
use crate::state::{Cloud, InstanceState};

fn hex16() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

pub(crate) fn state_of(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "provisioning",
        Phase::Done => "active",
        Phase::Failed => "failed",
    }
}

pub(super) fn lb_not_found() -> AwsError {
    AwsError::bad(
        "LoadBalancerNotFound",
        "One or more load balancers not found",
    )
}

pub(super) fn tg_not_found() -> AwsError {
    AwsError::bad("TargetGroupNotFound", "One or more target groups not found")
}

pub(super) fn listener_not_found() -> AwsError {
    AwsError::bad("ListenerNotFound", "One or more listeners not found")
}

pub(super) fn validation(message: impl Into<String>) -> AwsError {
    AwsError::bad("ValidationError", message)
}

fn duplicate_listener() -> AwsError {
    AwsError::bad(
        "DuplicateListener",
        "A listener already exists on that port",
    )
}

pub(super) fn check_security_groups(cloud: &Cloud, groups: &[String]) -> Result<(), AwsError> {
    for g in groups {
        if !cloud.security_groups.iter().any(|s| &s.id == g) {
            return Err(AwsError::bad(
                "InvalidSecurityGroup",
                format!("security group {g} does not exist"),
            ));
        }
    }
    Ok(())
}

/// Listener protocols by load balancer type, and the target group protocol each listener
/// protocol forwards to (ELBv2 API reference, CreateListener `Protocol`; the wording of
/// the refusal as moto 5 `moto/elbv2/exceptions.py` `InvalidProtocol`). A UDP listener
/// needs a UDP target group, TCP_UDP a TCP_UDP one; a TCP or TLS listener may forward to
/// TCP, TLS or TCP_UDP groups.
fn check_listener_protocol(
    cloud: &Cloud,
    lb_kind: &str,
    protocol: &str,
    actions: &[(String, String)],
) -> Result<(), AwsError> {
    let valid: &[&str] = if lb_kind == "network" {
        &["TCP", "TLS", "UDP", "TCP_UDP"]
    } else {
        &["HTTP", "HTTPS"]
    };
    if !valid.contains(&protocol) {
        return Err(validation(format!(
            "Listener protocol '{protocol}' must be one of '{}'",
            valid.join(", ")
        )));
    }
    for (_, arn) in actions {
        let Some(tg) = cloud.elbv2.target_groups.get(arn) else {
            continue;
        };
        let ok = match protocol {
            "UDP" => tg.protocol == "UDP",
            "TCP_UDP" => tg.protocol == "TCP_UDP",
            "TCP" | "TLS" => matches!(tg.protocol.as_str(), "TCP" | "TLS" | "TCP_UDP"),
            _ => matches!(tg.protocol.as_str(), "HTTP" | "HTTPS"),
        };
        if !ok {
            return Err(validation(format!(
                "Listener protocol '{protocol}' is not supported with a target group with the protocol '{}'",
                tg.protocol
            )));
        }
    }
    Ok(())
}

/// Each listener action's target group must exist.
pub(super) fn check_actions(cloud: &Cloud, actions: &[(String, String)]) -> Result<(), AwsError> {
    for (_, tg) in actions {
        if !cloud.elbv2.target_groups.contains_key(tg) {
            return Err(tg_not_found());
        }
    }
    Ok(())
}

pub(super) fn check_resources(cloud: &Cloud, arns: &[String]) -> Result<(), AwsError> {
    for arn in arns {
        let v2 = &cloud.elbv2;
        if !v2.lbs.contains_key(arn)
            && !v2.target_groups.contains_key(arn)
            && !v2.listeners.contains_key(arn)
        {
            return Err(if arn.contains(":targetgroup/") {
                tg_not_found()
            } else if arn.contains(":listener/") {
                listener_not_found()
            } else {
                lb_not_found()
            });
        }
    }
    Ok(())
}

/// Every subnet must exist; answers `(subnet id, zone)` for each.
pub(super) fn check_subnets(
    cloud: &Cloud,
    subnet_ids: &[String],
) -> Result<Vec<(String, String)>, AwsError> {
    let mut subnets = Vec::new();
    for s in subnet_ids {
        let subnet = cloud.subnets.iter().find(|n| &n.id == s).ok_or_else(|| {
            AwsError::bad(
                "SubnetNotFound",
                format!("The subnet ID '{s}' is not valid"),
            )
        })?;
        subnets.push((subnet.id.clone(), subnet.zone.clone()));
    }
    Ok(subnets)
}

pub(super) fn check_vpc(cloud: &Cloud, vpc_id: &str) -> Result<(), AwsError> {
    if !cloud.vpcs.iter().any(|v| v.id == vpc_id) {
        return Err(validation(format!("The VPC ID '{vpc_id}' is not found")));
    }
    Ok(())
}

pub(super) fn check_target_group(cloud: &Cloud, arn: &str) -> Result<(), AwsError> {
    if !cloud.elbv2.target_groups.contains_key(arn) {
        return Err(tg_not_found());
    }
    Ok(())
}

/// A validated `CreateLoadBalancer`.
pub(crate) struct CreateLb {
    pub name: String,
    pub kind: String,
    /// `net` or `app`, the ARN's and DNS name's type part.
    pub short: &'static str,
    pub scheme: String,
    pub subnet_ids: Vec<String>,
    pub groups: Vec<String>,
    pub ip_address_type: String,
    pub tags: Vec<(String, String)>,
}

/// Creates a load balancer (or finds the identical one); answers it with the phase to show.
pub(crate) fn create_lb(
    cloud: &mut Cloud,
    req: CreateLb,
) -> Result<(LoadBalancer, Phase), AwsError> {
    let CreateLb {
        name,
        kind,
        short,
        scheme,
        subnet_ids,
        groups,
        ip_address_type,
        tags,
    } = req;
    let subnets = check_subnets(cloud, &subnet_ids)?;
    let vpc_id = cloud
        .subnets
        .iter()
        .find(|n| n.id == subnets[0].0)
        .map(|n| n.vpc_id.clone())
        .unwrap_or_default();
    check_security_groups(cloud, &groups)?;
    if let Some(existing) = cloud.elbv2.lbs.values_mut().find(|lb| lb.name == name) {
        // A repeated identical create answers the existing load balancer.
        if existing.kind == kind && existing.scheme == scheme {
            let phase = existing.lifecycle.peek();
            return Ok((existing.clone(), phase));
        }
        return Err(AwsError::bad(
            "DuplicateLoadBalancerName",
            "A load balancer with the same name exists, but with different settings",
        ));
    }
    let id = hex16();
    let arn = format!(
        "arn:aws:elasticloadbalancing:{}:{}:loadbalancer/{short}/{name}/{id}",
        cloud.region, cloud.account_id
    );
    let prefix = if scheme == "internal" {
        "internal-"
    } else {
        ""
    };
    let dns_name = match short {
        "net" => format!("{prefix}{name}-{id}.elb.{}.amazonaws.com", cloud.region),
        _ => format!("{prefix}{name}-{id}.{}.elb.amazonaws.com", cloud.region),
    };
    let mut attributes = BTreeMap::new();
    attributes.insert(
        "deletion_protection.enabled".to_string(),
        "false".to_string(),
    );
    attributes.insert(
        "load_balancing.cross_zone.enabled".to_string(),
        "false".to_string(),
    );
    let vip = cloud
        .free_vip()
        .map_err(|e| AwsError::bad("TooManyLoadBalancers", e.to_string()))?;
    let lb = LoadBalancer {
        arn: arn.clone(),
        name,
        dns_name,
        vip,
        kind,
        scheme,
        vpc_id,
        subnets,
        security_groups: groups,
        ip_address_type,
        lifecycle: Lifecycle::begin(cloud.elbv2.mode),
        attributes,
        created: jiff::Timestamp::now(),
    };
    if !tags.is_empty() {
        cloud
            .elbv2
            .tags
            .insert(arn.clone(), tags.into_iter().collect());
    }
    cloud.elbv2.lbs.insert(arn, lb.clone());
    // The create answer always says provisioning (cloud-apis.md §4.4).
    Ok((lb, Phase::Pending))
}

/// The ARNs of the load balancers asked for by ARN and by name (all when neither is).
pub(crate) fn lb_arns(
    cloud: &Cloud,
    arns: &[String],
    names: &[String],
) -> Result<Vec<String>, AwsError> {
    let v2 = &cloud.elbv2;
    let mut keys: Vec<String> = Vec::new();
    for a in arns {
        if !v2.lbs.contains_key(a) {
            return Err(lb_not_found());
        }
        keys.push(a.clone());
    }
    for n in names {
        let lb = v2
            .lbs
            .values()
            .find(|lb| &lb.name == n)
            .ok_or_else(lb_not_found)?;
        keys.push(lb.arn.clone());
    }
    if arns.is_empty() && names.is_empty() {
        keys = v2.lbs.keys().cloned().collect();
    }
    Ok(keys)
}

/// The load balancers in `arns` with their phases; each is a client read of the state
/// machine.
pub(crate) fn read_lbs(cloud: &mut Cloud, arns: &[String]) -> Vec<(LoadBalancer, Phase)> {
    let mut shown = Vec::new();
    for k in arns {
        if let Some(lb) = cloud.elbv2.lbs.get_mut(k) {
            let phase = lb.lifecycle.read();
            shown.push((lb.clone(), phase));
        }
    }
    shown
}

/// Deleting an absent load balancer succeeds, as in ELBv2.
pub(crate) fn delete_lb(cloud: &mut Cloud, arn: &str) {
    let v2 = &mut cloud.elbv2;
    v2.lbs.remove(arn);
    v2.listeners.retain(|_, l| l.lb_arn != arn);
    v2.tags.remove(arn);
}

/// Applies `changes` to a load balancer's attributes; answers them all.
pub(crate) fn lb_attributes(
    cloud: &mut Cloud,
    arn: &str,
    changes: Vec<(String, String)>,
) -> Result<BTreeMap<String, String>, AwsError> {
    let lb = cloud.elbv2.lbs.get_mut(arn).ok_or_else(lb_not_found)?;
    lb.attributes.extend(changes);
    Ok(lb.attributes.clone())
}

pub(crate) fn set_security_groups(
    cloud: &mut Cloud,
    arn: &str,
    groups: Vec<String>,
) -> Result<(), AwsError> {
    check_security_groups(cloud, &groups)?;
    let lb = cloud.elbv2.lbs.get_mut(arn).ok_or_else(lb_not_found)?;
    lb.security_groups = groups;
    Ok(())
}

/// A validated `CreateTargetGroup`.
pub(crate) struct CreateTg {
    pub name: String,
    pub protocol: String,
    pub port: i64,
    pub vpc_id: String,
    pub target_type: String,
    pub health: HealthCheck,
    pub tags: Vec<(String, String)>,
}

/// Creates a target group (or finds the identical one).
pub(crate) fn create_tg(cloud: &mut Cloud, req: CreateTg) -> Result<TargetGroup, AwsError> {
    let CreateTg {
        name,
        protocol,
        port,
        vpc_id,
        target_type,
        health,
        tags,
    } = req;
    check_vpc(cloud, &vpc_id)?;
    if let Some(existing) = cloud.elbv2.target_groups.values().find(|t| t.name == name) {
        if existing.protocol == protocol && existing.port == port && existing.vpc_id == vpc_id {
            return Ok(existing.clone());
        }
        return Err(AwsError::bad(
            "DuplicateTargetGroupName",
            "A target group with the same name exists, but with different settings",
        ));
    }
    let arn = format!(
        "arn:aws:elasticloadbalancing:{}:{}:targetgroup/{name}/{}",
        cloud.region,
        cloud.account_id,
        hex16()
    );
    let mut attributes = BTreeMap::new();
    attributes.insert(
        "deregistration_delay.timeout_seconds".to_string(),
        "300".to_string(),
    );
    attributes.insert("proxy_protocol_v2.enabled".to_string(), "false".to_string());
    let tg = TargetGroup {
        arn: arn.clone(),
        name,
        protocol,
        port,
        vpc_id,
        target_type,
        health,
        targets: Vec::new(),
        attributes,
    };
    if !tags.is_empty() {
        cloud
            .elbv2
            .tags
            .insert(arn.clone(), tags.into_iter().collect());
    }
    cloud.elbv2.target_groups.insert(arn, tg.clone());
    Ok(tg)
}

/// The load balancers whose listeners forward to `tg_arn`, sorted.
pub(crate) fn lbs_of_tg(cloud: &Cloud, tg_arn: &str) -> Vec<String> {
    let mut arns: Vec<String> = cloud
        .elbv2
        .listeners
        .values()
        .filter(|l| l.actions.iter().any(|(_, t)| t == tg_arn))
        .map(|l| l.lb_arn.clone())
        .collect();
    arns.sort();
    arns.dedup();
    arns
}

/// The target groups asked for by ARN, by name, or by a load balancer using them (all
/// when nothing is asked).
pub(crate) fn describe_tgs<'c>(
    cloud: &'c Cloud,
    arns: &[String],
    names: &[String],
    lb: Option<&str>,
) -> Result<Vec<&'c TargetGroup>, AwsError> {
    let v2 = &cloud.elbv2;
    let mut found: Vec<&TargetGroup> = Vec::new();
    for a in arns {
        found.push(v2.target_groups.get(a).ok_or_else(tg_not_found)?);
    }
    for n in names {
        found.push(
            v2.target_groups
                .values()
                .find(|t| &t.name == n)
                .ok_or_else(tg_not_found)?,
        );
    }
    if let Some(lb) = lb {
        if !v2.lbs.contains_key(lb) {
            return Err(lb_not_found());
        }
        found.extend(
            v2.target_groups
                .values()
                .filter(|t| lbs_of_tg(cloud, &t.arn).iter().any(|a| a == lb)),
        );
    }
    if arns.is_empty() && names.is_empty() && lb.is_none() {
        found.extend(v2.target_groups.values());
    }
    Ok(found)
}

/// A target group in use by a listener cannot go.
pub(crate) fn delete_tg(cloud: &mut Cloud, arn: &str) -> Result<(), AwsError> {
    let v2 = &mut cloud.elbv2;
    if let Some(l) = v2
        .listeners
        .values()
        .find(|l| l.actions.iter().any(|(_, tg)| tg == arn))
    {
        return Err(AwsError::bad(
            "ResourceInUse",
            format!(
                "Target group '{arn}' is currently in use by a listener or a rule ({})",
                l.arn
            ),
        ));
    }
    v2.target_groups.remove(arn);
    v2.tags.remove(arn);
    Ok(())
}

/// Applies `changes` to a target group's attributes; answers them all.
pub(crate) fn tg_attributes(
    cloud: &mut Cloud,
    arn: &str,
    changes: Vec<(String, String)>,
) -> Result<BTreeMap<String, String>, AwsError> {
    let tg = cloud
        .elbv2
        .target_groups
        .get_mut(arn)
        .ok_or_else(tg_not_found)?;
    tg.attributes.extend(changes);
    Ok(tg.attributes.clone())
}

/// Registers (or deregisters) `(instance id, port)` targets; no port means the group's.
pub(crate) fn register_targets(
    cloud: &mut Cloud,
    arn: &str,
    targets: Vec<(String, Option<i64>)>,
    register: bool,
) -> Result<(), AwsError> {
    if register {
        for (id, _) in &targets {
            if cloud
                .instance(id)
                .is_none_or(|i| i.state == InstanceState::Terminated)
            {
                return Err(AwsError::bad(
                    "InvalidTarget",
                    format!(
                        "The following targets are not in a running state and cannot be registered: '{id}'"
                    ),
                ));
            }
        }
    }
    let tg = cloud
        .elbv2
        .target_groups
        .get_mut(arn)
        .ok_or_else(tg_not_found)?;
    for (id, port) in targets {
        let port = port.unwrap_or(tg.port);
        tg.targets.retain(|t| *t != (id.clone(), port));
        if register {
            tg.targets.push((id, port));
        }
    }
    Ok(())
}

/// One target's health as `DescribeTargetHealth` shows it.
pub(crate) struct TargetHealth {
    pub id: String,
    pub port: i64,
    pub health_check_port: String,
    pub state: &'static str,
    pub reason: Option<&'static str>,
}

/// Health as the mock can know it without the data plane: a running target of a group in
/// use is `healthy`, a group no listener uses gives `unused`/`Target.NotInUse`, a stopped
/// or gone instance `unused`/`Target.InvalidState`.
pub(crate) fn target_health(
    cloud: &Cloud,
    arn: &str,
    asked: Vec<(String, Option<i64>)>,
) -> Result<Vec<TargetHealth>, AwsError> {
    let tg = cloud
        .elbv2
        .target_groups
        .get(arn)
        .ok_or_else(tg_not_found)?;
    let shown: Vec<(String, i64)> = if asked.is_empty() {
        tg.targets.clone()
    } else {
        asked
            .into_iter()
            .map(|(id, port)| (id, port.unwrap_or(tg.port)))
            .collect()
    };
    let in_use = !lbs_of_tg(cloud, arn).is_empty();
    Ok(shown
        .into_iter()
        .map(|(id, port)| {
            let running = cloud
                .instance(&id)
                .is_some_and(|i| i.state == InstanceState::Running);
            let registered = tg.targets.contains(&(id.clone(), port));
            let (state, reason) = match (registered, running, in_use) {
                (false, _, _) => ("unavailable", Some("Target.NotRegistered")),
                (true, false, _) => ("unused", Some("Target.InvalidState")),
                (true, true, false) => ("unused", Some("Target.NotInUse")),
                (true, true, true) => ("healthy", None),
            };
            let health_check_port = if tg.health.port == "traffic-port" {
                port.to_string()
            } else {
                tg.health.port.clone()
            };
            TargetHealth {
                id,
                port,
                health_check_port,
                state,
                reason,
            }
        })
        .collect())
}

/// A validated `CreateListener`.
pub(crate) struct CreateListener {
    pub lb_arn: String,
    pub port: i64,
    pub protocol: String,
    /// `(type, target group arn)`, at least one.
    pub actions: Vec<(String, String)>,
}

pub(crate) fn create_listener(
    cloud: &mut Cloud,
    req: CreateListener,
) -> Result<Listener, AwsError> {
    let CreateListener {
        lb_arn,
        port,
        protocol,
        actions,
    } = req;
    check_actions(cloud, &actions)?;
    let Some(lb) = cloud.elbv2.lbs.get(&lb_arn) else {
        return Err(lb_not_found());
    };
    check_listener_protocol(cloud, &lb.kind, &protocol, &actions)?;
    if cloud
        .elbv2
        .listeners
        .values()
        .any(|l| l.lb_arn == lb_arn && l.port == port)
    {
        return Err(duplicate_listener());
    }
    let tail = lb_arn
        .split(":loadbalancer/")
        .nth(1)
        .unwrap_or(&lb.name)
        .to_string();
    let arn = format!(
        "arn:aws:elasticloadbalancing:{}:{}:listener/{tail}/{}",
        cloud.region,
        cloud.account_id,
        hex16()
    );
    let listener = Listener {
        arn: arn.clone(),
        lb_arn,
        protocol,
        port,
        actions,
    };
    cloud.elbv2.listeners.insert(arn, listener.clone());
    Ok(listener)
}

/// The listeners asked for by ARN and those of a load balancer.
pub(crate) fn describe_listeners<'c>(
    cloud: &'c Cloud,
    arns: &[String],
    lb: Option<&str>,
) -> Result<Vec<&'c Listener>, AwsError> {
    if let Some(lb) = lb
        && !cloud.elbv2.lbs.contains_key(lb)
    {
        return Err(lb_not_found());
    }
    let mut found = Vec::new();
    for a in arns {
        found.push(
            cloud
                .elbv2
                .listeners
                .get(a)
                .ok_or_else(listener_not_found)?,
        );
    }
    if let Some(lb) = lb {
        found.extend(cloud.elbv2.listeners.values().filter(|l| l.lb_arn == lb));
    }
    Ok(found)
}

/// A validated `ModifyListener`: what is absent stays.
pub(crate) struct ModifyListener {
    pub arn: String,
    /// Empty keeps the listener's actions.
    pub actions: Vec<(String, String)>,
    pub port: Option<i64>,
    pub protocol: Option<String>,
}

pub(crate) fn modify_listener(
    cloud: &mut Cloud,
    req: ModifyListener,
) -> Result<Listener, AwsError> {
    let ModifyListener {
        arn,
        actions,
        port,
        protocol,
    } = req;
    check_actions(cloud, &actions)?;
    let l = cloud
        .elbv2
        .listeners
        .get(&arn)
        .ok_or_else(listener_not_found)?;
    let kind = cloud
        .elbv2
        .lbs
        .get(&l.lb_arn)
        .map(|lb| lb.kind.clone())
        .unwrap_or_default();
    check_listener_protocol(
        cloud,
        &kind,
        protocol.as_deref().unwrap_or(&l.protocol),
        if actions.is_empty() {
            &l.actions
        } else {
            &actions
        },
    )?;
    if let Some(port) = port
        && cloud
            .elbv2
            .listeners
            .values()
            .any(|o| o.lb_arn == l.lb_arn && o.port == port && o.arn != arn)
    {
        return Err(duplicate_listener());
    }
    let l = cloud
        .elbv2
        .listeners
        .get_mut(&arn)
        .ok_or_else(listener_not_found)?;
    if let Some(port) = port {
        l.port = port;
    }
    if let Some(protocol) = protocol {
        l.protocol = protocol;
    }
    if !actions.is_empty() {
        l.actions = actions;
    }
    Ok(l.clone())
}

pub(crate) fn delete_listener(cloud: &mut Cloud, arn: &str) -> Result<(), AwsError> {
    cloud
        .elbv2
        .listeners
        .remove(arn)
        .ok_or_else(listener_not_found)?;
    Ok(())
}

/// Adds `adds` and removes `removes` on every resource in `arns` (all must exist).
pub(crate) fn change_tags(
    cloud: &mut Cloud,
    arns: Vec<String>,
    adds: &[(String, String)],
    removes: &[String],
) -> Result<(), AwsError> {
    check_resources(cloud, &arns)?;
    for arn in arns {
        let t = cloud.elbv2.tags.entry(arn).or_default();
        t.extend(adds.iter().cloned());
        for k in removes {
            t.remove(k);
        }
    }
    Ok(())
}

/// The tags of every resource in `arns` (all must exist), in order.
pub(crate) fn tags_of<'c>(
    cloud: &'c Cloud,
    arns: &'c [String],
) -> Result<Vec<(&'c str, Option<&'c Tags>)>, AwsError> {
    check_resources(cloud, arns)?;
    Ok(arns
        .iter()
        .map(|arn| (arn.as_str(), cloud.elbv2.tags.get(arn)))
        .collect())
}
