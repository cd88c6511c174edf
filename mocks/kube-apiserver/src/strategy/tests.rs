//! Unit tests of the per-kind rules: defaults, status isolation, generation, validation
//! and allocated values.
//!
//! Why this exists: the tests are kept in a file of their own, beside the code, so that
//! the module they test stays short enough to read in one go.

use super::pods::image_pulls_always;
use super::*;

#[test]
fn qos_classes_follow_requests_and_limits() {
    let pod = |resources: Value| json!({"containers": [{"name": "c", "resources": resources}]});
    assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
    assert_eq!(
        qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "1000m", "memory": "1024Mi"}}))),
        "Guaranteed"
    );
    assert_eq!(
        qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
        "Guaranteed",
        "requests default to limits"
    );
    assert_eq!(
        qos_class(&pod(json!({"requests": {"cpu": "100m"}}))),
        "Burstable"
    );
    assert_eq!(
        qos_class(&pod(json!({"limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "1", "memory": "1Gi"}}))),
        "Burstable"
    );
}

#[test]
fn pod_specs_change_only_where_upstream_allows() {
    let old = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a:1"}]}});
    let mut causes = Vec::new();
    let image = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a:2"}],
        "activeDeadlineSeconds": 5}});
    validate_pod_update(&old, &image, &mut causes);
    assert!(causes.is_empty(), "{causes:?}");
    let moved = json!({"spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "a:1"}]}});
    validate_pod_update(&old, &moved, &mut causes);
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "spec");
    assert!(
        causes[0].message.contains("changed: nodeName"),
        "{}",
        causes[0].message
    );
}
use crate::resources::lookup;

#[test]
fn a_service_that_stops_being_a_load_balancer_loses_its_ingress() {
    let svc = lookup("", "v1", "services").expect("services");
    let old = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "allocateLoadBalancerNodePorts": true},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
    let mut new = json!({"spec": {"type": "ClusterIP", "externalTrafficPolicy": "Local",
        "allocateLoadBalancerNodePorts": true}});
    prepare_update(svc, Subresource::Main, &old, &mut new);
    assert_eq!(new["status"], json!({"loadBalancer": {}}));
    assert!(new["spec"].get("externalTrafficPolicy").is_none(), "{new}");
    assert!(
        new["spec"].get("allocateLoadBalancerNodePorts").is_none(),
        "{new}"
    );
    // A status write to a LoadBalancer defaults the ingress' ipMode.
    let mut status = json!({"spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"}]}}});
    prepare_update(svc, Subresource::Status, &old, &mut status);
    assert_eq!(
        status["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "1.2.3.4", "ipMode": "VIP"}, {"hostname": "h"}])
    );
    let mut still = json!({"spec": {"type": "LoadBalancer"}});
    prepare_update(svc, Subresource::Main, &old, &mut still);
    assert_eq!(still["status"], old["status"]);
}

#[test]
fn workload_templates_get_pod_defaults() {
    let desc = lookup("apps", "v1", "daemonsets").expect("daemonsets");
    let mut ds = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "i:latest", "ports": [{"containerPort": 80}]},
                       {"name": "d", "image": "reg:5000/i"}],
        "initContainers": [{"name": "e", "image": "x:1", "imagePullPolicy": "Never"}]}}}});
    apply_defaults(desc, &mut ds);
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(pod["containers"][1]["imagePullPolicy"], "Always");
    assert_eq!(pod["containers"][1]["terminationMessagePolicy"], "File");
    assert_eq!(pod["initContainers"][0]["imagePullPolicy"], "Never");
    assert!(image_pulls_always("nginx"));
    assert!(!image_pulls_always("nginx:1.27"));
    assert!(!image_pulls_always("nginx@sha256:abc"));
}

#[test]
fn micro_times_read_back_in_utc_with_six_digits() {
    assert_eq!(
        micro_time("2026-01-01T00:00:00.000000+00:00").as_deref(),
        Some("2026-01-01T00:00:00.000000Z")
    );
    assert_eq!(
        micro_time("2026-01-01T02:00:00.5+02:00").as_deref(),
        Some("2026-01-01T00:00:00.500000Z")
    );
    assert_eq!(micro_time("yesterday"), None);
    let desc = lookup("coordination.k8s.io", "v1", "leases").expect("leases");
    let mut lease = json!({"spec": {"renewTime": "2026-01-01T00:00:10.000000+00:00",
        "holderIdentity": "a"}});
    apply_defaults(desc, &mut lease);
    assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:10.000000Z");
}

