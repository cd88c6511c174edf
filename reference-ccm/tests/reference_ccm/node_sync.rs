//! The cloud-node controller's per-node work against a stubbed Kubernetes API
//! (wiremock): the exact requests a real API server would see.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use reference_ccm::address::addr;
use reference_ccm::cloud::{CloudError, InstanceMetadata, Instances};
use reference_ccm::controllers::node::{NodeSyncer, SyncError, UNINITIALIZED_TAINT};
use reference_ccm::metrics::Metrics;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A cloud whose answer the test sets.
struct FakeCloud {
    answer: Mutex<Result<Option<InstanceMetadata>, String>>,
}

impl FakeCloud {
    fn new(answer: Result<Option<InstanceMetadata>, String>) -> Arc<Self> {
        Arc::new(Self {
            answer: Mutex::new(answer),
        })
    }
    fn get(&self) -> Result<Option<InstanceMetadata>, CloudError> {
        match self.answer.lock() {
            Ok(a) => a.clone().map_err(CloudError::Other),
            Err(_) => Err(CloudError::Other("poisoned".into())),
        }
    }
}

impl Instances for FakeCloud {
    async fn instance_exists(&self, _: &Node) -> Result<bool, CloudError> {
        Ok(true)
    }
    async fn instance_shutdown(&self, _: &Node) -> Result<bool, CloudError> {
        Ok(false)
    }
    async fn instance_metadata(&self, _: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        self.get()
    }
}

fn metadata(addresses: Vec<NodeAddress>) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "openstack:///abc".into(),
        instance_type: "m1.small".into(),
        node_addresses: addresses,
        zone: "az1".into(),
        region: "RegionOne".into(),
        additional_labels: Default::default(),
    }
}

fn node(tainted: bool, addresses: Value) -> Node {
    let taints = if tainted {
        json!([{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    let value = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "5",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {"taints": taints},
        "status": {"addresses": addresses}
    });
    match serde_json::from_value(value) {
        Ok(n) => n,
        Err(e) => panic!("{e}"),
    }
}

fn echo(status: u16) -> impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static {
    move |req: &Request| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_else(|_| json!({}));
        ResponseTemplate::new(status).set_body_json(body)
    }
}

async fn syncer(server: &MockServer, cloud: Arc<FakeCloud>) -> NodeSyncer<FakeCloud> {
    let uri = match server.uri().parse() {
        Ok(u) => u,
        Err(e) => panic!("{e}"),
    };
    let client = match kube::Client::try_from(kube::Config::new(uri)) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    NodeSyncer::new(client, cloud, Arc::new(Metrics::default()))
}

fn bodies(requests: &[Request], verb: &str, p: &str) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == p)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn initializes_a_tainted_node() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/api/v1/nodes/n1"))
        .respond_with(echo(200))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/api/v1/nodes/n1/status"))
        .and(header(
            "content-type",
            "application/strategic-merge-patch+json",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(node(false, json!([]))))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/namespaces/default/events"))
        .respond_with(echo(201))
        .expect(1)
        .mount(&server)
        .await;
    let cloud = FakeCloud::new(Ok(Some(metadata(vec![
        addr("InternalIP", "10.0.0.1"),
        addr("ExternalIP", "192.0.2.1"),
    ]))));
    let s = syncer(&server, cloud).await;
    let result = s
        .sync_node(&node(true, json!([{"type": "Hostname", "address": "n1"}])))
        .await;
    assert!(result.is_ok(), "{result:?}");

    let requests = server.received_requests().await.unwrap_or_default();
    let put = &bodies(&requests, "PUT", "/api/v1/nodes/n1")[0];
    assert_eq!(put["metadata"]["resourceVersion"], "5");
    assert_eq!(put["spec"]["providerID"], "openstack:///abc");
    assert!(
        put["spec"]["taints"]
            .as_array()
            .is_none_or(|t| t.is_empty()),
        "{put}"
    );
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "m1.small"),
        ("beta.kubernetes.io/instance-type", "m1.small"),
        ("topology.kubernetes.io/zone", "az1"),
        ("failure-domain.beta.kubernetes.io/zone", "az1"),
        ("topology.kubernetes.io/region", "RegionOne"),
        ("failure-domain.beta.kubernetes.io/region", "RegionOne"),
        ("kubernetes.io/hostname", "n1"),
    ] {
        assert_eq!(put["metadata"]["labels"][k], v, "{k}");
    }
    let patch = &bodies(&requests, "PATCH", "/api/v1/nodes/n1/status")[0];
    assert_eq!(
        patch,
        &json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "ExternalIP", "address": "192.0.2.1"},
            {"type": "Hostname", "address": "n1"},
            {"$patch": "replace"}
        ]}})
    );
    let event = &bodies(&requests, "POST", "/api/v1/namespaces/default/events")[0];
    assert_eq!(event["reason"], "Synced");
    assert_eq!(event["message"], "Node synced successfully");
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["involvedObject"]["kind"], "Node");
    assert_eq!(event["involvedObject"]["uid"], "u1");
    assert_eq!(event["source"]["component"], "cloud-node-controller");
    assert_eq!(event["reportingComponent"], "cloud-node-controller");
    assert_eq!(event["count"], 1);
    assert!(event["firstTimestamp"].is_string() && event["lastTimestamp"].is_string());
}

