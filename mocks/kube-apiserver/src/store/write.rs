//! Create, update, patch and server-side apply: the generic registry's write path
//! (apiserver pkg/registry/rest/create.go `BeforeCreate`, update.go `BeforeUpdate`).
//!
//! Why this exists: every write, whatever verb brought it, goes through the same checks
//! (type meta, names, namespaces, resourceVersion preconditions, system fields, the
//! kind's strategy, allocation, managedFields) before it is stamped and recorded.

use std::sync::Arc;

use serde_json::{Value, json};

use super::state::{Inner, Store, invalid, namespace_of};
use super::types::{EventKind, FieldManagement, Stored, WriteOptions};
use crate::apply;
use crate::error::{ApiError, Cause, OPTIMISTIC_LOCK_MESSAGE};
use crate::meta::{
    finalizers, generate_name, meta_nonempty, meta_str, now_rfc3339, set_meta, set_name_from_url,
    validate_name,
};
use crate::resources::ResourceDesc;
use crate::strategy::{self, Subresource};

/// Strings as Go's `%#v` prints their elements: quoted, comma-separated.
fn go_strings(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn conflict(desc: &ResourceDesc, name: &str, reason: String) -> ApiError {
    ApiError::Conflict {
        group: desc.group.into(),
        resource: desc.plural.into(),
        name: name.into(),
        reason,
    }
}

/// A present `apiVersion`/`kind` must name this resource (a wrong one is a 400, as in
/// upstream's decoder); a missing one is filled in.
fn check_type_meta(desc: &ResourceDesc, obj: &Value) -> Result<(), ApiError> {
    let want_av = desc.api_version();
    if let Some(av) = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && av != want_av
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({av}) does not match the expected API version ({want_av})"
        )));
    }
    if let Some(kind) = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && kind != desc.kind
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            desc.kind
        )));
    }
    Ok(())
}

fn set_type_meta(desc: &ResourceDesc, obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(desc.api_version()));
        map.insert("kind".into(), json!(desc.kind));
    }
}

/// Body namespace vs URL namespace (apiserver pkg/registry/rest/meta.go
/// `EnsureObjectNamespaceMatchesRequestNamespace`).
fn reconcile_namespace(desc: &ResourceDesc, obj: &mut Value, ns: &str) -> Result<(), ApiError> {
    let body_ns = meta_str(obj, "namespace").unwrap_or("").to_string();
    if desc.namespaced {
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
                    .into(),
            ));
        }
        set_meta(obj, "namespace", Some(json!(ns)));
    } else {
        // Cluster-scoped: a namespace in the body is cleared.
        set_meta(obj, "namespace", None);
    }
    Ok(())
}

fn parse_rv(s: &str) -> Option<u64> {
    s.parse().ok()
}

