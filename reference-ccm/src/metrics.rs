//! Prometheus metrics with upstream's names, rendered by hand in text format.
//!
//! Exists so `/metrics` carries what dashboards and the harness read from any CCM, without
//! pulling a metrics crate:
//! - node controller histograms (`kubernetes/cloud-provider` `controllers/node/metrics.go`:
//!   buckets 1..1024 s, x4), per process in [`Metrics`];
//! - service controller (`controllers/service/metrics.go`: `service_controller_*`, buckets
//!   1..16384 s, x2), route controller (`controllers/route/metrics.go`), the families each
//!   registered provider records itself (e.g. an API's request metrics) and client-go
//!   style workqueue metrics (`workqueue_*{name}`), process-wide in [`global`] because
//!   they are recorded deep in controllers and clients.
//!
//! This module knows no provider (providers use its [`Histogram`] and [`Counter`]): the
//! providers' own families are rendered by the functions `run` hands over at startup
//! ([`Metrics::with_provider_families`], from the registry's factories).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

const NODE_BUCKETS: [f64; 6] = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0];
/// `metrics.ExponentialBuckets(1, 2, 15)`.
const SERVICE_BUCKETS: [f64; 15] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
    16384.0,
];
/// Prometheus `DefBuckets`, used when upstream sets none.
pub const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default, Clone)]
struct HistogramData {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

/// A fixed-bucket histogram, optionally with one label.
#[derive(Debug)]
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    label: Option<&'static str>,
    buckets: &'static [f64],
    data: Mutex<BTreeMap<String, HistogramData>>,
}

impl Histogram {
    fn new(name: &'static str, help: &'static str, buckets: &'static [f64]) -> Self {
        Self {
            name,
            help,
            label: None,
            buckets,
            data: Mutex::new(BTreeMap::new()),
        }
    }

    /// A histogram with one label (providers' own metrics use it too).
    pub fn labelled(
        name: &'static str,
        help: &'static str,
        label: &'static str,
        buckets: &'static [f64],
    ) -> Self {
        Self {
            label: Some(label),
            ..Self::new(name, help, buckets)
        }
    }

    pub fn observe(&self, value: f64) {
        self.observe_with("", value);
    }

    pub fn observe_with(&self, label_value: &str, value: f64) {
        let Ok(mut all) = self.data.lock() else {
            return;
        };
        let d = all.entry(label_value.to_owned()).or_default();
        if d.counts.len() != self.buckets.len() {
            d.counts = vec![0; self.buckets.len()];
        }
        for (i, b) in self.buckets.iter().enumerate() {
            if value <= *b {
                d.counts[i] += 1;
            }
        }
        d.count += 1;
        d.sum += value;
    }

    /// Appends the family in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let Ok(all) = self.data.lock() else { return };
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} histogram",
            self.name, self.help, self.name
        );
        let mut series: Vec<(String, HistogramData)> =
            all.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // An unlabelled histogram shows zeros before its first observation.
        if series.is_empty() && self.label.is_none() {
            series.push((
                String::new(),
                HistogramData {
                    counts: vec![0; self.buckets.len()],
                    ..Default::default()
                },
            ));
        }
        for (value, d) in series {
            let (sel, sep) = match self.label {
                Some(l) => (format!("{l}=\"{}\"", escape(&value)), ","),
                None => (String::new(), ""),
            };
            for (i, b) in self.buckets.iter().enumerate() {
                let c = d.counts.get(i).copied().unwrap_or(0);
                let _ = writeln!(out, "{}_bucket{{{sel}{sep}le=\"{b}\"}} {c}", self.name);
            }
            let _ = writeln!(
                out,
                "{}_bucket{{{sel}{sep}le=\"+Inf\"}} {}",
                self.name, d.count
            );
            let braces = if sel.is_empty() {
                String::new()
            } else {
                format!("{{{sel}}}")
            };
            let _ = writeln!(
                out,
                "{}_sum{braces} {}\n{}_count{braces} {}",
                self.name, d.sum, self.name, d.count
            );
        }
    }
}

