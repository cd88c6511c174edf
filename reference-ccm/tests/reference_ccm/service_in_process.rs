//! The service-lb controller in-process, as the CCM binary runs it, against stubbed
//! Kubernetes and OpenStack (Keystone + Octavia) APIs: a LoadBalancer Service gets the
//! finalizer before any cloud write, one fully-populated create, events and an ingress
//! status patch, the Octavia ID recorded in the Service's annotation; a selector-only change makes no cloud call; LoadBalancer -> ClusterIP
//! deletes the LB (cascade) and removes the finalizer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use reference_ccm::options::Options;
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const LB_NAME: &str = "kube_service_kubernetes_default_web";
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

fn service(rv: &str, selector: &str, lb_type: &str, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "resourceVersion": rv,
                     "finalizers": finalizers},
        "spec": {"type": lb_type, "selector": {"app": selector},
                 "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080, "targetPort": 8080}]},
        "status": {"loadBalancer": {}}})
}

fn lb(status: &str) -> Value {
    json!({"id": "lb-1", "name": LB_NAME, "provisioning_status": status,
           "vip_address": "10.0.0.100", "vip_port_id": "vip-port", "tags": [LB_NAME]})
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

/// Shared flags between the two stub servers.
#[derive(Default)]
struct Flags {
    finalizer_added: AtomicBool,
    cloud_write_before_finalizer: AtomicBool,
    ensured: AtomicBool,
    watch_events_sent: AtomicUsize,
}

async fn mount_kube(server: &MockServer, flags: Arc<Flags>) {
    let list = json!({"kind": "ServiceList", "apiVersion": "v1", "metadata": {"resourceVersion": "10"},
        "items": [service("10", "web", "LoadBalancer", &[])]});
    // Service watch: first a selector-only change, then (once the LB is ensured) a change
    // to ClusterIP; otherwise an empty stream after a while (the watcher re-watches).
    let f = flags.clone();
    Mock::given(method("GET"))
        .and(path("/api/v1/services"))
        .and(query_param("watch", "true"))
        .respond_with(move |_: &Request| {
            let sent = f.watch_events_sent.load(Ordering::SeqCst);
            let event = match sent {
                // Without the finalizer, as if our patch had not landed yet: the worker
                // must still add it before the cloud write.
                0 => Some(service("11", "web-v2", "LoadBalancer", &[])),
                1 if f.ensured.load(Ordering::SeqCst) => {
                    Some(service("12", "web-v2", "ClusterIP", &[FINALIZER]))
                }
                _ => None,
            };
            match event {
                Some(object) => {
                    f.watch_events_sent.fetch_add(1, Ordering::SeqCst);
                    let line = json!({"type": "MODIFIED", "object": object}).to_string() + "\n";
                    ResponseTemplate::new(200).set_body_string(line)
                }
                None => ResponseTemplate::new(200).set_delay(Duration::from_millis(200)),
            }
        })
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/services"))
        .respond_with(ResponseTemplate::new(200).set_body_json(list))
        .with_priority(2)
        .mount(server)
        .await;
    let node = json!({"metadata": {"name": "n1", "uid": "n1-uid", "resourceVersion": "5"},
        "spec": {"providerID": "openstack:///srv-1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.11"}]}});
    Mock::given(method("GET"))
        .and(path("/api/v1/nodes"))
        .and(query_param("watch", "true"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(500)))
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/nodes"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"kind": "NodeList",
            "apiVersion": "v1", "metadata": {"resourceVersion": "5"}, "items": [node]})),
        )
        .with_priority(2)
        .mount(server)
        .await;
    let f = flags.clone();
    Mock::given(method("PATCH"))
        .and(path("/api/v1/namespaces/default/services/web/status"))
        .respond_with(move |r: &Request| {
            let patch = body(r);
            if patch["metadata"]["finalizers"] == json!([FINALIZER]) {
                f.finalizer_added.store(true, Ordering::SeqCst);
            }
            if patch["status"]["loadBalancer"]["ingress"].is_array() {
                f.ensured.store(true, Ordering::SeqCst);
            }
            ResponseTemplate::new(200).set_body_json(service(
                "20",
                "web",
                "LoadBalancer",
                &[FINALIZER],
            ))
        })
        .mount(server)
        .await;
    // The provider records the load balancer's ID on the Service (main resource).
    Mock::given(method("PATCH"))
        .and(path("/api/v1/namespaces/default/services/web"))
        .respond_with(|r: &Request| {
            let mut svc = service("21", "web", "LoadBalancer", &[FINALIZER]);
            svc["metadata"]["annotations"] = body(r)["metadata"]["annotations"].clone();
            ResponseTemplate::new(200).set_body_json(svc)
        })
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/namespaces/default/events"))
        .respond_with(|r: &Request| ResponseTemplate::new(201).set_body_json(body(r)))
        .mount(server)
        .await;
}

async fn mount_openstack(server: &MockServer, flags: Arc<Flags>) {
    let uri = server.uri();
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .respond_with(ResponseTemplate::new(201).insert_header("X-Subject-Token", "tok").set_body_json(json!({"token": {
            "catalog": [
                {"type": "compute", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/compute/v2.1")}]},
                {"type": "network", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/network")}]},
                {"type": "load-balancer", "endpoints": [{"interface": "public", "region": "RegionOne", "url": format!("{uri}/load-balancer")}]}
            ]}})))
        .mount(server)
        .await;
    // Lookups by name: none until the LB was created (2 calls: name + legacy name).
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": []})))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .and(query_param("name", LB_NAME))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancers": [lb("ACTIVE")]})),
        )
        .with_priority(2)
        .mount(server)
        .await;
    let f = flags.clone();
    Mock::given(method("POST"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers"))
        .respond_with(move |_: &Request| {
            if !f.finalizer_added.load(Ordering::SeqCst) {
                f.cloud_write_before_finalizer.store(true, Ordering::SeqCst);
            }
            ResponseTemplate::new(201).set_body_json(json!({"loadbalancer": lb("PENDING_CREATE")}))
        })
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"loadbalancer": lb("ACTIVE")})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .respond_with(ResponseTemplate::new(404))
        .with_priority(2)
        .mount(server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/load-balancer/v2/lbaas/loadbalancers/lb-1"))
        .and(query_param("cascade", "true"))
        .respond_with(ResponseTemplate::new(204))
        .mount(server)
        .await;
}

