//! Changing the cloud behind the CCM's back the way an operator would: with the cloud's
//! own API, as a client the journal records like any other, not through the mock's admin
//! back door. Cases use it to check that a CCM notices (or, upstream-faithfully, does not
//! notice) state it did not make (ccm-behaviour.md LB-21, LB-26), and the upgrade suite
//! uses the AWS form ([`AwsQuery`]) to make what an in-tree provider left behind.

use std::time::Duration;

use serde_json::json;

use crate::case::CaseError;
use crate::cloud::CloudControl;
use crate::ensure;

/// Deletes load balancer `id` with the cloud's own API (OpenStack: Keystone password auth,
/// then Octavia `DELETE …?cascade=true`; AWS: `DeleteLoadBalancer`, of ELB classic for a
/// name, of ELBv2 for an ARN, as `aws elb|elbv2 delete-load-balancer` would). Skips the
/// case for clouds not supported yet.
pub async fn delete_load_balancer(cloud: &CloudControl, id: &str) -> Result<(), CaseError> {
    #[allow(unreachable_patterns)]
    match cloud {
        CloudControl::OpenStack(_) => octavia_delete(&cloud.ready_info(), id).await,
        CloudControl::Aws(_) => {
            let aws = AwsQuery::new(&cloud.ready_info())?;
            let (api, key) = if id.starts_with("arn:") {
                (AwsApi::Elbv2, "LoadBalancerArn")
            } else {
                (AwsApi::Elb, "LoadBalancerName")
            };
            aws.call(api, "DeleteLoadBalancer", &[(key.into(), id.into())])
                .await
                .map(|_| ())
        }
        other => Err(CaseError::Skipped(format!(
            "the harness cannot delete a {} load balancer out of band yet",
            other.provider().name()
        ))),
    }
}

/// Keystone password auth, then the Octavia cascade delete, with the credentials from the
/// mock's ready info (the journal records these calls like any other client's).
async fn octavia_delete(ready: &serde_json::Value, lb_id: &str) -> Result<(), CaseError> {
    let text = |k: &str| {
        ready
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    if ready.get("ca_file").is_some_and(|v| !v.is_null()) {
        return Err(CaseError::Skipped(
            "out-of-band delete speaks plain HTTP only; the mock serves HTTPS".into(),
        ));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| CaseError::infra("building HTTP client", e))?;
    let domain = json!({"name": text("domain_name")});
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": text("username"), "domain": domain, "password": text("password")}}},
        "scope": {"project": {"name": text("project_name"), "domain": domain}}}});
    let auth = http
        .post(format!("{}/auth/tokens", text("auth_url")))
        .json(&body)
        .send()
        .await
        .map_err(|e| CaseError::infra("authenticating to mock Keystone", e))?;
    let token = auth
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| CaseError::failed("mock Keystone returned no X-Subject-Token"))?;
    let catalog: serde_json::Value = auth
        .json()
        .await
        .map_err(|e| CaseError::infra("reading the Keystone token", e))?;
    let endpoint_of = |kind: &str| {
        catalog["token"]["catalog"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|svc| svc["type"] == kind)
            .flat_map(|svc| svc["endpoints"].as_array().into_iter().flatten())
            .find(|e| e["interface"] == "public")
            .and_then(|e| e["url"].as_str())
            .map(|u| u.trim_end_matches('/').to_string())
            .ok_or_else(|| CaseError::failed(format!("no {kind} endpoint in the catalog")))
    };
    let endpoint = endpoint_of("load-balancer")?;
    let network = endpoint_of("network")?;
    // The operator releases the floating IP on the VIP port too (`openstack floating ip
    // delete`): deleting a load balancer leaves it allocated, unattached.
    let get_json = |url: String| {
        let request = http.get(url).header("X-Auth-Token", token.clone());
        async move {
            request
                .send()
                .await
                .map_err(|e| CaseError::infra("reading mock OpenStack", e))?
                .json::<serde_json::Value>()
                .await
                .map_err(|e| CaseError::infra("reading mock OpenStack", e))
        }
    };
    let lb = get_json(format!("{endpoint}/v2/lbaas/loadbalancers/{lb_id}")).await?;
    if let Some(port) = lb["loadbalancer"]["vip_port_id"].as_str() {
        let fips = get_json(format!("{network}/v2.0/floatingips?port_id={port}")).await?;
        for fip in fips["floatingips"].as_array().into_iter().flatten() {
            let Some(id) = fip["id"].as_str() else {
                continue;
            };
            let answer = http
                .delete(format!("{network}/v2.0/floatingips/{id}"))
                .header("X-Auth-Token", token.clone())
                .send()
                .await
                .map_err(|e| CaseError::infra("deleting a floating IP in mock Neutron", e))?;
            ensure!(
                answer.status().is_success(),
                "expected Neutron to delete floating IP {id}, observed {}",
                answer.status()
            );
        }
    }
    let answer = http
        .delete(format!(
            "{endpoint}/v2/lbaas/loadbalancers/{lb_id}?cascade=true"
        ))
        .header("X-Auth-Token", token)
        .send()
        .await
        .map_err(|e| CaseError::infra("deleting the load balancer in mock Octavia", e))?;
    ensure!(
        answer.status().is_success(),
        "expected Octavia to accept the cascade delete, observed {}",
        answer.status()
    );
    Ok(())
}

