//! The fault engine's tests: rules as JSON and typed, their checks, matching, counts,
//! probabilities, throttling presets, latency and the `not_found_after_create` window.

use std::time::{Duration, Instant};

use super::*;

fn rule(path: &str, status: u16, count: Option<u32>) -> FaultJson {
    FaultJson {
        path: Some(path.into()),
        status,
        count,
        ..Default::default()
    }
}

fn get<'a>(path: &'a str, resource: Option<&'a str>) -> RequestInfo<'a> {
    RequestInfo {
        service: "compute",
        method: "GET",
        path,
        operation: Some("GET servers"),
        resource,
    }
}

#[test]
fn fires_exactly_count_times_then_disappears() {
    let f = Faults::new();
    let id = f.add(rule("/servers/", 503, Some(2)));
    assert_eq!(
        f.check("compute", "GET", "/compute/v2.1/servers/abc")
            .map(|x| x.rule_id),
        Some(id)
    );
    assert_eq!(f.list()[0].fired, 1);
    assert_eq!(f.list()[0].rule.when().count, Some(1));
    assert!(
        f.check("compute", "GET", "/compute/v2.1/servers/abc")
            .is_some()
    );
    assert!(
        f.check("compute", "GET", "/compute/v2.1/servers/abc")
            .is_none()
    );
    assert!(f.list().is_empty());
}

#[test]
fn matchers_filter_service_method_and_path() {
    let f = Faults::new();
    f.add(FaultJson {
        service: Some("network".into()),
        method: Some("get".into()),
        path: Some("/ports$".into()),
        status: 500,
        message: Some("boom".into()),
        ..Default::default()
    });
    assert!(f.check("compute", "GET", "/network/v2.0/ports").is_none());
    assert!(f.check("network", "POST", "/network/v2.0/ports").is_none());
    assert!(f.check("network", "GET", "/network/v2.0/ports/1").is_none());
    let hit = f.check("network", "GET", "/network/v2.0/ports");
    assert_eq!(
        hit.map(|h| (h.status, h.message, h.action)),
        Some((Some(500), Some("boom".into()), FaultAction::Error))
    );
}

#[test]
fn cloud_operation_and_resource_matchers() {
    let f = Faults::for_cloud("openstack");
    f.add(FaultJson {
        cloud: Some("aws".into()),
        status: 500,
        ..Default::default()
    });
    f.add(FaultJson {
        cloud: Some("openstack".into()),
        operation: Some("get SERVERS".into()),
        resource: Some("abc".into()),
        status: 502,
        ..Default::default()
    });
    assert!(f.check_request(&get("/servers/def", Some("def"))).is_none());
    assert!(f.check("compute", "GET", "/servers/abc").is_none());
    let hit = f.check_request(&get("/servers/abc", Some("abc")));
    assert_eq!(hit.and_then(|h| h.status), Some(502));
}

#[test]
fn latency_only_rule_has_no_status() {
    let f = Faults::new();
    f.add(FaultJson {
        latency_ms: Some(5),
        ..Default::default()
    });
    let hit = f.check("compute", "GET", "/x");
    assert_eq!(
        hit.map(|h| (h.status, h.latency, h.action)),
        Some((None, Some(Duration::from_millis(5)), FaultAction::Serve))
    );
}

#[test]
fn jitter_stays_in_range_and_is_deterministic_under_a_seed() {
    let run = |seed: u64| {
        let f = Faults::new();
        f.set_seed(seed);
        f.add(FaultJson {
            latency_ms: Some(10),
            jitter_ms: Some(20),
            ..Default::default()
        });
        (0..50)
            .map(|_| {
                f.check("compute", "GET", "/x")
                    .and_then(|h| h.latency)
                    .map(|d| d.as_millis())
                    .unwrap_or(0)
            })
            .collect::<Vec<_>>()
    };
    let a = run(7);
    assert!(a.iter().all(|ms| (10..=30).contains(ms)), "{a:?}");
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
}

#[test]
fn probability_is_seeded_and_roughly_right() {
    let run = |seed: u64| {
        let f = Faults::new();
        f.set_seed(seed);
        f.add(FaultJson {
            status: 500,
            probability: Some(0.3),
            ..Default::default()
        });
        (0..1000)
            .map(|_| f.check("compute", "GET", "/x").is_some())
            .collect::<Vec<_>>()
    };
    let a = run(1);
    let fired = a.iter().filter(|x| **x).count();
    assert!((200..400).contains(&fired), "{fired}");
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
}

