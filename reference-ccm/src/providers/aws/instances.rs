//! AWS `InstancesV2`: instance lookup, state, and the node address algorithm.
//!
//! Mirrors `kubernetes/cloud-provider-aws` `pkg/providers/v1/aws.go` and
//! `instances_v2.go`: providerIDs `aws:///<az>/<instance-id>` (also `aws:////<id>` and a
//! bare `i-...`, `KubernetesInstanceID.MapToAWSInstanceID` in `instances.go`); lookup by
//! node name with the `private-dns-name` filter over non-terminated states, then kept only
//! when the instance carries the cluster tag (`kubernetes.io/cluster/<id>` or legacy
//! `KubernetesCluster=<id>`, `tags.go` `hasClusterTag`); `terminated` or
//! `InvalidInstanceID.NotFound` = does not exist; `stopped`/`stopping` = shut down.
//! Addresses (`extractNodeAddresses`): every private IP of every in-use ENI by device
//! index as InternalIP, the public IP as ExternalIP, the private DNS name as InternalDNS
//! and Hostname, the public DNS name as ExternalDNS. With `NodeIPFamilies` (config) the
//! families are emitted in that order, IPv6 being the first IPv6 address of each in-use ENI
//! as InternalIP (`extractIPv6NodeAddresses`; IPv6 addresses have no DNS names).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::address::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP, addr};
use crate::providers::xml::Element;

/// `ProviderName()` of the AWS cloud provider.
pub const PROVIDER_NAME: &str = "aws";
pub const INTERNAL_DNS: &str = "InternalDNS";
pub const EXTERNAL_DNS: &str = "ExternalDNS";
/// The legacy cluster tag key (`tags.go` `TagNameKubernetesClusterLegacy`).
pub const LEGACY_CLUSTER_TAG: &str = "KubernetesCluster";
/// Prefix of the current cluster tag (`TagNameKubernetesClusterPrefix`).
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// The fields of an EC2 instance the provider uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ec2Instance {
    pub id: String,
    pub state: String,
    pub instance_type: String,
    pub zone: String,
    pub private_dns_name: String,
    pub public_dns_name: String,
    pub private_ip: String,
    pub public_ip: String,
    /// Private IPs of the in-use ENIs, primary interface first.
    pub eni_private_ips: Vec<String>,
    /// The first IPv6 address of each in-use ENI that has one, primary interface first.
    pub eni_ipv6: Vec<String>,
    pub vpc_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// Tags of a `tagSet`.
pub fn tags_of(e: &Element) -> BTreeMap<String, String> {
    e.items(&["tagSet"])
        .map(|t| {
            (
                t.text_at(&["key"]).to_owned(),
                t.text_at(&["value"]).to_owned(),
            )
        })
        .collect()
}

impl Ec2Instance {
    pub fn from_xml(e: &Element) -> Self {
        let mut enis: Vec<(u32, Vec<String>, Option<String>)> = e
            .items(&["networkInterfaceSet"])
            .filter(|n| n.text_at(&["status"]) == "in-use")
            .map(|n| {
                let index = n
                    .text_at(&["attachment", "deviceIndex"])
                    .parse()
                    .unwrap_or(u32::MAX);
                let ips = n
                    .items(&["privateIpAddressesSet"])
                    .map(|p| p.text_at(&["privateIpAddress"]).to_owned())
                    .filter(|ip| !ip.is_empty())
                    .collect();
                let v6 = n
                    .items(&["ipv6AddressesSet"])
                    .map(|p| p.text_at(&["ipv6Address"]).to_owned())
                    .find(|ip| !ip.is_empty());
                (index, ips, v6)
            })
            .collect();
        enis.sort_by_key(|(i, _, _)| *i);
        let eni_ipv6 = enis.iter().filter_map(|(_, _, v6)| v6.clone()).collect();
        Ec2Instance {
            id: e.text_at(&["instanceId"]).to_owned(),
            state: e.text_at(&["instanceState", "name"]).to_owned(),
            instance_type: e.text_at(&["instanceType"]).to_owned(),
            zone: e.text_at(&["placement", "availabilityZone"]).to_owned(),
            private_dns_name: e.text_at(&["privateDnsName"]).to_owned(),
            public_dns_name: e.text_at(&["dnsName"]).to_owned(),
            private_ip: e.text_at(&["privateIpAddress"]).to_owned(),
            public_ip: e.text_at(&["ipAddress"]).to_owned(),
            eni_private_ips: enis.into_iter().flat_map(|(_, ips, _)| ips).collect(),
            eni_ipv6,
            vpc_id: e.text_at(&["vpcId"]).to_owned(),
            subnet_id: e.text_at(&["subnetId"]).to_owned(),
            security_groups: e
                .items(&["groupSet"])
                .map(|g| g.text_at(&["groupId"]).to_owned())
                .collect(),
            tags: tags_of(e),
        }
    }

