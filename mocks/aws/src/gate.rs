//! What AWS's requests are to the shared request gate ([`mock_cloud::gate`]): every
//! query-protocol request (form-encoded POST, or GET with the same parameters in the query
//! string) is checked (size, form, `Version`, SigV4, `Action`) and classified for the
//! journal and fault rules before `api` runs it, so no action can skip a step; an
//! injected fault answers in the service's own envelope (EC2's `Response/Errors`, the ELB
//! APIs' `ErrorResponse`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;

use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{CallKind, Faults, FiredFault, Journal, LbOp, Throttle};

use crate::Shared;
use crate::error::{AwsError, Service, fault_error};
use crate::params::Params;
use crate::sigv4::{self, SigV4Error};
use crate::state;

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

/// What the gate worked out for the handler (in the request's extensions) and for
/// rendering answers.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub request_id: String,
    pub service: Service,
    /// Empty until the `Action` is read.
    pub action: String,
    pub params: Arc<Params>,
}

/// AWS's side of the shared request gate ([`mock_cloud::gate`]).
///
/// Journal entries and fault rules see: service = `ec2`, `elb` or `elbv2` (by `Version`;
/// before it is read, by the SigV4 scope); method and path = the HTTP ones; query = the
/// form parameters as a query string (secrets left out, [`Params::journal_query`]);
/// operation = the `Action` (e.g. `CreateLoadBalancer`; `None` when the request was
/// refused before it was read); resource = [`fault_resource`]; kind = [`call_kind`].
/// Fault rules' `path` is
/// searched in [`fault_target`] and a `Describe*` call is a `GET` to them. Requests the
/// mock cannot read (size, form, `Version`, SigV4, `Action`) are answered before fault
/// rules, and journaled. Every call but `Describe*` wakes the data plane (a lifecycle a
/// read completes is picked up by its periodic pass). Every answer carries
/// `x-amzn-requestid`.
impl Gate for Shared {
    type Extra = Prepared;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn wake(&self) -> Option<&Wake> {
        Some(&self.wake)
    }

    async fn classify(&self, req: Request) -> Classified<Prepared> {
        let (mut parts, body) = req.into_parts();
        let service = service_from_scope(&parts.headers);
        let prepared = Prepared {
            request_id: state::request_id(),
            service,
            action: String::new(),
            params: Arc::default(),
        };
        let mut call = Call {
            wakes: true,
            ..Call::new(service.name(), &parts.method, &parts.uri, prepared)
        };
        let body = Bytes::from_request(Request::from_parts(parts.clone(), body), &()).await;
        let prepared = prepare(self, &parts, body, &mut call);
        call.service = call.extra.service.name().to_string();
        call.kind = call_kind(call.extra.service, call.operation.as_deref());
        match prepared {
            Ok(bytes) => {
                parts.extensions.insert(call.extra.clone());
                Classified::Pass(call, Request::from_parts(parts, Body::from(bytes)))
            }
            Err(e) => {
                tracing::debug!(service = %call.service, code = %e.code, "refused");
                let response = e.render(call.extra.service, &call.extra.request_id);
                Classified::Answer(call, response)
            }
        }
    }

    fn throttle(service: &str) -> Throttle {
        throttle_preset(service)
    }

    fn render_error(
        &self,
        call: &Call<Prepared>,
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        let p = &call.extra;
        let mut e = fault_error(p.service, status, message);
        if let Some(code) = code {
            e.code = code.to_string();
        }
        e.render(p.service, &p.request_id)
    }

    fn render_not_found(&self, call: &Call<Prepared>, _fired: &FiredFault) -> Response {
        let p = &call.extra;
        not_found_error(
            p.service,
            &p.action,
            call.resource.as_deref().unwrap_or_default(),
        )
        .render(p.service, &p.request_id)
    }

    fn finish(&self, call: &Call<Prepared>, response: &mut Response) {
        if let Ok(v) = HeaderValue::from_str(&call.extra.request_id) {
            response.headers_mut().insert("x-amzn-requestid", v);
        }
    }
}

/// The AWS services' own throttling answers: EC2 `RequestLimitExceeded` is a 503
/// (docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html); ELB `Throttling`
/// a 400 (aws-sdk-go-v2 `aws/retry/throttle_error.go` codes).
pub(crate) fn throttle_preset(service: &str) -> Throttle {
    match service {
        "ec2" => Throttle {
            status: 503,
            code: Some("RequestLimitExceeded"),
            message: "Request limit exceeded.",
        },
        "elb" | "elbv2" => Throttle {
            status: 400,
            code: Some("Throttling"),
            message: "Rate exceeded",
        },
        _ => Throttle::TOO_MANY_REQUESTS,
    }
}

