//! Upstream's Go binaries, built from their Go modules with the `go` command into a cache
//! outside the repository, so a run can put the real cloud-controller-managers (client-go,
//! gophercloud, aws-sdk-go-v2, govmomi, the Azure SDK for Go) through the suites, with the
//! per-node agents some of them rely on, and measure the embedded API
//! server against a real control plane (kube-apiserver and etcd, [`CONTROL_PLANE`]).
//!
//! Why a generated wrapper module per binary rather than `go install MODULE/cmd/x@v`:
//! `go install` refuses a module whose `go.mod` has `replace` lines (OpenStack's requires
//! `k8s.io/kubernetes` and replaces its staging modules; vSphere's and recent AWS's have one
//! each), and one module shared by several binaries would let minimal version selection
//! unify their `k8s.io/*` versions and break their compiles. See
//! `shared/reference/upstream-builds.md`.
//!
//! A build goes to a temporary directory beside the cache entry and is renamed into place
//! only once the binary runs and reports its version, so an interrupted or failed build
//! leaves nothing half-written behind. `GOFLAGS`, `GOMODCACHE`, `GOCACHE` and `GOPROXY` pass
//! through from the environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod gomod;

/// An upstream binary the harness knows how to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstream {
    /// A CCM's `--cloud-provider` name, or the component's (`kube-apiserver`, `etcd`); the
    /// cache entry's prefix.
    pub name: &'static str,
    pub module: &'static str,
    /// The main package, relative to the module (empty: the module's root is it).
    pub package: &'static str,
    /// The binary's file name, as upstream's Makefile names it.
    pub binary: &'static str,
    /// The newest release the Go module proxy served here that builds; each entry says why
    /// its version is the one (the CCMs' entries are in the harness's registry of clouds,
    /// docs/upstream.md).
    pub default_version: &'static str,
    /// What upstream's `replace` lines that point into its own repository become.
    pub siblings: Siblings,
    /// Version packages the release build stamps besides component-base's (each gets
    /// `gitVersion`, `gitMajor`, `gitMinor`; see [`Upstream::ldflags`]).
    pub version_packages: &'static [&'static str],
    /// A main package written here, for an upstream whose own main is not served: the
    /// wrapper module gets it as `main.go` and builds it instead of [`Upstream::package`]
    /// (which is then the package it imports, for the record).
    pub main: Option<&'static str>,
}

impl Upstream {
    /// The `-ldflags` of this binary's build at `version`: [`version_ldflags`] plus its
    /// own [`Upstream::version_packages`].
    pub fn ldflags(&self, version: &str) -> String {
        let mut flags = version_ldflags(version);
        let (major, minor) = major_minor(version);
        for pkg in self.version_packages {
            flags.push_str(&format!(
                " -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"
            ));
        }
        flags
    }
}

/// Upstream `replace` lines that point into the upstream repository itself (`./staging/…`,
/// `../api`): those directories are not in the module zip, so a wrapper cannot copy them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Siblings {
    /// None are expected: one is a [`BuildError::LocalReplace`].
    Refuse,
    /// Kubernetes' staging modules: `k8s.io/kubernetes` v1.N.P requires each at v0.0.0 and
    /// replaces it by `./staging/src/k8s.io/<m>`; each is published as v0.N.P.
    Staging,
    /// Modules released together at the upstream module's own version (etcd).
    SameVersion,
}

impl Siblings {
    /// The version the replaced modules are published at, for upstream `version`.
    pub fn published(self, version: &str) -> Option<String> {
        match self {
            Siblings::Refuse => None,
            Siblings::Staging => Some(match version.strip_prefix("v1.") {
                Some(rest) => format!("v0.{rest}"),
                None => version.to_string(),
            }),
            Siblings::SameVersion => Some(version.to_string()),
        }
    }
}

/// A real control plane to measure the embedded API server against
/// (`shared/reference/upstream-builds.md`, "kube-apiserver and etcd"). Default versions:
/// the newest Kubernetes release the module proxy lists here on 2026-11-26 (v1.37.2), and
/// the etcd its `go.mod` requires (v3.7.0).
pub const CONTROL_PLANE: &[Upstream] = &[
    Upstream {
        name: "kube-apiserver",
        module: "k8s.io/kubernetes",
        package: "cmd/kube-apiserver",
        binary: "kube-apiserver",
        default_version: "v1.37.2",
        siblings: Siblings::Staging,
        version_packages: &[],
        main: None,
    },
    Upstream {
        name: "etcd",
        module: "go.etcd.io/etcd/server/v3",
        package: "",
        binary: "etcd",
        default_version: "v3.7.0",
        // The server module replaces api, client/pkg, client/v3 and pkg by ../<dir>.
        siblings: Siblings::SameVersion,
        version_packages: &[],
        main: None,
    },
];

