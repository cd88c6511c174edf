//! The Prow job-run files besides JUnit: `started.json`, `finished.json`, `metadata.json`
//! and `build-log.txt`.
//!
//! Why: TestGrid builds a column only from these (reference §1.3, §1.4): `started.json`
//! needs an integer, non-zero `timestamp` (a float or string turns the column into a tool
//! failure, `0` into "RUNNING"), `finished.json` needs an integer `timestamp`, a boolean
//! `passed` for TestGrid *and* a string `result` for Deck, and only string `metadata` values
//! become column headers. A harness that runs outside Prow (or that wants its own column
//! headers inside Prow, via `$ARTIFACTS/metadata.json`) has to write them itself. JSON files
//! are written atomically; an empty `started.json` reads as "Malformed artifacts".

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sanitize::clean_text;

pub const STARTED_JSON: &str = "started.json";
pub const FINISHED_JSON: &str = "finished.json";
/// Under `$ARTIFACTS`; Prow's sidecar merges it into `finished.json` `metadata` (§1.2, §4).
pub const METADATA_JSON: &str = "metadata.json";
pub const BUILD_LOG: &str = "build-log.txt";

/// Errors while writing or reading the job-run files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}: timestamp must be a non-zero number of seconds since the epoch")]
    ZeroTimestamp { file: &'static str },
    #[error("finished.json: timestamp {finished} is before started.json's {started}")]
    FinishedBeforeStarted { started: u64, finished: u64 },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not valid for TestGrid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("encoding {file}: {source}")]
    Encode {
        file: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// Seconds since the epoch, now (what every `timestamp` holds).
pub fn now_epoch_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `started.json` (testgrid `metadata/job.go` Started; prow `pkg/pod-utils/downwardapi/jobspec.go`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    /// Epoch seconds, integer, non-zero.
    pub timestamp: u64,
    /// `"org/repo": "base_ref:base_sha[,PR:pr_sha]"` — Prow's `refsToStarted` shape.
    #[serde(default)]
    pub repos: BTreeMap<String, String>,
    /// The resolved commit; one of the sources of TestGrid's Commit header.
    #[serde(
        rename = "repo-commit",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub repo_commit: Option<String>,
    /// PR number of the main ref, for presubmits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Deprecated by TestGrid but still read; kept string-only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl Started {
    /// Started now, no repositories.
    pub fn now() -> Self {
        Self::at(now_epoch_seconds())
    }

    pub fn at(timestamp: u64) -> Self {
        Self {
            timestamp,
            repos: BTreeMap::new(),
            repo_commit: None,
            pull: None,
            node: None,
            metadata: BTreeMap::new(),
        }
    }

    /// Fills `repos`, `pull` and `repo-commit` from Prow's decoration environment
    /// (`REPO_OWNER`, `REPO_NAME`, `PULL_REFS`, `PULL_NUMBER`, `PULL_PULL_SHA`,
    /// `PULL_BASE_SHA`; prow `pkg/pod-utils/downwardapi/jobspec.go`). `env` is a lookup so
    /// tests need not touch the process environment; pass `|k| std::env::var(k).ok()`.
    pub fn with_prow_env(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if let (Some(owner), Some(name), Some(refs)) =
            (get("REPO_OWNER"), get("REPO_NAME"), get("PULL_REFS"))
        {
            self.repos.insert(format!("{owner}/{name}"), refs);
        }
        self.pull = get("PULL_NUMBER").or(self.pull);
        self.repo_commit = get("PULL_PULL_SHA")
            .or_else(|| get("PULL_BASE_SHA"))
            .or(self.repo_commit);
        self
    }
}

/// `result` of `finished.json`, as Prow's sidecar writes it (prow `pkg/sidecar/run.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobResult {
    Success,
    Failure,
    Aborted,
}

impl JobResult {
    /// Prow's mapping of the test process's exit code: 0 → SUCCESS, 130 (interrupted) →
    /// ABORTED, anything else → FAILURE (reference §4 "Runtime contract").
    pub fn from_exit_code(code: i32) -> Self {
        match code {
            0 => Self::Success,
            130 => Self::Aborted,
            _ => Self::Failure,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Aborted => "ABORTED",
        }
    }
}

/// What a run was: the values TestGrid can show as column headers. Always written as
/// strings (TestGrid ignores non-string metadata values, §1.4).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunMetadata {
    pub k8s_version: String,
    pub ccm_version: String,
    pub provider: String,
    pub harness_version: String,
    /// Anything else (e.g. `repo-commit`, `job-version`); string values only.
    pub extra: BTreeMap<String, String>,
}

impl RunMetadata {
    /// The flat string map written as `metadata` (keys `k8s-version`, `ccm-version`,
    /// `provider`, `harness-version`, then `extra`; the named fields win over `extra`).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut map: BTreeMap<String, String> = self
            .extra
            .iter()
            .map(|(k, v)| (clean_text(k), clean_text(v)))
            .collect();
        for (k, v) in [
            ("k8s-version", &self.k8s_version),
            ("ccm-version", &self.ccm_version),
            ("provider", &self.provider),
            ("harness-version", &self.harness_version),
        ] {
            map.insert(k.to_string(), clean_text(v));
        }
        map
    }
}

