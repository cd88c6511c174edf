//! Writing an answer: JSON bodies with the negotiated Content-Type, Tables,
//! `PartialObjectMetadata`, warnings, and LIST bodies written straight from the store.
//!
//! Why this exists: GET, LIST and the write verbs answer in the representations the client
//! asked for (apiserver pkg/endpoints/handlers/response.go), with the same encoding rules
//! everywhere.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::params::Params;
use super::request::accept;
use crate::error::ApiError;
use crate::negotiate::{Representation, negotiate};
use crate::resources::ResourceDesc;
use crate::store::Stored;
use crate::table::{self, IncludeObject, TableOptions};

pub(super) fn json_response(code: StatusCode, body: &Value) -> Response {
    typed_response(code, body, Representation::Json)
}

/// A JSON body with the Content-Type of its representation.
pub(super) fn typed_response(code: StatusCode, body: &Value, repr: Representation) -> Response {
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(repr.content_type()),
    );
    resp
}

/// Representations a resource GET/LIST/WATCH can answer with.
const RESOURCE_OFFERS: &[Representation] = &[
    Representation::Json,
    Representation::Table("v1"),
    Representation::Table("v1beta1"),
    Representation::Metadata {
        list: false,
        version: "v1",
    },
    Representation::Metadata {
        list: true,
        version: "v1",
    },
    Representation::Metadata {
        list: false,
        version: "v1beta1",
    },
    Representation::Metadata {
        list: true,
        version: "v1beta1",
    },
];

/// Table rendering options when the client asked for a Table, else `None`.
pub(super) fn table_options(
    headers: &HeaderMap,
    params: &Params,
) -> Result<Option<TableOptions>, ApiError> {
    let Representation::Table(version) = negotiate(accept(headers), RESOURCE_OFFERS) else {
        return Ok(None);
    };
    let include = params.get("includeObject").unwrap_or("");
    let include_object = IncludeObject::parse(include).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "includeObject: Unsupported value: {include:?}: supported values: \"None\", \"Metadata\", \"Object\""
        ))
    })?;
    Ok(Some(TableOptions {
        version,
        include_object,
        no_headers: false,
        now: jiff::Timestamp::now(),
    }))
}

/// The version of `PartialObjectMetadata` the client asked for, if it did; asking for the
/// single form on a list, or the list form on an object, is a 406 (apiserver
/// pkg/endpoints/handlers/response.go `transformResponseObject`).
pub(super) fn metadata_only(
    headers: &HeaderMap,
    is_list: bool,
) -> Result<Option<&'static str>, ApiError> {
    let Representation::Metadata { list, version } = negotiate(accept(headers), RESOURCE_OFFERS)
    else {
        return Ok(None);
    };
    if list != is_list {
        let (asked, is) = if list {
            ("PartialObjectMetadataList", "not a list")
        } else {
            ("PartialObjectMetadata", "a list")
        };
        return Err(ApiError::Other {
            code: 406,
            reason: "NotAcceptable",
            message: format!("you requested {asked}, but the requested object is {is}"),
        });
    }
    Ok(Some(version))
}

/// An object reduced to its metadata.
pub(super) fn partial(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `body` (a list or one object) as a Table when `table` is set.
pub(super) fn render(desc: &ResourceDesc, body: &Value, table: Option<TableOptions>) -> Response {
    let Some(opts) = table else {
        return json_response(StatusCode::OK, body);
    };
    let t = match body.get("items").and_then(Value::as_array) {
        Some(items) => {
            let items: Vec<&Value> = items.iter().collect();
            let meta = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
            table::table(desc, &items, meta, &opts)
        }
        None => {
            let rv = body
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            table::table(desc, &[body], json!({"resourceVersion": rv}), &opts)
        }
    };
    typed_response(StatusCode::OK, &t, Representation::Table(opts.version))
}

/// Add one `Warning: 299 - "<text>"` header per warning (RFC 7234 form, as
/// apiserver pkg/endpoints/filters/warning.go writes them; kubectl prints them).
pub(super) fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let quoted = serde_json::to_string(w).unwrap_or_default();
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {quoted}")) {
            resp.headers_mut().append(header::WARNING, value);
        }
    }
    resp
}

/// A LIST answer, kept as the stored objects until it is written: a LIST of thousands
/// of objects is serialized straight from the store's copies, never cloned.
///
/// In JSON its items carry no `apiVersion` and `kind`, as kube-apiserver's do: a built-in
/// type's v1 `List` holds its items with an empty `TypeMeta`, which Go's encoder omits
/// (`curl /api/v1/nodes` against v1.37.2: `items[0].kind` is absent). Tables keep the
/// object's kind in `rows[].object` (apiserver pkg/endpoints/handlers/response.go
/// `asTable` converts each object to the request's version, which sets it) and
/// `PartialObjectMetadataList` items are `PartialObjectMetadata`, so only the plain
/// JSON list ([`ListBody::json_response`]) and DeleteCollection's answer drop them.
pub(super) struct ListBody {
    pub(super) kind: String,
    pub(super) api_version: String,
    pub(super) metadata: Value,
    pub(super) items: Vec<Arc<Stored>>,
}

impl ListBody {
    /// `{"kind":…,"apiVersion":…,"metadata":…,"items":[…]}`.
    pub(super) fn json_response(&self) -> Response {
        // Encoded (or cached) items first, so the body is written into one buffer of
        // exactly its size: growing a Vec of many MB by doubling copied it several times.
        let items: Vec<&Bytes> = self.items.iter().map(|o| o.list_item_json()).collect();
        let head = serde_json::to_vec(&self.metadata).unwrap_or_default();
        let size = 64
            + self.kind.len()
            + self.api_version.len()
            + head.len()
            + items.iter().map(|b| b.len() + 1).sum::<usize>();
        let mut buf = Vec::with_capacity(size);
        buf.extend_from_slice(b"{\"kind\":");
        // Writing JSON into a Vec cannot fail (no I/O, string keys only).
        let _ = serde_json::to_writer(&mut buf, &self.kind);
        buf.extend_from_slice(b",\"apiVersion\":");
        let _ = serde_json::to_writer(&mut buf, &self.api_version);
        buf.extend_from_slice(b",\"metadata\":");
        buf.extend_from_slice(&head);
        buf.extend_from_slice(b",\"items\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(item);
        }
        buf.extend_from_slice(b"]}");
        let mut resp = (StatusCode::OK, buf).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(Representation::Json.content_type()),
        );
        resp
    }

    pub(super) fn to_value(&self) -> Value {
        let mut body = serde_json::Map::new();
        body.insert("kind".into(), Value::String(self.kind.clone()));
        body.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        body.insert("metadata".into(), self.metadata.clone());
        let items = self.items.iter().map(|o| o.value().clone()).collect();
        body.insert("items".into(), Value::Array(items));
        Value::Object(body)
    }
}
