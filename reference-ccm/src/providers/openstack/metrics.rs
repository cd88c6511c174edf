//! The OpenStack API metrics (`cloud-provider-openstack` `pkg/metrics/metrics_api.go`:
//! `openstack_api_*`, labelled by `request` = `<resource>_<verb>`), recorded by the client
//! on every call.
//!
//! Exists so the families belong to this provider, not to the CCM's own metrics: the
//! registry's [`crate::providers::ProviderFactory::render_metrics`] appends them to
//! `/metrics`, after the route controller's and before the workqueue's.

use std::sync::OnceLock;

use crate::metrics::{Counter, DEFAULT_BUCKETS, Histogram};

/// The process-wide OpenStack API metrics.
#[derive(Debug)]
pub struct ApiMetrics {
    pub request_duration_seconds: Histogram,
    pub requests_total: Counter,
    pub request_errors_total: Counter,
}

/// The metrics every OpenStack client of the process records into.
pub fn global() -> &'static ApiMetrics {
    static GLOBAL: OnceLock<ApiMetrics> = OnceLock::new();
    GLOBAL.get_or_init(|| ApiMetrics {
        request_duration_seconds: Histogram::labelled(
            "openstack_api_request_duration_seconds",
            "Latency of an OpenStack API call",
            "request",
            &DEFAULT_BUCKETS,
        ),
        requests_total: Counter::new(
            "openstack_api_requests_total",
            "Total number of OpenStack API calls",
            Some("request"),
        ),
        request_errors_total: Counter::new(
            "openstack_api_request_errors_total",
            "Total number of errors for an OpenStack API call",
            Some("request"),
        ),
    })
}

/// Prometheus text of the families, for `/metrics`.
pub fn render(out: &mut String) {
    let m = global();
    m.request_duration_seconds.render(out);
    m.requests_total.render(out);
    m.request_errors_total.render(out);
}
