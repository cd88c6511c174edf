//! What Azure's requests are to the shared request gate ([`mock_cloud::gate`]): how a
//! request is classified for the journal and fault rules, ARM's bearer-token check
//! (answered before fault rules, and journaled), the throttling preset and the error
//! envelopes.
//!
//! Journal entries and fault rules see:
//! - `service`: `compute`, `network` (ARM by resource provider), `resources`
//!   (subscription and resource group reads), `identity` (tokens, managed identity,
//!   OpenID and instance discovery), `metadata` (`/metadata/endpoints`), `admin`;
//! - `operation`: `"<METHOD> <Namespace>/<type>[/<child>]"` with ARM's canonical casing
//!   (`"PUT Microsoft.Network/loadBalancers"`, `"GET Microsoft.Compute/virtualMachines"`
//!   for a get and a list alike, `"GET Microsoft.Compute/virtualMachines/instanceView"`,
//!   `"PUT Microsoft.Network/routeTables/routes"`), `"GET <Namespace>/operations"` and
//!   `"GET <Namespace>/operationResults"` for polls, `"GET providers/<Namespace>"` for
//!   provider registration, `"GET resourceGroups"`, `"GET subscriptions"`,
//!   `"POST token"` (all token endpoints), `"GET msi/token"`,
//!   `"GET metadata/endpoints"`, `"GET openid-configuration"`, `"GET discovery/instance"`;
//! - `resource`: the innermost resource name in the path (`node-0`, the route's name),
//!   the operation id for polls, the tenant for token and OpenID requests; none for a
//!   top-level list, the parent's name for a child list (`routeTables/rt-ccm/routes`);
//! - `kind` ([`mock_cloud::CallKind`]): [`call_kind`] of the operation, a load balancer
//!   PUT a create only when answered 201 Created.
//!
//! ARM throttles with 429 `TooManyRequests` and `Retry-After`; errors are
//! `{"error":{"code","message"}}`, except the identity endpoints', which are AAD's
//! `{"error","error_description"}`.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mock_cloud::gate::{Call, Classified, Gate, Wake};
use mock_cloud::{CallKind, Faults, Journal, LbOp, Throttle};

use crate::Shared;
use crate::arm::ArmError;
use crate::arm::path::{self, ArmPath};

/// How a request was classified, carried to rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Arm,
    Identity,
    Metadata,
    Admin,
}

/// ARM's throttling answer.
pub const THROTTLE: Throttle = Throttle {
    status: 429,
    code: Some("TooManyRequests"),
    message: "The request is being throttled as the limit has been reached for operation type.",
};

/// Compute paths beside the resource types of [`path::TYPES`], with ARM's casing.
const COMPUTE_PATHS: &[&str] = &[
    "Microsoft.Compute/virtualMachines/instanceView",
    "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
    "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView",
    "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces",
    "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces",
];

/// The canonical `Namespace/type[/child]` of an ARM resource path.
fn canonical_type(p: &ArmPath) -> (String, Option<String>) {
    let ArmPath::Resource {
        namespace, types, ..
    } = p
    else {
        return (String::new(), None);
    };
    let key = p.type_key().unwrap_or_default();
    let ty = match path::type_info(&key) {
        Some(info) => info.arm_type.to_string(),
        None if COMPUTE_PATHS.iter().any(|c| c.eq_ignore_ascii_case(&key)) => COMPUTE_PATHS
            .iter()
            .find(|c| c.eq_ignore_ascii_case(&key))
            .map(|c| c.to_string())
            .unwrap_or_default(),
        None => {
            let mut s = namespace.clone();
            for (t, _) in types {
                s.push('/');
                s.push_str(t);
            }
            s
        }
    };
    (ty, p.name().map(str::to_string))
}

fn canonical_namespace(ns: &str) -> String {
    if ns.eq_ignore_ascii_case("Microsoft.Compute") {
        "Microsoft.Compute".into()
    } else if ns.eq_ignore_ascii_case("Microsoft.Network") {
        "Microsoft.Network".into()
    } else {
        ns.to_string()
    }
}

