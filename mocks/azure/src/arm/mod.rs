//! Azure Resource Manager's protocol, apart from any resource's state: the error
//! envelope, `api-version` checks, etags and conditional requests, paging with
//! `nextLink`, and the shape of ARM paths ([`path`]). Asynchronous operations live in
//! [`ops`].
//!
//! Behaviour matched (read upstream; nothing copied):
//! - errors are `{"error":{"code","message"}}` (azure-sdk-for-go `sdk/azcore/runtime`
//!   `NewResponseError` reads `error.code`; cloud-provider-azure `pkg/azclient` retries on
//!   the code and status);
//! - a missing `api-version` is `MissingApiVersionParameter`, a malformed one
//!   `InvalidApiVersionParameter`, both 400 (the codes ARM answers; azure-sdk-for-go
//!   recordings under `sdk/resourcemanager/*/testdata`);
//! - etags are `W/"<uuid>"`, `If-Match` mismatch is 412 `PreconditionFailed`
//!   (cloud-provider-azure `pkg/azclient/*/` sends `If-Match` on load balancer and NSG PUTs);
//! - lists are `{"value":[...],"nextLink":URL}` (azcore `runtime.Pager` follows `nextLink`).

pub mod ops;
pub mod path;
pub(crate) mod request;
pub(crate) mod router;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An ARM error: the status and the `{"error":{"code","message"}}` envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// Inner errors (`error.details[]`), as `(code, message)`.
    pub details: Vec<(String, String)>,
}

impl ArmError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// Adds an inner error (`error.details[]`).
    pub fn with_detail(mut self, code: &str, message: impl Into<String>) -> Self {
        self.details.push((code.to_string(), message.into()));
        self
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// `ResourceNotFound` for an ARM resource type and name, worded as ARM words it.
    pub fn not_found(arm_type: &str, name: &str, rg: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!("The Resource '{arm_type}/{name}' under resource group '{rg}' was not found."),
        )
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if !self.details.is_empty() {
            body["error"]["details"] = self
                .details
                .iter()
                .map(|(code, message)| json!({"code": code, "message": message}))
                .collect();
        }
        body
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            // ARM's throttling answer names when to come back (azcore's retry policy and
            // cloud-provider-azure's `pkg/azclient/policy/retryaftermin` read it).
            headers.insert("retry-after", HeaderValue::from_static("1"));
        }
        response
    }
}

/// An `api-version` ARM accepts: `YYYY-MM-DD` with an optional `-preview` (or any
/// `-suffix` of letters), a plausible date.
pub fn valid_api_version(v: &str) -> bool {
    let (date, suffix) = match v.get(10..) {
        Some("") => (v, None),
        Some(rest) => match rest.strip_prefix('-') {
            Some(s) => (&v[..10], Some(s)),
            None => return false,
        },
        None => return false,
    };
    if let Some(s) = suffix
        && (s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        return false;
    }
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let s = date.get(r)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    match (num(0..4), num(5..7), num(8..10)) {
        (Some(y), Some(m), Some(d)) => y >= 2014 && (1..=12).contains(&m) && (1..=31).contains(&d),
        _ => false,
    }
}

/// The query's `api-version`, checked: missing and malformed ones are ARM's 400s.
pub fn api_version(query: &str) -> Result<String, ArmError> {
    let version = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k.eq_ignore_ascii_case("api-version"))
        .map(|(_, v)| v.into_owned());
    match version {
        None => Err(ArmError::bad_request(
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )),
        Some(v) if !valid_api_version(&v) => Err(ArmError::bad_request(
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{v}' is invalid. The supported versions are of the form 'YYYY-MM-DD' or 'YYYY-MM-DD-preview'."
            ),
        )),
        Some(v) => Ok(v),
    }
}

/// A fresh weak etag, as ARM's network resources carry them.
pub fn new_etag() -> String {
    format!("W/\"{}\"", uuid::Uuid::new_v4())
}

/// Checks `If-Match` / `If-None-Match` against the current etag (`None`: no resource).
/// ARM answers 412 `PreconditionFailed` when an `If-Match` names another etag (or the
/// resource is missing) and when `If-None-Match: *` meets an existing resource.
pub fn check_preconditions(headers: &HeaderMap, current: Option<&str>) -> Result<(), ArmError> {
    let failed = |message: String| {
        ArmError::new(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            message,
        )
    };
    if let Some(wanted) = headers.get("if-match").and_then(|v| v.to_str().ok()) {
        let wanted = wanted.trim();
        let ok = match current {
            None => false,
            Some(_) if wanted == "*" => true,
            Some(etag) => wanted.split(',').any(|w| same_etag(w.trim(), etag)),
        };
        if !ok {
            // Real ARM nests the reason (cloud-provider-azure
            // pkg/azclient/loadbalancerclient/testdata/AZURECLOUD.yaml, the 412 reply).
            return Err(failed("Precondition failed.".to_string()).with_detail(
                "PreconditionFailedEtagMismatch",
                format!(
                    "Etag provided in if-match header {wanted} does not match etag {} of the resource.",
                    current.unwrap_or("(none: the resource does not exist)")
                ),
            ));
        }
    }
    if let Some(none) = headers.get("if-none-match").and_then(|v| v.to_str().ok())
        && current.is_some()
        && (none.trim() == "*" || current.is_some_and(|c| same_etag(none.trim(), c)))
    {
        return Err(failed(
            "Precondition failed: the resource already exists (If-None-Match).".to_string(),
        ));
    }
    Ok(())
}

