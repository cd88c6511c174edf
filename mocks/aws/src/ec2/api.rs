//! The EC2 query protocol: each action's parameters are validated (filters included),
//! mutations go through `state`, and the answer is rendered in the EC2 wire shapes
//! (`<item>` lists, camelCase names).

use std::collections::BTreeMap;

use super::state::{
    self, GroupRef, StateChange, lookup_instances, mac_of, network_nodes, not_found,
    resource_exists, resource_type, topology_layers,
};
use crate::error::AwsError;
use crate::params::{Filter, Params, wildcard_match};
use crate::state::{
    Cloud, Instance, InstanceState, Permission, Route, SecurityGroup, private_dns_name,
    public_dns_name, zone_id,
};
use crate::xml::Xml;

/// Every EC2 action the mock answers.
pub(crate) const ACTIONS: &[&str] = &[
    "DescribeInstances",
    "RunInstances",
    "StopInstances",
    "StartInstances",
    "TerminateInstances",
    "RebootInstances",
    "DescribeAvailabilityZones",
    "DescribeSubnets",
    "DescribeVpcs",
    "DescribeRouteTables",
    "CreateRoute",
    "DeleteRoute",
    "DescribeSecurityGroups",
    "CreateSecurityGroup",
    "AuthorizeSecurityGroupIngress",
    "RevokeSecurityGroupIngress",
    "DeleteSecurityGroup",
    "CreateTags",
    "DeleteTags",
    "DescribeTags",
    "DescribeNetworkInterfaces",
    "ModifyInstanceAttribute",
    "DescribeInstanceTopology",
];

/// Runs one action; the body goes inside `<{Action}Response>` after `<requestId>`.
pub(crate) fn handle(cloud: &mut Cloud, action: &str, p: &Params) -> Result<String, AwsError> {
    let mut x = Xml::new();
    match action {
        "DescribeInstances" => describe_instances(cloud, p, &mut x)?,
        "RunInstances" => run_instances(cloud, p, &mut x)?,
        "StopInstances" => change_state(cloud, p, &mut x, StateChange::Stop)?,
        "StartInstances" => change_state(cloud, p, &mut x, StateChange::Start)?,
        "TerminateInstances" => change_state(cloud, p, &mut x, StateChange::Terminate)?,
        "RebootInstances" => reboot_instances(cloud, p, &mut x)?,
        "DescribeAvailabilityZones" => describe_zones(cloud, p, &mut x)?,
        "DescribeSubnets" => describe_subnets(cloud, p, &mut x)?,
        "DescribeVpcs" => describe_vpcs(cloud, p, &mut x)?,
        "DescribeRouteTables" => describe_route_tables(cloud, p, &mut x)?,
        "CreateRoute" => create_route(cloud, p, &mut x)?,
        "DeleteRoute" => delete_route(cloud, p, &mut x)?,
        "DescribeSecurityGroups" => describe_security_groups(cloud, p, &mut x)?,
        "CreateSecurityGroup" => create_security_group(cloud, p, &mut x)?,
        "AuthorizeSecurityGroupIngress" => ingress(cloud, p, &mut x, true)?,
        "RevokeSecurityGroupIngress" => ingress(cloud, p, &mut x, false)?,
        "DeleteSecurityGroup" => delete_security_group(cloud, p, &mut x)?,
        "CreateTags" => create_tags(cloud, p, &mut x)?,
        "DeleteTags" => delete_tags(cloud, p, &mut x)?,
        "DescribeTags" => describe_tags(cloud, p, &mut x)?,
        "DescribeNetworkInterfaces" => describe_enis(cloud, p, &mut x)?,
        "ModifyInstanceAttribute" => modify_instance_attribute(cloud, p, &mut x)?,
        "DescribeInstanceTopology" => describe_instance_topology(cloud, p, &mut x)?,
        other => return Err(invalid_action(other)),
    }
    Ok(x.finish())
}

pub(crate) fn invalid_action(action: &str) -> AwsError {
    AwsError::bad(
        "InvalidAction",
        format!("The action {action} is not valid for this web service."),
    )
}

/// Whether a resource passes every filter. `attr` gives the resource's values for a
/// filter name, `None` for a name the resource type does not know.
fn passes(
    filters: &[Filter],
    tags: &BTreeMap<String, String>,
    attr: impl Fn(&str) -> Option<Vec<String>>,
) -> Result<bool, AwsError> {
    for f in filters {
        let values = if let Some(key) = f.name.strip_prefix("tag:") {
            tags.get(key).cloned().into_iter().collect()
        } else if f.name == "tag-key" {
            tags.keys().cloned().collect()
        } else if f.name == "tag-value" {
            tags.values().cloned().collect()
        } else {
            attr(&f.name).ok_or_else(|| {
                AwsError::bad(
                    "InvalidParameterValue",
                    format!("The filter '{}' is invalid", f.name),
                )
            })?
        };
        let hit = f
            .values
            .iter()
            .any(|pat| values.iter().any(|v| wildcard_match(pat, v)));
        if !hit {
            return Ok(false);
        }
    }
    Ok(true)
}

