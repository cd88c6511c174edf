//! The HTTP surface: routing, authentication, auditing and request/response mapping.
//!
//! Kubernetes paths do not fit a fixed route table well (`/api/v1/namespaces/x` is a
//! namespace, `/api/v1/namespaces/x/leases` is not), so one fallback handler parses
//! the path against the resource table ([`classify`]) and dispatches on the method.
//! Store semantics live in [`crate::store`]; this module only translates.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::apply;
use crate::audit::{AuditEntry, AuditLog};
use crate::auth::{Authenticator, Denial, Identity, Role};
use crate::discovery;
use crate::error::{ApiError, Cause};
use crate::negotiate::{Representation, negotiate};
use crate::openapi::{self, FieldValidation};
use crate::patch::{self, PatchType};
use crate::protobuf;
use crate::rbac;
use crate::resources::{self, ResourceDesc};
use crate::review;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::Config;
use crate::store::{
    DeleteOptions, DeleteOutcome, FieldManagement, Filter, ListItem, Store, Stored, WatchFrom,
    WriteOptions,
};
use crate::strategy::Subresource;
use crate::table::{self, IncludeObject, TableOptions};
use crate::tokens;
use crate::watch::{self, WatchParams};
use mock_cloud::tls::PeerCertificates;

/// Watches without `timeoutSeconds` end after this long (upstream picks a random
/// value around `--min-request-timeout`, 1800s).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Everything a request handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub audit: AuditLog,
    auth: Arc<Authenticator>,
    bookmark_interval: Duration,
    max_body_bytes: usize,
    shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    allow_anonymous: Arc<AtomicBool>,
    /// Verbs taken away from users on the running server ([`crate::auth::Denial`]).
    denials: Arc<std::sync::Mutex<Vec<Denial>>>,
    /// Signs and checks service-account tokens ([`crate::tokens`]).
    signer: tokens::Signer,
}

impl AppState {
    /// Fresh state (new store with default namespaces) for `config`.
    pub fn new(config: &Config) -> AppState {
        AppState::with_store(config, Store::new(config.watch_history))
    }

    /// State serving `store` (loaded from disk, or kept across a restart).
    /// With `config.rbac`, the bootstrap RBAC policy is written into `store` where missing.
    pub fn with_store(config: &Config, store: Store) -> AppState {
        if config.rbac {
            rbac::seed_bootstrap_policy(&store);
        }
        let (shutdown, _) = tokio::sync::watch::channel(false);
        AppState {
            store,
            audit: AuditLog::new(crate::audit::AUDIT_CAPACITY),
            auth: Arc::new(Authenticator {
                admin_token: config.token.clone(),
                readonly_token: config.readonly_token.clone(),
                tls: config.tls,
                rbac: config.rbac,
            }),
            bookmark_interval: config.bookmark_interval,
            max_body_bytes: config.max_body_bytes,
            shutdown: Arc::new(shutdown),
            allow_anonymous: Arc::new(AtomicBool::new(true)),
            denials: Arc::default(),
            signer: tokens::Signer::new(&config.token),
        }
    }

    /// What authenticating a bearer token consults.
    fn token_authority(&self) -> review::TokenAuthority<'_> {
        review::TokenAuthority {
            admin_token: &self.auth.admin_token,
            readonly_token: &self.auth.readonly_token,
            signer: &self.signer,
            store: &self.store,
        }
    }

    /// A token for the ServiceAccount `namespace/name`, valid for `seconds`, as the
    /// TokenRequest API issues it (404 when the ServiceAccount does not exist, 422 for
    /// fewer than 600 seconds).
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        seconds: i64,
    ) -> Result<String, ApiError> {
        let answer = review::token_request(
            &self.store,
            &self.signer,
            namespace,
            name,
            &json!({"spec": {"expirationSeconds": seconds}}),
        )?;
        answer
            .pointer("/status/token")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::Internal("TokenRequest without a token".into()))
    }

    /// The service account a bearer token from the TokenRequest API stands for.
    fn service_account(&self, token: &str) -> Option<(String, Vec<String>)> {
        let user = self
            .token_authority()
            .review(token, &review::api_audiences())?;
        Some((user.username, user.groups))
    }

    /// How this server decides a request by `user` in `groups` (what access reviews
    /// answer): `system:masters` may do anything; with RBAC on, the stored RBAC objects
    /// decide; otherwise the fixed roles do (the read-only identity reads, the anonymous
    /// one nothing, everyone else everything). A [`Denial`] takes its verb away.
    pub fn decide(&self, user: &str, groups: &[String], request: &rbac::Request) -> rbac::Decision {
        let mut decision = if self.by_rbac(user, groups) {
            rbac::authorize(&self.store, user, groups, request)
        } else {
            let (read_only, anonymous) = (is_read_only(user, groups), is_anonymous(user, groups));
            let verb = match request {
                rbac::Request::Resource { verb, .. } | rbac::Request::NonResource { verb, .. } => {
                    verb.as_str()
                }
            };
            let reads = match request {
                rbac::Request::Resource {
                    group, resource, ..
                } => {
                    matches!(verb, "get" | "list" | "watch")
                        || (verb == "create"
                            && resource.starts_with("selfsubject")
                            && matches!(
                                group.as_str(),
                                "authorization.k8s.io" | "authentication.k8s.io"
                            ))
                }
                rbac::Request::NonResource { .. } => verb == "get",
            };
            rbac::Decision {
                allowed: !anonymous && (!read_only || reads),
                reason: String::new(),
            }
        };
        if let rbac::Request::Resource {
            verb,
            group,
            resource,
            subresource,
            ..
        } = request
        {
            let resource = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let denied = self
                .denials
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|d| d.covers(user, verb, group, &resource));
            if denied {
                decision = rbac::Decision::default();
            }
        }
        decision
    }

    /// Whether the RBAC objects decide for `user` in `groups`, as requests are authorized:
    /// system:masters always (and RBAC allows it anything), with RBAC on everyone but the
    /// read-only and anonymous identities, which keep their fixed roles.
    fn by_rbac(&self, user: &str, groups: &[String]) -> bool {
        groups.iter().any(|g| g == rbac::PRIVILEGED_GROUP)
            || (self.auth.rbac && !is_read_only(user, groups) && !is_anonymous(user, groups))
    }

    /// The rules `user` in `groups` has in `namespace` (SelfSubjectRulesReview), by the
    /// same authorizer as [`Self::decide`]: RBAC's, or the fixed roles'. Denials are not
    /// subtracted (upstream lists rules, not exceptions).
    pub fn rules(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
    ) -> (Vec<Value>, Vec<Value>) {
        if self.by_rbac(user, groups) {
            return rbac::rules_for(&self.store, user, groups, namespace);
        }
        if is_anonymous(user, groups) {
            return (Vec::new(), Vec::new());
        }
        if is_read_only(user, groups) {
            return rbac::split_rules(&[
                json!({"verbs": ["get", "list", "watch"], "apiGroups": ["*"], "resources": ["*"]}),
                json!({"verbs": ["get"], "nonResourceURLs": ["*"]}),
            ]);
        }
        rbac::all_rules()
    }

    /// The bearer token requests must carry.
    pub fn token(&self) -> &str {
        &self.auth.admin_token
    }

    /// The bearer token of the read-only identity (get, list, watch).
    pub fn readonly_token(&self) -> &str {
        &self.auth.readonly_token
    }

    /// Whether requests WITHOUT an `Authorization` header are served (as upstream's
    /// `system:anonymous` with `--anonymous-auth=true` and an allow-all authorizer).
    /// On by default: client-go and kubectl never send a bearer token over plain
    /// HTTP (client-go tools/clientcmd/client_config.go only copies credentials for
    /// TLS servers; kubernetes/kubectl#744). A wrong token is always a 401.
    pub fn set_allow_anonymous(&self, allow: bool) {
        self.allow_anonymous.store(allow, Ordering::Relaxed);
    }

    /// Takes `denial.verb` on `denial.resource` away from `denial.user` from the next
    /// request on: it gets the 403 Forbidden an RBAC denial gives.
    pub fn deny(&self, denial: Denial) {
        let mut all = self.denials.lock().unwrap_or_else(|p| p.into_inner());
        if !all.contains(&denial) {
            all.push(denial);
        }
    }

    /// Lifts every denial.
    pub fn clear_denials(&self) {
        self.denials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The denials in force.
    pub fn denials(&self) -> Vec<Denial> {
        self.denials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether a denial covers `verb` by `user` on `target`.
    fn denied(&self, user: &str, verb: &str, target: &Target) -> bool {
        let Target::Resource(rp) = target else {
            return false;
        };
        let resource = match &rp.subresource {
            Some(sub) => format!("{}/{sub}", rp.desc.plural),
            None => rp.desc.plural.to_string(),
        };
        self.denials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|d| d.covers(user, verb, rp.desc.group, &resource))
    }

    /// Ask open watches to end (and the serving task to stop).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// A receiver that flips to `true` on shutdown.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// The whole API as an axum router (usable with `tower::ServiceExt::oneshot`).
pub fn router(state: AppState) -> Router {
    Router::new()
        .fallback(serve)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth_and_audit,
        ))
        .with_state(state)
}

