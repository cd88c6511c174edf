//! The vim25 SOAP client and the vAPI tagging client, by hand on reqwest.
//!
//! Exists because the CCM needs a dozen SOAP methods and three vAPI calls; an SDK would
//! cost far more build time than these few hundred lines. Behaviour follows
//! `kubernetes/cloud-provider-vsphere` `pkg/common/vclib/connection.go` and govmomi
//! (`vim25/soap/client.go`, `vapi/rest/client.go`): `RetrieveServiceContent` then
//! `SessionManager.Login` setting the `vmware_soap_session` cookie; a `NotAuthenticated`
//! fault means the session expired, so the client logs in again once and retries;
//! vAPI sessions come from `POST /rest/com/vmware/cis/session` with Basic auth and ride
//! in the `vmware-api-session-id` header, renewed on HTTP 401. A refused user name or
//! password is told apart ([`ClientError::invalid_login`]) so that the provider can read
//! credentials from their Secret again.

use std::time::Duration;

use reqwest::StatusCode;
use tokio::sync::Mutex;

use super::config::VsphereConfig;
use crate::providers::xml::{self, Element, esc};

/// Cookie name of the SOAP session (govmomi `soap.SessionCookieName`).
pub const SESSION_COOKIE: &str = "vmware_soap_session";
/// Header of the vAPI session (govmomi `vapi/internal.SessionHeader`).
pub const VAPI_SESSION_HEADER: &str = "vmware-api-session-id";

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("vSphere client setup: {0}")]
    Setup(String),
    #[error("{method}: transport: {reason}")]
    Transport { method: String, reason: String },
    #[error("{method}: vSphere fault {fault}: {message}")]
    Fault {
        method: String,
        fault: String,
        message: String,
    },
    #[error("{method}: HTTP {status}: {body}")]
    Http {
        method: String,
        status: u16,
        body: String,
    },
    #[error("{method}: decoding response: {reason}")]
    Decode { method: String, reason: String },
}

impl ClientError {
    /// The fault type (`NotAuthenticated`, `ManagedObjectNotFound`...), if a SOAP fault.
    pub fn fault(&self) -> Option<&str> {
        match self {
            ClientError::Fault { fault, .. } => Some(fault),
            _ => None,
        }
    }

    /// Whether vCenter refused the user name or password: the SOAP fault `InvalidLogin`
    /// (what cloud-provider-vsphere `pkg/common/vclib/utils.go` `IsInvalidCredentialsError`
    /// tests) or HTTP 401 on a vAPI login.
    pub fn invalid_login(&self) -> bool {
        match self {
            ClientError::Http { method, status, .. } => method == VAPI_LOGIN && *status == 401,
            _ => self.fault() == Some("InvalidLogin"),
        }
    }
}

/// The `method` of vAPI login errors.
const VAPI_LOGIN: &str = "vAPI session";

/// The HTTP client for one vCenter: the config's CA file or insecure flag, `timeout` per
/// request.
pub fn http_client(
    config: &VsphereConfig,
    timeout: Duration,
) -> Result<reqwest::Client, ClientError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout);
    if !config.ca_file.is_empty() {
        let pem = std::fs::read(&config.ca_file)
            .map_err(|e| ClientError::Setup(format!("reading caFile {}: {e}", config.ca_file)))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ClientError::Setup(format!("parsing caFile {}: {e}", config.ca_file)))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if config.insecure {
        builder = builder.tls_danger_accept_invalid_certs(true);
    }
    builder
        .build()
        .map_err(|e| ClientError::Setup(e.to_string()))
}

/// A managed object reference: type and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MoRef {
    pub ty: String,
    pub id: String,
}

impl MoRef {
    pub fn new(ty: &str, id: &str) -> Self {
        Self {
            ty: ty.to_owned(),
            id: id.to_owned(),
        }
    }

    /// Reads `<x type="T">id</x>`.
    pub fn from_element(e: &Element) -> Option<Self> {
        let ty = e.attr("type")?;
        let id = e.text.trim();
        (!id.is_empty()).then(|| Self::new(ty, id))
    }

    /// `<name type="T">id</name>`.
    pub fn xml(&self, name: &str) -> String {
        format!(
            "<{name} type=\"{}\">{}</{name}>",
            esc(&self.ty),
            esc(&self.id)
        )
    }
}

