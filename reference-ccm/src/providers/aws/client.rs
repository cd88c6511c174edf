//! The AWS query-protocol client: form-encoded `POST /` with `Action` and `Version`,
//! SigV4-signed, XML answers, AWS error envelopes decoded, throttling and server errors
//! retried with exponential backoff.
//!
//! Exists instead of `aws-sdk-*` (see the provider's module docs). Retries follow the
//! spirit of `kubernetes/cloud-provider-aws` `pkg/providers/v1/retry_handler.go` (the SDK
//! standard retryer plus a delay that grows on `RequestLimitExceeded`): throttling codes,
//! 5xx and transport errors are retried; other 4xx are returned at once.

use std::time::Duration;

use super::config::AwsConfig;
use super::sigv4::{self, Credentials};
use crate::providers::xml::{self, Element};

/// Which API a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Ec2,
    /// ELB classic.
    Elb,
    /// ELBv2 (NLB/ALB); same endpoint and signing name as ELB classic.
    Elbv2,
}

impl Api {
    fn version(self) -> &'static str {
        match self {
            Api::Ec2 => "2016-11-15",
            Api::Elb => "2012-06-01",
            Api::Elbv2 => "2015-12-01",
        }
    }
}

/// Failures of one call, after retries.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service answered with an AWS error envelope.
    #[error("{action}: {code}: {message} (HTTP {status})")]
    Api {
        action: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{action}: {reason}")]
    Transport { action: String, reason: String },
    #[error("{action}: undecodable answer: {reason}")]
    Decode { action: String, reason: String },
    #[error("credentials: {0}")]
    Credentials(String),
}

impl ClientError {
    /// The AWS error code, if the service sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Error codes AWS uses for throttling (aws-sdk-go-v2 `retry.DefaultThrottleErrorCodes`).
const THROTTLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

fn retryable(status: u16, code: &str) -> bool {
    status >= 500
        || THROTTLE_CODES.contains(&code)
        || matches!(
            code,
            "InternalError" | "InternalFailure" | "ServiceUnavailable"
        )
}

/// How often and how long to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 6,
            base: Duration::from_millis(100),
            max: Duration::from_secs(3),
        }
    }
}

impl RetryPolicy {
    fn delay(&self, attempt: u32) -> Duration {
        let d = self.base.saturating_mul(1u32 << attempt.min(16));
        d.min(self.max)
    }
}

#[derive(Debug, Clone)]
struct Endpoint {
    url: String,
    host: String,
    signing_region: String,
    signing_name: String,
}

impl Endpoint {
    fn new(url: String, signing_region: String, signing_name: String) -> Self {
        let host = url
            .split_once("://")
            .map_or(url.as_str(), |(_, r)| r)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        Self {
            url,
            host,
            signing_region,
            signing_name,
        }
    }
}

/// A signed query-protocol client for EC2 and ELB.
#[derive(Debug, Clone)]
pub struct AwsClient {
    http: reqwest::Client,
    creds: Credentials,
    ec2: Endpoint,
    elb: Endpoint,
    retry: RetryPolicy,
}

impl AwsClient {
    /// Endpoints from `[ServiceOverride]` (else AWS's public ones for the region),
    /// credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
    pub fn from_config(config: &AwsConfig) -> Result<Self, ClientError> {
        let key = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default();
        let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_default();
        if key.is_empty() || secret.is_empty() {
            return Err(ClientError::Credentials(
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set".into(),
            ));
        }
        Self::new(
            config,
            Credentials {
                access_key_id: key,
                secret_access_key: secret,
            },
        )
    }

