//! The control side of a running mock ([`Admin`]): VMs, lifecycle modes, inspection
//! (load balancers, routes, NSG rules, leaks), out-of-band changes and reset. The HTTP
//! admin API (`admin_api`) is a thin layer over it.

use std::net::Ipv4Addr;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::arm::path;
use crate::compute::state::{PowerState, Vm, VmInfo, VmPatch, VmSpec, provider_id};
use crate::compute::vmss::{Instance, ScaleSet, ScaleSetSpec, base36};
use crate::state::{Cloud, PRIVATE_POOL, PUBLIC_POOL, Pool};
use crate::{LIFECYCLE_TYPES, LifecycleMode, LifecyclePolicies, Shared};

/// Why an admin call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("conflict: {0}")]
    Conflict(String),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> AdminError {
    AdminError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// What a lifecycle mode applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleTarget {
    /// Every operation without a more specific mode.
    Default,
    /// Operations on one resource type ([`LIFECYCLE_TYPES`]: `loadbalancers`, `routes`...).
    Type(String),
    /// Operations on resources of this name (any type, case-insensitive).
    Resource(String),
}

/// A load balancer, summarized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbSummary {
    pub id: String,
    pub name: String,
    /// `provisioningState`.
    pub state: String,
    /// Frontend addresses (public IPs' addresses or internal private IPs).
    pub frontend_ips: Vec<String>,
    /// `<name> <protocol> <frontendPort>-><backendPort>`.
    pub rules: Vec<String>,
    pub backend_pools: Vec<String>,
    /// Private IPs of the NIC ipConfigurations in any of its pools, and IP-based pool
    /// members, sorted.
    pub backend_ips: Vec<String>,
    pub internal: bool,
}

/// A frontend IP configuration of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FrontendSummary {
    pub id: String,
    pub name: String,
    /// The load balancer's name.
    pub load_balancer: String,
    /// The public IP's address, or the private IP of an internal frontend; empty while
    /// the public IP has none.
    pub address: String,
    /// The load balancer's `provisioningState`.
    pub state: String,
    pub internal: bool,
}

/// A frontend's address and whether it is private (an internal load balancer's).
fn frontend_address(cloud: &Cloud, fe: &Value) -> Option<(String, bool)> {
    let fp = &fe["properties"];
    if let Some(ip) = fp.get("privateIPAddress").and_then(Value::as_str) {
        return Some((ip.to_string(), true));
    }
    let pip = fp["publicIPAddress"]["id"].as_str()?;
    cloud
        .lookup(&path::resource_key(pip))?
        .get("properties")?
        .get("ipAddress")?
        .as_str()
        .map(|ip| (ip.to_string(), false))
}

/// A route of the route table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteInfo {
    pub name: String,
    pub address_prefix: String,
    pub next_hop_ip: String,
}

/// A rule of the NSG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NsgRuleInfo {
    pub name: String,
    pub priority: u64,
    pub direction: String,
    pub access: String,
    pub protocol: String,
    pub source_prefixes: Vec<String>,
    pub destination_prefixes: Vec<String>,
    pub destination_ports: Vec<String>,
}

/// The control handle.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A property and its plural form as one list (`sourceAddressPrefix` + `…Prefixes`).
pub(crate) fn one_or_many(p: &Value, single: &str, plural: &str) -> Vec<String> {
    let mut out = strings(p.get(plural));
    if let Some(s) = p.get(single).and_then(Value::as_str)
        && !s.is_empty()
    {
        out.insert(0, s.to_string());
    }
    out
}

fn parse_ips(field: &'static str, ips: &[String]) -> Result<Vec<Ipv4Addr>, AdminError> {
    ips.iter()
        .map(|s| {
            s.parse::<Ipv4Addr>()
                .map_err(|_| invalid(field, format!("{s:?} is not an IPv4 address")))
        })
        .collect()
}