/// The service content references the CCM uses.
#[derive(Debug, Clone)]
pub struct ServiceContent {
    pub root_folder: MoRef,
    pub property_collector: MoRef,
    pub search_index: MoRef,
    pub session_manager: MoRef,
}

/// A logged-in SOAP + vAPI client for one vCenter.
#[derive(Debug)]
pub struct VsphereClient {
    http: reqwest::Client,
    sdk_url: String,
    base_url: String,
    user: String,
    password: String,
    content: ServiceContent,
    /// `name=value` of the session cookie; `None` before the first login.
    cookie: Mutex<Option<String>>,
    vapi_session: Mutex<Option<String>>,
}

const SOAP_HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>";
const SOAP_TAIL: &str = "</soapenv:Body></soapenv:Envelope>";

impl VsphereClient {
    /// Reads the service content at `base_url` (`http(s)://host:port`, an HTTP client from
    /// [`http_client`]) and logs in with `user` and `password`.
    pub async fn connect_with(
        http: reqwest::Client,
        base_url: &str,
        user: &str,
        password: &str,
    ) -> Result<Self, ClientError> {
        let base_url = base_url.trim_end_matches('/').to_owned();
        let sdk_url = format!("{base_url}/sdk");
        let si = MoRef::new("ServiceInstance", "ServiceInstance");
        let (resp, _) = post_soap(
            &http,
            &sdk_url,
            None,
            "RetrieveServiceContent",
            &format!(
                "<RetrieveServiceContent xmlns=\"urn:vim25\">{}</RetrieveServiceContent>",
                si.xml("_this")
            ),
        )
        .await?;
        let rv = resp.child("returnval").ok_or_else(|| ClientError::Decode {
            method: "RetrieveServiceContent".into(),
            reason: "no returnval".into(),
        })?;
        let get = |name: &str| {
            rv.child(name)
                .and_then(MoRef::from_element)
                .ok_or_else(|| ClientError::Decode {
                    method: "RetrieveServiceContent".into(),
                    reason: format!("no {name}"),
                })
        };
        let content = ServiceContent {
            root_folder: get("rootFolder")?,
            property_collector: get("propertyCollector")?,
            search_index: get("searchIndex")?,
            session_manager: get("sessionManager")?,
        };
        let client = Self {
            http,
            sdk_url,
            base_url,
            user: user.to_owned(),
            password: password.to_owned(),
            content,
            cookie: Mutex::new(None),
            vapi_session: Mutex::new(None),
        };
        client.login().await?;
        Ok(client)
    }

    pub fn content(&self) -> &ServiceContent {
        &self.content
    }

    /// `SessionManager.Login`; keeps the session cookie.
    pub async fn login(&self) -> Result<(), ClientError> {
        let body = format!(
            "<Login xmlns=\"urn:vim25\">{}<userName>{}</userName><password>{}</password></Login>",
            self.content.session_manager.xml("_this"),
            esc(&self.user),
            esc(&self.password)
        );
        let (_, cookie) = post_soap(&self.http, &self.sdk_url, None, "Login", &body).await?;
        let cookie = cookie.ok_or_else(|| ClientError::Decode {
            method: "Login".into(),
            reason: format!("no {SESSION_COOKIE} cookie in the answer"),
        })?;
        *self.cookie.lock().await = Some(cookie);
        Ok(())
    }

    /// Calls `method` on `this` with `args` (already XML); returns the `<method>Response`
    /// element. Logs in again once on `NotAuthenticated`.
    pub async fn call(
        &self,
        method: &str,
        this: &MoRef,
        args: &str,
    ) -> Result<Element, ClientError> {
        let body = format!(
            "<{method} xmlns=\"urn:vim25\">{}{args}</{method}>",
            this.xml("_this")
        );
        let cookie = self.cookie.lock().await.clone();
        match post_soap(&self.http, &self.sdk_url, cookie.as_deref(), method, &body).await {
            Err(e) if e.fault() == Some("NotAuthenticated") => {
                tracing::info!(method, "vSphere session expired; logging in again");
                self.login().await?;
                let cookie = self.cookie.lock().await.clone();
                post_soap(&self.http, &self.sdk_url, cookie.as_deref(), method, &body)
                    .await
                    .map(|(e, _)| e)
            }
            other => other.map(|(e, _)| e),
        }
    }

