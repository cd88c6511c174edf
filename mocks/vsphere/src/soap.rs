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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use mock_cloud::gate::{Call as GateCall, Classified, Gate};
use mock_cloud::lifecycle::{Lifecycle, Mode};
use mock_cloud::{Faults, FiredFault, Journal, Throttle};

use crate::Shared;
use crate::model::{Inventory, Kind, PowerState, REBOOT_SECONDS};
use crate::props::{self, Val};
use crate::spec::{FilterSpec, Selection, SpecError, Traversal};
use crate::xml::{Element, esc};

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

/// Cookie carrying the SOAP session.
pub const SESSION_COOKIE: &str = "vmware_soap_session";

/// A logged-in SOAP session.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: String,
    pub login_time: String,
    pub last_active: Instant,
    pub last_active_time: String,
}

/// SOAP sessions and the unread pages of `RetrievePropertiesEx`.
#[derive(Debug, Default)]
pub struct Sessions {
    pub soap: HashMap<String, Session>,
    /// token -> remaining `ObjectContent` XML fragments.
    pub pages: HashMap<String, (Vec<String>, usize)>,
    /// PropertyFilter id -> its spec, read once at `CreateFilter`.
    pub filters: HashMap<String, FilterSpec>,
    /// PropertyFilter id -> what `WaitForUpdates` last reported: object id -> (its
    /// `ObjectContent` XML, its type).
    pub reported: HashMap<String, HashMap<String, (String, String)>>,
    /// vAPI session id -> its user and times.
    pub vapi: HashMap<String, crate::vapi::VapiSession>,
}

/// A vim25 fault as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub ty: &'static str,
    pub message: String,
    /// The fault's fields, as XML.
    pub fields: String,
}

impl Fault {
    fn new(ty: &'static str, message: impl Into<String>) -> Fault {
        Fault {
            ty,
            message: message.into(),
            fields: String::new(),
        }
    }

    fn with(mut self, fields: String) -> Fault {
        self.fields = fields;
        self
    }

    pub fn not_authenticated() -> Fault {
        Fault::new("NotAuthenticated", "The session is not authenticated.").with(
            "<object type=\"SessionManager\">SessionManager</object><privilegeId>System.View</privilegeId>"
                .into(),
        )
    }

    pub fn not_found(ty: &str, id: &str) -> Fault {
        Fault::new(
            "ManagedObjectNotFound",
            format!(
                "The object 'vim.{ty}:{id}' has already been deleted or has not been completely created"
            ),
        )
        .with(format!("<obj type=\"{}\">{}</obj>", esc(ty), esc(id)))
    }

    pub fn invalid_request(message: impl Into<String>) -> Fault {
        Fault::new("InvalidRequest", message)
    }

    fn invalid_argument(name: &str) -> Fault {
        Fault::new(
            "InvalidArgument",
            format!("A specified parameter was not correct: {name}"),
        )
        .with(format!("<invalidProperty>{}</invalidProperty>", esc(name)))
    }

    /// The HTTP response: always 500, as vCenter answers faults.
    pub fn response(&self) -> Response {
        let body = format!(
            "{HEAD}<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>{}</faultstring><detail><{ty}Fault xmlns=\"urn:vim25\" xsi:type=\"{ty}\">{}</{ty}Fault></detail></soapenv:Fault>{TAIL}",
            esc(&self.message),
            self.fields,
            ty = self.ty,
        );
        xml_response(StatusCode::INTERNAL_SERVER_ERROR, body)
    }
}

const HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<soapenv:Envelope xmlns:soapenc=\"http://schemas.xmlsoap.org/soap/encoding/\" xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\n<soapenv:Body>\n";
const TAIL: &str = "\n</soapenv:Body>\n</soapenv:Envelope>";

fn xml_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

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

/// A parsed call.
struct Call<'a> {
    method: &'a str,
    this: (&'a str, &'a str),
    el: &'a Element,
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

