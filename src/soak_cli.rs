//! `ccm-conformance soak`: the command line around [`ccm_harness::soak`] — checks every
//! argument before anything starts (one line and exit status 2 when one is wrong), prints
//! progress and a summary, and leaves the run in the Prow layout: `junit_soak.xml` (one
//! testcase per invariant, the seed and plan digest as properties), `started.json`,
//! `finished.json`, `metadata.json`, `faults-fired.txt` (every fault the cloud fired) and
//! `workload-errors.txt` (the first workload steps the API server or the cloud refused).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ccm_harness::run::prow;
use ccm_harness::soak::{FaultPlan, SoakConfig, SoakReport};
use ccm_harness::{Provider, Settings};
use ccm_testgrid::junit::{CaseResult, JunitFile, Outcome};
use clap::Args;

#[derive(Args)]
pub struct SoakArgs {
    /// The provider whose mock cloud and CCM to soak (openstack, aws, vsphere, azure, gcp).
    #[arg(long)]
    provider: String,
    /// `reference`, `upstream[@vX.Y.Z]` or the path of a CCM binary.
    #[arg(long, default_value = "reference")]
    ccm: String,
    /// Extra flag for the CCM (repeatable).
    #[arg(long = "ccm-arg", allow_hyphen_values = true)]
    ccm_args: Vec<String>,
    /// How long the workload runs: `90s`, `10m`, `1h`, `1m30s`.
    #[arg(long, default_value = "10m")]
    duration: String,
    /// At most this many Services at once.
    #[arg(long, default_value_t = 30)]
    services: usize,
    /// Nodes at the start (the workload adds and removes around this number).
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// The seed of the workload and of the cloud's faults (default: from the clock; always
    /// printed, and recorded in the JUnit properties, so a run can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// `none`, `light`, `heavy`, or a JSON file of fault rules (the mocks' wire form).
    #[arg(long, default_value = "light")]
    faults: String,
    /// Never `kill -9` the CCM.
    #[arg(long)]
    no_kills: bool,
    /// Never restart the API server.
    #[arg(long)]
    no_apiserver_restarts: bool,
    /// CCM replicas: 2 or more elect a leader on the `cloud-controller-manager` Lease, and
    /// each kill hits one of them (the leader about half the time with 2).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Time between workload steps, e.g. `500ms`.
    #[arg(long, default_value = "500ms")]
    step_interval: String,
    /// How long the quiet phase (and the cleanup) may take: the CCM's maximum backoff plus
    /// a margin (upstream's service controller backs off up to 5 min).
    #[arg(long, default_value = "330s")]
    quiet_limit: String,
    /// How long the API server keeps an Event after its last write (kube-apiserver's
    /// `--event-ttl`; the Events are the harness's longest-lived memory in a soak).
    #[arg(long, default_value = "1h")]
    event_ttl: String,
    /// The bound on cloud calls in any one second (invariant SO-6).
    #[arg(long, default_value_t = 400)]
    max_calls_per_second: usize,
    /// Where the run's files go.
    #[arg(long, default_value = "_artifacts/soak")]
    artifacts: PathBuf,
    /// Also print the libraries' log lines on the terminal (they are always in
    /// `harness.log` under --artifacts).
    #[arg(long)]
    verbose: bool,
}

impl SoakArgs {
    /// Where the libraries' log lines go.
    pub fn run_log(&self) -> PathBuf {
        self.artifacts.join("harness.log")
    }

    pub fn verbose(&self) -> bool {
        self.verbose
    }
}

/// `90s`, `10m`, `1h`, `500ms`, `1m30s`: whole numbers with a unit each.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (e.g. 90s, 10m, 1h, 500ms, 1m30s)");
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(bad()),
        };
        total += unit;
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        return Err(format!("{text:?}: a duration must be more than zero"));
    }
    Ok(total)
}

