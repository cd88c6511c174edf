//! OpenAPI v3 documents for the served types, and the field validation they imply.
//!
//! kubectl needs them for three things: `apply`/`create` check that the server
//! supports `fieldValidation` on PATCH for the object's kind before sending
//! `fieldValidation=Strict` (cli-runtime pkg/resource/query_param_verifier_v3.go;
//! without any OpenAPI document apply fails unless `--validate=false`), `explain`
//! walks the component schemas (kubectl pkg/explain/v2), and client-go's openapi3
//! root reads the index (client-go openapi/client.go, `paths` ->
//! `serverRelativeURL`). The schemas come from the hand-written table in
//! [`crate::schema`]: the top-level fields of every kind are exact (they also drive
//! [`unknown_fields`]), nested types list their main fields. Descriptions are our own
//! short wording.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::resources::{RESOURCES, ResourceDesc};
use crate::schema::{TypeDef, full_name, kind_def, type_def};

fn field_schema(spec: &str, description: &str, refs: &mut BTreeSet<&'static str>) -> Value {
    let mut schema = match spec {
        "string" => json!({"type": "string"}),
        "integer" => json!({"type": "integer", "format": "int64"}),
        "boolean" => json!({"type": "boolean"}),
        "time" => json!({"type": "string", "format": "date-time"}),
        "map" => {
            json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
        }
        "object" => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        _ => match spec.strip_prefix("[]") {
            Some(item) => json!({"type": "array", "items": field_schema(item, "", refs)}),
            None => match type_def(spec) {
                Some(t) => {
                    refs.insert(t.name);
                    // Upstream v3 documents wrap references in allOf so that a
                    // description can sit next to them.
                    json!({"allOf": [{"$ref": format!("#/components/schemas/{}", full_name(t.name))}], "default": {}})
                }
                None => json!({"type": "object"}),
            },
        },
    };
    if !description.is_empty()
        && let Some(map) = schema.as_object_mut()
    {
        map.insert("description".into(), json!(description));
    }
    schema
}

fn type_schema(t: &TypeDef, refs: &mut BTreeSet<&'static str>) -> Value {
    let mut props = Map::new();
    if t.kind.is_some() {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "Versioned schema of this representation of the object."}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": "The REST resource this object represents."}),
        );
    }
    for (name, spec, description) in t.fields {
        let mut field = field_schema(spec, description, refs);
        // The strategic-merge metadata of a list field, as upstream's struct tags publish
        // it (`patchStrategy`/`patchMergeKey` in kubernetes staging/src/k8s.io/api/*/types.go).
        // kubectl's client-side apply reads these from `/openapi/v3`: without them a list of
        // containers is atomic, and any defaulted field makes a re-apply replace the whole list.
        if let Some((strategy, key)) = t.list(name).and_then(|l| l.openapi_patch())
            && let Some(map) = field.as_object_mut()
        {
            map.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            if let Some(key) = key {
                map.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
        }
        props.insert((*name).into(), field);
    }
    let mut schema = json!({"type": "object", "description": t.description, "properties": props});
    if let Some((group, version, kind)) = t.kind {
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": group, "version": version, "kind": kind}]);
    }
    schema
}

fn gvk(desc: &ResourceDesc) -> Value {
    json!({"group": desc.group, "version": desc.version, "kind": desc.kind})
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

/// Write parameters (inline, as kubectl's verifier reads `parameters[].name`).
fn write_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "When present, do not persist the change (value: All).",
        ),
        query_param("fieldManager", "Name of the actor making the change."),
        query_param(
            "fieldValidation",
            "How to treat unknown fields: Ignore, Warn (default) or Strict.",
        ),
    ]
}

