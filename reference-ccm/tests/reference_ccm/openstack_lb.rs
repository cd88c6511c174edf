//! The OpenStack LoadBalancer (Octavia + Neutron floating IPs) and Routes (router extra
//! routes) against wiremock stubs shaped like the real APIs: create, wait for ACTIVE,
//! 409 while pending -> retry, delete until 404, floating IPs, atomic and full route writes.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reference_ccm::cloud::{LoadBalancer, Route, Routes};
use reference_ccm::providers::Provider;
use reference_ccm::providers::openstack::OpenStack;
use reference_ccm::providers::openstack::config::CloudConfig;
use reference_ccm::providers::openstack::loadbalancer::PollSchedule;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const LB_NAME: &str = "kube_service_kubernetes_default_web";

async fn mount_auth(server: &MockServer, with_octavia: bool) {
    let uri = server.uri();
    let mut catalog = vec![
        json!({"type": "compute", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/compute/v2.1")}]}),
        json!({"type": "network", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/network")}]}),
    ];
    if with_octavia {
        catalog.push(json!({"type": "load-balancer", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/load-balancer")}]}));
    }
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .respond_with(
            ResponseTemplate::new(201)
                .insert_header("X-Subject-Token", "tok")
                .set_body_json(json!({"token": {"catalog": catalog}})),
        )
        .mount(server)
        .await;
}

async fn connect(server: &MockServer, extra: &str) -> OpenStack {
    let text = format!(
        "[Global]\nauth-url={}/v3\nusername=admin\npassword=pw\nproject-name=demo\ndomain-name=Default\nregion=RegionOne\n{extra}",
        server.uri()
    );
    let config = match CloudConfig::parse(&text) {
        Ok((c, _)) => c,
        Err(e) => panic!("{e}"),
    };
    let mut os = match OpenStack::from_config(config).await {
        Ok(os) => os,
        Err(e) => panic!("connect: {e}"),
    };
    os.set_lb_poll(PollSchedule {
        first: Duration::from_millis(5),
        initial: Duration::from_millis(10),
        factor: 1.2,
        steps: 10,
    });
    os
}

fn service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("11111111-2222".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(name: &str, ip: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("openstack:///srv-{name}")),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..Default::default()
        }),
    }
}

fn lb(status: &str) -> Value {
    json!({"id": "lb-1", "name": LB_NAME, "provisioning_status": status, "operating_status": "ONLINE",
           "vip_address": "10.0.0.100", "vip_port_id": "vip-port", "tags": [LB_NAME],
           "listeners": [{"id": "l-1"}], "pools": [{"id": "p-1"}]})
}

/// `GET /loadbalancers/lb-1` answers `pending` for the first `n` polls, then ACTIVE.
async fn mount_lb_states(server: &MockServer, pending: &str, n: u64) {
    if n > 0 {
        Mock::given(method("GET"))
            .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"loadbalancer": lb(pending)})),
            )
            .up_to_n_times(n)
            .with_priority(1)
            .mount(server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancer": lb("ACTIVE")})),
        )
        .with_priority(2)
        .mount(server)
        .await;
}

async fn requests(server: &MockServer, verb: &str, suffix: &str) -> Vec<Request> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.method.as_str() == verb && r.url.path().ends_with(suffix))
        .collect()
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