/// The public IP documents a VM owns: `{name}-pip`, `{name}-pip-1`...
fn pip_name(vm: &str, i: usize) -> String {
    if i == 0 {
        format!("{vm}-pip")
    } else {
        format!("{vm}-pip-{i}")
    }
}

/// Writes a VM's NIC and public IPs (admin-made, so settled at once and in the baseline).
fn write_nic(
    cloud: &mut Cloud,
    vm_name: &str,
    vm_id: &str,
    private: &[Ipv4Addr],
    public: &[Ipv4Addr],
    keep_pools: Option<&Value>,
) -> Result<String, AdminError> {
    // Drop the VM's old public IP documents first, remembering their addresses: an
    // address kept keeps its resource, a new address is a new resource, because a static
    // public IP's address is fixed for its life in ARM (so a client's cache keyed by name,
    // as cloud-provider-azure's is, sees the change as ARM would show it).
    let pip_info = path::type_info(path::PIP).expect("known");
    let prefix = format!("{}-pip", vm_name.to_ascii_lowercase());
    let old: Vec<(String, String, String)> = cloud
        .docs_of(pip_info)
        .into_iter()
        .filter_map(|(k, d)| {
            let name = d.value.get("name").and_then(Value::as_str)?;
            name.to_ascii_lowercase().starts_with(&prefix).then(|| {
                let addr = d.value["properties"]["ipAddress"]
                    .as_str()
                    .unwrap_or_default();
                (k.clone(), name.to_string(), addr.to_string())
            })
        })
        .collect();
    for (k, _, _) in &old {
        cloud.docs.remove(k);
    }
    let mut names: Vec<String> = Vec::new();
    for ip in public {
        let kept = old
            .iter()
            .find(|(_, _, addr)| *addr == ip.to_string())
            .map(|(_, name, _)| name.clone());
        let name = kept.unwrap_or_else(|| {
            (0..)
                .map(|i| pip_name(vm_name, i))
                .find(|n| {
                    !old.iter().any(|(_, o, _)| o.eq_ignore_ascii_case(n)) && !names.contains(n)
                })
                .expect("a free name")
        });
        names.push(name);
    }
    let mut pip_ids = Vec::new();
    for (ip, name) in public.iter().zip(names) {
        let id = cloud.id(path::PIP, &[&name]);
        let body = json!({"sku": {"name": "Standard", "tier": "Regional"},
            "properties": {"publicIPAllocationMethod": "Static", "ipAddress": ip.to_string()}});
        let value = crate::network::state::prepare(cloud, pip_info, &id, &name, body, None)
            .map_err(|e| invalid("public_ips", e.message))?;
        cloud.insert_settled(&id, value);
        pip_ids.push(id);
    }
    let subnet_id = cloud.id(
        path::SUBNET,
        &[&cloud.ctx.vnet.clone(), &cloud.ctx.subnet.clone()],
    );
    let configs: Vec<Value> = private
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut props = json!({
                "privateIPAddress": ip.to_string(),
                "privateIPAllocationMethod": "Static",
                "subnet": {"id": subnet_id},
                "primary": i == 0,
            });
            if let Some(pip) = pip_ids.get(i) {
                props["publicIPAddress"] = json!({"id": pip});
            }
            if i == 0
                && let Some(pools) = keep_pools
            {
                props["loadBalancerBackendAddressPools"] = pools.clone();
            }
            json!({"name": format!("ipconfig{}", i + 1), "properties": props})
        })
        .collect();
    let nic_name = format!("{vm_name}-nic");
    let nic_id = cloud.id(path::NIC, &[&nic_name]);
    let nic_info = path::type_info(path::NIC).expect("known");
    let body = json!({"properties": {"ipConfigurations": configs, "primary": true}});
    let mut value = crate::network::state::prepare(cloud, nic_info, &nic_id, &nic_name, body, None)
        .map_err(|e| invalid("private_ips", e.message))?;
    value["properties"]["virtualMachine"] = json!({"id": vm_id});
    cloud.insert_settled(&nic_id, value);
    Ok(nic_id)
}