/// A request path, resolved against the resource table.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/<group version path>`.
    OpenApi(String),
    /// `/openapi/v2`.
    OpenApiV2,
    Resource(ResourcePath),
    Unknown,
}

/// A resource request: collection, object, or object subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    pub desc: &'static ResourceDesc,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Reached through the deprecated `/api/v1/watch/...` or `/apis/<g>/<v>/watch/...`
    /// prefix, which kube-apiserver still serves: a watch, of one object when named
    /// (apiserver pkg/endpoints/installer.go, the `WATCH` and `WATCHLIST` actions).
    pub watch_prefix: bool,
}

/// Resolve a URL path. Segments are percent-decoded first, as Go's URL parsing does
/// before the apiserver splits the path: the Python client sends the colon of an RBAC
/// name such as `system:cloud-controller-manager` as `%3A`.
pub fn classify(path: &str) -> Target {
    let decoded: Vec<std::borrow::Cow<'_, str>> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = decoded.iter().map(|s| s.as_ref()).collect();
    match segs.as_slice() {
        ["version"] => Target::Version,
        [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Target::Health,
        ["api"] => Target::Api,
        ["apis"] => Target::Apis,
        ["openapi", "v2"] => Target::OpenApiV2,
        ["openapi", "v3"] => Target::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Target::OpenApi(rest.join("/")),
        ["api", "v1"] => Target::GroupVersion(String::new(), "v1".into()),
        ["apis", g] => Target::Group((*g).into()),
        ["apis", g, v] => Target::GroupVersion((*g).into(), (*v).into()),
        ["api", "v1", "watch", rest @ ..] => watch_prefixed(classify_resource("", "v1", rest)),
        ["apis", g, v, "watch", rest @ ..] => watch_prefixed(classify_resource(g, v, rest)),
        ["api", "v1", rest @ ..] => classify_resource("", "v1", rest),
        ["apis", g, v, rest @ ..] => classify_resource(g, v, rest),
        _ => Target::Unknown,
    }
}

/// `%XX` escapes decoded; a segment with a malformed escape or that does not decode to
/// UTF-8 is kept as it is.
fn percent_decode(segment: &str) -> std::borrow::Cow<'_, str> {
    if !segment.contains('%') {
        return segment.into();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'%', _, _) => return segment.into(),
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or_else(|_| segment.into(), Into::into)
}

/// A resource path under the `watch/` prefix; subresources and the review APIs have none.
fn watch_prefixed(target: Target) -> Target {
    match target {
        Target::Resource(mut rp) if rp.subresource.is_none() && !rp.desc.create_only => {
            rp.watch_prefix = true;
            Target::Resource(rp)
        }
        _ => Target::Unknown,
    }
}

fn classify_resource(group: &str, version: &str, rest: &[&str]) -> Target {
    let build = |desc, namespace: Option<&str>, tail: &[&str]| {
        Target::Resource(ResourcePath {
            desc,
            namespace: namespace.map(str::to_string),
            name: tail.first().map(|s| s.to_string()),
            subresource: tail.get(1).map(|s| s.to_string()),
            watch_prefix: false,
        })
    };
    if let ["namespaces", ns, plural, tail @ ..] = rest
        && let Some(desc) = resources::lookup(group, version, plural).filter(|d| d.namespaced)
    {
        if tail.len() <= 2 {
            return build(desc, Some(ns), tail);
        }
        return Target::Unknown;
    }
    if let [plural, tail @ ..] = rest
        && let Some(desc) = resources::lookup(group, version, plural)
    {
        // A namespaced resource is listable across namespaces, not addressable.
        if tail.len() <= 2 && (tail.is_empty() || !desc.namespaced) {
            return build(desc, None, tail);
        }
    }
    Target::Unknown
}

/// The audit verb of a request.
fn verb_of(method: &Method, target: &Target, query: &str) -> String {
    let Target::Resource(rp) = target else {
        return method.as_str().to_ascii_lowercase();
    };
    let has_name = rp.name.is_some();
    match *method {
        Method::GET if rp.watch_prefix => "watch".into(),
        // `watch=true` makes a watch of a collection only (requestinfo.go); an object URL
        // is a get either way.
        Method::GET if has_name => "get".into(),
        Method::GET if is_watch(query) => "watch".into(),
        Method::GET => "list".into(),
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE if has_name => "delete".into(),
        Method::DELETE => "deletecollection".into(),
        _ => method.as_str().to_ascii_lowercase(),
    }
}