/// How the gate sees a request (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// Which envelope answers it.
    pub kind: Kind,
    pub service: String,
    pub operation: Option<String>,
    pub resource: Option<String>,
    /// What the call is in the terms cases ask about ([`call_kind`]; a load balancer PUT
    /// is taken for a create until its status says otherwise, [`Gate::journal_kind`]).
    pub call_kind: CallKind,
}

/// The journal's service, operation, resource and kind of a request (see the module docs).
pub fn classify_path(method: &str, p: &str) -> Classification {
    // The operation is `"<METHOD> <target>"`.
    let classified = |kind, service: &str, target: Option<String>, resource| Classification {
        kind,
        service: service.to_string(),
        call_kind: target
            .as_deref()
            .map_or(CallKind::Other, |t| call_kind(method, t)),
        operation: target.map(|t| format!("{method} {t}")),
        resource,
    };
    if p == "/admin" || p.starts_with("/admin/") {
        return classified(Kind::Admin, "admin", None, None);
    }
    if let Ok(arm) = path::parse(p) {
        let (service, target, resource) = match &arm {
            ArmPath::Subscription { sub } => {
                ("resources", "subscriptions".to_string(), Some(sub.clone()))
            }
            ArmPath::ResourceGroup { rg, .. } => {
                ("resources", "resourceGroups".to_string(), Some(rg.clone()))
            }
            ArmPath::Provider { namespace, .. } => (
                service_of(namespace),
                format!("providers/{}", canonical_namespace(namespace)),
                None,
            ),
            ArmPath::Operation {
                namespace,
                result,
                id,
                ..
            } => (
                service_of(namespace),
                format!(
                    "{}/{}",
                    canonical_namespace(namespace),
                    if *result {
                        "operationResults"
                    } else {
                        "operations"
                    }
                ),
                Some(id.clone()),
            ),
            ArmPath::Resource { namespace, .. } => {
                let (ty, name) = canonical_type(&arm);
                (service_of(namespace), ty, name)
            }
        };
        return classified(Kind::Arm, service, Some(target), resource);
    }
    let segs: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    let tenant = || segs.first().map(|t| t.to_string());
    match segs.as_slice() {
        ["metadata", "endpoints"] => classified(
            Kind::Metadata,
            "metadata",
            Some("metadata/endpoints".into()),
            None,
        ),
        ["msi", "token"] => classified(Kind::Identity, "identity", Some("msi/token".into()), None),
        ["common", "discovery", "instance"] => classified(
            Kind::Identity,
            "identity",
            Some("discovery/instance".into()),
            None,
        ),
        [.., "openid-configuration"] => classified(
            Kind::Identity,
            "identity",
            Some("openid-configuration".into()),
            tenant(),
        ),
        [.., "token"] if segs.contains(&"oauth2") => {
            classified(Kind::Identity, "identity", Some("token".into()), tenant())
        }
        _ => classified(Kind::Arm, "other", None, None),
    }
}

/// What an ARM call is in the terms cases ask about, by its method and operation target
/// (`Microsoft.Network/loadBalancers`): VM and scale-set VM reads are instance lookups,
/// route table writes route writes; load balancer calls are load-balancer calls (a PUT is
/// taken for a create here; [`Gate::journal_kind`] makes it an update unless ARM answered
/// 201 Created), a NIC PUT changes a backend pool's members, and every other
/// `Microsoft.Network` call supports a load balancer (public IPs, security groups).
pub fn call_kind(method: &str, target: &str) -> CallKind {
    const LB: &str = "Microsoft.Network/loadBalancers";
    match (method, target) {
        ("GET", t) if t.starts_with("Microsoft.Compute/virtualMachine") => CallKind::InstanceLookup,
        (m, t) if m != "GET" && t.starts_with("Microsoft.Network/routeTables") => {
            CallKind::RouteWrite
        }
        ("GET", LB) => CallKind::LoadBalancer(LbOp::Read),
        ("PUT", LB) => CallKind::LoadBalancer(LbOp::Create),
        ("DELETE", LB) => CallKind::LoadBalancer(LbOp::Delete),
        (_, LB) => CallKind::LoadBalancer(LbOp::OtherWrite),
        ("PUT", "Microsoft.Network/networkInterfaces") => {
            CallKind::LoadBalancer(LbOp::BackendWrite)
        }
        (_, t) if t.starts_with("Microsoft.Network/") => CallKind::LoadBalancerSupport,
        _ => CallKind::Other,
    }
}

