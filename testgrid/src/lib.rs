//! Results in the formats the Kubernetes community reads: JUnit in TestGrid's dialect
//! (this first cut) and, later, the Prow artifact files and GCS layout.
//!
//! Why a module of our own around `quick-junit`: TestGrid and Spyglass are strict about a
//! few things quick-junit leaves to the caller (see `shared/reference/testgrid-prow.md`):
//! files named `junit_<context>.xml` with no `_` inside the context, a one-line failure
//! message with the detail in the body, skip messages that are never empty, and a file
//! that is valid at every instant of a run, so it is rewritten atomically after each case.
#![forbid(unsafe_code)]

pub mod junit;

pub use junit::{CaseResult, JunitFile, Outcome, junit_path};
