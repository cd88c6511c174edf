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

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use serde_json::{Value, json};

use super::Azure;
use super::client::{ArmError, NETWORK_API};
use super::instances::last_segment;
use super::nsg;
use crate::cloud::{CloudError, LbError, LoadBalancer};
use crate::providers::{lookup_before_create, skip_lookup_before_create};

pub const ANNOTATION_INTERNAL: &str = "service.beta.kubernetes.io/azure-load-balancer-internal";
pub const ANNOTATION_DISABLE_FLOATING_IP: &str =
    "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip";
pub const ANNOTATION_IDLE_TIMEOUT: &str =
    "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout";
pub const ANNOTATION_DISABLE_TCP_RESET: &str =
    "service.beta.kubernetes.io/azure-load-balancer-disable-tcp-reset";
pub const ANNOTATION_PROBE_PROTOCOL: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-protocol";
pub const ANNOTATION_PROBE_PATH: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-request-path";
pub const ANNOTATION_PIP_NAME: &str = "service.beta.kubernetes.io/azure-pip-name";
/// Public IP tag naming the Services using it (`consts.ServiceTagKey`).
pub const SERVICE_TAG_KEY: &str = "k8s-azure-service";
/// Public IP tag naming the cluster (`consts.ClusterNameKey`).
pub const CLUSTER_NAME_KEY: &str = "k8s-azure-cluster-name";
pub const INTERNAL_SUFFIX: &str = "-internal";
const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

impl From<ArmError> for LbError {
    fn from(e: ArmError) -> Self {
        LbError::Other(e.to_string())
    }
}

fn lb_err(e: CloudError) -> LbError {
    LbError::Other(e.to_string())
}

fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn annotation_true(service: &Service, key: &str) -> bool {
    annotation(service, key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `requiresInternalLoadBalancer`.
pub fn is_internal(service: &Service) -> bool {
    annotation_true(service, ANNOTATION_INTERNAL)
}

/// `IsK8sServiceDisableLoadBalancerFloatingIP`.
pub fn floating_ip_disabled(service: &Service) -> bool {
    annotation_true(service, ANNOTATION_DISABLE_FLOATING_IP)
}

/// `cloudprovider.DefaultLoadBalancerName`: `a` + UID without dashes, at most 32 chars.
pub fn default_lb_name(service: &Service) -> String {
    let mut name = format!(
        "a{}",
        service
            .metadata
            .uid
            .as_deref()
            .unwrap_or_default()
            .replace('-', "")
    );
    name.truncate(32);
    name
}

/// `<ns>/<name>` (`getServiceName`).
pub fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_dual_stack(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .is_some_and(|f| f.len() == 2)
}

/// `getResourceByIPFamily`.
pub fn by_ip_family(resource: &str, dual_stack: bool, ipv6: bool) -> String {
    if dual_stack && ipv6 {
        format!("{resource}-IPv6")
    } else {
        resource.to_owned()
    }
}

/// `getLoadBalancerRuleName` (no internal-subnet segment).
pub fn rule_name(service: &Service, protocol: &str, port: i32, ipv6: bool) -> String {
    by_ip_family(
        &format!("{}-{protocol}-{port}", default_lb_name(service)),
        is_dual_stack(service),
        ipv6,
    )
}

/// `getPublicIPName`: `<cluster>-<a-uid>`, cut to 80 - 5.
pub fn pip_name(cluster: &str, service: &Service, ipv6: bool) -> String {
    let mut name = format!("{cluster}-{}", default_lb_name(service));
    name.truncate(75);
    by_ip_family(&name, is_dual_stack(service), ipv6)
}

fn eq_ci(a: Option<&str>, b: Option<&str>) -> bool {
    a.unwrap_or_default()
        .eq_ignore_ascii_case(b.unwrap_or_default())
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// `serviceOwnsRule` / `serviceOwnsFrontendIP`: the name starts with `a<uid>`.
fn owned_by(name: &str, service: &Service) -> bool {
    name.to_ascii_uppercase()
        .starts_with(&default_lb_name(service).to_ascii_uppercase())
}

/// The node's first InternalIP address.
fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// Whether `node` is a control-plane node (`isControlPlaneNode`).
pub fn is_control_plane(node: &Node) -> bool {
    let Some(labels) = node.metadata.labels.as_ref() else {
        return false;
    };
    CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l))
        || labels
            .get("kubernetes.io/role")
            .is_some_and(|v| v == "master")
}

/// The probes and rules a Service wants on an LB.
pub fn expected_probes_and_rules(
    service: &Service,
    lb_id: &str,
    fip_id: &str,
    pool_id: &str,
    disable_outbound_snat: bool,
) -> Result<(Vec<Value>, Vec<Value>), LbError> {
    let spec = service.spec.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let probe_id = |name: &str| format!("{lb_id}/probes/{name}");
    let mut probes = Vec::new();
    let mut rules = Vec::new();
    let idle = match annotation(service, ANNOTATION_IDLE_TIMEOUT) {
        None => 4,
        Some(v) => {
            let n: i64 = v.trim().parse().map_err(|_| {
                LbError::Other(format!(
                    "error parsing idle timeout key: {ANNOTATION_IDLE_TIMEOUT}: {v:?}"
                ))
            })?;
            if !(4..=100).contains(&n) {
                return Err(LbError::Other(format!(
                    "idle timeout value must be a whole number representing minutes between 4 and 100, actual value: {n}"
                )));
            }
            n
        }
    };
    // ETP=Local: kube-proxy's health check (service/helpers NeedsHealthCheck).
    let mut local_probe: Option<Value> = None;
    if spec.external_traffic_policy.as_deref() == Some("Local")
        && spec.type_.as_deref() == Some("LoadBalancer")
    {
        let port = spec.health_check_node_port.unwrap_or(0);
        let name = rule_name(service, "TCP", port, false);
        local_probe = Some(json!({"name": name, "properties": {
            "protocol": "Http", "port": port, "requestPath": "/healthz",
            "intervalInSeconds": 5, "probeThreshold": 2}}));
    }
    let mut local_added = false;
    for port in &ports {
        let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
        let transport = match protocol.as_str() {
            "TCP" => "Tcp",
            "UDP" => "Udp",
            "SCTP" => {
                return Err(LbError::Other(
                    "SCTP is only supported on standard loadbalancer in internal mode (not implemented by the reference CCM)".to_owned(),
                ));
            }
            other => {
                return Err(LbError::Other(format!(
                    "only TCP, UDP and SCTP are supported for Azure LoadBalancers, not {other}"
                )));
            }
        };
        let name = rule_name(service, &protocol, port.port, false);
        let node_port = port.node_port.unwrap_or(0);
        let mut props = json!({
            "protocol": transport,
            "frontendPort": port.port,
            "backendPort": port.port,
            "disableOutboundSnat": disable_outbound_snat,
            "enableFloatingIP": true,
            "loadDistribution": if spec.session_affinity.as_deref() == Some("ClientIP") { "SourceIP" } else { "Default" },
            "frontendIPConfiguration": {"id": fip_id},
            "backendAddressPool": {"id": pool_id},
            "idleTimeoutInMinutes": idle,
        });
        if transport == "Tcp" {
            props["enableTcpReset"] =
                json!(!annotation_true(service, ANNOTATION_DISABLE_TCP_RESET));
        }
        if transport == "Tcp" && local_probe.is_none() {
            if node_port == 0 {
                return Err(LbError::Other(format!(
                    "port {} has no nodePort for its health probe",
                    port.port
                )));
            }
            let wanted = annotation(service, ANNOTATION_PROBE_PROTOCOL)
                .map(str::to_owned)
                .or_else(|| port.app_protocol.clone())
                .unwrap_or_else(|| "Tcp".to_owned());
            // Port-specific annotations are looked up first upstream; only the
            // appProtocol and the global annotation are modelled here.
            let wanted = annotation(
                service,
                &format!(
                    "service.beta.kubernetes.io/port_{}_health-probe_protocol",
                    port.port
                ),
            )
            .map(str::to_owned)
            .unwrap_or(wanted);
            let probe_protocol = match wanted.trim().to_ascii_lowercase().as_str() {
                "http" => "Http",
                "https" => "Https",
                _ => "Tcp",
            };
            let mut probe_props = json!({"protocol": probe_protocol, "port": node_port,
                "intervalInSeconds": 5, "probeThreshold": 2});
            if probe_protocol != "Tcp" {
                probe_props["requestPath"] =
                    json!(annotation(service, ANNOTATION_PROBE_PATH).unwrap_or("/"));
            }
            props["probe"] = json!({"id": probe_id(&name)});
            probes.push(json!({"name": name, "properties": probe_props}));
        } else if let Some(lp) = &local_probe {
            // ETP Local: every rule, TCP or UDP, uses the health-check probe.
            props["probe"] = json!({"id": probe_id(name_of(lp))});
            if !local_added {
                probes.push(lp.clone());
                local_added = true;
            }
        }
        if floating_ip_disabled(service) {
            props["backendPort"] = json!(node_port);
            props["enableFloatingIP"] = json!(false);
        }
        rules.push(json!({"name": name, "properties": props}));
    }
    Ok((probes, rules))
}

/// `findProbe`'s comparison.
pub fn probe_matches(existing: &Value, expected: &Value) -> bool {
    let num = |v: &Value, k: &str| {
        v.pointer(&format!("/properties/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let s = |v: &Value, k: &str| str_at(v, &format!("/properties/{k}")).map(str::to_owned);
    name_of(existing).eq_ignore_ascii_case(name_of(expected))
        && num(existing, "port") == num(expected, "port")
        && eq_ci(
            s(existing, "protocol").as_deref(),
            s(expected, "protocol").as_deref(),
        )
        && eq_ci(
            s(existing, "requestPath").as_deref(),
            s(expected, "requestPath").as_deref(),
        )
        && num(existing, "intervalInSeconds") == num(expected, "intervalInSeconds")
        && num(existing, "probeThreshold") == num(expected, "probeThreshold")
}

/// `findRule` / `equalLoadBalancingRulePropertiesFormat` (with `wantLB`).
pub fn rule_matches(existing: &Value, expected: &Value) -> bool {
    if !name_of(existing).eq_ignore_ascii_case(name_of(expected)) {
        return false;
    }
    let (s, t) = (&existing["properties"], &expected["properties"]);
    let id = |v: &Value, k: &str| {
        v.get(k)
            .and_then(|r| r.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let sub_eq = |k: &str| match (id(s, k), id(t, k)) {
        (None, None) => true,
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(&b),
        _ => false,
    };
    let flag = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let tcp = s.get("protocol").and_then(Value::as_str) == Some("Tcp");
    let mut same = s.get("protocol") == t.get("protocol")
        && (!tcp || flag(s, "enableTcpReset") == flag(t, "enableTcpReset"))
        && sub_eq("frontendIPConfiguration")
        && sub_eq("backendAddressPool")
        && s.get("loadDistribution") == t.get("loadDistribution")
        && s.get("frontendPort") == t.get("frontendPort")
        && s.get("backendPort") == t.get("backendPort")
        && sub_eq("probe")
        && s.get("enableFloatingIP") == t.get("enableFloatingIP")
        && flag(s, "disableOutboundSnat") == flag(t, "disableOutboundSnat");
    if let (Some(a), Some(b)) = (s.get("idleTimeoutInMinutes"), t.get("idleTimeoutInMinutes"))
        && !a.is_null()
        && !b.is_null()
    {
        same = same && a == b;
    }
    same
}

/// Removes the Service's items no longer expected and adds the missing ones
/// (`reconcileLBProbes` / `reconcileLBRules`); whether anything changed.
fn reconcile_list(
    list: &mut Vec<Value>,
    expected: &[Value],
    service: &Service,
    matches: fn(&Value, &Value) -> bool,
) -> bool {
    let mut dirty = false;
    let before = list.len();
    list.retain(|item| {
        !owned_by(name_of(item), service) || expected.iter().any(|e| matches(item, e))
    });
    dirty |= list.len() != before;
    for e in expected {
        if !list.iter().any(|item| matches(item, e)) {
            list.push(e.clone());
            dirty = true;
        }
    }
    dirty
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

fn etag(v: &Value) -> Option<String> {
    v.get("etag").and_then(Value::as_str).map(str::to_owned)
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

/// The service tag value of a public IP as a list (`parsePIPServiceTag`).
fn pip_services(pip: &Value) -> Vec<String> {
    let tags = pip.get("tags").and_then(Value::as_object);
    let value = tags
        .and_then(|t| {
            t.iter()
                .find(|(k, _)| {
                    k.eq_ignore_ascii_case(SERVICE_TAG_KEY) || k.eq_ignore_ascii_case("service")
                })
                .and_then(|(_, v)| v.as_str())
        })
        .unwrap_or_default();
    value
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn pip_cluster(pip: &Value) -> Option<String> {
    pip.get("tags").and_then(Value::as_object).and_then(|t| {
        t.iter()
            .find(|(k, _)| {
                k.eq_ignore_ascii_case(CLUSTER_NAME_KEY)
                    || k.eq_ignore_ascii_case("kubernetes-cluster-name")
            })
            .and_then(|(_, v)| v.as_str())
            .map(str::to_owned)
    })
}

/// `serviceOwnsPublicIP` for PIPs this CCM made: the Service is in the service tag and
/// the cluster tag, if any, names this cluster.
pub fn service_owns_pip(pip: &Value, service: &Service, cluster: &str) -> bool {
    let key = service_key(service);
    pip_services(pip)
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&key))
        && pip_cluster(pip).is_none_or(|c| c.is_empty() || c.eq_ignore_ascii_case(cluster))
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

    /// Public IP `name`, created or bound to the Service (`ensurePublicIPExists`).
    async fn ensure_public_ip(
        &self,
        cluster: &str,
        service: &Service,
        name: &str,
    ) -> Result<Value, LbError> {
        let path = self.network_path("publicIPAddresses", name);
        let key = service_key(service);
        match self.client.get_opt(&path, NETWORK_API, &[]).await? {
            Some(mut pip) => {
                let mut changed = false;
                let mut services = pip_services(&pip);
                if !services.iter().any(|s| s.eq_ignore_ascii_case(&key)) {
                    services.push(key);
                    if !pip["tags"].is_object() {
                        pip["tags"] = json!({});
                    }
                    pip["tags"][SERVICE_TAG_KEY] = json!(services.join(","));
                    changed = true;
                }
                if !str_at(&pip, "/sku/name").is_some_and(|s| s.eq_ignore_ascii_case("Standard")) {
                    pip["sku"] = json!({"name": "Standard"});
                    changed = true;
                }
                if !changed {
                    return Ok(pip);
                }
                let tag = etag(&pip);
                Ok(self
                    .client
                    .put(&path, NETWORK_API, &pip, tag.as_deref())
                    .await?)
            }
            None => {
                let mut pip = json!({
                    "name": name,
                    "location": self.config.location,
                    "sku": {"name": "Standard"},
                    "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
                    "tags": {SERVICE_TAG_KEY: key, CLUSTER_NAME_KEY: cluster},
                });
                let zones = self.location_zones();
                if !zones.is_empty() {
                    pip["zones"] = json!(zones);
                }
                Ok(self.client.put(&path, NETWORK_API, &pip, None).await?)
            }
        }
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

    /// `EnsureHostsInPool` plus removal of members whose node is gone or excluded; the
    /// private IPs of the members.
    async fn reconcile_backend_hosts(
        &self,
        lb: &Value,
        pool_id: &str,
        nodes: &[Node],
    ) -> Result<Vec<String>, LbError> {
        let eligible: Vec<&Node> = nodes.iter().filter(|n| !is_control_plane(n)).collect();
        let names: BTreeSet<String> = eligible
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .map(|n| n.to_ascii_lowercase())
            .collect();
        let lb_base = |id: &str| -> String {
            let lower = id.to_ascii_lowercase();
            let name = lower
                .split("/loadbalancers/")
                .nth(1)
                .and_then(|r| r.split('/').next())
                .unwrap_or_default()
                .to_owned();
            name.strip_suffix(INTERNAL_SUFFIX)
                .map(str::to_owned)
                .unwrap_or(name)
        };
        // The pool's members as ARM reports them (`backendIPConfigurations`).
        let members: Vec<String> = lb["properties"]["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                str_at(p, "/id").is_some_and(|id| id.eq_ignore_ascii_case(pool_id))
                    || name_of(p).eq_ignore_ascii_case(last_segment(pool_id))
            })
            .flat_map(|p| {
                p["properties"]["backendIPConfigurations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let member_keys: BTreeSet<String> =
            members.iter().map(|m| m.to_ascii_lowercase()).collect();
        let known = self
            .ip_configs
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let mut ips = Vec::new();
        // IP configurations of eligible nodes (lowercased): members to keep.
        let mut kept: BTreeSet<String> = BTreeSet::new();
        for node in &eligible {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let key = node_name.to_ascii_lowercase();
            // Already a member: its IP as upstream takes a member's, from the Node's
            // addresses (`azure_loadbalancer_backendpool.go` `GetBackendPrivateIPs` reads
            // `nodePrivateIPs`, which `azure.go` `updateNodeCaches` fills from Nodes).
            if let Some(config) = known.get(&key).filter(|c| member_keys.contains(*c))
                && let Some(ip) = internal_ip(node)
            {
                kept.insert(config.clone());
                ips.push(ip);
                continue;
            }
            let vm = match self.get_vm(&node_name).await {
                Ok(vm) => vm,
                Err(CloudError::InstanceNotFound) => {
                    if let Ok(mut m) = self.ip_configs.lock() {
                        m.remove(&key);
                    }
                    tracing::warn!(node = %node_name, "no VM for node; left out of the backend pool");
                    continue;
                }
                Err(e) => return Err(lb_err(e)),
            };
            for attempt in 0..3 {
                let mut nic = self.primary_nic(&vm).await.map_err(lb_err)?;
                if str_at(&nic, "/properties/provisioningState") == Some("Failed") {
                    break;
                }
                let i = super::instances::primary_ip_config_index(&nic).map_err(lb_err)?;
                if attempt == 0
                    && let Some(ip) = str_at(
                        &nic["properties"]["ipConfigurations"][i],
                        "/properties/privateIPAddress",
                    )
                {
                    ips.push(ip.to_owned());
                }
                if let Some(id) = str_at(&nic["properties"]["ipConfigurations"][i], "/id") {
                    let id = id.to_ascii_lowercase();
                    kept.insert(id.clone());
                    if let Ok(mut m) = self.ip_configs.lock() {
                        m.insert(key.clone(), id);
                    }
                }
                let config = &mut nic["properties"]["ipConfigurations"][i];
                let pools: Vec<String> = config
                    .pointer("/properties/loadBalancerBackendAddressPools")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| p.get("id").and_then(Value::as_str))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                if pools.iter().any(|p| p.eq_ignore_ascii_case(pool_id)) {
                    break;
                }
                if pools.iter().any(|p| lb_base(p) != lb_base(pool_id)) {
                    tracing::info!(node = %node_name, "node already in another load balancer's pool; omitted");
                    break;
                }
                let mut refs: Vec<Value> = pools.iter().map(|p| json!({"id": p})).collect();
                refs.push(json!({"id": pool_id}));
                config["properties"]["loadBalancerBackendAddressPools"] = json!(refs);
                match self.put_nic(&nic).await {
                    Ok(()) => break,
                    Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // Members of nodes no longer eligible (an eligible node's own configuration is
        // kept without reading its NIC).
        for ip_config_id in members
            .iter()
            .filter(|m| !kept.contains(&m.to_ascii_lowercase()))
        {
            let Some(nic_path) = nic_path_of(ip_config_id) else {
                continue;
            };
            let Some(nic) = self.client.get_opt(&nic_path, NETWORK_API, &[]).await? else {
                continue;
            };
            let vm_name = str_at(&nic, "/properties/virtualMachine/id")
                .map(last_segment)
                .unwrap_or_default()
                .to_ascii_lowercase();
            // A NIC attached to no VM is not a node's: left alone.
            if vm_name.is_empty() || names.contains(&vm_name) {
                continue;
            }
            self.remove_pool_from_nic(&nic_path, pool_id).await?;
        }
        Ok(ips)
    }

    async fn put_nic(&self, nic: &Value) -> Result<(), ArmError> {
        let id = nic.get("id").and_then(Value::as_str).unwrap_or_default();
        let path = if id.is_empty() {
            self.network_path("networkInterfaces", name_of(nic))
        } else {
            id.to_owned()
        };
        self.client
            .put(&path, NETWORK_API, nic, etag(nic).as_deref())
            .await
            .map(|_| ())
    }

    /// Takes `pool_id` out of every IP configuration of the NIC (re-read on 412).
    async fn remove_pool_from_nic(&self, nic_path: &str, pool_id: &str) -> Result<(), LbError> {
        for attempt in 0..3 {
            let Some(mut nic) = self.client.get_opt(nic_path, NETWORK_API, &[]).await? else {
                return Ok(());
            };
            let mut changed = false;
            for config in nic["properties"]["ipConfigurations"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if let Some(pools) = config
                    .pointer_mut("/properties/loadBalancerBackendAddressPools")
                    .and_then(Value::as_array_mut)
                {
                    let before = pools.len();
                    pools.retain(|p| {
                        !p.get("id")
                            .and_then(Value::as_str)
                            .is_some_and(|id| id.eq_ignore_ascii_case(pool_id))
                    });
                    changed |= pools.len() != before;
                }
            }
            if !changed {
                return Ok(());
            }
            match self
                .client
                .put(nic_path, NETWORK_API, &nic, etag(&nic).as_deref())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
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

    /// `reconcilePublicIPs`: the Service's PIPs other than `keep` are unbound, and deleted
    /// when no other Service uses them.
    async fn reconcile_public_ips(
        &self,
        cluster: &str,
        service: &Service,
        keep: Option<&str>,
    ) -> Result<(), LbError> {
        let list_path = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/publicIPAddresses",
            self.client.subscription, self.config.resource_group
        );
        let key = service_key(service);
        let mut pips = self.client.list(&list_path, NETWORK_API).await?;
        // Deletes do not trust a list that lags a create: the Service's own public IP,
        // created moments ago by this CCM, is a candidate even when not listed.
        let own = pip_name(cluster, service, false);
        if !pips.iter().any(|p| name_of(p).eq_ignore_ascii_case(&own))
            && let Some(created) = self
                .client
                .recently_created(&self.network_path("publicIPAddresses", &own))
        {
            pips.push(created);
        }
        for mut pip in pips {
            let name = name_of(&pip).to_owned();
            if keep.is_some_and(|k| k.eq_ignore_ascii_case(&name))
                || !service_owns_pip(&pip, service, cluster)
            {
                continue;
            }
            let path = self.network_path("publicIPAddresses", &name);
            let rest: Vec<String> = pip_services(&pip)
                .into_iter()
                .filter(|s| !s.eq_ignore_ascii_case(&key))
                .collect();
            if rest.is_empty() {
                self.client.delete(&path, NETWORK_API).await?;
            } else {
                pip["tags"][SERVICE_TAG_KEY] = json!(rest.join(","));
                let tag = etag(&pip);
                self.client
                    .put(&path, NETWORK_API, &pip, tag.as_deref())
                    .await?;
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

    /// Private IPs of an LB's pool members (`GetBackendPrivateIPs`).
    async fn pool_member_ips(&self, lb: &Value) -> Result<Vec<String>, LbError> {
        let mut out = Vec::new();
        for pool in lb["properties"]["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for c in pool["properties"]["backendIPConfigurations"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let Some(id) = c.get("id").and_then(Value::as_str) else {
                    continue;
                };
                let Some(nic_path) = nic_path_of(id) else {
                    continue;
                };
                if let Some(nic) = self.client.get_opt(&nic_path, NETWORK_API, &[]).await? {
                    for config in nic["properties"]["ipConfigurations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        if str_at(config, "/id").is_some_and(|cid| cid.eq_ignore_ascii_case(id))
                            && let Some(ip) = str_at(config, "/properties/privateIPAddress")
                        {
                            out.push(ip.to_owned());
                        }
                    }
                }
            }
        }
        Ok(out)
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

/// The NIC path of an IP configuration ID (`.../networkInterfaces/<nic>/ipConfigurations/<c>`).
pub fn nic_path_of(ip_config_id: &str) -> Option<String> {
    let lower = ip_config_id.to_ascii_lowercase();
    let i = lower.find("/ipconfigurations/")?;
    Some(ip_config_id[..i].to_owned())
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
mod tests {
    use super::*;

    fn svc(annotations: Value, spec: Value) -> Service {
        let mut s = json!({"type": "LoadBalancer",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                      {"port": 53, "nodePort": 30053, "protocol": "UDP"}]});
        if let (Some(o), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                o.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "prod",
                         "uid": "3a0fb0c4-8a0e-4c2b-9f0a-2b9a5ad3b4c1", "annotations": annotations},
            "spec": s
        }))
        .unwrap_or_default()
    }

    #[test]
    fn names_follow_upstream() {
        let s = svc(json!({}), json!({}));
        // DefaultLoadBalancerName cuts `a` + 32 hex digits to 32 characters.
        assert_eq!(default_lb_name(&s), "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c");
        assert_eq!(
            rule_name(&s, "TCP", 80, false),
            "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-80"
        );
        assert_eq!(
            pip_name("kubernetes", &s, false),
            "kubernetes-a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c"
        );
        let dual = svc(json!({}), json!({"ipFamilies": ["IPv4", "IPv6"]}));
        assert_eq!(
            rule_name(&dual, "UDP", 53, true),
            "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-UDP-53-IPv6"
        );
        assert_eq!(
            rule_name(&dual, "UDP", 53, false),
            "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-UDP-53"
        );
        assert_eq!(pip_name(&"c".repeat(100), &s, false).len(), 75);
        assert_eq!(service_key(&s), "prod/web");
        assert!(!is_internal(&s));
        assert!(is_internal(&svc(
            json!({ANNOTATION_INTERNAL: "True"}),
            json!({})
        )));
        assert_eq!(
            nic_path_of("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-1/ipConfigurations/ipconfig1").as_deref(),
            Some("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-1")
        );
    }

    #[test]
    fn cluster_policy_probes_per_tcp_port() {
        let s = svc(json!({}), json!({}));
        let (probes, rules) =
            expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", false).expect("ok");
        assert_eq!(probes.len(), 1, "UDP gets no probe");
        assert_eq!(
            probes[0]["properties"],
            json!({"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5, "probeThreshold": 2})
        );
        assert_eq!(
            rules[0]["properties"]["probe"]["id"],
            "/lb/probes/a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-80"
        );
        assert_eq!(rules[0]["properties"]["backendPort"], 80);
        assert_eq!(rules[0]["properties"]["enableFloatingIP"], true);
        assert_eq!(rules[0]["properties"]["enableTcpReset"], true);
        assert_eq!(rules[0]["properties"]["idleTimeoutInMinutes"], 4);
        assert_eq!(rules[1]["properties"]["protocol"], "Udp");
        assert!(rules[1]["properties"].get("probe").is_none());
        assert!(rules[1]["properties"].get("enableTcpReset").is_none());
    }

    #[test]
    fn local_policy_uses_the_health_check_port() {
        let s = svc(
            json!({}),
            json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
        );
        let (probes, rules) =
            expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", false).expect("ok");
        assert_eq!(probes.len(), 1);
        assert_eq!(
            probes[0]["name"],
            "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-32000"
        );
        assert_eq!(probes[0]["properties"]["protocol"], "Http");
        assert_eq!(probes[0]["properties"]["requestPath"], "/healthz");
        for r in &rules {
            assert_eq!(
                r["properties"]["probe"]["id"],
                "/lb/probes/a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-32000"
            );
        }
    }

    #[test]
    fn annotations_change_rules_and_probes() {
        let s = svc(
            json!({ANNOTATION_DISABLE_FLOATING_IP: "true", ANNOTATION_IDLE_TIMEOUT: "30",
                   ANNOTATION_PROBE_PROTOCOL: "http", ANNOTATION_DISABLE_TCP_RESET: "true"}),
            json!({"sessionAffinity": "ClientIP"}),
        );
        let (probes, rules) =
            expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", true).expect("ok");
        assert_eq!(probes[0]["properties"]["protocol"], "Http");
        assert_eq!(probes[0]["properties"]["requestPath"], "/");
        let r = &rules[0]["properties"];
        assert_eq!(r["backendPort"], 30080);
        assert_eq!(r["enableFloatingIP"], false);
        assert_eq!(r["idleTimeoutInMinutes"], 30);
        assert_eq!(r["enableTcpReset"], false);
        assert_eq!(r["loadDistribution"], "SourceIP");
        assert_eq!(r["disableOutboundSnat"], true);
        let bad = svc(json!({ANNOTATION_IDLE_TIMEOUT: "2"}), json!({}));
        assert!(expected_probes_and_rules(&bad, "/lb", "/f", "/p", false).is_err());
    }

    #[test]
    fn matching_ignores_what_arm_adds() {
        let s = svc(json!({}), json!({}));
        let (probes, rules) =
            expected_probes_and_rules(&s, "/LB", "/LB/f", "/LB/p", false).expect("ok");
        let mut stored = rules[0].clone();
        stored["id"] = json!("/LB/loadBalancingRules/x");
        stored["etag"] = json!("W/\"1\"");
        stored["properties"]["provisioningState"] = json!("Succeeded");
        stored["properties"]["frontendIPConfiguration"]["id"] = json!("/lb/F");
        assert!(rule_matches(&stored, &rules[0]));
        stored["properties"]["backendPort"] = json!(81);
        assert!(!rule_matches(&stored, &rules[0]));
        let mut probe = probes[0].clone();
        probe["properties"]["provisioningState"] = json!("Succeeded");
        assert!(probe_matches(&probe, &probes[0]));
        // An unchanged list is not dirty; a foreign rule is kept.
        let mut list = vec![
            json!({"name": "other-TCP-1"}),
            rules[0].clone(),
            rules[1].clone(),
        ];
        assert!(!reconcile_list(&mut list, &rules, &s, rule_matches));
        assert!(reconcile_list(&mut list, &rules[..1], &s, rule_matches));
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn unsupported_services_get_clear_errors() {
        assert!(
            matches!(check_supported(&svc(json!({}), json!({"ipFamilies": ["IPv6"]}))), Err(LbError::Other(m)) if m.contains("IPv6"))
        );
        assert!(
            matches!(check_supported(&svc(json!({}), json!({"loadBalancerIP": "1.2.3.4"}))), Err(LbError::Other(m)) if m.contains("user-assigned"))
        );
        assert!(
            check_supported(&svc(
                json!({ANNOTATION_INTERNAL: "true"}),
                json!({"loadBalancerIP": "10.0.0.9"})
            ))
            .is_ok()
        );
    }
}
