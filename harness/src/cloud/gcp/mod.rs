//! GCP behind [`CloudControl`](super::CloudControl): instances are Compute Engine
//! instances of the mock, routes the project's `global/routes`, and load balancers — as
//! the cases count them — forwarding rules, each feeding the Service's target pool.
//!
//! Upstream's external load balancer (cloud-provider-gcp
//! `providers/gce/gce_loadbalancer_external.go`) is a regional address, a target pool of
//! the nodes' instances, a legacy HTTP health check, firewalls and a forwarding rule, all
//! named `a<uid>` (cut to 32). What the cases ask of "the Service's load balancer" (its
//! address, that it is gone after delete, that it was not recreated) is a question about
//! the forwarding rule; a node change is a target-pool `addInstance`/`removeInstance`.
//! Journal entries are classified by the Compute method the mock's gate journals
//! (`compute.forwardingRules.insert`, `compute.targetPools.addInstance`, …).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mock_cloud::Journal;
use mock_gcp::{Config, GcpMock, InstanceInfo, LifecycleMode, LifecycleTarget};

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

/// GCP in the registry of clouds.
pub(crate) static CLOUD: CloudDescriptor = CloudDescriptor {
    name: "gcp",
    aliases: &["gce"],
    // Its provider registers as `gce` (cloud-provider-gcp `providers/gce/gce.go`
    // `ProviderName`).
    cloud_provider: "gce",
    // GCE clients speak plain HTTP to an `api-endpoint`, and the metadata server is HTTP
    // by design; the ready file's `metadata_host` is for `GCE_METADATA_HOST`.
    mock: Some(MockEntry {
        start: start_backend,
        serve: standalone::serve::<mock_gcp::GcpMock>,
        tls: MockTls::Never,
        imds: false,
    }),
    // k8s.io/cloud-provider-gcp itself (cmd/cloud-controller-manager) cannot be had
    // here. Checked 2026-11-27: the module proxy refuses its version list, its commits and
    // their pseudo-versions (403), and its release tags (v36.3.8) are not valid module
    // versions. Its nested module k8s.io/cloud-provider-gcp/providers is served, at
    // v0.28.2 (2023-10) only, and holds the gce cloud provider without a main; so the
    // harness builds upstream's provider code at that version inside a main written here
    // (`upstream_main.go` beside this file, what it leaves out is said there). Its
    // k8s.io/cloud-provider, client-go and component-base are v0.28.2, as its go.mod
    // requires. An old upstream: docs/upstream.md says so beside its row.
    upstream: Some(UpstreamEntry {
        ccm: Upstream {
            name: "gcp",
            module: "k8s.io/cloud-provider-gcp/providers",
            package: "gce",
            binary: "gce-cloud-controller-manager",
            default_version: "v0.28.2",
            siblings: Siblings::Refuse,
            version_packages: &[],
            main: Some(include_str!("upstream_main.go")),
        },
        node_manager: None,
    }),
};

fn start_backend(
    nodes: usize,
    block: u8,
) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>> {
    Box::pin(async move { Ok(Box::new(Gcp::start(nodes, block).await?) as Box<dyn Backend>) })
}

/// The network tag every instance the harness makes carries; `node-tags` in gce.conf, so
/// the CCM's firewalls target it (upstream `GetNodeTags` reads the config's tags first).
const NODE_TAG: &str = "ccm-node";

