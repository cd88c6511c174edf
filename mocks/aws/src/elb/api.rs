//! ELB classic (`Version=2012-06-01`, the "query" protocol with `.member.N` lists), the AWS
//! CCM's default load balancer (cloud-apis.md §4.3): create/describe/delete, instance
//! registration, health check, listeners, attributes, tags and security groups. Classic
//! load balancers have no state machine; the CCM reports `DNSName` as the ingress hostname.

use std::collections::BTreeMap;

use crate::error::AwsError;
use crate::model::{Cloud, InstanceState};
use crate::params::Params;
use crate::xml::Xml;

/// Every ELB classic action the mock answers.
pub(crate) const ACTIONS: &[&str] = &[
    "CreateLoadBalancer",
    "DescribeLoadBalancers",
    "DeleteLoadBalancer",
    "RegisterInstancesWithLoadBalancer",
    "DeregisterInstancesFromLoadBalancer",
    "DescribeInstanceHealth",
    "ConfigureHealthCheck",
    "CreateLoadBalancerListeners",
    "DeleteLoadBalancerListeners",
    "DescribeLoadBalancerAttributes",
    "ModifyLoadBalancerAttributes",
    "AddTags",
    "RemoveTags",
    "DescribeTags",
    "ApplySecurityGroupsToLoadBalancer",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listener {
    pub protocol: String,
    pub port: i64,
    pub instance_protocol: String,
    pub instance_port: i64,
    pub certificate: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    pub target: String,
    pub interval: i64,
    pub timeout: i64,
    pub unhealthy: i64,
    pub healthy: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub cross_zone: bool,
    pub access_log: bool,
    pub draining: bool,
    pub draining_timeout: i64,
    pub idle_timeout: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct ClassicLb {
    pub name: String,
    pub dns_name: String,
    /// The address the data plane serves the listeners on (what `dns_name` resolves to).
    pub vip: std::net::Ipv4Addr,
    pub scheme: String,
    pub vpc_id: String,
    pub listeners: Vec<Listener>,
    pub subnets: Vec<String>,
    pub zones: Vec<String>,
    pub security_groups: Vec<String>,
    pub instances: Vec<String>,
    pub health_check: HealthCheck,
    pub attributes: Attributes,
    pub tags: BTreeMap<String, String>,
    pub created: jiff::Timestamp,
}

/// Runs one action; the body goes inside `<{Action}Result>`.
pub(crate) fn handle(cloud: &mut Cloud, action: &str, p: &Params) -> Result<String, AwsError> {
    let mut x = Xml::new();
    match action {
        "CreateLoadBalancer" => create(cloud, p, &mut x)?,
        "DescribeLoadBalancers" => describe(cloud, p, &mut x)?,
        "DeleteLoadBalancer" => {
            let name = p.require("LoadBalancerName")?;
            // Deleting an absent load balancer succeeds, as in ELB.
            cloud.elbs.remove(name);
        }
        "RegisterInstancesWithLoadBalancer" => register(cloud, p, &mut x, true)?,
        "DeregisterInstancesFromLoadBalancer" => register(cloud, p, &mut x, false)?,
        "DescribeInstanceHealth" => instance_health(cloud, p, &mut x)?,
        "ConfigureHealthCheck" => {
            let name = p.require("LoadBalancerName")?.to_string();
            let hc = HealthCheck {
                target: p.require("HealthCheck.Target")?.to_string(),
                interval: required_int(p, "HealthCheck.Interval")?,
                timeout: required_int(p, "HealthCheck.Timeout")?,
                unhealthy: required_int(p, "HealthCheck.UnhealthyThreshold")?,
                healthy: required_int(p, "HealthCheck.HealthyThreshold")?,
            };
            lb_mut(cloud, &name)?.health_check = hc.clone();
            write_health_check(&mut x, &hc);
        }
        "CreateLoadBalancerListeners" => {
            let name = p.require("LoadBalancerName")?.to_string();
            let new = listeners(p)?;
            let lb = lb_mut(cloud, &name)?;
            for l in new {
                match lb.listeners.iter().find(|o| o.port == l.port) {
                    Some(o) if *o == l => {}
                    Some(_) => {
                        return Err(AwsError::bad(
                            "DuplicateListener",
                            format!("a listener on port {} already exists", l.port),
                        ));
                    }
                    None => lb.listeners.push(l),
                }
            }
        }
        "DeleteLoadBalancerListeners" => {
            let name = p.require("LoadBalancerName")?.to_string();
            let ports = p.list("LoadBalancerPorts.member");
            if ports.is_empty() {
                return Err(AwsError::missing("LoadBalancerPorts"));
            }
            let lb = lb_mut(cloud, &name)?;
            lb.listeners
                .retain(|l| !ports.contains(&l.port.to_string()));
        }
        "DescribeLoadBalancerAttributes" => {
            let name = p.require("LoadBalancerName")?.to_string();
            let attrs = lb_mut(cloud, &name)?.attributes.clone();
            write_attributes(&mut x, &attrs);
        }
        "ModifyLoadBalancerAttributes" => modify_attributes(cloud, p, &mut x)?,
        "AddTags" | "RemoveTags" => {
            let names = p.list("LoadBalancerNames.member");
            if names.is_empty() {
                return Err(AwsError::missing("LoadBalancerNames"));
            }
            let tags = tags(p)?;
            if tags.is_empty() {
                return Err(AwsError::missing("Tags"));
            }
            for n in &names {
                lb_mut(cloud, n)?;
            }
            for n in &names {
                let lb = lb_mut(cloud, n)?;
                for (k, v) in &tags {
                    if action == "AddTags" {
                        lb.tags.insert(k.clone(), v.clone());
                    } else {
                        lb.tags.remove(k);
                    }
                }
            }
        }
        "DescribeTags" => {
            let names = p.list("LoadBalancerNames.member");
            if names.is_empty() {
                return Err(AwsError::missing("LoadBalancerNames"));
            }
            let mut found = Vec::new();
            for n in &names {
                found.push(lb_mut(cloud, n)?.clone());
            }
            x.list("TagDescriptions", "member", &found, |x, lb| {
                x.text("LoadBalancerName", &lb.name).list(
                    "Tags",
                    "member",
                    &lb.tags,
                    |x, (k, v)| {
                        x.text("Key", k).text("Value", v);
                    },
                );
            });
        }
        "ApplySecurityGroupsToLoadBalancer" => {
            let name = p.require("LoadBalancerName")?.to_string();
            let groups = p.list("SecurityGroups.member");
            for g in &groups {
                if !cloud.security_groups.iter().any(|s| &s.id == g) {
                    return Err(AwsError::bad(
                        "InvalidSecurityGroup",
                        format!("security group {g} does not exist"),
                    ));
                }
            }
            lb_mut(cloud, &name)?.security_groups = groups.clone();
            x.list("SecurityGroups", "member", &groups, |x, g| {
                x.buf_text(g);
            });
        }
        other => return Err(crate::ec2::invalid_action(other)),
    }
    Ok(x.finish())
}

fn required_int(p: &Params, key: &str) -> Result<i64, AwsError> {
    p.int(key)?.ok_or_else(|| AwsError::missing(key))
}

fn not_found(name: &str) -> AwsError {
    AwsError::bad(
        "LoadBalancerNotFound",
        format!("There is no ACTIVE Load Balancer named '{name}'"),
    )
}

fn lb_mut<'c>(cloud: &'c mut Cloud, name: &str) -> Result<&'c mut ClassicLb, AwsError> {
    cloud.elbs.get_mut(name).ok_or_else(|| not_found(name))
}

