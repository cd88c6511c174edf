//! `publish` to `gs://` against a GCS emulator (`gcp-storage-emulator`, PyPI), read back
//! with Google's own Python client (`google-cloud-storage`): the Prow tree of reference §1,
//! Content-Types, the presubmit alias with `x-goog-meta-link`, `latest-build.txt`, and a
//! file above the resumable threshold. Skips with a reason when the tools are missing
//! (`scripts/setup.sh` installs them).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ccm_testgrid::gcs::{Auth, Client, RESUMABLE_THRESHOLD};
use ccm_testgrid::layout::PullRef;
use ccm_testgrid::prow::{
    Finished, JobResult, RunMetadata, Started, write_finished, write_started,
};
use ccm_testgrid::publish::{Target, publish_gcs};
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};

struct Emulator(Child);

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python_has_storage_client() -> bool {
    Command::new("python3")
        .args(["-c", "import google.cloud.storage"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts the emulator with bucket `bkt`; `None` (and a printed reason) when unavailable.
fn start_emulator() -> Option<(Emulator, String)> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("gcp-storage-emulator")
        .args(["start", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--in-memory", "--default-bucket", "bkt", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        eprintln!("gcp-storage-emulator not on PATH (pip install gcp-storage-emulator): skipping");
        return None;
    };
    let emulator = Emulator(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "emulator never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((emulator, format!("http://127.0.0.1:{port}")))
}

fn write_run(dir: &Path, big: usize) {
    write_started(dir, &Started::at(1_700_000_000)).unwrap();
    let junit = JunitFile::new(junit_path(dir, "conformance"), "ccm-conformance");
    junit
        .record(CaseResult {
            suite: "openstack".into(),
            name: "[sig-cloud-provider] a".into(),
            outcome: Outcome::Passed,
            duration: Duration::from_secs(1),
            properties: Vec::new(),
            system_out: None,
        })
        .unwrap();
    std::fs::write(dir.join("build-log.txt"), "PASS a\n").unwrap();
    std::fs::create_dir_all(dir.join("cases/x")).unwrap();
    let body: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("cases/x/big.log"), body).unwrap();
    write_finished(
        dir,
        &Finished::new(
            1_700_000_100,
            JobResult::Success,
            &RunMetadata {
                provider: "openstack".into(),
                ..Default::default()
            },
        ),
    )
    .unwrap();
}

const READ_BACK: &str = r#"
import json, os, sys
from google.cloud import storage
client = storage.Client(project="test")
out = {}
for blob in client.list_blobs("bkt"):
    data = blob.download_as_bytes()
    out[blob.name] = {
        "content_type": blob.content_type,
        "metadata": blob.metadata or {},
        "size": len(data),
        "text": data.decode() if len(data) < 4096 else None,
        "checksum": sum(data) % 1000003,
    }
print(json.dumps(out))
"#;

#[tokio::test]
async fn publish_to_emulator_reads_back_with_google_client() {
    if !python_has_storage_client() {
        eprintln!(
            "python google-cloud-storage missing (pip install google-cloud-storage): skipping"
        );
        return;
    }
    let Some((_emulator, endpoint)) = start_emulator() else {
        return;
    };
    let run = tempfile::tempdir().unwrap();
    let big = RESUMABLE_THRESHOLD + 300 * 1024 + 7;
    write_run(run.path(), big);
    let client = Client::new(&endpoint, Auth::None).unwrap();
    let target = Target::parse("gs://bkt/pfx").unwrap();
    let pr = PullRef::new("org/repo", 12).unwrap();
    let report = publish_gcs(&client, run.path(), &target, "pull-ccm", None, Some(&pr))
        .await
        .unwrap();
    assert_eq!(report.build.get(), 1_700_000_000);
    let names: Vec<&str> = report.objects.iter().map(|o| o.name.as_str()).collect();
    let build_dir = "pfx/pr-logs/pull/org_repo/12/pull-ccm/1700000000";
    assert_eq!(
        names.first(),
        Some(&format!("{build_dir}/started.json").as_str())
    );
    let finished_at = names
        .iter()
        .position(|n| n.ends_with("/finished.json"))
        .unwrap();
    assert_eq!(finished_at, report.objects.len() - 4, "{names:?}");

    let out = Command::new("python3")
        .args(["-c", READ_BACK])
        .env("STORAGE_EMULATOR_HOST", &endpoint)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let get = |n: &str| &objects[n];
    assert_eq!(
        get(&format!("{build_dir}/started.json"))["content_type"],
        "application/json"
    );
    let finished: serde_json::Value = serde_json::from_str(
        get(&format!("{build_dir}/finished.json"))["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(finished["passed"], true);
    assert_eq!(finished["metadata"]["provider"], "openstack");
    assert_eq!(
        get(&format!("{build_dir}/artifacts/junit_conformance.xml"))["content_type"],
        "application/xml"
    );
    assert!(
        get(&format!("{build_dir}/build-log.txt"))["content_type"]
            .as_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let big_obj = get(&format!("{build_dir}/artifacts/cases/x/big.log"));
    assert_eq!(big_obj["size"], big as u64);
    let expected: u64 = (0..big).map(|i| (i % 251) as u64).sum::<u64>() % 1_000_003;
    assert_eq!(big_obj["checksum"], expected);
    let alias = get("pfx/pr-logs/directory/pull-ccm/1700000000.txt");
    let link = format!("gs://bkt/{build_dir}");
    assert_eq!(alias["text"], link.as_str());
    assert_eq!(alias["metadata"]["link"], link.as_str());
    assert_eq!(
        get("pfx/pr-logs/directory/pull-ccm/latest-build.txt")["text"],
        "1700000000"
    );
    assert_eq!(
        get("pfx/pr-logs/pull/org_repo/12/pull-ccm/latest-build.txt")["text"],
        "1700000000"
    );

    // latest-build.txt only moves forward: an older build is published with a warning.
    let older = publish_gcs(
        &client,
        run.path(),
        &target,
        "pull-ccm",
        Some("5"),
        Some(&pr),
    )
    .await
    .unwrap();
    assert_eq!(
        older
            .warnings
            .iter()
            .filter(|w| w.contains("stays at"))
            .count(),
        2
    );
    let latest = client
        .read("bkt", "pfx/pr-logs/directory/pull-ccm/latest-build.txt")
        .await
        .unwrap();
    assert_eq!(latest.as_deref(), Some(&b"1700000000"[..]));
    assert_eq!(client.read("bkt", "pfx/nope").await.unwrap(), None);

    gsutil_reads_back(&endpoint, build_dir, &link);

    // The dashboard reads the same bucket back through the listing API.
    let mirror = tempfile::tempdir().unwrap();
    let n = ccm_testgrid::dashboard::mirror_bucket(&client, "bkt", "pfx", mirror.path())
        .await
        .unwrap();
    assert_eq!(n, 6, "2 builds x (started, finished, junit)");
    let grid = ccm_testgrid::dashboard::Grid::new(
        ccm_testgrid::dashboard::load_dir(mirror.path()).unwrap(),
    );
    assert_eq!(grid.runs.len(), 2);
    assert_eq!(grid.runs[0].id, "1700000000");
    assert_eq!(grid.rows.len(), 1);
}

/// Proxy in Python's standard library: TLS in front of the emulator's plain HTTP. gsutil's
/// JSON API client builds `https://` + `gs_json_host` unconditionally (gsutil
/// `gslib/gcs_json_api.py`), and its XML API needs endpoints gcp-storage-emulator answers
/// with 501, so gsutil can only reach the emulator through TLS.
const TLS_PROXY: &str = r#"
import socket, ssl, sys, threading
listen, target, cert, key, ready = sys.argv[1:6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.socket()
srv.bind(("127.0.0.1", int(listen)))
srv.listen(64)
open(ready, "w").close()
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def handle(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
    except (OSError, ssl.SSLError):
        c.close()
        return
    u = socket.create_connection(("127.0.0.1", int(target)))
    threading.Thread(target=pump, args=(t, u), daemon=True).start()
    pump(u, t)
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"#;

/// Reads the published tree back with `gsutil` (ls, cat, stat) when gsutil and openssl are
/// installed; prints why otherwise.
fn gsutil_reads_back(endpoint: &str, build_dir: &str, link: &str) {
    if Command::new("gsutil").arg("version").output().is_err() {
        eprintln!("gsutil not on PATH (pip install gsutil): skipping the gsutil read-back");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("openssl could not make a certificate: skipping the gsutil read-back");
        return;
    }
    let emulator_port = endpoint.rsplit(':').next().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ready = dir.path().join("ready");
    let _proxy = Emulator(
        Command::new("python3")
            .args(["-c", TLS_PROXY, &port.to_string(), emulator_port])
            .arg(&cert)
            .arg(&key)
            .arg(&ready)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "TLS proxy never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let boto = dir.path().join("boto.cfg");
    std::fs::write(
        &boto,
        format!(
            "[Boto]\nhttps_validate_certificates = False\nnum_retries = 1\n\
[Credentials]\ngs_json_host = 127.0.0.1\ngs_json_port = {port}\n\
[GSUtil]\ndefault_project_id = test\nsoftware_update_check_period = 0\n"
        ),
    )
    .unwrap();
    let gsutil = |args: &[&str]| {
        let out = Command::new("gsutil")
            .args(args)
            .env("BOTO_CONFIG", &boto)
            .env("HOME", dir.path())
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "gsutil {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listing = gsutil(&["ls", "-r", &format!("gs://bkt/{build_dir}/")]);
    for f in [
        "started.json",
        "finished.json",
        "build-log.txt",
        "artifacts/junit_conformance.xml",
    ] {
        assert!(
            listing.contains(&format!("gs://bkt/{build_dir}/{f}")),
            "{f} not listed by gsutil: {listing}"
        );
    }
    let finished = gsutil(&["cat", &format!("gs://bkt/{build_dir}/finished.json")]);
    let finished: serde_json::Value = serde_json::from_str(&finished).unwrap();
    assert_eq!(finished["result"], "SUCCESS");
    let stat = gsutil(&[
        "stat",
        "gs://bkt/pfx/pr-logs/directory/pull-ccm/1700000000.txt",
    ]);
    assert!(stat.contains("link:") && stat.contains(link), "{stat}");
    let stat = gsutil(&["stat", &format!("gs://bkt/{build_dir}/started.json")]);
    assert!(stat.contains("application/json"), "{stat}");
}

/// Small chunks force several 308 rounds of a resumable session.
#[tokio::test]
async fn resumable_upload_in_small_chunks() {
    let Some((_emulator, endpoint)) = start_emulator() else {
        return;
    };
    let client = Client::new(&endpoint, Auth::None).unwrap();
    let body: Vec<u8> = (0..(3 * 256 * 1024 + 5)).map(|i| (i % 7) as u8).collect();
    let info = ccm_testgrid::gcs::ObjectInfo {
        content_type: "application/octet-stream".into(),
        ..Default::default()
    };
    client
        .upload_resumable("bkt", "r/a b#c.bin", &body, &info, 256 * 1024)
        .await
        .unwrap();
    let back = client.read("bkt", "r/a b#c.bin").await.unwrap().unwrap();
    assert_eq!(back, body);
}
