//! The JUnit writer: collects case results per suite and rewrites
//! `$ARTIFACTS/junit_<context>.xml` atomically after every case.
//!
//! The dialect rules it enforces (reference `testgrid-prow.md` §0, §2):
//! - TestGrid names a row `<testsuite@name>.<testcase@name>` and ignores `classname`; see
//!   [`testgrid_row_name`].
//! - every string is cleaned of ANSI escapes and XML-illegal characters (incl. U+FFFE/FFFF);
//! - `time` is plain seconds with three decimals (quick-junit's `{:.3}`), counts are integers;
//! - a retried case is recorded again under the same name: TestGrid merges repeated
//!   testcases into one "n/N runs passed" cell, FLAKY if mixed (rerun elements are ignored);
//! - a skip message is never empty nor exactly `skipped` (TestGrid drops those rows);
//! - the failure `message` is one line and is not repeated in the body.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::sanitize::{cap_head_tail, clean_text};

/// Failure bodies and captured output are capped at this size (head and tail kept):
/// Spyglass caps artifacts and k8s e2e trimmed its junit for it (reference §2.1, §6).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

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
    /// The case did not come to a verdict (e.g. the run was interrupted while it ran):
    /// written as `<error>`, which TestGrid shows as FAIL like `<failure>` (reference §2.3).
    Errored {
        message: String,
        detail: String,
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
    cases: Mutex<Cases>,
}

#[derive(Default)]
struct Cases {
    /// Cases already converted (sanitized, capped) to quick-junit testcases, so that the
    /// rewrite after each case only serializes: converting every case again made a write
    /// O(cases) in sanitizing too (issue 7's bound is 5 ms per write at 2,000 cases).
    by_suite: BTreeMap<String, Vec<TestCase>>,
    /// Set by [`JunitFile::seal`]: the file is final and later records are dropped.
    sealed: bool,
}

