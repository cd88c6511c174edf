//! What the network resource provider does to a document: check its references, fill
//! what it computes (sub-resource ids, allocated addresses, etag, `provisioningState`)
//! and, when answering, add read-only back-references.
//!
//! Semantics matched (the CCM relies on each; cloud-provider-azure
//! `pkg/provider/azure_loadbalancer.go`, `azure_loadbalancer_backendpool.go`,
//! `azure_securitygroup*`, `azure_routes.go`, `azure_standard.go`):
//! - a public IP PUT allocates `properties.ipAddress` (kept across updates);
//! - a load balancer frontend takes a public IP id (external) or a subnet id and a
//!   private IP, allocated when absent (internal);
//! - rules and probes reference frontends, pools and probes of the same load balancer by
//!   id (`{lb id}/frontendIPConfigurations/{name}`); a missing target is 400
//!   `InvalidResourceReference`;
//! - a NIC ipConfiguration joins a backend pool through
//!   `loadBalancerBackendAddressPools[{id}]`; the pool's `backendIPConfigurations` is
//!   computed from the NICs and read-only;
//! - deleting a public IP still used is 400 `PublicIPAddressInUse`.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use crate::arm::path::{self, TypeInfo};
use crate::arm::{ArmError, new_etag};
use crate::state::{Cloud, INTERNAL_POOL, PRIVATE_POOL, PUBLIC_POOL};

fn invalid(code: &str, message: impl Into<String>) -> ArmError {
    ArmError::bad_request(code, message)
}

fn bad_content(message: impl Into<String>) -> ArmError {
    invalid("InvalidRequestContent", message)
}

fn missing_reference(what: &str, id: &str) -> ArmError {
    invalid(
        "InvalidResourceReference",
        format!("Resource {id} referenced by {what} was not found."),
    )
}

/// `properties.<field>.id` of an object.
fn ref_id<'a>(item: &'a Value, field: &str) -> Option<&'a str> {
    item.get("properties")?.get(field)?.get("id")?.as_str()
}

fn same_id(a: &str, b: &str) -> bool {
    path::resource_key(a) == path::resource_key(b)
}

/// The named items of `properties.<coll>`, each given its id, type, etag and state.
fn items_mut<'a>(
    props: &'a mut Map<String, Value>,
    coll: &str,
    parent_id: &str,
    etag: &str,
) -> Result<Vec<&'a mut Map<String, Value>>, ArmError> {
    let parent_type = path::key_of_id(parent_id)
        .map(|(_, t)| t.arm_type)
        .unwrap_or_default();
    let Some(list) = props.get_mut(coll) else {
        return Ok(Vec::new());
    };
    if list.is_null() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return Err(bad_content(format!("properties.{coll} must be an array.")));
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for item in list.iter_mut() {
        let Some(obj) = item.as_object_mut() else {
            return Err(bad_content(format!(
                "properties.{coll} holds a non-object."
            )));
        };
        let Some(name) = obj.get("name").and_then(Value::as_str).map(str::to_string) else {
            return Err(bad_content(format!(
                "Every item of properties.{coll} needs a name."
            )));
        };
        if name.is_empty() || name.contains('/') {
            return Err(bad_content(format!(
                "Invalid name {name:?} in properties.{coll}."
            )));
        }
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(invalid(
                "DuplicateResourceName",
                format!("Two items of properties.{coll} are named {name}."),
            ));
        }
        obj.insert(
            "id".into(),
            Value::String(format!("{parent_id}/{coll}/{name}")),
        );
        obj.insert("etag".into(), Value::String(etag.to_string()));
        obj.insert(
            "type".into(),
            Value::String(format!("{parent_type}/{coll}")),
        );
        let p = obj.entry("properties").or_insert_with(|| json!({}));
        if !p.is_object() {
            return Err(bad_content(format!(
                "properties.{coll}[{name}].properties must be an object."
            )));
        }
        p["provisioningState"] = Value::String("Succeeded".into());
        out.push(obj);
    }
    Ok(out)
}

