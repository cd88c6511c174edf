//! The Azure provider against a small in-process ARM (axum, plain http, which only
//! [`ArmClient::allow_http_for_tests`] accepts): discovery, token, VMs and NICs, load
//! balancer create / idempotence / delete, 412 and 429 handling, routes.
//!
//! The fake keeps resources by path, gives each write a new etag, honours `If-Match`,
//! answers writes with `Azure-AsyncOperation`, pages lists two items at a time, allocates
//! public IP addresses and computes backend pools' `backendIPConfigurations` from the
//! NICs, as ARM does. It counts PUT/DELETE calls so idempotence can be asserted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{Value, json};

use super::Azure;
use super::client::{ArmClient, NETWORK_API, RetryPolicy};
use super::config::AzureConfig;
use crate::cloud::{Instances, LoadBalancer, Route, Routes};

const SUB: &str = "00000000-0000-0000-0000-0000000000aa";
const SECRET: &str = "s3cret";

#[derive(Default)]
struct Fake {
    base: String,
    resources: BTreeMap<String, Value>,
    writes: Vec<String>,
    /// Paths (lowercased) of every authorized GET.
    reads: Vec<String>,
    etag_counter: u64,
    tokens_issued: u64,
    /// Answer the next request with 429 + Retry-After.
    throttle_next: bool,
    /// Answer the next PUT whose path contains this with 412.
    fail_put_412: Option<String>,
    /// Reject the current token once.
    reject_token_once: bool,
    /// ARM's eventual consistency: each resource a PUT creates reads as 404 (GET of it,
    /// not lists) while its key is in `hidden`.
    hide_created: bool,
    hidden: std::collections::BTreeSet<String>,
    /// Answer PUTs whose path contains this with 400 (until cleared).
    reject_puts: Option<String>,
    /// PUTs sent with `If-None-Match: *` (lowercased paths), whatever their answer.
    create_only: Vec<String>,
    /// Answer the next request with 429 and `retry-after-ms` of this.
    throttle_next_ms: Option<u64>,
    /// When each authorized request arrived, and its answer's status.
    arrivals: Vec<(std::time::Instant, u16)>,
}

type Shared = Arc<Mutex<Fake>>;

fn arm_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

fn rg_prefix() -> String {
    format!("/subscriptions/{SUB}/resourcegroups/rg-ccm/providers/")
}

impl Fake {
    fn put_resource(&mut self, path: &str, mut body: Value) -> Value {
        self.etag_counter += 1;
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        body["id"] = json!(path);
        body["name"] = json!(name);
        body["etag"] = json!(format!("W/\"{}\"", self.etag_counter));
        if !body["properties"].is_object() {
            body["properties"] = json!({});
        }
        body["properties"]["provisioningState"] = json!("Succeeded");
        if path.to_ascii_lowercase().contains("/publicipaddresses/")
            && body.pointer("/properties/ipAddress").is_none()
        {
            let n = self
                .resources
                .keys()
                .filter(|k| k.contains("/publicipaddresses/"))
                .count();
            body["properties"]["ipAddress"] = json!(format!("127.61.0.{}", 10 + n));
        }
        if path.to_ascii_lowercase().contains("/loadbalancers/") {
            for key in [
                "frontendIPConfigurations",
                "backendAddressPools",
                "loadBalancingRules",
                "probes",
            ] {
                for item in body["properties"][key].as_array_mut().into_iter().flatten() {
                    let n = item["name"].as_str().unwrap_or_default().to_owned();
                    item["id"] = json!(format!("{path}/{key}/{n}"));
                    if key == "frontendIPConfigurations"
                        && item.pointer("/properties/subnet").is_some()
                    {
                        item["properties"]["privateIPAddress"] = json!("127.62.0.10");
                    }
                }
            }
        }
        self.resources
            .insert(path.to_ascii_lowercase(), body.clone());
        body
    }

    /// GET with computed fields (a pool's members come from the NICs).
    fn read(&self, key: &str) -> Option<Value> {
        let mut v = self.resources.get(key)?.clone();
        if key.contains("/loadbalancers/") {
            for pool in v["properties"]["backendAddressPools"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                let pool_id = pool["id"].as_str().unwrap_or_default().to_ascii_lowercase();
                let mut members = Vec::new();
                for (k, nic) in &self.resources {
                    if !k.contains("/networkinterfaces/") {
                        continue;
                    }
                    for c in nic["properties"]["ipConfigurations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let in_pool = c["properties"]["loadBalancerBackendAddressPools"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|p| {
                                p["id"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .eq_ignore_ascii_case(&pool_id)
                            });
                        if in_pool {
                            members.push(json!({"id": c["id"]}));
                        }
                    }
                }
                pool["properties"] = json!({"backendIPConfigurations": members});
            }
        }
        Some(v)
    }
}