impl JunitFile {
    pub fn new(path: impl Into<PathBuf>, report_name: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            report_name: report_name.into(),
            cases: Mutex::new(Cases::default()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a case and rewrites the file. Recording the same name again (a retry) adds a
    /// second testcase; TestGrid shows them as one "n/N runs passed" cell.
    pub fn record(&self, case: CaseResult) -> Result<(), Error> {
        // The lock is held through the write so that a slower writer can never replace a
        // newer file with an older rendering.
        let mut cases = self.cases.lock().unwrap_or_else(|p| p.into_inner());
        if cases.sealed {
            return Ok(());
        }
        let tc = test_case(&case);
        cases.by_suite.entry(case.suite).or_default().push(tc);
        let xml = render(&self.report_name, &cases.by_suite)?;
        // Not fsync'ed: the rename alone guarantees that a killed run leaves the previous
        // complete file (what §8.5 asks); only a kernel crash could lose the page cache, and
        // that also loses the run. `flush` and `seal`, the final writes, are fsync'ed.
        crate::atomic::write_unsynced(&self.path, xml.as_bytes()).map_err(|source| Error::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Writes the file even when no case ran (an empty but valid report).
    pub fn flush(&self) -> Result<(), Error> {
        let cases = self.cases.lock().unwrap_or_else(|p| p.into_inner());
        let xml = render(&self.report_name, &cases.by_suite)?;
        write_atomic(&self.path, xml.as_bytes())
    }

    /// Adds `last` (e.g. the interrupted and the never-run cases of an aborted run), writes
    /// the file a final time and makes it final: a case that finishes afterwards is not
    /// recorded, so the file on disk stays the one the abort wrote.
    pub fn seal(&self, last: Vec<CaseResult>) -> Result<(), Error> {
        let mut cases = self.cases.lock().unwrap_or_else(|p| p.into_inner());
        if cases.sealed {
            return Ok(());
        }
        cases.sealed = true;
        for case in last {
            let tc = test_case(&case);
            cases.by_suite.entry(case.suite).or_default().push(tc);
        }
        let xml = render(&self.report_name, &cases.by_suite)?;
        write_atomic(&self.path, xml.as_bytes())
    }
}

/// The row name TestGrid gives a case by default: `suite.case`, or one side alone when the
/// other is empty (testgrid `pkg/updater`; reference §0 rule 1, §2.3). Repeated cases with
/// the same row name in one build are merged into one cell (§2.3).
pub fn testgrid_row_name(suite: &str, case: &str) -> String {
    match (suite.is_empty(), case.is_empty()) {
        (true, _) => case.to_string(),
        (false, true) => suite.to_string(),
        (false, false) => format!("{suite}.{case}"),
    }
}

/// Splits a message into its first non-blank line (trimmed) and the rest (trimmed).
fn split_first_line(message: &str) -> (&str, &str) {
    let message = message.trim_start();
    match message.split_once('\n') {
        Some((first, rest)) => (first.trim(), rest.trim()),
        None => (message.trim(), ""),
    }
}

/// First line of `message`, at most 200 characters: TestGrid shows it in a cell.
fn one_line(message: &str) -> String {
    let (line, _) = split_first_line(message);
    let mut out: String = line.chars().take(200).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    if out.is_empty() {
        out.push_str("failed");
    }
    out
}

/// The `message` attribute of a `<skipped>`: TestGrid drops the row when it is empty or
/// exactly `skipped` (testgrid `pkg/updater/read.go`; reference §0 rule 3), so a case we
/// did skip would silently vanish from the dashboard.
fn skip_message(reason: &str) -> String {
    let reason = clean_text(reason);
    if reason.trim().is_empty() {
        return "skipped without a reason".to_string();
    }
    let line = one_line(&reason);
    if line == "skipped" {
        "skipped (no reason given)".to_string()
    } else {
        line
    }
}

/// The failure body: the message lines after the first (which is the `message` attribute)
/// and then the detail, never the same text twice — kettle and Spyglass concatenate
/// message and body (reference §2.3).
fn failure_body(message: &str, detail: &str) -> Option<String> {
    let (_, rest) = split_first_line(message);
    let mut parts: Vec<&str> = Vec::new();
    if !rest.is_empty() {
        parts.push(rest);
    }
    let detail = detail.trim();
    if !detail.is_empty() && detail != message.trim() && detail != rest {
        parts.push(detail);
    }
    if parts.is_empty() {
        None
    } else {
        Some(cap_head_tail(&parts.join("\n"), MAX_BODY_BYTES))
    }
}

/// One case as a quick-junit testcase: every string sanitized, the failure message one
/// line with the detail in the body, the skip message never empty, bodies capped.
fn test_case(case: &CaseResult) -> TestCase {
    let status = match &case.outcome {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::Failed { message, detail } | Outcome::Errored { message, detail } => {
            let kind = if matches!(case.outcome, Outcome::Failed { .. }) {
                NonSuccessKind::Failure
            } else {
                NonSuccessKind::Error
            };
            let (message, detail) = (clean_text(message), clean_text(detail));
            let mut s = TestCaseStatus::non_success(kind);
            s.set_message(one_line(&message));
            if let Some(body) = failure_body(&message, &detail) {
                s.set_description(body);
            }
            s
        }
        Outcome::Skipped { reason } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(skip_message(reason));
            s
        }
    };
    // Repeated names are kept as repeated testcases: that is how retries show.
    let mut tc = TestCase::new(clean_text(&case.name), status);
    tc.set_classname(clean_text(&case.suite));
    tc.set_time(case.duration);
    for (k, v) in &case.properties {
        tc.add_property(Property::new(clean_text(k), clean_text(v)));
    }
    if let Some(out) = &case.system_out {
        tc.set_system_out(cap_head_tail(&clean_text(out), MAX_BODY_BYTES));
    }
    tc
}

fn render(name: &str, suites: &BTreeMap<String, Vec<TestCase>>) -> Result<String, Error> {
    let mut report = Report::new(clean_text(name));
    let mut total = Duration::ZERO;
    for (suite_name, cases) in suites {
        let mut suite = TestSuite::new(clean_text(suite_name));
        let suite_time: Duration = cases.iter().filter_map(|c| c.time).sum();
        suite.add_test_cases(cases.iter().cloned());
        suite.set_time(suite_time);
        total += suite_time;
        report.add_test_suite(suite);
    }
    report.set_time(total);
    Ok(report.to_string()?)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    crate::atomic::write(path, bytes).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
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
    /// Every value of attribute `attr` in `xml`.
    fn attr_values<'a>(xml: &'a str, attr: &str) -> Vec<&'a str> {
        let needle = format!(" {attr}=\"");
        xml.match_indices(&needle)
            .filter_map(|(i, _)| {
                let rest = &xml[i + needle.len()..];
                rest.find('"').map(|end| &rest[..end])
            })
            .collect()
    }

    // Reference §0 rule 1 / §2.3: the row is `suite.case`; classname is ignored.
    #[test]
    fn row_name_is_suite_dot_case() {
        assert_eq!(
            testgrid_row_name("openstack", "[sig-x] a"),
            "openstack.[sig-x] a"
        );
        assert_eq!(testgrid_row_name("", "a"), "a");
        assert_eq!(testgrid_row_name("s", ""), "s");
    }

    // Reference §2.1: `time` must parse as a Go float; we write plain seconds, 3 decimals,
    // and integer counts.
    #[test]
    fn times_are_plain_seconds_and_counts_integers() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(dir.path().join("junit_t.xml"), "r");
        for d in [
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(3_000_000_000),
        ] {
            let mut c = case("t", Outcome::Passed);
            c.duration = d;
            f.record(c).unwrap();
        }
        let xml = std::fs::read_to_string(f.path()).unwrap();
        let times = attr_values(&xml, "time");
        assert!(
            times.contains(&"0.000") && times.contains(&"1.500"),
            "{xml}"
        );
        assert!(times.contains(&"3000000000.000"), "{xml}");
        for t in times {
            let (int, frac) = t.split_once('.').unwrap();
            assert!(
                int.chars().all(|c| c.is_ascii_digit()) && !int.is_empty(),
                "{t}"
            );
            assert!(
                frac.len() == 3 && frac.chars().all(|c| c.is_ascii_digit()),
                "{t}"
            );
        }
        for attr in ["tests", "failures", "errors", "skipped"] {
            for v in attr_values(&xml, attr) {
                assert!(v.parse::<u64>().is_ok(), "{attr}={v}");
            }
        }
        assert!(
            xml.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?>"#),
            "{xml}"
        );
    }

