//! OpenStack `InstancesV2`: server lookup, metadata and the node address algorithm.
//!
//! Mirrors `kubernetes/cloud-provider-openstack` `pkg/openstack/instancesv2.go`
//! (lookup by providerID, else `getServerByName` with `name=^<QuoteMeta(name)>$`, more
//! than one hit is an error; `SHUTOFF` = shutdown; flavor `original_name` else
//! `GET /flavors/{id}`) and `pkg/openstack/instances.go` `nodeAddresses` (order: ACTIVE
//! port fixed IPs as InternalIP, accessIPv4/6 as ExternalIP, metadata hostname, then
//! Nova `addresses` by sorted network name; floating or `public-network-name` ->
//! ExternalIP, others InternalIP filtered by `internal-network-name`; de-duplicated;
//! optional `address-sort-order`). Trunk sub-ports are not followed yet.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use serde::Deserialize;

use super::config::NetworkingOpts;
use crate::address::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP, addr, parse_ip_sloppy};

/// `ProviderName()` of the OpenStack cloud provider.
pub const PROVIDER_NAME: &str = "openstack";

#[derive(Debug, Clone, Deserialize)]
pub struct ServerEnvelope {
    pub server: Server,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ServerList {
    #[serde(default)]
    pub servers: Vec<Server>,
}

/// The fields of a Nova server the CCM reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Server {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: String,
    #[serde(rename = "OS-EXT-AZ:availability_zone", default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub flavor: FlavorRef,
    #[serde(default)]
    pub addresses: BTreeMap<String, Vec<ServerAddress>>,
    #[serde(rename = "accessIPv4", default)]
    pub access_ipv4: Option<String>,
    #[serde(rename = "accessIPv6", default)]
    pub access_ipv6: Option<String>,
    #[serde(default)]
    pub metadata: HashMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlavorRef {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub original_name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ServerAddress {
    pub addr: String,
    #[serde(rename = "OS-EXT-IPS:type", default)]
    pub ip_type: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FlavorEnvelope {
    pub flavor: Flavor,
}
#[derive(Debug, Clone, Deserialize)]
pub struct Flavor {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PortList {
    #[serde(default)]
    pub ports: Vec<Port>,
}
#[derive(Debug, Clone, Deserialize)]
pub struct Port {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
}
#[derive(Debug, Clone, Deserialize)]
pub struct FixedIp {
    pub ip_address: String,
}

/// Where to find the server for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    ById(String),
    ByName(String),
}

/// Instance ID from `openstack:///<id>` or `openstack://<region>/<id>`; a bare value
/// without `://` is taken as `openstack://<value>` (upstream k/k#85731 handling).
pub fn instance_id_from_provider_id(provider_id: &str) -> Result<String, String> {
    let full = if provider_id.contains("://") {
        provider_id.to_owned()
    } else {
        format!("{PROVIDER_NAME}://{provider_id}")
    };
    let rest = full
        .strip_prefix("openstack://")
        .ok_or_else(|| format!("ProviderID {provider_id:?} didn't match expected format \"openstack://region/InstanceID\""))?;
    let id = match rest.rsplit_once('/') {
        Some((_region, id)) => id,
        None => rest,
    };
    if id.is_empty() {
        return Err(format!("ProviderID {provider_id:?} has no instance ID"));
    }
    Ok(id.to_owned())
}

/// How a node is looked up: by providerID if set, else by name.
pub fn lookup_for(node: &Node) -> Result<Lookup, String> {
    match node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
    {
        Some(pid) => instance_id_from_provider_id(pid).map(Lookup::ById),
        None => Ok(Lookup::ByName(
            node.metadata.name.clone().unwrap_or_default(),
        )),
    }
}

/// Go's `regexp.QuoteMeta`.
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Kubernetes label value rules (`validation.IsValidLabelValue`).
pub fn is_valid_label_value(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
}

fn push_unique(list: &mut Vec<NodeAddress>, a: NodeAddress) {
    if !list
        .iter()
        .any(|e| e.type_ == a.type_ && e.address == a.address)
    {
        list.push(a);
    }
}

fn remove_address(list: &mut Vec<NodeAddress>, address: &str) {
    list.retain(|e| e.address != address);
}

fn is_v6(address: &str) -> bool {
    matches!(parse_ip_sloppy(address), Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none())
}

/// CPO `nodeAddresses`.
pub fn node_addresses(server: &Server, ports: &[Port], opts: &NetworkingOpts) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    let v6_off = |a: &str| opts.ipv6_support_disabled && is_v6(a);
    for port in ports.iter().filter(|p| p.status == "ACTIVE") {
        for ip in &port.fixed_ips {
            if !v6_off(&ip.ip_address) {
                push_unique(&mut out, addr(INTERNAL_IP, &ip.ip_address));
            }
        }
    }
    if let Some(v4) = server.access_ipv4.as_deref().filter(|s| !s.is_empty()) {
        push_unique(&mut out, addr(EXTERNAL_IP, v4));
    }
    if let Some(v6) = server.access_ipv6.as_deref().filter(|s| !s.is_empty())
        && !opts.ipv6_support_disabled
    {
        push_unique(&mut out, addr(EXTERNAL_IP, v6));
    }
    if let Some(host) = server
        .metadata
        .get("hostname")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
    {
        push_unique(&mut out, addr(HOSTNAME, host));
    }
    // BTreeMap iterates networks in sorted order, as upstream's sort.Strings.
    for (network, list) in &server.addresses {
        for a in list {
            let kind = if a.ip_type.as_deref() == Some("floating") {
                EXTERNAL_IP
            } else if opts.public_network_name.iter().any(|n| n == network) {
                remove_address(&mut out, &a.addr);
                EXTERNAL_IP
            } else if opts.internal_network_name.is_empty()
                || opts.internal_network_name.iter().any(|n| n == network)
            {
                INTERNAL_IP
            } else {
                remove_address(&mut out, &a.addr);
                continue;
            };
            if !v6_off(&a.addr) {
                push_unique(&mut out, addr(kind, &a.addr));
            }
        }
    }
    if !opts.address_sort_order.is_empty() {
        sort_by_cidrs(&mut out, &opts.address_sort_order);
    }
    out
}

/// `address-sort-order`: addresses in earlier CIDRs first, unmatched last, stable.
fn sort_by_cidrs(list: &mut [NodeAddress], order: &str) {
    let cidrs: Vec<(IpAddr, u8)> = order
        .split(',')
        .filter_map(|c| {
            let (ip, len) = c.trim().split_once('/')?;
            Some((ip.parse().ok()?, len.parse().ok()?))
        })
        .collect();
    let rank = |a: &NodeAddress| {
        let ip = parse_ip_sloppy(&a.address);
        cidrs
            .iter()
            .position(|(net, len)| ip.is_some_and(|ip| cidr_contains(*net, *len, ip)))
            .unwrap_or(cidrs.len())
    };
    list.sort_by_key(rank);
}

fn cidr_contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if len <= 32 => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if len <= 128 => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(json: serde_json::Value) -> Server {
        match serde_json::from_value(json) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn pairs(list: &[NodeAddress]) -> Vec<(String, String)> {
        list.iter()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect()
    }

    #[test]
    fn provider_ids() {
        assert_eq!(
            instance_id_from_provider_id("openstack:///abc"),
            Ok("abc".into())
        );
        assert_eq!(
            instance_id_from_provider_id("openstack://RegionOne/abc"),
            Ok("abc".into())
        );
        assert_eq!(instance_id_from_provider_id("/abc"), Ok("abc".into()));
        assert!(instance_id_from_provider_id("aws:///i-1").is_err());
        assert!(instance_id_from_provider_id("openstack:///").is_err());
    }

    #[test]
    fn quoting_and_labels() {
        assert_eq!(quote_meta("node-1.example"), "node-1\\.example");
        assert_eq!(quote_meta("a+b(c)"), "a\\+b\\(c\\)");
        assert!(is_valid_label_value("m1.small"));
        assert!(!is_valid_label_value("bad name"));
        assert!(!is_valid_label_value(&"x".repeat(64)));
    }

    #[test]
    fn address_algorithm_order_and_dedup() {
        let s = server(serde_json::json!({
            "id": "i1",
            "accessIPv4": "203.0.113.5",
            "accessIPv6": "",
            "metadata": {"hostname": "vm-1"},
            "addresses": {
                "zeta": [{"addr": "10.1.0.5", "OS-EXT-IPS:type": "fixed"}],
                "alpha": [
                    {"addr": "10.0.0.5", "OS-EXT-IPS:type": "fixed"},
                    {"addr": "172.24.4.9", "OS-EXT-IPS:type": "floating"}
                ]
            }
        }));
        let ports = vec![
            Port {
                status: "ACTIVE".into(),
                fixed_ips: vec![FixedIp {
                    ip_address: "10.0.0.5".into(),
                }],
            },
            Port {
                status: "DOWN".into(),
                fixed_ips: vec![FixedIp {
                    ip_address: "10.9.9.9".into(),
                }],
            },
        ];
        let got = node_addresses(&s, &ports, &NetworkingOpts::default());
        let want = vec![
            (INTERNAL_IP.to_owned(), "10.0.0.5".to_owned()),
            (EXTERNAL_IP.to_owned(), "203.0.113.5".to_owned()),
            (HOSTNAME.to_owned(), "vm-1".to_owned()),
            (EXTERNAL_IP.to_owned(), "172.24.4.9".to_owned()),
            (INTERNAL_IP.to_owned(), "10.1.0.5".to_owned()),
        ];
        assert_eq!(pairs(&got), want);
    }

    #[test]
    fn address_algorithm_network_filters() {
        let s = server(serde_json::json!({
            "id": "i1",
            "addresses": {
                "private": [{"addr": "10.0.0.5"}],
                "public": [{"addr": "198.51.100.7"}],
                "storage": [{"addr": "192.168.9.9"}, {"addr": "fd00::9"}]
            }
        }));
        let ports = vec![Port {
            status: "ACTIVE".into(),
            fixed_ips: vec![
                FixedIp {
                    ip_address: "198.51.100.7".into(),
                },
                FixedIp {
                    ip_address: "192.168.9.9".into(),
                },
            ],
        }];
        let opts = NetworkingOpts {
            public_network_name: vec!["public".into()],
            internal_network_name: vec!["private".into()],
            ..Default::default()
        };
        let got = node_addresses(&s, &ports, &opts);
        assert_eq!(
            pairs(&got),
            vec![
                (INTERNAL_IP.to_owned(), "10.0.0.5".to_owned()),
                (EXTERNAL_IP.to_owned(), "198.51.100.7".to_owned())
            ]
        );
        let v6 = NetworkingOpts {
            ipv6_support_disabled: true,
            ..Default::default()
        };
        let got = node_addresses(&s, &[], &v6);
        assert!(got.iter().all(|a| a.address != "fd00::9"));
        let sorted = NetworkingOpts {
            address_sort_order: "192.168.0.0/16, 10.0.0.0/8".into(),
            ..Default::default()
        };
        let got = node_addresses(&s, &[], &sorted);
        assert_eq!(got.first().map(|a| a.address.as_str()), Some("192.168.9.9"));
        assert_eq!(got.get(1).map(|a| a.address.as_str()), Some("10.0.0.5"));
    }
}