    /// Whether the instance belongs to cluster `id` (an empty id accepts every instance).
    pub fn has_cluster_tag(&self, id: &str) -> bool {
        id.is_empty()
            || self.tags.contains_key(&format!("{CLUSTER_TAG_PREFIX}{id}"))
            || self.tags.get(LEGACY_CLUSTER_TAG).is_some_and(|v| v == id)
    }

    /// `aws:///<az>/<id>` (`instances.go` `KubernetesInstanceID`).
    pub fn provider_id(&self) -> String {
        format!("{PROVIDER_NAME}:///{}/{}", self.zone, self.id)
    }

    /// The node addresses, in upstream's order, without duplicates.
    pub fn node_addresses(&self) -> Vec<NodeAddress> {
        let mut out: Vec<NodeAddress> = Vec::new();
        let mut push = |kind: &str, a: &str| {
            if !a.is_empty() && !out.iter().any(|x| x.type_ == kind && x.address == a) {
                out.push(addr(kind, a));
            }
        };
        let internal: Vec<&String> = if self.eni_private_ips.is_empty() {
            vec![&self.private_ip]
        } else {
            self.eni_private_ips.iter().collect()
        };
        for ip in internal {
            if ip.parse::<IpAddr>().is_ok() {
                push(INTERNAL_IP, ip);
            }
        }
        if self.public_ip.parse::<IpAddr>().is_ok() {
            push(EXTERNAL_IP, &self.public_ip);
        }
        for name in self.private_dns_name.split_whitespace() {
            push(INTERNAL_DNS, name);
            push(HOSTNAME, name);
        }
        for name in self.public_dns_name.split_whitespace() {
            push(EXTERNAL_DNS, name);
        }
        out
    }

    /// The node addresses for `families` (`NodeIPFamilies`), family by family in that
    /// order (`aws.go` `NodeAddresses*`); unknown families add nothing.
    pub fn node_addresses_for(&self, families: &[String]) -> Vec<NodeAddress> {
        let mut out: Vec<NodeAddress> = Vec::new();
        for family in families {
            let more = match family.as_str() {
                super::config::FAMILY_IPV4 => self.node_addresses(),
                super::config::FAMILY_IPV6 => self
                    .eni_ipv6
                    .iter()
                    .filter_map(|ip| ip.parse::<std::net::Ipv6Addr>().ok())
                    .map(|ip| addr(INTERNAL_IP, &ip.to_string()))
                    .collect(),
                _ => Vec::new(),
            };
            for a in more {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }

    pub fn exists(&self) -> bool {
        self.state != "terminated"
    }

    pub fn is_shutdown(&self) -> bool {
        matches!(self.state.as_str(), "stopped" | "stopping")
    }
}

/// How to find a node's instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    ById(String),
    ByPrivateDnsName(String),
}

/// The instance id in a providerID (`MapToAWSInstanceID`), or why it is not one.
pub fn instance_id_of(provider_id: &str) -> Result<String, String> {
    let rest = match provider_id.split_once("://") {
        Some((scheme, rest)) if scheme == PROVIDER_NAME => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "invalid scheme for AWS instance ({scheme:?}) in providerID {provider_id:?}"
            ));
        }
        None => provider_id,
    };
    // `aws://<az>/<id>` has the zone as URL host; `aws:///<az>/<id>` in the path.
    let path = if provider_id.contains("://") {
        rest.split_once('/').map_or("", |(_, p)| p)
    } else {
        rest
    };
    let tokens: Vec<&str> = path.trim_matches('/').split('/').collect();
    let id = match tokens.as_slice() {
        [id] => *id,
        [_, id] => *id,
        _ => "",
    };
    let valid = id
        .strip_prefix("i-")
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric()));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(format!("invalid format for AWS instance ({provider_id:?})"))
    }
}

