//! What an in-tree cloud provider left behind in the cloud, so the upgrade suite can start
//! from a cluster that ran before the external CCM (ccm-behaviour.md §3 A, case UP-01): since
//! Kubernetes 1.31 the in-tree providers are gone, so instead of running them the harness
//! builds their state directly. Nodes come from [`Environment::add_in_tree_node`]; this
//! module makes the load balancers, named the way the provider named them. How each cloud
//! named and built them is in its backend (`cloud/openstack.rs`, `cloud/aws.rs`): OpenStack's
//! `kube_service_<cluster>_<namespace>_<name>` seeded through the admin API, AWS's classic
//! ELB made through the query API as the provider did; both fall back to cloud-provider's
//! `DefaultLoadBalancerName` (`cloud.go`: `a` + the Service UID without dashes, at most 32
//! characters).

use k8s_openapi::api::core::v1::Service;

use crate::cloud::{CloudControl, Instance};
pub use crate::cloud::{InTreeLoadBalancer, InTreeName};
/// The `--cluster-name` the harness gives every CCM it starts.
pub use crate::env::CLUSTER_NAME;
use crate::env::Environment;
use crate::error::CaseError;

/// The load-balancer name the in-tree provider gave `service` in a cluster named `cluster`.
pub fn in_tree_name(
    cloud: &CloudControl,
    scheme: InTreeName,
    cluster: &str,
    service: &Service,
) -> Result<String, CaseError> {
    cloud.in_tree_load_balancer_name(scheme, cluster, service)
}

/// Creates in the mock cloud the load balancer the in-tree provider made for `service`
/// (which must exist, so its node ports are allocated), named by `scheme` in the harness's
/// cluster. The caller puts [`InTreeLoadBalancer::ingress`] in the Service's status.
pub async fn seed_load_balancer(
    env: &Environment,
    scheme: InTreeName,
    service: &Service,
    nodes: &[Instance],
) -> Result<InTreeLoadBalancer, CaseError> {
    let name = in_tree_name(env.cloud(), scheme, CLUSTER_NAME, service)?;
    env.cloud()
        .seed_in_tree_load_balancer(&name, CLUSTER_NAME, service, nodes)
        .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::provider::Provider;

    #[tokio::test]
    async fn openstack_names_follow_the_provider() {
        let cloud = CloudControl::start(Provider::parse("openstack").unwrap(), 0)
            .await
            .unwrap();
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
        let cloud = CloudControl::start(Provider::parse("aws").unwrap(), 0)
            .await
            .unwrap();
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

    #[tokio::test]
    async fn vsphere_has_no_in_tree_load_balancers() {
        crate::install_crypto_provider();
        let cloud = CloudControl::start(Provider::parse("vsphere").unwrap(), 0)
            .await
            .unwrap();
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "web", "uid": "u-1"}})).unwrap();
        assert!(matches!(
            in_tree_name(&cloud, InTreeName::ServiceUid, "c1", &svc),
            Err(CaseError::Skipped(_))
        ));
        cloud.shutdown().await;
    }
}
