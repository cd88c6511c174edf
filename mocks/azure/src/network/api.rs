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
use crate::arm::request::{ArmRequest, async_headers, method_not_allowed};
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
        return Err(ArmError::bad_request(
            "InvalidRequestUri",
            "Not a resource path.",
        ));
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
                    format!(
                        "Resource name {name} is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'."
                    ),
                ));
            }
            let body = req.json()?;
            let mut cloud = s.cloud();
            let (created, stored, op) = cloud.put(
                info,
                &id,
                name,
                body,
                &req.headers,
                crate::network::state::prepare,
            )?;
            let rendered = crate::network::state::render(&cloud, info, &stored);
            drop(cloud);
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let mut response = (status, axum::Json(rendered)).into_response();
            async_headers(
                s,
                response.headers_mut(),
                namespace,
                &op,
                &req.api_version,
                false,
            );
            Ok(response)
        }
        Method::DELETE => {
            let op = s.cloud().delete(
                info,
                &id,
                name,
                &req.headers,
                crate::network::state::check_delete,
            )?;
            match op {
                None => Ok(StatusCode::NO_CONTENT.into_response()),
                Some(op) => {
                    let mut response = StatusCode::ACCEPTED.into_response();
                    async_headers(
                        s,
                        response.headers_mut(),
                        namespace,
                        &op,
                        &req.api_version,
                        true,
                    );
                    Ok(response)
                }
            }
        }
        Method::PATCH if info.parent.is_none() => patch_tags(s, info, &key, name, &rg, req),
        other => Err(method_not_allowed(&other)),
    }
}

