//! The TestGrid-facing subcommands: `publish`, `testgrid-config`, `dashboard` and
//! `certify`. Kept out of main.rs so that file stays a parser and dispatcher; the logic
//! itself lives in the testgrid crate, and `certify`'s run is a
//! [`ccm_harness::run::RunRequest`] like `run`'s.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{ArgGroup, Args};

#[derive(Args)]
pub struct PublishArgs {
    /// The run's artifacts directory (holds started.json, finished.json, junit_*.xml).
    #[arg(long)]
    from: PathBuf,
    /// gs://BUCKET/PREFIX or file:///PATH (the same tree, written locally). GCS credentials:
    /// GOOGLE_APPLICATION_CREDENTIALS (service-account key), else the metadata server;
    /// STORAGE_EMULATOR_HOST=HOST:PORT targets an emulator without authentication.
    #[arg(long)]
    to: String,
    /// Job name (a TestGrid test group usually has one job).
    #[arg(long)]
    job: String,
    /// Build ID: an increasing integer (default: started.json's timestamp).
    #[arg(long)]
    build: Option<String>,
    /// Pull request number (a presubmit run); needs --repo.
    #[arg(long, requires = "repo")]
    pr: Option<u64>,
    /// ORG/REPO of the pull request.
    #[arg(long, requires = "pr")]
    repo: Option<String>,
}

#[derive(Args)]
pub struct TestgridConfigArgs {
    /// Provider name (used for the dashboard names).
    #[arg(long)]
    provider: String,
    /// Bucket results are uploaded to (gs://BUCKET/PREFIX or BUCKET).
    #[arg(long)]
    bucket: String,
    #[arg(long)]
    job: String,
    /// The job is a presubmit (results under pr-logs/directory/<job>).
    #[arg(long)]
    presubmit: bool,
    /// Which CCM the job runs: `upstream` names the tab `upstream-<provider>-ccm` (one tab
    /// per upstream CCM beside the reference CCM's, as ci/prow's periodics upload them).
    #[arg(long, default_value = "reference")]
    ccm: String,
}

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
    /// Run the suites as N shards at once (N processes of `run --shard K/N`), merged into
    /// --out before the kit is written: for a provider whose suite is long. Embedded mode
    /// only: on a real cluster the shards would share its nodes.
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "kubeconfig",
        value_parser = clap::value_parser!(u16).range(2..=16)
    )]
    pub shards: Option<u16>,
    /// Balance the shards by the case durations of an earlier run (its JUnit file or
    /// artifacts directory), as `run --shard-durations`.
    #[arg(long, value_name = "JUNIT", requires = "shards")]
    pub shard_durations: Option<PathBuf>,
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
    let code = match args.shards {
        Some(n) => certify_sharded(&args, usize::from(n))?,
        None => certify_unsharded(&args)?,
    };
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

/// The suites in this process, into `--out`: the provider's cases as `run --provider P
/// --artifacts OUT` would run them (embedded API server, progress lines).
fn certify_unsharded(args: &CertifyArgs) -> Result<ExitCode> {
    use ccm_harness::run::{Origin, RequestError, RunInput, RunRequest};
    let input = RunInput {
        providers: vec![args.provider.clone()],
        ccm: args.ccm.clone(),
        ccm_args: args.ccm_args.clone(),
        kubeconfig: args.kubeconfig.clone(),
        cloud_timeout: args.cloud_timeout.map(std::time::Duration::from_secs),
        focus: args.focus.clone(),
        skip: args.skip.clone(),
        artifacts: Some(args.out.clone()),
        ..RunInput::default()
    };
    let libtest = libtest_mimic::Arguments::from_iter(["ccm-conformance"]);
    let mut request = match RunRequest::new(input, Origin::Flags, crate::reference_ccm()?, libtest)
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(RequestError::EXIT_CODE));
        }
    };
    request.progress_lines = true;
    let conclusion = ccm_harness::run::execute(request, &ccm_suites::all())?;
    Ok(conclusion.exit_code())
}

