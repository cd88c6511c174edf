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

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::case::CaseError;
use crate::cloud::{CloudControl, CloudLoadBalancer, Instance};
use crate::env::Environment;

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
            InTreeName::ServiceUid => {
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
        },
        other => Err(CaseError::Skipped(format!(
            "no in-tree load-balancer seeding for provider {}",
            other.provider().name()
        ))),
    }
}

fn truncate_on_char(s: &mut String, max: usize) {
    while s.len() > max {
        s.pop();
    }
}

/// Creates, directly in the mock cloud, the load balancer the in-tree provider made for
/// `service` (which must exist, so its node ports are allocated): ACTIVE, one listener per
/// port, members on every node's first internal IP. Returns it; the caller puts its VIP in
/// the Service's status.
pub fn seed_load_balancer(
    env: &Environment,
    scheme: InTreeName,
    service: &Service,
    nodes: &[Instance],
) -> Result<CloudLoadBalancer, CaseError> {
    let name = in_tree_name(env.cloud(), scheme, CLUSTER_NAME, service)?;
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
    Ok(CloudLoadBalancer {
        id: text("id"),
        name: text("name"),
        vip: text("vip_address"),
        state: text("provisioning_status"),
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
}
