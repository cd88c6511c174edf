//! The vSphere provider against the mock vCenter (`mock-vsphere`): TLS with the mock's CA,
//! lookup by SystemUUID / DNS name / IP, metadata with zone and region tags, power state,
//! deletion, and re-login after the session expires; credentials from a Secret (served by
//! a wiremock Kubernetes API) read only when a lookup needs them; `ipFamily` and
//! `--node-labels` in the metadata.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus, NodeSystemInfo};
use kube::api::ObjectMeta;
use mock_vsphere::{Config, PowerState, VmPatch, VsphereMock};
use reference_ccm::cloud::{CloudError, Instances};
use reference_ccm::providers::Provider;
use reference_ccm::providers::vsphere::Vsphere;
use reference_ccm::providers::vsphere::config::VsphereConfig;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config_for(mock: &VsphereMock, datacenters: &[&str]) -> VsphereConfig {
    config_with(mock, datacenters, "")
}

/// The mock's config with `extra` YAML lines in `global`; with `secret` in `extra`, the
/// file's user and password are left out.
fn config_with(mock: &VsphereMock, datacenters: &[&str], extra: &str) -> VsphereConfig {
    let ready = mock.ready_info();
    let url = ready
        .url
        .trim_start_matches("https://")
        .trim_end_matches("/sdk");
    let (host, port) = url.rsplit_once(':').expect("host:port");
    let credentials = if extra.contains("secret") {
        String::new()
    } else {
        format!(
            "  user: {}\n  password: {}\n",
            ready.username, ready.password
        )
    };
    let yaml = format!(
        "global:\n{credentials}{extra}  port: {port}\n  caFile: {}\nvcenter:\n  vc:\n    server: {host}\n    datacenters: [{}]\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n",
        ready.ca_file.as_deref().expect("ca file"),
        datacenters.join(", "),
    );
    VsphereConfig::parse(&yaml).expect("config")
}

fn node(name: &str, system_uuid: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: provider_id.map(|p| k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(p.into()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            node_info: Some(NodeSystemInfo {
                system_uuid: system_uuid.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

async fn start() -> (VsphereMock, Vsphere) {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let (cloud, _warnings) =
        Vsphere::from_config(config_for(&mock, &["DC0"]), Duration::from_secs(10))
            .await
            .expect("connect");
    (mock, cloud)
}

#[tokio::test]
async fn finds_vm_by_system_uuid_and_reports_metadata() {
    let (mock, cloud) = start().await;
    let vm = mock.admin().vms().into_iter().next().expect("a seeded VM");
    let n = node("some-other-name", &vm.uuid.to_uppercase(), None);
    assert!(cloud.instance_exists(&n).await.expect("exists"));
    assert!(!cloud.instance_shutdown(&n).await.expect("shutdown"));
    let md = cloud
        .instance_metadata(&n)
        .await
        .expect("metadata")
        .expect("some");
    assert_eq!(
        md.provider_id,
        format!("vsphere://{}", vm.uuid.to_lowercase())
    );
    let ip = vm.ip_address.clone().expect("seeded ip");
    let kinds: Vec<(String, String)> = md
        .node_addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert!(
        kinds.contains(&("InternalIP".into(), ip.clone())),
        "{kinds:?}"
    );
    assert!(kinds.contains(&("ExternalIP".into(), ip)), "{kinds:?}");
    if let Some(h) = &vm.host_name {
        assert!(kinds.contains(&("Hostname".into(), h.clone())), "{kinds:?}");
    }
    assert_eq!(md.region, "region-a");
    assert!(
        md.zone == "zone-a" || md.zone == "zone-b",
        "zone {:?}",
        md.zone
    );
    assert!(
        md.instance_type.starts_with("vsphere-vm.cpu-"),
        "{}",
        md.instance_type
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn falls_back_to_dns_name_then_ip() {
    let (mock, cloud) = start().await;
    let vm = mock.admin().vms().into_iter().next().expect("a seeded VM");
    let host_name = vm.host_name.clone().expect("seeded hostname");
    let by_name = node(&host_name, "", None);
    let md = cloud
        .instance_metadata(&by_name)
        .await
        .expect("md")
        .expect("some");
    assert_eq!(
        md.provider_id,
        format!("vsphere://{}", vm.uuid.to_lowercase())
    );

    let mut by_ip = node("unknown-name", "", None);
    if let Some(s) = by_ip.status.as_mut() {
        s.addresses = Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: vm.ip_address.clone().expect("ip"),
        }]);
    }
    assert!(cloud.instance_exists(&by_ip).await.expect("exists"));
    assert!(
        !cloud
            .instance_exists(&node("nobody", "", None))
            .await
            .expect("exists")
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn power_off_delete_and_relogin() {
    let (mock, cloud) = start().await;
    let admin = mock.admin();
    let vm = admin.vms().into_iter().next().expect("a seeded VM");
    let n = node("x", "", Some(&format!("vsphere://{}", vm.uuid)));
    admin
        .update_vm(
            &vm.id,
            VmPatch {
                power_state: Some(PowerState::PoweredOff),
                ..Default::default()
            },
        )
        .expect("power off");
    // The session expires; the next call logs in again by itself.
    admin.expire_sessions();
    assert!(cloud.instance_shutdown(&n).await.expect("shutdown"));
    assert!(cloud.instance_exists(&n).await.expect("exists"));
    admin.delete_vm(&vm.id).expect("delete");
    assert!(!cloud.instance_exists(&n).await.expect("exists"));
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
    mock.shutdown().await;
}

#[tokio::test]
async fn unknown_datacenter_is_a_startup_error() {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let err = Vsphere::from_config(config_for(&mock, &["NoSuchDC"]), Duration::from_secs(10))
        .await
        .expect_err("must fail");
    assert!(err.to_string().contains("NoSuchDC"), "{err}");
    mock.shutdown().await;
}

const SECRET_LINES: &str = "  secretName: vc-creds\n  secretNamespace: kube-system\n";
const SECRET_PATH: &str = "/api/v1/namespaces/kube-system/secrets/vc-creds";

/// A Kubernetes client for a wiremock API server.
fn kube_client(api: &MockServer) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::new(api.uri().parse().expect("uri"));
    kube::Client::try_from(config).expect("kube client")
}

/// Serves the Secret with these `stringData` entries (replacing what was served).
async fn serve_secret(api: &MockServer, string_data: serde_json::Value) {
    api.reset().await;
    Mock::given(method("GET"))
        .and(path(SECRET_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "vc-creds", "namespace": "kube-system"},
            "stringData": string_data,
        })))
        .mount(api)
        .await;
}

async fn serve_no_secret(api: &MockServer) {
    api.reset().await;
    Mock::given(method("GET"))
        .and(path(SECRET_PATH))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
            "message": "secrets \"vc-creds\" not found", "code": 404,
        })))
        .mount(api)
        .await;
}

