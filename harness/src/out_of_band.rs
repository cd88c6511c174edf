//! Changing the cloud behind the CCM's back the way an operator would: with the cloud's
//! own API, as a client the journal records like any other, not through the mock's admin
//! back door. Cases use it to check that a CCM notices (or, upstream-faithfully, does not
//! notice) state it did not make (ccm-behaviour.md LB-21, LB-26).

use std::time::Duration;

use serde_json::json;

use crate::case::CaseError;
use crate::cloud::CloudControl;
use crate::ensure;

/// Deletes load balancer `id` with the cloud's own API (OpenStack: Keystone password auth,
/// then Octavia `DELETE …?cascade=true`). Skips the case for clouds not supported yet.
pub async fn delete_load_balancer(cloud: &CloudControl, id: &str) -> Result<(), CaseError> {
    match cloud {
        CloudControl::OpenStack(_) => octavia_delete(&cloud.ready_info(), id).await,
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
    let endpoint = catalog["token"]["catalog"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|svc| svc["type"] == "load-balancer")
        .flat_map(|svc| svc["endpoints"].as_array().into_iter().flatten())
        .find(|e| e["interface"] == "public")
        .and_then(|e| e["url"].as_str())
        .map(|u| u.trim_end_matches('/').to_string())
        .ok_or_else(|| CaseError::failed("no load-balancer endpoint in the catalog"))?;
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
