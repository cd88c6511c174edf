//! Node address algorithms, pure so they can be tested by table.
//!
//! Exists because the address rules are the part of a CCM users feel most (wrong IPs
//! break everything) and they are easy to get subtly wrong:
//! - `provided-node-ip` handling: `kubernetes/cloud-provider` `node/helpers/address.go`
//!   `GetNodeAddressesFromNodeIP` and `k8s.io/component-helpers` `node/util/ips.go`
//!   `ParseNodeIPAnnotation` (KEP-3705);
//! - the periodic update: `kubernetes/cloud-provider` `controllers/node/node_controller.go`
//!   `updateNodeAddress` and `nodeAddressesChangeDetected`.

use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::NodeAddress;

/// Annotation kubelet sets from `--node-ip`.
pub const PROVIDED_NODE_IP_ANNOTATION: &str = "alpha.kubernetes.io/provided-node-ip";
pub const HOSTNAME: &str = "Hostname";
pub const INTERNAL_IP: &str = "InternalIP";
pub const EXTERNAL_IP: &str = "ExternalIP";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    #[error("failed to parse node IP {value:?}: could not parse {part:?}")]
    Unparsable { value: String, part: String },
    #[error(
        "failed to parse node IP {0:?}: must contain either a single IP or a dual-stack pair of IPs"
    )]
    NotSingleOrDualStack(String),
    #[error("failed to parse node IP {0:?}: dual-stack node IP cannot include '0.0.0.0' or '::'")]
    UnspecifiedInPair(String),
    #[error("failed to get node address from cloud provider that matches ip: {0}")]
    NoCloudMatch(IpAddr),
}

/// Shorthand used by providers and tests.
pub fn addr(kind: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: kind.to_owned(),
        address: address.to_owned(),
    }
}

