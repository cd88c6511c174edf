//! Leader election against a stubbed API server: client-go's GET / POST / PUT-with-RV.

use std::time::Duration;

use reference_ccm::leader::{LeaderConfig, LeaderElector};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LEASE: &str =
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

fn elector(server: &MockServer, identity: &str) -> LeaderElector {
    let uri = match server.uri().parse() {
        Ok(u) => u,
        Err(e) => panic!("{e}"),
    };
    let client = match kube::Client::try_from(kube::Config::new(uri)) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    LeaderElector::new(
        client,
        LeaderConfig {
            namespace: "kube-system".into(),
            name: "cloud-controller-manager".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        },
    )
}

fn not_found() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_json(
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

fn lease(holder: &str, rv: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "cloud-controller-manager", "namespace": "kube-system", "resourceVersion": rv},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z",
                 "leaseTransitions": 3}})
}

#[tokio::test]
async fn creates_the_lease_when_missing() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(LEASE))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(LEASES))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            ResponseTemplate::new(201).set_body_json(body)
        })
        .expect(1)
        .mount(&server)
        .await;
    let mut e = elector(&server, "host_1");
    assert!(matches!(e.try_acquire_or_renew().await, Ok(true)));
    let requests = server.received_requests().await.unwrap_or_default();
    let post = requests
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .map(|r| r.body.clone())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&post).unwrap_or(Value::Null);
    assert_eq!(body["spec"]["holderIdentity"], "host_1");
    assert_eq!(body["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(body["spec"]["leaseTransitions"], 0);
    let renew = body["spec"]["renewTime"].as_str().unwrap_or_default();
    assert!(
        renew.ends_with('Z') && renew.len() == "2026-01-01T00:00:00.000000Z".len(),
        "{renew}"
    );
}

#[tokio::test]
async fn renews_own_lease_with_resource_version_and_respects_others() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(LEASE))
        .respond_with(ResponseTemplate::new(200).set_body_json(lease("host_1", "7")))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(LEASE))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            ResponseTemplate::new(200).set_body_json(body)
        })
        .expect(1)
        .mount(&server)
        .await;
    let mut me = elector(&server, "host_1");
    assert!(matches!(me.try_acquire_or_renew().await, Ok(true)));
    let requests = server.received_requests().await.unwrap_or_default();
    let put = requests
        .iter()
        .find(|r| r.method.as_str() == "PUT")
        .map(|r| r.body.clone())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&put).unwrap_or(Value::Null);
    assert_eq!(body["metadata"]["resourceVersion"], "7");
    assert_eq!(body["spec"]["leaseTransitions"], 3); // same holder: no transition
    assert_eq!(body["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z");

    // Someone else holds a lease we just observed: not expired yet, no write.
    let mut other = elector(&server, "host_2");
    assert!(matches!(other.try_acquire_or_renew().await, Ok(false)));
}
