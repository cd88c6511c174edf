//! OpenStack behind [`CloudControl`](super::CloudControl): instances are Nova servers,
//! routes the extra routes of the cluster's Neutron router, load balancers Octavia's.
//! Journal entries are classified by service and path (Nova `GET /servers…` is an instance
//! lookup; Octavia `POST /lbaas/loadbalancers` a create, `PUT …/members` a backend write).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use mock_cloud::Journal;
use mock_openstack::{Config, OpenStackMock, ServerInfo, ServerPatch, ServerSpec};
use serde_json::json;

use super::descriptor::{CloudDescriptor, MockEntry, MockTls, UpstreamEntry};
use super::standalone;
use super::{
    Backend, CloudLoadBalancer, FaultControl, FaultSpec, Feature, InTreeLoadBalancer, InTreeName,
    Instance, InstanceControl, InstancePatch, InstanceSpec, JournalControl, LbLister,
    LoadBalancerControl, Offers, RefsReader, RouteControl, default_load_balancer_name, service_key,
    tokens, truncate,
};
use crate::ensure;
use crate::error::CaseError;
use ccm_upstream::{Siblings, Upstream};

/// OpenStack in the registry of clouds.
pub(crate) static CLOUD: CloudDescriptor = CloudDescriptor {
    name: "openstack",
    aliases: &[],
    cloud_provider: "openstack",
    mock: Some(MockEntry {
        start: start_backend,
        serve: standalone::serve::<OpenStackMock>,
        tls: MockTls::OnRequest,
        imds: false,
    }),
    // v1.36.0: on 2026-11-26 the proxy refused to list the versions, and by exact version
    // refused v1.36.1–v1.37.1.
    upstream: Some(UpstreamEntry {
        ccm: Upstream {
            name: "openstack",
            module: "k8s.io/cloud-provider-openstack",
            package: "cmd/openstack-cloud-controller-manager",
            binary: "openstack-cloud-controller-manager",
            default_version: "v1.36.0",
            siblings: Siblings::Refuse,
            version_packages: &[],
            main: None,
        },
        node_manager: None,
    }),
};

fn start_backend(
    nodes: usize,
    block: u8,
) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>> {
    Box::pin(async move { Ok(Box::new(OpenStack::start(nodes, block).await?) as Box<dyn Backend>) })
}

/// The mock OpenStack.
pub(crate) struct OpenStack {
    mock: OpenStackMock,
}

impl OpenStack {
    pub(crate) async fn start(nodes: usize, address_block: u8) -> Result<Self, CaseError> {
        let config = Config {
            nodes,
            address_block,
            ..Config::default()
        };
        let mock = OpenStackMock::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock OpenStack", e))?;
        Ok(Self { mock })
    }

    fn admin(&self) -> mock_openstack::Admin {
        self.mock.admin()
    }

    fn instance(&self, s: ServerInfo) -> Instance {
        Instance {
            provider_id: format!("openstack:///{}", s.id),
            id: s.id,
            name: s.name,
            zone: s.az,
            region: self.region(),
            instance_type: s.flavor,
            internal_ips: s.internal_ips,
            external_ips: s.floating_ips,
            dns_addresses: Vec::new(),
            system_uuid: String::new(),
        }
    }

    fn fault(
        &self,
        service: &str,
        method: &str,
        path: String,
        status: u16,
        count: Option<u32>,
    ) -> u64 {
        let rule = mock_cloud::Fault::error(status)
            .service(service)
            .method(method);
        let rule = rule.path(path).count(count);
        self.admin()
            .faults()
            .add(rule.message("injected by ccm-conformance"))
    }
}

impl Backend for OpenStack {
    // Dual-stack routes too: cloud-provider-openstack pkg/openstack/routes.go routes each
    // pod CIDR via the node address of its family, and the mock router takes IPv6
    // extraroutes via its fd00::/64 interface (mocks/openstack neutron/l3.rs).
    fn supports(&self, feature: Feature) -> Result<(), String> {
        match feature {
            // cloud-provider-openstack creates a health monitor only with [LoadBalancer]
            // create-monitor=true (off by default and in the harness's config), so every
            // member gets traffic.
            Feature::LocalTrafficHealthChecks => Err(
                "cloud-provider-openstack creates no health monitor without create-monitor=true (off by default and in the harness's cloud.conf), so every member gets traffic".into(),
            ),
            Feature::ImplementedElsewhere => Err(
                "the openstack provider never answers ImplementedElsewhere: no Service setting hands its load balancer to another controller".into(),
            ),
            _ => Ok(()),
        }
    }

