//! Property tests of the request parsers a client can reach: JSON bodies of the create and
//! update calls (Octavia's fully-populated create, Neutron floating IPs, security groups and
//! rules, router extra routes) and the query filters of the list calls. Whatever arrives,
//! the mock answers in the service's own envelope without a 5xx, and a refused request
//! leaves nothing behind (the leak report is unchanged).

use axum::body::Body;
use axum::http::StatusCode;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::testing::Mock;

const KEYS: &[&str] = &[
    "name",
    "vip_subnet_id",
    "vip_address",
    "listeners",
    "default_pool",
    "members",
    "address",
    "protocol_port",
    "protocol",
    "lb_algorithm",
    "healthmonitor",
    "type",
    "delay",
    "timeout",
    "max_retries",
    "tags",
    "floating_network_id",
    "port_id",
    "fixed_ip_address",
    "security_group_id",
    "direction",
    "ethertype",
    "port_range_min",
    "port_range_max",
    "remote_ip_prefix",
    "routes",
    "destination",
    "nexthop",
    "admin_state_up",
    "description",
    "subnet_id",
    "id",
    "pools",
    "l7policies",
];

fn leaf(subnet: String, network: String) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![-1i64, 0, 1, 80, 443, 65535, 65536, 1 << 40])
            .prop_map(Value::from),
        Just(json!(0.5)),
        prop::sample::select(vec![
            "",
            "TCP",
            "UDP",
            "HTTP",
            "ROUND_ROBIN",
            "ingress",
            "egress",
            "IPv4",
            "IPv6",
            "127.10.0.10",
            "10.0.0.0/24",
            "not-an-ip",
            "0.0.0.0/0",
            "::/0",
            "x\u{0}y",
        ])
        .prop_map(Value::from),
        Just(Value::from(subnet)),
        Just(Value::from(network)),
    ]
}

fn value(subnet: String, network: String) -> impl Strategy<Value = Value> {
    leaf(subnet, network).prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// Where a body goes and the key its resource is wrapped in.
const CREATES: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/load-balancer/v2/lbaas/loadbalancers",
        "loadbalancer",
    ),
    ("POST", "/network/v2.0/floatingips", "floatingip"),
    ("POST", "/network/v2.0/security-groups", "security_group"),
    (
        "POST",
        "/network/v2.0/security-group-rules",
        "security_group_rule",
    ),
    (
        "PUT",
        "/network/v2.0/routers/{router}/add_extraroutes",
        "router",
    ),
];

fn in_envelope(path: &str, body: &Value) -> bool {
    if path.starts_with("/load-balancer") {
        body["faultstring"].is_string()
    } else {
        body["NeutronError"]["message"].is_string()
    }
}

fn runner() -> TestRunner {
    TestRunner::new(RunnerConfig {
        cases: 128,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

#[test]
fn bodies_never_5xx_and_refusals_change_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let m = Mock::seeded(1);
    let (token, subnet, network, router) = rt.block_on(async {
        let token = m.token().await;
        let subnets = m.get("/network/v2.0/subnets", &token).await.body;
        let networks = m.get("/network/v2.0/networks", &token).await.body;
        let router = m.admin().routers()[0].id.clone();
        (
            token,
            subnets["subnets"][0]["id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            networks["networks"][0]["id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            router,
        )
    });
    let strategy = (
        prop::sample::select(CREATES),
        value(subnet, network),
        any::<bool>(),
    );
    let result = runner().run(&strategy, |((method, path, key), inner, wrap)| {
        let path = path.replace("{router}", &router);
        let body = if wrap { json!({ key: inner }) } else { inner };
        rt.block_on(async {
            let before = serde_json::to_value(m.admin().leaks()).expect("leaks");
            let r = m
                .send(
                    method,
                    &path,
                    &[
                        ("x-auth-token", &token),
                        ("content-type", "application/json"),
                    ],
                    Body::from(body.to_string()),
                )
                .await;
            if r.status.is_server_error() {
                return Err(TestCaseError::fail(format!(
                    "{method} {path} {body} -> {} {}",
                    r.status, r.body
                )));
            }
            if r.status.is_client_error() {
                if !in_envelope(&path, &r.body) {
                    return Err(TestCaseError::fail(format!(
                        "{} not in envelope: {}",
                        r.status, r.body
                    )));
                }
                let after = serde_json::to_value(m.admin().leaks()).expect("leaks");
                if before != after {
                    return Err(TestCaseError::fail(format!(
                        "refused {method} {path} {body} still changed state: {before} -> {after}"
                    )));
                }
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn query_filters_never_5xx() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let m = Mock::seeded(2);
    let token = rt.block_on(m.token());
    let lists = prop::sample::select(vec![
        "/network/v2.0/ports",
        "/network/v2.0/networks",
        "/network/v2.0/subnets",
        "/network/v2.0/floatingips",
        "/network/v2.0/routers",
        "/network/v2.0/security-groups",
        "/compute/v2.1/servers/detail",
        "/compute/v2.1/servers",
        "/load-balancer/v2/lbaas/loadbalancers",
        "/load-balancer/v2.0/lbaas/pools",
    ]);
    let pair = (
        prop::sample::select(vec![
            "name",
            "id",
            "device_id",
            "fixed_ips",
            "status",
            "limit",
            "marker",
            "sort_key",
            "sort_dir",
            "tags",
            "tags-any",
            "not-tags",
            "fields",
            "ip_address",
            "changes-since",
            "all_tenants",
            "vip_address",
            "%zz",
            "",
        ]),
        "[a-z0-9=%&.:*^$\\[\\]()-]{0,12}",
    );
    let strategy = (lists, prop::collection::vec(pair, 0..4));
    let result = runner().run(&strategy, |(path, pairs)| {
        let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let uri = format!("{path}?{}", query.join("&"));
        rt.block_on(async {
            let r = m.get(&uri, &token).await;
            if r.status.is_server_error() || r.status == StatusCode::NOT_FOUND && r.body.is_null() {
                return Err(TestCaseError::fail(format!(
                    "{uri} -> {} {}",
                    r.status, r.body
                )));
            }
            if !r.body.is_object() {
                return Err(TestCaseError::fail(format!("{uri}: not JSON: {}", r.body)));
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
