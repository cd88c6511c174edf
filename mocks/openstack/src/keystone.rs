//! Keystone v3, as much as clients need to get a project-scoped token and find the other
//! services: version discovery, password (and token) authentication with the service
//! catalog, token validation and revocation. One user, one project, one domain, from
//! `Config`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::envelope::{keystone_error, unauthorized};
use crate::util::{iso_micros, json};
use crate::{Shared, Token};

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/identity", get(versions))
        .route("/identity/", get(versions))
        .route("/identity/v3", get(version))
        .route("/identity/v3/", get(version))
        .route(
            "/identity/v3/auth/tokens",
            get(validate).post(issue).delete(revoke),
        )
        .with_state(shared)
}

fn version_doc(base: &str) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}/identity/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]
    })
}

/// `GET /identity`: 300 Multiple Choices, as Keystone answers its root
/// (gophercloud `openstack/utils/choose_version.go` accepts 200 and 300).
async fn versions(State(s): State<Arc<Shared>>) -> Response {
    json(
        StatusCode::MULTIPLE_CHOICES,
        json!({"versions": {"values": [version_doc(&s.base)]}}),
    )
}

async fn version(State(s): State<Arc<Shared>>) -> Response {
    json(StatusCode::OK, json!({"version": version_doc(&s.base)}))
}

/// The service catalog: identity, compute, network and load-balancer, each with public,
/// internal and admin endpoints in the configured region. Paths follow devstack.
pub(crate) fn catalog(base: &str, region: &str) -> Value {
    let services = [
        ("identity", "keystone", format!("{base}/identity")),
        ("compute", "nova", format!("{base}/compute/v2.1")),
        ("network", "neutron", format!("{base}/network")),
        ("load-balancer", "octavia", format!("{base}/load-balancer")),
    ];
    let entries: Vec<Value> = services
        .iter()
        .map(|(kind, name, url)| {
            let endpoints: Vec<Value> = ["public", "internal", "admin"]
                .iter()
                .map(|interface| {
                    json!({
                        "id": uuid::Uuid::new_v4().simple().to_string(),
                        "interface": interface,
                        "region": region,
                        "region_id": region,
                        "url": url,
                    })
                })
                .collect();
            json!({"type": kind, "name": name, "id": uuid::Uuid::new_v4().simple().to_string(), "endpoints": endpoints})
        })
        .collect();
    Value::Array(entries)
}

/// A request Keystone refuses as malformed (400) or unauthenticated (401).
enum AuthFailure {
    BadRequest(String),
    Unauthorized,
}