async fn handle(
    State(fake): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut f = match fake.lock() {
        Ok(f) => f,
        Err(p) => p.into_inner(),
    };
    let path = uri.path().to_owned();
    let key = path.to_ascii_lowercase();
    let query = uri.query().unwrap_or_default().to_owned();
    if path == "/metadata/endpoints" {
        let base = f.base.clone();
        return axum::Json(json!([{"name": "AzureFake", "resourceManager": format!("{base}/"),
            "authentication": {"loginEndpoint": format!("{base}/"), "audiences": ["https://management.core.windows.net/"]}}]))
        .into_response();
    }
    if path.ends_with("/oauth2/v2.0/token") {
        let form = String::from_utf8_lossy(&body).to_string();
        if !form.contains(&format!("client_secret={SECRET}"))
            || !form.contains("scope=https%3A%2F%2Fmanagement.core.windows.net%2F.default")
        {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": "invalid_client", "error_description": "bad secret"})),
            )
                .into_response();
        }
        f.tokens_issued += 1;
        return axum::Json(json!({"token_type": "Bearer", "access_token": format!("tok-{}", f.tokens_issued), "expires_in": 3599})).into_response();
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if auth != format!("Bearer tok-{}", f.tokens_issued) || f.reject_token_once {
        f.reject_token_once = false;
        return arm_error(
            StatusCode::UNAUTHORIZED,
            "ExpiredAuthenticationToken",
            "expired",
        );
    }
    if method == Method::GET {
        f.reads.push(key.clone());
    }
    let response = answer(&mut f, &method, &path, &key, &query, &headers, &body);
    f.arrivals
        .push((std::time::Instant::now(), response.status().as_u16()));
    response
}

fn answer(
    f: &mut Fake,
    method: &Method,
    path: &str,
    key: &str,
    query: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let key = key.to_owned();
    if !query.contains("api-version=") {
        return arm_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "no api-version",
        );
    }
    if let Some(ms) = f.throttle_next_ms.take() {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after-ms", ms.to_string())],
            axum::Json(json!({"error": {"code": "TooManyRequests", "message": "slow down"}})),
        )
            .into_response();
    }
    if f.throttle_next {
        f.throttle_next = false;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "0")],
            axum::Json(json!({"error": {"code": "TooManyRequests", "message": "slow down"}})),
        )
            .into_response();
    }
    if key.starts_with("/operations/") {
        return axum::Json(json!({"status": "Succeeded"})).into_response();
    }
    let op = [(
        "azure-asyncoperation",
        format!("{}/operations/1?api-version=2025-05-01", f.base),
    )];
    match *method {
        Method::GET => {
            if f.hidden.contains(&key) {
                return arm_error(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFound",
                    &format!("{path} not found (yet)"),
                );
            }
            if let Some(v) = f.read(&key) {
                return axum::Json(v).into_response();
            }
            // A collection: its direct children, two per page.
            let prefix = format!("{key}/");
            let items: Vec<Value> = f
                .resources
                .keys()
                .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
                .filter_map(|k| f.read(k))
                .collect();
            let is_collection =
                key.ends_with("/publicipaddresses") || key.ends_with("/virtualmachines");
            if !is_collection {
                return arm_error(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFound",
                    &format!("{path} not found"),
                );
            }
            let skip: usize = query
                .split('&')
                .find_map(|p| p.strip_prefix("skip="))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let page: Vec<Value> = items.iter().skip(skip).take(2).cloned().collect();
            let mut answer = json!({"value": page});
            if skip + 2 < items.len() {
                answer["nextLink"] = json!(format!(
                    "{}{path}?api-version=2025-05-01&skip={}",
                    f.base,
                    skip + 2
                ));
            }
            axum::Json(answer).into_response()
        }
        Method::PUT => {
            if let Some(m) = f.fail_put_412.clone()
                && key.contains(&m)
            {
                f.fail_put_412 = None;
                f.etag_counter += 1;
                return arm_error(
                    StatusCode::PRECONDITION_FAILED,
                    "PreconditionFailed",
                    "stale etag",
                );
            }
            if let Some(m) = &f.reject_puts
                && key.contains(m.as_str())
            {
                return arm_error(StatusCode::BAD_REQUEST, "InvalidRequestContent", "rejected");
            }
            let existing = f.resources.get(&key).cloned();
            if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some("*") {
                f.create_only.push(key.clone());
                if existing.is_some() {
                    return arm_error(
                        StatusCode::PRECONDITION_FAILED,
                        "PreconditionFailed",
                        "the resource already exists",
                    );
                }
            }
            if let Some(want) = headers.get("if-match").and_then(|v| v.to_str().ok())
                && existing.as_ref().and_then(|e| e["etag"].as_str()) != Some(want)
            {
                return arm_error(
                    StatusCode::PRECONDITION_FAILED,
                    "PreconditionFailed",
                    "stale etag",
                );
            }
            let Ok(v) = serde_json::from_slice::<Value>(body) else {
                return arm_error(StatusCode::BAD_REQUEST, "InvalidRequestContent", "bad json");
            };
            f.writes.push(format!("PUT {key}"));
            let stored = f.put_resource(path, v);
            let status = if existing.is_some() {
                StatusCode::OK
            } else {
                if f.hide_created {
                    f.hidden.insert(key.clone());
                }
                StatusCode::CREATED
            };
            (status, op, axum::Json(stored)).into_response()
        }
        Method::DELETE => {
            f.hidden.remove(&key);
            if f.resources.remove(&key).is_none() {
                return StatusCode::NO_CONTENT.into_response();
            }
            f.writes.push(format!("DELETE {key}"));
            (StatusCode::ACCEPTED, op).into_response()
        }
        _ => arm_error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "no"),
    }
}

