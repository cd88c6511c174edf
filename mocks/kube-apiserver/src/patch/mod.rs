//! PATCH engines of the embedded API server.
//!
//! Why this exists: real clients patch far more often than they update. kube-rs sends merge and
//! JSON patches (its finalizer helper depends on a Go quirk of JSON patch `test`), kubectl and
//! every Go CCM send strategic merge patches with directives and per-type merge keys
//! (`nodeutil.PatchNodeStatus` relies on the list-level `{"$patch":"replace"}` element). This
//! module applies a patch document to the JSON of the stored object and returns the new JSON;
//! storing, preconditions and status/spec isolation are the caller's job.
//!
//! Error classes follow kube-apiserver (apiserver pkg/endpoints/handlers/patch.go):
//! - a patch document that cannot be decoded is a 400 `BadRequest`;
//! - a JSON patch that decodes but cannot be applied (failed `test`, missing path, bad index) is
//!   a 422 `Invalid` built by `NewGenericServerResponse`, whose Status message is the generic
//!   "the server rejected our request due to an error in our request" (the detail is dropped
//!   upstream; we keep it in the error's `Display` for logs);
//! - strategic merge patch errors are split by `interpretStrategicMergePatchError`.
//!
//! Submodules: [`merge`] (RFC 7386 as evanphx/json-patch does it), [`json`] (RFC 6902 with
//! evanphx/json-patch v4 semantics) and [`strategic`] (apimachinery pkg/util/strategicpatch),
//! which reads the per-kind list strategies from [`crate::schema`].

mod error;
pub mod json;
pub mod merge;
pub mod strategic;

use serde_json::Value;

pub use error::{GENERIC_422_MESSAGE, PatchError};

/// The four PATCH content types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply, handled by [`crate::apply`],
    /// not by [`apply_patch`]).
    Apply,
}

