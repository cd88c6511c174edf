//! [`CloudControl`]: the one face cases see of whichever cloud they run against. It holds
//! the backend and hands each question to the capability that answers it
//! ([`super::capability`]); a question whose capability the backend lacks is a skip with
//! the reason where the answer is a `Result`, an empty answer for load balancers and
//! routes (a cloud without that control shows none), and otherwise a harness bug: a case
//! that asks it must name the capability in `Case::needs`, and the runner skips it first.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;

use super::address_block;
use super::calls::{CallKind, CloudCall, CloudObserver, LbOp};
use super::capability::{
    Backend, Capability, FaultControl, InstanceControl, JournalControl, LoadBalancerControl,
    RouteControl,
};
use super::types::{
    CloudLoadBalancer, CreateHold, FaultSpec, Feature, InTreeLoadBalancer, InTreeName, Instance,
    InstancePatch, InstanceSpec, LbUpdate,
};
use crate::error::CaseError;
use crate::provider::Provider;

/// A running cloud: a mock the harness started, with its backend.
pub struct CloudControl {
    provider: Provider,
    backend: Box<dyn Backend>,
    /// Its /24 of the address pools, held until the cloud is gone.
    block: address_block::AddressBlock,
}

impl CloudControl {
    /// Starts `provider`'s mock with `seeded_nodes` instances, on an address block of its
    /// own; a cloud without a mock here is a skip.
    pub async fn start(provider: Provider, seeded_nodes: usize) -> Result<Self, CaseError> {
        let Some(mock) = provider.descriptor().mock.as_ref() else {
            return Err(CaseError::Skipped(format!(
                "this project has no mock of {}: its cases run on a real cluster, through its driver",
                provider.name()
            )));
        };
        let block = address_block::take();
        let backend = (mock.start)(seeded_nodes, block.index).await?;
        Ok(Self {
            provider,
            backend,
            block,
        })
    }

    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// Its /24 index in the 127/8 address pools, unique on the machine while it runs.
    pub fn address_block(&self) -> u8 {
        self.block.index
    }

