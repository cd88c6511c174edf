//! Azure behind [`CloudControl`](super::CloudControl): instances are virtual machines of
//! the mock Azure Resource Manager, routes the routes of the cluster's route table, and
//! load balancers — as the cases count them — the Services' frontend IP configurations.
//!
//! Upstream Azure puts every Service of a cluster on one load balancer named after the
//! cluster (cloud-provider-azure `pkg/provider/azure_loadbalancer.go`, `getServiceLoadBalancer`),
//! one frontend IP configuration per Service, named from the Service UID. What the cases
//! ask of "the Service's load balancer" (its address, that it is gone after delete, that
//! it was not recreated) is a question about that frontend, so [`CloudLoadBalancer`] is a
//! frontend here, carrying its load balancer's provisioning state. Journal entries are
//! classified by the ARM operation the mock's gate journals (`"PUT
//! Microsoft.Network/loadBalancers"`, …): a load-balancer PUT answered 201 created it;
//! a NIC PUT is a backend write, because a standard VM joins a backend pool by its NIC's IP
//! configuration (upstream's default `nodeIPConfiguration` pool type).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mock_azure::{AzureMock, Config, LifecycleMode, LifecycleTarget, VmInfo, VmPatch, VmSpec};
use mock_cloud::Journal;

use super::descriptor::{CloudDescriptor, MockEntry, MockTls, UpstreamEntry};
use super::standalone;
use super::{
    Backend, CloudLoadBalancer, CreateHold, FaultControl, FaultSpec, Feature, Instance,
    InstanceControl, InstancePatch, InstanceSpec, JournalControl, LbLister, LoadBalancerControl,
    Offers, RouteControl,
};
use crate::ensure;
use crate::error::CaseError;
use ccm_upstream::{Siblings, Upstream};

/// Azure in the registry of clouds.
pub(crate) static CLOUD: CloudDescriptor = CloudDescriptor {
    name: "azure",
    aliases: &[],
    cloud_provider: "azure",
    // Always HTTPS (azcore and azure-core refuse bearer tokens over HTTP); the ready file
    // names the generated CA in `ca_file`.
    mock: Some(MockEntry {
        start: start_backend,
        serve: standalone::serve::<AzureMock>,
        tls: MockTls::Always,
        imds: false,
    }),
    // cloud-provider-azure v1.36.5 (the newest tag of the repository, 2026-08; the proxy
    // here refuses the version list and, by exact version, v1.35.8, v1.36.6 and v1.37.0):
    // its go.mod has no `replace` and requires its nested modules (`pkg/azclient`,
    // `pkg/azclient/cache`, `pkg/azclient/configloader`) at their own published versions,
    // so the wrapper only copies `godebug default=go1.26`. Upstream's Makefile builds with
    // CGO_ENABLED=1 and names the binary `azure-cloud-controller-manager`; the module and
    // every package it links build without cgo (no `import "C"` on linux), so the static
    // build the other CCMs get serves here too.
    upstream: Some(UpstreamEntry {
        ccm: Upstream {
            name: "azure",
            module: "sigs.k8s.io/cloud-provider-azure",
            package: "cmd/cloud-controller-manager",
            binary: "azure-cloud-controller-manager",
            default_version: "v1.36.5",
            siblings: Siblings::Refuse,
            version_packages: VERSION_PACKAGES,
            main: None,
        },
        // The CCM leaves node initialization to `cloud-node-manager` (one per node, same
        // module and release): its options never fill the cloud-node controller's
        // `ConcurrentNodeSyncs` (cloud-provider-azure
        // `cmd/cloud-controller-manager/app/options/options.go` Config copies only Generic,
        // KubeCloudShared, ServiceController and NodeStatusUpdateFrequency), so the CCM's
        // controller runs no worker and never takes the `uninitialized` taint off. With
        // `--use-instance-metadata=false` the node manager reads ARM for the VM named like
        // the host's name (`pkg/provider/azure_zones.go` GetZone uses `os.Hostname()`), so
        // each one runs with its node's name as hostname (its own UTS namespace).
        node_manager: Some(Upstream {
            name: "azure-cloud-node-manager",
            module: "sigs.k8s.io/cloud-provider-azure",
            package: "cmd/cloud-node-manager",
            binary: "azure-cloud-node-manager",
            default_version: "v1.36.5",
            siblings: Siblings::Refuse,
            version_packages: VERSION_PACKAGES,
            main: None,
        }),
    }),
};

