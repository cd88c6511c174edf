//! The `reference-ccm` binary: a thin wrapper so `cargo test --test conformance`
//! builds it (see the root Cargo.toml); everything lives in the `reference-ccm` crate.
fn main() -> std::process::ExitCode {
    reference_ccm::main()
}
