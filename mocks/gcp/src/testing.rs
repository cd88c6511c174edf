//! Test support: a router over a fresh mock (no socket), the Compute API's request
//! shapes (tokens, authorized calls, waited operations) and Google's error envelope over
//! the shared request helper ([`mock_cloud::testing`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
pub(crate) use mock_cloud::testing::Reply;
use serde_json::Value;

use crate::{Admin, Config, Shared, build_shared, router};

pub(crate) const BASE: &str = "http://127.0.0.1:4080";
pub(crate) const P: &str = "/compute/v1/projects/ccm-conformance";

pub(crate) struct Mock {
    pub router: Router,
    pub shared: Arc<Shared>,
}

/// Google's error envelope, read from a reply.
pub(crate) trait ReplyExt {
    /// The envelope's `(code, reason)`.
    fn reason(&self) -> (u16, Option<&str>);
}

impl ReplyExt for Reply {
    fn reason(&self) -> (u16, Option<&str>) {
        (
            self.status.as_u16(),
            self.body["error"]["errors"][0]["reason"].as_str(),
        )
    }
}

impl Mock {
    pub fn new(config: Config) -> Mock {
        let shared = Arc::new(build_shared(config, BASE.to_string()).expect("seed"));
        Mock {
            router: router(shared.clone()),
            shared,
        }
    }

    pub fn seeded(nodes: usize) -> Mock {
        Mock::new(Config {
            nodes,
            ..Config::default()
        })
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    pub async fn send(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Reply {
        mock_cloud::testing::send(&self.router, method, uri, headers, body).await
    }

    pub async fn token(&self) -> String {
        let r = self
            .send(
                "POST",
                "/token",
                &[("content-type", "application/x-www-form-urlencoded")],
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=x.y.z",
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        r.body["access_token"].as_str().expect("token").to_string()
    }

    /// An authorized Compute call; `rel` is relative to `/compute/v1/projects/<p>/`.
    pub async fn api(&self, method: &str, rel: &str, token: &str, body: Option<Value>) -> Reply {
        let auth = format!("Bearer {token}");
        let body = body
            .map(|b| Body::from(b.to_string()))
            .unwrap_or_else(Body::empty);
        self.send(
            method,
            &format!("{P}/{rel}"),
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await
    }

    /// A mutation that must be accepted; waits for its operation and returns it.
    pub async fn done(&self, method: &str, rel: &str, token: &str, body: Option<Value>) -> Value {
        let r = self.api(method, rel, token, body).await;
        assert_eq!(r.status, StatusCode::OK, "{method} {rel}: {:?}", r.body);
        assert_eq!(r.body["kind"], "compute#operation");
        let link = r.body["selfLink"].as_str().expect("selfLink").to_string();
        let path = link.strip_prefix(BASE).expect("base").to_string();
        let w = self
            .send(
                "POST",
                &format!("{path}/wait"),
                &[("authorization", &format!("Bearer {token}"))],
                "",
            )
            .await;
        assert_eq!(w.status, StatusCode::OK, "{:?}", w.body);
        assert_eq!(w.body["status"], "DONE", "{:?}", w.body);
        assert!(w.body.get("error").is_none(), "{:?}", w.body);
        w.body
    }
}
