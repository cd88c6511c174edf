//! The Chaos suite can fail: each case catches the broken CCM it exists for — the
//! reference CCM with one hidden `--testing-break`, on OpenStack:
//! - `forget-finalizer` (no `service.kubernetes.io/load-balancer-cleanup`): CH-02 (kill -9
//!   during deletes) finds load balancers left without their Service;
//! - `skip-lookup-before-create` (every ensure creates anew; Octavia allows two load
//!   balancers of one name): CH-04 (not-found after every create) finds duplicates;
//! - `retry-without-backoff` (failed keys requeued at once): CH-05 (a throttling storm)
//!   finds the hot loop;
//! - `delete-nodes-on-cloud-errors` (a cloud error counts as "instance gone"): CH-01
//!   (failing cloud calls) finds NotReady nodes deleted while their instances exist (SO-4);
//! - `drop-failed-deletes` (a Service whose cleanup failed is never synced again): CH-05
//!   (a throttling storm fails most deletes) finds Services stuck with their finalizer
//!   (SO-5).
//!
//! Needs the `reference-ccm` binary next to this test's (`cargo test --workspace` builds it;
//! alone: `cargo build --bin reference-ccm` first).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccm_harness::{Case, CaseError, Environment, Provider, Settings};

/// `target/<profile>/reference-ccm`, found from this test binary's own path.
fn reference_ccm() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let ccm = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .join("reference-ccm");
    assert!(
        ccm.exists(),
        "{} is missing: run `cargo build --bin reference-ccm` first",
        ccm.display()
    );
    ccm
}

/// A wrapper "binary": the reference CCM with one `--testing-break` after the harness's
/// flags.
fn broken_ccm(dir: &Path, what: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("ccm-{what}"));
    let script = format!(
        "#!/bin/sh\nexec '{}' \"$@\" --testing-break={what}\n",
        reference_ccm().display()
    );
    std::fs::write(&path, script).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn case(id: &str) -> Case {
    ccm_suites::chaos::cases()
        .into_iter()
        .find(|c| c.id == id)
        .expect("case exists")
}

/// Runs one case on OpenStack with the CCM broken by `what`, as the runner does; returns
/// the failure (message and detail) or panics when the case passes.
async fn failure_with(id: &str, what: &str) -> String {
    ccm_harness::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Arc::new(Settings::new(broken_ccm(dir.path(), what)));
    let case = case(id);
    let mut env = Environment::embedded(
        Provider::parse("openstack").unwrap(),
        settings,
        &dir.path().join("case"),
        case.ccm_args,
    )
    .await
    .expect("environment");
    let result = (case.run)(&mut env).await;
    env.teardown().await;
    match result {
        Err(CaseError::Failed {
            message, detail, ..
        }) => format!("{message}\n{detail}"),
        other => panic!("{id} did not catch --testing-break={what}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ch02_catches_a_ccm_that_forgets_the_cleanup_finalizer() {
    let failure = failure_with("CH-02", "forget-finalizer").await;
    assert!(
        failure.contains("belongs to no LoadBalancer Service")
            || failure.contains("SO-2 no cloud resource"),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ch04_catches_a_ccm_that_creates_without_looking_up() {
    let failure = failure_with("CH-04", "skip-lookup-before-create").await;
    assert!(
        failure.contains("SO-3 no duplicate load balancers"),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ch05_catches_a_ccm_that_retries_without_backoff() {
    let failure = failure_with("CH-05", "retry-without-backoff").await;
    assert!(failure.contains("SO-6 a bounded number"), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ch01_catches_a_ccm_that_deletes_nodes_on_cloud_errors() {
    let failure = failure_with("CH-01", "delete-nodes-on-cloud-errors").await;
    assert!(
        failure.contains("SO-4 no node deleted") && failure.contains("while its instance existed"),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ch05_catches_a_ccm_that_gives_up_on_failed_deletes() {
    let failure = failure_with("CH-05", "drop-failed-deletes").await;
    assert!(failure.contains("SO-5 no Service left"), "{failure}");
}
