//! The AWS load balancers against wiremock stubs: ELB classic create (security group,
//! listeners, health check, instances) and an NLB create (target group, listener,
//! targets, wait for `active`), with the exact calls checked.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reference_ccm::cloud::LoadBalancer;
use reference_ccm::providers::aws::Aws;
use reference_ccm::providers::aws::client::{AwsClient, RetryPolicy};
use reference_ccm::providers::aws::config::AwsConfig;
use reference_ccm::providers::aws::sigv4::Credentials;
use serde_json::json;
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn aws(server: &MockServer) -> Aws {
    let mut text =
        String::from("[Global]\nZone = us-west-2a\nVPC = vpc-1\nKubernetesClusterID = c1\n");
    for (i, s) in ["ec2", "elasticloadbalancing"].iter().enumerate() {
        text.push_str(&format!(
            "[ServiceOverride \"{i}\"]\nService = {s}\nRegion = us-west-2\nURL = {}\nSigningRegion = us-west-2\n",
            server.uri()
        ));
    }
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
        attempts: 2,
        base: Duration::from_millis(5),
        max: Duration::from_millis(10),
    });
    Aws::with_client(config, client)
}

fn service(annotations: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default",
                     "uid": "11111111-2222-3333-4444-555555555555",
                     "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 8080, "nodePort": 30080, "protocol": "TCP"}]},
    }))
    .unwrap_or_default()
}

fn node(id: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(id.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///us-west-2a/{id}")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn answer(
    server: &MockServer,
    action: &str,
    status: u16,
    body: &str,
    times: Option<u64>,
    priority: u8,
) {
    let mut m = Mock::given(method("POST"))
        .and(body_string_contains(format!("Action={action}&")))
        .respond_with(ResponseTemplate::new(status).set_body_string(body.to_string()))
        .with_priority(priority);
    if let Some(n) = times {
        m = m.up_to_n_times(n);
    }
    m.mount(server).await;
}

const LB_NOT_FOUND: &str = "<ErrorResponse><Error><Type>Sender</Type><Code>LoadBalancerNotFound</Code><Message>none</Message></Error><RequestId>r</RequestId></ErrorResponse>";
const SUBNETS: &str = "<DescribeSubnetsResponse><subnetSet><item><subnetId>subnet-b</subnetId><availabilityZone>us-west-2a</availabilityZone></item><item><subnetId>subnet-a</subnetId><availabilityZone>us-west-2a</availabilityZone><tagSet><item><key>kubernetes.io/role/elb</key><value>1</value></item></tagSet></item></subnetSet></DescribeSubnetsResponse>";

async fn actions(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            let body = String::from_utf8_lossy(&r.body).to_string();
            body.split('&')
                .find_map(|kv| kv.strip_prefix("Action=").map(str::to_string))
        })
        .collect()
}

#[tokio::test]
async fn classic_create_makes_group_listeners_health_check_and_registers() {
    let server = MockServer::start().await;
    answer(
        &server,
        "DescribeSecurityGroups",
        200,
        "<R><securityGroupInfo/></R>",
        None,
        1,
    )
    .await;
    answer(
        &server,
        "CreateSecurityGroup",
        200,
        "<R><return>true</return><groupId>sg-1</groupId></R>",
        None,
        1,
    )
    .await;
    answer(
        &server,
        "AuthorizeSecurityGroupIngress",
        200,
        "<R><return>true</return></R>",
        None,
        1,
    )
    .await;
    answer(&server, "DescribeLoadBalancers", 400, LB_NOT_FOUND, None, 1).await;
    answer(&server, "DescribeSubnets", 200, SUBNETS, None, 1).await;
    answer(&server, "CreateLoadBalancer", 200, "<R><CreateLoadBalancerResult><DNSName>a1.elb.example</DNSName></CreateLoadBalancerResult></R>", None, 1).await;
    answer(&server, "ConfigureHealthCheck", 200, "<R/>", None, 1).await;
    answer(
        &server,
        "RegisterInstancesWithLoadBalancer",
        200,
        "<R/>",
        None,
        1,
    )
    .await;
    let cloud = aws(&server);
    let status = cloud
        .ensure_load_balancer(
            "kubernetes",
            &service(json!({})),
            &[node("i-1"), node("i-2")],
        )
        .await;
    let Ok(status) = status else {
        panic!("ensure: {status:?}");
    };
    let host = status
        .ingress
        .and_then(|i| i.first().and_then(|i| i.hostname.clone()));
    assert_eq!(host.as_deref(), Some("a1.elb.example"));
    assert_eq!(
        actions(&server).await,
        [
            "DescribeSecurityGroups",
            "CreateSecurityGroup",
            "AuthorizeSecurityGroupIngress",
            "DescribeLoadBalancers",
            "DescribeSubnets",
            "CreateLoadBalancer",
            "ConfigureHealthCheck",
            "RegisterInstancesWithLoadBalancer"
        ]
    );
    let bodies: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).to_string())
        .collect();
    assert!(
        bodies[1].contains("GroupName=k8s-elb-a11111111222233334444555555555"),
        "{}",
        bodies[1]
    );
    assert!(
        bodies[2].contains("IpRanges.1.CidrIp=0.0.0.0%2F0") && bodies[2].contains("FromPort=8080"),
        "{}",
        bodies[2]
    );
    // The role-tagged subnet wins in its zone.
    assert!(
        bodies[5].contains("Subnets.member.1=subnet-a") && bodies[5].contains("InstancePort=30080"),
        "{}",
        bodies[5]
    );
    assert!(
        bodies[6].contains("HealthCheck.Target=TCP%3A30080"),
        "{}",
        bodies[6]
    );
    assert!(
        bodies[7].contains("Instances.member.2.InstanceId=i-2"),
        "{}",
        bodies[7]
    );
}