#[test]
fn a_rule_that_rolls_no_lets_the_next_one_fire() {
    let f = Faults::new();
    f.add(FaultJson {
        status: 500,
        probability: Some(0.0),
        ..Default::default()
    });
    let second = f.add(rule("x", 503, None));
    assert_eq!(
        f.check("compute", "GET", "/x").map(|h| h.rule_id),
        Some(second)
    );
    assert_eq!(f.list()[0].fired, 0);
}

#[test]
fn throttle_answers_follow_the_mocks_preset() {
    fn preset(service: &str) -> Throttle {
        match service {
            "ec2" => Throttle {
                status: 503,
                code: Some("RequestLimitExceeded"),
                message: "Request limit exceeded.",
            },
            _ => Throttle::TOO_MANY_REQUESTS,
        }
    }
    let f = Faults::new();
    f.add(Fault::throttle());
    let req = |service| RequestInfo {
        service,
        method: "POST",
        path: "/",
        operation: None,
        resource: None,
    };
    let ec2 = f.check_throttled(&req("ec2"), preset).expect("ec2");
    assert_eq!(
        (ec2.status, ec2.code.as_deref(), ec2.message.as_deref()),
        (
            Some(503),
            Some("RequestLimitExceeded"),
            Some("Request limit exceeded.")
        )
    );
    let os = f.check_throttled(&req("compute"), preset).expect("os");
    assert_eq!((os.status, os.code), (Some(429), None));
    // Without a preset: HTTP's 429; the rule's own status, code and message win.
    let plain = Faults::new();
    plain.add(Fault::throttle().code("SlowDown").message("later"));
    let hit = plain.check("sdk", "POST", "/sdk").expect("fires");
    assert_eq!(
        (hit.status, hit.code.as_deref(), hit.message.as_deref()),
        (Some(429), Some("SlowDown"), Some("later"))
    );
    let own = Faults::new();
    own.add(FaultJson {
        kind: Some(FaultKind::Throttle),
        status: 500,
        ..Default::default()
    });
    assert_eq!(
        own.check_throttled(&req("ec2"), preset)
            .and_then(|h| h.status),
        Some(500)
    );
}

#[test]
fn listing_shows_the_rule_as_written_with_the_count_left() {
    let f = Faults::new();
    let written = r#"{"kind":"error","status":503,"count":2,"message":null}"#;
    let json: FaultJson = serde_json::from_str(written).expect("parse");
    f.add(json);
    f.add(Fault::latency(5).service("compute"));
    f.check("x", "GET", "/");
    let listed = serde_json::to_value(f.list()).expect("json");
    assert_eq!(
        listed,
        serde_json::json!([
            {"id": 1, "service": null, "method": null, "path": null, "count": 1,
             "kind": "error", "status": 503, "message": null, "latency_ms": null, "fired": 1},
            {"id": 2, "service": "compute", "method": null, "path": null, "count": null,
             "status": 0, "message": null, "latency_ms": 5, "fired": 0},
        ])
    );
}