#[tokio::test]
async fn creates_fully_populated_and_waits_for_active() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": []})))
        .mount(&server)
        .await;
    // VIP subnet from the first node's port.
    Mock::given(method("GET"))
        .and(path("/network/v2.0/ports"))
        .and(query_param("device_id", "srv-n1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ports": [
            {"id": "port-1", "status": "ACTIVE", "fixed_ips": [{"ip_address": "10.0.0.11", "subnet_id": "subnet-1"}]}]})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(
            ResponseTemplate::new(201).set_body_json(json!({"loadbalancer": lb("PENDING_CREATE")})),
        )
        .mount(&server)
        .await;
    mount_lb_states(&server, "PENDING_CREATE", 2).await;

    let os = connect(&server, "[LoadBalancer]\ncreate-monitor=true\n").await;
    assert!(os.capabilities().load_balancer);
    assert!(!os.capabilities().routes, "no [Route] router-id");
    let status = os
        .ensure_load_balancer(
            "kubernetes",
            &service(),
            &[node("n1", "10.0.0.11"), node("n2", "10.0.0.12")],
        )
        .await?;
    let ingress = status.ingress.unwrap_or_default();
    assert_eq!(ingress.len(), 1);
    assert_eq!(ingress[0].ip.as_deref(), Some("10.0.0.100"));
    assert_eq!(ingress[0].ip_mode.as_deref(), Some("VIP"));

    let posts = requests(&server, "POST", "/lbaas/loadbalancers").await;
    assert_eq!(posts.len(), 1);
    let b = body(&posts[0]);
    let created = &b["loadbalancer"];
    assert_eq!(created["name"], LB_NAME);
    assert_eq!(created["vip_subnet_id"], "subnet-1");
    assert_eq!(created["tags"], json!([LB_NAME]));
    let listener = &created["listeners"][0];
    assert_eq!(listener["protocol"], "TCP");
    assert_eq!(listener["protocol_port"], 80);
    let pool = &listener["default_pool"];
    assert_eq!(pool["lb_algorithm"], "ROUND_ROBIN");
    assert_eq!(pool["members"][0]["address"], "10.0.0.11");
    assert_eq!(pool["members"][1]["protocol_port"], 30080);
    assert_eq!(pool["healthmonitor"]["type"], "TCP");
    // Polled until ACTIVE: two PENDING answers, then ACTIVE.
    assert_eq!(
        requests(&server, "GET", "/lbaas/loadbalancers/lb-1")
            .await
            .len(),
        3
    );
    Ok(())
}

#[tokio::test]
async fn floating_ip_is_the_ingress_when_configured() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": []})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .and(body_partial_json(
            json!({"loadbalancer": {"vip_subnet_id": "subnet-cfg"}}),
        ))
        .respond_with(
            ResponseTemplate::new(201).set_body_json(json!({"loadbalancer": lb("PENDING_CREATE")})),
        )
        .mount(&server)
        .await;
    mount_lb_states(&server, "PENDING_CREATE", 0).await;
    Mock::given(method("GET"))
        .and(path("/network/v2.0/floatingips"))
        .and(query_param("port_id", "vip-port"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"floatingips": []})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/network/v2.0/floatingips"))
        .and(body_partial_json(json!({"floatingip": {"floating_network_id": "ext-net", "port_id": "vip-port"}})))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"floatingip": {
            "id": "fip-1", "floating_ip_address": "172.24.4.10", "port_id": "vip-port",
            "description": "Floating IP for Kubernetes external service default/web from cluster kubernetes"}})))
        .mount(&server)
        .await;

    let os = connect(
        &server,
        "[LoadBalancer]\nsubnet-id=subnet-cfg\nfloating-network-id=ext-net\n",
    )
    .await;
    let status = os
        .ensure_load_balancer("kubernetes", &service(), &[node("n1", "10.0.0.11")])
        .await?;
    let ingress = status.ingress.unwrap_or_default();
    assert_eq!(ingress[0].ip.as_deref(), Some("172.24.4.10"));
    assert_eq!(requests(&server, "POST", "/floatingips").await.len(), 1);
    // No ports lookup when subnet-id is configured.
    assert!(requests(&server, "GET", "/ports").await.is_empty());
    Ok(())
}

