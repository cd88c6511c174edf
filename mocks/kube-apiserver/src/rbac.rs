//! Role-based access control from the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings stored in the server.
//!
//! Behind [`crate::Config::rbac`]: a CCM installed with its upstream manifests (a
//! ClusterRole `system:cloud-controller-manager`, bindings to its ServiceAccount) and
//! `--use-service-account-credentials` must meet the same 403s on the embedded server as
//! on a real cluster when a rule is missing. The evaluation follows upstream: bindings are
//! visited cluster-wide first, then in the request's namespace; the first rule that
//! allows wins and names its binding in the reason (kubernetes
//! plugin/pkg/auth/authorizer/rbac/rbac.go `RuleAllows`, pkg/registry/rbac/validation/rule.go
//! `VisitRulesFor`, `appliesToUser`, `describeSubject`; pkg/apis/rbac/v1/evaluation_helpers.go
//! for verb, group, resource, name and URL matching). Bindings are visited in name order
//! (upstream: informer order), and aggregated ClusterRoles count with the rules stored in
//! them (kube-controller-manager fills them in; nothing does here).

use serde_json::{Value, json};

use crate::resources::{self, ResourceDesc};
use crate::store::{FieldManagement, Filter, Store, WriteOptions};

/// What a request asks to do (apiserver pkg/authorization/authorizer `Attributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl Request {
    fn verb(&self) -> &str {
        match self {
            Request::Resource { verb, .. } | Request::NonResource { verb, .. } => verb,
        }
    }
}

/// The authorizer's answer; `reason` names the binding that allowed it (empty when denied,
/// as RBAC has no opinion then).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// The group whose members may do anything, before RBAC is asked (apiserver
/// pkg/authorization/authorizerfactory `NewPrivilegedGroups`; its reason is empty).
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// Decides `request` by `user` in `groups` from the RBAC objects in `store`.
pub fn authorize(store: &Store, user: &str, groups: &[String], request: &Request) -> Decision {
    if groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let subject = Subject { user, groups };
    for binding in list(store, "clusterrolebindings", None) {
        if let Some(reason) = binding_allows(store, &binding, "", &subject, request) {
            return Decision {
                allowed: true,
                reason,
            };
        }
    }
    if let Request::Resource { namespace, .. } = request
        && !namespace.is_empty()
    {
        for binding in list(store, "rolebindings", Some(namespace)) {
            if let Some(reason) = binding_allows(store, &binding, namespace, &subject, request) {
                return Decision {
                    allowed: true,
                    reason,
                };
            }
        }
    }
    Decision::default()
}

/// The rules `user` in `groups` has in `namespace`, as SelfSubjectRulesReview reports
/// them: `(resourceRules, nonResourceRules)` in binding order, one entry per rule part
/// (kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go `RulesFor`); system:masters gets
/// the privileged group's `*` rules (apiserver pkg/authorization/authorizerfactory).
pub fn rules_for(
    store: &Store,
    user: &str,
    groups: &[String],
    namespace: &str,
) -> (Vec<Value>, Vec<Value>) {
    if groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return all_rules();
    }
    let subject = Subject { user, groups };
    let mut rules = Vec::new();
    let mut visit = |binding: &Value, ns: &str| {
        let Some(subjects) = binding.get("subjects").and_then(Value::as_array) else {
            return;
        };
        if !subjects.iter().any(|s| applies(s, ns, &subject)) {
            return;
        }
        let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str);
        let name = binding.pointer("/roleRef/name").and_then(Value::as_str);
        let role = match (kind, name) {
            (Some("ClusterRole"), Some(n)) => {
                rbac_desc("clusterroles").and_then(|d| store.get(d, None, n).ok())
            }
            (Some("Role"), Some(n)) if !ns.is_empty() => {
                rbac_desc("roles").and_then(|d| store.get(d, Some(ns), n).ok())
            }
            _ => None,
        };
        if let Some(list) = role
            .as_ref()
            .and_then(|r| r.get("rules"))
            .and_then(Value::as_array)
        {
            rules.extend(list.iter().cloned());
        }
    };
    for binding in list(store, "clusterrolebindings", None) {
        visit(&binding, "");
    }
    if !namespace.is_empty() {
        for binding in list(store, "rolebindings", Some(namespace)) {
            visit(&binding, namespace);
        }
    }
    split_rules(&rules)
}

/// The privileged group's rules: everything.
pub fn all_rules() -> (Vec<Value>, Vec<Value>) {
    (
        vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
        vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
    )
}

