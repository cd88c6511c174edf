//! A real Kubernetes control plane on loopback: etcd and kube-apiserver (as
//! `ccm-conformance apiserver build` makes them, crate `ccm-upstream`), configured like a
//! small production cluster: TLS with a CA of our own, a static token file with an admin
//! and a read-only user, RBAC authorization and a service-account issuer.
//!
//! Why: the embedded API server (`mock-kube-apiserver`) is only right where it answers as
//! kube-apiserver does, and the only honest judge of that is kube-apiserver itself. This
//! crate starts one the way every tool here starts the embedded server (a URL, a CA, an
//! admin token, a read-only token, a kubeconfig), so `cluster --apiserver real` and the
//! tests can put the two side by side. `benches/vs_embedded.rs` does so for speed: the same
//! HTTPS client against both, one table of ratios (`cargo bench -p ccm-control-plane
//! --bench vs_embedded`).
//!
//! kube-apiserver also writes an audit log (`audit.log`, JSON lines, one
//! `audit.k8s.io/v1` Event per write at the `ResponseComplete` stage, metadata only):
//! the harness counts a CCM's writes from it as it does from the embedded server's own
//! audit log ([`AUDIT_POLICY`]).
//!
//! The flags follow controller-runtime's envtest, the common minimal set
//! (`shared/reference/upstream-builds.md`), with the ServiceAccount admission plugin off
//! as there: no kube-controller-manager creates the `default` ServiceAccounts it wants.
//! Both processes are started through `setpriv --pdeathsig KILL` (util-linux), so they
//! die with the process that started them even when it is SIGKILLed and no destructor
//! runs; the death signal follows the starting thread, which is a runtime worker that
//! lives as long as the runtime.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use mock_cloud::tls::{TestCa, TlsError};
use tokio::process::{Child, Command};

/// The admin user of the token file (group `system:masters`).
pub const ADMIN_USER: &str = "ccm-conformance-admin";
/// The read-only user: get, list and watch on everything, through a ClusterRole bound at
/// start (the embedded server's read-only token does the same).
pub const READONLY_USER: &str = "ccm-conformance-readonly";
/// The service CIDR (kube-apiserver's `--service-cluster-ip-range`).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
const KUBECONFIG_NAME: &str = "ccm-conformance-real";
const APISERVER_LOG: &str = "kube-apiserver.log";
const AUDIT_LOG: &str = "audit.log";
const ETCD_DATA: &str = "etcd-data";
/// The audit policy: every write (what the harness counts) at `Metadata`, nothing else,
/// one event per request (`ResponseComplete`; `Panic` too, which never should happen).
/// Reads are left out: kubelets and CCMs poll, and nothing here looks at reads.
/// Format: apiserver/pkg/apis/audit/v1 `Policy`.
pub const AUDIT_POLICY: &str = r#"{
  "apiVersion": "audit.k8s.io/v1",
  "kind": "Policy",
  "omitStages": ["RequestReceived", "ResponseStarted"],
  "rules": [
    {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
    {"level": "None"}
  ]
}
"#;
/// How long etcd and kube-apiserver get to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The two binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Tls(#[from] TlsError),
    #[error("{what} exited before it was ready ({status}); last lines of {log}:\n{tail}")]
    Exited {
        what: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "{what} was not ready after {secs} s (last answer: {last}); last lines of {log}:\n{tail}"
    )]
    NotReady {
        what: &'static str,
        secs: u64,
        last: String,
        log: PathBuf,
        tail: String,
    },
    #[error("setting up the read-only user: {0}")]
    Setup(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// A running etcd + kube-apiserver; both are killed, and etcd's data removed, on drop and
/// by [`Self::shutdown`].
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    etcd: Child,
    apiserver: Child,
    /// kube-apiserver's path and flags, for [`Self::restart_apiserver`].
    apiserver_command: (PathBuf, Vec<String>),
    url: String,
    token: String,
    readonly_token: String,
    ca: TestCa,
}