#[tokio::test]
async fn member_update_retries_after_409_while_pending() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .and(query_param("name", LB_NAME))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [lb("ACTIVE")]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/listeners"))
        .and(query_param("loadbalancer_id", "lb-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"listeners": [
            {"id": "l-1", "protocol": "TCP", "protocol_port": 80, "default_pool_id": "p-1"}]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/pools/p-1/members"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"members": [
            {"id": "m-1", "address": "10.0.0.11", "protocol_port": 30080}]})))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/load-balancer/v2/lbaas/pools/p-1/members"))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({
            "faultcode": "Client", "faultstring": "Load Balancer lb-1 is immutable and cannot be updated.", "debuginfo": null})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/load-balancer/v2/lbaas/pools/p-1/members"))
        .respond_with(ResponseTemplate::new(202))
        .with_priority(2)
        .mount(&server)
        .await;
    mount_lb_states(&server, "PENDING_UPDATE", 1).await;

    let os = connect(&server, "").await;
    os.update_load_balancer(
        "kubernetes",
        &service(),
        &[node("n1", "10.0.0.11"), node("n2", "10.0.0.12")],
    )
    .await?;
    let puts = requests(&server, "PUT", "/pools/p-1/members").await;
    assert_eq!(puts.len(), 2, "409 then retried");
    let members = body(&puts[1])["members"].clone();
    assert_eq!(members.as_array().map(Vec::len), Some(2));
    assert_eq!(members[1]["address"], "10.0.0.12");

    // Same node set again: no write at all.
    let before = requests(&server, "PUT", "/pools/p-1/members").await.len();
    os.update_load_balancer("kubernetes", &service(), &[node("n1", "10.0.0.11")])
        .await?;
    assert_eq!(
        requests(&server, "PUT", "/pools/p-1/members").await.len(),
        before
    );
    Ok(())
}

#[tokio::test]
async fn delete_cascades_and_waits_for_404() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .and(query_param("name", LB_NAME))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [lb("ACTIVE")]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .and(query_param("cascade", "true"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancer": lb("PENDING_DELETE")})),
        )
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_json(json!({"faultcode": "Client", "faultstring": "not found"})),
        )
        .with_priority(2)
        .mount(&server)
        .await;

    let os = connect(&server, "").await;
    assert!(
        os.get_load_balancer("kubernetes", &service())
            .await?
            .is_some()
    );
    os.ensure_load_balancer_deleted("kubernetes", &service())
        .await?;
    assert_eq!(
        requests(&server, "DELETE", "/lbaas/loadbalancers/lb-1")
            .await
            .len(),
        1
    );
    assert_eq!(
        requests(&server, "GET", "/lbaas/loadbalancers/lb-1")
            .await
            .len(),
        3
    );
    Ok(())
}

#[tokio::test]
async fn missing_load_balancer_is_none_not_an_error() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [
            {"id": "old", "name": LB_NAME, "provisioning_status": "PENDING_DELETE"}]})),
        )
        .mount(&server)
        .await;
    let os = connect(&server, "").await;
    assert!(
        os.get_load_balancer("kubernetes", &service())
            .await?
            .is_none()
    );
    os.ensure_load_balancer_deleted("kubernetes", &service())
        .await?;
    assert!(requests(&server, "DELETE", "").await.is_empty());
    Ok(())
}