/// A counter or gauge, optionally with one label.
#[derive(Debug)]
pub struct Counter {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    label: Option<&'static str>,
    values: Mutex<BTreeMap<String, f64>>,
}

impl Counter {
    /// A counter, with one label or none (providers' own metrics use it too).
    pub fn new(name: &'static str, help: &'static str, label: Option<&'static str>) -> Self {
        Self {
            name,
            help,
            kind: "counter",
            label,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    fn gauge(name: &'static str, help: &'static str, label: &'static str) -> Self {
        Self {
            kind: "gauge",
            ..Self::new(name, help, Some(label))
        }
    }

    pub fn inc(&self) {
        self.add_with("", 1.0);
    }

    pub fn inc_with(&self, label_value: &str) {
        self.add_with(label_value, 1.0);
    }

    pub fn add_with(&self, label_value: &str, delta: f64) {
        if let Ok(mut v) = self.values.lock() {
            *v.entry(label_value.to_owned()).or_insert(0.0) += delta;
        }
    }

    pub fn set_with(&self, label_value: &str, value: f64) {
        if let Ok(mut v) = self.values.lock() {
            v.insert(label_value.to_owned(), value);
        }
    }

    /// The current value (tests and benchmarks).
    pub fn get(&self, label_value: &str) -> f64 {
        self.values
            .lock()
            .ok()
            .and_then(|v| v.get(label_value).copied())
            .unwrap_or(0.0)
    }

    /// Appends the family in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let Ok(values) = self.values.lock() else {
            return;
        };
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} {}",
            self.name, self.help, self.name, self.kind
        );
        match self.label {
            None => {
                let v = values.get("").copied().unwrap_or(0.0);
                let _ = writeln!(out, "{} {v}", self.name);
            }
            Some(l) => {
                for (k, v) in values.iter() {
                    let _ = writeln!(out, "{}{{{l}=\"{}\"}} {v}", self.name, escape(k));
                }
            }
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Metrics of one CCM run (created by `run`, shared with the node controller).
#[derive(Debug)]
pub struct Metrics {
    pub taint_removal_delay: Histogram,
    pub initial_node_sync_delay: Histogram,
    /// Render the families the providers record themselves, in order; none by default.
    provider_families: Vec<fn(&mut String)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            taint_removal_delay: Histogram::new(
                "node_controller_cloud_provider_taint_removal_delay_seconds",
                "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
                &NODE_BUCKETS,
            ),
            initial_node_sync_delay: Histogram::new(
                "node_controller_initial_node_sync_delay_seconds",
                "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
                &NODE_BUCKETS,
            ),
            provider_families: Vec::new(),
        }
    }
}

impl Metrics {
    /// Metrics whose [`render`](Self::render) also appends the providers' own families,
    /// each function appending some (Prometheus text format), after the route
    /// controller's families and before the workqueue's.
    pub fn with_provider_families(provider_families: Vec<fn(&mut String)>) -> Self {
        Self {
            provider_families,
            ..Self::default()
        }
    }

    /// Prometheus text exposition format: these plus the process-wide [`global`] ones.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.taint_removal_delay.render(&mut out);
        self.initial_node_sync_delay.render(&mut out);
        global().render(&mut out, &self.provider_families);
        out
    }
}

/// Metrics recorded inside controllers, queues and cloud clients.
#[derive(Debug)]
pub struct ProcessMetrics {
    pub loadbalancer_sync_total: Counter,
    pub nodesync_error_total: Counter,
    pub nodesync_latency_seconds: Histogram,
    pub update_loadbalancer_host_latency_seconds: Histogram,
    pub route_sync_total: Counter,
    pub workqueue_adds_total: Counter,
    pub workqueue_depth: Counter,
    pub workqueue_retries_total: Counter,
}

