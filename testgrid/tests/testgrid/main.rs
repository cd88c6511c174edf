//! The integration tests of `ccm-testgrid`: one module per former `tests/*.rs` file, all
//! linked into one test binary (as cargo's own `tests/testsuite/main.rs`), so a build
//! links once instead of once per file. A module name selects its tests, e.g.
//! `cargo test -p ccm-testgrid --test testgrid bad_input::`.

mod bad_input;
mod dashboard;
mod gcs_emulator;
mod oracle;
mod prow_jobs;
mod publish_file;
mod publish_parallel;
