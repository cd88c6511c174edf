//! Azure `InstancesV2` for `vmType: standard`: VMs found by node name, providerIDs, power
//! state, zones and node addresses, as cloud-provider-azure answers them.
//!
//! Upstream, with where:
//! - `InstanceExists`/`InstanceShutdown`/`InstanceMetadata`: `pkg/provider/azure_instances_v2.go`;
//!   by providerID they take the VM name out of it (`providerIDRE` in
//!   `pkg/provider/azure_standard.go`, `GetNodeNameByProviderID`) and then look the VM up
//!   by name in the configured resource group, like every by-name call
//!   (`azure_vmsets_repo.go` `newVMCache`: a VM whose provisioningState is `Deleting`
//!   counts as gone);
//! - providerID = `azure://` + the VM's ARM ID with the resource group lowercased
//!   (`azure_standard.go` `GetInstanceIDByNodeName` + `azure_wrap.go`
//!   `ConvertResourceGroupNameToLower`; `cloudprovider.GetInstanceProviderID` adds
//!   `azure://`);
//! - VMSS providerIDs (`.../virtualMachineScaleSets/<ss>/virtualMachines/<id>`) do not
//!   match `providerIDRE` upstream either under vmType standard; here they get an error
//!   naming the reason;
//! - shutdown = provisioningState `Succeeded` and power state `stopped`, `deallocated` or
//!   `deallocating` (`azure_instances_v1.go` `InstanceShutdownByProviderID`); the power
//!   state is the `PowerState/<x>` status of the instance view (`pkg/util/vm`
//!   `GetVMPowerState`). Upstream's VM cache now GETs without `$expand`; we ask for
//!   `$expand=instanceView` because the power state and fault domain live there (the
//!   cache's own comment says it reads the instance view every time);
//! - addresses: InternalIP of the primary NIC's primary IP configuration, Hostname = node
//!   name, then ExternalIP of the public IP that configuration references
//!   (`azure_instances_v1.go` `addressGetter`, `azure_standard.go` `GetIPByNodeName`,
//!   `getPrimaryInterfaceID`, `getPrimaryIPConfig`);
//! - zone `<location lowercased>-<zone>` when the VM has zones, else the platform fault
//!   domain (`"0"` without an instance view); region = lowercased location
//!   (`azure_standard.go` `GetZoneByNodeName`, `azure_zones.go` `makeZone`);
//! - instance type = `hardwareProfile.vmSize` (`GetInstanceTypeByNodeName`).

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use serde_json::Value;

use crate::address::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP, addr};
use crate::cloud::CloudError;

/// `ProviderName()` of cloud-provider-azure.
pub const PROVIDER_NAME: &str = "azure";

/// What a providerID names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderRef {
    /// A standalone VM (the name is what upstream keeps).
    Vm {
        resource_group: String,
        name: String,
    },
    /// A VMSS (uniform) instance.
    VmssInstance {
        resource_group: String,
        scale_set: String,
        instance_id: String,
    },
}

/// Parses `azure:///subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/...`.
pub fn parse_provider_id(provider_id: &str) -> Result<ProviderRef, String> {
    let bad = || {
        format!(
            "providerID {provider_id:?} is not an Azure VM ID (azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>)"
        )
    };
    let rest = provider_id.strip_prefix("azure://").ok_or_else(bad)?;
    let parts: Vec<&str> = rest.split('/').collect();
    // ["", "subscriptions", sub, "resourceGroups", rg, "providers", "Microsoft.Compute", kind, ...]
    if parts.len() < 9
        || !parts[1].eq_ignore_ascii_case("subscriptions")
        || !parts[3].eq_ignore_ascii_case("resourcegroups")
        || !parts[5].eq_ignore_ascii_case("providers")
        || !parts[6].eq_ignore_ascii_case("Microsoft.Compute")
    {
        return Err(bad());
    }
    let resource_group = parts[4].to_owned();
    match parts[7].to_ascii_lowercase().as_str() {
        "virtualmachines" if parts.len() >= 9 => {
            // providerIDRE keeps everything after `virtualMachines/` as the name.
            let name = parts[8..].join("/");
            if name.is_empty() {
                return Err(bad());
            }
            Ok(ProviderRef::Vm {
                resource_group,
                name,
            })
        }
        "virtualmachinescalesets"
            if parts.len() == 11 && parts[9].eq_ignore_ascii_case("virtualMachines") =>
        {
            Ok(ProviderRef::VmssInstance {
                resource_group,
                scale_set: parts[8].to_owned(),
                instance_id: parts[10].to_owned(),
            })
        }
        _ => Err(bad()),
    }
}

