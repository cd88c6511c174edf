//! The mocks judged by the Go SDKs the upstream cloud-controller-managers build with, at
//! the exact versions they pin (`judges/go/<cloud>/go.mod`): gophercloud v2 (OpenStack),
//! aws-sdk-go-v2 (AWS), govmomi (vSphere), the Azure SDK for Go (azcore, azidentity,
//! armcompute, armnetwork, armresources; Azure), google.golang.org/api compute
//! v1/beta/alpha with k8s-cloud-provider and golang.org/x/oauth2 (GCP); and Sonobuoy's
//! plugin loader judges the Sonobuoy plugin definition (`ci/sonobuoy`). Each cloud test
//! starts `ccm-conformance mock <cloud>` with a ready file, waits for the file, runs
//! `go test -count=1 -v ./...` in the judge module with `CCM_JUDGE_READY` naming it, and
//! fails with the Go output unless every Go test passed (none skipped). The Go tests
//! decode every answer with the SDK's own deserializers, so a field format or status code
//! the real service would not send fails here. What the cloud judges share (the ready
//! file, the leak check, the admin API, polling) is one module, `judges/go/judgekit`,
//! which each requires through a `replace` to `../judgekit`; its own tests run here too.
//!
//! Needs Go 1.26 (scripts/setup.sh) and the Go module proxy or a warm module cache; the
//! first run compiles the SDKs (a minute or two on two cores), later ones take seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::Running;

const BIN: &str = env!("CARGO_BIN_EXE_ccm-conformance");

/// How long one `go test` may take, the SDK compile on a cold cache included.
const GO_TEST_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// The `go` command: on PATH, else where the Go tarball and scripts/setup.sh put it.
fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("go"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
        .unwrap_or_else(|| {
            panic!(
                "the `go` command is not on PATH (nor at /usr/local/go/bin/go): the Go judges \
                 need Go 1.26; run scripts/setup.sh"
            )
        })
}

fn judge_dir(cloud: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("judges/go")
        .join(cloud)
}

/// `ccm-conformance mock <cloud> --nodes 3 --ready-file <dir>/ready.json [extra]`, once
/// its ready file holds a JSON object.
fn start_mock(cloud: &str, extra: &[&str], dir: &Path) -> (Running, PathBuf) {
    let ready = dir.join("ready.json");
    let log = std::fs::File::create(dir.join("mock.log")).expect("mock log");
    let child = Command::new(BIN)
        .args(["mock", cloud, "--nodes", "3", "--ready-file"])
        .arg(&ready)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawning ccm-conformance mock");
    let mut mock = Running(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(&ready)
            && serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v.is_object())
        {
            return (mock, ready);
        }
        if let Ok(Some(status)) = mock.0.try_wait() {
            panic!(
                "mock {cloud} exited ({status}) before writing its ready file:\n{}",
                std::fs::read_to_string(dir.join("mock.log")).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "mock {cloud}: no ready file at {} after 60 s",
            ready.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the judge module's tests against the mock described by `ready`; panics with the
/// Go output unless they all ran and passed. Returns the number of passed tests.
fn run_judge(cloud: &str, ready: &Path, dir: &Path) -> usize {
    let out_path = dir.join(format!("go-test-{cloud}.log"));
    let out = std::fs::File::create(&out_path).expect("go test log");
    let mut cmd = Command::new(go());
    cmd.current_dir(judge_dir(cloud))
        .args(["test", "-count=1", "-v", "./..."])
        .env("CCM_JUDGE_READY", ready)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log handle"))
        .stderr(out);
    // The SDKs' own environment must not steer the judges (endpoints, credentials, IMDS):
    // aws-sdk-go-v2 reads AWS_*, azidentity reads AZURE_* and MSAL's managed identity
    // IDENTITY_*/MSI_*/IMDS_* (apps/managedidentity GetSource), Google's clients
    // GOOGLE_* (application default credentials), GCE_METADATA_* and CLOUDSDK_* (gcloud's
    // config, where ADC also looks); the GCP judge sets its own from the ready file.
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if [
            "AWS_",
            "AZURE_",
            "IDENTITY_",
            "MSI_",
            "IMDS_",
            "GOOGLE_",
            "GCE_METADATA",
            "CLOUDSDK_",
        ]
        .iter()
        .any(|prefix| key_text.starts_with(prefix))
        {
            cmd.env_remove(&key);
        }
    }
    // Its own process group, so a timeout also ends the test binary `go test` started.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("running go: {e}"));
    let deadline = Instant::now() + GO_TEST_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for go test") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!(
                "go test ({cloud}) still running after {GO_TEST_DEADLINE:?}:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let passed = output
        .lines()
        .filter(|l| l.trim_start().starts_with("--- PASS: "))
        .count();
    let skipped = output
        .lines()
        .filter(|l| l.trim_start().starts_with("--- SKIP: "))
        .count();
    assert!(
        status.success(),
        "go test in judges/go/{cloud} failed ({status}):\n{output}"
    );
    assert!(
        passed > 0 && skipped == 0,
        "go test in judges/go/{cloud}: {passed} passed, {skipped} skipped (every judge must run):\n{output}"
    );
    println!("judges/go/{cloud}: {passed} Go tests passed");
    passed
}

#[test]
fn gophercloud_judges_mock_openstack() {
    // Plain HTTP, then HTTPS trusting the mock's CA (cloud.conf `ca-file`).
    for extra in [&[][..], &["--tls"][..]] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_mock, ready) = start_mock("openstack", extra, dir.path());
        run_judge("openstack", &ready, dir.path());
    }
}

#[test]
fn aws_sdk_go_v2_judges_mock_aws() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mock, ready) = start_mock("aws", &["--imds"], dir.path());
    run_judge("aws", &ready, dir.path());
}

#[test]
fn govmomi_judges_mock_vsphere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mock, ready) = start_mock("vsphere", &[], dir.path());
    run_judge("vsphere", &ready, dir.path());
}

#[test]
fn azure_sdk_for_go_judges_mock_azure() {
    // HTTPS only; the judge trusts the ready file's ca_file.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mock, ready) = start_mock("azure", &[], dir.path());
    run_judge("azure", &ready, dir.path());
}

#[test]
fn gcp_sdk_for_go_judges_mock_gcp() {
    // Plain HTTP; credentials come from the mock's metadata server (GCE_METADATA_HOST).
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mock, ready) = start_mock("gcp", &[], dir.path());
    run_judge("gcp", &ready, dir.path());
}

/// The judges' shared module (judges/go/judgekit) by its own tests; no mock is needed.
#[test]
fn the_judges_shared_module_passes_its_own_tests() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_judge("judgekit", &dir.path().join("unused"), dir.path());
}

/// The Sonobuoy plugin (`ci/sonobuoy/ccm-conformance.yaml`) loaded by Sonobuoy's own
/// plugin loader and Job driver (judges/go/sonobuoy); no mock is needed.
#[test]
fn sonobuoys_loader_takes_the_plugin_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_judge("sonobuoy", &dir.path().join("unused"), dir.path());
}