fn item_props(item: &mut Map<String, Value>) -> &mut Map<String, Value> {
    item.entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("made an object by items_mut")
}

/// The same-named item of the existing document's collection.
fn existing_item<'a>(existing: Option<&'a Value>, coll: &str, name: &str) -> Option<&'a Value> {
    existing?
        .get("properties")?
        .get(coll)?
        .as_array()?
        .iter()
        .find(|i| crate::state::name_is(i, name))
}

fn port_of(p: &Map<String, Value>, field: &str, allow_zero: bool) -> Result<Option<u16>, ArmError> {
    match p.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let n = v.as_u64().filter(|n| *n <= 65535 && (allow_zero || *n > 0));
            match n {
                Some(n) => Ok(Some(n as u16)),
                None => Err(invalid(
                    "InvalidParameter",
                    format!("{field} {v} is not a port number."),
                )),
            }
        }
    }
}

fn one_of(
    p: &Map<String, Value>,
    field: &str,
    allowed: &[&str],
    required: bool,
) -> Result<(), ArmError> {
    match p.get(field).and_then(Value::as_str) {
        Some(v) if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) => Ok(()),
        None if !required && p.get(field).is_none_or(Value::is_null) => Ok(()),
        other => Err(invalid(
            "InvalidParameter",
            format!("{field} {other:?} is not one of {}.", allowed.join(", ")),
        )),
    }
}