impl Store {
    /// Create an object (apiserver pkg/registry/rest/create.go `BeforeCreate`).
    pub fn create(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        mut obj: Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        }
        check_type_meta(desc, &obj)?;
        let ns = namespace_of(desc, ns);
        reconcile_namespace(desc, &mut obj, &ns)?;
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ] {
            set_meta(&mut obj, field, None);
        }
        let name = match (
            meta_nonempty(&obj, "name"),
            meta_nonempty(&obj, "generateName"),
        ) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => generate_name(prefix),
            (None, None) => {
                return Err(invalid(
                    desc,
                    "",
                    vec![Cause::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        };
        let causes = validate_name(&name, desc.name_rule);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        set_meta(&mut obj, "name", Some(json!(name)));
        strategy::prepare_create(desc, &mut obj);
        let causes = strategy::validate_create(desc, &obj);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        set_meta(
            &mut obj,
            "uid",
            Some(json!(uuid::Uuid::new_v4().to_string())),
        );
        set_meta(&mut obj, "creationTimestamp", Some(json!(now_rfc3339())));
        set_type_meta(desc, &mut obj);

        let mut inner = self.lock();
        if desc.namespaced && !inner.namespace_exists(&ns) {
            return Err(ApiError::NotFound {
                group: String::new(),
                resource: "namespaces".into(),
                name: ns,
            });
        }
        let key = (ns.clone(), name.clone());
        if inner
            .objects
            .get(&desc.key())
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::AlreadyExists {
                group: desc.group.into(),
                resource: desc.plural.into(),
                name,
            });
        }
        let causes = inner.allocate(desc, &key, &mut obj, None);
        if !causes.is_empty() {
            return Err(invalid(desc, &name, causes));
        }
        if let FieldManagement::Update(manager) = &opts.fields {
            apply::record_update(desc, None, &mut obj, manager, Subresource::Main);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let obj = self.write_object(&mut inner, EventKind::Added, desc, key, obj, None);
        Ok(obj.value().clone())
    }

    /// Replace an object (PUT). `sub` selects main resource or `/status` rules.
    pub fn update(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        obj: Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        self.update_locked(
            &mut inner,
            desc,
            &ns,
            name,
            sub,
            old,
            obj,
            !desc.allow_unconditional_update,
            opts,
        )
    }

    /// Read-modify-write under the lock (PATCH). `patch` gets the current object and
    /// returns the desired one; a `metadata.resourceVersion` it carries that differs
    /// from the current one is a 409, as for PUT.
    pub fn patch(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        patch: impl FnOnce(&Value) -> Result<Value, ApiError>,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        let new = patch(&old)?;
        self.update_locked(&mut inner, desc, &ns, name, sub, old, new, false, opts)
    }

    /// Server-side apply: `build` gets the current object (None when missing) and
    /// returns the desired one. A missing object is created (apiserver
    /// pkg/endpoints/handlers/patch.go `applyPatch` creates on NotFound), except through
    /// a subresource. Returns the object and whether it was created.
    pub fn apply(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        build: impl Fn(Option<&Value>) -> Result<Value, ApiError>,
        opts: WriteOptions,
    ) -> Result<(Value, bool), ApiError> {
        // Two rounds: a create that loses a race to another writer becomes an update.
        for _ in 0..2 {
            {
                let mut inner = self.lock();
                let ns = namespace_of(desc, ns);
                match inner.get(desc, &ns, name) {
                    Ok(old) => {
                        let new = build(Some(&old))?;
                        return self
                            .update_locked(&mut inner, desc, &ns, name, sub, old, new, false, opts)
                            .map(|v| (v, false));
                    }
                    Err(e) if sub != Subresource::Main => return Err(e),
                    Err(_) => {}
                }
            }
            let mut obj = build(None)?;
            set_name_from_url(&mut obj, name)?;
            match self.create(desc, ns, obj, opts.clone()) {
                Err(ApiError::AlreadyExists { .. }) => continue,
                other => return other.map(|v| (v, true)),
            }
        }
        Err(conflict(desc, name, OPTIMISTIC_LOCK_MESSAGE.into()))
    }

    /// The shared update path (apiserver pkg/registry/generic/registry/store.go `Update`
    /// and pkg/registry/rest/update.go `BeforeUpdate`).
    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        &self,
        inner: &mut Inner,
        desc: &'static ResourceDesc,
        ns: &str,
        name: &str,
        sub: Subresource,
        old: Arc<Stored>,
        mut new: Value,
        rv_required: bool,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        }
        check_type_meta(desc, &new)?;
        set_name_from_url(&mut new, name)?;
        reconcile_namespace(desc, &mut new, ns)?;

        let old_rv = meta_str(&old, "resourceVersion").unwrap_or("").to_string();
        match meta_nonempty(&new, "resourceVersion") {
            Some(rv) if rv != old_rv => {
                if parse_rv(rv).is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "invalid resourceVersion {rv:?}"
                    )));
                }
                return Err(conflict(desc, name, OPTIMISTIC_LOCK_MESSAGE.into()));
            }
            Some(_) => {}
            None if rv_required => {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::invalid(
                        "metadata.resourceVersion",
                        "",
                        "must be specified for an update",
                    )],
                ));
            }
            None => {}
        }

        strategy::prepare_update(desc, sub, &old, &mut new);

        // System fields: uid may be omitted but not changed; the rest always come from
        // the stored object.
        match (meta_nonempty(&new, "uid"), meta_str(&old, "uid")) {
            (Some(u), Some(o)) if u != o => {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::invalid("metadata.uid", u, "field is immutable")],
                ));
            }
            _ => {}
        }
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            let value = old.get("metadata").and_then(|m| m.get(field)).cloned();
            set_meta(&mut new, field, value);
        }
        strategy::update_generation(desc, sub, &old, &mut new);
        set_meta(&mut new, "selfLink", None);

        let deleting = meta_nonempty(&old, "deletionTimestamp").is_some();
        let new_finalizers = finalizers(&new);
        if deleting {
            let old_finalizers = finalizers(&old);
            let added: Vec<&String> = new_finalizers
                .iter()
                .filter(|f| !old_finalizers.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(invalid(
                    desc,
                    name,
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            go_strings(&added)
                        ),
                    )],
                ));
            }
        }
        strategy::patch_allocated_values(desc, &old, &mut new);
        let mut causes = strategy::validate_update(desc, &old, &new);
        if causes.is_empty() {
            let key = (ns.to_string(), name.to_string());
            causes = inner.allocate(desc, &key, &mut new, Some(&old));
        }
        if !causes.is_empty() {
            return Err(invalid(desc, name, causes));
        }

        if opts.fields != FieldManagement::Precomputed
            && new.pointer("/metadata/managedFields").is_none()
        {
            let kept = old.pointer("/metadata/managedFields").cloned();
            set_meta(&mut new, "managedFields", kept);
        }
        if let FieldManagement::Update(manager) = &opts.fields {
            apply::record_update(desc, Some(&old), &mut new, manager, sub);
        }
        set_type_meta(desc, &mut new);
        set_meta(&mut new, "resourceVersion", Some(json!(old_rv)));
        if new == *old.value() {
            return Ok(new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        let key = (ns.to_string(), name.to_string());
        // apiserver store.go: an update that empties the finalizers of an object being
        // deleted deletes it.
        let kind = if deleting && new_finalizers.is_empty() {
            EventKind::Deleted
        } else {
            EventKind::Modified
        };
        let new = self.write_object(inner, kind, desc, key, new, Some(old));
        Ok(new.value().clone())
    }
}