fn read_call(doc: &Element) -> Result<Call<'_>, Fault> {
    if doc.name != "Envelope" {
        return Err(Fault::invalid_request("Expected a SOAP Envelope"));
    }
    let body = doc
        .child("Body")
        .ok_or_else(|| Fault::invalid_request("The SOAP Envelope has no Body"))?;
    let el = match body.children.as_slice() {
        [one] => one,
        _ => {
            return Err(Fault::invalid_request(
                "The SOAP Body must hold exactly one call",
            ));
        }
    };
    let this = el
        .child("_this")
        .and_then(|t| t.attr("type").map(|ty| (ty, t.text.trim())))
        .ok_or_else(|| Fault::invalid_request(format!("{}: missing _this", el.name)))?;
    Ok(Call {
        method: &el.name,
        this,
        el,
    })
}

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all(header::COOKIE) {
        let Ok(value) = value.to_str() else { continue };
        for part in value.split(';') {
            if let Some((k, v)) = part.trim().split_once('=')
                && k == SESSION_COOKIE
            {
                return Some(v.trim_matches('"').to_string());
            }
        }
    }
    None
}

fn ok(method: &str, inner: String) -> Response {
    xml_response(
        StatusCode::OK,
        format!("{HEAD}<{method}Response xmlns=\"urn:vim25\">{inner}</{method}Response>{TAIL}"),
    )
}

/// The attribute and text of a MoRef element; both come from requests at times (a
/// `_this` type is echoed in `MethodNotFound`), so both are escaped.
fn mo(ty: &str, id: &str) -> String {
    format!("type=\"{}\">{}", esc(ty), esc(id))
}

/// The live session for this cookie, touched; expired ones are dropped.
fn live_session(shared: &Shared, cookie: Option<&str>) -> Option<Session> {
    let key = cookie?;
    let mut sessions = shared.sessions();
    let idle = shared.config.session_idle_timeout;
    let session = sessions.soap.get_mut(key)?;
    if session.last_active.elapsed() > idle {
        sessions.soap.remove(key);
        return None;
    }
    session.last_active = Instant::now();
    session.last_active_time = jiff::Timestamp::now().to_string();
    Some(session.clone())
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
        "Logout" => {
            expect_this(call, "SessionManager", "SessionManager")?;
            if let Some(key) = cookie {
                shared.sessions().soap.remove(key);
            }
            Ok(ok(m, String::new()))
        }
        "SessionIsActive" => {
            let key = call.el.child_text("sessionID").unwrap_or("");
            let user = call.el.child_text("userName").unwrap_or("");
            let active = shared
                .sessions()
                .soap
                .get(key)
                .is_some_and(|s| s.user == user);
            Ok(ok(m, format!("<returnval>{active}</returnval>")))
        }
        "RetrieveProperties" | "RetrievePropertiesEx" => {
            expect_this(call, "PropertyCollector", "propertyCollector")?;
            let specs = read_specs(call.el)?;
            let contents = retrieve(shared, &specs, session.as_ref())?;
            if m == "RetrieveProperties" {
                let inner: String = contents
                    .iter()
                    .map(|c| format!("<returnval>{}</returnval>", c.xml()))
                    .collect();
                return Ok(ok(m, inner));
            }
            let max = call
                .el
                .child("options")
                .and_then(|o| o.child_text("maxObjects"))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(usize::MAX);
            let contents = contents.iter().map(Content::xml).collect();
            Ok(ok(m, page(shared, contents, max)))
        }
        "ContinueRetrievePropertiesEx" => {
            let token = call.el.child_text("token").unwrap_or("");
            let rest = shared.sessions().pages.remove(token);
            let (rest, max) = rest.ok_or_else(|| Fault::invalid_argument("token"))?;
            Ok(ok(m, page(shared, rest, max)))
        }
        "CancelRetrievePropertiesEx" => {
            let token = call.el.child_text("token").unwrap_or("");
            shared.sessions().pages.remove(token);
            Ok(ok(m, String::new()))
        }
        "CreateFilter" => {
            expect_this(call, "PropertyCollector", "propertyCollector")?;
            let spec = call
                .el
                .child("spec")
                .ok_or_else(|| Fault::invalid_argument("spec"))?;
            let spec = FilterSpec::parse(spec).map_err(spec_fault)?;
            // Validate now, as vCenter does: a bad spec fails CreateFilter itself.
            retrieve(shared, std::slice::from_ref(&spec), session.as_ref())?;
            let id = format!(
                "session[{}]{}",
                crate::model::new_uuid(),
                shared.sessions().filters.len() + 1
            );
            shared.sessions().filters.insert(id.clone(), spec);
            Ok(ok(
                m,
                format!("<returnval {}</returnval>", mo("PropertyFilter", &id)),
            ))
        }
        "DestroyPropertyFilter" => {
            shared.sessions().reported.remove(call.this.1);
            if shared.sessions().filters.remove(call.this.1).is_none() {
                return Err(Fault::not_found("PropertyFilter", call.this.1));
            }
            Ok(ok(m, String::new()))
        }
        "CreateContainerView" => {
            expect_this(call, "ViewManager", "ViewManager")?;
            let container = call
                .el
                .child_text("container")
                .ok_or_else(|| Fault::invalid_argument("container"))?;
            let types: Vec<String> = call
                .el
                .all("type")
                .map(|t| t.text.trim().to_string())
                .collect();
            let recursive = call.el.child_bool("recursive").unwrap_or(false);
            let mut inv = shared.inventory();
            let id = inv
                .add_view(container, &types, recursive)
                .ok_or_else(|| Fault::not_found("Folder", container))?;
            Ok(ok(
                m,
                format!("<returnval {}</returnval>", mo("ContainerView", &id)),
            ))
        }
        "DestroyView" => {
            let (_, id) = call.this;
            let mut inv = shared.inventory();
            if inv.get(id).is_none_or(|o| o.kind != Kind::ContainerView) {
                return Err(Fault::not_found("ContainerView", id));
            }
            inv.objects.remove(id);
            Ok(ok(m, String::new()))
        }
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

/// Properties of the singleton managers (not inventory objects). Takes the inventory
/// the caller already holds (its lock is not re-entrant).
fn manager_props(
    shared: &Shared,
    inv: &Inventory,
    id: &str,
    session: Option<&Session>,
) -> Option<(&'static str, Vec<(&'static str, Val)>)> {
    match id {
        "SessionManager" => {
            let mut props = Vec::new();
            if let Some(s) = session {
                props.push(("currentSession", user_session_val(s)));
            }
            props.push(("defaultLocale", props::s("en")));
            Some(("SessionManager", props))
        }
        "ServiceInstance" => Some((
            "ServiceInstance",
            vec![(
                "content",
                Val::Raw("ServiceContent", service_content_fields(shared, inv)),
            )],
        )),
        _ => None,
    }
}

