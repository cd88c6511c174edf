//! Router tests through `tower::ServiceExt::oneshot`: every action's happy path and its
//! errors, signed the way SDKs sign, without a socket.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use mock_cloud::FaultJson;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::testing::{EC2, ELB, ELBV2, Mock, Reply};
use crate::{Config, build_shared, sigv4};

#[tokio::test]
async fn describe_instances_shape_and_ids() {
    let m = Mock::seeded(3);
    let r = m.ec2("DescribeInstances", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.contains(
        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
    ));
    assert_eq!(r.all("instanceId").len(), 3);
    assert_eq!(
        r.all("privateDnsName")[0],
        "ip-127-40-0-10.us-west-2.compute.internal"
    );
    assert!(
        r.body
            .contains("<key>kubernetes.io/cluster/ccm-conformance</key><value>owned</value>")
    );
    assert!(r.body.contains("<status>in-use</status>"));
    assert_eq!(r.one("ipAddress"), "127.50.0.10");
    assert!(
        r.body
            .contains("<instanceState><code>16</code><name>running</name></instanceState>")
    );
    assert_eq!(r.one("availabilityZone"), "us-west-2a");

    let id = m.admin().instances()[1].id.clone();
    let r = m.ec2("DescribeInstances", &[("InstanceId.1", &id)]).await;
    assert_eq!(r.all("instanceId"), vec![id.clone()]);
    let r = m
        .ec2(
            "DescribeInstances",
            &[
                ("InstanceId.1", &id),
                ("InstanceId.2", "i-0123456789abcdef0"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "InvalidInstanceID.NotFound");
    assert!(r.body.contains("<Response><Errors><Error>"));
    assert!(!r.one("RequestID").is_empty());
    let r = m
        .ec2("DescribeInstances", &[("InstanceId.1", "i-zzz")])
        .await;
    assert_eq!(r.code(), "InvalidInstanceID.Malformed");
    let r = m
        .ec2(
            "DescribeInstances",
            &[("InstanceId.1", &id), ("MaxResults", "5")],
        )
        .await;
    assert_eq!(r.code(), "InvalidParameterCombination");
}

#[tokio::test]
async fn describe_instances_filters_and_wildcards() {
    let m = Mock::seeded(3);
    let ids: Vec<String> = m.admin().instances().into_iter().map(|i| i.id).collect();
    m.admin()
        .update_instance(
            &ids[2],
            crate::InstancePatch {
                state: Some(crate::InstanceState::Stopped),
                tags: [("role".to_string(), "db".to_string())].into(),
                ..Default::default()
            },
        )
        .expect("patch");
    let vpc = m.shared.cloud().vpcs[0].id.clone();
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a String>);
    let cases: Vec<Case> = vec![
        (
            vec![("Filter.1.Name", "tag:role"), ("Filter.1.Value.1", "db")],
            vec![&ids[2]],
        ),
        (
            vec![("Filter.1.Name", "tag-key"), ("Filter.1.Value.1", "ro*")],
            vec![&ids[2]],
        ),
        (
            vec![
                ("Filter.1.Name", "private-dns-name"),
                ("Filter.1.Value.1", "ip-127-40-0-1?.*"),
            ],
            vec![&ids[0], &ids[1], &ids[2]],
        ),
        (
            vec![
                ("Filter.1.Name", "private-dns-name"),
                (
                    "Filter.1.Value.1",
                    "ip-127-40-0-11.us-west-2.compute.internal",
                ),
                (
                    "Filter.1.Value.2",
                    "ip-127-40-0-12.us-west-2.compute.internal",
                ),
                ("Filter.2.Name", "instance-state-name"),
                ("Filter.2.Value.1", "running"),
            ],
            vec![&ids[1]],
        ),
        (
            vec![("Filter.1.Name", "vpc-id"), ("Filter.1.Value.1", &vpc)],
            vec![&ids[0], &ids[1], &ids[2]],
        ),
        (
            vec![
                ("Filter.1.Name", "vpc-id"),
                ("Filter.1.Value.1", "vpc-other"),
            ],
            vec![],
        ),
        (
            vec![
                ("Filter.1.Name", "tag:Name"),
                ("Filter.1.Value.1", "node-0"),
            ],
            vec![&ids[0]],
        ),
    ];
    for (params, want) in cases {
        let r = m.ec2("DescribeInstances", &params).await;
        assert_eq!(r.status, StatusCode::OK, "{params:?}: {}", r.body);
        let got = r.all("instanceId");
        let want: Vec<String> = want.into_iter().cloned().collect();
        assert_eq!(got, want, "{params:?}");
    }
    let r = m
        .ec2(
            "DescribeInstances",
            &[("Filter.1.Name", "bogus"), ("Filter.1.Value.1", "x")],
        )
        .await;
    assert_eq!(r.code(), "InvalidParameterValue");
    assert!(r.body.contains("The filter &apos;bogus&apos; is invalid"));
}

#[tokio::test]
async fn describe_instances_paginates() {
    let m = Mock::seeded(7);
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = vec![("MaxResults", "5".to_string())];
        if let Some(t) = &token {
            params.push(("NextToken", t.clone()));
        }
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = m.ec2("DescribeInstances", &params).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        seen.extend(r.all("instanceId"));
        pages += 1;
        match r.all("nextToken").pop() {
            Some(t) => token = Some(t),
            None => break,
        }
        assert!(pages < 5, "pagination does not end");
    }
    assert_eq!(pages, 2);
    let all: Vec<String> = m.admin().instances().into_iter().map(|i| i.id).collect();
    assert_eq!(seen, all);
    for (k, v) in [
        ("MaxResults", "4"),
        ("NextToken", "nope"),
        ("MaxResults", "x"),
    ] {
        let r = m.ec2("DescribeInstances", &[(k, v)]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{k}={v}");
    }
}

#[tokio::test]
async fn run_stop_start_terminate() {
    let m = Mock::seeded(0);
    let r = m
        .ec2(
            "RunInstances",
            &[
                ("ImageId", "ami-1"),
                ("MinCount", "2"),
                ("MaxCount", "2"),
                ("InstanceType", "t3.small"),
                ("Placement.AvailabilityZone", "us-west-2b"),
                ("TagSpecification.1.ResourceType", "instance"),
                ("TagSpecification.1.Tag.1.Key", "Name"),
                ("TagSpecification.1.Tag.1.Value", "w"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let ids = r.all("instanceId");
    assert_eq!(ids.len(), 2);
    assert!(r.body.contains("<name>pending</name>"));
    assert_eq!(r.one("privateIpAddress"), "127.41.0.10");
    let info = m.admin().instance(&ids[0]).expect("created");
    assert_eq!(info.instance_type, "t3.small");
    assert_eq!(info.name.as_deref(), Some("w"));
    assert!(
        info.tags
            .contains_key("kubernetes.io/cluster/ccm-conformance")
    );

    let r = m.ec2("StopInstances", &[("InstanceId.1", &ids[0])]).await;
    assert!(r.body.contains("<currentState><code>64</code><name>stopping</name></currentState><previousState><code>16</code><name>running</name>"), "{}", r.body);
    assert_eq!(
        m.admin().instance(&ids[0]).map(|i| i.state),
        Some(crate::InstanceState::Stopped)
    );
    let r = m.ec2("StartInstances", &[("InstanceId.1", &ids[0])]).await;
    assert!(r.body.contains("<name>pending</name>"));
    let r = m
        .ec2("TerminateInstances", &[("InstanceId.1", &ids[0])])
        .await;
    assert!(r.body.contains("<name>shutting-down</name>"));
    let r = m
        .ec2("DescribeInstances", &[("InstanceId.1", &ids[0])])
        .await;
    assert!(r.body.contains("<name>terminated</name>"));

    for (params, code) in [
        (
            vec![("MinCount", "1"), ("MaxCount", "1")],
            "MissingParameter",
        ),
        (
            vec![("ImageId", "a"), ("MaxCount", "1")],
            "MissingParameter",
        ),
        (
            vec![("ImageId", "a"), ("MinCount", "2"), ("MaxCount", "1")],
            "InvalidParameterValue",
        ),
        (
            vec![
                ("ImageId", "a"),
                ("MinCount", "1"),
                ("MaxCount", "1"),
                ("Placement.AvailabilityZone", "mars-1a"),
            ],
            "InvalidParameterValue",
        ),
        (
            vec![
                ("ImageId", "a"),
                ("MinCount", "1"),
                ("MaxCount", "1"),
                ("SubnetId", "subnet-none"),
            ],
            "InvalidSubnetID.NotFound",
        ),
    ] {
        let r = m.ec2("RunInstances", &params).await;
        assert_eq!(r.code(), code, "{params:?}");
    }
    let r = m.ec2("StopInstances", &[]).await;
    assert_eq!(r.code(), "MissingParameter");
    let r = m
        .ec2(
            "TerminateInstances",
            &[("InstanceId.1", "i-0000000000000000f")],
        )
        .await;
    assert_eq!(r.code(), "InvalidInstanceID.NotFound");
}

#[tokio::test]
async fn reboot_keeps_the_instance_running_with_its_addresses() {
    let m = Mock::seeded(1);
    let before = m.admin().instances().remove(0);
    let r = m
        .ec2("RebootInstances", &[("InstanceId.1", &before.id)])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.one("return"), "true");
    let after = m.admin().instance(&before.id).expect("still there");
    assert_eq!(after, before, "a reboot changes nothing EC2 shows");
    let r = m
        .ec2("DescribeInstances", &[("InstanceId.1", &before.id)])
        .await;
    assert!(r.body.contains("<name>running</name>"), "{}", r.body);
    let r = m.ec2("RebootInstances", &[]).await;
    assert_eq!(r.code(), "MissingParameter");
    let r = m
        .ec2(
            "RebootInstances",
            &[
                ("InstanceId.1", &before.id),
                ("InstanceId.2", "i-0000000000000000f"),
            ],
        )
        .await;
    assert_eq!(r.code(), "InvalidInstanceID.NotFound");
    let r = m.ec2("RebootInstances", &[("InstanceId.1", "i-zz")]).await;
    assert_eq!(r.code(), "InvalidInstanceID.Malformed");
}

#[tokio::test]
async fn zones_vpcs_subnets_enis() {
    let m = Mock::seeded(1);
    let r = m.ec2("DescribeAvailabilityZones", &[]).await;
    assert_eq!(
        r.all("zoneName"),
        vec!["us-west-2a", "us-west-2b", "us-west-2c"]
    );
    assert_eq!(r.all("zoneId"), vec!["usw2-az1", "usw2-az2", "usw2-az3"]);
    let r = m
        .ec2("DescribeAvailabilityZones", &[("ZoneName.1", "us-west-2b")])
        .await;
    assert_eq!(r.all("zoneId"), vec!["usw2-az2"]);
    let r = m
        .ec2("DescribeAvailabilityZones", &[("ZoneName.1", "mars")])
        .await;
    assert_eq!(r.code(), "InvalidParameterValue");

    let r = m.ec2("DescribeVpcs", &[]).await;
    let vpc = r.one("vpcId");
    assert_eq!(r.one("cidrBlock"), "127.40.0.0/13");
    let r = m.ec2("DescribeVpcs", &[("VpcId.1", "vpc-nope")]).await;
    assert_eq!(r.code(), "InvalidVpcID.NotFound");

    let r = m
        .ec2(
            "DescribeSubnets",
            &[("Filter.1.Name", "vpc-id"), ("Filter.1.Value.1", &vpc)],
        )
        .await;
    assert_eq!(r.all("subnetId").len(), 3);
    assert!(r.body.contains("<key>kubernetes.io/role/elb</key>"));
    let r = m
        .ec2(
            "DescribeSubnets",
            &[
                ("Filter.1.Name", "availability-zone"),
                ("Filter.1.Value.1", "us-west-2c"),
            ],
        )
        .await;
    assert_eq!(r.all("cidrBlock"), vec!["127.42.0.0/24"]);
    let r = m
        .ec2("DescribeSubnets", &[("SubnetId.1", "subnet-x")])
        .await;
    assert_eq!(r.code(), "InvalidSubnetID.NotFound");

    let inst = m.admin().instances()[0].clone();
    let r = m
        .ec2(
            "DescribeNetworkInterfaces",
            &[
                ("Filter.1.Name", "attachment.instance-id"),
                ("Filter.1.Value.1", &inst.id),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.one("instanceId"), inst.id);
    assert_eq!(r.one("status"), "in-use");
    assert_eq!(r.one("publicIp"), "127.50.0.10");
    let r = m
        .ec2(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", "eni-x")],
        )
        .await;
    assert_eq!(r.code(), "InvalidNetworkInterfaceID.NotFound");
}

#[tokio::test]
async fn route_tables_and_routes() {
    let m = Mock::seeded(1);
    let id = m.admin().instances()[0].id.clone();
    let r = m
        .ec2(
            "DescribeRouteTables",
            &[
                ("Filter.1.Name", "tag-key"),
                ("Filter.1.Value.1", "kubernetes.io/cluster/ccm-conformance"),
            ],
        )
        .await;
    let rtb = r.one("routeTableId");
    assert!(rtb.starts_with("rtb-"));
    assert!(r.body.contains("<main>true</main>"));
    assert!(r.all("gatewayId").iter().any(|g| g.starts_with("igw-")));

    let create = [
        ("RouteTableId", rtb.as_str()),
        ("DestinationCidrBlock", "10.244.0.0/24"),
        ("InstanceId", id.as_str()),
    ];
    let r = m.ec2("CreateRoute", &create).await;
    assert_eq!(r.one("return"), "true", "{}", r.body);
    assert_eq!(
        m.ec2("CreateRoute", &create).await.code(),
        "RouteAlreadyExists"
    );
    let r = m
        .ec2("DescribeRouteTables", &[("RouteTableId.1", &rtb)])
        .await;
    assert_eq!(r.all("instanceId"), vec![id.clone()]);
    assert!(!r.body.contains("blackhole"));
    m.admin().delete_instance(&id).expect("delete");
    let r = m
        .ec2("DescribeRouteTables", &[("RouteTableId.1", &rtb)])
        .await;
    assert!(r.body.contains("<state>blackhole</state>"));
    let del = [
        ("RouteTableId", rtb.as_str()),
        ("DestinationCidrBlock", "10.244.0.0/24"),
    ];
    assert_eq!(m.ec2("DeleteRoute", &del).await.one("return"), "true");
    assert_eq!(
        m.ec2("DeleteRoute", &del).await.code(),
        "InvalidRoute.NotFound"
    );
    for (params, code) in [
        (
            vec![
                ("RouteTableId", "rtb-x"),
                ("DestinationCidrBlock", "1.0.0.0/8"),
                ("GatewayId", "igw-1"),
            ],
            "InvalidRouteTableID.NotFound",
        ),
        (
            vec![
                ("RouteTableId", rtb.as_str()),
                ("DestinationCidrBlock", "nope"),
                ("GatewayId", "igw-1"),
            ],
            "InvalidParameterValue",
        ),
        (
            vec![
                ("RouteTableId", rtb.as_str()),
                ("DestinationCidrBlock", "1.0.0.0/8"),
            ],
            "MissingParameter",
        ),
        (
            vec![("DestinationCidrBlock", "1.0.0.0/8")],
            "MissingParameter",
        ),
    ] {
        assert_eq!(
            m.ec2("CreateRoute", &params).await.code(),
            code,
            "{params:?}"
        );
    }
}

#[tokio::test]
async fn security_group_lifecycle() {
    let m = Mock::seeded(1);
    let create = [
        ("GroupName", "k8s-elb-a1"),
        ("GroupDescription", "lb"),
        ("TagSpecification.1.ResourceType", "security-group"),
        ("TagSpecification.1.Tag.1.Key", "k"),
        ("TagSpecification.1.Tag.1.Value", "v"),
    ];
    let r = m.ec2("CreateSecurityGroup", &create).await;
    let sg = r.one("groupId");
    assert!(sg.starts_with("sg-"), "{}", r.body);
    assert_eq!(
        m.ec2("CreateSecurityGroup", &create).await.code(),
        "InvalidGroup.Duplicate"
    );
    let rule = [
        ("GroupId", sg.as_str()),
        ("IpPermissions.1.IpProtocol", "tcp"),
        ("IpPermissions.1.FromPort", "80"),
        ("IpPermissions.1.ToPort", "80"),
        ("IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"),
    ];
    assert_eq!(
        m.ec2("AuthorizeSecurityGroupIngress", &rule)
            .await
            .one("return"),
        "true"
    );
    assert_eq!(
        m.ec2("AuthorizeSecurityGroupIngress", &rule).await.code(),
        "InvalidPermission.Duplicate"
    );
    let r = m.ec2("DescribeSecurityGroups", &[("GroupId.1", &sg)]).await;
    assert_eq!(r.one("groupName"), "k8s-elb-a1");
    assert!(
        r.body
            .contains("<ipPermissions><item><ipProtocol>tcp</ipProtocol><fromPort>80</fromPort>"),
        "{}",
        r.body
    );
    let r = m
        .ec2(
            "DescribeSecurityGroups",
            &[("Filter.1.Name", "tag:k"), ("Filter.1.Value.1", "v")],
        )
        .await;
    assert_eq!(r.all("groupId"), vec![sg.clone()]);

    // A node group referencing the LB group blocks its deletion.
    let default = m.shared.cloud().security_groups[0].id.clone();
    let by_group = [
        ("GroupId", default.as_str()),
        ("IpPermissions.1.IpProtocol", "-1"),
        ("IpPermissions.1.Groups.1.GroupId", sg.as_str()),
    ];
    assert_eq!(
        m.ec2("AuthorizeSecurityGroupIngress", &by_group)
            .await
            .one("return"),
        "true"
    );
    assert_eq!(
        m.ec2("DeleteSecurityGroup", &[("GroupId", &sg)])
            .await
            .code(),
        "DependencyViolation"
    );
    // What cloud-provider-aws v1.37 sends to find the groups that reference an ELB's
    // group (aws-sdk-go-v2 DescribeSecurityGroups with an `ip-permission.group-id` filter).
    let referencing = m
        .ec2(
            "DescribeSecurityGroups",
            &[
                ("Filter.1.Name", "ip-permission.group-id"),
                ("Filter.1.Value.1", sg.as_str()),
            ],
        )
        .await;
    // One group (groupName once); its own id comes first, the referenced one inside.
    assert_eq!(
        referencing.all("groupName").len(),
        1,
        "{}",
        referencing.body
    );
    assert_eq!(
        referencing.all("groupId")[0],
        default,
        "{}",
        referencing.body
    );
    let by_cidr = m
        .ec2(
            "DescribeSecurityGroups",
            &[
                ("Filter.1.Name", "ip-permission.cidr"),
                ("Filter.1.Value.1", "0.0.0.0/0"),
            ],
        )
        .await;
    assert!(
        by_cidr.all("groupId").contains(&sg) && !by_cidr.all("groupId").contains(&default),
        "{}",
        by_cidr.body
    );
    assert_eq!(
        m.ec2("RevokeSecurityGroupIngress", &by_group)
            .await
            .one("return"),
        "true"
    );
    assert_eq!(
        m.ec2("RevokeSecurityGroupIngress", &by_group).await.code(),
        "InvalidPermission.NotFound"
    );
    assert_eq!(
        m.ec2("RevokeSecurityGroupIngress", &rule)
            .await
            .one("return"),
        "true"
    );
    assert_eq!(
        m.ec2("DeleteSecurityGroup", &[("GroupId", &sg)])
            .await
            .one("return"),
        "true"
    );
    assert_eq!(
        m.ec2("DeleteSecurityGroup", &[("GroupId", &sg)])
            .await
            .code(),
        "InvalidGroup.NotFound"
    );
    assert_eq!(
        m.ec2(
            "AuthorizeSecurityGroupIngress",
            &[("GroupId", default.as_str())]
        )
        .await
        .code(),
        "MissingParameter"
    );
    assert_eq!(
        m.ec2("CreateSecurityGroup", &[("GroupName", "x")])
            .await
            .code(),
        "MissingParameter"
    );
}

#[tokio::test]
async fn tags_and_instance_attributes() {
    let m = Mock::seeded(1);
    let id = m.admin().instances()[0].id.clone();
    let r = m
        .ec2(
            "CreateTags",
            &[
                ("ResourceId.1", &id),
                ("Tag.1.Key", "a"),
                ("Tag.1.Value", "1"),
                ("Tag.2.Key", "b"),
            ],
        )
        .await;
    assert_eq!(r.one("return"), "true", "{}", r.body);
    let r = m
        .ec2(
            "DescribeTags",
            &[("Filter.1.Name", "resource-id"), ("Filter.1.Value.1", &id)],
        )
        .await;
    assert_eq!(
        r.all("key"),
        vec!["Name", "a", "b", "kubernetes.io/cluster/ccm-conformance"]
    );
    assert!(r.body.contains("<resourceType>instance</resourceType>"));
    assert_eq!(
        m.ec2(
            "DeleteTags",
            &[
                ("ResourceId.1", &id),
                ("Tag.1.Key", "a"),
                ("Tag.1.Value", "2")
            ]
        )
        .await
        .one("return"),
        "true"
    );
    assert!(
        m.admin()
            .instance(&id)
            .is_some_and(|i| i.tags.contains_key("a")),
        "value must match"
    );
    m.ec2("DeleteTags", &[("ResourceId.1", &id), ("Tag.1.Key", "a")])
        .await;
    assert!(
        m.admin()
            .instance(&id)
            .is_some_and(|i| !i.tags.contains_key("a"))
    );
    assert_eq!(
        m.ec2(
            "CreateTags",
            &[("ResourceId.1", "i-0000000000000000f"), ("Tag.1.Key", "a")]
        )
        .await
        .code(),
        "InvalidInstanceID.NotFound"
    );
    assert_eq!(
        m.ec2("CreateTags", &[("ResourceId.1", &id)]).await.code(),
        "MissingParameter"
    );

    let r = m
        .ec2(
            "ModifyInstanceAttribute",
            &[("InstanceId", &id), ("SourceDestCheck.Value", "false")],
        )
        .await;
    assert_eq!(r.one("return"), "true", "{}", r.body);
    let r = m.ec2("DescribeInstances", &[("InstanceId.1", &id)]).await;
    assert_eq!(r.one("sourceDestCheck"), "false");
    assert_eq!(
        m.ec2("ModifyInstanceAttribute", &[("InstanceId", &id)])
            .await
            .code(),
        "MissingParameter"
    );
    assert_eq!(
        m.ec2(
            "ModifyInstanceAttribute",
            &[("InstanceId", &id), ("SourceDestCheck.Value", "maybe")]
        )
        .await
        .code(),
        "InvalidParameterValue"
    );
}

#[tokio::test]
async fn classic_load_balancer_lifecycle() {
    let m = Mock::seeded(2);
    let ids: Vec<String> = m.admin().instances().into_iter().map(|i| i.id).collect();
    let subnet = m.shared.cloud().subnets[0].id.clone();
    let create = [
        ("LoadBalancerName", "a1b2"),
        ("Listeners.member.1.Protocol", "tcp"),
        ("Listeners.member.1.LoadBalancerPort", "80"),
        ("Listeners.member.1.InstancePort", "30080"),
        ("Subnets.member.1", subnet.as_str()),
        ("Tags.member.1.Key", "kubernetes.io/service-name"),
        ("Tags.member.1.Value", "default/web"),
    ];
    let r = m.elb("CreateLoadBalancer", &create).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let dns = r.one("DNSName");
    assert!(
        dns.starts_with("a1b2-") && dns.ends_with(".us-west-2.elb.amazonaws.com"),
        "{dns}"
    );
    assert!(r.body.contains("<CreateLoadBalancerResult>"));
    assert!(!r.one("RequestId").is_empty());
    assert_eq!(
        m.elb("CreateLoadBalancer", &create).await.one("DNSName"),
        dns,
        "idempotent"
    );

    let reg = [
        ("LoadBalancerName", "a1b2"),
        ("Instances.member.1.InstanceId", ids[0].as_str()),
        ("Instances.member.2.InstanceId", ids[1].as_str()),
    ];
    let r = m.elb("RegisterInstancesWithLoadBalancer", &reg).await;
    assert_eq!(r.all("InstanceId"), ids);
    let r = m
        .elb("DescribeInstanceHealth", &[("LoadBalancerName", "a1b2")])
        .await;
    assert_eq!(r.all("State"), vec!["InService", "InService"]);
    let r = m
        .elb(
            "DeregisterInstancesFromLoadBalancer",
            &[
                ("LoadBalancerName", "a1b2"),
                ("Instances.member.1.InstanceId", ids[0].as_str()),
            ],
        )
        .await;
    assert_eq!(r.all("InstanceId"), vec![ids[1].clone()]);
    let bad = [
        ("LoadBalancerName", "a1b2"),
        ("Instances.member.1.InstanceId", "i-0000000000000000f"),
    ];
    assert_eq!(
        m.elb("RegisterInstancesWithLoadBalancer", &bad)
            .await
            .code(),
        "InvalidInstance"
    );

    let hc = [
        ("LoadBalancerName", "a1b2"),
        ("HealthCheck.Target", "HTTP:10256/healthz"),
        ("HealthCheck.Interval", "10"),
        ("HealthCheck.Timeout", "5"),
        ("HealthCheck.UnhealthyThreshold", "6"),
        ("HealthCheck.HealthyThreshold", "2"),
    ];
    assert_eq!(
        m.elb("ConfigureHealthCheck", &hc).await.one("Target"),
        "HTTP:10256/healthz"
    );
    assert_eq!(
        m.elb("ConfigureHealthCheck", &hc[..3]).await.code(),
        "MissingParameter"
    );

    let l = [
        ("LoadBalancerName", "a1b2"),
        ("Listeners.member.1.Protocol", "TCP"),
        ("Listeners.member.1.LoadBalancerPort", "443"),
        ("Listeners.member.1.InstancePort", "30443"),
    ];
    assert_eq!(
        m.elb("CreateLoadBalancerListeners", &l).await.status,
        StatusCode::OK
    );
    let r = m
        .elb(
            "DescribeLoadBalancers",
            &[("LoadBalancerNames.member.1", "a1b2")],
        )
        .await;
    assert_eq!(r.all("LoadBalancerPort"), vec!["80", "443"]);
    assert_eq!(r.one("Target"), "HTTP:10256/healthz");
    assert_eq!(r.all("InstanceId"), vec![ids[1].clone()]);
    assert_eq!(r.one("Scheme"), "internet-facing");
    m.elb(
        "DeleteLoadBalancerListeners",
        &[
            ("LoadBalancerName", "a1b2"),
            ("LoadBalancerPorts.member.1", "443"),
        ],
    )
    .await;
    let r = m.elb("DescribeLoadBalancers", &[]).await;
    assert_eq!(r.all("LoadBalancerPort"), vec!["80"]);

    let r = m
        .elb(
            "ModifyLoadBalancerAttributes",
            &[
                ("LoadBalancerName", "a1b2"),
                (
                    "LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled",
                    "true",
                ),
                (
                    "LoadBalancerAttributes.ConnectionSettings.IdleTimeout",
                    "120",
                ),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m
        .elb(
            "DescribeLoadBalancerAttributes",
            &[("LoadBalancerName", "a1b2")],
        )
        .await;
    assert!(
        r.body
            .contains("<CrossZoneLoadBalancing><Enabled>true</Enabled></CrossZoneLoadBalancing>")
    );
    assert_eq!(r.one("IdleTimeout"), "120");

    m.elb(
        "AddTags",
        &[
            ("LoadBalancerNames.member.1", "a1b2"),
            ("Tags.member.1.Key", "kubernetes.io/cluster/c"),
            ("Tags.member.1.Value", "owned"),
        ],
    )
    .await;
    let r = m
        .elb("DescribeTags", &[("LoadBalancerNames.member.1", "a1b2")])
        .await;
    assert_eq!(
        r.all("Key"),
        vec!["kubernetes.io/cluster/c", "kubernetes.io/service-name"]
    );

    let sg = m.shared.cloud().security_groups[0].id.clone();
    let r = m
        .elb(
            "ApplySecurityGroupsToLoadBalancer",
            &[
                ("LoadBalancerName", "a1b2"),
                ("SecurityGroups.member.1", &sg),
            ],
        )
        .await;
    assert_eq!(r.all("member"), vec![sg.clone()]);
    assert_eq!(
        m.ec2("DeleteSecurityGroup", &[("GroupId", &sg)])
            .await
            .code(),
        "DependencyViolation"
    );
    assert_eq!(
        m.elb(
            "ApplySecurityGroupsToLoadBalancer",
            &[
                ("LoadBalancerName", "a1b2"),
                ("SecurityGroups.member.1", "sg-x")
            ]
        )
        .await
        .code(),
        "InvalidSecurityGroup"
    );

    assert_eq!(
        m.elb("DeleteLoadBalancer", &[("LoadBalancerName", "a1b2")])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        m.elb("DeleteLoadBalancer", &[("LoadBalancerName", "a1b2")])
            .await
            .status,
        StatusCode::OK
    );
    let r = m
        .elb(
            "DescribeLoadBalancers",
            &[("LoadBalancerNames.member.1", "a1b2")],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "LoadBalancerNotFound");
    assert!(r.body.contains("<ErrorResponse xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/\"><Error><Type>Sender</Type>"));
    assert!(m.admin().load_balancer_names().is_empty());
}

#[tokio::test]
async fn classic_load_balancer_errors() {
    let m = Mock::seeded(0);
    let base = [
        ("Listeners.member.1.Protocol", "TCP"),
        ("Listeners.member.1.LoadBalancerPort", "80"),
        ("Listeners.member.1.InstancePort", "30080"),
        ("AvailabilityZones.member.1", "us-west-2a"),
    ];
    let with = |name: &'static str| {
        let mut v = vec![("LoadBalancerName", name)];
        v.extend(base);
        v
    };
    assert_eq!(
        m.elb("CreateLoadBalancer", &base).await.code(),
        "MissingParameter"
    );
    assert_eq!(
        m.elb("CreateLoadBalancer", &with("bad_name")).await.code(),
        "ValidationError"
    );
    assert_eq!(
        m.elb(
            "CreateLoadBalancer",
            &with("a").into_iter().take(1).collect::<Vec<_>>()
        )
        .await
        .code(),
        "MissingParameter"
    );
    assert_eq!(
        m.elb("CreateLoadBalancer", &with("a")[..4]).await.code(),
        "ValidationError"
    );
    let mut sub = with("a");
    sub.push(("Subnets.member.1", "subnet-x"));
    assert_eq!(
        m.elb("CreateLoadBalancer", &sub).await.code(),
        "SubnetNotFound"
    );
    assert_eq!(
        m.elb("CreateLoadBalancer", &with("a")).await.status,
        StatusCode::OK
    );
    let mut other = with("a");
    other[2] = ("Listeners.member.1.LoadBalancerPort", "81");
    assert_eq!(
        m.elb("CreateLoadBalancer", &other).await.code(),
        "DuplicateLoadBalancerName"
    );
    for action in [
        "DescribeLoadBalancerAttributes",
        "ConfigureHealthCheck",
        "DescribeInstanceHealth",
    ] {
        let r = m
            .elb(
                action,
                &[
                    ("LoadBalancerName", "zz"),
                    ("HealthCheck.Target", "TCP:1"),
                    ("HealthCheck.Interval", "1"),
                    ("HealthCheck.Timeout", "1"),
                    ("HealthCheck.UnhealthyThreshold", "1"),
                    ("HealthCheck.HealthyThreshold", "1"),
                ],
            )
            .await;
        assert_eq!(r.code(), "LoadBalancerNotFound", "{action}");
    }
    assert_eq!(m.elb("DescribeTags", &[]).await.code(), "MissingParameter");
    assert_eq!(m.elb("Frobnicate", &[]).await.code(), "InvalidAction");
}

#[tokio::test]
async fn protocol_errors() {
    let m = Mock::seeded(0);
    let r = m.ec2("Frobnicate", &[]).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "InvalidAction".to_string())
    );
    let c = m.shared.config.clone();
    let key = (c.access_key_id.as_str(), c.secret_access_key.as_str());
    let r = m
        .signed("Version=2016-11-15".into(), key, &c.region, "ec2")
        .await;
    assert_eq!(r.code(), "MissingParameter");
    let r = m
        .signed("Action=DescribeVpcs".into(), key, &c.region, "ec2")
        .await;
    assert_eq!(r.code(), "MissingParameter");
    let r = m
        .signed(
            "Action=DescribeVpcs&Version=2016-11-15&Action=X".into(),
            key,
            &c.region,
            "ec2",
        )
        .await;
    assert_eq!(r.code(), "MalformedQueryString");
    let r = m.call(ELBV2, "Frobnicate", &[]).await;
    assert_eq!(r.code(), "InvalidAction");
    assert!(r.body.contains("<ErrorResponse"));

    let big = format!(
        "Action=DescribeVpcs&Version=2016-11-15&Pad={}",
        "x".repeat(crate::BODY_LIMIT)
    );
    let r = m.signed(big, key, &c.region, "ec2").await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.code(), "RequestEntityTooLarge");

    let req = Request::builder()
        .method("PUT")
        .uri("/")
        .body(Body::empty())
        .expect("req");
    assert_eq!(m.raw(req).await.status, StatusCode::METHOD_NOT_ALLOWED);
    let req = Request::builder()
        .uri("/nothing")
        .body(Body::empty())
        .expect("req");
    let r = m.raw(req).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "InvalidAction".to_string())
    );
}