impl ControlPlane {
    /// Starts etcd, then kube-apiserver against it, in `dir` (data, certificates, token
    /// file and both logs go there; etcd data an earlier start left there is removed
    /// first), and waits until `/readyz` answers `ok`.
    pub async fn start(bins: &Binaries, dir: &Path) -> Result<Self, Error> {
        mock_cloud::tls::install_ring_provider();
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let file = |name: &str| dir.join(name);
        let write = |name: &str, text: &str| {
            std::fs::write(file(name), text).map_err(io(format!("writing {name}")))
        };

        let ca = TestCa::generate("ccm-conformance real control plane CA")?;
        let serving = ca.issue_server(&["127.0.0.1", "localhost"])?;
        write("ca.crt", ca.ca_pem())?;
        write("apiserver.crt", &serving.cert_pem)?;
        write("apiserver.key", &serving.key_pem)?;
        // The service-account signing key (PKCS#8) and its public half, which kube-apiserver
        // verifies tokens with (it reads no public key out of a PKCS#8 private key file).
        let sa_key = rcgen::KeyPair::generate().map_err(TlsError::from)?;
        write("sa.key", &sa_key.serialize_pem())?;
        write("sa.pub", &sa_key.public_key_pem())?;
        let token = random_token();
        let readonly_token = random_token();
        write(
            "tokens.csv",
            &format!(
                "{token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n{readonly_token},{READONLY_USER},{READONLY_USER}\n"
            ),
        )?;

        // A fresh cluster every time: data left in `dir` by an earlier start is dropped
        // (by `start_etcd`, before each attempt).
        let plain = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| Error::Setup(e.to_string()))?;
        let (mut etcd, etcd_url) = start_etcd(bins, dir, &plain).await?;

