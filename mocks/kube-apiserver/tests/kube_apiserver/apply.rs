//! Server-side apply, field ownership and Service updates, driven by real clients:
//! the axum router directly, kube-rs `Patch::Apply`, kube-lease-manager (which
//! elects leaders with non-forced applies) and `kubectl apply --server-side`.

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use mock_kube_apiserver::{ApiServer, AppState, Config, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const DEADLINE: Duration = Duration::from_secs(30);

async fn start() -> (ApiServer, Client) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("start server");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kube config");
    let client = Client::try_from(cfg).expect("client");
    (server, client)
}

fn api_error(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `(manager, operation)` of every managedFields entry.
fn managers<K: ResourceExt>(obj: &K) -> Vec<(String, String)> {
    obj.managed_fields()
        .iter()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    ct: &str,
    body: &str,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, ct)
        .header(
            header::USER_AGENT,
            "kubectl/v1.34.0 (linux/amd64) kubernetes/abc",
        )
        .body(Body::from(body.to_string()))
        .expect("request");
    let resp = app.clone().oneshot(request).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

const APPLY: &str = "application/apply-patch+yaml";

#[tokio::test]
async fn apply_options_and_bodies_through_the_router() {
    let app = router(AppState::new(&Config::default()));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
        .to_string();
    let uri = "/api/v1/namespaces/default/configmaps/c";

    // fieldManager is required for apply (ValidatePatchOptions).
    let (s, v) = send(&app, "PATCH", uri, APPLY, &cm).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(
        v["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    // force is for apply only.
    let (s, v) = send(
        &app,
        "PATCH",
        &format!("{uri}?force=true"),
        "application/merge-patch+json",
        "{}",
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "force");
    // A YAML body is decoded like a JSON one (upstream's YAML-or-JSON decoder)...
    let (s, v) = send(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/from-yaml?fieldManager=m",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  from: yaml\n",
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["data"]["from"], "yaml", "{v}");
    // ...and YAML that does not parse is a 400, not a 500 or a panic.
    let (s, v) = send(
        &app,
        "PATCH",
        &format!("{uri}?fieldManager=m"),
        APPLY,
        "apiVersion: v1\nkind: [ConfigMap\n",
    )
    .await;
    assert_eq!(
        (s, &v["reason"]),
        (StatusCode::BAD_REQUEST, &json!("BadRequest")),
        "{v}"
    );

    // Create if missing: 201, then 200.
    let (s, v) = send(&app, "PATCH", &format!("{uri}?fieldManager=m"), APPLY, &cm).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "m");
    assert_eq!(v["metadata"]["managedFields"][0]["operation"], "Apply");
    assert_eq!(v["metadata"]["managedFields"][0]["fieldsType"], "FieldsV1");
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    let rv = v["metadata"]["resourceVersion"].clone();
    // Re-applying the same configuration is a no-op: same resourceVersion.
    let (s, v) = send(&app, "PATCH", &format!("{uri}?fieldManager=m"), APPLY, &cm).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["metadata"]["resourceVersion"], rv);

    // A merge patch records an Update by the User-Agent's product name and takes the
    // field it changes.
    let (s, v) = send(
        &app,
        "PATCH",
        uri,
        "application/merge-patch+json",
        r#"{"data":{"a":"2"}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let entries = v["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 1, "{v}");
    assert_eq!(entries[0]["manager"], "kubectl");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "v1");
    assert!(
        entries[0]["time"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    // So the applier now conflicts with it.
    let (s, v) = send(&app, "PATCH", &format!("{uri}?fieldManager=m"), APPLY, &cm).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    // No time after the manager: kube-apiserver v1.37.2 prints none (the differential
    // corpus, tests/differential/corpus.json, found the difference).
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .data.a"
    );
    assert_eq!(v["details"]["causes"][0]["reason"], "FieldManagerConflict");
    assert_eq!(v["details"]["causes"][0]["field"], ".data.a");
}

fn config_map(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data})
}

