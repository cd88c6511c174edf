//! The annotations, tags, names and JSON accessors every part of the Azure load balancer
//! reads: its frontends and ARM calls (`loadbalancer.rs`), the rules and probes
//! (`rules`), the backend pool (`backend_pool`) and the public IPs (`public_ip`).
//!
//! Exists so those parts share them without importing the load balancer file that
//! imports them (each part imports this file, the load balancer re-exports the public
//! items), keeping imports one way.

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use crate::cloud::{CloudError, LbError};

pub const ANNOTATION_INTERNAL: &str = "service.beta.kubernetes.io/azure-load-balancer-internal";
pub const ANNOTATION_DISABLE_FLOATING_IP: &str =
    "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip";
pub const ANNOTATION_IDLE_TIMEOUT: &str =
    "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout";
pub const ANNOTATION_DISABLE_TCP_RESET: &str =
    "service.beta.kubernetes.io/azure-load-balancer-disable-tcp-reset";
pub const ANNOTATION_PROBE_PROTOCOL: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-protocol";
pub const ANNOTATION_PROBE_PATH: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-request-path";
pub const ANNOTATION_PIP_NAME: &str = "service.beta.kubernetes.io/azure-pip-name";
/// Public IP tag naming the Services using it (`consts.ServiceTagKey`).
pub const SERVICE_TAG_KEY: &str = "k8s-azure-service";
/// Public IP tag naming the cluster (`consts.ClusterNameKey`).
pub const CLUSTER_NAME_KEY: &str = "k8s-azure-cluster-name";
pub const INTERNAL_SUFFIX: &str = "-internal";

pub(super) fn lb_err(e: CloudError) -> LbError {
    LbError::Other(e.to_string())
}

pub(super) fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub(super) fn annotation_true(service: &Service, key: &str) -> bool {
    annotation(service, key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `requiresInternalLoadBalancer`.
pub fn is_internal(service: &Service) -> bool {
    annotation_true(service, ANNOTATION_INTERNAL)
}

/// `IsK8sServiceDisableLoadBalancerFloatingIP`.
pub fn floating_ip_disabled(service: &Service) -> bool {
    annotation_true(service, ANNOTATION_DISABLE_FLOATING_IP)
}

/// `cloudprovider.DefaultLoadBalancerName`: `a` + UID without dashes, at most 32 chars.
pub fn default_lb_name(service: &Service) -> String {
    let mut name = format!(
        "a{}",
        service
            .metadata
            .uid
            .as_deref()
            .unwrap_or_default()
            .replace('-', "")
    );
    name.truncate(32);
    name
}

/// `<ns>/<name>` (`getServiceName`).
pub fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_dual_stack(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .is_some_and(|f| f.len() == 2)
}

/// `getResourceByIPFamily`.
pub fn by_ip_family(resource: &str, dual_stack: bool, ipv6: bool) -> String {
    if dual_stack && ipv6 {
        format!("{resource}-IPv6")
    } else {
        resource.to_owned()
    }
}

/// `getLoadBalancerRuleName` (no internal-subnet segment).
pub fn rule_name(service: &Service, protocol: &str, port: i32, ipv6: bool) -> String {
    by_ip_family(
        &format!("{}-{protocol}-{port}", default_lb_name(service)),
        is_dual_stack(service),
        ipv6,
    )
}

/// `getPublicIPName`: `<cluster>-<a-uid>`, cut to 80 - 5.
pub fn pip_name(cluster: &str, service: &Service, ipv6: bool) -> String {
    let mut name = format!("{cluster}-{}", default_lb_name(service));
    name.truncate(75);
    by_ip_family(&name, is_dual_stack(service), ipv6)
}

pub(super) fn eq_ci(a: Option<&str>, b: Option<&str>) -> bool {
    a.unwrap_or_default()
        .eq_ignore_ascii_case(b.unwrap_or_default())
}

pub(super) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

pub(super) fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// `serviceOwnsRule` / `serviceOwnsFrontendIP`: the name starts with `a<uid>`.
pub(super) fn owned_by(name: &str, service: &Service) -> bool {
    name.to_ascii_uppercase()
        .starts_with(&default_lb_name(service).to_ascii_uppercase())
}

pub(super) fn etag(v: &Value) -> Option<String> {
    v.get("etag").and_then(Value::as_str).map(str::to_owned)
}