/// The ID annotation is looked up first; an LB named for another cluster is found through
/// it (a `--cluster-name` change), and one whose ID is gone falls back to the name.
#[tokio::test]
async fn annotated_id_first_then_name() -> anyhow::Result<()> {
    use reference_ccm::providers::openstack::loadbalancer::LB_ID_ANNOTATION;
    let server = MockServer::start().await;
    mount_auth(&server, true).await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-old"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancer": {
            "id": "lb-old", "name": "kube_service_previous_default_web",
            "provisioning_status": "ACTIVE", "vip_address": "10.0.0.7", "vip_port_id": "p"}})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-gone"))
        .respond_with(
            ResponseTemplate::new(404).set_body_json(json!({"faultcode": "Client",
            "faultstring": "Load Balancer lb-gone could not be found."})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .and(query_param("name", LB_NAME))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [lb("ACTIVE")]})),
        )
        .mount(&server)
        .await;
    let os = connect(&server, "").await;
    let annotated = |id: &str| {
        let mut s = service();
        s.metadata.annotations = Some([(LB_ID_ANNOTATION.to_owned(), id.to_owned())].into());
        s
    };
    let found = os
        .get_load_balancer("kubernetes", &annotated("lb-old"))
        .await?;
    let ip = found
        .and_then(|s| s.ingress)
        .and_then(|i| i.first()?.ip.clone());
    assert_eq!(ip.as_deref(), Some("10.0.0.7"));
    assert!(
        requests(&server, "GET", "/lbaas/loadbalancers")
            .await
            .is_empty(),
        "found by ID without a name query"
    );
    let found = os
        .get_load_balancer("kubernetes", &annotated("lb-gone"))
        .await?;
    let ip = found
        .and_then(|s| s.ingress)
        .and_then(|i| i.first()?.ip.clone());
    assert_eq!(ip.as_deref(), Some("10.0.0.100"), "fell back to the name");
    Ok(())
}

#[tokio::test]
async fn no_octavia_in_catalog_means_no_load_balancers() {
    let server = MockServer::start().await;
    mount_auth(&server, false).await;
    let os = connect(&server, "").await;
    assert!(!os.capabilities().load_balancer);
}

async fn mount_router(server: &MockServer, extensions: &[&str]) {
    let ext: Vec<Value> = extensions
        .iter()
        .map(|a| json!({"alias": a, "name": a}))
        .collect();
    Mock::given(method("GET"))
        .and(path("/network/v2.0/extensions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"extensions": ext})))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/network/v2.0/routers/r-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"router": {"id": "r-1",
            "routes": [{"destination": "10.244.1.0/24", "nexthop": "10.0.0.11"}]}})),
        )
        .mount(server)
        .await;
}

fn route_to(node_name: &str, ip: &str, cidr: &str) -> Route {
    Route {
        target_node: node_name.into(),
        target_node_addresses: vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip.into(),
        }],
        destination_cidr: cidr.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn routes_use_atomic_extraroutes_when_available() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, false).await;
    mount_router(&server, &["extraroute", "extraroute-atomic"]).await;
    for action in ["add_extraroutes", "remove_extraroutes"] {
        Mock::given(method("PUT"))
            .and(path(format!("/network/v2.0/routers/r-1/{action}")))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"router": {"id": "r-1"}})),
            )
            .mount(&server)
            .await;
    }
    let mut os = connect(&server, "[Route]\nrouter-id=r-1\n").await;
    assert!(!os.capabilities().routes, "not before detection");
    let note = os.detect_routes().await;
    assert_eq!(note, None);
    assert!(os.capabilities().routes);
    let listed = os.list_routes("kubernetes").await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].destination_cidr, "10.244.1.0/24");
    assert_eq!(listed[0].target_node_addresses[0].address, "10.0.0.11");

    os.create_route(
        "kubernetes",
        "uid-n2",
        &route_to("n2", "10.0.0.12", "10.244.2.0/24"),
    )
    .await?;
    os.delete_route("kubernetes", &listed[0]).await?;
    let add = requests(&server, "PUT", "/add_extraroutes").await;
    assert_eq!(
        body(&add[0]),
        json!({"router": {"routes": [{"destination": "10.244.2.0/24", "nexthop": "10.0.0.12"}]}})
    );
    let remove = requests(&server, "PUT", "/remove_extraroutes").await;
    assert_eq!(
        body(&remove[0]),
        json!({"router": {"routes": [{"destination": "10.244.1.0/24", "nexthop": "10.0.0.11"}]}})
    );
    Ok(())
}

