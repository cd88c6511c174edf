//! [`AppState`]: what every request handler shares (store, audit log, authenticator,
//! denials, token signer) and the authorization decisions made from it.
//!
//! Why this exists: the state is built from a [`Config`] by the server and handed to the
//! router; its decisions (who may do what) are used both by the authorization filter and
//! by the access-review APIs, so they live with the state rather than with either.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};

use super::path::Target;
use crate::audit::AuditLog;
use crate::auth::{Authenticator, Denial};
use crate::config::Config;
use crate::error::ApiError;
use crate::rbac;
use crate::review;
use crate::store::Store;
use crate::tokens;

/// Everything a request handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub audit: AuditLog,
    pub(super) auth: Arc<Authenticator>,
    pub(super) bookmark_interval: Duration,
    pub(super) max_body_bytes: usize,
    shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    pub(super) allow_anonymous: Arc<AtomicBool>,
    /// Verbs taken away from users on the running server ([`crate::auth::Denial`]).
    denials: Arc<std::sync::Mutex<Vec<Denial>>>,
    /// Signs and checks service-account tokens ([`crate::tokens`]).
    pub(super) signer: tokens::Signer,
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
    pub(super) fn token_authority(&self) -> review::TokenAuthority<'_> {
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
    pub(super) fn service_account(&self, token: &str) -> Option<(String, Vec<String>)> {
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
            if self.denial_covers(user, verb, group, &resource) {
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
        let mut all = self.denial_list();
        if !all.contains(&denial) {
            all.push(denial);
        }
    }

    /// Lifts every denial.
    pub fn clear_denials(&self) {
        self.denial_list().clear();
    }

    /// The denials in force.
    pub fn denials(&self) -> Vec<Denial> {
        self.denial_list().clone()
    }

    /// The denials, locked (a poisoned lock is taken over: the list stays consistent).
    fn denial_list(&self) -> MutexGuard<'_, Vec<Denial>> {
        self.denials.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a denial takes `verb` on `resource` (`plural` or `plural/subresource`) in
    /// `group` away from `user`.
    fn denial_covers(&self, user: &str, verb: &str, group: &str, resource: &str) -> bool {
        self.denial_list()
            .iter()
            .any(|d| d.covers(user, verb, group, resource))
    }

    /// Whether a denial covers `verb` by `user` on `target`.
    pub(super) fn denied(&self, user: &str, verb: &str, target: &Target) -> bool {
        let Target::Resource(rp) = target else {
            return false;
        };
        let resource = match &rp.subresource {
            Some(sub) => format!("{}/{sub}", rp.desc.plural),
            None => rp.desc.plural.to_string(),
        };
        self.denial_covers(user, verb, rp.desc.group, &resource)
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
