//! The cluster id that names the shared node health check (`k8s-<id>-node`) and its
//! firewall, kept in ConfigMap `kube-system/ingress-uid` as upstream does
//! (kubernetes/cloud-provider-gcp `providers/gce/gce_clusterid.go`).
//!
//! Upstream, with where: `GetID` answers the `provider-uid` key when present, else
//! `uid`; a ConfigMap without `uid` is an error ("Could not retrieve cluster id"); when
//! the ConfigMap is missing, `getOrInitialize` creates it with both keys set to 8 random
//! bytes in hex (`makeUID`). Upstream watches the ConfigMap; the reference CCM reads it on
//! first use and keeps the answer for the life of the process (an edited id would orphan
//! the old health check upstream too). Without a Kubernetes client (unit tests, which
//! never call `initialize`) the `--cluster-name` stands in.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use super::Gce;

pub const UID_CONFIG_MAP: &str = "ingress-uid";
pub const UID_NAMESPACE: &str = "kube-system";
pub const UID_CLUSTER: &str = "uid";
pub const UID_PROVIDER: &str = "provider-uid";

/// `provider-uid`, else `uid`.
pub fn id_of(cm: &ConfigMap) -> Option<String> {
    let data = cm.data.as_ref()?;
    data.get(UID_CLUSTER)?;
    data.get(UID_PROVIDER).or(data.get(UID_CLUSTER)).cloned()
}

/// `makeUID`: 8 random bytes, hex.
fn make_uid() -> String {
    uuid::Uuid::new_v4().as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Gce {
    /// `ClusterID.GetID`: read (or create) the ConfigMap once.
    pub async fn cluster_id(&self, cluster_name: &str) -> Result<String, String> {
        let mut cached = self.cluster_id.lock().await;
        if let Some(id) = cached.as_ref() {
            return Ok(id.clone());
        }
        let Some(client) = self.kube.0.get() else {
            return Ok(cluster_name.to_owned());
        };
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), UID_NAMESPACE);
        let key = format!("{UID_NAMESPACE}/{UID_CONFIG_MAP}");
        let found = api
            .get_opt(UID_CONFIG_MAP)
            .await
            .map_err(|e| format!("reading ConfigMap {key}: {e}"))?;
        let id = match found {
            Some(cm) => id_of(&cm).ok_or_else(|| {
                format!("Could not retrieve cluster id: ConfigMap {key} has no {UID_CLUSTER:?}")
            })?,
            None => {
                let uid = make_uid();
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": UID_CONFIG_MAP, "namespace": UID_NAMESPACE},
                    "data": {UID_CLUSTER: uid, UID_PROVIDER: uid},
                }))
                .map_err(|e| e.to_string())?;
                match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => uid,
                    // Someone else created it meanwhile: theirs wins.
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let cm = api
                            .get(UID_CONFIG_MAP)
                            .await
                            .map_err(|e| format!("reading ConfigMap {key}: {e}"))?;
                        id_of(&cm).ok_or_else(|| {
                            format!("Could not retrieve cluster id from ConfigMap {key}")
                        })?
                    }
                    Err(e) => {
                        return Err(format!(
                            "GCE cloud provider failed to create {key} config map to store cluster id: {e}"
                        ));
                    }
                }
            }
        };
        *cached = Some(id.clone());
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_uid_wins() {
        let cm = |data: serde_json::Value| -> ConfigMap {
            serde_json::from_value(
                serde_json::json!({"metadata": {"name": "ingress-uid"}, "data": data}),
            )
            .unwrap_or_default()
        };
        assert_eq!(
            id_of(&cm(serde_json::json!({"uid": "a", "provider-uid": "b"}))),
            Some("b".into())
        );
        assert_eq!(
            id_of(&cm(serde_json::json!({"uid": "a"}))),
            Some("a".into())
        );
        assert_eq!(id_of(&cm(serde_json::json!({"provider-uid": "b"}))), None);
        assert_eq!(make_uid().len(), 16);
    }
}
