//! OpenStack load balancers (Octavia), the provider side of the service-lb controller.
//!
//! Exists so LoadBalancer Services get a real cloud load balancer through the same wire
//! calls `kubernetes/cloud-provider-openstack` makes (`pkg/openstack/loadbalancer.go`,
//! `pkg/util/openstack/loadbalancer.go`, gophercloud `openstack/loadbalancer/v2`):
//! - name `kube_service_<cluster>_<ns>_<svc>` (<= 255); an LB is found first by the ID in
//!   the Service annotation `loadbalancer.openstack.org/load-balancer-id`, else with
//!   `GET /lbaas/loadbalancers?name=` (legacy `a<uid>`[:32] as fallback), hits in
//!   `DELETED`/`PENDING_DELETE` skipped; the ID is written back to the annotation after
//!   every ensure (`ensureOctaviaLoadBalancer`, `loadbalancer_service_patcher.go`);
//! - an LB found by ID whose name carries another cluster name (`--cluster-name` changed)
//!   is renamed with its listeners, pools and monitors, with a Warning `LoadBalancerRename`
//!   (`pkg/openstack/loadbalancer_rename.go`), so it keeps its VIP and floating IP;
//! - one fully-populated `POST /lbaas/loadbalancers` (listener per Service port, default
//!   pool with one member per node `InternalIP:nodePort`, optional health monitor);
//! - every write is followed by a wait for `ACTIVE` (`GET /lbaas/loadbalancers/{id}`,
//!   upstream 1 s x1.2, 23 steps; we add one fast 50 ms poll first so immediate clouds are
//!   quick); a 409 (LB immutable while PENDING_*) waits for ACTIVE and retries;
//! - reconcile: listeners by (protocol, port), pools, batch `PUT /pools/{id}/members`,
//!   `allowed_cidrs` from source ranges, tags;
//! - floating IP on the VIP port when `[LoadBalancer] floating-network-id` is set, else
//!   the VIP is the ingress; `spec.loadBalancerIP` picks the FIP (or the VIP if internal);
//! - delete: own floating IP, `DELETE /lbaas/loadbalancers/{id}?cascade=true`, poll to 404.
//!
//! Not implemented: shared LBs, `loadbalancer.openstack.org/*` annotations, security groups,
//! LoadBalancerClass sections, serial (non fully-populated) creation.
//!
//! By role: names, the ID annotation's name and the naming scheme are in `naming`, the
//! wait schedule in `poll`, the Octavia/Neutron answer shapes in `wire`, the ID annotation
//! and the rename after a `--cluster-name` change in `rename`; this file has the lookups,
//! create, reconcile, floating IPs and delete.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use serde_json::{Value, json};

use super::OpenStack;
use super::client::{ClientError, Service as Endpoint};
use super::instances::instance_id_from_provider_id;
use crate::address::{EXTERNAL_IP, INTERNAL_IP};
use crate::cloud::{LbError, LoadBalancer};
use crate::providers::service_ranges::source_ranges;
use crate::providers::{lookup_before_create, skip_lookup_before_create};

// `naming` and `poll` are also read by the provider's `mod.rs` (the naming scheme is set
// by its factory, the poll schedule is one of its fields), so they import nothing from
// this file.
pub(super) mod naming;
pub(super) mod poll;
mod rename;
mod wire;

pub use naming::{
    LB_ID_ANNOTATION, NAME_PREFIX, cluster_of_name, has_old_cluster_name, legacy_name,
    load_balancer_name, load_balancer_name_in, use_name_scheme,
};
use naming::{NAME_SCHEME, annotated_id};
pub use poll::PollSchedule;
pub use wire::OctaviaLb;
use wire::{
    FloatingIp, FloatingIpEnvelope, FloatingIpList, LbEnvelope, LbList, Listener, ListenerEnvelope,
    ListenerList, MemberList, NeutronFixedIp, NeutronPortList, Pool, PoolEnvelope,
};

/// `source.component` of the Events the provider itself records (upstream's recorder in
/// `pkg/openstack/openstack.go` `Initialize`).
const EVENT_COMPONENT: &str = "cloud-provider-openstack";
/// Reason of the Warning recorded before renaming a load balancer (upstream `eventLBRename`).
pub const EVENT_LB_RENAME: &str = "LoadBalancerRename";
const FIP_DESCRIPTION_PREFIX: &str = "Floating IP for Kubernetes external service";
/// 409 retries per write (each after a wait for ACTIVE).
const CONFLICT_RETRIES: u32 = 3;

