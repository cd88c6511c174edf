//! Unit tests of the Octavia load balancer ([`super`]): the create-or-update lookup under
//! the testing break, names and their cluster component, ports (source ranges are
//! tested with the shared `providers::service_ranges`, the poll schedule in `poll`).
//! Apart so that the load balancer stays under 1,200 lines.

use super::*;
use crate::options::LbNameScheme;
use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use kube::api::ObjectMeta;

/// `--testing-break=skip-lookup-before-create`: the ensure lookup answers "not found"
/// without asking Octavia; the lookup of the get/delete paths still finds the LB.
#[tokio::test]
async fn ensure_lookup_answers_not_found_only_with_the_testing_break() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let uri = server.uri();
    let catalog: Vec<Value> = [
        ("compute", "compute/v2.1"),
        ("network", "network"),
        ("load-balancer", "load-balancer"),
    ]
    .iter()
    .map(|(kind, at)| {
        json!({"type": kind, "endpoints": [{"interface": "public", "region": "RegionOne",
               "url": format!("{uri}/{at}")}]})
    })
    .collect();
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .respond_with(
            ResponseTemplate::new(201)
                .insert_header("X-Subject-Token", "tok")
                .set_body_json(json!({"token": {"catalog": catalog}})),
        )
        .mount(&server)
        .await;
    const LIST: &str = "/load-balancer/v2/lbaas/loadbalancers";
    Mock::given(method("GET"))
        .and(path(LIST))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [
            {"id": "lb-1", "name": "kube_service_kubernetes_prod_web",
             "provisioning_status": "ACTIVE", "vip_address": "10.0.0.100"}]})),
        )
        .mount(&server)
        .await;
    let text = format!(
        "[Global]\nauth-url={uri}/v3\nusername=admin\npassword=pw\nproject-name=demo\ndomain-name=Default\nregion=RegionOne\n"
    );
    let (config, _) = super::super::config::CloudConfig::parse(&text).expect("config");
    let os = OpenStack::from_config(config).await.expect("connect");
    let lookups = || async {
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path() == LIST)
            .count()
    };
    let s = svc(vec![port("TCP", 80, Some(30080))]);
    let found = os.find_for_ensure(false, "kubernetes", &s).await;
    assert_eq!(
        found.ok().flatten().map(|lb| lb.id).as_deref(),
        Some("lb-1")
    );
    assert_eq!(lookups().await, 1);
    let skipped = os.find_for_ensure(true, "kubernetes", &s).await;
    assert!(matches!(skipped, Ok(None)), "{skipped:?}");
    assert_eq!(lookups().await, 1, "the break must not ask Octavia");
    // The delete path's lookup is not affected.
    let for_delete = os.find_load_balancer("kubernetes", &s).await;
    assert_eq!(
        for_delete.ok().flatten().map(|lb| lb.id).as_deref(),
        Some("lb-1")
    );
}

fn svc(ports: Vec<ServicePort>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("prod".into()),
            uid: Some("1234-abcd-5678".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn port(protocol: &str, port: i32, node_port: Option<i32>) -> ServicePort {
    ServicePort {
        protocol: Some(protocol.into()),
        port,
        node_port,
        ..Default::default()
    }
}

#[test]
fn names() {
    let s = svc(vec![]);
    assert_eq!(
        load_balancer_name("kubernetes", &s),
        "kube_service_kubernetes_prod_web"
    );
    assert_eq!(legacy_name(&s).as_deref(), Some("a1234abcd5678"));
    let long = "x".repeat(300);
    assert_eq!(load_balancer_name(&long, &s).len(), 255);
    assert_eq!(
        load_balancer_name_in(LbNameScheme::V2, "kubernetes", &s),
        "kube_service_v2_kubernetes_prod_web"
    );
    assert_eq!(
        load_balancer_name_in(LbNameScheme::Legacy, "kubernetes", &s),
        load_balancer_name("kubernetes", &s)
    );
}

#[test]
fn cluster_component_of_names() {
    // As upstream's getClusterName: namespace and name are the last two parts.
    assert_eq!(cluster_of_name("kube_service_c1_ns_web"), Some("c1"));
    assert_eq!(
        cluster_of_name("kube_service_my_cluster_ns_web"),
        Some("my_cluster")
    );
    assert_eq!(cluster_of_name("kube_service_c1_ns"), Some("c1"));
    assert_eq!(cluster_of_name("kube_service_c1"), None);
    assert_eq!(cluster_of_name("a1234abcd"), None);
    assert!(has_old_cluster_name("kube_service_old_ns_web", "new"));
    assert!(!has_old_cluster_name("kube_service_new_ns_web", "new"));
    assert!(!has_old_cluster_name("a1234abcd", "new"));
    let s = svc(vec![]);
    assert_eq!(
        cluster_of_name(&load_balancer_name("ccm-conformance", &s)),
        Some("ccm-conformance")
    );
}

#[test]
fn ports() {
    let s = svc(vec![
        port("TCP", 80, Some(30080)),
        port("UDP", 53, Some(30053)),
    ]);
    let ports = desired_ports(&s).unwrap_or_default();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[1].protocol, "UDP");
    assert!(desired_ports(&svc(vec![port("TCP", 80, None)])).is_err());
    assert!(desired_ports(&svc(vec![])).is_err());
}
