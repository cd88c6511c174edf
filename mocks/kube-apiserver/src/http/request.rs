//! Reading a request: its headers and its body (JSON, YAML or protobuf), within the
//! body-size limit.
//!
//! Why this exists: every write handler decodes a body the same way kube-apiserver's
//! serializers do (a 413 past the limit, a 415 for an unknown media type, strict decoding
//! of repeated keys), and several places read the same headers.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use serde_json::Value;

use crate::error::ApiError;
use crate::protobuf;
use crate::resources::ResourceDesc;

pub(super) fn header_string(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

pub(super) fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// Read the whole body, refusing more than `max` bytes with a 413.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    let mut too_large = declared.is_some_and(|n| n > max as u64);
    let mut read = 0usize;
    // Past the limit, the rest is read and dropped (up to as much again) so that the client,
    // still sending, gets the 413 instead of a connection reset; kube-apiserver's Go server
    // drains the body the same way.
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        // A client that went away never sees the answer.
        let Ok(chunk) = chunk else {
            return Err(ApiError::TooLarge(max));
        };
        read += chunk.len();
        if read > max {
            too_large = true;
        }
        if too_large {
            if read > max.saturating_mul(2) {
                break;
            }
        } else {
            bytes.extend_from_slice(&chunk);
        }
    }
    if too_large {
        return Err(ApiError::TooLarge(max));
    }
    Ok(Bytes::from(bytes))
}

/// The media type of the request body, lowercase, without parameters.
pub(super) fn media_type(headers: &HeaderMap) -> String {
    header_string(headers, header::CONTENT_TYPE)
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Read an object body for create/update: JSON, or protobuf for the types
/// [`crate::protobuf`] decodes.
///
/// With `strict` (fieldValidation=Strict) a JSON body that repeats a key is a 400.
pub(super) async fn read_json(
    desc: &ResourceDesc,
    headers: &HeaderMap,
    body: Body,
    max: usize,
    strict: bool,
) -> Result<Value, ApiError> {
    let ct = header_string(headers, header::CONTENT_TYPE);
    let media = media_type(headers);
    if protobuf::is_protobuf(&media) {
        let bytes = read_body(headers, body, max).await?;
        return protobuf::decode_object(desc, &bytes);
    }
    if !matches!(
        media.as_str(),
        "" | "application/json" | "application/yaml" | "*/*"
    ) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml (got {ct:?})"
        )));
    }
    let bytes = read_body(headers, body, max).await?;
    // kube-apiserver also takes YAML bodies on create and update (its serializer list
    // has application/yaml beside JSON and protobuf).
    let value: Value = if media == "application/yaml" {
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("the request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(text).map_err(|e| {
            let line = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            ApiError::BadRequest(format!("the request body is not valid YAML: {line}"))
        })?
    } else {
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::BadRequest(format!("the request body is not valid JSON: {e}"))
        })?;
        if strict && let Some(field) = duplicate_field(&bytes) {
            return Err(ApiError::BadRequest(format!(
                "{} in version {:?} cannot be handled as a {}: strict decoding error: duplicate field {field:?}",
                desc.kind, desc.version, desc.kind
            )));
        }
        value
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be a JSON object".into(),
        ));
    }
    Ok(value)
}

/// The first key a JSON object repeats (its dotted path), which kube-apiserver's strict
/// decoder refuses (sigs.k8s.io/json `UnmarshalStrict`); serde_json keeps the last value.
fn duplicate_field(bytes: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    /// Walks a value; `found` gets the first duplicated key's path.
    struct Walk<'a> {
        path: String,
        found: &'a std::cell::RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.path.is_empty() {
                    key.clone()
                } else {
                    format!("{}.{key}", self.path)
                };
                if !seen.insert(key) && self.found.borrow().is_none() {
                    *self.found.borrow_mut() = Some(path.clone());
                }
                map.next_value_seed(Walk {
                    path,
                    found: self.found,
                })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq
                .next_element_seed(Walk {
                    path: self.path.clone(),
                    found: self.found,
                })?
                .is_some()
            {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let found = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let walked = Walk {
        path: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    walked.ok()?;
    found.into_inner()
}
