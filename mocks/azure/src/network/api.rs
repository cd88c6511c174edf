//! Network's ARM surface, one generic handler for every type: GET one, list (paged),
//! PUT (create or replace, asynchronous), DELETE (asynchronous; 204 when absent), PATCH
//! of `tags`.
//!
//! Answers follow real ARM (azure-sdk-for-go `sdk/resourcemanager/network/armnetwork`
//! fakes and recordings; cloud-provider-azure `pkg/azclient/*/testdata` cassettes):
//! PUT -> 201 (created) or 200 (replaced) with the stored body in
//! `provisioningState: Updating` and `Azure-AsyncOperation`; DELETE -> 202 with
//! `Azure-AsyncOperation` and `Location`; a write while an operation is in progress ->
//! 409 `AnotherOperationInProgress`; a stale `If-Match` -> 412 `PreconditionFailed`.

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::Shared;
use crate::arm::path::{self, ArmPath, TypeInfo};
use crate::arm::router::{ArmRequest, async_headers, method_not_allowed};
use crate::arm::{ArmError, new_etag};

/// ARM's naming rule for these resources: 1–80 of letters, digits, `.`, `_`, `-`,
/// starting with a letter or digit and not ending with `.` or `-`.
pub fn valid_name(name: &str) -> bool {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    !name.is_empty()
        && name.len() <= 80
        && ok_chars
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && !name.ends_with('.')
        && !name.ends_with('-')
}

pub fn handle(s: &Shared, info: &'static TypeInfo, req: &ArmRequest) -> Result<Response, ArmError> {
    let ArmPath::Resource { types, rg, .. } = &req.path else {
        return Err(ArmError::bad_request("InvalidRequestUri", "Not a resource path."));
    };
    let names: Vec<&str> = types.iter().filter_map(|(_, n)| n.as_deref()).collect();
    let rg = rg.clone();
    // A child's parent must exist (for lists too).
    if let Some((parent_ty, _)) = info.parent {
        let parent_info = path::type_info(parent_ty).expect("known");
        let parent_id = s.cloud().id(parent_ty, &names[..1]);
        if s.cloud().lookup(&path::resource_key(&parent_id)).is_none() {
            return Err(ArmError::not_found(parent_info.arm_type, names[0], &rg));
        }
    }
    let expected = types.len();
    if names.len() + 1 == expected {
        // A list.
        if req.method != Method::GET {
            return Err(method_not_allowed(&req.method));
        }
        return list(s, info, &names, req);
    }
    let name = *names.last().unwrap_or(&"");
    let id = s.cloud().id(info.key, &names);
    let key = path::resource_key(&id);
    let namespace = info.namespace;
    match req.method.clone() {
        Method::GET => {
            let mut cloud = s.cloud();
            if let Some(op) = cloud.pending.get(&key).cloned() {
                // A client read counts for `reads` lifecycles.
                cloud.observe_op(&op, true);
            }
            let stored = cloud
                .lookup(&key)
                .cloned()
                .ok_or_else(|| ArmError::not_found(info.arm_type, name, &rg))?;
            let body = crate::network::state::render(&cloud, info, &stored);
            Ok(axum::Json(body).into_response())
        }
        Method::PUT => {
            if !valid_name(name) {
                return Err(ArmError::bad_request(
                    "InvalidResourceName",
                    format!("Resource name {name} is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'."),
                ));
            }
            let body = req.json()?;
            let mut cloud = s.cloud();
            let (created, stored, op) = cloud.put(info, &id, name, body, &req.headers)?;
            let rendered = crate::network::state::render(&cloud, info, &stored);
            drop(cloud);
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            let mut response = (status, axum::Json(rendered)).into_response();
            async_headers(s, response.headers_mut(), namespace, &op, &req.api_version, false);
            Ok(response)
        }
        Method::DELETE => {
            let op = s.cloud().delete(info, &id, name, &req.headers)?;
            match op {
                None => Ok(StatusCode::NO_CONTENT.into_response()),
                Some(op) => {
                    let mut response = StatusCode::ACCEPTED.into_response();
                    async_headers(s, response.headers_mut(), namespace, &op, &req.api_version, true);
                    Ok(response)
                }
            }
        }
        Method::PATCH if info.parent.is_none() => patch_tags(s, info, &key, name, &rg, req),
        other => Err(method_not_allowed(&other)),
    }
}

fn list(s: &Shared, info: &'static TypeInfo, names: &[&str], req: &ArmRequest) -> Result<Response, ArmError> {
    let cloud = s.cloud();
    let items: Vec<Value> = match info.parent {
        None => cloud
            .docs_of(info)
            .into_iter()
            .map(|(_, d)| crate::network::state::render(&cloud, info, &d.value))
            .collect(),
        Some((parent_ty, coll)) => {
            let parent_id = cloud.id(parent_ty, &names[..1]);
            cloud
                .lookup(&path::resource_key(&parent_id))
                .and_then(|p| p.get("properties"))
                .and_then(|p| p.get(coll))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        }
    };
    let page = crate::arm::page(
        items,
        &req.query,
        &format!("{}{}", s.base, req.raw_path),
        s.config.page_size,
    )?;
    Ok(axum::Json(page).into_response())
}

/// `PATCH` with `{"tags": {...}}`: replaces the tags at once (ARM's `UpdateTags`).
fn patch_tags(
    s: &Shared,
    info: &'static TypeInfo,
    key: &str,
    name: &str,
    rg: &str,
    req: &ArmRequest,
) -> Result<Response, ArmError> {
    let body = req.json()?;
    let tags = match body.get("tags") {
        Some(Value::Object(t)) if t.values().all(Value::is_string) => Value::Object(t.clone()),
        _ => {
            return Err(ArmError::bad_request(
                "InvalidRequestContent",
                "A PATCH takes {\"tags\": {string: string}}.",
            ));
        }
    };
    let mut cloud = s.cloud();
    if cloud.pending.contains_key(key) {
        return Err(ArmError::new(
            StatusCode::CONFLICT,
            "AnotherOperationInProgress",
            format!("Another operation on resource {name} is in progress."),
        ));
    }
    let etag = cloud
        .lookup(key)
        .and_then(|v| v.get("etag"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(etag) = etag else {
        return Err(ArmError::not_found(info.arm_type, name, rg));
    };
    crate::arm::check_preconditions(&req.headers, Some(&etag))?;
    let doc = cloud.docs.get_mut(key).expect("looked up");
    doc.value["tags"] = tags.clone();
    doc.value["etag"] = Value::String(new_etag());
    if let Some(served) = doc.served.as_mut() {
        served["tags"] = tags;
    }
    let stored = doc.value.clone();
    let body = crate::network::state::render(&cloud, info, &stored);
    Ok(axum::Json(body).into_response())
}