/// Version packages the release build stamps besides component-base's: `--version`
/// prints cloud-provider-azure's own, and the release build stamps client-go's too (the
/// User-Agent it sends the API server): hack/pkg-config.sh, which the Makefile's go
/// build reads.
const VERSION_PACKAGES: &[&str] = &[
    "sigs.k8s.io/cloud-provider-azure/pkg/version",
    "k8s.io/client-go/pkg/version",
];

fn start_backend(
    nodes: usize,
    block: u8,
) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>> {
    Box::pin(async move { Ok(Box::new(Azure::start(nodes, block).await?) as Box<dyn Backend>) })
}

/// The mock's availability zones (its `Config::zones` default) and the one a VM gets
/// when a case does not choose.
const ZONES: [&str; 3] = ["1", "2", "3"];
const DEFAULT_ZONE: &str = ZONES[0];

/// The mock Azure.
pub(crate) struct Azure {
    mock: AzureMock,
    /// Traffic to a public IP goes to the loopback twin the mock serves it on.
    _twins: crate::traffic::ResolverGuard,
    address_block: u8,
    /// Case zone name -> Azure zone, assigned on first use ([`Azure::zone_for`]).
    zones: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Azure {
    pub(crate) async fn start(nodes: usize, address_block: u8) -> Result<Self, CaseError> {
        let config = Config {
            nodes,
            address_block,
            // ARM pages lists server-side; the mock's default of 5 makes every client
            // follow `nextLink` (what its own tests want), which with a hundred Services
            // turns one public-IP list into thirty requests. A hundred keeps paging real
            // for the big runs (`bench lb`) without that.
            page_size: 100,
            ..Config::default()
        };
        let mock = AzureMock::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock Azure", e))?;
        let twins = crate::traffic::register_resolver(Arc::new(move |host: &str| {
            let ip: std::net::IpAddr = host.parse().ok()?;
            let twin = mock_azure::listener_ip(ip);
            (twin != ip).then_some(twin)
        }));
        Ok(Self {
            mock,
            _twins: twins,
            address_block,
            zones: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    fn admin(&self) -> mock_azure::Admin {
        self.mock.admin()
    }

    /// The Azure zone (`"1"`, `"2"`, `"3"`) for a case's zone name: Azure zones are numbers
    /// (cloud-provider-azure `azure_standard.go` parses them as such), so a name like `az-2`
    /// gets one assigned on first use, always the same for the same name; `""` stays (no
    /// zone).
    fn zone_for(&self, wanted: &str) -> String {
        if wanted.is_empty() || ZONES.contains(&wanted) {
            return wanted.to_string();
        }
        let mut map = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let next = ZONES[map.len() % ZONES.len()].to_string();
        map.entry(wanted.to_string()).or_insert(next).clone()
    }

    fn location(&self) -> String {
        self.mock.ready_info().location
    }

    fn instance(&self, vm: VmInfo) -> Instance {
        // cloud-provider-azure pkg/provider/azure_zones.go `GetZoneByNodeName`: a VM in a
        // zone is in `<location>-<zone>`; one without is in its fault domain.
        let zone = match &vm.zone {
            Some(z) => format!("{}-{z}", self.location().to_ascii_lowercase()),
            None => vm.fault_domain.to_string(),
        };
        Instance {
            provider_id: vm.provider_id,
            id: vm.name.clone(),
            name: vm.name,
            zone,
            region: self.location(),
            instance_type: vm.vm_size,
            internal_ips: vm.private_ips,
            external_ips: vm.public_ips,
            dns_addresses: Vec::new(),
            system_uuid: String::new(),
        }
    }

    fn fault(
        &self,
        method: &str,
        path: String,
        resource: Option<&str>,
        status: u16,
        count: Option<u32>,
    ) -> u64 {
        let mut rule = mock_cloud::Fault::error(status).method(method).path(path);
        if let Some(r) = resource {
            rule = rule.resource(r);
        }
        self.admin()
            .faults()
            .add(rule.count(count).message("injected by ccm-conformance"))
    }
}

impl Backend for Azure {
    fn supports(&self, feature: Feature) -> Result<(), String> {
        match feature {
            Feature::NoZone => Err(
                "an Azure VM outside availability zones is in its platform fault domain, which cloud-provider-azure reports as the zone (pkg/provider/azure_zones.go GetZoneByNodeName), so no VM has no zone".into(),
            ),
            Feature::NoAddresses => Err(
                "an Azure VM always has a primary NIC with a private IP (the mock requires one, as ARM does)".into(),
            ),
            Feature::DualStackAddresses | Feature::DualStackRoutes => Err(
                "the mock Azure gives VMs IPv4 addresses only (IPv6 IP configurations are not modelled yet)".into(),
            ),
            Feature::ReplacementGetsNewProviderId => Err(
                "an Azure providerID is the VM's ARM resource ID, which ends in its name: a VM recreated under the same name has the same providerID (cloud-provider-azure pkg/provider/azure_standard.go providerIDRE)".into(),
            ),
            Feature::UpdateFailsForMissingLoadBalancer => Err(
                "cloud-provider-azure's UpdateLoadBalancer returns nil for a load balancer that no longer exists (pkg/provider/azure_loadbalancer.go shouldUpdateLoadBalancer)".into(),
            ),
            Feature::LoadBalancersSurviveClusterRename => Err(
                "cloud-provider-azure names the shared load balancer and each Service's public IP after --cluster-name and owns them by the k8s-azure-cluster-name tag (pkg/provider/azure_loadbalancer.go getAzureLoadBalancerName, azure_standard.go getPublicIPName), so a rename moves every Service to a new load balancer and address".into(),
            ),
            Feature::ImplementedElsewhere => Err(
                "the azure provider never answers ImplementedElsewhere: no Service setting hands its load balancer to another controller".into(),
            ),
            _ => Ok(()),
        }
    }

    fn ready_info(&self) -> serde_json::Value {
        serde_json::to_value(self.mock.ready_info()).unwrap_or_default()
    }

    /// `azure.json` as cloud-provider-azure reads it (`pkg/provider/config/azure.go`,
    /// `pkg/azclient/arm_conf.go`, `auth_conf.go`): the ARM endpoint by
    /// `resourceManagerEndpoint` (the CCM discovers login and audience from its
    /// `/metadata/endpoints`), a client secret, no instance metadata (the harness's nodes
    /// are not Azure VMs), standard VMs and the standard load-balancer SKU.
    ///
    /// The tenant is `adfs`, the one offline route for a client secret: for any other
    /// tenant MSAL asks `login.microsoftonline.com` (a hard-coded host) to validate the
    /// authority, because azclient never sets `DisableInstanceDiscovery`
    /// (cloud-provider-azure `pkg/azclient/auth_func.go`; azidentity
    /// `confidential_client.go`; MSAL Go `apps/internal/oauth/ops/authority/authority.go`).
    /// An ADFS authority skips that and reads `<login>/adfs/.well-known/openid-configuration`.
    /// `cloud` is left out: azclient keeps the public cloud's endpoints unless `cloud` is
    /// empty or equals the discovery document's `name` (`pkg/azclient/cloud.go`).
    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        let config = serde_json::json!({
            "tenantId": "adfs",
            "subscriptionId": r.subscription_id,
            "aadClientId": r.client_id,
            "aadClientSecret": r.client_secret,
            "resourceGroup": r.resource_group,
            "location": r.location,
            "vmType": "standard",
            "vnetName": r.vnet_name,
            "vnetResourceGroup": r.resource_group,
            "subnetName": r.subnet_name,
            "securityGroupName": r.security_group_name,
            "routeTableName": r.route_table_name,
            "loadBalancerSku": "standard",
            "useInstanceMetadata": false,
            "useManagedIdentityExtension": false,
            "resourceManagerEndpoint": format!("{}/", r.endpoint),
            // Upstream batches route-table writes every 30 s and sleeps 30 s after each
            // (pkg/provider/config/azure.go, azure_routes.go delayedRouteUpdater); one
            // second keeps routes within the cases' deadlines.
            "routeUpdateIntervalInSeconds": 1,
            "routeUpdateWaitingInSeconds": 1,
            // Upstream answers instance lookups from a VM cache that lives 60 s
            // (pkg/provider/azure_wrap.go vmCacheTTLDefaultInSeconds), longer than a
            // case's compressed --node-status-update-frequency: address sync and
            // shutdown detection would see one lookup a minute. One second matches the
            // periods the harness compresses.
            "vmCacheTTLInSeconds": 1,
            // Not compressed, because it cannot be: the ARM clients retry a failed call
            // (429, 5xx) 3 times 5 s, 10 s and 20 s apart (pkg/azclient utils/options.go
            // DefaultRetryDelay), and azure.json's `cloudProviderBackoffDuration` does not
            // reach them: pkg/provider/config/azure_auth.go AzureClientConfig declares the
            // same JSON key as the azclient.ARMClientConfig it embeds, and encoding/json
            // fills the shallower field, so arm_conf.go GetAzCoreClientOption sees 0.
        });
        serde_json::to_string_pretty(&config).unwrap_or_default()
    }

    fn secret_credentials_config(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        Err("cloud-provider-azure reads a Secret only under its fixed name kube-system/azure-cloud-provider with cloudConfigType secret or merge (pkg/provider/azure.go), not one the cloud config names".into())
    }

    /// The mock's CA for the CCM's TLS clients (Go reads `SSL_CERT_FILE`; the reference
    /// CCM too), and no `AZURE_*` credentials from the harness's own environment, which
    /// would override azure.json (cloud-provider-azure `pkg/azclient/auth_conf.go`).
    fn ccm_env(&self) -> Vec<(String, String)> {
        let r = self.mock.ready_info();
        vec![
            ("SSL_CERT_FILE".into(), r.ca_file),
            ("AZURE_CLIENT_ID".into(), String::new()),
            ("AZURE_CLIENT_SECRET".into(), String::new()),
            ("AZURE_TENANT_ID".into(), String::new()),
        ]
    }

    fn region(&self) -> String {
        self.location()
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
        Box::pin(mock_cloud::MockCloud::shutdown(self.mock))
    }

    fn offers(&self) -> Offers<'_> {
        Offers::all(self)
    }
}

impl InstanceControl for Azure {
    /// Addresses at the top of the VM /24 the mock allocates from the bottom.
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        let block = self.address_block;
        Ok((0..n)
            .map(|i| format!("127.60.{block}.{}", 250 - i % 50))
            .collect())
    }

    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        let block = self.address_block;
        (0..n)
            .map(|i| format!("198.18.{block}.{}", 250 - i % 50))
            .collect()
    }

