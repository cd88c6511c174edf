//! The command-line contracts of DESIGN.md, exercised through the real binary: ready files
//! are written once serving, `cluster` serves a kubeconfig kubectl can use, `mock` serves the
//! documented connection object, and bad input exits non-zero with a one-line reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{Running, children_of, proc_stat};

const BIN: &str = env!("CARGO_BIN_EXE_ccm-conformance");
const CCM: &str = env!("CARGO_BIN_EXE_reference-ccm");

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

/// `cluster ARGS --ready-file DIR/ready.json`, once it serves: the child and its ready object.
fn start_cluster(dir: &Path, args: &[&str]) -> (Running, serde_json::Value) {
    let ready = dir.join("ready.json");
    let mut all = vec!["cluster"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--ready-file", ready.to_str().unwrap()]);
    let mut child = start(&all);
    let info = wait_ready(&ready, &mut child);
    (child, info)
}

#[test]
fn cluster_serves_a_kubeconfig_kubectl_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, info) = start_cluster(dir.path(), &["--nodes", "3"]);
    let kubeconfig = info["kubeconfig"].as_str().expect("kubeconfig path");
    assert!(
        info["server"]
            .as_str()
            .unwrap()
            .starts_with("https://127.0.0.1:"),
        "TLS by default: {info}"
    );
    assert!(!info["token"].as_str().unwrap().is_empty());
    assert!(!info["readonly_token"].as_str().unwrap().is_empty());
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
fn cluster_data_dir_keeps_objects_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cache = dir.path().join("cache");
    let ready = dir.path().join("ready-1.json");
    let mut child = start(&[
        "cluster",
        "--insecure-http",
        "--nodes",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    assert!(info["server"].as_str().unwrap().starts_with("http://"));
    let kubeconfig = info["kubeconfig"].as_str().unwrap().to_string();
    let Some(_) = kubectl(
        &kubeconfig,
        &cache,
        &["label", "node", "node-0", "kept=yes"],
    ) else {
        return;
    };
    let uid = kubectl(
        &kubeconfig,
        &cache,
        &["get", "node", "node-0", "-o", "jsonpath={.metadata.uid}"],
    )
    .unwrap_or_default();
    drop(child);

    let ready = dir.path().join("ready-2.json");
    let mut child = start(&[
        "cluster",
        "--data-dir",
        data.to_str().unwrap(),
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    let kubeconfig = info["kubeconfig"].as_str().unwrap().to_string();
    let out = kubectl(
        &kubeconfig,
        &dir.path().join("cache-2"),
        &[
            "get",
            "node",
            "node-0",
            "-o",
            "jsonpath={.metadata.uid} {.metadata.labels.kept}",
        ],
    )
    .unwrap_or_default();
    assert_eq!(out, format!("{uid} yes"), "node-0 after the restart");
}

#[test]
fn cluster_with_openstack_and_reference_ccm_initializes_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, info) = start_cluster(
        dir.path(),
        &["--cloud", "openstack", "--nodes", "2", "--ccm", CCM],
    );
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
    let (info, _dir) = mock_ready_object(
        "openstack",
        &[
            "auth_url",
            "username",
            "password",
            "project_name",
            "domain_name",
            "region",
            "admin_url",
        ],
    );
    assert!(info["auth_url"].as_str().unwrap().ends_with("/v3"));
}

/// Starts `mock <cloud> --nodes 2`, waits for its ready file and checks that every key in
/// `keys` holds a non-empty string. The mock runs until the returned guard drops.
fn mock_ready_object(
    cloud: &str,
    keys: &[&str],
) -> (serde_json::Value, (tempfile::TempDir, Running)) {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join(format!("{cloud}.json"));
    let mut child = start(&[
        "mock",
        cloud,
        "--nodes",
        "2",
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let info = wait_ready(&ready, &mut child);
    for key in keys {
        assert!(
            info[key].as_str().is_some_and(|v| !v.is_empty()),
            "{cloud}: {key} missing in {info}"
        );
    }
    (info, (dir, child))
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
    // Every default provider, in run order.
    assert_eq!(
        finished["metadata"]["provider"],
        "openstack,aws,vsphere,azure,gcp"
    );
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

    // A tab per upstream CCM, as the ci-ccm-conformance-upstream-* periodics upload.
    let upstream = |provider: &str| {
        Command::new(BIN)
            .args([
                "testgrid-config",
                "--provider",
                provider,
                "--bucket",
                "gs://b",
            ])
            .args([
                "--job",
                "ci-ccm-conformance-upstream-aws",
                "--ccm",
                "upstream",
            ])
            .output()
            .unwrap()
    };
    let out = upstream("aws");
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{yaml}");
    assert!(yaml.contains("upstream-aws-ccm"), "{yaml}");
    assert!(yaml.contains("aws-cloud-controller-manager"), "{yaml}");
    let out = upstream("nope");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no upstream CCM"));
}

fn junit_cases(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn list_name(id: &str) -> String {
    let out = Command::new(BIN)
        .args(["run", "--list", "--focus"])
        .arg(format!(r"\({id}\)"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_suffix(": test"))
        .unwrap_or_else(|| panic!("{id} not listed:\n{text}"))
        .to_string()
}

// Reference testgrid-prow.md §0 rule 9 and §7: SIGINT mid-run leaves the finished cases,
// the running one as <error message="interrupted …">, the rest skipped "not run: aborted",
// finished.json ABORTED, exits within 5 s with 130 and kills the CCM processes.
#[test]
fn sigint_during_run_writes_partial_results_and_kills_the_ccms() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let mut child = Running(
        Command::new(BIN)
            .args([
                "run",
                "--provider",
                "openstack",
                "--focus",
                r"\((NI-01|NA-01|NA-05)\)",
                "--parallel",
                "1",
                "--artifacts",
            ])
            .arg(&artifacts)
            .env_remove("PROW_JOB_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    // NI-01 takes well under a second, NA-01 about ten: wait for "1 done, 1 running".
    let deadline = Instant::now() + Duration::from_secs(60);
    let ccms = loop {
        let progress: Option<serde_json::Value> =
            std::fs::read_to_string(artifacts.join("progress.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        let ccms = children_of(pid);
        let one_done_one_running = progress.is_some_and(|p| {
            p["finished"] == 1 && p["running"].as_array().is_some_and(|r| r.len() == 1)
        });
        if one_done_one_running && !ccms.is_empty() {
            break ccms;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("run ended before it could be interrupted: {status}");
        }
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    };
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "still running 5 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status}");
    for ccm in ccms {
        assert!(
            proc_stat(ccm).is_none_or(|(state, _)| state == 'Z'),
            "CCM {ccm} survived the abort"
        );
    }
    let xml = junit_cases(&artifacts.join("junit_conformance.xml"));
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert!(
        xml.contains(r#"<error message="interrupted by SIGINT"#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<skipped message="not run: aborted""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"errors="1""#) && xml.contains(r#"skipped="1""#),
        "{xml}"
    );
    let finished: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifacts.join("finished.json")).unwrap())
            .unwrap();
    assert_eq!(finished["result"], "ABORTED");
    assert_eq!(finished["passed"], false);
    let mut stdout = String::new();
    use std::io::Read;
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(stdout.contains("[1/3] PASS"), "{stdout}");
}

#[test]
fn rerun_failed_runs_exactly_the_failed_cases() {
    let dir = tempfile::tempdir().unwrap();
    let (ni01, ni02) = (list_name("NI-01"), list_name("NI-02"));
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('"', "&quot;")
    };
    let previous = dir.path().join("junit_previous.xml");
    std::fs::write(
        &previous,
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="openstack" tests="4">
<testcase name="{}" time="1.0"><failure message="providerID empty"/></testcase>
<testcase name="{}" time="1.0"/>
<testcase name="a case that no longer exists" time="1.0"><error message="x"/></testcase>
<testcase name="{}" time="1.0"><failure message="flaked"/></testcase>
</testsuite></testsuites>"#,
            esc(&ni01),
            esc(&ni02),
            esc(&ni02)
        ),
    )
    .unwrap();
    let artifacts = dir.path().join("artifacts");
    let out = Command::new(BIN)
        .args(["run", "--rerun-failed"])
        .arg(&previous)
        .arg("--artifacts")
        .arg(&artifacts)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // NI-02's last attempt failed, so it is rerun too; the vanished case is reported.
    assert!(stdout.contains("running 2 cases"), "{stdout}");
    assert!(stderr.contains("no longer exists"), "{stderr}");
    let xml = junit_cases(&artifacts.join("junit_conformance.xml"));
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert!(xml.contains("(NI-01)") && xml.contains("(NI-02)"), "{xml}");

    // A JUnit without failures reruns nothing and says so.
    let clean = dir.path().join("junit_clean.xml");
    std::fs::write(
        &clean,
        r#"<testsuites><testsuite name="s"><testcase name="ok"/></testsuite></testsuites>"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--rerun-failed"])
        .arg(&clean)
        .arg("--artifacts")
        .arg(dir.path().join("unused"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to rerun"));
    let out = Command::new(BIN)
        .args(["run", "--rerun-failed", "/does/not/exist.xml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error"));
}

#[test]
fn diff_reports_new_failures_fixes_flakes_and_slowdowns() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("junit_before.xml");
    let after_dir = dir.path().join("after");
    std::fs::create_dir_all(after_dir.join("artifacts")).unwrap();
    std::fs::write(
        &before,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="openstack">
<testcase name="breaks" time="1.0"/>
<testcase name="heals" time="1.0"><failure message="m"/></testcase>
<testcase name="slows" time="2.0"/>
<testcase name="flakes" time="1.0"/>
<testcase name="goes" time="1.0"/>
</testsuite></testsuites>"#,
    )
    .unwrap();
    std::fs::write(
        after_dir.join("artifacts/junit_conformance.xml"),
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="openstack">
<testcase name="breaks" time="1.0"><failure message="m"/></testcase>
<testcase name="heals" time="1.0"/>
<testcase name="slows" time="9.0"/>
<testcase name="flakes" time="1.0"><failure message="m"/></testcase>
<testcase name="flakes" time="1.0"/>
<testcase name="comes" time="1.0"/>
</testsuite></testsuites>"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("diff")
        .arg(&before)
        .arg(&after_dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "new failures exit 1:\n{text}");
    assert!(
        text.contains("New failures (1):\n  openstack.breaks"),
        "{text}"
    );
    assert!(text.contains("Fixed (1):\n  openstack.heals"), "{text}");
    assert!(text.contains("Flaky (1):\n  openstack.flakes"), "{text}");
    assert!(text.contains("Added (1):\n  openstack.comes"), "{text}");
    assert!(text.contains("Removed (1):\n  openstack.goes"), "{text}");
    assert!(text.contains("openstack.slows 2.0s -> 9.0s"), "{text}");

    let out = Command::new(BIN)
        .arg("diff")
        .arg(&before)
        .arg(&before)
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = Command::new(BIN)
        .args(["diff", "/nope/a.xml"])
        .arg(&before)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error"));
}

/// `publish --to gs://…` through STORAGE_EMULATOR_HOST (gcp-storage-emulator from PyPI;
/// skipped with a reason when missing). The object-level checks, with Google's Python client,
/// are in testgrid/tests/testgrid/gcs_emulator.rs.
#[test]
fn publish_uploads_to_a_gcs_emulator() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let Ok(emulator) = Command::new("gcp-storage-emulator")
        .args(["start", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--in-memory", "--default-bucket", "bkt", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        eprintln!("gcp-storage-emulator not on PATH (pip install gcp-storage-emulator): skipping");
        return;
    };
    let _emulator = Running(emulator);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "emulator never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = tempfile::tempdir().unwrap();
    std::fs::write(
        run.path().join("started.json"),
        r#"{"timestamp": 1700000000}"#,
    )
    .unwrap();
    std::fs::write(
        run.path().join("finished.json"),
        r#"{"timestamp": 1700000100, "passed": true, "result": "SUCCESS"}"#,
    )
    .unwrap();
    std::fs::write(run.path().join("junit_conformance.xml"), "<testsuites/>").unwrap();
    let host = format!("127.0.0.1:{port}");
    let out = Command::new(BIN)
        .args(["publish", "--from"])
        .arg(run.path())
        .args([
            "--to",
            "gs://bkt/p",
            "--job",
            "ci-ccm",
            "--pr",
            "7",
            "--repo",
            "o/r",
        ])
        .env("STORAGE_EMULATOR_HOST", &host)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("gs://bkt/p/pr-logs/pull/o_r/7/ci-ccm/1700000000"),
        "{stdout}"
    );
    // Read the alias back over the JSON API: body and x-goog-meta-link.
    let url = format!(
        "http://{host}/storage/v1/b/bkt/o/{}",
        "p%2Fpr-logs%2Fdirectory%2Fci-ccm%2F1700000000.txt"
    );
    let meta = Command::new("python3")
        .args([
            "-c",
            "import json,sys,urllib.request as u; print(json.load(u.urlopen(sys.argv[1]))['metadata']['link'])",
            &url,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&meta.stdout).trim(),
        "gs://bkt/p/pr-logs/pull/o_r/7/ci-ccm/1700000000",
        "{}",
        String::from_utf8_lossy(&meta.stderr)
    );
}

#[test]
fn mock_aws_writes_the_documented_ready_object() {
    mock_ready_object(
        "aws",
        &[
            "endpoint",
            "region",
            "access_key_id",
            "secret_access_key",
            "admin_url",
        ],
    );
}

#[test]
fn mock_vsphere_writes_the_documented_ready_object_with_its_ca() {
    let (info, _mock) = mock_ready_object("vsphere", &["url", "username", "password", "admin_url"]);
    let url = info["url"].as_str().unwrap_or_default();
    assert!(
        url.starts_with("https://") && url.ends_with("/sdk"),
        "url {url:?} in {info}"
    );
    assert_eq!(info["insecure"], false, "{info}");
    let ca = info["ca_file"].as_str().expect("ca_file is a path");
    let pem = std::fs::read_to_string(ca).expect("the CA file exists");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
}

#[test]
fn mock_with_a_bad_seed_file_exits_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.json");
    std::fs::write(&seed, r#"{"faults": [{"probability": 7}]}"#).unwrap();
    for cloud in ["openstack", "aws", "vsphere"] {
        let out = Command::new(BIN)
            .args(["mock", cloud, "--seed"])
            .arg(&seed)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cloud}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("seed") && stderr.lines().count() <= 2,
            "{cloud}: {stderr}"
        );
    }
}

/// What a mock cannot be is one line and exit 2, read from the registry of clouds: an
/// unknown cloud, `--tls` on a mock that serves plain HTTP only, `--imds` on a mock without
/// an instance metadata service.
#[test]
fn mock_refuses_what_the_cloud_cannot_be_with_exit_2() {
    for (args, wanted) in [
        (&["mock", "nimbus"][..], "unknown provider \"nimbus\""),
        (
            &["mock", "aws", "--tls"][..],
            "--tls is not supported for the aws mock",
        ),
        (
            &["mock", "openstack", "--imds"][..],
            "--imds is not served by the openstack mock",
        ),
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

// ---- issue 7: certify, dashboard, and bad input to publish/diff/dashboard ----

#[test]
fn certify_writes_a_kit_that_publishes_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let kit = dir.path().join("kit");
    let out = Command::new(BIN)
        .args(["certify", "--provider", "openstack", "--ccm", CCM])
        .args(["--focus", r"\(NI-01\)", "--out"])
        .arg(&kit)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "certify failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "started.json",
        "finished.json",
        "metadata.json",
        "build-log.txt",
        "junit_conformance.xml",
        "README.md",
        "testgrid-config.yaml",
    ] {
        assert!(kit.join(f).is_file(), "{f} missing in the kit");
    }
    assert!(kit.join("cases").is_dir(), "per-case logs kept");
    let readme = std::fs::read_to_string(kit.join("README.md")).unwrap();
    assert!(readme.contains("| 1 | 0 | 0 | 0 | 1 |"), "{readme}");
    assert!(readme.contains("result **SUCCESS**"), "{readme}");
    assert!(
        readme.contains("ccm-conformance publish --from ."),
        "{readme}"
    );
    assert!(readme.contains("kubernetes/test-infra"), "{readme}");
    let yaml = std::fs::read_to_string(kit.join("testgrid-config.yaml")).unwrap();
    assert!(
        yaml.contains("k8s-conformance-openstack/logs/ci-openstack-ccm-conformance"),
        "{yaml}"
    );

    // A second certify into the same folder is refused rather than mixing two runs.
    let again = Command::new(BIN)
        .args(["certify", "--provider", "openstack", "--ccm", CCM, "--out"])
        .arg(&kit)
        .output()
        .unwrap();
    assert!(!again.status.success());
    // Neither --ccm nor --kubeconfig: a usage error.
    let neither = Command::new(BIN)
        .args(["certify", "--provider", "openstack", "--out"])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(!neither.status.success());

    // The kit publishes as is, twice, and the dashboard shows both builds.
    let bucket = dir.path().join("bucket");
    for build in ["100", "101"] {
        let out = Command::new(BIN)
            .args(["publish", "--from"])
            .arg(&kit)
            .arg("--to")
            .arg(format!("file://{}", bucket.display()))
            .args(["--job", "ci-openstack-ccm-conformance", "--build", build])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let html = dashboard_html(&bucket, &dir.path().join("site"));
    assert!(html.contains("<th>101</th><th>100</th>"), "newest left");
    assert!(html.contains("(NI-01)"), "the case is a row");
    assert_eq!(html.matches("class=\"cell pass\"").count(), 2);
}

/// `dashboard --from FROM --out SITE`, which must succeed; the page's HTML.
fn dashboard_html(from: &Path, site: &Path) -> String {
    let out = Command::new(BIN)
        .args(["dashboard", "--from"])
        .arg(from)
        .arg("--out")
        .arg(site)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(site.join("index.html")).unwrap()
}

#[test]
fn bad_results_input_exits_non_zero_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("started.json"), r#"{"timestamp": 1700000000}"#).unwrap();
    std::fs::write(
        run.join("finished.json"),
        r#"{"timestamp": 1700000100, "passed": true, "result": "SUCCESS"}"#,
    )
    .unwrap();
    // Truncated mid-element.
    std::fs::write(
        run.join("junit_conformance.xml"),
        "<?xml version=\"1.0\"?><testsuites><testsuite name=\"s\" tests=\"1\"><testcase name=",
    )
    .unwrap();
    let fails = |args: &[&str], env: &[(&str, &str)], expect: &str| {
        let mut cmd = Command::new(BIN);
        cmd.args(args).env_remove("STORAGE_EMULATOR_HOST");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    };
    let run_s = run.to_str().unwrap();
    let bucket = dir.path().join("bucket");
    let file_target = format!("file://{}", bucket.display());
    fails(
        &[
            "publish",
            "--from",
            run_s,
            "--to",
            &file_target,
            "--job",
            "ci-x",
        ],
        &[],
        "junit_conformance.xml",
    );
    assert!(
        !bucket.exists(),
        "nothing published next to a malformed JUnit"
    );
    fails(&["diff", run_s, run_s], &[], "junit_conformance.xml");
    let site = dir.path().join("site");
    fails(
        &[
            "dashboard",
            "--from",
            run_s,
            "--out",
            site.to_str().unwrap(),
        ],
        &[],
        "junit_conformance.xml",
    );
    assert!(!site.join("index.html").exists());

    // A valid run for the remaining cases.
    std::fs::write(run.join("junit_conformance.xml"), "<testsuites/>").unwrap();
    fails(
        &[
            "publish",
            "--from",
            run_s,
            "--to",
            "gs://Not_A_Bucket",
            "--job",
            "ci-x",
        ],
        &[],
        "not a valid GCS bucket name",
    );
    fails(
        &[
            "publish", "--from", run_s, "--to", "gs://bkt", "--job", "ci-x",
        ],
        &[("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json")],
        "reading credentials /nonexistent/key.json",
    );
    let key = dir.path().join("key.json");
    std::fs::write(&key, r#"{"type": "authorized_user"}"#).unwrap();
    fails(
        &[
            "publish", "--from", run_s, "--to", "gs://bkt", "--job", "ci-x",
        ],
        &[("GOOGLE_APPLICATION_CREDENTIALS", key.to_str().unwrap())],
        "not a service-account key",
    );
    // No credentials at all and no metadata server (a closed port): a token error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    fails(
        &[
            "publish", "--from", run_s, "--to", "gs://bkt", "--job", "ci-x",
        ],
        &[
            ("GOOGLE_APPLICATION_CREDENTIALS", ""),
            ("GCE_METADATA_HOST", &closed.to_string()),
        ],
        "getting an access token",
    );
    fails(
        &[
            "dashboard",
            "--from",
            dir.path().join("nothing").to_str().unwrap(),
            "--out",
            site.to_str().unwrap(),
        ],
        &[],
        "nothing",
    );
}

// Third-party binary mode (DESIGN.md `run --ccm PATH`): any CCM binary at any path is what
// the cases launch; a copy of the reference CCM under another name stands in for a vendor's.
#[test]
fn run_with_a_third_party_ccm_binary_uses_that_binary() {
    let dir = tempfile::tempdir().unwrap();
    let ccm = dir.path().join("my-ccm");
    std::fs::copy(CCM, &ccm).unwrap();
    let artifacts = dir.path().join("artifacts");
    let out = Command::new(BIN)
        .args([
            "run",
            "--provider",
            "openstack",
            "--focus",
            r"\(NI-01\)",
            "--ccm",
        ])
        .arg(&ccm)
        .arg("--artifacts")
        .arg(&artifacts)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "run failed:\n{stdout}");
    assert!(
        stdout.contains("PASS") && stdout.contains("(NI-01)"),
        "{stdout}"
    );
    // The CCM log starts with the command line the harness ran.
    let log = std::fs::read_to_string(artifacts.join("cases/openstack-NI-01/ccm.log")).unwrap();
    assert!(
        log.contains(&format!("{} --cloud-provider=openstack", ccm.display())),
        "the case did not launch {}:\n{}",
        ccm.display(),
        log.lines().next().unwrap_or_default()
    );
    // A path that does not exist is refused up front.
    let out = Command::new(BIN)
        .args(["run", "--ccm-new"])
        .arg(dir.path().join("missing-ccm"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing-ccm"));
}

/// Starts `cluster --cloud openstack --nodes 2` (with the reference CCM when `with_ccm`)
/// and runs `run --kubeconfig` against it with `focus`; returns the JUnit text and stdout.
fn external_run(with_ccm: bool, focus: &str, extra: &[&str]) -> (String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut args = vec!["cluster", "--cloud", "openstack", "--nodes", "2"];
    if with_ccm {
        args.extend(["--ccm", "reference"]);
    }
    args.extend(["--ready-file", ready.to_str().unwrap()]);
    let mut cluster = start(&args);
    let info = wait_ready(&ready, &mut cluster);
    let kubeconfig = info["kubeconfig"].as_str().unwrap().to_string();
    let artifacts = dir.path().join("artifacts");
    let out = Command::new(BIN)
        .args([
            "run",
            "--provider",
            "openstack",
            "--kubeconfig",
            &kubeconfig,
        ])
        .args(["--focus", focus])
        .args(extra)
        .arg("--artifacts")
        .arg(&artifacts)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    drop(cluster);
    (
        junit_cases(&artifacts.join("junit_conformance.xml")),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

// External mode: black-box [Conformance] cases with an external form (NI-01 and NI-02 read
// the Nodes; LB-01, LB-03 and LB-04 drive a Service in a namespace of their own) run against
// the cluster; [Mock] cases skip with the reason.
#[test]
fn external_mode_runs_black_box_cases_and_skips_mock_ones() {
    let (junit, stdout, ok) = external_run(true, r"\((NI-01|NI-02|LB-01|LB-03|LB-04|LB-05)\)", &[]);
    assert!(ok, "run failed:\n{stdout}");
    for id in ["NI-01", "NI-02", "LB-01", "LB-03", "LB-04"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("PASS") && l.contains(&format!("({id})"))),
            "{id} did not pass:\n{stdout}"
        );
    }
    assert!(
        junit
            .contains("not run: needs the mock cloud ([Mock]); external mode has no cloud control"),
        "{junit}"
    );
    assert_eq!(junit.matches("<skipped").count(), 1, "{junit}");
    // LB-01 reports what it measured and what it could not check.
    assert!(junit.contains("ingress_ready_seconds"), "{junit}");
    assert!(junit.contains("no workload in external mode"), "{junit}");
}

// The external NI-01 can fail: without a CCM the nodes keep the uninitialized taint.
#[test]
fn external_mode_fails_ni01_when_nothing_initializes_the_nodes() {
    let (junit, stdout, ok) = external_run(false, r"\(NI-01\)", &[]);
    assert!(!ok, "expected a failure:\n{stdout}");
    assert!(junit.contains("<failure"), "{junit}");
    assert!(junit.contains("not initialized"), "{junit}");
}

// The external LB-01 can fail: without a CCM no ingress appears within --cloud-timeout.
#[test]
fn external_mode_fails_lb01_when_no_ccm_ensures_the_load_balancer() {
    let (junit, stdout, ok) = external_run(false, r"\(LB-01\)", &["--cloud-timeout", "2"]);
    assert!(!ok, "expected a failure:\n{stdout}");
    assert!(junit.contains("<failure"), "{junit}");
    assert!(junit.contains("a load-balancer ingress"), "{junit}");
}

/// `upstream build` refuses what it cannot build with one clear line and a non-zero exit,
/// before running `go` (the builds themselves are exercised by `.ci/run`, which builds the
/// upstream CCMs and runs the suites with them).
#[test]
fn upstream_build_refuses_unknown_providers_and_bad_versions() {
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("upstream")
            .arg("build")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["gke"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no upstream CCM for \"gke\"")
            && err.contains("openstack, aws, vsphere, azure, gcp"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = run(&["aws", "--version", "latest"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"latest\" is not a Go module version"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // No go on PATH: one line naming the cause, nothing in the cache.
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["upstream", "build", "aws"])
        .env("CCM_CONFORMANCE_GO", "/nonexistent/go")
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`go` command was not found"), "{err}");
    let upstream = cache.path().join("ccm-conformance/upstream");
    let left = std::fs::read_dir(&upstream).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "nothing half-written in {}", upstream.display());
}

/// `cluster --apiserver real` and `run --apiserver real` when a control-plane binary cannot
/// start (here a stand-in etcd that exits as a real one does when its port is taken): a
/// non-zero exit whose first line names the component and its log, the log's last lines
/// under it, no ready file, and no process left behind.
#[test]
fn a_control_plane_that_cannot_start_is_one_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    let root = cache.path().join("ccm-conformance/upstream");
    for (dir, name, script) in [
        (
            "etcd-v3.7.0",
            "etcd",
            "echo '{\"level\":\"fatal\",\"msg\":\"listen tcp 127.0.0.1:2379: bind: address already in use\"}' >&2; exit 1",
        ),
        // Never reached: etcd is waited for first.
        ("kube-apiserver-v1.37.2", "kube-apiserver", "sleep 600"),
    ] {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("build.json"), "{}").unwrap();
        let bin = dir.join(name);
        std::fs::write(&bin, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let ready = work.path().join("ready.json");
    let out = Command::new(BIN)
        .args(["cluster", "--apiserver", "real", "--ready-file"])
        .arg(&ready)
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_default();
    assert!(
        first.contains("starting etcd and kube-apiserver")
            && first.contains("etcd exited before it was ready")
            && first.contains("etcd.log"),
        "{err}"
    );
    assert!(err.contains("address already in use"), "{err}");
    assert!(!ready.exists());

    // The same for a run: every case reports it, the run fails, nothing is left running.
    let out = Command::new(BIN)
        .args([
            "run",
            "--provider",
            "openstack",
            "--apiserver",
            "real",
            "--focus",
            "NI-01",
            "--artifacts",
        ])
        .arg(work.path().join("artifacts"))
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let junit =
        std::fs::read_to_string(work.path().join("artifacts/junit_conformance.xml")).unwrap();
    assert!(
        junit.contains("etcd exited before it was ready") && junit.contains("address already"),
        "{junit}"
    );
    // Nothing started from the stand-in binaries is still running.
    let cache_path = cache.path().to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&cache_path))
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
}

/// `soak` refuses bad input with one line and exit status 2, before anything starts: an
/// unknown provider, a duration that does not parse, an unknown preset, a malformed fault
/// file, a replica count out of range.
#[test]
fn soak_refuses_bad_input_with_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_file = dir.path().join("faults.json");
    std::fs::write(&bad_file, r#"[{"kind": "error", "status": 200}]"#).unwrap();
    let artifacts = dir.path().join("out");
    let cases: [(&[&str], &str); 9] = [
        (&["--provider", "gke"], "unknown provider"),
        (&["--provider", "aws", "--event-ttl", "0s"], "--event-ttl"),
        (&["--provider", "aws", "--event-ttl", "soon"], "--event-ttl"),
        (&["--provider", "aws", "--replicas", "0"], "--replicas"),
        (&["--provider", "aws", "--replicas", "9"], "--replicas"),
        (&["--provider", "aws", "--duration", "5"], "--duration"),
        (&["--provider", "aws", "--duration", "ten"], "--duration"),
        (
            &["--provider", "aws", "--faults", "medium"],
            "none, light, heavy",
        ),
        (
            &["--provider", "aws", "--faults", bad_file.to_str().unwrap()],
            "rule 1",
        ),
    ];
    for (args, wanted) in cases {
        let out = Command::new(BIN)
            .arg("soak")
            .args(args)
            .arg("--artifacts")
            .arg(&artifacts)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(wanted), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!artifacts.exists(), "{args:?} started something");
    }
}

/// A run's terminal has its progress lines and summary only: the libraries' log lines (the
/// simulated kube-proxy that cannot bind a vSphere node's 198.18 address yet, kube's client
/// cut off by a teardown) are in each case's `harness.log`; `--verbose` shows them too.
#[test]
fn a_runs_terminal_has_no_library_log_lines_and_the_case_logs_have_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = |artifacts: &Path, verbose: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--provider", "vsphere", "--focus", r"\(NI-0[12]\)"])
            .arg("--artifacts")
            .arg(artifacts)
            .env_remove("RUST_LOG");
        if verbose {
            cmd.arg("--verbose");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let quiet = dir.path().join("quiet");
    let terminal = run(&quiet, false);
    let library_lines: Vec<&str> = terminal
        .lines()
        .filter(|l| {
            [" WARN ", " INFO ", " ERROR ", " DEBUG "]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect();
    assert!(library_lines.is_empty(), "{library_lines:?}\n{terminal}");
    assert!(terminal.contains("2 of 2 run"), "{terminal}");
    let case_log = std::fs::read_to_string(quiet.join("cases/vsphere-NI-01/harness.log")).unwrap();
    assert!(case_log.contains("mock_kubelet::kube_proxy"), "{case_log}");
    let verbose = run(&dir.path().join("verbose"), true);
    assert!(verbose.contains("kube_proxy"), "{verbose}");
}

/// The testcases of a run's JUnit file: name -> verdict (pass, fail, skip).
fn verdicts_of(junit: &Path) -> std::collections::BTreeMap<String, &'static str> {
    let results = ccm_testgrid::read::read_results(junit).unwrap();
    results
        .values()
        .map(|r| {
            let status = r.last().unwrap().status;
            let v = match status {
                ccm_testgrid::read::Status::Passed => "pass",
                ccm_testgrid::read::Status::Skipped => "skip",
                _ => "fail",
            };
            (r.name.clone(), v)
        })
        .collect()
}

/// Three shards run as three processes at once, merged, equal the unsharded run case for
/// case; a merge without one shard says which and is a FAILURE; bad shards and shards of
/// different runs are refused in one line.
#[test]
fn three_shards_in_parallel_merge_into_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let focus = r"\((NI-0[1-6]|NA-0[1-3])\)";
    let run = |artifacts: &Path, shard: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args([
            "run",
            "--provider",
            "openstack",
            "--provider",
            "vsphere",
            "--focus",
            focus,
        ])
        .arg("--artifacts")
        .arg(artifacts)
        .env_remove("PROW_JOB_ID");
        if let Some(s) = shard {
            cmd.args(["--shard", s]);
        }
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let whole = dir.path().join("whole");
    let shards: Vec<PathBuf> = (1..=3)
        .map(|k| dir.path().join(format!("shard{k}")))
        .collect();
    let mut children = vec![run(&whole, None)];
    for (k, d) in shards.iter().enumerate() {
        children.push(run(d, Some(&format!("{}/3", k + 1))));
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let merged = dir.path().join("merged");
    let out = Command::new(BIN)
        .arg("merge")
        .arg("--from")
        .args(&shards)
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (want, got) = (
        verdicts_of(&whole.join("junit_conformance.xml")),
        verdicts_of(&merged.join("junit_conformance.xml")),
    );
    assert_eq!(want.len(), 18);
    assert_eq!(got, want);
    // Each shard ran a part, and no case twice.
    let sizes: Vec<usize> = shards
        .iter()
        .map(|d| verdicts_of(&d.join("junit_conformance.xml")).len())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 18, "{sizes:?}");
    assert!(sizes.iter().all(|n| *n >= 5), "{sizes:?}");
    for f in [
        "started.json",
        "finished.json",
        "metadata.json",
        "build-log.txt",
    ] {
        assert!(merged.join(f).exists(), "{f}");
    }
    assert!(merged.join("cases/vsphere-NI-01/ccm.log").exists());

    // Shard 2 missing: merged anyway, a FAILURE that names it.
    let partial = dir.path().join("partial");
    let out = Command::new(BIN)
        .args(["merge", "--from"])
        .arg(&shards[0])
        .arg(&shards[2])
        .arg("--out")
        .arg(&partial)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("shard 2/3 is missing") && text.contains("FAILURE"),
        "{text}"
    );
    let finished = std::fs::read_to_string(partial.join("finished.json")).unwrap();
    assert!(finished.contains("\"FAILURE\""), "{finished}");

    // Shards of different case lists, an unsharded run, the same shard twice: refused.
    let other = dir.path().join("other");
    let mut c = Command::new(BIN);
    c.args([
        "run",
        "--provider",
        "vsphere",
        "--focus",
        r"\(NI-01\)",
        "--shard",
        "2/3",
    ])
    .arg("--artifacts")
    .arg(&other)
    .env_remove("PROW_JOB_ID");
    assert!(c.output().unwrap().status.code().is_some());
    for (from, wanted) in [
        (vec![&shards[0], &other], "different runs"),
        (vec![&shards[0], &whole], "not a shard"),
        (vec![&shards[0], &shards[0]], "twice"),
    ] {
        let out = Command::new(BIN)
            .args(["merge", "--from"])
            .args(from)
            .arg("--out")
            .arg(dir.path().join("refused"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(wanted) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
    assert!(!dir.path().join("refused").exists());

    // Bad shards: one line, status 2, nothing run.
    for bad in ["0/3", "4/3", "x/y"] {
        let out = Command::new(BIN)
            .args(["run", "--shard", bad, "--artifacts"])
            .arg(dir.path().join("bad"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("K/N"), "{bad}: {err}");
    }
}

/// `run --kubeconfig in-cluster` as the Sonobuoy plugin's pod runs it: the service
/// variables, a token file and the CA (played here by the embedded API server's own),
/// then the black-box cases; without the variables, one line and status 2.
#[test]
fn in_cluster_mode_runs_from_the_pods_service_account() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, info) = start_cluster(
        dir.path(),
        &["--cloud", "openstack", "--nodes", "2", "--ccm", "reference"],
    );
    // The cluster's kubeconfig (JSON) carries its CA, which the pod's ca.crt would be.
    let kubeconfig: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(info["kubeconfig"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let ca_b64 = kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("certificate-authority-data")
        .to_string();
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_b64)
        .unwrap();
    let sa = dir.path().join("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("token"), info["token"].as_str().unwrap()).unwrap();
    std::fs::write(sa.join("ca.crt"), ca).unwrap();
    let server = info["server"].as_str().unwrap();
    let (host, port) = server
        .trim_start_matches("https://")
        .rsplit_once(':')
        .unwrap();
    let artifacts = dir.path().join("artifacts");
    let out = Command::new(BIN)
        .args([
            "run",
            "--provider",
            "openstack",
            "--kubeconfig",
            "in-cluster",
        ])
        .args(["--focus", r"\((NI-01|NI-02)\)", "--artifacts"])
        .arg(&artifacts)
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port)
        .env("CCM_CONFORMANCE_SERVICEACCOUNT_DIR", &sa)
        .env_remove("PROW_JOB_ID")
        .output()
        .unwrap();
    drop(cluster);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in ["NI-01", "NI-02"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("PASS") && l.contains(&format!("({id})"))),
            "{id}:\n{stdout}"
        );
    }
    assert!(artifacts.join("in-cluster.kubeconfig").exists());

    let out = Command::new(BIN)
        .args(["run", "--kubeconfig", "in-cluster", "--artifacts"])
        .arg(dir.path().join("nowhere"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("KUBERNETES_SERVICE_HOST") && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// External mode interrupted mid-case: the case's namespace is left in the cluster (its
/// fixture never reached the cleanup), and the run says so with the command that deletes
/// every namespace external mode created; it still ends within seconds, as ABORTED.
#[test]
fn an_interrupted_external_run_names_the_namespaces_it_leaves() {
    let dir = tempfile::tempdir().unwrap();
    // No CCM: LB-01 waits for an ingress that never comes (up to --cloud-timeout).
    let (cluster, info) = start_cluster(dir.path(), &["--cloud", "openstack", "--nodes", "2"]);
    let kubeconfig = info["kubeconfig"].as_str().unwrap().to_string();
    let artifacts = dir.path().join("artifacts");
    let mut run = Command::new(BIN)
        .args([
            "run",
            "--provider",
            "openstack",
            "--kubeconfig",
            &kubeconfig,
        ])
        .args([
            "--focus",
            r"\(LB-01\)",
            "--cloud-timeout",
            "120",
            "--artifacts",
        ])
        .arg(&artifacts)
        .env_remove("PROW_JOB_ID")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cache = dir.path().join("cache");
    let selector = "app.kubernetes.io/created-by=ccm-conformance";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let Some(out) = kubectl(
            &kubeconfig,
            &cache,
            &["get", "ns", "-l", selector, "-o", "name"],
        ) else {
            let _ = run.kill();
            let _ = run.wait();
            return; // no kubectl here
        };
        if !out.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the case never made its namespace"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running 15 s after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&format!("delete namespace -l {selector}")),
        "{err}"
    );
    let finished = std::fs::read_to_string(artifacts.join("finished.json")).unwrap();
    assert!(finished.contains("ABORTED"), "{finished}");
    drop(cluster);
}

/// `certify --shards N` runs N shard processes, merges them into the kit's folder and
/// writes the kit over the merged run; the shards' lines reach the terminal prefixed.
#[test]
fn certify_with_shards_merges_them_into_one_kit() {
    let dir = tempfile::tempdir().unwrap();
    let kit = dir.path().join("kit");
    let focus = r"\((NI-0[1-3])\)";
    let out = Command::new(BIN)
        .args([
            "certify",
            "--provider",
            "openstack",
            "--ccm",
            CCM,
            "--shards",
            "2",
        ])
        .args(["--focus", focus, "--out"])
        .arg(&kit)
        // As inside a Prow job: the shard processes must still write their own
        // finished.json (the sidecar writes only the job's), or the merge finds them
        // unfinished.
        .env("PROW_JOB_ID", "certify-test")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("[1/2] ") && stdout.contains("[2/2] "),
        "{stdout}"
    );
    assert!(
        stdout.contains("merged 2 shards: 3 cases, SUCCESS"),
        "{stdout}"
    );
    let listed = Command::new(BIN)
        .args(["run", "--list", "--provider", "openstack", "--focus", focus])
        .output()
        .unwrap();
    let listed: std::collections::BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test").map(str::to_string))
        .collect();
    let got: std::collections::BTreeSet<String> = verdicts_of(&kit.join("junit_conformance.xml"))
        .into_iter()
        .map(|(name, verdict)| {
            assert_eq!(verdict, "pass", "{name}");
            name
        })
        .collect();
    assert_eq!(got, listed);
    let readme = std::fs::read_to_string(kit.join("README.md")).unwrap();
    assert!(readme.contains("| 3 | 0 | 0 | 0 | 3 |"), "{readme}");
    assert!(readme.contains("- shards: `2`"), "{readme}");
    assert!(
        kit.join("cases/openstack-NI-02").is_dir(),
        "case logs merged"
    );

    // One shard is no sharding, and a real cluster's nodes are not shared out.
    for extra in [
        &["--shards", "1"][..],
        &["--shards", "2", "--kubeconfig", "/nonexistent"][..],
    ] {
        let out = Command::new(BIN)
            .args(["certify", "--provider", "openstack", "--ccm", CCM, "--out"])
            .arg(dir.path().join("other"))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(!dir.path().join("other").exists());
    }
}

/// `bench matrix` times the suites unsharded and sharded and checks their verdicts agree;
/// `--record` keeps each benchmark's figures as a build that `dashboard` draws over runs.
#[test]
fn bench_figures_are_recorded_and_drawn_over_runs() {
    let dir = tempfile::tempdir().unwrap();
    let builds = dir.path().join("bucket").join("ci-ccm-conformance-bench");
    let bench = |args: &[&str], build: &str| {
        Command::new(BIN)
            .arg("bench")
            .args(args)
            .arg("--artifacts")
            .arg(dir.path().join("work"))
            .arg("--record")
            .arg(builds.join(build))
            .output()
            .unwrap()
    };
    let out = bench(
        &[
            "matrix",
            "--ccm",
            "reference",
            "--vs",
            "reference",
            "--focus",
            r"\(NI-0[12]\)",
            "--shards",
            "2",
            "--runs",
            "1",
        ],
        "1",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches("10 cases, every verdict the same").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("full matrix (reference and reference"),
        "{stdout}"
    );
    for build in ["2", "3"] {
        let out = bench(&["merge", "--cases", "200", "--runs", "1"], build);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Another benchmark joins a build; the same one twice is refused before it runs.
    let out = bench(&["junit", "--cases", "200"], "3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = bench(&["merge", "--cases", "200"], "3");
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("junit_bench-merge.xml exists"), "{stderr}");
    assert!(!String::from_utf8_lossy(&again.stdout).contains("merge of 3 shards"));

    let html = dashboard_html(&dir.path().join("bucket"), &dir.path().join("site"));
    for chart in [
        "aria-label=\"matrix total unsharded-s\"",
        "aria-label=\"matrix reference 2-shards-s\"",
        "aria-label=\"merge 200 cases median-s\"",
        "aria-label=\"junit 200 cases write-median-ms\"",
    ] {
        assert!(html.contains(chart), "{chart} not drawn");
    }
}
