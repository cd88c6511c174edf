//! `ccm-conformance bench`: benchmarks that print numbers, medians over `--runs` and, with
//! `--vs`, ratios against a second CCM on the same machine in the same run. `--record`
//! keeps the figures as a Prow build (ccm_testgrid::bench::record) so `dashboard` and
//! TestGrid draw them over runs. The timed code lives in the libraries (ccm_harness::bench,
//! lb_bench, ccm_testgrid::bench); `matrix` times whole `run` processes (crate::shards).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use ccm_harness::{Provider, Settings};
use ccm_testgrid::bench::Figures;
use clap::Args;

use crate::ApiserverKind;

#[derive(Args)]
pub struct BenchArgs {
    /// Which benchmark: node-init, lb (load balancers: time to a reachable ingress, cloud
    /// calls per Service and per node churn), junit (a JUnit write per case), publish (a
    /// synthetic run), merge (3 shards of a synthetic run joined), matrix (the suites of
    /// every provider with --ccm and --vs, unsharded and as --shards processes).
    #[arg(default_value = "node-init")]
    pub name: String,
    /// Cases of the synthetic run (junit, publish, merge).
    #[arg(long, default_value_t = 2000)]
    pub cases: usize,
    /// Where `bench publish` uploads: gs://BUCKET[/PREFIX] or file:///PATH.
    #[arg(long)]
    pub to: Option<String>,
    /// Small log files per case in the `bench publish` run (a real run keeps 3).
    #[arg(long, default_value_t = 0)]
    pub files_per_case: usize,
    /// Nodes (default: 1000 for node-init, 50 for lb).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// LoadBalancer Services (lb).
    #[arg(long, default_value_t = 100)]
    pub services: usize,
    /// Mock cloud for node-init and lb (default: the first in the registry of clouds).
    #[arg(long)]
    pub provider: Option<String>,
    /// Repetitions; the medians are reported (default 3; 1 for matrix, which takes about
    /// half an hour a run on two cores).
    #[arg(long)]
    pub runs: Option<usize>,
    /// `reference`, `upstream[@vX.Y.Z]` or a CCM binary.
    #[arg(long, default_value = "reference")]
    pub ccm: String,
    /// A second CCM run side by side with --ccm (interleaved runs, same machine), e.g.
    /// `--ccm reference --vs upstream`; prints each figure's ratio --ccm/--vs. For
    /// `matrix` it defaults to `upstream` (the full matrix: reference and upstream CCMs).
    #[arg(long, value_name = "CCM")]
    pub vs: Option<String>,
    /// Extra CCM flags, e.g. --ccm-arg=--concurrent-node-syncs=8.
    #[arg(long = "ccm-arg", allow_hyphen_values = true)]
    pub ccm_args: Vec<String>,
    /// Where the benchmarks' clusters and runs keep their files (default: $ARTIFACTS or
    /// ./_artifacts; under bench/).
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
    /// Also write the figures into this build directory in the Prow layout
    /// (junit_bench-<name>.xml: a testcase whose numeric properties are the figures, with
    /// started.json and finished.json), for `publish` and `dashboard`, which graph them
    /// over builds. Several benchmarks can record into one directory, each once.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// matrix: shard processes (default 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=16))]
    pub shards: u16,
    /// matrix: only cases whose full name matches this regular expression (as `run --focus`).
    #[arg(long)]
    pub focus: Option<String>,
    /// The API server for node-init and lb: `embedded` or `real` (as `run --apiserver`).
    #[arg(long, env = "CCM_CONFORMANCE_APISERVER", default_value = "embedded")]
    pub apiserver: ApiserverKind,
}

impl BenchArgs {
    /// `--runs`, or the benchmark's default.
    fn repetitions(&self) -> usize {
        let default = if self.name == "matrix" { 1 } else { 3 };
        self.runs.unwrap_or(default).max(1)
    }
}

