//! Router tests (no socket) and served tests (real sockets, real traffic).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::testing::{BASE, Mock, P, ReplyExt};
use crate::{Config, GcpMock, InstancePatch, LifecycleMode, LifecycleTarget};

const R: &str = "regions/us-central1";

#[tokio::test]
async fn instances_carry_tags_addresses_and_links() {
    let m = Mock::seeded(2);
    let t = m.token().await;
    let r = m
        .api("GET", "zones/us-central1-a/instances/node-1", &t, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let b = &r.body;
    assert_eq!(b["kind"], "compute#instance");
    assert!(b["id"].is_string(), "64-bit ids are strings");
    assert_eq!(b["status"], "RUNNING");
    assert_eq!(b["tags"]["items"], json!(["ccm-node"]));
    // `format: byte` fields are base64 (gcloud decodes them).
    use base64::Engine;
    for fp in [
        &b["tags"]["fingerprint"],
        &b["fingerprint"],
        &b["networkInterfaces"][0]["fingerprint"],
    ] {
        let text = fp.as_str().expect("a fingerprint");
        assert!(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok(),
            "{text}"
        );
    }
    let nic = &b["networkInterfaces"][0];
    assert_eq!(nic["networkIP"], "127.70.0.11");
    assert_eq!(nic["accessConfigs"][0]["natIP"], "127.72.0.11");
    assert_eq!(nic["stackType"], "IPV4_ONLY");
    assert_eq!(nic["network"], format!("{BASE}{P}/global/networks/default"));
    assert_eq!(
        b["machineType"],
        format!("{BASE}{P}/zones/us-central1-a/machineTypes/e2-standard-2")
    );
    assert_eq!(b["zone"], format!("{BASE}{P}/zones/us-central1-a"));
    assert_eq!(
        b["selfLink"],
        format!("{BASE}{P}/zones/us-central1-a/instances/node-1")
    );
    // Wrong zone, missing name: 404 notFound.
    let r = m
        .api("GET", "zones/us-central1-b/instances/node-1", &t, None)
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    // beta and alpha paths answer from the same model.
    let auth = format!("Bearer {t}");
    let r = m
        .send(
            "GET",
            "/compute/beta/projects/ccm-conformance/zones/us-central1-a/instances/node-0",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // Several zones.
    m.admin()
        .create_instance(crate::InstanceSpec {
            name: "b-1".into(),
            zone: Some("us-central1-b".into()),
            ..Default::default()
        })
        .expect("create");
    let r = m
        .api("GET", "zones/us-central1-b/instances", &t, None)
        .await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(1));
    let r = m.api("GET", "aggregated/instances", &t, None).await;
    assert_eq!(
        r.body["items"]["zones/us-central1-a"]["instances"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        r.body["items"]["zones/us-central1-c"]["warning"]["code"],
        "NO_RESULTS_ON_PAGE"
    );
    let r = m.api("GET", "zones", &t, None).await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(3));
    let r = m
        .api(
            "GET",
            "zones?filter=region%20eq%20.*%2Fus-central1",
            &t,
            None,
        )
        .await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn an_address_insert_is_an_operation_that_settles() {
    let m = Mock::seeded(1);
    let t = m.token().await;
    // Done after a while: the reply shows it pending and the wait blocks until done.
    m.admin()
        .set_lifecycle(
            LifecycleTarget::Type("addresses".into()),
            Some(LifecycleMode::Seconds { t: 0.3 }),
        )
        .expect("set");
    let started = std::time::Instant::now();
    let r = m
        .api(
            "POST",
            &format!("{R}/addresses"),
            &t,
            Some(json!({"name": "lb-ip"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let op = &r.body;
    assert_eq!(
        (
            op["kind"].as_str(),
            op["operationType"].as_str(),
            op["status"].as_str()
        ),
        (Some("compute#operation"), Some("insert"), Some("PENDING"))
    );
    assert_eq!(op["region"], format!("{BASE}{P}/{R}"));
    assert_eq!(op["targetLink"], format!("{BASE}{P}/{R}/addresses/lb-ip"));
    assert!(op["targetId"].is_string() && op["id"].is_string());
    let name = op["name"].as_str().expect("name").to_string();
    let w = m
        .api("POST", &format!("{R}/operations/{name}/wait"), &t, None)
        .await;
    assert_eq!(
        (w.body["status"].as_str(), w.body["progress"].as_u64()),
        (Some("DONE"), Some(100))
    );
    assert!(w.body["endTime"].is_string());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the wait blocked"
    );
    // Under the default mode the write's own reply is already DONE.
    m.admin()
        .set_lifecycle(LifecycleTarget::Type("addresses".into()), None)
        .expect("clear");
    let r = m
        .api(
            "POST",
            &format!("{R}/addresses"),
            &t,
            Some(json!({"name": "quick"})),
        )
        .await;
    assert_eq!(r.body["status"], "DONE");
    // A finished op's wait answers at once; get too.
    let g = m
        .api("GET", &format!("{R}/operations/{name}"), &t, None)
        .await;
    assert_eq!(g.body["status"], "DONE");
    // Wrong scope: 404.
    let g = m
        .api("GET", &format!("global/operations/{name}"), &t, None)
        .await;
    assert_eq!(g.reason(), (404, Some("notFound")));
    let a = m
        .api("GET", &format!("{R}/addresses/lb-ip"), &t, None)
        .await;
    assert_eq!(
        (a.body["address"].as_str(), a.body["status"].as_str()),
        (Some("127.71.0.10"), Some("RESERVED"))
    );
    // Explicit address, duplicate name.
    m.done(
        "POST",
        &format!("{R}/addresses"),
        &t,
        Some(json!({"name": "fixed", "address": "127.71.0.77"})),
    )
    .await;
    let r = m
        .api(
            "POST",
            &format!("{R}/addresses"),
            &t,
            Some(json!({"name": "fixed"})),
        )
        .await;
    assert_eq!(r.reason(), (409, Some("alreadyExists")));
    let r = m
        .api(
            "POST",
            &format!("{R}/addresses"),
            &t,
            Some(json!({"name": "again", "address": "127.71.0.77"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(m.admin().leaks().total, 3);
}

/// Holds, releases and fails operations through the lifecycle engine.
#[tokio::test]
async fn lifecycle_modes_drive_operations() {
    let m = Mock::new(Config {
        nodes: 1,
        op_wait_timeout: Duration::from_millis(100),
        ..Config::default()
    });
    let t = m.token().await;
    let admin = m.admin();
    admin
        .set_lifecycle(
            LifecycleTarget::Resource("held".into()),
            Some(LifecycleMode::Stuck),
        )
        .expect("hold");
    let r = m
        .api(
            "POST",
            "global/firewalls",
            &t,
            Some(json!({"name": "held", "allowed": [{"IPProtocol": "tcp"}]})),
        )
        .await;
    let name = r.body["name"].as_str().expect("op").to_string();
    let w = m
        .api("POST", &format!("global/operations/{name}/wait"), &t, None)
        .await;
    assert_eq!(
        w.body["status"], "RUNNING",
        "a wait on a stuck operation gives up at the cap"
    );
    let r = m.api("DELETE", "global/firewalls/held", &t, None).await;
    assert_eq!(r.reason(), (400, Some("resourceNotReady")));
    admin
        .set_lifecycle(
            LifecycleTarget::Resource("held".into()),
            Some(LifecycleMode::Immediate),
        )
        .expect("release");
    let w = m
        .api("POST", &format!("global/operations/{name}/wait"), &t, None)
        .await;
    assert_eq!(w.body["status"], "DONE");
    // An error mode: DONE with an error, and nothing left.
    admin
        .set_lifecycle(
            LifecycleTarget::Type("routes".into()),
            Some(LifecycleMode::Error),
        )
        .expect("set");
    let r = m
        .api("POST", "global/routes", &t, Some(json!({"name": "r1", "network": "global/networks/default", "destRange": "10.0.0.0/24", "nextHopIp": "127.70.0.10"})))
        .await;
    let name = r.body["name"].as_str().expect("op").to_string();
    let w = m
        .api("POST", &format!("global/operations/{name}/wait"), &t, None)
        .await;
    assert_eq!(
        (
            w.body["status"].as_str(),
            w.body["httpErrorStatusCode"].as_u64()
        ),
        (Some("DONE"), Some(500))
    );
    assert!(w.body["error"]["errors"][0]["code"].is_string());
    assert_eq!(
        m.api("GET", "global/routes/r1", &t, None).await.reason(),
        (404, Some("notFound"))
    );
    // Reads mode: each wait is one read.
    admin
        .set_lifecycle(
            LifecycleTarget::Type("routes".into()),
            Some(LifecycleMode::Reads { n: 2 }),
        )
        .expect("set");
    let r = m
        .api("POST", "global/routes", &t, Some(json!({"name": "r2", "network": "global/networks/default", "destRange": "10.0.1.0/24", "nextHopInstance": "zones/us-central1-a/instances/node-0"})))
        .await;
    let name = r.body["name"].as_str().expect("op").to_string();
    let statuses: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            let w = m
                .api("POST", &format!("global/operations/{name}/wait"), &t, None)
                .await;
            v.push(w.body["status"].as_str().unwrap_or_default().to_string());
        }
        v
    };
    assert_eq!(statuses, ["RUNNING", "RUNNING", "DONE"]);
    let r = m.api("GET", "global/routes/r2", &t, None).await;
    assert_eq!(
        r.body["nextHopInstance"],
        format!("{BASE}{P}/zones/us-central1-a/instances/node-0")
    );
    assert_eq!(m.admin().routes().len(), 1);
}

async fn lb_chain(m: &Mock, t: &str, ip: &str, port: u16) {
    m.done(
        "POST",
        &format!("{R}/addresses"),
        t,
        Some(json!({"name": "a1", "address": ip})),
    )
    .await;
    m.done("POST", "global/httpHealthChecks", t, Some(json!({"name": "hc", "port": 10256, "requestPath": "/healthz", "checkIntervalSec": 1, "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 1}))).await;
    m.done(
        "POST",
        &format!("{R}/targetPools"),
        t,
        Some(json!({"name": "a1", "instances": ["zones/us-central1-a/instances/node-0", format!("{BASE}{P}/zones/us-central1-a/instances/node-1")],
            "healthChecks": ["global/httpHealthChecks/hc"], "sessionAffinity": "NONE"})),
    )
    .await;
    m.done(
        "POST",
        &format!("{R}/forwardingRules"),
        t,
        Some(json!({"name": "a1", "IPAddress": ip, "IPProtocol": "TCP", "portRange": port.to_string(),
            "target": format!("{BASE}{P}/{R}/targetPools/a1"), "loadBalancingScheme": "EXTERNAL",
            "description": "{\"kubernetes.io/service-name\":\"default/web\"}"})),
    )
    .await;
    m.done(
        "POST",
        "global/firewalls",
        t,
        Some(json!({"name": "k8s-fw-a1", "network": "global/networks/default", "sourceRanges": ["127.99.0.0/16"],
            "targetTags": ["ccm-node"], "allowed": [{"IPProtocol": "tcp", "ports": [port.to_string()]}]})),
    )
    .await;
}

#[tokio::test]
async fn deleting_what_is_in_use_is_refused_and_changes_nothing_but_addresses_may_be_released() {
    let m = Mock::seeded(2);
    let t = m.token().await;
    lb_chain(&m, &t, "127.71.0.20", 8080).await;
    let mut before = m.admin().leaks();
    for (rel, kind) in [
        (format!("{R}/targetPools/a1"), "targetPool"),
        ("global/httpHealthChecks/hc".to_string(), "httpHealthCheck"),
    ] {
        let r = m.api("DELETE", &rel, &t, None).await;
        assert_eq!(
            r.reason(),
            (400, Some("resourceInUseByAnotherResource")),
            "{rel}: {:?}",
            r.body
        );
        assert!(
            r.body["error"]["message"]
                .as_str()
                .is_some_and(|s| s.contains(kind))
        );
    }
    assert_eq!(m.admin().leaks(), before);
    let a = m.api("GET", &format!("{R}/addresses/a1"), &t, None).await;
    assert_eq!(a.body["status"], "IN_USE");
    assert_eq!(
        a.body["users"][0],
        format!("{BASE}{P}/{R}/forwardingRules/a1")
    );
    // Releasing the reserved address the rule uses is allowed; the rule keeps the IP
    // (now ephemeral), and it can be reserved again under another name.
    m.done("DELETE", &format!("{R}/addresses/a1"), &t, None)
        .await;
    let gone = m.api("GET", &format!("{R}/addresses/a1"), &t, None).await;
    assert_eq!(gone.reason(), (404, Some("notFound")));
    before = m.admin().leaks();
    assert!(!before.by_type.contains_key("addresses"), "{before:?}");
    let lb = &m.admin().load_balancers()[0];
    assert_eq!(
        (lb.ip.as_str(), lb.ports.clone(), lb.instances.clone()),
        (
            "127.71.0.20",
            vec!["8080-8080".to_string()],
            vec!["node-0".to_string(), "node-1".to_string()]
        )
    );
    // Missing references.
    let r = m
        .api(
            "POST",
            &format!("{R}/forwardingRules"),
            &t,
            Some(
                json!({"name": "x", "portRange": "81", "target": format!("{R}/targetPools/nope")}),
            ),
        )
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    let r = m
        .api(
            "POST",
            &format!("{R}/targetPools"),
            &t,
            Some(json!({"name": "x", "instances": ["zones/us-central1-a/instances/ghost"]})),
        )
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    assert_eq!(m.admin().leaks(), before);
    // In order, everything goes.
    for rel in [
        format!("{R}/forwardingRules/a1"),
        format!("{R}/targetPools/a1"),
        "global/httpHealthChecks/hc".into(),
        "global/firewalls/k8s-fw-a1".into(),
    ] {
        m.done("DELETE", &rel, &t, None).await;
    }
    assert_eq!(m.admin().leaks().total, 0);
}

/// A pool keeps the URL of an instance deleted since; removing it works (upstream's
/// `updateTargetPool` does it after every node deletion), adding it does not.
#[tokio::test]
async fn a_deleted_instance_can_be_removed_from_a_pool_but_not_added() {
    let m = Mock::seeded(3);
    let t = m.token().await;
    lb_chain(&m, &t, "127.71.0.21", 8081).await;
    let tp = format!("{R}/targetPools/a1");
    m.admin().delete_instance("node-0").expect("delete node-0");
    let node0 = json!({"instances": [{"instance": "zones/us-central1-a/instances/node-0"}]});
    let r = m
        .api(
            "POST",
            &format!("{tp}/addInstance"),
            &t,
            Some(node0.clone()),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    m.done("POST", &format!("{tp}/removeInstance"), &t, Some(node0))
        .await;
    let r = m.api("GET", &tp, &t, None).await;
    let names: Vec<&str> = r.body["instances"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|u| u.as_str()?.rsplit('/').next())
        .collect();
    assert!(!names.contains(&"node-0"), "{names:?}");
}

#[tokio::test]
async fn target_pool_membership_and_health_checks_change() {
    let m = Mock::seeded(3);
    let t = m.token().await;
    lb_chain(&m, &t, "127.71.0.21", 8081).await;
    let tp = format!("{R}/targetPools/a1");
    m.done(
        "POST",
        &format!("{tp}/addInstance"),
        &t,
        Some(json!({"instances": [{"instance": "zones/us-central1-a/instances/node-2"}]})),
    )
    .await;
    m.done("POST", &format!("{tp}/removeInstance"), &t, Some(json!({"instances": [{"instance": format!("{BASE}/compute/beta/projects/ccm-conformance/zones/us-central1-a/instances/node-0")}]}))).await;
    let r = m.api("GET", &tp, &t, None).await;
    let names: Vec<&str> = r.body["instances"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|u| u.as_str()?.rsplit('/').next())
        .collect();
    assert_eq!(names, ["node-1", "node-2"]);
    m.done(
        "POST",
        &format!("{tp}/removeHealthCheck"),
        &t,
        Some(json!({"healthChecks": [{"healthCheck": "global/httpHealthChecks/hc"}]})),
    )
    .await;
    assert!(
        m.api("GET", &tp, &t, None)
            .await
            .body
            .get("healthChecks")
            .is_none()
    );
    m.done(
        "POST",
        &format!("{tp}/addHealthCheck"),
        &t,
        Some(json!({"healthChecks": [{"healthCheck": "global/httpHealthChecks/hc"}]})),
    )
    .await;
    let r = m
        .api(
            "POST",
            &format!("{tp}/addInstance"),
            &t,
            Some(json!({"instances": [{"instance": "zones/us-central1-a/instances/ghost"}]})),
        )
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    // setTarget, update/patch of health checks and firewalls.
    m.done(
        "POST",
        &format!("{R}/targetPools"),
        &t,
        Some(json!({"name": "other"})),
    )
    .await;
    m.done(
        "POST",
        &format!("{R}/forwardingRules/a1/setTarget"),
        &t,
        Some(json!({"target": format!("{R}/targetPools/other")})),
    )
    .await;
    m.done(
        "PATCH",
        "global/httpHealthChecks/hc",
        &t,
        Some(json!({"port": 10257})),
    )
    .await;
    let hc = m.api("GET", "global/httpHealthChecks/hc", &t, None).await;
    assert_eq!(
        (hc.body["port"].as_u64(), hc.body["requestPath"].as_str()),
        (Some(10257), Some("/healthz"))
    );
    let mut fw = m
        .api("GET", "global/firewalls/k8s-fw-a1", &t, None)
        .await
        .body;
    fw["sourceRanges"] = json!(["0.0.0.0/0"]);
    m.done("PUT", "global/firewalls/k8s-fw-a1", &t, Some(fw))
        .await;
    assert_eq!(
        m.api("GET", "global/firewalls/k8s-fw-a1", &t, None)
            .await
            .body["sourceRanges"],
        json!(["0.0.0.0/0"])
    );
    m.done("POST", "global/healthChecks", &t, Some(json!({"name": "hc2", "type": "HTTP", "httpHealthCheck": {"port": 8080, "requestPath": "/x"}}))).await;
    m.done(
        "PATCH",
        "global/healthChecks/hc2",
        &t,
        Some(json!({"checkIntervalSec": 9})),
    )
    .await;
    assert_eq!(
        m.api("GET", "global/healthChecks/hc2", &t, None).await.body["checkIntervalSec"],
        9
    );
}

#[tokio::test]
async fn lists_page_and_filter() {
    let m = Mock::seeded(1);
    let t = m.token().await;
    for i in 0..7 {
        m.done("POST", "global/firewalls", &t, Some(json!({"name": format!("fw-{i}"), "allowed": [{"IPProtocol": "udp"}], "description": if i % 2 == 0 { "even" } else { "odd" }}))).await;
    }
    let mut names = Vec::new();
    let mut q = "maxResults=3".to_string();
    let mut pages = 0;
    loop {
        let r = m
            .api("GET", &format!("global/firewalls?{q}"), &t, None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        assert_eq!(r.body["kind"], "compute#firewallList");
        pages += 1;
        names.extend(
            r.body["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v["name"].as_str().map(str::to_string)),
        );
        match r.body["nextPageToken"].as_str() {
            Some(tok) => q = format!("maxResults=3&pageToken={tok}"),
            None => break,
        }
    }
    assert_eq!((pages, names.len()), (3, 7));
    let f = |f: &str| form_urlencoded::byte_serialize(f.as_bytes()).collect::<String>();
    let r = m
        .api(
            "GET",
            &format!("global/firewalls?filter={}", f("name eq fw-[0-2]")),
            &t,
            None,
        )
        .await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(3));
    let r = m
        .api(
            "GET",
            &format!(
                "global/firewalls?filter={}",
                f("(description eq even) (name ne fw-0)")
            ),
            &t,
            None,
        )
        .await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(3));
    let r = m
        .api(
            "GET",
            &format!("global/firewalls?filter={}", f("name = \"fw-6\"")),
            &t,
            None,
        )
        .await;
    assert_eq!(r.body["items"][0]["name"], "fw-6");
    let r = m
        .api(
            "GET",
            &format!("global/firewalls?filter={}", f("name eq nothing")),
            &t,
            None,
        )
        .await;
    assert!(r.body.get("items").is_none(), "empty lists leave items out");
    for bad in [
        "filter=name%20%3E%201",
        "pageToken=bogus",
        "maxResults=501",
        "filter=name%20eq%20(",
        "pageToken=MC4wMDAwMDAwMDAwMDAwMDAw",
    ] {
        let r = m
            .api("GET", &format!("global/firewalls?{bad}"), &t, None)
            .await;
        assert_eq!(r.reason(), (400, Some("invalid")), "{bad}");
    }
    // Subnetworks by network, as cloud-provider-gcp asks.
    let r = m
        .api(
            "GET",
            &format!("{R}/subnetworks?filter={}", f("network eq .*/default$")),
            &t,
            None,
        )
        .await;
    assert_eq!(r.body["items"][0]["ipCidrRange"], "127.70.0.0/24");
}

#[tokio::test]
async fn the_metadata_server_wants_its_header() {
    let m = Mock::seeded(2);
    let flavor = [("metadata-flavor", "Google")];
    let r = m
        .send("GET", "/computeMetadata/v1/project/project-id", &[], "")
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.header("metadata-flavor"), Some("Google"));
    let r = m.send("GET", "/", &[], "").await;
    assert_eq!(
        (r.status, r.header("metadata-flavor")),
        (StatusCode::OK, Some("Google"))
    );
    let cases = [
        ("project/project-id", "ccm-conformance"),
        ("project/numeric-project-id", "123456789012"),
        ("instance/zone", "projects/123456789012/zones/us-central1-a"),
        ("instance/name", "node-0"),
        ("instance/network-interfaces/0/ip", "127.70.0.10"),
        ("instance/network-interfaces/", "0/\n"),
        ("instance/network-interfaces/0/access-configs", "0/\n"),
        (
            "instance/network-interfaces/0/access-configs/0/external-ip",
            "127.72.0.10",
        ),
        (
            "instance/machine-type",
            "projects/123456789012/machineTypes/e2-standard-2",
        ),
        (
            "instance/network-interfaces/0/network",
            "projects/123456789012/networks/default",
        ),
        ("universe/universe-domain", "googleapis.com"),
        (
            "instance/service-accounts/default/email",
            "ccm@ccm-conformance.iam.gserviceaccount.com",
        ),
    ];
    for (p, want) in cases {
        let r = m
            .send("GET", &format!("/computeMetadata/v1/{p}"), &flavor, "")
            .await;
        let text = match &r.body {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        assert_eq!((r.status, text.as_str()), (StatusCode::OK, want), "{p}");
        assert_eq!(r.header("metadata-flavor"), Some("Google"));
    }
    assert_eq!(
        m.send("GET", "/computeMetadata/v1/instance/hostname", &flavor, "")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = m
        .send(
            "GET",
            "/computeMetadata/v1/instance/service-accounts/?recursive=true",
            &flavor,
            "",
        )
        .await;
    assert!(r.body["default"]["email"].is_string(), "{:?}", r.body);
    let r = m
        .send(
            "GET",
            "/computeMetadata/v1/instance/service-accounts/default/token",
            &flavor,
            "",
        )
        .await;
    let tok = r.body["access_token"].as_str().expect("token").to_string();
    assert!(r.body["expires_in"].as_u64().is_some_and(|e| e > 0));
    assert_eq!(r.body["token_type"], "Bearer");
    assert_eq!(
        m.api("GET", "zones/us-central1-a/instances/node-0", &tok, None)
            .await
            .status,
        StatusCode::OK
    );
    let e = m.shared.journal.entries();
    assert!(e.iter().any(|e| e.service == "metadata" && e.status == 403));
}

#[tokio::test]
async fn tokens_are_required_unless_anonymous() {
    let m = Mock::seeded(1);
    let p = format!("{P}/zones/us-central1-a/instances/node-0");
    let r = m.send("GET", &p, &[], "").await;
    assert_eq!(r.reason(), (401, Some("required")));
    assert_eq!(r.body["error"]["status"], "UNAUTHENTICATED");
    assert!(r.header("www-authenticate").is_some());
    let r = m
        .send("GET", &p, &[("authorization", "Bearer ya29.forged")], "")
        .await;
    assert_eq!(r.reason(), (401, Some("authError")));
    let r = m.send("POST", "/token", &[], "grant_type=password").await;
    assert_eq!(
        (r.status, r.body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unsupported_grant_type"))
    );
    let anon = Mock::new(Config {
        nodes: 1,
        allow_anonymous: true,
        ..Config::default()
    });
    assert_eq!(anon.send("GET", &p, &[], "").await.status, StatusCode::OK);
    assert_eq!(
        anon.send("GET", &p, &[("authorization", "Bearer nope")], "")
            .await
            .reason(),
        (401, Some("authError"))
    );
    // The wrong project.
    let t = m.token().await;
    let r = m
        .send(
            "GET",
            "/compute/v1/projects/other/zones/us-central1-a/instances/node-0",
            &[("authorization", &format!("Bearer {t}"))],
            "",
        )
        .await;
    assert_eq!(r.reason(), (403, Some("forbidden")));
}

#[tokio::test]
async fn throttling_and_faults_render_in_googles_envelope() {
    let m = Mock::seeded(1);
    let t = m.token().await;
    m.admin().faults().add(mock_cloud::FaultJson {
        kind: Some(mock_cloud::FaultKind::Throttle),
        operation: Some("compute.targetPools.list".into()),
        count: Some(1),
        ..Default::default()
    });
    let r = m.api("GET", &format!("{R}/targetPools"), &t, None).await;
    assert_eq!(r.reason(), (429, Some("rateLimitExceeded")));
    assert_eq!(r.body["error"]["status"], "RESOURCE_EXHAUSTED");
    let e = m.shared.journal.entries().pop().expect("entry");
    assert_eq!(
        (e.status, e.fault.is_some(), e.operation.as_deref()),
        (429, true, Some("compute.targetPools.list"))
    );
    assert_eq!(
        m.api("GET", &format!("{R}/targetPools"), &t, None)
            .await
            .status,
        StatusCode::OK
    );
    m.admin().faults().add(mock_cloud::FaultJson {
        service: Some("compute".into()),
        resource: Some("node-0".into()),
        status: 503,
        count: Some(1),
        ..Default::default()
    });
    let r = m
        .api("GET", "zones/us-central1-a/instances/node-0", &t, None)
        .await;
    assert_eq!(r.reason(), (503, Some("backendError")));
    // Admin is never faulted.
    m.admin().faults().add(mock_cloud::FaultJson {
        status: 500,
        ..Default::default()
    });
    assert_eq!(
        m.send("GET", "/admin/instances", &[], "").await.status,
        StatusCode::OK
    );
    // Eventual consistency after an insert.
    m.admin().faults().clear();
    m.admin().faults().add(mock_cloud::FaultJson {
        kind: Some(mock_cloud::FaultKind::NotFoundAfterCreate),
        window_reads: Some(1),
        ..Default::default()
    });
    m.done("POST", "global/routes", &t, Some(json!({"name": "fresh", "network": "global/networks/default", "destRange": "10.9.0.0/24", "nextHopIp": "127.70.0.10"}))).await;
    assert_eq!(
        m.api("GET", "global/routes/fresh", &t, None).await.reason(),
        (404, Some("notFound"))
    );
    assert_eq!(
        m.api("GET", "global/routes/fresh", &t, None).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn bad_input_is_refused_in_the_envelope_and_changes_nothing() {
    let m = Mock::seeded(1);
    let t = m.token().await;
    let auth = format!("Bearer {t}");
    let h = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let before = m.admin().leaks();
    let cases: Vec<(String, String, u16, &str)> = vec![
        (format!("{P}/{R}/addresses"), "{not json".into(), 400, "parseError"),
        (format!("{P}/{R}/addresses"), "[1]".into(), 400, "parseError"),
        (format!("{P}/{R}/addresses"), "{}".into(), 400, "required"),
        (format!("{P}/{R}/addresses"), r#"{"name":"Bad_Name"}"#.into(), 400, "invalid"),
        (format!("{P}/{R}/addresses"), format!(r#"{{"name":"{}"}}"#, "a".repeat(64)), 400, "invalid"),
        (format!("{P}/{R}/addresses"), r#"{"name":"ok","bogus":1}"#.into(), 400, "invalid"),
        (format!("{P}/{R}/addresses"), r#"{"name":"ok","address":"nope"}"#.into(), 400, "invalid"),
        (format!("{P}/global/firewalls"), r#"{"name":"fw"}"#.into(), 400, "required"),
        (format!("{P}/global/firewalls"), r#"{"name":"fw","allowed":[{"IPProtocol":"tcp","ports":["0"]}]}"#.into(), 400, "invalid"),
        (format!("{P}/global/firewalls"), r#"{"name":"fw","sourceRanges":["x"],"allowed":[{"IPProtocol":"tcp"}]}"#.into(), 400, "invalid"),
        (format!("{P}/global/httpHealthChecks"), r#"{"name":"h","port":70000}"#.into(), 400, "invalid"),
        (format!("{P}/global/routes"), r#"{"name":"r","network":"global/networks/default","destRange":"10.0.0.0/8"}"#.into(), 400, "invalid"),
        (format!("{P}/global/routes"), r#"{"name":"r","network":"global/networks/nope","destRange":"10.0.0.0/8","nextHopIp":"1.2.3.4"}"#.into(), 404, "notFound"),
        (format!("{P}/{R}/forwardingRules"), r#"{"name":"f","portRange":"80","ports":["80"]}"#.into(), 400, "invalid"),
        (format!("{P}/{R}/forwardingRules"), r#"{"name":"f","IPProtocol":"XYZ"}"#.into(), 400, "invalid"),
        (format!("{P}/{R}/operations/operation-nope/wait"), String::new(), 404, "notFound"),
        (format!("{P}/global/firewalls/Bad"), String::new(), 400, "invalid"),
    ];
    for (uri, body, code, reason) in cases {
        let r = m.send("POST", &uri, &h, body.clone()).await;
        assert_eq!(
            r.reason(),
            (code, Some(reason)),
            "{uri} {body}: {:?}",
            r.body
        );
        assert_eq!(r.body["error"]["code"], code);
        assert_eq!(r.body["error"]["errors"][0]["domain"], "global");
    }
    let r = m
        .send(
            "GET",
            &format!("{P}/global/operations/operation-nope"),
            &h,
            "",
        )
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    let big = format!(
        r#"{{"name":"big","description":"{}"}}"#,
        "x".repeat(crate::BODY_LIMIT + 1)
    );
    let r = m.send("POST", &format!("{P}/{R}/addresses"), &h, big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.body["error"]["code"], 413);
    assert_eq!(m.admin().leaks(), before);
    assert!(
        m.shared.cloud().ops.is_empty(),
        "no operation for a refused write"
    );
}

#[tokio::test]
async fn seeds_admin_and_reset() {
    let seed = crate::Seed::parse(
        br#"{"state": {"instances": [{"name": "extra", "zone": "us-central1-c", "tags": ["x"], "nat": false}]},
             "faults": [{"service": "compute", "status": 500, "count": 1}],
             "lifecycle": {"types": {"routes": {"mode": "stuck"}}}}"#,
        std::path::Path::new("seed.json"),
    )
    .expect("seed");
    let m = Mock::new(Config {
        nodes: 1,
        seed,
        ..Config::default()
    });
    let admin = m.admin();
    let names: Vec<String> = admin.instances().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["extra", "node-0"]);
    assert_eq!(admin.instance("extra").and_then(|i| i.nat_ip), None);
    assert_eq!(admin.lifecycle().by_type["routes"], LifecycleMode::Stuck);
    admin
        .update_instance(
            "node-0",
            InstancePatch {
                status: Some("TERMINATED".into()),
                tags: Some(vec!["a".into()]),
                ..Default::default()
            },
        )
        .expect("patch");
    let r = m
        .send(
            "PATCH",
            "/admin/instances/node-0",
            &[],
            r#"{"status":"SLEEPY"}"#,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = m
        .send(
            "POST",
            "/admin/instances",
            &[],
            r#"{"name":"n9","zone":"us-central1-b"}"#,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(
        r.body["provider_id"],
        "gce://ccm-conformance/us-central1-b/n9"
    );
    assert_eq!(
        m.send("DELETE", "/admin/instances/n9", &[], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let r = m
        .send(
            "PUT",
            "/admin/lifecycle",
            &[],
            r#"{"target":"type","name":"nope","mode":{"mode":"stuck"}}"#,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        m.send("POST", "/admin/reset", &[], "").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        admin.instance("node-0").map(|i| i.status).as_deref(),
        Some("RUNNING")
    );
    assert_eq!(admin.faults().list().len(), 1, "the seed's rules come back");
    let r = m.send("GET", "/admin/leaks", &[], "").await;
    assert_eq!(r.body["total"], 0);
}

// ---- served: real sockets ----------------------------------------------------------

/// A backend on `ip:port` answering every connection with `name`, and an HTTP health
/// endpoint on `ip:hc_port` answering `/healthz` with `healthy`.
async fn backend(
    ip: IpAddr,
    port: u16,
    hc_port: u16,
    name: &'static str,
    healthy: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind(SocketAddr::new(ip, port))
        .await
        .expect("bind backend");
    let h = tokio::net::TcpListener::bind(SocketAddr::new(ip, hc_port))
        .await
        .expect("bind health");
    let a = tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(name.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    let b = tokio::spawn(async move {
        while let Ok((mut s, _)) = h.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                let status = if healthy {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    vec![a, b]
}

/// Connects from `source` and reads what the backend says ("" when refused or closed).
async fn call(source: IpAddr, to: SocketAddr) -> String {
    use tokio::io::AsyncReadExt;
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    if sock.bind(SocketAddr::new(source, 0)).is_err() {
        return String::new();
    }
    let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), sock.connect(to)).await else {
        return String::new();
    };
    let mut out = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out)).await;
    out
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The whole chain over real HTTP (reqwest), then real TCP through the forwarding rule:
/// health-check membership and firewall source ranges decide who gets through.
#[tokio::test]
async fn forwarding_rules_carry_traffic_to_healthy_members_from_allowed_sources() {
    let mock = GcpMock::start(Config {
        nodes: 2,
        address_block: 81,
        ..Config::default()
    })
    .await
    .expect("start");
    let ready = mock.ready_info();
    assert!(ready.endpoint.ends_with("/compute/v1/"));
    mock_cloud::tls::install_ring_provider();
    let http = reqwest::Client::new();
    let tok: Value = http
        .post(&ready.token_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=refresh_token&refresh_token=r")
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("json");
    let t = tok["access_token"].as_str().expect("token").to_string();
    let api = |method: reqwest::Method, rel: String, body: Option<Value>| {
        let http = http.clone();
        let url = format!("{}projects/{}/{rel}", ready.endpoint, ready.project_id);
        let t = t.clone();
        async move {
            let mut r = http.request(method, url).bearer_auth(t);
            if let Some(b) = body {
                r = r.json(&b);
            }
            let resp = r.send().await.expect("send");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (s, n0) = api(
        reqwest::Method::GET,
        "zones/us-central1-a/instances/node-0".into(),
        None,
    )
    .await;
    assert_eq!(s, 200);
    let ip0: IpAddr = n0["networkInterfaces"][0]["networkIP"]
        .as_str()
        .expect("ip")
        .parse()
        .expect("ip");
    let (_, n1) = api(
        reqwest::Method::GET,
        "zones/us-central1-a/instances/node-1".into(),
        None,
    )
    .await;
    let ip1: IpAddr = n1["networkInterfaces"][0]["networkIP"]
        .as_str()
        .expect("ip")
        .parse()
        .expect("ip");
    let port = 18080;
    let mut tasks = backend(ip0, port, 10256, "node-0", true).await;
    tasks.extend(backend(ip1, port, 10256, "node-1", false).await);
    let vip = "127.71.81.50";
    let steps = [
        (
            format!("{R}/addresses"),
            json!({"name": "a1", "address": vip}),
        ),
        (
            "global/httpHealthChecks".into(),
            json!({"name": "hc", "port": 10256, "requestPath": "/healthz", "checkIntervalSec": 1, "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 1}),
        ),
        (
            format!("{R}/targetPools"),
            json!({"name": "a1", "instances": ["zones/us-central1-a/instances/node-0", "zones/us-central1-a/instances/node-1"], "healthChecks": ["global/httpHealthChecks/hc"]}),
        ),
        (
            format!("{R}/forwardingRules"),
            json!({"name": "a1", "IPAddress": vip, "IPProtocol": "TCP", "portRange": port.to_string(), "target": format!("{R}/targetPools/a1")}),
        ),
        (
            "global/firewalls".into(),
            json!({"name": "k8s-fw-a1", "sourceRanges": ["127.99.0.0/16"], "targetTags": ["ccm-node"], "allowed": [{"IPProtocol": "tcp", "ports": [port.to_string()]}]}),
        ),
    ];
    for (rel, body) in steps {
        let (s, op) = api(reqwest::Method::POST, rel.clone(), Some(body)).await;
        assert_eq!(s, 200, "{rel}: {op}");
        let link = op["selfLink"].as_str().expect("link").to_string();
        let w = http
            .post(format!("{link}/wait"))
            .bearer_auth(&t)
            .send()
            .await
            .expect("wait")
            .json::<Value>()
            .await
            .expect("json");
        assert_eq!(w["status"], "DONE", "{w}");
    }
    let to = SocketAddr::new(vip.parse().expect("ip"), port);
    let allowed: IpAddr = "127.99.0.1".parse().expect("ip");
    let denied: IpAddr = "127.98.0.1".parse().expect("ip");
    // Only the healthy member answers.
    // Until the first probe round marks node-1 down, it may still be picked.
    eventually("only node-0 answers", || async {
        let mut all = Vec::new();
        for _ in 0..4 {
            all.push(call(allowed, to).await);
        }
        all.iter().all(|a| a == "node-0")
    })
    .await;
    for _ in 0..4 {
        assert_eq!(
            call(allowed, to).await,
            "node-0",
            "the unhealthy member gets nothing"
        );
    }
    assert_eq!(
        call(denied, to).await,
        "",
        "a source outside the firewall's ranges is refused"
    );
    // Remove node-0 from the pool: nobody healthy is left, nothing answers.
    let (s, _) = api(
        reqwest::Method::POST,
        format!("{R}/targetPools/a1/removeInstance"),
        Some(json!({"instances": [{"instance": "zones/us-central1-a/instances/node-0"}]})),
    )
    .await;
    assert_eq!(s, 200);
    eventually("node-0 is out", || async {
        call(allowed, to).await.is_empty()
    })
    .await;
    // Opening the firewall to everyone lets the other source in once members are back.
    let (s, _) = api(
        reqwest::Method::POST,
        format!("{R}/targetPools/a1/addInstance"),
        Some(json!({"instances": [{"instance": "zones/us-central1-a/instances/node-0"}]})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = api(
        reqwest::Method::PATCH,
        "global/firewalls/k8s-fw-a1".into(),
        Some(json!({"sourceRanges": ["0.0.0.0/0"]})),
    )
    .await;
    assert_eq!(s, 200);
    eventually("the other source gets in", || async {
        call(denied, to).await == "node-0"
    })
    .await;
    // Deleting the forwarding rule stops the listener.
    let (s, _) = api(
        reqwest::Method::DELETE,
        format!("{R}/forwardingRules/a1"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    eventually("listener gone", || async {
        tokio::net::TcpStream::connect(to).await.is_err()
    })
    .await;
    // The metadata server on the same listener.
    let r = http
        .get(format!(
            "http://{}/computeMetadata/v1/instance/zone",
            ready.metadata_host
        ))
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .expect("md");
    assert_eq!(
        r.text().await.expect("text"),
        "projects/123456789012/zones/us-central1-a"
    );
    let journal = mock.admin().journal();
    assert_eq!(
        journal.count(
            |e| e.operation.as_deref() == Some("compute.forwardingRules.insert")
                && e.resource.as_deref() == Some("a1")
        ),
        1,
        "an insert is journaled with its body's name"
    );
    assert_eq!(
        journal.count(|e| e.operation.as_deref() == Some("compute.forwardingRules.insert")),
        1
    );
    for t in tasks {
        t.abort();
    }
    mock.shutdown().await;
}

#[tokio::test]
async fn the_admin_router_serves_and_journals_itself() {
    use mock_cloud::MockCloud;
    let mock = GcpMock::start(Config {
        nodes: 1,
        address_block: 82,
        ..Config::default()
    })
    .await
    .expect("start");
    mock_cloud::testing::check_admin_router(mock, "/instances").await;
    let bad = crate::Seed::parse(
        br#"{"state": {"instances": [{"name": "node-0"}]}}"#,
        std::path::Path::new("s.json"),
    )
    .expect("parses");
    let err = GcpMock::start(Config {
        nodes: 1,
        address_block: 83,
        seed: bad,
        ..Config::default()
    })
    .await
    .err()
    .expect("duplicate");
    assert!(<GcpMock as MockCloud>::is_seed_error(&err), "{err}");
}

#[tokio::test]
async fn operations_list_get_and_delete_by_scope() {
    let m = Mock::seeded(1);
    let t = m.token().await;
    let op = m
        .done(
            "POST",
            "global/httpHealthChecks",
            &t,
            Some(json!({"name": "hc"})),
        )
        .await;
    let name = op["name"].as_str().expect("name").to_string();
    let list = m.api("GET", "global/operations", &t, None).await;
    assert_eq!(list.body["kind"], "compute#operationList");
    assert_eq!(list.body["items"][0]["name"], json!(name));
    let regional = m.api("GET", &format!("{R}/operations"), &t, None).await;
    assert!(regional.body.get("items").is_none());
    let zonal = m
        .api("GET", "zones/us-central1-a/operations", &t, None)
        .await;
    assert_eq!(zonal.status, StatusCode::OK);
    let r = m
        .api("DELETE", &format!("global/operations/{name}"), &t, None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = m
        .api("GET", &format!("global/operations/{name}"), &t, None)
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    let r = m
        .api("GET", &format!("global/operations/{name}/wait"), &t, None)
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    // A zone or region the mock does not have.
    let r = m
        .api("GET", "zones/europe-west1-b/instances", &t, None)
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    let r = m
        .api("GET", "regions/europe-west1/addresses", &t, None)
        .await;
    assert_eq!(r.reason(), (404, Some("notFound")));
    // The project by number, as cloud-provider-gcp reads it.
    let r = m
        .send(
            "GET",
            "/compute/v1/projects/123456789012",
            &[("authorization", &format!("Bearer {t}"))],
            "",
        )
        .await;
    assert_eq!(r.body["name"], "ccm-conformance");
}

#[tokio::test]
async fn instances_have_several_nics_with_explicit_addresses() {
    use crate::{AdminError, InstanceSpec};
    let m = Mock::seeded(2);
    let admin = m.admin();
    let t = m.token().await;
    // "aa-multi" sorts first: the metadata server describes it.
    let i = admin
        .create_instance(InstanceSpec {
            name: "aa-multi".into(),
            network_ips: Some(vec![
                "127.80.0.5".into(),
                "10.1.2.3".into(),
                "127.80.0.6".into(),
            ]),
            nat_ips: Some(vec!["127.81.0.5".into(), "127.81.0.6".into()]),
            ..InstanceSpec::default()
        })
        .expect("created");
    assert_eq!(
        (i.network_ip.as_str(), i.nat_ip.as_deref()),
        ("127.80.0.5", Some("127.81.0.5"))
    );
    assert_eq!(i.network_ips, ["127.80.0.5", "10.1.2.3", "127.80.0.6"]);
    assert_eq!(i.nat_ips, ["127.81.0.5", "127.81.0.6"]);
    let r = m
        .api("GET", "zones/us-central1-a/instances/aa-multi", &t, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let nics = r.body["networkInterfaces"]
        .as_array()
        .expect("nics")
        .clone();
    assert_eq!(nics.len(), 3);
    for (n, nic) in nics.iter().enumerate() {
        assert_eq!(nic["name"], format!("nic{n}"));
        assert_eq!(nic["network"], format!("{BASE}{P}/global/networks/default"));
        assert_eq!(
            nic["subnetwork"],
            format!("{BASE}{P}/{R}/subnetworks/default")
        );
        assert!(nic["fingerprint"].is_string());
    }
    assert_ne!(nics[0]["fingerprint"], nics[1]["fingerprint"]);
    assert_eq!(nics[1]["networkIP"], "10.1.2.3");
    assert_eq!(nics[0]["accessConfigs"][0]["natIP"], "127.81.0.5");
    assert_eq!(nics[0]["accessConfigs"][0]["type"], "ONE_TO_ONE_NAT");
    assert_eq!(nics[1]["accessConfigs"][0]["natIP"], "127.81.0.6");
    assert_eq!(nics[2]["accessConfigs"], json!([]));
    // The metadata server lists every NIC.
    let flavor = [("metadata-flavor", "Google")];
    for (p, want) in [
        ("instance/network-interfaces/", "0/\n1/\n2/\n"),
        ("instance/network-interfaces/1/ip", "10.1.2.3"),
        ("instance/network-interfaces/2/ip", "127.80.0.6"),
        ("instance/network-interfaces/1/access-configs", "0/\n"),
        ("instance/network-interfaces/2/access-configs", ""),
        (
            "instance/network-interfaces/1/access-configs/0/external-ip",
            "127.81.0.6",
        ),
    ] {
        let r = m
            .send("GET", &format!("/computeMetadata/v1/{p}"), &flavor, "")
            .await;
        let text = match &r.body {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        assert_eq!((r.status, text.as_str()), (StatusCode::OK, want), "{p}");
    }
    let r = m
        .send(
            "GET",
            "/computeMetadata/v1/instance/network-interfaces/3/ip",
            &flavor,
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Used-IP accounting covers every NIC and NAT.
    for (nets, nats) in [
        (vec!["10.1.2.3"], None),
        (vec!["127.81.0.6"], None),
        (vec!["127.90.0.1"], Some(vec!["127.80.0.6"])),
        (vec!["127.70.0.10"], None), // node-0's
        (vec!["127.90.0.1", "127.90.0.1"], None),
    ] {
        let e = admin
            .create_instance(InstanceSpec {
                name: "clash".into(),
                network_ips: Some(nets.iter().map(|s| s.to_string()).collect()),
                nat_ips: nats.map(|v| v.iter().map(|s| s.to_string()).collect()),
                ..InstanceSpec::default()
            })
            .expect_err("in use");
        assert!(matches!(e, AdminError::Conflict(_)), "{nets:?}: {e}");
    }
    let r = m
        .api(
            "POST",
            &format!("{R}/addresses"),
            &t,
            Some(json!({"name": "x", "address": "127.80.0.6"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    // Invalid: more NATs than NICs, no NIC, not IPv4, both aliases.
    for spec in [
        InstanceSpec {
            name: "bad".into(),
            network_ips: Some(vec!["127.90.0.1".into()]),
            nat_ips: Some(vec!["127.91.0.1".into(), "127.91.0.2".into()]),
            ..InstanceSpec::default()
        },
        InstanceSpec {
            name: "bad".into(),
            network_ips: Some(vec![]),
            ..InstanceSpec::default()
        },
        InstanceSpec {
            name: "bad".into(),
            network_ips: Some(vec!["fe80::1".into()]),
            ..InstanceSpec::default()
        },
        InstanceSpec {
            name: "bad".into(),
            network_ip: Some("127.90.0.1".into()),
            network_ips: Some(vec!["127.90.0.2".into()]),
            ..InstanceSpec::default()
        },
    ] {
        let e = admin.create_instance(spec).expect_err("invalid");
        assert!(matches!(e, AdminError::Invalid { .. }), "{e}");
    }
    assert!(admin.instance("clash").is_none() && admin.instance("bad").is_none());
    // Defaults: one allocated NIC and NAT; `nat_ips: []` or `nat: false`: no NAT.
    let d = admin
        .create_instance(InstanceSpec {
            name: "d1".into(),
            ..InstanceSpec::default()
        })
        .expect("created");
    assert_eq!((d.network_ips.len(), d.nat_ips.len()), (1, 1));
    assert_eq!(d.nat_ip.as_deref(), d.nat_ips.first().map(String::as_str));
    for (name, spec) in [("d2", (None, Some(vec![]))), ("d3", (Some(false), None))] {
        let d = admin
            .create_instance(InstanceSpec {
                name: name.into(),
                nat: spec.0,
                nat_ips: spec.1,
                ..InstanceSpec::default()
            })
            .expect("created");
        assert_eq!(
            (d.network_ips.len(), d.nat_ips, d.nat_ip),
            (1, vec![], None)
        );
    }
    // Over HTTP, with the same field names.
    let r = m
        .send(
            "POST",
            "/admin/instances",
            &[("content-type", "application/json")],
            json!({"name": "h1", "network_ips": ["127.90.1.1", "127.90.1.2"], "nat_ips": []})
                .to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["network_ips"], json!(["127.90.1.1", "127.90.1.2"]));
    assert_eq!(r.body["nat_ips"], json!([]));
}

#[tokio::test]
async fn patching_an_instances_addresses_and_status() {
    use crate::{AdminError, InstanceSpec};
    let m = Mock::seeded(2);
    let admin = m.admin();
    let t = m.token().await;
    let p = |network_ips: Option<Vec<&str>>, nat_ips: Option<Vec<&str>>| InstancePatch {
        network_ips: network_ips.map(|v| v.into_iter().map(String::from).collect()),
        nat_ips: nat_ips.map(|v| v.into_iter().map(String::from).collect()),
        ..InstancePatch::default()
    };
    let i = admin
        .update_instance(
            "node-1",
            p(
                Some(vec!["127.70.0.11", "127.60.0.2"]),
                Some(vec!["127.61.0.1", "127.61.0.2"]),
            ),
        )
        .expect("patched");
    assert_eq!(
        i.network_ips,
        ["127.70.0.11", "127.60.0.2"],
        "its own address stays"
    );
    assert_eq!(i.nat_ips, ["127.61.0.1", "127.61.0.2"]);
    let r = m
        .api("GET", "zones/us-central1-a/instances/node-1", &t, None)
        .await;
    assert_eq!(r.body["networkInterfaces"][1]["name"], "nic1");
    assert_eq!(
        r.body["networkInterfaces"][1]["accessConfigs"][0]["natIP"],
        "127.61.0.2"
    );
    // The old NAT address is free again.
    admin
        .create_instance(InstanceSpec {
            name: "n9".into(),
            network_ips: Some(vec!["127.72.0.11".into()]),
            nat_ips: Some(vec![]),
            ..InstanceSpec::default()
        })
        .expect("127.72.0.11 was released");
    // Conflicts and invalid patches change nothing.
    let before = admin.instance("node-1");
    for (patch, conflict) in [
        (p(Some(vec!["127.70.0.10"]), None), true), // node-0's
        (p(None, Some(vec!["127.72.0.10"])), true), // node-0's NAT
        (p(None, Some(vec!["127.60.0.2"])), true),  // its own nic1
        (p(Some(vec![]), None), false),
        (
            p(None, Some(vec!["127.62.0.1", "127.62.0.2", "127.62.0.3"])),
            false,
        ),
        (p(Some(vec!["nope"]), None), false),
    ] {
        let e = admin.update_instance("node-1", patch).expect_err("refused");
        assert_eq!(matches!(e, AdminError::Conflict(_)), conflict, "{e}");
        assert_eq!(admin.instance("node-1"), before);
    }
    // Fewer NICs drop their NATs; `nat_ips: []` removes all.
    let i = admin
        .update_instance("node-1", p(Some(vec!["127.60.0.9"]), None))
        .expect("patched");
    assert_eq!(
        (i.network_ips, i.nat_ips),
        (
            vec!["127.60.0.9".to_string()],
            vec!["127.61.0.1".to_string()]
        )
    );
    let i = admin
        .update_instance("node-1", p(None, Some(vec![])))
        .expect("patched");
    assert_eq!((i.nat_ip, i.nat_ips), (None, vec![]));
    // Over HTTP.
    let r = m
        .send(
            "PATCH",
            "/admin/instances/node-1",
            &[("content-type", "application/json")],
            json!({"network_ips": ["127.60.0.7"], "nat_ips": ["127.61.0.7"]}).to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["network_ip"], "127.60.0.7");
    assert_eq!(r.body["nat_ip"], "127.61.0.7");
    // Reboot: every status transition is accepted; NAT addresses stay.
    for s in ["STOPPING", "TERMINATED", "SUSPENDED", "RUNNING"] {
        let i = admin
            .update_instance(
                "node-1",
                InstancePatch {
                    status: Some(s.into()),
                    ..InstancePatch::default()
                },
            )
            .expect("status");
        assert_eq!((i.status.as_str(), i.nat_ips.len()), (s, 1));
    }
    let e = admin
        .update_instance(
            "node-1",
            InstancePatch {
                status: Some("REBOOTING".into()),
                ..InstancePatch::default()
            },
        )
        .expect_err("not a status");
    assert!(matches!(e, AdminError::Invalid { .. }));
}

#[tokio::test]
async fn admin_routes_are_not_leaks() {
    let m = Mock::seeded(2);
    let admin = m.admin();
    let t = m.token().await;
    let r = admin
        .add_route("other-team", "10.9.0.0/16", "127.70.0.10")
        .expect("added");
    assert_eq!(
        (
            r.dest_range.as_str(),
            r.next_hop_ip.as_deref(),
            r.next_hop_instance
        ),
        ("10.9.0.0/16", Some("127.70.0.10"), None)
    );
    assert!(matches!(
        admin.add_route("other-team", "10.9.0.0/16", "127.70.0.10"),
        Err(crate::AdminError::Conflict(_))
    ));
    for (d, h) in [
        ("10.9.0.0", "127.0.0.1"),
        ("10.9.0.0/33", "127.0.0.1"),
        ("10.9.0.0/16", "x"),
    ] {
        assert!(matches!(
            admin.add_route("r2", d, h),
            Err(crate::AdminError::Invalid { .. })
        ));
    }
    let r = m
        .send(
            "POST",
            "/admin/routes",
            &[("content-type", "application/json")],
            json!({"name": "via-http", "dest_range": "10.8.0.0/24", "next_hop_ip": "127.70.0.11"})
                .to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["next_hop_ip"], "127.70.0.11");
    let r = m
        .send(
            "POST",
            "/admin/routes",
            &[("content-type", "application/json")],
            json!({"name": "bad", "dest_range": "10.8.0.0/24"}).to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    // The Compute API sees them; a route it makes is a leak and names its instance.
    let r = m.api("GET", "global/routes/other-team", &t, None).await;
    assert_eq!(
        (r.status, r.body["nextHopIp"].as_str()),
        (StatusCode::OK, Some("127.70.0.10"))
    );
    m.done(
        "POST",
        "global/routes",
        &t,
        Some(
            json!({"name": "mine", "network": "global/networks/default", "destRange": "10.7.0.0/24",
            "nextHopInstance": "zones/us-central1-a/instances/node-1"}),
        ),
    )
    .await;
    let routes = admin.routes();
    assert_eq!(routes.len(), 3);
    let mine = routes.iter().find(|r| r.name == "mine").expect("mine");
    assert_eq!(
        mine.next_hop_instance.as_deref(),
        Some(format!("{BASE}{P}/zones/us-central1-a/instances/node-1").as_str())
    );
    assert_eq!(mine.next_hop_instance_name.as_deref(), Some("node-1"));
    let leaks = admin.leaks();
    assert_eq!(leaks.total, 1, "{leaks:?}");
    assert_eq!(leaks.by_type["routes"][0].name, "mine");
    admin.reset();
    assert!(admin.routes().is_empty());
}

#[tokio::test]
async fn lb_summary_ids_change_when_a_rule_is_recreated() {
    let m = Mock::seeded(2);
    let admin = m.admin();
    let t = m.token().await;
    lb_chain(&m, &t, "127.71.0.50", 31000).await;
    let first = admin.load_balancers();
    assert_eq!(first.len(), 1);
    let lb = &first[0];
    assert_eq!(
        (
            lb.name.as_str(),
            lb.ip.as_str(),
            lb.target_pool.as_deref(),
            lb.pending
        ),
        ("a1", "127.71.0.50", Some("a1"), false)
    );
    assert_eq!(lb.instances, ["node-0", "node-1"]);
    let r = m
        .api("GET", &format!("{R}/forwardingRules/a1"), &t, None)
        .await;
    assert_eq!(r.body["id"].as_str(), Some(lb.id.as_str()));
    m.done("DELETE", &format!("{R}/forwardingRules/a1"), &t, None)
        .await;
    assert!(admin.load_balancers().is_empty());
    m.done(
        "POST",
        &format!("{R}/forwardingRules"),
        &t,
        Some(json!({"name": "a1", "IPAddress": "127.71.0.50", "IPProtocol": "TCP", "portRange": "31000",
            "target": format!("{BASE}{P}/{R}/targetPools/a1"), "loadBalancingScheme": "EXTERNAL"})),
    )
    .await;
    let again = admin.load_balancers();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].name, "a1");
    assert_ne!(again[0].id, lb.id, "a recreated rule has a new id");
}