    fn ready_info(&self) -> serde_json::Value {
        serde_json::to_value(self.mock.ready_info()).unwrap_or_default()
    }

    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        // cloud-provider-openstack docs/openstack-cloud-controller-manager: [Global] for
        // auth; [Route] router-id enables routes (used only when the CCM runs with
        // --configure-cloud-routes=true).
        let mut conf = format!(
            "[Global]\nauth-url = \"{}\"\nusername = \"{}\"\npassword = \"{}\"\ntenant-name = \"{}\"\ndomain-name = \"{}\"\nregion = \"{}\"\n",
            r.auth_url, r.username, r.password, r.project_name, r.domain_name, r.region
        );
        // The VIP subnet and the external network named, as deployments do: upstream would
        // otherwise derive the subnet from a node's providerID (and fail while nodes have
        // none) and pick an external network itself (cloud-provider-openstack
        // `getSubnetIDForLB`, `getFloatingNetworkIDForLB`).
        let admin = self.admin();
        conf.push_str("\n[LoadBalancer]\n");
        if let Some(subnet) = admin.private_subnet_id() {
            conf.push_str(&format!("subnet-id = \"{subnet}\"\n"));
        }
        if let Some(net) = admin.external_network_id() {
            conf.push_str(&format!("floating-network-id = \"{net}\"\n"));
        }
        if let Some(router) = admin.routers().first() {
            conf.push_str(&format!("\n[Route]\nrouter-id = \"{}\"\n", router.id));
        }
        conf
    }

    fn secret_credentials_config(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        Err("cloud-provider-openstack reads its credentials only from the cloud.conf file it is given (pkg/openstack/openstack.go ReadConfig); deployments mount the Secret as that file".into())
    }

    fn region(&self) -> String {
        self.mock.ready_info().region
    }

    fn leaks(&self) -> Vec<String> {
        self.admin()
            .leaks()
            .by_type
            .iter()
            .flat_map(|(t, items)| items.iter().map(move |i| format!("{t} {}", i.name)))
            .collect()
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.mock.shutdown())
    }

    fn offers(&self) -> Offers<'_> {
        Offers::all(self)
    }
}

impl InstanceControl for OpenStack {
    // The mock OpenStack takes any address on its network.
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        Ok((1..=n).map(|i| format!("127.10.9.{i}")).collect())
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let server = self
            .admin()
            .create_server(ServerSpec {
                name: spec.name,
                az: spec.zone,
                flavor: spec.instance_type,
                internal_ips: spec.internal_ips,
                floating_ips: spec.external_ips,
                ..Default::default()
            })
            .map_err(|e| CaseError::infra("creating server in mock OpenStack", e))?;
        Ok(self.instance(server))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        let server = self
            .admin()
            .update_server(
                id,
                ServerPatch {
                    internal_ips: patch.internal_ips,
                    floating_ips: patch.external_ips,
                    az: patch.zone,
                    // Nova's server states (SHUTOFF is what cloud-provider-openstack reports
                    // as shut down, pkg/openstack/instancesv2.go).
                    status: patch
                        .running
                        .map(|r| if r { "ACTIVE" } else { "SHUTOFF" }.to_string()),
                    ..Default::default()
                },
            )
            .map_err(|e| CaseError::infra("updating server in mock OpenStack", e))?;
        Ok(self.instance(server))
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .delete_server(id)
            .map_err(|e| CaseError::infra("deleting server in mock OpenStack", e))
    }

    /// Nova's soft `reboot` action: status `REBOOT` until finished, then `ACTIVE`.
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .reboot_server(id, false, true)
            .map(|_| ())
            .map_err(|e| CaseError::infra("rebooting server in mock OpenStack", e))
    }

    fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .finish_reboot(id)
            .map(|_| ())
            .map_err(|e| CaseError::infra("finishing a reboot in mock OpenStack", e))
    }

    fn rebooting(&self, id: &str) -> bool {
        self.admin()
            .server(id)
            .is_some_and(|s| matches!(s.status.as_str(), "REBOOT" | "HARD_REBOOT"))
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.admin().server_by_name(name).map(|s| self.instance(s))
    }

    fn instances(&self) -> Vec<Instance> {
        self.admin()
            .servers()
            .into_iter()
            .map(|s| self.instance(s))
            .collect()
    }
}