/// Runs the benchmark named in `args`, then records its figures when asked.
pub fn bench(args: BenchArgs) -> Result<()> {
    if let Some(dir) = &args.record {
        ccm_testgrid::bench::check_free(dir, &args.name).context("--record")?;
    }
    let started = ccm_testgrid::prow::now_epoch_seconds();
    let clock = Instant::now();
    let mut figures = match args.name.as_str() {
        "junit" | "publish" | "merge" => synthetic(&args)?,
        "matrix" => matrix(&args)?,
        "node-init" => crate::runtime()?.block_on(node_init(&args))?,
        "lb" => crate::runtime()?.block_on(lb(&args))?,
        other => bail!(
            "unknown benchmark {other:?} (known: node-init, lb, junit, publish, merge, matrix)"
        ),
    };
    if let Some(dir) = &args.record {
        // Each benchmark makes one testcase; its time is the benchmark's.
        for f in &mut figures {
            f.elapsed = clock.elapsed();
        }
        let meta = ccm_testgrid::prow::RunMetadata {
            harness_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        // Inside Prow its sidecar writes started.json and finished.json.
        let started = std::env::var_os("PROW_JOB_ID").is_none().then_some(started);
        let junit = ccm_testgrid::bench::record(dir, &args.name, &figures, started, &meta)
            .context("--record")?;
        println!("figures recorded in {}", junit.display());
    }
    Ok(())
}

/// One [`Figures`] from each CCM's medians: `<benchmark> <ccm> <figure>`.
fn figures(benchmark: &str, medians: &[(String, Vec<(&str, f64)>)]) -> Figures {
    Figures {
        benchmark: benchmark.to_string(),
        elapsed: std::time::Duration::ZERO,
        values: medians
            .iter()
            .flat_map(|(ccm, figs)| {
                figs.iter()
                    .map(move |(name, v)| (format!("{benchmark} {ccm} {name}"), *v))
            })
            .collect(),
    }
}

/// `bench junit`, `publish` and `merge`: synthetic runs of `--cases` cases.
fn synthetic(args: &BenchArgs) -> Result<Vec<Figures>> {
    let cases = args.cases;
    let dir = tempfile::tempdir().context("creating a work directory")?;
    let secs = |d: std::time::Duration| d.as_secs_f64();
    let (benchmark, values) = match args.name.as_str() {
        "junit" => {
            let t = ccm_testgrid::bench::junit_writes(dir.path(), cases)?;
            println!(
                "junit write after each case, {} cases: median {:.3} ms  p99 {:.3} ms  max {:.3} ms  total {:.3} s  (target: < 5 ms)",
                t.count,
                secs(t.median) * 1e3,
                secs(t.p99) * 1e3,
                secs(t.max) * 1e3,
                secs(t.total)
            );
            let b = format!("junit {cases} cases");
            let values = vec![
                (format!("{b} write-median-ms"), secs(t.median) * 1e3),
                (format!("{b} write-p99-ms"), secs(t.p99) * 1e3),
            ];
            (b, values)
        }
        "publish" => {
            let Some(to) = args.to.as_deref() else {
                bail!(
                    "bench publish needs --to gs://BUCKET[/PREFIX] (with STORAGE_EMULATOR_HOST) or file:///PATH"
                );
            };
            let target = ccm_testgrid::publish::Target::parse(to)?;
            ccm_testgrid::bench::write_run(dir.path(), cases, args.files_per_case)?;
            let t = Instant::now();
            let report = ccm_testgrid::publish::publish(
                dir.path(),
                &target,
                "ci-bench",
                Some(&ccm_testgrid::prow::now_epoch_seconds().to_string()),
                None,
            )?;
            let elapsed = t.elapsed();
            let bytes: u64 = report.objects.iter().map(|o| o.bytes).sum();
            println!(
                "publish of a {cases}-case run ({} objects, {:.1} MiB) to {to}: {:.2} s  (target: < 10 s)",
                report.objects.len(),
                bytes as f64 / (1024.0 * 1024.0),
                secs(elapsed)
            );
            let b = format!("publish {cases} cases");
            (b.clone(), vec![(format!("{b} s"), secs(elapsed))])
        }
        _ => {
            let t = ccm_testgrid::bench::merge_runs(dir.path(), cases, 3, args.repetitions())?;
            println!(
                "merge of 3 shards of a {cases}-case run (one case log each): median {:.3} s  max {:.3} s  over {} merges",
                secs(t.median),
                secs(t.max),
                t.count
            );
            let b = format!("merge {cases} cases");
            (b.clone(), vec![(format!("{b} median-s"), secs(t.median))])
        }
    };
    Ok(vec![Figures {
        benchmark,
        elapsed: std::time::Duration::ZERO,
        values,
    }])
}

/// One CCM's share of a `bench matrix` repetition.
struct MatrixRun {
    unsharded: f64,
    sharded: f64,
    merge: f64,
}

/// `bench matrix`: for each CCM (`--ccm`, then `--vs`, by default `upstream`), the suites of
/// every provider as one `run` process, then as `--shards` processes of `run --shard K/N`
/// at once, merged. Prints the wall times, the merge's and whether the merged verdicts
/// equal the unsharded ones case by case (they may not where a case is flaky).
fn matrix(args: &BenchArgs) -> Result<Vec<Figures>> {
    let n = usize::from(args.shards);
    let vs = args.vs.clone().unwrap_or_else(|| "upstream".into());
    let ccms = [args.ccm.clone(), vs];
    let root = args
        .artifacts
        .clone()
        .unwrap_or_else(ccm_harness::settings::default_artifacts)
        .join("bench")
        .join(format!(
            "matrix-{}",
            ccm_testgrid::prow::now_epoch_seconds()
        ));
    println!(
        "matrix: every provider's suites with {} and {}, each as 1 process, then as {n} shard processes balanced by that run's durations; files in {}",
        ccms[0],
        ccms[1],
        root.display()
    );
    let mut results: Vec<Vec<MatrixRun>> = vec![Vec::new(), Vec::new()];
    for run in 1..=args.repetitions() {
        for (i, ccm) in ccms.iter().enumerate() {
            let dir =
                root.join(format!("run-{run}"))
                    .join(format!("{}-{}", i + 1, bench_dir_name(ccm)));
            let mut child: Vec<std::ffi::OsString> = vec!["--ccm".into(), ccm.into()];
            if let Some(focus) = &args.focus {
                child.extend(["--focus".into(), focus.into()]);
            }
            for a in &args.ccm_args {
                child.push(format!("--ccm-arg={a}").into());
            }
            println!("run {run} [{ccm}]: unsharded, in {}", dir.display());
            let whole = crate::shards::run_all(&child, vec![(None, dir.join("unsharded"))], false)?;
            let whole = expect_completed(whole)?.remove(0);
            let shard_dirs: Vec<PathBuf> =
                (1..=n).map(|k| dir.join(format!("shard-{k}"))).collect();
            // Balanced by the durations of the unsharded run just made, as a Prow job
            // would balance by its previous run's JUnit.
            let mut child = child.clone();
            child.extend([
                "--shard-durations".into(),
                whole.dir.clone().into_os_string(),
            ]);
            println!(
                "run {run} [{ccm}]: unsharded took {:.1}s; now {n} shards",
                whole.elapsed.as_secs_f64()
            );
            let parts = crate::shards::run_all(
                &child,
                shard_dirs
                    .iter()
                    .enumerate()
                    .map(|(k, d)| (Some((k + 1, n)), d.clone()))
                    .collect(),
                false,
            )?;
            let parts = expect_completed(parts)?;
            let sharded = parts
                .iter()
                .map(|p| p.elapsed.as_secs_f64())
                .fold(0.0, f64::max);
            let merged_dir = dir.join("merged");
            let t = Instant::now();
            let merged = ccm_testgrid::merge::merge(&shard_dirs, &merged_dir)
                .with_context(|| format!("merging {}", dir.display()))?;
            let merge = t.elapsed().as_secs_f64();
            let differ = differing_verdicts(&whole.dir, &merged_dir)?;
            let unsharded = whole.elapsed.as_secs_f64();
            let shard_times: Vec<String> = parts
                .iter()
                .map(|p| format!("{:.0}", p.elapsed.as_secs_f64()))
                .collect();
            println!(
                "run {run} [{ccm}]: unsharded {unsharded:.1}s  |  {n} shards {sharded:.1}s (each {} s), merge {merge:.3}s  |  speed-up {:.2}  |  {} cases, {}",
                shard_times.join("/"),
                unsharded / sharded,
                merged.cases,
                if differ.is_empty() {
                    "every verdict the same".to_string()
                } else {
                    format!("{} verdicts differ: {}", differ.len(), differ.join("; "))
                }
            );
            results[i].push(MatrixRun {
                unsharded,
                sharded,
                merge,
            });
        }
    }
    let mut values = Vec::new();
    let total = |f: &dyn Fn(&MatrixRun) -> f64| {
        let runs = results[0].len();
        median(
            (0..runs)
                .map(|r| results.iter().map(|c| f(&c[r])).sum())
                .collect(),
        )
    };
    for (ccm, runs) in ccms.iter().zip(&results) {
        let m = |f: &dyn Fn(&MatrixRun) -> f64| median(runs.iter().map(f).collect());
        let (u, s) = (m(&|r| r.unsharded), m(&|r| r.sharded));
        println!(
            "matrix median of {} runs [{ccm}]: unsharded {u:.1}s  {n} shards {s:.1}s  speed-up {:.2}  merge {:.3}s",
            runs.len(),
            u / s,
            m(&|r| r.merge)
        );
        values.push((format!("matrix {ccm} unsharded-s"), u));
        values.push((format!("matrix {ccm} {n}-shards-s"), s));
    }
    let (u, s) = (total(&|r| r.unsharded), total(&|r| r.sharded));
    println!(
        "full matrix ({} and {}, every provider): unsharded {u:.1}s  {n} shards {s:.1}s  speed-up {:.2}",
        ccms[0],
        ccms[1],
        u / s
    );
    values.push(("matrix total unsharded-s".into(), u));
    values.push((format!("matrix total {n}-shards-s"), s));
    Ok(vec![Figures {
        benchmark: "matrix".into(),
        elapsed: std::time::Duration::ZERO,
        values,
    }])
}

/// The runs, when each completed (its JUnit and finished.json written); else the first that
/// did not, with where its output is.
fn expect_completed(runs: Vec<crate::shards::Finished>) -> Result<Vec<crate::shards::Finished>> {
    if let Some(bad) = runs.iter().find(|r| !r.completed()) {
        bail!(
            "a child run did not complete ({}); its output: {}",
            bad.code
                .map_or("killed by a signal".into(), |c| format!("exit {c}")),
            bad.output().display()
        );
    }
    Ok(runs)
}

/// Cases whose final verdict differs between two runs' JUnit (or that only one has), as
/// `name: a -> b`.
fn differing_verdicts(a: &std::path::Path, b: &std::path::Path) -> Result<Vec<String>> {
    let (a, b) = (
        ccm_testgrid::read::read_results(a)?,
        ccm_testgrid::read::read_results(b)?,
    );
    let verdict = |r: Option<&ccm_testgrid::read::CaseRecord>| {
        r.and_then(|r| r.last())
            .map_or("missing".to_string(), |at| format!("{:?}", at.status))
    };
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let (x, y) = (verdict(a.get(name)), verdict(b.get(name)));
            (x != y).then(|| format!("{name}: {x} -> {y}"))
        })
        .collect())
}