fn operation(desc: &ResourceDesc, action: &str, op_id: String, schema_ref: &Value) -> Value {
    let mut op = json!({
        "operationId": op_id,
        "description": format!("{action} {}", desc.kind),
        "tags": [if desc.group.is_empty() { "core_v1".to_string() } else { format!("{}_{}", desc.group, desc.version) }],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(desc),
    });
    match action {
        "post" | "put" => {
            op["parameters"] = json!(write_params());
            op["requestBody"] =
                json!({"content": {"*/*": {"schema": schema_ref}}, "required": true});
        }
        "patch" => {
            let mut params = write_params();
            params.push(json!({"name": "force", "in": "query", "description": "Take over conflicting fields (server-side apply).", "schema": {"type": "boolean", "uniqueItems": true}}));
            op["parameters"] = json!(params);
            let body = json!({"schema": {"type": "object"}});
            op["requestBody"] = json!({"content": {
                "application/json-patch+json": body,
                "application/merge-patch+json": body,
                "application/strategic-merge-patch+json": body,
                "application/apply-patch+yaml": body,
            }, "required": true});
        }
        _ => {}
    }
    op
}

fn paths_for(desc: &ResourceDesc) -> Vec<(String, Value)> {
    let prefix = if desc.group.is_empty() {
        format!("/api/{}", desc.version)
    } else {
        format!("/apis/{}/{}", desc.group, desc.version)
    };
    let collection = if desc.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", desc.plural)
    } else {
        format!("{prefix}/{}", desc.plural)
    };
    let schema_ref = match kind_def(desc) {
        Some(t) => json!({"$ref": format!("#/components/schemas/{}", full_name(t.name))}),
        None => json!({"type": "object"}),
    };
    let id = |verb: &str| {
        let ns = if desc.namespaced { "Namespaced" } else { "" };
        // Upstream's operation ids: `rbac.authorization.k8s.io` -> `RbacAuthorization`.
        let group = if desc.group.is_empty() {
            "Core".to_string()
        } else {
            let trimmed = desc.group.trim_end_matches(".k8s.io");
            trimmed.split('.').map(capitalize).collect()
        };
        format!("{verb}{group}{}{ns}{}", capitalize(desc.version), desc.kind)
    };
    let path_param = |name: &str| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}});
    let mut ns_params = Vec::new();
    if desc.namespaced {
        ns_params.push(path_param("namespace"));
    }
    let mut item_params = vec![path_param("name")];
    item_params.extend(ns_params.iter().cloned());
    let mut out = vec![
        (
            collection.clone(),
            json!({
                "get": operation(desc, "list", id("list"), &json!({"type": "object"})),
                "post": operation(desc, "post", id("create"), &schema_ref),
                "parameters": ns_params,
            }),
        ),
        (
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(desc, "get", id("read"), &schema_ref),
                "put": operation(desc, "put", id("replace"), &schema_ref),
                "patch": operation(desc, "patch", id("patch"), &schema_ref),
                "delete": operation(desc, "delete", id("delete"), &json!({"type": "object"})),
                "parameters": item_params.clone(),
            }),
        ),
    ];
    if desc.status_subresource {
        out.push((
            format!("{collection}/{{name}}/status"),
            json!({
                "get": operation(desc, "get", format!("{}Status", id("read")), &schema_ref),
                "put": operation(desc, "put", format!("{}Status", id("replace")), &schema_ref),
                "patch": operation(desc, "patch", format!("{}Status", id("patch")), &schema_ref),
                "parameters": item_params,
            }),
        ));
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The group versions with stored resources (the review APIs have no schemas here).
fn served_group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.create_only) {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The index path of a group version: `api/v1` or `apis/<group>/<version>`.
fn index_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`, by the
/// path after `/openapi/v3/`.
pub fn group_version_doc(path: &str) -> Option<Value> {
    let (group, version) = served_group_versions()
        .into_iter()
        .find(|(g, v)| index_path(g, v) == path.trim_matches('/'))?;
    let mut paths = BTreeMap::new();
    let mut refs = BTreeSet::new();
    for desc in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !r.create_only)
    {
        paths.extend(paths_for(desc));
        if let Some(t) = kind_def(desc) {
            refs.insert(t.name);
        }
    }
    // The closure of referenced schemas.
    let mut schemas = Map::new();
    let mut todo: Vec<&str> = refs.iter().copied().collect();
    while let Some(name) = todo.pop() {
        let full = full_name(name);
        if schemas.contains_key(&full) {
            continue;
        }
        let Some(t) = type_def(name) else { continue };
        let mut found = BTreeSet::new();
        schemas.insert(full, type_schema(t, &mut found));
        todo.extend(found);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The media type of a protobuf `/openapi/v2` answer. Clients ask for it also spelled
/// `...spec.v2@v1.0+protobuf` (client-go discovery `openAPIV2mimePb`), which Go's
/// `mime` parser rejects in a response, so upstream answers with this spelling
/// (kube-openapi pkg/handler/handler.go).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header prefers protobuf over JSON for `/openapi/v2`: the first
/// listed range of either kind wins.
pub fn v2_wants_protobuf(accept: &str) -> bool {
    for range in accept.split(',') {
        let essence = range.split(';').next().unwrap_or("").trim();
        if essence.contains("com.github.proto-openapi.spec.v2") {
            return true;
        }
        if matches!(essence, "application/json" | "application/*" | "*/*") {
            return false;
        }
    }
    false
}

/// `GET /openapi/v2` as JSON: a valid Swagger 2.0 document without definitions.
///
/// Why it exists: kubectl validates a `kind: List` manifest on the client, and only
/// against OpenAPI v2 (kubectl pkg/validation/validation.go; cli-runtime's v3
/// field-validation check never supports `v1/List`). Without a v2 document, `kubectl
/// apply -f` of a List fails; with one that defines no kinds, kubectl skips the
/// client-side check of each item and sends it with `fieldValidation=Strict`, so the
/// server validates it as it does any other object. Schemas are served in v3 only.
pub fn v2_json() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": {},
    })
}