fn is_watch(query: &str) -> bool {
    query.split('&').any(|kv| {
        kv.split_once('=')
            .is_some_and(|(k, v)| k == "watch" && parse_bool(v) == Some(true))
    })
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

fn patch_type_name(ct: &str) -> String {
    match PatchType::from_content_type(ct) {
        Some(PatchType::Merge) => "merge".into(),
        Some(PatchType::Json) => "json".into(),
        Some(PatchType::Strategic) => "strategic".into(),
        Some(PatchType::Apply) => "apply".into(),
        None => ct.to_string(),
    }
}

fn header_string(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Authentication ([`crate::auth`]), authorization, then the audit record. `/version`
/// and health checks are public, as upstream's `system:public-info-viewer` role makes
/// them; see [`AppState::set_allow_anonymous`] for requests without credentials.
async fn auth_and_audit(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
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

/// The read-only identity (its token's user, or a certificate in its group).
fn is_read_only(user: &str, groups: &[String]) -> bool {
    user == crate::auth::READONLY_USER || groups.iter().any(|g| g == crate::auth::READONLY_GROUP)
}

/// The anonymous identity.
fn is_anonymous(user: &str, groups: &[String]) -> bool {
    user == crate::auth::ANONYMOUS_USER
        || groups
            .iter()
            .any(|g| g == crate::auth::UNAUTHENTICATED_GROUP)
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

/// Query parameters, in order.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(uri: &Uri) -> Result<Params, ApiError> {
        Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map(|q| Params(q.0))
            .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn get_nonempty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get_nonempty(key) {
            None => Ok(None),
            Some(v) => parse_bool(v)
                .map(Some)
                .ok_or_else(|| ApiError::BadRequest(format!("invalid boolean for {key}: {v:?}"))),
        }
    }

    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        let mut dry_run = false;
        for (k, v) in &self.0 {
            if k == "dryRun" {
                match v.as_str() {
                    "All" => dry_run = true,
                    "" => {}
                    other => {
                        return Err(ApiError::BadRequest(format!(
                            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                        )));
                    }
                }
            }
        }
        Ok(WriteOptions {
            dry_run,
            ..WriteOptions::default()
        })
    }

    /// Write options of a create, update or non-apply patch: ownership is recorded as
    /// an Update by `fieldManager` or the User-Agent's product name.
    fn update_options(&self, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
        let user_agent = header_string(headers, header::USER_AGENT);
        let manager = apply::default_manager(self.get("fieldManager"), &user_agent);
        Ok(WriteOptions {
            fields: FieldManagement::Update(manager),
            ..self.write_options()?
        })
    }
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    typed_response(code, body, Representation::Json)
}

/// A JSON body with the Content-Type of its representation.
fn typed_response(code: StatusCode, body: &Value, repr: Representation) -> Response {
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(repr.content_type()),
    );
    resp
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// Representations a resource GET/LIST/WATCH can answer with.
const RESOURCE_OFFERS: &[Representation] = &[
    Representation::Json,
    Representation::Table("v1"),
    Representation::Table("v1beta1"),
    Representation::Metadata {
        list: false,
        version: "v1",
    },
    Representation::Metadata {
        list: true,
        version: "v1",
    },
    Representation::Metadata {
        list: false,
        version: "v1beta1",
    },
    Representation::Metadata {
        list: true,
        version: "v1beta1",
    },
];

/// Table rendering options when the client asked for a Table, else `None`.
fn table_options(headers: &HeaderMap, params: &Params) -> Result<Option<TableOptions>, ApiError> {
    let Representation::Table(version) = negotiate(accept(headers), RESOURCE_OFFERS) else {
        return Ok(None);
    };
    let include = params.get("includeObject").unwrap_or("");
    let include_object = IncludeObject::parse(include).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "includeObject: Unsupported value: {include:?}: supported values: \"None\", \"Metadata\", \"Object\""
        ))
    })?;
    Ok(Some(TableOptions {
        version,
        include_object,
        no_headers: false,
        now: jiff::Timestamp::now(),
    }))
}

/// The version of `PartialObjectMetadata` the client asked for, if it did; asking for the
/// single form on a list, or the list form on an object, is a 406 (apiserver
/// pkg/endpoints/handlers/response.go `transformResponseObject`).
fn metadata_only(headers: &HeaderMap, is_list: bool) -> Result<Option<&'static str>, ApiError> {
    let Representation::Metadata { list, version } = negotiate(accept(headers), RESOURCE_OFFERS)
    else {
        return Ok(None);
    };
    if list != is_list {
        let (asked, is) = if list {
            ("PartialObjectMetadataList", "not a list")
        } else {
            ("PartialObjectMetadata", "a list")
        };
        return Err(ApiError::Other {
            code: 406,
            reason: "NotAcceptable",
            message: format!("you requested {asked}, but the requested object is {is}"),
        });
    }
    Ok(Some(version))
}

/// An object reduced to its metadata.
fn partial(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `body` (a list or one object) as a Table when `table` is set.
fn render(desc: &ResourceDesc, body: &Value, table: Option<TableOptions>) -> Response {
    let Some(opts) = table else {
        return json_response(StatusCode::OK, body);
    };
    let t = match body.get("items").and_then(Value::as_array) {
        Some(items) => {
            let items: Vec<&Value> = items.iter().collect();
            let meta = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
            table::table(desc, &items, meta, &opts)
        }
        None => {
            let rv = body
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            table::table(desc, &[body], json!({"resourceVersion": rv}), &opts)
        }
    };
    typed_response(StatusCode::OK, &t, Representation::Table(opts.version))
}

async fn serve(State(state): State<AppState>, req: Request) -> Response {
    match handle(state, req).await {
        Ok(resp) => resp,
        Err(err) => err.into_response(),
    }
}

/// Representations `/api` and `/apis` can answer with.
const DISCOVERY_OFFERS: &[Representation] = &[Representation::Json, Representation::DiscoveryV2];

async fn handle(state: AppState, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let target = classify(parts.uri.path());
    let get_only = |doc: Option<Value>| -> Result<Response, ApiError> {
        if parts.method != Method::GET {
            return Err(ApiError::MethodNotAllowed);
        }
        doc.map(|d| json_response(StatusCode::OK, &d))
            .ok_or(ApiError::UnknownPath)
    };
    match target {
        Target::Version => get_only(Some(discovery::version())),
        Target::Health => {
            if parts.method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "ok",
            )
                .into_response())
        }
        Target::Api => {
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            match negotiate(accept(&parts.headers), DISCOVERY_OFFERS) {
                Representation::DiscoveryV2 if parts.method == Method::GET => Ok(typed_response(
                    StatusCode::OK,
                    &discovery::aggregated(true),
                    Representation::DiscoveryV2,
                )),
                _ => get_only(Some(discovery::api_versions(host))),
            }
        }
        Target::Apis => match negotiate(accept(&parts.headers), DISCOVERY_OFFERS) {
            Representation::DiscoveryV2 if parts.method == Method::GET => Ok(typed_response(
                StatusCode::OK,
                &discovery::aggregated(false),
                Representation::DiscoveryV2,
            )),
            _ => get_only(Some(discovery::api_groups())),
        },
        Target::Group(g) => get_only(discovery::api_group(&g)),
        Target::GroupVersion(g, v) => get_only(discovery::resource_list(&g, &v)),
        Target::OpenApiIndex => get_only(Some(openapi::index())),
        Target::OpenApi(path) => get_only(openapi::group_version_doc(&path)),
        Target::OpenApiV2 => {
            if parts.method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            let wants_protobuf = accept(&parts.headers).is_some_and(openapi::v2_wants_protobuf);
            Ok(if wants_protobuf {
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, openapi::V2_PROTOBUF)],
                    openapi::v2_protobuf(),
                )
                    .into_response()
            } else {
                json_response(StatusCode::OK, &openapi::v2_json())
            })
        }
        Target::Unknown => Err(ApiError::UnknownPath),
        Target::Resource(rp) => {
            let params = Params::parse(&parts.uri)?;
            let caller = parts.extensions.get::<Identity>();
            if rp.desc.create_only
                || (rp.desc.group.is_empty()
                    && rp.desc.plural == "serviceaccounts"
                    && rp.subresource.as_deref() == Some("token"))
            {
                return handle_auth_api(&state, &rp, &parts.method, &parts.headers, caller, body)
                    .await;
            }
            handle_resource(&state, rp, &parts.method, &parts.headers, &params, body).await
        }
    }
}

