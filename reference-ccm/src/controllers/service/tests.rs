//! Unit tests of the service-lb controller ([`super`]): its predicates, ingress comparison
//! and event queue. Apart from the controller so that neither file passes 1,200 lines.

use super::*;
use k8s_openapi::api::core::v1::{NodeSpec, ServicePort, ServiceSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ObjectMeta;

fn lb_service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("u1".into()),
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
            selector: Some([("app".to_owned(), "web".to_owned())].into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn with_spec(f: impl FnOnce(&mut ServiceSpec)) -> Service {
    let mut s = lb_service();
    if let Some(spec) = s.spec.as_mut() {
        f(spec);
    }
    s
}

#[test]
fn wants_and_cleanup() {
    let s = lb_service();
    assert!(wants_load_balancer(&s));
    let classed = with_spec(|s| s.load_balancer_class = Some("x".into()));
    assert!(!wants_load_balancer(&classed));
    let cluster_ip = with_spec(|s| s.type_ = Some("ClusterIP".into()));
    assert!(!wants_load_balancer(&cluster_ip));
    assert!(!needs_cleanup(&cluster_ip));
    let mut with_fin = cluster_ip.clone();
    with_fin.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert!(needs_cleanup(&with_fin));
    let mut deleting = s.clone();
    deleting.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert!(!needs_cleanup(&deleting));
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(needs_cleanup(&deleting));
}

#[test]
fn finalizer_is_added_unless_present_or_forgotten_by_the_testing_break() {
    let mut s = lb_service();
    s.metadata.finalizers = Some(vec!["example.com/other".into()]);
    assert_eq!(
        finalizers_to_add(&s, false),
        Some(vec!["example.com/other".to_owned(), FINALIZER.to_owned()])
    );
    assert_eq!(
        finalizers_to_add(&lb_service(), false),
        Some(vec![FINALIZER.to_owned()])
    );
    // --testing-break=forget-finalizer: never added...
    assert_eq!(finalizers_to_add(&s, true), None);
    assert_eq!(finalizers_to_add(&lb_service(), true), None);
    // ...and one already there is left alone (nothing to write either way).
    let mut has = lb_service();
    has.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert_eq!(finalizers_to_add(&has, false), None);
    assert_eq!(finalizers_to_add(&has, true), None);
}

#[test]
fn needs_update_triggers() {
    let base = lb_service();
    let changed: Vec<(&str, Service)> = vec![
        ("type", with_spec(|s| s.type_ = Some("NodePort".into()))),
        (
            "source ranges",
            with_spec(|s| s.load_balancer_source_ranges = Some(vec!["1.0.0.0/8".into()])),
        ),
        (
            "port",
            with_spec(|s| {
                if let Some(p) = s.ports.as_mut() {
                    p[0].port = 81
                }
            }),
        ),
        (
            "nodePort",
            with_spec(|s| {
                if let Some(p) = s.ports.as_mut() {
                    p[0].node_port = Some(30081)
                }
            }),
        ),
        (
            "port name",
            with_spec(|s| {
                if let Some(p) = s.ports.as_mut() {
                    p[0].name = Some("http".into())
                }
            }),
        ),
        (
            "appProtocol",
            with_spec(|s| {
                if let Some(p) = s.ports.as_mut() {
                    p[0].app_protocol = Some("h2c".into())
                }
            }),
        ),
        (
            "affinity",
            with_spec(|s| s.session_affinity = Some("ClientIP".into())),
        ),
        (
            "lb ip",
            with_spec(|s| s.load_balancer_ip = Some("1.2.3.4".into())),
        ),
        (
            "external ips",
            with_spec(|s| s.external_ips = Some(vec!["1.2.3.4".into()])),
        ),
        (
            "etp",
            with_spec(|s| s.external_traffic_policy = Some("Local".into())),
        ),
        (
            "hcnp",
            with_spec(|s| s.health_check_node_port = Some(31000)),
        ),
        (
            "families",
            with_spec(|s| s.ip_families = Some(vec!["IPv4".into(), "IPv6".into()])),
        ),
        (
            "class",
            with_spec(|s| s.load_balancer_class = Some("other".into())),
        ),
    ];
    for (what, new) in changed {
        assert!(needs_update(&base, &new), "{what}");
    }
    let mut annotated = lb_service();
    annotated.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
    assert!(needs_update(&base, &annotated));
    let mut new_uid = lb_service();
    new_uid.metadata.uid = Some("u2".into());
    assert!(needs_update(&base, &new_uid));

    // Not triggers: selector, labels, status, finalizers; and non-LB on both sides.
    let mut same = with_spec(|s| s.selector = Some([("app".to_owned(), "v2".to_owned())].into()));
    same.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
    same.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert!(!needs_update(&base, &same));
    let a = with_spec(|s| s.type_ = Some("ClusterIP".into()));
    let b = with_spec(|s| {
        s.type_ = Some("ClusterIP".into());
        s.load_balancer_ip = Some("1.1.1.1".into());
    });
    assert!(!needs_update(&a, &b));
}

fn node(name: &str, label: Option<&str>, taint: bool, provider: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: label.map(|v| [(EXCLUDE_LABEL.to_owned(), v.to_owned())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider.map(str::to_owned),
            taints: taint.then(|| {
                vec![Taint {
                    key: TO_BE_DELETED_TAINT.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn exclusion_label_parsing() {
    let cases = [
        (None, true),
        (Some("true"), false),
        (Some("True"), false),
        (Some("1"), false),
        (Some("t"), false),
        (Some("false"), true),
        (Some("F"), true),
        (Some("0"), true),
        (Some(""), false),
        (Some("yes"), false),
        (Some("nope"), false),
    ];
    for (value, included) in cases {
        assert_eq!(
            node_included(&node("n", value, false, None)),
            included,
            "{value:?}"
        );
    }
}

#[test]
fn node_predicates_and_sync_triggers() {
    let plain = node("a", None, false, Some("p1"));
    assert!(node_in_stable_set(&plain));
    assert!(!node_in_stable_set(&node("a", None, true, Some("p1"))));
    assert!(!node_in_stable_set(&node(
        "a",
        Some("true"),
        false,
        Some("p1")
    )));
    let mut deleting = plain.clone();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(!node_in_stable_set(&deleting));

    // Taint alone: no sync. Label flip or providerID change: sync.
    assert!(!should_sync_updated_node(
        &plain,
        &node("a", None, true, Some("p1"))
    ));
    assert!(should_sync_updated_node(
        &plain,
        &node("a", Some(""), false, Some("p1"))
    ));
    assert!(!should_sync_updated_node(
        &plain,
        &node("a", Some("false"), false, Some("p1"))
    ));
    assert!(should_sync_updated_node(
        &plain,
        &node("a", None, false, Some("p2"))
    ));

    let set1 = vec![
        node("a", None, false, Some("p1")),
        node("b", None, false, None),
    ];
    let set2 = vec![
        node("b", None, true, None),
        node("a", None, false, Some("p1")),
    ];
    assert!(nodes_sufficiently_equal(&set1, &set2));
    let set3 = vec![
        node("a", None, false, Some("p9")),
        node("b", None, false, None),
    ];
    assert!(!nodes_sufficiently_equal(&set1, &set3));
    assert!(!nodes_sufficiently_equal(&set1, &set1[..1]));
}

#[test]
fn ingress_comparison() {
    let ing = |ip: Option<&str>, host: Option<&str>, mode: Option<&str>| LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: ip.map(str::to_owned),
            hostname: host.map(str::to_owned),
            ip_mode: mode.map(str::to_owned),
            ..Default::default()
        }]),
    };
    let vip = ing(Some("1.2.3.4"), None, Some("VIP"));
    assert!(lb_status_equal(
        &vip,
        &ing(Some("1.2.3.4"), None, Some("VIP"))
    ));
    assert!(!lb_status_equal(
        &vip,
        &ing(Some("1.2.3.5"), None, Some("VIP"))
    ));
    assert!(!lb_status_equal(
        &vip,
        &ing(Some("1.2.3.4"), None, Some("Proxy"))
    ));
    assert!(!lb_status_equal(&vip, &ing(Some("1.2.3.4"), None, None)));
    assert!(!lb_status_equal(
        &vip,
        &ing(Some("1.2.3.4"), Some("h"), Some("VIP"))
    ));
    let empty = LoadBalancerStatus::default();
    assert!(lb_status_equal(
        &empty,
        &LoadBalancerStatus {
            ingress: Some(vec![])
        }
    ));
    assert!(!lb_status_equal(&empty, &vip));
}

/// A cloud that is never called (the test only records events).
struct NoCloud;

impl LoadBalancer for NoCloud {
    async fn get_load_balancer(
        &self,
        _: &str,
        _: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        Err(LbError::Other("not called".into()))
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        _: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        Err(LbError::Other("not called".into()))
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, _: &[Node]) -> Result<(), LbError> {
        Err(LbError::Other("not called".into()))
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<(), LbError> {
        Err(LbError::Other("not called".into()))
    }
}

#[tokio::test]
async fn events_are_queued_in_order_without_waiting_for_the_api_server() {
    // Nothing listens on this address: a sync must not wait for the Event write.
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static uri"));
    let client = Client::try_from(config).expect("client from static config");
    let ctl = ServiceController::new(
        client,
        Arc::new(NoCloud),
        ServiceControllerOptions {
            cluster_name: "c".into(),
            workers: 1,
            forget_finalizer: false,
            retry_without_backoff: false,
            drop_failed_deletes: false,
        },
    );
    let svc = lb_service();
    ctl.event(
        &svc,
        EventType::Normal,
        "EnsuringLoadBalancer",
        "Ensuring load balancer",
    )
    .await;
    ctl.event(
        &svc,
        EventType::Normal,
        "EnsuredLoadBalancer",
        "Ensured load balancer",
    )
    .await;
    let mut rx = ctl
        .events_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("receiver not taken yet");
    let reasons: Vec<Option<String>> = [rx.try_recv(), rx.try_recv()]
        .into_iter()
        .map(|e| e.ok().and_then(|e| e.reason))
        .collect();
    assert_eq!(
        reasons,
        vec![
            Some("EnsuringLoadBalancer".to_owned()),
            Some("EnsuredLoadBalancer".to_owned())
        ]
    );
    assert!(rx.try_recv().is_err());
}
