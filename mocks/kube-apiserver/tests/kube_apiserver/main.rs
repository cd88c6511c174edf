//! The integration tests of `mock-kube-apiserver`: one module per former `tests/*.rs` file, all
//! linked into one test binary (as cargo's own `tests/testsuite/main.rs`), so a build
//! links once instead of once per file. A module name selects its tests, e.g.
//! `cargo test -p mock-kube-apiserver --test kube_apiserver apply::`.

mod apply;
mod differential;
mod dry_run;
mod event_ttl;
mod kube_rs;
mod kubectl;
mod persistence;
mod properties;
mod protobuf;
mod python_client;
mod representations;
mod router;
mod security;