/// `Fetch(prop)`: one property of one object, which pyvmomi 8+ uses for every attribute
/// read (`pyVmomi/StubAdapterAccessorImpl.py`); unset properties return nothing.
fn fetch(shared: &Shared, call: &Call<'_>, session: Option<&Session>) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let prop = call
        .el
        .child_text("prop")
        .ok_or_else(|| Fault::invalid_argument("prop"))?;
    let inv = shared.inventory();
    let (kind, props) = match manager_props(shared, &inv, id, session) {
        Some((t, props)) if t == ty => (None, props),
        _ => {
            let o = inv
                .get(id)
                .filter(|o| o.kind.is_a(ty))
                .ok_or_else(|| Fault::not_found(ty, id))?;
            (Some(o.kind), props::properties(&inv, o))
        }
    };
    let found = match kind {
        Some(k) => props::lookup(&props, k, prop),
        None => Ok(props
            .iter()
            .find(|(n, _)| *n == prop)
            .map(|(_, v)| v.clone())),
    };
    let value = found.map_err(|()| {
        Fault::new(
            "InvalidProperty",
            format!("A specified parameter was not correct: {prop}"),
        )
        .with(format!("<name>{}</name>", esc(prop)))
    })?;
    let mut out = String::new();
    if let Some(v) = value {
        v.write_result(&mut out);
    }
    Ok(ok(call.method, out))
}

/// Longest a `WaitForUpdates[Ex]` blocks when the client sets no `maxWaitSeconds`
/// (vCenter would wait for ever; the client just calls again).
const WAIT_CAP: Duration = Duration::from_secs(60);
/// How often a blocked `WaitForUpdates[Ex]` looks again (time-based task lifecycles end
/// without any request).
const WAIT_POLL: Duration = Duration::from_millis(10);