/// Go's `netutils.ParseIPSloppy`: like `net.ParseIP` but IPv4 octets may have leading
/// zeros (read as decimal).
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (slot, part) in octets.iter_mut().zip(parts) {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// Compares like Go's `net.IP.Equal` (an IPv4-mapped IPv6 equals its IPv4).
fn ip_equal(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// Parses the `provided-node-ip` annotation: one IP, or two of different families,
/// neither unspecified in a pair (`ParseNodeIPAnnotation`, sloppy mode: parts trimmed).
pub fn parse_node_ip_annotation(value: &str) -> Result<Vec<IpAddr>, AddressError> {
    let mut ips = Vec::new();
    for part in value.split(',') {
        let part = part.trim();
        let ip = parse_ip_sloppy(part).ok_or_else(|| AddressError::Unparsable {
            value: value.to_owned(),
            part: part.to_owned(),
        })?;
        ips.push(ip);
    }
    let is_v6 = |ip: &IpAddr| matches!(ip.to_canonical(), IpAddr::V6(_));
    if ips.len() > 2 || (ips.len() == 2 && is_v6(&ips[0]) == is_v6(&ips[1])) {
        return Err(AddressError::NotSingleOrDualStack(value.to_owned()));
    }
    if ips.len() == 2 && ips.iter().any(|ip| ip.is_unspecified()) {
        return Err(AddressError::UnspecifiedInPair(value.to_owned()));
    }
    Ok(ips)
}

/// Applies the provided node IP(s) to the cloud's addresses: for each node IP, every
/// cloud address equal to it comes first (in annotation order); then every cloud address
/// whose *type* matched none of them. A node IP without a match is an error.
pub fn addresses_from_node_ip(
    provided: &str,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, AddressError> {
    let node_ips = parse_node_ip_annotation(provided)?;
    let mut enforced = Vec::new();
    let mut matched_types: Vec<&str> = Vec::new();
    for node_ip in node_ips {
        let mut matched = false;
        for a in cloud {
            if parse_ip_sloppy(&a.address).is_some_and(|ip| ip_equal(ip, node_ip)) {
                enforced.push(a.clone());
                matched_types.push(&a.type_);
                matched = true;
            }
        }
        if !matched {
            return Err(AddressError::NoCloudMatch(node_ip));
        }
    }
    enforced.extend(
        cloud
            .iter()
            .filter(|a| !matched_types.contains(&a.type_.as_str()))
            .cloned(),
    );
    Ok(enforced)
}

/// `nodeAddressesChangeDetected`: changed if lengths differ or the type->address map
/// (last address of each type wins) of `old` disagrees with any entry of `new`.
pub fn addresses_changed(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let mut by_type: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for a in old {
        by_type.insert(&a.type_, &a.address);
    }
    new.iter()
        .any(|a| by_type.get(a.type_.as_str()).copied().unwrap_or("") != a.address)
}

/// What `updateNodeAddress` decides for one node.
#[derive(Debug, PartialEq)]
pub enum AddressUpdate {
    /// Cloud returned no addresses: never wipe the node's.
    SkipNoCloudAddresses,
    /// Nothing changed: no write.
    Unchanged,
    /// Write this full list.
    Patch(Vec<NodeAddress>),
}

/// The periodic (and post-init) address computation for one node.
/// `provided_node_ip` is the annotation value if present.
pub fn desired_node_addresses(
    current: &[NodeAddress],
    cloud: &[NodeAddress],
    provided_node_ip: Option<&str>,
) -> Result<AddressUpdate, AddressError> {
    if cloud.is_empty() {
        return Ok(AddressUpdate::SkipNoCloudAddresses);
    }
    let mut wanted = cloud.to_vec();
    if !cloud.iter().any(|a| a.type_ == HOSTNAME) {
        wanted.extend(current.iter().filter(|a| a.type_ == HOSTNAME).cloned());
    }
    if let Some(provided) = provided_node_ip {
        wanted = addresses_from_node_ip(provided, &wanted)?;
    }
    if addresses_changed(current, &wanted) {
        Ok(AddressUpdate::Patch(wanted))
    } else {
        Ok(AddressUpdate::Unchanged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> Vec<NodeAddress> {
        items.iter().map(|(t, a)| addr(t, a)).collect()
    }

    #[test]
    fn annotation_parsing() {
        assert_eq!(parse_node_ip_annotation("10.0.0.1").map(|v| v.len()), Ok(1));
        assert_eq!(
            parse_node_ip_annotation("10.0.0.1, fd00::1").map(|v| v.len()),
            Ok(2)
        );
        assert_eq!(
            parse_node_ip_annotation("010.000.000.001").map(|v| v[0].to_string()),
            Ok("10.0.0.1".into())
        );
        assert!(matches!(
            parse_node_ip_annotation("not-an-ip"),
            Err(AddressError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_node_ip_annotation(""),
            Err(AddressError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_node_ip_annotation("10.0.0.1,"),
            Err(AddressError::Unparsable { .. })
        ));
        // NI-11: two of the same family, pair with unspecified, more than two
        assert!(matches!(
            parse_node_ip_annotation("10.0.0.1,10.0.0.2"),
            Err(AddressError::NotSingleOrDualStack(_))
        ));
        assert!(matches!(
            parse_node_ip_annotation("0.0.0.0,fd00::1"),
            Err(AddressError::UnspecifiedInPair(_))
        ));
        assert!(matches!(
            parse_node_ip_annotation("10.0.0.1,::"),
            Err(AddressError::UnspecifiedInPair(_))
        ));
        assert!(matches!(
            parse_node_ip_annotation("10.0.0.1,fd00::1,10.0.0.2"),
            Err(AddressError::NotSingleOrDualStack(_))
        ));
    }

    #[test]
    fn kep_3705_table() {
        let cloud = list(&[
            (INTERNAL_IP, "10.0.0.1"),
            (INTERNAL_IP, "10.0.0.2"),
            (INTERNAL_IP, "fd00::1"),
            (EXTERNAL_IP, "192.0.2.1"),
            (HOSTNAME, "n1"),
        ]);
        // NI-09: node IP is one InternalIP -> other InternalIPs dropped, the rest kept.
        assert_eq!(
            addresses_from_node_ip("10.0.0.1", &cloud),
            Ok(list(&[
                (INTERNAL_IP, "10.0.0.1"),
                (EXTERNAL_IP, "192.0.2.1"),
                (HOSTNAME, "n1")
            ]))
        );
        // Second InternalIP chosen: it goes first.
        assert_eq!(
            addresses_from_node_ip("10.0.0.2", &cloud),
            Ok(list(&[
                (INTERNAL_IP, "10.0.0.2"),
                (EXTERNAL_IP, "192.0.2.1"),
                (HOSTNAME, "n1")
            ]))
        );
        // Node IP is the ExternalIP: InternalIPs all kept, after it.
        assert_eq!(
            addresses_from_node_ip("192.0.2.1", &cloud),
            Ok(list(&[
                (EXTERNAL_IP, "192.0.2.1"),
                (INTERNAL_IP, "10.0.0.1"),
                (INTERNAL_IP, "10.0.0.2"),
                (INTERNAL_IP, "fd00::1"),
                (HOSTNAME, "n1"),
            ]))
        );
        // NI-12: dual-stack, both known, annotation order kept.
        assert_eq!(
            addresses_from_node_ip("fd00::1,10.0.0.2", &cloud),
            Ok(list(&[
                (INTERNAL_IP, "fd00::1"),
                (INTERNAL_IP, "10.0.0.2"),
                (EXTERNAL_IP, "192.0.2.1"),
                (HOSTNAME, "n1")
            ]))
        );
        // NI-10: unknown to the cloud -> error; also when only the second IP is unknown.
        assert!(matches!(
            addresses_from_node_ip("10.9.9.9", &cloud),
            Err(AddressError::NoCloudMatch(_))
        ));
        assert!(matches!(
            addresses_from_node_ip("10.0.0.1,fd00::9", &cloud),
            Err(AddressError::NoCloudMatch(_))
        ));
    }

    #[test]
    fn change_detection() {
        let a = list(&[(INTERNAL_IP, "10.0.0.1"), (HOSTNAME, "n1")]);
        assert!(!addresses_changed(&a, &a));
        // Order does not matter for the type map.
        let reordered = list(&[(HOSTNAME, "n1"), (INTERNAL_IP, "10.0.0.1")]);
        assert!(!addresses_changed(&a, &reordered));
        assert!(addresses_changed(&a, &list(&[(INTERNAL_IP, "10.0.0.1")])));
        assert!(addresses_changed(
            &a,
            &list(&[(INTERNAL_IP, "10.0.0.2"), (HOSTNAME, "n1")])
        ));
        assert!(addresses_changed(
            &a,
            &list(&[(EXTERNAL_IP, "10.0.0.1"), (HOSTNAME, "n1")])
        ));
    }

    #[test]
    fn update_never_wipes_and_keeps_hostname() {
        let current = list(&[(INTERNAL_IP, "10.0.0.1"), (HOSTNAME, "n1")]);
        // NA-02
        assert_eq!(
            desired_node_addresses(&current, &[], None),
            Ok(AddressUpdate::SkipNoCloudAddresses)
        );
        // NA-03: cloud gives no Hostname -> kubelet's kept.
        assert_eq!(
            desired_node_addresses(&current, &list(&[(INTERNAL_IP, "10.0.0.1")]), None),
            Ok(AddressUpdate::Unchanged)
        );
        assert_eq!(
            desired_node_addresses(
                &current,
                &list(&[(INTERNAL_IP, "10.0.0.1"), (EXTERNAL_IP, "192.0.2.1")]),
                None
            ),
            Ok(AddressUpdate::Patch(list(&[
                (INTERNAL_IP, "10.0.0.1"),
                (EXTERNAL_IP, "192.0.2.1"),
                (HOSTNAME, "n1")
            ])))
        );
        // Cloud hostname replaces kubelet's.
        assert_eq!(
            desired_node_addresses(
                &current,
                &list(&[(INTERNAL_IP, "10.0.0.1"), (HOSTNAME, "vm-1")]),
                None
            ),
            Ok(AddressUpdate::Patch(list(&[
                (INTERNAL_IP, "10.0.0.1"),
                (HOSTNAME, "vm-1")
            ])))
        );
        // Provided node IP applied; NA-05 stable on the second pass.
        let cloud = list(&[(INTERNAL_IP, "10.0.0.2"), (INTERNAL_IP, "10.0.0.1")]);
        let first = desired_node_addresses(&current, &cloud, Some("10.0.0.1"));
        assert_eq!(first, Ok(AddressUpdate::Unchanged));
        assert!(desired_node_addresses(&current, &cloud, Some("10.0.0.9")).is_err());
    }
}
