//! Create (POST), update (PUT), patch and server-side apply of resources.
//!
//! Why this exists: the write verbs decode a body, check its fields against the schema
//! under the request's field validation, and hand the object to the store; the checks a
//! typed decoder would make upstream live here.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::call::Call;
use super::params::{Params, field_validation, validate_dry_run, validate_patch_options};
use super::request::{read_body, read_json};
use super::response::{json_response, with_warnings};
use crate::apply;
use crate::error::{ApiError, Cause};
use crate::openapi::{self, FieldValidation};
use crate::patch::{self, PatchType};
use crate::resources::ResourceDesc;
use crate::store::{FieldManagement, Store, WriteOptions};
use crate::strategy::Subresource;

/// POST to a collection: create the object of the body (201).
pub(super) async fn create(call: &Call<'_>, body: Body) -> Result<Response, ApiError> {
    let (obj, opts, warnings) = read_object(call, body, "CreateOptions").await?;
    let created = call.state.store.create(call.desc, call.ns, obj, opts)?;
    Ok(with_warnings(
        json_response(StatusCode::CREATED, &created),
        &warnings,
    ))
}

/// PUT of an object: replace it with the object of the body (see [`put`]).
pub(super) async fn update(call: &Call<'_>, name: &str, body: Body) -> Result<Response, ApiError> {
    let (obj, opts, warnings) = read_object(call, body, "UpdateOptions").await?;
    let resp = put(
        &call.state.store,
        call.desc,
        call.ns,
        name,
        call.sub,
        obj,
        opts,
    )?;
    Ok(with_warnings(resp, &warnings))
}

/// The object body of a create or update, decoded and checked as upstream's handlers do
/// it: the verb's options (`options_kind`) validated, the body read under the field
/// validation asked for, then its fields checked against the schema. Returns the object,
/// the write options and the warnings to send.
async fn read_object(
    call: &Call<'_>,
    body: Body,
    options_kind: &str,
) -> Result<(Value, WriteOptions, Vec<String>), ApiError> {
    let (desc, headers, params) = (call.desc, call.headers, call.params);
    validate_dry_run(params, options_kind)?;
    let opts = params.update_options(headers)?;
    let validation = field_validation(params, options_kind)?;
    let strict = validation == FieldValidation::Strict;
    let mut obj = read_json(desc, headers, body, call.state.max_body_bytes, strict).await?;
    crate::validation::decode(desc, &obj)?;
    let warnings = check_fields(desc, &mut obj, validation)?;
    Ok((obj, opts, warnings))
}

/// PATCH of an object: a merge, JSON or strategic merge patch applied to the live object
/// under the store's lock, or server-side apply ([`server_side_apply`]).
pub(super) async fn patch(call: &Call<'_>, name: &str, body: Body) -> Result<Response, ApiError> {
    let Call {
        state,
        desc,
        ns,
        sub,
        headers,
        params,
    } = *call;
    let store = &state.store;
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
    let patched =
        store.patch(
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
            crate::meta::set_name_from_url(&mut obj, name)?;
            Ok(json_response(
                StatusCode::CREATED,
                &store.create(desc, ns, obj, opts)?,
            ))
        }
        Ok(updated) => Ok(json_response(StatusCode::OK, &updated)),
        Err(err) => Err(err),
    }
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
