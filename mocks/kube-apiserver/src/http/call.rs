//! [`Call`]: the context of one resource request, as every verb handler reads it.
//!
//! Why this exists: the get, list, create, update, patch and delete handlers all need the
//! server state, the resource, the namespace, the subresource, the headers and the query
//! parameters; one borrowed bundle keeps their signatures short and alike.

use axum::http::HeaderMap;

use super::params::Params;
use super::state::AppState;
use crate::resources::ResourceDesc;
use crate::strategy::Subresource;

/// A request on a resource (not a review API), once its path is classified.
pub(super) struct Call<'a> {
    pub(super) state: &'a AppState,
    pub(super) desc: &'static ResourceDesc,
    /// The namespace of the URL, if any.
    pub(super) ns: Option<&'a str>,
    /// Which endpoint: the object itself or its `/status`.
    pub(super) sub: Subresource,
    pub(super) headers: &'a HeaderMap,
    pub(super) params: &'a Params,
}
