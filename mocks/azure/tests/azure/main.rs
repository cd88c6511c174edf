//! The integration tests of `mock-azure`, one binary with a module per area (as the
//! other mocks do): `python` (the Azure SDK for Python as judge), `dataplane` (real
//! sockets through load balancer frontends), `start` (the mock as `ccm-conformance mock
//! azure` runs it: ready info, HTTPS, admin API).

mod dataplane;
mod python;
mod start;

use std::time::Duration;

use anyhow::{Context, Result, bail};
use mock_azure::{AzureMock, ReadyInfo};
use serde_json::Value;

/// An HTTPS client trusting the mock's CA, with a token for ARM.
pub struct Arm {
    pub http: reqwest::Client,
    pub ready: ReadyInfo,
    pub token: String,
}

pub const API: &str = "api-version=2025-05-01";

impl Arm {
    pub async fn new(mock: &AzureMock) -> Result<Arm> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ready = mock.ready_info();
        let pem = std::fs::read(&ready.ca_file).context("CA file")?;
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem)?)
            .build()?;
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", ready.client_id.as_str()),
            ("client_secret", ready.client_secret.as_str()),
            ("scope", "https://management.core.windows.net//.default"),
        ];
        let body = form_body(&form);
        let token: Value = http
            .post(format!(
                "{}/{}/oauth2/v2.0/token",
                ready.endpoint, ready.tenant_id
            ))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await?
            .json()
            .await?;
        let token = token["access_token"]
            .as_str()
            .context("access_token")?
            .to_string();
        Ok(Arm { http, ready, token })
    }

    /// `{endpoint}/subscriptions/{sub}/resourceGroups/{rg}/providers/{rest}?api-version`
    pub fn url(&self, rest: &str) -> String {
        format!("{}{}?{API}", self.ready.endpoint, self.id(rest))
    }

    pub fn id(&self, rest: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{rest}",
            self.ready.subscription_id, self.ready.resource_group
        )
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        rest: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, self.url(rest))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// PUT and wait until the resource's provisioning state is Succeeded.
    pub async fn put(&self, rest: &str, body: &Value) -> Result<Value> {
        let (status, answer) = self.call(reqwest::Method::PUT, rest, Some(body)).await?;
        if status != 200 && status != 201 {
            bail!("PUT {rest}: {status} {answer}");
        }
        eventually(&format!("{rest} Succeeded"), || async {
            let (_, v) = self.call(reqwest::Method::GET, rest, None).await.ok()?;
            (v["properties"]["provisioningState"] == "Succeeded").then_some(v)
        })
        .await
    }
}

fn form_body(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Polls `f` until it gives a value, for at most 10 s.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