/// Builds the stored document of a PUT: the body as sent, with ids, etag, state and
/// what the provider computes; refuses bad bodies and references.
pub fn prepare(
    cloud: &Cloud,
    info: &TypeInfo,
    id: &str,
    name: &str,
    body: Value,
    existing: Option<&Value>,
) -> Result<Value, ArmError> {
    let Value::Object(mut doc) = body else {
        return Err(bad_content("The request content must be a JSON object."));
    };
    let etag = new_etag();
    doc.insert("id".into(), Value::String(id.to_string()));
    doc.insert("name".into(), Value::String(name.to_string()));
    doc.insert("type".into(), Value::String(info.arm_type.to_string()));
    doc.insert("etag".into(), Value::String(etag.clone()));
    if info.parent.is_none() {
        let location = doc
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or(&cloud.ctx.location)
            .to_string();
        if !location
            .replace(' ', "")
            .eq_ignore_ascii_case(&cloud.ctx.location)
        {
            return Err(invalid(
                "LocationNotAvailableForResourceType",
                format!(
                    "The location '{location}' is not available here; use '{}'.",
                    cloud.ctx.location
                ),
            ));
        }
        doc.insert("location".into(), Value::String(cloud.ctx.location.clone()));
    }
    let props = doc.entry("properties").or_insert_with(|| json!({}));
    if props.is_null() {
        *props = json!({});
    }
    let Some(props) = props.as_object_mut() else {
        return Err(bad_content("properties must be an object."));
    };
    props.insert("provisioningState".into(), Value::String("Updating".into()));
    let existing_props = existing.and_then(|e| e.get("properties"));
    match info.key {
        path::PIP => {
            let sku = doc
                .entry("sku")
                .or_insert_with(|| json!({"name": "Standard", "tier": "Regional"}));
            if !sku.is_object() {
                return Err(bad_content("sku must be an object."));
            }
            let props = doc["properties"].as_object_mut().expect("object");
            props.remove("ipConfiguration");
            one_of(
                props,
                "publicIPAllocationMethod",
                &["Static", "Dynamic"],
                false,
            )?;
            props
                .entry("publicIPAllocationMethod")
                .or_insert(json!("Static"));
            one_of(props, "publicIPAddressVersion", &["IPv4"], false)?;
            props
                .entry("publicIPAddressVersion")
                .or_insert(json!("IPv4"));
            props.entry("idleTimeoutInMinutes").or_insert(json!(4));
            let kept = existing_props
                .and_then(|p| p.get("ipAddress"))
                .and_then(Value::as_str)
                .map(str::to_string);
            let address = match kept {
                Some(a) => a,
                None => {
                    let wanted = props
                        .get("ipAddress")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<Ipv4Addr>().ok())
                        .filter(|ip| {
                            PUBLIC_POOL.holds(cloud.ctx.block, *ip)
                                && !cloud.used_ips().contains(ip)
                        });
                    match wanted {
                        Some(ip) => ip.to_string(),
                        None => cloud.allocate(PUBLIC_POOL, &HashSet::new())?.to_string(),
                    }
                }
            };
            props.insert("ipAddress".into(), Value::String(address));
        }
        path::NIC => {
            let mut taken = HashSet::new();
            let configs = items_mut(props, "ipConfigurations", id, &etag)?;
            if configs.is_empty() {
                return Err(invalid(
                    "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
                    "A network interface needs at least one ipConfiguration.",
                ));
            }
            let single = configs.len() == 1;
            for cfg in configs {
                let cfg_name = cfg["name"].as_str().unwrap_or_default().to_string();
                let old = existing_item(existing, "ipConfigurations", &cfg_name);
                let cfg_value = Value::Object(cfg.clone());
                match ref_id(&cfg_value, "subnet") {
                    Some(s) if cloud.sub_resource_exists(s) => {}
                    Some(s) => return Err(missing_reference("the ipConfiguration's subnet", s)),
                    None => {
                        return Err(invalid(
                            "SubnetIsRequired",
                            format!("ipConfiguration {cfg_name} needs a subnet."),
                        ));
                    }
                }
                if let Some(pip) = ref_id(&cfg_value, "publicIPAddress")
                    && !matches!(path::key_of_id(pip), Some((k, t)) if t.key == path::PIP && cloud.docs.contains_key(&k))
                {
                    return Err(missing_reference("the ipConfiguration's public IP", pip));
                }
                let p = item_props(cfg);
                if let Some(pools) = p.get("loadBalancerBackendAddressPools") {
                    let Some(pools) = pools.as_array() else {
                        return Err(bad_content(
                            "loadBalancerBackendAddressPools must be an array.",
                        ));
                    };
                    for pool in pools {
                        let pid = pool.get("id").and_then(Value::as_str).unwrap_or_default();
                        if !pid.to_ascii_lowercase().contains("/backendaddresspools/")
                            || !cloud.sub_resource_exists(pid)
                        {
                            return Err(missing_reference(
                                "the ipConfiguration's backend pool",
                                pid,
                            ));
                        }
                    }
                }
                let kept = old
                    .and_then(|o| o.get("properties"))
                    .and_then(|o| o.get("privateIPAddress"))
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<Ipv4Addr>().ok());
                let given = p
                    .get("privateIPAddress")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<Ipv4Addr>().ok());
                let ip = match given.or(kept) {
                    Some(ip) => ip,
                    None => cloud.allocate(PRIVATE_POOL, &taken)?,
                };
                taken.insert(ip);
                p.insert("privateIPAddress".into(), Value::String(ip.to_string()));
                p.entry("privateIPAllocationMethod")
                    .or_insert(json!("Dynamic"));
                p.entry("privateIPAddressVersion").or_insert(json!("IPv4"));
                if single {
                    p.entry("primary").or_insert(json!(true));
                }
            }
            // The VM a NIC is attached to is the compute provider's to say.
            match existing_props.and_then(|p| p.get("virtualMachine")) {
                Some(vm) => {
                    props.insert("virtualMachine".into(), vm.clone());
                }
                None => {
                    props.remove("virtualMachine");
                }
            }
        }
        path::LB => {
            let sku = doc
                .entry("sku")
                .or_insert_with(|| json!({"name": "Standard", "tier": "Regional"}));
            if !sku.is_object() {
                return Err(bad_content("sku must be an object."));
            }
            let props = doc["properties"].as_object_mut().expect("object");
            let mut taken = HashSet::new();
            let mut frontends = Vec::new();
            for fe in items_mut(props, "frontendIPConfigurations", id, &etag)? {
                let fe_name = fe["name"].as_str().unwrap_or_default().to_string();
                frontends.push(path::resource_key(&format!(
                    "{id}/frontendIPConfigurations/{fe_name}"
                )));
                let fe_value = Value::Object(fe.clone());
                let p = item_props(fe);
                p.remove("loadBalancingRules");
                if let Some(pip) = ref_id(&fe_value, "publicIPAddress") {
                    if !matches!(path::key_of_id(pip), Some((k, t)) if t.key == path::PIP && cloud.docs.contains_key(&k))
                    {
                        return Err(missing_reference("the frontend IP configuration", pip));
                    }
                    p.remove("privateIPAddress");
                } else if let Some(subnet) = ref_id(&fe_value, "subnet") {
                    if !cloud.sub_resource_exists(subnet) {
                        return Err(missing_reference("the frontend IP configuration", subnet));
                    }
                    let kept = existing_item(existing, "frontendIPConfigurations", &fe_name)
                        .and_then(|o| o.get("properties"))
                        .and_then(|o| o.get("privateIPAddress"))
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<Ipv4Addr>().ok());
                    let given = p
                        .get("privateIPAddress")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<Ipv4Addr>().ok());
                    let ip = match given.or(kept) {
                        Some(ip) => ip,
                        None => cloud.allocate(INTERNAL_POOL, &taken)?,
                    };
                    taken.insert(ip);
                    p.insert("privateIPAddress".into(), Value::String(ip.to_string()));
                    p.entry("privateIPAllocationMethod")
                        .or_insert(json!("Dynamic"));
                } else {
                    return Err(invalid(
                        "InvalidFrontendIPConfiguration",
                        format!("Frontend {fe_name} needs a publicIPAddress or a subnet."),
                    ));
                }
            }
            let mut pools = Vec::new();
            for pool in items_mut(props, "backendAddressPools", id, &etag)? {
                let pool_name = pool["name"].as_str().unwrap_or_default().to_string();
                pools.push(path::resource_key(&format!(
                    "{id}/backendAddressPools/{pool_name}"
                )));
                let p = item_props(pool);
                p.remove("backendIPConfigurations");
                p.remove("loadBalancingRules");
            }
            let mut probes = Vec::new();
            for probe in items_mut(props, "probes", id, &etag)? {
                let probe_name = probe["name"].as_str().unwrap_or_default().to_string();
                probes.push(path::resource_key(&format!("{id}/probes/{probe_name}")));
                let p = item_props(probe);
                one_of(p, "protocol", &["Tcp", "Http", "Https"], true)?;
                if port_of(p, "port", false)?.is_none() {
                    return Err(invalid(
                        "InvalidParameter",
                        format!("Probe {probe_name} needs a port."),
                    ));
                }
                let http = p
                    .get("protocol")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.eq_ignore_ascii_case("Tcp"));
                if http && p.get("requestPath").and_then(Value::as_str).is_none() {
                    return Err(invalid(
                        "InvalidParameter",
                        format!("Probe {probe_name} of protocol Http(s) needs a requestPath."),
                    ));
                }
                p.entry("intervalInSeconds").or_insert(json!(5));
                p.remove("loadBalancingRules");
            }
            for rule in items_mut(props, "loadBalancingRules", id, &etag)? {
                let rule_name = rule["name"].as_str().unwrap_or_default().to_string();
                let rule_value = Value::Object(rule.clone());
                let p = item_props(rule);
                one_of(p, "protocol", &["Tcp", "Udp", "All"], true)?;
                port_of(p, "frontendPort", true)?;
                port_of(p, "backendPort", true)?;
                let check =
                    |field: &str, within: &[String], required: bool| -> Result<(), ArmError> {
                        match ref_id(&rule_value, field) {
                            Some(r) if within.contains(&path::resource_key(r)) => Ok(()),
                            Some(r) => Err(missing_reference(
                                &format!("load balancing rule {rule_name}"),
                                r,
                            )),
                            None if required => Err(invalid(
                                "InvalidParameter",
                                format!("Load balancing rule {rule_name} needs {field}."),
                            )),
                            None => Ok(()),
                        }
                    };
                check("frontendIPConfiguration", &frontends, true)?;
                check("backendAddressPool", &pools, false)?;
                check("probe", &probes, false)?;
                if let Some(list) = rule_value
                    .get("properties")
                    .and_then(|p| p.get("backendAddressPools"))
                    .and_then(Value::as_array)
                {
                    for pool in list {
                        let pid = pool.get("id").and_then(Value::as_str).unwrap_or_default();
                        if !pools.contains(&path::resource_key(pid)) {
                            return Err(missing_reference(
                                &format!("load balancing rule {rule_name}"),
                                pid,
                            ));
                        }
                    }
                }
                p.entry("enableFloatingIP").or_insert(json!(false));
                p.entry("idleTimeoutInMinutes").or_insert(json!(4));
                p.entry("loadDistribution").or_insert(json!("Default"));
            }
            for coll in ["inboundNatRules", "outboundRules", "inboundNatPools"] {
                items_mut(props, coll, id, &etag)?;
            }
        }
        path::NSG => {
            props.remove("defaultSecurityRules");
            let mut priorities = HashSet::new();
            for rule in items_mut(props, "securityRules", id, &etag)? {
                validate_security_rule(rule, &mut priorities)?;
            }
        }
        path::RT => {
            for route in items_mut(props, "routes", id, &etag)? {
                let rname = route["name"].as_str().unwrap_or_default().to_string();
                validate_route(item_props(route), &rname)?;
            }
        }
        path::ROUTE => validate_route(props, name)?,
        path::VNET => {
            for subnet in items_mut(props, "subnets", id, &etag)? {
                validate_subnet(cloud, &Value::Object(subnet.clone()))?;
            }
        }
        path::SUBNET => validate_subnet(cloud, &Value::Object(doc.clone()))?,
        _ => {}
    }
    Ok(Value::Object(doc))
}

