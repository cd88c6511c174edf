//! A static TestGrid-style page over published runs: `ccm-conformance dashboard`.
//!
//! Why: a provider (or a reviewer of a certification folder) wants to see how a CCM did
//! over time before a TestGrid tab exists, and without any service. The page follows
//! TestGrid's reading of the same files (reference `testgrid-prow.md` §1.5, §2.3):
//! rows are `<suite>.<case>`, columns are builds newest first, repeated testcases of one
//! build merge into one cell (FLAKY when passed and failed attempts are mixed, "n/N runs
//! passed"), the hover text is the failure message, and numeric testcase properties are
//! metrics graphed over the columns. One self-contained HTML file: inline CSS and SVG, no
//! script, nothing fetched.
//!
//! Runs are read from a tree of Prow build directories (what `publish` writes, or a run's
//! `$ARTIFACTS`): any directory holding `started.json` or `finished.json` is a build. A
//! `gs://` source is first mirrored (only those files and `junit*.xml`) into a temporary
//! directory and then read the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::prow::{self, FINISHED_JSON, STARTED_JSON};
use crate::read::{self, Results, Status};

/// Errors while reading runs or writing the page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} holds no build directory (no started.json or finished.json under it)")]
    NoRuns(String),
    #[error(transparent)]
    Junit(#[from] read::Error),
    #[error(transparent)]
    Prow(#[from] prow::Error),
    #[error(transparent)]
    Gcs(#[from] crate::gcs::Error),
    #[error(transparent)]
    Target(#[from] crate::publish::Error),
    #[error("starting the download runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// One build: a column.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Column id: the build directory's name (a build ID for published runs).
    pub id: String,
    /// The job: the name of the directory holding the build directory.
    pub job: String,
    /// started.json's timestamp (epoch seconds), when there is one.
    pub started: Option<u64>,
    /// finished.json's `result` (SUCCESS/FAILURE/ABORTED); `None` while running.
    pub result: Option<String>,
    /// finished.json's string metadata (column headers: k8s-version, ccm-version, ...).
    pub metadata: BTreeMap<String, String>,
    pub results: Results,
    /// Where the build's case logs are (`<logs>/<provider>-<id>/` per case): a `file://`
    /// URL for a local tree, the bucket's HTTPS URL for `gs://`; `None`: no links.
    pub logs: Option<String>,
}

/// How one row did in one column.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// No testcase of that name in the build.
    Missing,
    Pass,
    Fail {
        message: String,
    },
    /// Passed in some attempts, failed in others.
    Flaky {
        passed: usize,
        total: usize,
        message: String,
    },
    Skip {
        message: String,
    },
}

impl Cell {
    /// Short class name used by the page's CSS.
    pub fn class(&self) -> &'static str {
        match self {
            Cell::Missing => "none",
            Cell::Pass => "pass",
            Cell::Fail { .. } => "fail",
            Cell::Flaky { .. } => "flaky",
            Cell::Skip { .. } => "skip",
        }
    }

    /// Hover text, as TestGrid shows it.
    pub fn title(&self) -> String {
        match self {
            Cell::Missing => "not run".into(),
            Cell::Pass => "passed".into(),
            Cell::Fail { message } => message.clone(),
            Cell::Flaky {
                passed,
                total,
                message,
            } => format!("{passed}/{total} runs passed: {message}"),
            Cell::Skip { message } => message.clone(),
        }
    }
}

/// Fill colours of the cells (also what the screenshot test looks for).
pub const COLORS: [(&str, &str); 5] = [
    ("pass", "#2e9e44"),
    ("fail", "#d93025"),
    ("flaky", "#8e44ad"),
    ("skip", "#c8c8c8"),
    ("none", "#ffffff"),
];

/// The cell of a row in one build, merging repeated attempts (§2.3).
pub fn cell(record: Option<&read::CaseRecord>) -> Cell {
    let Some(record) = record else {
        return Cell::Missing;
    };
    let ran: Vec<_> = record
        .attempts
        .iter()
        .filter(|a| a.status != Status::Skipped)
        .collect();
    let message_of = |a: &read::Attempt| a.message.clone().unwrap_or_default();
    if ran.is_empty() {
        let message = record
            .attempts
            .iter()
            .find_map(|a| a.message.clone())
            .unwrap_or_else(|| "skipped".into());
        return Cell::Skip { message };
    }
    let passed = ran.iter().filter(|a| a.status == Status::Passed).count();
    let worst = ran
        .iter()
        .find(|a| a.status.is_failure())
        .map(|a| message_of(a));
    match worst {
        None => Cell::Pass,
        Some(message) if passed == 0 => {
            if ran.len() > 1 {
                Cell::Fail {
                    message: format!("0/{} runs passed: {message}", ran.len()),
                }
            } else {
                Cell::Fail { message }
            }
        }
        Some(message) => Cell::Flaky {
            passed,
            total: ran.len(),
            message,
        },
    }
}

/// One row: a case, and its cell per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// TestGrid's row name, `suite.case`.
    pub name: String,
    /// The `<testsuite>` name: one per provider in our JUnit.
    pub provider: String,
    /// The suite and case ID the case name carries (`[sig-cloud-provider] [p] Suite ...
    /// (ID)`); empty for names of another form.
    pub suite: String,
    pub id: String,
    pub cells: Vec<Cell>,
    /// Seconds the case took in each build (its last attempt that ran).
    pub durations: Vec<Option<f64>>,
}

