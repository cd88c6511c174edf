//! The cloud's state: one account, one region, one VPC with a subnet per zone, a main
//! route table with an internet gateway route, security groups, instances with their
//! network interfaces, tags, and classic load balancers. Seeded with what the AWS CCM
//! needs to find its way off-AWS (cloud-apis.md §4.1, §7): cluster tags on instances,
//! subnets, route tables and groups, an `igw-` route in the main table, in-use ENIs.
//! Addresses are hermetic: private IPs in 127.40.0.0/13 (zone `i` in 127.(40+i).B.0/24),
//! public IPs from 127.50.B.10, where B is the mock's address block, so mocks started side
//! by side (one per parallel case) never hand out the same address.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::elb::model::ClassicLb;
use crate::elbv2::model::Elbv2;

/// Instance states with their EC2 codes (cloud-apis.md §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

impl InstanceState {
    pub fn code(self) -> u16 {
        match self {
            InstanceState::Pending => 0,
            InstanceState::Running => 16,
            InstanceState::ShuttingDown => 32,
            InstanceState::Terminated => 48,
            InstanceState::Stopping => 64,
            InstanceState::Stopped => 80,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            InstanceState::Pending => "pending",
            InstanceState::Running => "running",
            InstanceState::ShuttingDown => "shutting-down",
            InstanceState::Terminated => "terminated",
            InstanceState::Stopping => "stopping",
            InstanceState::Stopped => "stopped",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub id: String,
    pub reservation_id: String,
    pub image_id: String,
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub vpc_id: String,
    pub private_ip: Ipv4Addr,
    /// Secondary private IPs of the primary ENI (EC2 `AssignPrivateIpAddresses`).
    pub secondary_private_ips: Vec<Ipv4Addr>,
    /// IPv6 addresses of the primary ENI (EC2 `AssignIpv6Addresses`).
    pub ipv6_addresses: Vec<Ipv6Addr>,
    pub public_ip: Option<Ipv4Addr>,
    pub state: InstanceState,
    pub eni_id: String,
    pub group_ids: Vec<String>,
    pub source_dest_check: bool,
    pub launch_time: jiff::Timestamp,
    /// A chosen private DNS name (the harness names instances like its nodes); `None`
    /// derives `ip-a-b-c-d...` from the private IP as EC2 does.
    pub private_dns: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Vpc {
    pub id: String,
    pub cidr: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Subnet {
    pub id: String,
    pub vpc_id: String,
    pub zone: String,
    /// First address and prefix length.
    pub base: Ipv4Addr,
    pub prefix: u8,
}

impl Subnet {
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.base, self.prefix)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - u32::from(self.prefix));
        u32::from(ip) & mask == u32::from(self.base) & mask
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub destination: String,
    /// `local`, `igw-...`, or an instance id.
    pub gateway_id: Option<String>,
    pub instance_id: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct RouteTable {
    pub id: String,
    pub vpc_id: String,
    pub main: bool,
    pub routes: Vec<Route>,
}

/// One ingress permission: protocol, ports, and CIDR / group sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Permission {
    pub protocol: String,
    pub from_port: Option<i64>,
    pub to_port: Option<i64>,
    pub cidrs: Vec<String>,
    pub groups: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct SecurityGroup {
    pub id: String,
    pub name: String,
    pub description: String,
    pub vpc_id: String,
    pub ingress: Vec<Permission>,
}

/// Everything an account in one region holds.
#[derive(Debug, Clone)]
pub(crate) struct Cloud {
    pub region: String,
    pub account_id: String,
    pub zones: Vec<String>,
    pub default_instance_type: String,
    pub instances: Vec<Instance>,
    pub vpcs: Vec<Vpc>,
    pub subnets: Vec<Subnet>,
    pub route_tables: Vec<RouteTable>,
    pub security_groups: Vec<SecurityGroup>,
    /// Tags by resource id.
    pub tags: BTreeMap<String, BTreeMap<String, String>>,
    pub elbs: BTreeMap<String, ClassicLb>,
    pub elbv2: Elbv2,
    /// Which /24 of the 127/8 pools this mock hands out (see the module docs).
    pub address_block: u8,
}

/// A new id `prefix-` + 17 hex digits, the long form EC2 uses.
pub(crate) fn new_id(prefix: &str) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &hex[..17])
}

/// A request id in the UUID form AWS uses.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// AWS zone ids: `us-west-2a` -> `usw2-az1` (first letters of the region's parts, the
/// number, then the zone letter's position). Real accounts shuffle the mapping; a stable
/// one is enough for the `topology.k8s.aws/zone-id` label.
pub(crate) fn zone_id(zone: &str) -> String {
    let (region, letter) = zone.split_at(zone.len().saturating_sub(1));
    let mut short = String::new();
    for (i, part) in region.split('-').enumerate() {
        if i == 0 || part.chars().all(|c| c.is_ascii_digit()) {
            short.push_str(part);
        } else if let Some(c) = part.chars().next() {
            short.push(c);
        }
    }
    let n = letter
        .chars()
        .next()
        .map(|c| (c as u32).saturating_sub('a' as u32) + 1)
        .unwrap_or(1);
    format!("{short}-az{n}")
}

/// `ip-a-b-c-d.ec2.internal` in us-east-1, `ip-a-b-c-d.<region>.compute.internal`
/// elsewhere (cloud-apis.md §4.2).
pub(crate) fn private_dns_name(region: &str, ip: Ipv4Addr) -> String {
    let dashed = ip.to_string().replace('.', "-");
    if region == "us-east-1" {
        format!("ip-{dashed}.ec2.internal")
    } else {
        format!("ip-{dashed}.{region}.compute.internal")
    }
}

pub(crate) fn public_dns_name(region: &str, ip: Ipv4Addr) -> String {
    let dashed = ip.to_string().replace('.', "-");
    if region == "us-east-1" {
        format!("ec2-{dashed}.compute-1.amazonaws.com")
    } else {
        format!("ec2-{dashed}.{region}.compute.amazonaws.com")
    }
}

/// Private IPs: 127.40.0.0/13, one /24 per zone and address block. Public IPs:
/// 127.50.0.0/16 from the block's /24 on.
const PRIVATE_BASE: [u8; 2] = [127, 40];
const PUBLIC_BASE: Ipv4Addr = Ipv4Addr::new(127, 50, 0, 10);
/// Load-balancer addresses (the data plane binds them): 127.51.B.10 on.
const VIP_BASE: Ipv4Addr = Ipv4Addr::new(127, 51, 0, 10);
const FIRST_HOST: u32 = 10;
/// At most this many zones get their own second octet (127.40 ..= 127.47).
const MAX_ZONES: usize = 8;

/// Why an admin change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("no instance {0}")]
    NotFound(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("address {0} is already in use")]
    AddressInUse(Ipv4Addr),
    #[error("no free address left in {0}")]
    Exhausted(String),
}

