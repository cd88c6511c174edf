//! Azure load balancers: one Standard load balancer per cluster with one frontend IP
//! configuration, rules and probes per Service, a NIC-based backend pool, public IPs and
//! NSG rules, the way cloud-provider-azure builds them for `vmType: standard` with a single
//! Standard LB and `loadBalancerBackendPoolConfigurationType: nodeIPConfiguration`.
//!
//! Upstream, with where (all under `pkg/provider/` unless said):
//! - LB name `<clusterName>` (or `loadBalancerName` from the config), `-internal` for
//!   Services annotated `service.beta.kubernetes.io/azure-load-balancer-internal: "true"`
//!   (`azure_loadbalancer.go` `getAzureLoadBalancerName`, `consts.InternalLoadBalancerNameSuffix`);
//!   SKU Standard;
//! - frontend IP configuration `a<uid without dashes>` cut to 32 characters
//!   (`GetLoadBalancerName` = `cloudprovider.DefaultLoadBalancerName`,
//!   `getDefaultFrontendIPConfigName`); it belongs to the Service whose name it starts
//!   with; rules and probes `<that>-<Protocol>-<port>` (`azure_standard.go`
//!   `getLoadBalancerRuleName`; `-IPv6` for the IPv6 half of dual stack,
//!   `azure_utils.go` `getResourceByIPFamily`);
//! - public IP `<clusterName>-<that>` (cut to 75), Standard SKU, Static, IPv4, tags
//!   `k8s-azure-service: <ns>/<name>` and `k8s-azure-cluster-name`, the region's zones;
//!   created before the frontend that references it (`azure_standard.go`
//!   `getPublicIPName`, `azure_loadbalancer.go` `ensurePublicIPExists`, `bindServicesToPIP`);
//!   deleted (or the Service unbound from its tag) when no longer wanted
//!   (`reconcilePublicIPs`, `serviceOwnsPublicIP`);
//! - internal frontends: the configured subnet, Dynamic, or Static with
//!   `spec.loadBalancerIP` (`reconcileFrontendIPConfigs`);
//! - backend pool `<clusterName>` (`azure_standard.go` `getBackendPoolName`); members are
//!   the nodes' primary NIC primary IP configurations, added by PUTting the NIC
//!   (`azure_standard.go` `EnsureHostInPool`: a NIC already in another cluster LB's pool is
//!   skipped; control-plane nodes are left out, `excludeMasterFromStandardLB` defaults to
//!   true) and removed from NICs of nodes no longer eligible and when the LB goes
//!   (`azure_loadbalancer_backendpool.go` `ReconcileBackendPools`, `EnsureBackendPoolDeleted`);
//! - rules (`getExpectedLBRules`, `getExpectedLoadBalancingRulePropertiesForPort`):
//!   frontend port = backend port = the service port with `enableFloatingIP: true`; with
//!   `azure-disable-load-balancer-floating-ip: "true"` the backend port is the node port
//!   and floating IP is off; `idleTimeoutInMinutes` from `azure-load-balancer-tcp-idle-timeout`
//!   (4..100, default 4); `enableTcpReset` for TCP unless `azure-load-balancer-disable-tcp-reset`;
//!   `loadDistribution` `SourceIP` for ClientIP affinity, else `Default`;
//! - probes (`azure_loadbalancer_healthprobe.go` `buildHealthProbeRulesForPort`, default
//!   `clusterServiceLoadBalancerHealthProbeMode: servicenodeport`): ETP Local: one HTTP
//!   probe on the health-check node port, path `/healthz`, named after a TCP rule on that
//!   port, used by every rule; ETP Cluster: per TCP port a probe on the node port, `Tcp`
//!   unless `appProtocol` or `azure-load-balancer-health-probe-protocol` says `http`/`https`
//!   (then path from `azure-load-balancer-health-probe-request-path`, default `/`); UDP
//!   ports get none; interval 5, threshold 2;
//! - a rule, probe or frontend is rewritten only when its compared fields differ
//!   (`findRule`/`equalLoadBalancingRulePropertiesFormat`, `findProbe`), so an unchanged
//!   Service makes no write; the LB is deleted when its last frontend goes
//!   (`cleanOrphanedLoadBalancer`);
//! - NSG rules ([`super::nsg`]) after the LB, destination = the frontend IP (or the
//!   backend node IPs without floating IP) (`reconcileSecurityGroup`);
//! - order of `EnsureLoadBalancer` (`reconcileService`): LB (with public IP and backend
//!   hosts), NSG, removal from the LB of the other kind (internal/external switch), public
//!   IP cleanup; of `EnsureLoadBalancerDeleted`: NSG, both LBs, public IPs. All of it under
//!   one lock (`serviceReconcileLock`).
//!
//! Every write carries `If-Match` with the etag read; a 412 re-reads and reconciles again
//! (up to three times). Not implemented (clear errors or ignored): IPv6 and dual stack,
//! user-assigned public IPs (`spec.loadBalancerIP` / `azure-pip-name` on external
//! Services), the internal-subnet annotation, HA ports, PLS, multiple SLBs, shared probe
//! mode, per-port probe annotations.
//!
//! This file has the frontends, the LB and NSG writes and the `LoadBalancer` entry
//! points; by role, the rules and probes are in `rules`, the backend pool in
//! `backend_pool`, the public IPs in `public_ip`, and the annotations, names and JSON
//! accessors all of them read in `shared`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use serde_json::{Value, json};

