//! Where a job run's files live in a bucket, as pure functions.
//!
//! Why: Prow writes, Deck lists and TestGrid reads one fixed object layout (reference §1.1,
//! prow `pkg/pod-utils/gcs/target.go`, test-infra `gubernator/README.md` "GCS Bucket
//! Layout"). A run published anywhere else, or with a build directory name that does not
//! parse as an increasing unsigned integer (§0 rule 5), never shows up. Keeping the rules
//! here, free of I/O, lets the publisher and the config generator agree by construction.

use std::fmt;

/// Errors in names that the layout cannot hold.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error(
        "build ID {0:?} is not valid: Deck and TestGrid need a non-zero unsigned integer without leading zeros"
    )]
    BuildId(String),
    #[error("job name {0:?} is not valid: Prow job names match ^[A-Za-z0-9-._]+$")]
    JobName(String),
    #[error("{0:?} is not a valid org/repo")]
    Repo(String),
    #[error("object name {name:?} is not valid: {reason}")]
    ObjectName { name: String, reason: &'static str },
}

/// A build directory name: Deck parses it as `uint64` and TestGrid only reads builds that
/// sort after its newest column (§0 rule 5, prow `cmd/deck/job_history.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BuildId(u64);

impl BuildId {
    /// Accepts decimal digits only, no sign, no leading zero, not zero, fitting `u64`, so
    /// that textual and numeric order agree for IDs of equal length and every reader
    /// parses the same number.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bad = || Error::BuildId(text.to_string());
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) || text.starts_with('0') {
            return Err(bad());
        }
        text.parse::<u64>().map(Self).map_err(|_| bad())
    }

    /// A build ID from a number (e.g. the start time in epoch seconds); zero is refused.
    pub fn new(n: u64) -> Result<Self, Error> {
        if n == 0 {
            Err(Error::BuildId("0".into()))
        } else {
            Ok(Self(n))
        }
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Checks a Prow job name (`^[A-Za-z0-9-._]+$`, prow `site/content/en/docs/jobs.md`; §4).
pub fn validate_job_name(job: &str) -> Result<(), Error> {
    let ok = !job.is_empty()
        && job != "."
        && job != ".."
        && job
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(Error::JobName(job.to_string()))
    }
}

/// The pull request a presubmit ran for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRef {
    pub org: String,
    pub repo: String,
    pub number: u64,
}

impl PullRef {
    /// From `org/repo` and a PR number.
    pub fn new(org_repo: &str, number: u64) -> Result<Self, Error> {
        let bad = || Error::Repo(org_repo.to_string());
        let (org, repo) = org_repo.split_once('/').ok_or_else(bad)?;
        let part_ok = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        };
        if !part_ok(org) || !part_ok(repo) || number == 0 {
            return Err(bad());
        }
        Ok(Self {
            org: org.to_string(),
            repo: repo.to_string(),
            number,
        })
    }
}

/// `decoration_config.gcs_configuration.path_strategy` (§1.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PathStrategy {
    /// Always `org_repo` — what a bucket of our own should use.
    #[default]
    Explicit,
    /// `""` for the default org+repo, `repo` for the default org, else `org_repo`
    /// (prow.k8s.io: default `kubernetes/kubernetes`).
    Legacy {
        default_org: String,
        default_repo: String,
    },
    /// `""` for the default org+repo, else `org_repo`.
    Single {
        default_org: String,
        default_repo: String,
    },
}

impl PathStrategy {
    /// The `<seg>` between `pr-logs/pull/` and the PR number; empty means none.
    pub fn segment(&self, pull: &PullRef) -> String {
        let org_repo = format!("{}_{}", pull.org, pull.repo);
        match self {
            Self::Explicit => org_repo,
            Self::Legacy {
                default_org,
                default_repo,
            } => {
                if pull.org == *default_org && pull.repo == *default_repo {
                    String::new()
                } else if pull.org == *default_org {
                    pull.repo.clone()
                } else {
                    org_repo
                }
            }
            Self::Single {
                default_org,
                default_repo,
            } => {
                if pull.org == *default_org && pull.repo == *default_repo {
                    String::new()
                } else {
                    org_repo
                }
            }
        }
    }
}