#[tokio::test]
async fn kube_rs_patch_apply() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let as_a = PatchParams::apply("manager-a");
    let as_b = PatchParams::apply("manager-b");

    // Create if missing.
    let created = cms
        .patch(
            "cfg",
            &as_a,
            &Patch::Apply(config_map(json!({"x": "1", "y": "2"}))),
        )
        .await
        .expect("apply creates");
    assert_eq!(created.data.as_ref().map(|d| d.len()), Some(2));
    assert_eq!(managers(&created), [("manager-a".into(), "Apply".into())]);

    // Another manager changing a field it does not own: 409 Conflict, nothing stored.
    let err = cms
        .patch(
            "cfg",
            &as_b,
            &Patch::Apply(config_map(json!({"x": "changed"}))),
        )
        .await
        .expect_err("conflict");
    let status = api_error(err);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"manager-a\": .data.x"
    );
    assert_eq!(
        cms.get("cfg")
            .await
            .expect("get")
            .data
            .and_then(|d| d.get("x").cloned()),
        Some("1".into())
    );

    // Forced, ownership moves to b.
    let forced = cms
        .patch(
            "cfg",
            &as_b.clone().force(),
            &Patch::Apply(config_map(json!({"x": "changed"}))),
        )
        .await
        .expect("forced apply");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("x"))
            .map(String::as_str),
        Some("changed")
    );
    assert_eq!(
        managers(&forced),
        [
            ("manager-a".into(), "Apply".into()),
            ("manager-b".into(), "Apply".into())
        ]
    );

    // Pruning: a drops y (which only a owns) and x (now b's): y goes, x stays.
    let pruned = cms
        .patch("cfg", &as_a, &Patch::Apply(config_map(json!({"z": "3"}))))
        .await
        .expect("prune");
    let data = pruned.data.unwrap_or_default();
    assert_eq!(
        data.into_iter().collect::<Vec<_>>(),
        [
            ("x".to_string(), "changed".to_string()),
            ("z".into(), "3".into())
        ]
    );
}

#[tokio::test]
async fn service_replace_keeps_allocated_values() {
    let (_server, client) = start().await;
    let svcs: Api<Service> = Api::namespaced(client, "default");
    let spec = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                      "ports": [{"name": "http", "port": 80}], "selector": {"app": "a"}});
    let created = svcs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).expect("svc"),
        )
        .await
        .expect("create");
    let allocated = created.spec.clone().expect("spec");
    assert!(
        allocated
            .cluster_ip
            .as_deref()
            .is_some_and(|ip| !ip.is_empty())
    );
    assert!(allocated.health_check_node_port.is_some());
    // A replace whose spec leaves the allocated values out, as `kubectl replace -f`
    // of the original manifest does.
    let mut replacement: Service = serde_json::from_value(json!({
        "metadata": {"name": "s", "resourceVersion": created.resource_version()},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "ports": [{"name": "http", "port": 80}], "selector": {"app": "b"}},
    }))
    .expect("svc");
    replacement.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    let replaced = svcs
        .replace("s", &PostParams::default(), &replacement)
        .await
        .expect("replace keeps allocations");
    let spec = replaced.spec.expect("spec");
    assert_eq!(spec.cluster_ip, allocated.cluster_ip);
    assert_eq!(spec.cluster_ips, allocated.cluster_ips);
    assert_eq!(
        spec.health_check_node_port,
        allocated.health_check_node_port
    );
    let node_port =
        |s: &k8s_openapi::api::core::v1::ServiceSpec| s.ports.as_ref().and_then(|p| p[0].node_port);
    assert_eq!(node_port(&spec), node_port(&allocated));
    assert_eq!(
        spec.selector.and_then(|s| s.get("app").cloned()),
        Some("b".into())
    );
    // Changing the cluster IP is still refused.
    let mut bad = replaced.metadata.clone();
    bad.managed_fields = None;
    let err = svcs
        .replace(
            "s",
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "s", "resourceVersion": bad.resource_version},
                "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.250",
                         "ports": [{"name": "http", "port": 80}]},
            }))
            .expect("svc"),
        )
        .await
        .expect_err("immutable");
    assert_eq!(api_error(err).code, 422);
}

