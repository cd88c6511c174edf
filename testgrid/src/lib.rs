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
#![forbid(unsafe_code)]

pub mod config;
pub mod diff;
pub mod gcs;
pub mod junit;
pub mod layout;
pub mod prow;
pub mod publish;
pub mod read;
pub mod sanitize;

mod atomic;

pub use junit::{CaseResult, JunitFile, Outcome, junit_path, testgrid_row_name};
