//! The integration tests of `mock-openstack`: one module per former `tests/*.rs` file, all
//! linked into one test binary (as cargo's own `tests/testsuite/main.rs`), so a build
//! links once instead of once per file. A module name selects its tests, e.g.
//! `cargo test -p mock-openstack --test openstack cli::`.

mod cli;
mod dataplane;
mod engine;
mod http;