/// The mock GCP.
pub(crate) struct Gcp {
    mock: GcpMock,
    address_block: u8,
    /// Case zone name -> GCE zone, assigned on first use ([`Gcp::zone_for`]).
    zones: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Gcp {
    pub(crate) async fn start(nodes: usize, address_block: u8) -> Result<Self, CaseError> {
        let config = Config {
            nodes,
            address_block,
            node_tags: vec![NODE_TAG.into()],
            ..Config::default()
        };
        let mock = GcpMock::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock GCP", e))?;
        Ok(Self {
            mock,
            address_block,
            zones: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    fn admin(&self) -> mock_gcp::Admin {
        self.mock.admin()
    }

    fn zone_names(&self) -> Vec<String> {
        Config::default().zones
    }

    /// The GCE zone for a case's zone name: a zone of the mock's region as is, any other
    /// name (`az-2`) one assigned on first use, always the same for the same name.
    fn zone_for(&self, wanted: &str) -> String {
        let zones = self.zone_names();
        if zones.iter().any(|z| z == wanted) {
            return wanted.to_string();
        }
        let mut map = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let next = zones[map.len() % zones.len()].clone();
        map.entry(wanted.to_string()).or_insert(next).clone()
    }

    fn instance(&self, i: InstanceInfo) -> Instance {
        Instance {
            provider_id: i.provider_id,
            id: i.name.clone(),
            name: i.name,
            region: self.mock.ready_info().region,
            zone: i.zone,
            // cloud-provider-gcp `gce_instances.go` `InstanceType`: the last segment of
            // `machineType`.
            instance_type: i
                .machine_type
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string(),
            internal_ips: i.network_ips,
            external_ips: i.nat_ips,
            dns_addresses: Vec::new(),
            system_uuid: String::new(),
        }
    }

    fn fault(&self, method: &str, path: String, status: u16, count: Option<u32>) -> u64 {
        let rule = mock_cloud::Fault::error(status).method(method).path(path);
        self.admin()
            .faults()
            .add(rule.count(count).message("injected by ccm-conformance"))
    }
}

impl Backend for Gcp {
    fn supports(&self, feature: Feature) -> Result<(), String> {
        match feature {
            Feature::NoZone => Err(
                "every Compute Engine instance lives in a zone (its URL is projects/<p>/zones/<z>/instances/<n>)".into(),
            ),
            Feature::NoAddresses => Err(
                "a Compute Engine instance always has a network interface with a networkIP".into(),
            ),
            Feature::DualStackAddresses | Feature::DualStackRoutes => Err(
                "the mock GCP gives instances IPv4 interfaces only (ipv6Address and ipv6AccessConfigs are not modelled yet)".into(),
            ),
            Feature::ReplacementGetsNewProviderId => Err(
                "a GCE providerID is gce://<project>/<zone>/<name> (cloud-provider-gcp providers/gce/gce_instances.go), so an instance recreated under the same name has the same providerID".into(),
            ),
            Feature::ShutdownDetection => Err(
                "cloud-provider-gcp does not implement InstanceShutdown (providers/gce/gce_instances.go answers cloudprovider.NotImplemented), so a stopped instance's node is kept without the shutdown taint".into(),
            ),
            Feature::UpdateFailsForMissingLoadBalancer => Err(
                "cloud-provider-gcp's UpdateLoadBalancer only rewrites the target pool's instances (providers/gce/gce_loadbalancer_external.go updateExternalLoadBalancer), which deleting the forwarding rule leaves in place, so the update succeeds".into(),
            ),
            _ => Ok(()),
        }
    }

    fn ready_info(&self) -> serde_json::Value {
        serde_json::to_value(self.mock.ready_info()).unwrap_or_default()
    }

    /// `gce.conf` as cloud-provider-gcp reads it (`providers/gce/gce.go` `ConfigFile`):
    /// project, zone and network named so no metadata lookup is needed for them, the
    /// harness's node tag for firewalls, every zone of the region (`multizone`), the mock's
    /// v1 base as `api-endpoint` (beta and alpha are derived from it) and `token-url = nil`:
    /// no token source of its own, so the clients take the default credentials, which with
    /// `GCE_METADATA_HOST` set ([`Backend::ccm_env`]) are the mock metadata server's tokens.
    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        format!(
            "[global]\n\
             project-id = {project}\n\
             local-zone = {zone}\n\
             network-name = {network}\n\
             node-tags = {NODE_TAG}\n\
             multizone = true\n\
             api-endpoint = {endpoint}\n\
             token-url = nil\n",
            project = r.project_id,
            zone = r.zone,
            network = r.network,
            endpoint = r.endpoint,
        )
    }

    fn secret_credentials_config(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        Err("cloud-provider-gcp takes credentials from token-url or the default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata server), never from a Secret the config names (providers/gce/gce.go)".into())
    }

    /// The metadata server (every call of `cloud.google.com/go/compute/metadata` goes to
    /// `GCE_METADATA_HOST`, which also answers "on GCE" at once), and none of the
    /// harness's own Google credentials, which the default-credentials lookup would
    /// prefer (golang.org/x/oauth2/google `FindDefaultCredentials`).
    fn ccm_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "GCE_METADATA_HOST".into(),
                self.mock.ready_info().metadata_host,
            ),
            ("GOOGLE_APPLICATION_CREDENTIALS".into(), String::new()),
            ("CLOUDSDK_CONFIG".into(), "/nonexistent/gcloud".into()),
        ]
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
        Box::pin(mock_cloud::MockCloud::shutdown(self.mock))
    }

