//! The TestGrid-facing subcommands that are more than a call into `ccm_testgrid`:
//! `dashboard`, `certify` and the `junit`/`publish` benchmarks. Kept out of main.rs so that
//! file stays a parser and dispatcher; the logic itself lives in the testgrid crate.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{ArgGroup, Args};

#[derive(Args)]
pub struct DashboardArgs {
    /// Runs to show: a directory tree of Prow build directories (what `publish` writes to a
    /// file:// target, or a run's artifacts directory), file:///PATH, or gs://BUCKET/PREFIX
    /// (STORAGE_EMULATOR_HOST / GOOGLE_APPLICATION_CREDENTIALS as for `publish`).
    #[arg(long)]
    pub from: String,
    /// Directory to write index.html into.
    #[arg(long)]
    pub out: PathBuf,
    /// Page title (default: the --from argument).
    #[arg(long)]
    pub title: Option<String>,
}

/// `dashboard`: reads the runs, writes `OUT/index.html`.
pub fn dashboard(args: DashboardArgs) -> Result<ExitCode> {
    use ccm_testgrid::dashboard::{Grid, load, write_site};
    let runs = load(&args.from)?;
    let grid = Grid::new(runs);
    let title = args.title.unwrap_or_else(|| args.from.clone());
    let page = write_site(&grid, &args.out, &title)?;
    println!(
        "dashboard of {} runs and {} cases: {}",
        grid.runs.len(),
        grid.rows.len(),
        page.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
#[command(group(ArgGroup::new("target").required(true).multiple(true).args(["ccm", "kubeconfig"])))]
pub struct CertifyArgs {
    /// Provider whose CCM is certified (one of the harness's providers).
    #[arg(long)]
    pub provider: String,
    /// The CCM binary to run (or `reference`, or `upstream[@vX.Y.Z]`: the provider's
    /// upstream CCM built from its Go module).
    #[arg(long)]
    pub ccm: Option<String>,
    /// Run against an existing cluster instead (external mode).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// External mode: seconds a case waits for the cloud to create or delete a load
    /// balancer (default 1200).
    #[arg(long, value_name = "SECONDS", requires = "kubeconfig")]
    pub cloud_timeout: Option<u64>,
    /// The folder to write (JUnit, logs, Prow files, README.md, testgrid-config.yaml).
    #[arg(long)]
    pub out: PathBuf,
    /// Job name for publishing and the TestGrid test group (default ci-<provider>-ccm-conformance).
    #[arg(long)]
    pub job: Option<String>,
    /// Bucket the results will be published to (default k8s-conformance-<provider>).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Only cases whose full name matches this regular expression.
    #[arg(long)]
    pub focus: Option<String>,
    /// Leave out cases whose full name matches this regular expression.
    #[arg(long)]
    pub skip: Option<String>,
    /// Extra flag for the CCM (repeatable).
    #[arg(long = "ccm-arg", allow_hyphen_values = true)]
    pub ccm_args: Vec<String>,
}

/// `certify`: the suites into `--out` (as `run --artifacts`), then the kit's README and
/// TestGrid config. Exits like `run` (non-zero when a case failed); the kit is written
/// either way, since a failing kit is still worth reading.
pub fn certify(args: CertifyArgs) -> Result<ExitCode> {
    if args.out.join("junit_conformance.xml").exists() || args.out.join("finished.json").exists() {
        bail!(
            "{} already holds a run: certify into a new directory",
            args.out.display()
        );
    }
    let target = match (&args.ccm, &args.kubeconfig) {
        (Some(ccm), None) => format!("--ccm {ccm}"),
        (None, Some(kc)) => format!("--kubeconfig {}", kc.display()),
        (Some(ccm), Some(kc)) => format!("--ccm {ccm} --kubeconfig {}", kc.display()),
        (None, None) => bail!("certify needs --ccm PATH or --kubeconfig PATH"),
    };
    let run_args = super::RunArgs {
        providers: vec![args.provider.clone()],
        ccm: args.ccm.clone().unwrap_or_else(|| "reference".into()),
        ccm_args: args.ccm_args,
        ccm_old: None,
        ccm_new: None,
        kubeconfig: args.kubeconfig,
        cloud_timeout: args.cloud_timeout,
        focus: args.focus,
        skip: args.skip,
        artifacts: Some(args.out.clone()),
        parallel: None,
        list: false,
        rerun_failed: None,
        apiserver: super::ApiserverKind::Embedded,
        verbose: false,
        shard: None,
        shard_durations: None,
    };
    let code = super::run(run_args)?;
    let mut spec = ccm_testgrid::certify::KitSpec::new(&args.provider, &target);
    if let Some(job) = args.job {
        spec.job = job;
    }
    if let Some(bucket) = args.bucket {
        spec.bucket = bucket.trim_start_matches("gs://").to_string();
    }
    let kit = ccm_testgrid::certify::write_kit(&args.out, &spec)
        .with_context(|| format!("writing the kit into {}", args.out.display()))?;
    println!(
        "certification kit in {}: {} passed, {} failed, {} flaky, {} skipped ({}); see {}",
        args.out.display(),
        kit.counts.passed,
        kit.counts.failed,
        kit.counts.flaky,
        kit.counts.skipped,
        kit.result.as_deref().unwrap_or("not finished"),
        kit.readme.display()
    );
    Ok(code)
}

/// `bench junit` and `bench publish`: synthetic runs of `cases` cases.
pub fn bench(name: &str, cases: usize, files_per_case: usize, to: Option<&str>) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a work directory")?;
    match name {
        "junit" => {
            let t = ccm_testgrid::bench::junit_writes(dir.path(), cases)?;
            println!(
                "junit write after each case, {} cases: median {:.3} ms  p99 {:.3} ms  max {:.3} ms  total {:.3} s  (target: < 5 ms)",
                t.count,
                t.median.as_secs_f64() * 1e3,
                t.p99.as_secs_f64() * 1e3,
                t.max.as_secs_f64() * 1e3,
                t.total.as_secs_f64()
            );
        }
        "publish" => {
            let Some(to) = to else {
                bail!(
                    "bench publish needs --to gs://BUCKET[/PREFIX] (with STORAGE_EMULATOR_HOST) or file:///PATH"
                );
            };
            let target = ccm_testgrid::publish::Target::parse(to)?;
            ccm_testgrid::bench::write_run(dir.path(), cases, files_per_case)?;
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
                elapsed.as_secs_f64()
            );
        }
        "merge" => {
            let t = ccm_testgrid::bench::merge_runs(dir.path(), cases, 3, 5)?;
            println!(
                "merge of 3 shards of a {cases}-case run (one case log each): median {:.3} s  max {:.3} s  over {} merges",
                t.median.as_secs_f64(),
                t.max.as_secs_f64(),
                t.count
            );
        }
        other => bail!("unknown benchmark {other:?}"),
    }
    Ok(())
}
