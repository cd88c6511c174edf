//! The service-lb controller: cloud load balancers for `type: LoadBalancer` Services.
//!
//! Exists because exposing Services is the second job of every CCM. Behaviour follows
//! `kubernetes/cloud-provider` `controllers/service/controller.go` and
//! `service/helpers` (paraphrased, not copied):
//! - Services are enqueued on add when they want a load balancer or need cleanup, on
//!   update when `needsUpdate(old, new)` or they need cleanup; there is no periodic
//!   re-ensure. `loadBalancerClass` Services are ignored entirely.
//! - Ensure: event `EnsuringLoadBalancer`, add the `service.kubernetes.io/load-balancer-cleanup`
//!   finalizer BEFORE calling the cloud, `EnsureLoadBalancer` with the stable node set (all
//!   nodes minus being-deleted, excluded by label, tainted `ToBeDeletedByClusterAutoscaler`;
//!   NotReady kept, KEP-3458), `EnsuredLoadBalancer`, status patched only when the ingress
//!   differs. `ImplementedElsewhere` returns quietly.
//! - Cleanup (type changed or deletion with the finalizer): `GetLoadBalancer`; if it exists
//!   `DeletingLoadBalancer` + `EnsureLoadBalancerDeleted`; remove the finalizer;
//!   `DeletedLoadBalancer`; empty the status.
//! - Errors: `SyncLoadBalancerFailed`, requeue 5 s doubling to 300 s per key; a
//!   [`LbError::Retry`] requeues after its fixed delay.
//! - Node sync: node add/delete, or an update flipping the exclusion label predicate or
//!   `spec.providerID`, triggers `UpdateLoadBalancer` for every synced LB Service whose
//!   node set changed, `--concurrent-service-syncs` at a time (`UpdatedLoadBalancer`,
//!   `UnAvailableLoadBalancer` for zero nodes, `UpdateLoadBalancerFailed` unless the LB is
//!   gone); failures go to the service queue for a full ensure.
//!
//! Events are recorded off the sync path, in order, by one recorder task: upstream's
//! `record.EventRecorder` only hands the event to a broadcaster (client-go
//! `tools/record/event.go`), so a sync never waits for the Event to be written.
//!
//! Service writes are JSON merge patches on `services/{name}/status` (upstream's
//! `PatchService` patches the status subresource; metadata such as finalizers goes through
//! it, spec does not).
//!
//! TEST ONLY breaks (`--testing-break`, see [`crate::options::TestingBreak`]):
//! `forget-finalizer` never adds the cleanup finalizer (everything else as usual);
//! `retry-without-backoff` requeues failed Services at once; `drop-failed-deletes` does not
//! retry a Service being deleted whose load-balancer delete failed (until the next start).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::{Notify, mpsc};

use crate::cloud::{LbError, LoadBalancer};
use crate::controllers::events::{EventType, service_event};
use crate::controllers::workqueue::WorkQueue;

/// Event source of this controller (`source.component`).
pub const COMPONENT: &str = "service-controller";
/// Finalizer guarding cloud cleanup (cloud-provider `service/helpers`).
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Node label excluding a node from load balancers (`v1.LabelNodeExcludeBalancers`).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Cluster-autoscaler's deletion taint (cloud-provider `api/well_known_taints.go`).
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