/// What the admin API (or RunInstances) creates. Unset fields take the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// The `Name` tag.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Picked from the zone's subnet when unset.
    #[serde(default)]
    pub private_ip: Option<Ipv4Addr>,
    /// Whether to give a public IP (default true).
    #[serde(default)]
    pub public_ip: Option<bool>,
    /// Default `running`.
    #[serde(default)]
    pub state: Option<InstanceState>,
    /// Extra tags; the cluster tag is always added.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// A private DNS name to report instead of `ip-a-b-c-d.<region>.compute.internal`.
    #[serde(default)]
    pub private_dns_name: Option<String>,
    /// A chosen public IP (implies `public_ip`); any address, not checked against a pool.
    #[serde(default)]
    pub public_ip_address: Option<Ipv4Addr>,
    /// Secondary private IPs on the primary ENI; each must be in the instance's subnet.
    #[serde(default)]
    pub secondary_private_ips: Vec<Ipv4Addr>,
    /// IPv6 addresses on the primary ENI (any address; the mock's subnets have no IPv6
    /// CIDR to check them against).
    #[serde(default)]
    pub ipv6_addresses: Vec<Ipv6Addr>,
}

/// An admin change to an instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancePatch {
    #[serde(default)]
    pub state: Option<InstanceState>,
    #[serde(default)]
    pub instance_type: Option<String>,
    /// `true` gives a public IP if it has none, `false` removes it.
    #[serde(default)]
    pub public_ip: Option<bool>,
    /// Tags to set; an empty value is kept as an empty value.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Tag keys to remove.
    #[serde(default)]
    pub remove_tags: Vec<String>,
    /// Sets this public IP (any address); wins over `public_ip`.
    #[serde(default)]
    pub public_ip_address: Option<Ipv4Addr>,
    /// Replaces the secondary private IPs (each in the instance's subnet).
    #[serde(default)]
    pub secondary_private_ips: Option<Vec<Ipv4Addr>>,
    /// Replaces the IPv6 addresses.
    #[serde(default)]
    pub ipv6_addresses: Option<Vec<Ipv6Addr>>,
}

