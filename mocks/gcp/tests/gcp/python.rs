//! google-cloud-compute (Google's Compute client for Python, REST transport) against the
//! mock over a socket (`tests/gcp_sdk_judge.py`): a bearer token from the token endpoint
//! and a stale one refreshed through it, an instance with the fields a CCM reads, a list
//! paged two at a time, an address, a target pool with a member and a forwarding rule
//! made with `.result()` on their operations (one polled while PENDING, one failing), 404
//! and 409 as the client's `NotFound` and `Conflict`, deletes, and no leak.
//!
//! Skips, saying why, without python3 and google-cloud-compute (`scripts/setup.sh`
//! installs it); when `CI` is set a missing SDK fails instead, so CI cannot pass by
//! skipping.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mock_gcp::{Config, GcpMock, LifecycleMode, LifecycleTarget};
use serde_json::json;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gcp_sdk_judge.py")
}

async fn sdk_available() -> bool {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args([
        "-c",
        "import google.cloud.compute_v1, google.oauth2.credentials",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    cmd.status().await.is_ok_and(|s| s.success())
}

#[tokio::test]
async fn google_cloud_compute_for_python_judges_the_mock() -> Result<()> {
    if !sdk_available().await {
        return crate::missing(
            "python3 with google-cloud-compute is not available (scripts/setup.sh installs it)",
        );
    }
    // Seven instances, listed two a page: the pager follows nextPageToken three times.
    let mock = GcpMock::start(Config {
        nodes: 7,
        address_block: 41,
        ..Config::default()
    })
    .await?;
    let admin = mock.admin();
    // Target pools' operations answer PENDING for two reads, so `.result()` polls; any
    // operation on `judge-broken` ends in ERROR.
    admin.set_lifecycle(
        LifecycleTarget::Type("targetpools".into()),
        Some(LifecycleMode::Reads { n: 2 }),
    )?;
    admin.set_lifecycle(
        LifecycleTarget::Resource("judge-broken".into()),
        Some(LifecycleMode::Error),
    )?;
    let ready = mock.ready_info();
    let dir = tempfile::tempdir()?;
    let ready_file = dir.path().join("ready.json");
    std::fs::write(&ready_file, serde_json::to_vec(&ready)?)?;
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(script()).arg(&ready_file);
    crate::hermetic(&mut cmd, &ready.metadata_host);
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .context("the judge timed out")??;
    let took = started.elapsed();
    let journal = admin.journal();
    let leaks = admin.leaks();
    mock.shutdown().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("gcp_sdk_judge.py failed ({}): {stderr}", out.status);
    }
    let got: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .with_context(|| format!("not JSON: {stdout}\n{stderr}"))?;
    let want = json!({
        "address.delete_again": 404,
        "address.duplicate": [409, "alreadyExists"],
        "address.failed_left": 404,
        "address.failed_op": ["InternalServerError", 500, 500],
        "address.in_use": "IN_USE",
        "address.ip_prefix": "127.71.41",
        "address.op_done": true,
        "address.op_error": 0,
        "address.status": "RESERVED",
        "address.type": "EXTERNAL",
        "deleted": ["rule", "pool", "address"],
        "leaks": 0,
        "list.filtered": ["node-1"],
        "list.names": ["node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"],
        "list.pages": 4,
        "pool.affinity": "NONE",
        "pool.instances": ["node-0"],
        "pool.op_done": true,
        "pool.op_pending": true,
        "rule.ip_matches": true,
        "rule.port_range": "18080-18080",
        "rule.protocol": "TCP",
        "rule.target": "judge-pool",
        "stale_token.new": true,
        "stale_token.refreshed": "node-1",
        "token.expires": true,
        "token.type": "Bearer",
        "vm.id": true,
        "vm.machine_type": "e2-standard-2",
        "vm.missing": [404, "notFound"],
        "vm.name": "node-0",
        "vm.nat_ip_prefix": "127.72.41",
        "vm.network": "default",
        "vm.network_ip_prefix": "127.70.41",
        "vm.self_link": true,
        "vm.status": "RUNNING",
        "vm.tags": ["ccm-node"],
        "vm.zone": "us-central1-a",
        "zones": ["us-central1-a", "us-central1-b", "us-central1-c"],
    });
    assert_eq!(got, want);
    let op = |name: &str| {
        journal.count(|e| e.service == "compute" && e.operation.as_deref() == Some(name))
    };
    // The pager sent the page tokens it was given; the pending operations (target pool
    // insert, addInstance, delete: two PENDING reads each, then DONE) were polled through
    // regionOperations.get at the mock, never elsewhere.
    assert!(
        journal.count(|e| e.operation.as_deref() == Some("compute.instances.list")
            && e.query.contains("pageToken="))
            == 3,
        "instances.list with a pageToken"
    );
    assert!(op("compute.regionOperations.get") >= 9, "polled operations");
    // The stale token: one 401, one refresh (grant_type=refresh_token), one retry.
    assert_eq!(
        journal.count(|e| e.service == "compute" && e.status == 401),
        1,
        "exactly the stale token's call is refused"
    );
    assert_eq!(
        journal.count(|e| e.operation.as_deref() == Some("POST token")),
        2,
        "one token for the judge, one refresh"
    );
    assert_eq!(leaks.total, 0, "{leaks:?}");
    eprintln!("google-cloud-compute judge: {took:?}");
    Ok(())
}