const BACKOFF_BASE: Duration = Duration::from_secs(5);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Settings from the command line.
#[derive(Debug, Clone)]
pub struct ServiceControllerOptions {
    /// `--cluster-name`, passed to every cloud call.
    pub cluster_name: String,
    /// `--concurrent-service-syncs`: service workers and node-sync parallelism.
    pub workers: usize,
    /// TEST ONLY, `--testing-break=forget-finalizer`: never add [`FINALIZER`].
    pub forget_finalizer: bool,
    /// TEST ONLY, `--testing-break=retry-without-backoff`: failed syncs are retried at once.
    pub retry_without_backoff: bool,
    /// TEST ONLY, `--testing-break=drop-failed-deletes`: a Service being deleted whose
    /// cleanup failed is never synced again by this process (it keeps its finalizer).
    pub drop_failed_deletes: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("failed to check if load balancer exists before cleanup: {0}")]
    Get(LbError),
    #[error("failed to delete load balancer: {0}")]
    Delete(LbError),
    #[error("failed to ensure load balancer: {0}")]
    Ensure(LbError),
    #[error("failed to add load balancer cleanup finalizer: {0}")]
    AddFinalizer(kube::Error),
    #[error("failed to remove load balancer cleanup finalizer: {0}")]
    RemoveFinalizer(kube::Error),
    #[error("failed to update load balancer status: {0}")]
    Status(kube::Error),
}

impl SyncError {
    /// The fixed delay of a wrapped `RetryError`.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SyncError::Ensure(LbError::Retry { retry_after, .. })
            | SyncError::Delete(LbError::Retry { retry_after, .. })
            | SyncError::Get(LbError::Retry { retry_after, .. }) => Some(*retry_after),
            _ => None,
        }
    }
}

// --- predicates (pure, unit tested) ------------------------------------------------------

fn spec_type(s: &Service) -> Option<&str> {
    s.spec.as_ref().and_then(|s| s.type_.as_deref())
}

/// Type LoadBalancer and no `loadBalancerClass`.
pub fn wants_load_balancer(s: &Service) -> bool {
    spec_type(s) == Some("LoadBalancer")
        && s.spec
            .as_ref()
            .is_none_or(|spec| spec.load_balancer_class.is_none())
}

pub fn has_finalizer(s: &Service) -> bool {
    s.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The finalizer list to write before ensuring a load balancer: the Service's finalizers
/// plus [`FINALIZER`]. `None` when there is nothing to write: the Service has it already,
/// or the process runs the TEST ONLY `--testing-break=forget-finalizer` (`forget`), which
/// never adds it (a finalizer already there is kept and still removed on cleanup).
pub fn finalizers_to_add(s: &Service, forget: bool) -> Option<Vec<String>> {
    if forget || has_finalizer(s) {
        return None;
    }
    let mut finalizers = s.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER.to_owned());
    Some(finalizers)
}

/// Has the finalizer and is being deleted or no longer of type LoadBalancer.
pub fn needs_cleanup(s: &Service) -> bool {
    has_finalizer(s)
        && (s.metadata.deletion_timestamp.is_some() || spec_type(s) != Some("LoadBalancer"))
}

/// The fields whose change makes the controller call `EnsureLoadBalancer` again.
pub fn needs_update(old: &Service, new: &Service) -> bool {
    let (wo, wn) = (wants_load_balancer(old), wants_load_balancer(new));
    if !wo && !wn {
        return false;
    }
    if wo != wn {
        return true;
    }
    let default = Default::default();
    let o = old.spec.as_ref().unwrap_or(&default);
    let n = new.spec.as_ref().unwrap_or(&default);
    let ports = |s: &k8s_openapi::api::core::v1::ServiceSpec| {
        s.ports
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                (
                    p.name,
                    p.protocol,
                    p.port,
                    p.node_port,
                    p.target_port,
                    p.app_protocol,
                )
            })
            .collect::<Vec<_>>()
    };
    let count = |v: &Option<Vec<String>>| v.as_ref().map_or(0, Vec::len);
    o.load_balancer_source_ranges != n.load_balancer_source_ranges
        || ports(o) != ports(n)
        || o.session_affinity != n.session_affinity
        || o.session_affinity_config != n.session_affinity_config
        || o.load_balancer_ip != n.load_balancer_ip
        || o.external_ips.clone().unwrap_or_default() != n.external_ips.clone().unwrap_or_default()
        || old.metadata.annotations.clone().unwrap_or_default()
            != new.metadata.annotations.clone().unwrap_or_default()
        || old.metadata.uid != new.metadata.uid
        || o.external_traffic_policy != n.external_traffic_policy
        || o.health_check_node_port != n.health_check_node_port
        || count(&o.ip_families) != count(&n.ip_families)
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `nodeIncludedPredicate`: no exclusion label, or one that parses as false.
/// Unparsable values (including "") exclude.
pub fn node_included(node: &Node) -> bool {
    match node.labels().get(EXCLUDE_LABEL) {
        None => true,
        Some(v) => parse_go_bool(v) == Some(false),
    }
}

