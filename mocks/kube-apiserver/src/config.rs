//! [`Config`]: the settings of an embedded API server.
//!
//! Why this exists: both the server (`server.rs`, which binds, restarts and writes the
//! kubeconfig) and the request state (`http`'s `AppState`, which authenticates and limits
//! requests) are built from these settings. Kept in a leaf module of its own, so that the
//! two depend on it and the HTTP layer does not depend on the server that runs it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Bearer token of the admin identity.
    pub token: String,
    /// Bearer token of the read-only identity (get, list, watch; writes are 403).
    pub readonly_token: String,
    /// Serve HTTPS with a CA generated at start; requests without credentials get 401.
    /// Off by default so existing users keep plain HTTP; `ccm-conformance cluster` turns
    /// it on. Cost measured by `tests/kube_apiserver/security.rs`
    /// `start_and_first_request_cost`: start plus first kube-rs request is a few
    /// milliseconds either way (no measurable gap).
    pub tls: bool,
    /// Keep objects in this directory (created if missing) so they survive a restart;
    /// `None` keeps them in memory only.
    pub data_dir: Option<PathBuf>,
    /// Period of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Store events kept for resuming watches; older resourceVersions get 410 Expired.
    pub watch_history: usize,
    /// Largest accepted request body (upstream: 3 MiB).
    pub max_body_bytes: usize,
    /// Authorize service-account tokens and client certificates outside `system:masters`
    /// by the Roles, ClusterRoles and bindings stored in the server (as kube-apiserver's
    /// `--authorization-mode=RBAC`), and seed the part of kube-apiserver's bootstrap policy
    /// every authenticated user relies on (discovery, self reviews). Off by default: then
    /// those identities are admins. The admin and read-only tokens keep their fixed roles
    /// either way, and [`ApiServer::deny`](crate::ApiServer::deny) narrows everyone's.
    pub rbac: bool,
    /// How long an Event is kept after its last write: kube-apiserver's `--event-ttl`
    /// (default 1 h), which puts every Event write under an etcd lease of that length.
    /// Without it Events, which every controller writes, are the one thing that grows
    /// without bound in a long-lived server.
    pub event_ttl: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: random_token(),
            readonly_token: random_token(),
            tls: false,
            data_dir: None,
            bookmark_interval: Duration::from_secs(60),
            watch_history: 10_000,
            max_body_bytes: 3 * 1024 * 1024,
            rbac: false,
            event_ttl: Duration::from_secs(3600),
        }
    }
}

fn random_token() -> String {
    (0..32).map(|_| fastrand::alphanumeric()).collect()
}
