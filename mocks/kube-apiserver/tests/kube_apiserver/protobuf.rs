//! Protobuf request bodies, encoded by an independent encoder (the prost types of the
//! `k8s-pb` crate, generated from upstream's .proto files), decoded by the server into
//! the same objects a JSON body gives.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::v1 as discovery;
use k8s_pb::api::events::v1 as events;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use mock_kube_apiserver::{AppState, Config, router};
use prost::Message;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "pb-token";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn app() -> axum::Router {
    router(AppState::new(&Config {
        token: TOKEN.into(),
        ..Config::default()
    }))
}

/// `k8s\0` + runtime.Unknown{typeMeta, raw}, as client-go's protobuf serializer writes.
fn envelope(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    ct: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let r = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, ct)
        .body(Body::from(body))
        .expect("request");
    let resp = app.clone().oneshot(r).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn object_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        // What gogo-protobuf writes for Go's zero values.
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: BTreeMap::from([("zone".into(), "a".into())]),
        ..Default::default()
    }
}

fn time(seconds: i64) -> meta::Time {
    meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    }
}

#[tokio::test]
async fn node_create_and_status_update_from_protobuf() {
    let app = app();
    let node = core::Node {
        metadata: Some(object_meta("pb-node")),
        spec: Some(core::NodeSpec {
            provider_id: Some("openstack:///abc".into()),
            unschedulable: Some(false),
            taints: vec![core::Taint {
                key: Some("node.cloudprovider.kubernetes.io/uninitialized".into()),
                value: Some("true".into()),
                effect: Some("NoSchedule".into()),
                time_added: None,
            }],
            ..Default::default()
        }),
        status: Some(core::NodeStatus {
            capacity: BTreeMap::from([(
                "cpu".into(),
                Quantity {
                    string: Some("4".into()),
                },
            )]),
            addresses: vec![core::NodeAddress {
                r#type: Some("InternalIP".into()),
                address: Some("10.0.0.5".into()),
            }],
            conditions: vec![core::NodeCondition {
                r#type: Some("Ready".into()),
                status: Some("True".into()),
                last_heartbeat_time: Some(time(1_700_000_000)),
                ..Default::default()
            }],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            ..Default::default()
        }),
    };
    let (s, created) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        PROTOBUF,
        envelope("v1", "Node", &node),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "Node");
    assert_eq!(created["metadata"]["labels"], json!({"zone": "a"}));
    assert!(
        created["metadata"].get("generateName").is_none(),
        "{created}"
    );
    assert_eq!(created["spec"]["providerID"], "openstack:///abc");
    assert!(created["spec"].get("unschedulable").is_none());
    assert_eq!(
        created["spec"]["taints"],
        json!([{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}])
    );
    assert_eq!(created["status"]["capacity"], json!({"cpu": "4"}));
    assert_eq!(
        created["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "10.0.0.5"}])
    );
    assert_eq!(
        created["status"]["conditions"][0]["lastHeartbeatTime"],
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        created["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );

    // PUT /status with the stored resourceVersion, as a CCM's UpdateStatus does.
    let mut update = node.clone();
    let m = update.metadata.get_or_insert_with(Default::default);
    m.resource_version = created["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    m.uid = created["metadata"]["uid"].as_str().map(str::to_string);
    update
        .status
        .get_or_insert_with(Default::default)
        .addresses
        .push(core::NodeAddress {
            r#type: Some("ExternalIP".into()),
            address: Some("172.24.4.10".into()),
        });
    let (s, updated) = send(
        &app,
        "PUT",
        "/api/v1/nodes/pb-node/status",
        PROTOBUF,
        envelope("v1", "Node", &update),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{updated}");
    assert_eq!(updated["status"]["addresses"][1]["address"], "172.24.4.10");
}

#[tokio::test]
async fn service_from_protobuf_equals_the_same_service_from_json() {
    let app = app();
    let ports = |svc_name: &str| core::Service {
        metadata: Some(meta::ObjectMeta {
            name: Some(svc_name.into()),
            ..Default::default()
        }),
        spec: Some(core::ServiceSpec {
            r#type: Some("LoadBalancer".into()),
            selector: BTreeMap::from([("app".into(), "web".into())]),
            ports: vec![
                core::ServicePort {
                    name: Some("http".into()),
                    protocol: Some("TCP".into()),
                    port: Some(80),
                    target_port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("web".into()),
                    }),
                    node_port: Some(0),
                    ..Default::default()
                },
                core::ServicePort {
                    name: Some("https".into()),
                    protocol: Some("TCP".into()),
                    port: Some(443),
                    target_port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(8443),
                        str_val: Some(String::new()),
                    }),
                    ..Default::default()
                },
            ],
            allocate_load_balancer_node_ports: Some(false),
            external_traffic_policy: Some("Local".into()),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    };
    let (s, from_pb) = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/services",
        PROTOBUF,
        envelope("v1", "Service", &ports("pb")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_pb}");
    let json_body = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "js"},
        "spec": {
            "type": "LoadBalancer", "selector": {"app": "web"},
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"},
                {"name": "https", "protocol": "TCP", "port": 443, "targetPort": 8443},
            ],
            "allocateLoadBalancerNodePorts": false,
            "externalTrafficPolicy": "Local",
        },
    });
    let (s, from_json) = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/services",
        "application/json",
        serde_json::to_vec(&json_body).expect("json"),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_json}");
    let comparable = |v: &Value| {
        let mut spec = v["spec"].clone();
        for key in ["clusterIP", "clusterIPs", "healthCheckNodePort"] {
            spec.as_object_mut().map(|m| m.remove(key));
        }
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            port.as_object_mut().map(|m| m.remove("nodePort"));
        }
        spec
    };
    assert_eq!(comparable(&from_pb), comparable(&from_json));
    assert_eq!(from_pb["spec"]["ports"][0]["targetPort"], "web");
    assert_eq!(from_pb["spec"]["ports"][1]["targetPort"], 8443);
    assert_eq!(from_pb["spec"]["allocateLoadBalancerNodePorts"], false);
    assert!(
        from_pb["spec"]["healthCheckNodePort"]
            .as_i64()
            .is_some_and(|p| p > 0)
    );
}