    /// The same VM's ID with the resource group as the operator spelled it: ARM ids are
    /// case-insensitive and upstream parses only the VM name out of a providerID
    /// (`azure_standard.go` providerIDRE), so both forms name one VM.
    fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        let rg = self.mock.ready_info().resource_group;
        let lower = format!("/resourceGroups/{}/", rg.to_ascii_lowercase());
        instance.provider_id.contains(&lower).then(|| {
            instance.provider_id.replace(
                &lower,
                &format!("/resourceGroups/{}/", rg.to_ascii_uppercase()),
            )
        })
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let vm = self
            .admin()
            .create_vm(VmSpec {
                name: spec.name,
                zone: Some(self.zone_for(spec.zone.as_deref().unwrap_or(DEFAULT_ZONE))),
                vm_size: spec.instance_type,
                private_ips: spec.internal_ips.unwrap_or_default(),
                public_ips: spec.external_ips,
                power_state: None,
            })
            .map_err(|e| CaseError::infra("creating a VM in mock Azure", e))?;
        Ok(self.instance(vm))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        let vm = self
            .admin()
            .update_vm(
                id,
                VmPatch {
                    private_ips: patch.internal_ips,
                    public_ips: patch.external_ips,
                    zone: patch.zone.map(|z| self.zone_for(&z)),
                    running: patch.running,
                    power_state: None,
                },
            )
            .map_err(|e| CaseError::infra("updating a VM in mock Azure", e))?;
        Ok(self.instance(vm))
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .delete_vm(id)
            .map_err(|e| CaseError::infra("deleting a VM in mock Azure", e))
    }

    /// An Azure restart keeps the VM's power state `running` as the CCM reads it (it is
    /// shut down only when stopped, deallocating or deallocated:
    /// cloud-provider-azure pkg/provider/azure_instances.go `InstanceShutdownByProviderID`).
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        match self.admin().vm(id) {
            Some(vm) if vm.power_state == mock_azure::PowerState::Running => Ok(()),
            Some(vm) => Err(CaseError::failed(format!(
                "cannot restart VM {id}: it is {:?}, not running",
                vm.power_state
            ))),
            None => Err(CaseError::failed(format!("no VM {id} in mock Azure"))),
        }
    }

    fn finish_reboot(&self, _id: &str) -> Result<(), CaseError> {
        Ok(())
    }

    fn rebooting(&self, _id: &str) -> bool {
        false
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.admin().vm(name).map(|vm| self.instance(vm))
    }

    fn instances(&self) -> Vec<Instance> {
        self.admin()
            .vms()
            .into_iter()
            .map(|vm| self.instance(vm))
            .collect()
    }
}

