//! The cloud's state: servers, their Neutron ports and floating IPs, the fixed networks,
//! subnets and flavors. It is plain data behind one lock, edited by the admin API and read
//! by the Nova/Neutron handlers, so every service sees the same consistent world.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use mock_cloud::lifecycle::{Lifecycle, Mode, Phase};
use serde::{Deserialize, Serialize};

pub use crate::error::AdminError;
use crate::ids::new_id;
use crate::pool::Pool;

/// A flavor of the standard devstack set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flavor {
    pub id: &'static str,
    pub name: &'static str,
    pub ram_mb: u64,
    pub vcpus: u32,
    pub disk_gb: u32,
}

/// The flavors every mock has (devstack's m1.* set, `nova/db/main/legacy_migrations`).
pub(crate) const FLAVORS: [Flavor; 5] = [
    Flavor {
        id: "1",
        name: "m1.tiny",
        ram_mb: 512,
        vcpus: 1,
        disk_gb: 1,
    },
    Flavor {
        id: "2",
        name: "m1.small",
        ram_mb: 2048,
        vcpus: 1,
        disk_gb: 20,
    },
    Flavor {
        id: "3",
        name: "m1.medium",
        ram_mb: 4096,
        vcpus: 2,
        disk_gb: 40,
    },
    Flavor {
        id: "4",
        name: "m1.large",
        ram_mb: 8192,
        vcpus: 4,
        disk_gb: 80,
    },
    Flavor {
        id: "5",
        name: "m1.xlarge",
        ram_mb: 16384,
        vcpus: 8,
        disk_gb: 160,
    },
];

const DEFAULT_FLAVOR: &str = "m1.small";

pub(crate) fn flavor_by_id(id: &str) -> Option<&'static Flavor> {
    FLAVORS.iter().find(|f| f.id == id)
}

fn flavor_by_name_or_id(s: &str) -> Option<&'static Flavor> {
    FLAVORS.iter().find(|f| f.name == s || f.id == s)
}

/// Nova server statuses the mock accepts, with the `vm_state` and `power_state` Nova shows
/// for them (`nova/api/openstack/common.py` state map, `nova/compute/power_state.py`).
const STATUSES: &[(&str, &str, u8)] = &[
    ("ACTIVE", "active", 1),
    ("BUILD", "building", 0),
    ("SHUTOFF", "stopped", 4),
    ("PAUSED", "paused", 3),
    ("SUSPENDED", "suspended", 7),
    ("ERROR", "error", 0),
    ("SHELVED", "shelved", 4),
    ("SHELVED_OFFLOADED", "shelved_offloaded", 4),
    ("RESCUE", "rescued", 1),
    ("REBOOT", "active", 1),
    ("HARD_REBOOT", "active", 1),
    ("MIGRATING", "active", 1),
    ("RESIZE", "active", 1),
    ("VERIFY_RESIZE", "resized", 1),
    ("SOFT_DELETED", "soft-delete", 4),
    ("DELETED", "deleted", 4),
    ("UNKNOWN", "error", 0),
];

/// `(vm_state, power_state)` for a stored (validated) status.
pub(crate) fn vm_and_power_state(status: &str) -> (&'static str, u8) {
    STATUSES
        .iter()
        .find(|(s, _, _)| *s == status)
        .map(|(_, vm, p)| (*vm, *p))
        .unwrap_or(("error", 0))
}