impl ProcessMetrics {
    fn new() -> Self {
        Self {
            loadbalancer_sync_total: Counter::new(
                "service_controller_loadbalancer_sync_total",
                "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
                None,
            ),
            nodesync_error_total: Counter::new(
                "service_controller_nodesync_error_total",
                "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
                None,
            ),
            nodesync_latency_seconds: Histogram::new(
                "service_controller_nodesync_latency_seconds",
                "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
                &SERVICE_BUCKETS,
            ),
            update_loadbalancer_host_latency_seconds: Histogram::new(
                "service_controller_update_loadbalancer_host_latency_seconds",
                "A metric measuring the latency for updating each load balancer hosts.",
                &SERVICE_BUCKETS,
            ),
            route_sync_total: Counter::new(
                "route_controller_route_sync_total",
                "A metric counting the amount of times routes have been synced with the cloud provider.",
                None,
            ),
            workqueue_adds_total: Counter::new(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
                Some("name"),
            ),
            workqueue_depth: Counter::gauge(
                "workqueue_depth",
                "Current depth of workqueue",
                "name",
            ),
            workqueue_retries_total: Counter::new(
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
                Some("name"),
            ),
        }
    }

    fn render(&self, out: &mut String, provider_families: &[fn(&mut String)]) {
        self.loadbalancer_sync_total.render(out);
        self.nodesync_error_total.render(out);
        self.nodesync_latency_seconds.render(out);
        self.update_loadbalancer_host_latency_seconds.render(out);
        self.route_sync_total.render(out);
        for render in provider_families {
            render(out);
        }
        self.workqueue_adds_total.render(out);
        self.workqueue_depth.render(out);
        self.workqueue_retries_total.render(out);
    }
}

/// The process-wide metrics.
pub fn global() -> &'static ProcessMetrics {
    static GLOBAL: OnceLock<ProcessMetrics> = OnceLock::new();
    GLOBAL.get_or_init(ProcessMetrics::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cumulative_buckets() {
        let m = Metrics::default();
        m.taint_removal_delay.observe(0.5);
        m.taint_removal_delay.observe(10.0);
        let text = m.render();
        assert!(text.contains(
            "node_controller_cloud_provider_taint_removal_delay_seconds_bucket{le=\"1\"} 1"
        ));
        assert!(text.contains(
            "node_controller_cloud_provider_taint_removal_delay_seconds_bucket{le=\"16\"} 2"
        ));
        assert!(
            text.contains("node_controller_cloud_provider_taint_removal_delay_seconds_count 2")
        );
        assert!(text.contains("node_controller_initial_node_sync_delay_seconds_count 0"));
        for name in [
            "service_controller_loadbalancer_sync_total",
            "service_controller_nodesync_error_total",
            "service_controller_nodesync_latency_seconds",
            "service_controller_update_loadbalancer_host_latency_seconds",
            "route_controller_route_sync_total",
            "workqueue_adds_total",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }

    /// The providers' families (the registry's are checked in `providers::registry`) come
    /// after the route controller's and before the workqueue's.
    #[test]
    fn provider_families_are_rendered_where_handed_over() {
        fn family(out: &mut String) {
            out.push_str("# TYPE some_provider_total counter\nsome_provider_total 0\n");
        }
        let text = Metrics::with_provider_families(vec![family]).render();
        let at = |needle: &str| text.find(needle).unwrap_or(usize::MAX);
        assert!(at("# HELP route_controller_route_sync_total") < at("some_provider_total"));
        assert!(at("some_provider_total") < at("# HELP workqueue_adds_total"));
        assert!(!Metrics::default().render().contains("some_provider_total"));
    }

    #[test]
    fn labelled_series() {
        let h = Histogram::labelled("x_seconds", "h", "request", &DEFAULT_BUCKETS);
        h.observe_with("server_get", 0.02);
        let c = Counter::new("x_total", "c", Some("request"));
        c.inc_with("server_get");
        c.inc_with("server_get");
        let mut out = String::new();
        h.render(&mut out);
        c.render(&mut out);
        assert!(out.contains("x_seconds_bucket{request=\"server_get\",le=\"0.01\"} 0"));
        assert!(out.contains("x_seconds_bucket{request=\"server_get\",le=\"0.025\"} 1"));
        assert!(out.contains("x_seconds_count{request=\"server_get\"} 1"));
        assert!(out.contains("x_total{request=\"server_get\"} 2"));
        assert_eq!(c.get("server_get"), 2.0);
    }
}
