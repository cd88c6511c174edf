//! The AWS provider against wiremock stubs: SigV4 headers, lookups by providerID and by
//! private DNS name with the cluster tag, throttling and 5xx retried with backoff, auth
//! failures returned at once, eventual consistency (`InvalidInstanceID.NotFound` right
//! after create) reported as "not found" until EC2 knows the instance.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reference_ccm::cloud::{CloudError, Instances};
use reference_ccm::providers::aws::Aws;
use reference_ccm::providers::aws::client::{AwsClient, RetryPolicy};
use reference_ccm::providers::aws::config::AwsConfig;
use reference_ccm::providers::aws::sigv4::Credentials;
use wiremock::matchers::{body_string_contains, header_regex, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn aws(server: &MockServer) -> Aws {
    let text = format!(
        "[Global]\nZone = us-west-2a\nKubernetesClusterID = c1\n\
         [ServiceOverride \"1\"]\nService = ec2\nRegion = us-west-2\nURL = {}\nSigningRegion = us-west-2\n",
        server.uri()
    );
    let (config, _) = match AwsConfig::parse(&text) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let creds = Credentials {
        access_key_id: "AKIDTEST".into(),
        secret_access_key: "secret".into(),
    };
    let mut client = match AwsClient::new(&config, creds) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    client.set_retry(RetryPolicy {
        attempts: 4,
        base: Duration::from_millis(5),
        max: Duration::from_millis(20),
    });
    Aws::with_client(config, client)
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn instance_xml(id: &str, state: &str, cluster_tag: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>
<reservationSet><item><reservationId>r-1</reservationId><instancesSet><item>
<instanceId>{id}</instanceId><instanceState><code>16</code><name>{state}</name></instanceState>
<privateDnsName>ip-10-0-0-1.us-west-2.compute.internal</privateDnsName><dnsName></dnsName>
<instanceType>m5.large</instanceType><placement><availabilityZone>us-west-2b</availabilityZone></placement>
<privateIpAddress>10.0.0.1</privateIpAddress>
<tagSet><item><key>{cluster_tag}</key><value>owned</value></item></tagSet>
</item></instancesSet></item></reservationSet></DescribeInstancesResponse>"#
    )
}

fn ec2_error(status: u16, code: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_string(format!(
        "<?xml version=\"1.0\"?><Response><Errors><Error><Code>{code}</Code><Message>m</Message></Error></Errors><RequestID>x</RequestID></Response>"
    ))
}

fn zones_xml() -> String {
    "<DescribeAvailabilityZonesResponse><availabilityZoneInfo><item><zoneName>us-west-2b</zoneName><zoneId>usw2-az2</zoneId></item></availabilityZoneInfo></DescribeAvailabilityZonesResponse>".into()
}

async fn mount_zones(server: &MockServer) {
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeAvailabilityZones"))
        .respond_with(ResponseTemplate::new(200).set_body_string(zones_xml()))
        .mount(server)
        .await;
}

#[tokio::test]
async fn metadata_by_provider_id_is_signed_and_complete() {
    let server = MockServer::start().await;
    mount_zones(&server).await;
    Mock::given(method("POST"))
        .and(path("/"))
        .and(body_string_contains("Action=DescribeInstances"))
        .and(body_string_contains("InstanceId.1=i-0abc"))
        .and(header_regex(
            "authorization",
            r"^AWS4-HMAC-SHA256 Credential=AKIDTEST/\d{8}/us-west-2/ec2/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=[0-9a-f]{64}$",
        ))
        .and(header_regex("x-amz-date", r"^\d{8}T\d{6}Z$"))
        .respond_with(
            ResponseTemplate::new(200).set_body_string(instance_xml("i-0abc", "running", "kubernetes.io/cluster/c1")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let meta = cloud
        .instance_metadata(&node("n1", Some("aws:///us-west-2b/i-0abc")))
        .await;
    let Ok(Some(meta)) = meta else {
        panic!("metadata: {meta:?}");
    };
    assert_eq!(meta.provider_id, "aws:///us-west-2b/i-0abc");
    assert_eq!(meta.zone, "us-west-2b");
    assert_eq!(meta.region, "us-west-2");
    assert_eq!(meta.instance_type, "m5.large");
    assert_eq!(
        meta.additional_labels
            .get("topology.k8s.aws/zone-id")
            .map(String::as_str),
        Some("usw2-az2")
    );
    let kinds: Vec<&str> = meta
        .node_addresses
        .iter()
        .map(|a| a.type_.as_str())
        .collect();
    assert_eq!(kinds, ["InternalIP", "InternalDNS", "Hostname"]);
}

#[tokio::test]
async fn name_lookup_filters_by_private_dns_and_cluster_tag() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains("Filter.1.Name=private-dns-name"))
        .and(body_string_contains(
            "Filter.1.Value.1=ip-10-0-0-1.us-west-2.compute.internal",
        ))
        .and(body_string_contains("Filter.2.Name=instance-state-name"))
        .respond_with(ResponseTemplate::new(200).set_body_string(instance_xml(
            "i-0abc",
            "stopped",
            "kubernetes.io/cluster/other",
        )))
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let n = node("ip-10-0-0-1.us-west-2.compute.internal", None);
    // Another cluster's instance is not ours: it does not exist for this CCM.
    assert!(matches!(cloud.instance_exists(&n).await, Ok(false)));
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ec2_error(503, "RequestLimitExceeded"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ec2_error(500, "InternalError"))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(instance_xml(
            "i-0abc",
            "stopping",
            "kubernetes.io/cluster/c1",
        )))
        .with_priority(3)
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let shut = cloud
        .instance_shutdown(&node("n1", Some("aws:///us-west-2b/i-0abc")))
        .await;
    assert!(matches!(shut, Ok(true)), "{shut:?}");
    let calls = server.received_requests().await.unwrap_or_default().len();
    assert_eq!(calls, 4, "two throttled, one 500, one success");
}

