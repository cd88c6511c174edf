//! Query parameters and the options they (or a DeleteOptions body) make: dry run, field
//! validation, field manager, patch and delete options, list selectors.
//!
//! Why this exists: upstream validates each verb's options object (`CreateOptions`,
//! `PatchOptions`, `DeleteOptions`, `ListOptions`) before the verb runs, with 422s on the
//! options kind; those rules are shared by the read and write handlers.

use axum::extract::Query;
use axum::http::{HeaderMap, Uri, header};
use serde_json::Value;

use super::path::parse_bool;
use super::request::{header_string, media_type};
use crate::apply;
use crate::error::{ApiError, Cause};
use crate::openapi::FieldValidation;
use crate::patch::PatchType;
use crate::protobuf;
use crate::resources::ResourceDesc;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, FieldManagement, Filter, WriteOptions};

/// Query parameters, in order.
pub(super) struct Params(Vec<(String, String)>);

impl Params {
    pub(super) fn parse(uri: &Uri) -> Result<Params, ApiError> {
        Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map(|q| Params(q.0))
            .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn get_nonempty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get_nonempty(key) {
            None => Ok(None),
            Some(v) => parse_bool(v)
                .map(Some)
                .ok_or_else(|| ApiError::BadRequest(format!("invalid boolean for {key}: {v:?}"))),
        }
    }

    pub(super) fn write_options(&self) -> Result<WriteOptions, ApiError> {
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
    pub(super) fn update_options(&self, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
        let user_agent = header_string(headers, header::USER_AGENT);
        let manager = apply::default_manager(self.get("fieldManager"), &user_agent);
        Ok(WriteOptions {
            fields: FieldManagement::Update(manager),
            ..self.write_options()?
        })
    }
}

/// `dryRun` takes only `All`: anything else makes the request's options invalid, a 422
/// on the options kind of the verb (apimachinery pkg/apis/meta/v1/validation
/// `ValidateDryRun`, called by apiserver pkg/endpoints/handlers for each verb).
pub(super) fn validate_dry_run(params: &Params, options_kind: &str) -> Result<(), ApiError> {
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
    Err(options_invalid(
        options_kind,
        vec![Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: [{}]: supported values: \"All\"",
                rendered.join(" ")
            ),
            field: "dryRun".into(),
        }],
    ))
}

/// The 422 for an options object of `kind` (`CreateOptions`, `PatchOptions`,
/// `DeleteOptions`, `ListOptions`, ...) that does not validate, in the `meta.k8s.io`
/// group with no name (apimachinery pkg/apis/meta/v1/validation; for the ListOptions
/// rules shared by list and watch, pkg/apis/meta/internalversion/validation/validation.go).
pub(super) fn options_invalid(kind: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: kind.into(),
        name: String::new(),
        causes,
    }
}

/// The `fieldValidation` query parameter; an unsupported value is a 422 on the
/// options kind (apimachinery pkg/apis/meta/v1/validation `ValidateFieldValidation`).
pub(super) fn field_validation(
    params: &Params,
    options_kind: &str,
) -> Result<FieldValidation, ApiError> {
    let raw = params.get("fieldValidation").unwrap_or("");
    FieldValidation::parse(raw).ok_or_else(|| {
        options_invalid(
            options_kind,
            vec![Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {raw:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
                field: "fieldValidation".into(),
            }],
        )
    })
}

/// PatchOptions validation (apimachinery pkg/apis/meta/v1/validation/validation.go
/// `ValidatePatchOptions`): apply needs a field manager, `force` is for apply only.
pub(super) fn validate_patch_options(
    params: &Params,
    patch_type: PatchType,
) -> Result<(), ApiError> {
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
    Err(options_invalid("PatchOptions", causes))
}

pub(super) fn delete_options(
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
    Err(options_invalid("DeleteOptions", causes))
}

pub(super) fn build_filter(
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
