//! SOAP envelopes as vCenter writes them: reading a call (`_this` and the method element)
//! out of a request envelope, the response envelope, and faults (HTTP 500,
//! `soapenv:Fault` with `faultcode=ServerFaultCode` and a typed `detail`), as govmomi
//! (`vim25/soap/client.go`) and pyvmomi (`pyVmomi/SoapAdapter.py`) read them.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::xml::{Element, esc};

/// A vim25 fault as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub ty: &'static str,
    pub message: String,
    /// The fault's fields, as XML.
    pub fields: String,
}

impl Fault {
    pub(crate) fn new(ty: &'static str, message: impl Into<String>) -> Fault {
        Fault {
            ty,
            message: message.into(),
            fields: String::new(),
        }
    }

    pub(crate) fn with(mut self, fields: String) -> Fault {
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

    pub(crate) fn invalid_argument(name: &str) -> Fault {
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

pub(super) fn xml_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A parsed call.
pub(crate) struct Call<'a> {
    pub(crate) method: &'a str,
    pub(crate) this: (&'a str, &'a str),
    pub(crate) el: &'a Element,
}

pub(crate) fn read_call(doc: &Element) -> Result<Call<'_>, Fault> {
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

pub(crate) fn ok(method: &str, inner: String) -> Response {
    xml_response(
        StatusCode::OK,
        format!("{HEAD}<{method}Response xmlns=\"urn:vim25\">{inner}</{method}Response>{TAIL}"),
    )
}

/// The attribute and text of a MoRef element; both come from requests at times (a
/// `_this` type is echoed in `MethodNotFound`), so both are escaped.
pub(super) fn mo(ty: &str, id: &str) -> String {
    format!("type=\"{}\">{}", esc(ty), esc(id))
}

pub(super) fn expect_this(call: &Call<'_>, ty: &str, id: &str) -> Result<(), Fault> {
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
