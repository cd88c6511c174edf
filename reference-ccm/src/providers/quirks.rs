//! TEST ONLY: the hidden `--testing-provider-quirk` flag wraps the configured provider's
//! [`Instances`] so it answers the way some other cloud's CCM does.
//!
//! Exists because several cloud-node controller paths are reachable only through answers
//! no real cloud API makes our providers give: an empty providerID, "nil metadata, nil
//! error", AdditionalLabels, a v1-only `Instances` provider. Upstream tests exactly these
//! paths with its fake cloud (kubernetes/cloud-provider `fake/fake.go`, used by
//! `controllers/node/node_controller_test.go`); the conformance cases NI-06, NI-08, NI-13
//! and NI-16 need the same, but against a CCM process talking to a mock cloud. So the
//! decorator still makes the real provider's calls (the mock cloud's journal sees them,
//! which NI-13 counts) and then alters the answer. Without the flag it passes everything
//! through unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::cloud::{CloudError, InstanceMetadata, Instances, InstancesApi, Zone};

/// One value of `--testing-provider-quirk` (repeatable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderQuirk {
    /// `empty-provider-id`: `InstanceMetadata.ProviderID` is always "".
    EmptyProviderId,
    /// `nil-metadata`: `InstanceMetadata` returns nil metadata and a nil error.
    NilMetadata,
    /// `additional-labels=k=v;k2=v2`: these are added to `InstanceMetadata.AdditionalLabels`.
    AdditionalLabels(BTreeMap<String, String>),
    /// `v1-instances`: the provider offers only v1 `Instances` + `Zones`, with
    /// `InstanceID` NotImplemented and every by-providerID call failing, so the controller
    /// must fall back to the by-name calls (upstream `getInstanceMetadata`).
    V1Instances,
}

/// Parses one flag value; used as the clap value parser.
pub fn parse_quirk(value: &str) -> Result<ProviderQuirk, String> {
    match value {
        "empty-provider-id" => return Ok(ProviderQuirk::EmptyProviderId),
        "nil-metadata" => return Ok(ProviderQuirk::NilMetadata),
        "v1-instances" => return Ok(ProviderQuirk::V1Instances),
        _ => {}
    }
    let Some(list) = value.strip_prefix("additional-labels=") else {
        return Err(format!(
            "unknown quirk {value:?}: expected empty-provider-id, nil-metadata, v1-instances \
             or additional-labels=k=v;k2=v2"
        ));
    };
    let mut labels = BTreeMap::new();
    for pair in list.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("additional label {pair:?} is not key=value"))?;
        if k.is_empty() {
            return Err(format!("additional label {pair:?} has an empty key"));
        }
        labels.insert(k.to_owned(), v.to_owned());
    }
    Ok(ProviderQuirk::AdditionalLabels(labels))
}

/// The configured provider behind the quirks.
#[derive(Debug)]
pub struct WithQuirks<P> {
    inner: Arc<P>,
    empty_provider_id: bool,
    nil_metadata: bool,
    v1: bool,
    additional_labels: BTreeMap<String, String>,
}

impl<P> WithQuirks<P> {
    pub fn new(inner: Arc<P>, quirks: &[ProviderQuirk]) -> Self {
        let mut w = Self {
            inner,
            empty_provider_id: false,
            nil_metadata: false,
            v1: false,
            additional_labels: BTreeMap::new(),
        };
        for q in quirks {
            match q {
                ProviderQuirk::EmptyProviderId => w.empty_provider_id = true,
                ProviderQuirk::NilMetadata => w.nil_metadata = true,
                ProviderQuirk::V1Instances => w.v1 = true,
                ProviderQuirk::AdditionalLabels(l) => w.additional_labels.extend(l.clone()),
            }
        }
        w
    }

    /// Whether any quirk is active (the CCM logs a warning then).
    pub fn active(&self) -> bool {
        self.empty_provider_id || self.nil_metadata || self.v1 || !self.additional_labels.is_empty()
    }
}

/// The node as a v1 by-name call sees it: its providerID is not used.
fn by_name(node: &Node) -> Node {
    let mut n = node.clone();
    if let Some(spec) = n.spec.as_mut() {
        spec.provider_id = None;
    }
    n
}

