//! The vim25 SOAP endpoint on `POST /sdk`: envelope parsing, the session cookie, the
//! fault envelope, and dispatch to the methods a CCM and pyvmomi use.
//!
//! Behaviour matched to vCenter as clients see it (govmomi `vim25/soap/client.go`,
//! pyvmomi `pyVmomi/SoapAdapter.py`): every fault is HTTP 500 with
//! `soapenv:Fault/faultcode=ServerFaultCode` and a typed `detail/<T>Fault xsi:type="T"`;
//! the session is the `vmware_soap_session` cookie set by `Login`; calls without a live
//! session get `NotAuthenticated`, except `RetrieveServiceContent`, `Login` and reading
//! `SessionManager.currentSession` (unset when not logged in, which is how govmomi's
//! `SessionManager.UserSession` detects an expired session, `govmomi:session/manager.go`).
//!
//! This module takes a request through the fault engine and the journal (the request
//! gate) and dispatches the call by method; the managed objects are served by
//! `sessions` (`SessionManager`), `property_collector` (`PropertyCollector`, `ViewManager`,
//! `Fetch`), `search_index` (`SearchIndex`) and `tasks` (VM power and reboot), and
//! `envelope` reads and writes SOAP envelopes and faults.

mod envelope;
mod property_collector;
mod search_index;
mod sessions;
mod tasks;

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use mock_cloud::gate::{Call as GateCall, Classified, Gate};
use mock_cloud::{Faults, FiredFault, Journal, Throttle};

use crate::Shared;
use crate::model::Inventory;
use crate::xml::{Element, esc};
use envelope::{Call, Fault, expect_this, mo, ok, read_call, xml_response};
use property_collector::{fetch, wait_for_updates};
use search_index::{search, search_hits};
pub use sessions::{SESSION_COOKIE, Sessions};
use sessions::{live_session, login, session_cookie};
use tasks::{power, reboot};

/// The API version we announce (`about.apiVersion`, vimServiceVersions.xml).
pub const API_VERSION: &str = "8.0.3.0";
const PRIOR_VERSIONS: &[&str] = &[
    "8.0.2.0", "8.0.1.0", "8.0.0.2", "8.0.0.1", "8.0.0.0", "7.0.3.2", "7.0.3.1", "7.0.3.0",
    "7.0.2.1", "7.0.2.0", "7.0.1.1", "7.0.1.0", "7.0.0.2", "7.0.0.1", "7.0.0.0", "6.9.1", "6.8.7",
    "6.7.3", "6.7.2", "6.7.1", "6.7", "6.5", "6.0", "5.5", "5.1", "5.0",
];
/// Methods served on `/sdk`.
pub const METHODS: &[&str] = &[
    "RetrieveServiceContent",
    "Login",
    "Logout",
    "SessionIsActive",
    "RetrieveProperties",
    "RetrievePropertiesEx",
    "ContinueRetrievePropertiesEx",
    "CancelRetrievePropertiesEx",
    "CreateFilter",
    "DestroyPropertyFilter",
    "WaitForUpdates",
    "WaitForUpdatesEx",
    "CreateContainerView",
    "DestroyView",
    "FindByUuid",
    "FindAllByUuid",
    "FindByDnsName",
    "FindAllByDnsName",
    "FindByIp",
    "FindAllByIp",
    "PowerOffVM_Task",
    "PowerOnVM_Task",
    "RebootGuest",
    "ResetVM_Task",
    "Fetch",
];

/// `GET /sdk/vimServiceVersions.xml`: what pyvmomi's SmartConnect reads to pick a version
/// (twice per connect); built once.
pub async fn service_versions() -> Response {
    static BODY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body = BODY.get_or_init(|| {
        let mut body = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<namespaces version=\"1.0\">\n <namespace>\n  <name>urn:vim25</name>\n",
        );
        let _ = writeln!(
            body,
            "  <version>{API_VERSION}</version>\n  <priorVersions>"
        );
        for v in PRIOR_VERSIONS {
            let _ = writeln!(body, "   <version>{v}</version>");
        }
        body.push_str("  </priorVersions>\n </namespace>\n</namespaces>\n");
        body
    });
    xml_response(StatusCode::OK, body.clone())
}

/// `GET /sdk/vimService.wsdl`: a minimal WSDL naming the vim25 service and its port at
/// this server's `/sdk`, for clients that look it up before calling (older JAX-WS
/// clients; vCenter serves the full WSDL there). It declares no operations: clients
/// generated from the real WSDL only read the service name and address.
pub(crate) async fn wsdl(State(shared): State<Arc<Shared>>) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<definitions targetNamespace=\"urn:vim25Service\" xmlns=\"http://schemas.xmlsoap.org/wsdl/\" xmlns:interface=\"urn:vim25\" xmlns:soap=\"http://schemas.xmlsoap.org/wsdl/soap/\">\n <service name=\"VimService\">\n  <port binding=\"interface:VimBinding\" name=\"VimPort\">\n   <soap:address location=\"{}/sdk\"/>\n  </port>\n </service>\n</definitions>\n",
        esc(&shared.base)
    );
    xml_response(StatusCode::OK, body)
}

/// What the gate read from a SOAP call, for the handler and for rendering faults.
#[derive(Debug, Clone)]
pub(crate) struct SoapCall {
    doc: Arc<Element>,
    /// The call's `_this` as `(type, id)`.
    this: (String, String),
    /// The managed object the call is about ([`resource_of`]).
    resource: Option<(String, String)>,
}

