//! Test support: a router over a fresh mock (no socket), ARM's request shapes (tokens,
//! resource paths, authorized calls) over the shared request helper
//! ([`mock_cloud::testing`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
pub(crate) use mock_cloud::testing::Reply;
use serde_json::Value;

use crate::{Admin, Config, Shared, build_shared, router};

pub(crate) const BASE: &str = "https://127.0.0.1:4443";
pub(crate) const API: &str = "api-version=2025-05-01";

pub(crate) struct Mock {
    pub router: Router,
    pub shared: Arc<Shared>,
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
            client_secret: "secret".into(),
            ..Config::default()
        })
    }

    pub fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    /// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{rest}`
    pub fn rg_path(&self, rest: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{rest}",
            self.shared.config.subscription_id, self.shared.config.resource_group
        )
    }

    /// A resource id (no query).
    pub fn id(&self, rest: &str) -> String {
        self.rg_path(rest)
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

    /// A token for ARM.
    pub async fn token(&self) -> String {
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope=https%3A%2F%2Fmanagement.core.windows.net%2F.default",
            self.shared.config.client_id, self.shared.config.client_secret
        );
        let r = self
            .send(
                "POST",
                &format!("/{}/oauth2/v2.0/token", self.shared.config.tenant_id),
                &[("content-type", "application/x-www-form-urlencoded")],
                form,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["access_token"].as_str().expect("token").to_string()
    }

    /// An authorized ARM call; `uri` gets the api-version appended when it has none.
    pub async fn arm(&self, method: &str, uri: &str, token: &str, body: Option<Value>) -> Reply {
        self.arm_with(method, uri, token, body, &[]).await
    }

    pub async fn arm_with(
        &self,
        method: &str,
        uri: &str,
        token: &str,
        body: Option<Value>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let uri = if uri.contains("api-version") {
            uri.to_string()
        } else if uri.contains('?') {
            format!("{uri}&{API}")
        } else {
            format!("{uri}?{API}")
        };
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        let body = body
            .map(|b| Body::from(b.to_string()))
            .unwrap_or_else(Body::empty);
        self.send(method, &uri, &headers, body).await
    }
}
