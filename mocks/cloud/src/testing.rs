//! Test support the mocks share, behind the `testing` feature (each mock enables it for
//! its own tests in `[dev-dependencies]`): one request through a router without a socket,
//! the answer as tests read it, and the check every [`MockCloud`] passes (the admin router
//! it hands out serves and journals itself). What is a cloud's own (its seeded test
//! config, tokens, signatures and envelopes) stays in that mock's `testing` module.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::mock::MockCloud;

/// An answer as tests read it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body as JSON: a JSON string of the text when it is not JSON, null when empty.
    pub body: Value,
    /// The body as text (lossy UTF-8).
    pub text: String,
}

impl Reply {
    /// Reads a whole response.
    pub async fn read(response: Response) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(text.clone()))
        };
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// `method uri` with these headers and body.
pub fn request(
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder.body(body.into()).expect("request")
}

/// Sends `req` through `router` (no socket) and reads the whole answer.
pub async fn oneshot(router: &Router, req: Request<Body>) -> Reply {
    let response = router.clone().oneshot(req).await.expect("infallible");
    Reply::read(response).await
}

/// [`request`], then [`oneshot`].
pub async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Reply {
    oneshot(router, request(method, uri, headers, body)).await
}

/// Checks the admin router `MockCloud` hands out: `GET path` (one of its routes, relative
/// to `/admin`) answers 200 from the mock's own state and is journaled as service `admin`
/// with its `/admin` path. Shuts the mock down.
pub async fn check_admin_router<M: MockCloud>(mock: M, path: &str) {
    let journal = mock.admin_api().journal;
    let reply = send(&mock.admin_router(), "GET", path, &[], Body::empty()).await;
    assert_eq!(reply.status, StatusCode::OK, "GET {path}: {}", reply.text);
    let last = journal.entries().pop().expect("an entry");
    assert_eq!(
        (
            last.service.as_str(),
            last.method.as_str(),
            last.path.as_str(),
            last.kind
        ),
        (
            "admin",
            "GET",
            format!("/admin{path}").as_str(),
            crate::CallKind::Other
        )
    );
    mock.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replies_read_json_text_and_empty_bodies() {
        let router = Router::new()
            .route("/json", axum::routing::get(|| async { r#"{"a":1}"# }))
            .route("/text", axum::routing::get(|| async { "plain" }))
            .route(
                "/empty",
                axum::routing::post(|| async { (StatusCode::NO_CONTENT, [("x-id", "7")]) }),
            );
        let r = send(&router, "GET", "/json", &[], Body::empty()).await;
        assert_eq!((r.status, r.body["a"].as_i64()), (StatusCode::OK, Some(1)));
        let r = send(&router, "GET", "/text", &[("accept", "text/plain")], "").await;
        assert_eq!((r.body.as_str(), r.text.as_str()), (Some("plain"), "plain"));
        let r = send(&router, "POST", "/empty", &[], Body::empty()).await;
        assert_eq!(
            (r.status, r.body.is_null(), r.header("x-id")),
            (StatusCode::NO_CONTENT, true, Some("7"))
        );
    }
}
