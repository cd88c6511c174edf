//! ELBv2 (`Version=2015-12-01`), what the AWS CCM uses for `aws-load-balancer-type: nlb`
//! (cloud-apis.md §4.3): load balancers with the `provisioning -> active` state machine
//! (driven by `mock-cloud`'s lifecycle modes, so a case can hold a load balancer in
//! `provisioning` or fail it, which moto cannot), target groups, targets and their health,
//! listeners, attributes, tags and security groups. Error codes as ELBv2:
//! `LoadBalancerNotFound`, `TargetGroupNotFound`, `DuplicateLoadBalancerName`,
//! `DuplicateTargetGroupName`, `ResourceInUse`, `ListenerNotFound`, `DuplicateListener`.

use std::collections::BTreeMap;

use mock_cloud::{Lifecycle, Mode, Phase};

use crate::error::AwsError;
use crate::model::{Cloud, InstanceState};
use crate::params::Params;
use crate::xml::Xml;

/// Every ELBv2 action the mock answers.
pub(crate) const ACTIONS: &[&str] = &[
    "CreateLoadBalancer",
    "DescribeLoadBalancers",
    "DeleteLoadBalancer",
    "DescribeLoadBalancerAttributes",
    "ModifyLoadBalancerAttributes",
    "SetSecurityGroups",
    "CreateTargetGroup",
    "DescribeTargetGroups",
    "DeleteTargetGroup",
    "DescribeTargetGroupAttributes",
    "ModifyTargetGroupAttributes",
    "RegisterTargets",
    "DeregisterTargets",
    "DescribeTargetHealth",
    "CreateListener",
    "DescribeListeners",
    "ModifyListener",
    "DeleteListener",
    "AddTags",
    "RemoveTags",
    "DescribeTags",
];

