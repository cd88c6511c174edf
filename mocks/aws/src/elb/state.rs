//! The operations on ELB classic's resources (load balancers with their listeners, health
//! check, attributes, registered instances and tags; the records are in `model.rs`).
//! Requests arrive already validated (see `api.rs`); this module knows nothing of query
//! parameters or XML.

use super::model::{Attributes, ClassicLb, HealthCheck, Listener};
use crate::error::AwsError;
use crate::state::{Cloud, InstanceState};

pub(super) fn not_found(name: &str) -> AwsError {
    AwsError::bad(
        "LoadBalancerNotFound",
        format!("There is no ACTIVE Load Balancer named '{name}'"),
    )
}

fn lb_mut<'c>(cloud: &'c mut Cloud, name: &str) -> Result<&'c mut ClassicLb, AwsError> {
    cloud.elbs.get_mut(name).ok_or_else(|| not_found(name))
}

fn check_security_groups(cloud: &Cloud, groups: &[String]) -> Result<(), AwsError> {
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

fn dns_name(region: &str, name: &str, internal: bool) -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 10_000_000_000;
    let prefix = if internal { "internal-" } else { "" };
    format!("{prefix}{name}-{n}.{region}.elb.amazonaws.com")
}

/// A validated `CreateLoadBalancer`.
pub(crate) struct Create {
    pub name: String,
    pub listeners: Vec<Listener>,
    pub subnets: Vec<String>,
    pub zones: Vec<String>,
    pub groups: Vec<String>,
    pub scheme: String,
}

/// Creates a load balancer (or finds the identical one); answers its DNS name. `tags` are
/// read only for a new load balancer (a repeated identical create ignores them, as ELB
/// does).
pub(crate) fn create(
    cloud: &mut Cloud,
    req: Create,
    tags: impl FnOnce() -> Result<Vec<(String, String)>, AwsError>,
) -> Result<String, AwsError> {
    let Create {
        name,
        listeners,
        subnets,
        mut zones,
        groups,
        scheme,
    } = req;
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
    check_security_groups(cloud, &groups)?;
    if let Some(existing) = cloud.elbs.get(&name) {
        // ELB answers a repeated identical create with the same DNS name.
        if existing.listeners == listeners {
            return Ok(existing.dns_name.clone());
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
        tags: tags()?.into_iter().collect(),
        created: jiff::Timestamp::now(),
    };
    let dns_name = lb.dns_name.clone();
    cloud.elbs.insert(name, lb);
    Ok(dns_name)
}

/// The load balancers named (all when none is), in name order.
pub(crate) fn describe<'c>(
    cloud: &'c Cloud,
    names: &[String],
) -> Result<Vec<&'c ClassicLb>, AwsError> {
    let mut found: Vec<&ClassicLb> = Vec::new();
    if names.is_empty() {
        found.extend(cloud.elbs.values());
    } else {
        for n in names {
            found.push(cloud.elbs.get(n).ok_or_else(|| not_found(n))?);
        }
    }
    Ok(found)
}

/// Deleting an absent load balancer succeeds, as in ELB.
pub(crate) fn delete(cloud: &mut Cloud, name: &str) {
    cloud.elbs.remove(name);
}

/// Registers (or deregisters) instances; answers the instances registered now.
pub(crate) fn register(
    cloud: &mut Cloud,
    name: &str,
    ids: Vec<String>,
    add: bool,
) -> Result<Vec<String>, AwsError> {
    lb_mut(cloud, name)?;
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
    let lb = lb_mut(cloud, name)?;
    for id in ids {
        if add && !lb.instances.contains(&id) {
            lb.instances.push(id);
        } else if !add {
            lb.instances.retain(|i| *i != id);
        }
    }
    Ok(lb.instances.clone())
}

/// Registered instances are `InService` while running (`true`). Real health checks come
/// with the data plane.
pub(crate) fn instance_health(
    cloud: &mut Cloud,
    name: &str,
) -> Result<Vec<(String, bool)>, AwsError> {
    let lb = lb_mut(cloud, name)?.clone();
    Ok(lb
        .instances
        .iter()
        .map(|id| {
            let up = cloud
                .instance(id)
                .is_some_and(|i| i.state == InstanceState::Running);
            (id.clone(), up)
        })
        .collect())
}

pub(crate) fn configure_health_check(
    cloud: &mut Cloud,
    name: &str,
    hc: HealthCheck,
) -> Result<(), AwsError> {
    lb_mut(cloud, name)?.health_check = hc;
    Ok(())
}

/// Adds listeners; one identical to an existing listener is a no-op, one on a taken port
/// is refused.
pub(crate) fn create_listeners(
    cloud: &mut Cloud,
    name: &str,
    new: Vec<Listener>,
) -> Result<(), AwsError> {
    let lb = lb_mut(cloud, name)?;
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
    Ok(())
}

/// Removes the listeners on `ports` (as the client spelled them).
pub(crate) fn delete_listeners(
    cloud: &mut Cloud,
    name: &str,
    ports: &[String],
) -> Result<(), AwsError> {
    let lb = lb_mut(cloud, name)?;
    lb.listeners
        .retain(|l| !ports.contains(&l.port.to_string()));
    Ok(())
}

pub(crate) fn attributes(cloud: &mut Cloud, name: &str) -> Result<Attributes, AwsError> {
    Ok(lb_mut(cloud, name)?.attributes.clone())
}

/// A validated `ModifyLoadBalancerAttributes`: what is absent stays.
pub(crate) struct AttributeChanges {
    pub cross_zone: Option<bool>,
    pub access_log: Option<bool>,
    pub draining: Option<bool>,
    pub draining_timeout: Option<i64>,
    pub idle_timeout: Option<i64>,
}

/// Applies the changes; answers the attributes now.
pub(crate) fn modify_attributes(
    cloud: &mut Cloud,
    name: &str,
    changes: AttributeChanges,
) -> Result<Attributes, AwsError> {
    let lb = lb_mut(cloud, name)?;
    let a = &mut lb.attributes;
    if let Some(v) = changes.cross_zone {
        a.cross_zone = v;
    }
    if let Some(v) = changes.access_log {
        a.access_log = v;
    }
    if let Some(v) = changes.draining {
        a.draining = v;
    }
    if let Some(v) = changes.draining_timeout {
        a.draining_timeout = v;
    }
    if let Some(v) = changes.idle_timeout {
        a.idle_timeout = v;
    }
    Ok(a.clone())
}

/// Adds (or removes, by key) `tags` on every load balancer in `names` (all must exist).
pub(crate) fn change_tags(
    cloud: &mut Cloud,
    names: &[String],
    tags: &[(String, String)],
    add: bool,
) -> Result<(), AwsError> {
    for n in names {
        lb_mut(cloud, n)?;
    }
    for n in names {
        let lb = lb_mut(cloud, n)?;
        for (k, v) in tags {
            if add {
                lb.tags.insert(k.clone(), v.clone());
            } else {
                lb.tags.remove(k);
            }
        }
    }
    Ok(())
}

/// The load balancers named, each must exist.
pub(crate) fn named(cloud: &mut Cloud, names: &[String]) -> Result<Vec<ClassicLb>, AwsError> {
    let mut found = Vec::new();
    for n in names {
        found.push(lb_mut(cloud, n)?.clone());
    }
    Ok(found)
}

pub(crate) fn apply_security_groups(
    cloud: &mut Cloud,
    name: &str,
    groups: Vec<String>,
) -> Result<(), AwsError> {
    check_security_groups(cloud, &groups)?;
    lb_mut(cloud, name)?.security_groups = groups;
    Ok(())
}