fn seed(f: &mut Fake) {
    let p = format!("/subscriptions/{SUB}/resourceGroups/rg-ccm/providers");
    f.put_resource(
        &format!("/subscriptions/{SUB}/providers/Microsoft.Compute"),
        json!({"resourceTypes": [{"resourceType": "virtualMachines", "locations": ["East US"],
            "zoneMappings": [{"location": "East US", "zones": ["1", "2", "3"]}]}]}),
    );
    f.put_resource(
        &format!("{p}/Microsoft.Network/networkSecurityGroups/nsg-ccm"),
        json!({"location": "eastus", "properties": {"securityRules": []}}),
    );
    f.put_resource(
        &format!("{p}/Microsoft.Network/virtualNetworks/vnet-ccm/subnets/subnet-ccm"),
        json!({"properties": {"addressPrefix": "10.0.0.0/24"}}),
    );
    for (i, name) in ["node-a", "node-b"].iter().enumerate() {
        let nic = format!("{p}/Microsoft.Network/networkInterfaces/{name}-nic");
        let mut ip_config = json!({"name": "ipconfig1", "id": format!("{nic}/ipConfigurations/ipconfig1"),
            "properties": {"primary": true, "privateIPAddress": format!("127.60.0.{}", 10 + i)}});
        if i == 0 {
            let pip = format!("{p}/Microsoft.Network/publicIPAddresses/{name}-pip");
            f.put_resource(&pip, json!({"properties": {"ipAddress": "127.61.0.200"}}));
            ip_config["properties"]["publicIPAddress"] = json!({"id": pip});
        }
        f.put_resource(
            &nic,
            json!({"properties": {"ipConfigurations": [ip_config],
            "virtualMachine": {"id": format!("{p}/Microsoft.Compute/virtualMachines/{name}")}}}),
        );
        let mut vm = json!({"location": "eastus", "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "networkProfile": {"networkInterfaces": [{"id": nic}]},
            "instanceView": {"platformFaultDomain": 1, "statuses": [
                {"code": "ProvisioningState/succeeded"},
                {"code": if i == 0 { "PowerState/running" } else { "PowerState/deallocated" }}]}}});
        if i == 0 {
            vm["zones"] = json!(["2"]);
        }
        f.put_resource(&format!("/subscriptions/{SUB}/resourceGroups/RG-CCM/providers/Microsoft.Compute/virtualMachines/{name}"), vm);
    }
    // Store VM ids with the resource group as ARM spells it (upper case here).
    f.writes.clear();
}

async fn start() -> (Shared, Azure) {
    start_with(None).await
}