    fn offers(&self) -> Offers<'_> {
        Offers::all(self)
    }
}

impl InstanceControl for Gcp {
    /// Addresses at the top of the instances' /24, which the mock allocates from the bottom.
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        let block = self.address_block;
        Ok((0..n)
            .map(|i| format!("127.70.{block}.{}", 250 - i % 50))
            .collect())
    }

    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        let block = self.address_block;
        (0..n)
            .map(|i| format!("127.72.{block}.{}", 250 - i % 50))
            .collect()
    }

    /// The same instance with the project's number in place of its id: GCE accepts either
    /// in a resource path, and upstream takes the project from the providerID as written
    /// (cloud-provider-gcp `providers/gce/gce_util.go` `splitProviderID`).
    fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        let project = self.mock.ready_info().project_id;
        let number = Config::default().project_number;
        let prefix = format!("gce://{project}/");
        instance
            .provider_id
            .strip_prefix(&prefix)
            .map(|rest| format!("gce://{number}/{rest}"))
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let zone = match spec.zone.as_deref() {
            Some("") => {
                return Err(CaseError::Skipped(
                    "GCP cannot express it: every Compute Engine instance lives in a zone".into(),
                ));
            }
            Some(z) => self.zone_for(z),
            None => self.mock.ready_info().zone,
        };
        // Each internal IP is a network interface's networkIP (nic0, nic1, ...), the i-th
        // external IP the one-to-one NAT of nic i, as GCE allows one per interface.
        let info = self
            .admin()
            .create_instance(mock_gcp::InstanceSpec {
                name: spec.name,
                zone: Some(zone),
                tags: Some(vec![NODE_TAG.into()]),
                machine_type: spec.instance_type,
                network_ips: spec.internal_ips.filter(|ips| !ips.is_empty()),
                nat_ips: spec.external_ips,
                ..Default::default()
            })
            .map_err(|e| CaseError::infra("creating an instance in mock GCP", e))?;
        Ok(self.instance(info))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        if patch.zone.is_some() {
            return Err(CaseError::Skipped(
                "GCP cannot express it: an instance cannot change zones".into(),
            ));
        }
        if patch.internal_ips.as_ref().is_some_and(Vec::is_empty) {
            return Err(CaseError::Skipped(
                "GCP cannot express it: an instance always has a network interface".into(),
            ));
        }
        let info = self
            .admin()
            .update_instance(
                id,
                mock_gcp::InstancePatch {
                    network_ips: patch.internal_ips,
                    nat_ips: patch.external_ips,
                    status: patch
                        .running
                        .map(|up| if up { "RUNNING" } else { "TERMINATED" }.to_string()),
                    ..Default::default()
                },
            )
            .map_err(|e| CaseError::infra("updating an instance in mock GCP", e))?;
        Ok(self.instance(info))
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .delete_instance(id)
            .map_err(|e| CaseError::infra("deleting an instance in mock GCP", e))
    }

    /// `instances.reset` keeps the instance `RUNNING` as the API shows it; cloud-provider-gcp
    /// reports no shutdown at all (`InstanceShutdown` is not implemented upstream).
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        match self.admin().instance(id) {
            Some(i) if i.status == "RUNNING" => Ok(()),
            Some(i) => Err(CaseError::failed(format!(
                "cannot reset instance {id}: it is {}, not RUNNING",
                i.status
            ))),
            None => Err(CaseError::failed(format!("no instance {id} in mock GCP"))),
        }
    }

    fn finish_reboot(&self, _id: &str) -> Result<(), CaseError> {
        Ok(())
    }

    fn rebooting(&self, _id: &str) -> bool {
        false
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.admin().instance(name).map(|i| self.instance(i))
    }

    fn instances(&self) -> Vec<Instance> {
        self.admin()
            .instances()
            .into_iter()
            .map(|i| self.instance(i))
            .collect()
    }
}

