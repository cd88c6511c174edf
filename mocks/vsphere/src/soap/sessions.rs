//! The `SessionManager`: `Login` (checks the configured user and password, sets the
//! `vmware_soap_session` cookie), `Logout`, `SessionIsActive`, the idle timeout that ends
//! a session, and `currentSession` as clients read it. [`Sessions`] also holds the rest
//! of the clients' session state (paged results, property filters and what they last
//! reported, vAPI sessions).

use std::collections::HashMap;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

use super::envelope::{Call, Fault, expect_this, ok};
use crate::Shared;
use crate::props::{self, Val};
use crate::spec::FilterSpec;
use crate::xml::esc;

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

pub(super) fn session_cookie(headers: &HeaderMap) -> Option<String> {
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

/// The live session for this cookie, touched; expired ones are dropped.
pub(super) fn live_session(shared: &Shared, cookie: Option<&str>) -> Option<Session> {
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

pub(super) fn login(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let user = call.el.child_text("userName").unwrap_or("");
    let password = call.el.child("password").map_or("", |p| p.text.as_str());
    if user != shared.config.username || password != shared.config.password {
        return Err(Fault::new(
            "InvalidLogin",
            "Cannot complete login due to an incorrect user name or password.",
        ));
    }
    let key = crate::state::new_uuid();
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

/// `Logout`: the session is gone.
pub(super) fn logout(
    shared: &Shared,
    call: &Call<'_>,
    cookie: Option<&str>,
) -> Result<Response, Fault> {
    expect_this(call, "SessionManager", "SessionManager")?;
    if let Some(key) = cookie {
        shared.sessions().soap.remove(key);
    }
    Ok(ok(call.method, String::new()))
}

/// `SessionIsActive`: whether the session key is one of that user's.
pub(super) fn session_is_active(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let key = call.el.child_text("sessionID").unwrap_or("");
    let user = call.el.child_text("userName").unwrap_or("");
    let active = shared
        .sessions()
        .soap
        .get(key)
        .is_some_and(|s| s.user == user);
    Ok(ok(call.method, format!("<returnval>{active}</returnval>")))
}

fn user_session_fields(key: &str, s: &Session) -> String {
    format!(
        "<key>{key}</key><userName>{u}</userName><fullName>{u}</fullName><loginTime>{}</loginTime><lastActiveTime>{}</lastActiveTime><locale>en</locale><messageLocale>en</messageLocale><extensionSession>false</extensionSession><ipAddress>127.0.0.1</ipAddress><userAgent></userAgent><callCount>0</callCount>",
        s.login_time,
        s.last_active_time,
        u = esc(&s.user)
    )
}

pub(super) fn user_session_val(s: &Session) -> Val {
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
