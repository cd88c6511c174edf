//! Starting, addressing and stopping the embedded API server.
//!
//! The harness needs a real socket (kubectl, kube-rs and the CCM process talk HTTP),
//! a kubeconfig pointing at it, and in-process access to the store and audit log.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;

use crate::audit::AuditEntry;
use crate::http::{AppState, router};
use crate::store::Store;

/// Name of the cluster, user and context in the generated kubeconfig.
pub const KUBECONFIG_NAME: &str = "ccm-conformance";

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Bearer token every non-public request must carry.
    pub token: String,
    /// Period of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Store events kept for resuming watches; older resourceVersions get 410 Expired.
    pub watch_history: usize,
    /// Largest accepted request body (upstream: 3 MiB).
    pub max_body_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: random_token(),
            bookmark_interval: Duration::from_secs(60),
            watch_history: 10_000,
            max_body_bytes: 3 * 1024 * 1024,
        }
    }
}

fn random_token() -> String {
    (0..32).map(|_| fastrand::alphanumeric()).collect()
}

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
}

/// A running server. Dropping it stops serving (without waiting); prefer [`ApiServer::shutdown`].
pub struct ApiServer {
    addr: SocketAddr,
    state: AppState,
    task: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Bind and start serving in a background task.
    pub async fn start(config: Config) -> Result<ApiServer, Error> {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(Error::LocalAddr)?;
        let state = AppState::new(&config);
        let app = router(state.clone());
        let mut stop = state.shutdown_signal();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await;
            if let Err(err) = served {
                tracing::warn!(%err, "embedded API server stopped with an error");
            }
        });
        tracing::info!(%addr, "embedded API server listening");
        Ok(ApiServer {
            addr,
            state,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn token(&self) -> &str {
        self.state.token()
    }

    /// A kubeconfig for this server (JSON, which is valid YAML).
    pub fn kubeconfig_yaml(&self) -> String {
        let doc = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": KUBECONFIG_NAME, "cluster": {"server": self.url()}}],
            "users": [{"name": KUBECONFIG_NAME, "user": {"token": self.token()}}],
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

    /// Serve requests that carry no `Authorization` header (default: yes, because
    /// client-go/kubectl send no bearer token over plain HTTP). Wrong tokens always get 401.
    pub fn set_allow_anonymous(&self, allow: bool) {
        self.state.set_allow_anonymous(allow);
    }

    /// A snapshot of the audit log.
    pub fn audit(&self) -> Vec<AuditEntry> {
        self.state.audit.snapshot()
    }

    /// A handle on the live store.
    pub fn store(&self) -> Store {
        self.state.store.clone()
    }

    /// Stop serving and end open watches; waits up to 5 s for connections to close.
    pub async fn shutdown(mut self) {
        self.state.begin_shutdown();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.state.begin_shutdown();
    }
}