fn list(
    s: &Shared,
    info: &'static TypeInfo,
    names: &[&str],
    req: &ArmRequest,
) -> Result<Response, ArmError> {
    let cloud = s.cloud();
    let items: Vec<Value> = match info.parent {
        None => {
            let refs = crate::network::state::BackRefs::of(&cloud);
            cloud
                .docs_of(info)
                .into_iter()
                .map(|(_, d)| refs.render(info, &d.value))
                .collect()
        }
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

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use crate::testing::{BASE, Mock};
    use crate::{LifecycleMode, LifecycleTarget};

    fn pip_path(m: &Mock, name: &str) -> String {
        m.rg_path(&format!("Microsoft.Network/publicIPAddresses/{name}"))
    }

    fn lb_path(m: &Mock, name: &str) -> String {
        m.rg_path(&format!("Microsoft.Network/loadBalancers/{name}"))
    }

    /// Polls an Azure-AsyncOperation URL until it is terminal; returns the statuses seen.
    async fn poll(m: &Mock, t: &str, url: &str) -> Vec<String> {
        let path = url.strip_prefix(BASE).expect("same host");
        let mut seen = Vec::new();
        for _ in 0..20 {
            let r = m.arm("GET", path, t, None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            let s = r.body["status"].as_str().expect("status").to_string();
            seen.push(s.clone());
            if s != "InProgress" {
                return seen;
            }
        }
        panic!("never terminal: {seen:?}");
    }

    fn lb_body(m: &Mock, lb: &str, pip_id: &str) -> Value {
        let id = m.id(&format!("Microsoft.Network/loadBalancers/{lb}"));
        json!({
            "location": "eastus",
            "sku": {"name": "Standard"},
            "properties": {
                "frontendIPConfigurations": [{"name": "fe1", "properties": {"publicIPAddress": {"id": pip_id}}}],
                "backendAddressPools": [{"name": lb}],
                "probes": [{"name": "p1", "properties": {"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5}}],
                "loadBalancingRules": [{"name": "r1", "properties": {
                    "protocol": "Tcp", "frontendPort": 80, "backendPort": 80, "enableFloatingIP": true,
                    "frontendIPConfiguration": {"id": format!("{id}/frontendIPConfigurations/fe1")},
                    "backendAddressPool": {"id": format!("{id}/backendAddressPools/{lb}")},
                    "probe": {"id": format!("{id}/probes/p1")}}}]
            }
        })
    }

    async fn make_pip(m: &Mock, t: &str, name: &str) -> Value {
        let r = m
            .arm(
                "PUT",
                &pip_path(m, name),
                t,
                Some(json!({"location": "eastus", "sku": {"name": "Standard"},
            "tags": {"k8s-azure-service": "default/web"},
            "properties": {"publicIPAllocationMethod": "Static"}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let op = r
            .header("azure-asyncoperation")
            .expect("async op")
            .to_string();
        assert_eq!(
            poll(m, t, &op).await.last().map(String::as_str),
            Some("Succeeded")
        );
        m.arm("GET", &pip_path(m, name), t, None).await.body
    }

    #[tokio::test]
    async fn public_ip_put_is_async_and_allocates() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "pip-a"),
                &t,
                Some(json!({"location": "eastus", "properties": {}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert_eq!(r.body["properties"]["provisioningState"], "Updating");
        assert_eq!(r.body["properties"]["ipAddress"], "198.18.0.10");
        assert!(
            r.body["etag"]
                .as_str()
                .is_some_and(|e| e.starts_with("W/\""))
        );
        let aso = r.header("azure-asyncoperation").expect("header");
        assert!(aso.starts_with(&format!(
            "{BASE}/subscriptions/{}/providers/Microsoft.Network/locations/eastus/operations/",
            m.shared.config.subscription_id
        )));
        assert!(aso.ends_with("api-version=2025-05-01"));
        let got = m.arm("GET", &pip_path(&m, "PIP-A"), &t, None).await;
        assert_eq!(got.body["properties"]["provisioningState"], "Succeeded");
        // An update keeps the address, answers 200 and changes the etag.
        let etag = got.body["etag"].clone();
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "pip-a"),
                &t,
                Some(json!({"location": "eastus", "tags": {"a": "b"}, "properties": {}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["properties"]["ipAddress"], "198.18.0.10");
        assert_ne!(r.body["etag"], etag);
        let second = make_pip(&m, &t, "pip-b").await;
        assert_eq!(second["properties"]["ipAddress"], "198.18.0.11");
        let list = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Network/publicIPAddresses"),
                &t,
                None,
            )
            .await;
        assert_eq!(list.body["value"].as_array().map(Vec::len), Some(2));
    }

    #[tokio::test]
    async fn bad_requests_answer_in_the_arm_envelope() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let auth = format!("Bearer {t}");
        let uri = format!("{}?api-version=2025-05-01", pip_path(&m, "x"));
        let r = m
            .send("PUT", &uri, &[("authorization", &auth)], "{not json")
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("InvalidRequestContent"))
        );
        let r = m
            .send("PUT", &uri, &[("authorization", &auth)], "[1,2]")
            .await;
        assert_eq!(r.body["error"]["code"], "InvalidRequestContent");
        let big = format!(
            "{{\"location\":\"eastus\",\"tags\":{{\"x\":\"{}\"}}}}",
            "a".repeat(crate::BODY_LIMIT + 1)
        );
        let r = m.send("PUT", &uri, &[("authorization", &auth)], big).await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("RequestEntityTooLarge"))
        );
        let r = m
            .send("GET", &pip_path(&m, "x"), &[("authorization", &auth)], "")
            .await;
        assert_eq!(r.body["error"]["code"], "MissingApiVersionParameter");
        let r = m
            .send(
                "GET",
                &format!("{}?api-version=latest", pip_path(&m, "x")),
                &[("authorization", &auth)],
                "",
            )
            .await;
        assert_eq!(r.body["error"]["code"], "InvalidApiVersionParameter");
        let r = m
            .arm("PUT", &pip_path(&m, "-bad-"), &t, Some(json!({})))
            .await;
        assert_eq!(r.body["error"]["code"], "InvalidResourceName");
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "x"),
                &t,
                Some(json!({"location": "westus"})),
            )
            .await;
        assert_eq!(
            r.body["error"]["code"],
            "LocationNotAvailableForResourceType"
        );
        let r = m
            .arm("GET", &m.rg_path("Microsoft.Network/widgets"), &t, None)
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("InvalidResourceType"))
        );
        let r = m.arm("POST", &pip_path(&m, "x"), &t, None).await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
        let r = m.send("GET", "/nowhere", &[], "").await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("NotFound"))
        );
    }

    #[tokio::test]
    async fn etags_guard_writes() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let pip = make_pip(&m, &t, "pip").await;
        let lb = lb_path(&m, "kubernetes");
        let body = lb_body(&m, "kubernetes", pip["id"].as_str().expect("id"));
        let r = m.arm("PUT", &lb, &t, Some(body.clone())).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        // Load balancers are done within the PUT (real ARM answers Succeeded), still
        // with an operation to poll.
        assert_eq!(r.body["properties"]["provisioningState"], "Succeeded");
        assert!(r.header("azure-asyncoperation").is_some());
        assert_eq!(
            r.body["properties"]["frontendIPConfigurations"][0]["type"],
            "Microsoft.Network/loadBalancers/frontendIPConfigurations"
        );
        let etag = r.body["etag"].as_str().expect("etag").to_string();
        let r = m
            .arm_with(
                "PUT",
                &lb,
                &t,
                Some(body.clone()),
                &[("if-match", "W/\"stale\"")],
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::PRECONDITION_FAILED, Some("PreconditionFailed"))
        );
        assert_eq!(
            r.body["error"]["details"][0]["code"],
            "PreconditionFailedEtagMismatch"
        );
        let r = m
            .arm_with(
                "PUT",
                &lb,
                &t,
                Some(body.clone()),
                &[("if-none-match", "*")],
            )
            .await;
        assert_eq!(r.status, StatusCode::PRECONDITION_FAILED);
        let r = m
            .arm_with("PUT", &lb, &t, Some(body.clone()), &[("if-match", &etag)])
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_ne!(r.body["etag"].as_str(), Some(etag.as_str()));
        let r = m
            .arm_with("DELETE", &lb, &t, None, &[("if-match", &etag)])
            .await;
        assert_eq!(r.status, StatusCode::PRECONDITION_FAILED);
        let r = m
            .arm_with(
                "PUT",
                &lb_path(&m, "new"),
                &t,
                Some(body),
                &[("if-match", "*")],
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::PRECONDITION_FAILED,
            "If-Match on nothing"
        );
    }

    #[tokio::test]
    async fn writes_while_in_progress_conflict_and_change_nothing() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Type("publicipaddresses".into()),
                Some(LifecycleMode::Stuck),
            )
            .expect("mode");
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "slow"),
                &t,
                Some(json!({"properties": {}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        let op = r.header("azure-asyncoperation").expect("op").to_string();
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "slow"),
                &t,
                Some(json!({"tags": {"changed": "yes"}, "properties": {}})),
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::CONFLICT, Some("AnotherOperationInProgress"))
        );
        let r = m.arm("DELETE", &pip_path(&m, "slow"), &t, None).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        let got = m.arm("GET", &pip_path(&m, "slow"), &t, None).await;
        assert_eq!(got.body["properties"]["provisioningState"], "Updating");
        assert!(
            got.body.get("tags").is_none(),
            "the refused PUT changed nothing"
        );
        let path = op.strip_prefix(BASE).expect("host");
        assert_eq!(
            m.arm("GET", path, &t, None).await.body["status"],
            "InProgress"
        );
        // Releasing the resource's mode ends its pending operation.
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("slow".into()),
                Some(LifecycleMode::Immediate),
            )
            .expect("release");
        assert_eq!(
            m.arm("GET", path, &t, None).await.body["status"],
            "Succeeded"
        );
        // Reads mode: n polls see InProgress.
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Type("publicipaddresses".into()),
                Some(LifecycleMode::Reads { n: 2 }),
            )
            .expect("mode");
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "reads"),
                &t,
                Some(json!({"properties": {}})),
            )
            .await;
        let op = r.header("azure-asyncoperation").expect("op").to_string();
        // A pending operation tells the client how soon to poll.
        assert_eq!(r.header("retry-after-ms"), Some("100"));
        assert_eq!(
            poll(&m, &t, &op).await,
            vec!["InProgress", "InProgress", "Succeeded"]
        );
        // One its first poll will find ended does not (azcore would wait it out first).
        m.admin()
            .set_lifecycle(LifecycleTarget::Type("publicipaddresses".into()), None)
            .expect("mode");
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "quick"),
                &t,
                Some(json!({"properties": {}})),
            )
            .await;
        assert!(r.header("azure-asyncoperation").is_some());
        assert_eq!(r.header("retry-after-ms"), None);
        assert_eq!(r.header("retry-after"), None);
        // Error mode: the operation fails and the resource says so.
        m.admin()
            .set_lifecycle(
                LifecycleTarget::Resource("broken".into()),
                Some(LifecycleMode::Error),
            )
            .expect("mode");
        let r = m
            .arm(
                "PUT",
                &pip_path(&m, "broken"),
                &t,
                Some(json!({"properties": {}})),
            )
            .await;
        let op = r.header("azure-asyncoperation").expect("op").to_string();
        assert_eq!(poll(&m, &t, &op).await, vec!["Failed"]);
        let got = m.arm("GET", &pip_path(&m, "broken"), &t, None).await;
        assert_eq!(got.body["properties"]["provisioningState"], "Failed");
    }

    #[tokio::test]
    async fn load_balancer_references_pools_and_deletes() {
        let m = Mock::seeded(2);
        let t = m.token().await;
        let lb = lb_path(&m, "kubernetes");
        let missing = m.id("Microsoft.Network/publicIPAddresses/none");
        let r = m
            .arm("PUT", &lb, &t, Some(lb_body(&m, "kubernetes", &missing)))
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("InvalidResourceReference"))
        );
        let pip = make_pip(&m, &t, "kubernetes-a1").await;
        let pip_id = pip["id"].as_str().expect("id").to_string();
        let mut body = lb_body(&m, "kubernetes", &pip_id);
        body["properties"]["loadBalancingRules"][0]["properties"]["probe"]["id"] = json!(format!(
            "{}/probes/nope",
            m.id("Microsoft.Network/loadBalancers/kubernetes")
        ));
        let r = m.arm("PUT", &lb, &t, Some(body)).await;
        assert_eq!(r.body["error"]["code"], "InvalidResourceReference");
        let r = m
            .arm("PUT", &lb, &t, Some(lb_body(&m, "kubernetes", &pip_id)))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let lb_id = r.body["id"].as_str().expect("id").to_string();
        assert_eq!(
            r.body["properties"]["frontendIPConfigurations"][0]["id"],
            format!("{lb_id}/frontendIPConfigurations/fe1")
        );
        // The public IP now says who uses it, and cannot be deleted.
        let got = m.arm("GET", &pip_path(&m, "kubernetes-a1"), &t, None).await;
        assert_eq!(
            got.body["properties"]["ipConfiguration"]["id"],
            format!("{lb_id}/frontendIPConfigurations/fe1")
        );
        let r = m
            .arm("DELETE", &pip_path(&m, "kubernetes-a1"), &t, None)
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("PublicIPAddressInUse"))
        );
        // A VM's NIC joins the pool; the pool shows it.
        let nic_path = m.rg_path("Microsoft.Network/networkInterfaces/node-0-nic");
        let mut nic = m.arm("GET", &nic_path, &t, None).await.body;
        nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] =
            json!([{"id": format!("{lb_id}/backendAddressPools/kubernetes")}]);
        let r = m.arm("PUT", &nic_path, &t, Some(nic.clone())).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(
            r.body["properties"]["virtualMachine"]["id"],
            m.id("Microsoft.Compute/virtualMachines/node-0")
        );
        assert_eq!(
            m.admin().load_balancers()[0].backend_ips,
            vec![m.admin().vm("node-0").expect("vm").private_ips[0].clone()]
        );
        let got = m.arm("GET", &lb, &t, None).await;
        assert_eq!(
            got.body["properties"]["backendAddressPools"][0]["properties"]["backendIPConfigurations"]
                [0]["id"],
            format!(
                "{}/ipConfigurations/ipconfig1",
                m.id("Microsoft.Network/networkInterfaces/node-0-nic")
            )
        );
        nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] =
            json!([{"id": format!("{lb_id}/backendAddressPools/missing")}]);
        let r = m.arm("PUT", &nic_path, &t, Some(nic)).await;
        assert_eq!(r.body["error"]["code"], "InvalidResourceReference");
        // Delete: 202 with both polling headers, then 404; a second delete is 204.
        let r = m.arm("DELETE", &lb, &t, None).await;
        assert_eq!(r.status, StatusCode::ACCEPTED);
        assert!(r.header("azure-asyncoperation").is_some());
        let location = r.header("location").expect("location").to_string();
        let loc = m
            .arm("GET", location.strip_prefix(BASE).expect("host"), &t, None)
            .await;
        assert_eq!(loc.status, StatusCode::NO_CONTENT);
        assert_eq!(
            m.arm("GET", &lb, &t, None).await.status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            m.arm("DELETE", &lb, &t, None).await.status,
            StatusCode::NO_CONTENT
        );
        let r = m
            .arm("DELETE", &pip_path(&m, "kubernetes-a1"), &t, None)
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED);
    }

    #[tokio::test]
    async fn internal_frontends_get_private_addresses() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let subnet = m.id("Microsoft.Network/virtualNetworks/vnet-ccm/subnets/subnet-ccm");
        let r = m.arm("PUT", &lb_path(&m, "kubernetes-internal"), &t, Some(json!({"properties": {
            "frontendIPConfigurations": [{"name": "fe", "properties": {"subnet": {"id": subnet}}}]}}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(
            r.body["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAddress"],
            "127.62.0.10"
        );
        let summary = m.admin().load_balancers();
        assert_eq!(summary[0].frontend_ips, vec!["127.62.0.10".to_string()]);
        assert!(summary[0].internal);
    }

    #[tokio::test]
    async fn routes_are_children_of_the_route_table() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let route = m.rg_path("Microsoft.Network/routeTables/rt-ccm/routes/node-0");
        let r = m
            .arm(
                "PUT",
                &route,
                &t,
                Some(json!({"properties": {"addressPrefix": "10.244.0.0/24",
            "nextHopType": "VirtualAppliance", "nextHopIpAddress": "127.60.0.10"}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["type"], "Microsoft.Network/routeTables/routes");
        let r = m.arm("PUT", &m.rg_path("Microsoft.Network/routeTables/rt-ccm/routes/bad"), &t,
            Some(json!({"properties": {"addressPrefix": "10.0.0.0/24", "nextHopType": "VirtualAppliance"}}))).await;
        assert_eq!(r.body["error"]["code"], "InvalidNextHopIpAddress");
        let rt = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Network/routeTables/rt-ccm"),
                &t,
                None,
            )
            .await;
        assert_eq!(rt.body["properties"]["routes"][0]["name"], "node-0");
        let list = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Network/routeTables/rt-ccm/routes"),
                &t,
                None,
            )
            .await;
        assert_eq!(list.body["value"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            m.admin().route_table_routes(),
            vec![(
                "node-0".into(),
                "10.244.0.0/24".into(),
                "127.60.0.10".into()
            )]
        );
        assert_eq!(m.admin().leaks().by_type["routes"].len(), 1);
        let r = m
            .arm(
                "PUT",
                &m.rg_path("Microsoft.Network/routeTables/nope/routes/x"),
                &t,
                Some(json!({})),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(
            m.arm("DELETE", &route, &t, None).await.status,
            StatusCode::ACCEPTED
        );
        assert!(m.admin().route_table_routes().is_empty());
        assert_eq!(m.admin().leaks().total, 0);
        assert_eq!(
            m.arm("GET", &route, &t, None).await.status,
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn nsg_rules_validate_and_leak_until_removed() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let nsg_path = m.rg_path("Microsoft.Network/networkSecurityGroups/nsg-ccm");
        let mut nsg = m.arm("GET", &nsg_path, &t, None).await.body;
        assert_eq!(
            nsg["properties"]["defaultSecurityRules"][2]["name"],
            "DenyAllInBound"
        );
        let rule = |name: &str, priority: u64| {
            json!({"name": name, "properties": {
            "protocol": "Tcp", "access": "Allow", "direction": "Inbound", "priority": priority,
            "sourceAddressPrefix": "Internet", "sourcePortRange": "*",
            "destinationAddressPrefix": "198.18.0.10", "destinationPortRange": "80"}})
        };
        nsg["properties"]["securityRules"] =
            json!([rule("a1-TCP-80-Internet", 500), rule("dup", 500)]);
        let r = m.arm("PUT", &nsg_path, &t, Some(nsg.clone())).await;
        assert_eq!(r.body["error"]["code"], "SecurityRuleConflict");
        nsg["properties"]["securityRules"] = json!([rule("a1-TCP-80-Internet", 500)]);
        let r = m.arm("PUT", &nsg_path, &t, Some(nsg.clone())).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(m.admin().nsg_rules()[0].name, "a1-TCP-80-Internet");
        assert_eq!(m.admin().leaks().by_type["securityRules"].len(), 1);
        nsg["properties"]["securityRules"] = json!([]);
        assert_eq!(
            m.arm("PUT", &nsg_path, &t, Some(nsg)).await.status,
            StatusCode::OK
        );
        assert_eq!(m.admin().leaks().total, 0);
        let r = m.arm("DELETE", &nsg_path, &t, None).await;
        assert_eq!(
            r.body["error"]["code"],
            "InUseNetworkSecurityGroupCannotBeDeleted"
        );
    }

    #[tokio::test]
    async fn tags_patch_and_leaks_of_load_balancers() {
        let m = Mock::seeded(0);
        let t = m.token().await;
        let pip = make_pip(&m, &t, "p").await;
        let r = m
            .arm(
                "PATCH",
                &pip_path(&m, "p"),
                &t,
                Some(json!({"tags": {"x": "y"}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["tags"], json!({"x": "y"}));
        assert_ne!(r.body["etag"], pip["etag"]);
        let leaks = m.admin().leaks();
        assert_eq!(
            (
                leaks.total,
                leaks.by_type["publicIPAddresses"][0].name.as_str()
            ),
            (1, "p")
        );
        m.admin().reset();
        assert_eq!(m.admin().leaks().total, 0);
        assert_eq!(
            m.arm("GET", &pip_path(&m, "p"), &t, None).await.status,
            StatusCode::NOT_FOUND
        );
    }
}