impl LoadBalancerControl for Azure {
    fn load_balancers_use_floating_ip(&self) -> bool {
        true
    }

    /// One backend pool named after the cluster on the shared load balancer, joined by each
    /// node's NIC (cloud-provider-azure `azure_loadbalancer_backendpool.go`,
    /// nodeIPConfiguration): a node join is one NIC write, whatever the number of Services.
    fn load_balancers_share_backends(&self) -> bool {
        true
    }

    /// One per frontend IP configuration (one per Service), with its load balancer's
    /// provisioning state.
    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        self.admin()
            .frontends()
            .into_iter()
            .map(|f| CloudLoadBalancer {
                id: f.id,
                name: f.name,
                vip: f.address,
                state: f.state,
            })
            .collect()
    }

    fn load_balancer_lister(&self) -> Option<LbLister> {
        let admin = self.admin();
        Some(Arc::new(move || {
            admin
                .frontends()
                .into_iter()
                .map(|f| (f.id, f.name))
                .collect()
        }))
    }

    /// Calls name the cluster's load balancer (by its name in the path), or a NIC when they
    /// change its backend pool: both count for every load balancer of the cluster.
    fn load_balancer_refs(&self) -> Vec<(String, Vec<String>)> {
        let nics = self.admin().nic_names();
        self.admin()
            .load_balancers()
            .into_iter()
            .map(|lb| {
                let mut refs = vec![lb.name.clone()];
                refs.extend(nics.iter().cloned());
                (lb.id, refs)
            })
            .collect()
    }

    fn times_load_balancer_calls(&self) -> bool {
        true
    }

    fn hold_load_balancer_creates(&self, latency: Duration) -> Option<CreateHold> {
        let faults = self.admin().faults();
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        let rule = faults.add(
            mock_cloud::Fault::latency(ms)
                .method("PUT")
                .path("(?i)/providers/Microsoft\\.Network/loadBalancers/"),
        );
        Some(CreateHold::new(faults, rule))
    }

    fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.admin()
            .set_lifecycle(
                LifecycleTarget::Type("loadbalancers".into()),
                Some(LifecycleMode::Reads { n: reads }),
            )
            .map_err(|e| CaseError::infra("setting the load-balancer lifecycle", e))
    }

    /// What an operator's `az network lb delete` does: the whole load balancer the frontend
    /// belongs to, through ARM with the mock's service principal.
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        Box::pin(async move {
            let lb = match id.find("/frontendIPConfigurations/") {
                Some(i) => &id[..i],
                None => id,
            };
            arm_delete(&self.mock.ready_info(), lb).await
        })
    }
}