fn bad(message: impl Into<String>) -> AuthFailure {
    AuthFailure::BadRequest(message.into())
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Whether a `{"domain": {"id"|"name"}}` reference names our domain. `None` when absent.
fn domain_matches(s: &Shared, holder: &Value) -> Option<bool> {
    let domain = holder.get("domain")?;
    let by_id = str_field(domain, "id").map(|id| id == s.identity.domain_id);
    let by_name = str_field(domain, "name").map(|n| n == s.config.domain_name);
    Some(by_id.or(by_name).unwrap_or(false))
}

/// Checks the password method's user (`keystone/auth/plugins/password.py` semantics: a
/// user by id, or by name plus domain).
fn check_password(s: &Shared, password: &Value) -> Result<(), AuthFailure> {
    let user = password
        .get("user")
        .ok_or_else(|| bad("Expecting to find user in password."))?;
    let secret =
        str_field(user, "password").ok_or_else(|| bad("Expecting to find password in user."))?;
    let who = if let Some(id) = str_field(user, "id") {
        id == s.identity.user_id
    } else if let Some(name) = str_field(user, "name") {
        match domain_matches(s, user) {
            Some(ok) => ok && name == s.config.username,
            None => return Err(bad("Expecting to find domain in user.")),
        }
    } else {
        return Err(bad("Expecting to find id or name in user."));
    };
    if who && secret == s.config.password {
        Ok(())
    } else {
        Err(AuthFailure::Unauthorized)
    }
}

/// Checks the application_credential method: by id, or by name plus its user, and the
/// secret (`keystone/auth/plugins/application_credential.py` semantics).
fn check_app_cred(s: &Shared, params: &Value) -> Result<(), AuthFailure> {
    let c = &s.config;
    let secret = str_field(params, "secret")
        .ok_or_else(|| bad("Expecting to find secret in application_credential."))?;
    let who = if let Some(id) = str_field(params, "id") {
        id == c.application_credential_id
    } else if let Some(name) = str_field(params, "name") {
        let user = params
            .get("user")
            .ok_or_else(|| bad("Expecting to find user in application_credential."))?;
        let user_ok = if let Some(id) = str_field(user, "id") {
            id == s.identity.user_id
        } else if let Some(user_name) = str_field(user, "name") {
            domain_matches(s, user).unwrap_or(false) && user_name == c.username
        } else {
            return Err(bad("Expecting to find id or name in user."));
        };
        user_ok && name == c.application_credential_name
    } else {
        return Err(bad(
            "Expecting to find id or name in application_credential.",
        ));
    };
    if who && secret == c.application_credential_secret {
        Ok(())
    } else {
        Err(AuthFailure::Unauthorized)
    }
}

/// Whether the requested scope is our project; `Ok(false)` for an unscoped request.
fn check_scope(s: &Shared, auth: &Value) -> Result<bool, AuthFailure> {
    let Some(scope) = auth.get("scope") else {
        return Ok(false);
    };
    if scope.is_string() && scope.as_str() == Some("unscoped") {
        return Ok(false);
    }
    let Some(project) = scope.get("project") else {
        // Domain and system scopes: our single user has no role there.
        if scope.get("domain").is_some() || scope.get("system").is_some() {
            return Err(AuthFailure::Unauthorized);
        }
        return Err(bad("Expecting to find project, domain or system in scope."));
    };
    let ok = if let Some(id) = str_field(project, "id") {
        id == s.identity.project_id
    } else if let Some(name) = str_field(project, "name") {
        match domain_matches(s, project) {
            Some(ok) => ok && name == s.config.project_name,
            None => return Err(bad("Expecting to find domain in project.")),
        }
    } else {
        return Err(bad("Expecting to find id or name in project."));
    };
    if ok {
        Ok(true)
    } else {
        Err(AuthFailure::Unauthorized)
    }
}

fn authenticate(s: &Shared, body: &Value) -> Result<(Vec<String>, bool), AuthFailure> {
    let auth = body
        .get("auth")
        .ok_or_else(|| bad("Expecting to find auth in request body."))?;
    let identity = auth
        .get("identity")
        .ok_or_else(|| bad("Expecting to find identity in auth."))?;
    let methods: Vec<String> = identity
        .get("methods")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("Expecting to find methods in identity."))?
        .iter()
        .map(|m| {
            m.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad("methods must be strings"))
        })
        .collect::<Result<_, _>>()?;
    if methods.is_empty() {
        return Err(bad("Expecting at least one method in identity."));
    }
    for method in &methods {
        let params = identity
            .get(method.as_str())
            .ok_or_else(|| bad(format!("Expecting to find {method} in identity.")))?;
        match method.as_str() {
            "password" => check_password(s, params)?,
            "token" => {
                let id =
                    str_field(params, "id").ok_or_else(|| bad("Expecting to find id in token."))?;
                if !s.token_valid(id) {
                    return Err(AuthFailure::Unauthorized);
                }
            }
            "application_credential" => check_app_cred(s, params)?,
            // totp, mapped, ...: no such credentials exist here.
            _ => return Err(AuthFailure::Unauthorized),
        }
    }
    if methods.iter().any(|m| m == "application_credential") {
        // The credential carries its project; keystone refuses any requested scope with a
        // 401 "Application credentials cannot request a scope" (keystone/auth/core.py).
        if auth.get("scope").is_some() {
            return Err(AuthFailure::Unauthorized);
        }
        return Ok((methods, true));
    }
    let scoped = check_scope(s, auth)?;
    Ok((methods, scoped))
}

