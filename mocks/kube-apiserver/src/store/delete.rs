//! DELETE: preconditions, finalizers, the garbage collector's finalizers for a
//! propagation policy, and graceful deletion of pods.
//!
//! Why this exists: a DELETE may only mark an object (finalizers left, a grace period
//! running) or remove it, with upstream's rules for which (apiserver
//! pkg/registry/generic/registry/store.go `Delete`, pkg/registry/rest/delete.go).

use serde_json::{Value, json};

use super::state::{Store, namespace_of};
use super::types::{DeleteOptions, DeleteOutcome, EventKind};
use crate::error::ApiError;
use crate::meta::{finalizers, meta_nonempty, meta_str, now_rfc3339, set_meta};
use crate::resources::ResourceDesc;

/// Whether deleting an object of `desc` is graceful: only pods here (kubernetes
/// pkg/registry/core/pod/strategy.go implements `RESTGracefulDeleteStrategy`).
fn graceful_delete(desc: &ResourceDesc) -> bool {
    desc.group.is_empty() && desc.plural == "pods"
}

/// The grace period a first DELETE gives a pod (pod strategy `CheckGracefulDelete`, after
/// apiserver pkg/registry/rest/delete.go `BeforeDelete` turned a negative request into 1):
/// the request's, else `spec.terminationGracePeriodSeconds`; zero for a pod that is not
/// scheduled or has terminated.
fn pod_grace_period(pod: &Value, opts: &DeleteOptions) -> i64 {
    let requested = opts.grace_period_seconds.map(|p| if p < 0 { 1 } else { p });
    let mut period = requested.unwrap_or_else(|| {
        // kubernetes pkg/apis/core/v1 defaults.go: 30 s when the pod did not say.
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if !scheduled || matches!(phase, Some("Failed" | "Succeeded")) {
        period = 0;
    }
    period.max(0)
}

/// `ts` moved by `seconds` (RFC 3339, whole seconds); `ts` itself when it does not parse.
fn shift_timestamp(ts: &str, seconds: i64) -> String {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| t.checked_add(jiff::SignedDuration::from_secs(seconds)).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| ts.to_string())
}

/// The garbage collector's finalizers (apimachinery pkg/apis/meta/v1 `FinalizerOrphanDependents`,
/// `FinalizerDeleteDependents`).
pub(super) const ORPHAN_FINALIZER: &str = "orphan";
pub(super) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The finalizers a DELETE leaves on `obj` once the garbage collector's are added or
/// removed as `opts` asks, or `None` when they stay as they are (apiserver
/// pkg/registry/generic/registry/store.go `deletionFinalizersForGarbageCollection`,
/// `shouldOrphanDependents`, `shouldDeleteDependents`). Events opt out of garbage
/// collection (kubernetes pkg/registry/core/event/strategy.go `rest.Unsupported`); every
/// other resource served here defaults to background deletion.
fn gc_finalizers(desc: &ResourceDesc, obj: &Value, opts: &DeleteOptions) -> Option<Vec<String>> {
    if desc.plural == "events" {
        return None;
    }
    let current = finalizers(obj);
    let has = |f: &str| current.iter().any(|c| c == f);
    let policy = opts.propagation_policy.as_deref();
    let orphan = match (opts.orphan_dependents, policy) {
        (Some(o), _) => o,
        (None, Some(p)) => p == "Orphan",
        (None, None) => current
            .iter()
            .find(|f| *f == ORPHAN_FINALIZER || *f == FOREGROUND_FINALIZER)
            .is_some_and(|f| f == ORPHAN_FINALIZER),
    };
    let foreground = match (opts.orphan_dependents, policy) {
        (Some(_), _) => false,
        (None, Some(p)) => p == "Foreground",
        (None, None) => has(FOREGROUND_FINALIZER),
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .cloned()
        .collect();
    if orphan {
        out.push(ORPHAN_FINALIZER.into());
    }
    if foreground {
        out.push(FOREGROUND_FINALIZER.into());
    }
    let same = out.len() == current.len() && out.iter().all(|f| has(f));
    (!same).then_some(out)
}

/// A failed delete precondition: upstream names the object by its kind, not its resource
/// (apiserver pkg/registry/rest/delete.go `BeforeDelete`), so `details.kind` is `ConfigMap`.
fn precondition_conflict(desc: &ResourceDesc, name: &str, reason: String) -> ApiError {
    ApiError::Conflict {
        group: desc.group.into(),
        resource: desc.kind.into(),
        name: name.into(),
        reason,
    }
}

impl Store {
    /// Delete an object (apiserver store.go `Delete` with finalizer handling).
    pub fn delete(
        &self,
        desc: &'static ResourceDesc,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let mut inner = self.lock();
        let ns = namespace_of(desc, ns);
        let old = inner.get(desc, &ns, name)?;
        let uid = meta_str(&old, "uid").unwrap_or("");
        let rv = meta_str(&old, "resourceVersion").unwrap_or("");
        if let Some(want) = opts.precondition_uid.as_deref().filter(|s| !s.is_empty())
            && want != uid
        {
            return Err(precondition_conflict(
                desc,
                name,
                format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                ),
            ));
        }
        if let Some(want) = opts
            .precondition_resource_version
            .as_deref()
            .filter(|s| !s.is_empty())
            && want != rv
        {
            return Err(precondition_conflict(
                desc,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                ),
            ));
        }
        let key = (ns.clone(), name.to_string());
        let deleting = meta_nonempty(&old, "deletionTimestamp").is_some();
        // Graceful deletion (pods; apiserver pkg/registry/rest/delete.go `BeforeDelete`):
        // the first DELETE sets deletionTimestamp = now + grace period; a later one may
        // only shorten a pending grace period, and otherwise changes nothing.
        let mut graceful: Option<(String, i64)> = None;
        if graceful_delete(desc) {
            let current = old
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .filter(|g| *g > 0);
            match (deleting, current) {
                (false, _) => {
                    let period = pod_grace_period(&old, opts);
                    graceful = Some((shift_timestamp(&now_rfc3339(), period), period));
                }
                (true, None) => {}
                (true, Some(current)) => {
                    let shorter = opts
                        .grace_period_seconds
                        .map(|p| if p < 0 { 1 } else { p })
                        .filter(|p| *p < current);
                    let Some(period) = shorter else {
                        return Ok(DeleteOutcome::Pending(old.value().clone()));
                    };
                    let ts = meta_str(&old, "deletionTimestamp").unwrap_or("");
                    graceful = Some((shift_timestamp(ts, period - current), period));
                }
            }
        }
        // With finalizers left (those of the object, or the garbage collector's that the
        // propagation policy adds) or a grace period running, the object is only marked
        // (store.go `updateForGracefulDeletionAndFinalizers`, `markAsDeleting`); a graceful
        // delete with no grace period left is marked, then deleted; otherwise it goes.
        let gc = gc_finalizers(desc, &old, opts);
        let pending = gc.as_ref().map_or_else(|| finalizers(&old), Clone::clone);
        let mut current = old.clone();
        if !pending.is_empty() || graceful.is_some() {
            if deleting && gc.is_none() && graceful.is_none() {
                return Ok(DeleteOutcome::Pending(old.value().clone()));
            }
            let mut marked = old.value().clone();
            if gc.is_some() {
                set_meta(&mut marked, "finalizers", Some(json!(pending)));
            }
            let bump = |marked: &mut Value| {
                if let Some(g) = marked
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    && g > 0
                {
                    set_meta(marked, "generation", Some(json!(g + 1)));
                }
            };
            match &graceful {
                Some((ts, period)) => {
                    if !deleting {
                        bump(&mut marked);
                    }
                    set_meta(&mut marked, "deletionTimestamp", Some(json!(ts)));
                    set_meta(
                        &mut marked,
                        "deletionGracePeriodSeconds",
                        Some(json!(period)),
                    );
                }
                None => {
                    if !deleting {
                        bump(&mut marked);
                        set_meta(&mut marked, "deletionTimestamp", Some(json!(now_rfc3339())));
                    }
                    set_meta(&mut marked, "deletionGracePeriodSeconds", Some(json!(0)));
                }
            }
            let stays = !pending.is_empty() || graceful.as_ref().is_some_and(|(_, p)| *p > 0);
            if opts.dry_run {
                return Ok(if stays {
                    DeleteOutcome::Pending(marked)
                } else {
                    DeleteOutcome::Deleted(marked)
                });
            }
            let marked = self.write_object(
                &mut inner,
                EventKind::Modified,
                desc,
                key.clone(),
                marked,
                Some(old),
            );
            if stays {
                return Ok(DeleteOutcome::Pending(marked.value().clone()));
            }
            current = marked;
        }
        let old = current;
        if opts.dry_run {
            return Ok(DeleteOutcome::Deleted(old.value().clone()));
        }
        let last = old.value().clone();
        let last = self.write_object(&mut inner, EventKind::Deleted, desc, key, last, Some(old));
        Ok(DeleteOutcome::Deleted(last.value().clone()))
    }
}
