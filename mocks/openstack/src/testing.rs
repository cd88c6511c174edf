//! Test support: a router over a fresh mock (no socket), OpenStack's request shapes
//! (tokens, JSON calls) over the shared request helper ([`mock_cloud::testing`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
pub(crate) use mock_cloud::testing::Reply;
use serde_json::{Value, json};

use crate::{Admin, Config, Shared, build_shared, router};

pub(crate) const BASE: &str = "http://127.0.0.1:5000";

pub(crate) struct Mock {
    pub router: Router,
    pub shared: Arc<Shared>,
}

pub(crate) fn config(nodes: usize) -> Config {
    Config {
        nodes,
        password: "secret".into(),
        ..Config::default()
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
        Mock::new(config(nodes))
    }

    pub fn with_ttl(ttl: Duration) -> Mock {
        Mock::new(Config {
            token_ttl: ttl,
            ..config(1)
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

    /// A JSON call with a token, as the services' tests make them (`Value::Null` = no body).
    pub async fn call(&self, method: &str, uri: &str, token: &str, body: Value) -> Reply {
        let body = if body.is_null() {
            Body::empty()
        } else {
            Body::from(body.to_string())
        };
        self.send(
            method,
            uri,
            &[
                ("x-auth-token", token),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await
    }

    pub async fn get(&self, uri: &str, token: &str) -> Reply {
        self.send("GET", uri, &[("x-auth-token", token)], Body::empty())
            .await
    }

    pub async fn get_with(&self, uri: &str, token: &str, headers: &[(&str, &str)]) -> Reply {
        let mut all = vec![("x-auth-token", token)];
        all.extend_from_slice(headers);
        self.send("GET", uri, &all, Body::empty()).await
    }

    pub async fn admin_json(&self, method: &str, uri: &str, body: Value) -> Reply {
        self.send(
            method,
            uri,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    /// A password, project-scoped token request as gophercloud sends it.
    pub fn password_auth(&self, password: &str) -> Value {
        json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": self.shared.config.username, "domain": {"name": self.shared.config.domain_name},
                "password": password}}},
            "scope": {"project": {"name": self.shared.config.project_name, "domain": {"name": self.shared.config.domain_name}}}
        }})
    }

    pub async fn auth(&self, body: Value) -> Reply {
        self.send(
            "POST",
            "/identity/v3/auth/tokens",
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    /// A valid token.
    pub async fn token(&self) -> String {
        let password = self.shared.config.password.clone();
        let reply = self.auth(self.password_auth(&password)).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .expect("X-Subject-Token")
            .to_string()
    }
}