fn server_of(mock: &VsphereMock) -> String {
    mock.local_addr().ip().to_string()
}

#[tokio::test]
async fn secret_credentials_are_read_when_a_lookup_needs_them() {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let ready = mock.ready_info();
    let api = MockServer::start().await;
    // No Secret, no client yet: the provider still builds, without calling vCenter.
    let (cloud, _) = Vsphere::from_config(
        config_with(&mock, &["DC0"], SECRET_LINES),
        Duration::from_secs(10),
    )
    .await
    .expect("starts without the Secret");
    assert!(
        mock.admin().journal().is_empty(),
        "no vCenter call at startup"
    );
    let vm = mock.admin().vms().into_iter().next().expect("a seeded VM");
    let n = node("n", &vm.uuid, None);
    let e = cloud.instance_exists(&n).await.expect_err("no client");
    assert!(e.to_string().contains("no Kubernetes client"), "{e}");

    cloud.initialize(kube_client(&api));
    serve_no_secret(&api).await;
    let e = cloud.instance_exists(&n).await.expect_err("no Secret");
    let server = server_of(&mock);
    assert_eq!(
        e.to_string(),
        format!(
            "credentials not found for server {server}: secret kube-system/vc-creds does not exist"
        )
    );
    // A Secret for another server only.
    serve_secret(
        &api,
        json!({"10.9.9.9.username": "u", "10.9.9.9.password": "p"}),
    )
    .await;
    let e = cloud
        .instance_exists(&n)
        .await
        .expect_err("not this server");
    assert!(
        e.to_string().starts_with(&format!(
            "credentials not found for server {server} in secret"
        )),
        "{e}"
    );
    // A wrong password: vCenter's InvalidLogin, and nothing cached.
    serve_secret(
        &api,
        json!({
            format!("{server}.username"): ready.username,
            format!("{server}.password"): "wrong\n",
        }),
    )
    .await;
    let e = cloud.instance_exists(&n).await.expect_err("bad password");
    assert!(e.to_string().contains("InvalidLogin"), "{e}");
    // The right one (with the trailing newline `kubectl --from-file` leaves).
    serve_secret(
        &api,
        json!({
            format!("{server}.username"): ready.username,
            format!("{server}.password"): format!("{}\n", ready.password),
        }),
    )
    .await;
    assert!(cloud.instance_exists(&n).await.expect("exists"));
    // Logged in: the Secret is not read again while the session lasts.
    serve_no_secret(&api).await;
    assert!(cloud.instance_exists(&n).await.expect("exists"));
    mock.shutdown().await;
}