/// An instance as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceInfo {
    pub id: String,
    pub name: Option<String>,
    /// `aws:///<zone>/<id>`, what the CCM sets as the node's providerID.
    pub provider_id: String,
    pub zone: String,
    pub instance_type: String,
    pub state: InstanceState,
    pub private_ip: Ipv4Addr,
    #[serde(default)]
    pub secondary_private_ips: Vec<Ipv4Addr>,
    #[serde(default)]
    pub ipv6_addresses: Vec<Ipv6Addr>,
    pub private_dns_name: String,
    pub public_ip: Option<Ipv4Addr>,
    pub vpc_id: String,
    pub subnet_id: String,
    pub tags: BTreeMap<String, String>,
}

impl Cloud {
    /// The seeded network: VPC 127.40.0.0/16, a subnet per zone, main route table with
    /// `0.0.0.0/0 -> igw-`, a default security group; cluster tags where the CCM looks.
    pub fn new(
        region: &str,
        zones: &[String],
        cluster_id: &str,
        instance_type: &str,
        address_block: u8,
    ) -> Cloud {
        let cluster_tag = format!("kubernetes.io/cluster/{cluster_id}");
        let vpc = Vpc {
            id: new_id("vpc"),
            cidr: format!("{}.{}.0.0/13", PRIVATE_BASE[0], PRIVATE_BASE[1]),
        };
        let mut tags = BTreeMap::new();
        let owned = |extra: &[(&str, &str)]| {
            let mut t: BTreeMap<String, String> =
                [(cluster_tag.clone(), "owned".to_string())].into();
            for (k, v) in extra {
                t.insert(k.to_string(), v.to_string());
            }
            t
        };
        tags.insert(vpc.id.clone(), owned(&[("Name", "ccm-conformance")]));
        let mut subnets = Vec::new();
        for (i, zone) in zones.iter().enumerate() {
            let second = PRIVATE_BASE[1] + u8::try_from(i.min(MAX_ZONES - 1)).unwrap_or(0);
            let subnet = Subnet {
                id: new_id("subnet"),
                vpc_id: vpc.id.clone(),
                zone: zone.clone(),
                base: Ipv4Addr::new(PRIVATE_BASE[0], second, address_block, 0),
                prefix: 24,
            };
            tags.insert(subnet.id.clone(), owned(&[("kubernetes.io/role/elb", "1")]));
            subnets.push(subnet);
        }
        let internet_gateway = new_id("igw");
        let main = RouteTable {
            id: new_id("rtb"),
            vpc_id: vpc.id.clone(),
            main: true,
            routes: vec![
                Route {
                    destination: vpc.cidr.clone(),
                    gateway_id: Some("local".into()),
                    instance_id: None,
                },
                Route {
                    destination: "0.0.0.0/0".into(),
                    gateway_id: Some(internet_gateway.clone()),
                    instance_id: None,
                },
            ],
        };
        tags.insert(main.id.clone(), owned(&[]));
        let default_sg = SecurityGroup {
            id: new_id("sg"),
            name: "default".into(),
            description: "default VPC security group".into(),
            vpc_id: vpc.id.clone(),
            ingress: Vec::new(),
        };
        tags.insert(default_sg.id.clone(), owned(&[]));
        Cloud {
            region: region.to_string(),
            account_id: "123456789012".into(),
            zones: zones.to_vec(),
            default_instance_type: instance_type.to_string(),
            instances: Vec::new(),
            vpcs: vec![vpc],
            subnets,
            route_tables: vec![main],
            security_groups: vec![default_sg],
            tags,
            elbs: BTreeMap::new(),
            elbv2: Elbv2::default(),
            address_block,
        }
    }

    pub fn cluster_tag_key(&self) -> Option<String> {
        self.tags
            .get(&self.vpcs.first()?.id)?
            .keys()
            .find(|k| k.starts_with("kubernetes.io/cluster/"))
            .cloned()
    }

