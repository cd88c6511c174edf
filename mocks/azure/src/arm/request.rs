//! What the ARM handlers share with the router: the parsed request ([`ArmRequest`]), the
//! 405 answer, and the headers of asynchronous operations. Kept apart from `router.rs`,
//! which dispatches to the compute and network handlers, so those handlers can use these
//! without importing the router that imports them; this module imports no handler.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde_json::Value;

use super::ArmError;
use super::path::ArmPath;
use crate::Shared;

/// What a handler gets: the parsed request.
pub struct ArmRequest {
    pub method: Method,
    pub path: ArmPath,
    /// The request path as sent (nextLinks repeat it).
    pub raw_path: String,
    pub query: String,
    pub api_version: String,
    pub headers: HeaderMap,
    pub body: axum::body::Bytes,
}

impl ArmRequest {
    /// The body as JSON: ARM's 400 `InvalidRequestContent` when it is not.
    pub fn json(&self) -> Result<Value, ArmError> {
        if self.body.is_empty() {
            return Err(ArmError::bad_request(
                "InvalidRequestContent",
                "The request content was invalid and could not be deserialized: the body is empty.",
            ));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ArmError::bad_request(
                "InvalidRequestContent",
                format!("The request content was invalid and could not be deserialized: '{e}'."),
            )
        })
    }

    /// Whether the query has `$expand=instanceView` (any case).
    pub fn expand_instance_view(&self) -> bool {
        form_urlencoded::parse(self.query.as_bytes()).any(|(k, v)| {
            (k.eq_ignore_ascii_case("$expand") && v.eq_ignore_ascii_case("instanceView"))
                || (k.eq_ignore_ascii_case("statusOnly") && v.eq_ignore_ascii_case("true"))
        })
    }
}

pub fn method_not_allowed(method: &Method) -> ArmError {
    ArmError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("The requested resource does not support http method '{method}'."),
    )
}

/// How soon to poll again: `retry-after-ms` (azcore and azure-core read it first) and the
/// whole-second `Retry-After` for clients that only know that one.
pub fn poll_headers(headers: &mut HeaderMap) {
    headers.insert("retry-after", HeaderValue::from_static("1"));
    headers.insert("retry-after-ms", HeaderValue::from_static("100"));
}

/// The `Azure-AsyncOperation` (and, for deletes, `Location`) headers of an operation.
pub fn async_headers(
    s: &Shared,
    headers: &mut HeaderMap,
    namespace: &str,
    op: &str,
    api_version: &str,
    location: bool,
) {
    let prefix = format!(
        "{}/subscriptions/{}/providers/{namespace}/locations/{}",
        s.base, s.config.subscription_id, s.config.location
    );
    let aso = format!("{prefix}/operations/{op}?api-version={api_version}");
    if let Ok(v) = HeaderValue::from_str(&aso) {
        headers.insert("azure-asyncoperation", v);
    }
    if location {
        let loc = format!("{prefix}/operationResults/{op}?api-version={api_version}");
        if let Ok(v) = HeaderValue::from_str(&loc) {
            headers.insert("location", v);
        }
    }
    // No hint when the first poll will find the operation ended: azcore waits an initial
    // `Retry-After` before its first poll (`runtime/poller.go` `PollUntilDone`), so a
    // hint on an operation the mock settles at once would only add its length to every
    // PUT and DELETE.
    if !s.cloud().op_ends_at_first_poll(op) {
        poll_headers(headers);
    }
}
