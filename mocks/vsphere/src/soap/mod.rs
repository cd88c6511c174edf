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
//! The request gate (`crate::gate`) reads the envelope up to its call and takes it
//! through the fault engine and the journal; this module dispatches the call by method;
//! the managed objects are served by `sessions` (`SessionManager`), `property_collector` (`PropertyCollector`, `ViewManager`,
//! `Fetch`), `search_index` (`SearchIndex`) and `tasks` (VM power and reboot), and
//! `envelope` reads and writes SOAP envelopes and faults.

pub(crate) mod envelope;
mod property_collector;
pub(crate) mod search_index;
mod sessions;
mod tasks;

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use crate::Shared;
use crate::gate::SoapCall;
use crate::state::Inventory;
use crate::xml::esc;
use envelope::{Call, Fault, expect_this, mo, ok, read_call, xml_response};
use property_collector::{fetch, wait_for_updates};
use search_index::search;
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