#[tokio::test]
async fn sustained_throttling_gives_up_after_the_attempts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ec2_error(503, "RequestLimitExceeded"))
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let r = cloud
        .instance_exists(&node("n1", Some("aws:///us-west-2b/i-0abc")))
        .await;
    let Err(CloudError::Other(msg)) = r else {
        panic!("expected an error, got {r:?}");
    };
    assert!(msg.contains("RequestLimitExceeded"), "{msg}");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        4
    );
}

#[tokio::test]
async fn auth_failures_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ec2_error(401, "AuthFailure"))
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let r = cloud
        .instance_exists(&node("n1", Some("aws:///us-west-2b/i-0abc")))
        .await;
    let Err(CloudError::Other(msg)) = r else {
        panic!("expected an error, got {r:?}");
    };
    assert!(msg.contains("AuthFailure"), "{msg}");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
}

#[tokio::test]
async fn not_found_right_after_create_then_found() {
    let server = MockServer::start().await;
    mount_zones(&server).await;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeInstances"))
        .respond_with(ec2_error(400, "InvalidInstanceID.NotFound"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeInstances"))
        .respond_with(ResponseTemplate::new(200).set_body_string(instance_xml(
            "i-0abc",
            "running",
            "kubernetes.io/cluster/c1",
        )))
        .with_priority(2)
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let n = node("n1", Some("aws:///us-west-2b/i-0abc"));
    // Not retried in the client: "not found" is an answer; the node controller retries.
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(cloud.instance_metadata(&n).await, Ok(Some(_))));
    // Terminated instances do not exist.
    server.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(instance_xml(
            "i-0abc",
            "terminated",
            "kubernetes.io/cluster/c1",
        )))
        .mount(&server)
        .await;
    assert!(matches!(cloud.instance_exists(&n).await, Ok(false)));
}

#[tokio::test]
async fn malformed_answers_and_provider_ids_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<not-closed>"))
        .mount(&server)
        .await;
    let cloud = aws(&server);
    let r = cloud
        .instance_exists(&node("n1", Some("aws:///us-west-2b/i-0abc")))
        .await;
    assert!(matches!(r, Err(CloudError::Other(_))), "{r:?}");
    let r = cloud
        .instance_exists(&node("n1", Some("gce://p/z/n1")))
        .await;
    assert!(matches!(r, Err(CloudError::Other(_))), "{r:?}");
}