/// The VM name to look up for a node: from its providerID, else its name.
pub fn vm_name_for(node: &Node) -> Result<String, CloudError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    match node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
    {
        None => Ok(name),
        Some(pid) => match parse_provider_id(pid).map_err(CloudError::Other)? {
            ProviderRef::Vm { name, .. } => Ok(name),
            ProviderRef::VmssInstance { scale_set, .. } => Err(CloudError::Other(format!(
                "providerID {pid:?} is a VMSS instance of {scale_set:?}: vmType \"vmss\" is not implemented by the reference CCM (only \"standard\")"
            ))),
        },
    }
}

/// `ConvertResourceGroupNameToLower`: the resource-group segment of an ARM ID lowercased.
pub fn lowercase_resource_group(id: &str) -> String {
    let lower = id.to_ascii_lowercase();
    let Some(start) = lower
        .find("/resourcegroups/")
        .map(|i| i + "/resourcegroups/".len())
    else {
        return id.to_owned();
    };
    let end = lower[start..]
        .find("/providers/")
        .map(|i| start + i)
        .unwrap_or(id.len());
    format!("{}{}{}", &id[..start], &lower[start..end], &id[end..])
}

/// The `PowerState/<x>` code of the instance view, lowercased ("unknown" without one).
pub fn power_state(vm: &Value) -> String {
    statuses(vm)
        .iter()
        .filter_map(|s| s.get("code").and_then(Value::as_str))
        .find_map(|c| c.strip_prefix("PowerState/"))
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| "unknown".to_owned())
}

