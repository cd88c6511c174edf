//! Content negotiation on the `Accept` header.
//!
//! The same URL answers with different representations depending on what the
//! client lists in `Accept`: kubectl asks for `meta.k8s.io` Tables on `get`, and
//! client-go / kube-rs ask for aggregated discovery on `/api` and `/apis`. Clients
//! list their preferences in order and end with plain `application/json`, so the
//! first media range this server can produce wins (apiserver
//! pkg/endpoints/handlers/negotiation/negotiate.go). Protobuf ranges are skipped:
//! this server only speaks JSON, and answers JSON to a client that would take YAML or
//! protobuf too. An Accept header naming none of the media types kube-apiserver serializes
//! (JSON, YAML, protobuf, or a wildcard) is a 406, as upstream answers it ([`acceptable`]).

/// A representation this server can produce for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// The object or list itself.
    Json,
    /// A `meta.k8s.io` Table, of the given version (`v1` or `v1beta1`).
    Table(&'static str),
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    DiscoveryV2,
    /// `meta.k8s.io` `PartialObjectMetadata` (`list: false`) or
    /// `PartialObjectMetadataList` (`list: true`) of the given version: only the metadata.
    Metadata { list: bool, version: &'static str },
}

impl Representation {
    /// The response Content-Type, which clients use to tell the representations
    /// apart (client-go discovery/discovery_client.go reads it for discovery).
    pub fn content_type(self) -> &'static str {
        match self {
            Representation::Json => "application/json",
            Representation::Table("v1beta1") => "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Representation::Table(_) => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Representation::DiscoveryV2 => {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            }
            // kube-apiserver answers these with a plain JSON Content-Type.
            Representation::Metadata { .. } => "application/json",
        }
    }
}

/// One media range: type/subtype and its parameters.
struct MediaRange<'a> {
    essence: String,
    params: Vec<(String, &'a str)>,
}

impl<'a> MediaRange<'a> {
    fn parse(s: &'a str) -> MediaRange<'a> {
        let mut parts = s.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let params = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"')))
            .collect();
        MediaRange { essence, params }
    }

    fn param(&self, key: &str) -> Option<&'a str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn is_json(&self) -> bool {
        matches!(
            self.essence.as_str(),
            "application/json" | "application/*" | "*/*"
        )
    }
}

/// Whether `accept` names a media type kube-apiserver can answer resource requests with
/// (apiserver pkg/endpoints/handlers/negotiation/negotiate.go `NegotiateOutputMediaType`
/// fails with 406 otherwise, [`crate::ApiError::NotAcceptable`]). No header, or an empty one, accepts anything.
pub fn acceptable(accept: Option<&str>) -> bool {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return true;
    };
    accept.split(',').map(MediaRange::parse).any(|r| {
        r.is_json()
            || matches!(
                r.essence.as_str(),
                "application/yaml" | "application/vnd.kubernetes.protobuf"
            )
    })
}

/// The first representation in `accept` that is among `offers`; plain JSON when
/// nothing matches (or the header is absent).
pub fn negotiate(accept: Option<&str>, offers: &[Representation]) -> Representation {
    let Some(accept) = accept else {
        return Representation::Json;
    };
    for range in accept.split(',').map(MediaRange::parse) {
        if !range.is_json() {
            continue;
        }
        let candidate = match (range.param("as"), range.param("g"), range.param("v")) {
            (None, _, _) => Some(Representation::Json),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => Some(Representation::Table("v1")),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                Some(Representation::Table("v1beta1"))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                Some(Representation::DiscoveryV2)
            }
            (
                Some(kind @ ("PartialObjectMetadata" | "PartialObjectMetadataList")),
                Some("meta.k8s.io"),
                Some(v @ ("v1" | "v1beta1")),
            ) => Some(Representation::Metadata {
                list: kind == "PartialObjectMetadataList",
                version: if v == "v1" { "v1" } else { "v1beta1" },
            }),
            _ => None,
        };
        if let Some(c) = candidate.filter(|c| offers.contains(c)) {
            return c;
        }
    }
    Representation::Json
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const ALL: &[Representation] = &[
        Representation::Json,
        Representation::Table("v1"),
        Representation::Table("v1beta1"),
    ];

    #[test]
    fn kubectl_get_gets_a_table() {
        assert_eq!(
            negotiate(Some(KUBECTL_GET), ALL),
            Representation::Table("v1")
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
                ALL
            ),
            Representation::Table("v1beta1")
        );
    }

    #[test]
    fn offers_limit_the_choice() {
        assert_eq!(
            negotiate(Some(KUBECTL_GET), &[Representation::Json]),
            Representation::Json
        );
        assert_eq!(
            negotiate(
                Some(DISCOVERY),
                &[Representation::Json, Representation::DiscoveryV2]
            ),
            Representation::DiscoveryV2
        );
        assert_eq!(negotiate(Some(DISCOVERY), ALL), Representation::Json);
    }

    #[test]
    fn partial_object_metadata_is_offered_for_resources() {
        let offers = &[
            Representation::Json,
            Representation::Metadata {
                list: false,
                version: "v1",
            },
            Representation::Metadata {
                list: true,
                version: "v1",
            },
        ];
        assert_eq!(
            negotiate(
                Some(
                    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
                ),
                offers
            ),
            Representation::Metadata {
                list: true,
                version: "v1"
            }
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
                ALL
            ),
            Representation::Json
        );
    }

    #[test]
    fn protobuf_and_garbage_fall_back_to_json() {
        assert_eq!(
            negotiate(
                Some("application/vnd.kubernetes.protobuf,application/json"),
                ALL
            ),
            Representation::Json
        );
        assert_eq!(negotiate(Some("text/html"), ALL), Representation::Json);
        assert_eq!(negotiate(None, ALL), Representation::Json);
        assert_eq!(negotiate(Some(";;,=,"), ALL), Representation::Json);
    }
}