#[tokio::test]
async fn signatures_are_verified() {
    let m = Mock::seeded(0);
    let c = m.shared.config.clone();
    let body = || "Action=DescribeVpcs&Version=2016-11-15".to_string();
    let elb = || "Action=DescribeLoadBalancers&Version=2012-06-01".to_string();
    let good = (c.access_key_id.as_str(), c.secret_access_key.as_str());
    let wrong_secret = (c.access_key_id.as_str(), "not-the-secret");
    let unknown = ("AKIAUNKNOWN", c.secret_access_key.as_str());
    assert_eq!(
        m.signed(body(), good, &c.region, "ec2").await.status,
        StatusCode::OK
    );

    let r = m.signed(body(), wrong_secret, &c.region, "ec2").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, "SignatureDoesNotMatch".to_string())
    );
    let r = m
        .signed(elb(), wrong_secret, &c.region, "elasticloadbalancing")
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, "SignatureDoesNotMatch".to_string())
    );
    assert!(r.body.contains("<ErrorResponse"));
    let r = m.signed(body(), unknown, &c.region, "ec2").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, "AuthFailure".to_string())
    );
    let r = m
        .signed(elb(), unknown, &c.region, "elasticloadbalancing")
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, "InvalidClientTokenId".to_string())
    );
    let r = m.signed(body(), good, "eu-west-1", "ec2").await;
    assert_eq!(r.code(), "SignatureDoesNotMatch");
    let r = m
        .signed(body(), good, &c.region, "elasticloadbalancing")
        .await;
    assert_eq!(r.code(), "SignatureDoesNotMatch");

    let unsigned = || {
        Request::builder()
            .method("POST")
            .uri("/")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(body()))
            .expect("req")
    };
    let r = m.raw(unsigned()).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, "AuthFailure".to_string())
    );
    let open = Mock::with(Config {
        nodes: 0,
        verify_signatures: false,
        ..Config::default()
    });
    let r = open.raw(unsigned()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.contains("<vpcSet>"));
    let get = Request::builder()
        .uri("/?Action=DescribeVpcs&Version=2016-11-15")
        .body(Body::empty())
        .expect("req");
    assert_eq!(open.raw(get).await.status, StatusCode::OK);
}

