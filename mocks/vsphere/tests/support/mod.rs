//! Helpers shared by the pyvmomi tests and the benchmark: finding pyvmomi, building and
//! running vcsim from Debian's govmomi simulator library, and running the probe script.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The Debian package's GOPATH root holding `github.com/vmware/govmomi`.
const GOCODE: &str = "/usr/share/gocode";

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

/// Where the vcsim binary is cached between runs.
fn vcsim_cache() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../../target"));
    target.join("vcsim")
}

/// Builds vcsim once (GOPATH mode against Debian's govmomi, no network) and returns its
/// path; `Err(reason)` when Go or the library are not installed.
pub fn build_vcsim() -> Result<PathBuf, String> {
    if !Path::new(GOCODE)
        .join("src/github.com/vmware/govmomi/simulator")
        .is_dir()
    {
        return Err(
            "govmomi simulator sources missing; install with `apt-get install -y golang-go golang-github-vmware-govmomi-dev`"
                .into(),
        );
    }
    let cache = vcsim_cache();
    let bin = cache.join("vcsim");
    let src = crate_dir().join("tests/vcsim/main.go");
    let fresh = match (std::fs::metadata(&bin), std::fs::metadata(&src)) {
        (Ok(b), Ok(s)) => match (b.modified(), s.modified()) {
            (Ok(b), Ok(s)) => b >= s,
            _ => false,
        },
        _ => false,
    };
    if fresh {
        return Ok(bin);
    }
    let pkg = cache.join("gopath/src/vcsimmini");
    std::fs::create_dir_all(&pkg).map_err(|e| format!("creating {}: {e}", pkg.display()))?;
    std::fs::copy(&src, pkg.join("main.go")).map_err(|e| format!("copying main.go: {e}"))?;
    let gopath = format!("{}:{GOCODE}", cache.join("gopath").display());
    let out = std::process::Command::new("go")
        .current_dir(&pkg)
        .env("GOPATH", gopath)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("GOCACHE", cache.join("gocache"))
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .output()
        .map_err(|e| {
            format!("go not runnable ({e}); install with `apt-get install -y golang-go`")
        })?;
    if !out.status.success() {
        return Err(format!(
            "building vcsim failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
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