/// A control-plane component by name (`kube-apiserver`, `etcd`).
pub fn control_plane(name: &str) -> Option<&'static Upstream> {
    CONTROL_PLANE.iter().find(|u| u.name == name)
}

/// Where builds are kept: `$XDG_CACHE_HOME/ccm-conformance/upstream`, else
/// `$HOME/.cache/ccm-conformance/upstream`.
pub fn default_cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ccm-conformance").join("upstream")
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0:?} is not a Go module version (expected vMAJOR.MINOR.PATCH, e.g. v1.36.0)")]
    BadVersion(String),
    #[error("the `go` command was not found ({0}); install Go 1.26 (scripts/setup.sh checks it)")]
    NoGo(String),
    #[error("the Go module proxy does not serve {module}@{version}: {message}")]
    NotServed {
        module: String,
        version: String,
        message: String,
    },
    #[error(
        "{module}@{version} replaces {old} by the directory {new}, which is not part of its module zip"
    )]
    LocalReplace {
        module: String,
        version: String,
        old: String,
        new: String,
    },
    #[error("building {what} failed (full log: {log}):\n{tail}")]
    Build {
        what: String,
        log: PathBuf,
        tail: String,
    },
    #[error("the built {binary} does not run: {message}")]
    Broken { binary: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let context = context.into();
    move |source| BuildError::Io { context, source }
}

/// A built binary.
#[derive(Debug, Clone)]
pub struct Built {
    pub path: PathBuf,
    pub version: String,
    /// Found in the cache rather than built now.
    pub reused: bool,
}

/// Builds upstream binaries into a cache root.
#[derive(Debug, Clone)]
pub struct Builder {
    pub cache_root: PathBuf,
    /// The `go` command.
    pub go: PathBuf,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            cache_root: default_cache_root(),
            go: default_go(),
        }
    }
}