#[tokio::test]
async fn nlb_create_makes_target_group_listener_targets_and_waits_for_active() {
    let server = MockServer::start().await;
    let lb = |state: &str| {
        format!(
            "<R><DescribeLoadBalancersResult><LoadBalancers><member><LoadBalancerArn>arn:lb</LoadBalancerArn><DNSName>n1.elb.example</DNSName><State><Code>{state}</Code></State></member></LoadBalancers></DescribeLoadBalancersResult></R>"
        )
    };
    answer(
        &server,
        "DescribeLoadBalancers",
        400,
        LB_NOT_FOUND,
        Some(1),
        1,
    )
    .await;
    answer(
        &server,
        "DescribeLoadBalancers",
        200,
        &lb("provisioning"),
        Some(1),
        2,
    )
    .await;
    answer(
        &server,
        "DescribeLoadBalancers",
        200,
        &lb("active"),
        None,
        3,
    )
    .await;
    answer(&server, "DescribeSubnets", 200, SUBNETS, None, 1).await;
    answer(&server, "CreateLoadBalancer", 200, "<R><CreateLoadBalancerResult><LoadBalancers><member><LoadBalancerArn>arn:lb</LoadBalancerArn><DNSName>n1.elb.example</DNSName><State><Code>provisioning</Code></State></member></LoadBalancers></CreateLoadBalancerResult></R>", None, 1).await;
    answer(
        &server,
        "DescribeListeners",
        200,
        "<R><DescribeListenersResult><Listeners/></DescribeListenersResult></R>",
        None,
        1,
    )
    .await;
    answer(&server, "CreateTargetGroup", 200, "<R><CreateTargetGroupResult><TargetGroups><member><TargetGroupArn>arn:tg</TargetGroupArn></member></TargetGroups></CreateTargetGroupResult></R>", None, 1).await;
    answer(&server, "CreateListener", 200, "<R/>", None, 1).await;
    answer(&server, "DescribeTargetHealth", 200, "<R><DescribeTargetHealthResult><TargetHealthDescriptions/></DescribeTargetHealthResult></R>", None, 1).await;
    answer(&server, "RegisterTargets", 200, "<R/>", None, 1).await;
    let cloud = aws(&server);
    let svc = service(json!({"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}));
    let status = cloud
        .ensure_load_balancer("kubernetes", &svc, &[node("i-1")])
        .await;
    let Ok(status) = status else {
        panic!("ensure: {status:?}");
    };
    let host = status
        .ingress
        .and_then(|i| i.first().and_then(|i| i.hostname.clone()));
    assert_eq!(host.as_deref(), Some("n1.elb.example"));
    assert_eq!(
        actions(&server).await,
        [
            "DescribeLoadBalancers",
            "DescribeSubnets",
            "CreateLoadBalancer",
            "DescribeListeners",
            "CreateTargetGroup",
            "CreateListener",
            "DescribeTargetHealth",
            "RegisterTargets",
            "DescribeLoadBalancers",
            "DescribeLoadBalancers"
        ]
    );
    let bodies: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).to_string())
        .collect();
    assert!(
        bodies[2].contains("Type=network") && bodies[2].contains("Version=2015-12-01"),
        "{}",
        bodies[2]
    );
    assert!(
        bodies[4].contains("Port=30080") && bodies[4].contains("TargetType=instance"),
        "{}",
        bodies[4]
    );
    assert!(
        bodies[5].contains("Port=8080") && bodies[5].contains("TargetGroupArn=arn%3Atg"),
        "{}",
        bodies[5]
    );
    assert!(
        bodies[7].contains("Targets.member.1.Id=i-1")
            && bodies[7].contains("Targets.member.1.Port=30080"),
        "{}",
        bodies[7]
    );
    // An unknown type is refused; external types belong to another controller.
    let odd = service(json!({"service.beta.kubernetes.io/aws-load-balancer-type": "weird"}));
    assert!(cloud.ensure_load_balancer("k", &odd, &[]).await.is_err());
    let ext = service(json!({"service.beta.kubernetes.io/aws-load-balancer-type": "external"}));
    assert!(matches!(
        cloud.ensure_load_balancer("k", &ext, &[]).await,
        Err(reference_ccm::cloud::LbError::ImplementedElsewhere)
    ));
}