/// [`v2_json`] encoded as the gnostic `openapi_v2.Document` message (gnostic-models
/// openapiv2/OpenAPIv2.proto: swagger = 1, info = 2 {title = 1, version = 2},
/// paths = 8), as kubectl requests it.
pub fn v2_protobuf() -> Vec<u8> {
    fn field(num: u8, payload: &[u8]) -> Vec<u8> {
        // Every payload here is shorter than 128 bytes: a one-byte length.
        let len = u8::try_from(payload.len()).unwrap_or(u8::MAX);
        [&[(num << 3) | 2, len][..], payload].concat()
    }
    let info = [
        field(1, b"Kubernetes"),
        field(2, crate::discovery::GIT_VERSION.as_bytes()),
    ]
    .concat();
    [field(1, b"2.0"), field(2, &info), field(8, b"")].concat()
}

/// A short stable content hash (FNV-1a), for the `hash` query of the index URLs
/// (client-go caches documents by it).
fn content_hash(doc: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in doc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `GET /openapi/v3`: every group version with its document URL.
pub fn index() -> Value {
    let mut paths = Map::new();
    for (g, v) in served_group_versions() {
        let path = index_path(g, v);
        let hash = group_version_doc(&path)
            .map(|d| content_hash(&d))
            .unwrap_or_default();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// How a write treats fields the schema does not know (the `fieldValidation`
/// query parameter, apimachinery pkg/apis/meta/v1 types.go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// Parse the query value; empty means Warn, the server default (apiserver
    /// pkg/endpoints/handlers/rest.go `fieldValidation`).
    pub fn parse(s: &str) -> Option<FieldValidation> {
        match s {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// Unknown fields at the top level and in `metadata`, as upstream's strict decoder
/// names them (`unknown field "spec2"`, `unknown field "metadata.foo"`). Nested
/// fields are not checked: the nested schemas here are not exhaustive.
pub fn unknown_fields(desc: &ResourceDesc, obj: &Value) -> Vec<String> {
    let Some(t) = kind_def(desc) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for key in map.keys() {
        if key != "apiVersion" && key != "kind" && !t.fields.iter().any(|f| f.0 == key) {
            out.push(key.clone());
        }
    }
    if let (Some(meta), Some(meta_def)) = (
        map.get("metadata").and_then(Value::as_object),
        type_def("meta.v1.ObjectMeta"),
    ) {
        for key in meta.keys() {
            if !meta_def.fields.iter().any(|f| f.0 == key) {
                out.push(format!("metadata.{key}"));
            }
        }
    }
    out
}

/// The first top-level field whose JSON type cannot decode into its Go type (`string`,
/// `boolean`, `integer`, and `map` of strings; `null` decodes to the zero value), as
/// encoding/json words it: `json: cannot unmarshal number into Go struct field
/// Secret.stringData of type string`. Nested types are not checked.
pub fn type_error(desc: &ResourceDesc, obj: &Value) -> Option<String> {
    let t = kind_def(desc)?;
    let map = obj.as_object()?;
    let json_type = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mismatch = |field: &str, v: &Value, go: &str| {
        format!(
            "json: cannot unmarshal {} into Go struct field {}.{field} of type {go}",
            json_type(v),
            desc.kind
        )
    };
    for (name, spec, _) in t.fields {
        let Some(v) = map.get(*name).filter(|v| !v.is_null()) else {
            continue;
        };
        let wrong = match *spec {
            "string" if !v.is_string() => Some((v, "string".to_string())),
            "boolean" if !v.is_boolean() => Some((v, "bool".to_string())),
            "integer" if !(v.is_i64() || v.is_u64()) => Some((v, "int32".to_string())),
            "map" => match v.as_object() {
                None => Some((v, "map[string]string".to_string())),
                Some(m) => m
                    .values()
                    .find(|x| !x.is_string() && !x.is_null())
                    .map(|x| (x, "string".to_string())),
            },
            list if list.starts_with("[]") && !v.is_array() => Some((v, go_type(list))),
            named if type_def(named).is_some() && !v.is_object() => Some((v, go_type(named))),
            _ => None,
        };
        if let Some((v, go)) = wrong {
            return Some(mismatch(name, v, &go));
        }
    }
    None
}

/// The Go type a type spec decodes into, as encoding/json names it in errors: `string`,
/// `[]v1.PolicyRule`, `v1.DeploymentSpec`.
fn go_type(spec: &str) -> String {
    if let Some(item) = spec.strip_prefix("[]") {
        return format!("[]{}", go_type(item));
    }
    match spec {
        "string" | "time" => "string".into(),
        "boolean" => "bool".into(),
        "integer" => "int32".into(),
        "map" => "map[string]string".into(),
        "object" => "interface {}".into(),
        // `<group>.<version>.<Type>`: Go prints the package (the version) and the type.
        named => {
            let mut parts = named.rsplit('.');
            let ty = parts.next().unwrap_or(named);
            let version = parts.next().unwrap_or("v1");
            format!("{version}.{ty}")
        }
    }
}

/// Remove the fields [`unknown_fields`] reports, as upstream's typed decoding
/// drops them (so they are never stored).
pub fn prune_unknown(obj: &mut Value, unknown: &[String]) {
    for field in unknown {
        match field.strip_prefix("metadata.") {
            Some(meta_key) => {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove(meta_key);
                }
            }
            None => {
                if let Some(map) = obj.as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use crate::schema::types;

    #[test]
    fn every_served_kind_has_a_schema_and_every_ref_resolves() {
        for desc in RESOURCES.iter().filter(|r| !r.create_only) {
            assert!(kind_def(desc).is_some(), "{}", desc.kind);
        }
        for t in types() {
            for (name, spec, _) in t.fields {
                let base = spec.trim_start_matches("[]");
                let builtin = matches!(
                    base,
                    "string" | "integer" | "boolean" | "time" | "map" | "object"
                );
                assert!(
                    builtin || type_def(base).is_some(),
                    "{}.{name}: {spec}",
                    t.name
                );
            }
        }
    }

    #[test]
    fn index_points_at_documents() {
        let idx = index();
        let url = idx["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .expect("url");
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
        assert!(idx["paths"]["apis/coordination.k8s.io/v1"].is_object());
        assert!(group_version_doc("apis/nope/v1").is_none());
    }

    #[test]
    fn core_document_supports_field_validation_on_node_patch() {
        let doc = group_version_doc("api/v1").expect("doc");
        let patch = &doc["paths"]["/api/v1/nodes/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Node");
        assert!(
            patch["parameters"]
                .as_array()
                .expect("params")
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        let node = &doc["components"]["schemas"]["io.k8s.api.core.v1.Node"];
        assert_eq!(node["x-kubernetes-group-version-kind"][0]["kind"], "Node");
        assert_eq!(
            node["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.NodeSpec"
        );
        let spec = &doc["components"]["schemas"]["io.k8s.api.core.v1.NodeSpec"];
        assert_eq!(spec["properties"]["providerID"]["type"], "string");
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Taint"].is_object());
        assert!(
            doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
                .is_object()
        );
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/services/{name}/status"].is_object());
    }

    #[test]
    fn new_kinds_are_documented_with_exact_top_level_fields() {
        let top = |group: &str, plural: &str| -> Vec<&'static str> {
            let desc = lookup(group, "v1", plural).expect("resource");
            kind_def(desc)
                .expect("schema")
                .fields
                .iter()
                .map(|f| f.0)
                .collect()
        };
        let rbac = "rbac.authorization.k8s.io";
        assert_eq!(
            top("", "serviceaccounts"),
            [
                "automountServiceAccountToken",
                "imagePullSecrets",
                "metadata",
                "secrets"
            ]
        );
        assert_eq!(top(rbac, "roles"), ["metadata", "rules"]);
        assert_eq!(
            top(rbac, "clusterroles"),
            ["aggregationRule", "metadata", "rules"]
        );
        assert_eq!(
            top(rbac, "rolebindings"),
            ["metadata", "roleRef", "subjects"]
        );
        assert_eq!(
            top(rbac, "clusterrolebindings"),
            ["metadata", "roleRef", "subjects"]
        );
        assert_eq!(top("apps", "deployments"), ["metadata", "spec", "status"]);
        assert_eq!(top("apps", "daemonsets"), ["metadata", "spec", "status"]);

        let doc = group_version_doc("apis/apps/v1").expect("apps doc");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert!(
            doc["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}/status"]
                .is_object()
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"].is_object());
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.PodTemplateSpec"].is_object());
        // Strategic-merge metadata kubectl's client-side apply needs.
        let containers =
            &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(
            containers["x-kubernetes-patch-merge-key"], "name",
            "{containers}"
        );
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let rbac_doc = group_version_doc("apis/rbac.authorization.k8s.io/v1").expect("rbac doc");
        assert!(
            rbac_doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"].is_object()
        );
        assert!(rbac_doc["components"]["schemas"]["io.k8s.api.rbac.v1.PolicyRule"].is_object());
        assert!(index()["paths"]["apis/apps/v1"].is_object());
    }

    #[test]
    fn v2_document_is_valid_and_empty() {
        let pb = v2_protobuf();
        assert_eq!(&pb[..5], b"\x0a\x032.0");
        assert_eq!(&pb[pb.len() - 2..], b"\x42\x00");
        assert_eq!(v2_json()["swagger"], "2.0");
        assert!(v2_wants_protobuf(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(v2_wants_protobuf(
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"
        ));
        assert!(!v2_wants_protobuf(
            "application/json, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        ));
        assert!(!v2_wants_protobuf(""));
    }

    #[test]
    fn type_errors_name_go_types() {
        let deploy = lookup("apps", "v1", "deployments").expect("deployments");
        assert_eq!(
            type_error(deploy, &json!({"spec": "x"})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec"
            )
        );
        let roles =
            lookup("rbac.authorization.k8s.io", "v1", "clusterroles").expect("clusterroles");
        assert_eq!(
            type_error(roles, &json!({"rules": {}})).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field ClusterRole.rules of type []v1.PolicyRule"
            )
        );
        assert_eq!(
            type_error(roles, &json!({"rules": [], "aggregationRule": null})),
            None
        );
    }

    #[test]
    fn unknown_fields_top_level_and_metadata() {
        let nodes = lookup("", "v1", "nodes").expect("nodes");
        let mut obj = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "bogus": 1},
                             "spec": {"anything": true}, "spek": {}});
        let unknown = unknown_fields(nodes, &obj);
        assert_eq!(unknown, ["spek", "metadata.bogus"]);
        prune_unknown(&mut obj, &unknown);
        assert!(unknown_fields(nodes, &obj).is_empty());
        assert_eq!(obj["spec"]["anything"], true);
        let cms = lookup("", "v1", "configmaps").expect("cm");
        assert_eq!(
            unknown_fields(cms, &json!({"data": {}, "spec": {}})),
            ["spec"]
        );
        assert_eq!(FieldValidation::parse(""), Some(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse("strict"), None);
    }
}