/// `(suite, id)` of a conformance case name, `("", "")` for other names.
pub fn suite_and_id(name: &str) -> (String, String) {
    let Some(rest) = name
        .strip_prefix("[sig-cloud-provider] [")
        .and_then(|r| r.split_once("] "))
        .map(|(_, r)| r)
    else {
        return (String::new(), String::new());
    };
    let suite = rest.split_whitespace().next().unwrap_or_default();
    // The last parenthesised word with a dash: `(NI-01)`.
    let id = rest
        .match_indices('(')
        .filter_map(|(i, _)| rest[i + 1..].split_once(')').map(|(id, _)| id))
        .rfind(|id| id.contains('-') && !id.contains(' '))
        .unwrap_or_default();
    (suite.to_string(), id.to_string())
}

/// Counts of one provider in one column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub flaky: usize,
    pub skip: usize,
}

impl Counts {
    fn add(&mut self, cell: &Cell) {
        match cell {
            Cell::Pass => self.pass += 1,
            Cell::Fail { .. } => self.fail += 1,
            Cell::Flaky { .. } => self.flaky += 1,
            Cell::Skip { .. } => self.skip += 1,
            Cell::Missing => {}
        }
    }
}

/// What the page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Newest first.
    pub runs: Vec<Run>,
    /// Sorted by provider, then name.
    pub rows: Vec<Row>,
    /// Per provider, counts per column (same order as `runs`).
    pub summary: BTreeMap<String, Vec<Counts>>,
    /// Per metric (numeric testcase property), the mean over the cases carrying it, per
    /// column (same order as `runs`; `None` where no case reported it).
    pub metrics: BTreeMap<String, Vec<Option<f64>>>,
}

