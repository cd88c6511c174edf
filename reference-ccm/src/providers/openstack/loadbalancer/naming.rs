//! Names of the Octavia load balancers this CCM makes (`kube_service_<cluster>_<ns>_<svc>`,
//! upstream `utils.GetLoadBalancerName`; the legacy `a<uid>` fallback), their cluster-name
//! component, and the process's naming scheme (the hidden, TEST ONLY
//! `--testing-lb-name-scheme`, set once at startup by the provider's factory).
//!
//! Exists apart from the load balancer's API calls because names are pure and are what
//! every lookup (and the upgrade suite) depends on; and so the provider's factory sets the
//! scheme without importing the load balancer file (which imports the provider).

use k8s_openapi::api::core::v1::Service;

use crate::options::LbNameScheme;

/// Prefix of every load balancer name this CCM creates.
pub const NAME_PREFIX: &str = "kube_service_";
/// Where the Octavia ID of a Service's load balancer is kept (upstream
/// `ServiceAnnotationLoadBalancerID`); the lookup that survives a `--cluster-name` change.
pub const LB_ID_ANNOTATION: &str = "loadbalancer.openstack.org/load-balancer-id";

/// The naming scheme of this process (`--testing-lb-name-scheme`, set once at startup).
pub(super) static NAME_SCHEME: std::sync::OnceLock<LbNameScheme> = std::sync::OnceLock::new();

/// Sets the process's load-balancer naming scheme; only the first call counts.
pub fn use_name_scheme(scheme: LbNameScheme) {
    let _ = NAME_SCHEME.set(scheme);
}

/// `kube_service_<cluster>_<namespace>_<name>`, cut to 255 bytes on a char boundary
/// (CPO `utils.GetLoadBalancerName`), or the test-only v2 name when the process was started
/// with `--testing-lb-name-scheme=v2`.
pub fn load_balancer_name(cluster: &str, service: &Service) -> String {
    load_balancer_name_in(
        NAME_SCHEME.get().copied().unwrap_or_default(),
        cluster,
        service,
    )
}

/// [`load_balancer_name`] for an explicit scheme. `V2` is deliberately different from any
/// upstream name (`kube_service_v2_...`): a CCM running it no longer finds the load
/// balancers an earlier version made, which is what the upgrade suite must catch.
pub fn load_balancer_name_in(scheme: LbNameScheme, cluster: &str, service: &Service) -> String {
    let version = match scheme {
        LbNameScheme::Legacy => "",
        LbNameScheme::V2 => "v2_",
    };
    let mut name = format!(
        "{NAME_PREFIX}{version}{cluster}_{}_{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    );
    while name.len() > 255 {
        name.pop();
    }
    name
}

/// The ID annotation, unless this process runs the test-only v2 naming scheme: that
/// scheme stands for a CCM version that neither reads nor writes the annotation, which
/// is what the upgrade suite must catch.
pub(super) fn annotated_id(service: &Service) -> Option<&str> {
    if NAME_SCHEME.get().copied().unwrap_or_default() == LbNameScheme::V2 {
        return None;
    }
    service
        .metadata
        .annotations
        .as_ref()?
        .get(LB_ID_ANNOTATION)
        .map(String::as_str)
        .filter(|id| !id.is_empty())
}

/// The cluster-name component of a `kube_service_<cluster>_<ns>_<name>` name: everything
/// between the prefix and the last two `_`-separated parts (namespace and name never hold
/// `_`), or up to the last one when the name was cut short (upstream `getClusterName`'s
/// lazy pattern gives the same). `None` for names this CCM did not make.
pub fn cluster_of_name(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let parts = rest.matches('_').count();
    let keep = match parts {
        0 => return None,
        1 => 1,
        _ => parts - 1,
    };
    let end = rest.match_indices('_').nth(keep - 1).map(|(i, _)| i)?;
    Some(&rest[..end])
}

/// Whether `lb` is one of ours named for another cluster (upstream `lbHasOldClusterName`).
pub fn has_old_cluster_name(lb_name: &str, cluster: &str) -> bool {
    cluster_of_name(lb_name).is_some_and(|c| c != cluster)
}

/// cloud-provider `DefaultLoadBalancerName`: `a` + UID without dashes, at most 32 chars.
pub fn legacy_name(service: &Service) -> Option<String> {
    let uid = service.metadata.uid.as_deref().filter(|u| !u.is_empty())?;
    let mut name: String = format!("a{}", uid.replace('-', ""));
    name.truncate(32);
    Some(name)
}