/// The exchange kube-lease-manager relies on, step by step: acquiring an orphaned
/// lease is a non-forced apply, so the second candidate gets a 409; a release is a
/// strategic patch of nulls, after which the fields are nobody's.
#[tokio::test]
async fn lease_acquire_conflicts_and_release() {
    let (_server, client) = start().await;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {}})).expect("lease"),
        )
        .await
        .expect("create");
    let acquire = |who: &str| {
        Patch::Apply(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "spec": {"holderIdentity": who, "leaseDurationSeconds": 15,
                     "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z"},
        }))
    };
    let params = |who: &str| PatchParams {
        field_manager: Some(format!("kube-lease-manager-{who}")),
        ..PatchParams::default()
    };
    leases
        .patch("l", &params("a"), &acquire("a"))
        .await
        .expect("a acquires");
    let err = leases
        .patch("l", &params("b"), &acquire("b"))
        .await
        .expect_err("b loses");
    let status = api_error(err);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.starts_with(
            "Apply failed with 1 conflict: conflict with \"kube-lease-manager-a\": .spec.holderIdentity"
        ),
        "{}",
        status.message
    );
    let release = Patch::Strategic(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null},
    }));
    let released = leases
        .patch("l", &params("a"), &release)
        .await
        .expect("release");
    assert_eq!(holder(&released), None);
    let taken = leases
        .patch("l", &params("b"), &acquire("b"))
        .await
        .expect("b acquires");
    assert_eq!(holder(&taken).as_deref(), Some("b"));
}

/// Wait until `cond` holds on the lease, polling; fail at the deadline.
async fn lease_until(leases: &Api<Lease>, what: &str, cond: impl Fn(&Lease) -> bool) -> Lease {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(l) = leases.get_opt("leader").await.expect("get lease")
            && cond(&l)
        {
            return l;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

#[tokio::test]
async fn kube_lease_manager_elects_one_leader() {
    let (_server, client) = start().await;
    let build = |id: &str| {
        LeaseManagerBuilder::new(client.clone(), "leader")
            .with_namespace("default")
            .with_identity(id)
            .with_field_manager(format!("kube-lease-manager-{id}"))
            .with_duration(3)
            .with_grace(1)
            .build()
    };
    let a = build("a").await.expect("manager a");
    let b = build("b").await.expect("manager b");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");

    // Both race for the orphaned lease; acquiring is a non-forced apply, so the
    // loser of the race gets a 409 and stays a follower.
    let (winner, loser, won) = tokio::time::timeout(DEADLINE, async {
        tokio::select! {
            r = a.changed() => (&a, &b, ("a", r)),
            r = b.changed() => (&b, &a, ("b", r)),
        }
    })
    .await
    .expect("someone wins in time");
    let (winner_id, result) = won;
    assert!(result.expect("changed"), "{winner_id} became leader");
    let lease = lease_until(&leases, "winner holds", |l| {
        holder(l).as_deref() == Some(winner_id)
    })
    .await;
    let manager = format!("kube-lease-manager-{winner_id}");
    assert!(
        managers(&lease).contains(&(manager, "Apply".into())),
        "{:?}",
        managers(&lease)
    );

    // While the winner renews, the loser does not get the lease.
    let (w_state, l_state) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(4), winner.changed()),
        tokio::time::timeout(Duration::from_secs(4), loser.changed()),
    );
    assert!(
        w_state.is_err(),
        "the winner's state must not change: {w_state:?}"
    );
    assert!(
        l_state.is_err(),
        "the loser must not become leader: {l_state:?}"
    );
    let renewed = lease_until(&leases, "winner still holds", |l| {
        holder(l).as_deref() == Some(winner_id)
    })
    .await;
    let renew_time = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    assert_ne!(
        renew_time(&renewed),
        renew_time(&lease),
        "the winner renewed the lease"
    );

    // The winner releases; the loser takes over.
    winner.release().await.expect("release");
    assert!(
        tokio::time::timeout(DEADLINE, loser.changed())
            .await
            .expect("loser in time")
            .expect("loser"),
        "the loser becomes leader"
    );
    let loser_id = if winner_id == "a" { "b" } else { "a" };
    let lease = lease_until(&leases, "loser holds", |l| {
        holder(l).as_deref() == Some(loser_id)
    })
    .await;
    assert!(lease.spec.and_then(|s| s.lease_transitions).unwrap_or(0) >= 1);
    loser.release().await.expect("release loser");
    lease_until(&leases, "released", |l| holder(l).is_none()).await;
}

