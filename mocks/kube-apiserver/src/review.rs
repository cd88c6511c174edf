//! The authentication and authorization APIs a CCM install touches: the TokenRequest
//! subresource of ServiceAccounts, TokenReview, SubjectAccessReview (and its self and
//! local forms), SelfSubjectReview, and the `kube-system/extension-apiserver-authentication`
//! ConfigMap kube-apiserver publishes at start.
//!
//! Why: `--use-service-account-credentials` makes a CCM request a token per controller
//! (`serviceaccounts/<name>/token`) and call the API with it; the delegated
//! authentication and authorization of its own secure serving port posts TokenReviews and
//! SubjectAccessReviews and reads the ConfigMap (k8s.io/apiserver
//! pkg/server/options/authentication.go, authorization.go). Each answer follows its
//! upstream registry (kubernetes pkg/registry/core/serviceaccount/storage/token.go,
//! pkg/registry/authentication/tokenreview/storage.go, pkg/registry/authorization/*).
//! Reviews are answered, never stored: 201 with the request and its status.

use serde_json::{Map, Value, json};

use crate::auth::Identity;
use crate::error::{ApiError, Cause};
use crate::rbac::{self, Decision};
use crate::resources::{self, ResourceDesc};
use crate::store::{FieldManagement, Store, WriteOptions};
use crate::tokens::{self, ISSUER};

/// The API audiences of the server (kube-apiserver defaults `--api-audiences` to the
/// service-account issuer).
pub fn api_audiences() -> Vec<String> {
    vec![ISSUER.to_string()]
}

/// Default and bounds of `spec.expirationSeconds` (kubernetes pkg/apis/authentication/v1
/// defaults.go; pkg/apis/authentication/validation `ValidateTokenRequest`).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

fn now_seconds() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn rfc3339(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn invalid(group: &str, kind: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: group.into(),
        kind: kind.into(),
        name: String::new(),
        causes,
    }
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: a token for the
/// ServiceAccount, valid for `spec.expirationSeconds` (default one hour, at least ten
/// minutes) and `spec.audiences` (default: the API audiences).
pub fn token_request(
    store: &Store,
    signer: &tokens::Signer,
    namespace: &str,
    name: &str,
    request: &Value,
) -> Result<Value, ApiError> {
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::BadRequest(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: spec.expirationSeconds: expected an integer, got {v}"
            ))
        })?,
    };
    let too = if seconds < MIN_EXPIRATION_SECONDS {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION_SECONDS {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(detail) = too {
        return Err(invalid(
            "authentication.k8s.io",
            "TokenRequest",
            vec![Cause::invalid_rendered(
                "spec.expirationSeconds",
                &seconds.to_string(),
                detail,
            )],
        ));
    }
    let sa_desc = resources::lookup("", "v1", "serviceaccounts").ok_or(ApiError::UnknownPath)?;
    let sa = store.get(sa_desc, Some(namespace), name)?;
    let uid = sa
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => api_audiences(),
    };
    let now = now_seconds();
    let token = signer.issue(namespace, name, uid, &audiences, now, seconds);
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": rfc3339(now),
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null),
        },
        "status": {
            "token": token,
            "expirationTimestamp": rfc3339(now + seconds),
        },
    }))
}

/// Who a bearer token stands for, as TokenReview reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: Map<String, Value>,
    pub audiences: Vec<String>,
}

/// What authenticating a bearer token needs: the server's static tokens, its signer and
/// its store (a service-account token is valid only while its ServiceAccount exists with
/// the uid the token names, kubernetes pkg/serviceaccount/claims.go `Validate`).
pub struct TokenAuthority<'a> {
    pub admin_token: &'a str,
    pub readonly_token: &'a str,
    pub signer: &'a tokens::Signer,
    pub store: &'a Store,
}

