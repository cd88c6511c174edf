//! The public IPs of external Services on Azure: created (or bound to the Service by its
//! service tag) before the frontend that references them, and unbound or deleted when the
//! Service no longer wants them (`ensurePublicIPExists`, `reconcilePublicIPs`,
//! `serviceOwnsPublicIP`).
//!
//! Exists apart from the load balancer itself because public IPs are resources of their
//! own, shared between Services through their tags and cleaned up on both paths.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::shared::{
    CLUSTER_NAME_KEY, SERVICE_TAG_KEY, etag, name_of, pip_name, service_key, str_at,
};
use crate::cloud::LbError;
use crate::providers::azure::Azure;
use crate::providers::azure::client::NETWORK_API;

/// The service tag value of a public IP as a list (`parsePIPServiceTag`).
fn pip_services(pip: &Value) -> Vec<String> {
    let tags = pip.get("tags").and_then(Value::as_object);
    let value = tags
        .and_then(|t| {
            t.iter()
                .find(|(k, _)| {
                    k.eq_ignore_ascii_case(SERVICE_TAG_KEY) || k.eq_ignore_ascii_case("service")
                })
                .and_then(|(_, v)| v.as_str())
        })
        .unwrap_or_default();
    value
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn pip_cluster(pip: &Value) -> Option<String> {
    pip.get("tags").and_then(Value::as_object).and_then(|t| {
        t.iter()
            .find(|(k, _)| {
                k.eq_ignore_ascii_case(CLUSTER_NAME_KEY)
                    || k.eq_ignore_ascii_case("kubernetes-cluster-name")
            })
            .and_then(|(_, v)| v.as_str())
            .map(str::to_owned)
    })
}

/// `serviceOwnsPublicIP` for PIPs this CCM made: the Service is in the service tag and
/// the cluster tag, if any, names this cluster.
pub fn service_owns_pip(pip: &Value, service: &Service, cluster: &str) -> bool {
    let key = service_key(service);
    pip_services(pip)
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&key))
        && pip_cluster(pip).is_none_or(|c| c.is_empty() || c.eq_ignore_ascii_case(cluster))
}

impl Azure {
    /// Public IP `name`, created or bound to the Service (`ensurePublicIPExists`).
    pub(super) async fn ensure_public_ip(
        &self,
        cluster: &str,
        service: &Service,
        name: &str,
    ) -> Result<Value, LbError> {
        let path = self.network_path("publicIPAddresses", name);
        let key = service_key(service);
        match self.client.get_opt(&path, NETWORK_API, &[]).await? {
            Some(mut pip) => {
                let mut changed = false;
                let mut services = pip_services(&pip);
                if !services.iter().any(|s| s.eq_ignore_ascii_case(&key)) {
                    services.push(key);
                    if !pip["tags"].is_object() {
                        pip["tags"] = json!({});
                    }
                    pip["tags"][SERVICE_TAG_KEY] = json!(services.join(","));
                    changed = true;
                }
                if !str_at(&pip, "/sku/name").is_some_and(|s| s.eq_ignore_ascii_case("Standard")) {
                    pip["sku"] = json!({"name": "Standard"});
                    changed = true;
                }
                if !changed {
                    return Ok(pip);
                }
                let tag = etag(&pip);
                Ok(self
                    .client
                    .put(&path, NETWORK_API, &pip, tag.as_deref())
                    .await?)
            }
            None => {
                let mut pip = json!({
                    "name": name,
                    "location": self.config.location,
                    "sku": {"name": "Standard"},
                    "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
                    "tags": {SERVICE_TAG_KEY: key, CLUSTER_NAME_KEY: cluster},
                });
                let zones = self.location_zones();
                if !zones.is_empty() {
                    pip["zones"] = json!(zones);
                }
                Ok(self.client.put(&path, NETWORK_API, &pip, None).await?)
            }
        }
    }

    /// `reconcilePublicIPs`: the Service's PIPs other than `keep` are unbound, and deleted
    /// when no other Service uses them.
    pub(super) async fn reconcile_public_ips(
        &self,
        cluster: &str,
        service: &Service,
        keep: Option<&str>,
    ) -> Result<(), LbError> {
        let list_path = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/publicIPAddresses",
            self.client.subscription, self.config.resource_group
        );
        let key = service_key(service);
        let mut pips = self.client.list(&list_path, NETWORK_API).await?;
        // Deletes do not trust a list that lags a create: the Service's own public IP,
        // created moments ago by this CCM, is a candidate even when not listed.
        let own = pip_name(cluster, service, false);
        if !pips.iter().any(|p| name_of(p).eq_ignore_ascii_case(&own))
            && let Some(created) = self
                .client
                .recently_created(&self.network_path("publicIPAddresses", &own))
        {
            pips.push(created);
        }
        for mut pip in pips {
            let name = name_of(&pip).to_owned();
            if keep.is_some_and(|k| k.eq_ignore_ascii_case(&name))
                || !service_owns_pip(&pip, service, cluster)
            {
                continue;
            }
            let path = self.network_path("publicIPAddresses", &name);
            let rest: Vec<String> = pip_services(&pip)
                .into_iter()
                .filter(|s| !s.eq_ignore_ascii_case(&key))
                .collect();
            if rest.is_empty() {
                self.client.delete(&path, NETWORK_API).await?;
            } else {
                pip["tags"][SERVICE_TAG_KEY] = json!(rest.join(","));
                let tag = etag(&pip);
                self.client
                    .put(&path, NETWORK_API, &pip, tag.as_deref())
                    .await?;
            }
        }
        Ok(())
    }
}