impl LoadBalancerControl for OpenStack {
    // cloud-provider-openstack writes `loadbalancer.openstack.org/load-balancer-id` after
    // every ensure (`pkg/openstack/loadbalancer.go` `ensureOctaviaLoadBalancer`).
    fn id_annotations(&self) -> &'static [&'static str] {
        &["loadbalancer.openstack.org/load-balancer-id"]
    }

    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        let admin = self.admin();
        admin
            .load_balancers()
            .iter()
            .map(|lb| {
                let text = |k: &str| {
                    lb.get(k)
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string()
                };
                CloudLoadBalancer {
                    id: text("id"),
                    name: text("name"),
                    vip: admin
                        .floating_ip_of_port(&text("vip_port_id"))
                        .unwrap_or_else(|| text("vip_address")),
                    state: text("provisioning_status"),
                }
            })
            .collect()
    }

    fn load_balancer_lister(&self) -> Option<LbLister> {
        let admin = self.admin();
        Some(Arc::new(move || {
            admin
                .load_balancers()
                .iter()
                .map(|lb| {
                    let text = |k: &str| lb[k].as_str().unwrap_or_default().to_string();
                    (text("id"), text("name"))
                })
                .collect()
        }))
    }

    /// Calls name a load balancer by id, by name (`?name=`) or by one of its pools.
    fn load_balancer_refs(&self) -> Vec<(String, Vec<String>)> {
        self.admin()
            .load_balancers()
            .iter()
            .map(|lb| {
                let id = lb["id"].as_str().unwrap_or_default().to_string();
                let mut k = vec![id.clone()];
                k.extend(lb["name"].as_str().map(str::to_string));
                k.extend(
                    lb["pools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["id"].as_str().map(str::to_string)),
                );
                (id, k)
            })
            .collect()
    }

    fn times_load_balancer_calls(&self) -> bool {
        true
    }

    fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.admin()
            .set_lifecycle(
                mock_openstack::LifecycleTarget::Default,
                Some(mock_openstack::LifecycleMode::Reads { n: reads }),
            )
            .map_err(|e| CaseError::infra("setting the load-balancer lifecycle", e))
    }

    /// Keystone password auth, then Octavia `DELETE …?cascade=true`.
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        Box::pin(async move { octavia_delete(&self.ready_info(), id).await })
    }

    /// cloud-provider-openstack (`pkg/openstack/loadbalancer.go`,
    /// `pkg/util/openstack/loadbalancer.go`): `kube_service_<cluster>_<namespace>_<name>`
    /// since the provider left the tree, and before that cloud-provider's
    /// `DefaultLoadBalancerName`.
    fn in_tree_load_balancer_name(
        &self,
        scheme: InTreeName,
        cluster: &str,
        service: &Service,
    ) -> Result<String, CaseError> {
        match scheme {
            InTreeName::ClusterScoped => {
                let mut name = format!(
                    "kube_service_{cluster}_{}_{}",
                    service.metadata.namespace.as_deref().unwrap_or("default"),
                    service.metadata.name.as_deref().unwrap_or_default()
                );
                truncate(&mut name, 255);
                Ok(name)
            }
            InTreeName::ServiceUid => default_load_balancer_name(service),
        }
    }

    /// Seeded ACTIVE through the admin API: one listener per Service port with a default
    /// pool holding every node's `InternalIP:nodePort`, and a floating IP on the VIP port
    /// reported as the ingress.
    fn seed_in_tree_load_balancer<'a>(
        &'a self,
        name: &'a str,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Instance],
    ) -> BoxFuture<'a, Result<InTreeLoadBalancer, CaseError>> {
        Box::pin(async move {
            let key = service_key(service);
            let ports = service
                .spec
                .as_ref()
                .and_then(|s| s.ports.clone())
                .unwrap_or_default();
            let mut listeners = Vec::new();
            for port in &ports {
                let node_port = port.node_port.ok_or_else(|| {
                    CaseError::failed(format!("Service {key} has no nodePort yet"))
                })?;
                let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".into());
                let members: Vec<_> = nodes
                    .iter()
                    .filter_map(|n| {
                        let address = n.internal_ips.first()?;
                        Some(
                            json!({"name": n.name, "address": address, "protocol_port": node_port}),
                        )
                    })
                    .collect();
                listeners.push(json!({
                    "name": format!("listener_{}_{name}", listeners.len()),
                    "protocol": protocol,
                    "protocol_port": port.port,
                    "default_pool": {
                        "name": format!("pool_{}_{name}", listeners.len()),
                        "protocol": protocol,
                        "lb_algorithm": "ROUND_ROBIN",
                        "members": members,
                    },
                }));
            }
            let admin = self.admin();
            let lb = admin
                .seed_load_balancer(json!({
                    "name": name,
                    "description": format!("Kubernetes external service {key} from cluster {cluster}"),
                    "listeners": listeners,
                }))
                .map_err(|e| CaseError::infra("seeding an in-tree load balancer", e))?;
            let text = |k: &str| lb[k].as_str().unwrap_or_default().to_string();
            let vip = text("vip_address");
            // The in-tree provider put a floating IP on the VIP port (the harness's
            // cloud.conf names the floating network) and reported it as the ingress.
            let fip = admin
                .seed_floating_ip(&text("vip_port_id"))
                .map_err(|e| CaseError::infra("seeding the in-tree floating IP", e))?;
            Ok(InTreeLoadBalancer {
                // What a 1.30 API server defaulted ipMode to.
                ingress: json!({"ip": fip, "ipMode": "VIP"}),
                address: fip.clone(),
                cloud: CloudLoadBalancer {
                    id: text("id"),
                    name: text("name"),
                    vip,
                    state: text("provisioning_status"),
                },
            })
        })
    }
}