#[derive(Debug, Clone)]
pub(crate) struct LoadBalancer {
    pub arn: String,
    pub name: String,
    pub dns_name: String,
    /// The address the data plane serves the listeners on (what `dns_name` resolves to).
    pub vip: std::net::Ipv4Addr,
    pub kind: String,
    pub scheme: String,
    pub vpc_id: String,
    pub subnets: Vec<(String, String)>,
    pub security_groups: Vec<String>,
    pub ip_address_type: String,
    pub lifecycle: Lifecycle,
    pub attributes: BTreeMap<String, String>,
    pub created: jiff::Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    pub protocol: String,
    pub port: String,
    pub path: Option<String>,
    pub interval: i64,
    pub timeout: i64,
    pub healthy: i64,
    pub unhealthy: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct TargetGroup {
    pub arn: String,
    pub name: String,
    pub protocol: String,
    pub port: i64,
    pub vpc_id: String,
    pub target_type: String,
    pub health: HealthCheck,
    pub targets: Vec<(String, i64)>,
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub arn: String,
    pub lb_arn: String,
    pub protocol: String,
    pub port: i64,
    /// `(type, target group arn)`.
    pub actions: Vec<(String, String)>,
}

/// The ELBv2 part of the cloud.
#[derive(Debug, Clone)]
pub(crate) struct Elbv2 {
    /// How new load balancers leave `provisioning`.
    pub mode: Mode,
    pub lbs: BTreeMap<String, LoadBalancer>,
    pub target_groups: BTreeMap<String, TargetGroup>,
    pub listeners: BTreeMap<String, Listener>,
    pub tags: BTreeMap<String, BTreeMap<String, String>>,
}

impl Default for Elbv2 {
    fn default() -> Self {
        Self {
            mode: Mode::Immediate,
            lbs: BTreeMap::new(),
            target_groups: BTreeMap::new(),
            listeners: BTreeMap::new(),
            tags: BTreeMap::new(),
        }
    }
}

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

fn lb_not_found() -> AwsError {
    AwsError::bad(
        "LoadBalancerNotFound",
        "One or more load balancers not found",
    )
}

fn tg_not_found() -> AwsError {
    AwsError::bad("TargetGroupNotFound", "One or more target groups not found")
}

fn validation(message: impl Into<String>) -> AwsError {
    AwsError::bad("ValidationError", message)
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

fn required_int(p: &Params, key: &str) -> Result<i64, AwsError> {
    p.int(key)?.ok_or_else(|| AwsError::missing(key))
}

fn key_values(p: &Params, prefix: &str) -> Result<Vec<(String, String)>, AwsError> {
    p.indexes(prefix)
        .into_iter()
        .map(|i| {
            let k = p.require(&format!("{prefix}.{i}.Key"))?.to_string();
            let v = p
                .get(&format!("{prefix}.{i}.Value"))
                .unwrap_or("")
                .to_string();
            Ok((k, v))
        })
        .collect()
}

/// Runs one action; the body goes inside `<{Action}Result>`.
pub(crate) fn handle(cloud: &mut Cloud, action: &str, p: &Params) -> Result<String, AwsError> {
    let mut x = Xml::new();
    match action {
        "CreateLoadBalancer" => create_lb(cloud, p, &mut x)?,
        "DescribeLoadBalancers" => describe_lbs(cloud, p, &mut x)?,
        "DeleteLoadBalancer" => {
            let arn = p.require("LoadBalancerArn")?.to_string();
            // Deleting an absent load balancer succeeds, as in ELBv2.
            let v2 = &mut cloud.elbv2;
            v2.lbs.remove(&arn);
            v2.listeners.retain(|_, l| l.lb_arn != arn);
            v2.tags.remove(&arn);
        }
        "DescribeLoadBalancerAttributes" | "ModifyLoadBalancerAttributes" => {
            let arn = p.require("LoadBalancerArn")?.to_string();
            let changes = attribute_changes(p, action.starts_with("Modify"))?;
            let lb = cloud.elbv2.lbs.get_mut(&arn).ok_or_else(lb_not_found)?;
            lb.attributes.extend(changes);
            write_attributes(&mut x, &lb.attributes);
        }
        "SetSecurityGroups" => {
            let arn = p.require("LoadBalancerArn")?.to_string();
            let groups = p.list("SecurityGroups.member");
            for g in &groups {
                if !cloud.security_groups.iter().any(|s| &s.id == g) {
                    return Err(AwsError::bad(
                        "InvalidSecurityGroup",
                        format!("security group {g} does not exist"),
                    ));
                }
            }
            let lb = cloud.elbv2.lbs.get_mut(&arn).ok_or_else(lb_not_found)?;
            lb.security_groups = groups.clone();
            x.list("SecurityGroupIds", "member", &groups, |x, g| {
                x.buf_text(g);
            });
        }
        "CreateTargetGroup" => create_tg(cloud, p, &mut x)?,
        "DescribeTargetGroups" => describe_tgs(cloud, p, &mut x)?,
        "DeleteTargetGroup" => {
            let arn = p.require("TargetGroupArn")?.to_string();
            let v2 = &mut cloud.elbv2;
            if let Some(l) = v2
                .listeners
                .values()
                .find(|l| l.actions.iter().any(|(_, tg)| *tg == arn))
            {
                return Err(AwsError::bad(
                    "ResourceInUse",
                    format!(
                        "Target group '{arn}' is currently in use by a listener or a rule ({})",
                        l.arn
                    ),
                ));
            }
            v2.target_groups.remove(&arn);
            v2.tags.remove(&arn);
        }
        "DescribeTargetGroupAttributes" | "ModifyTargetGroupAttributes" => {
            let arn = p.require("TargetGroupArn")?.to_string();
            let changes = attribute_changes(p, action.starts_with("Modify"))?;
            let tg = cloud
                .elbv2
                .target_groups
                .get_mut(&arn)
                .ok_or_else(tg_not_found)?;
            tg.attributes.extend(changes);
            write_attributes(&mut x, &tg.attributes);
        }
        "RegisterTargets" | "DeregisterTargets" => {
            let arn = p.require("TargetGroupArn")?.to_string();
            let targets = targets(p)?;
            if targets.is_empty() {
                return Err(AwsError::missing("Targets"));
            }
            let register = action == "RegisterTargets";
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
                .get_mut(&arn)
                .ok_or_else(tg_not_found)?;
            for (id, port) in targets {
                let port = port.unwrap_or(tg.port);
                tg.targets.retain(|t| *t != (id.clone(), port));
                if register {
                    tg.targets.push((id, port));
                }
            }
        }
        "DescribeTargetHealth" => target_health(cloud, p, &mut x)?,
        "CreateListener" => create_listener(cloud, p, &mut x)?,
        "DescribeListeners" => {
            let arns = p.list("ListenerArns.member");
            let lb = p.get("LoadBalancerArn");
            if arns.is_empty() && lb.is_none() {
                return Err(validation(
                    "You must specify either listener ARNs or a load balancer ARN",
                ));
            }
            if let Some(lb) = lb
                && !cloud.elbv2.lbs.contains_key(lb)
            {
                return Err(lb_not_found());
            }
            let mut found = Vec::new();
            for a in &arns {
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
            x.list("Listeners", "member", found, write_listener);
        }
        "ModifyListener" => {
            let arn = p.require("ListenerArn")?.to_string();
            let actions = default_actions(cloud, p, false)?;
            let port = p.int("Port")?;
            let protocol = p.get("Protocol").map(str::to_ascii_uppercase);
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
                return Err(AwsError::bad(
                    "DuplicateListener",
                    "A listener already exists on that port",
                ));
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
            x.list("Listeners", "member", [&*l], write_listener);
        }
        "DeleteListener" => {
            let arn = p.require("ListenerArn")?;
            cloud
                .elbv2
                .listeners
                .remove(arn)
                .ok_or_else(listener_not_found)?;
        }
        "AddTags" | "RemoveTags" => {
            let arns = p.list("ResourceArns.member");
            if arns.is_empty() {
                return Err(AwsError::missing("ResourceArns"));
            }
            check_resources(cloud, &arns)?;
            let (adds, removes) = if action == "AddTags" {
                (key_values(p, "Tags.member")?, Vec::new())
            } else {
                (Vec::new(), p.list("TagKeys.member"))
            };
            if adds.is_empty() && removes.is_empty() {
                return Err(AwsError::missing(if action == "AddTags" {
                    "Tags"
                } else {
                    "TagKeys"
                }));
            }
            for arn in arns {
                let t = cloud.elbv2.tags.entry(arn).or_default();
                t.extend(adds.iter().cloned());
                for k in &removes {
                    t.remove(k);
                }
            }
        }
        "DescribeTags" => {
            let arns = p.list("ResourceArns.member");
            if arns.is_empty() {
                return Err(AwsError::missing("ResourceArns"));
            }
            check_resources(cloud, &arns)?;
            let v2 = &cloud.elbv2;
            x.list("TagDescriptions", "member", &arns, |x, arn| {
                x.text("ResourceArn", arn).list(
                    "Tags",
                    "member",
                    v2.tags.get(arn).into_iter().flatten(),
                    |x, (k, v)| {
                        x.text("Key", k).text("Value", v);
                    },
                );
            });
        }
        other => return Err(crate::ec2::invalid_action(other)),
    }
    Ok(x.finish())
}

fn listener_not_found() -> AwsError {
    AwsError::bad("ListenerNotFound", "One or more listeners not found")
}

fn check_resources(cloud: &Cloud, arns: &[String]) -> Result<(), AwsError> {
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

fn attribute_changes(p: &Params, modify: bool) -> Result<Vec<(String, String)>, AwsError> {
    if !modify {
        return Ok(Vec::new());
    }
    let changes = key_values(p, "Attributes.member")?;
    if changes.is_empty() {
        return Err(AwsError::missing("Attributes"));
    }
    Ok(changes)
}

fn write_attributes(x: &mut Xml, attrs: &BTreeMap<String, String>) {
    x.list("Attributes", "member", attrs, |x, (k, v)| {
        x.text("Key", k).text("Value", v);
    });
}

fn create_lb(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("Name")?.to_string();
    if name.len() > 32
        || name.starts_with('-')
        || name.ends_with('-')
        || name.starts_with("internal-")
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(validation(format!(
            "Load balancer name '{name}' is not valid"
        )));
    }
    let kind = p.get("Type").unwrap_or("application").to_string();
    let short = match kind.as_str() {
        "network" => "net",
        "application" => "app",
        _ => {
            return Err(validation(format!(
                "Type '{kind}' must be network or application"
            )));
        }
    };
    let scheme = p.get("Scheme").unwrap_or("internet-facing").to_string();
    if scheme != "internal" && scheme != "internet-facing" {
        return Err(validation(format!("Scheme '{scheme}' is not valid")));
    }
    let mut subnet_ids = p.list("Subnets.member");
    subnet_ids.extend(
        p.indexes("SubnetMappings.member")
            .into_iter()
            .filter_map(|i| {
                p.get(&format!("SubnetMappings.member.{i}.SubnetId"))
                    .map(str::to_string)
            }),
    );
    if subnet_ids.is_empty() {
        return Err(validation("At least one subnet must be specified"));
    }
    let mut subnets = Vec::new();
    for s in &subnet_ids {
        let subnet = cloud.subnets.iter().find(|n| &n.id == s).ok_or_else(|| {
            AwsError::bad(
                "SubnetNotFound",
                format!("The subnet ID '{s}' is not valid"),
            )
        })?;
        subnets.push((subnet.id.clone(), subnet.zone.clone()));
    }
    let vpc_id = cloud
        .subnets
        .iter()
        .find(|n| n.id == subnets[0].0)
        .map(|n| n.vpc_id.clone())
        .unwrap_or_default();
    let groups = p.list("SecurityGroups.member");
    for g in &groups {
        if !cloud.security_groups.iter().any(|s| &s.id == g) {
            return Err(AwsError::bad(
                "InvalidSecurityGroup",
                format!("security group {g} does not exist"),
            ));
        }
    }
    let tags = key_values(p, "Tags.member")?;
    if let Some(existing) = cloud.elbv2.lbs.values_mut().find(|lb| lb.name == name) {
        // A repeated identical create answers the existing load balancer.
        if existing.kind == kind && existing.scheme == scheme {
            let lb = existing.clone();
            let phase = existing.lifecycle.peek();
            x.list("LoadBalancers", "member", [&lb], |x, lb| {
                write_lb(x, lb, phase)
            });
            return Ok(());
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
        ip_address_type: p.get("IpAddressType").unwrap_or("ipv4").to_string(),
        lifecycle: Lifecycle::begin(cloud.elbv2.mode),
        attributes,
        created: jiff::Timestamp::now(),
    };
    // The create answer always says provisioning (cloud-apis.md §4.4).
    x.list("LoadBalancers", "member", [&lb], |x, lb| {
        write_lb(x, lb, Phase::Pending)
    });
    if !tags.is_empty() {
        cloud
            .elbv2
            .tags
            .insert(arn.clone(), tags.into_iter().collect());
    }
    cloud.elbv2.lbs.insert(arn, lb);
    Ok(())
}

fn write_lb(x: &mut Xml, lb: &LoadBalancer, phase: Phase) {
    x.text("LoadBalancerArn", &lb.arn)
        .text("DNSName", &lb.dns_name)
        .text("CanonicalHostedZoneId", "Z18D5FSROUN65G")
        .text(
            "CreatedTime",
            lb.created.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string(),
        )
        .text("LoadBalancerName", &lb.name)
        .text("Scheme", &lb.scheme)
        .text("VpcId", &lb.vpc_id)
        .elem("State", |x| {
            x.text("Code", state_of(phase));
        })
        .text("Type", &lb.kind)
        .list(
            "AvailabilityZones",
            "member",
            &lb.subnets,
            |x, (subnet, zone)| {
                x.text("ZoneName", zone).text("SubnetId", subnet);
            },
        )
        .list("SecurityGroups", "member", &lb.security_groups, |x, g| {
            x.buf_text(g);
        })
        .text("IpAddressType", &lb.ip_address_type);
}

fn describe_lbs(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let arns = p.list("LoadBalancerArns.member");
    let names = p.list("Names.member");
    let v2 = &mut cloud.elbv2;
    let mut keys: Vec<String> = Vec::new();
    for a in &arns {
        if !v2.lbs.contains_key(a) {
            return Err(lb_not_found());
        }
        keys.push(a.clone());
    }
    for n in &names {
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
    let start = match p.get("Marker") {
        None => 0,
        Some(m) => m
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= keys.len())
            .ok_or_else(|| validation("invalid Marker"))?,
    };
    let size = p.int("PageSize")?.unwrap_or(400);
    if !(1..=400).contains(&size) {
        return Err(validation("PageSize must be 1..=400"));
    }
    let end = (start + usize::try_from(size).unwrap_or(400)).min(keys.len());
    let mut shown = Vec::new();
    for k in &keys[start..end] {
        if let Some(lb) = v2.lbs.get_mut(k) {
            // Each describe is a client read of the state machine.
            let phase = lb.lifecycle.read();
            shown.push((lb.clone(), phase));
        }
    }
    x.list("LoadBalancers", "member", &shown, |x, (lb, phase)| {
        write_lb(x, lb, *phase)
    });
    if end < keys.len() {
        x.text("NextMarker", end.to_string());
    }
    Ok(())
}

fn create_tg(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("Name")?.to_string();
    if name.len() > 32 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(validation(format!(
            "Target group name '{name}' is not valid"
        )));
    }
    let target_type = p.get("TargetType").unwrap_or("instance").to_string();
    let protocol = p.get("Protocol").map(str::to_ascii_uppercase);
    let port = p.int("Port")?;
    let vpc_id = p.get("VpcId").map(str::to_string);
    let (protocol, port, vpc_id) = match (protocol, port, vpc_id) {
        (Some(pr), Some(po), Some(v)) => (pr, po, v),
        (None, _, _) => return Err(validation("A protocol must be specified")),
        (_, None, _) => return Err(validation("A port must be specified")),
        (_, _, None) => return Err(validation("A VPC ID must be specified")),
    };
    if !(1..=65535).contains(&port) {
        return Err(validation(format!("port {port} is not valid")));
    }
    if !cloud.vpcs.iter().any(|v| v.id == vpc_id) {
        return Err(validation(format!("The VPC ID '{vpc_id}' is not found")));
    }
    // Health checks are TCP, HTTP or HTTPS; an NLB's target groups (TCP, TLS, UDP,
    // TCP_UDP) default to TCP, so a UDP group is probed over TCP on its health-check port
    // (ELBv2 API reference, CreateTargetGroup `HealthCheckProtocol`).
    let health_protocol = match p.get("HealthCheckProtocol").map(str::to_ascii_uppercase) {
        Some(hp) if matches!(hp.as_str(), "TCP" | "HTTP" | "HTTPS") => hp,
        Some(hp) => {
            return Err(validation(format!(
                "Health check protocol '{hp}' is not supported; use TCP, HTTP or HTTPS"
            )));
        }
        None if matches!(protocol.as_str(), "HTTP" | "HTTPS") => protocol.clone(),
        None => "TCP".to_string(),
    };
    let health = HealthCheck {
        protocol: health_protocol,
        port: p
            .get("HealthCheckPort")
            .unwrap_or("traffic-port")
            .to_string(),
        path: p.get("HealthCheckPath").map(str::to_string),
        interval: p.int("HealthCheckIntervalSeconds")?.unwrap_or(30),
        timeout: p.int("HealthCheckTimeoutSeconds")?.unwrap_or(10),
        healthy: p.int("HealthyThresholdCount")?.unwrap_or(5),
        unhealthy: p.int("UnhealthyThresholdCount")?.unwrap_or(2),
    };
    let tags = key_values(p, "Tags.member")?;
    if let Some(existing) = cloud.elbv2.target_groups.values().find(|t| t.name == name) {
        if existing.protocol == protocol && existing.port == port && existing.vpc_id == vpc_id {
            x.list("TargetGroups", "member", [existing], |x, tg| {
                write_tg(x, tg, &[])
            });
            return Ok(());
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
    x.list("TargetGroups", "member", [&tg], |x, tg| {
        write_tg(x, tg, &[])
    });
    if !tags.is_empty() {
        cloud
            .elbv2
            .tags
            .insert(arn.clone(), tags.into_iter().collect());
    }
    cloud.elbv2.target_groups.insert(arn, tg);
    Ok(())
}

fn write_tg(x: &mut Xml, tg: &TargetGroup, lb_arns: &[String]) {
    let h = &tg.health;
    x.text("TargetGroupArn", &tg.arn)
        .text("TargetGroupName", &tg.name)
        .text("Protocol", &tg.protocol)
        .text("Port", tg.port.to_string())
        .text("VpcId", &tg.vpc_id)
        .text("HealthCheckProtocol", &h.protocol)
        .text("HealthCheckPort", &h.port)
        .text("HealthCheckEnabled", "true")
        .text("HealthCheckIntervalSeconds", h.interval.to_string())
        .text("HealthCheckTimeoutSeconds", h.timeout.to_string())
        .text("HealthyThresholdCount", h.healthy.to_string())
        .text("UnhealthyThresholdCount", h.unhealthy.to_string())
        .opt("HealthCheckPath", h.path.as_ref())
        .list("LoadBalancerArns", "member", lb_arns, |x, a| {
            x.buf_text(a);
        })
        .text("TargetType", &tg.target_type)
        .text("IpAddressType", "ipv4");
}

fn lbs_of_tg(cloud: &Cloud, tg_arn: &str) -> Vec<String> {
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

fn describe_tgs(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let arns = p.list("TargetGroupArns.member");
    let names = p.list("Names.member");
    let lb = p.get("LoadBalancerArn");
    let v2 = &cloud.elbv2;
    let mut found: Vec<&TargetGroup> = Vec::new();
    for a in &arns {
        found.push(v2.target_groups.get(a).ok_or_else(tg_not_found)?);
    }
    for n in &names {
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
    x.list("TargetGroups", "member", found, |x, tg| {
        write_tg(x, tg, &lbs_of_tg(cloud, &tg.arn));
    });
    Ok(())
}

/// `Targets.member.N.{Id,Port}`.
fn targets(p: &Params) -> Result<Vec<(String, Option<i64>)>, AwsError> {
    p.indexes("Targets.member")
        .into_iter()
        .map(|i| {
            let id = p.require(&format!("Targets.member.{i}.Id"))?.to_string();
            Ok((id, p.int(&format!("Targets.member.{i}.Port"))?))
        })
        .collect()
}

/// Health as the mock can know it without the data plane: a running target of a group in
/// use is `healthy`, a group no listener uses gives `unused`/`Target.NotInUse`, a stopped
/// or gone instance `unused`/`Target.InvalidState`.
fn target_health(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let arn = p.require("TargetGroupArn")?;
    let tg = cloud
        .elbv2
        .target_groups
        .get(arn)
        .ok_or_else(tg_not_found)?;
    let asked = targets(p)?;
    let shown: Vec<(String, i64)> = if asked.is_empty() {
        tg.targets.clone()
    } else {
        asked
            .into_iter()
            .map(|(id, port)| (id, port.unwrap_or(tg.port)))
            .collect()
    };
    let in_use = !lbs_of_tg(cloud, arn).is_empty();
    x.list(
        "TargetHealthDescriptions",
        "member",
        shown,
        |x, (id, port)| {
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
            x.elem("Target", |x| {
                x.text("Id", &id).text("Port", port.to_string());
            })
            .text(
                "HealthCheckPort",
                if tg.health.port == "traffic-port" {
                    port.to_string()
                } else {
                    tg.health.port.clone()
                },
            )
            .elem("TargetHealth", |x| {
                x.text("State", state).opt("Reason", reason);
            });
        },
    );
    Ok(())
}

/// `DefaultActions.member.N.{Type,TargetGroupArn}`; each group must exist.
fn default_actions(
    cloud: &Cloud,
    p: &Params,
    required: bool,
) -> Result<Vec<(String, String)>, AwsError> {
    let mut out = Vec::new();
    for i in p.indexes("DefaultActions.member") {
        let kind = p
            .require(&format!("DefaultActions.member.{i}.Type"))?
            .to_string();
        let tg = p
            .require(&format!("DefaultActions.member.{i}.TargetGroupArn"))?
            .to_string();
        if !cloud.elbv2.target_groups.contains_key(&tg) {
            return Err(tg_not_found());
        }
        out.push((kind, tg));
    }
    if required && out.is_empty() {
        return Err(AwsError::missing("DefaultActions"));
    }
    Ok(out)
}

fn create_listener(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let lb_arn = p.require("LoadBalancerArn")?.to_string();
    let port = required_int(p, "Port")?;
    if !(1..=65535).contains(&port) {
        return Err(validation(format!("port {port} is not valid")));
    }
    let protocol = p.require("Protocol")?.to_ascii_uppercase();
    let actions = default_actions(cloud, p, true)?;
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
        return Err(AwsError::bad(
            "DuplicateListener",
            "A listener already exists on that port",
        ));
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
    x.list("Listeners", "member", [&listener], write_listener);
    cloud.elbv2.listeners.insert(arn, listener);
    Ok(())
}

fn write_listener(x: &mut Xml, l: &Listener) {
    x.text("ListenerArn", &l.arn)
        .text("LoadBalancerArn", &l.lb_arn)
        .text("Port", l.port.to_string())
        .text("Protocol", &l.protocol)
        .list("DefaultActions", "member", &l.actions, |x, (kind, tg)| {
            x.text("Type", kind).text("TargetGroupArn", tg);
        });
}