#[tokio::test]
async fn faults_and_journal() {
    let m = Mock::seeded(1);
    let (status, body) = m
        .admin_json(
            "POST",
            "/admin/faults",
            json!({"service": "ec2", "path": "DescribeInstances", "status": 503, "count": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let r = m.ec2("DescribeInstances", &[]).await;
    assert_eq!(
        (r.status, r.code()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "RequestLimitExceeded".to_string()
        )
    );
    assert_eq!(m.ec2("DescribeInstances", &[]).await.status, StatusCode::OK);
    m.admin().faults().add(FaultJson {
        service: Some("elb".into()),
        status: 400,
        count: Some(1),
        ..Default::default()
    });
    let r = m.elb("DescribeLoadBalancers", &[]).await;
    assert_eq!(r.code(), "Throttling");
    assert!(r.body.contains("<Type>Sender</Type>"));

    let entries = m.admin().journal().entries();
    let summary: Vec<(&str, &str, u16, bool)> = entries
        .iter()
        .map(|e| {
            (
                e.service.as_str(),
                e.query.split('&').next().unwrap_or(""),
                e.status,
                e.fault.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("admin", "", 201, false),
            ("ec2", "Action=DescribeInstances", 503, true),
            ("ec2", "Action=DescribeInstances", 200, false),
            ("elb", "Action=DescribeLoadBalancers", 400, true),
        ]
    );
    assert!(
        entries[1]
            .query
            .starts_with("Action=DescribeInstances&Version=2016-11-15")
    );
    // The harness reads the Action from `operation`, not from the query.
    let operations: Vec<Option<&str>> = entries.iter().map(|e| e.operation.as_deref()).collect();
    assert_eq!(
        operations,
        vec![
            None,
            Some("DescribeInstances"),
            Some("DescribeInstances"),
            Some("DescribeLoadBalancers"),
        ]
    );
}

#[tokio::test]
async fn admin_instances_and_reset() {
    let m = Mock::seeded(2);
    let before = m.admin().instances();
    let (status, body) = m.admin_json("GET", "/admin/instances", Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["instances"][0]["name"], "node-0");
    assert_eq!(
        body["instances"][0]["private_dns_name"],
        "ip-127-40-0-10.us-west-2.compute.internal"
    );

    let (status, body) = m
        .admin_json(
            "POST",
            "/admin/instances",
            json!({"name": "extra", "zone": "us-west-2c", "public_ip": false, "tags": {"x": "y"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["private_ip"], "127.42.0.10");
    assert!(body["public_ip"].is_null());
    let id = body["id"].as_str().expect("id").to_string();
    assert_eq!(body["provider_id"], format!("aws:///us-west-2c/{id}"));
    let (status, body) = m
        .admin_json(
            "PATCH",
            &format!("/admin/instances/{id}"),
            json!({"state": "stopped", "public_ip": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "stopped");
    let r = m.ec2("DescribeInstances", &[("InstanceId.1", &id)]).await;
    assert!(r.body.contains("<name>stopped</name>"));
    assert!(r.one("ipAddress").starts_with("127.50."));
    let (status, _) = m
        .admin_json("GET", &format!("/admin/instances/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);

    for (body, want) in [
        (json!({"zone": "mars"}), StatusCode::BAD_REQUEST),
        (json!({"bogus": 1}), StatusCode::BAD_REQUEST),
        (json!({"private_ip": "127.40.0.10"}), StatusCode::CONFLICT),
        (json!({"state": "exploded"}), StatusCode::BAD_REQUEST),
    ] {
        let (status, err) = m.admin_json("POST", "/admin/instances", body.clone()).await;
        assert_eq!(status, want, "{body}");
        assert!(err["error"].is_string(), "{body}");
    }
    let (status, _) = m
        .admin_json("PATCH", "/admin/instances/i-none", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = m
        .admin_json("DELETE", &format!("/admin/instances/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let r = m.ec2("DescribeInstances", &[("InstanceId.1", &id)]).await;
    assert_eq!(r.code(), "InvalidInstanceID.NotFound");
    let (status, _) = m
        .admin_json("DELETE", &format!("/admin/instances/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    m.elb(
        "CreateLoadBalancer",
        &[
            ("LoadBalancerName", "x"),
            ("Listeners.member.1.Protocol", "TCP"),
            ("Listeners.member.1.LoadBalancerPort", "80"),
            ("Listeners.member.1.InstancePort", "30080"),
            ("AvailabilityZones.member.1", "us-west-2a"),
        ],
    )
    .await;
    let (_, body) = m
        .admin_json("GET", "/admin/loadbalancers", Value::Null)
        .await;
    assert_eq!(body["classic"], json!(["x"]));
    let (status, _) = m.admin_json("POST", "/admin/reset", Value::Null).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(m.admin().instances(), before);
    assert!(m.admin().load_balancer_names().is_empty());
    m.admin().reset();
    assert!(m.admin().journal().is_empty());
}

#[tokio::test]
async fn elbv2_network_load_balancer_lifecycle() {
    let m = Mock::seeded(2);
    let ids: Vec<String> = m.admin().instances().into_iter().map(|i| i.id).collect();
    let (subnet, vpc) = {
        let c = m.shared.cloud();
        (c.subnets[0].id.clone(), c.vpcs[0].id.clone())
    };
    let (status, _) = m
        .admin_json(
            "PUT",
            "/admin/lifecycle/elbv2",
            json!({"mode": "reads", "n": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let r = m
        .call(
            ELBV2,
            "CreateLoadBalancer",
            &[
                ("Name", "k8s-nlb"),
                ("Type", "network"),
                ("Subnets.member.1", &subnet),
                ("Scheme", "internet-facing"),
                ("Tags.member.1.Key", "kubernetes.io/service-name"),
                ("Tags.member.1.Value", "default/web"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.contains("<CreateLoadBalancerResponse xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/\">"));
    let lb = r.one("LoadBalancerArn");
    assert!(lb.contains(":loadbalancer/net/k8s-nlb/"), "{lb}");
    assert_eq!(r.one("Code"), "provisioning");
    assert!(r.one("DNSName").ends_with(".elb.us-west-2.amazonaws.com"));
    let mut states = Vec::new();
    for _ in 0..3 {
        let r = m
            .call(
                ELBV2,
                "DescribeLoadBalancers",
                &[("Names.member.1", "k8s-nlb")],
            )
            .await;
        states.push(r.one("Code"));
    }
    assert_eq!(states, vec!["provisioning", "provisioning", "active"]);

    let r = m
        .call(
            ELBV2,
            "CreateTargetGroup",
            &[
                ("Name", "k8s-default-web-abc"),
                ("Protocol", "TCP"),
                ("Port", "30080"),
                ("VpcId", &vpc),
                ("TargetType", "instance"),
            ],
        )
        .await;
    let tg = r.one("TargetGroupArn");
    assert!(
        tg.contains(":targetgroup/k8s-default-web-abc/"),
        "{}",
        r.body
    );
    let reg = [
        ("TargetGroupArn", tg.as_str()),
        ("Targets.member.1.Id", ids[0].as_str()),
        ("Targets.member.2.Id", ids[1].as_str()),
    ];
    assert_eq!(
        m.call(ELBV2, "RegisterTargets", &reg).await.status,
        StatusCode::OK
    );
    let r = m
        .call(ELBV2, "DescribeTargetHealth", &[("TargetGroupArn", &tg)])
        .await;
    assert_eq!(r.all("State"), vec!["unused", "unused"]);
    assert_eq!(r.one("Reason"), "Target.NotInUse");

    let listener = [
        ("LoadBalancerArn", lb.as_str()),
        ("Protocol", "TCP"),
        ("Port", "80"),
        ("DefaultActions.member.1.Type", "forward"),
        ("DefaultActions.member.1.TargetGroupArn", tg.as_str()),
    ];
    let r = m.call(ELBV2, "CreateListener", &listener).await;
    let l = r.one("ListenerArn");
    assert!(l.contains(":listener/net/k8s-nlb/"), "{}", r.body);
    assert_eq!(
        m.call(ELBV2, "CreateListener", &listener).await.code(),
        "DuplicateListener"
    );
    let r = m
        .call(ELBV2, "DescribeTargetHealth", &[("TargetGroupArn", &tg)])
        .await;
    assert_eq!(r.all("State"), vec!["healthy", "healthy"]);
    assert_eq!(r.all("HealthCheckPort"), vec!["30080", "30080"]);
    m.admin()
        .update_instance(
            &ids[1],
            crate::InstancePatch {
                state: Some(crate::InstanceState::Stopped),
                ..Default::default()
            },
        )
        .expect("stop");
    let r = m
        .call(ELBV2, "DescribeTargetHealth", &[("TargetGroupArn", &tg)])
        .await;
    assert_eq!(r.all("State"), vec!["healthy", "unused"]);
    m.call(
        ELBV2,
        "DeregisterTargets",
        &[
            ("TargetGroupArn", tg.as_str()),
            ("Targets.member.1.Id", ids[1].as_str()),
        ],
    )
    .await;
    let r = m
        .call(ELBV2, "DescribeTargetGroups", &[("LoadBalancerArn", &lb)])
        .await;
    assert_eq!(r.all("TargetGroupArn"), vec![tg.clone()]);
    assert_eq!(
        r.all("LoadBalancerArns"),
        vec![format!("<member>{lb}</member>")]
    );
    let r = m
        .call(ELBV2, "DescribeListeners", &[("LoadBalancerArn", &lb)])
        .await;
    assert_eq!(r.all("Port"), vec!["80"]);
    let r = m
        .call(
            ELBV2,
            "ModifyListener",
            &[("ListenerArn", &l), ("Port", "8080")],
        )
        .await;
    assert_eq!(r.one("Port"), "8080", "{}", r.body);

    let r = m
        .call(
            ELBV2,
            "ModifyTargetGroupAttributes",
            &[
                ("TargetGroupArn", &tg),
                ("Attributes.member.1.Key", "proxy_protocol_v2.enabled"),
                ("Attributes.member.1.Value", "true"),
            ],
        )
        .await;
    assert!(
        r.body
            .contains("<Key>proxy_protocol_v2.enabled</Key><Value>true</Value>"),
        "{}",
        r.body
    );
    let r = m
        .call(
            ELBV2,
            "ModifyLoadBalancerAttributes",
            &[
                ("LoadBalancerArn", &lb),
                (
                    "Attributes.member.1.Key",
                    "load_balancing.cross_zone.enabled",
                ),
                ("Attributes.member.1.Value", "true"),
            ],
        )
        .await;
    assert!(
        r.body
            .contains("<Key>load_balancing.cross_zone.enabled</Key><Value>true</Value>")
    );
    let sg = m.shared.cloud().security_groups[0].id.clone();
    let r = m
        .call(
            ELBV2,
            "SetSecurityGroups",
            &[("LoadBalancerArn", &lb), ("SecurityGroups.member.1", &sg)],
        )
        .await;
    assert_eq!(r.all("member"), vec![sg]);
    m.call(
        ELBV2,
        "AddTags",
        &[
            ("ResourceArns.member.1", &tg),
            ("Tags.member.1.Key", "a"),
            ("Tags.member.1.Value", "b"),
        ],
    )
    .await;
    let r = m
        .call(
            ELBV2,
            "DescribeTags",
            &[
                ("ResourceArns.member.1", &lb),
                ("ResourceArns.member.2", &tg),
            ],
        )
        .await;
    assert_eq!(r.all("Key"), vec!["kubernetes.io/service-name", "a"]);

    assert_eq!(
        m.call(ELBV2, "DeleteTargetGroup", &[("TargetGroupArn", &tg)])
            .await
            .code(),
        "ResourceInUse"
    );
    assert_eq!(
        m.call(ELBV2, "DeleteListener", &[("ListenerArn", &l)])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        m.call(ELBV2, "DeleteListener", &[("ListenerArn", &l)])
            .await
            .code(),
        "ListenerNotFound"
    );
    assert_eq!(
        m.call(ELBV2, "DeleteTargetGroup", &[("TargetGroupArn", &tg)])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        m.call(ELBV2, "DeleteLoadBalancer", &[("LoadBalancerArn", &lb)])
            .await
            .status,
        StatusCode::OK
    );
    let r = m
        .call(
            ELBV2,
            "DescribeLoadBalancers",
            &[("LoadBalancerArns.member.1", &lb)],
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "LoadBalancerNotFound".to_string())
    );
    assert!(m.admin().leaks().is_empty(), "{:?}", m.admin().leaks());
}

#[tokio::test]
async fn elbv2_errors_and_admin_lifecycle() {
    let m = Mock::seeded(1);
    let (subnet, vpc) = {
        let c = m.shared.cloud();
        (c.subnets[0].id.clone(), c.vpcs[0].id.clone())
    };
    let create = |kind: &'static str| {
        vec![
            ("Name", "n1"),
            ("Type", kind),
            ("Subnets.member.1", subnet.as_str()),
        ]
    };
    let r = m
        .call(ELBV2, "CreateLoadBalancer", &create("network"))
        .await;
    let lb = r.one("LoadBalancerArn");
    assert_eq!(
        m.call(ELBV2, "CreateLoadBalancer", &create("network"))
            .await
            .one("LoadBalancerArn"),
        lb
    );
    assert_eq!(
        m.call(ELBV2, "CreateLoadBalancer", &create("application"))
            .await
            .code(),
        "DuplicateLoadBalancerName"
    );
    assert_eq!(
        m.call(ELBV2, "CreateLoadBalancer", &create("gateway"))
            .await
            .code(),
        "ValidationError"
    );
    assert_eq!(
        m.call(ELBV2, "CreateLoadBalancer", &[("Name", "n2")])
            .await
            .code(),
        "ValidationError"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "CreateLoadBalancer",
            &[("Name", "n2"), ("Subnets.member.1", "subnet-x")]
        )
        .await
        .code(),
        "SubnetNotFound"
    );
    assert_eq!(
        m.call(ELBV2, "CreateLoadBalancer", &[]).await.code(),
        "MissingParameter"
    );

    // Stuck, then released through the admin API by name.
    m.admin()
        .set_elbv2_lifecycle(None, crate::LifecycleMode::Stuck)
        .expect("mode");
    let r = m
        .call(
            ELBV2,
            "CreateLoadBalancer",
            &[
                ("Name", "held"),
                ("Type", "network"),
                ("Subnets.member.1", &subnet),
            ],
        )
        .await;
    assert_eq!(r.one("Code"), "provisioning");
    for _ in 0..3 {
        let r = m
            .call(
                ELBV2,
                "DescribeLoadBalancers",
                &[("Names.member.1", "held")],
            )
            .await;
        assert_eq!(r.one("Code"), "provisioning");
    }
    let (status, _) = m
        .admin_json(
            "PUT",
            "/admin/lifecycle/elbv2/held",
            json!({"mode": "error"}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let r = m
        .call(
            ELBV2,
            "DescribeLoadBalancers",
            &[("Names.member.1", "held")],
        )
        .await;
    assert_eq!(r.one("Code"), "failed");
    let (_, body) = m
        .admin_json("GET", "/admin/loadbalancers", Value::Null)
        .await;
    let states: Vec<&str> = body["v2"]
        .as_array()
        .expect("v2")
        .iter()
        .filter_map(|l| l["state"].as_str())
        .collect();
    assert_eq!(states.len(), 2);
    assert!(states.contains(&"failed"));
    let (status, _) = m
        .admin_json(
            "PUT",
            "/admin/lifecycle/elbv2/none",
            json!({"mode": "immediate"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = m
        .admin_json(
            "PUT",
            "/admin/lifecycle/elbv2",
            json!({"mode": "seconds", "t": -1.0}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = m
        .admin_json(
            "PUT",
            "/admin/lifecycle/elbv2",
            json!({"mode": "sometimes"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, body) = m.admin_json("GET", "/admin/leaks", Value::Null).await;
    assert_eq!(body["leaks"].as_array().map(Vec::len), Some(2));

    assert_eq!(
        m.call(
            ELBV2,
            "CreateTargetGroup",
            &[("Name", "t"), ("Protocol", "TCP"), ("VpcId", &vpc)]
        )
        .await
        .code(),
        "ValidationError"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "CreateTargetGroup",
            &[
                ("Name", "t"),
                ("Protocol", "TCP"),
                ("Port", "1"),
                ("VpcId", "vpc-x")
            ]
        )
        .await
        .code(),
        "ValidationError"
    );
    let tg = m
        .call(
            ELBV2,
            "CreateTargetGroup",
            &[
                ("Name", "t"),
                ("Protocol", "TCP"),
                ("Port", "1"),
                ("VpcId", &vpc),
            ],
        )
        .await
        .one("TargetGroupArn");
    assert_eq!(
        m.call(
            ELBV2,
            "CreateTargetGroup",
            &[
                ("Name", "t"),
                ("Protocol", "UDP"),
                ("Port", "1"),
                ("VpcId", &vpc)
            ]
        )
        .await
        .code(),
        "DuplicateTargetGroupName"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "RegisterTargets",
            &[
                ("TargetGroupArn", tg.as_str()),
                ("Targets.member.1.Id", "i-0000000000000000f")
            ]
        )
        .await
        .code(),
        "InvalidTarget"
    );
    assert_eq!(
        m.call(ELBV2, "RegisterTargets", &[("TargetGroupArn", tg.as_str())])
            .await
            .code(),
        "MissingParameter"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "DescribeTargetHealth",
            &[("TargetGroupArn", "arn:x:targetgroup/y")]
        )
        .await
        .code(),
        "TargetGroupNotFound"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "CreateListener",
            &[
                ("LoadBalancerArn", lb.as_str()),
                ("Protocol", "TCP"),
                ("Port", "80"),
                ("DefaultActions.member.1.Type", "forward"),
                ("DefaultActions.member.1.TargetGroupArn", "arn:nope")
            ]
        )
        .await
        .code(),
        "TargetGroupNotFound"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "CreateListener",
            &[
                ("LoadBalancerArn", "arn:nope"),
                ("Protocol", "TCP"),
                ("Port", "80"),
                ("DefaultActions.member.1.Type", "forward"),
                ("DefaultActions.member.1.TargetGroupArn", tg.as_str())
            ]
        )
        .await
        .code(),
        "LoadBalancerNotFound"
    );
    assert_eq!(
        m.call(ELBV2, "DescribeListeners", &[]).await.code(),
        "ValidationError"
    );
    assert_eq!(
        m.call(
            ELBV2,
            "DescribeTags",
            &[(
                "ResourceArns.member.1",
                "arn:aws:elasticloadbalancing:r:a:loadbalancer/net/x/y"
            )]
        )
        .await
        .code(),
        "LoadBalancerNotFound"
    );
}

/// Waits (bounded) until `addr` answers a line, or returns what it last saw.
async fn line_from(source: &str, addr: std::net::SocketAddr) -> Option<String> {
    use tokio::io::AsyncBufReadExt;
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket
        .bind(std::net::SocketAddr::new(source.parse().ok()?, 0))
        .ok()?;
    let stream = tokio::time::timeout(std::time::Duration::from_secs(1), socket.connect(addr))
        .await
        .ok()?
        .ok()?;
    let mut line = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(1),
        tokio::io::BufReader::new(stream).read_line(&mut line),
    )
    .await
    .ok()?
    .ok()?;
    Some(line.trim().to_string()).filter(|l| !l.is_empty())
}

async fn eventually_line(source: &str, addr: std::net::SocketAddr, want: Option<&str>) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = line_from(source, addr).await;
        if got.as_deref() == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{source} -> {addr}: wanted {want:?}, last saw {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn classic_data_plane_resolves_proxies_and_filters_sources() {
    let m = Mock::with(Config {
        nodes: 0,
        address_block: 201,
        ..Config::default()
    });
    let dataplane = crate::dataplane::start(m.shared.clone());
    let admin = m.admin();
    let node = admin
        .create_instance(crate::InstanceSpec {
            name: Some("node-a".into()),
            private_dns_name: Some("node-a".into()),
            public_ip_address: Some(std::net::Ipv4Addr::new(127, 20, 9, 9)),
            ..Default::default()
        })
        .expect("instance");
    assert_eq!(node.private_ip, std::net::Ipv4Addr::new(127, 40, 201, 10));
    assert_eq!(node.private_dns_name, "node-a");
    assert_eq!(node.public_ip, Some(std::net::Ipv4Addr::new(127, 20, 9, 9)));
    let r = m
        .ec2(
            "DescribeInstances",
            &[
                ("Filter.1.Name", "private-dns-name"),
                ("Filter.1.Value.1", "node-a"),
            ],
        )
        .await;
    assert_eq!(r.all("instanceId"), vec![node.id.clone()]);

    // The backend: answers its name on the instance's private IP.
    let backend = tokio::net::TcpListener::bind((node.private_ip, 0))
        .await
        .expect("bind backend");
    let port = backend.local_addr().expect("addr").port();
    let serve = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut s, _)) = backend.accept().await {
            let _ = s.write_all(b"node-a\n").await;
        }
    });
    let sg = m
        .ec2(
            "CreateSecurityGroup",
            &[("GroupName", "k8s-elb-a1"), ("GroupDescription", "d")],
        )
        .await
        .one("groupId");
    let auth = m
        .ec2(
            "AuthorizeSecurityGroupIngress",
            &[
                ("GroupId", sg.as_str()),
                ("IpPermissions.1.IpProtocol", "tcp"),
                ("IpPermissions.1.FromPort", "18080"),
                ("IpPermissions.1.ToPort", "18080"),
                ("IpPermissions.1.IpRanges.1.CidrIp", "127.0.0.2/32"),
            ],
        )
        .await;
    assert_eq!(auth.status, StatusCode::OK, "{}", auth.body);
    let port_s = port.to_string();
    let subnet = m.shared.cloud().subnets[0].id.clone();
    let r = m
        .elb(
            "CreateLoadBalancer",
            &[
                ("LoadBalancerName", "a1"),
                ("Listeners.member.1.Protocol", "TCP"),
                ("Listeners.member.1.LoadBalancerPort", "18080"),
                ("Listeners.member.1.InstancePort", port_s.as_str()),
                ("Subnets.member.1", subnet.as_str()),
                ("SecurityGroups.member.1", sg.as_str()),
            ],
        )
        .await;
    let dns = r.one("DNSName");
    let vip = admin.resolve(&dns).expect("DNS name resolves");
    assert_eq!(vip, std::net::Ipv4Addr::new(127, 51, 201, 10));
    assert_eq!(admin.resolve("nope.elb.amazonaws.com"), None);
    let lb = std::net::SocketAddr::new(vip.into(), 18080);
    // No instance registered: nothing answers.
    eventually_line("127.0.0.2", lb, None).await;
    let target = format!("TCP:{port}");
    m.elb(
        "ConfigureHealthCheck",
        &[
            ("LoadBalancerName", "a1"),
            ("HealthCheck.Target", target.as_str()),
            ("HealthCheck.Interval", "10"),
            ("HealthCheck.Timeout", "5"),
            ("HealthCheck.UnhealthyThreshold", "2"),
            ("HealthCheck.HealthyThreshold", "2"),
        ],
    )
    .await;
    m.elb(
        "RegisterInstancesWithLoadBalancer",
        &[
            ("LoadBalancerName", "a1"),
            ("Instances.member.1.InstanceId", node.id.as_str()),
        ],
    )
    .await;
    eventually_line("127.0.0.2", lb, Some("node-a")).await;
    // Outside the security group's ranges: refused.
    eventually_line("127.0.0.3", lb, None).await;
    m.elb("DeleteLoadBalancer", &[("LoadBalancerName", "a1")])
        .await;
    eventually_line("127.0.0.2", lb, None).await;
    dataplane.shutdown().await;
    serve.abort();
}

#[tokio::test]
async fn faults_can_target_one_instance_and_admin_routes() {
    let m = Mock::seeded(2);
    let admin = m.admin();
    let [a, b]: [crate::InstanceInfo; 2] = admin.instances().try_into().expect("two");
    admin.faults().add(mock_cloud::FaultJson {
        service: Some("ec2".into()),
        path: Some(format!(
            "^/DescribeInstances/(.*/)?({}|{})(/|$)",
            a.id, a.private_dns_name
        )),
        status: 503,
        ..Default::default()
    });
    let by_id = m
        .ec2("DescribeInstances", &[("InstanceId.1", a.id.as_str())])
        .await;
    assert_eq!(by_id.code(), "RequestLimitExceeded");
    let by_name = m
        .ec2(
            "DescribeInstances",
            &[
                ("Filter.1.Name", "private-dns-name"),
                ("Filter.1.Value.1", a.private_dns_name.as_str()),
            ],
        )
        .await;
    assert_eq!(by_name.code(), "RequestLimitExceeded");
    let other = m
        .ec2("DescribeInstances", &[("InstanceId.1", b.id.as_str())])
        .await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.body);

    admin.add_route("10.244.0.0/24", &a.id).expect("route");
    assert!(
        admin.add_route("10.244.0.0/24", &b.id).is_err(),
        "duplicate"
    );
    assert!(admin.add_route("10.244.1.0/24", "i-00000000").is_err());
    assert!(
        admin
            .routes()
            .iter()
            .any(|(_, d, t)| d == "10.244.0.0/24" && *t == a.id)
    );
    assert!(!admin.vpc_id().is_empty());
    assert_eq!(admin.subnets().len(), 3);
}

#[tokio::test]
async fn admin_resolves_load_balancer_names() {
    let m = Mock::seeded(0);
    let subnet = m.shared.cloud().subnets[0].id.clone();
    let dns = m
        .elb(
            "CreateLoadBalancer",
            &[
                ("LoadBalancerName", "r1"),
                ("Listeners.member.1.Protocol", "TCP"),
                ("Listeners.member.1.LoadBalancerPort", "80"),
                ("Listeners.member.1.InstancePort", "30080"),
                ("Subnets.member.1", subnet.as_str()),
            ],
        )
        .await
        .one("DNSName");
    let (status, body) = m
        .admin_json("GET", &format!("/admin/resolve/{dns}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["address"], "127.51.0.10");
    let (status, _) = m
        .admin_json("GET", "/admin/resolve/nope.example", Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn instances_carry_secondary_private_ips_and_ipv6_addresses() {
    let m = Mock::seeded(0);
    let admin = m.admin();
    let free = admin.free_private_ips(None, 2).expect("free");
    assert_eq!(free.len(), 2);
    let info = admin
        .create_instance(crate::InstanceSpec {
            private_ip: Some(free[0]),
            secondary_private_ips: vec![free[1]],
            ipv6_addresses: vec!["fd00::1".parse().expect("v6")],
            public_ip: Some(false),
            ..Default::default()
        })
        .expect("create");
    assert_eq!(info.secondary_private_ips, vec![free[1]]);
    let r = m
        .ec2("DescribeInstances", &[("InstanceId.1", info.id.as_str())])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let ips: Vec<String> = r.all("privateIpAddress");
    // Instance, ENI, then the ENI's address set: primary first, then the secondary.
    assert!(
        ips.ends_with(&[free[0].to_string(), free[1].to_string()]),
        "{ips:?}"
    );
    assert_eq!(r.all("primary"), vec!["true", "false"]);
    assert_eq!(r.all("ipv6Address"), vec!["fd00::1"]);
    assert!(r.all("ipAddress").is_empty(), "no public IP: {}", r.body);
    // The secondary is taken now; a second instance cannot have it.
    assert!(
        !admin
            .free_private_ips(None, 5)
            .expect("free")
            .contains(&free[1])
    );
    let taken = admin.create_instance(crate::InstanceSpec {
        secondary_private_ips: vec![free[1]],
        ..Default::default()
    });
    assert!(
        matches!(taken, Err(crate::AdminError::AddressInUse(_))),
        "{taken:?}"
    );
    let outside = admin.update_instance(
        &info.id,
        crate::InstancePatch {
            secondary_private_ips: Some(vec!["10.0.0.1".parse().expect("ip")]),
            ..Default::default()
        },
    );
    assert!(
        matches!(outside, Err(crate::AdminError::Invalid { .. })),
        "{outside:?}"
    );
    let cleared = admin
        .update_instance(
            &info.id,
            crate::InstancePatch {
                secondary_private_ips: Some(vec![]),
                ipv6_addresses: Some(vec![]),
                ..Default::default()
            },
        )
        .expect("update");
    assert!(cleared.secondary_private_ips.is_empty() && cleared.ipv6_addresses.is_empty());
}

#[tokio::test]
async fn fault_engine_matches_actions_and_resources() {
    let m = Mock::seeded(2);
    let ids: Vec<String> = m.admin().instances().into_iter().map(|i| i.id).collect();
    let (status, body) = m
        .admin_json(
            "POST",
            "/admin/faults",
            json!({"cloud": "aws", "operation": "DescribeInstances", "resource": ids[0],
                   "kind": "error", "status": 500, "count": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Another instance is not affected; the targeted one is, once.
    let other = m
        .ec2("DescribeInstances", &[("InstanceId.1", ids[1].as_str())])
        .await;
    assert_eq!(other.status, StatusCode::OK);
    let hit = m
        .ec2("DescribeInstances", &[("InstanceId.1", ids[0].as_str())])
        .await;
    assert_eq!(
        (hit.status, hit.code()),
        (StatusCode::INTERNAL_SERVER_ERROR, "InternalError".into())
    );
    let again = m
        .ec2("DescribeInstances", &[("InstanceId.1", ids[0].as_str())])
        .await;
    assert_eq!(again.status, StatusCode::OK);

    // Throttle: EC2's own preset.
    m.admin_json(
        "POST",
        "/admin/faults",
        json!({"operation": "DescribeRouteTables", "kind": "throttle", "count": 1}),
    )
    .await;
    let throttled = m.ec2("DescribeRouteTables", &[]).await;
    assert_eq!(throttled.code(), "RequestLimitExceeded");
}

#[tokio::test]
async fn not_found_after_create_hides_a_new_instance_from_describe() {
    let m = Mock::seeded(0);
    m.admin_json(
        "POST",
        "/admin/faults",
        json!({"operation": "DescribeInstances", "kind": "not_found_after_create",
               "window_reads": 1}),
    )
    .await;
    let run = m
        .ec2(
            "RunInstances",
            &[("ImageId", "ami-1"), ("MinCount", "1"), ("MaxCount", "1")],
        )
        .await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    let id = run.one("instanceId");
    let first = m
        .ec2("DescribeInstances", &[("InstanceId.1", id.as_str())])
        .await;
    assert_eq!(
        (first.status, first.code()),
        (StatusCode::BAD_REQUEST, "InvalidInstanceID.NotFound".into())
    );
    let second = m
        .ec2("DescribeInstances", &[("InstanceId.1", id.as_str())])
        .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
}

#[tokio::test]
async fn a_reset_fault_drops_the_connection() {
    let m = Mock::with(Config {
        verify_signatures: false,
        ..Config::default()
    });
    m.admin_json(
        "POST",
        "/admin/faults",
        json!({"operation": "DescribeVpcs", "kind": "reset", "count": 1}),
    )
    .await;
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", "DescribeVpcs")
        .append_pair("Version", EC2);
    let body = form.finish();
    // Unsigned: this mock does not verify signatures.
    let req = Request::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .expect("req");
    let resp = m.router.clone().oneshot(req).await.expect("infallible");
    assert!(
        resp.into_body().collect().await.is_err(),
        "the body must fail"
    );
    let last = m.admin().journal().entries().pop().expect("journaled");
    assert_eq!((last.status, last.fault.is_some()), (0, true));
    assert_eq!(m.ec2("DescribeVpcs", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_seed_file_adds_instances_and_faults_that_reset_restores() {
    let json = br#"{
        "state": {"instances": [{"name": "seeded", "zone": "us-west-2b", "public_ip": false}]},
        "faults": [{"operation": "DescribeVpcs", "kind": "error", "status": 503}],
        "lifecycle": {"types": {"loadbalancer": {"mode": "reads", "n": 2}}}
    }"#;
    let seed = crate::SeedFile::parse(json, std::path::Path::new("seed.json")).expect("seed");
    let m = Mock::with(Config {
        nodes: 1,
        seed,
        ..Config::default()
    });
    let seeded = m
        .admin()
        .instance_by_name("seeded")
        .expect("seeded instance");
    assert_eq!(
        (seeded.zone.as_str(), seeded.public_ip),
        ("us-west-2b", None)
    );
    assert_eq!(m.admin().instances().len(), 2);
    let r = m.ec2("DescribeVpcs", &[]).await;
    assert_eq!(r.code(), "RequestLimitExceeded");
    m.admin().faults().clear();
    assert_eq!(m.ec2("DescribeVpcs", &[]).await.status, StatusCode::OK);
    let (status, _) = m.admin_json("POST", "/admin/reset", Value::Null).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        m.ec2("DescribeVpcs", &[]).await.code(),
        "RequestLimitExceeded"
    );
    assert!(m.admin().instance_by_name("seeded").is_some());
    assert_eq!(
        m.shared.cloud().elbv2.mode,
        mock_cloud::Mode::Reads { n: 2 }
    );
}

#[test]
fn bad_seed_files_are_refused() {
    let build = |json: &[u8]| {
        let seed = crate::SeedFile::parse(json, std::path::Path::new("s.json"))?;
        Ok::<_, Box<dyn std::error::Error>>(
            build_shared(
                Config {
                    nodes: 0,
                    seed,
                    ..Config::default()
                },
                "http://127.0.0.1:1".into(),
            )
            .map(drop)?,
        )
    };
    assert!(build(br#"{"state": {"instances": [{"zone": "mars-1a"}]}}"#).is_err());
    assert!(build(br#"{"state": {"servers": []}}"#).is_err());
    assert!(build(br#"{"lifecycle": {"types": {"server": {"mode": "immediate"}}}}"#).is_err());
    assert!(build(br#"{"lifecycle": {"ids": {"x": {"mode": "immediate"}}}}"#).is_err());
    assert!(build(br#"{"state": {"instances": [{"name": "ok"}]}}"#).is_ok());
}

#[tokio::test]
async fn instance_topology_for_supported_types_only() {
    let m = Mock::seeded(1);
    let admin = m.admin();
    let gpu = |zone: &str| crate::InstanceSpec {
        instance_type: Some("p4d.24xlarge".into()),
        zone: Some(zone.into()),
        ..Default::default()
    };
    let a = admin.create_instance(gpu("us-west-2a")).expect("a").id;
    let b = admin.create_instance(gpu("us-west-2a")).expect("b").id;
    let c = admin.create_instance(gpu("us-west-2b")).expect("c").id;
    let r = m.ec2("DescribeInstanceTopology", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // The seeded m5.large has no topology.
    assert_eq!(r.all("instanceId"), vec![a.clone(), b.clone(), c.clone()]);
    assert_eq!(r.all("zoneId"), vec!["usw2-az1", "usw2-az1", "usw2-az2"]);
    let nodes = |id: &str, r: &Reply| -> Vec<String> {
        let start = r.body.find(id).expect("instance in body");
        let rest = &r.body[start..];
        let set = &rest[..rest.find("</networkNodeSet>").expect("node set")];
        Reply {
            status: StatusCode::OK,
            body: set.to_string(),
        }
        .all("item")
    };
    let (na, nb, nc) = (nodes(&a, &r), nodes(&b, &r), nodes(&c, &r));
    assert_eq!(na.len(), 3);
    assert!(
        na.iter().all(|n| n.starts_with("nn-") && n.len() == 20),
        "{na:?}"
    );
    assert_eq!(na, nb, "same subnet, same network nodes");
    assert_ne!(na[0], nc[0], "another zone, another spine");

    let page = m
        .ec2(
            "DescribeInstanceTopology",
            &[
                ("MaxResults", "2"),
                ("Filter.1.Name", "zone-id"),
                ("Filter.1.Value.1", "usw2-az1"),
            ],
        )
        .await;
    assert_eq!(page.all("instanceId").len(), 2);
    assert!(page.all("nextToken").is_empty());
    let first = m
        .ec2("DescribeInstanceTopology", &[("MaxResults", "1")])
        .await;
    let token = first.one("nextToken");
    let second = m
        .ec2(
            "DescribeInstanceTopology",
            &[("MaxResults", "1"), ("NextToken", token.as_str())],
        )
        .await;
    assert_eq!(second.all("instanceId"), vec![b]);
    let unknown = m
        .ec2(
            "DescribeInstanceTopology",
            &[("InstanceId.1", "i-0123456789abcdef0")],
        )
        .await;
    assert_eq!(unknown.code(), "InvalidInstanceID.NotFound");
}

/// One datagram to `addr` from `source`; the reply, if one comes within the bound.
async fn udp_exchange(
    source: std::net::Ipv4Addr,
    addr: std::net::SocketAddr,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let socket = tokio::net::UdpSocket::bind((source, 0)).await.ok()?;
    socket.send_to(payload, addr).await.ok()?;
    let mut buf = [0u8; 1500];
    let (n, _) = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        socket.recv_from(&mut buf),
    )
    .await
    .ok()?
    .ok()?;
    Some(buf[..n].to_vec())
}

async fn eventually_udp(addr: std::net::SocketAddr, payload: &[u8], want: Option<&[u8]>) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = udp_exchange(std::net::Ipv4Addr::LOCALHOST, addr, payload).await;
        if got.as_deref() == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "udp {addr}: wanted {want:?}, last saw {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// NLB UDP and TCP_UDP listeners proxy real datagrams to a UDP echo target on the
/// instance's private IP, health-checked by TCP on its own port (failing open);
/// ELB classic refuses UDP.
#[tokio::test]
async fn nlb_udp_listeners_proxy_datagrams_to_targets() {
    let m = Mock::with(Config {
        nodes: 1,
        address_block: 202,
        ..Config::default()
    });
    let dataplane = crate::dataplane::start(m.shared.clone());
    let node = m.admin().instances()[0].clone();
    let (subnet, vpc) = {
        let c = m.shared.cloud();
        (c.subnets[0].id.clone(), c.vpcs[0].id.clone())
    };
    // The target: a UDP echo (prefixed, so a reply cannot be the request looped back)
    // and a TCP health endpoint on another port, both on the node's private IP.
    let echo = tokio::net::UdpSocket::bind((node.private_ip, 0))
        .await
        .expect("bind echo");
    let echo_port = echo.local_addr().expect("addr").port();
    let echo_task = tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = echo.recv_from(&mut buf).await {
            let mut reply = b"echo:".to_vec();
            reply.extend_from_slice(&buf[..n]);
            let _ = echo.send_to(&reply, from).await;
        }
    });
    let health = tokio::net::TcpListener::bind((node.private_ip, 0))
        .await
        .expect("bind health");
    let health_port = health.local_addr().expect("addr").port().to_string();
    let health_task = tokio::spawn(async move { while health.accept().await.is_ok() {} });

    // ELB classic has no UDP.
    let r = m
        .elb(
            "CreateLoadBalancer",
            &[
                ("LoadBalancerName", "udp-classic"),
                ("Listeners.member.1.Protocol", "UDP"),
                ("Listeners.member.1.LoadBalancerPort", "53"),
                ("Listeners.member.1.InstancePort", "30053"),
                ("Subnets.member.1", subnet.as_str()),
            ],
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "ValidationError".to_string()),
        "{}",
        r.body
    );
    assert!(m.admin().load_balancer_names().is_empty());

    let r = m
        .call(
            ELBV2,
            "CreateLoadBalancer",
            &[
                ("Name", "udp-nlb"),
                ("Type", "network"),
                ("Subnets.member.1", &subnet),
            ],
        )
        .await;
    let lb = r.one("LoadBalancerArn");
    let dns = r.one("DNSName");
    m.call(
        ELBV2,
        "DescribeLoadBalancers",
        &[("Names.member.1", "udp-nlb")],
    )
    .await;
    let port_s = echo_port.to_string();
    let tg_of = |name: &'static str, protocol: &'static str, hc: Option<&'static str>| {
        let mut params = vec![
            ("Name", name.to_string()),
            ("Protocol", protocol.to_string()),
            ("Port", port_s.clone()),
            ("VpcId", vpc.clone()),
        ];
        if let Some(hc) = hc {
            params.push(("HealthCheckProtocol", hc.to_string()));
        }
        params.push(("HealthCheckPort", health_port.clone()));
        params
    };
    // Health checks are never UDP.
    let bad = tg_of("udp-bad", "UDP", Some("UDP"));
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        m.call(ELBV2, "CreateTargetGroup", &bad).await.code(),
        "ValidationError"
    );
    let mut tgs = Vec::new();
    for (name, protocol) in [("udp-tg", "UDP"), ("tcpudp-tg", "TCP_UDP")] {
        let params = tg_of(name, protocol, None);
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = m.call(ELBV2, "CreateTargetGroup", &params).await;
        assert_eq!(r.one("HealthCheckProtocol"), "TCP", "{}", r.body);
        let tg = r.one("TargetGroupArn");
        let reg = m
            .call(
                ELBV2,
                "RegisterTargets",
                &[
                    ("TargetGroupArn", tg.as_str()),
                    ("Targets.member.1.Id", node.id.as_str()),
                ],
            )
            .await;
        assert_eq!(reg.status, StatusCode::OK, "{}", reg.body);
        tgs.push(tg);
    }
    let listener = |port: &'static str, protocol: &'static str, tg: &str| {
        vec![
            ("LoadBalancerArn", lb.clone()),
            ("Port", port.to_string()),
            ("Protocol", protocol.to_string()),
            ("DefaultActions.member.1.Type", "forward".to_string()),
            ("DefaultActions.member.1.TargetGroupArn", tg.to_string()),
        ]
    };
    // A UDP listener needs a UDP target group; an NLB has no HTTP listeners.
    for (port, protocol, tg, code) in [
        ("5353", "UDP", &tgs[1], "ValidationError"),
        ("5353", "HTTP", &tgs[0], "ValidationError"),
        ("5353", "UDP", &tgs[0], ""),
        ("5354", "TCP_UDP", &tgs[1], ""),
    ] {
        let params = listener(port, protocol, tg);
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = m.call(ELBV2, "CreateListener", &params).await;
        assert_eq!(r.code(), code, "{protocol} -> {}", r.body);
    }
    let vip = m.admin().resolve(&dns).expect("DNS name resolves");
    let udp = std::net::SocketAddr::new(vip.into(), 5353);
    let both = std::net::SocketAddr::new(vip.into(), 5354);
    eventually_udp(udp, b"ping", Some(b"echo:ping")).await;
    eventually_udp(both, b"pong", Some(b"echo:pong")).await;
    // TCP_UDP also binds TCP on the same port (the target has no TCP service on the
    // traffic port, so the connection is accepted and then closed: no line).
    assert!(tokio::net::TcpStream::connect(both).await.is_ok());
    // With the TCP health port gone the only target is unhealthy, and an NLB whose
    // targets are all unhealthy fails open (AWS docs, NLB target group health checks):
    // datagrams still reach it. (Gating with a healthy peer is mock-cloud's
    // `a_fail_open_check_uses_every_backend_when_all_are_down`.)
    health_task.abort();
    let _ = health_task.await;
    eventually_udp(udp, b"ping", Some(b"echo:ping")).await;
    echo_task.abort();
    dataplane.shutdown().await;
}

/// The IMDS role's temporary key signs only together with its session token; a wrong or
/// missing token, or a token with the long-term key, is refused in each service's words.
#[tokio::test]
async fn role_credentials_need_their_session_token() {
    let m = Mock::seeded(1);
    let role = m.admin().imds_role_credentials();
    let static_key = (
        m.shared.config.access_key_id.clone(),
        m.shared.config.secret_access_key.clone(),
    );
    let send = |key: (String, String), token: Option<String>, version: &'static str| {
        let m = &m;
        async move {
            let (service, action_body) = if version == EC2 {
                ("ec2", format!("Action=DescribeInstances&Version={EC2}"))
            } else {
                (
                    "elasticloadbalancing",
                    format!("Action=DescribeLoadBalancers&Version={version}"),
                )
            };
            let uri: Uri = "/".parse().expect("uri");
            let mut headers = HeaderMap::new();
            headers.insert("host", HeaderValue::from_static("127.0.0.1:1"));
            headers.insert(
                "content-type",
                HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
            );
            if let Some(t) = &token {
                headers.insert(
                    "x-amz-security-token",
                    HeaderValue::from_str(t).expect("token"),
                );
            }
            sigv4::sign(
                &Method::POST,
                &uri,
                &mut headers,
                action_body.as_bytes(),
                (&key.0, &key.1),
                "us-west-2",
                service,
            );
            let mut req = Request::builder().method("POST").uri(uri);
            for (k, v) in &headers {
                req = req.header(k, v);
            }
            m.raw(req.body(Body::from(action_body)).expect("request"))
                .await
        }
    };
    let temp = (role.access_key_id.clone(), role.secret_access_key.clone());
    let r = send(temp.clone(), Some(role.token.clone()), EC2).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = send(temp.clone(), Some(role.token.clone()), ELB).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    for token in [None, Some(format!("{}x", role.token))] {
        let r = send(temp.clone(), token.clone(), EC2).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNAUTHORIZED, "AuthFailure".to_string()),
            "{token:?}"
        );
        let r = send(temp.clone(), token, ELB).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "InvalidClientTokenId".to_string())
        );
    }
    let r = send(static_key.clone(), Some(role.token.clone()), EC2).await;
    assert_eq!(r.code(), "AuthFailure");
    assert_eq!(send(static_key, None, EC2).await.status, StatusCode::OK);
}

/// The admin API examples of the crate docs, as written there.
#[tokio::test]
async fn admin_api_doc_examples_hold() {
    let m = Mock::seeded(2);
    let id = m.admin().instances()[0].id.clone();
    let (status, body) = m
        .admin_json(
            "POST",
            "/admin/faults",
            json!({"service": "ec2", "operation": "DescribeInstances",
                   "resource": id, "kind": "throttle", "count": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let rule = body["id"].clone();
    let (_, list) = m.admin_json("GET", "/admin/faults", Value::Null).await;
    assert_eq!(list["faults"][0]["id"], rule, "{list}");
    assert!(list["seed"].is_u64());
    // Another instance is not affected; the named one is, twice.
    let other = m.admin().instances()[1].id.clone();
    assert_eq!(
        m.ec2("DescribeInstances", &[("InstanceId.1", &other)])
            .await
            .status,
        StatusCode::OK
    );
    for _ in 0..2 {
        let r = m.ec2("DescribeInstances", &[("InstanceId.1", &id)]).await;
        assert_eq!(
            (r.status, r.code()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "RequestLimitExceeded".to_string()
            )
        );
        assert!(r.body.contains("<Response><Errors><Error>"), "{}", r.body);
    }
    assert_eq!(
        m.ec2("DescribeInstances", &[("InstanceId.1", &id)])
            .await
            .status,
        StatusCode::OK
    );
    let (_, journal) = m
        .admin_json("GET", "/admin/journal?since=0", Value::Null)
        .await;
    let faulted: Vec<&Value> = journal["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["fault"] == rule)
        .collect();
    assert_eq!(faulted.len(), 2, "{journal}");
    assert_eq!(faulted[0]["service"], "ec2");
    assert_eq!(faulted[0]["status"], 503);
    assert_eq!(
        faulted[0]["query"],
        format!("Action=DescribeInstances&Version=2016-11-15&InstanceId.1={id}").as_str()
    );
    assert_eq!(
        m.admin_json("DELETE", "/admin/faults", Value::Null).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        m.admin_json("DELETE", "/admin/journal", Value::Null)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    // Leaks: a security group created through EC2 shows until reset.
    let (_, leaks) = m.admin_json("GET", "/admin/leaks", Value::Null).await;
    assert_eq!(leaks, json!({"leaks": []}));
    let sg = m
        .ec2(
            "CreateSecurityGroup",
            &[("GroupName", "g"), ("GroupDescription", "d")],
        )
        .await
        .one("groupId");
    let (_, leaks) = m.admin_json("GET", "/admin/leaks", Value::Null).await;
    assert_eq!(leaks, json!({"leaks": [format!("security-group {sg}")]}));
    assert_eq!(
        m.admin_json("POST", "/admin/reset", Value::Null).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, leaks) = m.admin_json("GET", "/admin/leaks", Value::Null).await;
    assert_eq!(leaks, json!({"leaks": []}));
}

#[path = "proptests.rs"]
mod proptests;
