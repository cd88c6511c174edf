//! The single AWS endpoint: every query-protocol request (form-encoded POST, or GET with
//! the same parameters in the query string) arrives at `/`, is checked (size, form,
//! SigV4), may be answered by an injected fault, then goes to EC2, ELB or ELBv2 by its
//! `Version` (ELB and ELBv2 share the SigV4 service name, so moto dispatches the same way:
//! `moto:moto/elb/urls.py`), and is journaled. One function, so no action can skip a step.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use mock_cloud::{FaultAction, RequestInfo};

use crate::Shared;
use crate::error::{AwsError, Service, fault_error};
use crate::params::Params;
use crate::sigv4::{self, SigV4Error};
use crate::xml::document;
use crate::{ec2, elb, elbv2, model};

/// The service a request names before its parameters are read: the SigV4 scope.
fn service_from_scope(headers: &HeaderMap) -> Service {
    let scope = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| sigv4::parse_authorization(v).ok());
    match scope.as_ref().map(|a| a.service.as_str()) {
        Some("elasticloadbalancing") => Service::Elb,
        _ => Service::Ec2,
    }
}

fn service_of(params: &Params) -> Result<Service, AwsError> {
    match params.get("Version") {
        Some("2012-06-01") => Ok(Service::Elb),
        Some("2015-12-01") => Ok(Service::Elbv2),
        Some(_) => Ok(Service::Ec2),
        None => Err(AwsError::missing("Version")),
    }
}

/// Refusals in each service's words: EC2 says `AuthFailure` (401) where the ELB APIs say
/// `InvalidClientTokenId` / `MissingAuthenticationToken` (403).
fn auth_error(service: Service, e: &SigV4Error) -> AwsError {
    let ec2 = service == Service::Ec2;
    match e {
        SigV4Error::Missing if ec2 => AwsError::new(
            StatusCode::UNAUTHORIZED,
            "AuthFailure",
            "AWS was not able to validate the provided access credentials",
        ),
        SigV4Error::Missing => AwsError::new(
            StatusCode::FORBIDDEN,
            "MissingAuthenticationToken",
            "Request is missing Authentication Token",
        ),
        SigV4Error::UnknownKey(_) if ec2 => {
            AwsError::new(StatusCode::UNAUTHORIZED, "AuthFailure", e.to_string())
        }
        SigV4Error::UnknownKey(_) => AwsError::new(
            StatusCode::FORBIDDEN,
            "InvalidClientTokenId",
            "The security token included in the request is invalid.",
        ),
        SigV4Error::Malformed(_) => AwsError::bad("IncompleteSignature", e.to_string()),
        SigV4Error::Mismatch => AwsError::new(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            e.to_string(),
        ),
    }
}

fn check_signature(
    shared: &Shared,
    service: Service,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), AwsError> {
    let config = &shared.config;
    let role = &shared.imds.credentials;
    let auth = sigv4::verify(method, uri, headers, body, |key| {
        if key == config.access_key_id {
            Some(config.secret_access_key.clone())
        } else if key == role.access_key_id {
            Some(role.secret_access_key.clone())
        } else {
            None
        }
    })
    .map_err(|e| auth_error(service, &e))?;
    // Temporary (IMDS role) keys need their session token; long-term keys take none.
    // AWS refuses a wrong or missing one as it refuses an unknown key: EC2 `AuthFailure`,
    // ELB `InvalidClientTokenId` ("The security token included in the request is invalid").
    let token = headers
        .get("x-amz-security-token")
        .map(|v| v.to_str().unwrap_or_default());
    let want = (auth.access_key_id == role.access_key_id).then_some(role.token.as_str());
    if token != want {
        return Err(match service {
            Service::Ec2 => AwsError::new(
                StatusCode::UNAUTHORIZED,
                "AuthFailure",
                "AWS was not able to validate the provided access credentials",
            ),
            Service::Elb | Service::Elbv2 => AwsError::new(
                StatusCode::FORBIDDEN,
                "InvalidClientTokenId",
                "The security token included in the request is invalid.",
            ),
        });
    }
    let expected_service = match service {
        Service::Ec2 => "ec2",
        Service::Elb | Service::Elbv2 => "elasticloadbalancing",
    };
    if auth.region != config.region {
        return Err(AwsError::new(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            format!(
                "Credential should be scoped to a valid region, not '{}'. ",
                auth.region
            ),
        ));
    }
    if auth.service != expected_service {
        return Err(AwsError::new(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            format!("Credential should be scoped to correct service: '{expected_service}'. "),
        ));
    }
    Ok(())
}

