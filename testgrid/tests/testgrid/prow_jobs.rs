//! The Prow jobs in `ci/prow/` and the image of `ci/image/`: parsed as YAML into typed
//! structs and held to the rules of reference `testgrid-prow.md` §3–§4 — decorated, job
//! names matching `^[A-Za-z0-9-._]+$` with the `ci-`/`pull-` prefixes the k8s job configs
//! use, the TestGrid annotations, a command that `exec`s the conformance binary (Prow's
//! entrypoint SIGINTs only its direct child, §0 rule 9) and writes to `$ARTIFACTS`, and an
//! image definition that exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A Prow job config file: the subset of `prow/config` job fields the rules look at
/// (kubernetes-sigs/prow `pkg/config/jobs.go`); other fields are ignored.
#[derive(Debug, Deserialize)]
struct JobConfig {
    #[serde(default)]
    periodics: Vec<Job>,
    /// Keyed by `org/repo`.
    #[serde(default)]
    presubmits: BTreeMap<String, Vec<Job>>,
}

#[derive(Debug, Deserialize)]
struct Job {
    name: String,
    #[serde(default)]
    decorate: Option<bool>,
    #[serde(default)]
    decoration_config: Option<DecorationConfig>,
    /// Kubernetes annotations are strings; an unquoted `true` here is a type error, as
    /// it is for Prow's own loader (YAML → JSON → `map[string]string`).
    #[serde(default)]
    annotations: BTreeMap<String, QuotedString>,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    extra_refs: Vec<ExtraRef>,
    spec: Option<PodSpec>,
}

