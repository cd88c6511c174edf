//! The mock as `ccm-conformance mock azure` runs it: through `MockCloud`, over HTTPS
//! with its own CA, with the admin API on the same listener.

use anyhow::{Context, Result};
use mock_azure::{AzureMock, Config};
use mock_cloud::{MockCloud, MockOptions};
use reqwest::Method;
use serde_json::{Value, json};

use crate::Arm;

#[tokio::test]
async fn ready_info_names_everything_a_client_needs() -> Result<()> {
    let options = MockOptions {
        listen: "127.0.0.1:0".parse()?,
        nodes: 2,
        tls: false,
        imds: false,
    };
    let mut config = <AzureMock as MockCloud>::config(&options, Default::default());
    config.address_block = 43;
    let mock = <AzureMock as MockCloud>::start(config).await?;
    let ready = serde_json::to_value(MockCloud::ready(&mock))?;
    for key in [
        "endpoint",
        "tenant_id",
        "subscription_id",
        "resource_group",
        "location",
        "client_id",
        "client_secret",
        "ca_file",
        "admin_url",
        "identity_endpoint",
        "identity_header",
        "vnet_name",
        "subnet_name",
        "security_group_name",
        "route_table_name",
    ] {
        assert!(
            ready[key].as_str().is_some_and(|v| !v.is_empty()),
            "{key} in {ready}"
        );
    }
    assert!(
        ready["endpoint"]
            .as_str()
            .is_some_and(|e| e.starts_with("https://127.0.0.1:"))
    );
    assert_eq!(ready["tenant_id"], "00000000-0000-0000-0000-000000000001");
    assert_eq!(
        ready["subscription_id"],
        "00000000-0000-0000-0000-0000000000aa"
    );
    assert_eq!(
        (
            ready["resource_group"].as_str(),
            ready["security_group_name"].as_str(),
            ready["route_table_name"].as_str()
        ),
        (Some("rg-ccm"), Some("nsg-ccm"), Some("rt-ccm"))
    );
    let arm = Arm::new(&mock).await?;
    let (status, vms) = arm
        .call(Method::GET, "Microsoft.Compute/virtualMachines", None)
        .await?;
    assert_eq!(status, 200);
    assert_eq!(vms["value"].as_array().map(Vec::len), Some(2));
    // The secret is random per start: a client with another one is refused.
    let refused = arm
        .http
        .post(format!("{}/{}/oauth2/v2.0/token", arm.ready.endpoint, arm.ready.tenant_id))
        .body("grant_type=client_credentials&client_id=ccm-client&client_secret=guess&scope=https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default")
        .send()
        .await?;
    assert_eq!(refused.status(), 401);
    MockCloud::shutdown(mock).await;
    Ok(())
}