    // Reference §2.1 and §8.2: illegal characters anywhere (names, messages, properties,
    // output) would make the whole file malformed.
    #[test]
    fn every_string_is_sanitized_including_noncharacters() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(dir.path().join("junit_t.xml"), "r\u{fffe}");
        let mut c = case(
            "name \u{ffff}\x1b[1m bold \u{0}",
            Outcome::Failed {
                message: "\x1b[31mboom\u{fffe}\x1b[0m".into(),
                detail: "a ]]> b & <c> \u{b}".into(),
            },
        );
        c.suite = "suite\u{1}".into();
        c.properties = vec![("k\u{fffe}".into(), "v\x1b[0m".into())];
        c.system_out = Some("out \x1b[32m\u{ffff}".into());
        f.record(c).unwrap();
        let xml = std::fs::read_to_string(f.path()).unwrap();
        for bad in ['\u{fffe}', '\u{ffff}', '\x1b', '\u{0}', '\u{1}', '\u{b}'] {
            assert!(!xml.contains(bad), "{bad:?} in {xml}");
        }
        assert!(xml.contains("message=\"boom\u{fffd}\""), "{xml}");
        assert!(xml.contains("a ]]&gt; b &amp; &lt;c&gt;"), "{xml}");
        assert!(xml.contains(r#"name="suite""#), "{xml}");
    }

    // Reference §0 rule 7, §2.3: retries are repeated testcases with the same name, which
    // TestGrid merges into "n/N runs passed" (FLAKY when mixed).
    #[test]
    fn retries_are_written_as_repeated_testcases() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(dir.path().join("junit_t.xml"), "r");
        let failed = Outcome::Failed {
            message: "first attempt timed out".into(),
            detail: String::new(),
        };
        f.record(case("retried", failed)).unwrap();
        f.record(case("retried", Outcome::Passed)).unwrap();
        let xml = std::fs::read_to_string(f.path()).unwrap();
        assert_eq!(
            xml.matches(r#"<testcase name="retried""#).count(),
            2,
            "{xml}"
        );
        assert!(!xml.contains("flaky") && !xml.contains("rerun"), "{xml}");
        assert!(
            xml.contains(r#"tests="2""#) && xml.contains(r#"failures="1""#),
            "{xml}"
        );
    }

    // Reference §0 rule 10 / §7: an aborted run keeps what finished, marks the running case
    // as <error> and the rest as skipped with a reason; nothing is recorded after the seal.
    #[test]
    fn sealing_writes_errors_and_skips_and_ignores_later_records() {
        let dir = tempfile::tempdir().unwrap();
        let f = JunitFile::new(dir.path().join("junit_t.xml"), "r");
        f.record(case("done", Outcome::Passed)).unwrap();
        f.seal(vec![
            case(
                "running",
                Outcome::Errored {
                    message: "interrupted by SIGINT after 1.5s".into(),
                    detail: String::new(),
                },
            ),
            case(
                "later",
                Outcome::Skipped {
                    reason: "not run: aborted".into(),
                },
            ),
        ])
        .unwrap();
        f.record(case("late", Outcome::Passed)).unwrap();
        let xml = std::fs::read_to_string(f.path()).unwrap();
        assert!(
            xml.contains(r#"<error message="interrupted by SIGINT after 1.5s""#),
            "{xml}"
        );
        assert!(xml.contains(r#"message="not run: aborted""#), "{xml}");
        assert!(
            xml.contains(r#"tests="3""#) && xml.contains(r#"errors="1""#),
            "{xml}"
        );
        assert!(!xml.contains("\"late\""), "{xml}");
    }

    // Reference §0 rule 3: "" and exactly "skipped" drop the row.
    #[test]
    fn skip_messages_never_read_as_dropped() {
        assert_eq!(skip_message(""), "skipped without a reason");
        assert_eq!(skip_message("  \n "), "skipped without a reason");
        assert_eq!(skip_message("\x1b[0m"), "skipped without a reason");
        assert_eq!(skip_message("skipped"), "skipped (no reason given)");
        assert_eq!(
            skip_message("  skipped \nmore"),
            "skipped (no reason given)"
        );
        assert_eq!(skip_message("\nno routes\nlater"), "no routes");
    }

    // Reference §2.3: one-line cause in `message`, the rest in the body, never repeated.
    #[test]
    fn failure_message_is_one_line_and_body_does_not_repeat_it() {
        assert_eq!(failure_body("only line", ""), None);
        assert_eq!(failure_body("only line", "only line"), None);
        assert_eq!(
            failure_body("cause\nmore context", "detail").as_deref(),
            Some("more context\ndetail")
        );
        assert_eq!(failure_body("cause\nsame", "same").as_deref(), Some("same"));
        let big = "x".repeat(MAX_BODY_BYTES * 2);
        let body = failure_body("c", &big).unwrap();
        assert!(body.len() < MAX_BODY_BYTES + 100);
    }
}
