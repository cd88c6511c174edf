//! Replays what govmomi's vAPI client sends on a pooled connection: a body-less `POST`
//! written as `Transfer-Encoding: chunked`, the final `0\r\n\r\n` arriving in a later
//! TLS record (Go's HTTP client flushes the head first for a body of unknown length),
//! then the next call on the same connection. The mock must keep the connection open,
//! as vCenter does; it used to answer before the chunked body ended and hyper then
//! dropped the connection, so govmomi's next call failed with `EOF`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use mock_vsphere::{Config, VsphereMock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn connect(addr: std::net::SocketAddr, ca_file: &str) -> anyhow::Result<Tls> {
    mock_cloud::tls::install_ring_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file)? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn = rustls::ClientConnection::new(
        Arc::new(config),
        ServerName::try_from("127.0.0.1")?.to_owned(),
    )?;
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

/// Reads one HTTP/1.1 response with a `content-length` body: (status line, body).
fn read_response(s: &mut Tls, deadline: Instant) -> anyhow::Result<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string();
                let status = head.lines().next().unwrap_or_default().to_string();
                return Ok((status, body));
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no complete response by the deadline: {:?}",
            String::from_utf8_lossy(&buf)
        );
        match s.read(&mut chunk) {
            Ok(0) => anyhow::bail!(
                "connection closed after {:?}",
                String::from_utf8_lossy(&buf)
            ),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodyless_post_keeps_the_connection_open() -> anyhow::Result<()> {
    let mock = VsphereMock::start(Config::default()).await?;
    let ready = mock.ready_info();
    let ca = ready.ca_file.clone().unwrap_or_default();
    let addr = mock.local_addr();
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", ready.username, ready.password));
    let outcome = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
        let mut s = connect(addr, &ca)?;
        s.sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        // The head, flushed on its own, as Go writes it for an `io.MultiReader` body.
        write!(
            s,
            "POST /rest/com/vmware/cis/session HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             User-Agent: govmomi/0.53.0\r\nAuthorization: Basic {basic}\r\n\
             Vmware-Use-Header-Authn: true\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )?;
        s.flush()?;
        // Give the server the chance to answer early (it must not: the body is not over).
        let early = read_response(&mut s, Instant::now() + Duration::from_millis(300));
        // The chunked body's end, in a record of its own.
        s.write_all(b"0\r\n\r\n")?;
        s.flush()?;
        let (status, body) = match early {
            Ok(answer) => answer,
            Err(_) => read_response(&mut s, Instant::now() + Duration::from_secs(10))?,
        };
        anyhow::ensure!(status.starts_with("HTTP/1.1 200"), "login: {status} {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let session = v["value"].as_str().unwrap_or_default().to_string();
        // The next call on the same connection, as Go's pool reuses it.
        write!(
            s,
            "POST /rest/com/vmware/cis/session?~action=get HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             vmware-api-session-id: {session}\r\nContent-Length: 0\r\n\r\n"
        )?;
        s.flush()?;
        let (status, body) = read_response(&mut s, Instant::now() + Duration::from_secs(10))?;
        anyhow::ensure!(
            status.starts_with("HTTP/1.1 200"),
            "session get: {status} {body}"
        );
        Ok(body)
    })
    .await??;
    let v: serde_json::Value = serde_json::from_str(&outcome)?;
    assert_eq!(v["value"]["user"], "administrator@vsphere.local", "{v}");
    mock.shutdown().await;
    Ok(())
}