/// `bench node-init`: see ccm_harness::bench.
async fn node_init(args: &BenchArgs) -> Result<Vec<Figures>> {
    let provider = bench_provider(args.provider.as_deref())?;
    let nodes = args.nodes.unwrap_or(1000);
    let ccms = bench_ccms(args, provider)?;
    let mut reports: Vec<Vec<ccm_harness::bench::NodeInitReport>> = vec![Vec::new(); ccms.len()];
    for run in 1..=args.repetitions() {
        // Interleaved, so both CCMs see the same machine load over the runs.
        for (i, (label, settings)) in ccms.iter().enumerate() {
            let dir = settings
                .artifacts
                .join("bench")
                .join(format!("node-init-{}-{run}", bench_dir_name(label)));
            let r =
                ccm_harness::bench::node_init(provider, settings.clone(), &dir, nodes, &[]).await?;
            println!(
                "run {run} [{label}]: {} nodes  p50 {:.3}s  p99 {:.3}s  max {:.3}s  total {:.3}s  (registration {:.3}s)",
                r.nodes,
                r.p50.as_secs_f64(),
                r.p99.as_secs_f64(),
                r.max.as_secs_f64(),
                r.total.as_secs_f64(),
                r.registration.as_secs_f64()
            );
            reports[i].push(r);
        }
    }
    let mut medians = Vec::new();
    for ((label, _), reports) in ccms.iter().zip(&reports) {
        let m = |f: &dyn Fn(&ccm_harness::bench::NodeInitReport) -> f64| {
            median(reports.iter().map(f).collect())
        };
        let (p50, p99, total) = (
            m(&|r| r.p50.as_secs_f64()),
            m(&|r| r.p99.as_secs_f64()),
            m(&|r| r.total.as_secs_f64()),
        );
        println!(
            "node-init median of {} runs [{label}]: {} nodes  p50 {p50:.3}s  p99 {p99:.3}s  total {total:.3}s",
            reports.len(),
            nodes,
        );
        medians.push((
            label.clone(),
            vec![("p50", p50), ("p99", p99), ("all", total)],
        ));
    }
    print_ratios(&medians);
    Ok(vec![figures(
        &format!("node-init {}", provider.name()),
        &medians,
    )])
}