#[tokio::test]
async fn lease_events_and_endpointslices_from_protobuf() {
    let app = app();
    let lease = coordination::Lease {
        metadata: Some(object_meta("ccm")),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("ccm-0".into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(5_000),
            }),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    let (s, v) = send(
        &app,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        PROTOBUF,
        envelope("coordination.k8s.io/v1", "Lease", &lease),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["metadata"]["namespace"], "kube-system");
    assert_eq!(
        v["spec"],
        json!({"holderIdentity": "ccm-0", "leaseDurationSeconds": 15,
               "acquireTime": "2023-11-14T22:13:20.000005Z", "leaseTransitions": 0})
    );

    let reference = core::ObjectReference {
        kind: Some("Service".into()),
        namespace: Some("default".into()),
        name: Some("web".into()),
        ..Default::default()
    };
    let event = events::Event {
        metadata: Some(object_meta("web.1")),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_700_000_000),
            nanos: Some(0),
        }),
        reporting_controller: Some("service-controller".into()),
        reporting_instance: Some("ccm-0".into()),
        action: Some("Ensuring".into()),
        reason: Some("EnsuringLoadBalancer".into()),
        regarding: Some(reference.clone()),
        note: Some("Ensuring load balancer".into()),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        PROTOBUF,
        envelope("events.k8s.io/v1", "Event", &event),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["regarding"]["name"], "web");
    assert_eq!(v["eventTime"], "2023-11-14T22:13:20.000000Z");

    let core_event = core::Event {
        metadata: Some(object_meta("web.2")),
        involved_object: Some(reference),
        reason: Some("EnsuredLoadBalancer".into()),
        message: Some("Ensured load balancer".into()),
        source: Some(core::EventSource {
            component: Some("service-controller".into()),
            host: Some(String::new()),
        }),
        first_timestamp: Some(time(1_700_000_000)),
        last_timestamp: Some(time(1_700_000_001)),
        count: Some(1),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/events",
        PROTOBUF,
        envelope("v1", "Event", &core_event),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["source"], json!({"component": "service-controller"}));
    assert_eq!(v["lastTimestamp"], "2023-11-14T22:13:21Z");
    assert_eq!(v["count"], 1);

    let slice = discovery::EndpointSlice {
        metadata: Some(object_meta("web-abc")),
        address_type: Some("IPv4".into()),
        endpoints: vec![discovery::Endpoint {
            addresses: vec!["10.0.0.7".into()],
            conditions: Some(discovery::EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: None,
            }),
            node_name: Some("n1".into()),
            ..Default::default()
        }],
        ports: vec![discovery::EndpointPort {
            name: Some(String::new()),
            protocol: Some("TCP".into()),
            port: Some(8080),
            app_protocol: None,
        }],
    };
    let (s, v) = send(
        &app,
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        PROTOBUF,
        envelope("discovery.k8s.io/v1", "EndpointSlice", &slice),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["endpoints"],
        json!([{"addresses": ["10.0.0.7"], "conditions": {"ready": false, "serving": true}, "nodeName": "n1"}])
    );
    assert_eq!(
        v["ports"],
        json!([{"name": "", "protocol": "TCP", "port": 8080}])
    );
}

