//! `cargo test --test conformance`: every suite against the CCM under test, with libtest's
//! flags (`--list`, filters, `--exact`, `--skip`, `--test-threads`, `--ignored`). Options
//! come from the environment (DESIGN.md): `CCM_CONFORMANCE_PROVIDERS`, `CCM_CONFORMANCE_CCM`,
//! `CCM_CONFORMANCE_CCM_ARGS`, `CCM_CONFORMANCE_KUBECONFIG`, `ARTIFACTS`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    let reference = PathBuf::from(env!("CARGO_BIN_EXE_reference-ccm"));
    let settings = match ccm_harness::Settings::from_env(reference) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    ccm_harness::runner::run(&ccm_suites::all(), settings, args).exit_code()
}