impl TokenAuthority<'_> {
    /// The user behind `token` when it is valid for one of `audiences` (the static tokens
    /// are valid for the API audiences only).
    pub fn review(&self, token: &str, audiences: &[String]) -> Option<TokenUser> {
        let api = api_audiences();
        let intersect = |token_auds: &[String]| -> Vec<String> {
            audiences
                .iter()
                .filter(|a| token_auds.contains(a))
                .cloned()
                .collect()
        };
        let static_user = |user: &str, groups: Vec<String>| {
            let auds = intersect(&api);
            (!auds.is_empty()).then(|| TokenUser {
                username: user.into(),
                uid: user.into(),
                groups,
                extra: Map::new(),
                audiences: auds,
            })
        };
        if token == self.admin_token {
            return static_user(
                crate::auth::ADMIN_USER,
                vec![
                    crate::auth::ADMIN_GROUP.into(),
                    "system:authenticated".into(),
                ],
            );
        }
        if token == self.readonly_token {
            return static_user(
                crate::auth::READONLY_USER,
                vec![
                    crate::auth::READONLY_GROUP.into(),
                    "system:authenticated".into(),
                ],
            );
        }
        let claims = self.signer.verify(token, now_seconds())?;
        let auds = intersect(&claims.audiences);
        if auds.is_empty() {
            return None;
        }
        let sa_desc = resources::lookup("", "v1", "serviceaccounts")?;
        let sa = self
            .store
            .get(sa_desc, Some(&claims.namespace), &claims.name)
            .ok()?;
        if sa.pointer("/metadata/uid").and_then(Value::as_str) != Some(claims.uid.as_str()) {
            return None;
        }
        let mut extra = Map::new();
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            json!([format!("JTI={}", claims.jti)]),
        );
        Some(TokenUser {
            username: claims.username(),
            uid: claims.uid.clone(),
            groups: tokens::groups(&claims.namespace),
            extra,
            audiences: auds,
        })
    }
}

/// The request body of a review with its kind and apiVersion set, and the metadata
/// it was sent with (or `{}`).
fn echo(desc: &ResourceDesc, request: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("kind".into(), json!(desc.kind));
    out.insert("apiVersion".into(), json!(desc.api_version()));
    out.insert(
        "metadata".into(),
        request
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    out.insert(
        "spec".into(),
        request.get("spec").cloned().unwrap_or_else(|| json!({})),
    );
    out
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: an unknown token is no error, just
/// `authenticated` left out (false) and an `error` text.
pub fn token_review(authority: &TokenAuthority<'_>, request: &Value) -> Result<Value, ApiError> {
    let desc = resources::lookup("authentication.k8s.io", "v1", "tokenreviews")
        .ok_or(ApiError::UnknownPath)?;
    let token = request
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview in authentication".into(),
        ));
    }
    let audiences: Vec<String> = request
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(api_audiences);
    let mut out = echo(desc, request);
    let status = match authority.review(token, &audiences) {
        Some(user) => {
            let mut info = json!({
                "username": user.username,
                "uid": user.uid,
                "groups": user.groups,
            });
            if !user.extra.is_empty() {
                info["extra"] = Value::Object(user.extra);
            }
            json!({"authenticated": true, "user": info, "audiences": user.audiences})
        }
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    out.insert("status".into(), status);
    Ok(Value::Object(out))
}

/// `spec.resourceAttributes` or `spec.nonResourceAttributes` as an authorizer request.
fn attributes(spec: &Value) -> Option<rbac::Request> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(r) = spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        return Some(rbac::Request::Resource {
            verb: text(r, "verb"),
            group: text(r, "group"),
            resource: text(r, "resource"),
            subresource: text(r, "subresource"),
            namespace: text(r, "namespace"),
            name: text(r, "name"),
        });
    }
    spec.get("nonResourceAttributes")
        .filter(|v| !v.is_null())
        .map(|n| rbac::Request::NonResource {
            verb: text(n, "verb"),
            path: text(n, "path"),
        })
}

/// kubernetes pkg/apis/authorization/validation `ValidateSubjectAccessReviewSpec` (and
/// the self form, which names no user).
fn validate_spec(spec: &Value, needs_subject: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let has = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let union = "exactly one of nonResourceAttributes or resourceAttributes must be specified";
    match (has("resourceAttributes"), has("nonResourceAttributes")) {
        (true, true) => {
            let rendered = spec
                .get("nonResourceAttributes")
                .map(Value::to_string)
                .unwrap_or_default();
            causes.push(Cause::invalid_rendered("spec", &rendered, union));
        }
        (false, false) => causes.push(Cause::invalid_rendered("spec", "null", union)),
        _ => {}
    }
    let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
    let groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if needs_subject && user.is_empty() && !groups {
        causes.push(Cause::invalid(
            "spec.user",
            user,
            "at least one of user or group must be specified",
        ));
    }
    causes
}

