//! The control side of a running mock ([`Admin`]): instances, load balancers and their
//! lifecycle modes, routes, the instance metadata service's identity, leaks and reset. The
//! HTTP admin API (`admin_api`) is a thin layer over it.

use std::net::Ipv4Addr;
use std::sync::Arc;

use mock_cloud::{Faults, Journal};

use crate::state::{self, AdminError, InstanceInfo, InstancePatch, InstanceSpec, InstanceState};
use crate::{Elbv2Info, LifecycleMode, RoleCredentials, Shared, elbv2};

/// The control side of a running mock: same operations as the HTTP admin API.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

impl Admin {
    /// All instances (terminated ones too, until deleted), in creation order.
    pub fn instances(&self) -> Vec<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud
            .instances
            .iter()
            .map(|i| cloud.instance_info(i))
            .collect()
    }

    pub fn instance(&self, id: &str) -> Option<InstanceInfo> {
        let cloud = self.shared.cloud();
        cloud.instance(id).map(|i| cloud.instance_info(i))
    }

    /// The oldest instance whose `Name` tag is `name`.
    pub fn instance_by_name(&self, name: &str) -> Option<InstanceInfo> {
        self.instances()
            .into_iter()
            .find(|i| i.name.as_deref() == Some(name))
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<InstanceInfo, AdminError> {
        let mut cloud = self.shared.cloud();
        let id = cloud.create_instance(spec, &state::new_id("r"), None)?;
        cloud
            .instance(&id)
            .map(|i| cloud.instance_info(i))
            .ok_or(AdminError::NotFound(id))
    }

    pub fn update_instance(
        &self,
        id: &str,
        patch: InstancePatch,
    ) -> Result<InstanceInfo, AdminError> {
        let mut cloud = self.shared.cloud();
        cloud.update_instance(id, patch)?;
        cloud
            .instance(id)
            .map(|i| cloud.instance_info(i))
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// `n` private IPs not in use in `zone`'s subnet (the first subnet for `None`): what
    /// a harness gives an instance as its primary and secondary private IPs.
    pub fn free_private_ips(
        &self,
        zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<Ipv4Addr>, AdminError> {
        self.shared.cloud().free_private_ips(zone, n)
    }

    /// Chooses the instance the metadata service speaks for (`None`: none, every metadata
    /// path answers 404).
    pub fn set_imds_instance(&self, id: Option<&str>) -> Result<(), AdminError> {
        if let Some(id) = id
            && self.shared.cloud().instance(id).is_none()
        {
            return Err(AdminError::NotFound(id.to_string()));
        }
        self.shared.imds.set_instance(id.map(str::to_string));
        Ok(())
    }

    /// The temporary credentials the metadata service hands out for the instance's role
    /// ([`IMDS_ROLE`](crate::IMDS_ROLE)); the endpoint accepts them with their session token.
    pub fn imds_role_credentials(&self) -> RoleCredentials {
        self.shared.imds.credentials.clone()
    }

    /// Removes the instance entirely: EC2 then answers `InvalidInstanceID.NotFound`.
    pub fn delete_instance(&self, id: &str) -> Result<(), AdminError> {
        self.shared.cloud().delete_instance(id)
    }

    /// The seeded VPC's id (for a CCM config's `[Global] VPC`).
    pub fn vpc_id(&self) -> String {
        self.shared
            .cloud()
            .vpcs
            .first()
            .map(|v| v.id.clone())
            .unwrap_or_default()
    }

    /// Subnets as `(zone, subnet id)`, one per zone, in zone order.
    pub fn subnets(&self) -> Vec<(String, String)> {
        self.shared
            .cloud()
            .subnets
            .iter()
            .map(|s| (s.zone.clone(), s.id.clone()))
            .collect()
    }

    /// Routes of every route table as `(route table id, destination, target)`, the target
    /// being the instance id, else the gateway id.
    pub fn routes(&self) -> Vec<(String, String, String)> {
        let cloud = self.shared.cloud();
        cloud
            .route_tables
            .iter()
            .flat_map(|t| {
                t.routes.iter().map(|r| {
                    let target = r
                        .instance_id
                        .clone()
                        .or_else(|| r.gateway_id.clone())
                        .unwrap_or_default();
                    (t.id.clone(), r.destination.clone(), target)
                })
            })
            .collect()
    }

    /// The address a load balancer's DNS name stands for (its data-plane VIP), as a
    /// resolver would answer; `None` for a name no load balancer has.
    pub fn resolve(&self, hostname: &str) -> Option<Ipv4Addr> {
        let cloud = self.shared.cloud();
        cloud
            .elbs
            .values()
            .find(|lb| lb.dns_name.eq_ignore_ascii_case(hostname))
            .map(|lb| lb.vip)
            .or_else(|| {
                cloud
                    .elbv2
                    .lbs
                    .values()
                    .find(|lb| lb.dns_name.eq_ignore_ascii_case(hostname))
                    .map(|lb| lb.vip)
            })
    }

    /// Classic load balancers as `(name, DNS name, VIP)`.
    pub fn classic_load_balancers(&self) -> Vec<(String, String, Ipv4Addr)> {
        self.shared
            .cloud()
            .elbs
            .values()
            .map(|lb| (lb.name.clone(), lb.dns_name.clone(), lb.vip))
            .collect()
    }

    /// Adds a route to the main route table, to `target`: an instance id (`i-...`) or
    /// a gateway id (what another tool than the CCM may have put there).
    pub fn add_route(&self, destination: &str, target: &str) -> Result<(), AdminError> {
        let mut cloud = self.shared.cloud();
        if target.starts_with("i-") && cloud.instance(target).is_none() {
            return Err(AdminError::NotFound(target.to_string()));
        }
        let table = cloud
            .route_tables
            .iter_mut()
            .find(|t| t.main)
            .ok_or_else(|| AdminError::NotFound("main route table".into()))?;
        if table.routes.iter().any(|r| r.destination == destination) {
            return Err(AdminError::Invalid {
                field: "destination",
                reason: format!("a route to {destination} exists"),
            });
        }
        let instance = target.starts_with("i-");
        table.routes.push(state::Route {
            destination: destination.to_string(),
            gateway_id: (!instance).then(|| target.to_string()),
            instance_id: instance.then(|| target.to_string()),
        });
        Ok(())
    }

    /// Names of the classic load balancers.
    pub fn load_balancer_names(&self) -> Vec<String> {
        self.shared.cloud().elbs.keys().cloned().collect()
    }

    /// ELBv2 load balancers with their state (looking does not count as a read).
    pub fn elbv2_load_balancers(&self) -> Vec<Elbv2Info> {
        let mut cloud = self.shared.cloud();
        cloud
            .elbv2
            .lbs
            .values_mut()
            .map(|lb| Elbv2Info {
                arn: lb.arn.clone(),
                name: lb.name.clone(),
                vip: lb.vip,
                state: elbv2::state_of(lb.lifecycle.peek()).to_string(),
            })
            .collect()
    }

    /// How ELBv2 load balancers leave `provisioning`: for new ones (`target` = `None`),
    /// or for one load balancer by name or ARN (its pending transition included).
    pub fn set_elbv2_lifecycle(
        &self,
        target: Option<&str>,
        mode: LifecycleMode,
    ) -> Result<(), AdminError> {
        let mode = mode.validate().map_err(|e| AdminError::Invalid {
            field: "mode",
            reason: e.to_string(),
        })?;
        let mut cloud = self.shared.cloud();
        match target {
            None => cloud.elbv2.mode = mode,
            Some(t) => {
                let lb = cloud
                    .elbv2
                    .lbs
                    .values_mut()
                    .find(|lb| lb.arn == t || lb.name == t)
                    .ok_or_else(|| AdminError::NotFound(t.to_string()))?;
                lb.lifecycle.set_mode(mode);
            }
        }
        Ok(())
    }

    /// What the cloud APIs created since the seed that still exists, as
    /// `"<kind> <id>"` lines (terminated instances count as gone).
    pub fn leaks(&self) -> Vec<String> {
        let cloud = self.shared.cloud();
        let seed = &self.shared.seed;
        let mut out = Vec::new();
        for i in &cloud.instances {
            if i.state != InstanceState::Terminated && seed.instance(&i.id).is_none() {
                out.push(format!("instance {}", i.id));
            }
        }
        for g in &cloud.security_groups {
            if !seed.security_groups.iter().any(|s| s.id == g.id) {
                out.push(format!("security-group {}", g.id));
            }
        }
        for t in &cloud.route_tables {
            let before = seed.route_tables.iter().find(|s| s.id == t.id);
            for r in &t.routes {
                if before.is_none_or(|b| !b.routes.contains(r)) {
                    out.push(format!("route {} {}", t.id, r.destination));
                }
            }
        }
        out.extend(cloud.elbs.keys().map(|n| format!("load-balancer {n}")));
        out.extend(cloud.elbv2.lbs.keys().map(|a| format!("load-balancer {a}")));
        out.extend(
            cloud
                .elbv2
                .target_groups
                .keys()
                .map(|a| format!("target-group {a}")),
        );
        out
    }

    pub fn journal(&self) -> Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Clears the journal and fault rules and puts the cloud back to the seed (same ids
    /// and addresses).
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    pub(crate) fn reset_cloud(&self) {
        let seed = self.shared.seed.clone();
        *self.shared.cloud() = seed;
        // The seed file's rules were checked at start, so this cannot fail.
        if let Err(e) = self.shared.config.seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }
}