#[tokio::test]
async fn protobuf_delete_options_unsupported_types_and_garbage() {
    let app = app();
    let node = core::Node {
        metadata: Some(object_meta("victim")),
        ..Default::default()
    };
    let (s, _) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        PROTOBUF,
        envelope("v1", "Node", &node),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let opts = |uid: &str, dry_run: bool| meta::DeleteOptions {
        preconditions: Some(meta::Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        dry_run: if dry_run {
            vec!["All".into()]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let delete = |o: meta::DeleteOptions| {
        let app = app.clone();
        async move {
            send(
                &app,
                "DELETE",
                "/api/v1/nodes/victim",
                PROTOBUF,
                envelope("meta.k8s.io/v1", "DeleteOptions", &o),
            )
            .await
        }
    };
    let (s, v) = delete(opts("not-the-uid", false)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let (_, got) = send(&app, "GET", "/api/v1/nodes/victim", "", Vec::new()).await;
    let uid = got["metadata"]["uid"].as_str().expect("uid").to_string();
    let (s, _) = delete(opts(&uid, true)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = send(&app, "GET", "/api/v1/nodes/victim", "", Vec::new()).await;
    assert_eq!(s, StatusCode::OK, "dry-run delete kept it");
    let (s, _) = delete(opts(&uid, false)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = send(&app, "GET", "/api/v1/nodes/victim", "", Vec::new()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Reviews decode too: a TokenReview of an unknown token.
    let review = k8s_pb::api::authentication::v1::TokenReview {
        spec: Some(k8s_pb::api::authentication::v1::TokenReviewSpec {
            token: Some("not-a-token".into()),
            audiences: Vec::new(),
        }),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        PROTOBUF,
        envelope("authentication.k8s.io/v1", "TokenReview", &review),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"]["error"], "invalid bearer token");
    // Not protobuf at all, or cut short: 400, and nothing stored.
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        PROTOBUF,
        b"{\"metadata\":{}}".to_vec(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let body = envelope("v1", "Node", &node);
    let (s, _) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        PROTOBUF,
        body[..body.len() - 3].to_vec(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A kind that does not match the URL: 400, as for JSON.
    let (s, _) = send(
        &app,
        "POST",
        "/api/v1/nodes",
        PROTOBUF,
        envelope("v1", "Service", &node),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn service_accounts_and_rbac_from_protobuf() {
    let app = app();
    // A CCM with --use-service-account-credentials creates its controllers' accounts.
    let sa = core::ServiceAccount {
        metadata: Some(object_meta("node-controller")),
        secrets: vec![core::ObjectReference {
            name: Some("legacy-token".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        }],
        image_pull_secrets: Vec::new(),
        automount_service_account_token: Some(false),
    };
    let (s, created) = send(
        &app,
        "POST",
        "/api/v1/namespaces/kube-system/serviceaccounts",
        PROTOBUF,
        envelope("v1", "ServiceAccount", &sa),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "ServiceAccount");
    assert_eq!(created["metadata"]["namespace"], "kube-system");
    assert_eq!(created["automountServiceAccountToken"], false);
    assert_eq!(created["secrets"], json!([{"name": "legacy-token"}]));

    let role = rbac::ClusterRole {
        metadata: Some(object_meta("system:cloud-node-controller")),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into(), "patch".into()],
            api_groups: vec![String::new()],
            resources: vec!["nodes/status".into()],
            ..Default::default()
        }],
        aggregation_rule: Some(rbac::AggregationRule {
            cluster_role_selectors: vec![meta::LabelSelector {
                match_labels: BTreeMap::from([("ccm".into(), "true".into())]),
                match_expressions: Vec::new(),
            }],
        }),
    };
    let (s, created) = send(
        &app,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        PROTOBUF,
        envelope("rbac.authorization.k8s.io/v1", "ClusterRole", &role),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["rules"],
        json!([{"verbs": ["get", "patch"], "apiGroups": [""], "resources": ["nodes/status"]}])
    );
    assert_eq!(
        created["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"ccm": "true"}}]})
    );

    let binding = rbac::ClusterRoleBinding {
        metadata: Some(object_meta("system:cloud-node-controller")),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            api_group: Some(String::new()),
            name: Some("node-controller".into()),
            namespace: Some("kube-system".into()),
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("ClusterRole".into()),
            name: Some("system:cloud-node-controller".into()),
        }),
    };
    let (s, created) = send(
        &app,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        PROTOBUF,
        envelope(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            &binding,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["subjects"],
        json!([{"kind": "ServiceAccount", "name": "node-controller", "namespace": "kube-system"}])
    );
    assert_eq!(
        created["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:cloud-node-controller"})
    );
}

/// What `kubectl create namespace|secret|configmap|deployment` send: typed clients encode
/// protobuf, with every non-pointer Go field present even when zero.
#[tokio::test]
async fn kubectl_create_kinds_from_protobuf() {
    let app = app();
    let ns = core::Namespace {
        metadata: Some(object_meta("pb-ns")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: Some(String::new()),
            conditions: Vec::new(),
        }),
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces",
        PROTOBUF,
        envelope("v1", "Namespace", &ns),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"]["phase"], "Active");

    let secret = core::Secret {
        metadata: Some(object_meta("cloud-config")),
        data: BTreeMap::from([
            ("cloud.conf".into(), b"[Global]\n".to_vec()),
            ("empty".into(), Vec::new()),
        ]),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/pb-ns/secrets",
        PROTOBUF,
        envelope("v1", "Secret", &secret),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["data"],
        json!({"cloud.conf": "W0dsb2JhbF0K", "empty": ""})
    );
    assert_eq!(v["type"], "Opaque");

    let cm = core::ConfigMap {
        metadata: Some(object_meta("flags")),
        data: BTreeMap::from([("region".into(), "r1".into())]),
        binary_data: BTreeMap::from([("blob".into(), vec![0u8, 1])]),
        immutable: None,
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/pb-ns/configmaps",
        PROTOBUF,
        envelope("v1", "ConfigMap", &cm),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["data"], json!({"region": "r1"}));
    assert_eq!(v["binaryData"], json!({"blob": "AAE="}));
    assert!(v.get("immutable").is_none(), "{v}");

    // `kubectl create deployment web --image=...`, zero values included.
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let container = core::Container {
        name: Some("web".into()),
        image: Some("registry.example/web:1.0".into()),
        working_dir: Some(String::new()),
        resources: Some(core::ResourceRequirements::default()),
        termination_message_path: Some(String::new()),
        termination_message_policy: Some(String::new()),
        image_pull_policy: Some(String::new()),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    let pod_spec = core::PodSpec {
        containers: vec![container],
        restart_policy: Some(String::new()),
        dns_policy: Some(String::new()),
        service_account_name: Some(String::new()),
        service_account: Some(String::new()),
        node_name: Some(String::new()),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        hostname: Some(String::new()),
        subdomain: Some(String::new()),
        scheduler_name: Some(String::new()),
        priority_class_name: Some(String::new()),
        ..Default::default()
    };
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            labels: labels.clone(),
            ..object_meta("web")
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(1),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                match_expressions: Vec::new(),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: labels.clone(),
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(pod_spec),
            }),
            strategy: Some(apps::DeploymentStrategy::default()),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    };
    let (s, from_pb) = send(
        &app,
        "POST",
        "/apis/apps/v1/namespaces/pb-ns/deployments",
        PROTOBUF,
        envelope("apps/v1", "Deployment", &deployment),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_pb}");
    let json_body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web2", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "registry.example/web:1.0", "resources": {}}]}},
                 "strategy": {}},
        "status": {},
    });
    let (s, from_json) = send(
        &app,
        "POST",
        "/apis/apps/v1/namespaces/pb-ns/deployments",
        "application/json",
        serde_json::to_vec(&json_body).expect("json"),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_json}");
    assert_eq!(from_pb["spec"], from_json["spec"]);
    assert_eq!(
        from_pb["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        "25%"
    );
    assert_eq!(from_pb["metadata"]["generation"], 1);
}

/// A CCM DaemonSet through protobuf: embedded Go structs (a volume's source, a probe's
/// handler), quantities, int-or-string ports, pointers to zero values.
#[tokio::test]
async fn daemonset_from_protobuf_equals_the_same_daemonset_from_json() {
    let app = app();
    let labels = BTreeMap::from([("k8s-app".to_string(), "ccm".to_string())]);
    let container = core::Container {
        name: Some("ccm".into()),
        image: Some("registry.example/ccm:v1".into()),
        args: vec!["--v=2".into()],
        env: vec![core::EnvVar {
            name: Some("CLUSTER_NAME".into()),
            value: None,
            value_from: Some(core::EnvVarSource {
                config_map_key_ref: Some(core::ConfigMapKeySelector {
                    local_object_reference: Some(core::LocalObjectReference {
                        name: Some("flags".into()),
                    }),
                    key: Some("cluster-name".into()),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
        }],
        resources: Some(core::ResourceRequirements {
            requests: BTreeMap::from([(
                "cpu".into(),
                Quantity {
                    string: Some("100m".into()),
                },
            )]),
            ..Default::default()
        }),
        volume_mounts: vec![core::VolumeMount {
            name: Some("cloud-config".into()),
            read_only: Some(true),
            mount_path: Some("/etc/config".into()),
            ..Default::default()
        }],
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: Some("/healthz".into()),
                    port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(10258),
                        str_val: Some(String::new()),
                    }),
                    scheme: Some("HTTPS".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(15),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod_spec = core::PodSpec {
        containers: vec![container],
        volumes: vec![
            core::Volume {
                name: Some("cloud-config".into()),
                volume_source: Some(core::VolumeSource {
                    secret: Some(core::SecretVolumeSource {
                        secret_name: Some("cloud-config".into()),
                        default_mode: Some(420),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            core::Volume {
                name: Some("scratch".into()),
                volume_source: Some(core::VolumeSource {
                    empty_dir: Some(core::EmptyDirVolumeSource::default()),
                    ..Default::default()
                }),
            },
        ],
        node_selector: BTreeMap::from([(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        )]),
        tolerations: vec![core::Toleration {
            key: Some("node.cloudprovider.kubernetes.io/uninitialized".into()),
            value: Some("true".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }],
        host_network: Some(true),
        service_account_name: Some("cloud-controller-manager".into()),
        security_context: Some(core::PodSecurityContext {
            run_as_user: Some(1001),
            run_as_non_root: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let ds = apps::DaemonSet {
        metadata: Some(object_meta("ccm")),
        spec: Some(apps::DaemonSetSpec {
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                match_expressions: Vec::new(),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: labels.clone(),
                    ..Default::default()
                }),
                spec: Some(pod_spec),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let (s, from_pb) = send(
        &app,
        "POST",
        "/apis/apps/v1/namespaces/kube-system/daemonsets",
        PROTOBUF,
        envelope("apps/v1", "DaemonSet", &ds),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_pb}");
    let json_body = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ccm-json"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "ccm"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "ccm"}},
                "spec": {
                    "containers": [{
                        "name": "ccm", "image": "registry.example/ccm:v1", "args": ["--v=2"],
                        "env": [{"name": "CLUSTER_NAME", "valueFrom": {"configMapKeyRef":
                            {"name": "flags", "key": "cluster-name", "optional": false}}}],
                        "resources": {"requests": {"cpu": "100m"}},
                        "volumeMounts": [{"name": "cloud-config", "readOnly": true, "mountPath": "/etc/config"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 10258, "scheme": "HTTPS"},
                                          "initialDelaySeconds": 15},
                    }],
                    "volumes": [
                        {"name": "cloud-config", "secret": {"secretName": "cloud-config", "defaultMode": 420}},
                        {"name": "scratch", "emptyDir": {}},
                    ],
                    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                    "tolerations": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                     "value": "true", "effect": "NoSchedule"}],
                    "hostNetwork": true,
                    "serviceAccountName": "cloud-controller-manager",
                    "securityContext": {"runAsUser": 1001, "runAsNonRoot": false},
                },
            },
        },
    });
    let (s, from_json) = send(
        &app,
        "POST",
        "/apis/apps/v1/namespaces/kube-system/daemonsets",
        "application/json",
        serde_json::to_vec(&json_body).expect("json"),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{from_json}");
    assert_eq!(from_pb["spec"], from_json["spec"]);
    assert_eq!(from_pb["status"], from_json["status"]);
}

#[tokio::test]
async fn pods_and_their_status_decode() {
    // What a Go client sends for a pod and, as a kubelet, for its status.
    let app = app();
    let pod = core::Pod {
        metadata: Some(object_meta("web")),
        spec: Some(core::PodSpec {
            node_name: Some("n1".into()),
            containers: vec![core::Container {
                name: Some("c".into()),
                image: Some("registry.k8s.io/pause:3.10".into()),
                ports: vec![core::ContainerPort {
                    container_port: Some(8080),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            termination_grace_period_seconds: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/pods",
        PROTOBUF,
        envelope("v1", "Pod", &pod),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["spec"]["nodeName"], "n1");
    assert_eq!(
        v["spec"]["containers"][0]["image"],
        "registry.k8s.io/pause:3.10"
    );
    assert_eq!(
        v["spec"]["containers"][0]["ports"][0],
        json!({"containerPort": 8080, "protocol": "TCP"})
    );
    // A pointer field keeps its zero.
    assert_eq!(v["spec"]["terminationGracePeriodSeconds"], 0);
    let mut with_status = pod.clone();
    with_status.metadata = Some(meta::ObjectMeta {
        resource_version: v["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
        ..object_meta("web")
    });
    with_status.status = Some(core::PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("10.1.0.7".into()),
        pod_ips: vec![core::PodIp {
            ip: Some("10.1.0.7".into()),
        }],
        conditions: vec![core::PodCondition {
            r#type: Some("Ready".into()),
            status: Some("True".into()),
            ..Default::default()
        }],
        container_statuses: vec![core::ContainerStatus {
            name: Some("c".into()),
            ready: Some(true),
            restart_count: Some(0),
            image: Some("registry.k8s.io/pause:3.10".into()),
            image_id: Some(String::new()),
            state: Some(core::ContainerState {
                running: Some(core::ContainerStateRunning {
                    started_at: Some(meta::Time {
                        seconds: Some(1_767_225_600),
                        nanos: Some(0),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    });
    let (s, v) = send(
        &app,
        "PUT",
        "/api/v1/namespaces/default/pods/web/status",
        PROTOBUF,
        envelope("v1", "Pod", &with_status),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"]["phase"], "Running");
    assert_eq!(v["status"]["podIPs"], json!([{"ip": "10.1.0.7"}]));
    assert_eq!(
        v["status"]["conditions"][0],
        json!({"type": "Ready", "status": "True"})
    );
    let cs = &v["status"]["containerStatuses"][0];
    assert_eq!(cs["ready"], true);
    assert_eq!(cs["restartCount"], 0, "a non-omitempty zero is kept: {cs}");
    assert_eq!(cs["imageID"], "");
    assert_eq!(
        cs["state"],
        json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    );
}

#[tokio::test]
async fn token_requests_and_access_reviews_decode() {
    // client-go sends CreateToken and the delegated authorizer's reviews as protobuf.
    use k8s_pb::api::authentication::v1 as authn;
    use k8s_pb::api::authorization::v1 as authz;
    let app = app();
    let sa = core::ServiceAccount {
        metadata: Some(object_meta("ccm")),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/kube-system/serviceaccounts",
        PROTOBUF,
        envelope("v1", "ServiceAccount", &sa),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let request = authn::TokenRequest {
        spec: Some(authn::TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(1200),
            bound_object_ref: None,
        }),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/api/v1/namespaces/kube-system/serviceaccounts/ccm/token",
        PROTOBUF,
        envelope("authentication.k8s.io/v1", "TokenRequest", &request),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["spec"]["expirationSeconds"], 1200);
    let sar = authz::SubjectAccessReview {
        spec: Some(authz::SubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                verb: Some("delete".into()),
                resource: Some("nodes".into()),
                name: Some("n1".into()),
                ..Default::default()
            }),
            user: Some("someone".into()),
            groups: vec!["system:masters".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let (s, v) = send(
        &app,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        PROTOBUF,
        envelope("authorization.k8s.io/v1", "SubjectAccessReview", &sar),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["spec"]["resourceAttributes"]["name"], "n1");
    assert_eq!(v["status"]["allowed"], true);
}
