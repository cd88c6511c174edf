//! Unit tests of the ARM client ([`super`]): endpoint discovery, throttling and pacing,
//! resource keys, error and form encoding. Apart from the client so that neither file
//! passes 1,200 lines.

use super::*;
use serde_json::json;

#[test]
fn endpoints_are_picked_by_cloud_name() {
    let meta = json!([
        {"name": "Other", "resourceManager": "https://x/", "authentication": {"loginEndpoint": "https://l/", "audiences": ["a"]}},
        {"name": "AzureMock", "resourceManager": "https://127.0.0.1:1/",
         "authentication": {"loginEndpoint": "https://127.0.0.1:1/", "audiences": ["https://management.core.windows.net/"]}}
    ]);
    let e = parse_endpoints(&meta, "https://e", "azuremock").expect("found");
    assert_eq!(e.resource_manager, "https://127.0.0.1:1/");
    assert_eq!(e.audience, "https://management.core.windows.net/");
    let first = parse_endpoints(&meta, "https://e", "").expect("first");
    assert_eq!(first.resource_manager, "https://x/");
    assert!(parse_endpoints(&meta, "https://e", "Nope").is_err());
    let no_rm = json!([{"name": "S", "authentication": {"loginEndpoint": "https://l/", "audiences": ["a"]}}]);
    assert_eq!(
        parse_endpoints(&no_rm, "https://e", "").map(|e| e.resource_manager),
        Ok("https://e".to_owned())
    );
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        throttled_for: Duration::from_secs(10),
        throttled_rate: 4,
        ..RetryPolicy::default()
    }
}

#[test]
fn an_unthrottled_client_never_waits() {
    let (mut p, policy, now) = (Pacer::default(), policy(), Instant::now());
    for i in 0..1_000 {
        let at = now + Duration::from_micros(i);
        assert_eq!(p.reserve(i % 2 == 0, at, &policy), Duration::ZERO);
    }
}

#[test]
fn retry_after_holds_back_every_request_of_its_kind() {
    let (mut p, policy, now) = (Pacer::default(), policy(), Instant::now());
    p.throttled(false, now, Some(Duration::from_secs(2)), &policy);
    // Reads wait for the gate (upstream's RetryAfterReader), writes only their turn.
    assert_eq!(
        p.reserve(false, now + Duration::from_millis(500), &policy),
        Duration::from_millis(1_500)
    );
    assert_eq!(
        p.reserve(true, now + Duration::from_millis(500), &policy),
        Duration::ZERO
    );
    // A later, shorter Retry-After does not shorten the gate.
    p.throttled(false, now, Some(Duration::from_secs(1)), &policy);
    assert_eq!(
        p.reserve(false, now + Duration::from_secs(1), &policy),
        Duration::from_secs(1)
    );
    // The gate is capped by the policy's longest wait.
    let mut q = Pacer::default();
    q.throttled(true, now, Some(Duration::from_secs(3_600)), &policy);
    assert_eq!(q.reserve(true, now, &policy), policy.max);
}

#[test]
fn after_a_429_requests_are_paced_until_the_client_cools_down() {
    let (mut p, policy, now) = (Pacer::default(), policy(), Instant::now());
    p.throttled(true, now, None, &policy);
    // A full bucket of 4, then one every 250 ms: at most 8 in any second.
    let waits: Vec<Duration> = (0..8).map(|_| p.reserve(false, now, &policy)).collect();
    assert_eq!(&waits[..4], &[Duration::ZERO; 4]);
    assert_eq!(
        &waits[4..],
        &[250, 500, 750, 1_000].map(Duration::from_millis)
    );
    // Two seconds on, the reservations are paid and the bucket is full again.
    let later = now + Duration::from_secs(2);
    let n = (0..10)
        .filter(|_| p.reserve(false, later, &policy).is_zero())
        .count();
    assert_eq!(n, 4);
    // Once `throttled_for` has passed since the last 429, nothing waits.
    let cool = now + policy.throttled_for;
    assert!((0..100).all(|_| p.reserve(false, cool, &policy).is_zero()));
    // A rate of 0 turns pacing off (the Retry-After gate stays).
    let off = RetryPolicy {
        throttled_rate: 0,
        ..policy
    };
    let mut q = Pacer::default();
    q.throttled(false, now, Some(Duration::from_millis(100)), &off);
    assert_eq!(q.reserve(false, now, &off), Duration::from_millis(100));
    assert!((0..100).all(|_| q.reserve(true, now, &off).is_zero()));
}

#[test]
fn resource_keys_ignore_base_query_slash_and_case() {
    let base = "https://arm.example";
    assert_eq!(
        resource_key(
            base,
            "https://arm.example/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/loadBalancers/LB/?api-version=1"
        ),
        "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/loadbalancers/lb"
    );
    assert_eq!(
        resource_key(base, "/Subscriptions/S/x"),
        resource_key(base, "/subscriptions/s/X/")
    );
}

#[test]
fn arm_errors_and_forms() {
    assert_eq!(
        arm_error(br#"{"error":{"code":"ResourceNotFound","message":"gone"}}"#),
        ("ResourceNotFound".to_owned(), "gone".to_owned())
    );
    assert_eq!(arm_error(b"oops").0, "");
    assert_eq!(
        form_encode(&[("scope", "https://m/.default"), ("a b", "c&d")]),
        "scope=https%3A%2F%2Fm%2F.default&a+b=c%26d"
    );
}