/// What kind of job a run belongs to, which decides its directory (§1.1 table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// Periodic and postsubmit jobs share `logs/<job>/`.
    Periodic,
    Presubmit(PullRef),
    Batch,
}

/// The layout of one job inside a bucket: `path_prefix` + the §1.1 table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLayout {
    /// `gcs_configuration.path_prefix`, without leading/trailing `/`; may be empty.
    pub path_prefix: String,
    pub job: String,
    pub kind: JobKind,
    pub strategy: PathStrategy,
}

impl JobLayout {
    pub fn new(path_prefix: &str, job: &str, kind: JobKind) -> Result<Self, Error> {
        validate_job_name(job)?;
        Ok(Self {
            path_prefix: path_prefix.trim_matches('/').to_string(),
            job: job.to_string(),
            kind,
            strategy: PathStrategy::default(),
        })
    }

    fn join(&self, parts: &[&str]) -> String {
        std::iter::once(self.path_prefix.as_str())
            .chain(parts.iter().copied())
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The directory holding all builds of this job for this PR (no trailing `/`):
    /// `logs/<job>`, `pr-logs/pull/<seg>/<PR>/<job>` or `pr-logs/pull/batch/<job>`.
    pub fn job_dir(&self) -> String {
        match &self.kind {
            JobKind::Periodic => self.join(&["logs", &self.job]),
            JobKind::Presubmit(pull) => {
                let seg = self.strategy.segment(pull);
                let pr = pull.number.to_string();
                self.join(&["pr-logs", "pull", &seg, &pr, &self.job])
            }
            JobKind::Batch => self.join(&["pr-logs", "pull", "batch", &self.job]),
        }
    }

    /// The build directory (no trailing `/`).
    pub fn build_dir(&self, build: BuildId) -> String {
        format!("{}/{build}", self.job_dir())
    }

    /// `pr-logs/directory/<job>`: where presubmit and batch builds are listed.
    pub fn directory_dir(&self) -> String {
        self.join(&["pr-logs", "directory", &self.job])
    }

    /// Every `latest-build.txt` to update (§1.1): the job dir for periodics; the directory
    /// *and* the per-PR job dir for presubmits; the directory for batches.
    pub fn latest_build_paths(&self) -> Vec<String> {
        match &self.kind {
            JobKind::Periodic => vec![format!("{}/latest-build.txt", self.job_dir())],
            JobKind::Presubmit(_) => vec![
                format!("{}/latest-build.txt", self.directory_dir()),
                format!("{}/latest-build.txt", self.job_dir()),
            ],
            JobKind::Batch => vec![format!("{}/latest-build.txt", self.directory_dir())],
        }
    }

    /// The presubmit alias `pr-logs/directory/<job>/<build>.txt`, if this kind has one.
    pub fn alias_path(&self, build: BuildId) -> Option<String> {
        match self.kind {
            JobKind::Presubmit(_) => Some(format!("{}/{build}.txt", self.directory_dir())),
            _ => None,
        }
    }

    /// The prefix a TestGrid test group reads (`gcs_prefix` minus the bucket): the job dir
    /// for periodics, `pr-logs/directory/<job>` for presubmits and batches (testgrid
    /// `util/gcs/read.go` ListBuilds follows the aliases).
    pub fn testgrid_prefix(&self) -> String {
        match self.kind {
            JobKind::Periodic => self.job_dir(),
            _ => self.directory_dir(),
        }
    }
}

/// Body of the alias object and value of its `x-goog-meta-link` metadata: the full URL of
/// the build directory, e.g. `gs://bucket/pr-logs/pull/org_repo/12/job/1234` (prow
/// `pkg/gcsupload/run.go`; TestGrid trims whitespace around it).
pub fn alias_link(bucket_url: &str, build_dir: &str) -> String {
    format!("{}/{}", bucket_url.trim_end_matches('/'), build_dir)
}

/// Body of `latest-build.txt`: the build ID, no newline (§1.1).
pub fn latest_build_body(build: BuildId) -> String {
    build.to_string()
}

/// How one file is stored: object name (relative to the build dir) and HTTP headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpec {
    pub name: String,
    pub content_type: &'static str,
    /// `gzip` for files whose name ended in `.gz` (that suffix is dropped from the name).
    pub content_encoding: Option<&'static str>,
}

