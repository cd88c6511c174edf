//! Reading JUnit files back: the results of an earlier run, for `run --rerun-failed` and
//! `diff`.
//!
//! Why: the JUnit file is the one record every run leaves (also runs by other tools), so
//! comparing or repeating runs starts from it rather than from logs. Cases are keyed the way
//! TestGrid keys its rows, `<suite>.<case>` (reference §0 rule 1), and repeated testcases of
//! one name are one row with several attempts (§2.3: "n/N runs passed", FLAKY if mixed).
//! Both roots are accepted, `<testsuites>` and a bare `<testsuite>` (TestGrid reads both,
//! §2.1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{Report, TestCaseStatus};

use crate::junit::testgrid_row_name;

/// Errors while reading results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a JUnit file TestGrid could read: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("{0} holds no junit*.xml file")]
    NoJunit(PathBuf),
}

/// How one attempt of a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    /// `<error>`: no verdict (e.g. interrupted); TestGrid shows it as FAIL.
    Errored,
    Skipped,
}

impl Status {
    /// Failed or errored: what TestGrid paints red.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Failed | Status::Errored)
    }
}

/// One attempt of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub status: Status,
    pub time: Duration,
    /// The failure/error/skip message, if any.
    pub message: Option<String>,
    /// Testcase properties in file order (numeric ones are TestGrid metrics, §2.3).
    pub properties: Vec<(String, String)>,
}

/// Every attempt of one row, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRecord {
    pub suite: String,
    pub name: String,
    pub attempts: Vec<Attempt>,
}

impl CaseRecord {
    /// TestGrid's row name, `suite.case`.
    pub fn row(&self) -> String {
        testgrid_row_name(&self.suite, &self.name)
    }

    /// The last attempt decides the verdict of a retried case.
    pub fn last(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// Passed in one attempt and failed in another (TestGrid: FLAKY).
    pub fn is_flaky(&self) -> bool {
        self.attempts.iter().any(|a| a.status == Status::Passed)
            && self.attempts.iter().any(|a| a.status.is_failure())
    }

    /// The final verdict is a failure.
    pub fn failed(&self) -> bool {
        self.last().is_some_and(|a| a.status.is_failure())
    }

    /// Time of the last attempt that ran (not skipped).
    pub fn time(&self) -> Option<Duration> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.status != Status::Skipped)
            .map(|a| a.time)
    }
}

/// The cases of one run, by row name.
pub type Results = BTreeMap<String, CaseRecord>;

/// Reads a JUnit file, or every `junit*.xml` under a directory (a run's artifacts or a
/// published build directory), into one set of rows.
pub fn read_results(path: &Path) -> Result<Results, Error> {
    let mut results = Results::new();
    if path.is_dir() {
        let mut files = Vec::new();
        collect_junit(path, &mut files)?;
        if files.is_empty() {
            return Err(Error::NoJunit(path.to_path_buf()));
        }
        for file in files {
            read_file_into(&file, &mut results)?;
        }
    } else {
        read_file_into(path, &mut results)?;
    }
    Ok(results)
}

/// Parses JUnit text into rows (added to `results`). `origin` names the source in errors.
pub fn parse_into(xml: &str, origin: &Path, results: &mut Results) -> Result<(), Error> {
    let bad = |reason: String| Error::Parse {
        path: origin.to_path_buf(),
        reason,
    };
    let wrapped;
    let xml = if root_is_bare_testsuite(xml) {
        // quick-junit reads only a <testsuites> root; TestGrid reads both (§2.1).
        let body = strip_prolog(xml);
        wrapped = format!("<testsuites>{body}</testsuites>");
        wrapped.as_str()
    } else {
        xml
    };
    let report = Report::deserialize_from_str(xml).map_err(|e| bad(e.to_string()))?;
    for suite in report.test_suites {
        for case in suite.test_cases {
            let (status, message) = match &case.status {
                TestCaseStatus::Success { .. } => (Status::Passed, None),
                TestCaseStatus::NonSuccess { kind, message, .. } => (
                    match kind {
                        quick_junit::NonSuccessKind::Failure => Status::Failed,
                        quick_junit::NonSuccessKind::Error => Status::Errored,
                    },
                    message.as_ref().map(|m| m.to_string()),
                ),
                TestCaseStatus::Skipped { message, .. } => {
                    (Status::Skipped, message.as_ref().map(|m| m.to_string()))
                }
            };
            let attempt = Attempt {
                status,
                time: case.time.unwrap_or_default(),
                message,
                properties: case
                    .properties
                    .iter()
                    .map(|p| (p.name.to_string(), p.value.to_string()))
                    .collect(),
            };
            let record = CaseRecord {
                suite: suite.name.to_string(),
                name: case.name.to_string(),
                attempts: Vec::new(),
            };
            results
                .entry(record.row())
                .or_insert(record)
                .attempts
                .push(attempt);
        }
    }
    Ok(())
}