    /// `PropertyCollector.RetrieveProperties` of `paths` on one object; `(name, val)` pairs.
    pub async fn properties(
        &self,
        obj: &MoRef,
        paths: &[&str],
    ) -> Result<Vec<(String, Element)>, ClientError> {
        let path_set: String = paths
            .iter()
            .map(|p| format!("<pathSet>{}</pathSet>", esc(p)))
            .collect();
        let args = format!(
            "<specSet><propSet><type>{}</type>{path_set}</propSet><objectSet>{}<skip>false</skip></objectSet></specSet>",
            esc(&obj.ty),
            obj.xml("obj")
        );
        let pc = self.content.property_collector.clone();
        let resp = self.call("RetrieveProperties", &pc, &args).await?;
        Ok(resp
            .all("returnval")
            .flat_map(|rv| rv.all("propSet"))
            .filter_map(|ps| {
                let name = ps.text_at(&["name"]).to_owned();
                ps.child("val").map(|v| (name, v.clone()))
            })
            .collect())
    }

    /// Datacenters (name, ref) reachable from the root folder through folders.
    pub async fn datacenters(&self) -> Result<Vec<(String, MoRef)>, ClientError> {
        let args = format!(
            "<specSet><propSet><type>Datacenter</type><pathSet>name</pathSet></propSet><objectSet>{}<skip>true</skip>\
             <selectSet xsi:type=\"TraversalSpec\"><name>folder</name><type>Folder</type><path>childEntity</path><skip>false</skip>\
             <selectSet><name>folder</name></selectSet></selectSet></objectSet></specSet>",
            self.content.root_folder.xml("obj")
        );
        let pc = self.content.property_collector.clone();
        let resp = self.call("RetrieveProperties", &pc, &args).await?;
        Ok(resp
            .all("returnval")
            .filter_map(|rv| {
                let obj = rv.child("obj").and_then(MoRef::from_element)?;
                let name = rv
                    .all("propSet")
                    .find(|p| p.text_at(&["name"]) == "name")
                    .map(|p| p.text_at(&["val"]).to_owned())?;
                (obj.ty == "Datacenter").then_some((name, obj))
            })
            .collect())
    }

    /// `SearchIndex.<method>` for VMs (`FindByUuid`, `FindAllByDnsName`, `FindByIp`).
    pub async fn find_vms(
        &self,
        method: &str,
        datacenter: Option<&MoRef>,
        arg_name: &str,
        arg: &str,
    ) -> Result<Vec<MoRef>, ClientError> {
        let dc = datacenter.map(|d| d.xml("datacenter")).unwrap_or_default();
        let args = format!(
            "{dc}<{arg_name}>{}</{arg_name}><vmSearch>true</vmSearch>",
            esc(arg)
        );
        let si = self.content.search_index.clone();
        let resp = self.call(method, &si, &args).await?;
        Ok(resp
            .all("returnval")
            .filter_map(MoRef::from_element)
            .filter(|m| m.ty == "VirtualMachine")
            .collect())
    }

    async fn vapi_login(&self) -> Result<String, ClientError> {
        let method = VAPI_LOGIN;
        let resp = self
            .http
            .post(format!("{}/rest/com/vmware/cis/session", self.base_url))
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .map_err(|e| transport(method, &e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| transport(method, &e))?;
        if !status.is_success() {
            return Err(http_error(method, status, &text));
        }
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ClientError::Decode {
                method: method.into(),
                reason: e.to_string(),
            })?;
        let id = v
            .get("value")
            .and_then(|v| v.as_str())
            .ok_or_else(|| ClientError::Decode {
                method: method.into(),
                reason: "no session id".into(),
            })?
            .to_owned();
        *self.vapi_session.lock().await = Some(id.clone());
        Ok(id)
    }

