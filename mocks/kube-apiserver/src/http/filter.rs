//! The middleware every request passes before its handler: authentication
//! ([`crate::auth`]), authorization (fixed roles, RBAC, denials) and the audit record.
//!
//! Why this exists: these run for every path, public or not, and must see the request
//! before (and the status after) the handler, as upstream's filter chain does
//! (apiserver pkg/endpoints/filters).

use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mock_cloud::tls::PeerCertificates;

use super::path::{ResourcePath, Target, classify, verb_of};
use super::request::header_string;
use super::state::AppState;
use crate::audit::AuditEntry;
use crate::auth::Role;
use crate::error::ApiError;
use crate::patch::PatchType;
use crate::rbac;

fn patch_type_name(ct: &str) -> String {
    match PatchType::from_content_type(ct) {
        Some(PatchType::Merge) => "merge".into(),
        Some(PatchType::Json) => "json".into(),
        Some(PatchType::Strategic) => "strategic".into(),
        Some(PatchType::Apply) => "apply".into(),
        None => ct.to_string(),
    }
}

/// Authentication ([`crate::auth`]), authorization, then the audit record. `/version`
/// and health checks are public, as upstream's `system:public-info-viewer` role makes
/// them; see [`AppState::set_allow_anonymous`] for requests without credentials.
pub(super) async fn auth_and_audit(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let user_agent = header_string(req.headers(), header::USER_AGENT);
    let content_type = header_string(req.headers(), header::CONTENT_TYPE);
    let target = classify(&path);
    let public = matches!(target, Target::Version | Target::Health);
    let identity = state.auth.authenticate(
        req.headers(),
        req.extensions().get::<PeerCertificates>(),
        state.allow_anonymous.load(Ordering::Relaxed),
        &|token| state.service_account(token),
    );
    // Credentials that fail are a 401 even on public paths: authentication runs before
    // authorization (apiserver pkg/endpoints/filters/authentication.go).
    let verb = verb_of(&method, &target, &query);
    let user = identity
        .as_ref()
        .map(|id| id.user.clone())
        .unwrap_or_default();
    let response = match identity {
        Err(_) => ApiError::Unauthorized.into_response(),
        Ok(mut id) => {
            // Everyone authenticated is in system:authenticated (apiserver
            // pkg/authentication/group `AuthenticatedGroupAdder`), the anonymous user not.
            if id.user != crate::auth::ANONYMOUS_USER
                && !id.groups.iter().any(|g| g == "system:authenticated")
            {
                id.groups.push("system:authenticated".into());
            }
            let allowed = public
                || match id.role {
                    Role::Rbac => {
                        rbac::authorize(
                            &state.store,
                            &id.user,
                            &id.groups,
                            &authorizer_request(&verb, &target, &path),
                        )
                        .allowed
                    }
                    // The read-only identity is authenticated: kube-apiserver's bootstrap
                    // system:basic-user role lets it review itself.
                    Role::ReadOnly => id.may(&method) || self_review(&target),
                    _ => id.may(&method),
                } && !state.denied(&id.user, &verb, &target);
            if allowed {
                req.extensions_mut().insert(id);
                next.run(req).await
            } else {
                forbidden(&id.user, &verb, &target, &path).into_response()
            }
        }
    };

    let (resource, subresource, namespace, name) = match &target {
        Target::Resource(rp) => (
            rp.desc.plural.to_string(),
            rp.subresource.clone(),
            rp.namespace.clone(),
            rp.name.clone(),
        ),
        _ => (String::new(), None, None, None),
    };
    state.audit.record(AuditEntry {
        seq: 0,
        time: jiff::Timestamp::now(),
        verb: verb_of(&method, &target, &query),
        patch_type: (method == Method::PATCH).then(|| patch_type_name(&content_type)),
        method: method.to_string(),
        path,
        query,
        resource,
        subresource,
        namespace,
        name,
        user_agent,
        user,
        status: response.status().as_u16(),
    });
    response
}

/// Whether `target` is one of the self reviews kube-apiserver's bootstrap role
/// `system:basic-user` lets every authenticated user create (kubernetes
/// plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go `basicUserRules`).
fn self_review(target: &Target) -> bool {
    matches!(target, Target::Resource(rp)
        if rp.desc.create_only && rp.desc.plural.starts_with("selfsubject"))
}

/// The authorizer's view of a request (apiserver pkg/endpoints/request/requestinfo.go):
/// a resource request, or a path. A namespace's own URL is in that namespace.
fn authorizer_request(verb: &str, target: &Target, path: &str) -> rbac::Request {
    let Target::Resource(rp) = target else {
        return rbac::Request::NonResource {
            verb: verb.to_string(),
            path: path.to_string(),
        };
    };
    rbac::Request::Resource {
        verb: verb.to_string(),
        group: rp.desc.group.to_string(),
        resource: rp.desc.plural.to_string(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        namespace: request_namespace(rp).unwrap_or_default(),
        name: rp.name.clone().unwrap_or_default(),
    }
}

/// The namespace of a resource request: the URL's, or for `/api/v1/namespaces/<name>`
/// the name (requestinfo.go treats `namespaces/<name>` as the namespace).
fn request_namespace(rp: &ResourcePath) -> Option<String> {
    if rp.desc.group.is_empty() && rp.desc.plural == "namespaces" {
        return rp.name.clone();
    }
    rp.namespace.clone()
}

/// The 403 upstream's authorization filter writes (apiserver
/// pkg/endpoints/handlers/responsewriters/errors.go `forbiddenMessage`).
fn forbidden(user: &str, verb: &str, target: &Target, path: &str) -> ApiError {
    let Target::Resource(rp) = target else {
        return ApiError::Forbidden {
            group: String::new(),
            resource: String::new(),
            name: String::new(),
            message: format!("User {user:?} cannot {verb} path {path:?}"),
        };
    };
    let resource = match &rp.subresource {
        Some(sub) => format!("{}/{sub}", rp.desc.plural),
        None => rp.desc.plural.to_string(),
    };
    let scope = match request_namespace(rp) {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    ApiError::Forbidden {
        group: rp.desc.group.to_string(),
        resource: rp.desc.plural.to_string(),
        name: rp.name.clone().unwrap_or_default(),
        message: format!(
            "User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
            rp.desc.group
        ),
    }
}