use super::Azure;
use super::client::{ArmError, NETWORK_API};
use super::instances::last_segment;
use super::nsg;
use crate::cloud::{LbError, LoadBalancer};
use crate::providers::{lookup_before_create, skip_lookup_before_create};

mod backend_pool;
mod public_ip;
mod rules;
mod shared;

pub use backend_pool::{is_control_plane, nic_path_of};
pub use public_ip::service_owns_pip;
use rules::reconcile_list;
pub use rules::{expected_probes_and_rules, probe_matches, rule_matches};
pub use shared::{
    ANNOTATION_DISABLE_FLOATING_IP, ANNOTATION_DISABLE_TCP_RESET, ANNOTATION_IDLE_TIMEOUT,
    ANNOTATION_INTERNAL, ANNOTATION_PIP_NAME, ANNOTATION_PROBE_PATH, ANNOTATION_PROBE_PROTOCOL,
    CLUSTER_NAME_KEY, INTERNAL_SUFFIX, SERVICE_TAG_KEY, by_ip_family, default_lb_name,
    floating_ip_disabled, is_internal, pip_name, rule_name, service_key,
};
use shared::{annotation, eq_ci, etag, name_of, owned_by, str_at};

impl From<ArmError> for LbError {
    fn from(e: ArmError) -> Self {
        LbError::Other(e.to_string())
    }
}

fn array_mut<'a>(lb: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
    if !lb["properties"][key].is_array() {
        lb["properties"][key] = json!([]);
    }
    match lb["properties"][key].as_array_mut() {
        Some(a) => a,
        None => unreachable!("just set to an array"),
    }
}

fn ingress(ip: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_owned()),
            ip_mode: Some("VIP".to_owned()),
            ..Default::default()
        }]),
    }
}

impl Azure {
    fn lb_name(&self, cluster: &str, internal: bool) -> String {
        let prefix = if self.config.load_balancer_name.is_empty() {
            cluster
        } else {
            &self.config.load_balancer_name
        };
        if internal {
            format!("{prefix}{INTERNAL_SUFFIX}")
        } else {
            prefix.to_owned()
        }
    }

    /// EnsureLoadBalancer's create-or-update lookup of the cluster's LB `lb_path`, or
    /// always `None` with `skip` (TEST ONLY `--testing-break=skip-lookup-before-create`:
    /// the LB is PUT fresh, without `If-Match`, which ARM takes as create-or-replace).
    async fn lb_for_ensure(&self, skip: bool, lb_path: &str) -> Result<Option<Value>, ArmError> {
        lookup_before_create(skip, self.client.get_opt_or_created(lb_path, NETWORK_API)).await
    }