/// The configuration `args` describe with the API server's Event TTL, or the one line
/// saying what is wrong.
fn config(args: &SoakArgs) -> Result<(SoakConfig, std::time::Duration), String> {
    let provider = Provider::parse(&args.provider)?;
    let duration = parse_duration(&args.duration).map_err(|e| format!("--duration {e}"))?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let mut c = SoakConfig::new(provider, duration, seed);
    c.faults = FaultPlan::parse(&args.faults)?;
    c.services = args.services;
    c.nodes = args.nodes.max(1);
    if args.no_kills {
        c.kill_rate = 0.0;
    }
    if args.no_apiserver_restarts {
        c.restart_rate = 0.0;
    }
    c.step_interval =
        parse_duration(&args.step_interval).map_err(|e| format!("--step-interval {e}"))?;
    c.quiet_limit = parse_duration(&args.quiet_limit).map_err(|e| format!("--quiet-limit {e}"))?;
    c.max_calls_per_second = args.max_calls_per_second;
    if !(1..=5).contains(&args.replicas) {
        return Err(format!(
            "--replicas {}: between 1 and 5 CCM replicas",
            args.replicas
        ));
    }
    c.replicas = args.replicas;
    let event_ttl = parse_duration(&args.event_ttl)
        .map_err(|e| format!("--event-ttl {e}"))
        .and_then(|ttl| match ttl.is_zero() {
            true => Err("--event-ttl must be longer than 0s".to_string()),
            false => Ok(ttl),
        })?;
    Ok((c, event_ttl))
}

