//! TestGrid configuration (YAML) for a provider's bucket and job.
//!
//! Why: a provider that uploads results (KEP-2390, reference §5) still needs a test group
//! and a dashboard tab in test-infra's `config/testgrids/` before anything shows, and the
//! details that matter are easy to get wrong: `gcs_prefix` must point at the directory the
//! publisher writes (`logs/<job>` or `pr-logs/directory/<job>`, §1.1), non-Prow uploads
//! need `disable_prowjob_analysis: true` or every column grows a "Pod" failure row (§0
//! rule 8), and column headers only work for string keys of `finished.json` metadata (§1.4).
//! Field names follow testgrid `pb/config/config.proto`; defaults follow test-infra
//! `config/testgrids/default.yaml` and the externally uploaded conformance entries in
//! `config/testgrids/conformance/conformance-all.yaml` (§3).
//!
//! The YAML is written by hand (no YAML crate in the workspace); every string is emitted as
//! a JSON string, which is a valid YAML double-quoted scalar.

use crate::layout::{JobKind, JobLayout};

/// Errors in a configuration request.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} {value:?} must be a single line")]
    Multiline { field: &'static str, value: String },
    #[error("alert address {0:?} is not an e-mail address")]
    Email(String),
    #[error("bucket {0:?} is not a bucket name (give it without gs:// and without a path)")]
    Bucket(String),
}

/// What to generate. Build it with [`ConfigSpec::new`] and adjust the public fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSpec {
    /// Bucket name, without `gs://`.
    pub bucket: String,
    /// Job layout inside the bucket; gives `gcs_prefix`.
    pub layout: JobLayout,
    /// Test group name; defaults to the job name.
    pub test_group: String,
    pub dashboard: String,
    /// Dashboard group to list the dashboard in, if any.
    pub dashboard_group: Option<String>,
    pub tab_name: String,
    pub description: String,
    pub alert_emails: Vec<String>,
    pub num_failures_to_alert: u32,
    pub num_passes_to_disable_alert: u32,
    pub alert_stale_results_hours: u32,
    pub days_of_results: u32,
    pub num_columns_recent: u32,
    /// `finished.json` metadata keys shown as column headers.
    pub column_headers: Vec<String>,
    /// True when Prow ran the job (it then writes `podinfo.json`); false for uploads.
    pub prow_job: bool,
}

impl ConfigSpec {
    /// Defaults for a provider's externally uploaded CCM conformance job: dashboard
    /// `provider-<provider>-conformance` in group `provider-<provider>`, 30 days, alert after
    /// 2 failures, stale after 48 h, one pass clears, 10 recent columns (20 for presubmits,
    /// §3), headers `k8s-version`, `ccm-version`, `harness-version`, not a Prow job.
    pub fn new(provider: &str, bucket: &str, layout: JobLayout) -> Self {
        let presubmit = !matches!(layout.kind, JobKind::Periodic);
        let job = layout.job.clone();
        Self {
            bucket: bucket
                .trim_start_matches("gs://")
                .trim_end_matches('/')
                .to_string(),
            test_group: job.clone(),
            dashboard: format!("provider-{provider}-conformance"),
            dashboard_group: Some(format!("provider-{provider}")),
            tab_name: job.clone(),
            description: format!("CCM conformance (cargo test --test conformance) for {provider}"),
            alert_emails: Vec::new(),
            num_failures_to_alert: 2,
            num_passes_to_disable_alert: 1,
            alert_stale_results_hours: 48,
            days_of_results: 30,
            num_columns_recent: if presubmit { 20 } else { 10 },
            column_headers: vec![
                "k8s-version".into(),
                "ccm-version".into(),
                "harness-version".into(),
            ],
            prow_job: false,
            layout,
        }
    }

    /// `gcs_prefix`: `<bucket>/<prefix>/logs/<job>` for periodics,
    /// `<bucket>/<prefix>/pr-logs/directory/<job>` for presubmits (§1.1, §3).
    pub fn gcs_prefix(&self) -> String {
        format!("{}/{}", self.bucket, self.layout.testgrid_prefix())
    }