    /// The frontend the Service wants, or `None` if the owned one still fits
    /// (`reconcileFrontendIPConfigs`, `isFrontendIPChanged`).
    async fn frontend_fits(
        &self,
        cluster: &str,
        service: &Service,
        internal: bool,
        fip: &Value,
    ) -> bool {
        if !name_of(fip).eq_ignore_ascii_case(&default_lb_name(service)) {
            return false;
        }
        if internal {
            let subnet_id = format!(
                "{}/subnets/{}",
                self.resource_path(
                    &self.config.vnet_resource_group,
                    "Microsoft.Network/virtualNetworks",
                    &self.config.vnet_name
                ),
                self.config.subnet_name
            );
            let ip_ok = match load_balancer_ip(service) {
                Some(ip) => str_at(fip, "/properties/privateIPAddress") == Some(ip.as_str()),
                None => true,
            };
            eq_ci(str_at(fip, "/properties/subnet/id"), Some(&subnet_id)) && ip_ok
        } else {
            str_at(fip, "/properties/publicIPAddress/id").is_some_and(|id| {
                last_segment(id).eq_ignore_ascii_case(&pip_name(cluster, service, false))
            })
        }
    }

    /// A new frontend for the Service, and the public IP it was given (if external).
    async fn new_frontend(
        &self,
        cluster: &str,
        service: &Service,
        internal: bool,
        lb_id: &str,
    ) -> Result<(Value, Option<Value>), LbError> {
        let name = default_lb_name(service);
        let mut new_pip = None;
        let props = if internal {
            let vnet = self.resource_path(
                &self.config.vnet_resource_group,
                "Microsoft.Network/virtualNetworks",
                &self.config.vnet_name,
            );
            let subnet_path = format!("{vnet}/subnets/{}", self.config.subnet_name);
            let subnet = self
                .client
                .get_opt(&subnet_path, NETWORK_API, &[])
                .await?
                .ok_or_else(|| {
                    LbError::Other(format!(
                        "ensure({}): lb({}) - failed to get subnet: {}/{}",
                        service_key(service),
                        last_segment(lb_id),
                        self.config.vnet_name,
                        self.config.subnet_name
                    ))
                })?;
            let subnet_id = subnet
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(&subnet_path)
                .to_owned();
            match load_balancer_ip(service) {
                Some(ip) => {
                    json!({"subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Static", "privateIPAddress": ip})
                }
                None => {
                    json!({"subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Dynamic"})
                }
            }
        } else {
            let pip = self
                .ensure_public_ip(cluster, service, &pip_name(cluster, service, false))
                .await?;
            let id = pip
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    self.network_path("publicIPAddresses", &pip_name(cluster, service, false))
                });
            new_pip = Some(pip);
            json!({"publicIPAddress": {"id": id}})
        };
        Ok((
            json!({"name": name, "id": format!("{lb_id}/frontendIPConfigurations/{name}"), "properties": props}),
            new_pip,
        ))
    }

    /// `reconcileLoadBalancer` with `wantLb=true`: the LB after the change, the private
    /// IPs of the backend nodes, and the public IP created or bound for a new frontend.
    async fn reconcile_wanted_lb(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
        internal: bool,
    ) -> Result<(Value, Vec<String>, Option<Value>), LbError> {
        let lb_name = self.lb_name(cluster, internal);
        let lb_path = self.network_path("loadBalancers", &lb_name);
        let lb_id = lb_path.clone();
        let skip = skip_lookup_before_create();
        let existing = self.lb_for_ensure(skip, &lb_path).await?;
        let mut dirty = existing.is_none();
        let mut lb = existing.clone().unwrap_or_else(|| {
            json!({"name": lb_name, "location": self.config.location, "sku": {"name": "Standard"},
                   "properties": {}})
        });
        // Backend pool (ReconcileBackendPools: created when missing).
        let pool_name = cluster.to_owned();
        let pool_id = format!("{lb_id}/backendAddressPools/{pool_name}");
        {
            let pools = array_mut(&mut lb, "backendAddressPools");
            if !pools
                .iter()
                .any(|p| name_of(p).eq_ignore_ascii_case(&pool_name))
            {
                pools.push(json!({"name": pool_name}));
                dirty = true;
            }
        }
        // Frontend.
        let fips = array_mut(&mut lb, "frontendIPConfigurations").clone();
        let mut kept = Vec::new();
        let mut owned = None;
        for fip in fips {
            if !owned_by(name_of(&fip), service) {
                kept.push(fip);
            } else if owned.is_none() && self.frontend_fits(cluster, service, internal, &fip).await
            {
                owned = Some(fip.clone());
                kept.push(fip);
            } else {
                dirty = true;
            }
        }
        let mut new_pip = None;
        let fip_id = match &owned {
            Some(fip) => fip
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{lb_id}/frontendIPConfigurations/{}", name_of(fip))),
            None => {
                let (fip, pip) = self
                    .new_frontend(cluster, service, internal, &lb_id)
                    .await?;
                new_pip = pip;
                let id = fip["id"].as_str().unwrap_or_default().to_owned();
                kept.push(fip);
                dirty = true;
                id
            }
        };
        lb["properties"]["frontendIPConfigurations"] = json!(kept);
        // Probes and rules.
        let disable_snat = self.config.disable_outbound_snat.unwrap_or(false);
        let (probes, rules) =
            expected_probes_and_rules(service, &lb_id, &fip_id, &pool_id, disable_snat)?;
        dirty |= reconcile_list(
            array_mut(&mut lb, "probes"),
            &probes,
            service,
            probe_matches,
        );
        dirty |= reconcile_list(
            array_mut(&mut lb, "loadBalancingRules"),
            &rules,
            service,
            rule_matches,
        );
        if dirty {
            lb = match existing.as_ref() {
                Some(found) => {
                    let tag = etag(found);
                    self.client
                        .put(&lb_path, NETWORK_API, &lb, tag.as_deref())
                        .await?
                }
                // Create only (`If-None-Match: *`): a "not found" that was ARM's eventual
                // consistency must not replace the LB and the other Services' frontends
                // on it; the 412 reads again. The TEST ONLY break PUTs as before.
                None if !skip => self.client.create(&lb_path, NETWORK_API, &lb).await?,
                None => self.client.put(&lb_path, NETWORK_API, &lb, None).await?,
            };
        }
        let backend_ips = self.reconcile_backend_hosts(&lb, &pool_id, nodes).await?;
        Ok((lb, backend_ips, new_pip))
    }

    /// `reconcileLoadBalancer` with `wantLb=false` on one LB: the Service's frontend,
    /// rules and probes go; the LB goes with its last frontend (after its pool is taken
    /// off the NICs). Answers the frontend IPs the Service had there.
    async fn remove_service_from_lb(
        &self,
        lb_name: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        let lb_path = self.network_path("loadBalancers", lb_name);
        let Some(mut lb) = self
            .client
            .get_opt_or_created(&lb_path, NETWORK_API)
            .await?
        else {
            return Ok(());
        };
        let tag = etag(&lb);
        let mut dirty = false;
        for key in ["frontendIPConfigurations", "loadBalancingRules", "probes"] {
            let list = array_mut(&mut lb, key);
            let before = list.len();
            list.retain(|item| !owned_by(name_of(item), service));
            dirty |= list.len() != before;
        }
        if !dirty {
            return Ok(());
        }
        if array_mut(&mut lb, "frontendIPConfigurations").is_empty() {
            // cleanOrphanedLoadBalancer -> safeDeleteLoadBalancer.
            let pools = lb["properties"]["backendAddressPools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // The members as read, and the IP configurations this CCM put in a pool: an
            // LB known only from its create (it read as not found since) lists none.
            let known: BTreeSet<String> = self
                .ip_configs
                .lock()
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            for pool in pools {
                let pool_id = pool
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{lb_path}/backendAddressPools/{}", name_of(&pool)));
                let mut nics: BTreeSet<String> = BTreeSet::new();
                let listed = pool["properties"]["backendIPConfigurations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned));
                for id in listed.chain(known.iter().cloned()) {
                    if let Some(nic_path) = nic_path_of(&id)
                        && nics.insert(nic_path.to_ascii_lowercase())
                    {
                        self.remove_pool_from_nic(&nic_path, &pool_id).await?;
                    }
                }
            }
            self.client.delete(&lb_path, NETWORK_API).await?;
        } else {
            self.client
                .put(&lb_path, NETWORK_API, &lb, tag.as_deref())
                .await?;
        }
        Ok(())
    }

    /// The Service's frontend IP on an LB (public IP address or private IP); `known_pip` is
    /// a public IP just read, which saves reading it again.
    async fn frontend_ip(
        &self,
        lb: &Value,
        service: &Service,
        known_pip: Option<&Value>,
    ) -> Result<Option<String>, LbError> {
        let Some(fip) = lb["properties"]["frontendIPConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| owned_by(name_of(f), service))
        else {
            return Ok(None);
        };
        if let Some(ip) = str_at(fip, "/properties/privateIPAddress").filter(|s| !s.is_empty()) {
            return Ok(Some(ip.to_owned()));
        }
        if let Some(pip_id) = str_at(fip, "/properties/publicIPAddress/id") {
            let known = known_pip.filter(|p| {
                eq_ci(str_at(p, "/id"), Some(pip_id))
                    && str_at(p, "/properties/ipAddress").is_some_and(|ip| !ip.is_empty())
            });
            if let Some(p) = known {
                return Ok(str_at(p, "/properties/ipAddress").map(str::to_owned));
            }
            let pip = self.client.get_opt_or_created(pip_id, NETWORK_API).await?;
            return Ok(pip.and_then(|p| str_at(&p, "/properties/ipAddress").map(str::to_owned)));
        }
        Ok(None)
    }

    /// `reconcileSecurityGroup`: writes the NSG only when its rules change.
    async fn reconcile_nsg(
        &self,
        service: &Service,
        internal: bool,
        dsts: &[String],
        want: bool,
    ) -> Result<(), LbError> {
        if self.config.security_group_name.is_empty() || dsts.is_empty() {
            return Ok(());
        }
        let path = self.resource_path(
            &self.config.security_group_resource_group,
            "Microsoft.Network/networkSecurityGroups",
            &self.config.security_group_name,
        );
        for attempt in 0..3 {
            let mut group = self.client.get(&path, NETWORK_API, &[]).await?;
            let Some(rules) = nsg::reconcile(
                &group,
                service,
                internal,
                dsts,
                floating_ip_disabled(service),
                want,
            )
            .map_err(LbError::Other)?
            else {
                return Ok(());
            };
            group["properties"]["securityRules"] = json!(rules);
            match self
                .client
                .put(&path, NETWORK_API, &group, etag(&group).as_deref())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn ensure_once(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        check_supported(service)?;
        let internal = is_internal(service);
        let (lb, backend_ips, new_pip) = self
            .reconcile_wanted_lb(cluster, service, nodes, internal)
            .await?;
        let ip = self
            .frontend_ip(&lb, service, new_pip.as_ref())
            .await?
            .ok_or_else(|| {
                LbError::Other(format!(
                    "no load balancer IP for setting up security rules for service {}",
                    service_key(service)
                ))
            })?;
        let dsts = if floating_ip_disabled(service) {
            backend_ips
        } else {
            vec![ip.clone()]
        };
        // Upstream runs these one after the other; they touch disjoint resources (the NSG;
        // the LB of the other kind and the public IPs), so the reference CCM overlaps them.
        let keep = (!internal).then(|| pip_name(cluster, service, false));
        let other_kind = self.lb_name(cluster, !internal);
        tokio::try_join!(self.reconcile_nsg(service, internal, &dsts, true), async {
            self.remove_service_from_lb(&other_kind, service).await?;
            self.reconcile_public_ips(cluster, service, keep.as_deref())
                .await
        },)?;
        Ok(ingress(&ip))
    }

    async fn delete_once(&self, cluster: &str, service: &Service) -> Result<(), LbError> {
        let internal = is_internal(service);
        for kind in [internal, !internal] {
            let lb_name = self.lb_name(cluster, kind);
            let lb = self
                .client
                .get_opt_or_created(&self.network_path("loadBalancers", &lb_name), NETWORK_API)
                .await?;
            if let Some(lb) = lb {
                let mut dsts: Vec<String> = self
                    .frontend_ip(&lb, service, None)
                    .await?
                    .into_iter()
                    .collect();
                if floating_ip_disabled(service) {
                    dsts = self.pool_member_ips(&lb).await?;
                }
                self.reconcile_nsg(service, kind, &dsts, false).await?;
            }
        }
        self.remove_service_from_lb(&self.lb_name(cluster, internal), service)
            .await?;
        self.remove_service_from_lb(&self.lb_name(cluster, !internal), service)
            .await?;
        self.reconcile_public_ips(cluster, service, None).await
    }

    /// The status of the Service's frontend on its LB (`getServiceLoadBalancer`'s
    /// `existsLb`): `None` without a frontend, an empty status when its address cannot be
    /// read (it exists all the same, and the delete path must remove it). A 404 moments
    /// after this CCM created the LB, before any read found it, is not trusted
    /// ([`super::client::ArmClient::get_opt_or_created`]).
    async fn service_lb_status(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        let lb_path = self.network_path(
            "loadBalancers",
            &self.lb_name(cluster, is_internal(service)),
        );
        let Some(lb) = self
            .client
            .get_opt_or_created(&lb_path, NETWORK_API)
            .await?
        else {
            return Ok(None);
        };
        let has_frontend = lb["properties"]["frontendIPConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| owned_by(name_of(f), service));
        if !has_frontend {
            return Ok(None);
        }
        Ok(Some(
            self.frontend_ip(&lb, service, None)
                .await?
                .map(|ip| ingress(&ip))
                .unwrap_or_default(),
        ))
    }

    /// Retries a whole reconcile after a 412 (someone wrote in between).
    async fn with_412_retry<T, F, Fut>(&self, mut f: F) -> Result<T, LbError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, LbError>>,
    {
        let mut attempt = 0;
        loop {
            match f().await {
                Err(LbError::Other(m)) if attempt < 2 && m.contains(" 412 ") => {
                    attempt += 1;
                    tracing::info!("etag was stale (412); reading again");
                }
                other => return other,
            }
        }
    }
}

fn load_balancer_ip(service: &Service) -> Option<String> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.clone())
        .filter(|ip| !ip.is_empty())
}

/// What the reference CCM refuses rather than half-serves.
fn check_supported(service: &Service) -> Result<(), LbError> {
    let spec = service.spec.clone().unwrap_or_default();
    if spec.ports.as_ref().is_none_or(|p| p.is_empty()) {
        return Err(LbError::Other("no service ports provided".to_owned()));
    }
    if spec
        .ip_families
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == "IPv6"))
    {
        return Err(LbError::Other(
            "IPv6 and dual-stack load balancers are not implemented by the reference CCM"
                .to_owned(),
        ));
    }
    if !is_internal(service)
        && (load_balancer_ip(service).is_some()
            || annotation(service, ANNOTATION_PIP_NAME).is_some())
    {
        return Err(LbError::Other(
            "user-assigned public IPs (spec.loadBalancerIP / azure-pip-name) are not implemented by the reference CCM".to_owned(),
        ));
    }
    if service.metadata.uid.as_deref().is_none_or(str::is_empty) {
        return Err(LbError::Other(
            "service has no UID to name its frontend after".to_owned(),
        ));
    }
    Ok(())
}

impl LoadBalancer for Azure {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        // The delete path asks this before EnsureLoadBalancerDeleted: a "not found" read
        // moments after this CCM created the LB or the public IP must not skip the delete.
        if let Some(status) = self.service_lb_status(cluster, service).await? {
            return Ok(Some(status));
        }
        // Upstream's GetLoadBalancer answers "exists" also when only the Service's public
        // IP does (an ensure that failed between the two), so the delete path cleans it.
        let pip = self
            .client
            .get_opt_or_created(
                &self.network_path("publicIPAddresses", &pip_name(cluster, service, false)),
                NETWORK_API,
            )
            .await?;
        Ok(pip
            .filter(|p| service_owns_pip(p, service, cluster))
            .map(|_| LoadBalancerStatus::default()))
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        let _guard = self.lb_lock.lock().await;
        self.with_412_retry(|| self.ensure_once(cluster, service, nodes))
            .await
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        // UpdateLoadBalancer: only when the Service is on its LB and not being deleted, then
        // EnsureLoadBalancer (azure_loadbalancer.go `shouldUpdateLoadBalancer`). The check
        // holds the lock the delete holds: a node sync that raced a delete must find the
        // frontend gone, not bring it (and its public IP) back.
        if service.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let _guard = self.lb_lock.lock().await;
        if self.service_lb_status(cluster, service).await?.is_none() {
            return Ok(());
        }
        self.with_412_retry(|| self.ensure_once(cluster, service, nodes))
            .await
            .map(|_| ())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        let _guard = self.lb_lock.lock().await;
        self.with_412_retry(|| self.delete_once(cluster, service))
            .await
    }
}

#[cfg(test)]
mod tests;