fn read_file_into(path: &Path, results: &mut Results) -> Result<(), Error> {
    let xml = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_into(&xml, path, results)
}

/// The text after the XML declaration and any comments/whitespace before the root.
fn strip_prolog(xml: &str) -> &str {
    let mut rest = xml.trim_start_matches('\u{feff}').trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("<?") {
            rest = r
                .split_once("?>")
                .map_or("", |(_, after)| after)
                .trim_start();
        } else if let Some(r) = rest.strip_prefix("<!--") {
            rest = r
                .split_once("-->")
                .map_or("", |(_, after)| after)
                .trim_start();
        } else {
            return rest;
        }
    }
}

fn root_is_bare_testsuite(xml: &str) -> bool {
    let body = strip_prolog(xml);
    body.starts_with("<testsuite") && !body.starts_with("<testsuites")
}

/// `junit*.xml` files under `dir`, recursively, sorted; temporary files of atomic writes
/// are left out.
fn collect_junit(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let read_err = |source| Error::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            collect_junit(&path, out)?;
        } else if name.starts_with("junit") && name.ends_with(".xml") && !name.contains(".tmp.") {
            out.push(path);
        }
    }
    Ok(())
}

/// The full case names whose final verdict is a failure or an error: what
/// `run --rerun-failed` runs again. Flaky cases whose last attempt passed are not included.
pub fn failed_names(results: &Results) -> Vec<String> {
    results
        .values()
        .filter(|r| r.failed())
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::junit::{CaseResult, JunitFile, Outcome};

    fn case(suite: &str, name: &str, outcome: Outcome, ms: u64) -> CaseResult {
        CaseResult {
            suite: suite.into(),
            name: name.into(),
            outcome,
            duration: Duration::from_millis(ms),
            properties: Vec::new(),
            system_out: None,
        }
    }

    fn failed(msg: &str) -> Outcome {
        Outcome::Failed {
            message: msg.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn reads_back_what_the_writer_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(dir.path().join("junit_c.xml"), "r");
        f.record(case("os", "a", Outcome::Passed, 1500)).unwrap();
        f.record(case("os", "b", failed("boom"), 10)).unwrap();
        f.record(case("os", "c", failed("first"), 10)).unwrap();
        f.record(case("os", "c", Outcome::Passed, 20)).unwrap();
        f.record(case(
            "os",
            "d",
            Outcome::Skipped {
                reason: "no routes".into(),
            },
            0,
        ))
        .unwrap();
        f.record(case(
            "aws",
            "e",
            Outcome::Errored {
                message: "interrupted".into(),
                detail: String::new(),
            },
            5,
        ))
        .unwrap();
        let r = read_results(dir.path()).unwrap();
        assert_eq!(r.len(), 5, "{r:?}");
        assert_eq!(r["os.a"].last().unwrap().status, Status::Passed);
        assert_eq!(r["os.a"].time(), Some(Duration::from_millis(1500)));
        assert_eq!(r["os.b"].last().unwrap().message.as_deref(), Some("boom"));
        assert!(r["os.c"].is_flaky() && !r["os.c"].failed());
        assert_eq!(r["os.d"].last().unwrap().status, Status::Skipped);
        assert_eq!(r["aws.e"].last().unwrap().status, Status::Errored);
        assert_eq!(failed_names(&r), vec!["e".to_string(), "b".to_string()]);
    }

    #[test]
    fn bare_testsuite_root_is_accepted_and_garbage_is_an_error() {
        let xml = r#"<?xml version="1.0"?>
<!-- made by another tool -->
<testsuite name="s" tests="1"><testcase name="x" time="2.5"><failure message="m"/></testcase></testsuite>"#;
        let mut r = Results::new();
        parse_into(xml, Path::new("x.xml"), &mut r).unwrap();
        assert!(r["s.x"].failed());
        assert_eq!(r["s.x"].time(), Some(Duration::from_millis(2500)));
        let mut r = Results::new();
        for bad in ["", "<testsuites><testsuite name=\"s\">", "not xml"] {
            assert!(
                parse_into(bad, Path::new("x.xml"), &mut r).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_directory_without_junit_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(read_results(dir.path()), Err(Error::NoJunit(_))));
    }
}