fn validate_security_rule(
    rule: &mut Map<String, Value>,
    priorities: &mut HashSet<(String, u64)>,
) -> Result<(), ArmError> {
    let rname = rule["name"].as_str().unwrap_or_default().to_string();
    let p = item_props(rule);
    one_of(
        p,
        "protocol",
        &["Tcp", "Udp", "Icmp", "Esp", "Ah", "*"],
        true,
    )?;
    one_of(p, "access", &["Allow", "Deny"], true)?;
    one_of(p, "direction", &["Inbound", "Outbound"], true)?;
    let priority = p
        .get("priority")
        .and_then(Value::as_u64)
        .filter(|n| (100..=4096).contains(n));
    let Some(priority) = priority else {
        return Err(invalid(
            "SecurityRuleInvalidPriority",
            format!("Security rule {rname} has an invalid priority (100 to 4096)."),
        ));
    };
    let direction = p["direction"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !priorities.insert((direction, priority)) {
        return Err(invalid(
            "SecurityRuleConflict",
            format!(
                "Security rule {rname} has the same priority {priority} and direction as another rule."
            ),
        ));
    }
    Ok(())
}

fn validate_route(p: &mut Map<String, Value>, name: &str) -> Result<(), ArmError> {
    if p.get("addressPrefix").and_then(Value::as_str).is_none() {
        return Err(invalid(
            "InvalidParameter",
            format!("Route {name} needs an addressPrefix."),
        ));
    }
    one_of(
        p,
        "nextHopType",
        &[
            "VirtualNetworkGateway",
            "VnetLocal",
            "Internet",
            "VirtualAppliance",
            "None",
        ],
        true,
    )?;
    let appliance = p["nextHopType"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("VirtualAppliance"));
    let hop = p.get("nextHopIpAddress").and_then(Value::as_str);
    if appliance
        && hop
            .and_then(|h| h.parse::<std::net::IpAddr>().ok())
            .is_none()
    {
        return Err(invalid(
            "InvalidNextHopIpAddress",
            format!("Route {name} of type VirtualAppliance needs a nextHopIpAddress."),
        ));
    }
    Ok(())
}

fn validate_subnet(cloud: &Cloud, subnet: &Value) -> Result<(), ArmError> {
    let p = subnet.get("properties");
    let has_prefix = p.and_then(|p| p.get("addressPrefix")).is_some()
        || p.and_then(|p| p.get("addressPrefixes")).is_some();
    if !has_prefix {
        return Err(invalid(
            "InvalidParameter",
            "A subnet needs an addressPrefix.",
        ));
    }
    for field in ["networkSecurityGroup", "routeTable"] {
        if let Some(r) = ref_id(subnet, field)
            && !matches!(path::key_of_id(r), Some((k, _)) if cloud.docs.contains_key(&k))
        {
            return Err(missing_reference("the subnet", r));
        }
    }
    Ok(())
}

/// NIC ipConfigurations (id, JSON) of every NIC, as currently stored.
fn nic_configs(cloud: &Cloud) -> Vec<(String, &Value)> {
    let info = path::type_info(path::NIC).expect("known");
    cloud
        .docs_of(info)
        .into_iter()
        .flat_map(|(_, d)| {
            d.value
                .get("properties")
                .and_then(|p| p.get("ipConfigurations"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| Some((c.get("id")?.as_str()?.to_string(), c)))
        })
        .collect()
}

/// The read-only back-references ARM adds to what it answers (who uses a public IP, which
/// NIC ipConfigurations are in a backend pool), gathered in one pass over the load
/// balancers and NICs, so a list renders in time linear in the store, not quadratic.
pub struct BackRefs {
    /// Public IP key -> the id of the LB frontend (first) or NIC ipConfiguration using it.
    pip_users: HashMap<String, String>,
    /// Backend pool key -> ids of the NIC ipConfigurations in it.
    pool_members: HashMap<String, Vec<String>>,
}

impl BackRefs {
    pub fn of(cloud: &Cloud) -> Self {
        let mut pip_users = HashMap::new();
        let lb = path::type_info(path::LB).expect("known");
        for (_, d) in cloud.docs_of(lb) {
            let frontends = d
                .value
                .get("properties")
                .and_then(|p| p.get("frontendIPConfigurations"))
                .and_then(Value::as_array);
            for fe in frontends.into_iter().flatten() {
                if let (Some(pip), Some(fe_id)) = (
                    ref_id(fe, "publicIPAddress"),
                    fe.get("id").and_then(Value::as_str),
                ) {
                    pip_users
                        .entry(path::resource_key(pip))
                        .or_insert_with(|| fe_id.to_string());
                }
            }
        }
        let mut pool_members: HashMap<String, Vec<String>> = HashMap::new();
        for (config_id, c) in nic_configs(cloud) {
            if let Some(pip) = ref_id(c, "publicIPAddress") {
                pip_users
                    .entry(path::resource_key(pip))
                    .or_insert_with(|| config_id.clone());
            }
            let pools = c
                .get("properties")
                .and_then(|p| p.get("loadBalancerBackendAddressPools"))
                .and_then(Value::as_array);
            for pool in pools.into_iter().flatten() {
                if let Some(pool_id) = pool.get("id").and_then(Value::as_str) {
                    let members = pool_members.entry(path::resource_key(pool_id)).or_default();
                    if !members.contains(&config_id) {
                        members.push(config_id.clone());
                    }
                }
            }
        }
        BackRefs {
            pip_users,
            pool_members,
        }
    }

    /// The answer for a stored document: read-only back-references added.
    pub fn render(&self, info: &TypeInfo, stored: &Value) -> Value {
        let mut v = stored.clone();
        let id = stored
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match info.key {
            path::PIP => {
                if let Some(user) = self.pip_users.get(&path::resource_key(&id)) {
                    v["properties"]["ipConfiguration"] = json!({ "id": user });
                }
            }
            path::LB => {
                if let Some(pools) = v
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("backendAddressPools"))
                    .and_then(Value::as_array_mut)
                {
                    for pool in pools {
                        let pool_key = path::resource_key(
                            pool.get("id").and_then(Value::as_str).unwrap_or_default(),
                        );
                        if let Some(members) = self.pool_members.get(&pool_key) {
                            pool["properties"]["backendIPConfigurations"] =
                                members.iter().map(|cid| json!({ "id": cid })).collect();
                        }
                    }
                }
            }
            path::NSG => {
                v["properties"]["defaultSecurityRules"] = default_security_rules(&id);
            }
            _ => {}
        }
        v
    }
}

/// The answer for one stored document (see [`BackRefs`]; lists build those once).
pub fn render(cloud: &Cloud, info: &TypeInfo, stored: &Value) -> Value {
    let refs = if matches!(info.key, path::PIP | path::LB) {
        BackRefs::of(cloud)
    } else {
        BackRefs {
            pip_users: HashMap::new(),
            pool_members: HashMap::new(),
        }
    };
    refs.render(info, stored)
}

/// Azure's default rules of every NSG (lowest priority, not deletable).
pub fn default_security_rules(nsg_id: &str) -> Value {
    let rule = |name: &str, priority: u32, access: &str, direction: &str, src: &str, dst: &str| {
        json!({
            "id": format!("{nsg_id}/defaultSecurityRules/{name}"),
            "name": name,
            "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
            "properties": {
                "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
                "sourceAddressPrefix": src, "destinationAddressPrefix": dst,
                "access": access, "priority": priority, "direction": direction,
                "provisioningState": "Succeeded",
                "sourceAddressPrefixes": [], "destinationAddressPrefixes": [],
                "sourcePortRanges": [], "destinationPortRanges": []
            }
        })
    };
    json!([
        rule(
            "AllowVnetInBound",
            65000,
            "Allow",
            "Inbound",
            "VirtualNetwork",
            "VirtualNetwork"
        ),
        rule(
            "AllowAzureLoadBalancerInBound",
            65001,
            "Allow",
            "Inbound",
            "AzureLoadBalancer",
            "*"
        ),
        rule("DenyAllInBound", 65500, "Deny", "Inbound", "*", "*"),
        rule(
            "AllowVnetOutBound",
            65000,
            "Allow",
            "Outbound",
            "VirtualNetwork",
            "VirtualNetwork"
        ),
        rule(
            "AllowInternetOutBound",
            65001,
            "Allow",
            "Outbound",
            "*",
            "Internet"
        ),
        rule("DenyAllOutBound", 65500, "Deny", "Outbound", "*", "*"),
    ])
}

/// Refuses deleting what is still used.
pub fn check_delete(cloud: &Cloud, info: &TypeInfo, key: &str) -> Result<(), ArmError> {
    match info.key {
        path::PIP => {
            let id = cloud
                .lookup(key)
                .and_then(|v| v.get("id"))
                .and_then(Value::as_str)
                .unwrap_or(key)
                .to_string();
            if let Some(user) = BackRefs::of(cloud).pip_users.get(&path::resource_key(&id)) {
                return Err(invalid(
                    "PublicIPAddressInUse",
                    format!(
                        "Public IP address {id} can not be deleted since it is still allocated to resource {user}."
                    ),
                ));
            }
        }
        path::NIC => {
            if let Some(vm) = cloud.vms.values().find(|vm| same_id(&vm.nic_id, key)) {
                return Err(invalid(
                    "NicInUse",
                    format!(
                        "Network Interface {key} is used by existing resource {}.",
                        vm.id
                    ),
                ));
            }
        }
        path::NSG | path::RT => {
            let field = if info.key == path::NSG {
                "networkSecurityGroup"
            } else {
                "routeTable"
            };
            let vnet = path::type_info(path::VNET).expect("known");
            for (_, d) in cloud.docs_of(vnet) {
                for s in d
                    .value
                    .get("properties")
                    .and_then(|p| p.get("subnets"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if ref_id(s, field).is_some_and(|r| same_id(r, key)) {
                        let code = if info.key == path::NSG {
                            "InUseNetworkSecurityGroupCannotBeDeleted"
                        } else {
                            "InUseRouteTableCannotBeDeleted"
                        };
                        return Err(invalid(code, format!("{key} is in use by a subnet.")));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}
