//! The ELB classic query protocol: each action's parameters are validated into a typed
//! request, handed to `state`, and the answer is rendered as ELB XML (`.member.N` lists).

use super::model::{Attributes, HealthCheck, Listener};
use super::state::{self, AttributeChanges};
use crate::error::AwsError;
use crate::params::Params;
use crate::state::Cloud;
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

/// Runs one action; the body goes inside `<{Action}Result>`.
pub(crate) fn handle(cloud: &mut Cloud, action: &str, p: &Params) -> Result<String, AwsError> {
    let mut x = Xml::new();
    match action {
        "CreateLoadBalancer" => {
            let req = create_request(p)?;
            let dns_name = state::create(cloud, req, || tags(p))?;
            x.text("DNSName", &dns_name);
        }
        "DescribeLoadBalancers" => describe(cloud, p, &mut x)?,
        "DeleteLoadBalancer" => {
            let name = p.require("LoadBalancerName")?;
            state::delete(cloud, name);
        }
        "RegisterInstancesWithLoadBalancer" | "DeregisterInstancesFromLoadBalancer" => {
            let name = p.require("LoadBalancerName")?;
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
            let add = action == "RegisterInstancesWithLoadBalancer";
            let now = state::register(cloud, name, ids, add)?;
            x.list("Instances", "member", &now, |x, i| {
                x.text("InstanceId", i);
            });
        }
        "DescribeInstanceHealth" => {
            let name = p.require("LoadBalancerName")?;
            let states = state::instance_health(cloud, name)?;
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
        }
        "ConfigureHealthCheck" => {
            let name = p.require("LoadBalancerName")?;
            let hc = HealthCheck {
                target: p.require("HealthCheck.Target")?.to_string(),
                interval: required_int(p, "HealthCheck.Interval")?,
                timeout: required_int(p, "HealthCheck.Timeout")?,
                unhealthy: required_int(p, "HealthCheck.UnhealthyThreshold")?,
                healthy: required_int(p, "HealthCheck.HealthyThreshold")?,
            };
            state::configure_health_check(cloud, name, hc.clone())?;
            write_health_check(&mut x, &hc);
        }
        "CreateLoadBalancerListeners" => {
            let name = p.require("LoadBalancerName")?;
            let new = listeners(p)?;
            state::create_listeners(cloud, name, new)?;
        }
        "DeleteLoadBalancerListeners" => {
            let name = p.require("LoadBalancerName")?;
            let ports = p.list("LoadBalancerPorts.member");
            if ports.is_empty() {
                return Err(AwsError::missing("LoadBalancerPorts"));
            }
            state::delete_listeners(cloud, name, &ports)?;
        }
        "DescribeLoadBalancerAttributes" => {
            let name = p.require("LoadBalancerName")?;
            let attrs = state::attributes(cloud, name)?;
            write_attributes(&mut x, &attrs);
        }
        "ModifyLoadBalancerAttributes" => {
            let name = p.require("LoadBalancerName")?;
            let changes = attribute_changes(p)?;
            let attrs = state::modify_attributes(cloud, name, changes)?;
            x.text("LoadBalancerName", name);
            write_attributes(&mut x, &attrs);
        }
        "AddTags" | "RemoveTags" => {
            let names = p.list("LoadBalancerNames.member");
            if names.is_empty() {
                return Err(AwsError::missing("LoadBalancerNames"));
            }
            let tags = tags(p)?;
            if tags.is_empty() {
                return Err(AwsError::missing("Tags"));
            }
            state::change_tags(cloud, &names, &tags, action == "AddTags")?;
        }
        "DescribeTags" => {
            let names = p.list("LoadBalancerNames.member");
            if names.is_empty() {
                return Err(AwsError::missing("LoadBalancerNames"));
            }
            let found = state::named(cloud, &names)?;
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
            let name = p.require("LoadBalancerName")?;
            let groups = p.list("SecurityGroups.member");
            state::apply_security_groups(cloud, name, groups.clone())?;
            x.list("SecurityGroups", "member", &groups, |x, g| {
                x.buf_text(g);
            });
        }
        other => return Err(crate::ec2::invalid_action(other)),
    }
    Ok(x.finish())
}

// ---------------------------------------------------------------------------------------
// Validation: query parameters -> typed requests.

fn required_int(p: &Params, key: &str) -> Result<i64, AwsError> {
    p.int(key)?.ok_or_else(|| AwsError::missing(key))
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

fn create_request(p: &Params) -> Result<state::Create, AwsError> {
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
    let zones = p.list("AvailabilityZones.member");
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
    Ok(state::Create {
        name,
        listeners,
        subnets,
        zones,
        groups,
        scheme,
    })
}

fn attribute_changes(p: &Params) -> Result<AttributeChanges, AwsError> {
    let k = |s: &str| format!("LoadBalancerAttributes.{s}");
    let changes = AttributeChanges {
        cross_zone: p.bool(&k("CrossZoneLoadBalancing.Enabled"))?,
        access_log: p.bool(&k("AccessLog.Enabled"))?,
        draining: p.bool(&k("ConnectionDraining.Enabled"))?,
        draining_timeout: p.int(&k("ConnectionDraining.Timeout"))?,
        idle_timeout: p.int(&k("ConnectionSettings.IdleTimeout"))?,
    };
    if let Some(t) = changes.idle_timeout
        && !(1..=4000).contains(&t)
    {
        return Err(AwsError::bad(
            "ValidationError",
            "IdleTimeout must be 1..=4000",
        ));
    }
    Ok(changes)
}

// ---------------------------------------------------------------------------------------
// Rendering.

/// `DescribeLoadBalancers`: the pages are the protocol's (`Marker` is an offset).
fn describe(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let names = p.list("LoadBalancerNames.member");
    let found = state::describe(cloud, &names)?;
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

fn write_health_check(x: &mut Xml, hc: &HealthCheck) {
    x.elem("HealthCheck", |x| {
        x.text("Target", &hc.target)
            .text("Interval", hc.interval.to_string())
            .text("Timeout", hc.timeout.to_string())
            .text("UnhealthyThreshold", hc.unhealthy.to_string())
            .text("HealthyThreshold", hc.healthy.to_string());
    });
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