/// `WaitForUpdates[Ex]`. The first call (empty version) reports every filtered object as
/// `enter` with its selected properties; a later call reports, as `modify` with every
/// selected property assigned, the objects whose properties differ from what that filter
/// last reported, and `leave` for objects gone. With nothing to report it blocks, as
/// vCenter does, until something changes or `options/maxWaitSeconds` (WaitForUpdatesEx;
/// else [`WAIT_CAP`]) passes, and then answers no update set (Ex) or an empty one.
/// Each look counts as a read of the filtered tasks (lifecycle mode `reads`), and while
/// such a task is running the call answers at once so the client's next call reads again.
/// Simplification: the version only tells the first call from later ones.
async fn wait_for_updates(
    shared: &Shared,
    call: &Call<'_>,
    cookie: Option<&str>,
) -> Result<Response, Fault> {
    let Some(session) = live_session(shared, cookie) else {
        return Err(Fault::not_authenticated());
    };
    expect_this(call, "PropertyCollector", "propertyCollector")?;
    let version = call.el.child_text("version").unwrap_or("");
    let n: u64 = if version.is_empty() {
        0
    } else {
        version.parse().map_err(|_| {
            Fault::new(
                "InvalidCollectorVersion",
                "The collector version is not valid",
            )
        })?
    };
    let ex = call.method == "WaitForUpdatesEx";
    let max_wait = call
        .el
        .child("options")
        .and_then(|o| o.child_text("maxWaitSeconds"))
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let deadline = tokio::time::Instant::now() + max_wait.unwrap_or(WAIT_CAP).min(WAIT_CAP);
    loop {
        let (sets, reads_pending) = collect_updates(shared, &session, n == 0)?;
        let now = tokio::time::Instant::now();
        if !sets.is_empty() || reads_pending || now >= deadline {
            if sets.is_empty() && ex && now >= deadline {
                return Ok(ok(call.method, String::new()));
            }
            let mut out = format!("<returnval><version>{}</version>", n + 1);
            out.push_str(&sets);
            out.push_str("</returnval>");
            return Ok(ok(call.method, out));
        }
        tokio::time::sleep_until(deadline.min(now + WAIT_POLL)).await;
    }
}

/// One look for `wait_for_updates`: the `filterSet` XML of what changed per filter since
/// its last report (recording the new state), and whether a task the filters watch is
/// running in lifecycle mode `reads`.
fn collect_updates(
    shared: &Shared,
    session: &Session,
    first: bool,
) -> Result<(String, bool), Fault> {
    let filters: Vec<(String, FilterSpec)> = shared
        .sessions()
        .filters
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let watched: Vec<String> = filters
        .iter()
        .flat_map(|(_, spec)| &spec.objects)
        .filter(|o| o.obj.ty == "Task")
        .map(|o| o.obj.id.clone())
        .collect();
    let reads_pending = {
        let mut inv = shared.inventory();
        let reads: Vec<&str> = watched.iter().map(String::as_str).collect();
        inv.settle_tasks(&reads);
        watched.iter().any(|id| {
            inv.get(id)
                .and_then(|o| o.task.as_ref())
                .and_then(|t| t.pending.as_ref())
                .is_some_and(|p| matches!(p.lifecycle.mode(), Mode::Reads { .. }))
        })
    };
    let mut out = String::new();
    for (id, spec) in filters {
        let contents = retrieve(shared, std::slice::from_ref(&spec), Some(session))?;
        let now: HashMap<String, (String, String)> = contents
            .iter()
            .map(|c| (c.id.clone(), (c.xml(), c.ty.clone())))
            .collect();
        let mut sessions = shared.sessions();
        let seen = sessions.reported.entry(id.clone()).or_default();
        if first {
            seen.clear();
        }
        let mut set = String::new();
        for c in &contents {
            let xml = &now[&c.id].0;
            match seen.get(&c.id) {
                None => set.push_str(&format!("<objectSet>{}</objectSet>", c.update_xml("enter"))),
                Some((old, _)) if old != xml => set.push_str(&format!(
                    "<objectSet>{}</objectSet>",
                    c.update_xml("modify")
                )),
                Some(_) => {}
            }
        }
        for (gone, (_, ty)) in seen.iter().filter(|(k, _)| !now.contains_key(*k)) {
            let _ = write!(
                set,
                "<objectSet><kind>leave</kind><obj {}</obj></objectSet>",
                mo(ty, gone)
            );
        }
        *seen = now;
        if !set.is_empty() {
            let _ = write!(
                out,
                "<filterSet><filter {}</filter>{set}</filterSet>",
                mo("PropertyFilter", &id)
            );
        }
    }
    Ok((out, reads_pending))
}

fn page(shared: &Shared, mut contents: Vec<String>, max: usize) -> String {
    if contents.is_empty() {
        return String::new();
    }
    let mut out = String::from("<returnval>");
    if contents.len() > max {
        let rest = contents.split_off(max);
        let token = crate::model::new_uuid();
        let _ = write!(out, "<token>{token}</token>");
        // ContinueRetrievePropertiesEx keeps the first call's page size.
        shared.sessions().pages.insert(token, (rest, max));
    }
    for c in contents {
        let _ = write!(out, "<objects>{c}</objects>");
    }
    out.push_str("</returnval>");
    out
}

