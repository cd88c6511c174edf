//! GCE `InstancesV2` helpers: providerIDs, instance lookup by name, node addresses, as
//! kubernetes/cloud-provider-gcp `providers/gce` answers them.
//!
//! Upstream, with where:
//! - providerID `gce://<project>/<zone>/<name>` (`gce_util.go` `providerIDRE`,
//!   `splitProviderID`; `InstanceID` = `<project>/<zone>/<name>` and
//!   `cloudprovider.GetInstanceProviderID` adds `gce://`);
//! - `InstanceExists`/`InstanceMetadata` (`gce_instances.go`): by providerID a GET of
//!   `projects/<p>/zones/<z>/instances/<name>` (404 = gone), else the instance is found by
//!   name in the managed zones — the local zone, or every zone of the region with
//!   `multizone`/`regional` (`getInstanceByName`, `refreshManagedZones`); names are
//!   canonicalized (`canonicalizeInstanceName`: up to the first `.`);
//! - `InstanceShutdown` is `cloudprovider.NotImplemented` (`gce_instances.go`); the
//!   lifecycle controller logs it and takes no action;
//! - addresses (`nodeAddressesFromInstance`): per network interface, InternalIP
//!   `networkIP`, an ExternalIP per access config's `natIP`, then InternalIP of its IPv6
//!   (`ipv6Address`, else for `ipv6AccessType: EXTERNAL` the last
//!   `ipv6AccessConfigs[].externalIpv6`; `getIPV6AddressFromInterface`); then
//!   `orderAddresses`: IPv4 first, or IPv6 first with `stack-type = IPV6`; no Hostname
//!   (the metadata-server path for the CCM's own instance is not modelled: it needs
//!   `instance/hostname`, which the harness's metadata server answers 404 anyway);
//! - instance type = last segment of `machineType`; zone = the instance's zone, region =
//!   zone minus its last `-x` (`GetGCERegion`).

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use serde_json::Value;

use crate::address::{EXTERNAL_IP, INTERNAL_IP, addr};

/// `ProviderName` of cloud-provider-gcp.
pub const PROVIDER_NAME: &str = "gce";

/// `(project, zone, name)` of `gce://<project>/<zone>/<name>`.
pub fn split_provider_id(provider_id: &str) -> Result<(String, String, String), String> {
    let bad = || {
        format!("error splitting providerID {provider_id:?} (want gce://<project>/<zone>/<name>)")
    };
    let rest = provider_id.strip_prefix("gce://").ok_or_else(bad)?;
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(bad());
    }
    Ok((parts[0].into(), parts[1].into(), parts[2].into()))
}

/// `gce://<project>/<zone>/<name>`.
pub fn format_provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("{PROVIDER_NAME}://{project}/{zone}/{name}")
}

/// `canonicalizeInstanceName`: `node-2.c.proj.internal` → `node-2`.
pub fn canonical_name(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// The node's providerID, if set.
pub fn provider_id_of(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

/// `getIPV6AddressFromInterface`.
fn ipv6_of(nic: &Value) -> Option<String> {
    let direct = nic
        .get("ipv6Address")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if let Some(a) = direct {
        return Some(a.to_owned());
    }
    if nic.get("ipv6AccessType").and_then(Value::as_str) == Some("EXTERNAL") {
        return nic
            .get("ipv6AccessConfigs")
            .and_then(Value::as_array)
            .and_then(|a| a.last())
            .and_then(|c| c.get("externalIpv6"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
    }
    None
}

/// `nodeAddressesFromInstance` + `orderAddresses`.
pub fn node_addresses(instance: &Value, prefer_ipv6: bool) -> Result<Vec<NodeAddress>, String> {
    let nics = instance
        .get("networkInterfaces")
        .and_then(Value::as_array)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            format!(
                "could not find network interfaces for instance {}",
                instance.get("name").and_then(Value::as_str).unwrap_or("?")
            )
        })?;
    let mut out = Vec::new();
    for nic in nics {
        if let Some(ip) = nic
            .get("networkIP")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.push(addr(INTERNAL_IP, ip));
        }
        for ac in nic
            .get("accessConfigs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // Upstream appends natIP even when empty; an empty address helps nobody.
            if let Some(nat) = ac
                .get("natIP")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.push(addr(EXTERNAL_IP, nat));
            }
        }
        if let Some(v6) = ipv6_of(nic) {
            out.push(addr(INTERNAL_IP, &v6));
        }
    }
    let is_v6 = |a: &NodeAddress| a.address.parse::<std::net::Ipv6Addr>().is_ok();
    let (mut first, second): (Vec<_>, Vec<_>) =
        out.into_iter().partition(|a| is_v6(a) == prefer_ipv6);
    first.extend(second);
    Ok(first)
}

/// Last segment of `machineType`.
pub fn instance_type(instance: &Value) -> String {
    instance
        .get("machineType")
        .and_then(Value::as_str)
        .map(|m| super::client::last_segment(m).to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_ids() {
        assert_eq!(
            split_provider_id("gce://proj/us-central1-b/node-1"),
            Ok(("proj".into(), "us-central1-b".into(), "node-1".into()))
        );
        assert!(split_provider_id("gce://proj/zone").is_err());
        assert!(split_provider_id("aws:///z/i").is_err());
        assert!(split_provider_id("gce://p//n").is_err());
        assert_eq!(
            format_provider_id("proj", "us-central1-b", "node-1"),
            "gce://proj/us-central1-b/node-1"
        );
        assert_eq!(canonical_name("node-2.c.proj.internal"), "node-2");
    }

    #[test]
    fn addresses_in_upstream_order() {
        let inst = json!({"networkInterfaces": [
            {"networkIP": "10.0.0.2", "accessConfigs": [{"natIP": "34.1.1.1"}], "ipv6Address": "fd00::2"},
            {"networkIP": "10.1.0.2", "ipv6AccessType": "EXTERNAL", "ipv6AccessConfigs": [{"externalIpv6": "2600::1"}]}
        ]});
        let got: Vec<(String, String)> = node_addresses(&inst, false)
            .expect("addresses")
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        let want = [
            ("InternalIP", "10.0.0.2"),
            ("ExternalIP", "34.1.1.1"),
            ("InternalIP", "10.1.0.2"),
            ("InternalIP", "fd00::2"),
            ("InternalIP", "2600::1"),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(t, a)| (t.to_string(), a.to_string()))
                .collect::<Vec<_>>()
        );
        let v6_first = node_addresses(&inst, true).expect("addresses");
        assert_eq!(v6_first[0].address, "fd00::2");
        assert!(node_addresses(&json!({"networkInterfaces": []}), false).is_err());
    }
}
