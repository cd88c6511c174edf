//! DELETE of one object and DeleteCollection.
//!
//! Why this exists: deletes answer differently from the other writes (a `Status` or the
//! object, 200 or 202 by the options and the resource) and take their options from the
//! body or the query.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::call::Call;
use super::params::{Params, build_filter, delete_options};
use super::request::read_body;
use super::response::json_response;
use crate::error::ApiError;
use crate::resources::ResourceDesc;
use crate::store::{DeleteOptions, DeleteOutcome, ListItem, Store};

/// DELETE of one object: the object while finalizers or a grace period keep it (202 for a
/// cascading delete asked with the deprecated `orphanDependents=false`), else the object
/// or a `Status` by the resource.
pub(super) async fn object(call: &Call<'_>, name: &str, body: Body) -> Result<Response, ApiError> {
    let desc = call.desc;
    let opts = read_options(call, body).await?;
    match call.state.store.delete(desc, call.ns, name, &opts)? {
        // 202 when the object stays and the client asked for cascading with the
        // deprecated orphanDependents=false (apiserver pkg/endpoints/handlers/delete.go).
        DeleteOutcome::Pending(obj) if opts.orphan_dependents == Some(false) => {
            Ok(json_response(StatusCode::ACCEPTED, &obj))
        }
        DeleteOutcome::Pending(obj) => Ok(json_response(StatusCode::OK, &obj)),
        DeleteOutcome::Deleted(obj) if desc.delete_returns_object => {
            Ok(json_response(StatusCode::OK, &obj))
        }
        DeleteOutcome::Deleted(obj) => {
            Ok(json_response(StatusCode::OK, &success_status(desc, &obj)))
        }
    }
}

/// DeleteCollection: every object the selectors match, deleted as one DELETE each would.
pub(super) async fn collection(call: &Call<'_>, body: Body) -> Result<Response, ApiError> {
    let opts = read_options(call, body).await?;
    delete_collection(&call.state.store, call.desc, call.ns, call.params, &opts)
}

/// The DeleteOptions of a DELETE: from its body, or from the query when it has none.
async fn read_options(call: &Call<'_>, body: Body) -> Result<DeleteOptions, ApiError> {
    let bytes = read_body(call.headers, body, call.state.max_body_bytes).await?;
    delete_options(call.params, call.headers, &bytes)
}

/// `Status{Success}` for an immediate delete (apiserver store.go `finalizeDelete`).
fn success_status(desc: &ResourceDesc, obj: &Value) -> Value {
    let mut details = json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "group": desc.group,
        "kind": desc.plural,
        "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    });
    // StatusDetails.group is omitempty: the core group leaves it out.
    if desc.group.is_empty()
        && let Some(map) = details.as_object_mut()
    {
        map.remove("group");
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

fn delete_collection(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let filter = build_filter(desc, ns, params)?;
    let page = store.list(desc, &filter, None, None)?;
    let mut items = Vec::new();
    for obj in page.items {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let obj_ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
        match store.delete(desc, obj_ns, name, opts) {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => items.push(o),
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", desc.kind),
            "apiVersion": desc.api_version(),
            "metadata": {"resourceVersion": store.revision().to_string()},
            "items": items.iter().map(ListItem).collect::<Vec<_>>(),
        }),
    ))
}
