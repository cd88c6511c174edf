//! The JUnit writer: collects case results per suite and rewrites
//! `$ARTIFACTS/junit_<context>.xml` atomically after every case.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

/// Errors while writing a JUnit file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("serializing JUnit report: {0}")]
    Serialize(#[from] quick_junit::SerializeError),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// `message` is shown in one line by TestGrid; `detail` goes in the element body.
    Failed {
        message: String,
        detail: String,
    },
    /// The reason is mandatory: TestGrid shows it, and an empty one reads as a bug.
    Skipped {
        reason: String,
    },
}

/// One finished case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// `<testsuite>` it belongs to (one per provider).
    pub suite: String,
    /// Full case name, e.g. `[sig-cloud-provider] [openstack] NodeInit removes ... [Conformance]`.
    pub name: String,
    pub outcome: Outcome,
    pub duration: Duration,
    /// Numeric metrics TestGrid can graph (e.g. `taint-removal-seconds`).
    pub properties: Vec<(String, String)>,
    /// Captured output worth keeping beside the case (log excerpts).
    pub system_out: Option<String>,
}

/// `junit_<context>.xml` in `dir`; characters TestGrid would split on (`_`) or that are
/// unsafe in a file name are replaced by `-`.
pub fn junit_path(dir: &Path, context: &str) -> PathBuf {
    let clean: String = context
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    dir.join(format!("junit_{clean}.xml"))
}

/// A JUnit file that is rewritten as a whole after each recorded case.
pub struct JunitFile {
    path: PathBuf,
    report_name: String,
    cases: Mutex<BTreeMap<String, Vec<CaseResult>>>,
}

impl JunitFile {
    pub fn new(path: impl Into<PathBuf>, report_name: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            report_name: report_name.into(),
            cases: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a case and rewrites the file.
    pub fn record(&self, case: CaseResult) -> Result<(), Error> {
        let xml = {
            let mut cases = self.cases.lock().unwrap_or_else(|p| p.into_inner());
            cases.entry(case.suite.clone()).or_default().push(case);
            render(&self.report_name, &cases)?
        };
        write_atomic(&self.path, xml.as_bytes())
    }

    /// Writes the file even when no case ran (an empty but valid report).
    pub fn flush(&self) -> Result<(), Error> {
        let xml = {
            let cases = self.cases.lock().unwrap_or_else(|p| p.into_inner());
            render(&self.report_name, &cases)?
        };
        write_atomic(&self.path, xml.as_bytes())
    }
}

/// First line of `message`, at most 200 characters: TestGrid shows it in a cell.
fn one_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(200).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    if out.is_empty() {
        out.push_str("failed");
    }
    out
}

fn render(name: &str, suites: &BTreeMap<String, Vec<CaseResult>>) -> Result<String, Error> {
    let mut report = Report::new(name);
    let mut total = Duration::ZERO;
    for (suite_name, cases) in suites {
        let mut suite = TestSuite::new(suite_name.as_str());
        let mut suite_time = Duration::ZERO;
        for case in cases {
            let status = match &case.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Failed { message, detail } => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(one_line(message));
                    if !detail.is_empty() {
                        s.set_description(detail.as_str());
                    }
                    s
                }
                Outcome::Skipped { reason } => {
                    let mut s = TestCaseStatus::skipped();
                    let reason = if reason.trim().is_empty() {
                        "skipped without a reason"
                    } else {
                        reason
                    };
                    s.set_message(one_line(reason));
                    s
                }
            };
            let mut tc = TestCase::new(case.name.as_str(), status);
            tc.set_classname(suite_name.as_str());
            tc.set_time(case.duration);
            for (k, v) in &case.properties {
                tc.add_property(Property::new(k.as_str(), v.as_str()));
            }
            if let Some(out) = &case.system_out {
                tc.set_system_out(out.as_str());
            }
            suite_time += case.duration;
            suite.add_test_case(tc);
        }
        suite.set_time(suite_time);
        total += suite_time;
        report.add_test_suite(suite);
    }
    report.set_time(total);
    Ok(report.to_string()?)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension(format!("xml.tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, outcome: Outcome) -> CaseResult {
        CaseResult {
            suite: "openstack".into(),
            name: name.into(),
            outcome,
            duration: Duration::from_millis(1500),
            properties: vec![("taint-removal-seconds".into(), "0.25".into())],
            system_out: None,
        }
    }

    #[test]
    fn path_has_no_underscore_in_context() {
        let p = junit_path(Path::new("/a"), "ccm_conformance openstack");
        assert_eq!(p, Path::new("/a/junit_ccm-conformance-openstack.xml"));
    }

    #[test]
    fn file_is_rewritten_after_each_case_with_matching_counts() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(junit_path(dir.path(), "conformance"), "ccm-conformance");
        f.record(case("a", Outcome::Passed)).unwrap();
        let first = std::fs::read_to_string(f.path()).unwrap();
        assert!(first.starts_with("<?xml"));
        assert!(first.contains("<testsuites"));
        assert!(first.contains(r#"tests="1""#));
        f.record(case(
            "b",
            Outcome::Failed {
                message: "expected taint gone\nobserved: still there".into(),
                detail: "full detail \x1b[31m red".into(),
            },
        ))
        .unwrap();
        f.record(case("c", Outcome::Skipped { reason: "".into() }))
            .unwrap();
        let xml = std::fs::read_to_string(f.path()).unwrap();
        assert!(xml.contains(r#"tests="3""#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains(r#"skipped="1""#), "{xml}");
        assert!(xml.contains(r#"message="expected taint gone""#), "{xml}");
        assert!(xml.contains("skipped without a reason"), "{xml}");
        assert!(xml.contains(r#"name="taint-removal-seconds""#), "{xml}");
        assert!(!xml.contains('\x1b'), "ANSI must be stripped: {xml}");
        assert!(
            !dir.path().read_dir().unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".tmp"))
        );
    }

    #[test]
    fn long_messages_are_cut_to_one_line() {
        let long = "x".repeat(500);
        assert_eq!(one_line(&long).chars().count(), 201);
        assert_eq!(one_line(""), "failed");
    }
}