impl RouteControl for OpenStack {
    fn routes(&self) -> Vec<(String, String)> {
        self.admin()
            .routers()
            .into_iter()
            .next()
            .map(|r| r.routes)
            .unwrap_or_default()
    }

    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        let router = self
            .admin()
            .routers()
            .into_iter()
            .next()
            .ok_or_else(|| CaseError::failed("the mock has no router"))?;
        self.admin()
            .add_route(&router.id, destination, nexthop)
            .map_err(|e| CaseError::infra("adding a route", e))
    }
}

impl FaultControl for OpenStack {
    /// Faults in OpenStack terms: instance lookups are Nova `GET /servers…`, route writes
    /// Neutron `PUT /routers/…`, load-balancer writes Octavia calls on load balancers.
    fn inject(&self, fault: FaultSpec) -> u64 {
        match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => {
                let path = match instance_id {
                    Some(id) => format!("/servers/{}$", regex::escape(&id)),
                    None => "/servers(/detail)?(/[^/]+)?$".to_string(),
                };
                self.fault("compute", "GET", path, status, count)
            }
            FaultSpec::RouteWrite { status, count } => {
                self.fault("network", "PUT", "/routers/".into(), status, count)
            }
            FaultSpec::LoadBalancerWrite {
                method,
                status,
                count,
            } => self.fault(
                "load-balancer",
                method,
                "/lbaas/loadbalancers".into(),
                status,
                count,
            ),
        }
    }

    fn faults(&self) -> mock_cloud::Faults {
        self.admin().faults()
    }
}

impl JournalControl for OpenStack {
    // Any id or name in the path or the query may name the load balancer (its own id,
    // one of its pools, `?name=`).
    fn refs_reader(&self) -> RefsReader {
        |e| tokens(&format!("{}?{}", e.path, e.query))
    }

    fn journal(&self) -> Journal {
        self.admin().journal()
    }
}