/// Etags compare with or without the weak prefix and quotes (clients echo either).
fn same_etag(a: &str, b: &str) -> bool {
    fn bare(s: &str) -> &str {
        s.trim_start_matches("W/").trim_matches('"')
    }
    bare(a) == bare(b)
}

/// One page of a list, ARM style: `value` and, when more remain, a `nextLink` carrying
/// the same path and api-version with `$skipToken`.
pub fn page(
    items: Vec<Value>,
    query: &str,
    base_and_path: &str,
    page_size: usize,
) -> Result<Value, ArmError> {
    let skip = match form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k.eq_ignore_ascii_case("$skipToken"))
    {
        None => 0,
        Some((_, v)) => v.parse::<usize>().map_err(|_| {
            ArmError::bad_request(
                "InvalidSkipToken",
                format!("The skip token '{v}' is invalid."),
            )
        })?,
    };
    let page_size = page_size.max(1);
    let total = items.len();
    let value: Vec<Value> = items.into_iter().skip(skip).take(page_size).collect();
    let mut out = json!({ "value": value });
    if skip.saturating_add(page_size) < total {
        let kept: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .filter(|(k, _)| !k.eq_ignore_ascii_case("$skipToken"))
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &kept {
            q.append_pair(k, v);
        }
        q.append_pair("$skipToken", &(skip + page_size).to_string());
        out["nextLink"] = Value::String(format!("{base_and_path}?{}", q.finish()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions() {
        for ok in [
            "2025-04-01",
            "2019-05-01",
            "2024-03-01-preview",
            "2023-01-01-beta",
        ] {
            assert!(valid_api_version(ok), "{ok}");
        }
        for bad in [
            "",
            "2025",
            "2025-4-01",
            "2025-13-01",
            "2025-04-00",
            "2025-04-01-",
            "2025-04-01x",
            "abcd-ef-gh",
            "2025-04-01-pre1",
            "1999-01-01",
        ] {
            assert!(!valid_api_version(bad), "{bad}");
        }
        assert_eq!(
            api_version("x=1").unwrap_err().code,
            "MissingApiVersionParameter"
        );
        assert_eq!(
            api_version("api-version=yesterday").unwrap_err().code,
            "InvalidApiVersionParameter"
        );
        assert_eq!(
            api_version("api-version=2025-04-01").ok().as_deref(),
            Some("2025-04-01")
        );
    }

    #[test]
    fn preconditions() {
        let etag = "W/\"abc\"";
        let h = |k: &str, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
            m
        };
        assert!(check_preconditions(&HeaderMap::new(), None).is_ok());
        assert!(check_preconditions(&h("if-match", "W/\"abc\""), Some(etag)).is_ok());
        assert!(check_preconditions(&h("if-match", "\"abc\""), Some(etag)).is_ok());
        assert!(check_preconditions(&h("if-match", "*"), Some(etag)).is_ok());
        let e = check_preconditions(&h("if-match", "W/\"old\""), Some(etag)).unwrap_err();
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::PRECONDITION_FAILED, "PreconditionFailed")
        );
        assert!(check_preconditions(&h("if-match", "*"), None).is_err());
        assert!(check_preconditions(&h("if-none-match", "*"), Some(etag)).is_err());
        assert!(check_preconditions(&h("if-none-match", "*"), None).is_ok());
    }

    #[test]
    fn paging_links_until_the_end() {
        let items: Vec<Value> = (0..7).map(|i| json!(i)).collect();
        let p = page(items.clone(), "api-version=2025-01-01", "https://h/x", 3).expect("page");
        assert_eq!(p["value"], json!([0, 1, 2]));
        let next = p["nextLink"].as_str().expect("next");
        assert_eq!(next, "https://h/x?api-version=2025-01-01&%24skipToken=3");
        let q = next.split_once('?').expect("query").1;
        let p = page(items.clone(), q, "https://h/x", 3).expect("page");
        assert_eq!(p["value"], json!([3, 4, 5]));
        let q = p["nextLink"]
            .as_str()
            .expect("next")
            .split_once('?')
            .expect("q")
            .1
            .to_string();
        let p = page(items.clone(), &q, "https://h/x", 3).expect("page");
        assert_eq!(p["value"], json!([6]));
        assert!(p.get("nextLink").is_none());
        assert!(page(items, "$skipToken=x", "h", 3).is_err());
    }
}