fn expect_this(call: &Call<'_>, ty: &str, id: &str) -> Result<(), Fault> {
    if call.this == (ty, id) {
        Ok(())
    } else if call.this.0 == ty {
        Err(Fault::not_found(ty, call.this.1))
    } else {
        Err(Fault::new(
            "MethodNotFound",
            format!("Method {} not found on {}", call.method, call.this.0),
        )
        .with(format!(
            "<receiver {}</receiver><method>{}</method>",
            mo(call.this.0, call.this.1),
            esc(call.method)
        )))
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

fn login(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let user = call.el.child_text("userName").unwrap_or("");
    let password = call.el.child("password").map_or("", |p| p.text.as_str());
    if user != shared.config.username || password != shared.config.password {
        return Err(Fault::new(
            "InvalidLogin",
            "Cannot complete login due to an incorrect user name or password.",
        ));
    }
    let key = crate::model::new_uuid();
    let now = jiff::Timestamp::now().to_string();
    let session = Session {
        user: user.to_string(),
        login_time: now.clone(),
        last_active: Instant::now(),
        last_active_time: now,
    };
    let body = format!(
        "<returnval>{}</returnval>",
        user_session_fields(&key, &session)
    );
    shared.sessions().soap.insert(key.clone(), session);
    let mut resp = ok(call.method, body);
    let cookie = format!("{SESSION_COOKIE}=\"{key}\"; Path=/; HttpOnly; Secure;");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(resp)
}

fn user_session_fields(key: &str, s: &Session) -> String {
    format!(
        "<key>{key}</key><userName>{u}</userName><fullName>{u}</fullName><loginTime>{}</loginTime><lastActiveTime>{}</lastActiveTime><locale>en</locale><messageLocale>en</messageLocale><extensionSession>false</extensionSession><ipAddress>127.0.0.1</ipAddress><userAgent></userAgent><callCount>0</callCount>",
        s.login_time,
        s.last_active_time,
        u = esc(&s.user)
    )
}

/// A `selectSet` entry resolved for the walk: a reference by name, or a traversal's
/// place in the arena.
#[derive(Debug)]
enum Select<'a> {
    Named(&'a str),
    Index(usize),
}

/// One traversal of the spec and its own `selectSet`, resolved.
struct Rule<'a> {
    t: &'a Traversal,
    select: Vec<Select<'a>>,
}

/// Puts the traversals of one spec in an arena and names them (names are shared by all
/// `ObjectSpec`s of a spec).
fn flatten<'a>(
    selects: &'a [Selection],
    arena: &mut Vec<Rule<'a>>,
    named: &mut HashMap<&'a str, usize>,
) -> Vec<Select<'a>> {
    let mut out = Vec::new();
    for s in selects {
        match s {
            Selection::Named(n) => out.push(Select::Named(n)),
            Selection::Traversal(t) => {
                let select = flatten(&t.select, arena, named);
                let index = arena.len();
                arena.push(Rule { t, select });
                if let Some(n) = &t.name {
                    named.insert(n, index);
                }
                out.push(Select::Index(index));
            }
        }
    }
    out
}

/// The `specSet` entries of a RetrieveProperties[Ex] call, read.
fn read_specs(el: &Element) -> Result<Vec<FilterSpec>, Fault> {
    let specs = el
        .all("specSet")
        .map(FilterSpec::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(spec_fault)?;
    if specs.is_empty() {
        return Err(Fault::invalid_argument("specSet"));
    }
    Ok(specs)
}

/// A spec that cannot be read: `InvalidArgument` for a missing `ObjectSpec.obj` (what
/// the mock answered before specs were typed, kept for clients that test for it), else
/// `InvalidRequest`.
fn spec_fault(e: SpecError) -> Fault {
    match e {
        SpecError::Missing("objectSet.obj") => Fault::invalid_argument("objectSet.obj"),
        e => Fault::invalid_request(e.to_string()),
    }
}

/// Objects a traversal path leads to.
fn follow(inv: &Inventory, id: &str, path: &str) -> Vec<String> {
    let Some(o) = inv.get(id) else {
        return Vec::new();
    };
    match path {
        "parent" => o.parent.iter().cloned().collect(),
        "resourcePool" if o.kind == Kind::VirtualMachine => {
            o.vm.iter().map(|v| v.resource_pool.clone()).collect()
        }
        "runtime.host" => o.vm.iter().map(|v| v.host.clone()).collect(),
        p => o.refs(p).to_vec(),
    }
}

struct Walk<'a> {
    inv: &'a Inventory,
    named: &'a HashMap<&'a str, usize>,
    arena: &'a [Rule<'a>],
    found: Vec<String>,
    expanded: std::collections::HashSet<(String, usize)>,
}