impl Grid {
    /// Orders runs newest first (start time, then numeric build ID, then name) and builds
    /// rows, summaries and metric series.
    pub fn new(mut runs: Vec<Run>) -> Self {
        runs.sort_by(|a, b| {
            let key = |r: &Run| (r.started, r.id.parse::<u64>().ok(), r.id.clone());
            key(b).cmp(&key(a))
        });
        let names: BTreeSet<(String, String)> = runs
            .iter()
            .flat_map(|r| r.results.iter().map(|(k, v)| (v.suite.clone(), k.clone())))
            .collect();
        let mut rows: Vec<Row> = names
            .into_iter()
            .map(|(provider, name)| {
                let full = runs
                    .iter()
                    .find_map(|r| r.results.get(&name).map(|c| c.name.clone()))
                    .unwrap_or_else(|| name.clone());
                let (suite, id) = suite_and_id(&full);
                Row {
                    cells: runs.iter().map(|r| cell(r.results.get(&name))).collect(),
                    durations: runs
                        .iter()
                        .map(|r| {
                            r.results
                                .get(&name)
                                .and_then(|c| c.time())
                                .map(|t| t.as_secs_f64())
                        })
                        .collect(),
                    name,
                    provider,
                    suite,
                    id,
                }
            })
            .collect();
        // Grouped by provider, then suite, then case ID (names without one last).
        rows.sort_by(|a, b| {
            (&a.provider, &a.suite, a.id.is_empty(), &a.id, &a.name).cmp(&(
                &b.provider,
                &b.suite,
                b.id.is_empty(),
                &b.id,
                &b.name,
            ))
        });
        let mut summary: BTreeMap<String, Vec<Counts>> = BTreeMap::new();
        for row in &rows {
            let counts = summary
                .entry(row.provider.clone())
                .or_insert_with(|| vec![Counts::default(); runs.len()]);
            for (c, cell) in counts.iter_mut().zip(&row.cells) {
                c.add(cell);
            }
        }
        let mut metrics: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            let mut sums: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
            for record in run.results.values() {
                for attempt in &record.attempts {
                    for (name, value) in &attempt.properties {
                        if let Ok(v) = value.trim().parse::<f64>()
                            && v.is_finite()
                        {
                            let e = sums.entry(name).or_default();
                            e.0 += v;
                            e.1 += 1;
                        }
                    }
                }
            }
            for (name, (sum, n)) in sums {
                metrics
                    .entry(name.to_string())
                    .or_insert_with(|| vec![None; runs.len()])[i] = Some(sum / n as f64);
            }
        }
        Self {
            runs,
            rows,
            summary,
            metrics,
        }
    }
}

/// Reads every build under `root` (recursively; a directory with `started.json` or
/// `finished.json` is a build and is not searched further).
pub fn load_dir(root: &Path) -> Result<Vec<Run>, Error> {
    let mut builds = Vec::new();
    find_builds(root, &mut builds)?;
    if builds.is_empty() {
        return Err(Error::NoRuns(root.display().to_string()));
    }
    builds.iter().map(|b| load_build(b)).collect()
}

fn find_builds(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    if dir.join(STARTED_JSON).is_file() || dir.join(FINISHED_JSON).is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_err("reading", dir))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io_err("reading", dir))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            find_builds(&path, out)?;
        }
    }
    Ok(())
}

/// One build directory: its JSON files and every `junit*.xml` under it. A build without
/// JUnit (still running, or failed before any case) is a column of empty cells.
pub fn load_build(dir: &Path) -> Result<Run, Error> {
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let started_path = dir.join(STARTED_JSON);
    let started = if started_path.is_file() {
        Some(prow::read_started(&started_path)?.timestamp)
    } else {
        None
    };
    let finished_path = dir.join(FINISHED_JSON);
    let (result, metadata) = if finished_path.is_file() {
        let f = prow::read_finished(&finished_path)?;
        (Some(f.result.as_str().to_string()), f.metadata)
    } else {
        (None, BTreeMap::new())
    };
    let results = match read::read_results(dir) {
        Ok(r) => r,
        Err(read::Error::NoJunit(_)) => Results::new(),
        Err(e) => return Err(e.into()),
    };
    // A run's artifacts hold `cases/`; a published build keeps them under `artifacts/`.
    let cases = if dir.join("cases").is_dir() {
        dir.join("cases")
    } else {
        dir.join("artifacts").join("cases")
    };
    let logs = std::path::absolute(&cases)
        .ok()
        .map(|p| format!("file://{}", p.display()));
    Ok(Run {
        id: name_of(dir),
        job: dir.parent().map(name_of).unwrap_or_default(),
        started,
        result,
        metadata,
        results,
        logs,
    })
}