/// [`start`] with the client's retry policy replaced.
async fn start_with(retry: Option<RetryPolicy>) -> (Shared, Azure) {
    let fake: Shared = Arc::default();
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    let base = format!(
        "http://{}",
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    );
    {
        let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
        f.base = base.clone();
        seed(&mut f);
    }
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(fake.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let text = json!({
        "cloud": "AzureFake", "tenantId": "00000000-0000-0000-0000-000000000001",
        "subscriptionId": SUB, "aadClientId": "ccm-client", "aadClientSecret": SECRET,
        "resourceGroup": "rg-ccm", "location": "eastus", "vmType": "standard",
        "vnetName": "vnet-ccm", "subnetName": "subnet-ccm", "securityGroupName": "nsg-ccm",
        "routeTableName": "rt-ccm", "loadBalancerSku": "standard",
        "resourceManagerEndpoint": format!("{base}/")
    })
    .to_string();
    let (config, _) = match AzureConfig::parse(&text) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let mut client = match ArmClient::allow_http_for_tests(&config).await {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    if let Some(retry) = retry {
        client.set_retry(retry);
    }
    let azure = match Azure::with_client(config, client).await {
        Ok(a) => a,
        Err(e) => panic!("{e}"),
    };
    (fake, azure)
}

fn writes(fake: &Shared) -> Vec<String> {
    let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut f.writes)
}

fn reads(fake: &Shared) -> Vec<String> {
    let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut f.reads)
}

fn get(fake: &Shared, key: &str) -> Option<Value> {
    let f = fake.lock().unwrap_or_else(|p| p.into_inner());
    f.read(&key.to_ascii_lowercase())
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}))
        .unwrap_or_default()
}

fn service(annotations: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555",
                     "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 8080, "nodePort": 30080, "protocol": "TCP"}]}
    }))
    .unwrap_or_default()
}

#[test]
fn plain_http_is_refused_outside_tests() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(rt) = rt else { return };
    rt.block_on(async {
        let text = r#"{"tenantId":"t","subscriptionId":"s","aadClientId":"c","aadClientSecret":"x",
            "resourceGroup":"rg","location":"eastus","vmType":"standard","resourceManagerEndpoint":"http://127.0.0.1:1/"}"#;
        let (config, _) = AzureConfig::parse(text).expect("config");
        let err = ArmClient::connect(&config).await.expect_err("http refused");
        assert!(err.to_string().contains("not https"), "{err}");
    });
}

#[tokio::test]
async fn instances_follow_upstream() {
    let (fake, az) = start().await;
    let meta = az
        .instance_metadata(&node("node-a", None))
        .await
        .expect("metadata")
        .expect("some");
    assert_eq!(
        meta.provider_id,
        format!(
            "azure:///subscriptions/{SUB}/resourceGroups/rg-ccm/providers/Microsoft.Compute/virtualMachines/node-a"
        )
    );
    assert_eq!(meta.instance_type, "Standard_D2s_v3");
    assert_eq!(meta.zone, "eastus-2");
    assert_eq!(meta.region, "eastus");
    let addrs: Vec<(String, String)> = meta
        .node_addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        addrs,
        vec![
            ("InternalIP".to_owned(), "127.60.0.10".to_owned()),
            ("Hostname".to_owned(), "node-a".to_owned()),
            ("ExternalIP".to_owned(), "127.61.0.200".to_owned()),
        ]
    );
    let b = az
        .instance_metadata(&node("node-b", None))
        .await
        .expect("b")
        .expect("some");
    assert_eq!(b.zone, "1", "fault domain without zones");
    assert!(
        az.instance_exists(&node("node-a", None))
            .await
            .expect("exists")
    );
    assert!(
        !az.instance_exists(&node("gone", None))
            .await
            .expect("missing")
    );
    let by_id = node("whatever", Some(&meta.provider_id));
    assert!(az.instance_exists(&by_id).await.expect("by id"));
    assert!(
        !az.instance_shutdown(&node("node-a", None))
            .await
            .expect("running")
    );
    assert!(
        az.instance_shutdown(&node("node-b", None))
            .await
            .expect("deallocated")
    );
    assert!(
        !az.instance_shutdown(&node("gone", None))
            .await
            .expect("missing is not shut down")
    );
    assert!(writes(&fake).is_empty(), "instances only read");
}