/// `nodeUnTaintedPredicate`.
pub fn node_untainted(node: &Node) -> bool {
    !node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

/// `stableNodeSetPredicates`: not being deleted, included, not tainted for deletion.
pub fn node_in_stable_set(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none() && node_included(node) && node_untainted(node)
}

/// `shouldSyncUpdatedNode`: the exclusion predicate or providerID changed. Taints and
/// readiness alone do not trigger a sync.
pub fn should_sync_updated_node(old: &Node, new: &Node) -> bool {
    let pid = |n: &Node| n.spec.as_ref().and_then(|s| s.provider_id.clone());
    node_included(old) != node_included(new) || pid(old) != pid(new)
}

/// `nodesSufficientlyEqual`: same names with the same providerIDs.
pub fn nodes_sufficiently_equal(old: &[Node], new: &[Node]) -> bool {
    let distill = |nodes: &[Node]| -> BTreeMap<String, Option<String>> {
        nodes
            .iter()
            .map(|n| {
                (
                    n.name_any(),
                    n.spec.as_ref().and_then(|s| s.provider_id.clone()),
                )
            })
            .collect()
    };
    old.len() == new.len() && distill(old) == distill(new)
}

/// `LoadBalancerStatusEqual`: ingress lists equal in order by ip, hostname, ipMode, ports.
pub fn lb_status_equal(a: &LoadBalancerStatus, b: &LoadBalancerStatus) -> bool {
    let norm = |s: &LoadBalancerStatus| -> Vec<LoadBalancerIngress> {
        s.ingress
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|mut i| {
                i.ports = i.ports.filter(|p| !p.is_empty());
                i
            })
            .collect()
    };
    norm(a) == norm(b)
}

/// The nodes used as backends now.
pub fn stable_node_set<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Vec<Node> {
    nodes
        .into_iter()
        .filter(|n| node_in_stable_set(n))
        .cloned()
        .collect()
}

/// The informer transform upstream's controller managers install
/// (kubernetes cmd/kube-controller-manager/app/controllermanager.go `trim`): the caches
/// drop `managedFields`, which no controller reads. Every sync copies the node set out of
/// the cache, and a Node's managedFields outweigh the rest of it.
fn trim_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

fn key_of(s: &Service) -> String {
    format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any())
}

// --- the controller ----------------------------------------------------------------------

/// State shared by the watchers and the workers.
pub struct ServiceController<L> {
    client: Client,
    cloud: Arc<L>,
    opts: ServiceControllerOptions,
    /// Informer stores.
    services: RwLock<HashMap<String, Service>>,
    nodes: RwLock<BTreeMap<String, Node>>,
    services_synced: AtomicBool,
    nodes_synced: AtomicBool,
    synced: Notify,
    /// Services processed at least once (upstream `serviceCache`), used by node sync.
    cache: Mutex<HashMap<String, Service>>,
    /// Node set each Service was last synced with (`lastSyncedNodes`).
    last_synced_nodes: Mutex<HashMap<String, Vec<Node>>>,
    queue: Arc<WorkQueue>,
    node_sync: Notify,
    /// Events waiting for the recorder task, in the order they happened.
    events: mpsc::UnboundedSender<Event>,
    events_rx: Mutex<Option<mpsc::UnboundedReceiver<Event>>>,
    /// TEST ONLY (`drop-failed-deletes`): Services whose cleanup failed, never synced
    /// again by this process.
    abandoned: Mutex<std::collections::HashSet<String>>,
}

