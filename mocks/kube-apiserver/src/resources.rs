//! The table of resources this server serves.
//!
//! Objects are stored as plain JSON, so everything that differs between resource
//! types (URL, kind, scope, status subresource, which field selectors work, name
//! rules) is data in one table instead of one Rust type per resource. Discovery,
//! routing, validation and selectors all read this table.

use serde_json::Value;

/// Which name syntax a resource accepts (apimachinery pkg/api/validation/generic.go,
/// kubernetes pkg/apis/core/validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most resources).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Label1035,
    /// Any path segment: not `.` or `..`, no `/` or `%` (RBAC names such as
    /// `system:cloud-controller-manager`; kubernetes pkg/apis/rbac/validation
    /// `ValidateRBACName`).
    PathSegment,
}

/// A selectable field: its selector name, where it lives in the object, and the value
/// used when it is absent (upstream field sets stringify zero values).
#[derive(Debug, Clone, Copy)]
pub struct SelectableField {
    pub name: &'static str,
    /// JSON pointer into the object.
    pub pointer: &'static str,
    pub default: &'static str,
}

const fn field(
    name: &'static str,
    pointer: &'static str,
    default: &'static str,
) -> SelectableField {
    SelectableField {
        name,
        pointer,
        default,
    }
}

/// Everything the server needs to know about one resource type.
#[derive(Debug)]
pub struct ResourceDesc {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub status_subresource: bool,
    pub short_names: &'static [&'static str],
    /// Discovery categories (`all` makes `kubectl get all` list the resource; kubernetes
    /// pkg/registry/*/storage `Categories()`).
    pub categories: &'static [&'static str],
    /// Per-type selectable fields, beyond `metadata.name`/`metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// Whether PUT without `metadata.resourceVersion` is accepted (the strategy's
    /// `AllowUnconditionalUpdate`).
    pub allow_unconditional_update: bool,
    /// Whether PUT to a missing object creates it (the strategy's `AllowCreateOnUpdate`).
    pub allow_create_on_update: bool,
    pub name_rule: NameRule,
    /// DELETE answers with the deleted object rather than a Status: the registries with
    /// `ReturnDeletedObject` (kubernetes pkg/registry/core/{pod,service,namespace,
    /// serviceaccount}/storage/storage.go among those served here).
    pub delete_returns_object: bool,
    /// A review API that only takes `create` and stores nothing (TokenReview,
    /// SubjectAccessReview...; kubernetes pkg/registry/authentication, authorization):
    /// answered by [`crate::review`], absent from the store and the OpenAPI documents.
    pub create_only: bool,
}

