//! Helpers shared by the pyvmomi tests and the benchmark: finding pyvmomi, building and
//! running vcsim (govmomi v0.53.0's simulator, through the wrapper module in
//! `tests/vcsim/`, from the Go module proxy), and running the probe script.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The govmomi version vcsim is built from (`tests/vcsim/go.mod`): the one
/// vsphere-cloud-controller-manager v1.36.0 pins.
pub const VCSIM_VERSION: &str = "v0.53.0";

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn probe_script() -> PathBuf {
    crate_dir().join("tests/pyvmomi_probe.py")
}

/// `Err(reason)` when python3 with pyVmomi is not installed.
pub fn pyvmomi_available() -> Result<(), String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import pyVmomi, pyVim.connect"])
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "pyvmomi not importable ({}); install with `pip install pyvmomi`",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("python3 not runnable: {e}")),
    }
}

/// Runs the probe; returns its JSON output.
pub async fn run_probe(
    url: &str,
    user: &str,
    password: &str,
    ca: &str,
    extra: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let mut cmd = Command::new("python3");
    cmd.arg(probe_script())
        .args([url, user, password, ca])
        .args(extra)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .context("probe timed out")?
        .context("running the probe")?;
    if !out.status.success() {
        bail!(
            "probe failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "probe output is not JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Where built vcsim binaries are kept, outside the repository:
/// `$XDG_CACHE_HOME/ccm-conformance/vcsim-v0.53.0`, else `$HOME/.cache/...`.
fn vcsim_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ccm-conformance")
        .join(format!("vcsim-{VCSIM_VERSION}"))
}

/// The `go` command: on PATH, else the Go tarball's place (scripts/setup.sh).
fn go_command() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("go"))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
}

/// A digest of the wrapper module's files: a changed `main.go` or `go.mod` gets a binary
/// of its own, so checkouts sharing the cache never run each other's build.
fn wrapper_digest(dir: &Path) -> Result<String, String> {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for file in ["go.mod", "go.sum", "main.go"] {
        let bytes = std::fs::read(dir.join(file))
            .map_err(|e| format!("reading {}: {e}", dir.join(file).display()))?;
        h.write(file.as_bytes());
        h.write(&bytes);
    }
    Ok(format!("{:016x}", h.finish()))
}

/// Builds vcsim once per wrapper digest (`go build` of `tests/vcsim`, modules from the
/// Go module proxy or the module cache) and returns its path; `Err(reason)` when Go is
/// missing or the build fails. The binary is built under a temporary name and renamed
/// into place, so concurrent builders (test binaries, the benchmark) never see half a
/// file; within one process the first caller builds and the others wait.
pub fn build_vcsim() -> Result<PathBuf, String> {
    static BUILT: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(bin) = built.as_ref().filter(|b| b.is_file()) {
        return Ok(bin.clone());
    }
    let src = crate_dir().join("tests/vcsim");
    let dir = vcsim_cache().join(wrapper_digest(&src)?);
    let bin = dir.join("vcsim");
    if bin.is_file() {
        *built = Some(bin.clone());
        return Ok(bin);
    }
    let go = go_command().ok_or(
        "the `go` command is not on PATH (nor /usr/local/go/bin/go); install Go 1.26 (scripts/setup.sh)",
    )?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(
        "vcsim.tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let out = std::process::Command::new(&go)
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .args([
            "build",
            "-mod=readonly",
            "-buildvcs=false",
            "-trimpath",
            "-o",
        ])
        .arg(&tmp)
        .arg(".")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", go.display()))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "building vcsim (govmomi {VCSIM_VERSION}) in {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::rename(&tmp, &bin).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("moving vcsim into {}: {e}", bin.display())
    })?;
    *built = Some(bin.clone());
    Ok(bin)
}

/// A running vcsim; killed on drop.
pub struct Vcsim {
    _child: Child,
    /// `https://127.0.0.1:PORT/sdk`.
    pub url: String,
}

impl Vcsim {
    pub async fn start(bin: &Path) -> anyhow::Result<Vcsim> {
        let mut child = Command::new(bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting vcsim")?;
        let stdout = child.stdout.take().context("vcsim stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("vcsim did not print its URL")??
            .context("vcsim exited")?;
        // The URL carries vcsim's default login (`user:pass@`); clients get it separately.
        let url = match line.split_once('@') {
            Some((scheme_user, rest)) => {
                let scheme = scheme_user.split("//").next().unwrap_or("https:");
                format!("{scheme}//{rest}")
            }
            None => line,
        };
        Ok(Vcsim { _child: child, url })
    }
}