impl PatchType {
    /// From a Content-Type header value; parameters after ';' are ignored, case-insensitive.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let media = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// The canonical Content-Type string (for logs and the 415 message's list of types).
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Apply `patch` (raw request body) of `patch_type` to `target` (the JSON of the current object
/// of kind `kind`, e.g. "Node") and return the patched JSON. The result is always a JSON object.
///
/// Left to the caller, as upstream does after patching: a `metadata.resourceVersion` in the
/// result that differs from the stored one is a 409 Conflict (the taint helpers in
/// cloud-provider node/helpers/taints.go rely on it), and JSON patch paths see the object as
/// served, so empty lists such as `metadata.finalizers: []` should be omitted when stored
/// (Go's `omitempty`) or kube-runtime's `test /metadata/finalizers null` fails.
pub fn apply_patch(
    kind: &str,
    target: &Value,
    patch_type: PatchType,
    patch: &[u8],
) -> Result<Value, PatchError> {
    let patched = match patch_type {
        PatchType::Merge => merge::apply(target, patch)?,
        PatchType::Json => json::apply(target, patch)?,
        PatchType::Strategic => strategic::apply(kind, target, patch)?,
        PatchType::Apply => {
            return Err(PatchError::Unsupported(
                "server-side apply (application/apply-patch+yaml) is not a patch engine; use crate::apply"
                    .to_string(),
            ));
        }
    };
    if !patched.is_object() {
        // Upstream decodes the result into the typed object and fails with a 422 Invalid on
        // `patch` (apiserver pkg/endpoints/handlers/patch.go applyPatchToCurrentObject).
        return Err(PatchError::Invalid(format!(
            "patch: Invalid value: {}: the patched document is not a JSON object",
            patched
        )));
    }
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        let cases = [
            ("application/merge-patch+json", Some(PatchType::Merge)),
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::Strategic),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            ("Application/JSON-Patch+JSON", Some(PatchType::Json)),
            (
                " application/strategic-merge-patch+json ;x=y",
                Some(PatchType::Strategic),
            ),
            ("application/json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
        }
        for t in [
            PatchType::Merge,
            PatchType::Json,
            PatchType::Strategic,
            PatchType::Apply,
        ] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
    }

    #[test]
    fn apply_is_unsupported() {
        let err = apply_patch("Node", &json!({}), PatchType::Apply, b"{}").unwrap_err();
        assert!(matches!(err, PatchError::Unsupported(_)));
        assert_eq!(err.code(), 415);
        assert_eq!(err.reason(), "UnsupportedMediaType");
    }

    #[test]
    fn error_status_mapping() {
        let cases = [
            (
                PatchError::Malformed("bad".into()),
                400,
                "BadRequest",
                "bad",
            ),
            (
                PatchError::TestFailed("t".into()),
                422,
                "Invalid",
                GENERIC_422_MESSAGE,
            ),
            (
                PatchError::Invalid("i".into()),
                422,
                "Invalid",
                GENERIC_422_MESSAGE,
            ),
        ];
        for (err, code, reason, msg) in cases {
            assert_eq!(err.code(), code);
            assert_eq!(err.reason(), reason);
            assert_eq!(err.status_message(), msg);
        }
    }

    #[test]
    fn result_must_be_an_object() {
        let target = json!({"a": 1});
        let err = apply_patch(
            "Node",
            &target,
            PatchType::Json,
            br#"[{"op":"replace","path":"","value":[1]}]"#,
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    }

    /// Odd inputs give errors or results, never panics.
    #[test]
    fn odd_inputs_do_not_panic() {
        let target = json!({"metadata": {"name": "n", "finalizers": ["a"], "ownerReferences": [{"uid": "1"}]},
            "spec": {"taints": [{"key": "k"}], "podCIDRs": ["x"]},
            "status": {"addresses": [{"type": "A"}, {"type": "A"}], "conditions": [{"type": "R"}, "junk"]}});
        let bodies = [
            json!({"status": {"conditions": [{"type": "R", "x": 1}]}}),
            json!({"status": {"addresses": [{"$patch": "delete"}]}}),
            json!({"status": {"addresses": [null]}}),
            json!({"status": {"addresses": [{"type": null}]}}),
            json!({"status": {"$setElementOrder/addresses": [1, 2]}}),
            json!({"status": {"$setElementOrder/addresses": [{"type": "A"}], "addresses": "x"}}),
            json!({"metadata": {"$setElementOrder/finalizers": [null], "finalizers": [null]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
            json!({"metadata": {"$deleteFromPrimitiveList/ownerReferences": [{"uid": "1"}]}}),
            json!({"metadata": {"$retainKeys": [1, null], "name": "x"}}),
            json!({"$patch": 5}),
            json!({"spec": {"podCIDRs": [{"a": 1}]}}),
            json!({"spec": {"podCIDRs": [[1], [2]]}}),
            json!([{"op": "add", "path": "/status/addresses/99999999999999999999", "value": 1}]),
            json!([{"op": "move", "from": "/metadata", "path": "/metadata/x"}]),
            json!([{"op": "copy", "from": "", "path": "/a"}]),
            json!([{"op": "test", "path": "/-"}]),
            json!([{"op": "remove", "path": "/status/addresses/-"}]),
            json!([{"op": "replace", "path": "/status/addresses/-9223372036854775808", "value": 1}]),
        ];
        for body in bodies {
            let raw = body.to_string();
            for t in [PatchType::Merge, PatchType::Json, PatchType::Strategic] {
                let _ = apply_patch("Node", &target, t, raw.as_bytes());
            }
        }
    }

    #[test]
    fn dispatches_each_type() {
        let target = json!({"metadata": {"name": "n1", "finalizers": ["a"]}});
        let merged = apply_patch(
            "Node",
            &target,
            PatchType::Merge,
            br#"{"metadata":{"finalizers":["b"]}}"#,
        )
        .unwrap();
        assert_eq!(merged["metadata"]["finalizers"], json!(["b"]));
        let smp = apply_patch(
            "Node",
            &target,
            PatchType::Strategic,
            br#"{"metadata":{"finalizers":["b"]}}"#,
        )
        .unwrap();
        // Upstream ordering: patch items not in the live list come before server-only items
        // (strategicpatch mergeSortedSlice).
        assert_eq!(smp["metadata"]["finalizers"], json!(["b", "a"]));
        let jp = apply_patch(
            "Node",
            &target,
            PatchType::Json,
            br#"[{"op":"add","path":"/metadata/finalizers/-","value":"b"}]"#,
        )
        .unwrap();
        assert_eq!(jp["metadata"]["finalizers"], json!(["a", "b"]));
    }
}