    pub fn new(config: &AwsConfig, creds: Credentials) -> Result<Self, ClientError> {
        let endpoint = |service: &str| match config.override_for(service) {
            Some(o) => Endpoint::new(
                o.url.trim_end_matches('/').to_owned(),
                o.signing_region.clone(),
                if o.signing_name.is_empty() {
                    service.to_owned()
                } else {
                    o.signing_name.clone()
                },
            ),
            None => Endpoint::new(
                format!("https://{service}.{}.amazonaws.com", config.region),
                config.region.clone(),
                service.to_owned(),
            ),
        };
        // One rustls provider per process (ring); a no-op when already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ClientError::Transport {
                action: "building HTTP client".into(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            http,
            creds,
            ec2: endpoint("ec2"),
            elb: endpoint("elasticloadbalancing"),
            retry: RetryPolicy::default(),
        })
    }

    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
    }

    /// Calls `action` with `params`, retrying throttling and server errors.
    pub async fn call(
        &self,
        api: Api,
        action: &str,
        params: &[(String, String)],
    ) -> Result<Element, ClientError> {
        let mut attempt = 0;
        loop {
            match self.call_once(api, action, params).await {
                Err(e) if attempt + 1 < self.retry.attempts && should_retry(&e) => {
                    let delay = self.retry.delay(attempt);
                    tracing::debug!(action, error = %e, ?delay, "retrying AWS call");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn call_once(
        &self,
        api: Api,
        action: &str,
        params: &[(String, String)],
    ) -> Result<Element, ClientError> {
        let endpoint = match api {
            Api::Ec2 => &self.ec2,
            Api::Elb | Api::Elbv2 => &self.elb,
        };
        let mut body = format!(
            "Action={}&Version={}",
            sigv4::uri_encode(action),
            api.version()
        );
        for (k, v) in params {
            body.push('&');
            body.push_str(&sigv4::uri_encode(k));
            body.push('=');
            body.push_str(&sigv4::uri_encode(v));
        }
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let amz_date = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string();
        let headers = [
            ("content-type", content_type),
            ("host", endpoint.host.as_str()),
            ("x-amz-date", amz_date.as_str()),
        ];
        let auth = sigv4::authorization(
            &self.creds,
            &endpoint.signing_region,
            &endpoint.signing_name,
            &amz_date,
            &sigv4::Request {
                method: "POST",
                path: "/",
                query: "",
                headers: &headers,
                body: body.as_bytes(),
            },
        );
        let transport = |e: reqwest::Error| ClientError::Transport {
            action: action.to_owned(),
            reason: e.to_string(),
        };
        let resp = self
            .http
            .post(format!("{}/", endpoint.url))
            .header("content-type", content_type)
            .header("x-amz-date", &amz_date)
            .header("authorization", auth)
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(transport)?;
        let parsed = xml::parse(&text);
        if !(200..300).contains(&status) {
            let (code, message) = match &parsed {
                // EC2: <Response><Errors><Error>; ELB: <ErrorResponse><Error>.
                Ok(root) => {
                    let err = root
                        .path(&["Errors", "Error"])
                        .or_else(|| root.child("Error"));
                    (
                        err.map(|e| e.text_at(&["Code"]).to_owned())
                            .unwrap_or_default(),
                        err.map(|e| e.text_at(&["Message"]).to_owned())
                            .unwrap_or_default(),
                    )
                }
                Err(_) => (String::new(), text.chars().take(200).collect()),
            };
            return Err(ClientError::Api {
                action: action.to_owned(),
                status,
                code,
                message,
            });
        }
        parsed.map_err(|e| ClientError::Decode {
            action: action.to_owned(),
            reason: e.to_string(),
        })
    }
}

fn should_retry(e: &ClientError) -> bool {
    match e {
        ClientError::Api { status, code, .. } => retryable(*status, code),
        ClientError::Transport { .. } => true,
        _ => false,
    }
}

/// `Prefix.1`, `Prefix.2`, ... for a list parameter.
pub fn list_params(prefix: &str, values: &[String]) -> Vec<(String, String)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("{prefix}.{}", i + 1), v.clone()))
        .collect()
}

/// EC2 `Filter.N.Name` / `Filter.N.Value.M` parameters.
pub fn filter_params(filters: &[(&str, Vec<String>)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, (name, values)) in filters.iter().enumerate() {
        let n = i + 1;
        out.push((format!("Filter.{n}.Name"), (*name).to_owned()));
        for (j, v) in values.iter().enumerate() {
            out.push((format!("Filter.{n}.Value.{}", j + 1), v.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        assert!(p.delay(1) > p.delay(0));
        assert_eq!(p.delay(30), p.max);
        assert!(retryable(503, "RequestLimitExceeded"));
        assert!(retryable(400, "Throttling"));
        assert!(!retryable(400, "InvalidInstanceID.NotFound"));
        assert!(!retryable(401, "AuthFailure"));
    }

    #[test]
    fn list_and_filter_params() {
        let f = filter_params(&[("private-dns-name", vec!["a".into(), "b".into()])]);
        assert_eq!(f[0], ("Filter.1.Name".into(), "private-dns-name".into()));
        assert_eq!(f[2], ("Filter.1.Value.2".into(), "b".into()));
        assert_eq!(
            list_params("InstanceId", &["i-1".into()])[0].0,
            "InstanceId.1"
        );
    }
}