pub fn lookup_for(node: &Node) -> Result<Lookup, String> {
    match node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
        Some(p) if !p.is_empty() => instance_id_of(p).map(Lookup::ById),
        _ => {
            let name = node.metadata.name.clone().unwrap_or_default();
            if name.is_empty() {
                Err("node has no name".into())
            } else {
                Ok(Lookup::ByPrivateDnsName(name))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::xml;

    #[test]
    fn provider_ids_upstream_accepts() {
        assert_eq!(
            instance_id_of("aws:///us-west-2a/i-0abc"),
            Ok("i-0abc".into())
        );
        assert_eq!(instance_id_of("aws:////i-0abc"), Ok("i-0abc".into()));
        assert_eq!(
            instance_id_of("aws://us-west-2/i-0abc"),
            Ok("i-0abc".into())
        );
        assert_eq!(instance_id_of("i-0abc"), Ok("i-0abc".into()));
        assert!(instance_id_of("openstack:///i-0abc").is_err());
        assert!(instance_id_of("aws:///us-west-2a/vol-1").is_err());
        assert!(instance_id_of("aws:///a/b/i-1").is_err());
        assert!(instance_id_of("").is_err());
    }

    /// `NodeIPFamilies`: families in the configured order; IPv6 is the first IPv6 address
    /// of each in-use ENI (device order), InternalIP only.
    #[test]
    fn ip_families_in_configured_order() {
        let doc = r#"<item><instanceId>i-1</instanceId><privateDnsName>ip-10-0-0-1</privateDnsName>
<privateIpAddress>10.0.0.1</privateIpAddress>
<networkInterfaceSet>
 <item><status>in-use</status><attachment><deviceIndex>1</deviceIndex></attachment>
  <privateIpAddressesSet><item><privateIpAddress>10.0.1.1</privateIpAddress></item></privateIpAddressesSet>
  <ipv6AddressesSet><item><ipv6Address>fd00::1:1</ipv6Address></item></ipv6AddressesSet></item>
 <item><status>in-use</status><attachment><deviceIndex>0</deviceIndex></attachment>
  <privateIpAddressesSet><item><privateIpAddress>10.0.0.1</privateIpAddress></item></privateIpAddressesSet>
  <ipv6AddressesSet><item><ipv6Address>fd00::0:1</ipv6Address></item><item><ipv6Address>fd00::0:2</ipv6Address></item></ipv6AddressesSet></item>
 <item><status>available</status><attachment><deviceIndex>2</deviceIndex></attachment>
  <ipv6AddressesSet><item><ipv6Address>fd00::2:1</ipv6Address></item></ipv6AddressesSet></item>
</networkInterfaceSet></item>"#;
        let i = Ec2Instance::from_xml(&xml::parse(doc).expect("xml"));
        let of = |families: &[&str]| -> Vec<String> {
            let families: Vec<String> = families.iter().map(|f| f.to_string()).collect();
            i.node_addresses_for(&families)
                .into_iter()
                .map(|a| format!("{} {}", a.type_, a.address))
                .collect()
        };
        assert_eq!(
            of(&["ipv6"]),
            vec!["InternalIP fd00::1", "InternalIP fd00::1:1"]
        );
        assert_eq!(
            of(&["ipv4", "ipv6"]),
            vec![
                "InternalIP 10.0.0.1",
                "InternalIP 10.0.1.1",
                "InternalDNS ip-10-0-0-1",
                "Hostname ip-10-0-0-1",
                "InternalIP fd00::1",
                "InternalIP fd00::1:1",
            ]
        );
        assert_eq!(of(&["ipv6", "ipv4"])[0], "InternalIP fd00::1");
        assert!(of(&["ipv5"]).is_empty());
    }

    #[test]
    fn addresses_in_upstream_order() {
        let doc = r#"<item><instanceId>i-1</instanceId><instanceState><name>running</name></instanceState>
<privateDnsName>ip-10-0-0-1.ec2.internal</privateDnsName><dnsName>ec2-1.compute-1.amazonaws.com</dnsName>
<placement><availabilityZone>us-east-1a</availabilityZone></placement>
<privateIpAddress>10.0.0.1</privateIpAddress><ipAddress>1.2.3.4</ipAddress>
<tagSet><item><key>KubernetesCluster</key><value>c1</value></item></tagSet>
<networkInterfaceSet>
 <item><status>in-use</status><attachment><deviceIndex>1</deviceIndex></attachment>
  <privateIpAddressesSet><item><privateIpAddress>10.0.1.1</privateIpAddress></item></privateIpAddressesSet></item>
 <item><status>in-use</status><attachment><deviceIndex>0</deviceIndex></attachment>
  <privateIpAddressesSet><item><privateIpAddress>10.0.0.1</privateIpAddress></item><item><privateIpAddress>10.0.0.2</privateIpAddress></item></privateIpAddressesSet></item>
 <item><status>available</status><attachment><deviceIndex>2</deviceIndex></attachment>
  <privateIpAddressesSet><item><privateIpAddress>10.0.2.1</privateIpAddress></item></privateIpAddressesSet></item>
</networkInterfaceSet></item>"#;
        let i = Ec2Instance::from_xml(&xml::parse(doc).expect("xml"));
        let got: Vec<(String, String)> = i
            .node_addresses()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        let want: Vec<(String, String)> = [
            ("InternalIP", "10.0.0.1"),
            ("InternalIP", "10.0.0.2"),
            ("InternalIP", "10.0.1.1"),
            ("ExternalIP", "1.2.3.4"),
            ("InternalDNS", "ip-10-0-0-1.ec2.internal"),
            ("Hostname", "ip-10-0-0-1.ec2.internal"),
            ("ExternalDNS", "ec2-1.compute-1.amazonaws.com"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(
            i.node_addresses_for(&["ipv4".to_owned()]),
            i.node_addresses()
        );
        assert_eq!(i.provider_id(), "aws:///us-east-1a/i-1");
        assert!(i.has_cluster_tag("c1"));
        assert!(!i.has_cluster_tag("c2"));
        assert!(i.exists() && !i.is_shutdown());
    }
}