impl Walk<'_> {
    fn add(&mut self, id: &str) {
        if !self.found.iter().any(|f| f == id) {
            self.found.push(id.to_string());
        }
    }

    fn walk(&mut self, id: &str, selects: &[Select<'_>], depth: usize) {
        if depth > 64 {
            return;
        }
        for sel in selects {
            let index = match sel {
                Select::Index(i) => *i,
                Select::Named(n) => match self.named.get(*n) {
                    Some(&i) => i,
                    None => continue,
                },
            };
            let Some(rule) = self.arena.get(index) else {
                continue;
            };
            let t = rule.t;
            let Some(o) = self.inv.get(id) else { continue };
            if !o.kind.is_a(&t.ty) {
                continue;
            }
            if !self.expanded.insert((id.to_string(), index)) {
                continue;
            }
            for next in follow(self.inv, id, &t.path) {
                if !t.skip {
                    self.add(&next);
                }
                self.walk(&next, &rule.select, depth + 1);
            }
        }
    }
}

/// Runs the filter specs of a RetrieveProperties[Ex] call; one `<returnval>` per object.
/// One object's selected properties.
#[derive(Debug, Clone)]
struct Content {
    ty: String,
    id: String,
    sets: Vec<(String, Val)>,
}

impl Content {
    /// `ObjectContent` fields: `obj` and one `propSet` per property.
    fn xml(&self) -> String {
        let mut xml = format!("<obj {}</obj>", mo(&self.ty, &self.id));
        for (name, v) in &self.sets {
            let _ = write!(xml, "<propSet><name>{}</name>", esc(name));
            v.write_top(&mut xml, "val");
            xml.push_str("</propSet>");
        }
        xml
    }

    /// `ObjectUpdate` fields (`kind` enter or modify): every property as `assign`.
    fn update_xml(&self, kind: &str) -> String {
        let mut xml = format!("<kind>{kind}</kind><obj {}</obj>", mo(&self.ty, &self.id));
        for (name, v) in &self.sets {
            let _ = write!(xml, "<changeSet><name>{}</name><op>assign</op>", esc(name));
            v.write_top(&mut xml, "val");
            xml.push_str("</changeSet>");
        }
        xml
    }
}

fn retrieve(
    shared: &Shared,
    specs: &[FilterSpec],
    session: Option<&Session>,
) -> Result<Vec<Content>, Fault> {
    let inv = shared.inventory();
    let mut out = Vec::new();
    for spec in specs {
        let mut named = HashMap::new();
        let mut arena = Vec::new();
        let mut found = Vec::new();
        for os in &spec.objects {
            let (ty, id) = (os.obj.ty.as_str(), os.obj.id.as_str());
            if session.is_none() && (ty, id) != ("SessionManager", "SessionManager") {
                return Err(Fault::not_authenticated());
            }
            let selects = flatten(&os.select, &mut arena, &mut named);
            if matches!(
                (ty, id),
                ("SessionManager", "SessionManager") | ("ServiceInstance", "ServiceInstance")
            ) {
                if !found.iter().any(|f| f == id) {
                    found.push(id.to_string());
                }
                continue;
            }
            let o = inv.get(id).filter(|o| o.kind.is_a(ty));
            if o.is_none() {
                return Err(Fault::not_found(ty, id));
            }
            let mut walk = Walk {
                inv: &inv,
                named: &named,
                arena: &arena,
                found: Vec::new(),
                expanded: Default::default(),
            };
            if !os.skip {
                walk.add(id);
            }
            walk.walk(id, &selects, 0);
            for f in walk.found {
                if !found.contains(&f) {
                    found.push(f);
                }
            }
        }
        for id in &found {
            // Only objects some propSpec asks about are reported (and computed).
            let wanted = |ps: &crate::spec::PropSpec| match inv.get(id) {
                Some(o) => o.kind.is_a(&ps.ty),
                None => ps.ty == *id,
            };
            if !spec.props.iter().any(wanted) {
                continue;
            }
            let (ty, kind, props) =
                if let Some((ty, props)) = manager_props(shared, &inv, id, session) {
                    (ty, None, props)
                } else {
                    let Some(o) = inv.get(id) else { continue };
                    (o.kind.type_name(), Some(o.kind), props::properties(&inv, o))
                };
            let mut matched = false;
            let mut sets: Vec<(String, Val)> = Vec::new();
            for ps in &spec.props {
                let is = match kind {
                    Some(k) => k.is_a(&ps.ty),
                    None => ps.ty == ty,
                };
                if !is {
                    continue;
                }
                matched = true;
                if ps.all {
                    for (n, v) in &props {
                        sets.push((n.to_string(), v.clone()));
                    }
                }
                for path in &ps.paths {
                    let path = path.as_str();
                    let found = match kind {
                        Some(k) => props::lookup(&props, k, path),
                        None => match props.iter().find(|(n, _)| *n == path) {
                            Some((_, v)) => Ok(Some(v.clone())),
                            None if path == "currentSession" => Ok(None),
                            None => Err(()),
                        },
                    };
                    match found {
                        Ok(Some(v)) => sets.push((path.to_string(), v)),
                        Ok(None) => {}
                        Err(()) => {
                            return Err(Fault::new(
                                "InvalidProperty",
                                format!("A specified parameter was not correct: {path}"),
                            )
                            .with(format!("<name>{}</name>", esc(path))));
                        }
                    }
                }
            }
            if !matched {
                continue;
            }
            let mut seen = std::collections::HashSet::new();
            sets.retain(|(n, _)| seen.insert(n.clone()));
            out.push(Content {
                ty: ty.to_string(),
                id: id.to_string(),
                sets,
            });
        }
    }
    Ok(out)
}