/// `Listeners.member.N.{Protocol,LoadBalancerPort,InstanceProtocol,InstancePort,SSLCertificateId}`.
fn listeners(p: &Params) -> Result<Vec<Listener>, AwsError> {
    let mut out = Vec::new();
    for i in p.indexes("Listeners.member") {
        let k = |s: &str| format!("Listeners.member.{i}.{s}");
        let protocol = p.require(&k("Protocol"))?.to_ascii_uppercase();
        out.push(Listener {
            instance_protocol: p
                .get(&k("InstanceProtocol"))
                .map(str::to_ascii_uppercase)
                .unwrap_or_else(|| protocol.clone()),
            protocol,
            port: required_int(p, &k("LoadBalancerPort"))?,
            instance_port: required_int(p, &k("InstancePort"))?,
            certificate: p.get(&k("SSLCertificateId")).map(str::to_string),
        });
    }
    if out.is_empty() {
        return Err(AwsError::missing("Listeners"));
    }
    for l in &out {
        // Classic load balancers speak HTTP, HTTPS, TCP and SSL only (ELB API reference,
        // `Listener` data type); UDP needs an NLB. moto 5 accepts any protocol here; the
        // code is the API's ValidationError, the wording ours.
        for proto in [&l.protocol, &l.instance_protocol] {
            if !matches!(proto.as_str(), "HTTP" | "HTTPS" | "TCP" | "SSL") {
                return Err(AwsError::bad(
                    "ValidationError",
                    format!(
                        "Invalid protocol {proto}: a classic load balancer listener is HTTP, HTTPS, TCP or SSL"
                    ),
                ));
            }
        }
        if !(1..=65535).contains(&l.port) || !(1..=65535).contains(&l.instance_port) {
            return Err(AwsError::bad(
                "ValidationError",
                format!("invalid port in listener {}:{}", l.port, l.instance_port),
            ));
        }
    }
    Ok(out)
}

