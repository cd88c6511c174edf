//! Results in the formats the Kubernetes community reads: JUnit in TestGrid's dialect, the
//! Prow artifact files (`started.json`, `finished.json`, `metadata.json`, `build-log.txt`),
//! the GCS object layout Prow, Deck and TestGrid agree on, publishing a run into that
//! layout, and TestGrid configuration for a provider's bucket.
//!
//! Why a crate of our own around `quick-junit`: TestGrid and Spyglass are strict about a
//! few things quick-junit leaves to the caller (see `shared/reference/testgrid-prow.md`):
//! files named `junit_<context>.xml` with no `_` inside the context, a one-line failure
//! message with the detail in the body, skip messages that are never empty, no U+FFFE/FFFF,
//! and a file that is valid at every instant of a run, so it is rewritten atomically after
//! each case. The same strictness applies to the JSON files (integer timestamps, boolean
//! `passed`) and to build directory names (unsigned integers, increasing).
//!
//! # The JUnit dialect ([`junit`])
//!
//! What every `junit_*.xml` a run writes holds to (reference §0, §2), and what
//! `tests/testgrid/oracle.rs` re-checks with an independent implementation of TestGrid's
//! rules:
//! - root `<testsuites>`, integer counts, `time` as plain seconds (`12.345`);
//! - a row is named `<testsuite@name>.<testcase@name>` ([`testgrid_row_name`]); `classname`
//!   is not used by TestGrid;
//! - files are `junit_<context>[_NN].xml` with no `_` inside the context ([`junit_path`]),
//!   rewritten atomically after each case, so a killed run leaves a valid file;
//! - a failure's `message` is one line, the detail goes in the body and is not repeated;
//!   bodies are capped at [`junit::MAX_BODY_BYTES`] (head and tail kept);
//! - a skip message is never empty nor `skipped` (TestGrid drops such rows);
//! - text is cleaned of ANSI escapes and XML-illegal characters, U+FFFE/U+FFFF included;
//! - numeric testcase properties carry the suites' metrics (`taint-removal-seconds`, …);
//! - a retried case is written again under the same name: TestGrid shows FLAKY.
//!
//! # Commands
//!
//! The `ccm-conformance` binary exposes this crate as five commands.
//!
//! ## `publish` ([`publish`])
//!
//! Uploads a run's `$ARTIFACTS` directory in the Prow layout: periodic builds under
//! `logs/<job>/<build>/`, presubmits under `pr-logs/pull/<org_repo>/<pr>/<job>/<build>/`
//! plus the `pr-logs/directory/<job>/<build>.txt` alias (with `x-goog-meta-link`), and
//! `latest-build.txt`. `started.json` goes first; every other object of the build is
//! uploaded side by side, 8 at a time against GCS ([`publish::DEFAULT_CONCURRENCY`]), 4
//! against an emulator ([`publish::EMULATOR_CONCURRENCY`]; `CCM_PUBLISH_CONCURRENCY=N` or
//! [`publish::Options`] change it), each retried with
//! exponential backoff on 429/5xx/transport errors; `finished.json`, the alias and
//! `latest-build.txt` are written last and only when everything else succeeded, so an
//! interrupted or failed publish shows as "running", never as finished. A malformed JUnit
//! is refused before anything is uploaded. `file:///PATH` writes the same tree locally.
//!
//! ```text
//! # a periodic to GCS (GOOGLE_APPLICATION_CREDENTIALS or the metadata server)
//! ccm-conformance publish --from _artifacts --to gs://k8s-conformance-openstack/ccm \
//!     --job ci-openstack-ccm-conformance
//! # a presubmit to an emulator, build ID given
//! STORAGE_EMULATOR_HOST=127.0.0.1:9023 ccm-conformance publish --from _artifacts \
//!     --to gs://bkt --job pull-ccm --build 42 --pr 123 --repo kubernetes/cloud-provider-openstack
//! # the same tree on disk
//! ccm-conformance publish --from _artifacts --to file:///tmp/bucket --job ci-local
//! ```
//!
//! ## `dashboard` ([`dashboard`])
//!
//! Renders a static TestGrid-style `index.html`: rows are cases, columns are runs (newest
//! left), cells pass/fail/flaky/skip with the failure message on hover, a per-provider
//! summary and a chart per metric. Reads a local tree (what `publish` writes to `file://`)
//! or a bucket.
//!
//! ```text
//! ccm-conformance dashboard --from file:///tmp/bucket --out site/
//! STORAGE_EMULATOR_HOST=127.0.0.1:9023 ccm-conformance dashboard --from gs://bkt/logs --out site/
//! ```
//!
//! ## `certify` ([`certify`])
//!
//! Runs the suites against a provider's CCM (a binary, or an existing cluster through
//! `--kubeconfig`) and writes a folder ready to publish and to propose to the TestGrid
//! config repository: JUnit, logs, the Prow files, `README.md` and `testgrid-config.yaml`.
//!
//! ```text
//! ccm-conformance certify --provider openstack --ccm ./openstack-cloud-controller-manager \
//!     --out cert/ --bucket k8s-conformance-openstack
//! ```
//!
//! ## `testgrid-config` ([`config`])
//!
//! Prints a TestGrid config for a provider's bucket and job: a test group with
//! `gcs_prefix` (and `disable_prowjob_analysis` for uploads outside Prow), column headers
//! from `finished.json` metadata, a dashboard tab and alert options.
//!
//! ```text
//! ccm-conformance testgrid-config --provider openstack --bucket gs://k8s-conformance-openstack/ccm \
//!     --job ci-openstack-ccm-conformance
//! ccm-conformance testgrid-config --provider openstack --bucket k8s-conformance-openstack \
//!     --job pull-openstack-ccm-conformance --presubmit
//! ```
//!
//! ## `diff` ([`diff`])
//!
//! Compares two runs (JUnit files or directories searched for `junit*.xml`): new failures,
//! fixes, flakes, added and removed cases, and passing cases that became slower (at least
//! `--slower-factor` times and `--slower-seconds` more). Exits 1 when the second run has
//! new failures.
//!
//! ```text
//! ccm-conformance diff runs/monday/ runs/tuesday/junit_conformance.xml --slower-factor 2
//! ```
//!
//! # Benchmarks ([`mod@bench`])
//!
//! ```text
//! ccm-conformance bench junit --cases 2000
//! STORAGE_EMULATOR_HOST=127.0.0.1:9023 ccm-conformance bench publish --cases 2000 \
//!     --files-per-case 3 --to gs://bkt/bench     # emulator: gcp-storage-emulator start --in-memory --default-bucket bkt
//! ccm-conformance bench publish --cases 2000 --files-per-case 3 --to file:///tmp/bucket
//! ```
//!
//! Numbers of 2026-11-22 (debug build, 2 shared cores, `gcp-storage-emulator` 2026.7.19
//! `--in-memory`):
//!
//! | benchmark | result |
//! |---|---|
//! | `bench junit --cases 2000` (a write per case) | median 2.9 ms, p99 14.9 ms (target < 5 ms) |
//! | `bench publish --cases 2000 --files-per-case 0`, emulator (6 objects) | 0.05 s (target < 10 s) |
//! | `bench publish --cases 2000 --files-per-case 3`, emulator (6,006 objects), one at a time | 349 s |
//! | same, 4 at a time (cores busy with builds meanwhile) | 394 s |
//! | `bench publish --cases 500 --files-per-case 3`, emulator (1,506 objects), 1 / 4 / 8 at a time | 22.6 s / 21.9 s / 108 s |
//! | `bench publish --cases 2000 --files-per-case 3`, threaded sink answering after 5 ms, 1 / 8 / 32 at a time | 37.1 s / 4.7 s / 4.1 s |
//! | `bench publish --cases 2000 --files-per-case 3 --to file://…` | 2.0 s |
//!
//! The emulator bounds the 6,006-object publish, not the client: `gcp-storage-emulator`
//! serves one request at a time and rewrites its whole metadata file (every object's
//! resource as indented JSON) after each upload (`storage.py`, `create_file` →
//! `_write_config_to_file`), so publishing n objects costs it O(n²) — 22 s for 1,506
//! objects, 349 s for 6,006 — whatever the client's concurrency. Against a server that
//! answers requests side by side (the sink row, standing in for GCS) the same run publishes
//! in under 5 s.
#![forbid(unsafe_code)]

pub mod bench;
pub mod certify;
pub mod config;
pub mod dashboard;
pub mod diff;
pub mod gcs;
pub mod junit;
pub mod layout;
pub mod merge;
pub mod prow;
pub mod publish;
pub mod read;
pub mod sanitize;

mod atomic;

pub use junit::{CaseResult, JunitFile, Outcome, junit_path, testgrid_row_name};
