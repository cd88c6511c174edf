//! What a cloud backend can do, as small traits: every backend implements [`Backend`]
//! (what a CCM needs to be pointed at the cloud), and each of the capabilities it can
//! offer: [`InstanceControl`], [`LoadBalancerControl`], [`RouteControl`],
//! [`FaultControl`] and [`JournalControl`]. A mock offers them all; a cloud the harness
//! reaches only through a provider's driver offers instances and load balancers and
//! neither faults nor a journal. A case names the [`Capability`]s it needs
//! (`Case::needs`), and the runner skips it, with the reason, where one is missing, as it
//! does for a [`Feature`].
//!
//! Shaped like k8s.io/cloud-provider `cloud.go`, where `Interface` hands out
//! `Instances()`, `LoadBalancer()` and `Routes()` each with an "is it supported" bool.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use mock_cloud::{Journal, JournalEntry};

use super::calls::{LbLister, RefsReader, path_and_resource_refs};
use super::types::{
    CloudLoadBalancer, CreateHold, FaultSpec, Feature, InTreeLoadBalancer, InTreeName, Instance,
    InstancePatch, InstanceSpec,
};
use crate::error::CaseError;

/// A part of cloud control a backend may or may not offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// Create, change, stop and delete instances, and read them back.
    Instances,
    /// List the cloud's load balancers (and act on them out of band where it can).
    LoadBalancers,
    /// Read the routes of the cluster's router, and add one.
    Routes,
    /// Make the cloud API answer with errors or delays (a mock's fault rules).
    Faults,
    /// Read back every request the CCM made (a mock's request journal).
    Journal,
}

impl Capability {
    /// How a skip names it.
    pub fn describe(self) -> &'static str {
        match self {
            Capability::Instances => "instance control",
            Capability::LoadBalancers => "load-balancer control",
            Capability::Routes => "route control",
            Capability::Faults => "fault injection",
            Capability::Journal => "a request journal",
        }
    }
}

/// What every cloud backend answers: how the CCM under test is pointed at the cloud, which
/// situations its provider can express, and what the CCM left behind; and which
/// capabilities it offers ([`Offers`]).
pub(crate) trait Backend: Send + Sync {
    /// Whether this cloud can express `feature`; `Err` says precisely why not.
    fn supports(&self, feature: Feature) -> Result<(), String>;
    /// The ready-file object of DESIGN.md for this cloud.
    fn ready_info(&self) -> serde_json::Value;
    /// The provider's upstream cloud-config file pointing at this cloud.
    fn cloud_config(&self) -> String;
    fn region(&self) -> String;
    fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        None
    }
    fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String>;
    fn additional_labels_flag(&self, _labels: &[String]) -> Option<String> {
        None
    }
    fn ccm_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Every resource the CCM created through the cloud API that still exists.
    fn leaks(&self) -> Vec<String>;
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()>;

    /// The capabilities this backend offers.
    fn offers(&self) -> Offers<'_>;
}

/// The capabilities a backend offers, each `None` where it has not that control.
#[derive(Clone, Copy, Default)]
pub(crate) struct Offers<'a> {
    pub instances: Option<&'a dyn InstanceControl>,
    pub load_balancers: Option<&'a dyn LoadBalancerControl>,
    pub routes: Option<&'a dyn RouteControl>,
    pub faults: Option<&'a dyn FaultControl>,
    pub journal: Option<&'a dyn JournalControl>,
}

impl<'a> Offers<'a> {
    /// Every capability, from a backend that implements them all (a mock with load
    /// balancers and routes).
    pub fn all<T>(backend: &'a T) -> Self
    where
        T: InstanceControl + LoadBalancerControl + RouteControl + FaultControl + JournalControl,
    {
        Self {
            instances: Some(backend),
            load_balancers: Some(backend),
            routes: Some(backend),
            faults: Some(backend),
            journal: Some(backend),
        }
    }
}

/// Instances: the machines behind the cluster's nodes.
pub(crate) trait InstanceControl: Send + Sync {
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError>;
    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("127.20.9.{}", 9 - i % 9)).collect()
    }
    fn alternate_provider_id(&self, _instance: &Instance) -> Option<String> {
        None
    }
    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError>;
    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError>;
    fn delete_instance(&self, id: &str) -> Result<(), CaseError>;
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError>;
    fn finish_reboot(&self, id: &str) -> Result<(), CaseError>;
    fn rebooting(&self, id: &str) -> bool;
    fn instance_by_name(&self, name: &str) -> Option<Instance>;
    fn instances(&self) -> Vec<Instance>;
}

