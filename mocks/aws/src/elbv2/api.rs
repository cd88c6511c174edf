//! The ELBv2 query protocol: each action's parameters are validated into a typed request,
//! handed to `state`, and the answer is rendered as ELBv2 XML (`.member.N` lists).

use std::collections::BTreeMap;

use mock_cloud::Phase;

use super::model::{HealthCheck, Listener, LoadBalancer, TargetGroup};
use super::state::{
    self, CreateLb, CreateListener, CreateTg, ModifyListener, TargetHealth, state_of, validation,
};
use crate::error::AwsError;
use crate::params::Params;
use crate::state::Cloud;
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

/// Runs one action; the body goes inside `<{Action}Result>`.
pub(crate) fn handle(cloud: &mut Cloud, action: &str, p: &Params) -> Result<String, AwsError> {
    let mut x = Xml::new();
    match action {
        "CreateLoadBalancer" => {
            let req = create_lb_request(cloud, p)?;
            let (lb, phase) = state::create_lb(cloud, req)?;
            x.list("LoadBalancers", "member", [&lb], |x, lb| {
                write_lb(x, lb, phase)
            });
        }
        "DescribeLoadBalancers" => describe_lbs(cloud, p, &mut x)?,
        "DeleteLoadBalancer" => {
            let arn = p.require("LoadBalancerArn")?;
            state::delete_lb(cloud, arn);
        }
        "DescribeLoadBalancerAttributes" | "ModifyLoadBalancerAttributes" => {
            let arn = p.require("LoadBalancerArn")?;
            let changes = attribute_changes(p, action.starts_with("Modify"))?;
            let attributes = state::lb_attributes(cloud, arn, changes)?;
            write_attributes(&mut x, &attributes);
        }
        "SetSecurityGroups" => {
            let arn = p.require("LoadBalancerArn")?;
            let groups = p.list("SecurityGroups.member");
            state::set_security_groups(cloud, arn, groups.clone())?;
            x.list("SecurityGroupIds", "member", &groups, |x, g| {
                x.buf_text(g);
            });
        }
        "CreateTargetGroup" => {
            let req = create_tg_request(cloud, p)?;
            let tg = state::create_tg(cloud, req)?;
            x.list("TargetGroups", "member", [&tg], |x, tg| {
                write_tg(x, tg, &[])
            });
        }
        "DescribeTargetGroups" => {
            let arns = p.list("TargetGroupArns.member");
            let names = p.list("Names.member");
            let lb = p.get("LoadBalancerArn");
            let found = state::describe_tgs(cloud, &arns, &names, lb)?;
            x.list("TargetGroups", "member", found, |x, tg| {
                write_tg(x, tg, &state::lbs_of_tg(cloud, &tg.arn));
            });
        }
        "DeleteTargetGroup" => {
            let arn = p.require("TargetGroupArn")?;
            state::delete_tg(cloud, arn)?;
        }
        "DescribeTargetGroupAttributes" | "ModifyTargetGroupAttributes" => {
            let arn = p.require("TargetGroupArn")?;
            let changes = attribute_changes(p, action.starts_with("Modify"))?;
            let attributes = state::tg_attributes(cloud, arn, changes)?;
            write_attributes(&mut x, &attributes);
        }
        "RegisterTargets" | "DeregisterTargets" => {
            let arn = p.require("TargetGroupArn")?;
            let targets = targets(p)?;
            if targets.is_empty() {
                return Err(AwsError::missing("Targets"));
            }
            state::register_targets(cloud, arn, targets, action == "RegisterTargets")?;
        }
        "DescribeTargetHealth" => {
            let arn = p.require("TargetGroupArn")?;
            state::check_target_group(cloud, arn)?;
            let asked = targets(p)?;
            let health = state::target_health(cloud, arn, asked)?;
            x.list("TargetHealthDescriptions", "member", health, write_health);
        }
        "CreateListener" => {
            let req = create_listener_request(cloud, p)?;
            let listener = state::create_listener(cloud, req)?;
            x.list("Listeners", "member", [&listener], write_listener);
        }
        "DescribeListeners" => {
            let arns = p.list("ListenerArns.member");
            let lb = p.get("LoadBalancerArn");
            if arns.is_empty() && lb.is_none() {
                return Err(validation(
                    "You must specify either listener ARNs or a load balancer ARN",
                ));
            }
            let found = state::describe_listeners(cloud, &arns, lb)?;
            x.list("Listeners", "member", found, write_listener);
        }
        "ModifyListener" => {
            let req = ModifyListener {
                arn: p.require("ListenerArn")?.to_string(),
                actions: default_actions(cloud, p, false)?,
                port: p.int("Port")?,
                protocol: p.get("Protocol").map(str::to_ascii_uppercase),
            };
            let listener = state::modify_listener(cloud, req)?;
            x.list("Listeners", "member", [&listener], write_listener);
        }
        "DeleteListener" => {
            let arn = p.require("ListenerArn")?;
            state::delete_listener(cloud, arn)?;
        }
        "AddTags" | "RemoveTags" => {
            let arns = p.list("ResourceArns.member");
            if arns.is_empty() {
                return Err(AwsError::missing("ResourceArns"));
            }
            // The resources are looked up before the tags are read, as ELBv2 answers.
            state::check_resources(cloud, &arns)?;
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
            state::change_tags(cloud, arns, &adds, &removes)?;
        }
        "DescribeTags" => {
            let arns = p.list("ResourceArns.member");
            if arns.is_empty() {
                return Err(AwsError::missing("ResourceArns"));
            }
            let tags = state::tags_of(cloud, &arns)?;
            x.list("TagDescriptions", "member", tags, |x, (arn, tags)| {
                x.text("ResourceArn", arn).list(
                    "Tags",
                    "member",
                    tags.into_iter().flatten(),
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

// ---------------------------------------------------------------------------------------
// Validation: query parameters -> typed requests. Where ELBv2 checks that a referenced
// resource exists before it reads later parameters, validation asks `state` at that point
// too, so a request with several faults is answered with the same (first) one.

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

/// `DefaultActions.member.N.{Type,TargetGroupArn}`; each group must exist (checked as
/// each action is read, so the first fault in the list is the one answered).
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
        state::check_actions(cloud, std::slice::from_ref(&(kind.clone(), tg.clone())))?;
        out.push((kind, tg));
    }
    if required && out.is_empty() {
        return Err(AwsError::missing("DefaultActions"));
    }
    Ok(out)
}

fn create_lb_request(cloud: &Cloud, p: &Params) -> Result<CreateLb, AwsError> {
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
    state::check_subnets(cloud, &subnet_ids)?;
    let groups = p.list("SecurityGroups.member");
    state::check_security_groups(cloud, &groups)?;
    Ok(CreateLb {
        name,
        kind,
        short,
        scheme,
        subnet_ids,
        groups,
        ip_address_type: p.get("IpAddressType").unwrap_or("ipv4").to_string(),
        tags: key_values(p, "Tags.member")?,
    })
}

fn create_tg_request(cloud: &Cloud, p: &Params) -> Result<CreateTg, AwsError> {
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
    state::check_vpc(cloud, &vpc_id)?;
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
    Ok(CreateTg {
        name,
        protocol,
        port,
        vpc_id,
        target_type,
        health,
        tags: key_values(p, "Tags.member")?,
    })
}

fn create_listener_request(cloud: &Cloud, p: &Params) -> Result<CreateListener, AwsError> {
    let lb_arn = p.require("LoadBalancerArn")?.to_string();
    let port = required_int(p, "Port")?;
    if !(1..=65535).contains(&port) {
        return Err(validation(format!("port {port} is not valid")));
    }
    Ok(CreateListener {
        lb_arn,
        port,
        protocol: p.require("Protocol")?.to_ascii_uppercase(),
        actions: default_actions(cloud, p, true)?,
    })
}

// ---------------------------------------------------------------------------------------
// Rendering.

/// `DescribeLoadBalancers`: the pages are the protocol's (`Marker` is an offset).
fn describe_lbs(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let arns = p.list("LoadBalancerArns.member");
    let names = p.list("Names.member");
    let keys = state::lb_arns(cloud, &arns, &names)?;
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
    let shown = state::read_lbs(cloud, &keys[start..end]);
    x.list("LoadBalancers", "member", &shown, |x, (lb, phase)| {
        write_lb(x, lb, *phase)
    });
    if end < keys.len() {
        x.text("NextMarker", end.to_string());
    }
    Ok(())
}

fn write_attributes(x: &mut Xml, attrs: &BTreeMap<String, String>) {
    x.list("Attributes", "member", attrs, |x, (k, v)| {
        x.text("Key", k).text("Value", v);
    });
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

fn write_health(x: &mut Xml, h: TargetHealth) {
    x.elem("Target", |x| {
        x.text("Id", &h.id).text("Port", h.port.to_string());
    })
    .text("HealthCheckPort", &h.health_check_port)
    .elem("TargetHealth", |x| {
        x.text("State", h.state).opt("Reason", h.reason);
    });
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