/// Policy rules as SelfSubjectRulesReview's resource and non-resource rules.
pub fn split_rules(rules: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
    for rule in rules {
        let list = |k: &str| rule.get(k).cloned().unwrap_or_else(|| json!([]));
        if !strings(rule.get("resources")).is_empty() {
            let mut r = json!({"verbs": list("verbs"), "apiGroups": list("apiGroups"),
                "resources": list("resources")});
            if !strings(rule.get("resourceNames")).is_empty() {
                r["resourceNames"] = list("resourceNames");
            }
            resource.push(r);
        }
        if !strings(rule.get("nonResourceURLs")).is_empty() {
            non_resource
                .push(json!({"verbs": list("verbs"), "nonResourceURLs": list("nonResourceURLs")}));
        }
    }
    (resource, non_resource)
}

struct Subject<'a> {
    user: &'a str,
    groups: &'a [String],
}

fn rbac_desc(plural: &str) -> Option<&'static ResourceDesc> {
    resources::lookup("rbac.authorization.k8s.io", "v1", plural)
}

/// The objects of an RBAC resource, in name order.
fn list(store: &Store, plural: &str, namespace: Option<&str>) -> Vec<Value> {
    let Some(desc) = rbac_desc(plural) else {
        return Vec::new();
    };
    let filter = Filter {
        namespace: namespace.map(str::to_string),
        ..Filter::default()
    };
    let mut items: Vec<Value> = store
        .list(desc, &filter, None, None)
        .map(|page| page.items.iter().map(|o| (**o).clone()).collect())
        .unwrap_or_default();
    items.sort_by(|a, b| name(a).cmp(name(b)));
    items
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `binding` (in `namespace`, empty for a ClusterRoleBinding) lets `subject` do
/// `request`; the reason if so.
fn binding_allows(
    store: &Store,
    binding: &Value,
    namespace: &str,
    subject: &Subject<'_>,
    request: &Request,
) -> Option<String> {
    let subjects = binding.get("subjects").and_then(Value::as_array)?;
    let matched = subjects.iter().find(|s| applies(s, namespace, subject))?;
    let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str)?;
    let role_name = binding.pointer("/roleRef/name").and_then(Value::as_str)?;
    let role = match kind {
        "ClusterRole" => store
            .get(rbac_desc("clusterroles")?, None, role_name)
            .ok()?,
        "Role" if !namespace.is_empty() => store
            .get(rbac_desc("roles")?, Some(namespace), role_name)
            .ok()?,
        _ => return None,
    };
    let rules = role.get("rules").and_then(Value::as_array)?;
    if !rules.iter().any(|rule| rule_allows(rule, request)) {
        return None;
    }
    let source = if namespace.is_empty() {
        format!(
            "ClusterRoleBinding {:?} of {kind} {role_name:?} to {}",
            name(binding),
            describe_subject(matched, "")
        )
    } else {
        format!(
            "RoleBinding {:?} of {kind} {role_name:?} to {}",
            format!("{}/{namespace}", name(binding)),
            describe_subject(matched, namespace)
        )
    };
    Some(format!("RBAC: allowed by {source}"))
}

/// rule.go `appliesToUser`.
fn applies(s: &Value, namespace: &str, subject: &Subject<'_>) -> bool {
    let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => field("name") == subject.user,
        "Group" => subject.groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => namespace,
                ns => ns,
            };
            !ns.is_empty() && crate::tokens::username(ns, field("name")) == subject.user
        }
        _ => false,
    }
}

/// rule.go `describeSubject`.
fn describe_subject(s: &Value, binding_namespace: &str) -> String {
    let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            format!("ServiceAccount {:?}", format!("{}/{ns}", field("name")))
        }
        kind => format!("{kind} {:?}", field("name")),
    }
}

/// rbac.go `RuleAllows` with evaluation_helpers.go's matchers.
pub fn rule_allows(rule: &Value, request: &Request) -> bool {
    let verbs = strings(rule.get("verbs"));
    if !verbs.iter().any(|v| *v == "*" || *v == request.verb()) {
        return false;
    }
    match request {
        Request::Resource {
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let groups = strings(rule.get("apiGroups"));
            if !groups.iter().any(|g| *g == "*" || g == group) {
                return false;
            }
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resources = strings(rule.get("resources"));
            let resource_ok = resources.iter().any(|r| {
                *r == "*"
                    || *r == combined
                    || (!subresource.is_empty()
                        && r.strip_prefix("*/") == Some(subresource.as_str()))
            });
            let names = strings(rule.get("resourceNames"));
            resource_ok && (names.is_empty() || names.contains(&name.as_str()))
        }
        Request::NonResource { path, .. } => strings(rule.get("nonResourceURLs")).iter().any(|u| {
            *u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        }),
    }
}