#[test]
fn namespaces_carry_their_name_label_and_service_ports_their_defaults_on_update() {
    let ns = lookup("", "v1", "namespaces").expect("namespaces");
    let mut obj = json!({"metadata": {"name": "diff", "labels": {"a": "b",
        "kubernetes.io/metadata.name": "other"}}});
    apply_defaults(ns, &mut obj);
    assert_eq!(
        obj["metadata"]["labels"],
        json!({"a": "b", "kubernetes.io/metadata.name": "diff"})
    );
    let svc = lookup("", "v1", "services").expect("services");
    let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5",
        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}});
    let mut new = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5",
        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"name": "b", "port": 8443}]}});
    prepare_update(svc, Subresource::Main, &old, &mut new);
    assert_eq!(
        new["spec"]["ports"][1],
        json!({"name": "b", "port": 8443,
        "protocol": "TCP", "targetPort": 8443})
    );
}

#[test]
fn secret_string_data_is_folded_into_data() {
    let secrets = lookup("", "v1", "secrets").expect("secrets");
    let mut obj = json!({
        "metadata": {"name": "s"},
        "data": {"a": "b2xk", "keep": "eA=="},
        "stringData": {"a": "new", "host.username": "user"}
    });
    prepare_create(secrets, &mut obj);
    assert_eq!(
        obj,
        json!({
            "metadata": {"name": "s"},
            "data": {"a": "bmV3", "keep": "eA==", "host.username": "dXNlcg=="},
            "type": "Opaque"
        })
    );
    // Updates too; without `data` it is created.
    let mut new = json!({"metadata": {"name": "s"}, "stringData": {"k": ""}, "type": "x"});
    prepare_update(secrets, Subresource::Main, &obj, &mut new);
    assert_eq!(
        new,
        json!({"metadata": {"name": "s"}, "data": {"k": ""}, "type": "x"})
    );
    // Other kinds keep a field of that name.
    let maps = lookup("", "v1", "configmaps").expect("configmaps");
    let mut cm = json!({"stringData": {"k": "v"}});
    prepare_create(maps, &mut cm);
    assert_eq!(cm, json!({"stringData": {"k": "v"}}));
}

#[test]
fn workload_defaults_generation_and_status() {
    let deploy = lookup("apps", "v1", "deployments").expect("deployments");
    let mut obj = json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c"}]}},
                 "strategy": {}},
        "status": {"replicas": 9},
    });
    prepare_create(deploy, &mut obj);
    assert_eq!(obj["metadata"]["generation"], 1);
    assert_eq!(obj["status"], json!({}));
    assert_eq!(obj["spec"]["replicas"], 1);
    assert_eq!(obj["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(obj["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(
        obj["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert!(validate_create(deploy, &obj).is_empty());

    // A Recreate strategy gets no rolling-update parameters.
    let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}});
    prepare_create(deploy, &mut recreate);
    assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(recreate["spec"]["replicas"], 0);

    // Spec and annotation changes bump the generation; label and status changes do not.
    let mut same = obj.clone();
    same["metadata"]["labels"] = json!({"x": "y"});
    update_generation(deploy, Subresource::Main, &obj, &mut same);
    assert_eq!(same["metadata"]["generation"], 1);
    let mut annotated = obj.clone();
    annotated["metadata"]["annotations"] = json!({});
    update_generation(deploy, Subresource::Main, &obj, &mut annotated);
    assert_eq!(annotated["metadata"]["generation"], 1);
    annotated["metadata"]["annotations"] = json!({"a": "b"});
    update_generation(deploy, Subresource::Main, &obj, &mut annotated);
    assert_eq!(annotated["metadata"]["generation"], 2);
    let mut scaled = obj.clone();
    scaled["spec"]["replicas"] = json!(3);
    update_generation(deploy, Subresource::Status, &obj, &mut scaled);
    assert_eq!(scaled["metadata"]["generation"], 1);
    update_generation(deploy, Subresource::Main, &obj, &mut scaled);
    assert_eq!(scaled["metadata"]["generation"], 2);

    // /status keeps spec and labels; the main resource keeps status.
    let mut status = obj.clone();
    status["spec"]["replicas"] = json!(5);
    status["metadata"]["labels"] = json!({"new": "label"});
    status["status"] = json!({"readyReplicas": 1});
    prepare_update(deploy, Subresource::Status, &obj, &mut status);
    assert_eq!(status["spec"]["replicas"], 1);
    assert_eq!(status["metadata"].get("labels"), None);
    assert_eq!(status["status"]["readyReplicas"], 1);
    let mut main = obj.clone();
    main["status"] = json!({"readyReplicas": 1});
    prepare_update(deploy, Subresource::Main, &obj, &mut main);
    assert_eq!(main["status"], json!({}));

    let ds = lookup("apps", "v1", "daemonsets").expect("daemonsets");
    let mut obj = json!({"spec": {}});
    prepare_create(ds, &mut obj);
    assert_eq!(
        obj["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(obj["status"]["numberReady"], 0);
    assert_eq!(obj["metadata"]["generation"], 1);
    let mut annotated = obj.clone();
    annotated["metadata"]["annotations"] = json!({"a": "b"});
    update_generation(ds, Subresource::Main, &obj, &mut annotated);
    assert_eq!(annotated["metadata"]["generation"], 1);
}

#[test]
fn workload_validation() {
    let deploy = lookup("apps", "v1", "deployments").expect("deployments");
    let fields =
        |causes: Vec<Cause>| -> Vec<String> { causes.into_iter().map(|c| c.field).collect() };
    assert_eq!(
        fields(validate_create(deploy, &json!({"spec": {}}))),
        [
            "spec.selector",
            "spec.template.metadata.labels",
            "spec.template.spec.containers"
        ]
    );
    let mismatch = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{}]}}}});
    let causes = validate_create(deploy, &mismatch);
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0].message,
        r#"Invalid value: {"app":"b"}: `selector` does not match template `labels`"#
    );
    let empty = json!({"spec": {"selector": {}, "template": {"spec": {"containers": [{}]}}}});
    assert_eq!(fields(validate_create(deploy, &empty)), ["spec.selector"]);
    let bad_op = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Is"}]},
        "template": {"spec": {"containers": [{}]}}}});
    assert_eq!(fields(validate_create(deploy, &bad_op)), ["spec.selector"]);

    // The selector is immutable.
    let ok = json!({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{}]}}}});
    assert!(validate_create(deploy, &ok).is_empty());
    let mut moved = ok.clone();
    moved["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    let causes = validate_update(deploy, &ok, &moved);
    assert_eq!(causes.len(), 1);
    assert!(
        causes[0].message.ends_with("field is immutable"),
        "{causes:?}"
    );

    // A DaemonSet without a selector matches no template.
    let ds = lookup("apps", "v1", "daemonsets").expect("daemonsets");
    assert_eq!(
        fields(validate_create(
            ds,
            &json!({"spec": {"template": {"spec": {"containers": [{}]}}}})
        )),
        ["spec.template.metadata.labels"]
    );
}

