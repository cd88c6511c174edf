//! Real traffic for load-balancer cases: connect to an ingress address and read what the
//! backend answers (the simulated kube-proxy writes its node's name).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;

/// Answers "which address does this load-balancer hostname stand for" (a mock cloud's DNS),
/// or "where is this reported address served" (mock Azure reports public IPs in
/// 198.18/15 and serves them on loopback twins); `None`: not one of mine.
pub type Resolver = Arc<dyn Fn(&str) -> Option<IpAddr> + Send + Sync>;

static RESOLVERS: Mutex<Vec<(u64, Resolver)>> = Mutex::new(Vec::new());

/// Keeps a resolver registered; dropping it unregisters.
pub struct ResolverGuard(u64);

impl Drop for ResolverGuard {
    fn drop(&mut self) {
        let mut all = RESOLVERS.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(id, _)| *id != self.0);
    }
}

/// Registers a resolver for load-balancer hostnames (a mock whose load balancers are
/// reported by DNS name, as AWS ELBs are) or addresses (a mock that serves a reported
/// address elsewhere) for as long as the guard lives.
pub fn register_resolver(resolver: Resolver) -> ResolverGuard {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    RESOLVERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((id, resolver));
    ResolverGuard(id)
}

/// `host:port` with a registered load-balancer hostname or reported address replaced by
/// the address that serves it; anything else unchanged (hermetic names do not exist in
/// any real DNS).
pub fn resolve_addr(addr: &str) -> String {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return addr.to_string();
    };
    if host.starts_with('[') {
        return addr.to_string();
    }
    let resolvers: Vec<Resolver> = RESOLVERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    match resolvers.iter().find_map(|r| r(host)) {
        Some(ip) => SocketAddr::new(ip, port.parse().unwrap_or(0)).to_string(),
        None => addr.to_string(),
    }
}

/// Connects to `addr` (a load-balancer hostname is resolved through the registered
/// resolvers), reads one line. `Ok(None)` when the connection was refused, reset,
/// closed without a line, or timed out: the caller decides whether that is a failure.
pub async fn tcp_line(addr: &str, timeout: Duration) -> std::io::Result<Option<String>> {
    let attempt = async {
        let stream = TcpStream::connect(resolve_addr(addr)).await?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await?;
        Ok::<_, std::io::Error>(line.trim_end().to_string())
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(line)) if !line.is_empty() => Ok(Some(line)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn registered_hostnames_resolve_until_the_guard_drops() {
        let guard = register_resolver(Arc::new(|h: &str| {
            (h == "lb-1.example.elb.amazonaws.com").then(|| IpAddr::from([127, 51, 0, 10]))
        }));
        assert_eq!(
            resolve_addr("lb-1.example.elb.amazonaws.com:8080"),
            "127.51.0.10:8080"
        );
        assert_eq!(resolve_addr("127.0.0.1:80"), "127.0.0.1:80");
        assert_eq!(resolve_addr("other.example:80"), "other.example:80");
        let twin = register_resolver(Arc::new(|h: &str| {
            (h == "198.18.7.10").then(|| IpAddr::from([127, 61, 7, 10]))
        }));
        assert_eq!(resolve_addr("198.18.7.10:80"), "127.61.7.10:80");
        assert_eq!(resolve_addr("[::1]:80"), "[::1]:80");
        drop(twin);
        drop(guard);
        assert_eq!(
            resolve_addr("lb-1.example.elb.amazonaws.com:8080"),
            "lb-1.example.elb.amazonaws.com:8080"
        );
    }

    #[tokio::test]
    async fn reads_the_first_line_and_tolerates_refusals() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"node-a\n").await.unwrap();
        });
        assert_eq!(
            tcp_line(&addr, Duration::from_secs(2))
                .await
                .unwrap()
                .as_deref(),
            Some("node-a")
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        assert_eq!(
            tcp_line(&closed, Duration::from_secs(2)).await.unwrap(),
            None
        );
    }
}
