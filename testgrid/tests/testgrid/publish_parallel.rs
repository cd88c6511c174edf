//! Parallel `publish` to `gs://` against wiremock: the order TestGrid relies on
//! (`started.json` first, `finished.json` and `latest-build.txt` last and only on success),
//! uploads really side by side, per-object retries, and a failure that stops the upload
//! without a `finished.json` (reference testgrid-prow.md §1.5).

use std::time::{Duration, Instant};

use ccm_testgrid::gcs::{Auth, Client};
use ccm_testgrid::publish::{Options, Target, publish_gcs_with};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Object names of the uploads the server received, in arrival order (the `name` of the
/// JSON resource in each multipart body).
async fn uploaded_names(server: &MockServer) -> Vec<String> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .filter_map(|r| {
            let body = String::from_utf8_lossy(&r.body);
            let start = body.find("{\"")?;
            let end = start + body[start..].find("\r\n")?;
            let resource: serde_json::Value = serde_json::from_str(&body[start..end]).ok()?;
            resource["name"].as_str().map(str::to_string)
        })
        .collect()
}

fn client(server: &MockServer) -> Client {
    Client::new(&server.uri(), Auth::None)
        .unwrap()
        .with_backoff(Duration::from_millis(1))
}

fn target() -> Target {
    Target::parse("gs://bkt/pfx").unwrap()
}

/// latest-build.txt reads answer 404 (no build yet).
async fn no_latest_build(server: &MockServer) {
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(404))
        .mount(server)
        .await;
}

#[tokio::test]
async fn started_first_finished_and_latest_last_uploads_overlap() {
    let run = tempfile::tempdir().unwrap();
    // 24 cases × 1 file + junit + build-log + metadata between started and finished.
    ccm_testgrid::bench::write_run(run.path(), 24, 1).unwrap();
    let server = MockServer::start().await;
    no_latest_build(&server).await;
    let delay = Duration::from_millis(200);
    Mock::given(method("POST"))
        .and(path("/upload/storage/v1/b/bkt/o"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({}))
                .set_delay(delay),
        )
        .mount(&server)
        .await;
    let t = Instant::now();
    let report = publish_gcs_with(
        &client(&server),
        run.path(),
        &target(),
        "ci-x",
        Some("7"),
        None,
        &Options { concurrency: 8 },
    )
    .await
    .unwrap();
    let elapsed = t.elapsed();

    let names = uploaded_names(&server).await;
    let dir = "pfx/logs/ci-x/7";
    assert_eq!(names.len(), report.objects.len(), "{names:?}");
    assert_eq!(names.len(), 24 + 6, "{names:?}");
    assert_eq!(names[0], format!("{dir}/started.json"));
    assert_eq!(names[names.len() - 2], format!("{dir}/finished.json"));
    assert_eq!(names[names.len() - 1], "pfx/logs/ci-x/latest-build.txt");
    // The report lists the same objects in the same phases.
    assert_eq!(report.objects[0].name, names[0]);
    assert_eq!(report.objects[names.len() - 2].name, names[names.len() - 2]);
    // 28 uploads of 200 ms one by one would take 5.6 s; 8 at a time about 1.2 s.
    assert!(
        elapsed < delay * 14,
        "uploads did not overlap: {elapsed:?} for {} objects",
        names.len()
    );
}

#[tokio::test]
async fn a_failed_object_stops_the_upload_and_leaves_no_finished_json() {
    let run = tempfile::tempdir().unwrap();
    ccm_testgrid::bench::write_run(run.path(), 40, 1).unwrap();
    let server = MockServer::start().await;
    no_latest_build(&server).await;
    Mock::given(method("POST"))
        .and(body_string_contains("example-0003/file-0.log"))
        .respond_with(ResponseTemplate::new(403).set_body_string("denied"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({})))
        .mount(&server)
        .await;
    let err = publish_gcs_with(
        &client(&server),
        run.path(),
        &target(),
        "ci-x",
        Some("7"),
        None,
        &Options { concurrency: 4 },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("example-0003/file-0.log"), "{err}");
    assert!(err.to_string().contains("403"), "{err}");
    let names = uploaded_names(&server).await;
    assert_eq!(names[0], "pfx/logs/ci-x/7/started.json");
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("finished.json") || n.ends_with("latest-build.txt")),
        "a failed publish must not look finished: {names:?}"
    );
    // The stop is prompt: uploads after the failed one (at most a window's worth started
    // before it failed) are not all sent.
    assert!(
        names.len() < 40,
        "kept uploading after the failure: {}",
        names.len()
    );
}

#[tokio::test]
async fn transient_errors_are_retried_per_object() {
    let run = tempfile::tempdir().unwrap();
    ccm_testgrid::bench::write_run(run.path(), 10, 1).unwrap();
    let server = MockServer::start().await;
    no_latest_build(&server).await;
    Mock::given(method("POST"))
        .and(body_string_contains("example-0005/file-0.log"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({})))
        .mount(&server)
        .await;
    let report = publish_gcs_with(
        &client(&server),
        run.path(),
        &target(),
        "ci-x",
        Some("7"),
        None,
        &Options { concurrency: 3 },
    )
    .await
    .unwrap();
    let names = uploaded_names(&server).await;
    let retried = names
        .iter()
        .filter(|n| n.ends_with("example-0005/file-0.log"))
        .count();
    assert_eq!(retried, 3, "two 503s, then success");
    assert_eq!(
        names.last().map(String::as_str),
        Some("pfx/logs/ci-x/latest-build.txt")
    );
    assert_eq!(report.objects.len(), names.len() - 2);
}
