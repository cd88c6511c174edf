//! What vSphere's requests are to the shared request gate ([`mock_cloud::gate`]): the
//! vim25 SOAP calls on `POST /sdk` ([`SoapGate`]: the envelope read up to its one call,
//! the managed object it is about, vim25 faults for injected errors) and the vAPI REST
//! calls ([`VapiGate`]: vAPI's error JSON). Both answer `throttle` rules as vCenter answers
//! an expired or throttled session. A SearchIndex `Find*` call is an instance lookup
//! (`mock_cloud::CallKind`); vSphere has no routes or load balancers, so every other call
//! is `Other`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use mock_cloud::gate::{Call as GateCall, Classified, Gate};
use mock_cloud::{CallKind, Faults, FiredFault, Journal, Throttle};

use crate::Shared;
use crate::soap::envelope::{Call, Fault, ok, read_call};
use crate::soap::search_index::search_hits;
use crate::xml::Element;

/// SearchIndex methods that look instances up (what cloud-provider-vsphere's node
/// manager calls to find a node's VM): journaled as `CallKind::InstanceLookup`.
pub const LOOKUPS: &[&str] = &[
    "FindByUuid",
    "FindAllByUuid",
    "FindByDnsName",
    "FindAllByDnsName",
    "FindByIp",
    "FindAllByIp",
];

/// What a SOAP call is in the terms cases ask about, by its method.
pub(crate) fn call_kind(method: &str) -> CallKind {
    if LOOKUPS.contains(&method) {
        CallKind::InstanceLookup
    } else {
        CallKind::Other
    }
}

/// What the gate read from a SOAP call, for the handler and for rendering faults.
#[derive(Debug, Clone)]
pub(crate) struct SoapCall {
    pub(crate) doc: Arc<Element>,
    /// The call's `_this` as `(type, id)`.
    pub(crate) this: (String, String),
    /// The managed object the call is about ([`resource_of`]).
    pub(crate) resource: Option<(String, String)>,
}

/// vSphere's SOAP side of the shared request gate ([`mock_cloud::gate`]).
///
/// Journal entries and fault rules see: service `vim`, method `POST`, path
/// `/sdk/<Method>` (`/sdk/-` for a call that cannot be read), operation = the SOAP method
/// (e.g. `RetrievePropertiesEx`; `None` when unreadable), resource = the MoRef id the call
/// is about ([`resource_of`]), kind = [`call_kind`]. A body that is too large, a foreign `SOAPAction`, XML that
/// does not parse or an envelope without one call are answered `InvalidRequest` before
/// fault rules (and journaled).
pub(crate) struct SoapGate {
    pub shared: Arc<Shared>,
}

impl Gate for SoapGate {
    type Extra = Option<SoapCall>;

    fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    fn journal(&self) -> &Journal {
        &self.shared.journal
    }

    async fn classify(&self, req: Request) -> Classified<Option<SoapCall>> {
        let (mut parts, body) = req.into_parts();
        let mut call = GateCall {
            service: "vim".to_string(),
            method: "POST".to_string(),
            path: "/sdk/-".to_string(),
            query: String::new(),
            operation: None,
            resource: None,
            kind: CallKind::Other,
            gated: true,
            fault_method: None,
            fault_path: None,
            wakes: false,
            extra: None,
        };
        let refused = match read_soap(&self.shared, &parts.headers, body).await {
            Ok(soap) => {
                let doc = soap.doc.clone();
                match read_call(&doc) {
                    Ok(c) => {
                        call.path = format!("/sdk/{}", c.method);
                        call.operation = Some(c.method.to_string());
                        call.kind = call_kind(c.method);
                        call.resource = soap.resource.as_ref().map(|r| r.1.clone());
                        call.extra = Some(soap);
                        parts.extensions.insert(call.extra.clone());
                        return Classified::Pass(call, Request::from_parts(parts, Body::empty()));
                    }
                    Err(f) => f,
                }
            }
            Err(f) => f,
        };
        Classified::Answer(call, refused.response())
    }