    /// Whether the backend offers `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::Instances => self.backend.offers().instances.is_some(),
            Capability::LoadBalancers => self.backend.offers().load_balancers.is_some(),
            Capability::Routes => self.backend.offers().routes.is_some(),
            Capability::Faults => self.backend.offers().faults.is_some(),
            Capability::Journal => self.backend.offers().journal.is_some(),
        }
    }

    /// [`Self::has`] as a case precondition: a skip with the reason when it is missing.
    /// Where the provider's CCM has no such thing at all (no load balancers, no routes),
    /// the reason is the provider's, as [`Self::require`] gives it.
    pub fn require_capability(&self, capability: Capability) -> Result<(), CaseError> {
        if self.has(capability) {
            return Ok(());
        }
        let feature = match capability {
            Capability::LoadBalancers => Some(Feature::LoadBalancers),
            Capability::Routes => Some(Feature::Routes),
            _ => None,
        };
        if let Some(feature) = feature {
            self.require(feature)?;
        }
        Err(CaseError::Skipped(format!(
            "the harness has no {} for {}",
            capability.describe(),
            self.provider.name()
        )))
    }

    /// Whether this cloud can express `feature`; `Err` says precisely why not.
    pub fn supports(&self, feature: Feature) -> Result<(), String> {
        self.backend.supports(feature)
    }

    /// [`Self::supports`] as a case precondition: a skip with the reason when unsupported.
    pub fn require(&self, feature: Feature) -> Result<(), CaseError> {
        self.supports(feature).map_err(|why| {
            CaseError::Skipped(format!("{} cannot express it: {why}", self.provider.name()))
        })
    }

    fn instance_control(&self) -> Result<&dyn InstanceControl, CaseError> {
        self.require_capability(Capability::Instances)?;
        Ok(self.backend.offers().instances.expect("checked"))
    }

    fn lb_control(&self) -> Option<&dyn LoadBalancerControl> {
        self.backend.offers().load_balancers
    }

    fn route_control(&self) -> Result<&dyn RouteControl, CaseError> {
        self.require_capability(Capability::Routes)?;
        Ok(self.backend.offers().routes.expect("checked"))
    }

    /// A capability a case asked for without declaring it: a harness bug, not a verdict.
    fn undeclared<T>(&self, capability: Capability) -> T {
        panic!(
            "{} offers no {}: a case that uses it must name Capability::{capability:?} in its needs",
            self.provider.name(),
            capability.describe()
        )
    }

    fn instances_or_bug(&self) -> &dyn InstanceControl {
        self.backend
            .offers()
            .instances
            .unwrap_or_else(|| self.undeclared(Capability::Instances))
    }

    fn faults_or_bug(&self) -> &dyn FaultControl {
        self.backend
            .offers()
            .faults
            .unwrap_or_else(|| self.undeclared(Capability::Faults))
    }

    fn journal_or_bug(&self) -> &dyn JournalControl {
        self.backend
            .offers()
            .journal
            .unwrap_or_else(|| self.undeclared(Capability::Journal))
    }

    // ----- how the CCM is pointed at the cloud

    /// The ready-file object of DESIGN.md for this mock.
    pub fn ready_info(&self) -> serde_json::Value {
        self.backend.ready_info()
    }

    /// The provider's upstream cloud-config file pointing at this mock.
    pub fn cloud_config(&self) -> String {
        self.backend.cloud_config()
    }

    /// How a dual-stack cluster deploys this provider's CCM when it differs from
    /// [`Self::cloud_config`]: the config and extra CCM environment (`None`: no difference).
    pub fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        self.backend.dual_stack_deployment()
    }

    /// A cloud config that names the Secret `namespace/name` for its credentials instead of
    /// holding them, and the data that Secret needs; `Err` says why the provider's CCM has
    /// no such setting.
    pub fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        self.backend.secret_credentials_config(namespace, name)
    }

    /// The flag with which this provider's CCM returns `labels` as AdditionalLabels, where
    /// it has one; `None`: the provider has no such setting.
    pub fn additional_labels_flag(&self, labels: &[String]) -> Option<String> {
        self.backend.additional_labels_flag(labels)
    }

    /// Environment variables the CCM process needs for this cloud.
    pub fn ccm_env(&self) -> Vec<(String, String)> {
        self.backend.ccm_env()
    }

    pub fn region(&self) -> String {
        self.backend.region()
    }

    /// Every resource the CCM created through the cloud API that still exists, as
    /// `type name` lines: empty after a clean teardown.
    pub fn leaks(&self) -> Vec<String> {
        self.backend.leaks()
    }

    // ----- instances

    /// `n` IPv4 addresses the cloud accepts as internal IPs of a new instance (in its
    /// default zone), none of them in use: for cases that need to name addresses upfront.
    pub fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        self.instance_control()?.spare_internal_ips(n)
    }

    /// `n` addresses the cloud accepts as new external IPs of an instance, none in use
    /// (127/8 where the data plane needs them bound; some clouds' are not loopback).
    pub fn spare_external_ips(&self, n: usize) -> Vec<String> {
        self.instances_or_bug().spare_external_ips(n)
    }

    /// A providerID naming `instance` in a form its provider accepts but its CCM would not
    /// compute itself, where the generic `<name>://<region>/<id>` is not one (NI-07).
    pub fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        self.instances_or_bug().alternate_provider_id(instance)
    }

    pub fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        self.instance_control()?.create_instance(spec)
    }

    pub fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        self.instance_control()?.update_instance(id, patch)
    }

    pub fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.instance_control()?.delete_instance(id)
    }

    /// Starts rebooting an instance as its cloud's reboot call would, and holds it in the
    /// rebooting phase until [`Self::finish_reboot`], so a case can watch the CCM during
    /// the window instead of racing it (each backend documents what its cloud shows).
    pub fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.instance_control()?.begin_reboot(id)
    }

    /// Ends a reboot [`Self::begin_reboot`] holds: the instance is up as before.
    pub fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        self.instance_control()?.finish_reboot(id)
    }

    /// Whether the cloud shows the instance as rebooting (always false where a reboot is
    /// invisible).
    pub fn rebooting(&self, id: &str) -> bool {
        self.instances_or_bug().rebooting(id)
    }

    pub fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.instances_or_bug().instance_by_name(name)
    }

    pub fn instances(&self) -> Vec<Instance> {
        self.instances_or_bug().instances()
    }

    // ----- faults

    /// Injects `fault` in the cloud's own terms; returns the rule's id.
    pub fn inject(&self, fault: FaultSpec) -> u64 {
        self.faults_or_bug().inject(fault)
    }

    /// The cloud's fault engine, for rules beyond [`FaultSpec`] (the soak's presets).
    pub fn faults(&self) -> mock_cloud::Faults {
        self.faults_or_bug().faults()
    }

    pub fn clear_faults(&self) {
        if let Some(f) = self.backend.offers().faults {
            f.faults().clear()
        }
    }

    // ----- routes

    /// The routes of the cluster's router as `(destination, nexthop)`; none where the
    /// harness has no route control.
    pub fn routes(&self) -> Vec<(String, String)> {
        self.backend
            .offers()
            .routes
            .map(|r| r.routes())
            .unwrap_or_default()
    }

    /// Adds a route the CCM does not own (another tool's), to check it is left alone.
    pub fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        self.route_control()?.add_route(destination, nexthop)
    }

    // ----- load balancers

    /// Every load balancer in the cloud; none where the harness has no load-balancer
    /// control.
    pub fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        self.lb_control()
            .map(|l| l.load_balancers())
            .unwrap_or_default()
    }

    /// Whether the cloud's load balancers deliver packets with the frontend address as
    /// destination (a floating IP), so the simulated kube-proxy serves Service ports.
    pub fn load_balancers_use_floating_ip(&self) -> bool {
        self.lb_control()
            .is_some_and(|l| l.load_balancers_use_floating_ip())
    }

    /// Whether every Service's load balancer shares one set of backends (one backend pool
    /// per cluster, joined by each node's NIC), so a node change is one backend write for
    /// all Services rather than one per Service.
    pub fn load_balancers_share_backends(&self) -> bool {
        self.lb_control()
            .is_some_and(|l| l.load_balancers_share_backends())
    }

    /// The address a load balancer's ingress hostname stands for in this cloud (DNS names
    /// that resolve to their data-plane VIP); `None` when unknown.
    pub fn resolve_ingress(&self, hostname: &str) -> Option<String> {
        self.lb_control()?.resolve_ingress(hostname)
    }

    /// Annotations a Service of UDP ports needs for this cloud's CCM to make a load
    /// balancer that carries UDP.
    pub fn udp_service_annotations(&self) -> BTreeMap<String, String> {
        self.lb_control()
            .map(|l| l.udp_service_annotations())
            .unwrap_or_default()
    }

    /// Annotations that make the provider leave a Service's load balancer to another
    /// controller (`ImplementedElsewhere`); a skip where the provider has none
    /// ([`Feature::ImplementedElsewhere`]).
    pub fn implemented_elsewhere_annotations(&self) -> Result<BTreeMap<String, String>, CaseError> {
        self.require(Feature::ImplementedElsewhere)?;
        Ok(self
            .lb_control()
            .map(|l| l.implemented_elsewhere_annotations())
            .unwrap_or_default())
    }

    /// Annotations by which the provider records a load balancer's identity on its Service.
    pub fn load_balancer_id_annotations(&self) -> &'static [&'static str] {
        self.lb_control().map_or(&[], |l| l.id_annotations())
    }

    fn require_lb_control(&self) -> Result<&dyn LoadBalancerControl, CaseError> {
        self.require_capability(Capability::LoadBalancers)?;
        Ok(self.lb_control().expect("checked"))
    }

    /// Deletes load balancer `id` with the cloud's own API, as an operator would (the
    /// journal records it like any client's call); skips where the harness cannot.
    pub async fn delete_load_balancer_out_of_band(&self, id: &str) -> Result<(), CaseError> {
        self.require_lb_control()?
            .delete_load_balancer_out_of_band(id)
            .await
    }

    /// Makes the cloud hold every load-balancer create for `latency` before answering, so a
    /// case can act while the CCM is inside its ensure; `None` where the cloud has no such
    /// hold (some have pending states instead, [`Self::slow_load_balancers`]).
    pub fn hold_load_balancer_creates(&self, latency: Duration) -> Option<CreateHold> {
        self.lb_control()?.hold_load_balancer_creates(latency)
    }

    /// Makes the cloud's load balancers slow: each change stays pending for `reads` status
    /// reads, so a case can act while the CCM is mid-ensure.
    pub fn slow_load_balancers(&self, reads: u32) -> Result<(), CaseError> {
        self.require(Feature::LoadBalancers)?;
        self.require_lb_control()?.slow_load_balancers(reads)
    }

    /// The load-balancer name the in-tree provider gave `service` in a cluster named
    /// `cluster`.
    pub fn in_tree_load_balancer_name(
        &self,
        scheme: InTreeName,
        cluster: &str,
        service: &Service,
    ) -> Result<String, CaseError> {
        self.require_lb_control()?
            .in_tree_load_balancer_name(scheme, cluster, service)
    }

    /// Creates the load balancer named `name` that the in-tree provider made for `service`
    /// in cluster `cluster` (which must exist, so its node ports are allocated), in the
    /// cloud's own way (each backend documents it). The caller puts
    /// [`InTreeLoadBalancer::ingress`] in the Service's status.
    pub async fn seed_in_tree_load_balancer(
        &self,
        name: &str,
        cluster: &str,
        service: &Service,
        nodes: &[Instance],
    ) -> Result<InTreeLoadBalancer, CaseError> {
        self.require_lb_control()?
            .seed_in_tree_load_balancer(name, cluster, service, nodes)
            .await
    }

    // ----- the journal

    /// A handle another task can poll for the load balancers and the journal; `None` where
    /// the harness cannot watch this cloud's load balancers.
    pub fn observer(&self) -> Option<CloudObserver> {
        let lbs = self.lb_control()?.load_balancer_lister()?;
        let journal = self.backend.offers().journal?;
        Some(CloudObserver::new(
            journal.journal(),
            journal.refs_reader(),
            lbs,
        ))
    }

    /// The journal's last sequence number: a mark for [`Self::calls_since`].
    pub fn journal_mark(&self) -> u64 {
        self.journal_or_bug().journal().last_seq()
    }

    /// The journal lines of the calls after `mark` that an injected fault answered or
    /// delayed, oldest first.
    pub fn faulted_lines_since(&self, mark: u64) -> Vec<String> {
        let journal = self.journal_or_bug();
        journal
            .journal()
            .since(mark)
            .iter()
            .filter(|e| e.fault.is_some())
            .map(|e| format!("{} {}", e.time, journal.journal_line(e)))
            .collect()
    }

    /// Every call the cloud answered after `mark`, classified.
    pub fn calls_since(&self, mark: u64) -> Vec<CloudCall> {
        let journal = self.journal_or_bug();
        let refs = journal.refs_reader();
        journal
            .journal()
            .since(mark)
            .iter()
            .map(|e| CloudCall::read(e, refs))
            .collect()
    }

    fn count(&self, wanted: impl Fn(&CloudCall) -> bool) -> usize {
        let journal = self.journal_or_bug();
        let refs = journal.refs_reader();
        journal
            .journal()
            .count(|e| wanted(&CloudCall::read(e, refs)))
    }

    /// How many calls the CCM made to look up instances (any status), so cases can bound
    /// retries ("no hot loop").
    pub fn instance_lookups(&self) -> usize {
        self.count(|c| c.kind == CallKind::InstanceLookup)
    }

    /// How many calls were answered (or delayed) by an injected fault.
    pub fn faulted_calls(&self) -> usize {
        self.journal_or_bug().journal().count(|e| e.fault.is_some())
    }

    /// Writes the CCM made to routes.
    pub fn route_writes(&self) -> usize {
        self.count(|c| c.kind == CallKind::RouteWrite)
    }

    /// Calls the CCM made to the load-balancer API (any method), to assert "no cloud call".
    pub fn load_balancer_calls(&self) -> usize {
        self.count(|c| c.lb_op().is_some())
    }

    /// Load-balancer API writes the CCM made.
    pub fn load_balancer_writes(&self) -> usize {
        self.count(|c| c.lb_op().is_some_and(LbOp::is_write))
    }

    /// Calls a load-balancer sync makes: to the load-balancer API and the APIs it needs
    /// beside it (ports, floating IPs, security groups).
    pub fn load_balancer_related_calls(&self) -> usize {
        self.count(|c| {
            matches!(
                c.kind,
                CallKind::LoadBalancer(_) | CallKind::LoadBalancerSupport
            )
        })
    }

    /// When the CCM called the cloud's load-balancer API (any method), oldest first; `None`
    /// for a provider whose calls the harness does not time.
    pub fn load_balancer_call_times(&self) -> Option<Vec<jiff::Timestamp>> {
        if !self.lb_control()?.times_load_balancer_calls() {
            return None;
        }
        Some(
            self.calls_since(0)
                .into_iter()
                .filter(|c| c.lb_op().is_some())
                .map(|c| c.time)
                .collect(),
        )
    }

    /// Load-balancer calls after `mark`, grouped per load balancer (by the ids and names
    /// each call names), keeping the load balancers that got a backend write.
    pub fn lb_updates_since(&self, mark: u64) -> Vec<LbUpdate> {
        let keys = self
            .lb_control()
            .map(|l| l.load_balancer_refs())
            .unwrap_or_default();
        let mut spans: BTreeMap<String, LbUpdate> = BTreeMap::new();
        for call in self.calls_since(mark) {
            let Some(op) = call.lb_op() else { continue };
            let Some((id, _)) = keys.iter().find(|(_, k)| {
                k.iter()
                    .any(|k| !k.is_empty() && call.refs.iter().any(|r| r == k))
            }) else {
                continue;
            };
            let span = spans.entry(id.clone()).or_insert(LbUpdate {
                start: call.time,
                end: call.time,
                writes: 0,
            });
            span.start = span.start.min(call.time);
            span.end = span.end.max(call.time);
            span.writes += usize::from(op == LbOp::BackendWrite);
        }
        spans.into_values().filter(|u| u.writes > 0).collect()
    }

    /// A compact journal dump for failure details (empty without a journal).
    pub fn journal_text(&self, last: usize) -> String {
        let Some(journal) = self.backend.offers().journal else {
            return String::new();
        };
        let entries = journal.journal().entries();
        entries[entries.len().saturating_sub(last)..]
            .iter()
            .map(|e| journal.journal_line(e))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The whole journal, one timestamped line per request (the case's
    /// `cloud-journal.txt`; empty without a journal).
    pub fn journal_dump(&self) -> String {
        let Some(journal) = self.backend.offers().journal else {
            return String::new();
        };
        journal
            .journal()
            .entries()
            .iter()
            .map(|e| format!("{} {}\n", e.time, journal.journal_line(e)))
            .collect()
    }

    pub async fn shutdown(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.backend.shutdown()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn vsphere_has_no_load_balancers_or_routes() {
        crate::install_crypto_provider();
        let vsphere = Provider::parse("vsphere").unwrap();
        let cloud = CloudControl::start(vsphere, 0).await.unwrap();
        for f in [
            Feature::LoadBalancers,
            Feature::Routes,
            Feature::DualStackRoutes,
        ] {
            let why = cloud.supports(f).unwrap_err();
            assert!(
                why.contains("cloud-provider-vsphere returns false"),
                "{why}"
            );
        }
        assert!(matches!(
            cloud.require(Feature::LoadBalancers),
            Err(CaseError::Skipped(_))
        ));
        cloud.supports(Feature::NoZone).unwrap();
        assert!(cloud.observer().is_none());
        assert!(cloud.load_balancer_call_times().is_none());
        // Its mock has instances, faults and a journal, and no load balancers or routes.
        assert!(cloud.has(Capability::Instances));
        assert!(cloud.has(Capability::Faults));
        assert!(cloud.has(Capability::Journal));
        assert!(!cloud.has(Capability::LoadBalancers));
        assert!(!cloud.has(Capability::Routes));
        assert!(matches!(
            cloud.add_route("10.0.0.0/24", "1.2.3.4"),
            Err(CaseError::Skipped(_))
        ));
        // A capability the provider's CCM has no such thing for skips with its reason.
        match cloud.require_capability(Capability::LoadBalancers) {
            Err(CaseError::Skipped(why)) => {
                assert!(
                    why.contains("cloud-provider-vsphere returns false"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        cloud.require_capability(Capability::Journal).unwrap();
        cloud.shutdown().await;
    }

    #[tokio::test]
    async fn every_registered_mock_offers_every_capability_it_should() {
        crate::install_crypto_provider();
        for &provider in Provider::all() {
            let cloud = CloudControl::start(provider, 0).await.unwrap();
            for c in [
                Capability::Instances,
                Capability::Faults,
                Capability::Journal,
            ] {
                assert!(cloud.has(c), "{} lacks {c:?}", provider.name());
            }
            // Load balancers and routes exactly where the provider has them.
            assert_eq!(
                cloud.has(Capability::LoadBalancers),
                cloud.supports(Feature::LoadBalancers).is_ok(),
                "{}",
                provider.name()
            );
            assert_eq!(
                cloud.has(Capability::Routes),
                cloud.supports(Feature::Routes).is_ok(),
                "{}",
                provider.name()
            );
            cloud.shutdown().await;
        }
    }

    #[tokio::test]
    async fn a_cloud_without_a_mock_is_a_skip() {
        let hetzner = Provider::named("hetzner", "hcloud");
        match CloudControl::start(hetzner, 0).await {
            Err(CaseError::Skipped(why)) => assert!(why.contains("no mock of hetzner"), "{why}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("started a mock of a cloud without one"),
        }
    }
}
