//! GET, LIST and WATCH of resources.
//!
//! Why this exists: the read verbs share the ListOptions rules (selectors, resourceVersion
//! semantics, paging) and the representations a read can answer with; the watch stream
//! itself is [`crate::watch`]'s.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::call::Call;
use super::params::{Params, build_filter, options_invalid};
use super::response::{ListBody, json_response, metadata_only, partial, render, table_options};
use super::state::AppState;
use crate::error::{ApiError, Cause};
use crate::negotiate::Representation;
use crate::resources::ResourceDesc;
use crate::selector::FieldSelector;
use crate::store::{Store, WatchFrom};
use crate::table::TableOptions;
use crate::watch::{self, WatchParams};

/// Watches without `timeoutSeconds` end after this long (upstream picks a random
/// value around `--min-request-timeout`, 1800s).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// GET of one object: as JSON, a Table or `PartialObjectMetadata`.
pub(super) fn get(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let table = table_options(call.headers, call.params)?;
    let obj = call.state.store.get(call.desc, call.ns, name)?;
    if let Some(version) = metadata_only(call.headers, false)? {
        return Ok(json_response(StatusCode::OK, &partial(&obj, version)));
    }
    Ok(render(call.desc, &obj, table))
}

/// GET of a collection: a watch with `watch=true`, else a LIST as JSON, a Table or a
/// `PartialObjectMetadataList`.
pub(super) fn list_or_watch(call: &Call<'_>) -> Result<Response, ApiError> {
    let Call {
        state,
        desc,
        ns,
        headers,
        params,
        ..
    } = *call;
    let table = table_options(headers, params)?;
    if params.bool("watch")? == Some(true) {
        return watch(state, desc, ns, params, None, table);
    }
    let metadata = metadata_only(headers, true)?;
    let body = list(&state.store, desc, ns, params)?;
    Ok(match (table, metadata) {
        (_, Some(version)) => {
            let list = body.to_value();
            let items: Vec<Value> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| partial(o, version))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": format!("meta.k8s.io/{version}"),
                    "metadata": list["metadata"],
                    "items": items,
                }),
            )
        }
        (None, None) => body.json_response(),
        (Some(_), None) => render(desc, &body.to_value(), table),
    })
}

fn list(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
) -> Result<ListBody, ApiError> {
    let mut causes = Vec::new();
    if params.get_nonempty("sendInitialEvents").is_some() {
        causes.push(Cause::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if params.get_nonempty("resourceVersionMatch").is_some()
        && params.get_nonempty("resourceVersion").is_none()
    {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if let Some(m) = params.get_nonempty("resourceVersionMatch")
        && !matches!(m, "Exact" | "NotOlderThan")
    {
        causes.push(Cause::not_supported(
            "resourceVersionMatch",
            m,
            &["Exact", "NotOlderThan", ""],
        ));
    }
    if !causes.is_empty() {
        return Err(options_invalid("ListOptions", causes));
    }
    let filter = build_filter(desc, ns, params)?;
    // A limit of zero or less is no limit (apiserver pkg/storage: `limit > 0` pages).
    let limit = match params.get_nonempty("limit") {
        None => None,
        Some(l) => {
            let n = l
                .parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?;
            usize::try_from(n).ok().filter(|n| *n > 0)
        }
    };
    let page = store.list(desc, &filter, limit, params.get_nonempty("continue"))?;
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(n) = page.remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    Ok(ListBody {
        kind: format!("{}List", desc.kind),
        api_version: desc.api_version(),
        metadata,
        items: page.items,
    })
}

pub(super) fn watch(
    state: &AppState,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
    name: Option<&str>,
    table: Option<TableOptions>,
) -> Result<Response, ApiError> {
    let send_initial = params.bool("sendInitialEvents")?;
    let rv_match = params.get_nonempty("resourceVersionMatch");
    let mut causes = Vec::new();
    if send_initial.is_some() && rv_match != Some("NotOlderThan") {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if rv_match.is_some() && send_initial.is_none() {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if !causes.is_empty() {
        return Err(options_invalid("ListOptions", causes));
    }
    let rv = match params.get_nonempty("resourceVersion") {
        None | Some("0") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))?,
        ),
    };
    let bookmarks = params.bool("allowWatchBookmarks")?.unwrap_or(false);
    // RV ""/"0" defaults to sending the current state (apimachinery
    // pkg/apis/meta/internalversion/defaults.go); sendInitialEvents overrides it.
    let from = match (send_initial, rv) {
        (Some(true), _) => WatchFrom::Now { initial: true },
        (Some(false), None) => WatchFrom::Now { initial: false },
        (None, None) => WatchFrom::Now { initial: true },
        (_, Some(rv)) => WatchFrom::After(rv),
    };
    let timeout = match params.get_nonempty("timeoutSeconds") {
        None => DEFAULT_WATCH_TIMEOUT,
        Some(s) => Duration::from_secs(
            s.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds {s:?}")))?,
        ),
    };
    let mut filter = build_filter(desc, ns, params)?;
    if let Some(name) = name {
        let by_name = FieldSelector::parse(&format!("metadata.name={name}"))
            .map_err(|e| ApiError::BadRequest(format!("invalid name: {}", e.0)))?;
        filter.name_selector = Some(by_name);
    }
    let watch_params = WatchParams {
        from,
        bookmarks,
        initial_events_end: send_initial == Some(true) && bookmarks,
        timeout,
        bookmark_interval: state.bookmark_interval,
        table,
    };
    let stream = watch::stream(
        state.store.clone(),
        desc,
        filter,
        watch_params,
        state.shutdown_signal(),
    );
    let content_type = match table {
        Some(opts) => Representation::Table(opts.version).content_type(),
        None => "application/json",
    };
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
