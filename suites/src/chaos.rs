//! Chaos: short soaks with fixed seeds (`ccm_harness::soak`), one per way a cloud or a
//! cluster misbehaves, each judged by the soak's invariants (SO-1 … SO-6: one load balancer
//! per LoadBalancer Service carrying traffic, nothing leaked, no duplicates, no node deleted
//! while its instance exists, no Service stuck with its finalizer, no hot loop).
//!
//! Each case must fail for a CCM that lacks the guarantee it exercises; `suites/tests/
//! chaos.rs` shows it with the reference CCM's hidden `--testing-break` variants:
//! - CH-02 (kill -9 during deletes) catches `forget-finalizer` (a Service deleted while its
//!   CCM is down leaks its load balancer);
//! - CH-04 (not-found after every create) catches `skip-lookup-before-create` (on
//!   OpenStack, whose Octavia allows two load balancers of one name, each re-ensure makes a
//!   duplicate);
//! - CH-05 (a throttling storm) catches `retry-without-backoff` (a hot loop) and
//!   `drop-failed-deletes` (a Service whose cleanup failed once is never synced again, so it
//!   keeps its finalizer: SO-5);
//! - CH-01 (failing cloud calls) catches `delete-nodes-on-cloud-errors` (a NotReady node
//!   deleted because the instance check failed: SO-4).
//!
//! The longer form is `ccm-conformance soak` (docs/soak.md).

use std::time::Duration;

use ccm_harness::case::CaseMetrics;
use ccm_harness::soak::faults::rule;
use ccm_harness::soak::{self, FaultJson, FaultKind, FaultPlan, SoakConfig, SoakReport};
use ccm_harness::{Case, CaseError, Environment, Tag};

macro_rules! case {
    ($id:literal, $title:literal, $body:ident) => {
        Case {
            id: $id,
            suite: "Chaos",
            title: $title,
            tags: &[Tag::Mock],
            ccm_args: soak::CCM_ARGS,
            start_ccm: false,
            needs: &[],
            run: |env| Box::pin($body(env)),
        }
    };
}

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "CH-01",
            "converges without leaks or duplicates when cloud calls fail, throttle and lag while Services are created",
            ch01
        ),
        case!(
            "CH-02",
            "leaks nothing when the CCM is killed with SIGKILL during deletes and updates",
            ch02
        ),
        case!(
            "CH-03",
            "keeps nodes and load balancers right through API server restarts during node churn",
            ch03
        ),
        case!(
            "CH-04",
            "makes no duplicate load balancer when every new resource reads as not found for a while",
            ch04
        ),
        case!(
            "CH-05",
            "backs off under a throttling storm instead of hammering the cloud",
            ch05
        ),
    ]
}

/// The Chaos cases' fault-free, kill-free base: 4 Services at most on 3 nodes, a step
/// every 250 ms for 8 s, a minute to converge.
pub fn base(env: &Environment, seed: u64) -> SoakConfig {
    let mut c = SoakConfig::new(env.provider, Duration::from_secs(8), seed);
    c.services = 4;
    c.nodes = 3;
    c.step_interval = Duration::from_millis(250);
    c.quiet_limit = Duration::from_secs(60);
    c.faults = FaultPlan {
        name: "none".into(),
        rules: Vec::new(),
    };
    c.kill_rate = 0.0;
    c.restart_rate = 0.0;
    c
}

/// Runs the soak and turns its verdict into the case's: every broken invariant with its
/// evidence, the figures as metrics either way.
async fn judge(env: &mut Environment, config: SoakConfig) -> Result<CaseMetrics, CaseError> {
    let report = soak::soak_in(env, &config, &mut |line| tracing::info!("{line}")).await?;
    let metrics = metrics(&report);
    let broken: Vec<String> = report
        .invariants
        .iter()
        .filter_map(|i| {
            i.failure
                .as_ref()
                .map(|f| format!("{} {}: {f}", i.id, i.title))
        })
        .collect();
    if broken.is_empty() {
        return Ok(metrics);
    }
    Err(CaseError::with_detail(
        broken.join(" | "),
        format!(
            "{}\n\nseed {} plan {}: {} steps, {} faults fired, {} kills, {} API server restarts, worst {} cloud calls/s\nfaults fired (first 20):\n{}",
            broken.join("\n"),
            report.seed,
            report.digest,
            report.steps,
            report.faults_fired,
            report.kills,
            report.apiserver_restarts,
            report.worst_calls_per_second,
            report
                .fault_journal
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        ),
    ))
}

fn metrics(r: &SoakReport) -> CaseMetrics {
    vec![
        ("seed".into(), r.seed.to_string()),
        ("faults-fired".into(), r.faults_fired.to_string()),
        ("kills".into(), r.kills.to_string()),
        (
            "apiserver-restarts".into(),
            r.apiserver_restarts.to_string(),
        ),
        (
            "worst-calls-per-second".into(),
            r.worst_calls_per_second.to_string(),
        ),
        (
            "converged-seconds".into(),
            r.converged_after
                .map_or("never".into(), |d| format!("{:.1}", d.as_secs_f64())),
        ),
    ]
}

async fn ch01(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut c = base(env, 101);
    c.faults = FaultPlan {
        name: "CH-01".into(),
        rules: vec![
            FaultJson {
                status: 500,
                ..rule(FaultKind::Error, 0.15)
            },
            rule(FaultKind::Throttle, 0.1),
            FaultJson {
                latency_ms: Some(10),
                jitter_ms: Some(90),
                ..rule(FaultKind::Latency, 0.3)
            },
        ],
    };
    judge(env, c).await
}

async fn ch02(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut c = base(env, 102);
    c.kill_rate = 0.15;
    judge(env, c).await
}

async fn ch03(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut c = base(env, 103);
    c.restart_rate = 0.12;
    judge(env, c).await
}

async fn ch04(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut c = base(env, 104);
    c.faults = FaultPlan {
        name: "CH-04".into(),
        rules: vec![FaultJson {
            window_ms: Some(2_000),
            ..rule(FaultKind::NotFoundAfterCreate, 1.0)
        }],
    };
    judge(env, c).await
}

/// Calls in any one second while 60 % of calls are throttled. With client-go's and the
/// SDKs' backoff a handful of Services and nodes stay far below it; a CCM that retries at
/// once makes thousands.
pub const STORM_CALLS_PER_SECOND: usize = 150;

async fn ch05(env: &mut Environment) -> Result<CaseMetrics, CaseError> {
    let mut c = base(env, 105);
    c.faults = FaultPlan {
        name: "CH-05".into(),
        rules: vec![rule(FaultKind::Throttle, 0.6)],
    };
    c.max_calls_per_second = STORM_CALLS_PER_SECOND;
    judge(env, c).await
}
