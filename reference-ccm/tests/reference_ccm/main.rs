//! The integration tests of `reference-ccm`: one module per former `tests/*.rs` file, all
//! linked into one test binary (as cargo's own `tests/testsuite/main.rs`), so a build
//! links once instead of once per file. A module name selects its tests, e.g.
//! `cargo test -p reference-ccm --test reference_ccm aws_client::`.

mod aws_client;
mod aws_lb;
mod in_process;
mod leader;
mod node_sync;
mod openstack_client;
mod openstack_lb;
mod service_in_process;
mod vsphere_client;
