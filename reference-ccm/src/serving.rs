//! HTTPS serving of `/healthz` and `/metrics` on `--bind-address:--secure-port`.
//!
//! Exists because upstream CCMs serve these over TLS with a self-signed certificate
//! when none is configured (`k8s.io/apiserver` `SecureServingOptions`), and the harness
//! probes them the same way for any CCM.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error("generating the serving certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("building the TLS config: {0}")]
    Tls(#[from] tokio_rustls::rustls::Error),
    #[error("failed to listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds now (so a busy port is a startup error) and serves in the background.
pub async fn start(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<SocketAddr, ServingError> {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServingError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServingError::Bind { addr, source })?;
    tracing::info!(%local, "serving securely");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, std::convert::Infallible>(route(&req, &metrics)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(local)
}

fn route<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match req.uri().path() {
        "/healthz" | "/livez" | "/readyz" => {
            (StatusCode::OK, "text/plain; charset=utf-8", "ok".to_owned())
        }
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let m = Metrics::default();
        let get = |p: &str| {
            Request::get(p)
                .body(())
                .map(|r| route(&r, &m).status())
                .ok()
        };
        assert_eq!(get("/healthz"), Some(StatusCode::OK));
        assert_eq!(get("/metrics"), Some(StatusCode::OK));
        assert_eq!(get("/nope"), Some(StatusCode::NOT_FOUND));
    }
}