fn tags(p: &Params) -> Result<Vec<(String, String)>, AwsError> {
    p.indexes("Tags.member")
        .into_iter()
        .map(|i| {
            let key = p.require(&format!("Tags.member.{i}.Key"))?.to_string();
            let value = p
                .get(&format!("Tags.member.{i}.Value"))
                .unwrap_or("")
                .to_string();
            Ok((key, value))
        })
        .collect()
}

fn dns_name(region: &str, name: &str, internal: bool) -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 10_000_000_000;
    let prefix = if internal { "internal-" } else { "" };
    format!("{prefix}{name}-{n}.{region}.elb.amazonaws.com")
}

fn create(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("LoadBalancerName")?.to_string();
    if name.len() > 32
        || name.starts_with('-')
        || name.ends_with('-')
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(AwsError::bad(
            "ValidationError",
            format!("LoadBalancerName {name:?} must be 1-32 alphanumeric characters or hyphens"),
        ));
    }
    let listeners = listeners(p)?;
    let subnets = p.list("Subnets.member");
    let mut zones = p.list("AvailabilityZones.member");
    let groups = p.list("SecurityGroups.member");
    let scheme = p.get("Scheme").unwrap_or("internet-facing").to_string();
    if scheme != "internal" && scheme != "internet-facing" {
        return Err(AwsError::bad(
            "ValidationError",
            format!("invalid Scheme {scheme:?}"),
        ));
    }
    if subnets.is_empty() && zones.is_empty() {
        return Err(AwsError::bad(
            "ValidationError",
            "Either AvailabilityZones or SubnetIds must be specified",
        ));
    }
    let mut vpc_id = cloud.vpcs.first().map(|v| v.id.clone()).unwrap_or_default();
    for s in &subnets {
        let subnet =
            cloud.subnets.iter().find(|n| &n.id == s).ok_or_else(|| {
                AwsError::bad("SubnetNotFound", format!("subnet {s} does not exist"))
            })?;
        vpc_id = subnet.vpc_id.clone();
        if !zones.contains(&subnet.zone) {
            zones.push(subnet.zone.clone());
        }
    }
    for g in &groups {
        if !cloud.security_groups.iter().any(|s| &s.id == g) {
            return Err(AwsError::bad(
                "InvalidSecurityGroup",
                format!("security group {g} does not exist"),
            ));
        }
    }
    if let Some(existing) = cloud.elbs.get(&name) {
        // ELB answers a repeated identical create with the same DNS name.
        if existing.listeners == listeners {
            x.text("DNSName", &existing.dns_name);
            return Ok(());
        }
        return Err(AwsError::bad(
            "DuplicateLoadBalancerName",
            format!(
                "Load Balancer named '{name}' already exists and it is configured with different parameters."
            ),
        ));
    }
    let vip = cloud
        .free_vip()
        .map_err(|e| AwsError::bad("TooManyLoadBalancers", e.to_string()))?;
    let lb = ClassicLb {
        dns_name: dns_name(&cloud.region, &name, scheme == "internal"),
        vip,
        name: name.clone(),
        scheme,
        vpc_id,
        listeners,
        subnets,
        zones,
        security_groups: groups,
        instances: Vec::new(),
        health_check: HealthCheck {
            target: "TCP:80".into(),
            interval: 30,
            timeout: 5,
            unhealthy: 2,
            healthy: 10,
        },
        attributes: Attributes {
            cross_zone: false,
            access_log: false,
            draining: false,
            draining_timeout: 300,
            idle_timeout: 60,
        },
        tags: tags(p)?.into_iter().collect(),
        created: jiff::Timestamp::now(),
    };
    x.text("DNSName", &lb.dns_name);
    cloud.elbs.insert(name, lb);
    Ok(())
}