/// Reads and checks a request (size, form, `Version`, SigV4, `Action`) into `call`;
/// gives back the body for the handler.
fn prepare(
    shared: &Shared,
    parts: &Parts,
    body: Result<Bytes, BytesRejection>,
    call: &mut Call<Prepared>,
) -> Result<Bytes, AwsError> {
    let body = body.map_err(|e| {
        let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            "RequestEntityTooLarge"
        } else {
            "MalformedQueryString"
        };
        AwsError::new(e.status(), code, e.body_text())
    })?;
    let (method, uri) = (&parts.method, &parts.uri);
    let form: &[u8] = match *method {
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
    call.query = params.journal_query();
    call.extra.service = service_of(&params)?;
    if shared.config.verify_signatures {
        check_signature(
            shared,
            call.extra.service,
            method,
            uri,
            &parts.headers,
            &body,
        )?;
    }
    let action = params.action()?.to_string();
    let read = action.starts_with("Describe");
    call.wakes = !read;
    call.fault_path = Some(fault_target(&action, &params));
    call.resource = fault_resource(&params);
    // The query protocol POSTs every call; the engine's notion of a read (GET, which
    // `not_found_after_create` acts on) is a Describe* call here.
    if read {
        call.fault_method = Some("GET".to_string());
    }
    call.operation = Some(action.clone());
    call.extra.action = action;
    call.extra.params = Arc::new(params);
    Ok(body)
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

/// What a call is in the terms cases ask about, by its service and `Action` (`None`
/// when the request was refused before its `Action` was read): every ELB and ELBv2 call
/// is a load-balancer call ([`lb_op`]); EC2's `DescribeInstances` is an instance lookup,
/// its route writes route writes, and every other EC2 call but `DescribeInstance*`
/// supports a load balancer (security groups, subnets, tags).
pub(crate) fn call_kind(service: Service, action: Option<&str>) -> CallKind {
    let action = action.unwrap_or_default();
    match service {
        Service::Elb | Service::Elbv2 => CallKind::LoadBalancer(lb_op(action)),
        Service::Ec2 if action == "DescribeInstances" => CallKind::InstanceLookup,
        Service::Ec2 if matches!(action, "CreateRoute" | "DeleteRoute" | "ReplaceRoute") => {
            CallKind::RouteWrite
        }
        Service::Ec2 if !action.starts_with("DescribeInstance") => CallKind::LoadBalancerSupport,
        Service::Ec2 => CallKind::Other,
    }
}

/// ELB and ELBv2 actions by what they do to a load balancer.
fn lb_op(action: &str) -> LbOp {
    match action {
        "CreateLoadBalancer" => LbOp::Create,
        "DeleteLoadBalancer" => LbOp::Delete,
        "RegisterInstancesWithLoadBalancer"
        | "DeregisterInstancesFromLoadBalancer"
        | "RegisterTargets"
        | "DeregisterTargets" => LbOp::BackendWrite,
        a if a.starts_with("Describe") => LbOp::Read,
        _ => LbOp::OtherWrite,
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use mock_cloud::{CallKind, JournalEntry, LbOp};

    use super::throttle_preset;
    use crate::testing::{EC2, ELB, ELBV2, Mock};

    /// The table harness/src/cloud/aws.rs read journal entries by before the gate said
    /// what a call was (`classify` over the journaled service and `Action`), kept as the
    /// reference the gate's kinds are checked against.
    fn harness_table(e: &JournalEntry) -> CallKind {
        let action = e.operation.as_deref().unwrap_or_default();
        match e.service.as_str() {
            "elb" | "elbv2" => CallKind::LoadBalancer(match action {
                "CreateLoadBalancer" => LbOp::Create,
                "DeleteLoadBalancer" => LbOp::Delete,
                "RegisterInstancesWithLoadBalancer"
                | "DeregisterInstancesFromLoadBalancer"
                | "RegisterTargets"
                | "DeregisterTargets" => LbOp::BackendWrite,
                a if a.starts_with("Describe") => LbOp::Read,
                _ => LbOp::OtherWrite,
            }),
            _ if action == "DescribeInstances" => CallKind::InstanceLookup,
            _ if matches!(action, "CreateRoute" | "DeleteRoute" | "ReplaceRoute") => {
                CallKind::RouteWrite
            }
            "ec2" if !action.starts_with("DescribeInstance") => CallKind::LoadBalancerSupport,
            _ => CallKind::Other,
        }
    }

    #[tokio::test]
    async fn journaled_kinds_are_the_harness_table() {
        let m = Mock::seeded(1);
        let lb = CallKind::LoadBalancer;
        let calls: Vec<(&str, &str, CallKind)> = vec![
            (EC2, "DescribeInstances", CallKind::InstanceLookup),
            (EC2, "DescribeInstanceTypes", CallKind::Other),
            (EC2, "DescribeInstanceStatus", CallKind::Other),
            (EC2, "CreateRoute", CallKind::RouteWrite),
            (EC2, "DeleteRoute", CallKind::RouteWrite),
            (EC2, "ReplaceRoute", CallKind::RouteWrite),
            (EC2, "DescribeRouteTables", CallKind::LoadBalancerSupport),
            (EC2, "DescribeSecurityGroups", CallKind::LoadBalancerSupport),
            (EC2, "CreateSecurityGroup", CallKind::LoadBalancerSupport),
            (EC2, "CreateTags", CallKind::LoadBalancerSupport),
            (EC2, "NoSuchAction", CallKind::LoadBalancerSupport),
            (ELB, "CreateLoadBalancer", lb(LbOp::Create)),
            (ELB, "DescribeLoadBalancers", lb(LbOp::Read)),
            (
                ELB,
                "RegisterInstancesWithLoadBalancer",
                lb(LbOp::BackendWrite),
            ),
            (
                ELB,
                "DeregisterInstancesFromLoadBalancer",
                lb(LbOp::BackendWrite),
            ),
            (ELB, "ConfigureHealthCheck", lb(LbOp::OtherWrite)),
            (ELB, "DeleteLoadBalancer", lb(LbOp::Delete)),
            (ELBV2, "CreateLoadBalancer", lb(LbOp::Create)),
            (ELBV2, "DescribeTargetGroups", lb(LbOp::Read)),
            (ELBV2, "RegisterTargets", lb(LbOp::BackendWrite)),
            (ELBV2, "DeregisterTargets", lb(LbOp::BackendWrite)),
            (ELBV2, "CreateListener", lb(LbOp::OtherWrite)),
            (ELBV2, "DeleteLoadBalancer", lb(LbOp::Delete)),
        ];
        for (version, action, _) in &calls {
            m.call(version, action, &[]).await;
        }
        // Refused before the `Action` was read: unsigned (service by the SigV4 scope,
        // i.e. EC2) and without an `Action` (signed for ELB).
        let unsigned = Request::post("/")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from("Action=DescribeInstances&Version=2016-11-15"))
            .expect("request");
        m.raw(unsigned).await;
        let c = &m.shared.config;
        let key = (c.access_key_id.clone(), c.secret_access_key.clone());
        m.signed(
            format!("Version={ELB}"),
            (&key.0, &key.1),
            &c.region.clone(),
            "elasticloadbalancing",
        )
        .await;
        m.admin_json("GET", "/admin/journal", serde_json::Value::Null)
            .await;
        let entries = m.shared.journal.entries();
        assert_eq!(entries.len(), calls.len() + 3);
        for e in &entries {
            assert_eq!(e.kind, harness_table(e), "{} {:?}", e.service, e.operation);
        }
        let journaled: Vec<CallKind> = entries[..calls.len()].iter().map(|e| e.kind).collect();
        let wanted: Vec<CallKind> = calls.iter().map(|c| c.2).collect();
        assert_eq!(journaled, wanted);
        let refused: Vec<(&str, Option<&str>, CallKind)> = entries[calls.len()..]
            .iter()
            .map(|e| (e.service.as_str(), e.operation.as_deref(), e.kind))
            .collect();
        assert_eq!(
            refused,
            vec![
                ("ec2", None, CallKind::LoadBalancerSupport),
                ("elb", None, lb(LbOp::OtherWrite)),
                ("admin", None, CallKind::Other),
            ]
        );
    }

    /// Moved from mock-cloud's fault tests when the presets moved here.
    #[test]
    fn throttle_presets_follow_the_service() {
        let ec2 = throttle_preset("ec2");
        assert_eq!((ec2.status, ec2.code), (503, Some("RequestLimitExceeded")));
        for elb in ["elb", "elbv2"] {
            let t = throttle_preset(elb);
            assert_eq!((t.status, t.code), (400, Some("Throttling")), "{elb}");
        }
        assert_eq!(throttle_preset("other").status, 429);
    }
}