fn kubectl() -> Option<&'static str> {
    let path = "/usr/bin/kubectl";
    if Path::new(path).exists() {
        return Some(path);
    }
    eprintln!("skipping: kubectl not found at {path}");
    None
}

async fn run_kubectl(bin: &str, kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=10s")
        .args(args)
        .kill_on_drop(true);
    tokio::time::timeout(DEADLINE, cmd.output())
        .await
        .expect("kubectl finished before the deadline")
        .expect("kubectl runs")
}

#[tokio::test]
async fn kubectl_server_side_apply_and_replace() {
    let Some(bin) = kubectl() else { return };
    let (server, client) = start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifest = |name: &str, value: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  mode: {value}\n  other: kept\n"
            ),
        )
        .expect("write manifest");
        path.to_string_lossy().into_owned()
    };
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "kubectl failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mode = |cm: ConfigMap| cm.data.and_then(|d| d.get("mode").cloned());

    let first = manifest("v1.yaml", "one");
    let out = ok(run_kubectl(bin, &kubeconfig, &["apply", "--server-side", "-f", &first]).await);
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let cm = cms.get("settings").await.expect("created");
    assert_eq!(managers(&cm), [("kubectl".into(), "Apply".into())]);
    assert_eq!(mode(cm), Some("one".into()));

    let second = manifest("v2.yaml", "two");
    ok(run_kubectl(bin, &kubeconfig, &["apply", "--server-side", "-f", &second]).await);
    assert_eq!(
        mode(cms.get("settings").await.expect("get")),
        Some("two".into())
    );

    let third = manifest("v3.yaml", "three");
    let out = run_kubectl(
        bin,
        &kubeconfig,
        &[
            "apply",
            "--server-side",
            "--field-manager=intruder",
            "-f",
            &third,
        ],
    )
    .await;
    assert!(!out.status.success(), "conflicting apply must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.mode"),
        "{stderr}"
    );
    assert_eq!(
        mode(cms.get("settings").await.expect("get")),
        Some("two".into())
    );

    ok(run_kubectl(
        bin,
        &kubeconfig,
        &[
            "apply",
            "--server-side",
            "--field-manager=intruder",
            "--force-conflicts",
            "-f",
            &third,
        ],
    )
    .await);
    let cm = cms.get("settings").await.expect("get");
    assert_eq!(mode(cm.clone()), Some("three".into()));
    assert!(managers(&cm).contains(&("intruder".into(), "Apply".into())));

    // `kubectl replace` of a Service manifest without its allocated values.
    let svc = dir.path().join("svc.yaml");
    let svc_yaml = |selector: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  type: NodePort\n  selector:\n    app: {selector}\n  ports:\n  - name: http\n    port: 80\n"
        )
    };
    std::fs::write(&svc, svc_yaml("a")).expect("write");
    let svc_path = svc.to_string_lossy().into_owned();
    ok(run_kubectl(bin, &kubeconfig, &["create", "-f", &svc_path]).await);
    let svcs: Api<Service> = Api::namespaced(client, "default");
    let before = svcs.get("web").await.expect("svc").spec.expect("spec");
    std::fs::write(&svc, svc_yaml("b")).expect("write");
    let out = ok(run_kubectl(bin, &kubeconfig, &["replace", "-f", &svc_path]).await);
    assert!(out.contains("service/web replaced"), "{out}");
    let after = svcs.get("web").await.expect("svc").spec.expect("spec");
    assert_eq!(after.cluster_ip, before.cluster_ip);
    assert_eq!(
        after.ports.as_ref().and_then(|p| p[0].node_port),
        before.ports.as_ref().and_then(|p| p[0].node_port)
    );
    assert_eq!(
        after.selector.and_then(|s| s.get("app").cloned()),
        Some("b".into())
    );
}