fn user_session_val(s: &Session) -> Val {
    Val::Obj(
        "UserSession",
        vec![
            ("key", props::s("current")),
            ("userName", props::s(&s.user)),
            ("fullName", props::s(&s.user)),
            ("loginTime", Val::Prim("xsd:dateTime", s.login_time.clone())),
            (
                "lastActiveTime",
                Val::Prim("xsd:dateTime", s.last_active_time.clone()),
            ),
            ("locale", props::s("en")),
            ("messageLocale", props::s("en")),
            ("extensionSession", Val::Prim("xsd:boolean", "false".into())),
        ],
    )
}

/// `SearchIndex.Find*`: scoped to the `datacenter` argument when given, as vCenter does
/// (vcsim ignores it, `govmomi:simulator/search_index.go`); `vmSearch=false` searches hosts.
fn search(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let hits = search_hits(shared, call)?;
    let inner: String = hits
        .iter()
        .map(|(id, ty)| format!("<returnval {}</returnval>", mo(ty, id)))
        .collect();
    Ok(ok(call.method, inner))
}

/// What a `Find*` call finds: `(id, type)`, creation-ordered, at most one for `FindBy*`.
fn search_hits(shared: &Shared, call: &Call<'_>) -> Result<Vec<(String, &'static str)>, Fault> {
    let m = call.method;
    let inv = shared.inventory();
    let dc = match call.el.child("datacenter") {
        Some(d) => {
            let id = d.text.trim();
            if inv.get(id).is_none_or(|o| o.kind != Kind::Datacenter) {
                return Err(Fault::not_found("Datacenter", id));
            }
            Some(id.to_string())
        }
        None => None,
    };
    let vm_search = call.el.child_bool("vmSearch").unwrap_or(false);
    let instance_uuid = call.el.child_bool("instanceUuid").unwrap_or(false);
    let (arg, key) = if m.ends_with("ByUuid") {
        ("uuid", "uuid")
    } else if m.ends_with("ByDnsName") {
        ("dnsName", "dns")
    } else {
        ("ip", "ip")
    };
    let needle = call
        .el
        .child_text(arg)
        .ok_or_else(|| Fault::invalid_argument(arg))?
        .to_string();
    if needle.is_empty() {
        return Err(Fault::invalid_argument(arg));
    }
    let mut hits: Vec<(String, &'static str)> = Vec::new();
    for o in inv.objects.values() {
        let hit = match (vm_search, &o.vm, key) {
            (true, Some(v), "uuid") => {
                let u = if instance_uuid {
                    &v.instance_uuid
                } else {
                    &v.uuid
                };
                u.eq_ignore_ascii_case(&needle)
            }
            (true, Some(v), "dns") => v
                .host_name
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case(&needle)),
            // IPs come from VMware Tools: none while the guest restarts.
            (true, Some(v), _) => v
                .guest_nics()
                .iter()
                .flat_map(|n| &n.ip_addresses)
                .any(|ip| *ip == needle),
            (false, None, "uuid") => o
                .host_uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(&needle)),
            (false, None, "dns") => {
                o.kind == Kind::HostSystem && o.name.eq_ignore_ascii_case(&needle)
            }
            _ => false,
        };
        // The datacenter scope is checked for matches only (it walks up the parents).
        let in_scope = || {
            dc.as_deref()
                .is_none_or(|d| inv.datacenter_of(&o.id) == Some(d))
        };
        if hit && in_scope() {
            hits.push((o.id.clone(), o.kind.type_name()));
        }
    }
    // Stable, creation-ordered answers (ids sort by number within a kind).
    hits.sort_by_key(|(id, _)| id_number(id));
    if !m.starts_with("FindAll") {
        hits.truncate(1);
    }
    Ok(hits)
}

