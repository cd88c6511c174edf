//! Test support: a router over a fresh mock (no socket), AWS's request shapes (signed
//! query-protocol calls, admin JSON) over the shared request helper
//! ([`mock_cloud::testing`]), and XML answers read by tag.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use serde_json::Value;

use crate::{Admin, Config, Shared, build_shared, router, sigv4};

pub(crate) const EC2: &str = "2016-11-15";
pub(crate) const ELB: &str = "2012-06-01";
pub(crate) const ELBV2: &str = "2015-12-01";

pub(crate) struct Mock {
    pub shared: Arc<Shared>,
    pub router: Router,
}

/// An answer with its body as text (XML).
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: String,
}

impl Reply {
    /// Text of every `<tag>` element, in order.
    pub(crate) fn all(&self, tag: &str) -> Vec<String> {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let mut out = Vec::new();
        let mut rest = self.body.as_str();
        while let Some(i) = rest.find(&open) {
            rest = &rest[i + open.len()..];
            let Some(j) = rest.find(&close) else { break };
            out.push(rest[..j].to_string());
            rest = &rest[j..];
        }
        out
    }

    pub(crate) fn one(&self, tag: &str) -> String {
        self.all(tag).into_iter().next().unwrap_or_default()
    }

    pub(crate) fn code(&self) -> String {
        self.one("Code")
    }
}

impl Mock {
    pub(crate) fn with(config: Config) -> Mock {
        let shared = Arc::new(build_shared(config, "http://127.0.0.1:1".into()).expect("seed"));
        let router = router(shared.clone());
        Mock { shared, router }
    }

    pub(crate) fn seeded(nodes: usize) -> Mock {
        Self::with(Config {
            nodes,
            ..Config::default()
        })
    }

    pub(crate) fn admin(&self) -> Admin {
        Admin {
            shared: self.shared.clone(),
        }
    }

    pub(crate) async fn raw(&self, req: Request<Body>) -> Reply {
        let r = mock_cloud::testing::oneshot(&self.router, req).await;
        Reply {
            status: r.status,
            body: r.text,
        }
    }

    /// A signed form POST with `key` and scope `service`.
    pub(crate) async fn signed(
        &self,
        body: String,
        key: (&str, &str),
        region: &str,
        service: &str,
    ) -> Reply {
        let uri: Uri = "/".parse().expect("uri");
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:1"));
        headers.insert(
            "content-type",
            HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        sigv4::sign(
            &Method::POST,
            &uri,
            &mut headers,
            body.as_bytes(),
            key,
            region,
            service,
        );
        let mut req = Request::builder().method("POST").uri(uri);
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        self.raw(req.body(Body::from(body)).expect("request")).await
    }

    pub(crate) async fn call(&self, version: &str, action: &str, params: &[(&str, &str)]) -> Reply {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", action)
            .append_pair("Version", version);
        for (k, v) in params {
            form.append_pair(k, v);
        }
        let c = &self.shared.config;
        let service = if version == EC2 {
            "ec2"
        } else {
            "elasticloadbalancing"
        };
        self.signed(
            form.finish(),
            (&c.access_key_id.clone(), &c.secret_access_key.clone()),
            &c.region.clone(),
            service,
        )
        .await
    }

    pub(crate) async fn ec2(&self, action: &str, params: &[(&str, &str)]) -> Reply {
        self.call(EC2, action, params).await
    }

    pub(crate) async fn elb(&self, action: &str, params: &[(&str, &str)]) -> Reply {
        self.call(ELB, action, params).await
    }

    pub(crate) async fn admin_json(
        &self,
        method: &str,
        path: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let r = self.raw(req).await;
        let v = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        (r.status, v)
    }
}