impl<L: LoadBalancer> ServiceController<L> {
    pub fn new(client: Client, cloud: Arc<L>, opts: ServiceControllerOptions) -> Arc<Self> {
        let (events, events_rx) = mpsc::unbounded_channel();
        let queue = WorkQueue::named_with(
            "service",
            BACKOFF_BASE,
            BACKOFF_MAX,
            opts.retry_without_backoff,
        );
        Arc::new(Self {
            client,
            cloud,
            opts,
            services: RwLock::new(HashMap::new()),
            nodes: RwLock::new(BTreeMap::new()),
            services_synced: AtomicBool::new(false),
            nodes_synced: AtomicBool::new(false),
            synced: Notify::new(),
            cache: Mutex::new(HashMap::new()),
            last_synced_nodes: Mutex::new(HashMap::new()),
            queue,
            node_sync: Notify::new(),
            events,
            events_rx: Mutex::new(Some(events_rx)),
            abandoned: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// Writes queued Events one after the other (the broadcaster's sink); runs until the
    /// controller is dropped. A second call returns at once.
    async fn record_events(&self) {
        let rx = self
            .events_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(mut rx) = rx else {
            return;
        };
        while let Some(event) = rx.recv().await {
            let namespace = event.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            let reason = event.reason.clone().unwrap_or_default();
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::warn!(reason, "recording event failed: {e}");
            }
        }
    }

    fn current_nodes(&self) -> Vec<Node> {
        let nodes = self.nodes.read().unwrap_or_else(|p| p.into_inner());
        stable_node_set(nodes.values())
    }

    async fn wait_synced(&self) {
        loop {
            let notified = self.synced.notified();
            if self.services_synced.load(Ordering::SeqCst)
                && self.nodes_synced.load(Ordering::SeqCst)
            {
                return;
            }
            notified.await;
        }
    }

    /// Informer `AddFunc`/`UpdateFunc`/`DeleteFunc` for Services.
    fn on_service(&self, event: WatchEvent<Service>, init_keys: &mut Vec<String>) {
        match event {
            WatchEvent::Init => init_keys.clear(),
            WatchEvent::InitApply(s) | WatchEvent::Apply(s) => {
                let key = key_of(&s);
                init_keys.push(key.clone());
                let old = self
                    .services
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key.clone(), s.clone());
                let enqueue = match &old {
                    None => wants_load_balancer(&s) || needs_cleanup(&s),
                    Some(old) => needs_update(old, &s) || needs_cleanup(&s),
                };
                if enqueue {
                    self.queue.add(&key);
                }
            }
            WatchEvent::Delete(s) => {
                let key = key_of(&s);
                self.services
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                self.queue.add(&key);
            }
            WatchEvent::InitDone => {
                // Objects gone while we were not watching: as a delete event.
                let gone: Vec<String> = {
                    let mut store = self.services.write().unwrap_or_else(|p| p.into_inner());
                    let gone: Vec<String> = store
                        .keys()
                        .filter(|k| !init_keys.contains(k))
                        .cloned()
                        .collect();
                    for k in &gone {
                        store.remove(k);
                    }
                    gone
                };
                for k in gone {
                    self.queue.add(&k);
                }
                self.services_synced.store(true, Ordering::SeqCst);
                self.synced.notify_waiters();
            }
        }
    }

    /// Informer handlers for Nodes: add/delete or a relevant update triggers a node sync.
    fn on_node(&self, event: WatchEvent<Node>, init_keys: &mut Vec<String>) {
        let mut trigger = false;
        match event {
            WatchEvent::Init => init_keys.clear(),
            WatchEvent::InitApply(n) | WatchEvent::Apply(n) => {
                let name = n.name_any();
                init_keys.push(name.clone());
                let old = self
                    .nodes
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name, n.clone());
                trigger = old.is_none_or(|old| should_sync_updated_node(&old, &n));
            }
            WatchEvent::Delete(n) => {
                self.nodes
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&n.name_any());
                trigger = true;
            }
            WatchEvent::InitDone => {
                let mut store = self.nodes.write().unwrap_or_else(|p| p.into_inner());
                let before = store.len();
                store.retain(|k, _| init_keys.contains(k));
                trigger = store.len() != before;
                drop(store);
                self.nodes_synced.store(true, Ordering::SeqCst);
                self.synced.notify_waiters();
            }
        }
        if trigger {
            self.node_sync.notify_one();
        }
    }

    async fn patch_service(
        &self,
        service: &Service,
        patch: serde_json::Value,
    ) -> Result<(), kube::Error> {
        let api: Api<Service> = Api::namespaced(
            self.client.clone(),
            &service.namespace().unwrap_or_default(),
        );
        api.patch_status(
            &service.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
    }

    async fn add_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        let Some(finalizers) = finalizers_to_add(service, self.opts.forget_finalizer) else {
            return Ok(());
        };
        tracing::info!(service = %key_of(service), "Adding finalizer to service");
        self.patch_service(service, json!({"metadata": {"finalizers": finalizers}}))
            .await
    }

    async fn remove_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        if !has_finalizer(service) {
            return Ok(());
        }
        let finalizers: Vec<String> = service
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        tracing::info!(service = %key_of(service), "Removing finalizer from service");
        self.patch_service(service, json!({"metadata": {"finalizers": finalizers}}))
            .await
    }

    async fn patch_status(
        &self,
        service: &Service,
        new: &LoadBalancerStatus,
    ) -> Result<(), kube::Error> {
        let previous = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        if lb_status_equal(&previous, new) {
            return Ok(());
        }
        let ingress = match &new.ingress {
            Some(i) if !i.is_empty() => json!(i),
            _ => serde_json::Value::Null,
        };
        tracing::info!(service = %key_of(service), "Patching status for service");
        self.patch_service(
            service,
            json!({"status": {"loadBalancer": {"ingress": ingress}}}),
        )
        .await
    }

    /// Queues an Event for the recorder task (stamped now, written soon).
    async fn event(&self, service: &Service, kind: EventType, reason: &str, message: &str) {
        let now = jiff::Timestamp::now();
        if let Some(event) = service_event(service, COMPONENT, kind, reason, message, now) {
            // Only fails when the recorder is gone, i.e. the process is ending.
            let _ = self.events.send(event);
        }
    }

    /// `syncService(key)`.
    pub async fn sync_service(&self, key: &str) -> Result<(), SyncError> {
        let service = self
            .services
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        let Some(service) = service else {
            // Deleted: with finalizers the cleanup already happened on the update.
            self.cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
            self.last_synced_nodes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
            return Ok(());
        };
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned(), service.clone());
        match self.sync_load_balancer_if_needed(&service).await {
            Ok(deleted) => {
                if deleted {
                    self.cache
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(key);
                }
                Ok(())
            }
            Err(e) => {
                let message = format!("Error syncing load balancer: {e}");
                self.event(
                    &service,
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    &message,
                )
                .await;
                Err(e)
            }
        }
    }

    /// Returns whether the load balancer was deleted (the delete path ran).
    async fn sync_load_balancer_if_needed(&self, service: &Service) -> Result<bool, SyncError> {
        let cluster = &self.opts.cluster_name;
        if !wants_load_balancer(service) || needs_cleanup(service) {
            let exists = self
                .cloud
                .get_load_balancer(cluster, service)
                .await
                .map_err(SyncError::Get)?
                .is_some();
            if exists {
                tracing::info!(service = %key_of(service), "Deleting existing load balancer");
                self.event(
                    service,
                    EventType::Normal,
                    "DeletingLoadBalancer",
                    "Deleting load balancer",
                )
                .await;
                match self
                    .cloud
                    .ensure_load_balancer_deleted(cluster, service)
                    .await
                {
                    Ok(()) | Err(LbError::ImplementedElsewhere) => {}
                    Err(e) => return Err(SyncError::Delete(e)),
                }
            }
            self.remove_finalizer(service)
                .await
                .map_err(SyncError::RemoveFinalizer)?;
            self.event(
                service,
                EventType::Normal,
                "DeletedLoadBalancer",
                "Deleted load balancer",
            )
            .await;
            match self
                .patch_status(service, &LoadBalancerStatus::default())
                .await
            {
                Ok(()) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(SyncError::Status(e)),
            }
            return Ok(true);
        }
        tracing::info!(service = %key_of(service), "Ensuring load balancer");
        self.event(
            service,
            EventType::Normal,
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
        )
        .await;
        self.add_finalizer(service)
            .await
            .map_err(SyncError::AddFinalizer)?;
        let nodes = self.current_nodes();
        if nodes.is_empty() {
            self.event(
                service,
                EventType::Warning,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )
            .await;
        }
        self.last_synced_nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key_of(service), nodes.clone());
        crate::metrics::global().loadbalancer_sync_total.inc();
        let status = match self
            .cloud
            .ensure_load_balancer(cluster, service, &nodes)
            .await
        {
            Ok(status) => status,
            Err(LbError::ImplementedElsewhere) => return Ok(false),
            Err(e) => return Err(SyncError::Ensure(e)),
        };
        self.event(
            service,
            EventType::Normal,
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        )
        .await;
        match self.patch_status(service, &status).await {
            Ok(()) => Ok(false),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
            Err(e) => Err(SyncError::Status(e)),
        }
    }

    /// `nodeSyncService`; returns true when the Service must be retried.
    async fn node_sync_service(&self, service: &Service) -> bool {
        if !wants_load_balancer(service) {
            return false;
        }
        let key = key_of(service);
        let new_nodes = self.current_nodes();
        let old_nodes = {
            let mut last = self
                .last_synced_nodes
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let old = last
                .get(&key)
                .map(|v| stable_node_set(v.iter()))
                .unwrap_or_default();
            last.insert(key.clone(), new_nodes.clone());
            old
        };
        if nodes_sufficiently_equal(&old_nodes, &new_nodes) {
            return false;
        }
        let cluster = &self.opts.cluster_name;
        tracing::info!(service = %key, nodes = new_nodes.len(), "Updating backends for load balancer");
        let metrics = crate::metrics::global();
        metrics.loadbalancer_sync_total.inc();
        let started = std::time::Instant::now();
        let result = self
            .cloud
            .update_load_balancer(cluster, service, &new_nodes)
            .await;
        metrics
            .update_loadbalancer_host_latency_seconds
            .observe(started.elapsed().as_secs_f64());
        if matches!(&result, Err(e) if !matches!(e, LbError::ImplementedElsewhere)) {
            metrics.nodesync_error_total.inc();
        }
        match result {
            Ok(()) => {
                if new_nodes.is_empty() {
                    self.event(
                        service,
                        EventType::Warning,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer",
                    )
                    .await;
                } else {
                    self.event(
                        service,
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts",
                    )
                    .await;
                }
                false
            }
            Err(LbError::ImplementedElsewhere) => false,
            Err(e) => {
                match self.cloud.get_load_balancer(cluster, service).await {
                    Ok(None) => return false,
                    Ok(Some(_)) => {}
                    Err(ge) => {
                        tracing::warn!(service = %key, "failed to check if load balancer exists: {ge}")
                    }
                }
                let mut names: Vec<String> = new_nodes.iter().map(|n| n.name_any()).collect();
                names.sort();
                let shown: Vec<String> = names.iter().take(20).cloned().collect();
                let message = format!(
                    "Error updating load balancer with new hosts {shown:?} [node names limited, total number of nodes: {}], error: {e}",
                    new_nodes.len()
                );
                self.event(
                    service,
                    EventType::Warning,
                    "UpdateLoadBalancerFailed",
                    &message,
                )
                .await;
                true
            }
        }
    }

    /// `syncNodes`: every synced Service, `workers` at a time; failures go to the queue.
    pub async fn sync_nodes(self: &Arc<Self>) {
        let services: Vec<Service> = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let workers = self.opts.workers.max(1);
        let started = std::time::Instant::now();
        let retry: Vec<String> = futures::stream::iter(services)
            .map(|s| {
                let this = Arc::clone(self);
                async move { this.node_sync_service(&s).await.then(|| key_of(&s)) }
            })
            .buffer_unordered(workers)
            .filter_map(|k| async move { k })
            .collect()
            .await;
        crate::metrics::global()
            .nodesync_latency_seconds
            .observe(started.elapsed().as_secs_f64());
        for key in retry {
            self.queue.add(&key);
        }
    }

    /// Whether the cached Service carries a deletion timestamp.
    fn is_being_deleted(&self, key: &str) -> bool {
        self.services
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    }

    async fn service_worker(self: Arc<Self>) {
        loop {
            let key = self.queue.get().await;
            let abandoned = self
                .abandoned
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&key);
            if abandoned {
                self.queue.forget(&key);
                self.queue.done(&key);
                continue;
            }
            match self.sync_service(&key).await {
                Ok(()) => self.queue.forget(&key),
                Err(e) if self.opts.drop_failed_deletes && self.is_being_deleted(&key) => {
                    tracing::warn!(service = %key, "error processing service (abandoned by --testing-break=drop-failed-deletes): {e}");
                    self.abandoned
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.clone());
                    self.queue.forget(&key);
                }
                Err(e) => match e.retry_after() {
                    Some(delay) => {
                        tracing::warn!(service = %key, ?delay, "error processing service (retrying): {e}");
                        self.queue.add_after(&key, delay);
                    }
                    None => {
                        let delay = self.queue.add_rate_limited(&key);
                        tracing::warn!(service = %key, ?delay, "error processing service (retrying with exponential backoff): {e}");
                    }
                },
            }
            self.queue.done(&key);
        }
    }

    async fn node_worker(self: Arc<Self>) {
        loop {
            self.node_sync.notified().await;
            self.sync_nodes().await;
        }
    }
}

