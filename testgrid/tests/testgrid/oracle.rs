//! Independent readers check what we write (reference §8.1–§8.3): Python's expat parser
//! (strict XML 1.0, like Go's encoding/xml it rejects illegal characters), a re-implementation
//! of TestGrid's row rules in Python, `junitparser` and PyYAML when installed. Skips with a
//! printed reason when `python3` is missing; CI has it (scripts/setup.sh).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ccm_testgrid::config::{ConfigSpec, render};
use ccm_testgrid::layout::{JobKind, JobLayout};
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};

/// Parses a junit file as TestGrid would and prints one `row<TAB>status<TAB>message` line per
/// kept testcase; exits non-zero on anything TestGrid would call malformed.
const JUNIT_ORACLE: &str = r#"
import sys, re, xml.etree.ElementTree as ET
path = sys.argv[1]
root = ET.parse(path).getroot()
assert root.tag == "testsuites", root.tag
first = open(path, encoding="utf-8").readline().strip()
assert first == '<?xml version="1.0" encoding="UTF-8"?>', first
def num(el, attr, kind):
    v = el.get(attr)
    if v is None: return
    pat = r"^\d+$" if kind == "int" else r"^\d+(\.\d+)?$"
    assert re.match(pat, v), (el.tag, attr, v)
for s in root.iter("testsuite"):
    for a in ("tests", "failures", "errors", "skipped", "disabled"): num(s, a, "int")
    num(s, "time", "float")
    cases = s.findall("testcase")
    assert int(s.get("tests")) == len(cases), "tests count"
    assert int(s.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    for c in cases:
        num(c, "time", "float")
        name = ".".join(p for p in (s.get("name", ""), c.get("name", "")) if p)
        sk, fa = c.find("skipped"), c.find("failure")
        if sk is not None:
            msg = sk.get("message", "")
            if (sk.text or "") == "" and msg in ("", "skipped"):
                continue  # TestGrid drops the row
            print(f"{name}\tSKIP\t{msg}")
        elif fa is not None:
            print(f"{name}\tFAIL\t{fa.get('message', '')}")
        else:
            print(f"{name}\tPASS\t")
try:
    import junitparser
    junitparser.JUnitXml.fromfile(path)
except ImportError:
    print("junitparser not installed", file=sys.stderr)
"#;

fn python() -> Option<&'static str> {
    match Command::new("python3").arg("--version").output() {
        Ok(o) if o.status.success() => Some("python3"),
        _ => {
            eprintln!("skipping: python3 not found");
            None
        }
    }
}

fn run_oracle(py: &str, path: &Path) -> Result<Vec<String>, String> {
    let out = Command::new(py)
        .args(["-c", JUNIT_ORACLE])
        .arg(path)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

fn case(name: &str, outcome: Outcome) -> CaseResult {
    CaseResult {
        suite: "openstack".into(),
        name: name.into(),
        outcome,
        duration: Duration::from_millis(250),
        properties: vec![("taint-removal-seconds".into(), "0.5\u{1b}[0m".into())],
        system_out: Some(format!("{} \u{0} \u{ffff}", "o".repeat(200_000))),
    }
}

// Reference §8.2: hostile strings; §0 rules 1, 3, 7: rows, skip messages, retries.
#[test]
fn junit_output_reads_as_testgrid_expects() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let f = JunitFile::new(junit_path(dir.path(), "conformance"), "ccm-conformance");
    let hostile = "]]> \u{1b}[31m NUL\u{0} \u{fffe} &<>\"' 😀 \u{b}\u{c}";
    f.record(case(
        "[sig-cloud-provider] fails",
        Outcome::Failed {
            message: format!("cause {hostile}\nsecond line"),
            detail: hostile.repeat(10_000),
        },
    ))
    .unwrap();
    f.record(case(
        "[sig-cloud-provider] skipped",
        Outcome::Skipped {
            reason: "skipped".into(),
        },
    ))
    .unwrap();
    f.record(case(
        "[sig-cloud-provider] empty skip",
        Outcome::Skipped {
            reason: String::new(),
        },
    ))
    .unwrap();
    f.record(case(
        "[sig-cloud-provider] retried",
        Outcome::Failed {
            message: "attempt 1".into(),
            detail: String::new(),
        },
    ))
    .unwrap();
    f.record(case("[sig-cloud-provider] retried", Outcome::Passed))
        .unwrap();
    let rows = run_oracle(py, f.path()).unwrap_or_else(|e| panic!("oracle rejected: {e}"));
    assert_eq!(rows.len(), 5, "no row may be dropped: {rows:?}");
    assert!(rows[0].starts_with("openstack.[sig-cloud-provider] fails\tFAIL\tcause ]]> "));
    assert_eq!(
        rows[1],
        "openstack.[sig-cloud-provider] skipped\tSKIP\tskipped (no reason given)"
    );
    assert_eq!(
        rows[2],
        "openstack.[sig-cloud-provider] empty skip\tSKIP\tskipped without a reason"
    );
    let retried: Vec<_> = rows.iter().filter(|r| r.contains("retried")).collect();
    assert_eq!(
        retried.len(),
        2,
        "a retry is a repeated row TestGrid merges: {rows:?}"
    );
}

// The oracle itself must be able to fail: an ANSI escape in raw XML is malformed (§0 rule 2).
#[test]
fn oracle_rejects_what_testgrid_rejects() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("junit_bad.xml");
    std::fs::write(
        &p,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\"><testcase name=\"\u{1b}[31m\"/></testsuite></testsuites>",
    )
    .unwrap();
    assert!(run_oracle(py, &p).is_err());
    std::fs::write(
        &p,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" time=\"1.5s\"><testcase name=\"a\"/></testsuite></testsuites>",
    )
    .unwrap();
    assert!(
        run_oracle(py, &p).is_err(),
        "non-numeric time must be rejected"
    );
}

// Reference §3: the generated config parses as YAML with the proto's field names.
#[test]
fn testgrid_config_parses_as_yaml() {
    let Some(py) = python() else { return };
    let check = Command::new(py).args(["-c", "import yaml"]).status();
    if !matches!(check, Ok(s) if s.success()) {
        eprintln!("skipping: PyYAML not installed (pip install pyyaml)");
        return;
    }
    let layout = JobLayout::new("", "ci-openstack-ccm", JobKind::Periodic).unwrap();
    let mut spec = ConfigSpec::new("openstack", "k8s-conformance-openstack", layout);
    spec.alert_emails = vec!["a@example.com".into()];
    spec.description = "tricky: \"quotes\" # not a comment \\ ü".into();
    let yaml = render(&spec).unwrap();
    let script = r#"
import sys, yaml
c = yaml.safe_load(sys.stdin)
tg = c["test_groups"][0]
assert tg["gcs_prefix"] == "k8s-conformance-openstack/logs/ci-openstack-ccm", tg
assert tg["disable_prowjob_analysis"] is True
assert [h["configuration_value"] for h in tg["column_header"]] == ["k8s-version", "ccm-version", "harness-version"]
tab = c["dashboards"][0]["dashboard_tab"][0]
assert tab["test_group_name"] == tg["name"]
assert tab["description"] == 'tricky: "quotes" # not a comment \\ \u00fc', tab["description"]
assert tab["alert_options"]["alert_mail_to_addresses"] == "a@example.com"
assert c["dashboard_groups"][0]["dashboard_names"] == [c["dashboards"][0]["name"]]
"#;
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{yaml}",
        String::from_utf8_lossy(&out.stderr)
    );
}
