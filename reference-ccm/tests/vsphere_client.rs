//! The vSphere provider against the mock vCenter (`mock-vsphere`): TLS with the mock's CA,
//! lookup by SystemUUID / DNS name / IP, metadata with zone and region tags, power state,
//! deletion, and re-login after the session expires.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus, NodeSystemInfo};
use kube::api::ObjectMeta;
use mock_vsphere::{Config, PowerState, VmPatch, VsphereMock};
use reference_ccm::cloud::{CloudError, Instances};
use reference_ccm::providers::vsphere::Vsphere;
use reference_ccm::providers::vsphere::config::VsphereConfig;

fn config_for(mock: &VsphereMock, datacenters: &[&str]) -> VsphereConfig {
    let ready = mock.ready_info();
    let url = ready
        .url
        .trim_start_matches("https://")
        .trim_end_matches("/sdk");
    let (host, port) = url.rsplit_once(':').expect("host:port");
    let yaml = format!(
        "global:\n  user: {}\n  password: {}\n  port: {port}\n  caFile: {}\nvcenter:\n  vc:\n    server: {host}\n    datacenters: [{}]\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n",
        ready.username,
        ready.password,
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
    let (cloud, _warnings) = Vsphere::connect(config_for(&mock, &["DC0"]), Duration::from_secs(10))
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
    let err = Vsphere::connect(config_for(&mock, &["NoSuchDC"]), Duration::from_secs(10))
        .await
        .expect_err("must fail");
    assert!(err.to_string().contains("NoSuchDC"), "{err}");
    mock.shutdown().await;
}
