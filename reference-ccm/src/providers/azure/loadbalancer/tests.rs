//! Unit tests of the Azure load balancer ([`super`]): names, probes and rules, their
//! comparison with what ARM answers, refused Services. Apart so that the load balancer
//! stays under 1,200 lines.

use super::*;

fn svc(annotations: Value, spec: Value) -> Service {
    let mut s = json!({"type": "LoadBalancer",
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                  {"port": 53, "nodePort": 30053, "protocol": "UDP"}]});
    if let (Some(o), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            o.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "prod",
                     "uid": "3a0fb0c4-8a0e-4c2b-9f0a-2b9a5ad3b4c1", "annotations": annotations},
        "spec": s
    }))
    .unwrap_or_default()
}

#[test]
fn names_follow_upstream() {
    let s = svc(json!({}), json!({}));
    // DefaultLoadBalancerName cuts `a` + 32 hex digits to 32 characters.
    assert_eq!(default_lb_name(&s), "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c");
    assert_eq!(
        rule_name(&s, "TCP", 80, false),
        "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-80"
    );
    assert_eq!(
        pip_name("kubernetes", &s, false),
        "kubernetes-a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c"
    );
    let dual = svc(json!({}), json!({"ipFamilies": ["IPv4", "IPv6"]}));
    assert_eq!(
        rule_name(&dual, "UDP", 53, true),
        "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-UDP-53-IPv6"
    );
    assert_eq!(
        rule_name(&dual, "UDP", 53, false),
        "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-UDP-53"
    );
    assert_eq!(pip_name(&"c".repeat(100), &s, false).len(), 75);
    assert_eq!(service_key(&s), "prod/web");
    assert!(!is_internal(&s));
    assert!(is_internal(&svc(
        json!({ANNOTATION_INTERNAL: "True"}),
        json!({})
    )));
    assert_eq!(
        nic_path_of("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-1/ipConfigurations/ipconfig1").as_deref(),
        Some("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-1")
    );
}

#[test]
fn cluster_policy_probes_per_tcp_port() {
    let s = svc(json!({}), json!({}));
    let (probes, rules) =
        expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", false).expect("ok");
    assert_eq!(probes.len(), 1, "UDP gets no probe");
    assert_eq!(
        probes[0]["properties"],
        json!({"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5, "probeThreshold": 2})
    );
    assert_eq!(
        rules[0]["properties"]["probe"]["id"],
        "/lb/probes/a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-80"
    );
    assert_eq!(rules[0]["properties"]["backendPort"], 80);
    assert_eq!(rules[0]["properties"]["enableFloatingIP"], true);
    assert_eq!(rules[0]["properties"]["enableTcpReset"], true);
    assert_eq!(rules[0]["properties"]["idleTimeoutInMinutes"], 4);
    assert_eq!(rules[1]["properties"]["protocol"], "Udp");
    assert!(rules[1]["properties"].get("probe").is_none());
    assert!(rules[1]["properties"].get("enableTcpReset").is_none());
}

#[test]
fn local_policy_uses_the_health_check_port() {
    let s = svc(
        json!({}),
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    );
    let (probes, rules) =
        expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", false).expect("ok");
    assert_eq!(probes.len(), 1);
    assert_eq!(
        probes[0]["name"],
        "a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-32000"
    );
    assert_eq!(probes[0]["properties"]["protocol"], "Http");
    assert_eq!(probes[0]["properties"]["requestPath"], "/healthz");
    for r in &rules {
        assert_eq!(
            r["properties"]["probe"]["id"],
            "/lb/probes/a3a0fb0c48a0e4c2b9f0a2b9a5ad3b4c-TCP-32000"
        );
    }
}

#[test]
fn annotations_change_rules_and_probes() {
    let s = svc(
        json!({ANNOTATION_DISABLE_FLOATING_IP: "true", ANNOTATION_IDLE_TIMEOUT: "30",
               ANNOTATION_PROBE_PROTOCOL: "http", ANNOTATION_DISABLE_TCP_RESET: "true"}),
        json!({"sessionAffinity": "ClientIP"}),
    );
    let (probes, rules) = expected_probes_and_rules(&s, "/lb", "/lb/f", "/lb/p", true).expect("ok");
    assert_eq!(probes[0]["properties"]["protocol"], "Http");
    assert_eq!(probes[0]["properties"]["requestPath"], "/");
    let r = &rules[0]["properties"];
    assert_eq!(r["backendPort"], 30080);
    assert_eq!(r["enableFloatingIP"], false);
    assert_eq!(r["idleTimeoutInMinutes"], 30);
    assert_eq!(r["enableTcpReset"], false);
    assert_eq!(r["loadDistribution"], "SourceIP");
    assert_eq!(r["disableOutboundSnat"], true);
    let bad = svc(json!({ANNOTATION_IDLE_TIMEOUT: "2"}), json!({}));
    assert!(expected_probes_and_rules(&bad, "/lb", "/f", "/p", false).is_err());
}

#[test]
fn matching_ignores_what_arm_adds() {
    let s = svc(json!({}), json!({}));
    let (probes, rules) =
        expected_probes_and_rules(&s, "/LB", "/LB/f", "/LB/p", false).expect("ok");
    let mut stored = rules[0].clone();
    stored["id"] = json!("/LB/loadBalancingRules/x");
    stored["etag"] = json!("W/\"1\"");
    stored["properties"]["provisioningState"] = json!("Succeeded");
    stored["properties"]["frontendIPConfiguration"]["id"] = json!("/lb/F");
    assert!(rule_matches(&stored, &rules[0]));
    stored["properties"]["backendPort"] = json!(81);
    assert!(!rule_matches(&stored, &rules[0]));
    let mut probe = probes[0].clone();
    probe["properties"]["provisioningState"] = json!("Succeeded");
    assert!(probe_matches(&probe, &probes[0]));
    // An unchanged list is not dirty; a foreign rule is kept.
    let mut list = vec![
        json!({"name": "other-TCP-1"}),
        rules[0].clone(),
        rules[1].clone(),
    ];
    assert!(!reconcile_list(&mut list, &rules, &s, rule_matches));
    assert!(reconcile_list(&mut list, &rules[..1], &s, rule_matches));
    assert_eq!(list.len(), 2);
}

#[test]
fn unsupported_services_get_clear_errors() {
    assert!(
        matches!(check_supported(&svc(json!({}), json!({"ipFamilies": ["IPv6"]}))), Err(LbError::Other(m)) if m.contains("IPv6"))
    );
    assert!(
        matches!(check_supported(&svc(json!({}), json!({"loadBalancerIP": "1.2.3.4"}))), Err(LbError::Other(m)) if m.contains("user-assigned"))
    );
    assert!(
        check_supported(&svc(
            json!({ANNOTATION_INTERNAL: "true"}),
            json!({"loadBalancerIP": "10.0.0.9"})
        ))
        .is_ok()
    );
}