    /// One vAPI call (`/rest` flavour); `value` of the answer; re-login once on 401.
    async fn vapi(
        &self,
        what: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, ClientError> {
        let mut retried = false;
        loop {
            // Bind first: a guard in a match scrutinee would live through vapi_login.
            let cached = self.vapi_session.lock().await.clone();
            let session = match cached {
                Some(s) => s,
                None => self.vapi_login().await?,
            };
            let url = format!("{}{path}", self.base_url);
            let req = match body {
                Some(b) => self.http.post(url).json(b),
                None => self.http.get(url),
            };
            let resp = req
                .header(VAPI_SESSION_HEADER, session)
                .send()
                .await
                .map_err(|e| transport(what, &e))?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| transport(what, &e))?;
            if status == StatusCode::UNAUTHORIZED && !retried {
                retried = true;
                *self.vapi_session.lock().await = None;
                continue;
            }
            if !status.is_success() {
                return Err(http_error(what, status, &text));
            }
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| ClientError::Decode {
                    method: what.into(),
                    reason: e.to_string(),
                })?;
            return Ok(v.get("value").cloned().unwrap_or(serde_json::Value::Null));
        }
    }

    /// Names of the tags attached to `obj`, with their category names: `(category, tag)`.
    pub async fn attached_tags(&self, obj: &MoRef) -> Result<Vec<(String, String)>, ClientError> {
        let body = serde_json::json!({"object_id": {"id": obj.id, "type": obj.ty}});
        let ids = self
            .vapi(
                "list-attached-tags",
                "/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags",
                Some(&body),
            )
            .await?;
        let mut out = Vec::new();
        for id in ids
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            let tag = self
                .vapi(
                    "get tag",
                    &format!("/rest/com/vmware/cis/tagging/tag/id:{id}"),
                    None,
                )
                .await?;
            let name = tag.get("name").and_then(|v| v.as_str()).unwrap_or("");
            let cat_id = tag
                .get("category_id")
                .and_then(|v| v.as_str())
                .unwrap_or("");
            let cat = self
                .vapi(
                    "get category",
                    &format!("/rest/com/vmware/cis/tagging/category/id:{cat_id}"),
                    None,
                )
                .await?;
            let cat_name = cat.get("name").and_then(|v| v.as_str()).unwrap_or("");
            out.push((cat_name.to_owned(), name.to_owned()));
        }
        Ok(out)
    }
}

fn transport(method: &str, e: &reqwest::Error) -> ClientError {
    let reason = if e.is_timeout() {
        format!("timed out: {e}")
    } else {
        e.to_string()
    };
    ClientError::Transport {
        method: method.to_owned(),
        reason,
    }
}

fn http_error(method: &str, status: StatusCode, body: &str) -> ClientError {
    ClientError::Http {
        method: method.to_owned(),
        status: status.as_u16(),
        body: body.chars().take(300).collect(),
    }
}

/// Posts one envelope; returns the `<method>Response` element and any session cookie set.
async fn post_soap(
    http: &reqwest::Client,
    url: &str,
    cookie: Option<&str>,
    method: &str,
    call: &str,
) -> Result<(Element, Option<String>), ClientError> {
    let mut req = http
        .post(url)
        .header("Content-Type", "text/xml; charset=utf-8")
        .header("SOAPAction", "urn:vim25/8.0.3.0")
        .body(format!("{SOAP_HEAD}{call}{SOAP_TAIL}"));
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    let resp = req.send().await.map_err(|e| transport(method, &e))?;
    let status = resp.status();
    let set_cookie = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|kv| kv.trim().starts_with(&format!("{SESSION_COOKIE}=")))
        .map(|kv| kv.trim().to_owned());
    let text = resp.text().await.map_err(|e| transport(method, &e))?;
    let doc = match xml::parse(&text) {
        Ok(d) => d,
        Err(_) if !status.is_success() => return Err(http_error(method, status, &text)),
        Err(e) => {
            return Err(ClientError::Decode {
                method: method.to_owned(),
                reason: e.to_string(),
            });
        }
    };
    let body = doc.child("Body").ok_or_else(|| ClientError::Decode {
        method: method.to_owned(),
        reason: "no SOAP Body".into(),
    })?;
    if let Some(fault) = body.child("Fault") {
        let kind = fault
            .child("detail")
            .and_then(|d| d.children.first())
            .map(|d| {
                d.xsi_type()
                    .map(str::to_owned)
                    .unwrap_or_else(|| d.name.trim_end_matches("Fault").to_owned())
            })
            .unwrap_or_else(|| fault.text_at(&["faultcode"]).to_owned());
        return Err(ClientError::Fault {
            method: method.to_owned(),
            fault: kind,
            message: fault.text_at(&["faultstring"]).to_owned(),
        });
    }
    if !status.is_success() {
        return Err(http_error(method, status, &text));
    }
    let resp = body
        .children
        .first()
        .cloned()
        .ok_or_else(|| ClientError::Decode {
            method: method.to_owned(),
            reason: "empty SOAP Body".into(),
        })?;
    Ok((resp, set_cookie))
}