fn tag_set(x: &mut Xml, tags: &BTreeMap<String, String>) {
    x.list("tagSet", "item", tags, |x, (k, v)| {
        x.text("key", k).text("value", v);
    });
}

// ---- instances ----

fn instance_attr(cloud: &Cloud, i: &Instance, name: &str) -> Option<Vec<String>> {
    let one = |s: String| Some(vec![s]);
    match name {
        "instance-id" => one(i.id.clone()),
        "instance-state-name" => one(i.state.name().into()),
        "instance-state-code" => one(i.state.code().to_string()),
        "instance-type" => one(i.instance_type.clone()),
        "private-dns-name" => one(cloud.private_dns_of(i)),
        "private-ip-address" => one(i.private_ip.to_string()),
        "ip-address" => Some(i.public_ip.iter().map(|p| p.to_string()).collect()),
        "dns-name" => Some(
            i.public_ip
                .iter()
                .map(|p| public_dns_name(&cloud.region, *p))
                .collect(),
        ),
        "vpc-id" => one(i.vpc_id.clone()),
        "subnet-id" => one(i.subnet_id.clone()),
        "availability-zone" => one(i.zone.clone()),
        "reservation-id" => one(i.reservation_id.clone()),
        "image-id" => one(i.image_id.clone()),
        "instance.group-id" | "group-id" => Some(i.group_ids.clone()),
        "network-interface.network-interface-id" => one(i.eni_id.clone()),
        _ => None,
    }
}

fn write_instance(cloud: &Cloud, x: &mut Xml, i: &Instance) {
    let private_dns = cloud.private_dns_of(i);
    let public_dns = i
        .public_ip
        .map(|ip| public_dns_name(&cloud.region, ip))
        .unwrap_or_default();
    let groups: Vec<&SecurityGroup> = cloud
        .security_groups
        .iter()
        .filter(|g| i.group_ids.contains(&g.id))
        .collect();
    let write_groups = |x: &mut Xml| {
        x.list("groupSet", "item", &groups, |x, g| {
            x.text("groupId", &g.id).text("groupName", &g.name);
        });
    };
    x.text("instanceId", &i.id)
        .text("imageId", &i.image_id)
        .elem("instanceState", |x| {
            x.text("code", i.state.code().to_string())
                .text("name", i.state.name());
        })
        .text("privateDnsName", &private_dns)
        .text("dnsName", &public_dns)
        .text("amiLaunchIndex", "0")
        .text("instanceType", &i.instance_type)
        .text(
            "launchTime",
            i.launch_time.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string(),
        )
        .elem("placement", |x| {
            x.text("availabilityZone", &i.zone)
                .text("tenancy", "default");
        })
        .elem("monitoring", |x| {
            x.text("state", "disabled");
        })
        .text("subnetId", &i.subnet_id)
        .text("vpcId", &i.vpc_id)
        .text("privateIpAddress", i.private_ip.to_string())
        .opt("ipAddress", i.public_ip.map(|p| p.to_string()))
        .text("sourceDestCheck", i.source_dest_check.to_string());
    write_groups(x);
    x.text("architecture", "x86_64")
        .text("rootDeviceType", "ebs")
        .text("rootDeviceName", "/dev/xvda")
        .text("virtualizationType", "hvm")
        .text("hypervisor", "xen");
    tag_set(x, &cloud.tags_of(&i.id));
    x.list("networkInterfaceSet", "item", [i], |x, i| {
        write_eni_body(cloud, x, i, true);
        write_groups(x);
    });
}