    pub fn tags_of(&self, id: &str) -> BTreeMap<String, String> {
        self.tags.get(id).cloned().unwrap_or_default()
    }

    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.id == id)
    }

    pub fn instance_mut(&mut self, id: &str) -> Option<&mut Instance> {
        self.instances.iter_mut().find(|i| i.id == id)
    }

    fn ip_in_use(&self, ip: Ipv4Addr) -> bool {
        self.instances.iter().any(|i| {
            i.private_ip == ip || i.public_ip == Some(ip) || i.secondary_private_ips.contains(&ip)
        })
    }

    /// `n` free private IPs of the zone's subnet (the first subnet when `zone` is `None`),
    /// lowest first: what a caller may ask an instance to use.
    pub fn free_private_ips(
        &self,
        zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<Ipv4Addr>, AdminError> {
        let subnet = match zone {
            Some(z) => self.subnets.iter().find(|s| s.zone == z),
            None => self.subnets.first(),
        }
        .ok_or_else(|| AdminError::Invalid {
            field: "zone",
            reason: format!("no subnet for {zone:?}"),
        })?;
        let size = 1u32 << (32 - u32::from(subnet.prefix));
        let free: Vec<Ipv4Addr> = (FIRST_HOST..size - 1)
            .map(|h| Ipv4Addr::from(u32::from(subnet.base) + h))
            .filter(|ip| !self.ip_in_use(*ip))
            .take(n)
            .collect();
        if free.len() < n {
            return Err(AdminError::Exhausted(subnet.cidr()));
        }
        Ok(free)
    }

    /// Checks secondary private IPs for an instance in `subnet` (`own`: its current ones).
    fn check_secondaries(
        &self,
        subnet: &Subnet,
        ips: &[Ipv4Addr],
        own: &[Ipv4Addr],
    ) -> Result<(), AdminError> {
        for (n, ip) in ips.iter().enumerate() {
            if !subnet.contains(*ip) {
                return Err(AdminError::Invalid {
                    field: "secondary_private_ips",
                    reason: format!("{ip} is not in {}", subnet.cidr()),
                });
            }
            if (self.ip_in_use(*ip) && !own.contains(ip)) || ips[..n].contains(ip) {
                return Err(AdminError::AddressInUse(*ip));
            }
        }
        Ok(())
    }

    fn free_private_ip(&self, subnet: &Subnet) -> Result<Ipv4Addr, AdminError> {
        let size = 1u32 << (32 - u32::from(subnet.prefix));
        (FIRST_HOST..size - 1)
            .map(|h| Ipv4Addr::from(u32::from(subnet.base) + h))
            .find(|ip| !self.ip_in_use(*ip))
            .ok_or_else(|| AdminError::Exhausted(subnet.cidr()))
    }

    fn free_public_ip(&self) -> Result<Ipv4Addr, AdminError> {
        let start = u32::from(PUBLIC_BASE) + u32::from(self.address_block) * 256;
        (0..65_000u32)
            .map(|h| Ipv4Addr::from(start.wrapping_add(h)))
            .find(|ip| !self.ip_in_use(*ip))
            .ok_or_else(|| AdminError::Exhausted("127.50.0.0/16".into()))
    }

    /// Creates an instance (admin API and RunInstances).
    pub fn create_instance(
        &mut self,
        spec: InstanceSpec,
        reservation_id: &str,
        subnet_id: Option<&str>,
    ) -> Result<String, AdminError> {
        let subnet = match (subnet_id, &spec.zone) {
            (Some(id), _) => {
                self.subnets
                    .iter()
                    .find(|s| s.id == id)
                    .ok_or_else(|| AdminError::Invalid {
                        field: "subnet",
                        reason: format!("no subnet {id}"),
                    })?
            }
            (None, Some(zone)) => {
                self.subnets
                    .iter()
                    .find(|s| &s.zone == zone)
                    .ok_or_else(|| AdminError::Invalid {
                        field: "zone",
                        reason: format!("{zone:?} is not one of {}", self.zones.join(", ")),
                    })?
            }
            (None, None) => self.subnets.first().ok_or_else(|| AdminError::Invalid {
                field: "zone",
                reason: "the cloud has no subnets".into(),
            })?,
        }
        .clone();
        let private_ip = match spec.private_ip {
            Some(ip) if !subnet.contains(ip) => {
                return Err(AdminError::Invalid {
                    field: "private_ip",
                    reason: format!("{ip} is not in {}", subnet.cidr()),
                });
            }
            Some(ip) if self.ip_in_use(ip) => return Err(AdminError::AddressInUse(ip)),
            Some(ip) => ip,
            None => self.free_private_ip(&subnet)?,
        };
        if spec.secondary_private_ips.contains(&private_ip) {
            return Err(AdminError::AddressInUse(private_ip));
        }
        self.check_secondaries(&subnet, &spec.secondary_private_ips, &[])?;
        let public_ip = if let Some(ip) = spec.public_ip_address {
            Some(ip)
        } else if spec.public_ip.unwrap_or(true) {
            Some(self.free_public_ip()?)
        } else {
            None
        };
        if let Some(t) = &spec.instance_type
            && t.is_empty()
        {
            return Err(AdminError::Invalid {
                field: "instance_type",
                reason: "empty".into(),
            });
        }
        let id = new_id("i");
        let group_ids = self
            .security_groups
            .iter()
            .filter(|g| g.vpc_id == subnet.vpc_id && g.name == "default")
            .map(|g| g.id.clone())
            .collect();
        self.instances.push(Instance {
            id: id.clone(),
            reservation_id: reservation_id.to_string(),
            image_id: "ami-0ccmconformance0".into(),
            instance_type: spec
                .instance_type
                .unwrap_or_else(|| self.default_instance_type.clone()),
            zone: subnet.zone.clone(),
            subnet_id: subnet.id.clone(),
            vpc_id: subnet.vpc_id.clone(),
            private_ip,
            secondary_private_ips: spec.secondary_private_ips,
            ipv6_addresses: spec.ipv6_addresses,
            public_ip,
            state: spec.state.unwrap_or(InstanceState::Running),
            eni_id: new_id("eni"),
            group_ids,
            source_dest_check: true,
            launch_time: jiff::Timestamp::now(),
            private_dns: spec.private_dns_name.filter(|n| !n.is_empty()),
        });
        let mut tags = spec.tags;
        if let Some(key) = self.cluster_tag_key() {
            tags.entry(key).or_insert_with(|| "owned".into());
        }
        if let Some(name) = spec.name {
            tags.insert("Name".into(), name);
        }
        self.tags.insert(id.clone(), tags);
        Ok(id)
    }

    /// A load-balancer address from 127.51.B.10 on, not used by another load balancer.
    pub fn free_vip(&self) -> Result<Ipv4Addr, AdminError> {
        let start = u32::from(VIP_BASE) + u32::from(self.address_block) * 256;
        (0..65_000u32)
            .map(|h| Ipv4Addr::from(start.wrapping_add(h)))
            .find(|ip| {
                !self.elbs.values().any(|lb| lb.vip == *ip)
                    && !self.elbv2.lbs.values().any(|lb| lb.vip == *ip)
            })
            .ok_or_else(|| AdminError::Exhausted("127.51.0.0/16".into()))
    }

    pub fn update_instance(&mut self, id: &str, patch: InstancePatch) -> Result<(), AdminError> {
        let public = match patch.public_ip {
            Some(true) if self.instance(id).is_some_and(|i| i.public_ip.is_none()) => {
                Some(Some(self.free_public_ip()?))
            }
            Some(false) => Some(None),
            _ => None,
        };
        let public = patch.public_ip_address.map(Some).or(public);
        if let Some(ips) = &patch.secondary_private_ips {
            let inst = self
                .instance(id)
                .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
            let subnet = self
                .subnets
                .iter()
                .find(|s| s.id == inst.subnet_id)
                .cloned()
                .ok_or_else(|| AdminError::NotFound(inst.subnet_id.clone()))?;
            if ips.contains(&inst.private_ip) {
                return Err(AdminError::AddressInUse(inst.private_ip));
            }
            self.check_secondaries(&subnet, ips, &inst.secondary_private_ips)?;
        }
        let inst = self
            .instance_mut(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        if let Some(s) = patch.state {
            inst.state = s;
        }
        if let Some(t) = patch.instance_type {
            inst.instance_type = t;
        }
        if let Some(p) = public {
            inst.public_ip = p;
        }
        if let Some(ips) = patch.secondary_private_ips {
            inst.secondary_private_ips = ips;
        }
        if let Some(ips) = patch.ipv6_addresses {
            inst.ipv6_addresses = ips;
        }
        let tags = self.tags.entry(id.to_string()).or_default();
        tags.extend(patch.tags);
        for k in patch.remove_tags {
            tags.remove(&k);
        }
        Ok(())
    }

    pub fn delete_instance(&mut self, id: &str) -> Result<(), AdminError> {
        let before = self.instances.len();
        self.instances.retain(|i| i.id != id);
        if self.instances.len() == before {
            return Err(AdminError::NotFound(id.to_string()));
        }
        self.tags.remove(id);
        Ok(())
    }

    /// The instance's private DNS name: the chosen one, else EC2's `ip-...` form.
    pub fn private_dns_of(&self, i: &Instance) -> String {
        i.private_dns
            .clone()
            .unwrap_or_else(|| private_dns_name(&self.region, i.private_ip))
    }

    pub fn instance_info(&self, i: &Instance) -> InstanceInfo {
        let tags = self.tags_of(&i.id);
        InstanceInfo {
            id: i.id.clone(),
            name: tags.get("Name").cloned(),
            provider_id: format!("aws:///{}/{}", i.zone, i.id),
            zone: i.zone.clone(),
            instance_type: i.instance_type.clone(),
            state: i.state,
            private_ip: i.private_ip,
            secondary_private_ips: i.secondary_private_ips.clone(),
            ipv6_addresses: i.ipv6_addresses.clone(),
            private_dns_name: self.private_dns_of(i),
            public_ip: i.public_ip,
            vpc_id: i.vpc_id.clone(),
            subnet_id: i.subnet_id.clone(),
            tags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud() -> Cloud {
        let zones = vec!["us-west-2a".to_string(), "us-west-2b".to_string()];
        Cloud::new("us-west-2", &zones, "c1", "m5.large", 0)
    }

    #[test]
    fn zone_ids_and_dns_names() {
        assert_eq!(zone_id("us-west-2a"), "usw2-az1");
        assert_eq!(zone_id("eu-central-1c"), "euc1-az3");
        let ip = Ipv4Addr::new(127, 40, 0, 10);
        assert_eq!(
            private_dns_name("us-east-1", ip),
            "ip-127-40-0-10.ec2.internal"
        );
        assert_eq!(
            private_dns_name("us-west-2", ip),
            "ip-127-40-0-10.us-west-2.compute.internal"
        );
    }

    #[test]
    fn instances_get_hermetic_addresses_and_the_cluster_tag() {
        let mut c = cloud();
        let a = c
            .create_instance(InstanceSpec::default(), "r-1", None)
            .expect("a");
        let spec = InstanceSpec {
            zone: Some("us-west-2b".into()),
            public_ip: Some(false),
            ..Default::default()
        };
        let b = c.create_instance(spec, "r-1", None).expect("b");
        let a = c.instance_info(c.instance(&a).expect("a"));
        let b = c.instance_info(c.instance(&b).expect("b"));
        assert_eq!(a.private_ip, Ipv4Addr::new(127, 40, 0, 10));
        assert_eq!(a.public_ip, Some(Ipv4Addr::new(127, 50, 0, 10)));
        assert_eq!(b.private_ip, Ipv4Addr::new(127, 41, 0, 10));
        assert_eq!(b.public_ip, None);
        assert_eq!(
            a.tags.get("kubernetes.io/cluster/c1").map(String::as_str),
            Some("owned")
        );
        assert!(a.provider_id.starts_with("aws:///us-west-2a/i-"));
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut c = cloud();
        let zone = InstanceSpec {
            zone: Some("x".into()),
            ..Default::default()
        };
        assert!(matches!(
            c.create_instance(zone, "r", None),
            Err(AdminError::Invalid { .. })
        ));
        let ip = InstanceSpec {
            private_ip: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ..Default::default()
        };
        assert!(matches!(
            c.create_instance(ip, "r", None),
            Err(AdminError::Invalid { .. })
        ));
        let taken = Some(Ipv4Addr::new(127, 40, 0, 10));
        c.create_instance(InstanceSpec::default(), "r", None)
            .expect("first");
        let dup = InstanceSpec {
            private_ip: taken,
            ..Default::default()
        };
        assert!(matches!(
            c.create_instance(dup, "r", None),
            Err(AdminError::AddressInUse(_))
        ));
        assert!(matches!(
            c.delete_instance("i-x"),
            Err(AdminError::NotFound(_))
        ));
        assert!(matches!(
            c.update_instance("i-x", InstancePatch::default()),
            Err(AdminError::NotFound(_))
        ));
    }
}