impl From<ClientError> for LbError {
    fn from(e: ClientError) -> Self {
        LbError::Other(e.to_string())
    }
}

// --- what the Service asks for ------------------------------------------------------------

/// One listener the Service wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPort {
    pub protocol: String,
    pub port: i32,
    pub node_port: i32,
}

/// Listeners per Service port (CPO: TCP, UDP, SCTP; a port without nodePort is an error).
pub fn desired_ports(service: &Service) -> Result<Vec<DesiredPort>, LbError> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    if ports.is_empty() {
        return Err(LbError::Other("no service ports provided".to_owned()));
    }
    ports
        .iter()
        .map(|p| {
            let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
            if !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP") {
                return Err(LbError::Other(format!("unsupported protocol {protocol}")));
            }
            let node_port = p.node_port.unwrap_or(0);
            if node_port == 0 {
                return Err(LbError::Other(format!(
                    "port {} has no nodePort; members need one",
                    p.port
                )));
            }
            Ok(DesiredPort {
                protocol,
                port: p.port,
                node_port,
            })
        })
        .collect()
}

/// The address a node is reached at: first InternalIP, else first ExternalIP
/// (CPO `nodeAddressForLB`).
pub fn node_address(node: &Node) -> Option<String> {
    let addrs = node.status.as_ref()?.addresses.as_ref()?;
    [INTERNAL_IP, EXTERNAL_IP].iter().find_map(|kind| {
        addrs
            .iter()
            .find(|a| a.type_ == *kind)
            .map(|a| a.address.clone())
    })
}

fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn load_balancer_ip(service: &Service) -> Option<String> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.clone())
        .filter(|ip| !ip.is_empty())
}

/// ETP=Local: the health check port kube-proxy serves `/healthz` on.
fn health_check_node_port(service: &Service) -> Option<i32> {
    let spec = service.spec.as_ref()?;
    (spec.external_traffic_policy.as_deref() == Some("Local"))
        .then_some(spec.health_check_node_port)
        .flatten()
        .filter(|p| *p > 0)
}

fn ingress_status(ip: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_owned()),
            ip_mode: Some("VIP".to_owned()),
            ..Default::default()
        }]),
    }
}

/// The address/port pairs a pool should hold.
fn member_key(address: &str, port: i32, monitor: Option<i32>) -> (String, i32, Option<i32>) {
    (address.to_owned(), port, monitor)
}

