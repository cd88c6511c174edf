//! Property tests of every parser a client can reach: ARM paths, `api-version`, etag
//! preconditions, `$skipToken`, token request forms, resource ids, and the JSON bodies of
//! every PUT. Whatever arrives, the mock answers in ARM's envelope without a 5xx or a
//! panic, and a refused write leaves nothing behind (the leak report is unchanged).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::arm::path;
use crate::testing::Mock;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("subscriptions".to_string()),
        Just("resourceGroups".to_string()),
        Just("providers".to_string()),
        Just("Microsoft.Network".to_string()),
        Just("Microsoft.Compute".to_string()),
        Just("loadBalancers".to_string()),
        Just("routeTables".to_string()),
        Just("routes".to_string()),
        Just("locations".to_string()),
        Just("operations".to_string()),
        "[a-zA-Z0-9._%-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(RunnerConfig::with_cases(512))]

    #[test]
    fn arm_paths_parse_or_refuse(segs in prop::collection::vec(segment(), 0..12), slash in any::<bool>()) {
        let p = format!("/{}{}", segs.join("/"), if slash { "/" } else { "" });
        if let Ok(parsed) = path::parse(&p) {
            // Whatever parses names a subscription, and a resource path's key is lowercase.
            if let Some(key) = parsed.type_key() {
                prop_assert_eq!(key.clone(), key.to_ascii_lowercase());
            }
        }
        let _ = path::key_of_id(&p);
        let _ = path::split_sub_resource(&p);
    }

    #[test]
    fn resource_ids_round_trip(names in prop::collection::vec("[a-zA-Z0-9][a-zA-Z0-9._-]{0,10}", 2), which in 0usize..path::TYPES.len()) {
        let info = &path::TYPES[which];
        let depth = if info.parent.is_some() { 2 } else { 1 };
        let refs: Vec<&str> = names.iter().take(depth).map(String::as_str).collect();
        let id = path::resource_id("s", "rg", info, &refs);
        let (key, found) = path::key_of_id(&id).expect("a known id");
        prop_assert_eq!(found.key, info.key);
        prop_assert_eq!(key, id.to_ascii_lowercase());
    }

    #[test]
    fn api_versions_never_panic(v in "\\PC{0,24}") {
        let q = format!("api-version={}", v.replace('&', ""));
        let _ = crate::arm::api_version(&q);
        let _ = crate::arm::valid_api_version(&v);
    }

    #[test]
    fn valid_dates_are_accepted(y in 2014u32..2100, m in 1u32..=12, d in 1u32..=28, preview in any::<bool>()) {
        let v = format!("{y:04}-{m:02}-{d:02}{}", if preview { "-preview" } else { "" });
        prop_assert!(crate::arm::valid_api_version(&v));
    }

    #[test]
    fn preconditions_never_panic(if_match in "[ -~]{0,40}", none in "[ -~]{0,10}", exists in any::<bool>()) {
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&if_match) { h.insert("if-match", v); }
        if let Ok(v) = HeaderValue::from_str(&none) { h.insert("if-none-match", v); }
        let current = exists.then_some("W/\"abc\"");
        if let Err(e) = crate::arm::check_preconditions(&h, current) {
            prop_assert_eq!(e.status, StatusCode::PRECONDITION_FAILED);
        }
    }

    #[test]
    fn paging_covers_every_item_once(n in 0usize..40, size in 1usize..8) {
        let items: Vec<Value> = (0..n).map(|i| json!(i)).collect();
        let mut query = "api-version=2025-01-01".to_string();
        let mut seen = Vec::new();
        loop {
            let page = crate::arm::page(items.clone(), &query, "https://h/p", size).expect("page");
            seen.extend(page["value"].as_array().expect("value").iter().cloned());
            match page.get("nextLink").and_then(Value::as_str) {
                Some(next) => query = next.split_once('?').expect("query").1.to_string(),
                None => break,
            }
        }
        prop_assert_eq!(seen, items);
    }

    #[test]
    fn skip_tokens_never_panic(token in "\\PC{0,20}") {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("$skipToken", &token);
        let _ = crate::arm::page(vec![json!(1)], &q.finish(), "h", 5);
    }

    #[test]
    fn token_forms_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = crate::auth::parse_token_form(&body);
    }
}

