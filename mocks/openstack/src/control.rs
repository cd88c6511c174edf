//! The control side of a running mock ([`Admin`]): servers, reboots, Octavia lifecycle
//! modes, inspection (load balancers, routers, floating IPs, leaks), state seeded as if
//! another tool had made it, and reset. The HTTP admin API (`admin_api`) is a thin layer
//! over it.

use std::sync::Arc;

use mock_cloud::{Faults, Journal};
use serde::Serialize;

use crate::leaks::Leaks;
use crate::state::{self, AdminError, ServerInfo, ServerPatch, ServerSpec};
use crate::{LifecycleMode, LifecyclePolicies, Shared, leaks};

/// A router as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouterInfo {
    pub id: String,
    pub name: String,
    /// Extra routes as `(destination, nexthop)`.
    pub routes: Vec<(String, String)>,
}

/// The control side of a running mock: same operations as the HTTP admin API.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

impl Admin {
    /// All servers, in creation order.
    pub fn servers(&self) -> Vec<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud
            .servers_in_order()
            .map(|s| cloud.server_info(s))
            .collect()
    }

    pub fn server(&self, id: &str) -> Option<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud.servers.get(id).map(|s| cloud.server_info(s))
    }

    /// The oldest server with this exact name.
    pub fn server_by_name(&self, name: &str) -> Option<ServerInfo> {
        let cloud = self.shared.cloud();
        cloud.server_by_name(name).map(|s| cloud.server_info(s))
    }

    pub fn create_server(&self, spec: ServerSpec) -> Result<ServerInfo, AdminError> {
        self.shared.cloud().create_server(spec)
    }

    pub fn update_server(&self, id: &str, patch: ServerPatch) -> Result<ServerInfo, AdminError> {
        self.shared.cloud().update_server(id, patch)
    }

    /// Reboots a server as Nova's `reboot` action does (`hard`: `HARD_REBOOT`, else
    /// `REBOOT`, then `ACTIVE`); `hold` keeps it rebooting until [`Self::finish_reboot`],
    /// else it ends after [`REBOOT_SECONDS`](crate::REBOOT_SECONDS) like one asked for through the API.
    pub fn reboot_server(
        &self,
        id: &str,
        hard: bool,
        hold: bool,
    ) -> Result<ServerInfo, AdminError> {
        let mode = if hold {
            LifecycleMode::Stuck
        } else {
            LifecycleMode::Seconds {
                t: state::REBOOT_SECONDS,
            }
        };
        self.shared.cloud().reboot_server(id, hard, mode)
    }

    /// Ends a server's reboot now: it is `ACTIVE` again.
    pub fn finish_reboot(&self, id: &str) -> Result<ServerInfo, AdminError> {
        self.shared
            .cloud()
            .set_reboot_mode(id, LifecycleMode::Immediate)
    }

    /// Deletes the server and its ports.
    pub fn delete_server(&self, id: &str) -> Result<(), AdminError> {
        self.shared.cloud().delete_server(id)
    }

    pub fn journal(&self) -> Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Clears the journal and fault rules and puts the servers back to the seed (same ids
    /// and addresses). Issued tokens stay valid.
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    pub(crate) fn reset_cloud(&self) {
        let seed = self.shared.seed.clone();
        *self.shared.cloud() = seed;
        self.shared.model_changed();
        // The seed file's rules were checked at start, so this cannot fail.
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }
}

/// What an Octavia lifecycle mode applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleTarget {
    /// Every transition without a more specific mode.
    Default,
    /// Transitions started by writes to one resource type: `loadbalancer`, `listener`,
    /// `pool`, `member` or `healthmonitor` (child writes fall back to `loadbalancer`).
    Type(String),
    /// Every transition of one load balancer, including the one under way.
    LoadBalancer(String),
}

/// Resource types a lifecycle mode can be set for.
pub const LIFECYCLE_TYPES: &[&str] = &[
    "loadbalancer",
    "listener",
    "pool",
    "member",
    "healthmonitor",
];

impl Admin {
    /// How Octavia transitions end, by default, type and load balancer.
    pub fn lifecycle(&self) -> LifecyclePolicies {
        self.shared.cloud().lbaas.policies.clone()
    }

