//! Starting, addressing, restarting and stopping the embedded API server.
//!
//! The harness needs a real socket (kubectl, kube-rs and the CCM process talk HTTP or
//! HTTPS), a kubeconfig pointing at it, and in-process access to the store and audit
//! log. With TLS a throwaway CA (`mock_cloud::tls::TestCa`) signs the serving
//! certificate and any client certificates; its PEM goes into the kubeconfig as
//! `certificate-authority-data`. A restart keeps the port, the tokens, the CA and the
//! objects (from `data_dir`, or the in-memory store), so a case can bounce the
//! control plane under a running CCM.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use mock_cloud::ServerHandle;
use mock_cloud::tls::{ClientAuth, LOCAL_SANS, TestCa, TlsError};
use serde_json::json;

use crate::audit::AuditEntry;
use crate::auth::ADMIN_GROUP;
pub use crate::config::Config;
use crate::http::{AppState, router};
use crate::persist::PersistError;
use crate::store::Store;

/// Name of the cluster, user and context in the generated kubeconfig.
pub const KUBECONFIG_NAME: &str = "ccm-conformance";

/// How long a restart keeps trying to bind the previous port.
const REBIND_DEADLINE: Duration = Duration::from_secs(5);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the bound address: {0}")]
    LocalAddr(#[source] std::io::Error),
    #[error("setting up TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("loading the data directory: {0}")]
    Persist(#[from] PersistError),
    #[error("client certificates need a server started with tls: true")]
    NotTls,
}

impl From<mock_cloud::ServeError> for Error {
    fn from(e: mock_cloud::ServeError) -> Error {
        match e {
            mock_cloud::ServeError::Bind { addr, source } => Error::Bind { addr, source },
            mock_cloud::ServeError::LocalAddr { source, .. } => Error::LocalAddr(source),
        }
    }
}

/// A running server. Dropping it stops serving (without waiting); prefer [`ApiServer::shutdown`].
pub struct ApiServer {
    addr: SocketAddr,
    config: Config,
    state: AppState,
    ca: Option<Arc<TestCa>>,
    handle: Option<ServerHandle>,
}

impl ApiServer {
    /// Bind and start serving in a background task. With `config.data_dir`, objects
    /// stored there by an earlier server are served again.
    pub async fn start(config: Config) -> Result<ApiServer, Error> {
        let store = match &config.data_dir {
            Some(dir) => Store::open(config.watch_history, dir)?,
            None => Store::new(config.watch_history),
        };
        ApiServer::start_with(config, store, None).await
    }

    async fn start_with(
        config: Config,
        store: Store,
        ca: Option<Arc<TestCa>>,
    ) -> Result<ApiServer, Error> {
        let ca = match (config.tls, ca) {
            (false, _) => None,
            (true, Some(ca)) => Some(ca),
            (true, None) => Some(Arc::new(TestCa::generate("ccm-conformance-ca")?)),
        };
        let bound = bind(config.listen).await?;
        let addr = bound.local_addr();
        if let Some(ca) = &ca {
            crate::review::publish_client_ca(&store, ca.ca_pem());
        }
        let state = AppState::with_store(&config, store);
        tokio::spawn(crate::events_ttl::expire(
            state.store.clone(),
            config.event_ttl,
            state.shutdown_signal(),
        ));
        let app = router(state.clone());
        let handle = match &ca {
            Some(ca) => {
                let tls = ca.server_config(LOCAL_SANS, ClientAuth::Optional)?;
                bound.serve_tls(app, tls)
            }
            None => bound.serve(app),
        };
        tracing::info!(%addr, tls = config.tls, "embedded API server listening");
        Ok(ApiServer {
            addr,
            config,
            state,
            ca,
            handle: Some(handle),
        })
    }

    /// Stop, then serve again on the same address with the same tokens and CA. Objects
    /// come back from `data_dir` when set, else the in-memory store is kept as it is.
    /// Watches end (clients re-watch). With `data_dir`, store handles taken before the
    /// restart no longer persist their writes: take a new one with [`Self::store`].
    /// One server per data directory at a time.
    pub async fn restart(self) -> Result<ApiServer, Error> {
        let config = Config {
            listen: self.addr,
            ..self.config.clone()
        };
        let ca = self.ca.clone();
        let memory = self.state.store.clone();
        let denials = self.state.denials();
        self.shutdown().await;
        let store = match &config.data_dir {
            Some(dir) => Store::open(config.watch_history, dir)?,
            None => memory,
        };
        let api = ApiServer::start_with(config, store, ca).await?;
        for d in denials {
            api.state.deny(d);
        }
        Ok(api)
    }

    /// `https://127.0.0.1:PORT` with TLS, else `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The settings this server runs with (`listen` as given, see [`Self::addr`]).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        self.state.token()
    }

    /// The read-only bearer token: get, list and watch work, writes get 403.
    pub fn readonly_token(&self) -> &str {
        self.state.readonly_token()
    }

    /// The CA certificate (PEM) clients must trust, when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca.as_deref().map(TestCa::ca_pem)
    }

    /// A client certificate and key (PEM) for `user` in group `system:masters`, signed
    /// by this server's CA (TLS only). Use [`Self::client_cert_in`] for other groups.
    pub fn client_cert(&self, user: &str) -> Result<(String, String), Error> {
        self.client_cert_in(user, &[ADMIN_GROUP])
    }

    /// A client certificate (CN = `user`, O = the group; at most one) and key, PEM. A
    /// certificate in [`crate::auth::READONLY_GROUP`] is read-only.
    pub fn client_cert_in(&self, user: &str, groups: &[&str]) -> Result<(String, String), Error> {
        let ca = self.ca.as_ref().ok_or(Error::NotTls)?;
        let issued = ca.issue_client(user, groups)?;
        Ok((issued.cert_pem, issued.key_pem))
    }

    /// A kubeconfig that authenticates as `user` in `groups` (at most one) with a fresh
    /// client certificate from [`Self::client_cert_in`] (TLS only).
    pub fn kubeconfig_for_cert(&self, user: &str, groups: &[&str]) -> Result<String, Error> {
        let (cert, key) = self.client_cert_in(user, groups)?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        Ok(self.kubeconfig_with_user(json!({
            "client-certificate-data": b64(&cert),
            "client-key-data": b64(&key),
        })))
    }

    /// A token for the ServiceAccount `namespace/name`, valid for `seconds` (at least
    /// 600), as the TokenRequest API issues it: the server then takes it as
    /// `system:serviceaccount:<namespace>:<name>`, authorized by RBAC when
    /// [`Config::rbac`] is on. Fails when the ServiceAccount does not exist.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        seconds: i64,
    ) -> Result<String, crate::ApiError> {
        self.state.service_account_token(namespace, name, seconds)
    }

    /// A kubeconfig that authenticates as the ServiceAccount `namespace/name` with a
    /// one-hour token from [`Self::service_account_token`], as a CCM deployed with its
    /// upstream manifests runs.
    pub fn kubeconfig_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, crate::ApiError> {
        let token = self.service_account_token(namespace, name, 3600)?;
        Ok(self.kubeconfig_with_user(json!({"token": token})))
    }

    /// A kubeconfig for this server with the admin token (JSON, which is valid YAML).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_with_user(json!({"token": self.token()}))
    }

    /// A kubeconfig whose user is `user` (a kubeconfig `user` object: `token`, or
    /// `client-certificate-data`/`client-key-data`, or `{}` for none).
    pub fn kubeconfig_with_user(&self, user: serde_json::Value) -> String {
        let mut cluster = json!({"server": self.url()});
        if let Some(pem) = self.ca_pem() {
            cluster["certificate-authority-data"] =
                json!(base64::engine::general_purpose::STANDARD.encode(pem));
        }
        let doc = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": KUBECONFIG_NAME, "cluster": cluster}],
            "users": [{"name": KUBECONFIG_NAME, "user": user}],
            "contexts": [{"name": KUBECONFIG_NAME, "context": {"cluster": KUBECONFIG_NAME, "user": KUBECONFIG_NAME}}],
            "current-context": KUBECONFIG_NAME,
            "preferences": {},
        });
        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
    }

    /// Write the kubeconfig atomically (temporary file in the same directory, then rename).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", fastrand::u64(..)));
        std::fs::write(&tmp, self.kubeconfig_yaml())?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// Serve requests that carry no credentials over plain HTTP (default: yes, because
    /// client-go/kubectl send no bearer token over plain HTTP). Wrong tokens always get
    /// 401, and so does a request without credentials over TLS.
    pub fn set_allow_anonymous(&self, allow: bool) {
        self.state.set_allow_anonymous(allow);
    }

    /// Takes one verb on one resource away from one user (a missing RBAC rule), from
    /// the next request on; kept across [`Self::restart`]. See [`crate::auth::Denial`].
    pub fn deny(&self, denial: crate::auth::Denial) {
        self.state.deny(denial);
    }

    /// Lifts every [`Self::deny`].
    pub fn clear_denials(&self) {
        self.state.clear_denials();
    }

    /// A snapshot of the audit log.
    pub fn audit(&self) -> Vec<AuditEntry> {
        self.state.audit.snapshot()
    }

    /// The audit entries after `seq` (see [`crate::audit::AuditLog::since`]).
    pub fn audit_since(&self, seq: u64) -> Vec<AuditEntry> {
        self.state.audit.since(seq)
    }

    /// The `seq` of the newest audit entry (0 when none).
    pub fn audit_last_seq(&self) -> u64 {
        self.state.audit.last_seq()
    }

    /// A handle on the live store.
    pub fn store(&self) -> Store {
        self.state.store.clone()
    }

    /// Stop serving and end open watches; waits up to 5 s for connections to close.
    pub async fn shutdown(mut self) {
        self.state.begin_shutdown();
        if let Some(handle) = self.handle.take() {
            handle.shutdown().await;
        }
        if self.config.data_dir.is_some() {
            self.state.store.close_journal();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // Ends watches; dropping the handle starts a graceful stop of the listener.
        self.state.begin_shutdown();
    }
}

/// Binds `listen`; a fixed port that is still held by a server that is just stopping
/// (restart) is retried until [`REBIND_DEADLINE`].
async fn bind(listen: SocketAddr) -> Result<mock_cloud::BoundListener, Error> {
    let deadline = tokio::time::Instant::now() + REBIND_DEADLINE;
    loop {
        match mock_cloud::bind(listen).await {
            Err(mock_cloud::ServeError::Bind { source, .. })
                if listen.port() != 0
                    && source.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return Ok(other?),
        }
    }
}