impl RouteControl for Azure {
    /// `(destination, next hop)` of each route of the cluster's route table.
    fn routes(&self) -> Vec<(String, String)> {
        self.admin()
            .routes()
            .into_iter()
            .map(|r| (r.address_prefix, r.next_hop_ip))
            .collect()
    }

    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        // A route someone else made, named as no node is.
        let name = format!("out-of-band-{}", destination.replace(['/', '.', ':'], "-"));
        self.admin()
            .add_route(&name, destination, nexthop)
            .map_err(|e| CaseError::infra("adding a route", e))
    }
}

impl FaultControl for Azure {
    /// Faults in ARM terms: instance lookups are `GET …/virtualMachines…`, route writes
    /// PUT/DELETE of the route table's routes, load-balancer creates and updates PUTs of
    /// the load balancer (ARM has no separate create), deletes DELETEs of the load balancer
    /// or of the Service's public IP.
    fn inject(&self, fault: FaultSpec) -> u64 {
        match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => match instance_id {
                // What upstream reads of one VM is the VM and its NIC (addresses,
                // azure_standard.go GetIPByNodeName); the VM comes from a cache
                // (vmCacheTTLInSeconds), the NIC does not, so a fault on the VM alone would
                // leave the addresses readable while the VM entry is fresh.
                Some(id) => {
                    let id = regex::escape(&id);
                    let path = format!(
                        "(?i)/providers/Microsoft\\.(Compute/virtualMachines/{id}|Network/networkInterfaces/{id}-nic)(/|$)"
                    );
                    self.fault("GET", path, None, status, count)
                }
                None => {
                    let path =
                        "(?i)/providers/Microsoft\\.Compute/virtualMachines(/|$)".to_string();
                    self.fault("GET", path, None, status, count)
                }
            },
            // cloud-provider-azure writes routes by PUT of the whole route table
            // (pkg/provider/azure_routes.go delayedRouteUpdater), some clients per route.
            FaultSpec::RouteWrite { status, count } => {
                let path = "(?i)/providers/Microsoft\\.Network/routeTables/".into();
                self.fault("PUT", path, None, status, count)
            }
            FaultSpec::LoadBalancerWrite {
                method,
                status,
                count,
            } => {
                let (method, path) = match method {
                    "DELETE" => (
                        "DELETE",
                        "(?i)/providers/Microsoft\\.Network/(loadBalancers|publicIPAddresses)/",
                    ),
                    _ => ("PUT", "(?i)/providers/Microsoft\\.Network/loadBalancers/"),
                };
                self.fault(method, path.into(), None, status, count)
            }
        }
    }

    fn faults(&self) -> mock_cloud::Faults {
        self.admin().faults()
    }
}