/// Where runs come from: a local tree or `gs://bucket/prefix`.
pub fn load(source: &str) -> Result<Vec<Run>, Error> {
    match source.strip_prefix("gs://") {
        Some(_) => {
            let crate::publish::Target::Gcs { bucket, prefix } =
                crate::publish::Target::parse(source)?
            else {
                return Err(Error::NoRuns(source.to_string()));
            };
            let mirror = tempfile_dir()?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(Error::Runtime)?;
            let fetched = rt.block_on(async {
                let client = crate::gcs::Client::from_env()?;
                mirror_bucket(&client, &bucket, &prefix, mirror.path()).await
            });
            fetched.and_then(|n| {
                if n == 0 {
                    return Err(Error::NoRuns(source.to_string()));
                }
                // Links go to the bucket, where the build's artifacts were published.
                let mut runs = load_dir(mirror.path())?;
                for run in &mut runs {
                    run.logs = run.logs.as_ref().and_then(|l| {
                        let local = l.strip_prefix("file://")?;
                        let rel = Path::new(local).strip_prefix(mirror.path()).ok()?;
                        Some(format!(
                            "https://storage.googleapis.com/{bucket}/{}",
                            rel.display()
                        ))
                    });
                }
                Ok(runs)
            })
        }
        None => {
            let path = source.strip_prefix("file://").unwrap_or(source);
            load_dir(Path::new(path))
        }
    }
}

/// A temporary directory removed on drop (std only: `tempfile` is a dev-dependency).
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir, Error> {
    let path = std::env::temp_dir().join(format!(
        "ccm-dashboard-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&path).map_err(io_err("creating", &path))?;
    Ok(TempDir(path))
}

/// Copies the objects a dashboard reads (`started.json`, `finished.json`, `junit*.xml`)
/// under `prefix` into `into`, keeping their names as paths. Returns how many.
pub async fn mirror_bucket(
    client: &crate::gcs::Client,
    bucket: &str,
    prefix: &str,
    into: &Path,
) -> Result<usize, Error> {
    let list_prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{}/", prefix.trim_end_matches('/'))
    };
    let names = client.list(bucket, &list_prefix).await?;
    let mut count = 0;
    for name in names {
        let base = name.rsplit('/').next().unwrap_or_default();
        let wanted = base == STARTED_JSON
            || base == FINISHED_JSON
            || (base.starts_with("junit") && base.ends_with(".xml"));
        // Object names may hold anything; only plain relative segments become paths.
        let safe = name
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
        if !wanted || !safe {
            continue;
        }
        let Some(body) = client.read(bucket, &name).await? else {
            continue;
        };
        let path = into.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
        }
        std::fs::write(&path, body).map_err(io_err("writing", &path))?;
        count += 1;
    }
    Ok(count)
}