fn service_of(namespace: &str) -> &'static str {
    if namespace.eq_ignore_ascii_case("Microsoft.Compute") {
        "compute"
    } else if namespace.eq_ignore_ascii_case("Microsoft.Network") {
        "network"
    } else {
        "resources"
    }
}

/// The default error code of an injected status.
fn default_code(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "AuthenticationFailed",
        403 => "AuthorizationFailed",
        404 => "ResourceNotFound",
        409 => "Conflict",
        412 => "PreconditionFailed",
        429 => "TooManyRequests",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "GatewayTimeout",
        _ => "InternalServerError",
    }
}

impl Gate for Shared {
    type Extra = Kind;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn wake(&self) -> Option<&Wake> {
        Some(&self.wake)
    }

    async fn classify(&self, req: Request) -> Classified<Kind> {
        let path = req.uri().path().to_string();
        let method = req.method().to_string();
        let c = classify_path(&method, &path);
        let kind = c.kind;
        let call = Call {
            operation: c.operation,
            resource: c.resource,
            kind: c.call_kind,
            gated: kind != Kind::Admin,
            wakes: method != "GET",
            ..Call::new(c.service, req.method(), req.uri(), kind)
        };
        if kind == Kind::Arm
            && call.operation.is_some()
            && let Err(e) = self.check_bearer(req.headers())
        {
            let challenge = self.bearer_challenge(&e);
            let mut response = e.into_response();
            response.headers_mut().insert("www-authenticate", challenge);
            return Classified::Answer(call, response);
        }
        Classified::Pass(call, req)
    }

    fn throttle(_service: &str) -> Throttle {
        THROTTLE
    }

    fn render_error(
        &self,
        call: &Call<Kind>,
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        let status_code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = message.unwrap_or("Injected by the mock's fault rules.");
        match call.extra {
            Kind::Identity => {
                let error = code.unwrap_or(if status == 429 {
                    "temporarily_unavailable"
                } else {
                    "server_error"
                });
                let mut response = (
                    status_code,
                    axum::Json(serde_json::json!({"error": error, "error_description": message})),
                )
                    .into_response();
                if status == 429 {
                    response
                        .headers_mut()
                        .insert("retry-after", HeaderValue::from_static("1"));
                }
                response
            }
            _ => {
                let code = code.unwrap_or_else(|| default_code(status));
                let message = if status == 404 && code == "ResourceNotFound" {
                    match &call.resource {
                        Some(r) => format!(
                            "The Resource '{r}' under resource group '{}' was not found.",
                            self.config.resource_group
                        ),
                        None => message.to_string(),
                    }
                } else {
                    message.to_string()
                };
                ArmError::new(status_code, code, message).into_response()
            }
        }
    }

    /// A resource a PUT created (201) is "created" for `not_found_after_create` rules,
    /// by name (the rules' `resource`).
    async fn served(&self, call: &Call<Kind>, response: Response) -> Response {
        if call.method == "PUT"
            && response.status() == StatusCode::CREATED
            && let Some(name) = &call.resource
            && self.faults.wants_created()
        {
            self.faults.note_created(name);
        }
        response
    }

    /// A load balancer PUT creates when ARM answers 201 Created, and updates otherwise.
    fn journal_kind(&self, call: &Call<Kind>, status: u16) -> CallKind {
        match call.kind {
            CallKind::LoadBalancer(LbOp::Create) if status != 201 => {
                CallKind::LoadBalancer(LbOp::OtherWrite)
            }
            kind => kind,
        }
    }