        write("audit-policy.json", AUDIT_POLICY)?;
        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // A loopback advertise address is refused by the endpoint reconcilers
            // (they publish it as the `kubernetes` Service's endpoint).
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", file("apiserver.crt").display()),
            format!("--tls-private-key-file={}", file("apiserver.key").display()),
            format!("--cert-dir={}", dir.display()),
            format!("--client-ca-file={}", file("ca.crt").display()),
            format!("--token-auth-file={}", file("tokens.csv").display()),
            "--authorization-mode=RBAC".into(),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--allow-privileged=true".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", file("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                file("sa.key").display()
            ),
            format!(
                "--audit-policy-file={}",
                file("audit-policy.json").display()
            ),
            format!("--audit-log-path={}", file(AUDIT_LOG).display()),
            "--audit-log-format=json".into(),
            // Written before the request's handler returns, so a write the client saw
            // answered is in the log (apiserver/pkg/server/options/audit.go: the
            // blocking mode has no buffer).
            "--audit-log-mode=blocking".into(),
        ];
        let apiserver = spawn(&bins.kube_apiserver, &apiserver_args, &file(APISERVER_LOG));
        let apiserver = match apiserver {
            Ok(child) => child,
            Err(e) => {
                let _ = etcd.start_kill();
                return Err(e);
            }
        };
        let mut plane = Self {
            dir: dir.to_path_buf(),
            etcd,
            apiserver,
            apiserver_command: (bins.kube_apiserver.clone(), apiserver_args),
            url,
            token,
            readonly_token,
            ca,
        };
        let client = plane.http_client()?;
        plane.wait_apiserver_ready(&client).await?;
        plane.bind_readonly(&client).await?;
        Ok(plane)
    }

    async fn wait_apiserver_ready(&mut self, client: &reqwest::Client) -> Result<(), Error> {
        let readyz = client
            .get(format!("{}/readyz", self.url))
            .bearer_auth(&self.token);
        let log = self.dir.join(APISERVER_LOG);
        wait_ready(
            "kube-apiserver",
            &mut self.apiserver,
            &log,
            readyz,
            |body| body.trim() == "ok",
        )
        .await
    }

    /// Kills kube-apiserver and starts it again with the same flags, on the same port and
    /// against the same etcd, and waits until it is ready: every client connection and
    /// watch breaks, no object is lost (a control-plane upgrade or a crash, as a CCM sees
    /// it). The audit log goes on in the same file.
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        let _ = self.apiserver.kill().await;
        let (binary, args) = &self.apiserver_command;
        // The log of the run before is kept beside the new one.
        let log = self.dir.join(APISERVER_LOG);
        let _ = std::fs::rename(&log, self.dir.join(format!("{APISERVER_LOG}.previous")));
        self.apiserver = spawn(binary, args, &log)?;
        let client = self.http_client()?;
        self.wait_apiserver_ready(&client).await
    }

    /// The audit log ([`AUDIT_POLICY`]): JSON lines, appended to while the server runs.
    pub fn audit_log_path(&self) -> PathBuf {
        self.dir.join(AUDIT_LOG)
    }

    /// A kubeconfig that authenticates as `user` in `groups` (at most one) with a client
    /// certificate signed by the cluster CA (`--client-ca-file`); what it may do is up to
    /// the RBAC objects bound to that user or group.
    pub fn kubeconfig_for_cert(&self, user: &str, groups: &[&str]) -> Result<String, Error> {
        let cert = self.ca.issue_client(user, groups)?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        Ok(self.kubeconfig_with_user(serde_json::json!({
            "client-certificate-data": b64(&cert.cert_pem),
            "client-key-data": b64(&cert.key_pem),
        })))
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The admin bearer token (`system:masters`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The read-only bearer token: get, list and watch work, writes get 403.
    pub fn readonly_token(&self) -> &str {
        &self.readonly_token
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        self.ca.ca_pem()
    }

    /// The process ids of etcd and kube-apiserver, `None` for one already reaped. For
    /// callers that look at the processes from outside, e.g. their resident memory in
    /// `/proc/<pid>/status` (`benches/vs_embedded.rs`); each id is the binary's own, as
    /// `setpriv` execs it in place.
    pub fn pids(&self) -> [(&'static str, Option<u32>); 2] {
        [
            ("etcd", self.etcd.id()),
            ("kube-apiserver", self.apiserver.id()),
        ]
    }

    /// Where the data, certificates and logs are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kubeconfig for the admin user, with the CA inline (the shape the embedded server
    /// writes, so every tool reads both alike).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_with_user(serde_json::json!({"token": self.token}))
    }

    fn kubeconfig_with_user(&self, user: serde_json::Value) -> String {
        let doc = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": KUBECONFIG_NAME, "cluster": {
                "server": self.url,
                "certificate-authority-data":
                    base64::engine::general_purpose::STANDARD.encode(self.ca.ca_pem()),
            }}],
            "users": [{"name": KUBECONFIG_NAME, "user": user}],
            "contexts": [{"name": KUBECONFIG_NAME,
                "context": {"cluster": KUBECONFIG_NAME, "user": KUBECONFIG_NAME}}],
            "current-context": KUBECONFIG_NAME,
            "preferences": {},
        });
        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig_yaml())
            .map_err(io(format!("writing {}", path.display())))
    }

    /// Stops kube-apiserver, then etcd, and waits for both.
    pub async fn shutdown(mut self) {
        let _ = self.apiserver.kill().await;
        let _ = self.etcd.kill().await;
        self.remove_data();
    }

    /// etcd's data (over 100 MB each: its write-ahead log preallocates 64 MB segments) is
    /// not kept once the cluster is gone; certificates, logs and the audit log stay.
    fn remove_data(&self) {
        let _ = std::fs::remove_dir_all(self.dir.join(ETCD_DATA));
    }

    fn http_client(&self) -> Result<reqwest::Client, Error> {
        let ca = reqwest::Certificate::from_pem(self.ca.ca_pem().as_bytes())
            .map_err(|e| Error::Setup(e.to_string()))?;
        reqwest::Client::builder()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Setup(e.to_string()))
    }

    /// Gives the read-only user get/list/watch on every resource.
    async fn bind_readonly(&self, client: &reqwest::Client) -> Result<(), Error> {
        let role = "ccm-conformance:read-only";
        let objects = [
            (
                "clusterroles",
                serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": role},
                    "rules": [
                        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
                        {"nonResourceURLs": ["*"], "verbs": ["get"]}
                    ]
                }),
            ),
            (
                "clusterrolebindings",
                serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": role},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READONLY_USER}]
                }),
            ),
        ];
        for (plural, body) in objects {
            let resp = client
                .post(format!(
                    "{}/apis/rbac.authorization.k8s.io/v1/{plural}",
                    self.url
                ))
                .bearer_auth(&self.token)
                .json(&body)
                .send()
                .await
                .map_err(|e| Error::Setup(format!("creating the {plural}: {e}")))?;
            if !resp.status().is_success() {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                return Err(Error::Setup(format!(
                    "creating the {plural}: {status}: {text}"
                )));
            }
        }
        Ok(())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = self.apiserver.start_kill();
        let _ = self.etcd.start_kill();
        self.remove_data();
    }
}

