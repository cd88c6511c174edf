//! A Service's allowed source ranges, as every cloud's load balancer reads them.
//!
//! Exists so the providers that restrict who reaches a load balancer (OpenStack's
//! `allowed_cidrs`, GCE's node firewall) read `spec.loadBalancerSourceRanges` the same
//! way without importing each other's folders.

use k8s_openapi::api::core::v1::Service;

/// Annotation read when `spec.loadBalancerSourceRanges` is empty (k8s `service/helpers`).
pub const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// `spec.loadBalancerSourceRanges`, else the annotation (comma separated), as
/// k8s `service/helpers.GetLoadBalancerSourceRanges`; empty = allow all.
pub fn source_ranges(service: &Service) -> Vec<String> {
    let spec_ranges = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.clone())
        .unwrap_or_default();
    let ranges: Vec<String> = if spec_ranges.is_empty() {
        service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SOURCE_RANGES_ANNOTATION))
            .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect())
            .unwrap_or_default()
    } else {
        spec_ranges.iter().map(|s| s.trim().to_owned()).collect()
    };
    ranges.into_iter().filter(|r| !r.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;

    #[test]
    fn spec_ranges_win_over_the_annotation() {
        let mut s = Service {
            spec: Some(ServiceSpec::default()),
            ..Default::default()
        };
        assert!(source_ranges(&s).is_empty());
        s.metadata.annotations = Some(
            [(
                SOURCE_RANGES_ANNOTATION.to_owned(),
                "10.0.0.0/8, 192.168.0.0/16".to_owned(),
            )]
            .into(),
        );
        assert_eq!(source_ranges(&s), vec!["10.0.0.0/8", "192.168.0.0/16"]);
        if let Some(spec) = s.spec.as_mut() {
            spec.load_balancer_source_ranges = Some(vec!["1.2.3.4/32".into()]);
        }
        assert_eq!(source_ranges(&s), vec!["1.2.3.4/32"]);
    }
}