fn id_number(id: &str) -> u64 {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Power operations: `InvalidPowerState` (a task in `error`) when the VM is already in the
/// requested state; else, in lifecycle mode `immediate` (the default) the task is
/// `success` before the call returns, in any other mode it is `running` until the mode
/// ends it (`seconds`, `reads` of the task, `error`, `stuck`), see `Inventory::settle_tasks`.
fn power(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let mut inv = shared.inventory();
    let current = inv
        .get(id)
        .filter(|_| ty == "VirtualMachine")
        .and_then(|o| o.vm.as_ref())
        .map(|v| v.power)
        .ok_or_else(|| Fault::not_found(ty, id))?;
    let (target, desc) = if call.method == "PowerOnVM_Task" {
        (PowerState::PoweredOn, "VirtualMachine.powerOn")
    } else {
        (PowerState::PoweredOff, "VirtualMachine.powerOff")
    };
    let op = if target == PowerState::PoweredOn {
        "poweron"
    } else {
        "poweroff"
    };
    let mode = shared.policies().mode_for(&[op, "task"], id);
    let task = if current == target {
        let error = (
            "InvalidPowerState".to_string(),
            "The attempted operation cannot be performed in the current state.".to_string(),
        );
        inv.add_task(desc, id, Some(error))
    } else if mode == Mode::Immediate {
        if let Some(v) = inv.objects.get_mut(id).and_then(|o| o.vm.as_mut()) {
            v.power = target;
        }
        inv.add_task(desc, id, None)
    } else {
        inv.add_running_task(desc, id, target, Lifecycle::begin(mode))
    };
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("Task", &task)),
    ))
}

/// Guest restarts: `RebootGuest` asks VMware Tools to reboot the guest OS (no task; a
/// `ToolsUnavailable` fault when Tools are not running, `InvalidPowerState` when the VM is
/// not on), `ResetVM_Task` resets the VM (a task, in `error` with `InvalidPowerState`
/// when it is not on). Either way the VM stays `poweredOn` and its guest restarts for
/// [`REBOOT_SECONDS`] (see `model::GuestRestart` for what clients then see).
fn reboot(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let mut inv = shared.inventory();
    let (power, restarting) = inv
        .get(id)
        .filter(|_| ty == "VirtualMachine")
        .and_then(|o| o.vm.as_ref())
        .map(|v| (v.power, v.restarting()))
        .ok_or_else(|| Fault::not_found(ty, id))?;
    let mode = Mode::Seconds { t: REBOOT_SECONDS };
    let invalid_power = (
        "InvalidPowerState".to_string(),
        "The attempted operation cannot be performed in the current state.".to_string(),
    );
    if call.method == "RebootGuest" {
        if power != PowerState::PoweredOn {
            return Err(
                Fault::new("InvalidPowerState", invalid_power.1).with(format!(
                    "<requestedState>poweredOn</requestedState><existingState>{}</existingState>",
                    power.as_str()
                )),
            );
        }
        if restarting {
            return Err(Fault::new(
                "ToolsUnavailable",
                "Cannot complete operation because VMware Tools is not running in this virtual machine.",
            ));
        }
        inv.restart_guest(id, mode)
            .map_err(|e| Fault::invalid_request(e.to_string()))?;
        return Ok(ok(call.method, String::new()));
    }
    let task = if power != PowerState::PoweredOn {
        inv.add_task("VirtualMachine.reset", id, Some(invalid_power))
    } else {
        inv.restart_guest(id, mode)
            .map_err(|e| Fault::invalid_request(e.to_string()))?;
        inv.add_task("VirtualMachine.reset", id, None)
    };
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("Task", &task)),
    ))
}