fn write_health_check(x: &mut Xml, hc: &HealthCheck) {
    x.elem("HealthCheck", |x| {
        x.text("Target", &hc.target)
            .text("Interval", hc.interval.to_string())
            .text("Timeout", hc.timeout.to_string())
            .text("UnhealthyThreshold", hc.unhealthy.to_string())
            .text("HealthyThreshold", hc.healthy.to_string());
    });
}

fn describe(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let names = p.list("LoadBalancerNames.member");
    let mut found: Vec<&ClassicLb> = Vec::new();
    if names.is_empty() {
        found.extend(cloud.elbs.values());
    } else {
        for n in &names {
            found.push(cloud.elbs.get(n).ok_or_else(|| not_found(n))?);
        }
    }
    let start = match p.get("Marker") {
        None => 0,
        Some(m) => m
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= found.len())
            .ok_or_else(|| AwsError::bad("InvalidNextToken", "invalid Marker"))?,
    };
    let size = p.int("PageSize")?.unwrap_or(400);
    if !(1..=400).contains(&size) {
        return Err(AwsError::bad("ValidationError", "PageSize must be 1..=400"));
    }
    let end = (start + usize::try_from(size).unwrap_or(400)).min(found.len());
    x.list(
        "LoadBalancerDescriptions",
        "member",
        &found[start..end],
        |x, lb| {
            x.text("LoadBalancerName", &lb.name)
                .text("DNSName", &lb.dns_name)
                .text("CanonicalHostedZoneNameID", "Z1H1FL5HABSF5")
                .list("ListenerDescriptions", "member", &lb.listeners, |x, l| {
                    x.elem("Listener", |x| {
                        x.text("Protocol", &l.protocol)
                            .text("LoadBalancerPort", l.port.to_string())
                            .text("InstanceProtocol", &l.instance_protocol)
                            .text("InstancePort", l.instance_port.to_string())
                            .opt("SSLCertificateId", l.certificate.as_ref());
                    })
                    .elem("PolicyNames", |_| {});
                })
                .elem("Policies", |x| {
                    x.elem("AppCookieStickinessPolicies", |_| {})
                        .elem("LBCookieStickinessPolicies", |_| {})
                        .elem("OtherPolicies", |_| {});
                })
                .elem("BackendServerDescriptions", |_| {})
                .list("AvailabilityZones", "member", &lb.zones, |x, z| {
                    x.buf_text(z);
                })
                .list("Subnets", "member", &lb.subnets, |x, s| {
                    x.buf_text(s);
                })
                .text("VPCId", &lb.vpc_id)
                .list("Instances", "member", &lb.instances, |x, i| {
                    x.text("InstanceId", i);
                });
            write_health_check(x, &lb.health_check);
            x.elem("SourceSecurityGroup", |x| {
                x.text("OwnerAlias", &cloud.account_id)
                    .text("GroupName", format!("k8s-elb-{}", lb.name));
            })
            .list("SecurityGroups", "member", &lb.security_groups, |x, g| {
                x.buf_text(g);
            })
            .text(
                "CreatedTime",
                lb.created.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string(),
            )
            .text("Scheme", &lb.scheme);
        },
    );
    if end < found.len() {
        x.text("NextMarker", end.to_string());
    }
    Ok(())
}