#[tokio::test]
async fn routes_rewrite_the_whole_list_without_atomic() -> anyhow::Result<()> {
    let server = MockServer::start().await;
    mount_auth(&server, false).await;
    mount_router(&server, &["extraroute"]).await;
    Mock::given(method("PUT"))
        .and(path("/network/v2.0/routers/r-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"router": {"id": "r-1"}})))
        .mount(&server)
        .await;
    let mut os = connect(&server, "[Route]\nrouter-id=r-1\n").await;
    assert!(!os.capabilities().routes, "not before detection");
    let note = os.detect_routes().await;
    assert_eq!(note, None);
    os.create_route(
        "kubernetes",
        "uid-n2",
        &route_to("n2", "10.0.0.12", "10.244.2.0/24"),
    )
    .await?;
    let puts = requests(&server, "PUT", "/routers/r-1").await;
    assert_eq!(
        body(&puts[0]),
        json!({"router": {"routes": [
            {"destination": "10.244.1.0/24", "nexthop": "10.0.0.11"},
            {"destination": "10.244.2.0/24", "nexthop": "10.0.0.12"}]}})
    );
    Ok(())
}

#[tokio::test]
async fn routes_unsupported_without_the_extension() {
    let server = MockServer::start().await;
    mount_auth(&server, false).await;
    mount_router(&server, &["router"]).await;
    let mut os = connect(&server, "[Route]\nrouter-id=r-1\n").await;
    assert!(!os.capabilities().routes, "not before detection");
    let note = os.detect_routes().await;
    assert!(note.is_some_and(|n| n.contains("extraroute")));
    assert!(!os.capabilities().routes);
}

/// RT-04: with routes supported, an empty or bad `--cluster-cidr` is a one-line startup
/// error; `--configure-cloud-routes=false` makes no route calls at all.
#[tokio::test]
async fn route_controller_startup_rules() -> anyhow::Result<()> {
    use clap::Parser;
    let server = MockServer::start().await;
    mount_auth(&server, false).await;
    mount_router(&server, &["extraroute-atomic"]).await;
    let dir = tempfile::tempdir()?;
    let conf = dir.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url={}/v3\nusername=admin\npassword=pw\nproject-name=demo\nregion=RegionOne\n[Route]\nrouter-id=r-1\n",
            server.uri()
        ),
    )?;
    let run = |extra: &[&str]| {
        let mut args = vec![
            "reference-ccm".to_owned(),
            "--cloud-provider=openstack".to_owned(),
            format!("--cloud-config={}", conf.display()),
            "--kubeconfig=/nonexistent/kubeconfig".to_owned(),
            "--controllers=route".to_owned(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        reference_ccm::options::Options::try_parse_from(args)
    };
    for (flags, needle) in [
        (&[][..], "--cluster-cidr"),
        (&["--cluster-cidr=10.0.0.0/8,11.0.0.0/8"][..], "dual-stack"),
        (
            &["--cluster-cidr=10.0.0.0/8,fd00::/8,12.0.0.0/8"][..],
            "more than two",
        ),
    ] {
        let result = reference_ccm::run(run(flags)?).await;
        let Err(e) = result else {
            anyhow::bail!("{flags:?}: expected a startup error")
        };
        let line = reference_ccm::error_line(&e);
        assert!(line.contains(needle), "{flags:?}: {line}");
    }
    // Valid CIDR: gets past the route checks to the (missing) kubeconfig.
    let ok = reference_ccm::run(run(&["--cluster-cidr=10.244.0.0/16"])?).await;
    assert!(ok.is_err_and(|e| reference_ccm::error_line(&e).contains("kubeconfig")));

    let before = requests(&server, "GET", "/extensions").await.len();
    let off = reference_ccm::run(run(&["--configure-cloud-routes=false"])?).await;
    assert!(off.is_err_and(|e| reference_ccm::error_line(&e).contains("kubeconfig")));
    assert_eq!(requests(&server, "GET", "/extensions").await.len(), before);
    Ok(())
}