pub fn soak(args: SoakArgs) -> Result<ExitCode> {
    let (config, event_ttl) = match config(&args) {
        Ok(c) => c,
        Err(line) => {
            eprintln!("error: {line}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut settings = Settings::new(crate::reference_ccm()?);
    settings.event_ttl = event_ttl;
    settings.set_ccm(&args.ccm);
    settings.ccm_args = args.ccm_args.clone();
    settings.artifacts = args.artifacts.clone();
    settings.resolve(&[config.provider], &mut |line| eprintln!("{line}"))?;
    settings.providers = vec![config.provider];
    // started.json and metadata.json as every run writes them.
    let metadata = prow::run_metadata(&settings);
    prow::begin(&args.artifacts, &metadata)?;
    println!(
        "soak: {} for {}s, {} Services, {} nodes, faults {}, seed {} (replay with --seed {})",
        config.provider.name(),
        config.duration.as_secs(),
        config.services,
        config.nodes,
        config.faults.name,
        config.seed,
        config.seed
    );
    let settings = Arc::new(settings.for_provider(config.provider));
    let dir = args.artifacts.join("soak");
    let report = crate::runtime()?.block_on(async {
        ccm_harness::soak::soak(&config, settings, &dir, &mut |line| println!("{line}")).await
    });
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            prow::write_finished(
                &args.artifacts,
                &metadata,
                ccm_testgrid::prow::JobResult::Failure,
            )?;
            return Err(anyhow::anyhow!("the soak could not run: {e}"));
        }
    };
    write_junit(&args.artifacts, &config, &report)?;
    std::fs::write(
        args.artifacts.join("faults-fired.txt"),
        report.fault_journal.join("\n") + "\n",
    )
    .context("writing faults-fired.txt")?;
    std::fs::write(
        args.artifacts.join("workload-errors.txt"),
        report.workload_error_samples.join("\n") + "\n",
    )
    .context("writing workload-errors.txt")?;
    print_summary(&config, &report);
    let result = if report.passed() {
        ccm_testgrid::prow::JobResult::Success
    } else {
        ccm_testgrid::prow::JobResult::Failure
    };
    prow::write_finished(&args.artifacts, &metadata, result)?;
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn write_junit(dir: &std::path::Path, config: &SoakConfig, r: &SoakReport) -> Result<()> {
    let provider = config.provider.name();
    let junit = JunitFile::new(
        ccm_testgrid::junit::junit_path(dir, "soak"),
        "ccm-conformance soak",
    );
    let properties = vec![
        ("seed".to_string(), r.seed.to_string()),
        ("plan-digest".to_string(), r.digest.clone()),
        ("faults".to_string(), config.faults.name.clone()),
        ("steps".to_string(), r.steps.to_string()),
        ("faults-fired".to_string(), r.faults_fired.to_string()),
        ("kills".to_string(), r.kills.to_string()),
        (
            "apiserver-restarts".to_string(),
            r.apiserver_restarts.to_string(),
        ),
        ("ccm-exits".to_string(), r.ccm_exits.to_string()),
        ("replicas".to_string(), config.replicas.to_string()),
        (
            "leader-transitions".to_string(),
            r.leader_transitions.map_or("-".into(), |n| n.to_string()),
        ),
        ("rss-start-kib".to_string(), r.rss_start_kib.to_string()),
        ("rss-end-kib".to_string(), r.rss_end_kib.to_string()),
        (
            "worst-calls-per-second".to_string(),
            r.worst_calls_per_second.to_string(),
        ),
        (
            "converged-seconds".to_string(),
            r.converged_after
                .map_or("never".into(), |d| format!("{:.1}", d.as_secs_f64())),
        ),
    ];
    let cases = r
        .invariants
        .iter()
        .map(|i| CaseResult {
            suite: format!("soak-{provider}"),
            name: format!("[sig-cloud-provider] [{provider}] Soak {} ({})", i.title, i.id),
            outcome: match &i.failure {
                None => Outcome::Passed,
                Some(evidence) => Outcome::Failed {
                    message: evidence.chars().take(400).collect(),
                    detail: format!(
                        "{evidence}\n\nreplay: ccm-conformance soak --provider {provider} --seed {} --faults {} --duration {}s",
                        r.seed,
                        config.faults.name,
                        config.duration.as_secs()
                    ),
                },
            },
            duration: i.took,
            properties: properties.clone(),
            system_out: None,
        })
        .collect();
    junit.seal(cases)?;
    Ok(())
}

fn print_summary(config: &SoakConfig, r: &SoakReport) {
    println!();
    if let Some(first) = r.workload_error_samples.first() {
        println!(
            "  {} workload steps refused (first: {first}; all in workload-errors.txt)",
            r.workload_errors
        );
    }
    for i in &r.invariants {
        match &i.failure {
            None => println!("  PASS {} {}", i.id, i.title),
            Some(e) => println!("  FAIL {} {}: {e}", i.id, i.title),
        }
    }
    if let Some(n) = r.leader_transitions {
        println!(
            "  {} CCM replicas; the leader's Lease changed hands {n} times",
            config.replicas
        );
    }
    println!(
        "soak {}: {} of {} invariants held; seed {} plan {}; {} steps ({} refused), {} faults fired, {} kills, {} API server restarts, {} CCM exits; converged {}; worst {} cloud calls/s ({} calls); harness {:.0}% of a core, RSS {} → {} MiB (peak {}); {:.0}s",
        config.provider.name(),
        r.invariants.iter().filter(|i| i.failure.is_none()).count(),
        r.invariants.len(),
        r.seed,
        r.digest,
        r.steps,
        r.workload_errors,
        r.faults_fired,
        r.kills,
        r.apiserver_restarts,
        r.ccm_exits,
        r.converged_after
            .map_or("never".into(), |d| format!("after {:.1}s", d.as_secs_f64())),
        r.worst_calls_per_second,
        r.cloud_calls,
        r.harness_cpu_share * 100.0,
        r.rss_start_kib / 1024,
        r.rss_end_kib / 1024,
        r.rss_peak_kib / 1024,
        r.wall.as_secs_f64(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_the_rest() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "10", "m", "ten minutes", "10x", "-5s", "0s", "1.5m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