/// Allocates `n` addresses of a pool not used yet.
fn allocate_n(cloud: &Cloud, pool: Pool, n: usize) -> Result<Vec<Ipv4Addr>, AdminError> {
    let mut taken = std::collections::HashSet::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let ip = cloud
            .allocate(pool, &taken)
            .map_err(|e| invalid("address", e.message))?;
        taken.insert(ip);
        out.push(ip);
    }
    Ok(out)
}

fn check_free(cloud: &Cloud, ips: &[Ipv4Addr], mine: &[Ipv4Addr]) -> Result<(), AdminError> {
    let used = cloud.used_ips();
    for ip in ips {
        if used.contains(ip) && !mine.contains(ip) {
            return Err(AdminError::Conflict(format!("address {ip} is in use")));
        }
    }
    Ok(())
}

pub(crate) fn create_vm(cloud: &mut Cloud, spec: VmSpec) -> Result<VmInfo, AdminError> {
    if !crate::network::api::valid_name(&spec.name) || spec.name.len() > 64 {
        return Err(invalid(
            "name",
            format!("{:?} is not a valid VM name", spec.name),
        ));
    }
    let key = spec.name.to_ascii_lowercase();
    if cloud.vms.contains_key(&key) {
        return Err(AdminError::Conflict(format!("VM {} exists", spec.name)));
    }
    let private = match parse_ips("private_ips", &spec.private_ips)? {
        v if v.is_empty() => allocate_n(cloud, PRIVATE_POOL, 1)?,
        v => v,
    };
    check_free(cloud, &private, &[])?;
    let public = match &spec.public_ips {
        None => allocate_n(cloud, PUBLIC_POOL, 1)?,
        Some(list) => parse_ips("public_ips", list)?,
    };
    check_free(cloud, &public, &[])?;
    let zone = spec.zone.filter(|z| !z.is_empty());
    let fault_domain = (cloud.vms.len() % 3) as u32;
    let id = cloud.id(path::VM, &[&spec.name]);
    let nic_id = write_nic(cloud, &spec.name, &id, &private, &public, None)?;
    cloud.seq += 1;
    let vm = Vm {
        name: spec.name.clone(),
        id,
        vm_id: uuid::Uuid::new_v4().to_string(),
        zone,
        fault_domain,
        vm_size: spec.vm_size.unwrap_or_else(|| "Standard_D2s_v3".into()),
        power: spec.power_state.unwrap_or_default(),
        nic_id,
        seq: cloud.seq,
        time_created: jiff::Timestamp::now(),
    };
    cloud.vms.insert(key, vm.clone());
    Ok(vm_info(cloud, &vm))
}

/// A scale set as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScaleSetInfo {
    pub id: String,
    pub name: String,
    /// Each instance; `name` is its computer name (the node name).
    pub instances: Vec<VmInfo>,
}