fn success(service: Service, action: &str, request_id: &str, body: &str) -> Response {
    let root = format!("{action}Response");
    let inner = match service {
        Service::Ec2 => format!("<requestId>{request_id}</requestId>{body}"),
        Service::Elb | Service::Elbv2 => format!(
            "<{action}Result>{body}</{action}Result><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        ),
    };
    (
        StatusCode::OK,
        [("content-type", "text/xml;charset=UTF-8")],
        document(&root, service.namespace(), &inner),
    )
        .into_response()
}

pub(crate) async fn endpoint(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request_id = model::request_id();
    let mut service = service_from_scope(&headers);
    let mut journal_query = uri.query().unwrap_or("").to_string();
    let mut fault = None;
    let mut reset = false;
    // Describe* changes nothing the data plane serves (a lifecycle a read completes is
    // picked up by its periodic pass), so only other calls wake it.
    let mut read_only = false;

    let result: Result<(String, String), AwsError> = async {
        let body = body.map_err(|e| {
            let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                "RequestEntityTooLarge"
            } else {
                "MalformedQueryString"
            };
            AwsError::new(e.status(), code, e.body_text())
        })?;
        let form: &[u8] = match method {
            Method::POST => &body,
            Method::GET => uri.query().unwrap_or("").as_bytes(),
            _ => {
                return Err(AwsError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "UnsupportedProtocol",
                    format!("{method} is not supported; use POST"),
                ));
            }
        };
        let params = Params::parse(form)?;
        journal_query = params.journal_query();
        service = service_of(&params)?;
        if shared.config.verify_signatures {
            check_signature(&shared, service, &method, &uri, &headers, &body)?;
        }
        let action = params.action()?.to_string();
        read_only = action.starts_with("Describe");
        let target = fault_target(&action, &params);
        let resource = fault_resource(&params);
        // The query protocol POSTs every call; the engine's notion of a read (GET, which
        // `not_found_after_create` acts on) is a Describe* call here.
        let engine_method = if action.starts_with("Describe") {
            "GET"
        } else {
            method.as_str()
        };
        let fired = shared.faults.check_request(&RequestInfo {
            service: service.name(),
            method: engine_method,
            path: &target,
            operation: Some(&action),
            resource: resource.as_deref(),
        });
        if let Some(fired) = fired {
            fault = Some(fired.rule_id);
            if let Some(delay) = fired.latency {
                tokio::time::sleep(delay).await;
            }
            match fired.action {
                FaultAction::Serve => {}
                FaultAction::Reset => {
                    reset = true;
                    return Err(AwsError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalError",
                        "connection reset",
                    ));
                }
                FaultAction::NotFound => {
                    return Err(not_found_error(
                        service,
                        &action,
                        resource.as_deref().unwrap_or_default(),
                    ));
                }
                FaultAction::Error => {
                    let status = fired.status.unwrap_or(500);
                    let mut e = fault_error(service, status, fired.message.as_deref());
                    if let Some(code) = fired.code {
                        e.code = code;
                    }
                    return Err(e);
                }
            }
        }
        let mut cloud = shared.cloud();
        let before: Vec<String> = if action == "RunInstances" {
            cloud.instances.iter().map(|i| i.id.clone()).collect()
        } else {
            Vec::new()
        };
        let body = match service {
            Service::Ec2 => ec2::handle(&mut cloud, &action, &params)?,
            Service::Elb => elb::handle(&mut cloud, &action, &params)?,
            Service::Elbv2 => elbv2::handle(&mut cloud, &action, &params)?,
        };
        // What was just created, for the engine's not-found-after-create window.
        if action == "RunInstances" {
            for i in cloud.instances.iter().filter(|i| !before.contains(&i.id)) {
                shared.faults.note_created(&i.id);
            }
        } else if action == "CreateLoadBalancer"
            && let Some(name) = params.get("LoadBalancerName").or(params.get("Name"))
        {
            shared.faults.note_created(name);
        }
        Ok((action, body))
    }
    .await;

    let mut response = match &result {
        _ if reset => mock_cloud::connection_reset(),
        Ok((action, body)) => success(service, action, &request_id, body),
        Err(e) => e.render(service, &request_id),
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-amzn-requestid", v);
    }
    // A dropped connection has no status; the journal says 0 (as mock-openstack's).
    let status = if reset { 0 } else { response.status().as_u16() };
    if !read_only {
        shared.dataplane_wake.notify_one();
    }
    shared.journal.record(
        service.name(),
        method.as_str(),
        uri.path(),
        &journal_query,
        status,
        fault,
    );
    if let Err(e) = &result {
        tracing::debug!(service = service.name(), code = %e.code, status, "refused");
    }
    response
}