/// The TokenRequest subresource and the review APIs ([`crate::review`]): `create` only.
async fn handle_auth_api(
    state: &AppState,
    rp: &ResourcePath,
    method: &Method,
    headers: &HeaderMap,
    caller: Option<&Identity>,
    body: Body,
) -> Result<Response, ApiError> {
    if !crate::negotiate::acceptable(accept(headers)) {
        return Err(ApiError::NotAcceptable);
    }
    let token_request = rp.subresource.is_some();
    let creates = *method == Method::POST && (token_request || rp.name.is_none());
    if !creates {
        return Err(ApiError::MethodNotAllowed);
    }
    let request = if protobuf::is_protobuf(&media_type(headers)) {
        let kind = if token_request {
            "TokenRequest"
        } else {
            rp.desc.kind
        };
        protobuf::decode_auth_api(kind, &read_body(headers, body, state.max_body_bytes).await?)?
    } else {
        read_json(rp.desc, headers, body, state.max_body_bytes, false).await?
    };
    let answer = if token_request {
        let (Some(ns), Some(name)) = (rp.namespace.as_deref(), rp.name.as_deref()) else {
            return Err(ApiError::UnknownPath);
        };
        review::token_request(&state.store, &state.signer, ns, name, &request)?
    } else {
        review::review(
            rp.desc,
            &request,
            rp.namespace.as_deref(),
            caller,
            &state.token_authority(),
            &|user, groups, attrs| state.decide(user, groups, attrs),
            &|user, groups, namespace| state.rules(user, groups, namespace),
        )?
    };
    Ok(json_response(StatusCode::CREATED, &answer))
}