/// `status` of an access review.
fn access_status(decision: &Decision) -> Value {
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    status
}

/// The kind upstream's `NewInvalid` names for a refused access review: the kind of the
/// decoded internal object, which is empty (TypeMeta is dropped on conversion), so the
/// message reads `.authorization.k8s.io "" is invalid` and `details` has no kind
/// (kubernetes pkg/registry/authorization/subjectaccessreview/rest.go).
const REVIEW_KIND: &str = "";

/// Lists the (resource, non-resource) rules of a user in groups in a namespace.
pub type RulesFor<'a> = dyn Fn(&str, &[String], &str) -> (Vec<Value>, Vec<Value>) + 'a;

/// One of the create-only review resources ([`ResourceDesc::create_only`]): `decide`
/// answers for a user and groups as the server would authorize them, `caller` is who
/// sent the request, `namespace` the URL's (LocalSubjectAccessReview).
pub fn review(
    desc: &'static ResourceDesc,
    request: &Value,
    namespace: Option<&str>,
    caller: Option<&Identity>,
    authority: &TokenAuthority<'_>,
    decide: &dyn Fn(&str, &[String], &rbac::Request) -> Decision,
    rules: &RulesFor<'_>,
) -> Result<Value, ApiError> {
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let no_user = || ApiError::BadRequest("no user present on request".into());
    let mut out = echo(desc, request);
    let status = match desc.plural {
        "tokenreviews" => return token_review(authority, request),
        "selfsubjectreviews" => {
            let caller = caller.ok_or_else(no_user)?;
            let mut groups = caller.groups.clone();
            if caller.user != crate::auth::ANONYMOUS_USER
                && !groups.iter().any(|g| g == "system:authenticated")
            {
                groups.push("system:authenticated".into());
            }
            json!({"userInfo": {"username": caller.user, "groups": groups}})
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let mut causes = validate_spec(&spec, true);
            if desc.plural == "localsubjectaccessreviews" {
                let ns = namespace.unwrap_or("");
                let sent_ns = spec
                    .pointer("/resourceAttributes/namespace")
                    .and_then(Value::as_str);
                if let Some(sent) = sent_ns.filter(|s| *s != ns) {
                    causes.push(Cause::invalid(
                        "spec.resourceAttributes.namespace",
                        sent,
                        "must match metadata.namespace",
                    ));
                }
                if spec
                    .get("nonResourceAttributes")
                    .is_some_and(|v| !v.is_null())
                {
                    causes.push(Cause::invalid_rendered(
                        "spec.nonResourceAttributes",
                        &spec["nonResourceAttributes"].to_string(),
                        "disallowed on this kind of request",
                    ));
                }
            }
            if !causes.is_empty() {
                return Err(invalid("authorization.k8s.io", REVIEW_KIND, causes));
            }
            let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
            let groups: Vec<String> = spec
                .get("groups")
                .and_then(Value::as_array)
                .map(|g| {
                    g.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let attrs = attributes(&spec).ok_or(ApiError::UnknownPath)?;
            access_status(&decide(user, &groups, &attrs))
        }
        // kubernetes pkg/registry/authorization/selfsubjectrulesreview/rest.go.
        "selfsubjectrulesreviews" => {
            let caller = caller.ok_or_else(no_user)?;
            let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            if namespace.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            let (resource, non_resource) = rules(&caller.user, &caller.groups, namespace);
            json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false})
        }
        "selfsubjectaccessreviews" => {
            let causes = validate_spec(&spec, false);
            if !causes.is_empty() {
                return Err(invalid("authorization.k8s.io", REVIEW_KIND, causes));
            }
            let caller = caller.ok_or_else(no_user)?;
            let attrs = attributes(&spec).ok_or(ApiError::UnknownPath)?;
            access_status(&decide(&caller.user, &caller.groups, &attrs))
        }
        _ => return Err(ApiError::MethodNotAllowed),
    };
    out.insert("status".into(), status);
    Ok(Value::Object(out))
}