pub(crate) fn create_scale_set(
    cloud: &mut Cloud,
    spec: ScaleSetSpec,
) -> Result<ScaleSetInfo, AdminError> {
    // Computer names are the prefix and six base-36 digits, within 15 characters.
    if !crate::network::api::valid_name(&spec.name) || spec.name.len() > 9 {
        return Err(invalid(
            "name",
            format!(
                "{:?} is not a valid scale set name (at most 9 characters)",
                spec.name
            ),
        ));
    }
    let key = spec.name.to_ascii_lowercase();
    if cloud.scale_sets.contains_key(&key) || cloud.vms.contains_key(&key) {
        return Err(AdminError::Conflict(format!("{} exists", spec.name)));
    }
    if spec.capacity > 100 {
        return Err(invalid("capacity", "at most 100 instances"));
    }
    let ips = allocate_n(cloud, PRIVATE_POOL, spec.capacity as usize)?;
    let instances = ips
        .into_iter()
        .enumerate()
        .map(|(i, ip)| Instance {
            instance_id: i.to_string(),
            computer_name: format!("{}{}", spec.name, base36(i as u32)),
            zone: (!spec.zones.is_empty()).then(|| spec.zones[i % spec.zones.len()].clone()),
            fault_domain: (i % 3) as u32,
            private_ip: ip.to_string(),
            power: PowerState::Running,
            vm_id: uuid::Uuid::new_v4().to_string(),
        })
        .collect();
    cloud.seq += 1;
    let subnet_id = cloud.id(
        path::SUBNET,
        &[&cloud.ctx.vnet.clone(), &cloud.ctx.subnet.clone()],
    );
    let ss = ScaleSet {
        id: cloud.id(path::VMSS, &[&spec.name]),
        name: spec.name.clone(),
        vm_size: spec.vm_size.unwrap_or_else(|| "Standard_D2s_v3".into()),
        zones: spec.zones,
        subnet_id,
        instances,
        seq: cloud.seq,
    };
    let info = ScaleSetInfo {
        id: ss.id.clone(),
        name: ss.name.clone(),
        instances: ss.infos(),
    };
    cloud.scale_sets.insert(key, ss);
    Ok(info)
}