#[tokio::test]
async fn load_balancer_create_is_idempotent_and_delete_cleans_up() {
    let (fake, az) = start().await;
    let svc = service(json!({}));
    let nodes = vec![node("node-a", None), node("node-b", None)];
    let status = az
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure");
    let ip = status
        .ingress
        .as_ref()
        .and_then(|i| i.first())
        .and_then(|i| i.ip.clone())
        .unwrap_or_default();
    assert!(ip.starts_with("127.61.0."), "{ip}");
    let w = writes(&fake);
    let p = rg_prefix();
    assert_eq!(
        w,
        vec![
            format!(
                "PUT {p}microsoft.network/publicipaddresses/kubernetes-a1111111122223333444455555555555"
            ),
            format!("PUT {p}microsoft.network/loadbalancers/kubernetes"),
            format!("PUT {p}microsoft.network/networkinterfaces/node-a-nic"),
            format!("PUT {p}microsoft.network/networkinterfaces/node-b-nic"),
            format!("PUT {p}microsoft.network/networksecuritygroups/nsg-ccm"),
        ]
    );
    let lb = get(
        &fake,
        &format!("{p}microsoft.network/loadbalancers/kubernetes"),
    )
    .expect("lb");
    assert_eq!(lb["sku"]["name"], "Standard");
    assert_eq!(
        lb["properties"]["frontendIPConfigurations"][0]["name"],
        "a1111111122223333444455555555555"
    );
    assert_eq!(
        lb["properties"]["loadBalancingRules"][0]["name"],
        "a1111111122223333444455555555555-TCP-8080"
    );
    assert_eq!(
        lb["properties"]["backendAddressPools"][0]["properties"]["backendIPConfigurations"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    let pip = get(
        &fake,
        &format!(
            "{p}microsoft.network/publicipaddresses/kubernetes-a1111111122223333444455555555555"
        ),
    )
    .expect("pip");
    assert_eq!(pip["tags"]["k8s-azure-service"], "default/web");
    assert_eq!(pip["tags"]["k8s-azure-cluster-name"], "kubernetes");
    assert_eq!(pip["zones"], json!(["1", "2", "3"]));
    let nsg = get(
        &fake,
        &format!("{p}microsoft.network/networksecuritygroups/nsg-ccm"),
    )
    .expect("nsg");
    let rule = &nsg["properties"]["securityRules"][0];
    assert_eq!(rule["properties"]["sourceAddressPrefix"], "Internet");
    assert_eq!(rule["properties"]["destinationAddressPrefix"], json!(ip));
    assert_eq!(rule["properties"]["destinationPortRanges"], json!(["8080"]));

    // Unchanged Service: no write at all.
    let again = az
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("again");
    assert_eq!(again, status);
    assert_eq!(writes(&fake), Vec::<String>::new());
    assert_eq!(
        az.get_load_balancer("kubernetes", &svc).await.expect("get"),
        Some(status)
    );

    // A node leaves: its NIC leaves the pool, nothing else is written.
    az.update_load_balancer("kubernetes", &svc, &nodes[..1])
        .await
        .expect("update");
    assert_eq!(
        writes(&fake),
        vec![format!(
            "PUT {p}microsoft.network/networkinterfaces/node-b-nic"
        )]
    );

    az.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete");
    let w = writes(&fake);
    assert!(
        w.contains(&format!(
            "DELETE {p}microsoft.network/loadbalancers/kubernetes"
        )),
        "{w:?}"
    );
    assert!(w.contains(&format!("DELETE {p}microsoft.network/publicipaddresses/kubernetes-a1111111122223333444455555555555")), "{w:?}");
    assert!(
        get(
            &fake,
            &format!("{p}microsoft.network/loadbalancers/kubernetes")
        )
        .is_none()
    );
    let nsg = get(
        &fake,
        &format!("{p}microsoft.network/networksecuritygroups/nsg-ccm"),
    )
    .expect("nsg");
    assert_eq!(nsg["properties"]["securityRules"], json!([]));
    let nic = get(
        &fake,
        &format!("{p}microsoft.network/networkinterfaces/node-a-nic"),
    )
    .expect("nic");
    assert_eq!(
        nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"],
        json!([])
    );
    // The seeded node public IP is not the Service's and stays.
    assert!(
        get(
            &fake,
            &format!("{p}microsoft.network/publicipaddresses/node-a-pip")
        )
        .is_some()
    );
    az.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete twice");
    assert!(writes(&fake).is_empty());
}

#[tokio::test]
async fn internal_service_uses_the_subnet_and_stale_etags_are_retried() {
    let (fake, az) = start().await;
    let svc = service(json!({"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}));
    {
        let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
        f.fail_put_412 = Some("loadbalancers".to_owned());
        f.throttle_next = true;
        f.reject_token_once = true;
    }
    let status = az
        .ensure_load_balancer("kubernetes", &svc, &[node("node-a", None)])
        .await
        .expect("ensure despite 401, 429 and 412");
    assert_eq!(
        status
            .ingress
            .and_then(|i| i.first().and_then(|i| i.ip.clone()))
            .as_deref(),
        Some("127.62.0.10")
    );
    let p = rg_prefix();
    let lb = get(
        &fake,
        &format!("{p}microsoft.network/loadbalancers/kubernetes-internal"),
    )
    .expect("internal lb");
    assert_eq!(
        lb["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAllocationMethod"],
        "Dynamic"
    );
    let w = writes(&fake);
    assert!(
        !w.iter().any(|w| w.contains("publicipaddresses")),
        "no public IP: {w:?}"
    );
    assert_eq!(
        w.iter().filter(|w| w.contains("loadbalancers")).count(),
        1,
        "{w:?}"
    );
    assert!(
        !w.iter().any(|w| w.contains("networksecuritygroups")),
        "{w:?}"
    );
    // Internal without source ranges: no Internet rule, so the NSG stays empty.
    let nsg = get(
        &fake,
        &format!("{p}microsoft.network/networksecuritygroups/nsg-ccm"),
    )
    .expect("nsg");
    assert_eq!(nsg["properties"]["securityRules"], json!([]));
}

#[tokio::test]
async fn routes_create_list_delete() {
    let (fake, az) = start().await;
    let route = Route {
        target_node: "node-a".into(),
        destination_cidr: "10.244.1.0/24".into(),
        ..Default::default()
    };
    assert!(az.list_routes("kubernetes").await.expect("list").is_empty());
    az.create_route("kubernetes", "uid", &route)
        .await
        .expect("create");
    let p = rg_prefix();
    assert_eq!(
        writes(&fake),
        vec![
            format!("PUT {p}microsoft.network/routetables/rt-ccm"),
            format!("PUT {p}microsoft.network/routetables/rt-ccm"),
        ],
        "table created, then the route written"
    );
    az.create_route("kubernetes", "uid", &route)
        .await
        .expect("again");
    assert!(writes(&fake).is_empty(), "same route: no write");
    let listed = az.list_routes("kubernetes").await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "node-a____102441024");
    assert_eq!(listed[0].target_node, "node-a");
    assert_eq!(listed[0].destination_cidr, "10.244.1.0/24");
    let rt = get(&fake, &format!("{p}microsoft.network/routetables/rt-ccm")).expect("rt");
    assert_eq!(
        rt["properties"]["routes"][0]["properties"]["nextHopType"],
        "VirtualAppliance"
    );
    assert_eq!(
        rt["properties"]["routes"][0]["properties"]["nextHopIpAddress"],
        "127.60.0.10"
    );
    az.delete_route("kubernetes", &listed[0])
        .await
        .expect("delete");
    assert!(az.list_routes("kubernetes").await.expect("list").is_empty());
}

/// A node whose IP configuration is already a pool member costs no VM or NIC read on the
/// next reconcile; its member IP comes from the Node (upstream `GetBackendPrivateIPs`). A
/// node without an InternalIP, and a member that left the pool, are read again.
#[tokio::test]
async fn pool_members_need_no_vm_or_nic_reads_on_the_next_reconcile() {
    let (fake, az) = start().await;
    let svc = service(json!({}));
    let with_ip = |name: &str, ip: &str| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]}}))
        .unwrap_or_default()
    };
    let nodes = vec![with_ip("node-a", "127.60.0.10"), node("node-b", None)];
    az.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure");
    let first = reads(&fake);
    writes(&fake);
    let vm_or_nic = |r: &[String], name: &str| {
        r.iter()
            .filter(|p| {
                p.ends_with(&format!("/virtualmachines/{name}"))
                    || p.ends_with(&format!("/networkinterfaces/{name}-nic"))
            })
            .count()
    };
    assert!(vm_or_nic(&first, "node-a") >= 2, "{first:?}");
    az.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("update");
    let second = reads(&fake);
    assert_eq!(vm_or_nic(&second, "node-a"), 0, "{second:?}");
    assert!(
        vm_or_nic(&second, "node-b") >= 2,
        "no InternalIP: read again {second:?}"
    );
    assert!(
        writes(&fake)
            .iter()
            .all(|w| !w.contains("networkinterfaces"))
    );
}