/// An instance to create through the admin API. `None` fields take the mock's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    pub name: String,
    /// Availability zone; default `Config::default_az`.
    #[serde(default)]
    pub az: Option<String>,
    /// Flavor name (or id); default `m1.small`.
    #[serde(default)]
    pub flavor: Option<String>,
    /// Nova status; default `ACTIVE`.
    #[serde(default)]
    pub status: Option<String>,
    /// Fixed IPs of the server's port; `None` = allocate one from 127.10.0.0/16.
    #[serde(default)]
    pub internal_ips: Option<Vec<String>>,
    /// `None` = allocate one from 127.20.0.0/16; `Some(vec![])` = none.
    #[serde(default)]
    pub floating_ips: Option<Vec<String>>,
    #[serde(default)]
    pub access_ipv4: Option<String>,
    #[serde(default)]
    pub access_ipv6: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A change to a server; `None` leaves a field alone. `access_ipv4/6: Some("")` clears.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPatch {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub az: Option<String>,
    #[serde(default)]
    pub flavor: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub internal_ips: Option<Vec<String>>,
    #[serde(default)]
    pub floating_ips: Option<Vec<String>>,
    #[serde(default)]
    pub access_ipv4: Option<String>,
    #[serde(default)]
    pub access_ipv6: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A server as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub id: String,
    pub name: String,
    pub status: String,
    pub az: String,
    /// Flavor name.
    pub flavor: String,
    pub internal_ips: Vec<String>,
    pub floating_ips: Vec<String>,
    pub access_ipv4: Option<String>,
    pub access_ipv6: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> AdminError {
    AdminError::Invalid {
        field,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub id: String,
    pub name: String,
    pub status: String,
    pub az: String,
    pub flavor: &'static Flavor,
    pub port_ids: Vec<String>,
    pub floating_ips: Vec<IpAddr>,
    pub access_ipv4: Option<String>,
    pub access_ipv6: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
    /// Creation order; Nova lists newest first.
    pub seq: u64,
    /// A reboot in progress (status `REBOOT` or `HARD_REBOOT`): `ACTIVE` once it ends.
    pub reboot: Option<Lifecycle>,
}

/// How long a reboot asked for through the compute API keeps the server in `REBOOT` /
/// `HARD_REBOOT` (a real guest takes tens of seconds; the admin API can hold it).
pub const REBOOT_SECONDS: f64 = 2.0;

#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub subnet_id: String,
    pub mac: String,
    pub device_id: String,
    pub device_owner: String,
    pub status: String,
    pub fixed_ips: Vec<IpAddr>,
    /// `allowed_address_pairs` as (ip_address or CIDR, mac_address).
    pub allowed_address_pairs: Vec<(String, String)>,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

#[derive(Debug, Clone)]
pub(crate) struct Network {
    pub id: String,
    pub name: &'static str,
    pub external: bool,
    pub subnet_id: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Subnet {
    pub id: String,
    pub name: &'static str,
    pub network_id: String,
    pub cidr: &'static str,
    pub gateway: Ipv4Addr,
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

pub(crate) const PRIVATE_NETWORK: &str = "private";

impl Cloud {
    /// Moves every address pool (fixed, floating, VIP) to the `block`-th /24 of its /16, so
    /// mocks started side by side (one per parallel case) hand out different addresses
    /// in 127/8: their load balancers and node ports can then all bind at once.
    pub fn use_address_block(&mut self, block: u8) {
        let offset = u32::from(block) * 256;
        self.fixed.skip(offset);
        self.floating.skip(offset);
        self.lbaas.vips.skip(offset);
    }
}

/// The whole cloud. Cloned once after seeding so `reset` can go back to it.
#[derive(Debug, Clone)]
pub(crate) struct Cloud {
    pub servers: HashMap<String, Server>,
    /// Creation sequence -> server id.
    pub order: BTreeMap<u64, String>,
    next_seq: u64,
    pub ports: BTreeMap<String, Port>,
    pub networks: Vec<Network>,
    pub subnets: Vec<Subnet>,
    fixed: Pool,
    pub floating: Pool,
    next_mac: u32,
    default_az: String,
    /// Octavia's load balancers and children.
    pub lbaas: crate::octavia::model::Lbaas,
    /// Neutron floating IPs and routers.
    pub l3: crate::neutron::l3_state::L3,
    pub secgroups: crate::neutron::sg_state::SecGroups,
}

fn parse_ips(field: &'static str, ips: &[String]) -> Result<Vec<IpAddr>, AdminError> {
    let mut out: Vec<IpAddr> = Vec::with_capacity(ips.len());
    for s in ips {
        let ip: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| invalid(field, format!("{s:?} is not an IP address")))?;
        if out.contains(&ip) {
            return Err(invalid(field, format!("{ip} is listed twice")));
        }
        out.push(ip);
    }
    Ok(out)
}

fn parse_access_ip(
    field: &'static str,
    value: &str,
    v6: bool,
) -> Result<Option<String>, AdminError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    match value.parse::<IpAddr>() {
        Ok(ip) if ip.is_ipv6() == v6 => Ok(Some(ip.to_string())),
        _ => Err(invalid(
            field,
            format!("{value:?} is not an IPv{} address", if v6 { 6 } else { 4 }),
        )),
    }
}

fn parse_status(status: &str) -> Result<String, AdminError> {
    let upper = status.trim().to_ascii_uppercase();
    if STATUSES.iter().any(|(s, _, _)| *s == upper) {
        Ok(upper)
    } else {
        Err(invalid(
            "status",
            format!("{status:?} is not a Nova server status"),
        ))
    }
}

fn parse_flavor(flavor: &str) -> Result<&'static Flavor, AdminError> {
    flavor_by_name_or_id(flavor).ok_or_else(|| {
        let known: Vec<&str> = FLAVORS.iter().map(|f| f.name).collect();
        invalid(
            "flavor",
            format!("unknown flavor {flavor:?} (known: {})", known.join(", ")),
        )
    })
}

fn parse_name(name: &str) -> Result<String, AdminError> {
    let trimmed = name.trim();
    if trimmed.is_empty() || name.len() > 255 {
        return Err(invalid(
            "name",
            "must be 1 to 255 characters, not only spaces",
        ));
    }
    Ok(name.to_string())
}

/// Ports of the seed router (its interface and its gateway), present in every cloud.
#[cfg(test)]
pub(crate) const ROUTER_PORTS: usize = 2;

impl Cloud {
    pub fn new(default_az: &str) -> Self {
        let private_net = new_id();
        let public_net = new_id();
        let private_subnet = new_id();
        let public_subnet = new_id();
        let private = Subnet {
            id: private_subnet.clone(),
            name: "private-subnet",
            network_id: private_net.clone(),
            cidr: "127.10.0.0/16",
            gateway: Ipv4Addr::new(127, 10, 0, 1),
            first: Ipv4Addr::new(127, 10, 0, 10),
            last: Ipv4Addr::new(127, 10, 255, 254),
        };
        let public = Subnet {
            id: public_subnet.clone(),
            name: "public-subnet",
            network_id: public_net.clone(),
            cidr: "127.20.0.0/16",
            gateway: Ipv4Addr::new(127, 20, 0, 1),
            first: Ipv4Addr::new(127, 20, 0, 10),
            last: Ipv4Addr::new(127, 20, 255, 254),
        };
        let l3 = crate::neutron::l3_state::L3::seeded(&[
            (
                private_net.clone(),
                private_subnet.clone(),
                private.cidr,
                false,
            ),
            (public_net.clone(), public_subnet.clone(), public.cidr, true),
        ]);
        let mut cloud = Self {
            l3,
            secgroups: crate::neutron::sg_state::SecGroups::seeded(),
            servers: HashMap::new(),
            order: BTreeMap::new(),
            next_seq: 1,
            ports: BTreeMap::new(),
            networks: vec![
                Network {
                    id: private_net,
                    name: PRIVATE_NETWORK,
                    external: false,
                    subnet_id: private_subnet,
                },
                Network {
                    id: public_net,
                    name: "public",
                    external: true,
                    subnet_id: public_subnet,
                },
            ],
            fixed: Pool::new("127.10.0.0/16", private.first, private.last),
            floating: Pool::new("127.20.0.0/16", public.first, public.last),
            subnets: vec![private, public],
            next_mac: 1,
            default_az: default_az.to_string(),
            lbaas: crate::octavia::model::Lbaas::default(),
        };
        cloud.seed_router_ports();
        cloud
    }

    /// The ports Neutron keeps for the seed router: its interface on the private subnet
    /// (the subnet's gateway IP, `network:router_interface`) and its external gateway
    /// (`network:router_gateway`). cloud-provider-openstack finds the networks it routes on
    /// by listing the ports whose `device_id` is the router (`routes.go`
    /// `getRouterNetworkIDs`), then the node's port on one of them.
    pub(crate) fn seed_router_ports(&mut self) {
        let Some(router) = self.l3.routers.values().next().cloned() else {
            return;
        };
        let sides = [
            (
                0,
                IpAddr::V4(self.subnets[0].gateway),
                "network:router_interface",
            ),
            (1, router.external_ip, "network:router_gateway"),
        ];
        for (i, ip, owner) in sides {
            let (network_id, subnet_id) = (self.networks[i].id.clone(), self.subnets[i].id.clone());
            let id = new_id();
            let mac = self.next_mac();
            self.ports.insert(
                id.clone(),
                Port {
                    id,
                    name: String::new(),
                    network_id,
                    subnet_id,
                    mac,
                    device_id: router.id.clone(),
                    device_owner: owner.to_string(),
                    status: "ACTIVE".to_string(),
                    fixed_ips: vec![ip],
                    allowed_address_pairs: Vec::new(),
                    created: router.created,
                    updated: router.created,
                },
            );
        }
    }

    fn private(&self) -> (&Network, &Subnet) {
        (&self.networks[0], &self.subnets[0])
    }

    pub fn next_mac(&mut self) -> String {
        let n = self.next_mac;
        self.next_mac = self.next_mac.wrapping_add(1);
        // fa:16:3e is the prefix Neutron uses by default (`neutron/conf/common.py` base_mac).
        format!(
            "fa:16:3e:{:02x}:{:02x}:{:02x}",
            (n >> 16) & 0xff,
            (n >> 8) & 0xff,
            n & 0xff
        )
    }

    pub fn server_info(&self, server: &Server) -> ServerInfo {
        ServerInfo {
            id: server.id.clone(),
            name: server.name.clone(),
            status: server.status.clone(),
            az: server.az.clone(),
            flavor: server.flavor.name.to_string(),
            internal_ips: self
                .fixed_ips(server)
                .iter()
                .map(IpAddr::to_string)
                .collect(),
            floating_ips: server.floating_ips.iter().map(IpAddr::to_string).collect(),
            access_ipv4: server.access_ipv4.clone(),
            access_ipv6: server.access_ipv6.clone(),
            metadata: server.metadata.clone(),
        }
    }

    /// The fixed IPs over all of a server's ports, in port order.
    pub fn fixed_ips(&self, server: &Server) -> Vec<IpAddr> {
        server
            .port_ids
            .iter()
            .filter_map(|id| self.ports.get(id))
            .flat_map(|p| p.fixed_ips.iter().copied())
            .collect()
    }

    /// Servers in creation order.
    pub fn servers_in_order(&self) -> impl Iterator<Item = &Server> {
        self.order.values().filter_map(|id| self.servers.get(id))
    }

    /// Claims requested addresses (all or none) in `pool`, ignoring ones in `own`.
    fn claim(pool: &mut Pool, wanted: &[IpAddr], own: &[IpAddr]) -> Result<(), AdminError> {
        if let Some(taken) = wanted
            .iter()
            .find(|ip| pool.used.contains(ip) && !own.contains(ip))
        {
            return Err(AdminError::AddressInUse(taken.to_string()));
        }
        for ip in own {
            pool.used.remove(ip);
        }
        for ip in wanted {
            pool.used.insert(*ip);
        }
        Ok(())
    }

    pub fn create_server(&mut self, spec: ServerSpec) -> Result<ServerInfo, AdminError> {
        // Validate everything before changing anything.
        let name = parse_name(&spec.name)?;
        let status = match &spec.status {
            Some(s) => parse_status(s)?,
            None => "ACTIVE".to_string(),
        };
        let flavor = parse_flavor(spec.flavor.as_deref().unwrap_or(DEFAULT_FLAVOR))?;
        let fixed = spec
            .internal_ips
            .as_deref()
            .map(|ips| parse_ips("internal_ips", ips))
            .transpose()?;
        let floating = spec
            .floating_ips
            .as_deref()
            .map(|ips| parse_ips("floating_ips", ips))
            .transpose()?;
        let access_ipv4 = spec
            .access_ipv4
            .as_deref()
            .map(|v| parse_access_ip("access_ipv4", v, false))
            .transpose()?;
        let access_ipv6 = spec
            .access_ipv6
            .as_deref()
            .map(|v| parse_access_ip("access_ipv6", v, true))
            .transpose()?;
        if let Some(ips) = &fixed
            && let Some(taken) = ips.iter().find(|ip| self.fixed.used.contains(ip))
        {
            return Err(AdminError::AddressInUse(taken.to_string()));
        }
        if let Some(ips) = &floating
            && let Some(taken) = ips.iter().find(|ip| self.floating.used.contains(ip))
        {
            return Err(AdminError::AddressInUse(taken.to_string()));
        }
        let fixed = match fixed {
            Some(ips) => {
                Self::claim(&mut self.fixed, &ips, &[])?;
                ips
            }
            None => vec![self.fixed.allocate()?],
        };
        let floating = match floating {
            Some(ips) => {
                Self::claim(&mut self.floating, &ips, &[])?;
                ips
            }
            None => match self.floating.allocate() {
                Ok(ip) => vec![ip],
                Err(e) => {
                    for ip in &fixed {
                        self.fixed.used.remove(ip);
                    }
                    return Err(e);
                }
            },
        };

        let az = spec.az.unwrap_or_else(|| self.default_az.clone());
        let id = new_id();
        let now = jiff::Timestamp::now();
        let (network_id, subnet_id) = {
            let (n, s) = self.private();
            (n.id.clone(), s.id.clone())
        };
        let port = Port {
            id: new_id(),
            name: String::new(),
            network_id,
            subnet_id,
            mac: self.next_mac(),
            device_id: id.clone(),
            device_owner: format!("compute:{}", if az.is_empty() { "nova" } else { &az }),
            status: "ACTIVE".to_string(),
            fixed_ips: fixed,
            allowed_address_pairs: Vec::new(),
            created: now,
            updated: now,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let server = Server {
            id: id.clone(),
            name,
            status,
            az,
            flavor,
            port_ids: vec![port.id.clone()],
            floating_ips: floating,
            access_ipv4: access_ipv4.flatten(),
            access_ipv6: access_ipv6.flatten(),
            metadata: spec.metadata.unwrap_or_default(),
            created: now,
            updated: now,
            seq,
            reboot: None,
        };
        self.ports.insert(port.id.clone(), port);
        self.order.insert(seq, id.clone());
        let info = self.server_info(&server);
        self.servers.insert(id, server);
        Ok(info)
    }

    pub fn update_server(
        &mut self,
        id: &str,
        patch: ServerPatch,
    ) -> Result<ServerInfo, AdminError> {
        let server = self
            .servers
            .get(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        let name = patch.name.as_deref().map(parse_name).transpose()?;
        let status = patch.status.as_deref().map(parse_status).transpose()?;
        let flavor = patch.flavor.as_deref().map(parse_flavor).transpose()?;
        let fixed = patch
            .internal_ips
            .as_deref()
            .map(|ips| parse_ips("internal_ips", ips))
            .transpose()?;
        let floating = patch
            .floating_ips
            .as_deref()
            .map(|ips| parse_ips("floating_ips", ips))
            .transpose()?;
        let access_ipv4 = patch
            .access_ipv4
            .as_deref()
            .map(|v| parse_access_ip("access_ipv4", v, false))
            .transpose()?;
        let access_ipv6 = patch
            .access_ipv6
            .as_deref()
            .map(|v| parse_access_ip("access_ipv6", v, true))
            .transpose()?;
        let own_fixed = self.fixed_ips(server);
        let own_floating = server.floating_ips.clone();
        let port_ids = server.port_ids.clone();
        if let Some(ips) = &fixed
            && let Some(taken) = ips
                .iter()
                .find(|ip| self.fixed.used.contains(ip) && !own_fixed.contains(ip))
        {
            return Err(AdminError::AddressInUse(taken.to_string()));
        }
        if let Some(ips) = &floating
            && let Some(taken) = ips
                .iter()
                .find(|ip| self.floating.used.contains(ip) && !own_floating.contains(ip))
        {
            return Err(AdminError::AddressInUse(taken.to_string()));
        }
        // Checked above, so the claims cannot fail.
        if let Some(ips) = &fixed {
            Self::claim(&mut self.fixed, ips, &own_fixed)?;
            // All fixed IPs go on the first port; other ports (none today) are emptied.
            for (i, port_id) in port_ids.iter().enumerate() {
                if let Some(port) = self.ports.get_mut(port_id) {
                    port.fixed_ips = if i == 0 { ips.clone() } else { Vec::new() };
                }
            }
        }
        if let Some(ips) = &floating {
            Self::claim(&mut self.floating, ips, &own_floating)?;
        }
        let server = self
            .servers
            .get_mut(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        if let Some(name) = name {
            server.name = name;
        }
        if let Some(status) = status {
            // A status set from outside ends any reboot in progress.
            server.status = status;
            server.reboot = None;
        }
        if let Some(flavor) = flavor {
            server.flavor = flavor;
        }
        if let Some(az) = patch.az {
            server.az = az;
        }
        if let Some(ips) = floating {
            server.floating_ips = ips;
        }
        if let Some(v) = access_ipv4 {
            server.access_ipv4 = v;
        }
        if let Some(v) = access_ipv6 {
            server.access_ipv6 = v;
        }
        if let Some(metadata) = patch.metadata {
            server.metadata = metadata;
        }
        server.updated = jiff::Timestamp::now();
        let server = server.clone();
        Ok(self.server_info(&server))
    }

    /// Removes the server, its ports and its addresses.
    pub fn delete_server(&mut self, id: &str) -> Result<(), AdminError> {
        let server = self
            .servers
            .remove(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        self.order.remove(&server.seq);
        for port_id in &server.port_ids {
            if let Some(port) = self.ports.remove(port_id) {
                for ip in &port.fixed_ips {
                    self.fixed.used.remove(ip);
                }
            }
        }
        for ip in &server.floating_ips {
            self.floating.used.remove(ip);
        }
        Ok(())
    }

    pub fn server_by_name(&self, name: &str) -> Option<&Server> {
        self.servers_in_order().find(|s| s.name == name)
    }

    /// Starts Nova's `reboot` server action: the server shows `REBOOT` (soft) or
    /// `HARD_REBOOT` until `mode` ends the reboot, then `ACTIVE`; its ports and addresses
    /// stay. As Nova (`nova/compute/api.py` `reboot`, `@check_instance_state`): a soft
    /// reboot needs an ACTIVE server that is not busy; a hard one also takes a stopped,
    /// paused, suspended or failed server, and overrides a soft reboot in progress.
    pub fn reboot_server(
        &mut self,
        id: &str,
        hard: bool,
        mode: Mode,
    ) -> Result<ServerInfo, AdminError> {
        self.settle_reboots();
        let server = self
            .servers
            .get_mut(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        let allowed: &[&str] = if hard {
            &[
                "ACTIVE",
                "SHUTOFF",
                "PAUSED",
                "SUSPENDED",
                "ERROR",
                "REBOOT",
            ]
        } else {
            &["ACTIVE"]
        };
        if !allowed.contains(&server.status.as_str()) {
            let (vm_state, _) = vm_and_power_state(&server.status);
            let message = match server.status.as_str() {
                "REBOOT" => {
                    format!("Cannot 'reboot' instance {id} while it is in task_state rebooting")
                }
                "HARD_REBOOT" => format!(
                    "Cannot 'reboot' instance {id} while it is in task_state rebooting_hard"
                ),
                _ => format!("Cannot 'reboot' instance {id} while it is in vm_state {vm_state}"),
            };
            return Err(AdminError::InvalidState(message));
        }
        server.status = if hard { "HARD_REBOOT" } else { "REBOOT" }.to_string();
        server.reboot = Some(Lifecycle::begin(mode));
        server.updated = jiff::Timestamp::now();
        let server = server.clone();
        Ok(self.server_info(&server))
    }

    /// Changes how a reboot in progress ends (e.g. `Mode::Immediate` releases a held
    /// one). `InvalidState` when the server is not rebooting.
    pub fn set_reboot_mode(&mut self, id: &str, mode: Mode) -> Result<ServerInfo, AdminError> {
        let server = self
            .servers
            .get_mut(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        let reboot = server
            .reboot
            .as_mut()
            .ok_or_else(|| AdminError::InvalidState(format!("server {id} is not rebooting")))?;
        reboot.set_mode(mode);
        self.settle_reboots();
        self.servers
            .get(id)
            .map(|s| self.server_info(s))
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// Ends the reboots whose lifecycle is over (`ACTIVE`; `ERROR` if it failed).
    /// Called on every look at the cloud, so a reboot ends lazily like every other
    /// transition of the mock.
    pub fn settle_reboots(&mut self) {
        for server in self.servers.values_mut() {
            let Some(reboot) = server.reboot.as_mut() else {
                continue;
            };
            let status = match reboot.peek() {
                Phase::Pending => continue,
                Phase::Done => "ACTIVE",
                Phase::Failed => "ERROR",
            };
            server.status = status.to_string();
            server.reboot = None;
            server.updated = jiff::Timestamp::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn create_allocates_sequential_unique_addresses() {
        let mut c = Cloud::new("nova");
        let a = c.create_server(spec("a")).expect("a");
        let b = c.create_server(spec("b")).expect("b");
        assert_eq!(a.internal_ips, vec!["127.10.0.10"]);
        assert_eq!(b.internal_ips, vec!["127.10.0.11"]);
        assert_eq!(a.floating_ips, vec!["127.20.0.10"]);
        assert_eq!(
            (a.status.as_str(), a.az.as_str(), a.flavor.as_str()),
            ("ACTIVE", "nova", "m1.small")
        );
        // An explicitly taken address is skipped by the allocator.
        c.create_server(ServerSpec {
            internal_ips: Some(vec!["127.10.0.12".into()]),
            ..spec("c")
        })
        .expect("c");
        let d = c.create_server(spec("d")).expect("d");
        assert_eq!(d.internal_ips, vec!["127.10.0.13"]);
        let port = c
            .ports
            .values()
            .find(|p| p.device_id == d.id)
            .expect("port");
        assert_eq!(port.status, "ACTIVE");
        assert_eq!(port.device_owner, "compute:nova");
    }

    #[test]
    fn create_validates_without_side_effects() {
        let mut c = Cloud::new("nova");
        let a = c.create_server(spec("a")).expect("a");
        let taken = ServerSpec {
            internal_ips: Some(a.internal_ips.clone()),
            ..spec("x")
        };
        assert_eq!(
            c.create_server(taken),
            Err(AdminError::AddressInUse("127.10.0.10".into()))
        );
        assert!(matches!(
            c.create_server(spec(" ")),
            Err(AdminError::Invalid { field: "name", .. })
        ));
        let bad_flavor = ServerSpec {
            flavor: Some("huge".into()),
            ..spec("x")
        };
        assert!(matches!(
            c.create_server(bad_flavor),
            Err(AdminError::Invalid {
                field: "flavor",
                ..
            })
        ));
        let bad_status = ServerSpec {
            status: Some("RUNNING".into()),
            ..spec("x")
        };
        assert!(matches!(
            c.create_server(bad_status),
            Err(AdminError::Invalid {
                field: "status",
                ..
            })
        ));
        let bad_ip = ServerSpec {
            floating_ips: Some(vec!["nope".into()]),
            ..spec("x")
        };
        assert!(matches!(
            c.create_server(bad_ip),
            Err(AdminError::Invalid {
                field: "floating_ips",
                ..
            })
        ));
        let bad_access = ServerSpec {
            access_ipv4: Some("::1".into()),
            ..spec("x")
        };
        assert!(matches!(
            c.create_server(bad_access),
            Err(AdminError::Invalid {
                field: "access_ipv4",
                ..
            })
        ));
        assert_eq!(c.servers.len(), 1);
        assert_eq!(
            c.create_server(spec("b")).expect("b").internal_ips,
            vec!["127.10.0.11"]
        );
    }

    #[test]
    fn update_replaces_addresses_and_fields() {
        let mut c = Cloud::new("nova");
        let a = c.create_server(spec("a")).expect("a");
        let b = c.create_server(spec("b")).expect("b");
        let patch = ServerPatch {
            internal_ips: Some(b.internal_ips.clone()),
            ..Default::default()
        };
        assert_eq!(
            c.update_server(&a.id, patch),
            Err(AdminError::AddressInUse(b.internal_ips[0].clone()))
        );
        let patch = ServerPatch {
            internal_ips: Some(vec!["127.10.9.9".into(), "127.10.0.10".into()]),
            floating_ips: Some(vec![]),
            status: Some("shutoff".into()),
            az: Some("az-2".into()),
            flavor: Some("m1.large".into()),
            access_ipv4: Some("127.30.0.1".into()),
            ..Default::default()
        };
        let updated = c.update_server(&a.id, patch).expect("update");
        assert_eq!(updated.internal_ips, vec!["127.10.9.9", "127.10.0.10"]);
        assert!(updated.floating_ips.is_empty());
        assert_eq!(
            (updated.status.as_str(), updated.az.as_str()),
            ("SHUTOFF", "az-2")
        );
        assert_eq!(updated.flavor, "m1.large");
        assert_eq!(updated.access_ipv4.as_deref(), Some("127.30.0.1"));
        let cleared = c
            .update_server(
                &a.id,
                ServerPatch {
                    access_ipv4: Some(String::new()),
                    ..Default::default()
                },
            )
            .expect("clear");
        assert_eq!(cleared.access_ipv4, None);
        // The released floating IP can be claimed by someone else now.
        let patch = ServerPatch {
            floating_ips: Some(a.floating_ips.clone()),
            ..Default::default()
        };
        assert!(c.update_server(&b.id, patch).is_ok());
        assert_eq!(
            c.update_server("nope", ServerPatch::default()),
            Err(AdminError::NotFound("nope".into()))
        );
    }

    #[test]
    fn delete_removes_ports_and_frees_addresses() {
        let mut c = Cloud::new("nova");
        let a = c.create_server(spec("a")).expect("a");
        c.delete_server(&a.id).expect("delete");
        assert_eq!(
            c.ports.len(),
            ROUTER_PORTS,
            "only the router's ports are left"
        );
        assert!(c.order.is_empty());
        assert_eq!(
            c.delete_server(&a.id),
            Err(AdminError::NotFound(a.id.clone()))
        );
        let again = ServerSpec {
            internal_ips: Some(a.internal_ips.clone()),
            ..spec("b")
        };
        assert!(c.create_server(again).is_ok());
    }
}