async fn handle_resource(
    state: &AppState,
    rp: ResourcePath,
    method: &Method,
    headers: &HeaderMap,
    params: &Params,
    body: Body,
) -> Result<Response, ApiError> {
    if !crate::negotiate::acceptable(accept(headers)) {
        return Err(ApiError::NotAcceptable);
    }
    let desc = rp.desc;
    let sub = match rp.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if desc.status_subresource => Subresource::Status,
        Some(_) => return Err(ApiError::UnknownPath),
    };
    let ns = rp.namespace.as_deref();
    let store = &state.store;
    match (method, rp.name.as_deref()) {
        (&Method::GET, name) if rp.watch_prefix => {
            let table = table_options(headers, params)?;
            watch(state, desc, ns, params, name, table)
        }
        _ if rp.watch_prefix => Err(ApiError::MethodNotAllowed),
        // A GET of an object URL is a get even with `watch=true`: kube-apiserver routes it
        // to `GetResource` (apiserver pkg/endpoints/installer.go), which has no watch; the
        // watch of one object is `/watch/.../<name>`.
        (&Method::GET, Some(name)) => {
            let table = table_options(headers, params)?;
            let obj = store.get(desc, ns, name)?;
            if let Some(version) = metadata_only(headers, false)? {
                return Ok(json_response(StatusCode::OK, &partial(&obj, version)));
            }
            Ok(render(desc, &obj, table))
        }
        (&Method::GET, None) => {
            let table = table_options(headers, params)?;
            if params.bool("watch")? == Some(true) {
                watch(state, desc, ns, params, None, table)
            } else {
                let metadata = metadata_only(headers, true)?;
                let body = list(store, desc, ns, params)?;
                Ok(match (table, metadata) {
                    (_, Some(version)) => {
                        let list = body.to_value();
                        let items: Vec<Value> = list["items"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|o| partial(o, version))
                            .collect();
                        json_response(
                            StatusCode::OK,
                            &json!({
                                "kind": "PartialObjectMetadataList",
                                "apiVersion": format!("meta.k8s.io/{version}"),
                                "metadata": list["metadata"],
                                "items": items,
                            }),
                        )
                    }
                    (None, None) => body.json_response(),
                    (Some(_), None) => render(desc, &body.to_value(), table),
                })
            }
        }
        (&Method::POST, None) if !desc.namespaced || ns.is_some() => {
            validate_dry_run(params, "CreateOptions")?;
            let opts = params.update_options(headers)?;
            let validation = field_validation(params, "CreateOptions")?;
            let strict = validation == FieldValidation::Strict;
            let mut obj = read_json(desc, headers, body, state.max_body_bytes, strict).await?;
            crate::validation::decode(desc, &obj)?;
            let warnings = check_fields(desc, &mut obj, validation)?;
            let created = store.create(desc, ns, obj, opts)?;
            Ok(with_warnings(
                json_response(StatusCode::CREATED, &created),
                &warnings,
            ))
        }
        (&Method::PUT, Some(name)) => {
            validate_dry_run(params, "UpdateOptions")?;
            let opts = params.update_options(headers)?;
            let validation = field_validation(params, "UpdateOptions")?;
            let strict = validation == FieldValidation::Strict;
            let mut obj = read_json(desc, headers, body, state.max_body_bytes, strict).await?;
            crate::validation::decode(desc, &obj)?;
            let warnings = check_fields(desc, &mut obj, validation)?;
            let resp = put(store, desc, ns, name, sub, obj, opts)?;
            Ok(with_warnings(resp, &warnings))
        }
        (&Method::PATCH, Some(name)) => {
            validate_dry_run(params, "PatchOptions")?;
            let validation = field_validation(params, "PatchOptions")?;
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // The patch handler's own 415 carries an empty `details` (see ApiError::Other).
            let patch_type = PatchType::from_content_type(ct).ok_or_else(|| ApiError::Other {
                code: 415,
                reason: "UnsupportedMediaType",
                message: format!(
                    "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, \
                     application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
                ),
            })?;
            validate_patch_options(params, patch_type)?;
            let bytes = read_body(headers, body, state.max_body_bytes).await?;
            if patch_type == PatchType::Apply {
                return server_side_apply(store, desc, ns, name, sub, params, validation, &bytes);
            }
            let opts = params.update_options(headers)?;
            let mut warnings = Vec::new();
            let patched = store.patch(
                desc,
                ns,
                name,
                sub,
                |current| {
                    let mut patched = patch::apply_patch(desc.kind, current, patch_type, &bytes)
                        .map_err(|e| ApiError::Other {
                            code: e.code(),
                            reason: e.reason(),
                            message: e.status_message(),
                        })?;
                    strict_patch_fields(desc, &patched, validation)?;
                    warnings = check_fields(desc, &mut patched, validation)?;
                    Ok(patched)
                },
                opts,
            )?;
            Ok(with_warnings(
                json_response(StatusCode::OK, &patched),
                &warnings,
            ))
        }
        (&Method::DELETE, Some(name)) if sub == Subresource::Main => {
            let bytes = read_body(headers, body, state.max_body_bytes).await?;
            let opts = delete_options(params, headers, &bytes)?;
            match store.delete(desc, ns, name, &opts)? {
                // 202 when the object stays and the client asked for cascading with the
                // deprecated orphanDependents=false (apiserver pkg/endpoints/handlers/delete.go).
                DeleteOutcome::Pending(obj) if opts.orphan_dependents == Some(false) => {
                    Ok(json_response(StatusCode::ACCEPTED, &obj))
                }
                DeleteOutcome::Pending(obj) => Ok(json_response(StatusCode::OK, &obj)),
                DeleteOutcome::Deleted(obj) if desc.delete_returns_object => {
                    Ok(json_response(StatusCode::OK, &obj))
                }
                DeleteOutcome::Deleted(obj) => {
                    Ok(json_response(StatusCode::OK, &success_status(desc, &obj)))
                }
            }
        }
        // Namespaces have no DeleteCollection (see discovery's verbs).
        (&Method::DELETE, None)
            if sub == Subresource::Main
                && !(desc.group.is_empty() && desc.plural == "namespaces") =>
        {
            let bytes = read_body(headers, body, state.max_body_bytes).await?;
            let opts = delete_options(params, headers, &bytes)?;
            delete_collection(store, desc, ns, params, &opts)
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// PatchOptions validation (apimachinery pkg/apis/meta/v1/validation/validation.go
/// `ValidatePatchOptions`): apply needs a field manager, `force` is for apply only.
fn validate_patch_options(params: &Params, patch_type: PatchType) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if patch_type == PatchType::Apply {
        if params.get_nonempty("fieldManager").is_none() {
            causes.push(Cause::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    } else if params.get("force").is_some() {
        causes.push(Cause::forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "PatchOptions".into(),
        name: String::new(),
        causes,
    })
}

/// `PATCH` with `application/apply-patch+yaml`: merge the configuration into the
/// live object under field ownership rules, creating it when missing (201).
#[allow(clippy::too_many_arguments)]
fn server_side_apply(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    name: &str,
    sub: Subresource,
    params: &Params,
    validation: FieldValidation,
    body: &[u8],
) -> Result<Response, ApiError> {
    let manager = params.get_nonempty("fieldManager").unwrap_or("");
    let force = params.bool("force")?.unwrap_or(false);
    let opts = WriteOptions {
        fields: FieldManagement::Precomputed,
        ..params.write_options()?
    };
    let mut config = apply::parse_config(body)?;
    let warnings = check_fields(desc, &mut config, validation)?;
    let (obj, created) = store.apply(
        desc,
        ns,
        name,
        sub,
        |live| {
            Ok(apply::apply(
                desc,
                live,
                config.clone(),
                manager,
                sub,
                force,
            )?)
        },
        opts,
    )?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(with_warnings(json_response(code, &obj), &warnings))
}

/// PUT: update, or create where the strategy allows it.
fn put(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    name: &str,
    sub: Subresource,
    obj: Value,
    opts: WriteOptions,
) -> Result<Response, ApiError> {
    let has_rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    match store.update(desc, ns, name, sub, obj.clone(), opts.clone()) {
        // AllowCreateOnUpdate (apiserver store.go `Update`): PUT creates a missing object.
        Err(ApiError::NotFound { resource, .. })
            if resource == desc.plural
                && desc.allow_create_on_update
                && sub == Subresource::Main
                && !has_rv =>
        {
            let mut obj = obj;
            match crate::meta::meta_nonempty(&obj, "name") {
                Some(n) if n != name => {
                    return Err(ApiError::BadRequest(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => crate::meta::set_meta(&mut obj, "name", Some(json!(name))),
            }
            Ok(json_response(
                StatusCode::CREATED,
                &store.create(desc, ns, obj, opts)?,
            ))
        }
        Ok(updated) => Ok(json_response(StatusCode::OK, &updated)),
        Err(err) => Err(err),
    }
}

/// The `fieldValidation` query parameter; an unsupported value is a 422 on the
/// options kind (apimachinery pkg/apis/meta/v1/validation `ValidateFieldValidation`).
fn field_validation(params: &Params, options_kind: &str) -> Result<FieldValidation, ApiError> {
    let raw = params.get("fieldValidation").unwrap_or("");
    FieldValidation::parse(raw).ok_or_else(|| ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: options_kind.into(),
        name: String::new(),
        causes: vec![Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {raw:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            ),
            field: "fieldValidation".into(),
        }],
    })
}

/// Fields of the wrong JSON type: always a 400, as typed decoding fails. Unknown fields: a 400 under Strict (apiserver pkg/endpoints/handlers/create.go
/// and patch.go turn strict decoding errors into BadRequest), otherwise dropped as
/// typed decoding drops them, with a warning each under Warn.
fn check_fields(
    desc: &ResourceDesc,
    obj: &mut Value,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if let Some(error) = openapi::type_error(desc, obj).or_else(|| micro_time_error(desc, obj)) {
        return Err(ApiError::BadRequest(format!(
            "{} in version {:?} cannot be handled as a {}: {error}",
            desc.kind, desc.version, desc.kind
        )));
    }
    let unknown = openapi::unknown_fields(desc, obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let messages: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    if validation == FieldValidation::Strict {
        // Create and update bodies fail in the decoder, which names the type.
        return Err(ApiError::BadRequest(format!(
            "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
            desc.kind,
            desc.version,
            desc.kind,
            messages.join(", ")
        )));
    }
    openapi::prune_unknown(obj, &unknown);
    Ok(if validation == FieldValidation::Warn {
        messages
    } else {
        Vec::new()
    })
}

/// Go's `RFC3339Micro` layout, which metav1.MicroTime's decoder parses with.
const MICRO_TIME_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Why a MicroTime field (Lease `acquireTime`/`renewTime`, events.k8s.io `eventTime`,
/// `series.lastObservedTime`) does not decode: Go's time.Parse wants exactly six
/// fractional digits and a `Z` or `±hh:mm` zone (apimachinery pkg/apis/meta/v1
/// micro_time.go `UnmarshalJSON`), so `...:01Z` and `...:01.123+00:00` are refused.
/// The message reads as time.Parse's.
fn micro_time_error(desc: &ResourceDesc, obj: &Value) -> Option<String> {
    let pointers: &[&str] = match (desc.group, desc.kind) {
        ("coordination.k8s.io", "Lease") => &["/spec/acquireTime", "/spec/renewTime"],
        ("events.k8s.io", "Event") => &["/eventTime", "/series/lastObservedTime"],
        _ => &[],
    };
    for p in pointers {
        let Some(Value::String(v)) = obj.pointer(p) else {
            continue;
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let date_ok = v.len() >= 19
            && v.is_char_boundary(19)
            && v[..19].parse::<jiff::civil::DateTime>().is_ok()
            && v.as_bytes()[10] == b'T';
        let problem = if !date_ok {
            Some((v.as_str(), "2006"))
        } else {
            let rest = &v[19..];
            let fraction_ok = rest.len() >= 7 && rest.starts_with('.') && digits(&rest[1..7]);
            let zone = if fraction_ok { &rest[7..] } else { "" };
            let zone_ok = zone == "Z"
                || (zone.len() == 6
                    && matches!(zone.as_bytes()[0], b'+' | b'-')
                    && digits(&zone[1..3])
                    && zone.as_bytes()[3] == b':'
                    && digits(&zone[4..6]));
            if !fraction_ok {
                Some((rest, ".000000"))
            } else if !zone_ok {
                Some((zone, "Z07:00"))
            } else {
                None
            }
        };
        if let Some((bad, element)) = problem {
            return Some(format!(
                "parsing time {v:?} as {MICRO_TIME_LAYOUT:?}: cannot parse {bad:?} as {element:?}"
            ));
        }
    }
    None
}

/// Unknown fields in the result of a merge, JSON or strategic patch under Strict: the
/// patch handler reports them as an invalid `patch` whose value is the patched object
/// (apiserver pkg/endpoints/handlers/patch.go: a 422 with no kind or name, not the 400
/// a create gets).
fn strict_patch_fields(
    desc: &ResourceDesc,
    patched: &Value,
    validation: FieldValidation,
) -> Result<(), ApiError> {
    if validation != FieldValidation::Strict || openapi::type_error(desc, patched).is_some() {
        return Ok(());
    }
    let unknown = openapi::unknown_fields(desc, patched);
    if unknown.is_empty() {
        return Ok(());
    }
    let messages: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    let mut shown = patched.clone();
    crate::meta::set_meta(&mut shown, "managedFields", None);
    let quoted = serde_json::to_string(&shown.to_string()).unwrap_or_default();
    Err(ApiError::Invalid {
        group: String::new(),
        kind: String::new(),
        name: String::new(),
        causes: vec![Cause::invalid_rendered(
            "patch",
            &quoted,
            &format!("strict decoding error: {}", messages.join(", ")),
        )],
    })
}

/// Add one `Warning: 299 - "<text>"` header per warning (RFC 7234 form, as
/// apiserver pkg/endpoints/filters/warning.go writes them; kubectl prints them).
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let quoted = serde_json::to_string(w).unwrap_or_default();
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {quoted}")) {
            resp.headers_mut().append(header::WARNING, value);
        }
    }
    resp
}

/// `Status{Success}` for an immediate delete (apiserver store.go `finalizeDelete`).
fn success_status(desc: &ResourceDesc, obj: &Value) -> Value {
    let mut details = json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "group": desc.group,
        "kind": desc.plural,
        "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    });
    // StatusDetails.group is omitempty: the core group leaves it out.
    if desc.group.is_empty()
        && let Some(map) = details.as_object_mut()
    {
        map.remove("group");
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

fn delete_options(
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<DeleteOptions, ApiError> {
    validate_dry_run(params, "DeleteOptions")?;
    let mut opts = DeleteOptions {
        dry_run: params.write_options()?.dry_run,
        ..DeleteOptions::default()
    };
    // The options come from the body when there is one, else from the query (apiserver
    // pkg/endpoints/handlers/delete.go `DeleteResource`).
    if body.iter().all(u8::is_ascii_whitespace) {
        opts.propagation_policy = params.get("propagationPolicy").map(str::to_string);
        opts.orphan_dependents = params.bool("orphanDependents")?;
        opts.grace_period_seconds =
            match params.get_nonempty("gracePeriodSeconds") {
                None => None,
                Some(g) => Some(g.parse::<i64>().map_err(|_| {
                    ApiError::BadRequest(format!("invalid gracePeriodSeconds {g:?}"))
                })?),
            };
        validate_delete_options(&opts)?;
        return Ok(opts);
    }
    let v: Value = if protobuf::is_protobuf(&media_type(headers)) {
        protobuf::decode_delete_options(body)?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?
    };
    opts.propagation_policy = v
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string);
    opts.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
    opts.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
    validate_delete_options(&opts)?;
    let pre = v.get("preconditions");
    let s = |key: &str| {
        pre.and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    opts.precondition_uid = s("uid");
    opts.precondition_resource_version = s("resourceVersion");
    if let Some(dry) = v.get("dryRun").and_then(Value::as_array) {
        opts.dry_run |= dry.iter().any(|d| d == "All");
    }
    Ok(opts)
}

/// apimachinery pkg/apis/meta/v1/validation/validation.go `ValidateDeleteOptions`.
fn validate_delete_options(opts: &DeleteOptions) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Some(policy) = &opts.propagation_policy {
        if opts.orphan_dependents.is_some() {
            causes.push(Cause::invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if !matches!(policy.as_str(), "Foreground" | "Background" | "Orphan") {
            causes.push(Cause::not_supported(
                "propagationPolicy",
                policy,
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "DeleteOptions".into(),
        name: String::new(),
        causes,
    })
}

fn delete_collection(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let filter = build_filter(desc, ns, params)?;
    let page = store.list(desc, &filter, None, None)?;
    let mut items = Vec::new();
    for obj in page.items {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let obj_ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
        match store.delete(desc, obj_ns, name, opts) {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => items.push(o),
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", desc.kind),
            "apiVersion": desc.api_version(),
            "metadata": {"resourceVersion": store.revision().to_string()},
            "items": items.iter().map(ListItem).collect::<Vec<_>>(),
        }),
    ))
}

fn build_filter(
    desc: &ResourceDesc,
    ns: Option<&str>,
    params: &Params,
) -> Result<Filter, ApiError> {
    let labels = params
        .get_nonempty("labelSelector")
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(format!("unable to parse requirement: {}", e.0)))?;
    let fields = params
        .get_nonempty("fieldSelector")
        .map(FieldSelector::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(format!("invalid field selector: {}", e.0)))?;
    if let Some(sel) = &fields {
        // kubernetes pkg/registry/*/strategy.go field label conversion: unknown fields are a 400.
        if let Some(bad) = sel.fields().into_iter().find(|f| !desc.supports_field(f)) {
            return Err(ApiError::BadRequest(format!(
                "field label not supported: {bad}"
            )));
        }
    }
    Ok(Filter {
        namespace: ns.map(str::to_string),
        labels,
        fields,
        name_selector: None,
    })
}

/// `dryRun` takes only `All`: anything else makes the request's options invalid, a 422
/// on the options kind of the verb (apimachinery pkg/apis/meta/v1/validation
/// `ValidateDryRun`, called by apiserver pkg/endpoints/handlers for each verb).
fn validate_dry_run(params: &Params, options_kind: &str) -> Result<(), ApiError> {
    let values: Vec<&str> = params
        .0
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect();
    if values.iter().all(|v| *v == "All" || v.is_empty()) {
        return Ok(());
    }
    let rendered: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    Err(ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: options_kind.into(),
        name: String::new(),
        causes: vec![Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: [{}]: supported values: \"All\"",
                rendered.join(" ")
            ),
            field: "dryRun".into(),
        }],
    })
}

/// ListOptions validation shared by list and watch (apimachinery
/// pkg/apis/meta/internalversion/validation/validation.go).
fn list_options_invalid(causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "ListOptions".into(),
        name: String::new(),
        causes,
    }
}

fn list(
    store: &Store,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
) -> Result<ListBody, ApiError> {
    let mut causes = Vec::new();
    if params.get_nonempty("sendInitialEvents").is_some() {
        causes.push(Cause::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if params.get_nonempty("resourceVersionMatch").is_some()
        && params.get_nonempty("resourceVersion").is_none()
    {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if let Some(m) = params.get_nonempty("resourceVersionMatch")
        && !matches!(m, "Exact" | "NotOlderThan")
    {
        causes.push(Cause::not_supported(
            "resourceVersionMatch",
            m,
            &["Exact", "NotOlderThan", ""],
        ));
    }
    if !causes.is_empty() {
        return Err(list_options_invalid(causes));
    }
    let filter = build_filter(desc, ns, params)?;
    // A limit of zero or less is no limit (apiserver pkg/storage: `limit > 0` pages).
    let limit = match params.get_nonempty("limit") {
        None => None,
        Some(l) => {
            let n = l
                .parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?;
            usize::try_from(n).ok().filter(|n| *n > 0)
        }
    };
    let page = store.list(desc, &filter, limit, params.get_nonempty("continue"))?;
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(n) = page.remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    Ok(ListBody {
        kind: format!("{}List", desc.kind),
        api_version: desc.api_version(),
        metadata,
        items: page.items,
    })
}

/// A LIST answer, kept as the stored objects until it is written: a LIST of thousands
/// of objects is serialized straight from the store's copies, never cloned.
///
/// In JSON its items carry no `apiVersion` and `kind`, as kube-apiserver's do: a built-in
/// type's v1 `List` holds its items with an empty `TypeMeta`, which Go's encoder omits
/// (`curl /api/v1/nodes` against v1.37.2: `items[0].kind` is absent). Tables keep the
/// object's kind in `rows[].object` (apiserver pkg/endpoints/handlers/response.go
/// `asTable` converts each object to the request's version, which sets it) and
/// `PartialObjectMetadataList` items are `PartialObjectMetadata`, so only the plain
/// JSON list ([`ListBody::json_response`]) and DeleteCollection's answer drop them.
struct ListBody {
    kind: String,
    api_version: String,
    metadata: Value,
    items: Vec<Arc<Stored>>,
}

impl ListBody {
    /// `{"kind":…,"apiVersion":…,"metadata":…,"items":[…]}`.
    fn json_response(&self) -> Response {
        // Encoded (or cached) items first, so the body is written into one buffer of
        // exactly its size: growing a Vec of many MB by doubling copied it several times.
        let items: Vec<&Bytes> = self.items.iter().map(|o| o.list_item_json()).collect();
        let head = serde_json::to_vec(&self.metadata).unwrap_or_default();
        let size = 64
            + self.kind.len()
            + self.api_version.len()
            + head.len()
            + items.iter().map(|b| b.len() + 1).sum::<usize>();
        let mut buf = Vec::with_capacity(size);
        buf.extend_from_slice(b"{\"kind\":");
        // Writing JSON into a Vec cannot fail (no I/O, string keys only).
        let _ = serde_json::to_writer(&mut buf, &self.kind);
        buf.extend_from_slice(b",\"apiVersion\":");
        let _ = serde_json::to_writer(&mut buf, &self.api_version);
        buf.extend_from_slice(b",\"metadata\":");
        buf.extend_from_slice(&head);
        buf.extend_from_slice(b",\"items\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(item);
        }
        buf.extend_from_slice(b"]}");
        let mut resp = (StatusCode::OK, buf).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(Representation::Json.content_type()),
        );
        resp
    }

    fn to_value(&self) -> Value {
        let mut body = serde_json::Map::new();
        body.insert("kind".into(), Value::String(self.kind.clone()));
        body.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        body.insert("metadata".into(), self.metadata.clone());
        let items = self.items.iter().map(|o| o.value().clone()).collect();
        body.insert("items".into(), Value::Array(items));
        Value::Object(body)
    }
}

fn watch(
    state: &AppState,
    desc: &'static ResourceDesc,
    ns: Option<&str>,
    params: &Params,
    name: Option<&str>,
    table: Option<TableOptions>,
) -> Result<Response, ApiError> {
    let send_initial = params.bool("sendInitialEvents")?;
    let rv_match = params.get_nonempty("resourceVersionMatch");
    let mut causes = Vec::new();
    if send_initial.is_some() && rv_match != Some("NotOlderThan") {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if rv_match.is_some() && send_initial.is_none() {
        causes.push(Cause::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if !causes.is_empty() {
        return Err(list_options_invalid(causes));
    }
    let rv = match params.get_nonempty("resourceVersion") {
        None | Some("0") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))?,
        ),
    };
    let bookmarks = params.bool("allowWatchBookmarks")?.unwrap_or(false);
    // RV ""/"0" defaults to sending the current state (apimachinery
    // pkg/apis/meta/internalversion/defaults.go); sendInitialEvents overrides it.
    let from = match (send_initial, rv) {
        (Some(true), _) => WatchFrom::Now { initial: true },
        (Some(false), None) => WatchFrom::Now { initial: false },
        (None, None) => WatchFrom::Now { initial: true },
        (_, Some(rv)) => WatchFrom::After(rv),
    };
    let timeout = match params.get_nonempty("timeoutSeconds") {
        None => DEFAULT_WATCH_TIMEOUT,
        Some(s) => Duration::from_secs(
            s.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds {s:?}")))?,
        ),
    };
    let mut filter = build_filter(desc, ns, params)?;
    if let Some(name) = name {
        let by_name = FieldSelector::parse(&format!("metadata.name={name}"))
            .map_err(|e| ApiError::BadRequest(format!("invalid name: {}", e.0)))?;
        filter.name_selector = Some(by_name);
    }
    let watch_params = WatchParams {
        from,
        bookmarks,
        initial_events_end: send_initial == Some(true) && bookmarks,
        timeout,
        bookmark_interval: state.bookmark_interval,
        table,
    };
    let stream = watch::stream(
        state.store.clone(),
        desc,
        filter,
        watch_params,
        state.shutdown_signal(),
    );
    let content_type = match table {
        Some(opts) => Representation::Table(opts.version).content_type(),
        None => "application/json",
    };
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

/// Read the whole body, refusing more than `max` bytes with a 413.
async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    let mut too_large = declared.is_some_and(|n| n > max as u64);
    let mut read = 0usize;
    // Past the limit, the rest is read and dropped (up to as much again) so that the client,
    // still sending, gets the 413 instead of a connection reset; kube-apiserver's Go server
    // drains the body the same way.
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        // A client that went away never sees the answer.
        let Ok(chunk) = chunk else {
            return Err(ApiError::TooLarge(max));
        };
        read += chunk.len();
        if read > max {
            too_large = true;
        }
        if too_large {
            if read > max.saturating_mul(2) {
                break;
            }
        } else {
            bytes.extend_from_slice(&chunk);
        }
    }
    if too_large {
        return Err(ApiError::TooLarge(max));
    }
    Ok(Bytes::from(bytes))
}

/// The media type of the request body, lowercase, without parameters.
fn media_type(headers: &HeaderMap) -> String {
    header_string(headers, header::CONTENT_TYPE)
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Read an object body for create/update: JSON, or protobuf for the types
/// [`crate::protobuf`] decodes.
///
/// With `strict` (fieldValidation=Strict) a JSON body that repeats a key is a 400.
async fn read_json(
    desc: &ResourceDesc,
    headers: &HeaderMap,
    body: Body,
    max: usize,
    strict: bool,
) -> Result<Value, ApiError> {
    let ct = header_string(headers, header::CONTENT_TYPE);
    let media = media_type(headers);
    if protobuf::is_protobuf(&media) {
        let bytes = read_body(headers, body, max).await?;
        return protobuf::decode_object(desc, &bytes);
    }
    if !matches!(
        media.as_str(),
        "" | "application/json" | "application/yaml" | "*/*"
    ) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml (got {ct:?})"
        )));
    }
    let bytes = read_body(headers, body, max).await?;
    // kube-apiserver also takes YAML bodies on create and update (its serializer list
    // has application/yaml beside JSON and protobuf).
    let value: Value = if media == "application/yaml" {
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("the request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(text).map_err(|e| {
            let line = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            ApiError::BadRequest(format!("the request body is not valid YAML: {line}"))
        })?
    } else {
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::BadRequest(format!("the request body is not valid JSON: {e}"))
        })?;
        if strict && let Some(field) = duplicate_field(&bytes) {
            return Err(ApiError::BadRequest(format!(
                "{} in version {:?} cannot be handled as a {}: strict decoding error: duplicate field {field:?}",
                desc.kind, desc.version, desc.kind
            )));
        }
        value
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be a JSON object".into(),
        ));
    }
    Ok(value)
}