#[tokio::test]
async fn a_new_public_ip_is_read_once_after_its_put() {
    let (fake, az) = start().await;
    let svc = service(json!({}));
    reads(&fake);
    let status = az
        .ensure_load_balancer("kubernetes", &svc, &[node("node-a", None)])
        .await
        .expect("ensure");
    let ip = status.ingress.as_ref().and_then(|i| i[0].ip.clone());
    assert!(ip.is_some(), "{status:?}");
    let pip_reads: Vec<String> = reads(&fake)
        .into_iter()
        .filter(|p| p.contains("/publicipaddresses/"))
        .collect();
    // The look-up before the create (404) and the operation's final GET; the frontend's
    // address comes from that answer, not from a third read.
    assert_eq!(pip_reads.len(), 2, "{pip_reads:?}");
}

fn hide_created(fake: &Shared, on: bool) {
    let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
    f.hide_created = on;
    if !on {
        f.hidden.clear();
    }
}

fn other_service(name: &str, uid: &str) -> Service {
    let mut s = service(json!({}));
    s.metadata.name = Some(name.to_owned());
    s.metadata.uid = Some(uid.to_owned());
    s
}

/// ARM's eventual consistency (the Chaos case CH-04): everything a PUT creates reads as
/// 404 for a while. The ensure neither fails nor writes anything twice, a second Service
/// joins the same LB, and the delete path, which reads the LB and the public IPs as not
/// found, still removes every frontend, LB and public IP.
#[tokio::test]
async fn resources_that_read_as_not_found_after_their_create_are_neither_duplicated_nor_leaked() {
    let (fake, az) = start().await;
    hide_created(&fake, true);
    let (svc, svc2) = (
        service(json!({})),
        other_service("api", "99999999-2222-3333-4444-555555555555"),
    );
    let nodes = vec![node("node-a", None)];
    let status = az
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure while new resources read as not found");
    assert!(
        status
            .ingress
            .as_ref()
            .and_then(|i| i[0].ip.clone())
            .is_some(),
        "{status:?}"
    );
    let p = rg_prefix();
    let lb_key = format!("{p}microsoft.network/loadbalancers/kubernetes");
    let pip_key = format!(
        "{p}microsoft.network/publicipaddresses/kubernetes-a1111111122223333444455555555555"
    );
    assert_eq!(
        writes(&fake),
        vec![
            format!("PUT {pip_key}"),
            format!("PUT {lb_key}"),
            format!("PUT {p}microsoft.network/networkinterfaces/node-a-nic"),
            format!("PUT {p}microsoft.network/networksecuritygroups/nsg-ccm"),
        ],
        "each resource written once"
    );
    {
        let f = fake.lock().unwrap_or_else(|p| p.into_inner());
        assert_eq!(
            f.create_only,
            vec![lb_key.clone()],
            "the LB is created only if absent"
        );
        assert!(f.hidden.contains(&lb_key) && f.hidden.contains(&pip_key));
    }
    // Still invisible: a second Service joins the LB (updated, not created again).
    az.ensure_load_balancer("kubernetes", &svc2, &nodes)
        .await
        .expect("second service");
    let w = writes(&fake);
    assert_eq!(
        w.iter().filter(|w| **w == format!("PUT {lb_key}")).count(),
        1,
        "{w:?}"
    );
    let lb = get(&fake, &lb_key).expect("lb");
    let fronts: Vec<&str> = lb["properties"]["frontendIPConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(
        fronts,
        vec![
            "a1111111122223333444455555555555",
            "a9999999922223333444455555555555"
        ]
    );
    // The delete path: the Service exists for the controller, and everything goes.
    assert!(
        az.get_load_balancer("kubernetes", &svc)
            .await
            .expect("get")
            .is_some(),
        "a not-found read moments after the create must not skip the delete"
    );
    for s in [&svc, &svc2] {
        az.ensure_load_balancer_deleted("kubernetes", s)
            .await
            .expect("delete");
    }
    let f = fake.lock().unwrap_or_else(|p| p.into_inner());
    let left: Vec<&String> = f
        .resources
        .keys()
        .filter(|k| k.contains("/loadbalancers/") || k.contains("/publicipaddresses/kubernetes-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// An ensure that failed between the public IP and the LB leaves a public IP only; the
/// Service still "has" a load balancer (upstream GetLoadBalancer checks the public IP
/// too), so the delete path runs and removes it, even while it reads as not found.
#[tokio::test]
async fn a_public_ip_without_its_frontend_is_deleted_with_the_service() {
    let (fake, az) = start().await;
    hide_created(&fake, true);
    fake.lock().unwrap_or_else(|p| p.into_inner()).reject_puts = Some("/loadbalancers/".to_owned());
    let svc = service(json!({}));
    assert!(
        az.ensure_load_balancer("kubernetes", &svc, &[node("node-a", None)])
            .await
            .is_err()
    );
    let pip_key = format!(
        "{}microsoft.network/publicipaddresses/kubernetes-a1111111122223333444455555555555",
        rg_prefix()
    );
    assert!(get(&fake, &pip_key).is_some());
    assert_eq!(
        az.get_load_balancer("kubernetes", &svc).await.expect("get"),
        Some(Default::default())
    );
    az.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .expect("delete");
    assert!(get(&fake, &pip_key).is_none(), "public IP leaked");
    // Once gone, nothing is left to report.
    assert_eq!(
        az.get_load_balancer("kubernetes", &svc).await.expect("get"),
        None
    );
}

/// An LB that reads as not found but exists (a read this client cannot vouch for) is not
/// replaced by a fresh one carrying only this Service: the create is `If-None-Match: *`.
#[tokio::test]
async fn a_load_balancer_that_reads_as_not_found_is_not_replaced() {
    let (fake, az) = start().await;
    let nodes = vec![node("node-a", None)];
    az.ensure_load_balancer("kubernetes", &service(json!({})), &nodes)
        .await
        .expect("first");
    let lb_key = format!("{}microsoft.network/loadbalancers/kubernetes", rg_prefix());
    fake.lock()
        .unwrap_or_else(|p| p.into_inner())
        .hidden
        .insert(lb_key.clone());
    writes(&fake);
    let other = other_service("api", "99999999-2222-3333-4444-555555555555");
    assert!(
        az.ensure_load_balancer("kubernetes", &other, &nodes)
            .await
            .is_err(),
        "the create is refused while the LB reads as not found"
    );
    assert!(
        !writes(&fake).iter().any(|w| w.contains("/loadbalancers/")),
        "no LB write"
    );
    let lb = get(&fake, &lb_key).expect("lb");
    assert_eq!(
        lb["properties"]["frontendIPConfigurations"][0]["name"],
        "a1111111122223333444455555555555"
    );
    // Visible again: the Service joins the LB.
    hide_created(&fake, false);
    az.ensure_load_balancer("kubernetes", &other, &nodes)
        .await
        .expect("joins");
    let lb = get(&fake, &lb_key).expect("lb");
    assert_eq!(
        lb["properties"]["frontendIPConfigurations"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

/// Once a read has found the LB, a 404 means it is gone: an LB deleted behind the CCM's
/// back is not updated (no error, no write).
#[tokio::test]
async fn an_lb_deleted_behind_the_ccms_back_is_not_updated() {
    let (fake, az) = start().await;
    let svc = service(json!({}));
    let nodes = vec![node("node-a", None)];
    az.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("ensure");
    writes(&fake);
    let lb_key = format!("{}microsoft.network/loadbalancers/kubernetes", rg_prefix());
    fake.lock()
        .unwrap_or_else(|p| p.into_inner())
        .resources
        .remove(&lb_key);
    az.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .expect("update of a gone LB");
    assert!(writes(&fake).is_empty());
    // The public IP is left: the Service still "has" a load balancer for the delete path.
    assert_eq!(
        az.get_load_balancer("kubernetes", &svc).await.expect("get"),
        Some(Default::default())
    );
}

/// A 429's `Retry-After` holds back the client's other reads too (upstream's
/// `ThrottlingPolicy`), and the throttled request is retried once the wait is over.
#[tokio::test]
async fn a_429_holds_back_the_other_requests_until_its_retry_after() {
    let retry = RetryPolicy {
        attempts: 3,
        base: std::time::Duration::from_millis(5),
        max: std::time::Duration::from_secs(2),
        poll: vec![std::time::Duration::from_millis(5)],
        poll_deadline: std::time::Duration::from_secs(10),
        throttled_for: std::time::Duration::from_secs(5),
        throttled_rate: 1_000,
        consistency_window: std::time::Duration::from_secs(10),
    };
    let (fake, az) = start_with(Some(retry)).await;
    let nsg = az.network_path("networkSecurityGroups", "nsg-ccm");
    {
        let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
        f.arrivals.clear();
        f.throttle_next_ms = Some(300);
    }
    let first = az.client().get(&nsg, NETWORK_API, &[]);
    let second = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        az.client().get(&nsg, NETWORK_API, &[]).await
    };
    let (a, b) = tokio::join!(first, second);
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
    let f = fake.lock().unwrap_or_else(|p| p.into_inner());
    let statuses: Vec<u16> = f.arrivals.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        statuses,
        vec![429, 200, 200],
        "the second waited for the gate"
    );
    let gap = f.arrivals[1].0.duration_since(f.arrivals[0].0);
    assert!(
        gap >= std::time::Duration::from_millis(280),
        "the next request came {gap:?} after the 429"
    );
}