    fn throttle(_service: &str) -> Throttle {
        throttle_preset()
    }

    /// Every call is a `POST /sdk/<Method>` on the wire and is matched so; a read that
    /// nothing fired for is asked once more as `GET`, only while a
    /// `not_found_after_create` rule exists, so that rule's window (reads only) applies.
    fn check_faults(&self, call: &GateCall<Option<SoapCall>>) -> Option<FiredFault> {
        let method = call.operation.as_deref().unwrap_or_default();
        let faults = &self.shared.faults;
        let ask = |verb: &str| {
            let mut req = call.request_info();
            req.method = verb;
            faults.check_throttled(&req, Self::throttle)
        };
        ask("POST").or_else(|| {
            (READS.contains(&method) && faults.wants_created())
                .then(|| ask("GET"))
                .flatten()
        })
    }

    fn render_error(
        &self,
        call: &GateCall<Option<SoapCall>>,
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        let this = this_of(call);
        injected(status, code, message, (this.0, this.1)).response()
    }

    fn render_not_found(&self, call: &GateCall<Option<SoapCall>>, _fired: &FiredFault) -> Response {
        let method = call.operation.as_deref().unwrap_or_default();
        // A search for an object not visible yet finds nothing (no fault).
        if method.starts_with("Find") {
            return ok(method, String::new());
        }
        let (ty, id) = call
            .extra
            .as_ref()
            .and_then(|s| s.resource.as_ref())
            .map(|(t, i)| (t.as_str(), i.as_str()))
            .unwrap_or_else(|| this_of(call));
        Fault::not_found(ty, id).response()
    }
}

fn this_of(call: &GateCall<Option<SoapCall>>) -> (&str, &str) {
    call.extra
        .as_ref()
        .map_or(("", ""), |s| (s.this.0.as_str(), s.this.1.as_str()))
}

/// vSphere answers an expired or throttled session with the `NotAuthenticated` SOAP fault
/// (HTTP 500); so do `throttle` rules, on SOAP and vAPI alike.
pub(crate) fn throttle_preset() -> Throttle {
    Throttle {
        status: 500,
        code: Some("NotAuthenticated"),
        message: "The session is not authenticated.",
    }
}

/// Reads a SOAP request up to its call: body size, `SOAPAction`, XML, one call.
async fn read_soap(shared: &Shared, headers: &HeaderMap, body: Body) -> Result<SoapCall, Fault> {
    let bytes = axum::body::to_bytes(body, crate::BODY_LIMIT)
        .await
        .map_err(|_| {
            Fault::invalid_request(format!(
                "The request body is larger than {} bytes",
                crate::BODY_LIMIT
            ))
        })?;
    if let Some(action) = headers.get("soapaction") {
        let action = action.to_str().unwrap_or("").trim_matches('"');
        let ok = action
            .strip_prefix("urn:vim25/")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'));
        if !ok && !action.is_empty() {
            return Err(Fault::invalid_request(format!(
                "Unsupported SOAPAction {action:?}"
            )));
        }
    }
    let doc = Element::parse(&bytes).map_err(|e| Fault::invalid_request(e.to_string()))?;
    let call = read_call(&doc)?;
    let this = (call.this.0.to_string(), call.this.1.to_string());
    let resource = resource_of(shared, &call);
    Ok(SoapCall {
        doc: Arc::new(doc),
        this,
        resource,
    })
}

/// SOAP methods that only read; the fault engine sees them as `GET` for
/// `not_found_after_create` (its eventual-consistency window only applies to reads).
const READS: &[&str] = &[
    "FindByUuid",
    "FindAllByUuid",
    "FindByDnsName",
    "FindAllByDnsName",
    "FindByIp",
    "FindAllByIp",
    "RetrieveProperties",
    "RetrievePropertiesEx",
    "Fetch",
    "WaitForUpdates",
    "WaitForUpdatesEx",
];