    /// Sets (`Some`) or removes (`None`) a lifecycle mode; removing the default sets it
    /// back to immediate. A load balancer's mode also applies to its pending transition.
    pub fn set_lifecycle(
        &self,
        target: LifecycleTarget,
        mode: Option<LifecycleMode>,
    ) -> Result<(), AdminError> {
        let mode = mode
            .map(|m| {
                m.validate().map_err(|e| AdminError::Invalid {
                    field: "mode",
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let mut cloud = self.shared.cloud();
        let policies = &mut cloud.lbaas.policies;
        match target {
            LifecycleTarget::Default => policies.default = mode.unwrap_or(LifecycleMode::Immediate),
            LifecycleTarget::Type(t) => {
                if !LIFECYCLE_TYPES.contains(&t.as_str()) {
                    return Err(AdminError::Invalid {
                        field: "type",
                        reason: format!("{t:?} is not one of {}", LIFECYCLE_TYPES.join(", ")),
                    });
                }
                match mode {
                    Some(m) => policies.by_type.insert(t, m),
                    None => policies.by_type.remove(&t),
                };
            }
            LifecycleTarget::LoadBalancer(id) => {
                match mode {
                    Some(m) => policies.by_id.insert(id.clone(), m),
                    None => policies.by_id.remove(&id),
                };
                cloud.lbaas.apply_override(&id);
            }
        }
        Ok(())
    }

    /// Every load balancer as Octavia shows it (looking does not count as a read).
    pub fn load_balancers(&self) -> Vec<serde_json::Value> {
        let mut cloud = self.shared.cloud();
        cloud.settle_all_lbs(false);
        let project = &self.shared.identity.project_id;
        cloud
            .lbaas
            .lbs_sorted()
            .into_iter()
            .map(|lb| cloud.lbaas.lb_json(lb, project))
            .collect()
    }

    /// The id of the private subnet the servers' ports are on.
    pub fn private_subnet_id(&self) -> Option<String> {
        let cloud = self.shared.cloud();
        let network = cloud.networks.iter().find(|n| !n.external)?;
        Some(network.subnet_id.clone())
    }

    /// The id of the external (floating IP) network.
    pub fn external_network_id(&self) -> Option<String> {
        let cloud = self.shared.cloud();
        cloud
            .networks
            .iter()
            .find(|n| n.external)
            .map(|n| n.id.clone())
    }

    /// The floating IP associated with `port_id`, if any.
    pub fn floating_ip_of_port(&self, port_id: &str) -> Option<String> {
        let cloud = self.shared.cloud();
        cloud
            .l3
            .floatingips
            .values()
            .find(|f| f.port_id.as_deref() == Some(port_id))
            .map(|f| f.address.to_string())
    }

    /// Associates a new floating IP with `port_id` (a load balancer's `vip_port_id`, say)
    /// and returns its address, as a tenant tool or an earlier CCM would have made it.
    pub fn seed_floating_ip(&self, port_id: &str) -> Result<String, AdminError> {
        let address = {
            let mut cloud = self.shared.cloud();
            crate::neutron::l3::seed_fip(&mut cloud, port_id).map_err(|reason| {
                AdminError::Invalid {
                    field: "port_id",
                    reason,
                }
            })?
        };
        self.shared.model_changed();
        Ok(address.to_string())
    }

    /// Every router as `(id, name, routes)`, routes as `(destination, nexthop)`.
    pub fn routers(&self) -> Vec<RouterInfo> {
        let cloud = self.shared.cloud();
        cloud
            .l3
            .routers
            .values()
            .map(|r| RouterInfo {
                id: r.id.clone(),
                name: r.name.clone(),
                routes: r
                    .routes
                    .iter()
                    .map(|x| (x.destination.clone(), x.nexthop.to_string()))
                    .collect(),
            })
            .collect()
    }

    /// Adds an extra route to a router, as another tenant tool would (a case can then check
    /// a CCM leaves routes it does not own alone).
    pub fn add_route(
        &self,
        router_id: &str,
        destination: &str,
        nexthop: &str,
    ) -> Result<(), AdminError> {
        let nexthop: std::net::IpAddr = nexthop.parse().map_err(|_| AdminError::Invalid {
            field: "nexthop",
            reason: format!("{nexthop:?} is not an IP address"),
        })?;
        if crate::neutron::l3_state::parse_cidr(destination).is_none() {
            return Err(AdminError::Invalid {
                field: "destination",
                reason: format!("{destination:?} is not an IPv4 CIDR"),
            });
        }
        let mut cloud = self.shared.cloud();
        let router = cloud
            .l3
            .routers
            .get_mut(router_id)
            .ok_or_else(|| AdminError::NotFound(format!("router {router_id}")))?;
        let route = crate::neutron::l3_state::Route {
            destination: destination.to_string(),
            nexthop,
        };
        if !router.routes.contains(&route) {
            router.routes.push(route);
        }
        Ok(())
    }

    /// Creates a load balancer as if a tool before the CCM under test had made it (an
    /// in-tree cloud provider, a previous CCM version), so upgrade cases can start from that
    /// state. `body` is Octavia's fully-populated create request (the `loadbalancer`
    /// object: name, listeners with default pools and members); `vip_subnet_id` defaults to
    /// the tenant subnet. The load balancer is ACTIVE at once whatever the lifecycle mode,
    /// the call is not journaled (it is not a client call), and it is not part of the seed:
    /// it shows in [`Self::leaks`] until deleted. Returns the load balancer as Octavia shows
    /// it.
    pub fn seed_load_balancer(
        &self,
        mut body: serde_json::Value,
    ) -> Result<serde_json::Value, AdminError> {
        let invalid = |reason: String| AdminError::Invalid {
            field: "loadbalancer",
            reason,
        };
        let id = {
            let mut cloud = self.shared.cloud();
            let subnet = cloud.subnets[0].id.clone();
            let object = body
                .as_object_mut()
                .ok_or_else(|| invalid("expected a JSON object".into()))?;
            object
                .entry("vip_subnet_id")
                .or_insert(serde_json::Value::String(subnet));
            let id = cloud
                .create_lb(object.clone())
                .map_err(|e| invalid(e.to_string()))?;
            // Finish the create now: an id override to immediate, settle, drop the override.
            let policies = &mut cloud.lbaas.policies;
            let previous = policies.by_id.insert(id.clone(), LifecycleMode::Immediate);
            cloud.lbaas.apply_override(&id);
            cloud.settle_lb(&id, false);
            match previous {
                Some(mode) => cloud.lbaas.policies.by_id.insert(id.clone(), mode),
                None => cloud.lbaas.policies.by_id.remove(&id),
            };
            id
        };
        self.shared.model_changed();
        let project = &self.shared.identity.project_id;
        let cloud = self.shared.cloud();
        let lb = cloud
            .lbaas
            .lbs
            .get(&id)
            .ok_or_else(|| AdminError::NotFound(format!("load balancer {id}")))?;
        Ok(cloud.lbaas.lb_json(lb, project))
    }

    /// Every resource created through the cloud APIs since the seed that still exists.
    pub fn leaks(&self) -> Leaks {
        let mut cloud = self.shared.cloud();
        cloud.settle_all_lbs(false);
        leaks::find(&self.shared.seed, &cloud)
    }
}