/// What a fault rule's `path` regex is searched in: `/{Action}`, then `/{value}` for each
/// `InstanceId.N` and each filter value, so a rule can target one instance whether it is
/// looked up by id or by private DNS name (`DescribeInstances/.*i-0abc`).
fn fault_target(action: &str, params: &Params) -> String {
    let mut target = format!("/{action}");
    let filter_values = params
        .filters()
        .map(|fs| fs.into_iter().flat_map(|f| f.values).collect::<Vec<_>>())
        .unwrap_or_default();
    for v in params.list("InstanceId").into_iter().chain(filter_values) {
        target.push('/');
        target.push_str(&v);
    }
    target
}

/// The resource a request is about, for fault rules with `resource`: the first
/// `InstanceId.N` (EC2), else the load balancer's name (`LoadBalancerName`, ELBv2 `Name`
/// or `Names.member.1`), else its ARN.
fn fault_resource(params: &Params) -> Option<String> {
    params
        .list("InstanceId")
        .into_iter()
        .next()
        .or_else(|| params.get("LoadBalancerName").map(str::to_string))
        .or_else(|| params.get("Name").map(str::to_string))
        .or_else(|| params.list("Names.member").into_iter().next())
        .or_else(|| params.get("LoadBalancerArn").map(str::to_string))
}

/// The service's own "does not exist" answer for a `NotFound` fault
/// (cloud-apis.md §4: EC2 `InvalidInstanceID.NotFound`, ELB/ELBv2 `LoadBalancerNotFound`).
fn not_found_error(service: Service, action: &str, resource: &str) -> AwsError {
    match service {
        Service::Ec2 if action.contains("Route") => AwsError::bad(
            "InvalidRouteTableID.NotFound",
            format!("The routeTable ID '{resource}' does not exist"),
        ),
        Service::Ec2 => AwsError::bad(
            "InvalidInstanceID.NotFound",
            format!("The instance ID '{resource}' does not exist"),
        ),
        Service::Elb => AwsError::bad(
            "LoadBalancerNotFound",
            format!("There is no ACTIVE Load Balancer named '{resource}'"),
        ),
        Service::Elbv2 => AwsError::bad(
            "LoadBalancerNotFound",
            format!("Load balancers '[{resource}]' not found"),
        ),
    }
}

/// Paths other than `/` and `/admin`: a 404 in EC2's envelope.
pub(crate) async fn not_found(uri: Uri) -> Response {
    AwsError::new(
        StatusCode::NOT_FOUND,
        "InvalidAction",
        format!("nothing is served at {}", uri.path()),
    )
    .render(Service::Ec2, &model::request_id())
}
