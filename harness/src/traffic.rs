//! Real traffic for load-balancer cases: connect to an ingress address and read what the
//! backend answers (the simulated kube-proxy writes its node's name).

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;

/// Connects to `addr`, reads one line. `Ok(None)` when the connection was refused, reset,
/// closed without a line, or timed out: the caller decides whether that is a failure.
pub async fn tcp_line(addr: &str, timeout: Duration) -> std::io::Result<Option<String>> {
    let attempt = async {
        let stream = TcpStream::connect(addr).await?;
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
