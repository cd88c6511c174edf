//! The upgrade suite can fail, and fails cleanly on bad input:
//! - a CCM that renames its OpenStack load balancers (the reference CCM with the hidden
//!   `--testing-lb-name-scheme=v2`) is caught by UP-01 (adopting in-tree state) and UP-04
//!   (rolling N -> N+1 -> N);
//! - a CCM that runs the migrated controllers beside kube-controller-manager is caught by
//!   UP-02, in its load-balancer form (OpenStack) and its node-lifecycle form (vSphere);
//! - a CCM binary that does not exist, a malformed leader-migration config and one naming
//!   an unknown controller make the start fail with the reason, and leave no process behind.
//!
//! Needs the `reference-ccm` binary next to this test's (`cargo test --workspace` builds it;
//! alone: `cargo build --bin reference-ccm` first).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccm_harness::env::LEADER_FLAGS;
use ccm_harness::{Case, CaseError, Environment, Provider, Settings};

/// `target/<profile>/reference-ccm`, found from this test binary's own path.
fn reference_ccm() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps");
    let ccm = profile_dir.join("reference-ccm");
    assert!(
        ccm.exists(),
        "{} is missing: run `cargo build --bin reference-ccm` first",
        ccm.display()
    );
    ccm
}

/// A wrapper "binary": the reference CCM with the v2 load-balancer names.
fn renaming_ccm(dir: &Path) -> PathBuf {
    wrapped_ccm(dir, "ccm-renaming-lbs", "--testing-lb-name-scheme=v2")
}

/// A wrapper "binary": the reference CCM with `extra` flags after the harness's.
fn wrapped_ccm(dir: &Path, name: &str, extra: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\nexec '{}' \"$@\" {extra}\n",
        reference_ccm().display()
    );
    std::fs::write(&path, script).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn case(id: &str) -> Case {
    ccm_suites::upgrade::cases()
        .into_iter()
        .find(|c| c.id == id)
        .expect("case exists")
}

/// Runs one case in a fresh environment, as the runner does, and tears it down.
async fn run_case(case: &Case, settings: Settings, dir: &Path) -> Result<(), CaseError> {
    run_case_on(Provider::parse("openstack").unwrap(), case, settings, dir).await
}

/// [`run_case`] on another provider's mock.
async fn run_case_on(
    provider: Provider,
    case: &Case,
    settings: Settings,
    dir: &Path,
) -> Result<(), CaseError> {
    ccm_harness::install_crypto_provider();
    let mut env = Environment::embedded(provider, Arc::new(settings), dir, case.ccm_args).await?;
    let result = (case.run)(&mut env).await;
    env.teardown().await;
    result.map(drop)
}

/// Pids of running processes whose command line mentions `needle` (Linux /proc).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The failure's message and detail, after checking one of them mentions `mentions`.
fn expect_failure(result: Result<(), CaseError>, mentions: &str) -> String {
    match result {
        Err(CaseError::Failed {
            message, detail, ..
        }) => {
            assert!(
                message.contains(mentions) || detail.contains(mentions),
                "expected a failure mentioning {mentions:?}, got: {message}\n{detail}"
            );
            format!("{message}\n{detail}")
        }
        other => panic!("expected a failure mentioning {mentions:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn up01_catches_a_ccm_that_renames_load_balancers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings::new(renaming_ccm(dir.path()));
    let result = run_case(&case("UP-01"), settings, &dir.path().join("case")).await;
    let message = expect_failure(result, "load balancer");
    assert!(message.contains("kube_service_v2_"), "{message}");
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn up04_catches_a_new_version_that_renames_load_balancers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::new(reference_ccm());
    settings.ccm_new = Some(renaming_ccm(dir.path()));
    let result = run_case(&case("UP-04"), settings, &dir.path().join("case")).await;
    let message = expect_failure(result, "load balancer");
    assert!(message.contains("kube_service_v2_"), "{message}");
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn up02_catches_a_ccm_that_runs_service_lb_beside_kube_controller_manager() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ignoring = wrapped_ccm(
        dir.path(),
        "ccm-no-migration",
        "--enable-leader-migration=false",
    );
    let result = run_case(
        &case("UP-02"),
        Settings::new(ignoring),
        &dir.path().join("case"),
    )
    .await;
    expect_failure(
        result,
        "the CCM ran service-lb while the KCM held the migration Lease",
    );
}

/// Without load balancers (vSphere) the case watches cloud-node-lifecycle instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn up02_on_vsphere_catches_a_ccm_that_runs_node_lifecycle_beside_kube_controller_manager() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ignoring = wrapped_ccm(
        dir.path(),
        "ccm-no-migration",
        "--enable-leader-migration=false",
    );
    let result = run_case_on(
        Provider::parse("vsphere").unwrap(),
        &case("UP-02"),
        Settings::new(ignoring),
        &dir.path().join("case"),
    )
    .await;
    expect_failure(
        result,
        "cloud-node-lifecycle to stay with kube-controller-manager",
    );
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_migration_cases_skip_for_a_ccm_without_the_flag() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // Refuses the flag the way pflag does, otherwise the reference CCM.
    let path = dir.path().join("ccm-without-migration");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --enable-leader-migration*) \
         echo 'Error: unknown flag: --enable-leader-migration' >&2; exit 1;; esac; done\n\
         exec '{}' \"$@\"\n",
        reference_ccm().display()
    );
    std::fs::write(&path, script).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let result = run_case(
        &case("UP-03"),
        Settings::new(path),
        &dir.path().join("case"),
    )
    .await;
    match result {
        Err(CaseError::Skipped(reason)) => assert!(
            reason.starts_with("CCM does not support --enable-leader-migration"),
            "{reason}"
        ),
        other => panic!("expected a skip, got {other:?}"),
    }
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
}