fn token_body(
    s: &Shared,
    methods: Vec<String>,
    scoped: bool,
    issued: jiff::Timestamp,
    expires: jiff::Timestamp,
) -> Value {
    let domain = json!({"id": s.identity.domain_id, "name": s.config.domain_name});
    let mut token = json!({
        "methods": methods,
        "user": {"id": s.identity.user_id, "name": s.config.username, "domain": domain, "password_expires_at": null},
        "audit_ids": [uuid::Uuid::new_v4().simple().to_string()],
        "issued_at": iso_micros(issued),
        "expires_at": iso_micros(expires),
    });
    if scoped {
        token["project"] =
            json!({"id": s.identity.project_id, "name": s.config.project_name, "domain": domain});
        token["is_domain"] = json!(false);
        token["roles"] = json!([
            {"id": "a1", "name": "admin"}, {"id": "m1", "name": "member"}, {"id": "r1", "name": "reader"}
        ]);
        token["catalog"] = s.catalog.clone();
    }
    if token["methods"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m == "application_credential"))
    {
        token["application_credential"] = json!({
            "id": s.config.application_credential_id,
            "name": s.config.application_credential_name,
            "restricted": true,
        });
    }
    token
}

/// `POST /identity/v3/auth/tokens`: 201 with the token in `X-Subject-Token`.
async fn issue(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    let bytes = match body {
        Ok(b) => b,
        Err(e) => return keystone_error(e.status(), &e.body_text()),
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return keystone_error(
                StatusCode::BAD_REQUEST,
                &format!("The request body is not valid JSON: {e}"),
            );
        }
    };
    let (methods, scoped) = match authenticate(&s, &value) {
        Ok(ok) => ok,
        Err(AuthFailure::BadRequest(m)) => return keystone_error(StatusCode::BAD_REQUEST, &m),
        Err(AuthFailure::Unauthorized) => return unauthorized(),
    };
    let issued = jiff::Timestamp::now();
    let ttl = jiff::SignedDuration::try_from(s.config.token_ttl)
        .unwrap_or(jiff::SignedDuration::from_hours(1));
    let expires = issued.checked_add(ttl).unwrap_or(jiff::Timestamp::MAX);
    let body = token_body(&s, methods, scoped, issued, expires);
    let id = format!("gAAAAA{}", uuid::Uuid::new_v4().simple());
    {
        let mut tokens = s.tokens();
        tokens.retain(|_, t| issued < t.expires_at);
        tokens.insert(
            id.clone(),
            Token {
                expires_at: expires,
                body: body.clone(),
            },
        );
    }
    let mut response = json(StatusCode::CREATED, json!({"token": body}));
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-subject-token", v);
    }
    response
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `GET /identity/v3/auth/tokens`: the caller's `X-Auth-Token` must be valid; the
/// `X-Subject-Token` is looked up (404 when unknown or expired).
async fn validate(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !header(&headers, "x-auth-token").is_some_and(|t| s.token_valid(t)) {
        return unauthorized();
    }
    let subject = header(&headers, "x-subject-token").unwrap_or("");
    let found = s
        .tokens()
        .get(subject)
        .filter(|t| jiff::Timestamp::now() < t.expires_at)
        .map(|t| t.body.clone());
    match found {
        Some(body) => {
            let mut response = json(StatusCode::OK, json!({"token": body}));
            if let Ok(v) = HeaderValue::from_str(subject) {
                response.headers_mut().insert("x-subject-token", v);
            }
            response
        }
        None => keystone_error(
            StatusCode::NOT_FOUND,
            &format!("Could not find token: {subject}."),
        ),
    }
}