/// The first key a JSON object repeats (its dotted path), which kube-apiserver's strict
/// decoder refuses (sigs.k8s.io/json `UnmarshalStrict`); serde_json keeps the last value.
fn duplicate_field(bytes: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    /// Walks a value; `found` gets the first duplicated key's path.
    struct Walk<'a> {
        path: String,
        found: &'a std::cell::RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.path.is_empty() {
                    key.clone()
                } else {
                    format!("{}.{key}", self.path)
                };
                if !seen.insert(key) && self.found.borrow().is_none() {
                    *self.found.borrow_mut() = Some(path.clone());
                }
                map.next_value_seed(Walk {
                    path,
                    found: self.found,
                })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq
                .next_element_seed(Walk {
                    path: self.path.clone(),
                    found: self.found,
                })?
                .is_some()
            {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let found = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let walked = Walk {
        path: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    walked.ok()?;
    found.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        match classify(path) {
            Target::Resource(rp) => rp,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn classify_paths() {
        assert_eq!(classify("/version"), Target::Version);
        assert_eq!(classify("/healthz/ping"), Target::Health);
        assert_eq!(
            classify("/api/v1"),
            Target::GroupVersion(String::new(), "v1".into())
        );
        let ns = resource("/api/v1/namespaces/kube-system");
        assert_eq!(
            (ns.desc.plural, ns.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let leases = resource("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1");
        assert_eq!(leases.desc.plural, "leases");
        assert_eq!(leases.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(leases.name.as_deref(), Some("n1"));
        let status = resource("/api/v1/nodes/n1/status");
        assert_eq!(status.subresource.as_deref(), Some("status"));
        let all_events = resource("/api/v1/events");
        assert!(all_events.namespace.is_none() && all_events.name.is_none());
        assert_eq!(classify("/api/v1/events/x"), Target::Unknown);
        assert_eq!(classify("/api/v1/widgets"), Target::Unknown);
        let role = resource("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Accm");
        assert_eq!(role.name.as_deref(), Some("system:ccm"));
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert_eq!(percent_decode("a%"), "a%");
        assert_eq!(percent_decode("%ff"), "%ff");
        // Parsed as a (non-existent) subresource of namespace x; answered with 404.
        assert_eq!(
            resource("/api/v1/namespaces/x/nodes")
                .subresource
                .as_deref(),
            Some("nodes")
        );
    }

    #[test]
    fn verbs() {
        let nodes = classify("/api/v1/nodes");
        assert_eq!(verb_of(&Method::GET, &nodes, "watch=1&x=y"), "watch");
        assert_eq!(verb_of(&Method::GET, &nodes, "limit=500"), "list");
        assert_eq!(
            verb_of(&Method::GET, &classify("/api/v1/nodes/a"), ""),
            "get"
        );
        assert_eq!(verb_of(&Method::GET, &classify("/version"), ""), "get");
    }
}