/// The AWS query APIs the mock answers on one endpoint, told apart by `Version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsApi {
    Ec2,
    Elb,
    Elbv2,
}

impl AwsApi {
    fn version(self) -> &'static str {
        match self {
            AwsApi::Ec2 => "2016-11-15",
            AwsApi::Elb => "2012-06-01",
            AwsApi::Elbv2 => "2015-12-01",
        }
    }

    /// The SigV4 service name (ELB and ELBv2 share one).
    fn signing_name(self) -> &'static str {
        match self {
            AwsApi::Ec2 => "ec2",
            AwsApi::Elb | AwsApi::Elbv2 => "elasticloadbalancing",
        }
    }
}

/// A minimal AWS query-protocol client (form POST, SigV4-signed with the mock's static
/// key), what the `aws` CLI would send: for out-of-band changes and in-tree seeding.
pub struct AwsQuery {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
}

impl AwsQuery {
    /// A client for the mock described by `ready` (the AWS mock's ready info).
    pub fn new(ready: &serde_json::Value) -> Result<Self, CaseError> {
        let text = |k: &str| {
            ready
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let endpoint = text("endpoint");
        if !endpoint.starts_with("http://") {
            return Err(CaseError::Skipped(format!(
                "the harness's AWS client speaks plain HTTP only; the mock is at {endpoint:?}"
            )));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CaseError::infra("building HTTP client", e))?;
        Ok(Self {
            http,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region: text("region"),
            access_key_id: text("access_key_id"),
            secret_access_key: text("secret_access_key"),
        })
    }

    /// Calls `action` with `params`; the response body on success, a failure naming the
    /// AWS error otherwise.
    pub async fn call(
        &self,
        api: AwsApi,
        action: &str,
        params: &[(String, String)],
    ) -> Result<String, CaseError> {
        let mut body = format!("Action={}&Version={}", uri_encode(action), api.version());
        for (k, v) in params {
            body.push_str(&format!("&{}={}", uri_encode(k), uri_encode(v)));
        }
        let uri: http::Uri = format!("{}/", self.endpoint)
            .parse()
            .map_err(|e| CaseError::infra("parsing the mock AWS endpoint", e))?;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        if let Some(host) = uri.authority().and_then(|a| a.as_str().parse().ok()) {
            headers.insert(http::header::HOST, host);
        }
        mock_aws::sign_request(
            &http::Method::POST,
            &uri,
            &mut headers,
            body.as_bytes(),
            (&self.access_key_id, &self.secret_access_key),
            &self.region,
            api.signing_name(),
        );
        // reqwest sets Host itself from the URL; the signed value is the same.
        headers.remove(http::header::HOST);
        let answer = self
            .http
            .post(uri.to_string())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| CaseError::infra(&format!("calling mock AWS {action}"), e))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| CaseError::infra(&format!("reading mock AWS {action}"), e))?;
        ensure!(
            status.is_success(),
            "expected mock AWS to accept {action}, observed {status}: {}",
            xml_text(&text, "Message").unwrap_or(&text)
        );
        Ok(text)
    }
}

/// The text of the first `<tag>…</tag>` in an AWS XML answer.
pub fn xml_text<'a>(body: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&format!("</{tag}>"))?;
    Some(&body[start..start + len])
}

/// RFC 3986 unreserved characters stay, everything else is `%XX` (SigV4's encoding).
fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::Provider;

    #[test]
    fn xml_text_finds_the_first_element() {
        let body = "<R><DNSName>a-1.elb</DNSName><DNSName>b</DNSName></R>";
        assert_eq!(xml_text(body, "DNSName"), Some("a-1.elb"));
        assert_eq!(xml_text(body, "Missing"), None);
    }

    /// The mock verifies SigV4: a signed call is accepted, and the out-of-band delete
    /// removes a classic ELB the query API created.
    #[tokio::test]
    async fn signed_calls_reach_the_mock_and_delete_out_of_band() {
        let cloud = CloudControl::start(Provider::Aws, 1).await.unwrap();
        let aws = AwsQuery::new(&cloud.ready_info()).unwrap();
        let CloudControl::Aws(m) = &cloud else {
            unreachable!()
        };
        let (_, subnet) = m.admin().subnets()[0].clone();
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        aws.call(
            AwsApi::Elb,
            "CreateLoadBalancer",
            &[
                p("LoadBalancerName", "oob"),
                p("Listeners.member.1.Protocol", "TCP"),
                p("Listeners.member.1.LoadBalancerPort", "80"),
                p("Listeners.member.1.InstanceProtocol", "TCP"),
                p("Listeners.member.1.InstancePort", "30080"),
                p("Subnets.member.1", &subnet),
            ],
        )
        .await
        .unwrap();
        assert_eq!(m.admin().load_balancer_names(), vec!["oob".to_string()]);
        delete_load_balancer(&cloud, "oob").await.unwrap();
        assert!(m.admin().load_balancer_names().is_empty());
        let err = aws
            .call(AwsApi::Elb, "NoSuchAction", &[])
            .await
            .unwrap_err();
        assert!(matches!(err, CaseError::Failed { .. }), "{err:?}");
        cloud.shutdown().await;
    }
}
