//! The few Prometheus metrics the harness reads, rendered by hand in text format.
//!
//! Exists so `/metrics` carries upstream's node-controller histograms
//! (`kubernetes/cloud-provider` `controllers/node/metrics.go`: buckets 1..1024 s, x4)
//! without pulling a metrics crate.

use std::fmt::Write as _;
use std::sync::Mutex;

const BUCKETS: [f64; 6] = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0];

#[derive(Debug, Default)]
struct HistogramData {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// A fixed-bucket histogram.
#[derive(Debug)]
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    data: Mutex<HistogramData>,
}

impl Histogram {
    const fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            data: Mutex::new(HistogramData {
                counts: [0; BUCKETS.len()],
                count: 0,
                sum: 0.0,
            }),
        }
    }

    pub fn observe(&self, value: f64) {
        if let Ok(mut d) = self.data.lock() {
            for (i, b) in BUCKETS.iter().enumerate() {
                if value <= *b {
                    d.counts[i] += 1;
                }
            }
            d.count += 1;
            d.sum += value;
        }
    }

    fn render(&self, out: &mut String) {
        let Ok(d) = self.data.lock() else { return };
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} histogram",
            self.name, self.help, self.name
        );
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{}_bucket{{le=\"{b}\"}} {}", self.name, d.counts[i]);
        }
        let _ = writeln!(out, "{}_bucket{{le=\"+Inf\"}} {}", self.name, d.count);
        let _ = writeln!(
            out,
            "{}_sum {}\n{}_count {}",
            self.name, d.sum, self.name, d.count
        );
    }
}

/// All metrics of the process.
#[derive(Debug)]
pub struct Metrics {
    pub taint_removal_delay: Histogram,
    pub initial_node_sync_delay: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            taint_removal_delay: Histogram::new(
                "node_controller_cloud_provider_taint_removal_delay_seconds",
                "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
            ),
            initial_node_sync_delay: Histogram::new(
                "node_controller_initial_node_sync_delay_seconds",
                "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
            ),
        }
    }
}

impl Metrics {
    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.taint_removal_delay.render(&mut out);
        self.initial_node_sync_delay.render(&mut out);
        out
    }
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
    }
}