/// Runs the controller until the process ends.
pub async fn run<L: LoadBalancer>(client: Client, cloud: Arc<L>, opts: ServiceControllerOptions) {
    let workers = opts.workers.max(1);
    let ctl = ServiceController::new(client.clone(), cloud, opts);
    let recorder = Arc::clone(&ctl);
    tokio::spawn(async move { recorder.record_events().await });
    let services: Api<Service> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client);
    let svc_ctl = Arc::clone(&ctl);
    tokio::spawn(async move {
        let mut keys = Vec::new();
        let mut stream = watcher(services, watcher::Config::default())
            .default_backoff()
            .modify(trim_managed_fields)
            .boxed();
        loop {
            match stream.try_next().await {
                Ok(Some(event)) => svc_ctl.on_service(event, &mut keys),
                Ok(None) => break,
                Err(e) => tracing::warn!("service watch: {e}"),
            }
        }
    });
    let node_ctl = Arc::clone(&ctl);
    tokio::spawn(async move {
        let mut keys = Vec::new();
        let mut stream = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .modify(trim_managed_fields)
            .boxed();
        loop {
            match stream.try_next().await {
                Ok(Some(event)) => node_ctl.on_node(event, &mut keys),
                Ok(None) => break,
                Err(e) => tracing::warn!("node watch: {e}"),
            }
        }
    });
    ctl.wait_synced().await;
    tracing::info!(workers, "service controller caches synced");
    for _ in 0..workers {
        tokio::spawn(Arc::clone(&ctl).service_worker());
    }
    Arc::clone(&ctl).node_worker().await;
}

#[cfg(test)]
mod tests;
