//! End to end: a run directory as the harness writes it, published to a `file://` target,
//! must come out in the Prow layout of reference §1 with the files TestGrid needs.

use std::path::Path;
use std::time::Duration;

use ccm_testgrid::layout::PullRef;
use ccm_testgrid::prow::{
    self, BuildLog, Finished, JobResult, RunMetadata, Started, write_finished, write_metadata,
    write_started,
};
use ccm_testgrid::publish::{Error, Target, publish};
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};

/// Writes a small run into `dir` the way the harness does, started at `start`.
fn write_run(dir: &Path, start: u64) {
    write_started(dir, &Started::at(start)).unwrap();
    let log = BuildLog::open(dir.join(prow::BUILD_LOG)).unwrap();
    log.line("\x1b[32mrunning 1 test\x1b[0m").unwrap();
    let junit = JunitFile::new(junit_path(dir, "conformance"), "ccm-conformance");
    junit
        .record(CaseResult {
            suite: "openstack".into(),
            name: "[sig-cloud-provider] [openstack] NodeInit removes the taint".into(),
            outcome: Outcome::Passed,
            duration: Duration::from_millis(1200),
            properties: vec![],
            system_out: None,
        })
        .unwrap();
    std::fs::create_dir_all(dir.join("case-1")).unwrap();
    std::fs::write(dir.join("case-1/ccm.log"), "ccm log\n").unwrap();
    let metadata = RunMetadata {
        k8s_version: "v1.34.1".into(),
        ccm_version: "v0.1.0".into(),
        provider: "openstack".into(),
        harness_version: "0.1.0".into(),
        extra: Default::default(),
    };
    let mut with_commit = metadata.clone();
    with_commit
        .extra
        .insert("repo-commit".into(), "abc123".into());
    write_metadata(dir, &with_commit).unwrap();
    write_finished(
        dir,
        &Finished::new(start + 60, JobResult::Success, &metadata),
    )
    .unwrap();
}

fn read(root: &Path, name: &str) -> String {
    std::fs::read_to_string(root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

// Reference §1.1 periodic row, §1.2 per-build directory, §1.4 metadata merge.
#[test]
fn periodic_run_is_published_in_the_prow_layout() {
    let run = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    write_run(run.path(), 1_732_233_600);
    let target = Target::File(bucket.path().to_path_buf());
    let report = publish(run.path(), &target, "ci-openstack-ccm", None, None).unwrap();

    assert_eq!(
        report.build.get(),
        1_732_233_600,
        "build defaults to the start time"
    );
    let b = "logs/ci-openstack-ccm/1732233600";
    let names: Vec<&str> = report.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            format!("{b}/started.json").as_str(),
            &format!("{b}/artifacts/case-1/ccm.log"),
            &format!("{b}/artifacts/junit_conformance.xml"),
            &format!("{b}/artifacts/metadata.json"),
            &format!("{b}/build-log.txt"),
            &format!("{b}/finished.json"),
            "logs/ci-openstack-ccm/latest-build.txt",
        ],
        "started.json first, finished.json last, then latest-build.txt"
    );
    assert!(report.build_url.ends_with(b), "{}", report.build_url);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let types: Vec<_> = report.objects.iter().map(|o| o.content_type).collect();
    assert_eq!(types[0], "application/json");
    assert_eq!(types[2], "application/xml");
    assert_eq!(types[4], "text/plain; charset=utf-8");

    let root = bucket.path();
    assert_eq!(
        read(root, "logs/ci-openstack-ccm/latest-build.txt"),
        "1732233600"
    );
    assert_eq!(
        read(root, &format!("{b}/build-log.txt")),
        "running 1 test\n"
    );
    let finished: serde_json::Value =
        serde_json::from_str(&read(root, &format!("{b}/finished.json"))).unwrap();
    assert_eq!(finished["passed"], true);
    assert_eq!(finished["result"], "SUCCESS");
    assert_eq!(
        finished["metadata"]["repo-commit"], "abc123",
        "merged from metadata.json"
    );
    assert_eq!(finished["metadata"]["k8s-version"], "v1.34.1");
    let started: serde_json::Value =
        serde_json::from_str(&read(root, &format!("{b}/started.json"))).unwrap();
    assert!(started["timestamp"].is_u64());
    assert!(read(root, &format!("{b}/artifacts/junit_conformance.xml")).contains("NodeInit"));
}

// Reference §1.1 presubmit row: build dir, both latest-build.txt, alias with link body.
#[test]
fn presubmit_run_gets_alias_and_both_latest_build_files() {
    let run = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    write_run(run.path(), 100);
    let pr = PullRef::new("kubernetes/cloud-provider-openstack", 42).unwrap();
    let target = Target::File(bucket.path().to_path_buf());
    let report = publish(run.path(), &target, "pull-os-ccm", Some("1001"), Some(&pr)).unwrap();
    let b = "pr-logs/pull/kubernetes_cloud-provider-openstack/42/pull-os-ccm/1001";
    let root = bucket.path();
    assert!(root.join(b).join("finished.json").is_file());
    let alias = read(root, "pr-logs/directory/pull-os-ccm/1001.txt");
    assert_eq!(alias, format!("file://{}/{b}", root.display()));
    let alias_obj = report
        .objects
        .iter()
        .find(|o| o.name.ends_with("1001.txt"))
        .unwrap();
    assert_eq!(alias_obj.link.as_deref(), Some(alias.as_str()));
    assert_eq!(
        read(root, "pr-logs/directory/pull-os-ccm/latest-build.txt"),
        "1001"
    );
    assert_eq!(
        read(
            root,
            "pr-logs/pull/kubernetes_cloud-provider-openstack/42/pull-os-ccm/latest-build.txt"
        ),
        "1001"
    );
}

// Reference §0 rule 5: latest-build.txt only moves forward.
#[test]
fn older_build_does_not_move_latest_back() {
    let run = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    write_run(run.path(), 100);
    let target = Target::File(bucket.path().to_path_buf());
    publish(run.path(), &target, "ci-j", Some("200"), None).unwrap();
    let report = publish(run.path(), &target, "ci-j", Some("150"), None).unwrap();
    assert_eq!(read(bucket.path(), "logs/ci-j/latest-build.txt"), "200");
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(bucket.path().join("logs/ci-j/150/finished.json").is_file());
}

#[test]
fn incomplete_runs_and_bad_names_are_refused() {
    let run = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let target = Target::File(bucket.path().to_path_buf());
    write_started(run.path(), &Started::at(100)).unwrap();
    assert!(matches!(
        publish(run.path(), &target, "ci-j", None, None),
        Err(Error::Missing {
            file: "finished.json",
            ..
        })
    ));
    write_run(run.path(), 100);
    assert!(publish(run.path(), &target, "bad/job", None, None).is_err());
    assert!(publish(run.path(), &target, "ci-j", Some("0012"), None).is_err());
    assert_eq!(std::fs::read_dir(bucket.path()).unwrap().count(), 0);
}

/// An unreachable GCS endpoint is an error after the retries, not a hang or a panic.
#[tokio::test]
async fn unreachable_gcs_is_an_error() {
    let run = tempfile::tempdir().unwrap();
    write_run(run.path(), 100);
    let client =
        ccm_testgrid::gcs::Client::new("http://127.0.0.1:9", ccm_testgrid::gcs::Auth::None)
            .unwrap()
            .with_backoff(std::time::Duration::from_millis(1));
    let gcs = Target::parse("gs://bkt/prefix").unwrap();
    let err = ccm_testgrid::publish::publish_gcs(&client, run.path(), &gcs, "ci-j", None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Gcs(_)), "{err}");
}