impl LoadBalancerControl for Gcp {
    /// `cloud.google.com/l4-rbs: enabled` hands an external Service to the regional
    /// backend-service controller (ingress-gce): upstream answers ImplementedElsewhere
    /// (cloud-provider-gcp `providers/gce/gce_util.go` `shouldProcessNetLB`, `usesL4RBS`;
    /// `gce_annotations.go` `RBSAnnotationKey`).
    fn implemented_elsewhere_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cloud.google.com/l4-rbs".into(), "enabled".into())])
    }

    /// A target pool delivers packets to the instance with the forwarding rule's address
    /// as destination; kube-proxy accepts them on the node for the Service's port.
    fn load_balancers_use_floating_ip(&self) -> bool {
        true
    }

    /// One per forwarding rule, `PENDING` while its last operation runs.
    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        self.admin()
            .load_balancers()
            .into_iter()
            .map(|lb| CloudLoadBalancer {
                id: lb.id,
                name: lb.name,
                vip: lb.ip,
                state: if lb.pending { "PENDING" } else { "DONE" }.into(),
            })
            .collect()
    }

    fn load_balancer_lister(&self) -> Option<LbLister> {
        let admin = self.admin();
        Some(Arc::new(move || {
            admin
                .load_balancers()
                .into_iter()
                .map(|lb| (lb.id, lb.name))
                .collect()
        }))
    }

    /// Calls name a load balancer by its name, which its target pool, address, health
    /// check and firewall (`k8s-fw-<name>`) share.
    fn load_balancer_refs(&self) -> Vec<(String, Vec<String>)> {
        self.admin()
            .load_balancers()
            .into_iter()
            .map(|lb| {
                let refs = vec![lb.name.clone(), format!("k8s-fw-{}", lb.name)];
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
                .method("POST")
                .path("/forwardingRules$"),
        );
        Some(CreateHold::new(faults, rule))
    }

    fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.admin()
            .set_lifecycle(
                LifecycleTarget::Type("forwardingrules".into()),
                Some(LifecycleMode::Reads { n: reads }),
            )
            .map_err(|e| CaseError::infra("setting the forwarding-rule lifecycle", e))
    }

    /// What an operator's `gcloud compute forwarding-rules delete` does, through the
    /// Compute API with a token from the mock's token endpoint.
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        Box::pin(async move {
            let name = self
                .admin()
                .load_balancers()
                .into_iter()
                .find(|lb| lb.id == id || lb.name == id)
                .map(|lb| lb.name)
                .ok_or_else(|| CaseError::failed(format!("no forwarding rule {id}")))?;
            compute_delete(&self.mock.ready_info(), &name).await
        })
    }
}

impl RouteControl for Gcp {
    /// `(destination, next hop)` of each route; a route to an instance reads as that
    /// instance's internal IP, as the cases compare next hops with node addresses.
    fn routes(&self) -> Vec<(String, String)> {
        let admin = self.admin();
        admin
            .routes()
            .into_iter()
            .map(|r| {
                let hop = match (&r.next_hop_ip, &r.next_hop_instance_name) {
                    (Some(ip), _) => ip.clone(),
                    (None, Some(name)) => admin
                        .instance(name)
                        .map(|i| i.network_ip)
                        .unwrap_or_else(|| name.clone()),
                    (None, None) => String::new(),
                };
                (r.dest_range, hop)
            })
            .collect()
    }