#[tokio::test]
async fn admin_api_drives_vms_lifecycle_faults_and_leaks() -> Result<()> {
    let mock = AzureMock::start(Config {
        nodes: 1,
        address_block: 44,
        ..Config::default()
    })
    .await?;
    let arm = Arm::new(&mock).await?;
    let admin = arm.ready.admin_url.clone();
    let http = &arm.http;
    let created: Value = http
        .post(format!("{admin}/vms"))
        .json(&json!({"name": "extra", "zone": "", "vmSize": "Standard_D4s_v3", "public_ips": []}))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(created["zone"], Value::Null);
    assert_eq!(created["fault_domain"], 1);
    assert_eq!(created["public_ips"], json!([]));
    assert!(created["provider_id"].as_str().is_some_and(
        |p| p.starts_with("azure:///subscriptions/") && p.ends_with("/virtualMachines/extra")
    ));
    let (_, vm) = arm
        .call(
            Method::GET,
            "Microsoft.Compute/virtualMachines/extra/instanceView",
            None,
        )
        .await?;
    assert_eq!(vm["platformFaultDomain"], 1);
    let patched = http
        .patch(format!("{admin}/vms/extra"))
        .json(&json!({"power_state": "deallocated", "private_ips": ["127.60.44.99"]}))
        .send()
        .await?;
    assert_eq!(patched.status(), 200);
    let (_, view) = arm
        .call(
            Method::GET,
            "Microsoft.Compute/virtualMachines/extra/instanceView",
            None,
        )
        .await?;
    assert_eq!(view["statuses"][1]["code"], "PowerState/deallocated");
    let bad = http.post(format!("{admin}/vms")).body("{").send().await?;
    assert_eq!(bad.status(), 400);
    let dup = http
        .post(format!("{admin}/vms"))
        .json(&json!({"name": "extra"}))
        .send()
        .await?;
    assert_eq!(dup.status(), 409);

    // A slow lifecycle for load balancers, through the admin API.
    let r = http
        .put(format!("{admin}/lifecycle"))
        .json(&json!({"target": "type", "name": "publicipaddresses", "mode": {"mode": "stuck"}}))
        .send()
        .await?;
    assert_eq!(r.status(), 204);
    let (status, body) = arm
        .call(
            Method::PUT,
            "Microsoft.Network/publicIPAddresses/held",
            Some(&json!({"properties": {}})),
        )
        .await?;
    assert_eq!(
        (status, body["properties"]["provisioningState"].as_str()),
        (201, Some("Updating"))
    );
    let (status, body) = arm
        .call(
            Method::PUT,
            "Microsoft.Network/publicIPAddresses/held",
            Some(&json!({"properties": {}})),
        )
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("AnotherOperationInProgress"))
    );
    let leaks: Value = http
        .get(format!("{admin}/leaks"))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(leaks["by_type"]["publicIPAddresses"][0]["name"], "held");

    // The throttling preset: 429 TooManyRequests with Retry-After, journaled with the rule.
    let r = http
        .post(format!("{admin}/faults"))
        .json(&json!({"service": "compute", "operation": "GET Microsoft.Compute/virtualMachines", "resource": "node-0", "kind": "throttle", "count": 1}))
        .send()
        .await?;
    assert_eq!(r.status(), 201);
    let resp = http
        .get(arm.url("Microsoft.Compute/virtualMachines/node-0"))
        .bearer_auth(&arm.token)
        .send()
        .await?;
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().get("retry-after").is_some());
    let body: Value = resp.json().await?;
    assert_eq!(body["error"]["code"], "TooManyRequests");
    let (status, _) = arm
        .call(
            Method::GET,
            "Microsoft.Compute/virtualMachines/node-0",
            None,
        )
        .await?;
    assert_eq!(status, 200, "the rule fired once");
    let journal: Value = http
        .get(format!("{admin}/journal"))
        .send()
        .await?
        .json()
        .await?;
    let throttled = journal["entries"]
        .as_array()
        .context("entries")?
        .iter()
        .find(|e| e["status"] == 429)
        .context("journaled 429")?;
    assert_eq!(
        throttled["operation"],
        "GET Microsoft.Compute/virtualMachines"
    );
    assert_eq!(throttled["resource"], "node-0");
    assert!(throttled["fault"].is_u64());

    // Out-of-band routes are listed and are not leaks; reset restores the seed.
    let r = http
        .post(format!("{admin}/routes"))
        .json(&json!({"name": "other", "address_prefix": "10.9.0.0/24", "next_hop_ip": "127.60.44.50"}))
        .send()
        .await?;
    assert_eq!(r.status(), 201);
    assert_eq!(mock.admin().route_table_routes().len(), 1);
    assert_eq!(
        http.post(format!("{admin}/reset")).send().await?.status(),
        204
    );
    assert_eq!(mock.admin().vms().len(), 1);
    assert!(mock.admin().route_table_routes().is_empty());
    assert_eq!(mock.admin().leaks().total, 0);
    let lbs: Value = http
        .get(format!("{admin}/load-balancers"))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(lbs, json!([]));
    mock.shutdown().await;
    Ok(())
}