/// The part of kube-apiserver's bootstrap policy every authenticated caller relies on:
/// `system:discovery`, `system:basic-user` and `system:public-info-viewer` with their
/// bindings to `system:authenticated` (and `system:unauthenticated` for the last), as
/// kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go writes them.
pub fn bootstrap_policy() -> Vec<(&'static str, Value)> {
    let labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let annotations = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let role = |name: &str, rules: Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "rules": rules,
        })
    };
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        })
    };
    let authenticated = "system:authenticated";
    vec![
        (
            "clusterroles",
            role(
                "system:discovery",
                json!([{"verbs": ["get"], "nonResourceURLs": [
                    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                    "/openapi", "/openapi/*", "/readyz", "/version", "/version/"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:basic-user",
                json!([
                    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                     "resources": ["selfsubjectreviews"]},
                ]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:public-info-viewer",
                json!([{"verbs": ["get"], "nonResourceURLs": [
                    "/healthz", "/livez", "/readyz", "/version", "/version/"]}]),
            ),
        ),
        (
            "clusterrolebindings",
            binding("system:discovery", &[authenticated]),
        ),
        (
            "clusterrolebindings",
            binding("system:basic-user", &[authenticated]),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:public-info-viewer",
                &[authenticated, "system:unauthenticated"],
            ),
        ),
    ]
}

/// Creates the [`bootstrap_policy`] objects that are missing (existing ones, perhaps
/// edited by a case, are left alone).
pub fn seed_bootstrap_policy(store: &Store) {
    for (plural, obj) in bootstrap_policy() {
        let Some(desc) = rbac_desc(plural) else {
            continue;
        };
        if store.get(desc, None, name(&obj)).is_ok() {
            continue;
        }
        let opts = WriteOptions {
            fields: FieldManagement::Update("kube-apiserver".into()),
            ..WriteOptions::default()
        };
        if let Err(e) = store.create(desc, None, obj, opts) {
            tracing::warn!(error = %e, "seeding the RBAC bootstrap policy");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> Request {
        Request::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"verbs": ["get", "patch"], "apiGroups": [""], "resources": ["nodes", "nodes/status"]});
        assert!(rule_allows(
            &rule,
            &resource("get", "", "nodes", "", "", "n")
        ));
        assert!(rule_allows(
            &rule,
            &resource("patch", "", "nodes", "status", "", "n")
        ));
        assert!(!rule_allows(
            &rule,
            &resource("delete", "", "nodes", "", "", "n")
        ));
        assert!(!rule_allows(
            &rule,
            &resource("get", "apps", "nodes", "", "", "n")
        ));
        assert!(!rule_allows(
            &rule,
            &resource("get", "", "services", "", "", "n")
        ));
        let sub_any = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]});
        assert!(rule_allows(
            &sub_any,
            &resource("update", "apps", "deployments", "status", "ns", "d")
        ));
        assert!(!rule_allows(
            &sub_any,
            &resource("update", "apps", "deployments", "", "ns", "d")
        ));
        assert!(!rule_allows(
            &sub_any,
            &resource("update", "apps", "deployments", "scale", "ns", "d")
        ));
        let named = json!({"verbs": ["delete"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]});
        assert!(rule_allows(
            &named,
            &resource("delete", "", "configmaps", "", "ns", "a")
        ));
        assert!(!rule_allows(
            &named,
            &resource("delete", "", "configmaps", "", "ns", "b")
        ));
        // A create names no object: resourceNames never allow it.
        let named_create = json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]});
        assert!(!rule_allows(
            &named_create,
            &resource("create", "", "configmaps", "", "ns", "")
        ));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let rule = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]});
        let get = |path: &str| Request::NonResource {
            verb: "get".into(),
            path: path.into(),
        };
        assert!(rule_allows(&rule, &get("/healthz")));
        assert!(rule_allows(&rule, &get("/apis/apps/v1")));
        assert!(!rule_allows(&rule, &get("/apis")));
        assert!(!rule_allows(&rule, &get("/healthz/etcd")));
        let post = Request::NonResource {
            verb: "post".into(),
            path: "/healthz".into(),
        };
        assert!(!rule_allows(&rule, &post));
        // A resource rule never allows a path, and the reverse.
        assert!(!rule_allows(
            &json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            &get("/api")
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
            &resource("get", "", "nodes", "", "", "")
        ));
    }

    fn create(store: &Store, plural: &str, ns: Option<&str>, obj: Value) {
        let desc = resources::lookup("rbac.authorization.k8s.io", "v1", plural).expect(plural);
        store
            .create(desc, ns, obj, WriteOptions::default())
            .expect("create");
    }

    #[test]
    fn bindings_grant_to_users_groups_and_service_accounts_and_name_themselves() {
        let store = Store::new(100);
        create(
            &store,
            "clusterroles",
            None,
            json!({"metadata": {"name": "nodes-reader"}, "rules": [
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}]}),
        );
        create(
            &store,
            "clusterrolebindings",
            None,
            json!({"metadata": {"name": "ccm-nodes"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nodes-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system"}]}),
        );
        create(
            &store,
            "roles",
            Some("kube-system"),
            json!({"metadata": {"name": "leases"}, "rules": [
                {"verbs": ["*"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}]}),
        );
        create(
            &store,
            "rolebindings",
            Some("kube-system"),
            json!({"metadata": {"name": "ccm-leases"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
                "subjects": [{"kind": "ServiceAccount", "name": "ccm"}, {"kind": "Group", "name": "ops"}]}),
        );
        let sa = crate::tokens::username("kube-system", "ccm");
        let sa_groups = crate::tokens::groups("kube-system");
        let d = authorize(
            &store,
            &sa,
            &sa_groups,
            &resource("list", "", "nodes", "", "", ""),
        );
        assert_eq!(
            d,
            Decision {
                allowed: true,
                reason: "RBAC: allowed by ClusterRoleBinding \"ccm-nodes\" of ClusterRole \"nodes-reader\" to ServiceAccount \"ccm/kube-system\"".into()
            }
        );
        assert!(
            !authorize(
                &store,
                &sa,
                &sa_groups,
                &resource("delete", "", "nodes", "", "", "n")
            )
            .allowed
        );
        let lease = resource(
            "update",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "l",
        );
        let d = authorize(&store, &sa, &sa_groups, &lease);
        assert_eq!(
            d.reason,
            "RBAC: allowed by RoleBinding \"ccm-leases/kube-system\" of Role \"leases\" to ServiceAccount \"ccm/kube-system\""
        );
        // The RoleBinding's default namespace is its own: the same SA name elsewhere is not it.
        let other = crate::tokens::username("default", "ccm");
        assert!(!authorize(&store, &other, &[], &lease).allowed);
        let in_default = resource(
            "update",
            "coordination.k8s.io",
            "leases",
            "",
            "default",
            "l",
        );
        assert!(!authorize(&store, &sa, &sa_groups, &in_default).allowed);
        // Groups and the privileged group.
        let d = authorize(&store, "alice", &["ops".into()], &lease);
        assert_eq!(
            d.reason,
            "RBAC: allowed by RoleBinding \"ccm-leases/kube-system\" of Role \"leases\" to Group \"ops\""
        );
        assert_eq!(
            authorize(&store, "root", &[PRIVILEGED_GROUP.into()], &lease),
            Decision {
                allowed: true,
                reason: String::new()
            }
        );
        assert_eq!(authorize(&store, "bob", &[], &lease), Decision::default());
    }

    #[test]
    fn rules_reviews_list_what_the_bindings_grant() {
        let store = Store::new(100);
        seed_bootstrap_policy(&store);
        create(
            &store,
            "roles",
            Some("default"),
            json!({"metadata": {"name": "cm"}, "rules": [
                {"verbs": ["delete"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}]}),
        );
        create(
            &store,
            "rolebindings",
            Some("default"),
            json!({"metadata": {"name": "cm"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
                "subjects": [{"kind": "User", "name": "u"}]}),
        );
        let groups = vec!["system:authenticated".to_string()];
        let (resource, non_resource) = rules_for(&store, "u", &groups, "default");
        assert!(
            resource.contains(&json!({"verbs": ["delete"], "apiGroups": [""],
            "resources": ["configmaps"], "resourceNames": ["a"]})),
            "{resource:?}"
        );
        assert!(
            non_resource.iter().any(|r| r["nonResourceURLs"]
                .as_array()
                .is_some_and(|u| u.contains(&json!("/api")))),
            "{non_resource:?}"
        );
        let (elsewhere, _) = rules_for(&store, "u", &groups, "kube-system");
        assert!(
            !elsewhere
                .iter()
                .any(|r| r["resources"] == json!(["configmaps"]))
        );
        assert_eq!(
            rules_for(&store, "root", &[PRIVILEGED_GROUP.into()], "default"),
            all_rules()
        );
    }

    #[test]
    fn the_bootstrap_policy_lets_authenticated_users_discover_and_review_themselves() {
        let store = Store::new(100);
        seed_bootstrap_policy(&store);
        seed_bootstrap_policy(&store);
        let authenticated = vec!["system:authenticated".to_string()];
        let get = |path: &str| Request::NonResource {
            verb: "get".into(),
            path: path.into(),
        };
        assert!(authorize(&store, "u", &authenticated, &get("/apis/apps/v1")).allowed);
        assert!(!authorize(&store, "u", &authenticated, &get("/metrics")).allowed);
        assert!(
            authorize(
                &store,
                "u",
                &["system:unauthenticated".into()],
                &get("/version")
            )
            .allowed
        );
        assert!(
            !authorize(
                &store,
                "u",
                &["system:unauthenticated".into()],
                &get("/api")
            )
            .allowed
        );
        let ssar = resource(
            "create",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "",
            "",
            "",
        );
        assert_eq!(
            authorize(&store, "u", &authenticated, &ssar).reason,
            "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
        );
    }
}