/// The object a local file (path relative to the build dir, `/`-separated) becomes, as
/// Prow's uploader stores it (prow `pkg/pod-utils/gcs/metadata.go`): a trailing `.gz` is
/// dropped from the name and sets `Content-Encoding: gzip` with the inner type; `#`
/// becomes `%23`. Names must be ≤1024 bytes of UTF-8 with no CR/LF (§8.6).
pub fn object_spec(relative: &str) -> Result<ObjectSpec, Error> {
    let (inner, encoding) = match relative.strip_suffix(".gz") {
        Some(inner) if !inner.is_empty() && !inner.ends_with('/') => (inner, Some("gzip")),
        _ => (relative, None),
    };
    let name = inner.replace('#', "%23");
    validate_object_name(&name)?;
    Ok(ObjectSpec {
        content_type: content_type(&name),
        name,
        content_encoding: encoding,
    })
}

/// Checks the GCS object-name rules we rely on (§8.6).
pub fn validate_object_name(name: &str) -> Result<(), Error> {
    let bad = |reason| {
        Err(Error::ObjectName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 1024 {
        return bad("longer than 1024 bytes");
    }
    if name.contains(['\r', '\n']) {
        return bad("contains CR or LF");
    }
    if name.split('/').any(|p| p == "." || p == "..") {
        return bad("contains a . or .. segment");
    }
    Ok(())
}

/// Content-Type by file name: JSON and XML as such (upload_e2e.py's blanket text/plain is a
/// gap we close, §5), logs and text as UTF-8 text so browsers show them inline.
pub fn content_type(name: &str) -> &'static str {
    let ext = name
        .rsplit('/')
        .next()
        .and_then(|f| f.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("txt" | "log") => "text/plain; charset=utf-8",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("yaml" | "yml") => "application/yaml",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("tar") => "application/x-tar",
        Some("tgz") => "application/gzip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(org_repo: &str, n: u64) -> PullRef {
        PullRef::new(org_repo, n).unwrap()
    }

    // Reference §0 rule 5: uint64, strictly increasing in natural order.
    #[test]
    fn build_ids_are_plain_unsigned_integers() {
        assert_eq!(BuildId::parse("1732233600").unwrap().get(), 1_732_233_600);
        assert_eq!(
            BuildId::parse("18446744073709551615").unwrap().get(),
            u64::MAX
        );
        for bad in [
            "",
            "0",
            "007",
            "-1",
            "+1",
            "1.5",
            "1e9",
            " 1",
            "abc",
            "18446744073709551616",
        ] {
            assert!(BuildId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(BuildId::new(0).is_err());
        assert!(BuildId::parse("9").unwrap() < BuildId::parse("10").unwrap());
    }

    #[test]
    fn job_names_follow_prow() {
        assert!(validate_job_name("ci-foo_ccm.conformance-v1.34").is_ok());
        for bad in ["", "a/b", "a b", "..", "ä"] {
            assert!(validate_job_name(bad).is_err(), "{bad:?}");
        }
    }

    // Reference §1.1 table, periodic row.
    #[test]
    fn periodic_layout() {
        let l = JobLayout::new("", "ci-foo", JobKind::Periodic).unwrap();
        let b = BuildId::parse("1234").unwrap();
        assert_eq!(l.build_dir(b), "logs/ci-foo/1234");
        assert_eq!(l.latest_build_paths(), vec!["logs/ci-foo/latest-build.txt"]);
        assert_eq!(l.alias_path(b), None);
        assert_eq!(l.testgrid_prefix(), "logs/ci-foo");
        let p = JobLayout::new("/pre/fix/", "ci-foo", JobKind::Periodic).unwrap();
        assert_eq!(p.build_dir(b), "pre/fix/logs/ci-foo/1234");
    }

    // Reference §1.1 table, presubmit row, and the alias's link content.
    #[test]
    fn presubmit_layout_with_alias() {
        let l = JobLayout::new(
            "",
            "pull-foo",
            JobKind::Presubmit(pull("kubernetes-sigs/foo", 12)),
        )
        .unwrap();
        let b = BuildId::parse("77").unwrap();
        assert_eq!(
            l.build_dir(b),
            "pr-logs/pull/kubernetes-sigs_foo/12/pull-foo/77"
        );
        assert_eq!(
            l.latest_build_paths(),
            vec![
                "pr-logs/directory/pull-foo/latest-build.txt",
                "pr-logs/pull/kubernetes-sigs_foo/12/pull-foo/latest-build.txt",
            ]
        );
        assert_eq!(
            l.alias_path(b).as_deref(),
            Some("pr-logs/directory/pull-foo/77.txt")
        );
        assert_eq!(l.testgrid_prefix(), "pr-logs/directory/pull-foo");
        assert_eq!(
            alias_link("gs://bkt/", &l.build_dir(b)),
            "gs://bkt/pr-logs/pull/kubernetes-sigs_foo/12/pull-foo/77"
        );
        assert_eq!(latest_build_body(b), "77");
    }

    #[test]
    fn batch_layout() {
        let l = JobLayout::new("", "pull-foo", JobKind::Batch).unwrap();
        let b = BuildId::parse("5").unwrap();
        assert_eq!(l.build_dir(b), "pr-logs/pull/batch/pull-foo/5");
        assert_eq!(
            l.latest_build_paths(),
            vec!["pr-logs/directory/pull-foo/latest-build.txt"]
        );
        assert_eq!(l.alias_path(b), None);
    }

    // Reference §1.1: path_strategy segments; prow.k8s.io example kubernetes-sigs/foo PR 12.
    #[test]
    fn path_strategies() {
        let legacy = PathStrategy::Legacy {
            default_org: "kubernetes".into(),
            default_repo: "kubernetes".into(),
        };
        assert_eq!(legacy.segment(&pull("kubernetes/kubernetes", 1)), "");
        assert_eq!(
            legacy.segment(&pull("kubernetes/test-infra", 1)),
            "test-infra"
        );
        assert_eq!(
            legacy.segment(&pull("kubernetes-sigs/foo", 12)),
            "kubernetes-sigs_foo"
        );
        let single = PathStrategy::Single {
            default_org: "kubernetes".into(),
            default_repo: "kubernetes".into(),
        };
        assert_eq!(single.segment(&pull("kubernetes/kubernetes", 1)), "");
        assert_eq!(
            single.segment(&pull("kubernetes/test-infra", 1)),
            "kubernetes_test-infra"
        );
        assert_eq!(PathStrategy::Explicit.segment(&pull("a/b", 1)), "a_b");
        let mut l = JobLayout::new(
            "",
            "j",
            JobKind::Presubmit(pull("kubernetes/kubernetes", 3)),
        )
        .unwrap();
        l.strategy = legacy;
        assert_eq!(l.job_dir(), "pr-logs/pull/3/j");
    }

    #[test]
    fn pull_refs_are_checked() {
        assert!(PullRef::new("noslash", 1).is_err());
        assert!(PullRef::new("a/b/c", 1).is_err());
        assert!(PullRef::new("a/b", 0).is_err());
    }

    // Reference §1.2 quirks: `.gz` dropped with Content-Encoding, `#` → %23.
    #[test]
    fn object_specs_and_content_types() {
        let s = object_spec("artifacts/junit_conformance.xml").unwrap();
        assert_eq!(s.content_type, "application/xml");
        assert_eq!(s.content_encoding, None);
        let s = object_spec("artifacts/ccm.log.gz").unwrap();
        assert_eq!(s.name, "artifacts/ccm.log");
        assert_eq!(s.content_type, "text/plain; charset=utf-8");
        assert_eq!(s.content_encoding, Some("gzip"));
        assert_eq!(
            object_spec("artifacts/a#b.txt").unwrap().name,
            "artifacts/a%23b.txt"
        );
        assert_eq!(content_type("started.json"), "application/json");
        assert_eq!(content_type("build-log.txt"), "text/plain; charset=utf-8");
        assert_eq!(content_type("dir.d/noext"), "application/octet-stream");
        assert!(object_spec("a\nb").is_err());
        assert!(object_spec("../x").is_err());
        assert!(object_spec(&"x".repeat(1025)).is_err());
    }
}