/// Renders the grid and writes `out/index.html`; returns its path.
pub fn write_site(grid: &Grid, out: &Path, title: &str) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(out).map_err(io_err("creating", out))?;
    let path = out.join("index.html");
    crate::atomic::write(&path, render(grid, title).as_bytes())
        .map_err(io_err("writing", &path))?;
    Ok(path)
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn date(epoch: u64) -> String {
    i64::try_from(epoch)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// The page: one HTML document with inline CSS and SVG.
pub fn render(grid: &Grid, title: &str) -> String {
    let mut h = String::new();
    let css_colors: String = COLORS
        .iter()
        .map(|(class, color)| format!("td.{class}{{background:{color}}}"))
        .collect();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\
body{{font-family:sans-serif;font-size:13px;margin:12px;color:#222}}\
table{{border-collapse:collapse}}th,td{{border:1px solid #ddd;padding:2px 6px}}\
table.grid td.cell{{width:56px;min-width:56px;height:18px;padding:0;text-align:center;font-size:11px;color:#fff}}\
table.grid th.name{{text-align:left;font-weight:normal;white-space:nowrap;max-width:520px;overflow:hidden;text-overflow:ellipsis}}\
table.grid thead th{{font-size:11px;font-weight:normal;vertical-align:bottom}}\
table.grid td.cell a{{color:#fff;text-decoration:none;display:block}}\
table.grid tr.group th{{background:#eef2f7;font-weight:bold;text-align:left}}\
table.grid td.spark{{border:none;font-size:10px;color:#555}}\
{css_colors}\
.legend span{{display:inline-block;padding:2px 8px;margin-right:6px;color:#fff}}\
.charts figure{{display:inline-block;margin:4px 16px 4px 0}}figcaption{{font-size:12px}}\
</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    let _ = writeln!(
        h,
        "<p class=\"legend\">{} runs, {} cases, newest left. \
<span style=\"background:#2e9e44\">pass</span><span style=\"background:#d93025\">fail</span>\
<span style=\"background:#8e44ad\">flaky</span><span style=\"background:#c8c8c8\">skip</span></p>",
        grid.runs.len(),
        grid.rows.len()
    );
    render_summary(&mut h, grid);
    render_grid(&mut h, grid);
    render_charts(&mut h, grid);
    h.push_str("</body></html>\n");
    h
}

fn render_summary(h: &mut String, grid: &Grid) {
    h.push_str("<h2>Providers</h2>\n<table class=\"summary\"><thead><tr><th>provider</th><th>latest run</th><th>pass</th><th>fail</th><th>flaky</th><th>skip</th><th>runs without failure</th></tr></thead><tbody>\n");
    for (provider, counts) in &grid.summary {
        let latest = counts.first().cloned().unwrap_or_default();
        let green = counts
            .iter()
            .filter(|c| c.fail == 0 && c.pass + c.flaky > 0)
            .count();
        let latest_id = grid.runs.first().map(|r| r.id.as_str()).unwrap_or("");
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{green}/{}</td></tr>",
            escape(provider),
            escape(latest_id),
            latest.pass,
            latest.fail,
            latest.flaky,
            latest.skip,
            counts.len()
        );
    }
    h.push_str("</tbody></table>\n");
}

fn render_grid(h: &mut String, grid: &Grid) {
    h.push_str("<h2>Results</h2>\n<table class=\"grid\"><thead><tr><th class=\"name\">build</th>");
    for run in &grid.runs {
        let _ = write!(h, "<th>{}</th>", escape(&run.id));
    }
    h.push_str("<th>duration</th></tr>\n<tr><th class=\"name\">started</th>");
    for run in &grid.runs {
        let _ = write!(h, "<th>{}</th>", run.started.map(date).unwrap_or_default());
    }
    h.push_str("</tr>\n<tr><th class=\"name\">result</th>");
    for run in &grid.runs {
        let _ = write!(
            h,
            "<th>{}</th>",
            escape(run.result.as_deref().unwrap_or("RUNNING"))
        );
    }
    h.push_str("</tr>\n");
    for key in ["k8s-version", "ccm-version"] {
        if grid.runs.iter().any(|r| r.metadata.contains_key(key)) {
            let _ = write!(h, "<tr><th class=\"name\">{key}</th>");
            for run in &grid.runs {
                let v = run.metadata.get(key).map(String::as_str).unwrap_or("");
                let _ = write!(h, "<th>{}</th>", escape(v));
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</thead><tbody>\n");
    let mut group = (String::new(), String::new());
    for row in &grid.rows {
        if (&row.provider, &row.suite) != (&group.0, &group.1) {
            group = (row.provider.clone(), row.suite.clone());
            let _ = writeln!(
                h,
                "<tr class=\"group\"><th class=\"name\" colspan=\"{}\">{} · {}</th></tr>",
                grid.runs.len() + 2,
                escape(&row.provider),
                escape(if row.suite.is_empty() {
                    "other"
                } else {
                    &row.suite
                })
            );
        }
        // The title without the prefix, suite and ID the grouping already shows.
        let label = match row.name.split_once(&format!("] {} ", row.suite)) {
            Some((_, title)) if !row.id.is_empty() => title
                .rsplit_once(&format!("({})", row.id))
                .map_or(title, |(t, _)| t)
                .trim()
                .to_string(),
            _ => row.name.clone(),
        };
        let _ = write!(
            h,
            "<tr><th class=\"name\" title=\"{n}\"><b>{id}</b> {label}</th>",
            n = escape(&row.name),
            id = escape(&row.id),
            label = escape(&label)
        );
        for ((cell, secs), run) in row.cells.iter().zip(&row.durations).zip(&grid.runs) {
            let text = match cell {
                Cell::Flaky { passed, total, .. } => format!("{passed}/{total}"),
                Cell::Fail { .. } => "F".into(),
                Cell::Skip { .. } => "S".into(),
                Cell::Pass => secs.map(short_seconds).unwrap_or_default(),
                Cell::Missing => String::new(),
            };
            let title = match secs {
                Some(s) if !matches!(cell, Cell::Missing | Cell::Skip { .. }) => {
                    format!("{} ({s:.1} s)", cell.title())
                }
                _ => cell.title(),
            };
            let inner = match &run.logs {
                Some(base) if !matches!(cell, Cell::Missing) && !row.id.is_empty() => format!(
                    "<a href=\"{}\">{text}</a>",
                    escape(&format!("{base}/{}-{}/", row.provider, row.id))
                ),
                _ => text,
            };
            let _ = write!(
                h,
                "<td class=\"cell {}\" title=\"{}\">{inner}</td>",
                cell.class(),
                escape(&title)
            );
        }
        let _ = writeln!(
            h,
            "<td class=\"spark\">{}</td></tr>",
            sparkline(&row.durations)
        );
    }
    h.push_str("</tbody></table>\n");
}

/// `0.4s`, `12s`, `3m`: short enough for a cell.
fn short_seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1}s")
    } else if s < 100.0 {
        format!("{s:.0}s")
    } else {
        format!("{:.0}m", s / 60.0)
    }
}

/// A row's durations over the builds as a small SVG line (newest left, like the grid),
/// scaled to the row's slowest build; just the figure with fewer than two.
fn sparkline(durations: &[Option<f64>]) -> String {
    let known: Vec<(usize, f64)> = durations
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.map(|d| (i, d)))
        .collect();
    if known.len() < 2 {
        return known
            .first()
            .map(|(_, d)| short_seconds(*d))
            .unwrap_or_default();
    }
    let (w, ht) = (80.0_f64, 16.0_f64);
    let hi = known
        .iter()
        .map(|(_, d)| *d)
        .fold(f64::MIN_POSITIVE, f64::max);
    let n = (durations.len().max(2) - 1) as f64;
    let points: Vec<String> = known
        .iter()
        .map(|(i, d)| {
            format!(
                "{:.1},{:.1}",
                1.0 + (w - 2.0) * *i as f64 / n,
                ht - 1.0 - (ht - 2.0) * d / hi
            )
        })
        .collect();
    let figures: Vec<String> = known.iter().map(|(_, d)| short_seconds(*d)).collect();
    format!(
        "<svg class=\"spark\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"duration over builds\"><polyline fill=\"none\" stroke=\"#555\" stroke-width=\"1\" points=\"{}\"/><title>{}</title></svg>",
        points.join(" "),
        figures.join(" ")
    )
}

/// One small SVG line chart per metric, x aligned with the grid (newest left).
fn render_charts(h: &mut String, grid: &Grid) {
    if grid.metrics.is_empty() {
        return;
    }
    h.push_str("<h2>Metrics</h2>\n<div class=\"charts\">\n");
    let (w, ht, pad) = (260.0_f64, 90.0_f64, 8.0_f64);
    for (name, series) in &grid.metrics {
        let values: Vec<f64> = series.iter().flatten().copied().collect();
        let (lo, hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        let span = if hi > lo { hi - lo } else { 1.0 };
        let n = series.len().max(2) as f64 - 1.0;
        let point = |i: usize, v: f64| {
            let x = pad + (w - 2.0 * pad) * i as f64 / n;
            let y = ht - pad - (ht - 2.0 * pad) * (v - lo) / span;
            (x, y)
        };
        let points: Vec<String> = series
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| point(i, v)))
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let dots: String = series
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (point(i, v), v)))
            .map(|((x, y), v)| {
                format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\"><title>{v}</title></circle>")
            })
            .collect();
        let _ = writeln!(
            h,
            "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" \
viewBox=\"0 0 {w} {ht}\" role=\"img\" aria-label=\"{n}\"><rect width=\"{w}\" height=\"{ht}\" fill=\"#fafafa\" stroke=\"#ddd\"/>\
<polyline fill=\"none\" stroke=\"#1a73e8\" stroke-width=\"1.5\" points=\"{p}\"/><g fill=\"#1a73e8\">{dots}</g></svg>\
<figcaption>{n}: min {lo} max {hi} (newest left)</figcaption></figure>",
            n = escape(name),
            p = points.join(" "),
        );
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{Attempt, CaseRecord};
    use std::time::Duration;

    fn attempt(status: Status, message: Option<&str>, props: &[(&str, &str)]) -> Attempt {
        Attempt {
            status,
            time: Duration::from_secs(1),
            message: message.map(str::to_string),
            properties: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn record(suite: &str, name: &str, attempts: Vec<Attempt>) -> CaseRecord {
        CaseRecord {
            suite: suite.into(),
            name: name.into(),
            attempts,
        }
    }

    fn run(id: &str, started: u64, records: Vec<CaseRecord>) -> Run {
        Run {
            id: id.into(),
            job: "ci-job".into(),
            started: Some(started),
            result: Some("SUCCESS".into()),
            metadata: BTreeMap::new(),
            results: records.into_iter().map(|r| (r.row(), r)).collect(),
            logs: Some("file:///runs/b".into()),
        }
    }

    #[test]
    fn rows_are_grouped_by_provider_and_suite_with_ids_durations_and_log_links() {
        assert_eq!(
            suite_and_id(
                "[sig-cloud-provider] [aws] NodeInit removes the taint (NI-01) [Conformance]"
            ),
            ("NodeInit".to_string(), "NI-01".to_string())
        );
        assert_eq!(
            suite_and_id("some other test"),
            (String::new(), String::new())
        );
        let name = |p: &str, suite: &str, id: &str| {
            format!("[sig-cloud-provider] [{p}] {suite} does a thing ({id}) [Mock]")
        };
        let ran = |secs: u64| Attempt {
            time: Duration::from_secs(secs),
            ..attempt(Status::Passed, None, &[])
        };
        let old = run(
            "1",
            100,
            vec![record(
                "aws",
                &name("aws", "NodeInit", "NI-02"),
                vec![ran(4)],
            )],
        );
        let new = run(
            "2",
            200,
            vec![
                record("aws", &name("aws", "NodeInit", "NI-02"), vec![ran(2)]),
                record("aws", &name("aws", "LoadBalancer", "LB-01"), vec![ran(30)]),
                record("aws", &name("aws", "NodeInit", "NI-01"), vec![ran(1)]),
            ],
        );
        let grid = Grid::new(vec![old, new]);
        let order: Vec<(&str, &str)> = grid
            .rows
            .iter()
            .map(|r| (r.suite.as_str(), r.id.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("LoadBalancer", "LB-01"),
                ("NodeInit", "NI-01"),
                ("NodeInit", "NI-02")
            ]
        );
        assert_eq!(grid.rows[2].durations, [Some(2.0), Some(4.0)]);
        let html = render(&grid, "t");
        assert!(
            html.contains("aws · NodeInit") && html.contains("aws · LoadBalancer"),
            "{html}"
        );
        assert!(html.contains("<b>NI-02</b> does a thing"), "{html}");
        assert!(
            html.contains("href=\"file:///runs/b/aws-NI-02/\""),
            "{html}"
        );
        assert!(html.contains(">2.0s<") && html.contains(">30s<"), "{html}");
        assert!(html.contains("<svg class=\"spark\""), "{html}");
    }

    #[test]
    fn cells_follow_testgrid_merging() {
        assert_eq!(cell(None), Cell::Missing);
        let pass = record("s", "a", vec![attempt(Status::Passed, None, &[])]);
        assert_eq!(cell(Some(&pass)), Cell::Pass);
        let fail = record("s", "a", vec![attempt(Status::Failed, Some("boom"), &[])]);
        assert_eq!(
            cell(Some(&fail)),
            Cell::Fail {
                message: "boom".into()
            }
        );
        let errored = record("s", "a", vec![attempt(Status::Errored, Some("int"), &[])]);
        assert_eq!(cell(Some(&errored)).class(), "fail");
        let flaky = record(
            "s",
            "a",
            vec![
                attempt(Status::Failed, Some("first"), &[]),
                attempt(Status::Passed, None, &[]),
            ],
        );
        let c = cell(Some(&flaky));
        assert_eq!(c.class(), "flaky");
        assert_eq!(c.title(), "1/2 runs passed: first");
        let skip = record(
            "s",
            "a",
            vec![attempt(Status::Skipped, Some("no routes"), &[])],
        );
        assert_eq!(
            cell(Some(&skip)),
            Cell::Skip {
                message: "no routes".into()
            }
        );
        let two_fails = record(
            "s",
            "a",
            vec![
                attempt(Status::Failed, Some("x"), &[]),
                attempt(Status::Failed, Some("y"), &[]),
            ],
        );
        assert_eq!(cell(Some(&two_fails)).title(), "0/2 runs passed: x");
    }

    #[test]
    fn grid_orders_newest_first_and_summarizes_per_provider() {
        let old = run(
            "100",
            100,
            vec![
                record(
                    "openstack",
                    "a",
                    vec![attempt(Status::Passed, None, &[("lb-seconds", "4")])],
                ),
                record(
                    "openstack",
                    "b",
                    vec![attempt(Status::Failed, Some("m"), &[])],
                ),
            ],
        );
        let new = run(
            "200",
            200,
            vec![
                record(
                    "openstack",
                    "a",
                    vec![attempt(
                        Status::Passed,
                        None,
                        &[("lb-seconds", "2"), ("note", "x")],
                    )],
                ),
                record("aws", "c", vec![attempt(Status::Skipped, Some("n/a"), &[])]),
            ],
        );
        let g = Grid::new(vec![old, new]);
        assert_eq!(
            g.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["200", "100"]
        );
        let names: Vec<_> = g.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["aws.c", "openstack.a", "openstack.b"]);
        assert_eq!(g.rows[2].cells[0], Cell::Missing);
        assert_eq!(g.rows[2].cells[1].class(), "fail");
        assert_eq!(
            g.summary["openstack"],
            vec![
                Counts {
                    pass: 1,
                    ..Default::default()
                },
                Counts {
                    pass: 1,
                    fail: 1,
                    ..Default::default()
                }
            ]
        );
        assert_eq!(g.summary["aws"][0].skip, 1);
        assert_eq!(g.metrics.len(), 1, "non-numeric properties are not metrics");
        assert_eq!(g.metrics["lb-seconds"], vec![Some(2.0), Some(4.0)]);
    }

    #[test]
    fn page_escapes_text_and_carries_hover_messages() {
        let r = run(
            "1",
            1,
            vec![record(
                "s",
                "<script>",
                vec![attempt(
                    Status::Failed,
                    Some("a \"quoted\" <b>"),
                    &[("m", "1.5")],
                )],
            )],
        );
        let html = render(&Grid::new(vec![r]), "t & t");
        assert!(!html.contains("<script>"));
        assert!(html.contains("title=\"a &quot;quoted&quot; &lt;b&gt; (1.0 s)\""));
        assert!(html.contains("<title>t &amp; t</title>"));
        assert!(html.contains("<svg"), "a chart for metric m");
        assert!(
            !html.contains("http://") || !html.contains("src="),
            "nothing fetched"
        );
    }
}