/// Writes `kube-system/extension-apiserver-authentication` with the client CA, as
/// kube-apiserver's cluster-authentication-trust controller does at start when the
/// `--requestheader-*` flags are unset: only `client-ca-file` (kubernetes
/// pkg/controlplane/controller/clusterauthenticationtrust `getConfigMapDataFor`). A CA
/// already listed stays; another one is added to the bundle, as that controller combines
/// certificate lists. Nothing is written without a client CA (plain HTTP).
pub fn publish_client_ca(store: &Store, ca_pem: &str) {
    let Some(desc) = resources::lookup("", "v1", "configmaps") else {
        return;
    };
    let (ns, name) = ("kube-system", "extension-apiserver-authentication");
    let opts = || WriteOptions {
        fields: FieldManagement::Update("kube-apiserver".into()),
        ..WriteOptions::default()
    };
    let pem = ca_pem.trim_end();
    let result = match store.get(desc, Some(ns), name) {
        Ok(mut existing) => {
            let bundle = existing
                .pointer("/data/client-ca-file")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if bundle.contains(pem) {
                return;
            }
            let combined = if bundle.trim().is_empty() {
                format!("{pem}\n")
            } else {
                format!("{}\n{pem}\n", bundle.trim_end())
            };
            existing["data"]["client-ca-file"] = json!(combined);
            store
                .update(
                    desc,
                    Some(ns),
                    name,
                    crate::strategy::Subresource::Main,
                    existing,
                    opts(),
                )
                .map(|_| ())
        }
        Err(_) => store
            .create(
                desc,
                Some(ns),
                json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns},
                    "data": {"client-ca-file": format!("{pem}\n")},
                }),
                opts(),
            )
            .map(|_| ()),
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "publishing {ns}/{name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The authority of a server with the admin token `admin` and the read-only `ro`.
    fn authority<'a>(store: &'a Store, signer: &'a tokens::Signer) -> TokenAuthority<'a> {
        TokenAuthority {
            admin_token: "admin",
            readonly_token: "ro",
            signer,
            store,
        }
    }

    fn store_with_sa() -> (Store, String) {
        let store = Store::new(100);
        let desc = resources::lookup("", "v1", "serviceaccounts").expect("sa");
        let sa = store
            .create(
                desc,
                Some("kube-system"),
                json!({"metadata": {"name": "ccm"}}),
                WriteOptions::default(),
            )
            .expect("sa");
        let uid = sa["metadata"]["uid"].as_str().expect("uid").to_string();
        (store, uid)
    }

    #[test]
    fn token_requests_default_validate_and_need_the_service_account() {
        let (store, uid) = store_with_sa();
        let signer = tokens::Signer::new("s");
        let tr = token_request(&store, &signer, "kube-system", "ccm", &json!({})).expect("tr");
        assert_eq!(tr["spec"]["expirationSeconds"], 3600);
        assert_eq!(tr["spec"]["audiences"], json!([ISSUER]));
        assert_eq!(tr["metadata"]["uid"], uid.as_str());
        let token = tr["status"]["token"].as_str().expect("token");
        let claims = signer.verify(token, now_seconds()).expect("valid");
        assert_eq!(claims.username(), "system:serviceaccount:kube-system:ccm");
        let exp = jiff::Timestamp::from_second(claims.exp).expect("exp");
        assert_eq!(
            tr["status"]["expirationTimestamp"],
            exp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
        );
        let err = token_request(
            &store,
            &signer,
            "kube-system",
            "ccm",
            &json!({"spec": {"expirationSeconds": 100}}),
        )
        .expect_err("too short");
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.to_string(),
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 10 minutes"
        );
        let err = token_request(&store, &signer, "kube-system", "nope", &json!({}))
            .expect_err("no such SA");
        assert_eq!(err.code(), 404);
    }

    #[test]
    fn token_reviews_know_service_accounts_until_they_are_recreated() {
        let (store, _) = store_with_sa();
        let signer = tokens::Signer::new("s");
        let authority = authority(&store, &signer);
        let tr = token_request(&store, &signer, "kube-system", "ccm", &json!({})).expect("tr");
        let token = tr["status"]["token"].as_str().expect("token");
        let review = token_review(&authority, &json!({"spec": {"token": token}})).expect("review");
        assert_eq!(review["status"]["authenticated"], true);
        assert_eq!(
            review["status"]["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated"
            ])
        );
        let unknown = token_review(&authority, &json!({"spec": {"token": "x"}})).expect("review");
        assert_eq!(
            unknown["status"],
            json!({"user": {}, "error": "invalid bearer token"})
        );
        assert_eq!(
            token_review(&authority, &json!({"spec": {}}))
                .expect_err("no token")
                .code(),
            400
        );
        // Another audience than the token's.
        let other = json!({"spec": {"token": token, "audiences": ["vault"]}});
        assert!(token_review(&authority, &other).expect("review")["status"]["error"].is_string());
        // Deleted and recreated: a new uid, the old token is dead.
        let desc = resources::lookup("", "v1", "serviceaccounts").expect("sa");
        store
            .delete(
                desc,
                Some("kube-system"),
                "ccm",
                &crate::store::DeleteOptions::default(),
            )
            .expect("delete");
        store
            .create(
                desc,
                Some("kube-system"),
                json!({"metadata": {"name": "ccm"}}),
                WriteOptions::default(),
            )
            .expect("recreate");
        assert!(authority.review(token, &api_audiences()).is_none());
    }

    #[test]
    fn access_reviews_validate_and_decide() {
        let (store, _) = store_with_sa();
        let signer = tokens::Signer::new("s");
        let authority = authority(&store, &signer);
        let sar =
            resources::lookup("authorization.k8s.io", "v1", "subjectaccessreviews").expect("sar");
        let deny_all = |_: &str, _: &[String], _: &rbac::Request| Decision::default();
        let no_rules = |_: &str, _: &[String], _: &str| (Vec::new(), Vec::new());
        let err = review(
            sar,
            &json!({"spec": {"user": "u"}}),
            None,
            None,
            &authority,
            &deny_all,
            &no_rules,
        )
        .expect_err("no attributes");
        assert_eq!(
            err.to_string(),
            ".authorization.k8s.io \"\" is invalid: spec: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
        let err = review(
            sar,
            &json!({"kind": "SubjectAccessReview", "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}),
            None,
            None,
            &authority,
            &deny_all,
            &no_rules,
        )
        .expect_err("no subject");
        assert!(
            err.to_string()
                .starts_with(".authorization.k8s.io \"\" is invalid")
        );
        assert_eq!(
            err.to_status()["details"],
            json!({"group": "authorization.k8s.io",
            "causes": [{"reason": "FieldValueInvalid", "field": "spec.user",
            "message": "Invalid value: \"\": at least one of user or group must be specified"}]})
        );
        let allow = |user: &str, _: &[String], attrs: &rbac::Request| Decision {
            allowed: user == "u"
                && matches!(attrs, rbac::Request::Resource { verb, .. } if verb == "get"),
            reason: "because".into(),
        };
        let out = review(
            sar,
            &json!({"spec": {"user": "u", "resourceAttributes": {"verb": "get", "resource": "nodes"}}}),
            None,
            None,
            &authority,
            &allow,
            &no_rules,
        )
        .expect("review");
        assert_eq!(out["status"], json!({"allowed": true, "reason": "because"}));
        assert_eq!(out["kind"], "SubjectAccessReview");
    }

    #[test]
    fn the_client_ca_is_published_once() {
        let store = Store::new(100);
        publish_client_ca(
            &store,
            "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n",
        );
        publish_client_ca(
            &store,
            "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n",
        );
        let desc = resources::lookup("", "v1", "configmaps").expect("cm");
        let cm = store
            .get(
                desc,
                Some("kube-system"),
                "extension-apiserver-authentication",
            )
            .expect("published");
        assert_eq!(
            cm["data"],
            json!({"client-ca-file": "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n"})
        );
        publish_client_ca(
            &store,
            "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----",
        );
        let cm = store
            .get(
                desc,
                Some("kube-system"),
                "extension-apiserver-authentication",
            )
            .expect("published");
        let bundle = cm["data"]["client-ca-file"].as_str().expect("bundle");
        assert!(
            bundle.contains("\nA\n") && bundle.contains("\nB\n"),
            "{bundle}"
        );
    }
}
