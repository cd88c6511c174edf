//! What an in-tree cloud provider left behind in the cloud, so the upgrade suite can start
//! from a cluster that ran before the external CCM (ccm-behaviour.md §3 A, case UP-01): since
//! Kubernetes 1.31 the in-tree providers are gone, so instead of running them the harness
//! builds their state directly. Nodes come from [`Environment::add_in_tree_node`]; this
//! module makes the load balancers, named the way the provider named them.
//!
//! OpenStack (kubernetes/cloud-provider-openstack `pkg/openstack/loadbalancer.go`,
//! `pkg/util/openstack/loadbalancer.go`): `kube_service_<cluster>_<namespace>_<name>` since
//! the provider left the tree, and before that cloud-provider's `DefaultLoadBalancerName`
//! (`cloud.go`): `a` + the Service UID without dashes, at most 32 characters. One listener
//! per Service port with a default pool holding every node's `InternalIP:nodePort`.
//!
//! AWS (kubernetes/cloud-provider-aws `pkg/providers/v1/aws_loadbalancer.go`, the in-tree
//! code before the move): a classic ELB named by cloud-provider's `DefaultLoadBalancerName`
//! (`cloud.go`, the only scheme the AWS provider had, so both [`InTreeName`]s give it), in
//! the cluster's subnets, tagged `kubernetes.io/service-name` = `<ns>/<name>` and
//! `kubernetes.io/cluster/<id>` = `owned`, one TCP listener per port to the node port,
//! every node's instance registered, a `TCP:<first nodePort>` health check, and its
//! security group `k8s-elb-<name>` opening the listener ports to `0.0.0.0/0`. It is made
//! through the EC2/ELB query API ([`crate::out_of_band::AwsQuery`]) as the provider did,
//! and the ingress is the ELB's DNS name.

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::case::CaseError;
use crate::cloud::{AWS_CLUSTER_ID, CloudControl, CloudLoadBalancer, Instance};
use crate::env::Environment;
use crate::out_of_band::{AwsApi, AwsQuery, xml_text};

/// The `--cluster-name` the harness gives every CCM it starts.
pub use crate::env::CLUSTER_NAME;

/// Which of the provider's names the load balancer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTreeName {
    /// The name keyed on the cluster name (OpenStack: `kube_service_<cluster>_<ns>_<name>`).
    ClusterScoped,
    /// The oldest scheme, keyed on the Service UID (`a<uid>`, 32 characters at most).
    ServiceUid,
}

/// The load-balancer name the in-tree provider gave `service` in a cluster named `cluster`.
pub fn in_tree_name(
    cloud: &CloudControl,
    scheme: InTreeName,
    cluster: &str,
    service: &Service,
) -> Result<String, CaseError> {
    #[allow(unreachable_patterns)]
    match cloud {
        CloudControl::OpenStack(_) => match scheme {
            InTreeName::ClusterScoped => {
                let mut name = format!(
                    "kube_service_{cluster}_{}_{}",
                    service.metadata.namespace.as_deref().unwrap_or("default"),
                    service.metadata.name.as_deref().unwrap_or_default()
                );
                truncate_on_char(&mut name, 255);
                Ok(name)
            }
            InTreeName::ServiceUid => default_load_balancer_name(service),
        },
        // The AWS provider only ever had the UID name (GetLoadBalancerName).
        CloudControl::Aws(_) => default_load_balancer_name(service),
        other => Err(CaseError::Skipped(format!(
            "no in-tree load-balancer seeding for provider {}",
            other.provider().name()
        ))),
    }
}

/// cloud-provider `cloud.go` `DefaultLoadBalancerName`: `a` + the UID without dashes, at
/// most 32 characters.
fn default_load_balancer_name(service: &Service) -> Result<String, CaseError> {
    let uid = service
        .metadata
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CaseError::failed("the Service has no uid yet"))?;
    let mut name = format!("a{}", uid.replace('-', ""));
    truncate_on_char(&mut name, 32);
    Ok(name)
}

fn truncate_on_char(s: &mut String, max: usize) {
    while s.len() > max {
        s.pop();
    }
}

/// A load balancer an in-tree provider left behind, and what its Service's status said.
#[derive(Debug, Clone)]
pub struct InTreeLoadBalancer {
    pub cloud: CloudLoadBalancer,
    /// The `status.loadBalancer.ingress[0]` the in-tree service controller wrote (`ip` with
    /// `ipMode: VIP` on OpenStack, `hostname` on AWS).
    pub ingress: serde_json::Value,
    /// The address clients used (VIP or DNS name), without port.
    pub address: String,
}