/// Starts `binary` with `args` under `setpriv --pdeathsig KILL`, output to `log`.
fn spawn(binary: &Path, args: &[String], log: &Path) -> Result<Child, Error> {
    let out = std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(io(format!("opening {}", log.display())))?;
    Command::new("setpriv")
        .arg("--pdeathsig")
        .arg("KILL")
        .arg("--")
        .arg(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(io(format!(
            "starting {} (through setpriv, util-linux)",
            binary.display()
        )))
}

/// Polls `request` until `ok(body)` holds on a 200, the child exits, or the deadline.
/// Times etcd is started on fresh ports when the ones picked were taken before it bound
/// them ([`free_port`] releases its probe socket, so another process can take the port
/// in between: CI saw `bind: address already in use`).
const ETCD_BIND_ATTEMPTS: usize = 3;

/// Starts etcd on free loopback ports in `dir` and waits until it is healthy; its client
/// URL.
async fn start_etcd(
    bins: &Binaries,
    dir: &Path,
    plain: &reqwest::Client,
) -> Result<(Child, String), Error> {
    let data = dir.join(ETCD_DATA);
    let log = dir.join("etcd.log");
    let mut attempt = 1;
    loop {
        if data.exists() {
            std::fs::remove_dir_all(&data).map_err(io(format!("removing {}", data.display())))?;
        }
        let client = free_port()?;
        let peer = free_port()?;
        let url = format!("http://127.0.0.1:{client}");
        let mut etcd = spawn(
            &bins.etcd,
            &[
                format!("--data-dir={}", data.display()),
                format!("--listen-client-urls={url}"),
                format!("--advertise-client-urls={url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
            &log,
        )?;
        match wait_ready(
            "etcd",
            &mut etcd,
            &log,
            plain.get(format!("{url}/health")),
            |b| b.contains("\"health\":\"true\""),
        )
        .await
        {
            Ok(()) => return Ok((etcd, url)),
            Err(Error::Exited { ref tail, .. })
                if attempt < ETCD_BIND_ATTEMPTS && tail.contains("address already in use") =>
            {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn wait_ready(
    what: &'static str,
    child: &mut Child,
    log: &Path,
    request: reqwest::RequestBuilder,
    ok: impl Fn(&str) -> bool,
) -> Result<(), Error> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut last = String::from("no answer yet");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::Exited {
                what,
                status: status.to_string(),
                log: log.to_path_buf(),
                tail: tail(log, 15),
            });
        }
        if let Some(attempt) = request.try_clone() {
            match attempt.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    let body = resp.text().await.unwrap_or_default();
                    if status.is_success() && ok(&body) {
                        return Ok(());
                    }
                    last = format!("{status}: {}", body.lines().last().unwrap_or(""));
                }
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() >= deadline {
            let _ = child.start_kill();
            return Err(Error::NotReady {
                what,
                secs: READY_TIMEOUT.as_secs(),
                last,
                log: log.to_path_buf(),
                tail: tail(log, 15),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn free_port() -> Result<u16, Error> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free port"))
}

fn random_token() -> String {
    (0..32)
        .map(|_| fastrand::alphanumeric())
        .collect::<String>()
}

fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
