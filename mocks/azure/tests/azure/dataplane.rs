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
    // ARM reports a 198.18/15 address; the data plane serves its loopback twin.
    assert!(vip.to_string().starts_with("198.18."), "{vip}");
    let frontend = SocketAddr::new(mock_azure::listener_ip(vip), 18080);
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

/// A UDP backend echoing its name.
async fn udp_backend(addr: SocketAddr, name: &'static str) -> Result<tokio::task::JoinHandle<()>> {
    let socket = tokio::net::UdpSocket::bind(addr).await?;
    Ok(tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((_, from)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(name.as_bytes(), from).await;
        }
    }))
}

/// An HTTP health endpoint answering `status` to everything.
async fn health(addr: SocketAddr, status: &'static str) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    Ok(tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let reply =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = s.write_all(reply.as_bytes()).await;
        }
    }))
}

/// One UDP flow from `source`: what came back ("" if nothing within a second).
async fn udp_ask(source: IpAddr, to: SocketAddr) -> String {
    let attempt = async {
        let s = tokio::net::UdpSocket::bind(SocketAddr::new(source, 0))
            .await
            .ok()?;
        s.send_to(b"hi", to).await.ok()?;
        let mut buf = [0u8; 64];
        let (n, _) = s.recv_from(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(1), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

#[tokio::test]
async fn udp_rules_use_the_backend_port_and_http_probes_drop_sick_members() -> Result<()> {
    let mock = AzureMock::start(Config {
        nodes: 2,
        address_block: 48,
        ..Config::default()
    })
    .await?;
    let arm = Arm::new(&mock).await?;
    let vms = mock.admin().vms();
    let ip = |i: usize| -> Result<IpAddr> { Ok(vms[i].private_ips[0].parse()?) };
    // Without floating IP the rule's backendPort is where traffic goes.
    let _u0 = udp_backend(SocketAddr::new(ip(0)?, 31053), "node-0").await?;
    let _u1 = udp_backend(SocketAddr::new(ip(1)?, 31053), "node-1").await?;
    let _h0 = health(SocketAddr::new(ip(0)?, 31054), "200 OK").await?;
    let _h1 = health(SocketAddr::new(ip(1)?, 31054), "503 Service Unavailable").await?;

    let pip = arm
        .put(
            "Microsoft.Network/publicIPAddresses/udp",
            &json!({"properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await?;
    let vip: IpAddr = pip["properties"]["ipAddress"]
        .as_str()
        .context("ip")?
        .parse()?;
    let lb_id = arm.id("Microsoft.Network/loadBalancers/kubernetes");
    arm.put(
        "Microsoft.Network/loadBalancers/kubernetes",
        &json!({"properties": {
            "frontendIPConfigurations": [{"name": "u", "properties": {"publicIPAddress": {"id": pip["id"]}}}],
            "backendAddressPools": [{"name": "kubernetes", "properties": {"loadBalancerBackendAddresses": [
                {"name": "n0", "properties": {"ipAddress": ip(0)?.to_string()}},
                {"name": "n1", "properties": {"ipAddress": ip(1)?.to_string()}}]}}],
            "probes": [{"name": "hc", "properties": {"protocol": "Http", "port": 31054, "requestPath": "/healthz", "intervalInSeconds": 1}}],
            "loadBalancingRules": [{"name": "u-UDP-18053", "properties": {
                "protocol": "Udp", "frontendPort": 18053, "backendPort": 31053, "enableFloatingIP": false,
                "frontendIPConfiguration": {"id": format!("{lb_id}/frontendIPConfigurations/u")},
                "backendAddressPool": {"id": format!("{lb_id}/backendAddressPools/kubernetes")},
                "probe": {"id": format!("{lb_id}/probes/hc")}}}]
        }}),
    )
    .await?;
    let nsg_rest = "Microsoft.Network/networkSecurityGroups/nsg-ccm";
    let (_, mut nsg) = arm.call(Method::GET, nsg_rest, None).await?;
    // Without floating IP, packets reach the VMs addressed to them at the backend port,
    // so that is what the rule names (as upstream writes it).
    nsg["properties"]["securityRules"] = json!([{"name": "u-UDP-31053-Internet", "properties": {
        "protocol": "Udp", "access": "Allow", "direction": "Inbound", "priority": 500,
        "sourceAddressPrefix": "Internet", "sourcePortRange": "*",
        "destinationAddressPrefixes": [ip(0)?.to_string(), ip(1)?.to_string()],
        "destinationPortRanges": ["31053"]}}]);
    arm.put(nsg_rest, &nsg).await?;
    let frontend = SocketAddr::new(mock_azure::listener_ip(vip), 18053);
    let client: IpAddr = "127.99.0.2".parse()?;
    // node-1's probe fails: every new flow ends up on node-0.
    eventually("only the healthy member answers", || async {
        let mut answers = Vec::new();
        for _ in 0..4 {
            answers.push(udp_ask(client, frontend).await);
        }
        answers.iter().all(|a| a == "node-0").then_some(())
    })
    .await?;
    mock.shutdown().await;
    Ok(())
}
