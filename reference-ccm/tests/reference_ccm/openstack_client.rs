//! The OpenStack provider against wiremock stubs: Keystone auth and discovery, catalog,
//! re-auth on 401, error mapping, name lookups, metadata assembly.

use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reference_ccm::cloud::{CloudError, Instances};
use reference_ccm::providers::openstack::OpenStack;
use reference_ccm::providers::openstack::config::CloudConfig;
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn catalog(uri: &str) -> serde_json::Value {
    json!({"token": {"expires_at": "2099-01-01T00:00:00.000000Z", "catalog": [
        {"type": "compute", "name": "nova", "endpoints": [
            {"interface": "internal", "region": "RegionOne", "url": format!("{uri}/wrong")},
            {"interface": "public", "region": "RegionTwo", "url": format!("{uri}/wrong")},
            {"interface": "public", "region": "RegionOne", "url": format!("{uri}/compute/v2.1/")}
        ]},
        {"type": "network", "name": "neutron", "endpoints": [
            {"interface": "public", "region_id": "RegionOne", "url": format!("{uri}/network")}
        ]}
    ]}})
}

async fn mount_auth(server: &MockServer, token: &str, times: Option<u64>, priority: u8) {
    let mut mock = Mock::given(method("POST"))
        .and(path("/identity/v3/auth/tokens"))
        .and(body_partial_json(json!({"auth": {"identity": {"methods": ["password"],
            "password": {"user": {"name": "admin", "password": "secret", "domain": {"name": "Default"}}}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}})))
        .respond_with(
            ResponseTemplate::new(201).insert_header("X-Subject-Token", token).set_body_json(catalog(&server.uri())),
        )
        .with_priority(priority);
    if let Some(n) = times {
        mock = mock.up_to_n_times(n);
    }
    mock.mount(server).await;
}

fn config(auth_url: &str, password: &str) -> CloudConfig {
    let text = format!(
        "[Global]\nauth-url = {auth_url}\nusername = admin\npassword = {password}\nproject-name = demo\n\
         domain-name = Default\nregion = RegionOne\n"
    );
    match CloudConfig::parse(&text) {
        Ok((c, _)) => c,
        Err(e) => panic!("{e}"),
    }
}

async fn connect(server: &MockServer) -> OpenStack {
    match OpenStack::from_config(config(&format!("{}/identity/v3", server.uri()), "secret")).await {
        Ok(os) => os,
        Err(e) => panic!("connect: {e}"),
    }
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn server_json(id: &str, name: &str) -> serde_json::Value {
    json!({"id": id, "name": name, "status": "ACTIVE", "OS-EXT-AZ:availability_zone": "az1",
        "flavor": {"id": "f1", "links": []}, "accessIPv4": "", "accessIPv6": "", "metadata": {},
        "addresses": {"private": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS:type": "fixed"}],
                      "ext": [{"addr": "172.24.4.5", "version": 4, "OS-EXT-IPS:type": "floating"}]}})
}

#[tokio::test]
async fn metadata_by_provider_id_uses_catalog_and_token() {
    let server = MockServer::start().await;
    mount_auth(&server, "tok1", None, 1).await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/abc"))
        .and(header("X-Auth-Token", "tok1"))
        .and(header("Accept", "application/json"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"server": server_json("abc", "n1")})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/flavors/f1"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"flavor": {"id": "f1", "name": "m1.small"}})),
        )
        .expect(1) // cached after the first lookup
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/network/v2.0/ports"))
        .and(query_param("device_id", "abc"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ports": [
            {"status": "ACTIVE", "fixed_ips": [{"ip_address": "10.0.0.5", "subnet_id": "s"}]}]})))
        .mount(&server)
        .await;
    let os = connect(&server).await;
    for _ in 0..2 {
        let meta = os
            .instance_metadata(&node("n1", Some("openstack:///abc")))
            .await;
        let meta = match meta {
            Ok(Some(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(meta.provider_id, "openstack:///abc");
        assert_eq!(meta.instance_type, "m1.small");
        assert_eq!(meta.zone, "az1");
        assert_eq!(meta.region, "RegionOne");
        let got: Vec<(&str, &str)> = meta
            .node_addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![("InternalIP", "10.0.0.5"), ("ExternalIP", "172.24.4.5")]
        );
    }
}

#[tokio::test]
async fn unauthorized_reauths_once_then_retries() {
    let server = MockServer::start().await;
    mount_auth(&server, "tok1", Some(1), 1).await;
    mount_auth(&server, "tok2", None, 2).await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/abc"))
        .and(header("X-Auth-Token", "tok1"))
        .respond_with(ResponseTemplate::new(401))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/abc"))
        .and(header("X-Auth-Token", "tok2"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"server": server_json("abc", "n1")})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let os = connect(&server).await;
    let exists = os
        .instance_exists(&node("n1", Some("openstack:///abc")))
        .await;
    assert!(matches!(exists, Ok(true)), "{exists:?}");
}

#[tokio::test]
async fn persistent_unauthorized_is_an_error_after_one_retry() {
    let server = MockServer::start().await;
    mount_auth(&server, "tok1", None, 1).await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/abc"))
        .respond_with(ResponseTemplate::new(401))
        .expect(2)
        .mount(&server)
        .await;
    let os = connect(&server).await;
    assert!(matches!(
        os.instance_exists(&node("n1", Some("openstack:///abc")))
            .await,
        Err(CloudError::Other(_))
    ));
}

#[tokio::test]
async fn status_codes_map_to_not_found_and_errors() {
    let server = MockServer::start().await;
    mount_auth(&server, "tok1", None, 1).await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/gone"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_json(json!({"itemNotFound": {"code": 404, "message": "x"}})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/broken"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/busy"))
        .respond_with(ResponseTemplate::new(429))
        .expect(1) // no retry on throttling, as gophercloud without a backoff function
        .mount(&server)
        .await;
    let os = connect(&server).await;
    assert!(matches!(
        os.instance_exists(&node("n", Some("openstack:///gone")))
            .await,
        Ok(false)
    ));
    assert!(matches!(
        os.instance_metadata(&node("n", Some("openstack:///gone")))
            .await,
        Err(CloudError::InstanceNotFound)
    ));
    match os
        .instance_metadata(&node("n", Some("openstack:///broken")))
        .await
    {
        Err(CloudError::Other(msg)) => assert!(msg.contains("503"), "{msg}"),
        other => panic!("{other:?}"),
    }
    match os
        .instance_shutdown(&node("n", Some("openstack:///busy")))
        .await
    {
        Err(CloudError::Other(msg)) => assert!(msg.contains("429"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn name_lookup_zero_one_many() {
    let server = MockServer::start().await;
    mount_auth(&server, "tok1", None, 1).await;
    let list = |servers: Vec<serde_json::Value>| {
        ResponseTemplate::new(200).set_body_json(json!({"servers": servers}))
    };
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/detail"))
        .and(query_param("name", "^none$"))
        .respond_with(list(vec![]))
        .mount(&server)
        .await;
    let mut off = server_json("s1", "one.example");
    off["status"] = json!("SHUTOFF");
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/detail"))
        .and(query_param("name", "^one\\.example$"))
        .respond_with(list(vec![off]))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v2.1/servers/detail"))
        .and(query_param("name", "^two$"))
        .respond_with(list(vec![server_json("a", "two"), server_json("b", "two")]))
        .mount(&server)
        .await;
    let os = connect(&server).await;
    assert!(matches!(
        os.instance_exists(&node("none", None)).await,
        Ok(false)
    ));
    assert!(matches!(
        os.instance_metadata(&node("none", None)).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        os.instance_shutdown(&node("one.example", None)).await,
        Ok(true)
    ));
    assert!(matches!(
        os.instance_exists(&node("two", None)).await,
        Err(CloudError::Other(_))
    ));
}

#[tokio::test]
async fn version_discovery_and_auth_failures() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/identity"))
        .respond_with(ResponseTemplate::new(300).set_body_json(json!({"versions": {"values": [
            {"id": "v2.0", "status": "deprecated", "links": [{"rel": "self", "href": format!("{}/identity/v2.0/", server.uri())}]},
            {"id": "v3.14", "status": "stable", "links": [{"rel": "self", "href": format!("{}/identity/v3/", server.uri())}]}
        ]}})))
        .expect(1)
        .mount(&server)
        .await;
    mount_auth(&server, "tok1", None, 1).await;
    Mock::given(method("POST"))
        .and(path("/identity/v3/auth/tokens"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"code": 401, "title": "Unauthorized"}})),
        )
        .with_priority(5)
        .mount(&server)
        .await;
    let discovered =
        OpenStack::from_config(config(&format!("{}/identity", server.uri()), "secret")).await;
    assert!(discovered.is_ok(), "{:?}", discovered.err());
    let bad =
        OpenStack::from_config(config(&format!("{}/identity/v3", server.uri()), "wrong")).await;
    match bad {
        Err(e) => assert!(e.to_string().contains("401"), "{e}"),
        Ok(_) => panic!("bad credentials accepted"),
    }
    let unreachable = OpenStack::from_config(config("http://127.0.0.1:9/v3", "secret")).await;
    assert!(unreachable.is_err());
}

#[tokio::test]
async fn missing_catalog_entry_is_a_startup_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/identity/v3/auth/tokens"))
        .respond_with(
            ResponseTemplate::new(201)
                .insert_header("X-Subject-Token", "t")
                .set_body_json(
                    json!({"token": {"catalog": [{"type": "compute", "endpoints": [
                {"interface": "public", "region": "RegionOne", "url": "http://x"}]}]}}),
                ),
        )
        .mount(&server)
        .await;
    match OpenStack::from_config(config(&format!("{}/identity/v3", server.uri()), "secret")).await {
        Err(e) => assert!(e.to_string().contains("network"), "{e}"),
        Ok(_) => panic!("accepted a catalog without network"),
    }
}