/// The fields an ENI shares between DescribeInstances and DescribeNetworkInterfaces.
fn write_eni_body(cloud: &Cloud, x: &mut Xml, i: &Instance, in_instance: bool) {
    let private_dns = cloud.private_dns_of(i);
    let association = |x: &mut Xml| {
        if let Some(ip) = i.public_ip {
            x.elem("association", |x| {
                x.text("publicIp", ip.to_string())
                    .text("publicDnsName", public_dns_name(&cloud.region, ip))
                    .text("ipOwnerId", "amazon");
            });
        }
    };
    x.text("networkInterfaceId", &i.eni_id)
        .text("subnetId", &i.subnet_id)
        .text("vpcId", &i.vpc_id);
    if !in_instance {
        x.text("availabilityZone", &i.zone)
            .text("interfaceType", "interface");
    }
    x.text("description", "")
        .text("ownerId", &cloud.account_id)
        .text("status", "in-use")
        .text("macAddress", mac_of(i))
        .text("privateIpAddress", i.private_ip.to_string())
        .text("privateDnsName", &private_dns)
        .text("sourceDestCheck", i.source_dest_check.to_string())
        .elem("attachment", |x| {
            x.text("attachmentId", format!("eni-attach-{}", &i.eni_id[4..]));
            if !in_instance {
                x.text("instanceId", &i.id)
                    .text("instanceOwnerId", &cloud.account_id);
            }
            x.text("deviceIndex", "0")
                .text("status", "attached")
                .text("deleteOnTermination", "true");
        });
    association(x);
    // The primary address first, then the secondaries (EC2 lists them in this order).
    let addresses = std::iter::once((i.private_ip, true))
        .chain(i.secondary_private_ips.iter().map(|ip| (*ip, false)));
    x.list(
        "privateIpAddressesSet",
        "item",
        addresses,
        |x, (ip, primary)| {
            let dns = if primary {
                private_dns.clone()
            } else {
                private_dns_name(&cloud.region, ip)
            };
            x.text("privateIpAddress", ip.to_string())
                .text("privateDnsName", &dns)
                .text("primary", primary.to_string());
            if primary {
                association(x);
            }
        },
    );
    x.list("ipv6AddressesSet", "item", &i.ipv6_addresses, |x, ip| {
        x.text("ipv6Address", ip.to_string());
    });
}

// ---- instance topology ----

/// EC2 `DescribeInstanceTopology`: `InstanceId.N`, `GroupName.N` (the mock has no
/// placement groups, so any name matches nothing), filters `availability-zone`,
/// `instance-type`, `zone-id`, and `MaxResults` (1..=100) / `NextToken` paging.
fn describe_instance_topology(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("InstanceId");
    if ids.len() > 100 {
        return Err(AwsError::invalid_value(
            "InstanceIds",
            "more than 100 instance IDs",
        ));
    }
    let max = p.int("MaxResults")?;
    if let Some(m) = max
        && !(1..=100).contains(&m)
    {
        return Err(AwsError::invalid_value("MaxResults", &m.to_string()));
    }
    let groups = p.list("GroupName");
    let filters = p.filters()?;
    let candidates = if ids.is_empty() {
        cloud
            .instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminated)
            .collect()
    } else {
        lookup_instances(cloud, &ids)?
    };
    let mut matched = Vec::new();
    for i in candidates {
        let Some(layers) = topology_layers(&i.instance_type) else {
            continue;
        };
        if !groups.is_empty() {
            continue;
        }
        let attr = |n: &str| {
            let one = |s: String| Some(vec![s]);
            match n {
                "availability-zone" => one(i.zone.clone()),
                "instance-type" => one(i.instance_type.clone()),
                "zone-id" => one(zone_id(&i.zone)),
                _ => None,
            }
        };
        if passes(&filters, &BTreeMap::new(), attr)? {
            matched.push((i, layers));
        }
    }
    let start = match p.get("NextToken") {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= matched.len())
            .ok_or_else(|| AwsError::bad("InvalidNextToken", "The specified token is invalid"))?,
    };
    let end = max.map_or(matched.len(), |m| {
        (start + usize::try_from(m).unwrap_or(usize::MAX)).min(matched.len())
    });
    x.list(
        "instanceSet",
        "item",
        &matched[start..end],
        |x, (i, layers)| {
            x.text("instanceId", &i.id)
                .text("instanceType", &i.instance_type)
                .list(
                    "networkNodeSet",
                    "item",
                    network_nodes(i, *layers),
                    |x, n| {
                        x.buf_text(&n);
                    },
                )
                .text("availabilityZone", &i.zone)
                .text("zoneId", zone_id(&i.zone));
        },
    );
    if end < matched.len() {
        x.text("nextToken", end.to_string());
    }
    Ok(())
}

