//! Unit tests of the target-pool load balancer ([`super`]): which Services another
//! controller owns, names and port ranges. Apart so that the load balancer stays under
//! 1,200 lines.

use super::*;

#[test]
fn rbs_services_are_implemented_elsewhere() {
    let svc = |v: serde_json::Value| -> Service { serde_json::from_value(v).unwrap() };
    assert!(!implemented_elsewhere(&svc(json!({"metadata": {}}))));
    assert!(implemented_elsewhere(&svc(json!({"metadata": {
        "annotations": {"cloud.google.com/l4-rbs": "enabled"}}}))));
    assert!(!implemented_elsewhere(&svc(json!({"metadata": {
        "annotations": {"cloud.google.com/l4-rbs": "disabled"}}}))));
    assert!(!implemented_elsewhere(&svc(json!({"metadata": {
        "annotations": {"cloud.google.com/l4-rbs": "enabled"},
        "finalizers": ["gke.networking.io/l4-netlb-v1"]}}))));
    assert!(implemented_elsewhere(&svc(json!({"metadata": {
        "finalizers": ["gke.networking.io/l4-netlb-v2"]}}))));
}

#[test]
fn names_and_ranges() {
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"uid": "11111111-2222-3333-4444-555555555555"}}),
    )
    .unwrap_or_default();
    assert_eq!(lb_name(&svc), "a1111111122223333444455555555555");
    assert_eq!(
        port_ranges(&[80, 81, 82, 443, 8080, 8080]),
        vec!["80-82", "443", "8080"]
    );
    assert_eq!(port_range(&[443, 80]), "80-443");
    assert_eq!(normalize_cidr("10.1.2.3/8"), Ok("10.0.0.0/8".to_owned()));
    assert_eq!(normalize_cidr("0.0.0.0/0"), Ok("0.0.0.0/0".to_owned()));
    assert!(normalize_cidr("10.0.0.0").is_err());
    assert_eq!(
        comparable_host_path("http://h/compute/v1/projects/p/zones/z/instances/n"),
        "/zones/z/instances/n"
    );
    assert_eq!(
        health_check_firewall_name("cid", "k8s-cid-node", true),
        "k8s-cid-node-http-hc"
    );
    assert_eq!(
        health_check_firewall_name("cid", "alb", false),
        "k8s-alb-http-hc"
    );
}
