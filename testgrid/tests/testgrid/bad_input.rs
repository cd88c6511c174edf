//! Publishing against a GCS that keeps failing, and listing a bucket over several pages,
//! against wiremock: a publish that cannot finish must never upload `finished.json` or move
//! `latest-build.txt` (TestGrid would show a half-uploaded build as complete, reference
//! `testgrid-prow.md` §1.5), and the error must say what failed.

use std::path::Path;
use std::time::Duration;

use ccm_testgrid::gcs::{Auth, Client};
use ccm_testgrid::prow::{
    Finished, JobResult, RunMetadata, Started, write_finished, write_started,
};
use ccm_testgrid::publish::{Target, publish_gcs};
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn write_run(dir: &Path) {
    write_started(dir, &Started::at(1_700_000_000)).unwrap();
    JunitFile::new(junit_path(dir, "conformance"), "ccm")
        .record(CaseResult {
            suite: "openstack".into(),
            name: "a".into(),
            outcome: Outcome::Passed,
            duration: Duration::from_secs(1),
            properties: Vec::new(),
            system_out: None,
        })
        .unwrap();
    std::fs::write(dir.join("build-log.txt"), "PASS a\n").unwrap();
    write_finished(
        dir,
        &Finished::new(1_700_000_100, JobResult::Success, &RunMetadata::default()),
    )
    .unwrap();
}

/// The object name of a multipart upload: the JSON resource part's `"name"`.
fn uploaded_name(r: &Request) -> String {
    let body = String::from_utf8_lossy(&r.body);
    body.split("\"name\":")
        .nth(1)
        .and_then(|s| s.split('"').nth(1))
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn persistent_5xx_stops_before_finished_json() {
    let server = MockServer::start().await;
    // started.json goes through; every later upload answers 500.
    Mock::given(method("POST"))
        .and(path("/upload/storage/v1/b/bkt/o"))
        .respond_with(|r: &Request| {
            if uploaded_name(r).ends_with("/started.json") {
                ResponseTemplate::new(200).set_body_json(serde_json::json!({}))
            } else {
                ResponseTemplate::new(500).set_body_string("backend error")
            }
        })
        .mount(&server)
        .await;
    let run = tempfile::tempdir().unwrap();
    write_run(run.path());
    let client = Client::new(&server.uri(), Auth::None)
        .unwrap()
        .with_backoff(Duration::from_millis(1));
    let target = Target::parse("gs://bkt/pfx").unwrap();
    let err = publish_gcs(&client, run.path(), &target, "ci-x", None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("HTTP 500"), "{err}");
    assert!(
        err.contains("backend error"),
        "the server's answer is shown: {err}"
    );
    let names: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(uploaded_name)
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("/started.json")),
        "{names:?}"
    );
    // Uploads run side by side: the object whose error is returned was tried
    // MAX_ATTEMPTS times; the others in flight stopped at or before that.
    let attempts = |name: &String| names.iter().filter(|n| *n == name).count();
    let failed = names
        .iter()
        .find(|n| !n.ends_with("/started.json") && err.contains(n.as_str()))
        .unwrap_or_else(|| panic!("the error names the object: {err} / {names:?}"));
    assert_eq!(
        attempts(failed),
        ccm_testgrid::gcs::MAX_ATTEMPTS as usize,
        "retried up to MAX_ATTEMPTS: {names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| attempts(n) <= ccm_testgrid::gcs::MAX_ATTEMPTS as usize),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("/finished.json") || n.ends_with("latest-build.txt")),
        "finished.json / latest-build.txt must not be uploaded after a failure: {names:?}"
    );
}

#[tokio::test]
async fn listing_follows_page_tokens() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/storage/v1/b/bkt/o"))
        .and(query_param("pageToken", "p2"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({"items": [{"name": "x/c"}]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/storage/v1/b/bkt/o"))
        .and(query_param("prefix", "x/"))
        .respond_with(|r: &Request| {
            if r.url.query().is_some_and(|q| q.contains("pageToken")) {
                ResponseTemplate::new(404)
            } else {
                ResponseTemplate::new(200).set_body_json(serde_json::json!({
                    "items": [{"name": "x/a"}, {"name": "x/b"}],
                    "nextPageToken": "p2"
                }))
            }
        })
        .mount(&server)
        .await;
    let client = Client::new(&server.uri(), Auth::None).unwrap();
    let names = client.list("bkt", "x/").await.unwrap();
    assert_eq!(names, ["x/a", "x/b", "x/c"]);

    // A listing that is not JSON is an error, not an empty bucket.
    let bad = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>"))
        .mount(&bad)
        .await;
    let client = Client::new(&bad.uri(), Auth::None).unwrap();
    let err = client.list("bkt", "").await.unwrap_err().to_string();
    assert!(err.contains("listing gs://bkt/"), "{err}");
}