/// Descriptors are identified by group, version and plural.
impl PartialEq for ResourceDesc {
    fn eq(&self, other: &ResourceDesc) -> bool {
        (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
    }
}

impl ResourceDesc {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// A stable key for store maps and events: `plural` or `plural.group`.
    pub fn key(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether `name` is a field selector this resource supports.
    pub fn supports_field(&self, name: &str) -> bool {
        name == "metadata.name"
            || (self.namespaced && name == "metadata.namespace")
            || self.fields.iter().any(|f| f.name == name)
    }

    /// The value of a selectable field in `obj`, or `None` if the field is not
    /// selectable on this resource.
    pub fn field_value(&self, obj: &Value, name: &str) -> Option<String> {
        let (pointer, default) = match name {
            "metadata.name" => ("/metadata/name", ""),
            "metadata.namespace" if self.namespaced => ("/metadata/namespace", ""),
            _ => {
                let f = self.fields.iter().find(|f| f.name == name)?;
                (f.pointer, f.default)
            }
        };
        Some(match obj.pointer(pointer) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => default.to_string(),
        })
    }
}

// Field selector tables: kubernetes pkg/registry/core/{node,pod,event}/strategy.go
// (`NodeToSelectableFields`, `ToSelectableFields`) and pkg/apis/core/v1/conversion.go.
const NODE_FIELDS: &[SelectableField] =
    &[field("spec.unschedulable", "/spec/unschedulable", "false")];
const POD_FIELDS: &[SelectableField] = &[
    field("spec.nodeName", "/spec/nodeName", ""),
    field("spec.restartPolicy", "/spec/restartPolicy", ""),
    field("spec.schedulerName", "/spec/schedulerName", ""),
    field("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    field("spec.hostNetwork", "/spec/hostNetwork", "false"),
    field("status.phase", "/status/phase", ""),
    field("status.podIP", "/status/podIP", ""),
    field("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];
const EVENT_FIELDS: &[SelectableField] = &[
    field("involvedObject.kind", "/involvedObject/kind", ""),
    field("involvedObject.namespace", "/involvedObject/namespace", ""),
    field("involvedObject.name", "/involvedObject/name", ""),
    field("involvedObject.uid", "/involvedObject/uid", ""),
    field(
        "involvedObject.apiVersion",
        "/involvedObject/apiVersion",
        "",
    ),
    field(
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    field("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
    field("reason", "/reason", ""),
    field("reportingComponent", "/reportingComponent", ""),
    field("source", "/source/component", ""),
    field("type", "/type", ""),
];
const SERVICE_FIELDS: &[SelectableField] = &[
    field("spec.clusterIP", "/spec/clusterIP", ""),
    field("spec.type", "/spec/type", ""),
];
const SECRET_FIELDS: &[SelectableField] = &[field("type", "/type", "")];
const NAMESPACE_FIELDS: &[SelectableField] = &[field("status.phase", "/status/phase", "")];

/// The common case, for the struct-update syntax of the table entries below: a namespaced
/// core/v1 resource with no status subresource, no extra selectable fields, unconditional
/// updates allowed, no create-on-update, subdomain names and a Status answer to DELETE.
const BASE: ResourceDesc = ResourceDesc {
    group: "",
    version: "v1",
    plural: "",
    singular: "",
    kind: "",
    namespaced: true,
    status_subresource: false,
    short_names: &[],
    categories: &[],
    fields: &[],
    allow_unconditional_update: true,
    allow_create_on_update: false,
    name_rule: NameRule::Subdomain,
    delete_returns_object: false,
    create_only: false,
};

const RBAC: &str = "rbac.authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";

/// Every resource served. Unconditional-update and create-on-update flags follow each
/// upstream strategy (e.g. kubernetes pkg/registry/coordination/lease/strategy.go:
/// unconditional update false, create on update true).
pub static RESOURCES: &[ResourceDesc] = &[
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        status_subresource: false,
        short_names: &["ns"],
        categories: &[],
        fields: NAMESPACE_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Label,
        delete_returns_object: true,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        status_subresource: true,
        short_names: &["no"],
        categories: &[],
        fields: NODE_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        status_subresource: false,
        short_names: &["ev"],
        categories: &[],
        fields: EVENT_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: true,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        status_subresource: false,
        short_names: &["cm"],
        categories: &[],
        fields: &[],
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        status_subresource: false,
        short_names: &[],
        categories: &[],
        fields: SECRET_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        status_subresource: true,
        short_names: &["svc"],
        categories: &["all"],
        fields: SERVICE_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: true,
        name_rule: NameRule::Label1035,
        delete_returns_object: true,
        create_only: false,
    },
    ResourceDesc {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        status_subresource: true,
        short_names: &["po"],
        categories: &["all"],
        fields: POD_FIELDS,
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Subdomain,
        delete_returns_object: true,
        create_only: false,
    },
    ResourceDesc {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        status_subresource: false,
        short_names: &[],
        categories: &[],
        fields: &[],
        allow_unconditional_update: false,
        allow_create_on_update: true,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        status_subresource: false,
        short_names: &["ev"],
        categories: &[],
        fields: &[],
        allow_unconditional_update: true,
        allow_create_on_update: true,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    ResourceDesc {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        namespaced: true,
        status_subresource: false,
        short_names: &[],
        categories: &[],
        fields: &[],
        allow_unconditional_update: true,
        allow_create_on_update: false,
        name_rule: NameRule::Subdomain,
        delete_returns_object: false,
        create_only: false,
    },
    // kubernetes pkg/registry/core/serviceaccount: `ReturnDeletedObject`, short name sa.
    ResourceDesc {
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        short_names: &["sa"],
        delete_returns_object: true,
        ..BASE
    },
    // kubernetes pkg/registry/rbac/*: create on update allowed, names are path segments,
    // no short names or categories, DELETE answers with a Status.
    ResourceDesc {
        group: RBAC,
        plural: "roles",
        singular: "role",
        kind: "Role",
        allow_create_on_update: true,
        name_rule: NameRule::PathSegment,
        ..BASE
    },
    ResourceDesc {
        group: RBAC,
        plural: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        allow_create_on_update: true,
        name_rule: NameRule::PathSegment,
        ..BASE
    },
    ResourceDesc {
        group: RBAC,
        plural: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        allow_create_on_update: true,
        name_rule: NameRule::PathSegment,
        ..BASE
    },
    ResourceDesc {
        group: RBAC,
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        allow_create_on_update: true,
        name_rule: NameRule::PathSegment,
        ..BASE
    },
    // kubernetes pkg/registry/apps/{deployment,daemonset}: status subresource, category
    // all, no create on update.
    ResourceDesc {
        group: "apps",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        status_subresource: true,
        short_names: &["deploy"],
        categories: &["all"],
        ..BASE
    },
    ResourceDesc {
        group: "apps",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        status_subresource: true,
        short_names: &["ds"],
        categories: &["all"],
        ..BASE
    },
    // kubernetes pkg/registry/authentication/{tokenreview,selfsubjectreview} and
    // pkg/registry/authorization/*: create-only, nothing stored.
    review(AUTHN, "tokenreviews", "tokenreview", "TokenReview"),
    review(
        AUTHN,
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
    ),
    review(
        AUTHZ,
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
    ),
    review(
        AUTHZ,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
    ),
    review(
        AUTHZ,
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
    ),
    ResourceDesc {
        namespaced: true,
        ..review(
            AUTHZ,
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
        )
    },
];

/// A cluster-scoped review API of `group`/v1 that only takes `create`.
const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
) -> ResourceDesc {
    ResourceDesc {
        group,
        plural,
        singular,
        kind,
        namespaced: false,
        create_only: true,
        ..BASE
    }
}

/// The resource at `/api/v1/<plural>` (group "") or `/apis/<group>/<version>/<plural>`.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDesc> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource named `plural` (core) or `plural.group`, as [`ResourceDesc::key`] spells it.
pub fn by_key(key: &str) -> Option<&'static ResourceDesc> {
    RESOURCES.iter().find(|r| r.key() == key)
}

/// The API groups other than core, in table order, with their versions.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_unschedulable_defaults_to_false() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        assert_eq!(
            nodes
                .field_value(&json!({}), "spec.unschedulable")
                .as_deref(),
            Some("false")
        );
        assert_eq!(
            nodes
                .field_value(
                    &json!({"spec": {"unschedulable": true}}),
                    "spec.unschedulable"
                )
                .as_deref(),
            Some("true")
        );
        assert!(
            nodes
                .field_value(&json!({}), "metadata.namespace")
                .is_none()
        );
        assert!(!nodes.supports_field("spec.nodeName"));
    }

    #[test]
    fn keys_are_unique() {
        for r in RESOURCES {
            assert!(std::ptr::eq(by_key(&r.key()).expect("key"), r));
        }
    }
}