/// `DELETE /identity/v3/auth/tokens`: 204, the subject token stops working.
async fn revoke(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !header(&headers, "x-auth-token").is_some_and(|t| s.token_valid(t)) {
        return unauthorized();
    }
    let subject = header(&headers, "x-subject-token").unwrap_or("");
    match s.tokens().remove(subject) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => keystone_error(
            StatusCode::NOT_FOUND,
            &format!("Could not find token: {subject}."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use serde_json::json;

    use super::*;
    use crate::testing::{BASE, Mock};

    #[tokio::test]
    async fn root_is_300_with_v3_and_version_doc() {
        let m = Mock::seeded(0);
        for path in ["/identity", "/identity/"] {
            let r = m.send("GET", path, &[], Body::empty()).await;
            assert_eq!(r.status, StatusCode::MULTIPLE_CHOICES);
            assert_eq!(r.body["versions"]["values"][0]["id"], "v3.14");
            assert_eq!(
                r.body["versions"]["values"][0]["links"][0]["href"],
                format!("{BASE}/identity/v3/")
            );
        }
        let r = m.send("GET", "/identity/v3", &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["version"]["status"], "stable");
    }

    #[tokio::test]
    async fn password_auth_issues_scoped_token_with_catalog() {
        let m = Mock::seeded(0);
        let r = m.auth(m.password_auth("secret")).await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert!(r.headers.get("x-subject-token").is_some());
        let token = &r.body["token"];
        assert_eq!(token["methods"], json!(["password"]));
        assert_eq!(token["project"]["name"], "demo");
        assert_eq!(token["project"]["domain"]["id"], "default");
        assert_eq!(token["user"]["name"], "admin");
        assert!(
            token["expires_at"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.contains('.'))
        );
        let catalog = token["catalog"].as_array().expect("catalog");
        let types: Vec<&str> = catalog.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            types,
            vec!["identity", "compute", "network", "load-balancer"]
        );
        let compute = &catalog[1]["endpoints"];
        let interfaces: Vec<&str> = compute
            .as_array()
            .expect("eps")
            .iter()
            .filter_map(|e| e["interface"].as_str())
            .collect();
        assert_eq!(interfaces, vec!["public", "internal", "admin"]);
        assert_eq!(compute[0]["url"], format!("{BASE}/compute/v2.1"));
        assert_eq!(compute[0]["region_id"], "RegionOne");
        assert_eq!(catalog[2]["endpoints"][0]["url"], format!("{BASE}/network"));
    }

    #[tokio::test]
    async fn project_by_id_user_by_id_and_domain_id_work() {
        let m = Mock::seeded(0);
        let ids = m.shared.identity.clone();
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {"id": ids.user_id, "password": "secret"}}},
            "scope": {"project": {"id": ids.project_id}}}});
        assert_eq!(m.auth(body).await.status, StatusCode::CREATED);
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"id": "default"}, "password": "secret"}}},
            "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}});
        assert_eq!(m.auth(body).await.status, StatusCode::CREATED);
    }

    #[tokio::test]
    async fn unscoped_token_has_no_catalog_and_token_method_rescopes() {
        let m = Mock::seeded(0);
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user":
            {"name": "admin", "domain": {"name": "Default"}, "password": "secret"}}}}});
        let r = m.auth(body).await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert!(r.body["token"].get("catalog").is_none());
        let id = r.headers["x-subject-token"]
            .to_str()
            .expect("token")
            .to_string();
        let rescope = json!({"auth": {"identity": {"methods": ["token"], "token": {"id": id}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}});
        let r = m.auth(rescope).await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert!(r.body["token"]["catalog"].is_array());
    }

    #[tokio::test]
    async fn bad_credentials_are_401_in_keystone_shape() {
        let m = Mock::seeded(0);
        let r = m.auth(m.password_auth("wrong")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.body["error"]["code"], 401);
        assert_eq!(r.body["error"]["title"], "Unauthorized");
        assert_eq!(
            r.body["error"]["message"],
            "The request you have made requires authentication."
        );
        let mut wrong_project = m.password_auth("secret");
        wrong_project["auth"]["scope"]["project"]["name"] = json!("other");
        assert_eq!(m.auth(wrong_project).await.status, StatusCode::UNAUTHORIZED);
        let mut wrong_domain = m.password_auth("secret");
        wrong_domain["auth"]["identity"]["password"]["user"]["domain"] = json!({"name": "Other"});
        assert_eq!(m.auth(wrong_domain).await.status, StatusCode::UNAUTHORIZED);
        let app_cred = json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": "x", "secret": "y"}}}});
        assert_eq!(m.auth(app_cred).await.status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn application_credential_by_id_or_name_gives_a_project_token() {
        let m = Mock::seeded(1);
        let c = m.shared.config.clone();
        let by_id = json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": c.application_credential_id, "secret": c.application_credential_secret}}}});
        let r = m.auth(by_id.clone()).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["token"]["project"]["name"], "demo");
        assert!(r.body["token"]["catalog"].is_array());
        assert_eq!(
            r.body["token"]["application_credential"]["restricted"],
            true
        );
        let token = r.headers["x-subject-token"]
            .to_str()
            .expect("token")
            .to_string();
        assert_eq!(
            m.get("/compute/v2.1/servers", &token).await.status,
            StatusCode::OK
        );

        let by_name = json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"name": c.application_credential_name,
                "user": {"name": c.username, "domain": {"name": c.domain_name}},
                "secret": c.application_credential_secret}}}});
        assert_eq!(m.auth(by_name).await.status, StatusCode::CREATED);

        let mut scoped = by_id.clone();
        scoped["auth"]["scope"] =
            json!({"project": {"name": "demo", "domain": {"name": "Default"}}});
        assert_eq!(m.auth(scoped).await.status, StatusCode::UNAUTHORIZED);
        let mut wrong = by_id;
        wrong["auth"]["identity"]["application_credential"]["secret"] = json!("nope");
        assert_eq!(m.auth(wrong).await.status, StatusCode::UNAUTHORIZED);
        let missing = json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": "x"}}}});
        assert_eq!(m.auth(missing).await.status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn malformed_bodies_are_400_in_keystone_shape() {
        let m = Mock::seeded(0);
        let r = m
            .send("POST", "/identity/v3/auth/tokens", &[], "{not json")
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["error"]["code"], 400);
        for body in [
            json!({}),
            json!({"auth": {}}),
            json!({"auth": {"identity": {"methods": "password"}}}),
            json!({"auth": {"identity": {"methods": ["password"]}}}),
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "password": "secret"}}}}}),
        ] {
            let r = m.auth(body.clone()).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(r.body["error"]["title"], "Bad Request");
        }
    }

    #[tokio::test]
    async fn oversized_body_is_413() {
        let m = Mock::seeded(0);
        let big = "x".repeat(crate::BODY_LIMIT + 1);
        let r = m.send("POST", "/identity/v3/auth/tokens", &[], big).await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(r.body["error"]["code"], 413);
    }

    #[tokio::test]
    async fn validate_and_revoke() {
        let m = Mock::seeded(0);
        let caller = m.token().await;
        let subject = m.token().await;
        let headers = [
            ("x-auth-token", caller.as_str()),
            ("x-subject-token", subject.as_str()),
        ];
        let r = m
            .send("GET", "/identity/v3/auth/tokens", &headers, Body::empty())
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["token"]["project"]["name"], "demo");
        let r = m
            .send(
                "DELETE",
                "/identity/v3/auth/tokens",
                &headers,
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let r = m
            .send("GET", "/identity/v3/auth/tokens", &headers, Body::empty())
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.body["error"]["code"], 404);
        assert_eq!(
            m.get("/compute/v2.1/flavors", &subject).await.status,
            StatusCode::UNAUTHORIZED
        );
        let r = m
            .send(
                "GET",
                "/identity/v3/auth/tokens",
                &[("x-subject-token", caller.as_str())],
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn expired_token_is_refused() {
        let m = Mock::with_ttl(Duration::ZERO);
        let token = m.token().await;
        let r = m.get("/compute/v2.1/flavors", &token).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.body["error"]["code"], 401);
    }
}