/// The NIC's private IPs and its public IPs' addresses.
fn vm_addresses(cloud: &Cloud, vm: &Vm) -> (Vec<String>, Vec<String>) {
    let mut private = Vec::new();
    let mut public = Vec::new();
    let nic = cloud.lookup(&path::resource_key(&vm.nic_id));
    for cfg in nic
        .and_then(|n| n.get("properties"))
        .and_then(|p| p.get("ipConfigurations"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let p = &cfg["properties"];
        if let Some(ip) = p.get("privateIPAddress").and_then(Value::as_str) {
            private.push(ip.to_string());
        }
        if let Some(pip) = p
            .get("publicIPAddress")
            .and_then(|x| x.get("id"))
            .and_then(Value::as_str)
            && let Some(addr) = cloud
                .lookup(&path::resource_key(pip))
                .and_then(|d| d.get("properties"))
                .and_then(|p| p.get("ipAddress"))
                .and_then(Value::as_str)
        {
            public.push(addr.to_string());
        }
    }
    (private, public)
}

pub(crate) fn vm_info(cloud: &Cloud, vm: &Vm) -> VmInfo {
    let (private_ips, public_ips) = vm_addresses(cloud, vm);
    VmInfo {
        id: vm.id.clone(),
        name: vm.name.clone(),
        zone: vm.zone.clone(),
        fault_domain: vm.fault_domain,
        vm_size: vm.vm_size.clone(),
        private_ips,
        public_ips,
        power_state: vm.power,
        provider_id: provider_id(&vm.id),
        vm_id: vm.vm_id.clone(),
    }
}

impl Admin {
    /// All VMs, in creation order.
    pub fn vms(&self) -> Vec<VmInfo> {
        let cloud = self.shared.cloud();
        let mut vms: Vec<&Vm> = cloud.vms.values().collect();
        vms.sort_by_key(|v| v.seq);
        vms.into_iter().map(|v| vm_info(&cloud, v)).collect()
    }

    pub fn vm(&self, name: &str) -> Option<VmInfo> {
        let cloud = self.shared.cloud();
        cloud
            .vms
            .get(&name.to_ascii_lowercase())
            .map(|v| vm_info(&cloud, v))
    }

    pub fn create_vm(&self, spec: VmSpec) -> Result<VmInfo, AdminError> {
        let info = create_vm(&mut self.shared.cloud(), spec)?;
        self.shared.wake.changed();
        Ok(info)
    }

    /// Changes addresses, zone or power state; the NIC keeps its backend pools.
    pub fn update_vm(&self, name: &str, patch: VmPatch) -> Result<VmInfo, AdminError> {
        let info = {
            let mut cloud = self.shared.cloud();
            let key = name.to_ascii_lowercase();
            let vm = cloud
                .vms
                .get(&key)
                .cloned()
                .ok_or_else(|| AdminError::NotFound(format!("VM {name}")))?;
            let (old_private, old_public) = vm_addresses(&cloud, &vm);
            let old_private = parse_ips("private_ips", &old_private)?;
            let old_public = parse_ips("public_ips", &old_public)?;
            if patch.private_ips.is_some() || patch.public_ips.is_some() {
                let private = match &patch.private_ips {
                    Some(p) if p.is_empty() => {
                        return Err(invalid("private_ips", "a VM keeps at least one private IP"));
                    }
                    Some(p) => parse_ips("private_ips", p)?,
                    None => old_private.clone(),
                };
                let public = match &patch.public_ips {
                    Some(p) => parse_ips("public_ips", p)?,
                    None => old_public.clone(),
                };
                check_free(&cloud, &private, &old_private)?;
                check_free(&cloud, &public, &old_public)?;
                let pools = cloud
                    .lookup(&path::resource_key(&vm.nic_id))
                    .and_then(|n| n["properties"]["ipConfigurations"].get(0))
                    .and_then(|c| c["properties"].get("loadBalancerBackendAddressPools"))
                    .cloned();
                write_nic(
                    &mut cloud,
                    &vm.name,
                    &vm.id,
                    &private,
                    &public,
                    pools.as_ref(),
                )?;
            }
            let vm = cloud.vms.get_mut(&key).expect("looked up");
            if let Some(zone) = patch.zone {
                vm.zone = (!zone.is_empty()).then_some(zone);
            }
            if let Some(running) = patch.running {
                vm.power = if running {
                    PowerState::Running
                } else {
                    PowerState::Stopped
                };
            }
            if let Some(power) = patch.power_state {
                vm.power = power;
            }
            let vm = vm.clone();
            vm_info(&cloud, &vm)
        };
        self.shared.wake.changed();
        Ok(info)
    }

    /// Deletes the VM with its NIC and public IPs.
    pub fn delete_vm(&self, name: &str) -> Result<(), AdminError> {
        {
            let mut cloud = self.shared.cloud();
            let vm = cloud
                .vms
                .remove(&name.to_ascii_lowercase())
                .ok_or_else(|| AdminError::NotFound(format!("VM {name}")))?;
            cloud.docs.remove(&path::resource_key(&vm.nic_id));
            let prefix = format!("{}-pip", vm.name.to_ascii_lowercase());
            let pip_info = path::type_info(path::PIP).expect("known");
            let pips: Vec<String> = cloud
                .docs_of(pip_info)
                .into_iter()
                .filter(|(k, _)| k.rsplit('/').next().is_some_and(|n| n.starts_with(&prefix)))
                .map(|(k, _)| k.clone())
                .collect();
            for k in pips {
                cloud.docs.remove(&k);
            }
        }
        self.shared.wake.changed();
        Ok(())
    }

    /// Creates a scale set of `capacity` running instances (read-only through ARM).
    pub fn create_scale_set(&self, spec: ScaleSetSpec) -> Result<ScaleSetInfo, AdminError> {
        let info = create_scale_set(&mut self.shared.cloud(), spec)?;
        self.shared.wake.changed();
        Ok(info)
    }

    /// Every scale set, in creation order.
    pub fn scale_sets(&self) -> Vec<ScaleSetInfo> {
        let cloud = self.shared.cloud();
        let mut sets: Vec<&ScaleSet> = cloud.scale_sets.values().collect();
        sets.sort_by_key(|s| s.seq);
        sets.into_iter()
            .map(|s| ScaleSetInfo {
                id: s.id.clone(),
                name: s.name.clone(),
                instances: s.infos(),
            })
            .collect()
    }

    /// Deletes a scale set and its instances.
    pub fn delete_scale_set(&self, name: &str) -> Result<(), AdminError> {
        self.shared
            .cloud()
            .scale_sets
            .remove(&name.to_ascii_lowercase())
            .map(|_| ())
            .ok_or_else(|| AdminError::NotFound(format!("scale set {name}")))
    }

    /// Sets one scale set instance's power state.
    pub fn set_instance_power(
        &self,
        scale_set: &str,
        instance_id: &str,
        power: PowerState,
    ) -> Result<(), AdminError> {
        let mut cloud = self.shared.cloud();
        let ss = cloud
            .scale_sets
            .get_mut(&scale_set.to_ascii_lowercase())
            .ok_or_else(|| AdminError::NotFound(format!("scale set {scale_set}")))?;
        let instance = ss
            .instances
            .iter_mut()
            .find(|i| i.instance_id == instance_id)
            .ok_or_else(|| {
                AdminError::NotFound(format!("instance {instance_id} of {scale_set}"))
            })?;
        instance.power = power;
        Ok(())
    }

    pub fn journal(&self) -> mock_cloud::Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> mock_cloud::Faults {
        self.shared.faults.clone()
    }

    /// Clears journal and fault rules, puts the cloud back to its seed (same VMs, ids and
    /// addresses) and re-applies the seed's fault rules. Issued tokens stay valid.
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    pub(crate) fn reset_cloud(&self) {
        *self.shared.cloud() = self.shared.seed.clone();
        self.shared.wake.changed();
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }

    /// How operations end, by default, type and resource name.
    pub fn lifecycle(&self) -> LifecyclePolicies {
        self.shared.cloud().policies.clone()
    }

    /// Sets (`Some`) or removes (`None`) a lifecycle mode; a resource's mode also applies
    /// to its operation in progress.
    pub fn set_lifecycle(
        &self,
        target: LifecycleTarget,
        mode: Option<LifecycleMode>,
    ) -> Result<(), AdminError> {
        let mode = mode
            .map(|m| m.validate().map_err(|e| invalid("mode", e.to_string())))
            .transpose()?;
        let mut cloud = self.shared.cloud();
        match target {
            LifecycleTarget::Default => {
                cloud.policies.default = mode.unwrap_or(LifecycleMode::Immediate);
            }
            LifecycleTarget::Type(t) => {
                let t = t.to_ascii_lowercase();
                if !LIFECYCLE_TYPES.contains(&t.as_str()) {
                    return Err(invalid(
                        "type",
                        format!("{t:?} is not one of {}", LIFECYCLE_TYPES.join(", ")),
                    ));
                }
                match mode {
                    Some(m) => cloud.policies.by_type.insert(t, m),
                    None => cloud.policies.by_type.remove(&t),
                };
            }
            LifecycleTarget::Resource(name) => {
                let name = name.to_ascii_lowercase();
                match mode {
                    Some(m) => {
                        cloud.policies.by_id.insert(name.clone(), m);
                        let keys: Vec<(String, String)> = cloud
                            .pending
                            .iter()
                            .filter(|(k, _)| k.rsplit('/').next() == Some(name.as_str()))
                            .map(|(k, o)| (k.clone(), o.clone()))
                            .collect();
                        for (_, op) in keys {
                            if let Some(op) = cloud.ops.get_mut(&op) {
                                op.lifecycle.set_mode(m);
                            }
                        }
                    }
                    None => {
                        cloud.policies.by_id.remove(&name);
                    }
                }
            }
        }
        drop(cloud);
        self.shared.wake.changed();
        Ok(())
    }

    /// Every load balancer, summarized.
    pub fn load_balancers(&self) -> Vec<LbSummary> {
        let cloud = self.shared.cloud();
        let info = path::type_info(path::LB).expect("known");
        cloud
            .docs_of(info)
            .into_iter()
            .map(|(_, d)| {
                let v = &d.value;
                let p = &v["properties"];
                let mut internal = false;
                let frontend_ips = p["frontendIPConfigurations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|fe| {
                        let (ip, private) = frontend_address(&cloud, fe)?;
                        internal |= private;
                        Some(ip)
                    })
                    .collect();
                let rules = p["loadBalancingRules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let rp = &r["properties"];
                        format!(
                            "{} {} {}->{}",
                            r["name"].as_str().unwrap_or_default(),
                            rp["protocol"].as_str().unwrap_or_default(),
                            rp["frontendPort"],
                            rp["backendPort"]
                        )
                    })
                    .collect();
                let backend_pools = p["backendAddressPools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["name"].as_str().map(str::to_string))
                    .collect();
                let pool_ids: Vec<String> = p["backendAddressPools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["id"].as_str().map(path::resource_key))
                    .collect();
                let mut backend_ips: Vec<String> = p["backendAddressPools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|b| {
                        b["properties"]["loadBalancerBackendAddresses"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|a| {
                                a["properties"]["ipAddress"].as_str().map(str::to_string)
                            })
                    })
                    .collect();
                for (_, nic) in cloud.docs_of(path::type_info(path::NIC).expect("known")) {
                    for cfg in nic.value["properties"]["ipConfigurations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let member = cfg["properties"]["loadBalancerBackendAddressPools"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|pool| {
                                pool["id"]
                                    .as_str()
                                    .is_some_and(|id| pool_ids.contains(&path::resource_key(id)))
                            });
                        if member && let Some(ip) = cfg["properties"]["privateIPAddress"].as_str() {
                            backend_ips.push(ip.to_string());
                        }
                    }
                }
                backend_ips.sort();
                backend_ips.dedup();
                LbSummary {
                    backend_ips,
                    id: v["id"].as_str().unwrap_or_default().to_string(),
                    name: v["name"].as_str().unwrap_or_default().to_string(),
                    state: p["provisioningState"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    frontend_ips,
                    rules,
                    backend_pools,
                    internal,
                }
            })
            .collect()
    }

    /// Every frontend IP configuration of every load balancer, in load-balancer order:
    /// what one Service gets on the cluster's shared load balancer.
    pub fn frontends(&self) -> Vec<FrontendSummary> {
        let cloud = self.shared.cloud();
        let info = path::type_info(path::LB).expect("known");
        let mut out = Vec::new();
        for (_, d) in cloud.docs_of(info) {
            let lb = &d.value;
            let state = lb["properties"]["provisioningState"]
                .as_str()
                .unwrap_or_default();
            for fe in lb["properties"]["frontendIPConfigurations"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let (address, internal) = frontend_address(&cloud, fe).unwrap_or_default();
                out.push(FrontendSummary {
                    id: fe["id"].as_str().unwrap_or_default().to_string(),
                    name: fe["name"].as_str().unwrap_or_default().to_string(),
                    load_balancer: lb["name"].as_str().unwrap_or_default().to_string(),
                    address,
                    state: state.to_string(),
                    internal,
                });
            }
        }
        out
    }

    /// The names of every network interface.
    pub fn nic_names(&self) -> Vec<String> {
        let cloud = self.shared.cloud();
        cloud
            .docs_of(path::type_info(path::NIC).expect("known"))
            .into_iter()
            .filter_map(|(_, d)| d.value["name"].as_str().map(str::to_string))
            .collect()
    }

    /// The route table's routes as `(name, address prefix, next hop IP)`.
    pub fn route_table_routes(&self) -> Vec<(String, String, String)> {
        self.routes()
            .into_iter()
            .map(|r| (r.name, r.address_prefix, r.next_hop_ip))
            .collect()
    }

    pub fn routes(&self) -> Vec<RouteInfo> {
        let cloud = self.shared.cloud();
        let id = cloud.id(path::RT, &[&cloud.ctx.route_table.clone()]);
        cloud
            .lookup(&path::resource_key(&id))
            .and_then(|rt| rt["properties"]["routes"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| RouteInfo {
                name: r["name"].as_str().unwrap_or_default().to_string(),
                address_prefix: r["properties"]["addressPrefix"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                next_hop_ip: r["properties"]["nextHopIpAddress"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect()
    }

    /// Adds a route out of band (another tenant tool's), not counted as a leak.
    pub fn add_route(
        &self,
        name: &str,
        address_prefix: &str,
        next_hop_ip: &str,
    ) -> Result<(), AdminError> {
        if next_hop_ip.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(
                "next_hop_ip",
                format!("{next_hop_ip:?} is not an IP address"),
            ));
        }
        if !crate::network::api::valid_name(name) {
            return Err(invalid(
                "name",
                format!("{name:?} is not a valid route name"),
            ));
        }
        let mut cloud = self.shared.cloud();
        let rt_name = cloud.ctx.route_table.clone();
        let rt_id = cloud.id(path::RT, &[&rt_name]);
        let route_id = format!("{rt_id}/routes/{name}");
        let rt_key = path::resource_key(&rt_id);
        let doc = cloud
            .docs
            .get_mut(&rt_key)
            .ok_or_else(|| AdminError::NotFound(format!("route table {rt_name}")))?;
        let route = json!({
            "id": route_id, "name": name, "type": "Microsoft.Network/routeTables/routes",
            "etag": crate::arm::new_etag(),
            "properties": {"addressPrefix": address_prefix, "nextHopType": "VirtualAppliance",
                           "nextHopIpAddress": next_hop_ip, "provisioningState": "Succeeded"}
        });
        let routes = doc.value["properties"]["routes"].as_array_mut();
        match routes {
            Some(routes) => {
                routes.retain(|r| !crate::state::name_is(r, name));
                routes.push(route);
            }
            None => doc.value["properties"]["routes"] = json!([route]),
        }
        doc.value["etag"] = Value::String(crate::arm::new_etag());
        doc.served = Some(doc.value.clone());
        cloud.baseline.insert(path::resource_key(&route_id));
        Ok(())
    }

    /// The NSG's own rules (not the defaults), by priority.
    pub fn nsg_rules(&self) -> Vec<NsgRuleInfo> {
        let cloud = self.shared.cloud();
        let id = cloud.id(path::NSG, &[&cloud.ctx.nsg.clone()]);
        let mut rules: Vec<NsgRuleInfo> = cloud
            .lookup(&path::resource_key(&id))
            .and_then(|n| n["properties"]["securityRules"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let p = &r["properties"];
                NsgRuleInfo {
                    name: r["name"].as_str().unwrap_or_default().to_string(),
                    priority: p["priority"].as_u64().unwrap_or_default(),
                    direction: p["direction"].as_str().unwrap_or_default().to_string(),
                    access: p["access"].as_str().unwrap_or_default().to_string(),
                    protocol: p["protocol"].as_str().unwrap_or_default().to_string(),
                    source_prefixes: one_or_many(p, "sourceAddressPrefix", "sourceAddressPrefixes"),
                    destination_prefixes: one_or_many(
                        p,
                        "destinationAddressPrefix",
                        "destinationAddressPrefixes",
                    ),
                    destination_ports: one_or_many(
                        p,
                        "destinationPortRange",
                        "destinationPortRanges",
                    ),
                }
            })
            .collect();
        rules.sort_by_key(|r| r.priority);
        rules
    }

    /// Every stored resource of a type (`loadBalancers`, `publicIPAddresses`...), as ARM
    /// stores it.
    pub fn resources(&self, arm_type_segment: &str) -> Vec<Value> {
        let cloud = self.shared.cloud();
        let Some(info) = path::TYPES.iter().find(|t| {
            t.parent.is_none() && path::segment(t).eq_ignore_ascii_case(arm_type_segment)
        }) else {
            return Vec::new();
        };
        let refs = crate::network::state::BackRefs::of(&cloud);
        cloud
            .docs_of(info)
            .into_iter()
            .map(|(_, d)| refs.render(info, &d.value))
            .collect()
    }

    /// What the ARM API created that still exists (beyond the seed and admin changes).
    pub fn leaks(&self) -> crate::Leaks {
        crate::leaks::find(&self.shared.cloud())
    }
}
