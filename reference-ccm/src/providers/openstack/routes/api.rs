//! [`RouteApi`]: whether and how this cloud's Neutron takes extra routes, found once at
//! startup (`GET /v2.0/extensions`: `extraroute-atomic` preferred, else `extraroute`).
//!
//! Exists apart from the routes themselves because the provider holds it (found by its
//! `detect_routes`), so the provider's `mod.rs` imports it from here and not from
//! `routes.rs`, which imports the provider.

use serde::Deserialize;

use crate::providers::openstack::client::{ClientError, OpenStackClient, Service as Endpoint};

/// How routes are written on this cloud.
#[derive(Debug, Clone)]
pub struct RouteApi {
    /// `extraroute-atomic`: add/remove single routes.
    pub atomic: bool,
    /// Serializes read-modify-write of the whole route list.
    pub(super) lock: std::sync::Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Deserialize)]
struct ExtensionList {
    #[serde(default)]
    extensions: Vec<Extension>,
}
#[derive(Debug, Deserialize)]
struct Extension {
    #[serde(default)]
    alias: String,
}

impl RouteApi {
    /// `Some` when Neutron has an extra-route extension (atomic preferred).
    pub async fn detect(client: &OpenStackClient) -> Result<Option<Self>, ClientError> {
        let list: ExtensionList = client
            .get_json(Endpoint::Network, "/extensions", &[])
            .await?;
        let has = |alias: &str| list.extensions.iter().any(|e| e.alias == alias);
        let atomic = has("extraroute-atomic");
        Ok((atomic || has("extraroute")).then(|| Self {
            atomic,
            lock: Default::default(),
        }))
    }
}