fn describe_instances(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("InstanceId");
    let max = p.int("MaxResults")?;
    if !ids.is_empty() && max.is_some() {
        return Err(AwsError::bad(
            "InvalidParameterCombination",
            "The parameter instancesSet cannot be used with the parameter maxResults",
        ));
    }
    if let Some(m) = max
        && !(5..=1000).contains(&m)
    {
        return Err(AwsError::invalid_value("MaxResults", &m.to_string()));
    }
    let filters = p.filters()?;
    let candidates = if ids.is_empty() {
        cloud.instances.iter().collect()
    } else {
        lookup_instances(cloud, &ids)?
    };
    let mut matched = Vec::new();
    for i in candidates {
        if passes(&filters, &cloud.tags_of(&i.id), |n| {
            instance_attr(cloud, i, n)
        })? {
            matched.push(i);
        }
    }
    let start = match p.get("NextToken") {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= matched.len())
            .ok_or_else(|| AwsError::bad("InvalidNextToken", "The specified token is invalid"))?,
    };
    let end = max.map_or(matched.len(), |m| {
        (start + usize::try_from(m).unwrap_or(usize::MAX)).min(matched.len())
    });
    let page = &matched[start..end];
    // Instances launched together share a reservation; consecutive ones are grouped.
    let mut groups: Vec<Vec<&Instance>> = Vec::new();
    for i in page {
        match groups.last_mut() {
            Some(g) if g[0].reservation_id == i.reservation_id => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    x.list("reservationSet", "item", groups, |x, g| {
        x.text("reservationId", &g[0].reservation_id)
            .text("ownerId", &cloud.account_id)
            .elem("groupSet", |_| {})
            .list("instancesSet", "item", g, |x, i| {
                write_instance(cloud, x, i)
            });
    });
    if end < matched.len() {
        x.text("nextToken", end.to_string());
    }
    Ok(())
}

fn run_instances(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    p.require("ImageId")?;
    let min = p
        .int("MinCount")?
        .ok_or_else(|| AwsError::missing("MinCount"))?;
    let max = p
        .int("MaxCount")?
        .ok_or_else(|| AwsError::missing("MaxCount"))?;
    if min < 1 || max < min || max > 100 {
        return Err(AwsError::invalid_value("MaxCount", &max.to_string()));
    }
    let mut tags = BTreeMap::new();
    for i in p.indexes("TagSpecification") {
        let kind = p.get(&format!("TagSpecification.{i}.ResourceType"));
        if kind.is_some_and(|k| k != "instance") {
            continue;
        }
        for (k, v) in p.tags(&format!("TagSpecification.{i}.Tag"))? {
            tags.insert(k, v.unwrap_or_default());
        }
    }
    let req = state::RunInstances {
        count: max,
        zone: p.get("Placement.AvailabilityZone").map(str::to_string),
        subnet: p.get("SubnetId").map(str::to_string),
        instance_type: p.get("InstanceType").map(str::to_string),
        tags,
    };
    let (reservation, created) = state::run_instances(cloud, req)?;
    x.text("reservationId", &reservation)
        .text("ownerId", &cloud.account_id)
        .elem("groupSet", |_| {});
    let instances: Vec<&Instance> = created.iter().filter_map(|id| cloud.instance(id)).collect();
    x.list("instancesSet", "item", instances, |x, i| {
        let mut pending = i.clone();
        pending.state = InstanceState::Pending;
        write_instance(cloud, x, &pending);
    });
    Ok(())
}

/// Stop/Start/Terminate: the answer shows the transitional state (`stopping`, `pending`,
/// `shutting-down`).
fn change_state(
    cloud: &mut Cloud,
    p: &Params,
    x: &mut Xml,
    change: StateChange,
) -> Result<(), AwsError> {
    let ids = p.list("InstanceId");
    if ids.is_empty() {
        return Err(AwsError::missing("InstanceId"));
    }
    let changes = state::change_state(cloud, &ids, change)?;
    // All three answer `instancesSet` on the wire (boto3 renames it per action).
    x.list(
        "instancesSet",
        "item",
        changes,
        |x, (id, previous, current)| {
            x.text("instanceId", id)
                .elem("currentState", |x| {
                    x.text("code", current.code().to_string())
                        .text("name", current.name());
                })
                .elem("previousState", |x| {
                    x.text("code", previous.code().to_string())
                        .text("name", previous.name());
                });
        },
    );
    Ok(())
}

/// `RebootInstances`: EC2 only queues the reboot and answers `<return>true</return>`; the
/// instance stays `running` throughout and keeps its addresses (a reboot is not a
/// stop/start), so nothing the API shows changes. Unknown ids fail the whole call as in
/// Describe; terminated instances are ignored (API reference, RebootInstances).
fn reboot_instances(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("InstanceId");
    if ids.is_empty() {
        return Err(AwsError::missing("InstanceId"));
    }
    lookup_instances(cloud, &ids)?;
    x.text("return", "true");
    Ok(())
}

fn modify_instance_attribute(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let id = p.require("InstanceId")?.to_string();
    lookup_instances(cloud, std::slice::from_ref(&id))?;
    let check = match p.bool("SourceDestCheck.Value")? {
        Some(v) => Some(v),
        None => match p.get("Attribute") {
            Some("sourceDestCheck") => p.bool("Value")?,
            _ => None,
        },
    };
    let instance_type = p.get("InstanceType.Value").map(str::to_string);
    let groups = p.list("GroupId");
    if check.is_none() && instance_type.is_none() && groups.is_empty() {
        return Err(AwsError::missing("Attribute"));
    }
    let req = state::ModifyInstance {
        source_dest_check: check,
        instance_type,
        groups,
    };
    state::modify_instance(cloud, &id, req)?;
    x.text("return", "true");
    Ok(())
}

fn describe_enis(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("NetworkInterfaceId");
    let filters = p.filters()?;
    for id in &ids {
        if !cloud.instances.iter().any(|i| &i.eni_id == id) {
            return Err(not_found(
                "InvalidNetworkInterfaceID.NotFound",
                "networkInterface ID",
                id,
            ));
        }
    }
    let mut found = Vec::new();
    for i in cloud
        .instances
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
    {
        if !ids.is_empty() && !ids.contains(&i.eni_id) {
            continue;
        }
        let attr = |n: &str| {
            let one = |s: String| Some(vec![s]);
            match n {
                "network-interface-id" => one(i.eni_id.clone()),
                "attachment.instance-id" => one(i.id.clone()),
                "vpc-id" => one(i.vpc_id.clone()),
                "subnet-id" => one(i.subnet_id.clone()),
                "availability-zone" => one(i.zone.clone()),
                "private-ip-address" => one(i.private_ip.to_string()),
                "addresses.private-ip-address" => Some(
                    std::iter::once(&i.private_ip)
                        .chain(&i.secondary_private_ips)
                        .map(|ip| ip.to_string())
                        .collect(),
                ),
                "private-dns-name" => one(cloud.private_dns_of(i)),
                "status" => one("in-use".into()),
                "group-id" => Some(i.group_ids.clone()),
                _ => None,
            }
        };
        if passes(&filters, &BTreeMap::new(), attr)? {
            found.push(i);
        }
    }
    x.list("networkInterfaceSet", "item", found, |x, i| {
        write_eni_body(cloud, x, i, false);
        x.list(
            "groupSet",
            "item",
            cloud
                .security_groups
                .iter()
                .filter(|g| i.group_ids.contains(&g.id)),
            |x, g| {
                x.text("groupId", &g.id).text("groupName", &g.name);
            },
        )
        .elem("tagSet", |_| {});
    });
    Ok(())
}

// ---- network ----

fn describe_zones(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let names = p.list("ZoneName");
    let zone_ids = p.list("ZoneId");
    let filters = p.filters()?;
    for n in &names {
        if !cloud.zones.contains(n) {
            return Err(AwsError::invalid_value("ZoneName", n));
        }
    }
    let mut found = Vec::new();
    for z in &cloud.zones {
        let id = zone_id(z);
        if (!names.is_empty() && !names.contains(z))
            || (!zone_ids.is_empty() && !zone_ids.contains(&id))
        {
            continue;
        }
        let attr = |n: &str| match n {
            "zone-name" => Some(vec![z.clone()]),
            "zone-id" => Some(vec![id.clone()]),
            "region-name" => Some(vec![cloud.region.clone()]),
            "state" => Some(vec!["available".into()]),
            "zone-type" => Some(vec!["availability-zone".into()]),
            _ => None,
        };
        if passes(&filters, &BTreeMap::new(), attr)? {
            found.push((z, id));
        }
    }
    x.list("availabilityZoneInfo", "item", found, |x, (z, id)| {
        x.text("zoneName", z)
            .text("zoneState", "available")
            .text("regionName", &cloud.region)
            .text("zoneId", id)
            .text("zoneType", "availability-zone")
            .text("groupName", &cloud.region)
            .text("networkBorderGroup", &cloud.region)
            .text("optInStatus", "opt-in-not-required")
            .elem("messageSet", |_| {});
    });
    Ok(())
}

fn describe_vpcs(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("VpcId");
    for id in &ids {
        if !cloud.vpcs.iter().any(|v| &v.id == id) {
            return Err(not_found("InvalidVpcID.NotFound", "vpc ID", id));
        }
    }
    let filters = p.filters()?;
    let mut found = Vec::new();
    for v in &cloud.vpcs {
        if !ids.is_empty() && !ids.contains(&v.id) {
            continue;
        }
        let attr = |n: &str| match n {
            "vpc-id" => Some(vec![v.id.clone()]),
            "cidr" | "cidr-block" => Some(vec![v.cidr.clone()]),
            "state" => Some(vec!["available".into()]),
            "is-default" => Some(vec!["false".into()]),
            _ => None,
        };
        if passes(&filters, &cloud.tags_of(&v.id), attr)? {
            found.push(v);
        }
    }
    x.list("vpcSet", "item", found, |x, v| {
        x.text("vpcId", &v.id)
            .text("ownerId", &cloud.account_id)
            .text("state", "available")
            .text("cidrBlock", &v.cidr)
            .text("dhcpOptionsId", "dopt-0ccmconformance")
            .text("instanceTenancy", "default")
            .text("isDefault", "false");
        tag_set(x, &cloud.tags_of(&v.id));
    });
    Ok(())
}

fn describe_subnets(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("SubnetId");
    for id in &ids {
        if !cloud.subnets.iter().any(|s| &s.id == id) {
            return Err(not_found("InvalidSubnetID.NotFound", "subnet ID", id));
        }
    }
    let filters = p.filters()?;
    let mut found = Vec::new();
    for s in &cloud.subnets {
        if !ids.is_empty() && !ids.contains(&s.id) {
            continue;
        }
        let attr = |n: &str| match n {
            "subnet-id" => Some(vec![s.id.clone()]),
            "vpc-id" => Some(vec![s.vpc_id.clone()]),
            "availability-zone" => Some(vec![s.zone.clone()]),
            "availability-zone-id" => Some(vec![zone_id(&s.zone)]),
            "cidr-block" | "cidr" => Some(vec![s.cidr()]),
            "state" => Some(vec!["available".into()]),
            _ => None,
        };
        if passes(&filters, &cloud.tags_of(&s.id), attr)? {
            found.push(s);
        }
    }
    x.list("subnetSet", "item", found, |x, s| {
        x.text("subnetId", &s.id)
            .text(
                "subnetArn",
                format!(
                    "arn:aws:ec2:{}:{}:subnet/{}",
                    cloud.region, cloud.account_id, s.id
                ),
            )
            .text("state", "available")
            .text("ownerId", &cloud.account_id)
            .text("vpcId", &s.vpc_id)
            .text("cidrBlock", s.cidr())
            .text("availableIpAddressCount", "4000")
            .text("availabilityZone", &s.zone)
            .text("availabilityZoneId", zone_id(&s.zone))
            .text("defaultForAz", "false")
            .text("mapPublicIpOnLaunch", "true");
        tag_set(x, &cloud.tags_of(&s.id));
    });
    Ok(())
}

fn describe_route_tables(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("RouteTableId");
    for id in &ids {
        if !cloud.route_tables.iter().any(|t| &t.id == id) {
            return Err(not_found(
                "InvalidRouteTableID.NotFound",
                "routeTable ID",
                id,
            ));
        }
    }
    let filters = p.filters()?;
    let mut found = Vec::new();
    for t in &cloud.route_tables {
        if !ids.is_empty() && !ids.contains(&t.id) {
            continue;
        }
        let attr = |n: &str| match n {
            "route-table-id" => Some(vec![t.id.clone()]),
            "vpc-id" => Some(vec![t.vpc_id.clone()]),
            "association.main" => Some(vec![t.main.to_string()]),
            "route.destination-cidr-block" => {
                Some(t.routes.iter().map(|r| r.destination.clone()).collect())
            }
            "route.instance-id" => Some(
                t.routes
                    .iter()
                    .filter_map(|r| r.instance_id.clone())
                    .collect(),
            ),
            "route.gateway-id" => Some(
                t.routes
                    .iter()
                    .filter_map(|r| r.gateway_id.clone())
                    .collect(),
            ),
            _ => None,
        };
        if passes(&filters, &cloud.tags_of(&t.id), attr)? {
            found.push(t);
        }
    }
    x.list("routeTableSet", "item", found, |x, t| {
        x.text("routeTableId", &t.id)
            .text("vpcId", &t.vpc_id)
            .text("ownerId", &cloud.account_id)
            .list("routeSet", "item", &t.routes, |x, r| {
                x.text("destinationCidrBlock", &r.destination)
                    .opt("gatewayId", r.gateway_id.as_ref())
                    .opt("instanceId", r.instance_id.as_ref());
                let eni = r.instance_id.as_ref().and_then(|id| cloud.instance(id));
                // A route to a gone instance is a blackhole (the CCM deletes those first).
                let state = if r.instance_id.is_some()
                    && eni.is_none_or(|i| i.state == InstanceState::Terminated)
                {
                    "blackhole"
                } else {
                    "active"
                };
                if let Some(i) = eni {
                    x.text("instanceOwnerId", &cloud.account_id)
                        .text("networkInterfaceId", &i.eni_id);
                }
                x.text("state", state).text(
                    "origin",
                    if r.gateway_id.as_deref() == Some("local") {
                        "CreateRouteTable"
                    } else {
                        "CreateRoute"
                    },
                );
            })
            .list(
                "associationSet",
                "item",
                [t].into_iter().filter(|t| t.main),
                |x, t| {
                    x.text(
                        "routeTableAssociationId",
                        format!("rtbassoc-{}", &t.id[4..]),
                    )
                    .text("routeTableId", &t.id)
                    .text("main", "true")
                    .elem("associationState", |x| {
                        x.text("state", "associated");
                    });
                },
            )
            .elem("propagatingVgwSet", |_| {});
        tag_set(x, &cloud.tags_of(&t.id));
    });
    Ok(())
}

fn create_route(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let table = p.require("RouteTableId")?;
    let cidr = p.require("DestinationCidrBlock")?.to_string();
    if !valid_cidr(&cidr) {
        return Err(AwsError::invalid_value("DestinationCidrBlock", &cidr));
    }
    let instance = p.get("InstanceId").map(str::to_string);
    let gateway = p.get("GatewayId").map(str::to_string);
    if instance.is_none() && gateway.is_none() {
        return Err(AwsError::missing("target"));
    }
    let route = Route {
        destination: cidr,
        gateway_id: gateway,
        instance_id: instance,
    };
    state::create_route(cloud, table, route)?;
    x.text("return", "true");
    Ok(())
}

fn delete_route(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let table = p.require("RouteTableId")?;
    let cidr = p.require("DestinationCidrBlock")?;
    state::delete_route(cloud, table, cidr)?;
    x.text("return", "true");
    Ok(())
}

fn valid_cidr(cidr: &str) -> bool {
    let Some((ip, len)) = cidr.split_once('/') else {
        return false;
    };
    ip.parse::<std::net::Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
}

// ---- security groups ----

fn write_permission(x: &mut Xml, perm: &Permission, cloud: &Cloud) {
    x.text("ipProtocol", &perm.protocol)
        .opt("fromPort", perm.from_port.map(|p| p.to_string()))
        .opt("toPort", perm.to_port.map(|p| p.to_string()))
        .list("groups", "item", &perm.groups, |x, g| {
            x.text("userId", &cloud.account_id).text("groupId", g);
        })
        .list("ipRanges", "item", &perm.cidrs, |x, c| {
            x.text("cidrIp", c);
        })
        .elem("ipv6Ranges", |_| {})
        .elem("prefixListIds", |_| {});
}

fn describe_security_groups(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = p.list("GroupId");
    let names = p.list("GroupName");
    for id in &ids {
        if !cloud.security_groups.iter().any(|g| &g.id == id) {
            return Err(not_found("InvalidGroup.NotFound", "security group", id));
        }
    }
    let filters = p.filters()?;
    let mut found = Vec::new();
    for g in &cloud.security_groups {
        if (!ids.is_empty() && !ids.contains(&g.id))
            || (!names.is_empty() && !names.contains(&g.name))
        {
            continue;
        }
        let attr = |n: &str| match n {
            "group-id" => Some(vec![g.id.clone()]),
            "group-name" => Some(vec![g.name.clone()]),
            "vpc-id" => Some(vec![g.vpc_id.clone()]),
            "description" => Some(vec![g.description.clone()]),
            "owner-id" => Some(vec![cloud.account_id.clone()]),
            // Inbound-rule filters (EC2 API reference, DescribeSecurityGroups "Filter.N"):
            // a group matches when any of its ingress permissions has the value.
            // cloud-provider-aws finds the groups that reference an ELB's group with
            // `ip-permission.group-id` (aws.go, buildELBSecurityGroupList callers).
            "ip-permission.group-id" => Some(
                g.ingress
                    .iter()
                    .flat_map(|perm| perm.groups.iter().cloned())
                    .collect(),
            ),
            "ip-permission.group-name" => Some(
                g.ingress
                    .iter()
                    .flat_map(|perm| perm.groups.iter())
                    .filter_map(|id| cloud.security_groups.iter().find(|sg| &sg.id == id))
                    .map(|sg| sg.name.clone())
                    .collect(),
            ),
            "ip-permission.cidr" => Some(
                g.ingress
                    .iter()
                    .flat_map(|perm| perm.cidrs.iter().cloned())
                    .collect(),
            ),
            "ip-permission.protocol" => {
                Some(g.ingress.iter().map(|perm| perm.protocol.clone()).collect())
            }
            "ip-permission.from-port" => Some(
                g.ingress
                    .iter()
                    .filter_map(|perm| perm.from_port.map(|v| v.to_string()))
                    .collect(),
            ),
            "ip-permission.to-port" => Some(
                g.ingress
                    .iter()
                    .filter_map(|perm| perm.to_port.map(|v| v.to_string()))
                    .collect(),
            ),
            _ => None,
        };
        if passes(&filters, &cloud.tags_of(&g.id), attr)? {
            found.push(g);
        }
    }
    x.list("securityGroupInfo", "item", found, |x, g| {
        x.text("ownerId", &cloud.account_id)
            .text("groupId", &g.id)
            .text("groupName", &g.name)
            .text("groupDescription", &g.description)
            .text("vpcId", &g.vpc_id)
            .list("ipPermissions", "item", &g.ingress, |x, perm| {
                write_permission(x, perm, cloud)
            })
            .list(
                "ipPermissionsEgress",
                "item",
                [Permission {
                    protocol: "-1".into(),
                    from_port: None,
                    to_port: None,
                    cidrs: vec!["0.0.0.0/0".into()],
                    groups: vec![],
                }],
                |x, perm| write_permission(x, &perm, cloud),
            );
        tag_set(x, &cloud.tags_of(&g.id));
    });
    Ok(())
}

fn create_security_group(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let name = p.require("GroupName")?.to_string();
    let description = p.require("GroupDescription")?.to_string();
    let req = state::CreateSecurityGroup {
        name,
        description,
        vpc: p.get("VpcId").map(str::to_string),
    };
    let tags = || {
        let mut tags = BTreeMap::new();
        for i in p.indexes("TagSpecification") {
            for (k, v) in p.tags(&format!("TagSpecification.{i}.Tag"))? {
                tags.insert(k, v.unwrap_or_default());
            }
        }
        Ok(tags)
    };
    let id = state::create_security_group(cloud, req, tags)?;
    x.text("return", "true").text("groupId", &id);
    Ok(())
}

/// `GroupId`, else `GroupName`.
fn group_ref(p: &Params) -> Result<GroupRef, AwsError> {
    if let Some(id) = p.get("GroupId") {
        return Ok(GroupRef::Id(id.to_string()));
    }
    let name = p
        .get("GroupName")
        .ok_or_else(|| AwsError::missing("GroupId"))?;
    Ok(GroupRef::Name(name.to_string()))
}

/// `IpPermissions.N.{IpProtocol,FromPort,ToPort,IpRanges.M.CidrIp,Groups.M.GroupId}`.
fn permissions(p: &Params) -> Result<Vec<Permission>, AwsError> {
    let mut out = Vec::new();
    for i in p.indexes("IpPermissions") {
        let k = |s: &str| format!("IpPermissions.{i}.{s}");
        let protocol = p.require(&k("IpProtocol"))?.to_string();
        let cidrs = p
            .indexes(&k("IpRanges"))
            .into_iter()
            .filter_map(|m| {
                p.get(&k(&format!("IpRanges.{m}.CidrIp")))
                    .map(str::to_string)
            })
            .collect();
        let groups = p
            .indexes(&k("Groups"))
            .into_iter()
            .filter_map(|m| {
                p.get(&k(&format!("Groups.{m}.GroupId")))
                    .map(str::to_string)
            })
            .collect();
        out.push(Permission {
            protocol,
            from_port: p.int(&k("FromPort"))?,
            to_port: p.int(&k("ToPort"))?,
            cidrs,
            groups,
        });
    }
    if out.is_empty() {
        return Err(AwsError::missing("IpPermissions"));
    }
    Ok(out)
}

/// Authorize (`add`) or revoke ingress.
fn ingress(cloud: &mut Cloud, p: &Params, x: &mut Xml, add: bool) -> Result<(), AwsError> {
    // The group is looked up before the permissions are read, as EC2 answers.
    let id = state::security_group_id(cloud, &group_ref(p)?)?;
    let perms = permissions(p)?;
    state::ingress(cloud, &id, perms, add)?;
    x.text("return", "true");
    Ok(())
}

fn delete_security_group(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let group = group_ref(p)?;
    state::delete_security_group(cloud, &group)?;
    x.text("return", "true");
    Ok(())
}

// ---- tags ----

fn tagged_ids(p: &Params) -> Result<Vec<String>, AwsError> {
    let ids = p.list("ResourceId");
    if ids.is_empty() {
        return Err(AwsError::missing("ResourceId"));
    }
    Ok(ids)
}

fn create_tags(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = tagged_ids(p)?;
    state::check_tagged(cloud, &ids)?;
    let tags = p.tags("Tag")?;
    if tags.is_empty() {
        return Err(AwsError::missing("Tag"));
    }
    state::create_tags(cloud, ids, &tags)?;
    x.text("return", "true");
    Ok(())
}

fn delete_tags(cloud: &mut Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let ids = tagged_ids(p)?;
    state::check_tagged(cloud, &ids)?;
    let tags = p.tags("Tag")?;
    state::delete_tags(cloud, ids, &tags)?;
    x.text("return", "true");
    Ok(())
}

fn describe_tags(cloud: &Cloud, p: &Params, x: &mut Xml) -> Result<(), AwsError> {
    let filters = p.filters()?;
    let mut found = Vec::new();
    for (id, tags) in &cloud.tags {
        if !resource_exists(cloud, id) {
            continue;
        }
        for (k, v) in tags {
            let attr = |n: &str| match n {
                "resource-id" => Some(vec![id.clone()]),
                "resource-type" => Some(vec![resource_type(id).to_string()]),
                "key" => Some(vec![k.clone()]),
                "value" => Some(vec![v.clone()]),
                _ => None,
            };
            if passes(&filters, &BTreeMap::new(), attr)? {
                found.push((id, k, v));
            }
        }
    }
    x.list("tagSet", "item", found, |x, (id, k, v)| {
        x.text("resourceId", id)
            .text("resourceType", resource_type(id))
            .text("key", k)
            .text("value", v);
    });
    Ok(())
}
