//! Virtual machine scale sets (Uniform orchestration), read-only through ARM: what a
//! `vmType: vmss` CCM reads to initialize nodes (cloud-provider-azure
//! `pkg/provider/azure_vmss.go`): the scale set, its instances (`$expand=instanceView`
//! for power state and fault domain) and each instance's NICs
//! (`…/virtualMachines/{id}/networkInterfaces`). Scale sets are made by the admin API.
//!
//! Not served: writes to scale sets and their instances (the CCM's backend pool updates
//! through the scale set model and `manualupgrade`) answer 409 `OperationNotAllowed`,
//! so a VMSS cluster's nodes initialize but its load balancers cannot get backends.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::compute::state::{PowerState, VmInfo, provider_id};

/// A scale set to create (admin API `POST /admin/scale-sets`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSetSpec {
    pub name: String,
    /// Instances, numbered from 0.
    pub capacity: u32,
    /// Zones the instances are spread over; empty: fault domains.
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default, rename = "vmSize", alias = "vm_size")]
    pub vm_size: Option<String>,
}

/// One instance.
#[derive(Debug, Clone)]
pub struct Instance {
    pub instance_id: String,
    /// The node name: `<scale set><instance id in base 36, 6 digits>`.
    pub computer_name: String,
    pub zone: Option<String>,
    pub fault_domain: u32,
    pub private_ip: String,
    pub power: PowerState,
    pub vm_id: String,
}

/// A scale set.
#[derive(Debug, Clone)]
pub struct ScaleSet {
    pub name: String,
    pub id: String,
    pub vm_size: String,
    pub zones: Vec<String>,
    pub subnet_id: String,
    pub instances: Vec<Instance>,
    pub seq: u64,
}

/// `n` in base 36, 6 digits, as VMSS computer names carry the instance id.
pub fn base36(mut n: u32) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = vec![b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = digits[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(out).unwrap_or_default()
}

impl ScaleSet {
    pub fn to_json(&self, location: &str) -> Value {
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "type": "Microsoft.Compute/virtualMachineScaleSets",
            "location": location,
            "sku": {"name": self.vm_size, "tier": "Standard", "capacity": self.instances.len()},
            "properties": {
                "provisioningState": "Succeeded",
                "orchestrationMode": "Uniform",
                "upgradePolicy": {"mode": "Manual"},
                "virtualMachineProfile": {
                    "osProfile": {"computerNamePrefix": self.name, "adminUsername": "azureuser"},
                    "networkProfile": {"networkInterfaceConfigurations": [{
                        "name": format!("{}-nic", self.name),
                        "properties": {"primary": true, "ipConfigurations": [{
                            "name": "ipconfig1",
                            "properties": {"primary": true, "subnet": {"id": self.subnet_id},
                                           "loadBalancerBackendAddressPools": []}
                        }]}
                    }]}
                }
            }
        });
        if !self.zones.is_empty() {
            v["zones"] = json!(self.zones);
        }
        v
    }

    fn instance_id_path(&self, i: &Instance) -> String {
        format!("{}/virtualMachines/{}", self.id, i.instance_id)
    }

    fn nic_id(&self, i: &Instance) -> String {
        format!(
            "{}/networkInterfaces/{}-nic",
            self.instance_id_path(i),
            self.name
        )
    }

    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.instance_id == id)
    }

    pub fn instance_json(&self, i: &Instance, location: &str, expand: bool) -> Value {
        let mut v = json!({
            "id": self.instance_id_path(i),
            "name": format!("{}_{}", self.name, i.instance_id),
            "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
            "instanceId": i.instance_id,
            "location": location,
            "sku": {"name": self.vm_size, "tier": "Standard"},
            "properties": {
                "vmId": i.vm_id,
                "latestModelApplied": true,
                "provisioningState": "Succeeded",
                "hardwareProfile": {"vmSize": self.vm_size},
                "osProfile": {"computerName": i.computer_name, "adminUsername": "azureuser"},
                "networkProfile": {"networkInterfaces": [{"id": self.nic_id(i), "properties": {"primary": true}}]},
            }
        });
        if let Some(zone) = &i.zone {
            v["zones"] = json!([zone]);
        }
        if expand {
            v["properties"]["instanceView"] = self.instance_view(i);
        }
        v
    }

    pub fn instance_view(&self, i: &Instance) -> Value {
        let mut view = json!({
            "computerName": i.computer_name,
            "statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"},
                {"code": format!("PowerState/{}", i.power.word()), "level": "Info"}
            ]
        });
        if i.zone.is_none() {
            view["platformFaultDomain"] = json!(i.fault_domain);
        }
        view
    }

    pub fn nic_json(&self, i: &Instance) -> Value {
        let id = self.nic_id(i);
        json!({
            "id": id,
            "name": format!("{}-nic", self.name),
            "type": "Microsoft.Network/networkInterfaces",
            "properties": {
                "provisioningState": "Succeeded",
                "primary": true,
                "virtualMachine": {"id": self.instance_id_path(i)},
                "ipConfigurations": [{
                    "id": format!("{id}/ipConfigurations/ipconfig1"),
                    "name": "ipconfig1",
                    "properties": {"primary": true, "privateIPAddress": i.private_ip,
                                   "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4",
                                   "subnet": {"id": self.subnet_id}, "provisioningState": "Succeeded"}
                }]
            }
        })
    }

    /// The admin API's view of each instance (`name` is the node name).
    pub fn infos(&self) -> Vec<VmInfo> {
        self.instances
            .iter()
            .map(|i| {
                let id = self.instance_id_path(i);
                VmInfo {
                    provider_id: provider_id(&id),
                    id,
                    name: i.computer_name.clone(),
                    zone: i.zone.clone(),
                    fault_domain: i.fault_domain,
                    vm_size: self.vm_size.clone(),
                    private_ips: vec![i.private_ip.clone()],
                    public_ips: Vec::new(),
                    power_state: i.power,
                    vm_id: i.vm_id.clone(),
                }
            })
            .collect()
    }
}