/// An environment with the reference CCM, for the bad-input checks.
async fn environment(dir: &Path) -> Environment {
    ccm_harness::install_crypto_provider();
    Environment::embedded(
        Provider::parse("openstack").unwrap(),
        Arc::new(Settings::new(reference_ccm())),
        dir,
        &[],
    )
    .await
    .expect("environment")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_ccm_binaries_and_migration_configs_fail_with_the_reason_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = environment(dir.path()).await;
    let needle = dir.path().display().to_string();

    // A CCM binary that does not exist.
    let missing = dir.path().join("no-such-ccm");
    let result = env.start_replica("ghost", Some(&missing), &[]).await;
    expect_failure(result, "cannot start CCM");
    assert!(!env.replica_alive("ghost"));

    // A malformed leader-migration config: the CCM exits at startup, the case sees why.
    let bad = dir.path().join("migration-bad.yaml");
    std::fs::write(&bad, "kind: [this is not\n").expect("write");
    let mut flags: Vec<String> = LEADER_FLAGS.iter().map(|s| s.to_string()).collect();
    flags.push("--enable-leader-migration=true".into());
    flags.push(format!("--leader-migration-config={}", bad.display()));
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let result = env.start_replica("malformed", None, &args).await;
    let message = expect_failure(result, "leader migration config");
    assert!(message.starts_with("replica malformed: "), "{message}");
    assert!(!env.replica_alive("malformed"));

    // A config naming a controller nobody knows.
    let unknown = dir.path().join("migration-unknown.yaml");
    std::fs::write(
        &unknown,
        "kind: LeaderMigrationConfiguration\n\
         apiVersion: controllermanager.config.k8s.io/v1\n\
         leaderName: cloud-provider-extraction-migration\n\
         controllerLeaders:\n\
         - name: no-such-controller\n  component: '*'\n",
    )
    .expect("write");
    let last = flags.len() - 1;
    flags[last] = format!("--leader-migration-config={}", unknown.display());
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let result = env.start_replica("unknown", None, &args).await;
    expect_failure(result, "no-such-controller");

    // Good replicas run, stop, die on SIGKILL; teardown stops the rest.
    env.start_replica("one", None, LEADER_FLAGS)
        .await
        .expect("replica one");
    env.start_replica("two", None, LEADER_FLAGS)
        .await
        .expect("replica two");
    assert!(env.replica_alive("one") && env.replica_alive("two"));
    env.kill_replica("one").await;
    assert!(!env.replica_alive("one"));
    assert!(
        env.replica_log_tail("one", 50).contains("==> "),
        "log kept after kill"
    );
    assert_eq!(env.replica_names(), vec!["two".to_string()]);
    assert!(
        !processes_mentioning(&needle).is_empty(),
        "replica two runs"
    );
    env.teardown().await;
    assert!(env.replica_names().is_empty());
    assert!(
        processes_mentioning(&needle).is_empty(),
        "no CCM process left after teardown"
    );
}
