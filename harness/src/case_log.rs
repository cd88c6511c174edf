//! Where the library log lines of a run go: into the log of the case they belong to, not
//! onto the terminal.
//!
//! A run's terminal is for its progress lines and summary. The libraries under it (kube's
//! client, the mocks, the simulated kubelets) log too: connections cut while a case tears
//! its environment down, a kube-proxy that cannot bind yet. Those lines are evidence about
//! one case, so [`CaseLogs`] writes each event to `harness.log` in the directory of the
//! case whose span ([`case_span`]) it happened under — the runner enters one per case, and
//! the simulated kubelets carry it into the tasks they spawn. Events outside every case
//! (start-up, a task spawned without the span) go to the run's own log file. The terminal
//! gets them too only when asked (`--verbose`, or `RUST_LOG` set): [`init`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry};

/// The name of the span that marks a case; its `log` field is the case's log file.
pub const CASE_SPAN: &str = "ccm_case";

/// What the log files get when `RUST_LOG` says nothing: everything of ours down to INFO,
/// the transport libraries' warnings and errors.
pub const DEFAULT_FILTER: &str = "info,hyper=warn,hyper_util=warn,h2=warn,tower=warn,rustls=warn,kube_client=warn,kube_runtime=warn";

/// The span a case's work runs in: every event under it goes to `log`.
pub fn case_span(log: &Path) -> tracing::Span {
    tracing::info_span!(CASE_SPAN, log = %log.display())
}

/// A log file opened on its first line (a case's directory is made, and emptied, when the
/// case starts).
struct LogFile {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl LogFile {
    fn new(path: PathBuf) -> Self {
        LogFile {
            path,
            file: Mutex::new(None),
        }
    }

    fn write(&self, line: &str) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            *file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ok();
        }
        if let Some(f) = file.as_mut() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The layer: each event to its case's log, or to the run's.
pub struct CaseLogs {
    run_log: Option<LogFile>,
}

impl CaseLogs {
    /// `run_log`: where events outside every case go (`None`: nowhere).
    pub fn new(run_log: Option<PathBuf>) -> Self {
        CaseLogs {
            run_log: run_log.map(LogFile::new),
        }
    }
}

impl<S> Layer<S> for CaseLogs
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != CASE_SPAN {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let Some(path) = fields.get("log") else {
            return;
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut()
                .insert(LogFile::new(PathBuf::from(path)));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let line = format_event(event);
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if let Some(file) = span.extensions().get::<LogFile>() {
                    file.write(&line);
                    return;
                }
            }
        }
        if let Some(file) = &self.run_log {
            file.write(&line);
        }
    }
}

/// `2026-11-27T06:41:38.091Z WARN mock_kubelet::kube_proxy: message key=value ...`
fn format_event(event: &Event<'_>) -> String {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let meta = event.metadata();
    let mut line = format!(
        "{} {:>5} {}: {}",
        jiff::Timestamp::now(),
        meta.level(),
        meta.target(),
        fields.get("message").unwrap_or_default()
    );
    for (k, v) in fields.0.iter().filter(|(k, _)| k != "message") {
        line.push_str(&format!(" {k}={v}"));
    }
    line.push('\n');
    line
}

/// An event's or span's fields, in order, as text.
#[derive(Default)]
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
}

/// Installs the run's logging, once per process (later calls do nothing): [`CaseLogs`]
/// with `RUST_LOG`'s filter (else [`DEFAULT_FILTER`]), events outside every case to
/// `run_log`; and the terminal (standard error) too when `terminal` is set or `RUST_LOG`
/// is, with `RUST_LOG`'s filter (else WARN).
pub fn init(run_log: Option<PathBuf>, terminal: bool) {
    let from_env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let files = EnvFilter::new(from_env.as_deref().unwrap_or(DEFAULT_FILTER));
    // kube's client logs every connection a teardown cuts: off on screen unless asked.
    let screen = (terminal || from_env.is_some()).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(EnvFilter::new(
                from_env
                    .as_deref()
                    .unwrap_or("warn,kube_client=off,kube_runtime=off"),
            ))
    });
    let _ = Registry::default()
        .with(CaseLogs::new(run_log).with_filter(files))
        .with(screen)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Instrument;

    #[test]
    fn events_go_to_their_cases_log_and_the_rest_to_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let run_log = dir.path().join("run.log");
        let (a, b) = (
            dir.path().join("a/harness.log"),
            dir.path().join("b/harness.log"),
        );
        let subscriber = Registry::default().with(CaseLogs::new(Some(run_log.clone())));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!("before any case");
            case_span(&a).in_scope(|| {
                tracing::warn!(node = "n1", "in case a");
                tracing::info_span!("inner").in_scope(|| tracing::info!("nested in a"));
            });
            case_span(&b).in_scope(|| tracing::error!("in case b"));
        });
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let (a, b, run) = (read(&a), read(&b), read(&run_log));
        assert!(a.contains("WARN") && a.contains("in case a node=n1"), "{a}");
        assert!(a.contains("nested in a"), "{a}");
        assert!(
            !a.contains("in case b") && !a.contains("before any case"),
            "{a}"
        );
        assert!(b.contains("ERROR") && b.contains("in case b"), "{b}");
        assert!(
            run.contains("before any case") && !run.contains("in case"),
            "{run}"
        );
    }

    #[test]
    fn a_task_carrying_the_span_logs_into_the_case() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("c/harness.log");
        let subscriber = Registry::default().with(CaseLogs::new(None));
        let _guard = tracing::subscriber::set_default(subscriber);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(
            async {
                tokio::spawn(async { tracing::warn!("from a spawned task") }.in_current_span())
                    .await
                    .unwrap();
            }
            .instrument(case_span(&log)),
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("from a spawned task"), "{text}");
    }
}