enum Write<'a> {
    Post(&'a Value),
    Put(&'a Value),
    Delete,
}

impl OpenStack {
    fn member_bodies(
        &self,
        nodes: &[Node],
        port: &DesiredPort,
        monitor_port: Option<i32>,
        subnet: Option<&str>,
    ) -> Vec<Value> {
        nodes
            .iter()
            .filter_map(|n| {
                let address = node_address(n)?;
                let mut m = json!({
                    "name": n.metadata.name.clone().unwrap_or_default(),
                    "address": address,
                    "protocol_port": port.node_port,
                });
                if let Some(subnet) = subnet {
                    m["subnet_id"] = json!(subnet);
                }
                if let Some(mp) = monitor_port {
                    m["monitor_port"] = json!(mp);
                }
                Some(m)
            })
            .collect()
    }

    fn monitor_body(&self, name: &str, port: &DesiredPort, hc_port: Option<i32>) -> Value {
        let opts = &self.config.load_balancer;
        let mut body = json!({
            "name": name,
            "delay": opts.monitor_delay,
            "timeout": opts.monitor_timeout,
            "max_retries": opts.monitor_max_retries,
            "max_retries_down": opts.monitor_max_retries_down,
        });
        if hc_port.is_some() {
            body["type"] = json!("HTTP");
            body["url_path"] = json!("/healthz");
            body["http_method"] = json!("GET");
            body["expected_codes"] = json!("200");
        } else {
            body["type"] = json!(match port.protocol.as_str() {
                "UDP" => "UDP-CONNECT",
                "SCTP" => "SCTP",
                _ => "TCP",
            });
        }
        body
    }

    /// The Service's LB: the one its ID annotation names, else the one named for it (or
    /// its legacy name); ones being deleted are skipped.
    ///
    /// Upstream fails the sync when the annotated ID is gone; we fall back to the name,
    /// so an LB deleted out of band is recreated (case LB-21) instead of wedging the Service.
    pub async fn find_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<OctaviaLb>, LbError> {
        if let Some(id) = annotated_id(service) {
            match self
                .client
                .get_json::<LbEnvelope>(
                    Endpoint::LoadBalancer,
                    &format!("/lbaas/loadbalancers/{id}"),
                    &[],
                )
                .await
            {
                Ok(env)
                    if !matches!(
                        env.loadbalancer.provisioning_status.as_str(),
                        "DELETED" | "PENDING_DELETE"
                    ) =>
                {
                    return Ok(Some(env.loadbalancer));
                }
                Ok(_) | Err(ClientError::NotFound { .. }) => {
                    tracing::info!(
                        service = %service_key(service),
                        "load balancer {id} from {LB_ID_ANNOTATION} is gone; looking it up by name"
                    );
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut names = vec![load_balancer_name(cluster, service)];
        names.extend(legacy_name(service));
        for name in names {
            let list: LbList = self
                .client
                .get_json(
                    Endpoint::LoadBalancer,
                    "/lbaas/loadbalancers",
                    &[("name", name.as_str())],
                )
                .await?;
            let mut live = list.loadbalancers.into_iter().filter(|lb| {
                !matches!(
                    lb.provisioning_status.as_str(),
                    "DELETED" | "PENDING_DELETE"
                )
            });
            match (live.next(), live.next()) {
                (Some(lb), None) => return Ok(Some(lb)),
                (Some(_), Some(_)) => {
                    return Err(LbError::Other(format!(
                        "more than one load balancer named {name}"
                    )));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// EnsureLoadBalancer's create-or-update lookup: [`OpenStack::find_load_balancer`], or
    /// always `None` with `skip` (TEST ONLY `--testing-break=skip-lookup-before-create`:
    /// Octavia takes duplicate names, so every re-ensure makes one more load balancer).
    pub async fn find_for_ensure(
        &self,
        skip: bool,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<OctaviaLb>, LbError> {
        lookup_before_create(skip, self.find_load_balancer(cluster, service)).await
    }

    /// Polls until ACTIVE; ERROR and running out of steps are errors.
    async fn wait_active(&self, id: &str) -> Result<OctaviaLb, LbError> {
        let mut last = String::new();
        for delay in self.lb_poll.delays() {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let env: LbEnvelope = self
                .client
                .get_json(
                    Endpoint::LoadBalancer,
                    &format!("/lbaas/loadbalancers/{id}"),
                    &[],
                )
                .await?;
            match env.loadbalancer.provisioning_status.as_str() {
                "ACTIVE" => return Ok(env.loadbalancer),
                "ERROR" => {
                    return Err(LbError::Other(format!(
                        "load balancer {id} is in provisioning status ERROR"
                    )));
                }
                other => last = other.to_owned(),
            }
        }
        Err(LbError::Other(format!(
            "timed out waiting for load balancer {id} to be ACTIVE (last status {last})"
        )))
    }

    /// Polls until the LB answers 404.
    async fn wait_deleted(&self, id: &str) -> Result<(), LbError> {
        for delay in self.lb_poll.delays() {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            match self
                .client
                .get_json::<LbEnvelope>(
                    Endpoint::LoadBalancer,
                    &format!("/lbaas/loadbalancers/{id}"),
                    &[],
                )
                .await
            {
                Err(ClientError::NotFound { .. }) => return Ok(()),
                Ok(env) if env.loadbalancer.provisioning_status == "DELETED" => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(LbError::Other(format!(
            "timed out waiting for load balancer {id} to be deleted"
        )))
    }

    /// One Octavia write on LB `lb_id`: on 409 wait for ACTIVE and retry; afterwards wait
    /// for ACTIVE again (every write makes the LB PENDING_UPDATE).
    async fn lb_write(&self, lb_id: &str, path: &str, write: Write<'_>) -> Result<Value, LbError> {
        let mut attempt = 0;
        loop {
            let result = match &write {
                Write::Post(body) => {
                    self.client
                        .post_json::<Value>(Endpoint::LoadBalancer, path, body)
                        .await
                }
                Write::Put(body) => self
                    .client
                    .put(Endpoint::LoadBalancer, path, body)
                    .await
                    .map(|()| Value::Null),
                Write::Delete => self
                    .client
                    .delete(Endpoint::LoadBalancer, path, &[])
                    .await
                    .map(|()| Value::Null),
            };
            match result {
                Ok(v) => {
                    self.wait_active(lb_id).await?;
                    return Ok(v);
                }
                Err(e) if e.is_conflict() && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    tracing::debug!(lb = lb_id, "{e}; waiting for ACTIVE before retrying");
                    self.wait_active(lb_id).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// `[LoadBalancer] subnet-id`, else the subnet of the first node's port that carries
    /// the node's address (CPO `getSubnetIDForLB`).
    async fn vip_subnet(&self, nodes: &[Node]) -> Result<String, LbError> {
        let opts = &self.config.load_balancer;
        if !opts.subnet_id.is_empty() {
            return Ok(opts.subnet_id.clone());
        }
        for node in nodes {
            let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.clone()) else {
                continue;
            };
            let Ok(server_id) = instance_id_from_provider_id(&provider_id) else {
                continue;
            };
            let ports: NeutronPortList = self
                .client
                .get_json(
                    Endpoint::Network,
                    "/ports",
                    &[("device_id", server_id.as_str())],
                )
                .await?;
            let address = node_address(node);
            let fixed: Vec<&NeutronFixedIp> = ports
                .ports
                .iter()
                .flat_map(|p| p.fixed_ips.iter())
                .collect();
            let chosen = fixed
                .iter()
                .find(|f| Some(&f.ip_address) == address.as_ref())
                .or_else(|| fixed.first());
            if let Some(f) = chosen.filter(|f| !f.subnet_id.is_empty()) {
                return Ok(f.subnet_id.clone());
            }
        }
        Err(LbError::Other(
            "no subnet for the load balancer VIP: set [LoadBalancer] subnet-id or give nodes a providerID and a port".to_owned(),
        ))
    }

    async fn create_load_balancer(
        &self,
        cluster: &str,
        name: &str,
        service: &Service,
        ports: &[DesiredPort],
        nodes: &[Node],
    ) -> Result<OctaviaLb, LbError> {
        let opts = &self.config.load_balancer;
        let key = service_key(service);
        let mut lb = json!({
            "name": name,
            "description": format!("Kubernetes external service {key} from cluster {cluster}"),
            "provider": opts.lb_provider,
            "tags": [name],
        });
        let subnet = if opts.network_id.is_empty() {
            let subnet = self.vip_subnet(nodes).await?;
            lb["vip_subnet_id"] = json!(subnet);
            Some(subnet)
        } else {
            lb["vip_network_id"] = json!(opts.network_id);
            None
        };
        if opts.floating_network_id.is_empty()
            && let Some(ip) = load_balancer_ip(service)
        {
            lb["vip_address"] = json!(ip);
        }
        let ranges = source_ranges(service);
        let hc_port = health_check_node_port(service);
        let listeners: Vec<Value> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let mut pool = json!({
                    "name": format!("pool_{i}_{name}"),
                    "protocol": port.protocol,
                    "lb_algorithm": opts.lb_method,
                    "members": self.member_bodies(nodes, port, hc_port, subnet.as_deref()),
                });
                if opts.create_monitor {
                    pool["healthmonitor"] =
                        self.monitor_body(&format!("monitor_{i}_{name}"), port, hc_port);
                }
                let mut listener = json!({
                    "name": format!("listener_{i}_{name}"),
                    "protocol": port.protocol,
                    "protocol_port": port.port,
                    "tags": [name],
                    "default_pool": pool,
                });
                if !ranges.is_empty() {
                    listener["allowed_cidrs"] = json!(ranges);
                }
                listener
            })
            .collect();
        lb["listeners"] = json!(listeners);
        let created: LbEnvelope = self
            .client
            .post_json(
                Endpoint::LoadBalancer,
                "/lbaas/loadbalancers",
                &json!({ "loadbalancer": lb }),
            )
            .await?;
        tracing::info!(lb = %created.loadbalancer.id, service = %key, "created load balancer {name}");
        self.wait_active(&created.loadbalancer.id).await
    }

    async fn listeners(&self, lb_id: &str) -> Result<Vec<Listener>, LbError> {
        let list: ListenerList = self
            .client
            .get_json(
                Endpoint::LoadBalancer,
                "/lbaas/listeners",
                &[("loadbalancer_id", lb_id)],
            )
            .await?;
        Ok(list.listeners)
    }

    async fn pool(&self, pool_id: &str) -> Result<Option<Pool>, LbError> {
        match self
            .client
            .get_json::<PoolEnvelope>(
                Endpoint::LoadBalancer,
                &format!("/lbaas/pools/{pool_id}"),
                &[],
            )
            .await
        {
            Ok(env) => Ok(Some(env.pool)),
            Err(ClientError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Batch-replaces the pool's members when the address/port set differs.
    async fn sync_members(
        &self,
        lb_id: &str,
        pool_id: &str,
        wanted: Vec<Value>,
    ) -> Result<bool, LbError> {
        let current: MemberList = self
            .client
            .get_json(
                Endpoint::LoadBalancer,
                &format!("/lbaas/pools/{pool_id}/members"),
                &[],
            )
            .await?;
        let have: BTreeSet<_> = current
            .members
            .iter()
            .map(|m| member_key(&m.address, m.protocol_port, m.monitor_port))
            .collect();
        let want: BTreeSet<_> = wanted
            .iter()
            .map(|m| {
                member_key(
                    m["address"].as_str().unwrap_or_default(),
                    m["protocol_port"]
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .unwrap_or(0),
                    m.get("monitor_port")
                        .and_then(Value::as_i64)
                        .and_then(|p| i32::try_from(p).ok()),
                )
            })
            .collect();
        if have == want {
            return Ok(false);
        }
        self.lb_write(
            lb_id,
            &format!("/lbaas/pools/{pool_id}/members"),
            Write::Put(&json!({ "members": wanted })),
        )
        .await?;
        Ok(true)
    }

    /// Brings listeners/pools/members/monitors of an existing LB in line with the Service.
    async fn reconcile(
        &self,
        lb: &OctaviaLb,
        service: &Service,
        ports: &[DesiredPort],
        nodes: &[Node],
    ) -> Result<(), LbError> {
        let opts = &self.config.load_balancer;
        let name = lb.name.clone();
        let subnet = (!opts.subnet_id.is_empty()).then(|| opts.subnet_id.clone());
        let ranges = source_ranges(service);
        let hc_port = health_check_node_port(service);
        let mut listeners = self.listeners(&lb.id).await?;
        let mut used = BTreeSet::new();
        for (i, port) in ports.iter().enumerate() {
            let existing = listeners
                .iter()
                .find(|l| l.protocol == port.protocol && l.protocol_port == port.port)
                .cloned();
            let listener = match existing {
                Some(l) => {
                    let have = l.allowed_cidrs.clone().unwrap_or_default();
                    if have != ranges {
                        self.lb_write(
                            &lb.id,
                            &format!("/lbaas/listeners/{}", l.id),
                            Write::Put(&json!({"listener": {"allowed_cidrs": ranges}})),
                        )
                        .await?;
                    }
                    l
                }
                None => {
                    let mut body = json!({
                        "loadbalancer_id": lb.id,
                        "name": format!("listener_{i}_{name}"),
                        "protocol": port.protocol,
                        "protocol_port": port.port,
                        "tags": [name],
                    });
                    if !ranges.is_empty() {
                        body["allowed_cidrs"] = json!(ranges);
                    }
                    let created = self
                        .lb_write(
                            &lb.id,
                            "/lbaas/listeners",
                            Write::Post(&json!({"listener": body})),
                        )
                        .await?;
                    let env: ListenerEnvelope = serde_json::from_value(created)
                        .map_err(|e| LbError::Other(format!("decoding listener: {e}")))?;
                    listeners.push(env.listener.clone());
                    env.listener
                }
            };
            used.insert(listener.id.clone());
            let pool = match listener.default_pool_id.as_deref() {
                Some(id) => self.pool(id).await?,
                None => None,
            };
            let pool = match pool {
                Some(p) => p,
                None => {
                    let body = json!({"pool": {
                        "listener_id": listener.id,
                        "name": format!("pool_{i}_{name}"),
                        "protocol": port.protocol,
                        "lb_algorithm": opts.lb_method,
                    }});
                    let created = self
                        .lb_write(&lb.id, "/lbaas/pools", Write::Post(&body))
                        .await?;
                    serde_json::from_value::<PoolEnvelope>(created)
                        .map_err(|e| LbError::Other(format!("decoding pool: {e}")))?
                        .pool
                }
            };
            let members = self.member_bodies(nodes, port, hc_port, subnet.as_deref());
            self.sync_members(&lb.id, &pool.id, members).await?;
            if opts.create_monitor && pool.healthmonitor_id.as_deref().unwrap_or("").is_empty() {
                let mut body = self.monitor_body(&format!("monitor_{i}_{name}"), port, hc_port);
                body["pool_id"] = json!(pool.id);
                self.lb_write(
                    &lb.id,
                    "/lbaas/healthmonitors",
                    Write::Post(&json!({"healthmonitor": body})),
                )
                .await?;
            }
        }
        for stale in listeners.iter().filter(|l| !used.contains(&l.id)) {
            if let Some(pool_id) = stale.default_pool_id.as_deref() {
                match self
                    .lb_write(&lb.id, &format!("/lbaas/pools/{pool_id}"), Write::Delete)
                    .await
                {
                    Ok(_) => {}
                    Err(LbError::Other(e)) if e.contains("(404)") => {}
                    Err(e) => return Err(e),
                }
            }
            self.lb_write(
                &lb.id,
                &format!("/lbaas/listeners/{}", stale.id),
                Write::Delete,
            )
            .await?;
        }
        if !lb.tags.contains(&name) {
            let mut tags = lb.tags.clone();
            tags.push(name.clone());
            self.lb_write(
                &lb.id,
                &format!("/lbaas/loadbalancers/{}", lb.id),
                Write::Put(&json!({"loadbalancer": {"tags": tags}})),
            )
            .await?;
        }
        Ok(())
    }

    async fn floating_ips_on(&self, port_id: &str) -> Result<Vec<FloatingIp>, LbError> {
        if port_id.is_empty() {
            return Ok(Vec::new());
        }
        let list: FloatingIpList = self
            .client
            .get_json(Endpoint::Network, "/floatingips", &[("port_id", port_id)])
            .await?;
        Ok(list.floatingips)
    }

    /// The FIP on the VIP port; created (or an existing `loadBalancerIP` FIP bound) when
    /// missing (CPO `ensureFloatingIP`).
    async fn ensure_floating_ip(
        &self,
        cluster: &str,
        lb: &OctaviaLb,
        service: &Service,
    ) -> Result<String, LbError> {
        if let Some(fip) = self
            .floating_ips_on(&lb.vip_port_id)
            .await?
            .into_iter()
            .next()
        {
            return Ok(fip.floating_ip_address);
        }
        let wanted_ip = load_balancer_ip(service);
        if let Some(ip) = &wanted_ip {
            let list: FloatingIpList = self
                .client
                .get_json(
                    Endpoint::Network,
                    "/floatingips",
                    &[("floating_ip_address", ip.as_str())],
                )
                .await?;
            if let Some(fip) = list.floatingips.into_iter().next() {
                self.client
                    .put(
                        Endpoint::Network,
                        &format!("/floatingips/{}", fip.id),
                        &json!({"floatingip": {"port_id": lb.vip_port_id}}),
                    )
                    .await?;
                return Ok(fip.floating_ip_address);
            }
        }
        let opts = &self.config.load_balancer;
        let mut body = json!({
            "floating_network_id": opts.floating_network_id,
            "port_id": lb.vip_port_id,
            "description": format!("{FIP_DESCRIPTION_PREFIX} {} from cluster {cluster}", service_key(service)),
        });
        if !opts.floating_subnet_id.is_empty() {
            body["subnet_id"] = json!(opts.floating_subnet_id);
        }
        if let Some(ip) = wanted_ip {
            body["floating_ip_address"] = json!(ip);
        }
        let created: FloatingIpEnvelope = self
            .client
            .post_json(
                Endpoint::Network,
                "/floatingips",
                &json!({"floatingip": body}),
            )
            .await?;
        Ok(created.floatingip.floating_ip_address)
    }

    async fn status_of(&self, lb: &OctaviaLb) -> Result<LoadBalancerStatus, LbError> {
        if !self.config.load_balancer.floating_network_id.is_empty()
            && let Some(fip) = self
                .floating_ips_on(&lb.vip_port_id)
                .await?
                .into_iter()
                .next()
        {
            return Ok(ingress_status(&fip.floating_ip_address));
        }
        Ok(ingress_status(&lb.vip_address))
    }
}

impl LoadBalancer for OpenStack {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        match self.find_load_balancer(cluster, service).await? {
            Some(lb) => Ok(Some(self.status_of(&lb).await?)),
            None => Ok(None),
        }
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        // As upstream's deferred service patcher: once the LB is known its ID is recorded,
        // also when a later step fails.
        let mut known_id = None;
        let result = self
            .ensure_octavia(cluster, service, nodes, &mut known_id)
            .await;
        let recorded = match known_id {
            Some(id) => self.record_lb_id(service, &id).await,
            None => Ok(()),
        };
        let status = result?;
        recorded?;
        Ok(status)
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        let ports = desired_ports(service)?;
        let Some(lb) = self.find_load_balancer(cluster, service).await? else {
            return Err(LbError::Other(format!(
                "load balancer {} does not exist",
                load_balancer_name(cluster, service)
            )));
        };
        let subnet = {
            let s = &self.config.load_balancer.subnet_id;
            (!s.is_empty()).then(|| s.clone())
        };
        let hc_port = health_check_node_port(service);
        let listeners = self.listeners(&lb.id).await?;
        for port in &ports {
            let Some(pool_id) = listeners
                .iter()
                .find(|l| l.protocol == port.protocol && l.protocol_port == port.port)
                .and_then(|l| l.default_pool_id.clone())
            else {
                return Err(LbError::Other(format!(
                    "load balancer {} has no pool for {}/{}",
                    lb.id, port.protocol, port.port
                )));
            };
            let members = self.member_bodies(nodes, port, hc_port, subnet.as_deref());
            self.sync_members(&lb.id, &pool_id, members).await?;
        }
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<(), LbError> {
        let Some(lb) = self.find_load_balancer(cluster, service).await? else {
            return Ok(());
        };
        if !self.config.load_balancer.floating_network_id.is_empty() {
            for fip in self.floating_ips_on(&lb.vip_port_id).await? {
                if !fip.description.starts_with(FIP_DESCRIPTION_PREFIX) {
                    continue; // not ours (pre-created for loadBalancerIP): keep it
                }
                match self
                    .client
                    .delete(Endpoint::Network, &format!("/floatingips/{}", fip.id), &[])
                    .await
                {
                    Ok(()) | Err(ClientError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let path = format!("/lbaas/loadbalancers/{}", lb.id);
        let mut attempt = 0;
        loop {
            match self
                .client
                .delete(Endpoint::LoadBalancer, &path, &[("cascade", "true")])
                .await
            {
                Ok(()) | Err(ClientError::NotFound { .. }) => break,
                Err(e) if e.is_conflict() && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    self.wait_active(&lb.id).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.wait_deleted(&lb.id).await
    }
}

impl OpenStack {
    /// [`LoadBalancer::ensure_load_balancer`]'s work; `known_id` is set as soon as the LB
    /// is found or created.
    async fn ensure_octavia(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
        known_id: &mut Option<String>,
    ) -> Result<LoadBalancerStatus, LbError> {
        let ports = desired_ports(service)?;
        let name = load_balancer_name(cluster, service);
        let lb = match self
            .find_for_ensure(skip_lookup_before_create(), cluster, service)
            .await?
        {
            None => {
                let lb = self
                    .create_load_balancer(cluster, &name, service, &ports, nodes)
                    .await?;
                *known_id = Some(lb.id.clone());
                lb
            }
            Some(lb) => {
                *known_id = Some(lb.id.clone());
                let mut lb = if lb.provisioning_status == "ACTIVE" {
                    lb
                } else {
                    self.wait_active(&lb.id).await?
                };
                // Only an LB found through the annotation can carry another cluster's name.
                if annotated_id(service) == Some(lb.id.as_str())
                    && has_old_cluster_name(&lb.name, cluster)
                {
                    lb = self.rename_load_balancer(service, lb, &name).await?;
                }
                self.reconcile(&lb, service, &ports, nodes).await?;
                lb
            }
        };
        if self.config.load_balancer.floating_network_id.is_empty() {
            return Ok(ingress_status(&lb.vip_address));
        }
        let ip = self.ensure_floating_ip(cluster, &lb, service).await?;
        Ok(ingress_status(&ip))
    }
}

#[cfg(test)]
mod tests;