/// The suites as `n` child processes, one shard each, in a scratch directory; then
/// `merge` into `--out`. Exit 0 only when the merged run is complete and passing.
fn certify_sharded(args: &CertifyArgs, n: usize) -> Result<ExitCode> {
    let mut run: Vec<std::ffi::OsString> = vec!["--provider".into(), args.provider.clone().into()];
    run.extend([
        "--ccm".into(),
        args.ccm
            .clone()
            .unwrap_or_else(|| "reference".into())
            .into(),
    ]);
    for (flag, value) in [("--focus", &args.focus), ("--skip", &args.skip)] {
        if let Some(v) = value {
            run.extend([flag.into(), v.into()]);
        }
    }
    for a in &args.ccm_args {
        run.push(format!("--ccm-arg={a}").into());
    }
    if let Some(path) = &args.shard_durations {
        run.extend(["--shard-durations".into(), path.clone().into_os_string()]);
    }
    let scratch = tempfile::Builder::new()
        .prefix("ccm-conformance-shards-")
        .tempdir()
        .context("creating the shards' directory")?;
    let dirs: Vec<PathBuf> = (1..=n)
        .map(|k| scratch.path().join(format!("shard-{k}")))
        .collect();
    println!("certify: {n} shards as {n} processes; their lines below, prefixed [K/{n}]");
    let finished = crate::shards::run_all(
        &run,
        dirs.iter()
            .enumerate()
            .map(|(i, d)| (Some((i + 1, n)), d.clone()))
            .collect(),
        true,
    )?;
    let mut keep = false;
    for f in &finished {
        if !f.completed() {
            keep = true;
            println!(
                "shard {}/{n} ended without completing ({}); its output: {}",
                f.shard.unwrap_or_default(),
                f.code
                    .map_or("killed by a signal".into(), |c| format!("exit {c}")),
                f.output().display()
            );
        }
    }
    let merged = ccm_testgrid::merge::merge(&dirs, &args.out);
    if keep {
        let _ = scratch.keep();
    }
    let merged =
        merged.with_context(|| format!("merging the shards into {}", args.out.display()))?;
    for p in &merged.problems {
        println!("  {p}");
    }
    println!(
        "merged {n} shards: {} cases, {}",
        merged.cases,
        merged.result.as_str()
    );
    Ok(if merged.result == ccm_testgrid::prow::JobResult::Success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `publish`: a run's artifacts into the Prow layout of a bucket.
pub fn publish(args: PublishArgs) -> Result<()> {
    use ccm_testgrid::{layout::PullRef, publish::Target};
    let target = Target::parse(&args.to)?;
    let pr = match (args.pr, args.repo.as_deref()) {
        (Some(n), Some(repo)) => Some(PullRef::new(repo, n)?),
        _ => None,
    };
    let report = ccm_testgrid::publish::publish(
        &args.from,
        &target,
        &args.job,
        args.build.as_deref(),
        pr.as_ref(),
    )?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    println!(
        "published build {} ({} objects) to {}",
        report.build,
        report.objects.len(),
        report.build_url
    );
    Ok(())
}

/// `testgrid-config`: a TestGrid configuration on stdout.
pub fn testgrid_config(args: TestgridConfigArgs) -> Result<()> {
    use ccm_testgrid::layout::{JobKind, JobLayout};
    let (bucket, prefix) = match args.bucket.strip_prefix("gs://") {
        Some(rest) => rest
            .split_once('/')
            .map(|(b, p)| (b.to_string(), p.to_string()))
            .unwrap_or((rest.to_string(), String::new())),
        None => (args.bucket.clone(), String::new()),
    };
    let kind = if args.presubmit {
        JobKind::Batch
    } else {
        JobKind::Periodic
    };
    let layout = JobLayout::new(&prefix, &args.job, kind)?;
    let mut spec = ccm_testgrid::config::ConfigSpec::new(&args.provider, &bucket, layout);
    match args.ccm.as_str() {
        "reference" => {}
        "upstream" => {
            let binary = ccm_harness::Provider::parse(&args.provider)
                .ok()
                .and_then(|p| p.upstream_ccm())
                .map(|u| u.binary)
                .ok_or_else(|| anyhow::anyhow!("no upstream CCM for {:?}", args.provider))?;
            spec.tab_name = format!("upstream-{}-ccm", args.provider);
            spec.description =
                format!("CCM conformance of upstream's {binary} (built from its Go module)");
        }
        other => bail!("--ccm {other:?}: expected reference or upstream"),
    }
    print!("{}", ccm_testgrid::config::render(&spec)?);
    Ok(())
}