/// Creates in the mock cloud the load balancer the in-tree provider made for `service`
/// (which must exist, so its node ports are allocated). OpenStack: seeded ACTIVE through
/// the admin API, one listener per port, members on every node's first internal IP. AWS:
/// made through the cloud's API (see the module docs). The caller puts
/// [`InTreeLoadBalancer::ingress`] in the Service's status.
pub async fn seed_load_balancer(
    env: &Environment,
    scheme: InTreeName,
    service: &Service,
    nodes: &[Instance],
) -> Result<InTreeLoadBalancer, CaseError> {
    let name = in_tree_name(env.cloud(), scheme, CLUSTER_NAME, service)?;
    if let CloudControl::Aws(_) = env.cloud() {
        return seed_elb(env.cloud(), &name, service, nodes).await;
    }
    let key = format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    );
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    let mut listeners = Vec::new();
    for port in &ports {
        let node_port = port
            .node_port
            .ok_or_else(|| CaseError::failed(format!("Service {key} has no nodePort yet")))?;
        let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".into());
        let members: Vec<_> = nodes
            .iter()
            .filter_map(|n| {
                let address = n.internal_ips.first()?;
                Some(json!({"name": n.name, "address": address, "protocol_port": node_port}))
            })
            .collect();
        listeners.push(json!({
            "name": format!("listener_{}_{name}", listeners.len()),
            "protocol": protocol,
            "protocol_port": port.port,
            "default_pool": {
                "name": format!("pool_{}_{name}", listeners.len()),
                "protocol": protocol,
                "lb_algorithm": "ROUND_ROBIN",
                "members": members,
            },
        }));
    }
    #[allow(unreachable_patterns)]
    let lb = match env.cloud() {
        CloudControl::OpenStack(m) => m
            .admin()
            .seed_load_balancer(json!({
                "name": name,
                "description": format!("Kubernetes external service {key} from cluster {CLUSTER_NAME}"),
                "listeners": listeners,
            }))
            .map_err(|e| CaseError::infra("seeding an in-tree load balancer", e))?,
        other => {
            return Err(CaseError::Skipped(format!(
                "no in-tree load-balancer seeding for provider {}",
                other.provider().name()
            )));
        }
    };
    let text = |k: &str| lb[k].as_str().unwrap_or_default().to_string();
    let vip = text("vip_address");
    // The in-tree provider put a floating IP on the VIP port (the harness's cloud.conf names
    // the floating network) and reported it as the ingress.
    let fip = match env.cloud() {
        CloudControl::OpenStack(m) => m
            .admin()
            .seed_floating_ip(&text("vip_port_id"))
            .map_err(|e| CaseError::infra("seeding the in-tree floating IP", e))?,
        _ => vip.clone(),
    };
    Ok(InTreeLoadBalancer {
        // What a 1.30 API server defaulted ipMode to.
        ingress: json!({"ip": fip, "ipMode": "VIP"}),
        address: fip.clone(),
        cloud: CloudLoadBalancer {
            id: text("id"),
            name: text("name"),
            vip,
            state: text("provisioning_status"),
        },
    })
}