/// The CCMs a benchmark runs: `--ccm`, then `--vs` when given, each with its settings
/// (upstream ones built or found in the cache first).
fn bench_ccms(args: &BenchArgs, provider: Provider) -> Result<Vec<(String, Arc<Settings>)>> {
    let mut out = Vec::new();
    for ccm in std::iter::once(&args.ccm).chain(args.vs.as_ref()) {
        let mut settings = Settings::new(crate::reference_ccm()?);
        settings.set_ccm(ccm);
        settings.ccm_args = args.ccm_args.clone();
        if let Some(dir) = &args.artifacts {
            settings.artifacts = dir.clone();
        }
        settings.apiserver = args.apiserver.into();
        settings.resolve(&[provider], &mut |line| eprintln!("{line}"))?;
        out.push((ccm.clone(), Arc::new(settings.for_provider(provider))));
    }
    Ok(out)
}

fn bench_dir_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// With two CCMs: each figure's ratio first/second (a time ratio above 1 means the second
/// is faster).
fn print_ratios(medians: &[(String, Vec<(&str, f64)>)]) {
    if let [(a, fa), (b, fb)] = medians {
        let parts: Vec<String> = fa
            .iter()
            .zip(fb)
            .map(|((name, x), (_, y))| format!("{name} {:.2}", x / y))
            .collect();
        println!("ratio {a}/{b}: {}", parts.join("  "));
    }
}

