//! Serving a router on a TCP port with graceful shutdown: every mock and the embedded API
//! server need the same "bind 127.0.0.1:0, learn the port, serve until told to stop".
//! Binding is separate from serving so a mock can put its own address into the documents
//! it serves (catalog URLs, links) before the first request arrives.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long `shutdown` waits for open connections before dropping them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("binding {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("reading the bound address of {addr}: {source}")]
    LocalAddr { addr: SocketAddr, source: io::Error },
}

/// A bound, not yet serving, listener.
#[derive(Debug)]
pub struct BoundListener {
    listener: TcpListener,
    addr: SocketAddr,
}

/// Binds `listen` (port 0 picks a free port).
pub async fn bind(listen: SocketAddr) -> Result<BoundListener, ServeError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::LocalAddr {
            addr: listen,
            source,
        })?;
    Ok(BoundListener { listener, addr })
}

/// Binds and serves in one step.
pub async fn serve(listen: SocketAddr, router: Router) -> Result<ServerHandle, ServeError> {
    Ok(bind(listen).await?.serve(router))
}

impl BoundListener {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port` for clients: an unspecified bind address (0.0.0.0, ::) is
    /// replaced by loopback, which always reaches it.
    pub fn base_url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// The listener itself, for servers with their own accept loop (TLS).
    pub(crate) fn into_listener(self) -> TcpListener {
        self.listener
    }

    /// Starts serving on the current tokio runtime.
    pub fn serve(self, router: Router) -> ServerHandle {
        let (tx, rx) = oneshot::channel::<()>();
        let addr = self.addr;
        let task = tokio::spawn(async move {
            let result = axum::serve(self.listener, router)
                .with_graceful_shutdown(async move {
                    // Either an explicit shutdown or the handle being dropped.
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(%addr, error = %e, "server stopped with an error");
            }
        });
        ServerHandle {
            addr,
            shutdown: Some(tx),
            task,
        }
    }
}

/// A running server. Dropping it also starts a graceful shutdown.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    pub(crate) fn from_parts(
        addr: SocketAddr,
        shutdown: oneshot::Sender<()>,
        task: JoinHandle<()>,
    ) -> Self {
        ServerHandle {
            addr,
            shutdown: Some(shutdown),
            task,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets in-flight requests finish (up to a grace period), then drops
    /// the remaining connections.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let abort = self.task.abort_handle();
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

/// A response that makes the server drop the connection without sending anything: its
/// body fails before the first byte, and hyper closes a connection whose body fails
/// before the head is flushed. This is how a mock injects a "connection reset" fault
/// (what a client sees when a load balancer in front of the real API drops it).
pub fn connection_reset() -> axum::response::Response {
    axum::response::Response::new(axum::body::Body::new(FailingBody))
}

struct FailingBody;

impl axum::body::HttpBody for FailingBody {
    type Data = axum::body::Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(Some(Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "injected connection reset",
        ))))
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;

    use super::*;

    #[tokio::test]
    async fn serves_on_ephemeral_port_and_shuts_down() {
        let bound = bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let addr = bound.local_addr();
        assert_ne!(addr.port(), 0);
        assert_eq!(bound.base_url(), format!("http://{addr}"));
        let handle = bound.serve(Router::new().route("/", get(|| async { "hi" })));

        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.expect("read");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("hi"), "{reply}");

        handle.shutdown().await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test]
    async fn unspecified_bind_advertises_loopback() {
        let bound = bind("0.0.0.0:0".parse().expect("addr"))
            .await
            .expect("bind");
        assert!(bound.base_url().starts_with("http://127.0.0.1:"));
    }

    #[tokio::test]
    async fn bind_conflict_is_an_error() {
        let first = bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let again = bind(first.local_addr()).await;
        assert!(matches!(again, Err(ServeError::Bind { .. })));
    }

    #[tokio::test]
    async fn connection_reset_sends_nothing() {
        let handle = serve(
            "127.0.0.1:0".parse().expect("addr"),
            Router::new().route("/", get(|| async { connection_reset() })),
        )
        .await
        .expect("serve");
        let mut stream = tokio::net::TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .expect("write");
        let mut reply = Vec::new();
        // Either a clean EOF or a reset; never a byte of response.
        let _ = stream.read_to_end(&mut reply).await;
        assert!(reply.is_empty(), "{}", String::from_utf8_lossy(&reply));
        handle.shutdown().await;
    }
}