/// What the v1 by-providerID calls answer: the fake cloud's `Err*ByProviderID`.
fn by_provider_id_error(provider_id: &str) -> CloudError {
    CloudError::Other(format!(
        "testing quirk v1-instances: lookups by providerID {provider_id:?} fail"
    ))
}

impl<P: Instances> WithQuirks<P> {
    /// The real provider's answer for a by-name v1 call; a nil answer is "not found".
    async fn real_by_name(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.inner
            .instance_metadata(&by_name(node))
            .await?
            .ok_or(CloudError::InstanceNotFound)
    }
}

impl<P: Instances> Instances for WithQuirks<P> {
    // Existence and shutdown are passed through under every quirk: the lifecycle
    // controller keeps using them (for a v1 provider upstream would call the
    // `*ByProviderID` forms; the quirks model only what the cloud-node controller needs).
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.inner.instance_exists(node).await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.inner.instance_shutdown(node).await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        if self.v1 {
            // A v1-only provider has no InstancesV2; the controller must not get here.
            return Err(CloudError::NotImplemented);
        }
        let meta = self.inner.instance_metadata(node).await?;
        if self.nil_metadata {
            return Ok(None);
        }
        Ok(meta.map(|mut m| {
            if self.empty_provider_id {
                m.provider_id.clear();
            }
            m.additional_labels.extend(self.additional_labels.clone());
            m
        }))
    }

    fn instances_api(&self) -> InstancesApi {
        if self.v1 {
            InstancesApi::V1 { zones: true }
        } else {
            self.inner.instances_api()
        }
    }

    async fn instance_provider_id(&self, node: &Node) -> Result<String, CloudError> {
        if self.v1 {
            return Err(CloudError::NotImplemented);
        }
        self.inner.instance_provider_id(node).await
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        if self.v1 {
            return Err(by_provider_id_error(provider_id));
        }
        self.inner.node_addresses_by_provider_id(provider_id).await
    }

    async fn node_addresses_by_name(&self, node: &Node) -> Result<Vec<NodeAddress>, CloudError> {
        if self.v1 {
            return Ok(self.real_by_name(node).await?.node_addresses);
        }
        self.inner.node_addresses_by_name(node).await
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        if self.v1 {
            return Err(by_provider_id_error(provider_id));
        }
        self.inner.instance_type_by_provider_id(provider_id).await
    }

    async fn instance_type_by_name(&self, node: &Node) -> Result<String, CloudError> {
        if self.v1 {
            return Ok(self.real_by_name(node).await?.instance_type);
        }
        self.inner.instance_type_by_name(node).await
    }

    async fn zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        if self.v1 {
            return Err(by_provider_id_error(provider_id));
        }
        self.inner.zone_by_provider_id(provider_id).await
    }

    async fn zone_by_name(&self, node: &Node) -> Result<Zone, CloudError> {
        if self.v1 {
            let m = self.real_by_name(node).await?;
            return Ok(Zone {
                failure_domain: m.zone,
                region: m.region,
            });
        }
        self.inner.zone_by_name(node).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::sync::Mutex;

    /// Records the nodes it was asked about and answers with fixed metadata.
    #[derive(Default)]
    struct Real {
        asked: Mutex<Vec<Option<String>>>,
    }

    impl Instances for Real {
        async fn instance_exists(&self, _: &Node) -> Result<bool, CloudError> {
            Ok(true)
        }
        async fn instance_shutdown(&self, _: &Node) -> Result<bool, CloudError> {
            Ok(false)
        }
        async fn instance_metadata(
            &self,
            node: &Node,
        ) -> Result<Option<InstanceMetadata>, CloudError> {
            if let Ok(mut a) = self.asked.lock() {
                a.push(node.spec.as_ref().and_then(|s| s.provider_id.clone()));
            }
            Ok(Some(InstanceMetadata {
                provider_id: "mock:///i-1".into(),
                instance_type: "t1".into(),
                zone: "z1".into(),
                region: "r1".into(),
                additional_labels: [("example.com/a".to_owned(), "cloud".to_owned())].into(),
                ..Default::default()
            }))
        }
    }

    fn node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some("mock:///i-1".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn wrap(quirks: &[&str]) -> (Arc<Real>, WithQuirks<Real>) {
        let real = Arc::new(Real::default());
        let quirks: Vec<ProviderQuirk> =
            quirks.iter().filter_map(|q| parse_quirk(q).ok()).collect();
        (real.clone(), WithQuirks::new(real, &quirks))
    }

    fn calls(real: &Real) -> usize {
        real.asked.lock().map(|a| a.len()).unwrap_or(0)
    }

    #[test]
    fn parses_every_quirk_and_rejects_others() {
        assert_eq!(parse_quirk("nil-metadata"), Ok(ProviderQuirk::NilMetadata));
        assert_eq!(
            parse_quirk("empty-provider-id"),
            Ok(ProviderQuirk::EmptyProviderId)
        );
        assert_eq!(parse_quirk("v1-instances"), Ok(ProviderQuirk::V1Instances));
        assert_eq!(
            parse_quirk("additional-labels=x.k8s.io/a=1;example.com/a=b=c"),
            Ok(ProviderQuirk::AdditionalLabels(
                [
                    ("x.k8s.io/a".to_owned(), "1".to_owned()),
                    ("example.com/a".to_owned(), "b=c".to_owned()),
                ]
                .into()
            ))
        );
        assert!(parse_quirk("additional-labels=novalue").is_err());
        assert!(parse_quirk("additional-labels==v").is_err());
        assert!(parse_quirk("hot-loop").is_err());
    }

    #[tokio::test]
    async fn without_quirks_everything_passes_through() {
        let (real, w) = wrap(&[]);
        assert!(!w.active());
        assert_eq!(w.instances_api(), InstancesApi::V2);
        let direct = real.instance_metadata(&node()).await.ok().flatten();
        assert_eq!(w.instance_metadata(&node()).await.ok().flatten(), direct);
        assert_eq!(calls(&real), 2);
    }

    #[tokio::test]
    async fn v2_quirks_alter_the_answer_after_the_real_call() {
        let (real, w) = wrap(&["nil-metadata"]);
        assert!(matches!(w.instance_metadata(&node()).await, Ok(None)));
        assert_eq!(calls(&real), 1, "the real provider is still asked");

        let (_, w) = wrap(&[
            "empty-provider-id",
            "additional-labels=example.com/a=q;k8s.io/b=1",
        ]);
        let m = w
            .instance_metadata(&node())
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        assert_eq!(m.provider_id, "");
        assert_eq!(m.instance_type, "t1");
        assert_eq!(
            m.additional_labels.get("example.com/a").map(String::as_str),
            Some("q")
        );
        assert_eq!(
            m.additional_labels.get("k8s.io/b").map(String::as_str),
            Some("1")
        );
    }

    #[tokio::test]
    async fn v1_has_no_instance_id_fails_by_provider_id_and_answers_by_name() {
        let (real, w) = wrap(&["v1-instances"]);
        assert_eq!(w.instances_api(), InstancesApi::V1 { zones: true });
        assert!(matches!(
            w.instance_provider_id(&node()).await,
            Err(CloudError::NotImplemented)
        ));
        assert!(matches!(
            w.instance_metadata(&node()).await,
            Err(CloudError::NotImplemented)
        ));
        assert!(
            w.node_addresses_by_provider_id("mock:///i-1")
                .await
                .is_err()
        );
        assert!(w.instance_type_by_provider_id("mock:///i-1").await.is_err());
        assert!(w.zone_by_provider_id("mock:///i-1").await.is_err());
        assert_eq!(calls(&real), 0, "failing v1 calls make no cloud call");
        assert_eq!(
            w.instance_type_by_name(&node()).await.ok().as_deref(),
            Some("t1")
        );
        assert_eq!(
            w.zone_by_name(&node()).await.ok(),
            Some(Zone {
                failure_domain: "z1".into(),
                region: "r1".into()
            })
        );
        // By name means the provider is not handed the providerID.
        let asked = real.asked.lock().map(|a| a.clone()).unwrap_or_default();
        assert_eq!(asked, vec![None, None]);
    }
}
