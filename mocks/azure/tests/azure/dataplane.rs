//! Real traffic through a load balancer frontend: a public IP, a load balancer with a
//! floating-IP rule and a TCP probe, two VMs' NICs joined to its pool, and backends
//! listening on the VMs' private IPs. The NSG decides who gets through.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, Result};
use mock_azure::{AzureMock, Config};
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use crate::{Arm, eventually};

/// A backend answering every connection with its name.
async fn backend(addr: SocketAddr, name: &'static str) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    Ok(tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(name.as_bytes()).await;
        }
    }))
}

/// Connects from `source` and reads what the backend says ("" when refused or closed).
async fn ask(source: IpAddr, to: SocketAddr) -> String {
    let attempt = async {
        let socket = TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::new(source, 0)).ok()?;
        let mut s = socket.connect(to).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(3), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

#[tokio::test]
async fn traffic_reaches_pool_members_through_the_frontend_as_the_nsg_allows() -> Result<()> {
    let mock = AzureMock::start(Config {
        nodes: 2,
        address_block: 42,
        ..Config::default()
    })
    .await?;
    let arm = Arm::new(&mock).await?;
    let vms = mock.admin().vms();
    let ip = |i: usize| -> Result<IpAddr> { Ok(vms[i].private_ips[0].parse()?) };
    // Floating IP: the mock sends to the member's IP at the frontend port.
    let _a = backend(SocketAddr::new(ip(0)?, 18080), "node-0").await?;
    let _b = backend(SocketAddr::new(ip(1)?, 18080), "node-1").await?;

    let pip = arm
        .put(
            "Microsoft.Network/publicIPAddresses/kubernetes-a1",
            &json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await?;
    let vip: IpAddr = pip["properties"]["ipAddress"]
        .as_str()
        .context("ip")?
        .parse()?;
    let lb_id = arm.id("Microsoft.Network/loadBalancers/kubernetes");
    arm.put(
        "Microsoft.Network/loadBalancers/kubernetes",
        &json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {
            "frontendIPConfigurations": [{"name": "a1", "properties": {"publicIPAddress": {"id": pip["id"]}}}],
            "backendAddressPools": [{"name": "kubernetes"}],
            "probes": [{"name": "a1-TCP-18080", "properties": {"protocol": "Tcp", "port": 18080, "intervalInSeconds": 1, "probeThreshold": 1}}],
            "loadBalancingRules": [{"name": "a1-TCP-18080", "properties": {
                "protocol": "Tcp", "frontendPort": 18080, "backendPort": 31000, "enableFloatingIP": true,
                "frontendIPConfiguration": {"id": format!("{lb_id}/frontendIPConfigurations/a1")},
                "backendAddressPool": {"id": format!("{lb_id}/backendAddressPools/kubernetes")},
                "probe": {"id": format!("{lb_id}/probes/a1-TCP-18080")}}}]
        }}),
    )
    .await?;
    for i in 0..2 {
        let rest = format!("Microsoft.Network/networkInterfaces/node-{i}-nic");
        let (_, mut nic) = arm.call(Method::GET, &rest, None).await?;
        nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] =
            json!([{"id": format!("{lb_id}/backendAddressPools/kubernetes")}]);
        arm.put(&rest, &nic).await?;
    }
    let frontend = SocketAddr::new(vip, 18080);
    let client: IpAddr = "127.99.0.1".parse()?;
    let outsider: IpAddr = "127.98.0.1".parse()?;

    // No NSG rule yet: DenyAllInBound. The frontend is bound but refuses.
    eventually("frontend bound", || async {
        tokio::net::TcpStream::connect(frontend)
            .await
            .ok()
            .map(|_| ())
    })
    .await?;
    assert_eq!(ask(client, frontend).await, "");

    // Allow 127.99.0.0/16 to the frontend's port, as the CCM does for
    // loadBalancerSourceRanges.
    let nsg_rest = "Microsoft.Network/networkSecurityGroups/nsg-ccm";
    let (_, mut nsg) = arm.call(Method::GET, nsg_rest, None).await?;
    nsg["properties"]["securityRules"] = json!([{"name": "a1-TCP-18080-127.99.0.0_16", "properties": {
        "protocol": "Tcp", "access": "Allow", "direction": "Inbound", "priority": 500,
        "sourceAddressPrefixes": ["127.99.0.0/16"], "sourcePortRange": "*",
        "destinationAddressPrefix": vip.to_string(), "destinationPortRange": "18080"}}]);
    arm.put(nsg_rest, &nsg).await?;
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    eventually("both members answer", || async {
        let answer = ask(client, frontend).await;
        let mut seen = seen.lock().expect("lock");
        if !answer.is_empty() {
            seen.insert(answer);
        }
        (seen.len() == 2).then_some(())
    })
    .await?;
    assert_eq!(
        ask(outsider, frontend).await,
        "",
        "a source outside the rule is refused"
    );

    // A stopped backend fails its probe and gets no traffic.
    _a.abort();
    let _ = _a.await;
    eventually("only node-1 answers", || async {
        let answers = answers(client, frontend, 4).await;
        answers.iter().all(|a| a == "node-1").then_some(())
    })
    .await?;

    // Deleting the load balancer stops the frontend.
    let (status, _) = arm
        .call(
            Method::DELETE,
            "Microsoft.Network/loadBalancers/kubernetes",
            None,
        )
        .await?;
    assert_eq!(status, 202);
    eventually("frontend unbound", || async {
        tokio::net::TcpStream::connect(frontend)
            .await
            .err()
            .map(|_| ())
    })
    .await?;
    assert!(mock.admin().load_balancers().is_empty());
    mock.shutdown().await;
    Ok(())
}

async fn answers(source: IpAddr, to: SocketAddr, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(ask(source, to).await);
    }
    out
}