const KEYS: &[&str] = &[
    "location",
    "sku",
    "name",
    "tags",
    "properties",
    "ipAddress",
    "publicIPAllocationMethod",
    "frontendIPConfigurations",
    "backendAddressPools",
    "loadBalancingRules",
    "probes",
    "publicIPAddress",
    "subnet",
    "id",
    "frontendIPConfiguration",
    "backendAddressPool",
    "probe",
    "protocol",
    "frontendPort",
    "backendPort",
    "port",
    "requestPath",
    "enableFloatingIP",
    "ipConfigurations",
    "privateIPAddress",
    "loadBalancerBackendAddressPools",
    "securityRules",
    "priority",
    "access",
    "direction",
    "sourceAddressPrefix",
    "destinationPortRange",
    "routes",
    "addressPrefix",
    "nextHopType",
    "nextHopIpAddress",
    "subnets",
];

fn leaf(ids: Vec<String>) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![-1i64, 0, 1, 80, 100, 4096, 65535, 65536]).prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "eastus",
            "Tcp",
            "Udp",
            "All",
            "Http",
            "Allow",
            "Deny",
            "Inbound",
            "*",
            "VirtualAppliance",
            "127.61.0.10",
            "10.0.0.0/24",
            "not-an-ip",
            "Static",
        ])
        .prop_map(Value::from),
        prop::sample::select(ids).prop_map(|id| json!({"id": id})),
    ]
}

fn body(ids: Vec<String>) -> impl Strategy<Value = Value> {
    leaf(ids).prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Any JSON body PUT to any network type is answered 2xx or 4xx in ARM's envelope; a
/// refused one leaves the leak report as it was.
#[test]
fn any_put_body_is_answered_without_a_5xx() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let m = Mock::seeded(1);
    let token = rt.block_on(m.token());
    let ids = vec![
        m.id("Microsoft.Network/virtualNetworks/vnet-ccm/subnets/subnet-ccm"),
        m.id("Microsoft.Network/publicIPAddresses/node-0-pip"),
        m.id("Microsoft.Network/loadBalancers/lb/frontendIPConfigurations/fe"),
        m.id("Microsoft.Network/loadBalancers/lb/backendAddressPools/lb"),
        m.id("Microsoft.Network/networkSecurityGroups/nsg-ccm"),
        "garbage".to_string(),
    ];
    let targets = [
        "Microsoft.Network/publicIPAddresses/p",
        "Microsoft.Network/loadBalancers/lb",
        "Microsoft.Network/networkInterfaces/nic",
        "Microsoft.Network/networkSecurityGroups/nsg-x",
        "Microsoft.Network/routeTables/rt-x",
        "Microsoft.Network/routeTables/rt-ccm/routes/r",
        "Microsoft.Network/virtualNetworks/vnet-x",
        "Microsoft.Network/virtualNetworks/vnet-ccm/subnets/s",
    ];
    let mut runner = TestRunner::new(RunnerConfig::with_cases(256));
    runner
        .run(
            &(body(ids), prop::sample::select(targets.to_vec())),
            |(body, target)| {
                rt.block_on(async {
                    let before = m.admin().leaks();
                    let r = m
                        .arm("PUT", &m.rg_path(target), &token, Some(body.clone()))
                        .await;
                    if r.status.is_server_error() {
                        return Err(TestCaseError::fail(format!(
                            "{target} {body}: {} {}",
                            r.status, r.body
                        )));
                    }
                    if r.status.is_client_error() {
                        if !r.body["error"]["code"].is_string() {
                            return Err(TestCaseError::fail(format!(
                                "no ARM envelope: {}",
                                r.body
                            )));
                        }
                        if m.admin().leaks() != before {
                            return Err(TestCaseError::fail(format!(
                                "a refused PUT left something: {body}"
                            )));
                        }
                    }
                    // Start each case from the seed again.
                    m.admin().reset();
                    Ok(())
                })
            },
        )
        .expect("property");
}