fn statuses(vm: &Value) -> Vec<Value> {
    vm.pointer("/properties/instanceView/statuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// `InstanceShutdownByProviderID`'s rule.
pub fn is_shut_down(vm: &Value) -> bool {
    let provisioning = vm
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or_default();
    provisioning.eq_ignore_ascii_case("Succeeded")
        && matches!(
            power_state(vm).as_str(),
            "stopped" | "deallocated" | "deallocating"
        )
}

/// `(failure domain, region)` of a VM.
pub fn zone_of(vm: &Value) -> Result<(String, String), CloudError> {
    let location = vm
        .get("location")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let zone = vm
        .get("zones")
        .and_then(Value::as_array)
        .and_then(|z| z.first())
        .and_then(Value::as_str);
    let failure_domain = match zone {
        Some(z) => {
            let id: i64 = z
                .trim()
                .parse()
                .map_err(|_| CloudError::Other(format!("failed to parse zone {z:?}")))?;
            format!("{location}-{id}")
        }
        None => vm
            .pointer("/properties/instanceView/platformFaultDomain")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .to_string(),
    };
    Ok((failure_domain.to_ascii_lowercase(), location))
}

/// The primary NIC's ID (`getPrimaryInterfaceID`).
pub fn primary_nic_id(vm: &Value) -> Result<String, CloudError> {
    let nics = vm
        .pointer("/properties/networkProfile/networkInterfaces")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let id = |n: &Value| n.get("id").and_then(Value::as_str).map(str::to_owned);
    if nics.len() == 1 {
        return id(&nics[0]).ok_or_else(|| CloudError::Other("NIC reference without id".into()));
    }
    nics.iter()
        .find(|n| {
            n.pointer("/properties/primary")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        })
        .and_then(id)
        .ok_or_else(|| {
            CloudError::Other(format!(
                "failed to find a primary nic for the vm. vmname={:?}",
                vm.get("name").and_then(Value::as_str).unwrap_or_default()
            ))
        })
}

/// Index of the primary IP configuration of a NIC (`getPrimaryIPConfig`).
pub fn primary_ip_config_index(nic: &Value) -> Result<usize, CloudError> {
    let configs = nic
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .ok_or_else(|| CloudError::Other("NIC has no ipConfigurations".into()))?;
    if configs.len() == 1 {
        return Ok(0);
    }
    configs
        .iter()
        .position(|c| {
            c.pointer("/properties/primary")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        })
        .ok_or_else(|| {
            CloudError::Other(format!(
                "failed to determine the primary ipconfig. nicname={:?}",
                nic.get("name").and_then(Value::as_str).unwrap_or_default()
            ))
        })
}

/// Every private IP of a NIC, in ipConfiguration order (`GetPrivateIPsByNodeName`).
pub fn private_ips(nic: &Value) -> Vec<String> {
    nic.pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|c| {
                    c.pointer("/properties/privateIPAddress")
                        .and_then(Value::as_str)
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `addressGetter`'s order: InternalIP, Hostname, then ExternalIP.
pub fn node_addresses(
    node_name: &str,
    private_ip: &str,
    public_ip: Option<&str>,
) -> Vec<NodeAddress> {
    let mut out = vec![addr(INTERNAL_IP, private_ip), addr(HOSTNAME, node_name)];
    if let Some(ip) = public_ip.filter(|ip| !ip.is_empty()) {
        out.push(addr(EXTERNAL_IP, ip));
    }
    out
}

/// The last `/`-separated segment of an ARM ID (`getLastSegment`).
pub fn last_segment(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or_default()
}

/// The resource group of an ARM ID.
pub fn resource_group_of(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('/').collect();
    parts
        .iter()
        .position(|p| p.eq_ignore_ascii_case("resourceGroups"))
        .and_then(|i| parts.get(i + 1))
        .map(|s| (*s).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_ids() {
        assert_eq!(
            parse_provider_id(
                "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-1"
            ),
            Ok(ProviderRef::Vm {
                resource_group: "RG".into(),
                name: "vm-1".into()
            })
        );
        assert_eq!(
            parse_provider_id(
                "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3"
            ),
            Ok(ProviderRef::VmssInstance {
                resource_group: "rg".into(),
                scale_set: "ss".into(),
                instance_id: "3".into()
            })
        );
        assert!(parse_provider_id("aws:///us-east-1a/i-1").is_err());
        assert!(parse_provider_id("azure:///subscriptions/s/resourceGroups/rg").is_err());
        let vmss = Node {
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                provider_id: Some("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(vm_name_for(&vmss), Err(CloudError::Other(m)) if m.contains("vmss")));
    }

    #[test]
    fn resource_group_is_lowercased_in_ids() {
        // Upstream's ConvertResourceGroupNameToLower example.
        assert_eq!(
            lowercase_resource_group(
                "/subscriptions/sub/resourceGroups/RG-CCM/providers/Microsoft.Compute/virtualMachines/VM-A"
            ),
            "/subscriptions/sub/resourceGroups/rg-ccm/providers/Microsoft.Compute/virtualMachines/VM-A"
        );
    }

    #[test]
    fn power_zone_and_nics() {
        let vm = json!({
            "name": "vm-1", "location": "EastUS", "zones": ["2"],
            "properties": {
                "provisioningState": "Succeeded",
                "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
                "instanceView": {"platformFaultDomain": 1, "statuses": [
                    {"code": "ProvisioningState/succeeded"}, {"code": "PowerState/deallocated"}]},
                "networkProfile": {"networkInterfaces": [
                    {"id": "/x/nic-2", "properties": {"primary": false}},
                    {"id": "/x/nic-1", "properties": {"primary": true}}]}
            }
        });
        assert_eq!(power_state(&vm), "deallocated");
        assert!(is_shut_down(&vm));
        assert_eq!(
            zone_of(&vm).ok(),
            Some(("eastus-2".to_owned(), "eastus".to_owned()))
        );
        assert_eq!(primary_nic_id(&vm).ok().as_deref(), Some("/x/nic-1"));
        let mut no_zone = vm.clone();
        no_zone["zones"] = json!(null);
        assert_eq!(zone_of(&no_zone).ok().map(|z| z.0), Some("1".to_owned()));
        let mut running = vm.clone();
        running["properties"]["instanceView"]["statuses"][1]["code"] = json!("PowerState/running");
        assert!(!is_shut_down(&running));
        let mut updating = vm;
        updating["properties"]["provisioningState"] = json!("Updating");
        assert!(!is_shut_down(&updating));
    }

    #[test]
    fn ip_configs_and_address_order() {
        let nic = json!({"name": "nic", "properties": {"ipConfigurations": [
            {"name": "b", "properties": {"privateIPAddress": "10.0.0.6", "primary": false}},
            {"name": "a", "properties": {"privateIPAddress": "10.0.0.5", "primary": true}}]}});
        assert_eq!(primary_ip_config_index(&nic).ok(), Some(1));
        assert_eq!(private_ips(&nic), vec!["10.0.0.6", "10.0.0.5"]);
        let a = node_addresses("n1", "10.0.0.5", Some("1.2.3.4"));
        let kinds: Vec<&str> = a.iter().map(|a| a.type_.as_str()).collect();
        assert_eq!(kinds, vec![INTERNAL_IP, HOSTNAME, EXTERNAL_IP]);
        assert_eq!(node_addresses("n1", "10.0.0.5", None).len(), 2);
    }
}