/// Load balancers as the cloud holds them, and what a Service needs to get one.
pub(crate) trait LoadBalancerControl: Send + Sync {
    fn load_balancers(&self) -> Vec<CloudLoadBalancer>;
    /// `(identity, name)` per load balancer for a `CloudObserver`; `None` when the
    /// harness cannot watch this cloud's load balancers from another task.
    fn load_balancer_lister(&self) -> Option<LbLister> {
        None
    }
    /// Identifiers that name each load balancer in calls, by load-balancer id.
    fn load_balancer_refs(&self) -> Vec<(String, Vec<String>)> {
        self.load_balancers()
            .into_iter()
            .map(|lb| (lb.id.clone(), vec![lb.id, lb.name]))
            .collect()
    }
    /// Whether the journal's load-balancer calls can be timed for this cloud.
    fn times_load_balancer_calls(&self) -> bool {
        false
    }
    fn hold_load_balancer_creates(&self, _latency: Duration) -> Option<CreateHold> {
        None
    }
    fn slow_load_balancers(&self, _reads: u32) -> Result<(), CaseError> {
        Err(CaseError::Skipped(
            "the harness has no slow load-balancer lifecycle for this cloud".into(),
        ))
    }
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        Box::pin(async {
            Err(CaseError::Skipped(
                "the harness cannot delete this cloud's load balancers out of band yet".into(),
            ))
        })
    }
    fn in_tree_load_balancer_name(
        &self,
        _scheme: InTreeName,
        _cluster: &str,
        _service: &Service,
    ) -> Result<String, CaseError> {
        Err(CaseError::Skipped(
            "no in-tree load-balancer seeding for this cloud".into(),
        ))
    }
    fn seed_in_tree_load_balancer<'a>(
        &'a self,
        _name: &'a str,
        _cluster: &'a str,
        _service: &'a Service,
        _nodes: &'a [Instance],
    ) -> BoxFuture<'a, Result<InTreeLoadBalancer, CaseError>> {
        Box::pin(async {
            Err(CaseError::Skipped(
                "no in-tree load-balancer seeding for this cloud".into(),
            ))
        })
    }
    fn resolve_ingress(&self, _hostname: &str) -> Option<String> {
        None
    }
    fn udp_service_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn implemented_elsewhere_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Whether load balancers deliver with the frontend address as destination (floating
    /// IP), so nodes must serve Service ports too (`mock_kubelet::KubeletConfig::floating_ip`).
    fn load_balancers_use_floating_ip(&self) -> bool {
        false
    }
    /// Whether every Service's load balancer shares one set of backends, so a node change
    /// is one backend write for all of them (one backend pool per cluster).
    fn load_balancers_share_backends(&self) -> bool {
        false
    }
    /// Annotations by which the provider records a load balancer's identity on its Service
    /// (the soak's invariants watch that it is written once and never lost).
    fn id_annotations(&self) -> &'static [&'static str] {
        &[]
    }
}

/// The routes of the cluster's router.
pub(crate) trait RouteControl: Send + Sync {
    /// `(destination, nexthop)` per route.
    fn routes(&self) -> Vec<(String, String)>;
    /// Adds a route the CCM does not own (another tool's).
    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError>;
}

/// Faults injected into the cloud API the CCM uses.
pub(crate) trait FaultControl: Send + Sync {
    /// Injects `fault` in the cloud's own terms; returns the rule's id.
    fn inject(&self, fault: FaultSpec) -> u64;
    /// The cloud's fault engine, for rules beyond [`FaultSpec`].
    fn faults(&self) -> mock_cloud::Faults;
}

/// The cloud's request journal.
pub(crate) trait JournalControl: Send + Sync {
    fn journal(&self) -> Journal;
    /// Where this cloud's requests name a load balancer, for [`CloudCall::refs`]
    /// (default: the path's segments and the gate's resource).
    fn refs_reader(&self) -> RefsReader {
        path_and_resource_refs
    }
    /// One journal entry as a line of a failure's detail.
    /// Default: the REST form (service, method, path and query, status).
    fn journal_line(&self, e: &JournalEntry) -> String {
        format!(
            "{} {} {} {}?{} -> {}",
            e.seq, e.service, e.method, e.path, e.query, e.status
        )
    }
}