#[test]
fn rbac_defaults_and_validation() {
    let rbac = "rbac.authorization.k8s.io";
    let crb = lookup(rbac, "v1", "clusterrolebindings").expect("crb");
    let mut obj = json!({
        "roleRef": {"kind": "ClusterRole", "name": "system:ccm"},
        "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system"},
                     {"kind": "User", "name": "u"}],
    });
    prepare_create(crb, &mut obj);
    assert_eq!(obj["roleRef"]["apiGroup"], rbac);
    assert_eq!(obj["subjects"][0].get("apiGroup"), None);
    assert_eq!(obj["subjects"][1]["apiGroup"], rbac);
    assert!(validate_create(crb, &obj).is_empty());
    assert!(obj["metadata"].get("generation").is_none());

    let bad = json!({"roleRef": {"apiGroup": rbac, "kind": "Role", "name": ""},
                     "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name"}, {"kind": "Robot", "name": "r"}]});
    let causes = validate_create(crb, &bad);
    let summary: Vec<(&str, &str)> = causes
        .iter()
        .map(|c| (c.field.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("roleRef.kind", "FieldValueNotSupported"),
            ("roleRef.name", "FieldValueRequired"),
            ("subjects[0].name", "FieldValueInvalid"),
            ("subjects[0].namespace", "FieldValueRequired"),
            ("subjects[1].kind", "FieldValueNotSupported"),
        ]
    );
    assert_eq!(
        causes[0].message,
        r#"Unsupported value: "Role": supported values: "ClusterRole""#
    );
    // A RoleBinding may name a Role, and its service accounts need no namespace.
    let rb = lookup(rbac, "v1", "rolebindings").expect("rb");
    let mut ok = json!({"roleRef": {"kind": "Role", "name": "extension-apiserver-authentication-reader"},
                        "subjects": [{"kind": "ServiceAccount", "name": "ccm"}]});
    prepare_create(rb, &mut ok);
    assert!(validate_create(rb, &ok).is_empty());
    let mut changed = ok.clone();
    changed["roleRef"]["name"] = json!("other");
    assert_eq!(validate_update(rb, &ok, &changed).len(), 1);

    let cr = lookup(rbac, "v1", "clusterroles").expect("cr");
    let rules = json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]},
                                 {"verbs": [], "nonResourceURLs": ["/healthz"]},
                                 {"verbs": ["get"]}]});
    let fields: Vec<String> = validate_create(cr, &rules)
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        ["rules[1].verbs", "rules[2].apiGroups", "rules[2].resources"]
    );
    let role = lookup(rbac, "v1", "roles").expect("roles");
    let urls = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
    assert_eq!(validate_create(role, &urls).len(), 1);
    assert!(validate_create(cr, &urls).is_empty());
}

