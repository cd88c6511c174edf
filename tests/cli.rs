//! The command-line contracts of DESIGN.md, exercised through the real binary: ready files
//! are written once serving, `cluster` serves a kubeconfig kubectl can use, `mock` serves the
//! documented connection object, and bad input exits non-zero with a one-line reason.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ccm-conformance");
const CCM: &str = env!("CARGO_BIN_EXE_reference-ccm");

/// Kills the child on drop so a failed assertion leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
    }
}

fn start(args: &[&str]) -> Running {
    Running(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning ccm-conformance"),
    )
}

/// Waits for the ready file to hold a JSON object (it is written atomically).
fn wait_ready(path: &Path, child: &mut Running) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str(&text).expect("ready file is JSON");
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("exited before writing the ready file: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no ready file at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kubectl(kubeconfig: &str, cache: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("kubectl")
        .args(["--kubeconfig", kubeconfig, "--cache-dir"])
        .arg(cache)
        .args(args)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn cluster_serves_a_kubeconfig_kubectl_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = start(&[
        "cluster",
        "--nodes",
        "3",
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    let kubeconfig = info["kubeconfig"].as_str().expect("kubeconfig path");
    assert!(
        info["server"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    assert!(!info["token"].as_str().unwrap().is_empty());
    let Some(out) = kubectl(kubeconfig, &dir.path().join("cache"), &["get", "nodes"]) else {
        eprintln!("kubectl not on PATH: scripts/setup.sh installs it; skipping the kubectl half");
        return;
    };
    for n in ["node-0", "node-1", "node-2"] {
        assert!(out.contains(n), "kubectl get nodes lacks {n}:\n{out}");
    }
    assert_eq!(out.lines().count(), 4, "header + 3 nodes:\n{out}");
}

#[test]
fn cluster_with_openstack_and_reference_ccm_initializes_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = start(&[
        "cluster",
        "--cloud",
        "openstack",
        "--nodes",
        "2",
        "--ccm",
        CCM,
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    assert!(info["cloud"]["auth_url"].as_str().unwrap().ends_with("/v3"));
    let kubeconfig = info["kubeconfig"].as_str().unwrap().to_string();
    let cache = dir.path().join("cache");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let Some(out) = kubectl(
            &kubeconfig,
            &cache,
            &["get", "nodes", "-o", "jsonpath={.items[*].spec.providerID}"],
        ) else {
            return;
        };
        if out
            .split_whitespace()
            .filter(|p| p.starts_with("openstack:///"))
            .count()
            == 2
        {
            break;
        }
        assert!(Instant::now() < deadline, "providerIDs never set: {out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn mock_openstack_writes_the_documented_ready_object() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("os.json");
    let mut child = start(&[
        "mock",
        "openstack",
        "--nodes",
        "2",
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    for key in [
        "auth_url",
        "username",
        "password",
        "project_name",
        "domain_name",
        "region",
        "admin_url",
    ] {
        assert!(
            info[key].as_str().is_some_and(|v| !v.is_empty()),
            "{key} missing in {info}"
        );
    }
    assert!(info["auth_url"].as_str().unwrap().ends_with("/v3"));
}

#[test]
fn bad_input_exits_non_zero_with_a_reason() {
    for args in [
        &["mock", "nonesuch"][..],
        &["run", "--provider", "nonesuch"],
        &["run", "--ccm", "/does/not/exist"],
        &["run", "--focus", "("],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error"), "{args:?}: {err}");
    }
}

#[test]
fn reference_ccm_refuses_bad_startup_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad_conf = dir.path().join("cloud.conf");
    std::fs::write(&bad_conf, "[Global\nauth-url = \"x").unwrap();
    let unreachable = dir.path().join("unreachable.conf");
    std::fs::write(&unreachable, "[Global]\nauth-url = http://127.0.0.1:9/v3\nusername = u\npassword = p\ntenant-name = t\nregion = r\n").unwrap();
    let cases: [Vec<String>; 4] = [
        vec!["--cloud-provider=nope".into()],
        vec![
            "--cloud-provider=openstack".into(),
            "--cloud-config=/does/not/exist".into(),
        ],
        vec![
            "--cloud-provider=openstack".into(),
            format!("--cloud-config={}", bad_conf.display()),
        ],
        vec![
            "--cloud-provider=openstack".into(),
            format!("--cloud-config={}", unreachable.display()),
        ],
    ];
    for args in cases {
        let out = Command::new(CCM).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?} printed more than one line:\n{err}"
        );
    }
}

#[test]
fn a_run_leaves_prow_files_and_publishes_to_a_file_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let out = Command::new(BIN)
        .args(["run", "--focus", r"\(NI-01\)", "--artifacts"])
        .arg(&artifacts)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "started.json",
        "finished.json",
        "metadata.json",
        "build-log.txt",
        "junit_conformance.xml",
    ] {
        assert!(artifacts.join(f).exists(), "{f} missing after a run");
    }
    let finished: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifacts.join("finished.json")).unwrap())
            .unwrap();
    assert_eq!(finished["passed"], true);
    assert_eq!(finished["result"], "SUCCESS");
    assert_eq!(finished["metadata"]["provider"], "openstack");
    let log = std::fs::read_to_string(artifacts.join("build-log.txt")).unwrap();
    assert!(log.contains("PASS") && log.contains("(NI-01)"), "{log}");

    let bucket = dir.path().join("bucket");
    let out = Command::new(BIN)
        .args(["publish", "--from"])
        .arg(&artifacts)
        .arg("--to")
        .arg(format!("file://{}", bucket.display()))
        .args(["--job", "ci-ccm-openstack", "--build", "1000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "publish failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let build = bucket.join("logs/ci-ccm-openstack/1000");
    for f in [
        "started.json",
        "finished.json",
        "build-log.txt",
        "artifacts/junit_conformance.xml",
    ] {
        assert!(build.join(f).exists(), "{f} missing in the published build");
    }
    let latest =
        std::fs::read_to_string(bucket.join("logs/ci-ccm-openstack/latest-build.txt")).unwrap();
    assert_eq!(latest.trim(), "1000");

    let out = Command::new(BIN)
        .args([
            "testgrid-config",
            "--provider",
            "openstack",
            "--bucket",
            "gs://my-bucket",
            "--job",
            "ci-ccm-openstack",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(yaml.contains("my-bucket/logs/ci-ccm-openstack"), "{yaml}");
}
