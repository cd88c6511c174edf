//! `cargo test --test conformance`: every suite against the CCM under test, with libtest's
//! flags (`--list`, filters, `--exact`, `--skip`, `--test-threads`, `--ignored`). Options
//! come from the environment (DESIGN.md): `CCM_CONFORMANCE_PROVIDERS`, `CCM_CONFORMANCE_CCM`,
//! `CCM_CONFORMANCE_CCM_ARGS`, `CCM_CONFORMANCE_KUBECONFIG`, `CCM_CONFORMANCE_APISERVER`,
//! `CCM_CONFORMANCE_SHARD`, `ARTIFACTS` ([`RunRequest::from_env`]). The run itself is
//! `ccm-conformance run`'s ([`ccm_harness::run::execute`]), so it leaves the same files in
//! `$ARTIFACTS`: the JUnit, `started.json`, `metadata.json`, `build-log.txt` and
//! `finished.json` (none of them for `--list`).

use std::path::PathBuf;
use std::process::ExitCode;

use ccm_harness::run::{RequestError, RunRequest};

fn main() -> ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    let reference = PathBuf::from(env!("CARGO_BIN_EXE_reference-ccm"));
    let request = match RunRequest::from_env(reference, args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(RequestError::EXIT_CODE);
        }
    };
    match ccm_harness::run::execute(request, &ccm_suites::all()) {
        Ok(conclusion) => conclusion.exit_code(),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