/// The managed object a call is about, as `(type, id)`: `_this`; for the property
/// collector the first object of the (first) filter spec; for a search what it finds
/// (looked up only while fault rules exist); `None` for other calls on a singleton.
fn resource_of(shared: &Shared, call: &Call<'_>) -> Option<(String, String)> {
    if call.this.0 == "PropertyCollector" {
        let obj = call
            .el
            .child("specSet")
            .or_else(|| call.el.child("spec"))
            .and_then(|s| s.child("objectSet"))
            .and_then(|o| o.child("obj"))?;
        return Some((obj.attr("type")?.to_string(), obj.text.trim().to_string()));
    }
    if call.method.starts_with("Find") && call.this.0 == "SearchIndex" {
        if shared.faults.list().is_empty() {
            return None;
        }
        let (id, ty) = search_hits(shared, call).ok()?.into_iter().next()?;
        return Some((ty.to_string(), id));
    }
    if SINGLETONS.contains(&call.this.1) {
        return None;
    }
    Some((call.this.0.to_string(), call.this.1.to_string()))
}

/// `_this` ids of the service's singleton managers.
const SINGLETONS: &[&str] = &[
    "ServiceInstance",
    "SessionManager",
    "SearchIndex",
    "ViewManager",
    "TaskManager",
];

/// A fired rule as the vSphere fault a client would see: a `code` naming a vim25 fault
/// type we know wins (the `throttle` preset names `NotAuthenticated`); else the status
/// decides (401/403 `NotAuthenticated`, 404 `ManagedObjectNotFound` of `_this`, 400
/// `InvalidArgument`, others `SystemError`).
fn injected(status: u16, code: Option<&str>, message: Option<&str>, this: (&str, &str)) -> Fault {
    let by_code = match code {
        Some("NotAuthenticated") => Some(401),
        Some("ManagedObjectNotFound") => Some(404),
        Some("InvalidArgument") => Some(400),
        Some("SystemError") => Some(500),
        _ => None,
    };
    let mut f = match by_code.unwrap_or(status) {
        401 | 403 => Fault::not_authenticated(),
        404 => Fault::not_found(this.0, this.1),
        400 => Fault::invalid_argument("injected"),
        _ => Fault::new(
            "SystemError",
            "A general system error occurred: injected fault",
        )
        .with("<reason>injected fault</reason>".into()),
    };
    if let Some(m) = message {
        f.message = m.to_string();
    }
    f
}

/// vSphere's vAPI (REST) side of the shared request gate ([`mock_cloud::gate`]).
///
/// Journal entries and fault rules see: service `vapi`, the HTTP method, path and query,
/// operation = `"METHOD path"` (e.g. `"GET /api/vcenter/vm"`, as the journal path has it),
/// no resource. Injected errors answer vAPI's error JSON.
pub(crate) struct VapiGate {
    pub(crate) shared: Arc<Shared>,
}

impl Gate for VapiGate {
    type Extra = ();

    fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    fn journal(&self) -> &Journal {
        &self.shared.journal
    }

    async fn classify(&self, req: Request) -> Classified<()> {
        let mut call = GateCall::new("vapi", req.method(), req.uri(), ());
        call.operation = Some(format!("{} {}", call.method, call.path));
        Classified::Pass(call, req)
    }

    fn throttle(_service: &str) -> Throttle {
        throttle_preset()
    }