/// `$CCM_CONFORMANCE_GO`, else `go` on `PATH`, else the Go tarball's
/// `/usr/local/go/bin/go` (where the machines have Go 1.26 and a login shell may not have
/// it on `PATH`), else plain `go` (which then fails with [`BuildError::NoGo`]).
pub fn default_go() -> PathBuf {
    if let Some(go) = std::env::var_os("CCM_CONFORMANCE_GO").filter(|v| !v.is_empty()) {
        return PathBuf::from(go);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("go"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
        .unwrap_or_else(|| PathBuf::from("go"))
}

/// The stamp written beside a finished build (its presence marks the entry complete).
const STAMP: &str = "build.json";

impl Builder {
    /// The cache entry of `upstream` at `version`.
    pub fn entry(&self, upstream: &Upstream, version: &str) -> PathBuf {
        self.cache_root.join(format!("{}-{version}", upstream.name))
    }

    /// The cached binary, if a complete build is there.
    pub fn cached(&self, upstream: &Upstream, version: &str) -> Option<PathBuf> {
        let dir = self.entry(upstream, version);
        let bin = dir.join(upstream.binary);
        (dir.join(STAMP).is_file() && bin.is_file()).then_some(bin)
    }

    /// The binary of `upstream` at `version` (its default when `None`): reused from the
    /// cache when a complete build is there, else built now. `progress` hears one line per
    /// step (the build takes minutes when the Go caches are cold).
    pub fn build(
        &self,
        upstream: &Upstream,
        version: Option<&str>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Built, BuildError> {
        let version = version.unwrap_or(upstream.default_version);
        check_version(version)?;
        if let Some(path) = self.cached(upstream, version) {
            return Ok(Built {
                path,
                version: version.to_string(),
                reused: true,
            });
        }
        let go_version = self.go_version()?;
        std::fs::create_dir_all(&self.cache_root)
            .map_err(io(format!("creating {}", self.cache_root.display())))?;
        let tmp = self.cache_root.join(format!(
            ".building-{}-{version}-{}-{}",
            upstream.name,
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
        let result = self.build_in(upstream, version, &go_version, &tmp, progress);
        match result {
            Ok(()) => {
                let dest = self.entry(upstream, version);
                if std::fs::rename(&tmp, &dest).is_err() {
                    // Another process finished the same build first: keep theirs.
                    let _ = std::fs::remove_dir_all(&tmp);
                    if self.cached(upstream, version).is_none() {
                        return Err(BuildError::Io {
                            context: format!("moving the build into {}", dest.display()),
                            source: std::io::Error::other("destination exists but is incomplete"),
                        });
                    }
                }
                Ok(Built {
                    path: dest.join(upstream.binary),
                    version: version.to_string(),
                    reused: false,
                })
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    fn go_version(&self) -> Result<String, BuildError> {
        let out = Command::new(&self.go)
            .arg("version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BuildError::NoGo(format!("{}: {e}", self.go.display())))?;
        if !out.status.success() {
            return Err(BuildError::NoGo(format!(
                "`{} version` exited with {}",
                self.go.display(),
                out.status
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn build_in(
        &self,
        upstream: &Upstream,
        version: &str,
        go_version: &str,
        dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), BuildError> {
        progress(&format!(
            "resolving {}@{version} through the Go module proxy",
            upstream.module
        ));
        let mut upstream_mod = self.download_go_mod(upstream.module, version, dir)?;
        match upstream.siblings.published(version) {
            Some(published) => upstream_mod.publish_local_replaces(&published),
            None => {
                if let Some(r) = upstream_mod.replaces.iter().find(|r| r.is_local_path()) {
                    return Err(BuildError::LocalReplace {
                        module: upstream.module.into(),
                        version: version.into(),
                        old: r.old.clone(),
                        new: r.new.clone(),
                    });
                }
            }
        }
        let wrapper = gomod::wrapper(
            &format!("ccm-conformance.invalid/upstream/{}", upstream.name),
            &upstream_mod,
            upstream.module,
            version,
        );
        std::fs::write(dir.join("go.mod"), wrapper).map_err(io("writing the wrapper go.mod"))?;

        let log_path = dir.join("build.log");
        let log = std::fs::File::create(&log_path).map_err(io("creating build.log"))?;
        let out = dir.join(upstream.binary);
        if let Some(main) = upstream.main {
            std::fs::write(dir.join("main.go"), main).map_err(io("writing main.go"))?;
        }
        let package = if upstream.main.is_some() {
            ".".to_string()
        } else if upstream.package.is_empty() {
            upstream.module.to_string()
        } else {
            format!("{}/{}", upstream.module, upstream.package)
        };
        progress(&format!(
            "go build {package} ({go_version}; minutes on a cold Go cache; log: {})",
            log_path.display()
        ));
        let mut cmd = Command::new(&self.go);
        cmd.current_dir(dir)
            .arg("build")
            // The wrapper lists only the upstream module; -mod=mod lets go record the
            // checksums of everything it pulls in (verified against the checksum database).
            .arg("-mod=mod")
            .arg("-trimpath")
            .arg("-ldflags")
            .arg(upstream.ldflags(version))
            .arg("-o")
            .arg(&out)
            .arg(&package)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("build.log"))?)
            .stderr(log);
        // Upstream's release builds are static (CGO_ENABLED=0 in each Makefile).
        if std::env::var_os("CGO_ENABLED").is_none() {
            cmd.env("CGO_ENABLED", "0");
        }
        let status = cmd
            .status()
            .map_err(|e| BuildError::NoGo(format!("{}: {e}", self.go.display())))?;
        if !status.success() {
            return Err(self.failed(&format!("{package}@{version}"), &log_path));
        }
        let reported = self.check_runs(&out, upstream.binary)?;
        let stamp = serde_json::json!({
            "module": upstream.module,
            "package": package,
            "version": version,
            "reports": reported,
            "go": go_version,
            "built_at": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        });
        std::fs::write(
            dir.join(STAMP),
            serde_json::to_vec_pretty(&stamp).unwrap_or_default(),
        )
        .map_err(io("writing build.json"))?;
        Ok(())
    }

    /// `go mod download -json MODULE@VERSION` (run outside any module), then upstream's
    /// `go.mod` from the module cache.
    fn download_go_mod(
        &self,
        module: &str,
        version: &str,
        dir: &Path,
    ) -> Result<gomod::GoMod, BuildError> {
        let out = Command::new(&self.go)
            .current_dir(dir)
            .args(["mod", "download", "-json"])
            .arg(format!("{module}@{version}"))
            // No go.mod in `dir` yet, so this resolves against the proxy only.
            .env("GO111MODULE", "on")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BuildError::NoGo(format!("{}: {e}", self.go.display())))?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if let Some(message) = json.get("Error").and_then(|e| e.as_str()) {
            return Err(BuildError::NotServed {
                module: module.into(),
                version: version.into(),
                message: message.lines().last().unwrap_or(message).trim().to_string(),
            });
        }
        let Some(go_mod) = json.get("GoMod").and_then(|g| g.as_str()) else {
            return Err(BuildError::NotServed {
                module: module.into(),
                version: version.into(),
                message: format!(
                    "`go mod download` exited with {}: {}",
                    out.status,
                    last_lines(&String::from_utf8_lossy(&out.stderr), 5)
                ),
            });
        };
        let text = std::fs::read_to_string(go_mod).map_err(io(format!("reading {go_mod}")))?;
        Ok(gomod::parse(&text))
    }

    fn failed(&self, what: &str, log: &Path) -> BuildError {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        // The temporary directory goes; the log is kept where the user can read it.
        let kept = std::env::temp_dir().join(format!(
            "ccm-conformance-build-{}.log",
            what.replace(['/', '@'], "_")
        ));
        let _ = std::fs::write(&kept, &text);
        BuildError::Build {
            what: what.to_string(),
            log: kept,
            tail: last_lines(&text, 20),
        }
    }

    /// Runs `BIN --version` and returns what it printed (its first line).
    fn check_runs(&self, bin: &Path, name: &str) -> Result<String, BuildError> {
        let out = Command::new(bin)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BuildError::Broken {
                binary: name.into(),
                message: e.to_string(),
            })?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(BuildError::Broken {
                binary: name.into(),
                message: format!(
                    "--version exited with {}: {}",
                    out.status,
                    last_lines(&text, 5)
                ),
            });
        }
        Ok(text.lines().next().unwrap_or("").trim().to_string())
    }
}

/// `-ldflags` that make the binary report `version` (component-base's version package,
/// which `--version` and the API server's User-Agent read; without them a binary reports
/// `v0.0.0-master+$Format:%H$`), stripped as upstream's release builds are. The vSphere
/// CCM prints its own `main.version` (cloud-provider-vsphere `Makefile`, `LDFLAGS_CCM`); `-X`
/// of a symbol a binary lacks is ignored by the linker, so one set serves every binary.
pub fn version_ldflags(version: &str) -> String {
    let (major, minor) = major_minor(version);
    let pkg = "k8s.io/component-base/version";
    format!(
        "-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean -X main.version={version}"
    )
}

/// `("1", "36")` of `v1.36.0` (of any `vX.Y…`; missing parts are `0`).
fn major_minor(version: &str) -> (&str, &str) {
    let core = version.trim_start_matches('v');
    let mut parts = core.split(['.', '-', '+']);
    (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"))
}

/// `vMAJOR.MINOR.PATCH` with an optional `-pre` or `+build` suffix (semantic versions, as
/// Go module versions are).
pub fn check_version(version: &str) -> Result<(), BuildError> {
    let bad = || BuildError::BadVersion(version.to_string());
    let rest = version.strip_prefix('v').ok_or_else(bad)?;
    let core_end = rest.find(['-', '+']).unwrap_or(rest.len());
    let (core, suffix) = rest.split_at(core_end);
    let nums: Vec<&str> = core.split('.').collect();
    if nums.len() != 3
        || nums
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    if suffix.len() == 1
        || !suffix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-+.".contains(&b))
    {
        return Err(bad());
    }
    Ok(())
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CCM built from its module's own main package (the harness's registry of clouds
    /// holds the real entries; these are shaped like them).
    const PLAIN: Upstream = Upstream {
        name: "plain",
        module: "k8s.io/cloud-provider-aws",
        package: "cmd/aws-cloud-controller-manager",
        binary: "aws-cloud-controller-manager",
        default_version: "v1.37.0",
        siblings: Siblings::Refuse,
        version_packages: &[],
        main: None,
    };

    /// A CCM whose release build stamps version packages of its own.
    const STAMPED: Upstream = Upstream {
        name: "stamped",
        module: "sigs.k8s.io/cloud-provider-azure",
        package: "cmd/cloud-controller-manager",
        binary: "azure-cloud-controller-manager",
        default_version: "v1.36.5",
        siblings: Siblings::Refuse,
        version_packages: &[
            "sigs.k8s.io/cloud-provider-azure/pkg/version",
            "k8s.io/client-go/pkg/version",
        ],
        main: None,
    };

    /// A CCM built from a main written here, importing upstream's provider package.
    const GENERATED: Upstream = Upstream {
        name: "generated",
        module: "k8s.io/cloud-provider-gcp/providers",
        package: "gce",
        binary: "gce-cloud-controller-manager",
        default_version: "v0.28.2",
        siblings: Siblings::Refuse,
        version_packages: &[],
        main: Some(
            "package main\n\nimport _ \"k8s.io/cloud-provider-gcp/providers/gce\"\n\nfunc main() {}\n",
        ),
    };

    #[test]
    fn versions() {
        for ok in [
            "v1.36.0",
            "v0.0.0-20250101000000-abcdef123456",
            "v1.2.3+incompatible",
        ] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1.36.0",
            "v1.36",
            "v1.x.0",
            "latest",
            "v1.36.0-",
            "v1.36.0/../x",
            "",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sibling_modules_are_published_at_the_matching_version() {
        assert_eq!(Siblings::Refuse.published("v1.36.0"), None);
        assert_eq!(
            Siblings::Staging.published("v1.37.2").as_deref(),
            Some("v0.37.2")
        );
        assert_eq!(
            Siblings::Staging.published("v1.38.0-rc.1").as_deref(),
            Some("v0.38.0-rc.1")
        );
        assert_eq!(
            Siblings::SameVersion.published("v3.7.0").as_deref(),
            Some("v3.7.0")
        );
        let names: Vec<&str> = CONTROL_PLANE.iter().map(|u| u.name).collect();
        assert_eq!(names, ["kube-apiserver", "etcd"]);
    }

    #[test]
    fn ldflags_set_component_base_version() {
        let f = version_ldflags("v1.36.0");
        assert!(f.contains("version.gitVersion=v1.36.0"));
        assert!(f.contains("version.gitMajor=1 "));
        assert!(f.contains("version.gitMinor=36 "));
        assert!(f.contains("-X main.version=v1.36.0"));
        // A build stamps the version packages its entry names, and no others.
        assert_eq!(PLAIN.ldflags("v1.37.0"), version_ldflags("v1.37.0"));
        let stamped = STAMPED.ldflags("v1.36.5");
        for pkg in STAMPED.version_packages {
            assert!(
                stamped.contains(&format!("-X {pkg}.gitVersion=v1.36.5 ")),
                "{stamped}"
            );
            assert!(
                stamped.contains(&format!("-X {pkg}.gitMinor=36")),
                "{stamped}"
            );
        }
    }

    /// A CCM with a generated main: the wrapper gets it as `main.go` and `go build` builds
    /// the wrapper's own package, not the upstream module's.
    #[test]
    fn a_generated_main_is_what_go_builds() {
        let _spawns = spawn_lock();
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let mod_file = bin.path().join("upstream.mod");
        std::fs::write(
            &mod_file,
            "module k8s.io/cloud-provider-gcp/providers\n\ngo 1.20\n",
        )
        .unwrap();
        let record = bin.path().join("record");
        let go = bin.path().join("go");
        std::fs::write(
            &go,
            format!(
                "#!/bin/sh\ncase \"$1\" in\n version) echo 'go version go1.26.8 linux/amd64';;\n \
                 mod) echo '{{\"Path\":\"x\",\"GoMod\":\"{}\"}}';;\n \
                 build) for a in \"$@\"; do last=\"$a\"; done; echo \"$last\" > {rec}; \
                 cat main.go go.mod >> {rec}; echo 'stop here' >&2; exit 1;;\nesac\n",
                mod_file.display(),
                rec = record.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = builder_with_go(&go, root.path())
            .build(&GENERATED, None, &mut |_| {})
            .unwrap_err();
        assert!(err.to_string().contains("stop here"), "{err}");
        let seen = std::fs::read_to_string(&record).unwrap();
        let mut lines = seen.lines();
        assert_eq!(lines.next(), Some("."), "{seen}");
        assert!(seen.contains("_ \"k8s.io/cloud-provider-gcp/providers/gce\""));
        assert!(seen.contains("require k8s.io/cloud-provider-gcp/providers v0.28.2"));
    }

    #[test]
    fn each_binary_has_its_own_cache_entry() {
        let b = Builder {
            cache_root: PathBuf::from("/c"),
            go: PathBuf::from("go"),
        };
        assert_ne!(b.entry(&STAMPED, "v1.36.5"), b.entry(&PLAIN, "v1.36.5"));
        assert_ne!(b.entry(&PLAIN, "v1.36.5"), b.entry(&PLAIN, "v1.36.6"));
    }

    /// Tests that spawn a `go` hold this lock. A fake `go` is a script this process has
    /// just written; if another test forks while the script's write descriptor is open,
    /// the child inherits it until it execs and running the script fails with ETXTBSY
    /// ("Text file busy"), which the builder would report as a missing `go`.
    static SPAWNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
        SPAWNS.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn builder_with_go(go: &Path, root: &Path) -> Builder {
        Builder {
            cache_root: root.to_path_buf(),
            go: go.to_path_buf(),
        }
    }

    #[test]
    fn no_go_is_one_clear_error_and_leaves_nothing() {
        let _spawns = spawn_lock();
        let root = tempfile::tempdir().unwrap();
        let b = builder_with_go(Path::new("/nonexistent/go"), root.path());
        let err = b.build(&PLAIN, None, &mut |_| {}).unwrap_err();
        assert!(matches!(err, BuildError::NoGo(_)), "{err}");
        assert!(err.to_string().contains("`go` command was not found"));
        assert_eq!(
            std::fs::read_dir(root.path())
                .map(|d| d.count())
                .unwrap_or(0),
            0
        );
    }

    #[test]
    fn a_bad_version_is_refused_before_go_runs() {
        let root = tempfile::tempdir().unwrap();
        let b = builder_with_go(Path::new("/nonexistent/go"), root.path());
        let err = b.build(&PLAIN, Some("1.2"), &mut |_| {}).unwrap_err();
        assert!(matches!(err, BuildError::BadVersion(_)), "{err}");
    }

    /// A fake `go` (a shell script) that fails the way a compile error does: the error
    /// carries the log's tail and the cache holds no entry, not even a temporary one.
    #[test]
    fn a_failed_build_leaves_no_cache_entry() {
        let _spawns = spawn_lock();
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let mod_file = bin.path().join("upstream.mod");
        std::fs::write(&mod_file, "module k8s.io/cloud-provider-aws\n\ngo 1.26.0\n").unwrap();
        let go = bin.path().join("go");
        std::fs::write(
            &go,
            format!(
                "#!/bin/sh\ncase \"$1\" in\n version) echo 'go version go1.26.8 linux/amd64';;\n \
                 mod) echo '{{\"Path\":\"k8s.io/cloud-provider-aws\",\"GoMod\":\"{}\"}}';;\n \
                 build) echo 'pkg/x.go:1:1: undefined: Nope' >&2; exit 1;;\nesac\n",
                mod_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
        let b = builder_with_go(&go, root.path());
        let err = b.build(&PLAIN, None, &mut |_| {}).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("undefined: Nope"), "{text}");
        assert!(
            text.contains("building k8s.io/cloud-provider-aws/cmd/"),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert!(left.is_empty(), "cache not clean: {left:?}");
    }

    #[test]
    fn a_version_the_proxy_does_not_serve_names_the_module() {
        let _spawns = spawn_lock();
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let go = bin.path().join("go");
        std::fs::write(
            &go,
            "#!/bin/sh\ncase \"$1\" in\n version) echo 'go version go1.26.8 linux/amd64';;\n \
             mod) echo '{\"Path\":\"k8s.io/cloud-provider-aws\",\"Version\":\"v9.9.9\",\"Error\":\"k8s.io/cloud-provider-aws@v9.9.9: reading https://proxy/k8s.io/cloud-provider-aws/@v/v9.9.9.info: 404 Not Found\"}'; exit 1;;\nesac\n",
        )
        .unwrap();
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = builder_with_go(&go, root.path())
            .build(&PLAIN, Some("v9.9.9"), &mut |_| {})
            .unwrap_err();
        assert!(matches!(err, BuildError::NotServed { .. }), "{err}");
        assert!(err.to_string().contains("k8s.io/cloud-provider-aws@v9.9.9"));
        assert!(err.to_string().contains("404 Not Found"));
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    }
}