    fn validate(&self) -> Result<(), Error> {
        if self.bucket.is_empty() || self.bucket.contains('/') {
            return Err(Error::Bucket(self.bucket.clone()));
        }
        let mut fields = vec![
            ("test_group", &self.test_group),
            ("dashboard", &self.dashboard),
            ("tab_name", &self.tab_name),
        ];
        if let Some(group) = &self.dashboard_group {
            fields.push(("dashboard_group", group));
        }
        for (field, value) in fields {
            if value.trim().is_empty() {
                return Err(Error::Empty { field });
            }
        }
        for (field, value) in [
            ("test_group", &self.test_group),
            ("dashboard", &self.dashboard),
            ("tab_name", &self.tab_name),
            ("description", &self.description),
        ] {
            if value.contains(['\n', '\r']) {
                return Err(Error::Multiline {
                    field,
                    value: value.clone(),
                });
            }
        }
        for email in &self.alert_emails {
            let ok = email.split_once('@').is_some_and(|(u, d)| {
                !u.is_empty() && !d.is_empty() && !email.contains([',', ' ', '\n'])
            });
            if !ok {
                return Err(Error::Email(email.clone()));
            }
        }
        Ok(())
    }
}

/// A YAML scalar for `s`: a JSON string is a YAML double-quoted scalar.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Renders `spec` as a TestGrid config file with `dashboard_groups` (if a group is set),
/// `dashboards` and `test_groups`.
pub fn render(spec: &ConfigSpec) -> Result<String, Error> {
    spec.validate()?;
    let mut y = String::new();
    let mut line = |indent: usize, text: &str| {
        y.push_str(&" ".repeat(indent));
        y.push_str(text);
        y.push('\n');
    };
    line(
        0,
        "# TestGrid configuration generated by ccm-conformance (testgrid crate).",
    );
    line(0, "# Field names: testgrid pb/config/config.proto.");
    if let Some(group) = &spec.dashboard_group {
        line(0, "dashboard_groups:");
        line(0, &format!("- name: {}", q(group)));
        line(2, "dashboard_names:");
        line(2, &format!("- {}", q(&spec.dashboard)));
    }
    line(0, "dashboards:");
    line(0, &format!("- name: {}", q(&spec.dashboard)));
    line(2, "dashboard_tab:");
    line(2, &format!("- name: {}", q(&spec.tab_name)));
    line(4, &format!("test_group_name: {}", q(&spec.test_group)));
    if !spec.description.is_empty() {
        line(4, &format!("description: {}", q(&spec.description)));
    }
    if !spec.alert_emails.is_empty() {
        line(4, "alert_options:");
        // A single comma-separated string in config.proto.
        line(
            6,
            &format!(
                "alert_mail_to_addresses: {}",
                q(&spec.alert_emails.join(","))
            ),
        );
        line(
            6,
            &format!("num_failures_to_alert: {}", spec.num_failures_to_alert),
        );
        line(
            6,
            &format!(
                "alert_stale_results_hours: {}",
                spec.alert_stale_results_hours
            ),
        );
        line(
            6,
            &format!(
                "num_passes_to_disable_alert: {}",
                spec.num_passes_to_disable_alert
            ),
        );
    }
    line(0, "test_groups:");
    line(0, &format!("- name: {}", q(&spec.test_group)));
    line(2, &format!("gcs_prefix: {}", q(&spec.gcs_prefix())));
    line(2, &format!("days_of_results: {}", spec.days_of_results));
    line(
        2,
        &format!("num_columns_recent: {}", spec.num_columns_recent),
    );
    line(
        2,
        &format!("num_failures_to_alert: {}", spec.num_failures_to_alert),
    );
    line(
        2,
        &format!(
            "num_passes_to_disable_alert: {}",
            spec.num_passes_to_disable_alert
        ),
    );
    line(
        2,
        &format!(
            "alert_stale_results_hours: {}",
            spec.alert_stale_results_hours
        ),
    );
    if !spec.prow_job {
        line(2, "disable_prowjob_analysis: true");
    }
    if !spec.column_headers.is_empty() {
        line(2, "column_header:");
        for key in &spec.column_headers {
            line(2, &format!("- configuration_value: {}", q(key)));
        }
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::PullRef;

    fn periodic() -> ConfigSpec {
        let layout = JobLayout::new("", "ci-openstack-ccm-conformance", JobKind::Periodic).unwrap();
        let mut spec = ConfigSpec::new("openstack", "gs://k8s-conformance-openstack/", layout);
        spec.alert_emails = vec!["ccm@example.com".into(), "ops@example.com".into()];
        spec
    }

    // Reference §3 example shape; §0 rule 8 (disable_prowjob_analysis for uploads).
    #[test]
    fn periodic_upload_config_golden() {
        let yaml = render(&periodic()).unwrap();
        let expected = r#"# TestGrid configuration generated by ccm-conformance (testgrid crate).
# Field names: testgrid pb/config/config.proto.
dashboard_groups:
- name: "provider-openstack"
  dashboard_names:
  - "provider-openstack-conformance"
dashboards:
- name: "provider-openstack-conformance"
  dashboard_tab:
  - name: "ci-openstack-ccm-conformance"
    test_group_name: "ci-openstack-ccm-conformance"
    description: "CCM conformance (cargo test --test conformance) for openstack"
    alert_options:
      alert_mail_to_addresses: "ccm@example.com,ops@example.com"
      num_failures_to_alert: 2
      alert_stale_results_hours: 48
      num_passes_to_disable_alert: 1
test_groups:
- name: "ci-openstack-ccm-conformance"
  gcs_prefix: "k8s-conformance-openstack/logs/ci-openstack-ccm-conformance"
  days_of_results: 30
  num_columns_recent: 10
  num_failures_to_alert: 2
  num_passes_to_disable_alert: 1
  alert_stale_results_hours: 48
  disable_prowjob_analysis: true
  column_header:
  - configuration_value: "k8s-version"
  - configuration_value: "ccm-version"
  - configuration_value: "harness-version"
"#;
        assert_eq!(yaml, expected);
    }

    // Reference §1.1, §3: presubmit groups read pr-logs/directory/<job>, ≥20 columns.
    #[test]
    fn presubmit_reads_the_directory_and_prow_jobs_keep_pod_analysis() {
        let pull = PullRef::new("kubernetes/cloud-provider-openstack", 7).unwrap();
        let layout = JobLayout::new("ci", "pull-os-ccm", JobKind::Presubmit(pull)).unwrap();
        let mut spec = ConfigSpec::new("openstack", "bkt", layout);
        spec.prow_job = true;
        spec.dashboard_group = None;
        assert_eq!(spec.gcs_prefix(), "bkt/ci/pr-logs/directory/pull-os-ccm");
        assert_eq!(spec.num_columns_recent, 20);
        let yaml = render(&spec).unwrap();
        assert!(!yaml.contains("disable_prowjob_analysis"), "{yaml}");
        assert!(!yaml.contains("dashboard_groups"), "{yaml}");
        assert!(!yaml.contains("alert_options"), "{yaml}");
    }

    #[test]
    fn strings_are_quoted_and_bad_input_refused() {
        let mut spec = periodic();
        spec.description = "a: b # c \"q\" \\".into();
        let yaml = render(&spec).unwrap();
        assert!(
            yaml.contains(r#"description: "a: b # c \"q\" \\""#),
            "{yaml}"
        );
        let mut bad = periodic();
        bad.alert_emails = vec!["nobody".into()];
        assert_eq!(render(&bad), Err(Error::Email("nobody".into())));
        let mut bad = periodic();
        bad.tab_name = "two\nlines".into();
        assert!(matches!(render(&bad), Err(Error::Multiline { .. })));
        let mut bad = periodic();
        bad.bucket = "b/path".into();
        assert!(matches!(render(&bad), Err(Error::Bucket(_))));
        let mut bad = periodic();
        bad.dashboard = " ".into();
        assert!(matches!(render(&bad), Err(Error::Empty { .. })));
    }
}