#[tokio::test]
async fn secret_in_the_alternative_format() {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let ready = mock.ready_info();
    let api = MockServer::start().await;
    let (cloud, _) = Vsphere::from_config(
        config_with(&mock, &["DC0"], SECRET_LINES),
        Duration::from_secs(10),
    )
    .await
    .expect("provider");
    cloud.initialize(kube_client(&api));
    serve_secret(
        &api,
        json!({
            "server_a": server_of(&mock),
            "username_a": ready.username,
            "password_a": ready.password,
        }),
    )
    .await;
    let vm = mock.admin().vms().into_iter().next().expect("a seeded VM");
    assert!(
        cloud
            .instance_exists(&node("n", &vm.uuid, None))
            .await
            .expect("exists")
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn unknown_datacenter_with_a_secret_is_a_lookup_error() {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let ready = mock.ready_info();
    let api = MockServer::start().await;
    let (cloud, _) = Vsphere::from_config(
        config_with(&mock, &["NoSuchDC"], SECRET_LINES),
        Duration::from_secs(10),
    )
    .await
    .expect("starts: the datacenters are resolved at the first login");
    cloud.initialize(kube_client(&api));
    let server = server_of(&mock);
    serve_secret(
        &api,
        json!({
            format!("{server}.username"): ready.username,
            format!("{server}.password"): ready.password,
        }),
    )
    .await;
    let e = cloud
        .instance_exists(&node("n", "4221b4a2-5c3e-4f43-9a7b-0123456789ab", None))
        .await
        .expect_err("unknown datacenter");
    assert!(e.to_string().contains("NoSuchDC"), "{e}");
    mock.shutdown().await;
}

#[tokio::test]
async fn ip_family_and_node_labels_shape_the_metadata() {
    let mock = VsphereMock::start(Config::default()).await.expect("mock");
    let admin = mock.admin();
    let vm = admin.vms().into_iter().next().expect("a seeded VM");
    let v4 = vm.ip_address.clone().expect("seeded ip");
    admin
        .update_vm(
            &vm.id,
            VmPatch {
                ips: Some(vec![v4.clone(), "fd00::7".into()]),
                ..Default::default()
            },
        )
        .expect("dual-stack guest");
    let n = node("n", &vm.uuid, None);
    let kinds = |md: &reference_ccm::cloud::InstanceMetadata| -> Vec<(String, String)> {
        md.node_addresses
            .iter()
            .filter(|a| a.type_ != "Hostname")
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect()
    };
    let pair = |t: &str, a: &str| (t.to_owned(), a.to_owned());

    // Default ipFamily: IPv4 only, though the guest has IPv6 too.
    let (cloud, _) = Vsphere::from_config(config_for(&mock, &["DC0"]), Duration::from_secs(10))
        .await
        .expect("connect");
    let labels: std::collections::BTreeMap<String, String> =
        [("example.com/pool".to_owned(), "a".to_owned())].into();
    let cloud = cloud.with_node_labels(labels.clone());
    let md = cloud
        .instance_metadata(&n)
        .await
        .expect("md")
        .expect("some");
    assert_eq!(
        kinds(&md),
        vec![pair("InternalIP", &v4), pair("ExternalIP", &v4)]
    );
    assert_eq!(md.additional_labels, labels);

    // IPv6 first, then IPv4, in the configured order.
    let (cloud, _) = Vsphere::from_config(
        config_with(&mock, &["DC0"], "  ipFamily: [IPv6, ipv4]\n"),
        Duration::from_secs(10),
    )
    .await
    .expect("connect");
    let md = cloud
        .instance_metadata(&n)
        .await
        .expect("md")
        .expect("some");
    assert_eq!(
        kinds(&md),
        vec![
            pair("InternalIP", "fd00::7"),
            pair("ExternalIP", "fd00::7"),
            pair("InternalIP", &v4),
            pair("ExternalIP", &v4),
        ]
    );
    assert!(md.additional_labels.is_empty());

    // A configured family the guest has no address of fails the lookup, as upstream.
    admin
        .update_vm(
            &vm.id,
            VmPatch {
                ips: Some(vec![v4.clone()]),
                ..Default::default()
            },
        )
        .expect("IPv4 only");
    let e = cloud.instance_metadata(&n).await.expect_err("no IPv6");
    assert_eq!(
        e.to_string(),
        "unable to find suitable IP address for node n with IP family [ipv6 ipv4]"
    );
    mock.shutdown().await;
}