fn register(cloud: &mut Cloud, p: &Params, x: &mut Xml, add: bool) -> Result<(), AwsError> {
    let name = p.require("LoadBalancerName")?.to_string();
    let ids: Vec<String> = p
        .indexes("Instances.member")
        .into_iter()
        .filter_map(|i| {
            p.get(&format!("Instances.member.{i}.InstanceId"))
                .map(str::to_string)
        })
        .collect();
    if ids.is_empty() {
        return Err(AwsError::missing("Instances"));
    }
    lb_mut(cloud, &name)?;
    if add {
        for id in &ids {
            if cloud
                .instance(id)
                .is_none_or(|i| i.state == InstanceState::Terminated)
            {
                return Err(AwsError::bad(
                    "InvalidInstance",
                    format!("The requested instance {id} is not valid for this load balancer"),
                ));
            }
        }
    }
    let lb = lb_mut(cloud, &name)?;
    for id in ids {
        if add && !lb.instances.contains(&id) {
            lb.instances.push(id);
        } else if !add {
            lb.instances.retain(|i| *i != id);
        }
    }
    let now = lb.instances.clone();
    x.list("Instances", "member", &now, |x, i| {
        x.text("InstanceId", i);
    });
    Ok(())
}

/// Registered instances are `InService` while running. Real health checks come with the
/// data plane.
fn instance_health(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("LoadBalancerName")?.to_string();
    let lb = lb_mut(cloud, &name)?.clone();
    let states: Vec<(String, bool)> = lb
        .instances
        .iter()
        .map(|id| {
            let up = cloud
                .instance(id)
                .is_some_and(|i| i.state == InstanceState::Running);
            (id.clone(), up)
        })
        .collect();
    x.list("InstanceStates", "member", states, |x, (id, up)| {
        x.text("InstanceId", &id)
            .text("State", if up { "InService" } else { "OutOfService" })
            .text("ReasonCode", if up { "N/A" } else { "Instance" })
            .text(
                "Description",
                if up {
                    "N/A"
                } else {
                    "Instance is not running."
                },
            );
    });
    Ok(())
}

fn write_attributes(x: &mut Xml, a: &Attributes) {
    x.elem("LoadBalancerAttributes", |x| {
        x.elem("CrossZoneLoadBalancing", |x| {
            x.text("Enabled", a.cross_zone.to_string());
        })
        .elem("AccessLog", |x| {
            x.text("Enabled", a.access_log.to_string());
        })
        .elem("ConnectionDraining", |x| {
            x.text("Enabled", a.draining.to_string())
                .text("Timeout", a.draining_timeout.to_string());
        })
        .elem("ConnectionSettings", |x| {
            x.text("IdleTimeout", a.idle_timeout.to_string());
        })
        .elem("AdditionalAttributes", |_| {});
    });
}

fn modify_attributes(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("LoadBalancerName")?.to_string();
    let k = |s: &str| format!("LoadBalancerAttributes.{s}");
    let cross = p.bool(&k("CrossZoneLoadBalancing.Enabled"))?;
    let log = p.bool(&k("AccessLog.Enabled"))?;
    let draining = p.bool(&k("ConnectionDraining.Enabled"))?;
    let draining_timeout = p.int(&k("ConnectionDraining.Timeout"))?;
    let idle = p.int(&k("ConnectionSettings.IdleTimeout"))?;
    if let Some(t) = idle
        && !(1..=4000).contains(&t)
    {
        return Err(AwsError::bad(
            "ValidationError",
            "IdleTimeout must be 1..=4000",
        ));
    }
    let lb = lb_mut(cloud, &name)?;
    let a = &mut lb.attributes;
    if let Some(v) = cross {
        a.cross_zone = v;
    }
    if let Some(v) = log {
        a.access_log = v;
    }
    if let Some(v) = draining {
        a.draining = v;
    }
    if let Some(v) = draining_timeout {
        a.draining_timeout = v;
    }
    if let Some(v) = idle {
        a.idle_timeout = v;
    }
    let attrs = a.clone();
    x.text("LoadBalancerName", &name);
    write_attributes(x, &attrs);
    Ok(())
}