    fn render_error(
        &self,
        _call: &GateCall,
        status: u16,
        _code: Option<&str>,
        message: Option<&str>,
    ) -> Response {
        let status = axum::http::StatusCode::from_u16(status)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        let msg = message.unwrap_or("injected fault");
        (status, axum::Json(serde_json::json!({"type": "com.vmware.vapi.std.errors.service_unavailable", "value": {"messages": [{"default_message": msg}]}}))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use mock_cloud::{CallKind, JournalEntry};

    use crate::testing::{env, envelope};

    /// The table harness/src/cloud/vsphere.rs read journal entries by before the gate said
    /// what a call was (`classify`: a SearchIndex find on the SOAP service is an instance
    /// lookup), kept as the reference the gate's kinds are checked against.
    fn harness_table(e: &JournalEntry) -> CallKind {
        const LOOKUPS: &[&str] = &[
            "FindByUuid",
            "FindAllByUuid",
            "FindByDnsName",
            "FindAllByDnsName",
            "FindByIp",
            "FindAllByIp",
        ];
        if e.service == "vim" && e.operation.as_deref().is_some_and(|m| LOOKUPS.contains(&m)) {
            CallKind::InstanceLookup
        } else {
            CallKind::Other
        }
    }

    #[tokio::test]
    async fn journaled_kinds_are_the_harness_table() {
        let e = env();
        let cookie = e.login().await;
        let vm = e.vm("node-0");
        let si = r#"<_this type="SearchIndex">SearchIndex</_this>"#;
        let calls = [
            (format!(r#"<FindByUuid xmlns="urn:vim25">{si}<uuid>{}</uuid><vmSearch>true</vmSearch></FindByUuid>"#, vm.uuid), CallKind::InstanceLookup),
            (format!(r#"<FindAllByUuid xmlns="urn:vim25">{si}<uuid>{}</uuid><vmSearch>true</vmSearch></FindAllByUuid>"#, vm.uuid), CallKind::InstanceLookup),
            (format!(r#"<FindByDnsName xmlns="urn:vim25">{si}<dnsName>node-0</dnsName><vmSearch>true</vmSearch></FindByDnsName>"#), CallKind::InstanceLookup),
            (format!(r#"<FindAllByDnsName xmlns="urn:vim25">{si}<dnsName>node-0</dnsName><vmSearch>true</vmSearch></FindAllByDnsName>"#), CallKind::InstanceLookup),
            (format!(r#"<FindByIp xmlns="urn:vim25">{si}<ip>198.18.0.10</ip><vmSearch>true</vmSearch></FindByIp>"#), CallKind::InstanceLookup),
            (format!(r#"<FindAllByIp xmlns="urn:vim25">{si}<ip>198.18.0.10</ip><vmSearch>true</vmSearch></FindAllByIp>"#), CallKind::InstanceLookup),
            (r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#.to_string(), CallKind::Other),
            (format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#, vm.id), CallKind::Other),
        ];
        for (call, _) in &calls {
            e.soap(Some(&cookie), call).await;
        }
        // Unreadable (no call in the body), a vAPI call, an admin call.
        e.raw(
            Request::post("/sdk")
                .body(Body::from(envelope("")))
                .expect("request"),
        )
        .await;
        e.raw(
            Request::get("/api/session")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
        e.raw(
            Request::get("/admin/vms")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
        let entries = e.shared.journal.entries();
        assert_eq!(entries.len(), 1 + calls.len() + 3, "login, calls, the rest");
        for entry in &entries {
            assert_eq!(
                entry.kind,
                harness_table(entry),
                "{} {:?}",
                entry.service,
                entry.operation
            );
        }
        let journaled: Vec<CallKind> = entries[1..=calls.len()].iter().map(|e| e.kind).collect();
        let wanted: Vec<CallKind> = calls.iter().map(|c| c.1).collect();
        assert_eq!(journaled, wanted);
        let rest: Vec<(&str, CallKind)> = entries[1 + calls.len()..]
            .iter()
            .map(|e| (e.service.as_str(), e.kind))
            .collect();
        assert_eq!(
            rest,
            vec![
                ("vim", CallKind::Other),
                ("vapi", CallKind::Other),
                ("admin", CallKind::Other)
            ]
        );
    }
}