async fn wait_for<F: Fn(&[Request]) -> bool>(
    server: &MockServer,
    what: &str,
    check: F,
) -> anyhow::Result<Vec<Request>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let requests = server.received_requests().await.unwrap_or_default();
        if check(&requests) {
            return Ok(requests);
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn event_reasons(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path().ends_with("/events"))
        .map(|r| body(r)["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn count(requests: &[Request], verb: &str, suffix: &str) -> usize {
    requests
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path().ends_with(suffix))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensures_then_deletes_a_load_balancer() -> anyhow::Result<()> {
    let kube = MockServer::start().await;
    let cloud = MockServer::start().await;
    let flags = Arc::new(Flags::default());
    mount_kube(&kube, flags.clone()).await;
    mount_openstack(&cloud, flags.clone()).await;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: t\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
            kube.uri()
        ),
    )?;
    let cloud_conf = dir.path().join("cloud.conf");
    std::fs::write(
        &cloud_conf,
        format!(
            "[Global]\nauth-url={}/v3\nusername=admin\npassword=pw\nproject-name=demo\ndomain-name=Default\nregion=RegionOne\n\
             [LoadBalancer]\nsubnet-id=subnet-1\n",
            cloud.uri()
        ),
    )?;
    let opts = Options::try_parse_from([
        "reference-ccm".to_owned(),
        "--cloud-provider=openstack".to_owned(),
        format!("--cloud-config={}", cloud_conf.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--leader-elect=false".to_owned(),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={}", free_port()),
        "--controllers=service-lb-controller,route".to_owned(),
    ])?;
    let ccm = tokio::spawn(reference_ccm::run(opts));

    // 1. Ensure: events, finalizer before the cloud write, one create, ingress status.
    let requests = wait_for(&kube, "EnsuredLoadBalancer and the ingress patch", |r| {
        event_reasons(r).iter().any(|e| e == "EnsuredLoadBalancer")
            && r.iter()
                .any(|r| body(r)["status"]["loadBalancer"]["ingress"][0]["ip"] == "10.0.0.100")
    })
    .await;
    let requests = match requests {
        Ok(r) => r,
        Err(e) => anyhow::bail!("{e}; ccm finished: {}", ccm.is_finished()),
    };
    assert!(!flags.cloud_write_before_finalizer.load(Ordering::SeqCst));
    let id_patch = requests
        .iter()
        .find(|r| r.url.path().ends_with("/services/web") && r.method.as_str() == "PATCH")
        .map(body)
        .unwrap_or(Value::Null);
    assert_eq!(
        id_patch["metadata"]["annotations"]["loadbalancer.openstack.org/load-balancer-id"], "lb-1",
        "the Octavia ID is recorded on the Service"
    );
    let finalizer_patch = requests
        .iter()
        .find(|r| body(r)["metadata"]["finalizers"] == json!([FINALIZER]))
        .cloned();
    let Some(finalizer_patch) = finalizer_patch else {
        anyhow::bail!("no finalizer patch")
    };
    assert!(finalizer_patch.url.path().ends_with("/services/web/status"));
    assert_eq!(
        finalizer_patch
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/merge-patch+json")
    );
    let ingress_patch = requests
        .iter()
        .find(|r| body(r)["status"]["loadBalancer"]["ingress"].is_array())
        .map(body)
        .unwrap_or(Value::Null);
    assert_eq!(
        ingress_patch["status"]["loadBalancer"]["ingress"][0]["ipMode"],
        "VIP"
    );
    let events: Vec<Value> = requests
        .iter()
        .filter(|r| r.url.path().ends_with("/events"))
        .map(body)
        .collect();
    assert_eq!(events[0]["reason"], "EnsuringLoadBalancer");
    assert_eq!(events[0]["source"]["component"], "service-controller");
    assert_eq!(events[0]["involvedObject"]["kind"], "Service");
    assert_eq!(events[0]["metadata"]["namespace"], "default");

    // 2. The selector-only change made no cloud call; ->ClusterIP deletes the LB and drops
    //    the finalizer.
    let requests = wait_for(
        &kube,
        "DeletedLoadBalancer and the finalizer removal",
        |r| {
            event_reasons(r).iter().any(|e| e == "DeletedLoadBalancer")
                && r.iter()
                    .any(|r| body(r)["metadata"]["finalizers"] == json!([]))
        },
    )
    .await?;
    let reasons = event_reasons(&requests);
    assert_eq!(
        reasons,
        vec![
            "EnsuringLoadBalancer",
            "EnsuredLoadBalancer",
            "DeletingLoadBalancer",
            "DeletedLoadBalancer"
        ]
    );
    let cloud_requests = cloud.received_requests().await.unwrap_or_default();
    assert_eq!(count(&cloud_requests, "POST", "/lbaas/loadbalancers"), 1);
    assert_eq!(
        count(&cloud_requests, "DELETE", "/lbaas/loadbalancers/lb-1"),
        1
    );
    assert_eq!(flags.watch_events_sent.load(Ordering::SeqCst), 2);
    ccm.abort();
    Ok(())
}
