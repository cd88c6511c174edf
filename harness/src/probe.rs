//! Probes of a running CCM process from the outside, for the process (OP) cases: its
//! HTTPS endpoints on `--secure-port` and the leader-election Lease it holds.
//!
//! Exists beside [`crate::env`] so process cases can look at any CCM (ours or a third
//! party's) the way an operator would: `curl -k https://host:10258/metrics` and
//! `kubectl -n kube-system get lease`.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::case::CaseError;
use crate::env::Environment;

/// The `--secure-port` a CCM was started with, read from the command line the harness
/// wrote at the top of each start in its log (`==> binary args...`; the last start and the
/// last occurrence of the flag win, as with Go's pflag). `log` is `ccm.log` for the primary
/// CCM, `ccm-<name>.log` for a replica.
pub fn secure_port(env: &Environment, log: &str) -> Option<u16> {
    secure_port_in(&env.dir().join(log))
}

fn secure_port_in(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    let command = text.lines().rfind(|l| l.starts_with("==> "))?;
    let args: Vec<&str> = command.split_whitespace().collect();
    let mut port = None;
    for (i, arg) in args.iter().enumerate() {
        if let Some(v) = arg.strip_prefix("--secure-port=") {
            port = v.parse().ok();
        } else if *arg == "--secure-port" {
            port = args.get(i + 1).and_then(|v| v.parse().ok());
        }
    }
    port
}

/// GET `https://127.0.0.1:<port><path>` accepting the CCM's self-signed certificate;
/// returns the status code and body.
pub async fn https_get(port: u16, path: &str) -> Result<(u16, String), CaseError> {
    crate::install_crypto_provider();
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| CaseError::infra("building HTTPS client", e))?;
    let url = format!("https://127.0.0.1:{port}{path}");
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| CaseError::failed(format!("GET {url}: {e}")))?;
    let status = response.status().as_u16();
    let body = response
        .text()
        .await
        .map_err(|e| CaseError::failed(format!("reading {url}: {e}")))?;
    Ok((status, body))
}

/// `spec.holderIdentity` of Lease `namespace/name`; `None` when the Lease does not exist
/// or has no holder.
pub async fn lease_holder(
    env: &Environment,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, CaseError> {
    let leases: Api<Lease> = Api::namespaced(env.client(), namespace);
    let lease = leases
        .get_opt(name)
        .await
        .map_err(|e| CaseError::infra(&format!("getting lease {namespace}/{name}"), e))?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Like [`crate::traffic::tcp_line`] but from the client address `source` (any address
/// in 127/8 works on Linux without setup), so cases can check `loadBalancerSourceRanges`.
/// `Ok(None)` when refused, closed without a line or timed out.
pub async fn tcp_line_from(
    source: std::net::IpAddr,
    addr: &str,
    timeout: Duration,
) -> Result<Option<String>, CaseError> {
    use tokio::io::AsyncBufReadExt;
    // Host names (AWS-style ingress) are resolved like any client would: first by the
    // mock clouds' DNS (ELB names), then by the system resolver.
    let addr = crate::traffic::resolve_addr(addr);
    let target = match tokio::net::lookup_host(addr.as_str()).await {
        Ok(mut found) => match found.find(|a| a.is_ipv4() == source.is_ipv4()) {
            Some(a) => a,
            None => return Ok(None),
        },
        Err(_) => return Ok(None),
    };
    let socket = match source {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(|e| CaseError::infra("creating a client socket", e))?;
    socket
        .bind(std::net::SocketAddr::new(source, 0))
        .map_err(|e| CaseError::infra(&format!("binding the client to {source}"), e))?;
    let attempt = async {
        let stream = socket.connect(target).await?;
        let mut line = String::new();
        tokio::io::BufReader::new(stream)
            .read_line(&mut line)
            .await?;
        Ok::<_, std::io::Error>(line.trim_end().to_string())
    };
    Ok(match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(line)) if !line.is_empty() => Some(line),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_port_from_the_last_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("ccm.log");
        std::fs::write(
            &log,
            "==> ccm --secure-port=1 --v=2\nsome output --secure-port=9\n==> ccm --secure-port=2 --secure-port 3\nmore\n",
        )
        .unwrap();
        assert_eq!(secure_port_in(&log), Some(3));
        assert_eq!(secure_port_in(&dir.path().join("missing.log")), None);
    }

    #[tokio::test]
    async fn resolves_mock_cloud_host_names() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"hello\n").await.unwrap();
        });
        let _guard = crate::traffic::register_resolver(std::sync::Arc::new(|host: &str| {
            (host == "lb-probe-test.elb.invalid").then(|| "127.0.0.1".parse().unwrap())
        }));
        let source = "127.0.0.8".parse().unwrap();
        let addr = format!("lb-probe-test.elb.invalid:{port}");
        let line = tcp_line_from(source, &addr, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(line.as_deref(), Some("hello"));
    }

    #[tokio::test]
    async fn connects_from_the_given_source() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, peer) = listener.accept().await.unwrap();
            s.write_all(format!("{}\n", peer.ip()).as_bytes())
                .await
                .unwrap();
        });
        let source = "127.0.0.7".parse().unwrap();
        let line = tcp_line_from(source, &addr, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(line.as_deref(), Some("127.0.0.7"));
    }
}