/// `bench lb`: see ccm_harness::lb_bench.
async fn lb(args: &BenchArgs) -> Result<Vec<Figures>> {
    use ccm_harness::lb_bench::{CHURN_NODES, LbBenchReport};
    let provider = bench_provider(args.provider.as_deref())?;
    // Whether the provider has load balancers is the cloud's to say (vSphere has none).
    let cloud = ccm_harness::CloudControl::start(provider, 0).await?;
    let unsupported = cloud
        .supports(ccm_harness::cloud::Feature::LoadBalancers)
        .err();
    cloud.shutdown().await;
    if let Some(why) = unsupported {
        println!("lb ({}): not applicable ({why})", provider.name());
        return Ok(Vec::new());
    }
    let nodes = args.nodes.unwrap_or(50);
    let ccms = bench_ccms(args, provider)?;
    let mut reports: Vec<Vec<LbBenchReport>> = (0..ccms.len()).map(|_| Vec::new()).collect();
    for run in 1..=args.repetitions() {
        for (i, (label, settings)) in ccms.iter().enumerate() {
            let dir = settings
                .artifacts
                .join("bench")
                .join(format!("lb-{}-{run}", bench_dir_name(label)));
            let r = ccm_harness::lb_bench::load_balancers(
                provider,
                settings.clone(),
                &dir,
                args.services,
                nodes,
                &[],
            )
            .await?;
            println!(
                "run {run} [{label}]: {} services on {} nodes ({}, --concurrent-service-syncs={})  ingress reachable p50 {:.3}s  p99 {:.3}s  max {:.3}s  all {:.3}s  |  per Service {:.1} LB calls ({:.1} cloud calls), {:.1} writes  |  +{n} nodes: {} calls, {} writes, {} UpdateLoadBalancer ({:.2}/Service, {:.2} writes each)  -{n} nodes: {} calls, {} writes, {} UpdateLoadBalancer ({:.2}/Service, {:.2} writes each)",
                r.services,
                r.nodes,
                provider.name(),
                r.concurrent_service_syncs,
                r.p50.as_secs_f64(),
                r.p99.as_secs_f64(),
                r.max.as_secs_f64(),
                r.total.as_secs_f64(),
                r.calls_per_service,
                r.cloud_calls_per_service,
                r.writes_per_service,
                r.add_calls,
                r.add_writes,
                r.add_updates,
                r.updates_per_service(r.add_updates),
                LbBenchReport::writes_per_update(r.add_writes, r.add_updates),
                r.remove_calls,
                r.remove_writes,
                r.remove_updates,
                r.updates_per_service(r.remove_updates),
                LbBenchReport::writes_per_update(r.remove_writes, r.remove_updates),
                n = CHURN_NODES,
            );
            reports[i].push(r);
        }
    }
    let mut medians = Vec::new();
    for ((label, _), reports) in ccms.iter().zip(&reports) {
        let m = |f: &dyn Fn(&LbBenchReport) -> f64| median(reports.iter().map(f).collect());
        let (p50, p99) = (m(&|r| r.p50.as_secs_f64()), m(&|r| r.p99.as_secs_f64()));
        let calls = m(&|r| r.cloud_calls_per_service);
        let (add, remove) = (
            m(&|r| r.updates_per_service(r.add_updates)),
            m(&|r| r.updates_per_service(r.remove_updates)),
        );
        println!(
            "lb median of {} runs [{label}] ({}, --concurrent-service-syncs={}): ingress p50 {p50:.3}s  p99 {p99:.3}s  |  {:.1} LB calls/Service, {calls:.1} cloud calls/Service (create)  |  writes per node change (per UpdateLoadBalancer): +{n} {:.2}  -{n} {:.2}  |  UpdateLoadBalancer/Service: +{n} {add:.2}  -{n} {remove:.2}",
            reports.len(),
            provider.name(),
            reports.first().map_or(1, |r| r.concurrent_service_syncs),
            m(&|r| r.calls_per_service),
            m(&|r| LbBenchReport::writes_per_update(r.add_writes, r.add_updates)),
            m(&|r| LbBenchReport::writes_per_update(r.remove_writes, r.remove_updates)),
            n = CHURN_NODES,
        );
        medians.push((
            label.clone(),
            vec![("p50", p50), ("p99", p99), ("cloud-calls/Service", calls)],
        ));
    }
    print_ratios(&medians);
    Ok(vec![figures(&format!("lb {}", provider.name()), &medians)])
}

/// `--provider`, or the first cloud of the registry.
fn bench_provider(name: Option<&str>) -> Result<Provider> {
    match name {
        Some(name) => Provider::parse(name).map_err(anyhow::Error::msg),
        None => Ok(Provider::all()[0]),
    }
}
