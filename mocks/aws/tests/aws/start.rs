//! The public lifecycle over a real socket, with no Python needed: start on an ephemeral
//! port, the ready-file fields, an unsigned request refused in EC2's envelope, the admin
//! API reachable, and shutdown closing the port.

use anyhow::Result;
use mock_aws::{Config, MockAws};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http(addr: std::net::SocketAddr, request: &str) -> Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    Ok(reply)
}

#[tokio::test]
async fn start_ready_info_and_shutdown() -> Result<()> {
    let mock = MockAws::start(Config::default()).await?;
    let addr = mock.local_addr();
    let info = mock.ready_info();
    assert_eq!(info.endpoint, format!("http://{addr}"));
    assert_eq!(info.admin_url, format!("http://{addr}/admin"));
    assert_eq!(info.region, "us-west-2");
    assert!(info.access_key_id.starts_with("AKIA") && info.access_key_id.len() == 20);
    assert_eq!(info.secret_access_key.len(), 40);
    let json = serde_json::to_value(&info)?;
    for key in [
        "endpoint",
        "region",
        "access_key_id",
        "secret_access_key",
        "admin_url",
    ] {
        assert!(json[key].is_string(), "{key}");
    }

    let body = "Action=DescribeInstances&Version=2016-11-15";
    let reply = http(
        addr,
        &format!(
            "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await?;
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    assert!(reply.contains("<Code>AuthFailure</Code>"), "{reply}");

    let reply = http(
        addr,
        "GET /admin/instances HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await?;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(mock.admin().instances().len(), 3);
    assert!(
        reply.contains("ip-127-40-0-12.us-west-2.compute.internal"),
        "{reply}"
    );

    mock.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    Ok(())
}