#[derive(Debug, Deserialize)]
struct DecorationConfig {
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    grace_period: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ExtraRef {
    org: String,
    repo: String,
}

#[derive(Debug, Deserialize)]
struct PodSpec {
    containers: Vec<Container>,
}

#[derive(Debug, Deserialize)]
struct Container {
    #[serde(default)]
    image: String,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    args: Vec<String>,
}

/// A YAML value that is a string by YAML's own typing: serde-saphyr hands a plain `true`
/// or `3` to a `String` field as text, so this asks for the scalar's natural type
/// (`deserialize_any`) and accepts only strings.
#[derive(Debug, PartialEq)]
struct QuotedString(String);

impl std::ops::Deref for QuotedString {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for QuotedString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = QuotedString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string (quote booleans and numbers)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<QuotedString, E> {
                Ok(QuotedString(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

fn ci_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci")
}

fn parse(text: &str, file: &str) -> JobConfig {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn load(file: &str) -> JobConfig {
    let path = ci_dir().join("prow").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&text, file)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// The shell text the container runs: `command` + `args` joined.
fn script(job: &Job) -> String {
    let containers = &job
        .spec
        .as_ref()
        .unwrap_or_else(|| panic!("{}: job without spec", job.name))
        .containers;
    assert_eq!(containers.len(), 1, "{}: one test container", job.name);
    let c = &containers[0];
    assert!(!c.image.is_empty(), "{}: image set", job.name);
    let command = c
        .command
        .as_ref()
        .unwrap_or_else(|| panic!("{}: decorated containers must set command", job.name));
    let mut parts = command.clone();
    parts.extend(c.args.iter().cloned());
    parts.join(" ")
}

/// Rules every job shares; `prefix` is `ci-` for periodics, `pull-` for presubmits.
fn check_job(job: &Job, prefix: &str, file: &str) -> String {
    let name = job.name.as_str();
    assert!(valid_name(name), "{file}: job name {name:?}");
    assert!(
        name.starts_with(prefix),
        "{file}: {name} should start with {prefix}"
    );
    assert_eq!(job.decorate, Some(true), "{name}: decorate: true");
    let a = &job.annotations;
    for key in [
        "testgrid-dashboards",
        "testgrid-tab-name",
        "testgrid-alert-email",
        "description",
    ] {
        assert!(
            a.get(key).is_some_and(|v| !v.trim().is_empty()),
            "{name}: annotation {key} missing"
        );
    }
    let email = a
        .get("testgrid-alert-email")
        .map(|v| &**v)
        .unwrap_or_default();
    assert!(email.contains('@'), "{name}: alert email {email:?}");
    if let Some(d) = &job.decoration_config
        && let Some(timeout) = &d.timeout
    {
        assert!(
            d.grace_period.is_some(),
            "{name}: a timeout without grace_period leaves no time to flush JUnit ({timeout})"
        );
    }
    let sh = script(job);
    let exec_line = sh
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("exec "))
        .unwrap_or_else(|| panic!("{name}: the conformance binary must be exec'ed: {sh}"));
    // A run, the merge of a sharded run's shards (`merge --out`), or benchmarks.
    assert!(
        exec_line.contains("ccm-conformance run")
            || exec_line.contains("ccm-conformance merge")
            || exec_line.contains("ccm-conformance bench"),
        "{name}: exec must start ccm-conformance: {exec_line}"
    );
    assert!(
        !exec_line.contains("cargo "),
        "{name}: exec'ing cargo leaves the test binary outside Prow's SIGINT"
    );
    assert!(
        exec_line.contains("--artifacts \"${ARTIFACTS}\"")
            || exec_line.contains("merge") && exec_line.contains("--out \"${ARTIFACTS}\"")
            || exec_line.contains("bench") && exec_line.contains("--record \"${ARTIFACTS}\""),
        "{name}: results must go to $ARTIFACTS: {exec_line}"
    );
    assert!(
        sh.contains("set -euo pipefail"),
        "{name}: fail fast before exec"
    );
    name.to_string()
}

fn check_file(file: &str) -> Vec<String> {
    let doc = load(file);
    let mut names = Vec::new();
    for job in &doc.periodics {
        let name = check_job(job, "ci-", file);
        assert!(
            job.interval.is_some() || job.cron.is_some(),
            "{name}: periodic needs interval or cron"
        );
        assert!(
            !job.extra_refs.is_empty(),
            "{name}: periodics clone nothing without extra_refs"
        );
        for r in &job.extra_refs {
            assert!(!r.org.is_empty() && !r.repo.is_empty(), "{name}: {r:?}");
        }
        names.push(name);
    }
    for (repo, jobs) in &doc.presubmits {
        assert_eq!(
            repo.split('/').count(),
            2,
            "{file}: {repo:?} is not org/repo"
        );
        for job in jobs {
            let name = check_job(job, "pull-", file);
            assert_eq!(
                job.annotations
                    .get("testgrid-create-test-group")
                    .map(|v| &**v),
                Some("true"),
                "{name}: presubmits need testgrid-create-test-group"
            );
            names.push(name);
        }
    }
    assert!(!names.is_empty(), "{file}: no jobs");
    names
}

#[test]
fn harness_jobs_follow_prow_and_testgrid_rules() {
    let periodic = check_file("ccm-conformance-periodics.yaml");
    let presubmit = check_file("ccm-conformance-presubmits.yaml");
    assert!(periodic.iter().all(|n| n.starts_with("ci-")));
    assert!(presubmit.iter().all(|n| n.starts_with("pull-")));
}

/// The sharded periodic: N shard jobs at one time, each `run --shard K/N` with the same N
/// and every K once, and a later merge job that `merge`s them into one TestGrid column.
#[test]
fn the_sharded_periodic_has_every_shard_and_a_merge() {
    let doc = load("ccm-conformance-periodics.yaml");
    let shards: Vec<(&Job, String)> = doc
        .periodics
        .iter()
        .map(|j| (j, script(j)))
        .filter(|(_, sh)| sh.contains("--shard "))
        .collect();
    let mut ks: Vec<String> = shards
        .iter()
        .filter_map(|(_, sh)| {
            sh.split("--shard ")
                .nth(1)?
                .split_whitespace()
                .next()
                .map(String::from)
        })
        .collect();
    ks.sort();
    assert_eq!(ks, ["1/3", "2/3", "3/3"], "each shard once");
    let cron = shards[0].0.cron.clone();
    assert!(
        cron.is_some() && shards.iter().all(|(j, _)| j.cron == cron),
        "shards start together"
    );
    let merge = doc
        .periodics
        .iter()
        .find(|j| script(j).contains("ccm-conformance merge"))
        .expect("a merge job");
    let sh = script(merge);
    // It fetches each shard job's latest build by name.
    for k in 1..=3 {
        let name = format!("ci-ccm-conformance-reference-shard-{k}-of-3");
        assert!(shards.iter().any(|(j, _)| j.name == name), "{name}");
    }
    assert!(
        sh.contains("ci-ccm-conformance-reference-shard-$k-of-3"),
        "{sh}"
    );
    assert!(
        merge.cron.is_some() && merge.cron != cron,
        "the merge runs after the shards"
    );
}

/// Every benchmark of the bench periodic records into the build, each once (`--record`
/// refuses a second record of one benchmark in a directory).
#[test]
fn the_bench_periodic_records_each_benchmark_once() {
    let config = load("ccm-conformance-periodics.yaml");
    let job = config
        .periodics
        .iter()
        .find(|j| j.name == "ci-ccm-conformance-bench")
        .expect("a bench periodic");
    let sh = script(job);
    let benches: Vec<&str> = sh
        .lines()
        .filter_map(|l| l.split_once(" bench ").map(|(_, rest)| rest))
        .collect();
    assert!(benches.len() >= 4, "{sh}");
    let mut names: Vec<&str> = benches
        .iter()
        .map(|rest| {
            assert!(rest.contains("--record \"${ARTIFACTS}\""), "{rest}");
            rest.split_whitespace().next().unwrap()
        })
        .collect();
    names.sort();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "a benchmark recorded twice: {names:?}");
    assert!(names.contains(&"matrix"), "{names:?}");
}

#[test]
fn provider_template_has_a_periodic_and_a_presubmit() {
    let names = check_file("provider-ccm-template.yaml");
    assert!(names.iter().any(|n| n.starts_with("ci-")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("pull-")), "{names:?}");
    let doc = load("provider-ccm-template.yaml");
    let sh = script(doc.periodics.first().expect("a periodic"));
    assert!(
        sh.contains("--ccm "),
        "the template runs the provider's CCM: {sh}"
    );
}

#[test]
fn job_names_are_unique_across_files() {
    let mut all = Vec::new();
    for f in [
        "ccm-conformance-periodics.yaml",
        "ccm-conformance-presubmits.yaml",
        "provider-ccm-template.yaml",
    ] {
        all.extend(check_file(f));
    }
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), all.len(), "{all:?}");
}

#[test]
fn image_definition_exists_and_builds_the_binary() {
    let path = ci_dir().join("image/Dockerfile");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let from = text
        .lines()
        .find(|l| l.starts_with("FROM "))
        .expect("a FROM line");
    assert!(
        from.contains("bookworm") || from.contains("debian"),
        "Debian base: {from}"
    );
    assert!(text.contains("scripts/setup.sh"), "runs the setup script");
    assert!(
        text.contains("cargo build --release --bins"),
        "builds the binaries"
    );
    assert!(
        text.contains("/usr/local/bin"),
        "installs ccm-conformance on PATH"
    );
    // Every job's image is this one.
    for f in [
        "ccm-conformance-periodics.yaml",
        "ccm-conformance-presubmits.yaml",
        "provider-ccm-template.yaml",
    ] {
        let text = std::fs::read_to_string(ci_dir().join("prow").join(f)).unwrap();
        assert!(
            text.contains("/ccm-conformance:"),
            "{f} uses the ccm-conformance image"
        );
    }
}

const BAD_JOB: &str = r#"
periodics:
- name: ci-x
  decorate: true
  interval: 24h
  extra_refs: [{org: o, repo: r}]
  annotations: {testgrid-dashboards: d, testgrid-tab-name: t, testgrid-alert-email: a@b, description: x}
  spec:
    containers:
    - image: i
      command: [bash, -c]
      args: ["set -euo pipefail\nexec cargo test --test conformance"]
"#;

#[test]
fn the_rules_reject_a_job_that_execs_cargo() {
    let bad = parse(BAD_JOB, "inline");
    assert_eq!(bad.periodics.len(), 1);
    let r = std::panic::catch_unwind(|| check_job(&bad.periodics[0], "ci-", "inline"));
    assert!(r.is_err(), "a job exec'ing cargo must be rejected");
    assert!(!valid_name("ci job"));
    assert!(valid_name("ci-foo_bar.v1"));
}

#[test]
fn annotations_must_be_strings() {
    let bad = BAD_JOB.replace(
        "description: x}",
        "description: x, testgrid-num-failures-to-alert: [3]}",
    );
    let r: Result<JobConfig, _> = serde_saphyr::from_str(&bad);
    assert!(r.is_err(), "a list as an annotation value must not parse");
    let unquoted = BAD_JOB.replace(
        "description: x}",
        "description: x, testgrid-create-test-group: true}",
    );
    let r: Result<JobConfig, _> = serde_saphyr::from_str(&unquoted);
    assert!(
        r.is_err(),
        "an unquoted boolean annotation must not parse: {r:?}"
    );
}