impl JournalControl for Azure {
    fn journal(&self) -> Journal {
        self.admin().journal()
    }
}

/// A client-credentials token from the mock's AAD, then an ARM `DELETE` of `resource_id`,
/// polled until ARM says it is gone (the journal records these calls like any client's).
async fn arm_delete(ready: &mock_azure::ReadyInfo, resource_id: &str) -> Result<(), CaseError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pem = std::fs::read(&ready.ca_file)
        .map_err(|e| CaseError::infra("reading the mock Azure CA", e))?;
    let ca = reqwest::Certificate::from_pem(&pem)
        .map_err(|e| CaseError::infra("reading the mock Azure CA", e))?;
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| CaseError::infra("building an HTTPS client", e))?;
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", &ready.client_id)
        .append_pair("client_secret", &ready.client_secret)
        .append_pair("scope", "https://management.core.windows.net//.default")
        .finish();
    let token: serde_json::Value = http
        .post(format!(
            "{}/{}/oauth2/v2.0/token",
            ready.endpoint, ready.tenant_id
        ))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .map_err(|e| CaseError::infra("getting a token from mock Azure", e))?
        .json()
        .await
        .map_err(|e| CaseError::infra("reading the token", e))?;
    let token = token["access_token"]
        .as_str()
        .ok_or_else(|| CaseError::failed(format!("mock Azure issued no token: {token}")))?
        .to_string();
    let url = format!("{}{resource_id}?api-version=2024-05-01", ready.endpoint);
    let answer = http
        .delete(&url)
        .bearer_auth(&token)
        .send()
        .await
        .map_err(|e| CaseError::infra("deleting a load balancer in mock Azure", e))?;
    ensure!(
        answer.status().is_success(),
        "expected ARM to accept the delete of {resource_id}, observed {}",
        answer.status()
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = http
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .map_err(|e| CaseError::infra("reading mock Azure", e))?
            .status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(CaseError::failed(format!(
                "{resource_id} still answers {status} 10 s after its delete was accepted"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