#[test]
fn service_account_secret_references_keep_only_names() {
    let sa = lookup("", "v1", "serviceaccounts").expect("serviceaccounts");
    let mut obj = json!({"secrets": [{"name": "s", "namespace": "x", "uid": "u"}]});
    prepare_create(sa, &mut obj);
    assert_eq!(obj["secrets"], json!([{"name": "s"}]));
    assert!(obj.get("metadata").is_none());
}

#[test]
fn node_status_isolation() {
    let nodes = lookup("", "v1", "nodes").expect("nodes");
    let old = json!({"spec": {"podCIDR": "a"}, "status": {"phase": "x"}});
    let mut main = json!({"spec": {"podCIDR": "b"}, "status": {"phase": "y"}});
    prepare_update(nodes, Subresource::Main, &old, &mut main);
    assert_eq!(
        main,
        json!({"spec": {"podCIDR": "b"}, "status": {"phase": "x"}})
    );
    let mut status = json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "y"}});
    prepare_update(nodes, Subresource::Status, &old, &mut status);
    assert_eq!(status["metadata"], json!({"labels": {"a": "b"}}));
    assert_eq!(status["spec"], json!({"podCIDR": "a"}));
    assert_eq!(status["status"]["phase"], "y");
    // The Go zero values of NodeStatus's structs, as kube-apiserver writes them.
    assert_eq!(
        status["status"]["daemonEndpoints"],
        json!({"kubeletEndpoint": {"Port": 0}})
    );
    assert_eq!(status["status"]["nodeInfo"]["kubeletVersion"], "");
}

#[test]
fn provider_id_is_immutable_once_set() {
    let nodes = lookup("", "v1", "nodes").expect("nodes");
    let empty = json!({"spec": {}});
    let set = json!({"spec": {"providerID": "openstack:///1"}});
    let other = json!({"spec": {"providerID": "openstack:///2"}});
    assert!(validate_update(nodes, &empty, &set).is_empty());
    assert!(validate_update(nodes, &set, &set).is_empty());
    assert_eq!(validate_update(nodes, &set, &other).len(), 1);
}

#[test]
fn service_defaults() {
    let svc = lookup("", "v1", "services").expect("services");
    let mut obj =
        json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}, "status": {"x": 1}});
    prepare_create(svc, &mut obj);
    assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(obj["spec"]["ports"][0]["targetPort"], 80);
    assert_eq!(obj["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(obj["status"], json!({"loadBalancer": {}}));
}

#[test]
fn allocated_values_survive_updates_that_omit_them() {
    let svc = lookup("", "v1", "services").expect("services");
    let old = json!({"spec": {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "healthCheckNodePort": 31000,
        "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                  {"name": "https", "port": 443, "nodePort": 30443}],
    }});
    let mut new = json!({"spec": {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "",
        // `https` now explicitly uses http's old node port, so http cannot get it back.
        "ports": [{"name": "http", "port": 8080},
                  {"name": "https", "port": 443, "nodePort": 30080},
                  {"name": "new", "port": 9}],
    }});
    patch_allocated_values(svc, &old, &mut new);
    assert_eq!(new["spec"]["clusterIP"], "10.0.0.7");
    assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.7"]));
    assert_eq!(new["spec"]["healthCheckNodePort"], 31000);
    assert_eq!(new["spec"]["ports"][0].get("nodePort"), None);
    assert_eq!(new["spec"]["ports"][1]["nodePort"], 30080);
    assert_eq!(new["spec"]["ports"][2].get("nodePort"), None);
    assert!(validate_update(svc, &old, &new).is_empty());

    // Switching to ExternalName or ClusterIP needs neither IP nor node ports kept.
    let mut external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
    patch_allocated_values(svc, &old, &mut external);
    assert_eq!(external["spec"].get("clusterIP"), None);
    let mut cluster_ip =
        json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}]}});
    patch_allocated_values(svc, &old, &mut cluster_ip);
    assert_eq!(cluster_ip["spec"]["clusterIP"], "10.0.0.7");
    assert_eq!(cluster_ip["spec"]["ports"][0].get("nodePort"), None);
    assert_eq!(cluster_ip["spec"].get("healthCheckNodePort"), None);
}
