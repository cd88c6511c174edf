//! Routing of ARM requests: every path under `/subscriptions/` comes here (the token was
//! checked by the gate), is parsed ([`super::path`]), checked (api-version, subscription,
//! resource group, body size and JSON) and handed to the compute or network handlers;
//! asynchronous operations are polled here.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use mock_cloud::Phase;
use serde_json::json;

use super::ArmError;
use super::path::{self, ArmPath};
use super::request::{ArmRequest, method_not_allowed, poll_headers};
use crate::{BODY_LIMIT, Shared};

/// The fallback handler: ARM paths, and a 404 in ARM's envelope for anything else.
pub async fn dispatch(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let raw_path = parts.uri.path().to_string();
    let Ok(parsed) = path::parse(&raw_path) else {
        return ArmError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("No HTTP resource was found that matches the request URI '{raw_path}'."),
        )
        .into_response();
    };
    let query = parts.uri.query().unwrap_or("").to_string();
    let api_version = match super::api_version(&query) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            return ArmError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                format!("The request body is larger than the limit of {BODY_LIMIT} bytes."),
            )
            .into_response();
        }
    };
    let req = ArmRequest {
        method: parts.method,
        path: parsed,
        raw_path,
        query,
        api_version,
        headers: parts.headers,
        body,
    };
    match handle(&s, req) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn handle(s: &Shared, req: ArmRequest) -> Result<Response, ArmError> {
    let sub = match &req.path {
        ArmPath::Subscription { sub }
        | ArmPath::Provider { sub, .. }
        | ArmPath::Operation { sub, .. }
        | ArmPath::ResourceGroup { sub, .. }
        | ArmPath::Resource { sub, .. } => sub.clone(),
    };
    if !sub.eq_ignore_ascii_case(&s.config.subscription_id) {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "SubscriptionNotFound",
            format!("The subscription '{sub}' could not be found."),
        ));
    }
    if let ArmPath::ResourceGroup { rg, .. } | ArmPath::Resource { rg, .. } = &req.path
        && !rg.eq_ignore_ascii_case(&s.config.resource_group)
    {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "ResourceGroupNotFound",
            format!("Resource group '{rg}' could not be found."),
        ));
    }
    let read_only = |req: &ArmRequest| -> Result<(), ArmError> {
        if req.method == Method::GET {
            Ok(())
        } else {
            Err(method_not_allowed(&req.method))
        }
    };
    match &req.path {
        ArmPath::Subscription { sub } => {
            read_only(&req)?;
            Ok(axum::Json(json!({
                "id": format!("/subscriptions/{sub}"),
                "subscriptionId": sub,
                "tenantId": s.config.tenant_id,
                "displayName": "mock-azure",
                "state": "Enabled",
            }))
            .into_response())
        }
        ArmPath::Provider { namespace, .. } => {
            read_only(&req)?;
            crate::compute::api::provider(s, namespace)
        }
        ArmPath::Operation {
            namespace,
            result,
            id,
            ..
        } => {
            read_only(&req)?;
            operation(s, namespace, *result, id, &req)
        }
        ArmPath::ResourceGroup { rg, .. } => {
            read_only(&req)?;
            Ok(axum::Json(json!({
                "id": format!("/subscriptions/{}/resourceGroups/{rg}", s.config.subscription_id),
                "name": s.config.resource_group,
                "type": "Microsoft.Resources/resourceGroups",
                "location": s.config.location,
                "properties": {"provisioningState": "Succeeded"},
            }))
            .into_response())
        }
        ArmPath::Resource { namespace, .. } => {
            let key = req.path.type_key().unwrap_or_default();
            if key.starts_with("microsoft.compute/") {
                crate::compute::api::handle(s, &key, &req)
            } else if let Some(info) = path::type_info(&key) {
                crate::network::api::handle(s, info, &req)
            } else if key == "microsoft.network/privatelinkservices" && req.method == Method::GET {
                // A registered type the mock holds none of: cloud-provider-azure lists them
                // on every frontend deletion (`azure_privatelinkservice.go`), and ARM
                // answers an empty list, or 404 for one by name.
                match req.path.name() {
                    None => Ok(axum::Json(json!({"value": []})).into_response()),
                    Some(name) => Err(ArmError::new(
                        StatusCode::NOT_FOUND,
                        "ResourceNotFound",
                        format!(
                            "The Resource 'Microsoft.Network/privateLinkServices/{name}' under resource group was not found."
                        ),
                    )),
                }
            } else {
                Err(ArmError::new(
                    StatusCode::NOT_FOUND,
                    "InvalidResourceType",
                    format!(
                        "The resource type '{}' could not be found in the namespace '{namespace}' for api version '{}'.",
                        key.split_once('/').map_or(key.as_str(), |(_, t)| t),
                        req.api_version
                    ),
                ))
            }
        }
    }
}

/// `GET …/operations/{id}` (status document) and `GET …/operationResults/{id}` (202
/// while in progress, then 204, or the error).
fn operation(
    s: &Shared,
    namespace: &str,
    result: bool,
    id: &str,
    req: &ArmRequest,
) -> Result<Response, ArmError> {
    let mut cloud = s.cloud();
    let Some((op, phase)) = cloud.observe_op(id, true) else {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "OperationNotFound",
            format!("The operation '{id}' could not be found."),
        ));
    };
    drop(cloud);
    if !result {
        let mut response = axum::Json(op.status_body(phase)).into_response();
        if phase == Phase::Pending {
            poll_headers(response.headers_mut());
        }
        return Ok(response);
    }
    match phase {
        Phase::Pending => {
            let mut response = StatusCode::ACCEPTED.into_response();
            let location = format!(
                "{}/subscriptions/{}/providers/{namespace}/locations/{}/operationResults/{id}?api-version={}",
                s.base, s.config.subscription_id, s.config.location, req.api_version
            );
            if let Ok(v) = HeaderValue::from_str(&location) {
                response.headers_mut().insert("location", v);
            }
            poll_headers(response.headers_mut());
            Ok(response)
        }
        Phase::Done => Ok(StatusCode::NO_CONTENT.into_response()),
        Phase::Failed => Err(ArmError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "The operation failed (lifecycle mode `error` of the mock).",
        )),
    }
}