    /// A route in the cluster's own namespace, as one a node that is gone left behind: GCE
    /// routes share the project's network, and a CCM counts as its own only those named
    /// `<cluster-name>-…` with the description `k8s-node-route` (cloud-provider-gcp
    /// `providers/gce/gce_routes.go` `ListRoutes`); the route controller then keeps those
    /// outside the cluster CIDR and removes the stale ones inside it.
    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        let name = format!(
            "{}-out-of-band-{}",
            super::types::CLUSTER_NAME,
            destination.replace(['/', '.', ':'], "-")
        );
        self.admin()
            .add_described_route(&name, destination, nexthop, "k8s-node-route")
            .map(|_| ())
            .map_err(|e| CaseError::infra("adding a route", e))
    }
}

impl FaultControl for Gcp {
    /// Faults in Compute terms: instance lookups are GETs of `…/instances…`, route writes
    /// inserts into `global/routes`, load-balancer creates and deletes those of the
    /// forwarding rule, updates the target pool's instance changes.
    fn inject(&self, fault: FaultSpec) -> u64 {
        match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => {
                let path = match instance_id {
                    Some(id) => format!("/instances/{}(/|$)", regex::escape(&id)),
                    None => "/instances(/|$)".to_string(),
                };
                self.fault("GET", path, status, count)
            }
            FaultSpec::RouteWrite { status, count } => {
                self.fault("POST", "/global/routes$".into(), status, count)
            }
            FaultSpec::LoadBalancerWrite {
                method,
                status,
                count,
            } => match method {
                "DELETE" => self.fault("DELETE", "/forwardingRules/".into(), status, count),
                "POST" => self.fault("POST", "/forwardingRules$".into(), status, count),
                _ => self.fault(
                    "POST",
                    "/targetPools/[^/]+/(addInstance|removeInstance)$".into(),
                    status,
                    count,
                ),
            },
        }
    }

    fn faults(&self) -> mock_cloud::Faults {
        self.admin().faults()
    }
}

impl JournalControl for Gcp {
    fn journal(&self) -> Journal {
        self.admin().journal()
    }
}

/// A token from the mock's OAuth endpoint, then a Compute `DELETE` of the forwarding rule
/// and a wait on its operation (the journal records these calls like any client's).
async fn compute_delete(ready: &mock_gcp::ReadyInfo, name: &str) -> Result<(), CaseError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| CaseError::infra("building an HTTP client", e))?;
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .finish();
    let token: serde_json::Value = http
        .post(&ready.token_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .map_err(|e| CaseError::infra("getting a token from mock GCP", e))?
        .json()
        .await
        .map_err(|e| CaseError::infra("reading the token", e))?;
    let token = token["access_token"]
        .as_str()
        .ok_or_else(|| CaseError::failed(format!("mock GCP issued no token: {token}")))?
        .to_string();
    let url = format!(
        "{}projects/{}/regions/{}/forwardingRules/{name}",
        ready.endpoint, ready.project_id, ready.region
    );
    let answer = http
        .delete(&url)
        .bearer_auth(&token)
        .send()
        .await
        .map_err(|e| CaseError::infra("deleting a forwarding rule in mock GCP", e))?;
    ensure!(
        answer.status().is_success(),
        "expected Compute to accept the delete of {name}, observed {}",
        answer.status()
    );
    let op: serde_json::Value = answer
        .json()
        .await
        .map_err(|e| CaseError::infra("reading the operation", e))?;
    if let Some(op_name) = op["name"].as_str() {
        let wait = format!(
            "{}projects/{}/regions/{}/operations/{op_name}/wait",
            ready.endpoint, ready.project_id, ready.region
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let op: serde_json::Value = http
                .post(&wait)
                .bearer_auth(&token)
                .send()
                .await
                .map_err(|e| CaseError::infra("waiting on a mock GCP operation", e))?
                .json()
                .await
                .map_err(|e| CaseError::infra("reading the operation", e))?;
            if op["status"] == "DONE" {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(CaseError::failed(format!(
                    "the delete of {name} still runs 10 s after it was accepted: {op}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {}