/// The AWS in-tree provider's classic ELB for `service`, made through the query API.
async fn seed_elb(
    cloud: &CloudControl,
    name: &str,
    service: &Service,
    nodes: &[Instance],
) -> Result<InTreeLoadBalancer, CaseError> {
    let CloudControl::Aws(mock) = cloud else {
        return Err(CaseError::failed(
            "seed_elb called for a cloud other than AWS",
        ));
    };
    let admin = mock.admin();
    let aws = AwsQuery::new(&cloud.ready_info())?;
    let key = format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    );
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    let mut listeners = Vec::new();
    for port in &ports {
        let node_port = port
            .node_port
            .ok_or_else(|| CaseError::failed(format!("Service {key} has no nodePort yet")))?;
        listeners.push((port.port, node_port));
    }
    let first_node_port = listeners
        .first()
        .map(|(_, n)| *n)
        .ok_or_else(|| CaseError::failed(format!("Service {key} has no ports")))?;
    let p = |k: String, v: String| (k, v);
    let cluster_tag = format!("kubernetes.io/cluster/{AWS_CLUSTER_ID}");

    let mut group = vec![
        p("GroupName".into(), format!("k8s-elb-{name}")),
        p(
            "GroupDescription".into(),
            format!("Security group for Kubernetes ELB {name} ({key})"),
        ),
        p("VpcId".into(), admin.vpc_id()),
        p(
            "TagSpecification.1.ResourceType".into(),
            "security-group".into(),
        ),
        p("TagSpecification.1.Tag.1.Key".into(), cluster_tag.clone()),
        p("TagSpecification.1.Tag.1.Value".into(), "owned".into()),
    ];
    let answer = aws.call(AwsApi::Ec2, "CreateSecurityGroup", &group).await?;
    let group_id = xml_text(&answer, "groupId")
        .ok_or_else(|| CaseError::failed("CreateSecurityGroup answered no groupId"))?
        .to_string();
    group.clear();
    group.push(p("GroupId".into(), group_id.clone()));
    for (i, (port, _)) in listeners.iter().enumerate() {
        let k = |s: &str| format!("IpPermissions.{}.{s}", i + 1);
        group.push(p(k("IpProtocol"), "tcp".into()));
        group.push(p(k("FromPort"), port.to_string()));
        group.push(p(k("ToPort"), port.to_string()));
        group.push(p(k("IpRanges.1.CidrIp"), "0.0.0.0/0".into()));
    }
    aws.call(AwsApi::Ec2, "AuthorizeSecurityGroupIngress", &group)
        .await?;

    let mut create = vec![p("LoadBalancerName".into(), name.to_string())];
    for (i, (port, node_port)) in listeners.iter().enumerate() {
        let k = |s: &str| format!("Listeners.member.{}.{s}", i + 1);
        create.push(p(k("Protocol"), "TCP".into()));
        create.push(p(k("LoadBalancerPort"), port.to_string()));
        create.push(p(k("InstanceProtocol"), "TCP".into()));
        create.push(p(k("InstancePort"), node_port.to_string()));
    }
    // One subnet per zone, as the provider picked them.
    let mut zones = std::collections::BTreeSet::new();
    let subnets: Vec<String> = admin
        .subnets()
        .into_iter()
        .filter(|(zone, _)| zones.insert(zone.clone()))
        .map(|(_, id)| id)
        .collect();
    for (i, subnet) in subnets.iter().enumerate() {
        create.push(p(format!("Subnets.member.{}", i + 1), subnet.clone()));
    }
    create.push(p("SecurityGroups.member.1".into(), group_id));
    create.push(p(
        "Tags.member.1.Key".into(),
        "kubernetes.io/service-name".into(),
    ));
    create.push(p("Tags.member.1.Value".into(), key.clone()));
    create.push(p("Tags.member.2.Key".into(), cluster_tag));
    create.push(p("Tags.member.2.Value".into(), "owned".into()));
    let answer = aws.call(AwsApi::Elb, "CreateLoadBalancer", &create).await?;
    let dns = xml_text(&answer, "DNSName")
        .ok_or_else(|| CaseError::failed("CreateLoadBalancer answered no DNSName"))?
        .to_string();

    let health = [
        p("LoadBalancerName".into(), name.to_string()),
        p(
            "HealthCheck.Target".into(),
            format!("TCP:{first_node_port}"),
        ),
        p("HealthCheck.Interval".into(), "10".into()),
        p("HealthCheck.Timeout".into(), "5".into()),
        p("HealthCheck.UnhealthyThreshold".into(), "6".into()),
        p("HealthCheck.HealthyThreshold".into(), "2".into()),
    ];
    aws.call(AwsApi::Elb, "ConfigureHealthCheck", &health)
        .await?;
    let mut register = vec![p("LoadBalancerName".into(), name.to_string())];
    for (i, node) in nodes.iter().enumerate() {
        register.push(p(
            format!("Instances.member.{}.InstanceId", i + 1),
            node.id.clone(),
        ));
    }
    aws.call(AwsApi::Elb, "RegisterInstancesWithLoadBalancer", &register)
        .await?;

    let vip = admin
        .resolve(&dns)
        .map(|ip| ip.to_string())
        .ok_or_else(|| {
            CaseError::failed(format!("the ELB's DNS name {dns} resolves to nothing"))
        })?;
    Ok(InTreeLoadBalancer {
        ingress: json!({"hostname": dns}),
        address: dns.clone(),
        cloud: CloudLoadBalancer {
            id: name.to_string(),
            name: name.to_string(),
            vip,
            state: "active".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::Provider;

    #[tokio::test]
    async fn openstack_names_follow_the_provider() {
        let cloud = CloudControl::start(Provider::OpenStack, 0).await.unwrap();
        let svc: Service = serde_json::from_value(json!({"metadata": {
            "name": "web", "namespace": "prod",
            "uid": "12345678-aaaa-bbbb-cccc-1234567890ab1234"}}))
        .unwrap();
        assert_eq!(
            in_tree_name(&cloud, InTreeName::ClusterScoped, "c1", &svc).unwrap(),
            "kube_service_c1_prod_web"
        );
        let legacy = in_tree_name(&cloud, InTreeName::ServiceUid, "c1", &svc).unwrap();
        assert_eq!(legacy, "a12345678aaaabbbbcccc1234567890a");
        assert_eq!(legacy.len(), 32);
        let no_uid: Service = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert!(in_tree_name(&cloud, InTreeName::ServiceUid, "c1", &no_uid).is_err());
        cloud.shutdown().await;
    }

    #[tokio::test]
    async fn aws_names_are_always_the_uid_name() {
        let cloud = CloudControl::start(Provider::Aws, 0).await.unwrap();
        let svc: Service = serde_json::from_value(json!({"metadata": {
            "name": "web", "namespace": "prod",
            "uid": "12345678-aaaa-bbbb-cccc-1234567890ab"}}))
        .unwrap();
        for scheme in [InTreeName::ClusterScoped, InTreeName::ServiceUid] {
            assert_eq!(
                in_tree_name(&cloud, scheme, "c1", &svc).unwrap(),
                "a12345678aaaabbbbcccc1234567890a"
            );
        }
        cloud.shutdown().await;
    }
}
