//! The TokenRequest subresource and the review APIs ([`crate::review`]) over HTTP.
//!
//! Why this exists: these are `create`-only virtual resources that store nothing; they read
//! the caller's identity and the server's authorizer instead of the object store.

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;

use super::path::ResourcePath;
use super::request::{accept, media_type, read_body, read_json};
use super::response::json_response;
use super::state::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::protobuf;
use crate::review;

/// The TokenRequest subresource and the review APIs ([`crate::review`]): `create` only.
pub(super) async fn handle(
    state: &AppState,
    rp: &ResourcePath,
    method: &Method,
    headers: &HeaderMap,
    caller: Option<&Identity>,
    body: Body,
) -> Result<Response, ApiError> {
    if !crate::negotiate::acceptable(accept(headers)) {
        return Err(ApiError::NotAcceptable);
    }
    let token_request = rp.subresource.is_some();
    let creates = *method == Method::POST && (token_request || rp.name.is_none());
    if !creates {
        return Err(ApiError::MethodNotAllowed);
    }
    let request = if protobuf::is_protobuf(&media_type(headers)) {
        let kind = if token_request {
            "TokenRequest"
        } else {
            rp.desc.kind
        };
        protobuf::decode_auth_api(kind, &read_body(headers, body, state.max_body_bytes).await?)?
    } else {
        read_json(rp.desc, headers, body, state.max_body_bytes, false).await?
    };
    let answer = if token_request {
        let (Some(ns), Some(name)) = (rp.namespace.as_deref(), rp.name.as_deref()) else {
            return Err(ApiError::UnknownPath);
        };
        review::token_request(&state.store, &state.signer, ns, name, &request)?
    } else {
        review::review(
            rp.desc,
            &request,
            rp.namespace.as_deref(),
            caller,
            &state.token_authority(),
            &|user, groups, attrs| state.decide(user, groups, attrs),
            &|user, groups, namespace| state.rules(user, groups, namespace),
        )?
    };
    Ok(json_response(StatusCode::CREATED, &answer))
}