/// `finished.json` (testgrid `metadata/job.go` Finished; prow `pkg/sidecar/run.go`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    pub timestamp: u64,
    /// TestGrid's verdict; without it Overall gets an `E` icon (§1.4).
    pub passed: bool,
    /// Deck's verdict.
    pub result: JobResult,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl Finished {
    /// `passed` is derived from `result` so the two can never disagree.
    pub fn new(timestamp: u64, result: JobResult, metadata: &RunMetadata) -> Self {
        Self {
            timestamp,
            passed: result == JobResult::Success,
            result,
            metadata: metadata.to_map(),
        }
    }
}

fn write_json<T: Serialize>(dir: &Path, file: &'static str, value: &T) -> Result<PathBuf, Error> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|source| Error::Encode { file, source })?;
    bytes.push(b'\n');
    let path = dir.join(file);
    crate::atomic::write(&path, &bytes).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Writes `dir/started.json` atomically. Refuses a zero timestamp (§1.3: reads as RUNNING
/// forever).
pub fn write_started(dir: &Path, started: &Started) -> Result<PathBuf, Error> {
    if started.timestamp == 0 {
        return Err(Error::ZeroTimestamp { file: STARTED_JSON });
    }
    write_json(dir, STARTED_JSON, started)
}

/// Writes `dir/finished.json` atomically. Refuses a zero timestamp, and one earlier than
/// `dir/started.json`'s when that file exists (TestGrid's duration metric would go
/// negative; §8.4 "finished ≥ started").
pub fn write_finished(dir: &Path, finished: &Finished) -> Result<PathBuf, Error> {
    if finished.timestamp == 0 {
        return Err(Error::ZeroTimestamp {
            file: FINISHED_JSON,
        });
    }
    let started_path = dir.join(STARTED_JSON);
    if started_path.exists() {
        let started = read_started(&started_path)?;
        if finished.timestamp < started.timestamp {
            return Err(Error::FinishedBeforeStarted {
                started: started.timestamp,
                finished: finished.timestamp,
            });
        }
    }
    write_json(dir, FINISHED_JSON, finished)
}

/// Writes `dir/metadata.json` (a flat object of strings) atomically. Inside Prow, put it in
/// `$ARTIFACTS`: the sidecar merges it into `finished.json` (§1.2, §4).
pub fn write_metadata(dir: &Path, metadata: &RunMetadata) -> Result<PathBuf, Error> {
    write_json(dir, METADATA_JSON, &metadata.to_map())
}

/// Reads and checks a `started.json` the way TestGrid would: `timestamp` must be a
/// non-zero integer (a float or string is a decode error there, §1.3).
pub fn read_started(path: &Path) -> Result<Started, Error> {
    let started: Started = read_json(path)?;
    if started.timestamp == 0 {
        return Err(Error::Invalid {
            path: path.to_path_buf(),
            reason: "timestamp is 0".into(),
        });
    }
    Ok(started)
}

/// Reads and checks a `finished.json`: integer `timestamp`, boolean `passed`, `result`
/// one of SUCCESS/FAILURE/ABORTED, `metadata` values strings.
pub fn read_finished(path: &Path) -> Result<Finished, Error> {
    read_json(path)
}

/// Reads a `metadata.json`, keeping only string values (the only ones TestGrid uses).
pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, String>, Error> {
    let value: serde_json::Value = read_json(path)?;
    let serde_json::Value::Object(map) = value else {
        return Err(Error::Invalid {
            path: path.to_path_buf(),
            reason: "not a JSON object".into(),
        });
    };
    Ok(map
        .into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// `build-log.txt`: the run's console output, appended as it comes, cleaned of ANSI
/// escapes and control characters (Spyglass shows it as text; reference §1.2).
///
/// Each call to [`BuildLog::append`] is cleaned on its own, so pass whole lines (an escape
/// sequence split across two calls would leave its tail in the file).
pub struct BuildLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl BuildLog {
    /// Opens `path` for appending, creating it and its directory.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, Error> {
        let path = path.into();
        let err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(err)?;
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `text` (cleaned) in one write.
    pub fn append(&self, text: &str) -> Result<(), Error> {
        let clean = clean_text(text);
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(clean.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|source| Error::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// Appends `line` and a newline.
    pub fn line(&self, line: &str) -> Result<(), Error> {
        self.append(&format!("{line}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> RunMetadata {
        RunMetadata {
            k8s_version: "v1.34.1".into(),
            ccm_version: "v0.9.0".into(),
            provider: "openstack".into(),
            harness_version: "0.1.0".into(),
            extra: BTreeMap::from([("k8s-version".into(), "overridden".into())]),
        }
    }

    // Reference §0 rule 4, §1.3: integer non-zero timestamp; repos map; repo-commit key.
    #[test]
    fn started_json_has_integer_timestamp_and_prow_keys() {
        let dir = tempfile::tempdir().unwrap();
        let env = |k: &str| {
            let v = match k {
                "REPO_OWNER" => "kubernetes-sigs",
                "REPO_NAME" => "cloud-provider-foo",
                "PULL_REFS" => "main:1f0c,123:9ab2",
                "PULL_NUMBER" => "123",
                "PULL_PULL_SHA" => "9ab2",
                _ => return None,
            };
            Some(v.to_string())
        };
        let started = Started::at(1_732_233_600).with_prow_env(env);
        let path = write_started(dir.path(), &started).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(v["timestamp"].is_u64(), "{v}");
        assert_eq!(v["timestamp"], 1_732_233_600u64);
        assert_eq!(
            v["repos"]["kubernetes-sigs/cloud-provider-foo"],
            "main:1f0c,123:9ab2"
        );
        assert_eq!(v["repo-commit"], "9ab2");
        assert_eq!(v["pull"], "123");
        assert_eq!(read_started(&path).unwrap(), started);
    }

    #[test]
    fn started_without_prow_env_has_empty_repos_and_no_commit() {
        let s = Started::at(5).with_prow_env(|_| None);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v, serde_json::json!({"timestamp": 5, "repos": {}}));
    }

    #[test]
    fn zero_timestamps_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            write_started(dir.path(), &Started::at(0)),
            Err(Error::ZeroTimestamp { .. })
        ));
        let f = Finished::new(0, JobResult::Success, &metadata());
        assert!(write_finished(dir.path(), &f).is_err());
        assert!(!dir.path().join(STARTED_JSON).exists());
    }

    // Reference §0 rule 4, §1.4: integer timestamp, bool passed, string result, string-only
    // metadata with our column-header keys.
    #[test]
    fn finished_json_has_passed_result_and_string_metadata() {
        let dir = tempfile::tempdir().unwrap();
        write_started(dir.path(), &Started::at(100)).unwrap();
        let path = write_finished(
            dir.path(),
            &Finished::new(160, JobResult::Failure, &metadata()),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(v["timestamp"].is_u64());
        assert_eq!(v["passed"], false);
        assert_eq!(v["result"], "FAILURE");
        let md = v["metadata"].as_object().unwrap();
        for key in ["k8s-version", "ccm-version", "provider", "harness-version"] {
            assert!(md[key].is_string(), "{key}: {v}");
        }
        assert_eq!(md["k8s-version"], "v1.34.1", "named field wins over extra");
        let back = read_finished(&path).unwrap();
        assert_eq!(back.result, JobResult::Failure);
    }

    #[test]
    fn passed_follows_result() {
        for (r, passed, text) in [
            (JobResult::Success, true, "SUCCESS"),
            (JobResult::Failure, false, "FAILURE"),
            (JobResult::Aborted, false, "ABORTED"),
        ] {
            let f = Finished::new(1, r, &RunMetadata::default());
            assert_eq!(f.passed, passed);
            assert_eq!(serde_json::to_value(&f).unwrap()["result"], text);
            assert_eq!(r.as_str(), text);
        }
    }

    // Reference §4 runtime contract: 0 → SUCCESS, 130 → ABORTED, else FAILURE.
    #[test]
    fn exit_codes_map_like_prow() {
        assert_eq!(JobResult::from_exit_code(0), JobResult::Success);
        assert_eq!(JobResult::from_exit_code(130), JobResult::Aborted);
        assert_eq!(JobResult::from_exit_code(1), JobResult::Failure);
        assert_eq!(JobResult::from_exit_code(127), JobResult::Failure);
    }

    #[test]
    fn finished_before_started_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_started(dir.path(), &Started::at(100)).unwrap();
        let f = Finished::new(99, JobResult::Success, &metadata());
        assert!(matches!(
            write_finished(dir.path(), &f),
            Err(Error::FinishedBeforeStarted { .. })
        ));
    }

    #[test]
    fn malformed_started_json_is_reported_not_panicked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(STARTED_JSON);
        for body in [
            "",
            r#"{"timestamp": 1.5}"#,
            r#"{"timestamp": "1"}"#,
            r#"{"timestamp": 0}"#,
        ] {
            std::fs::write(&p, body).unwrap();
            assert!(read_started(&p).is_err(), "{body:?} accepted");
        }
    }

    #[test]
    fn metadata_json_is_a_flat_string_object() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_metadata(dir.path(), &metadata()).unwrap();
        let m = read_metadata(&p).unwrap();
        assert_eq!(m["provider"], "openstack");
        std::fs::write(&p, r#"{"a": "x", "n": 3, "l": ["e"]}"#).unwrap();
        assert_eq!(read_metadata(&p).unwrap().len(), 1);
    }

    #[test]
    fn build_log_appends_without_ansi() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("logs").join(BUILD_LOG);
        let log = BuildLog::open(&p).unwrap();
        log.line("\x1b[32mPASS\x1b[0m one").unwrap();
        drop(log);
        BuildLog::open(&p).unwrap().line("FAIL two\u{7}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "PASS one\nFAIL two\n");
    }
}