    fn finish(&self, _call: &Call<Kind>, response: &mut Response) {
        let id = uuid::Uuid::new_v4().to_string();
        if let Ok(v) = HeaderValue::from_str(&id) {
            let headers = response.headers_mut();
            headers.insert("x-ms-request-id", v.clone());
            headers.insert("x-ms-correlation-request-id", v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_resources() {
        let sub = "/subscriptions/s/resourceGroups/rg/providers";
        let cases = [
            (
                "PUT",
                format!("{sub}/Microsoft.Network/loadBalancers/kubernetes"),
                "network",
                "PUT Microsoft.Network/loadBalancers",
                Some("kubernetes"),
            ),
            (
                "GET",
                format!("{sub}/microsoft.compute/virtualmachines/node-0"),
                "compute",
                "GET Microsoft.Compute/virtualMachines",
                Some("node-0"),
            ),
            (
                "GET",
                format!("{sub}/Microsoft.Compute/virtualMachines"),
                "compute",
                "GET Microsoft.Compute/virtualMachines",
                None,
            ),
            (
                "GET",
                format!("{sub}/Microsoft.Compute/virtualMachines/n/instanceView"),
                "compute",
                "GET Microsoft.Compute/virtualMachines/instanceView",
                Some("n"),
            ),
            (
                "PUT",
                format!("{sub}/Microsoft.Network/routeTables/rt/routes/r1"),
                "network",
                "PUT Microsoft.Network/routeTables/routes",
                Some("r1"),
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/o1"
                    .to_string(),
                "network",
                "GET Microsoft.Network/operations",
                Some("o1"),
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute".to_string(),
                "compute",
                "GET providers/Microsoft.Compute",
                None,
            ),
            (
                "POST",
                "/t/oauth2/v2.0/token".to_string(),
                "identity",
                "POST token",
                Some("t"),
            ),
            (
                "POST",
                "/adfs/oauth2/token".to_string(),
                "identity",
                "POST token",
                Some("adfs"),
            ),
            (
                "GET",
                "/msi/token".to_string(),
                "identity",
                "GET msi/token",
                None,
            ),
            (
                "GET",
                "/metadata/endpoints".to_string(),
                "metadata",
                "GET metadata/endpoints",
                None,
            ),
        ];
        for (method, p, service, op, resource) in cases {
            let c = classify_path(method, &p);
            assert_eq!(
                (
                    c.service.as_str(),
                    c.operation.as_deref(),
                    c.resource.as_deref()
                ),
                (service, Some(op), resource),
                "{p}"
            );
        }
        assert_eq!(classify_path("GET", "/admin/vms").service, "admin");
    }

    use axum::http::StatusCode as Status;
    use mock_cloud::{FaultJson, FaultKind};
    use serde_json::json;

    use crate::testing::Mock;

    /// The table harness/src/cloud/azure.rs read journal entries by before the gate said
    /// what a call was (`classify` over the journaled operation and status), kept as the
    /// reference the gate's kinds are checked against.
    fn harness_table(e: &mock_cloud::JournalEntry) -> CallKind {
        let operation = e.operation.as_deref().unwrap_or_default();
        let (method, target) = operation.split_once(' ').unwrap_or(("", operation));
        match (method, target) {
            ("GET", t) if t.starts_with("Microsoft.Compute/virtualMachine") => {
                CallKind::InstanceLookup
            }
            (m, t) if m != "GET" && t.starts_with("Microsoft.Network/routeTables") => {
                CallKind::RouteWrite
            }
            ("GET", "Microsoft.Network/loadBalancers") => CallKind::LoadBalancer(LbOp::Read),
            ("PUT", "Microsoft.Network/loadBalancers") if e.status == 201 => {
                CallKind::LoadBalancer(LbOp::Create)
            }
            ("DELETE", "Microsoft.Network/loadBalancers") => CallKind::LoadBalancer(LbOp::Delete),
            (_, "Microsoft.Network/loadBalancers") => CallKind::LoadBalancer(LbOp::OtherWrite),
            ("PUT", "Microsoft.Network/networkInterfaces") => {
                CallKind::LoadBalancer(LbOp::BackendWrite)
            }
            (_, t) if t.starts_with("Microsoft.Network/") => CallKind::LoadBalancerSupport,
            _ => CallKind::Other,
        }
    }

    #[tokio::test]
    async fn journaled_kinds_are_the_harness_table() {
        let m = Mock::seeded(1);
        let t = m.token().await;
        let lb = CallKind::LoadBalancer;
        let vm = m.rg_path("Microsoft.Compute/virtualMachines/node-0");
        let nic_id = m.arm("GET", &vm, &t, None).await.body["properties"]["networkProfile"]
            ["networkInterfaces"][0]["id"]
            .as_str()
            .expect("the VM's NIC")
            .to_string();
        let nic = m.arm("GET", &nic_id, &t, None).await.body;
        let lb_path = m.rg_path("Microsoft.Network/loadBalancers/kubernetes");
        let lb_body = json!({"location": m.shared.config.location, "properties": {}});
        let route = m.rg_path(&format!(
            "Microsoft.Network/routeTables/{}/routes/r1",
            m.shared.config.route_table_name
        ));
        let calls: Vec<(&str, String, Option<serde_json::Value>, CallKind)> = vec![
            (
                "GET",
                m.rg_path("Microsoft.Compute/virtualMachines"),
                None,
                CallKind::InstanceLookup,
            ),
            (
                "GET",
                format!("{vm}/instanceView"),
                None,
                CallKind::InstanceLookup,
            ),
            (
                "GET",
                m.rg_path("Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines"),
                None,
                CallKind::InstanceLookup,
            ),
            ("PATCH", vm.clone(), Some(json!({})), CallKind::Other),
            (
                "PUT",
                lb_path.clone(),
                Some(lb_body.clone()),
                lb(LbOp::Create),
            ),
            (
                "PUT",
                lb_path.clone(),
                Some(lb_body.clone()),
                lb(LbOp::OtherWrite),
            ),
            ("GET", lb_path.clone(), None, lb(LbOp::Read)),
            (
                "GET",
                m.rg_path("Microsoft.Network/loadBalancers"),
                None,
                lb(LbOp::Read),
            ),
            ("PUT", nic_id.clone(), Some(nic), lb(LbOp::BackendWrite)),
            ("GET", nic_id.clone(), None, CallKind::LoadBalancerSupport),
            (
                "PUT",
                m.rg_path("Microsoft.Network/publicIPAddresses/pip"),
                Some(json!({"properties": {}})),
                CallKind::LoadBalancerSupport,
            ),
            (
                "DELETE",
                m.rg_path("Microsoft.Network/publicIPAddresses/pip"),
                None,
                CallKind::LoadBalancerSupport,
            ),
            (
                "PUT",
                route.clone(),
                Some(json!({"properties": {"addressPrefix": "10.244.0.0/24",
                    "nextHopType": "VirtualAppliance", "nextHopIpAddress": "127.60.0.10"}})),
                CallKind::RouteWrite,
            ),
            ("GET", route.clone(), None, CallKind::LoadBalancerSupport),
            ("DELETE", route, None, CallKind::RouteWrite),
            ("DELETE", lb_path.clone(), None, lb(LbOp::Delete)),
            (
                "GET",
                format!(
                    "/subscriptions/{}/providers/Microsoft.Network/locations/{}/operations/op-1",
                    m.shared.config.subscription_id, m.shared.config.location
                ),
                None,
                CallKind::LoadBalancerSupport,
            ),
            (
                "GET",
                format!("/subscriptions/{}", m.shared.config.subscription_id),
                None,
                CallKind::Other,
            ),
        ];
        let first = m.shared.journal.last_seq();
        for (method, uri, body, _) in &calls {
            m.arm(method, uri, &t, body.clone()).await;
        }
        // Refused (no token), faulted, an admin call and a path ARM does not have.
        m.send("PUT", &lb_path, &[], lb_body.to_string()).await;
        m.admin().faults().add(FaultJson {
            status: 503,
            count: Some(1),
            ..Default::default()
        });
        m.arm("PUT", &lb_path, &t, Some(lb_body)).await;
        m.send("GET", "/admin/vms", &[], "").await;
        m.send("GET", "/nothing/here", &[], "").await;
        let entries = m.shared.journal.since(first);
        assert_eq!(entries.len(), calls.len() + 4);
        for e in &m.shared.journal.entries() {
            assert_eq!(
                e.kind,
                harness_table(e),
                "{} {:?} {}",
                e.method,
                e.operation,
                e.status
            );
        }
        let journaled: Vec<(&str, CallKind)> = entries[..calls.len()]
            .iter()
            .map(|e| (e.path.as_str(), e.kind))
            .collect();
        let wanted: Vec<(&str, CallKind)> = calls.iter().map(|c| (c.1.as_str(), c.3)).collect();
        assert_eq!(journaled, wanted);
        let rest: Vec<(u16, CallKind)> = entries[calls.len()..]
            .iter()
            .map(|e| (e.status, e.kind))
            .collect();
        assert_eq!(
            rest,
            vec![
                (401, lb(LbOp::OtherWrite)),
                (503, lb(LbOp::OtherWrite)),
                (200, CallKind::Other),
                (404, CallKind::Other),
            ]
        );
    }

    #[tokio::test]
    async fn faults_render_in_arm_and_aad_envelopes() {
        let m = Mock::seeded(2);
        let t = m.token().await;
        m.admin().faults().add(FaultJson {
            service: Some("compute".into()),
            operation: Some("GET Microsoft.Compute/virtualMachines".into()),
            resource: Some("node-1".into()),
            status: 503,
            count: Some(1),
            ..Default::default()
        });
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/node-0"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, Status::OK, "another resource is not faulted");
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/node-1"),
                &t,
                None,
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (Status::SERVICE_UNAVAILABLE, Some("ServiceUnavailable"))
        );
        assert!(r.header("x-ms-request-id").is_some());
        m.admin().faults().add(FaultJson {
            service: Some("identity".into()),
            status: 500,
            count: Some(1),
            ..Default::default()
        });
        let form = format!(
            "grant_type=client_credentials&client_id=ccm-client&client_secret={}&scope=x%2F.default",
            m.shared.config.client_secret
        );
        let r = m
            .send(
                "POST",
                &format!("/{}/oauth2/v2.0/token", m.shared.config.tenant_id),
                &[],
                form,
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"].as_str()),
            (Status::INTERNAL_SERVER_ERROR, Some("server_error"))
        );
        // Admin routes are journaled, never faulted.
        m.admin().faults().add(FaultJson {
            status: 500,
            ..Default::default()
        });
        assert_eq!(
            m.send("GET", "/admin/vms", &[], "").await.status,
            Status::OK
        );
        assert_eq!(
            m.shared
                .journal
                .entries()
                .last()
                .map(|e| e.service.clone())
                .as_deref(),
            Some("admin")
        );
    }

    #[tokio::test]
    async fn throttle_preset_and_reset_fault() {
        let m = Mock::seeded(1);
        let t = m.token().await;
        m.admin().faults().add(FaultJson {
            kind: Some(FaultKind::Throttle),
            service: Some("network".into()),
            count: Some(1),
            ..Default::default()
        });
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Network/loadBalancers"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, Status::TOO_MANY_REQUESTS);
        assert_eq!(r.body["error"]["code"], "TooManyRequests");
        assert_eq!(r.header("retry-after"), Some("1"));
        let e = m.shared.journal.entries().pop().expect("entry");
        assert_eq!((e.status, e.fault.is_some()), (429, true));
        assert_eq!(
            m.arm(
                "GET",
                &m.rg_path("Microsoft.Network/loadBalancers"),
                &t,
                None
            )
            .await
            .status,
            Status::OK
        );
    }

    #[tokio::test]
    async fn new_resources_can_be_hidden_for_some_reads() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        m.admin().faults().add(FaultJson {
            service: Some("network".into()),
            kind: Some(FaultKind::NotFoundAfterCreate),
            window_reads: Some(2),
            ..Default::default()
        });
        let p = m.rg_path("Microsoft.Network/publicIPAddresses/fresh");
        let r = m.arm("PUT", &p, &t, Some(json!({"properties": {}}))).await;
        assert_eq!(r.status, Status::CREATED);
        for _ in 0..2 {
            let r = m.arm("GET", &p, &t, None).await;
            assert_eq!(
                (r.status, r.body["error"]["code"].as_str()),
                (Status::NOT_FOUND, Some("ResourceNotFound"))
            );
        }
        assert_eq!(m.arm("GET", &p, &t, None).await.status, Status::OK);
    }

    #[tokio::test]
    async fn reset_clears_faults_and_state_and_wakes() {
        let m = Mock::seeded(1);
        let t = m.token().await;
        m.admin().faults().add(FaultJson {
            status: 500,
            ..Default::default()
        });
        let rev = m.shared.wake.rev();
        let r = m.send("POST", "/admin/reset", &[], "").await;
        assert_eq!(r.status, Status::NO_CONTENT);
        assert!(m.shared.wake.rev() > rev);
        assert!(m.admin().faults().list().is_empty());
        assert_eq!(
            m.arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/node-0"),
                &t,
                None
            )
            .await
            .status,
            Status::OK
        );
    }
}
