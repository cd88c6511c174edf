//! Test support: a router over a fresh mock (no socket), vSphere's request shapes (SOAP
//! envelopes, a logged-in session) over the shared request helper
//! ([`mock_cloud::testing`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};

use crate::{Admin, Config, Shared, VmInfo, build_shared, router};

pub(crate) struct Env {
    pub router: Router,
    pub shared: Arc<Shared>,
}

pub(crate) fn env_with(config: Config) -> Env {
    let shared = Arc::new(build_shared(config, "https://127.0.0.1:1".into()).expect("seed"));
    Env {
        router: router(shared.clone()),
        shared,
    }
}

pub(crate) fn env() -> Env {
    env_with(Config {
        password: "pw".into(),
        datacenters: vec!["DC0".into(), "DC1".into()],
        ..Default::default()
    })
}

pub(crate) fn envelope(call: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soapenv:Body>{call}</soapenv:Body></soapenv:Envelope>"#
    )
}

impl Env {
    pub(crate) async fn raw(&self, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
        let r = mock_cloud::testing::oneshot(&self.router, req).await;
        (r.status, r.headers, r.text)
    }

    pub(crate) async fn soap(&self, cookie: Option<&str>, call: &str) -> (StatusCode, String) {
        let mut req = Request::post("/sdk")
            .header("content-type", "text/xml")
            .header("soapaction", "urn:vim25/8.0.3.0");
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, format!("vmware_soap_session=\"{c}\""));
        }
        let (s, _, b) = self
            .raw(req.body(Body::from(envelope(call))).expect("req"))
            .await;
        (s, b)
    }

    pub(crate) async fn login(&self) -> String {
        let req = Request::post("/sdk")
            .header("soapaction", "urn:vim25/8.0.3.0")
            .body(Body::from(envelope(
                r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#,
            )))
            .expect("req");
        let (s, h, b) = self.raw(req).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let cookie = h
            .get(header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .expect("cookie")
            .to_string();
        assert!(cookie.starts_with("vmware_soap_session=\""), "{cookie}");
        cookie
            .split('"')
            .nth(1)
            .expect("quoted session id")
            .to_string()
    }

    pub(crate) fn vm(&self, name: &str) -> VmInfo {
        Admin {
            shared: self.shared.clone(),
        }
        .vm_by_name(name)
        .expect("seeded vm")
    }

    pub(crate) fn dc(&self, i: usize) -> String {
        self.shared.inventory().datacenters[i].id.clone()
    }
}