/// vSphere's SOAP side of the shared request gate ([`mock_cloud::gate`]).
///
/// Journal entries and fault rules see: service `vim`, method `POST`, path
/// `/sdk/<Method>` (`/sdk/-` for a call that cannot be read), operation = the SOAP method
/// (e.g. `RetrievePropertiesEx`; `None` when unreadable), resource = the MoRef id the call
/// is about ([`resource_of`]). A body that is too large, a foreign `SOAPAction`, XML that
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

/// `POST /sdk`: runs the call the gate read.
pub(crate) async fn endpoint(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Extension(soap): Extension<Option<SoapCall>>,
) -> Response {
    let Some(soap) = soap else {
        return Fault::invalid_request("The SOAP Envelope has no Body").response();
    };
    let call = match read_call(&soap.doc) {
        Ok(c) => c,
        Err(f) => return f.response(),
    };
    let resource = soap
        .resource
        .as_ref()
        .map(|(t, i)| (t.as_str(), i.as_str()));
    let cookie = session_cookie(&headers);
    let task_read = resource.filter(|r| r.0 == "Task").map(|r| r.1);
    shared.inventory().settle_tasks(task_read.as_slice());
    let result = if matches!(call.method, "WaitForUpdates" | "WaitForUpdatesEx") {
        wait_for_updates(&shared, &call, cookie.as_deref()).await
    } else {
        handle(&shared, &call, cookie.as_deref())
    };
    match result {
        Ok(resp) => resp,
        Err(f) => f.response(),
    }
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

fn handle(shared: &Shared, call: &Call<'_>, cookie: Option<&str>) -> Result<Response, Fault> {
    let m = call.method;
    match m {
        "RetrieveServiceContent" => {
            expect_this(call, "ServiceInstance", "ServiceInstance")?;
            return Ok(ok(m, service_content(shared)));
        }
        "Login" => {
            expect_this(call, "SessionManager", "SessionManager")?;
            return login(shared, call);
        }
        _ => {}
    }
    let session = live_session(shared, cookie);
    // Reading SessionManager.currentSession works without a session (it is then unset).
    let manager_read = m == "Fetch" && matches!(call.this.1, "SessionManager" | "ServiceInstance");
    if session.is_none()
        && !(m == "RetrieveProperties" || m == "RetrievePropertiesEx" || manager_read)
    {
        return Err(Fault::not_authenticated());
    }
    match m {
        "Logout" => sessions::logout(shared, call, cookie),
        "SessionIsActive" => sessions::session_is_active(shared, call),
        "RetrieveProperties" | "RetrievePropertiesEx" => {
            property_collector::retrieve_properties(shared, call, session.as_ref())
        }
        "ContinueRetrievePropertiesEx" => property_collector::continue_retrieve(shared, call),
        "CancelRetrievePropertiesEx" => property_collector::cancel_retrieve(shared, call),
        "CreateFilter" => property_collector::create_filter(shared, call, session.as_ref()),
        "DestroyPropertyFilter" => property_collector::destroy_filter(shared, call),
        "CreateContainerView" => property_collector::create_container_view(shared, call),
        "DestroyView" => property_collector::destroy_view(shared, call),
        "FindByUuid" | "FindAllByUuid" | "FindByDnsName" | "FindAllByDnsName" | "FindByIp"
        | "FindAllByIp" => {
            expect_this(call, "SearchIndex", "SearchIndex")?;
            search(shared, call)
        }
        "PowerOffVM_Task" | "PowerOnVM_Task" => power(shared, call),
        "RebootGuest" | "ResetVM_Task" => reboot(shared, call),
        "Fetch" => fetch(shared, call, session.as_ref()),
        _ => Err(Fault::new(
            "MethodNotFound",
            format!("Method {m} not found on {}", call.this.0),
        )
        .with(format!(
            "<receiver {}</receiver><method>{}</method>",
            mo(call.this.0, call.this.1),
            esc(m)
        ))),
    }
}

fn service_content(shared: &Shared) -> String {
    let inv = shared.inventory();
    format!(
        "<returnval>{}</returnval>",
        service_content_fields(shared, &inv)
    )
}

fn service_content_fields(shared: &Shared, inv: &Inventory) -> String {
    let mut out = String::new();
    let _ = write!(out, "<rootFolder {}</rootFolder>", mo("Folder", &inv.root));
    out.push_str(
        "<propertyCollector type=\"PropertyCollector\">propertyCollector</propertyCollector>",
    );
    out.push_str("<viewManager type=\"ViewManager\">ViewManager</viewManager>");
    let _ = write!(
        out,
        "<about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.3 build-24022515 (ccm-conformance mock)</fullName><vendor>VMware, Inc.</vendor><version>8.0.3</version><build>24022515</build><localeVersion>INTL</localeVersion><localeBuild>000</localeBuild><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>{API_VERSION}</apiVersion><instanceUuid>{}</instanceUuid><licenseProductName>VMware VirtualCenter Server</licenseProductName><licenseProductVersion>8.0</licenseProductVersion></about>",
        shared.instance_uuid
    );
    out.push_str("<sessionManager type=\"SessionManager\">SessionManager</sessionManager>");
    out.push_str("<taskManager type=\"TaskManager\">TaskManager</taskManager>");
    out.push_str("<searchIndex type=\"SearchIndex\">SearchIndex</searchIndex>");
    out
}