#[tokio::test]
async fn conflict_regets_and_retries() {
    let server = MockServer::start().await;
    let puts = Arc::new(AtomicUsize::new(0));
    let counter = puts.clone();
    Mock::given(method("PUT"))
        .and(path("/api/v1/nodes/n1"))
        .respond_with(move |req: &Request| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                ResponseTemplate::new(409)
                    .set_body_json(json!({"kind": "Status", "apiVersion": "v1",
                    "status": "Failure", "reason": "Conflict", "code": 409, "message": "conflict"}))
            } else {
                echo(200)(req)
            }
        })
        .mount(&server)
        .await;
    let mut fresh = node(true, json!([{"type": "Hostname", "address": "n1"}]));
    fresh.metadata.resource_version = Some("6".into());
    Mock::given(method("GET"))
        .and(path("/api/v1/nodes/n1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&fresh))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/api/v1/nodes/n1/status"))
        .respond_with(echo(200))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/namespaces/default/events"))
        .respond_with(echo(201))
        .mount(&server)
        .await;
    let s = syncer(
        &server,
        FakeCloud::new(Ok(Some(metadata(vec![addr("InternalIP", "10.0.0.1")])))),
    )
    .await;
    let result = s.sync_node(&node(true, json!([]))).await;
    assert!(result.is_ok(), "{result:?}");
    let requests = server.received_requests().await.unwrap_or_default();
    let put_bodies = bodies(&requests, "PUT", "/api/v1/nodes/n1");
    assert_eq!(put_bodies.len(), 2);
    assert_eq!(put_bodies[1]["metadata"]["resourceVersion"], "6");
}

#[tokio::test]
async fn cloud_errors_and_nil_metadata_keep_the_taint() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .respond_with(echo(200))
        .expect(0)
        .mount(&server)
        .await;
    let s = syncer(&server, FakeCloud::new(Err("boom".into()))).await;
    assert!(matches!(
        s.sync_node(&node(true, json!([]))).await,
        Err(SyncError::Cloud { .. })
    ));
    let s = syncer(&server, FakeCloud::new(Ok(None))).await;
    assert!(s.sync_node(&node(true, json!([]))).await.is_ok());
    let s = syncer(
        &server,
        FakeCloud::new(Ok(Some(InstanceMetadata {
            provider_id: String::new(),
            ..metadata(vec![])
        }))),
    )
    .await;
    assert!(matches!(
        s.sync_node(&node(true, json!([]))).await,
        Err(SyncError::NoProviderId { .. })
    ));
}

#[tokio::test]
async fn untainted_nodes_only_get_label_reconcile() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path("/api/v1/nodes/n1"))
        .respond_with(echo(200))
        .expect(1)
        .mount(&server)
        .await;
    let s = syncer(&server, FakeCloud::new(Err("must not be called".into()))).await;
    let mut n = node(false, json!([]));
    n.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("failure-domain.beta.kubernetes.io/zone".into(), "z1".into());
    assert!(s.sync_node(&n).await.is_ok());
    // Already consistent: no request at all.
    let mut consistent = n.clone();
    consistent
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("topology.kubernetes.io/zone".into(), "z1".into());
    assert!(s.sync_node(&consistent).await.is_ok());
    let requests = server.received_requests().await.unwrap_or_default();
    let patch = &bodies(&requests, "PATCH", "/api/v1/nodes/n1")[0];
    assert_eq!(
        patch,
        &json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "z1"}}})
    );
}

#[tokio::test]
async fn periodic_address_sync_patches_only_changes() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path("/api/v1/nodes/n1/status"))
        .respond_with(echo(200))
        .expect(1)
        .mount(&server)
        .await;
    let current = json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]);
    let cloud = FakeCloud::new(Ok(Some(metadata(vec![addr("InternalIP", "10.0.0.1")]))));
    let s = syncer(&server, cloud.clone()).await;
    // Unchanged (kubelet Hostname kept): no patch.
    assert!(matches!(
        s.sync_addresses(&node(false, current.clone())).await,
        Ok(false)
    ));
    // Tainted: untouched.
    assert!(matches!(
        s.sync_addresses(&node(true, json!([]))).await,
        Ok(false)
    ));
    // Cloud returns nothing: never wipe.
    if let Ok(mut a) = cloud.answer.lock() {
        *a = Ok(Some(metadata(vec![])));
    }
    assert!(matches!(
        s.sync_addresses(&node(false, current.clone())).await,
        Ok(false)
    ));
    // New ExternalIP: one patch.
    if let Ok(mut a) = cloud.answer.lock() {
        *a = Ok(Some(metadata(vec![
            addr("InternalIP", "10.0.0.1"),
            addr("ExternalIP", "192.0.2.9"),
        ])));
    }
    assert!(matches!(
        s.sync_addresses(&node(false, current)).await,
        Ok(true)
    ));
}