#[test]
fn constructors_round_trip_through_json() {
    let rules = [
        Fault::error(503)
            .service("compute")
            .method("GET")
            .path("/servers/")
            .message("m")
            .count(Some(2)),
        Fault::throttle()
            .operation("DescribeVpcs")
            .resource("vpc-1")
            .probability(0.5),
        Fault::latency(10).jitter_ms(5).cloud("aws"),
        Fault::reset().after_ms(3),
        Fault::not_found_after_create(None, Some(2)).code("NotFound"),
    ];
    for rule in rules {
        let json = serde_json::to_string(&rule).expect("json");
        let back: Fault = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, rule, "{json}");
    }
    assert!(serde_json::from_str::<Fault>(r#"{"status":200}"#).is_err());
}

#[test]
fn reset_rule_asks_for_a_dropped_connection() {
    let f = Faults::new();
    f.add(FaultJson {
        kind: Some(FaultKind::Reset),
        count: Some(1),
        ..Default::default()
    });
    let hit = f.check("compute", "GET", "/x").expect("fires");
    assert_eq!((hit.action, hit.status), (FaultAction::Reset, None));
    assert!(f.check("compute", "GET", "/x").is_none());
}

#[test]
fn not_found_window_by_reads_covers_only_new_resources_and_gets() {
    let f = Faults::new();
    f.add(FaultJson {
        kind: Some(FaultKind::NotFoundAfterCreate),
        window_reads: Some(2),
        ..Default::default()
    });
    assert!(f.wants_created());
    f.note_created("new");
    assert!(f.check_request(&get("/servers/old", Some("old"))).is_none());
    let post = RequestInfo {
        method: "PUT",
        ..get("/servers/new", Some("new"))
    };
    assert!(f.check_request(&post).is_none());
    for _ in 0..2 {
        let hit = f.check_request(&get("/servers/new", Some("new")));
        assert_eq!(
            hit.map(|h| (h.action, h.status)),
            Some((FaultAction::NotFound, Some(404)))
        );
    }
    assert!(f.check_request(&get("/servers/new", Some("new"))).is_none());
}

#[test]
fn not_found_window_by_time_ends() {
    let f = Faults::new();
    f.add(FaultJson {
        kind: Some(FaultKind::NotFoundAfterCreate),
        window_ms: Some(30),
        ..Default::default()
    });
    f.note_created("new");
    assert!(f.check_request(&get("/servers/new", Some("new"))).is_some());
    let deadline = Instant::now() + Duration::from_secs(5);
    while f.check_request(&get("/servers/new", Some("new"))).is_some() {
        assert!(Instant::now() < deadline, "window never closed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn invalid_rules_are_refused() {
    let f = Faults::new();
    assert!(matches!(
        f.try_add(rule("(", 500, None)),
        Err(FaultError::BadPath { .. })
    ));
    assert!(matches!(
        f.try_add(rule("x", 200, None)),
        Err(FaultError::BadStatus(200))
    ));
    assert!(matches!(
        f.try_add(rule("x", 0, None)),
        Err(FaultError::NoEffect)
    ));
    assert!(matches!(
        f.try_add(rule("x", 500, Some(0))),
        Err(FaultError::ZeroCount)
    ));
    let bad = [
        FaultJson {
            status: 500,
            probability: Some(1.5),
            ..Default::default()
        },
        FaultJson {
            status: 500,
            probability: Some(f64::NAN),
            ..Default::default()
        },
        FaultJson {
            kind: Some(FaultKind::Reset),
            status: 500,
            ..Default::default()
        },
        FaultJson {
            kind: Some(FaultKind::NotFoundAfterCreate),
            ..Default::default()
        },
        FaultJson {
            status: 500,
            window_ms: Some(5),
            ..Default::default()
        },
        FaultJson {
            kind: Some(FaultKind::Throttle),
            status: 302,
            ..Default::default()
        },
        FaultJson {
            kind: Some(FaultKind::Error),
            ..Default::default()
        },
    ];
    for b in bad {
        assert!(f.try_add(b.clone()).is_err(), "{b:?}");
    }
    assert!(f.list().is_empty());
}

#[test]
fn add_all_is_all_or_nothing() {
    let f = Faults::new();
    let good = FaultJson {
        status: 500,
        ..Default::default()
    };
    let bad = FaultJson {
        status: 200,
        ..Default::default()
    };
    let err = f.try_add_all(vec![good.clone(), bad]);
    assert!(matches!(err, Err(FaultError::InList { index: 1, .. })));
    assert!(f.list().is_empty());
    assert_eq!(
        f.try_add_all(vec![good.clone(), good])
            .map(|v| v.len())
            .ok(),
        Some(2)
    );
}

#[test]
fn remove_and_clear() {
    let f = Faults::new();
    let a = f.add(rule("a", 500, None));
    let b = f.add(rule("b", 500, None));
    assert!(a < b);
    assert!(f.remove(a).is_ok());
    assert!(matches!(f.remove(a), Err(FaultError::NotFound(_))));
    assert_eq!(f.list().len(), 1);
    f.clear();
    assert!(f.list().is_empty());
}

#[test]
fn oldest_matching_rule_wins() {
    let f = Faults::new();
    let first = f.add(rule("servers", 500, None));
    f.add(rule("servers", 404, None));
    assert_eq!(
        f.check("compute", "GET", "/servers").map(|h| h.rule_id),
        Some(first)
    );
}

#[test]
fn old_rule_json_still_parses_as_a_fault() {
    let f: Fault =
        serde_json::from_str(r#"{"service":"compute","status":503,"count":1}"#).expect("parse");
    assert_eq!(f.kind(), FaultKind::Error);
    let f: Fault = serde_json::from_str(r#"{"kind":"not_found_after_create","window_reads":1}"#)
        .expect("parse");
    assert_eq!(f.kind(), FaultKind::NotFoundAfterCreate);
    assert!(serde_json::from_str::<Fault>(r#"{"kind":"explode"}"#).is_err());
}
