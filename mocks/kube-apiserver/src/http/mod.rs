//! The HTTP surface: routing, authentication, auditing and request/response mapping.
//!
//! Kubernetes paths do not fit a fixed route table well (`/api/v1/namespaces/x` is a
//! namespace, `/api/v1/namespaces/x/leases` is not), so one fallback handler parses
//! the path against the resource table ([`classify`]) and dispatches on the method.
//! Store semantics live in [`crate::store`]; this module only translates.
//!
//! Layout: `path` classifies the request, `filter` authenticates, authorizes and audits
//! it with the [`AppState`] of `state`, then [`router`]'s fallback handler dispatches on
//! the target and the method: discovery and OpenAPI documents here, resources to `read`
//! (get, list, watch), `write` (create, update, patch, apply) and `delete`, and the
//! review APIs to `reviews`. `request` and `params` read the request, `response`
//! writes the answer.

mod call;
mod delete;
mod filter;
mod params;
mod path;
mod read;
mod request;
mod response;
mod reviews;
mod state;
mod write;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::auth::Identity;
use crate::discovery;
use crate::error::ApiError;
use crate::negotiate::{Representation, negotiate};
use crate::openapi;
use crate::strategy::Subresource;
use call::Call;
use filter::auth_and_audit;
use params::Params;
pub use path::{ResourcePath, Target, classify};
use request::accept;
use response::{json_response, table_options, typed_response};
pub use state::AppState;

/// The whole API as an axum router (usable with `tower::ServiceExt::oneshot`).
pub fn router(state: AppState) -> Router {
    Router::new()
        .fallback(serve)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth_and_audit,
        ))
        .with_state(state)
}

async fn serve(State(state): State<AppState>, req: Request) -> Response {
    match handle(state, req).await {
        Ok(resp) => resp,
        Err(err) => err.into_response(),
    }
}

/// Representations `/api` and `/apis` can answer with.
const DISCOVERY_OFFERS: &[Representation] = &[Representation::Json, Representation::DiscoveryV2];

async fn handle(state: AppState, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let target = classify(parts.uri.path());
    let get_only = |doc: Option<Value>| -> Result<Response, ApiError> {
        if parts.method != Method::GET {
            return Err(ApiError::MethodNotAllowed);
        }
        doc.map(|d| json_response(StatusCode::OK, &d))
            .ok_or(ApiError::UnknownPath)
    };
    match target {
        Target::Version => get_only(Some(discovery::version())),
        Target::Health => {
            if parts.method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "ok",
            )
                .into_response())
        }
        Target::Api => {
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            match negotiate(accept(&parts.headers), DISCOVERY_OFFERS) {
                Representation::DiscoveryV2 if parts.method == Method::GET => Ok(typed_response(
                    StatusCode::OK,
                    &discovery::aggregated(true),
                    Representation::DiscoveryV2,
                )),
                _ => get_only(Some(discovery::api_versions(host))),
            }
        }
        Target::Apis => match negotiate(accept(&parts.headers), DISCOVERY_OFFERS) {
            Representation::DiscoveryV2 if parts.method == Method::GET => Ok(typed_response(
                StatusCode::OK,
                &discovery::aggregated(false),
                Representation::DiscoveryV2,
            )),
            _ => get_only(Some(discovery::api_groups())),
        },
        Target::Group(g) => get_only(discovery::api_group(&g)),
        Target::GroupVersion(g, v) => get_only(discovery::resource_list(&g, &v)),
        Target::OpenApiIndex => get_only(Some(openapi::index())),
        Target::OpenApi(path) => get_only(openapi::group_version_doc(&path)),
        Target::OpenApiV2 => {
            if parts.method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            let wants_protobuf = accept(&parts.headers).is_some_and(openapi::v2_wants_protobuf);
            Ok(if wants_protobuf {
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, openapi::V2_PROTOBUF)],
                    openapi::v2_protobuf(),
                )
                    .into_response()
            } else {
                json_response(StatusCode::OK, &openapi::v2_json())
            })
        }
        Target::Unknown => Err(ApiError::UnknownPath),
        Target::Resource(rp) => {
            let params = Params::parse(&parts.uri)?;
            let caller = parts.extensions.get::<Identity>();
            if rp.desc.create_only
                || (rp.desc.group.is_empty()
                    && rp.desc.plural == "serviceaccounts"
                    && rp.subresource.as_deref() == Some("token"))
            {
                return reviews::handle(&state, &rp, &parts.method, &parts.headers, caller, body)
                    .await;
            }
            handle_resource(&state, rp, &parts.method, &parts.headers, &params, body).await
        }
    }
}

/// A resource verb: the subresource and the method pick the handler of [`read`],
/// [`write`] or [`delete`].
async fn handle_resource(
    state: &AppState,
    rp: ResourcePath,
    method: &Method,
    headers: &HeaderMap,
    params: &Params,
    body: Body,
) -> Result<Response, ApiError> {
    if !crate::negotiate::acceptable(accept(headers)) {
        return Err(ApiError::NotAcceptable);
    }
    let desc = rp.desc;
    let sub = match rp.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if desc.status_subresource => Subresource::Status,
        Some(_) => return Err(ApiError::UnknownPath),
    };
    let ns = rp.namespace.as_deref();
    let call = Call {
        state,
        desc,
        ns,
        sub,
        headers,
        params,
    };
    match (method, rp.name.as_deref()) {
        (&Method::GET, name) if rp.watch_prefix => {
            let table = table_options(headers, params)?;
            read::watch(state, desc, ns, params, name, table)
        }
        _ if rp.watch_prefix => Err(ApiError::MethodNotAllowed),
        // A GET of an object URL is a get even with `watch=true`: kube-apiserver routes it
        // to `GetResource` (apiserver pkg/endpoints/installer.go), which has no watch; the
        // watch of one object is `/watch/.../<name>`.
        (&Method::GET, Some(name)) => read::get(&call, name),
        (&Method::GET, None) => read::list_or_watch(&call),
        (&Method::POST, None) if !desc.namespaced || ns.is_some() => {
            write::create(&call, body).await
        }
        (&Method::PUT, Some(name)) => write::update(&call, name, body).await,
        (&Method::PATCH, Some(name)) => write::patch(&call, name, body).await,
        (&Method::DELETE, Some(name)) if sub == Subresource::Main => {
            delete::object(&call, name, body).await
        }
        // Namespaces have no DeleteCollection (see discovery's verbs).
        (&Method::DELETE, None)
            if sub == Subresource::Main
                && !(desc.group.is_empty() && desc.plural == "namespaces") =>
        {
            delete::collection(&call, body).await
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}
