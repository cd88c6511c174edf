//! Virtual machines as the compute resource provider keeps them, and how ARM shows them.
//!
//! A VM is a typed record (the CCM only reads VMs; the admin API makes and changes
//! them), with its NIC and public IP as ordinary network documents in the store, so a
//! CCM that PUTs the NIC (joining a backend pool) changes what the VM shows.
//!
//! Fields the CCM reads (cloud-provider-azure `pkg/provider/azure_standard.go`,
//! `azure_instances.go`, `azure_zones.go`): `id`, `name`, `location`, `zones`,
//! `properties.hardwareProfile.vmSize`, `properties.provisioningState`,
//! `properties.networkProfile.networkInterfaces[{id, properties.primary}]`,
//! `properties.osProfile.computerName`, and with `$expand=instanceView`:
//! `properties.instanceView.statuses[].code` (`ProvisioningState/…`, `PowerState/…`) and
//! `properties.instanceView.platformFaultDomain` (the zone label of a VM without zones).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A VM's power state (instanceView `PowerState/<word>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    #[default]
    Running,
    Stopped,
    Deallocated,
}

impl PowerState {
    pub fn word(self) -> &'static str {
        match self {
            PowerState::Running => "running",
            PowerState::Stopped => "stopped",
            PowerState::Deallocated => "deallocated",
        }
    }

    fn display(self) -> &'static str {
        match self {
            PowerState::Running => "VM running",
            PowerState::Stopped => "VM stopped",
            PowerState::Deallocated => "VM deallocated",
        }
    }
}

/// A VM to create (admin API `POST /admin/vms`, [`crate::Admin::create_vm`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    pub name: String,
    /// Availability zone (`"1"`); `None` or `""`: no zone, the VM gets a fault domain.
    #[serde(default)]
    pub zone: Option<String>,
    /// Defaults to `Standard_D2s_v3`.
    #[serde(default, rename = "vmSize", alias = "vm_size")]
    pub vm_size: Option<String>,
    /// Private IPs of the primary NIC (one ipConfiguration each); empty: one allocated
    /// from `127.60.<block>.0/24`.
    #[serde(default, alias = "privateIPs")]
    pub private_ips: Vec<String>,
    /// Public IPs: `None` (omitted): one allocated from `198.18.<block>.0/24`; `[]`: none;
    /// otherwise these (the first on the primary ipConfiguration).
    #[serde(default, alias = "publicIPs")]
    pub public_ips: Option<Vec<String>>,
    /// Power state at creation (default running).
    #[serde(default, alias = "powerState")]
    pub power_state: Option<PowerState>,
}

/// A change to a VM (admin API `PATCH /admin/vms/{name}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmPatch {
    #[serde(default, alias = "privateIPs")]
    pub private_ips: Option<Vec<String>>,
    /// `Some([])` removes the public IPs.
    #[serde(default, alias = "publicIPs")]
    pub public_ips: Option<Vec<String>>,
    /// `Some("")` removes the zone (a fault domain is used).
    #[serde(default)]
    pub zone: Option<String>,
    /// `false` stops the VM, `true` starts it.
    #[serde(default)]
    pub running: Option<bool>,
    #[serde(default, alias = "powerState")]
    pub power_state: Option<PowerState>,
}

/// A VM as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmInfo {
    /// The ARM id.
    pub id: String,
    pub name: String,
    pub zone: Option<String>,
    pub fault_domain: u32,
    pub vm_size: String,
    pub private_ips: Vec<String>,
    pub public_ips: Vec<String>,
    pub power_state: PowerState,
    /// What the CCM sets as the Node's providerID.
    pub provider_id: String,
    /// The VM's unique id (`properties.vmId`).
    pub vm_id: String,
}

/// A VM record.
#[derive(Debug, Clone)]
pub struct Vm {
    pub name: String,
    pub id: String,
    pub vm_id: String,
    pub zone: Option<String>,
    pub fault_domain: u32,
    pub vm_size: String,
    pub power: PowerState,
    /// The primary NIC's id.
    pub nic_id: String,
    pub seq: u64,
    pub time_created: jiff::Timestamp,
}

impl Vm {
    /// The VM as ARM answers it; `instance_view` adds what `$expand=instanceView` adds.
    pub fn to_json(&self, location: &str, instance_view: bool) -> Value {
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": location,
            "tags": {},
            "properties": {
                "vmId": self.vm_id,
                "hardwareProfile": {"vmSize": self.vm_size},
                "storageProfile": {
                    "osDisk": {"osType": "Linux", "name": format!("{}-osdisk", self.name),
                               "createOption": "FromImage", "diskSizeGB": 30}
                },
                "osProfile": {"computerName": self.name, "adminUsername": "azureuser",
                              "linuxConfiguration": {"disablePasswordAuthentication": true}},
                "networkProfile": {
                    "networkInterfaces": [{"id": self.nic_id, "properties": {"primary": true}}]
                },
                "provisioningState": "Succeeded",
                "timeCreated": self.time_created.to_string(),
            }
        });
        if let Some(zone) = &self.zone {
            v["zones"] = json!([zone]);
        }
        if instance_view {
            v["properties"]["instanceView"] = self.instance_view();
        }
        v
    }

    /// `GET …/virtualMachines/{name}/instanceView`, and the expanded `instanceView`.
    pub fn instance_view(&self) -> Value {
        let mut view = json!({
            "computerName": self.name,
            "osName": "ubuntu",
            "osVersion": "24.04",
            "statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info",
                 "displayStatus": "Provisioning succeeded", "time": self.time_created.to_string()},
                {"code": format!("PowerState/{}", self.power.word()), "level": "Info",
                 "displayStatus": self.power.display()}
            ]
        });
        if self.zone.is_none() {
            view["platformFaultDomain"] = json!(self.fault_domain);
            view["platformUpdateDomain"] = json!(self.fault_domain);
        }
        view
    }
}

/// `azure://` + the VM id with the resource group lowercased, as cloud-provider-azure
/// writes it (`pkg/provider/azure_wrap.go` `convertResourceGroupNameToLower`).
pub fn provider_id(vm_id: &str) -> String {
    let mut parts: Vec<String> = vm_id.split('/').map(str::to_string).collect();
    if let Some(i) = parts
        .iter()
        .position(|p| p.eq_ignore_ascii_case("resourceGroups"))
        && let Some(rg) = parts.get_mut(i + 1)
    {
        *rg = rg.to_ascii_lowercase();
    }
    format!("azure://{}", parts.join("/"))
}