/// Keystone password auth, then the Octavia cascade delete, with the credentials from the
/// mock's ready info (the journal records these calls like any other client's).
async fn octavia_delete(ready: &serde_json::Value, lb_id: &str) -> Result<(), CaseError> {
    let text = |k: &str| {
        ready
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    if ready.get("ca_file").is_some_and(|v| !v.is_null()) {
        return Err(CaseError::Skipped(
            "out-of-band delete speaks plain HTTP only; the mock serves HTTPS".into(),
        ));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| CaseError::infra("building HTTP client", e))?;
    let domain = json!({"name": text("domain_name")});
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": text("username"), "domain": domain, "password": text("password")}}},
        "scope": {"project": {"name": text("project_name"), "domain": domain}}}});
    let auth = http
        .post(format!("{}/auth/tokens", text("auth_url")))
        .json(&body)
        .send()
        .await
        .map_err(|e| CaseError::infra("authenticating to mock Keystone", e))?;
    let token = auth
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| CaseError::failed("mock Keystone returned no X-Subject-Token"))?;
    let catalog: serde_json::Value = auth
        .json()
        .await
        .map_err(|e| CaseError::infra("reading the Keystone token", e))?;
    let endpoint_of = |kind: &str| {
        catalog["token"]["catalog"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|svc| svc["type"] == kind)
            .flat_map(|svc| svc["endpoints"].as_array().into_iter().flatten())
            .find(|e| e["interface"] == "public")
            .and_then(|e| e["url"].as_str())
            .map(|u| u.trim_end_matches('/').to_string())
            .ok_or_else(|| CaseError::failed(format!("no {kind} endpoint in the catalog")))
    };
    let endpoint = endpoint_of("load-balancer")?;
    let network = endpoint_of("network")?;
    // The operator releases the floating IP on the VIP port too (`openstack floating ip
    // delete`): deleting a load balancer leaves it allocated, unattached.
    let get_json = |url: String| {
        let request = http.get(url).header("X-Auth-Token", token.clone());
        async move {
            request
                .send()
                .await
                .map_err(|e| CaseError::infra("reading mock OpenStack", e))?
                .json::<serde_json::Value>()
                .await
                .map_err(|e| CaseError::infra("reading mock OpenStack", e))
        }
    };
    let lb = get_json(format!("{endpoint}/v2/lbaas/loadbalancers/{lb_id}")).await?;
    if let Some(port) = lb["loadbalancer"]["vip_port_id"].as_str() {
        let fips = get_json(format!("{network}/v2.0/floatingips?port_id={port}")).await?;
        for fip in fips["floatingips"].as_array().into_iter().flatten() {
            let Some(id) = fip["id"].as_str() else {
                continue;
            };
            let answer = http
                .delete(format!("{network}/v2.0/floatingips/{id}"))
                .header("X-Auth-Token", token.clone())
                .send()
                .await
                .map_err(|e| CaseError::infra("deleting a floating IP in mock Neutron", e))?;
            ensure!(
                answer.status().is_success(),
                "expected Neutron to delete floating IP {id}, observed {}",
                answer.status()
            );
        }
    }
    let answer = http
        .delete(format!(
            "{endpoint}/v2/lbaas/loadbalancers/{lb_id}?cascade=true"
        ))
        .header("X-Auth-Token", token)
        .send()
        .await
        .map_err(|e| CaseError::infra("deleting the load balancer in mock Octavia", e))?;
    ensure!(
        answer.status().is_success(),
        "expected Octavia to accept the cascade delete, observed {}",
        answer.status()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real request reaches the journal as the kind the cases count (the gate's table is
    /// mock-openstack's to test).
    #[tokio::test]
    async fn the_mock_journals_an_unauthenticated_lookup_as_one() {
        let block = super::super::address_block::take();
        let cloud = OpenStack::start(0, block.index).await.unwrap();
        cloud.create_instance(InstanceSpec::named("n1")).unwrap();
        let ready = cloud.ready_info();
        let auth = ready["auth_url"].as_str().unwrap().to_string();
        let http = reqwest::Client::new();
        // An unauthenticated lookup is still journaled with its operation.
        let compute = auth.replace("/identity/v3", "/compute/v2.1");
        let _ = http
            .get(format!("{compute}/servers/detail"))
            .send()
            .await
            .unwrap();
        assert!(
            cloud
                .journal()
                .entries()
                .iter()
                .any(|e| e.kind == mock_cloud::CallKind::InstanceLookup),
            "{:?}",
            cloud.journal().entries()
        );
        Box::new(cloud).shutdown().await;
    }
}
