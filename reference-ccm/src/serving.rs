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

/// Binds now (so a busy port is a startup error) and serves in the background. Paths
/// outside `always_allow` are refused with 403, as upstream's delegated authorizer refuses
/// them when it has no API server to ask (`--authorization-always-allow-paths`).
pub async fn start(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    always_allow: Vec<String>,
) -> Result<SocketAddr, ServingError> {
    let always_allow = Arc::new(always_allow);
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
            let always_allow = always_allow.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let metrics = metrics.clone();
                    let always_allow = always_allow.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(route(&req, &metrics, &always_allow))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(local)
}

/// Whether `path` is one of `patterns` (a pattern ending in `*` is a prefix, as upstream's
/// path authorizer, k8s.io/apiserver `authorization/path`).
fn allowed(path: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

fn route<B>(req: &Request<B>, metrics: &Metrics, always_allow: &[String]) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if !allowed(path, always_allow) {
        // The body upstream's authorization filter writes (apiserver `responsewriters`).
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\""),
            "reason": "Forbidden", "details": {}, "code": 403
        });
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
        *response.status_mut() = StatusCode::FORBIDDEN;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        return response;
    }
    let (status, content_type, body) = match path {
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
        let open: Vec<String> = ["/healthz", "/metrics", "/nope", "/debug/*"]
            .map(String::from)
            .to_vec();
        let get = |p: &str, allow: &[String]| {
            Request::get(p)
                .body(())
                .map(|r| route(&r, &m, allow).status())
                .ok()
        };
        assert_eq!(get("/healthz", &open), Some(StatusCode::OK));
        assert_eq!(get("/metrics", &open), Some(StatusCode::OK));
        assert_eq!(get("/nope", &open), Some(StatusCode::NOT_FOUND));
        assert_eq!(get("/debug/x", &open), Some(StatusCode::NOT_FOUND));
        // Upstream's defaults: /metrics needs authorization, which is refused.
        let defaults: Vec<String> = ["/healthz", "/readyz", "/livez"].map(String::from).to_vec();
        assert_eq!(get("/healthz", &defaults), Some(StatusCode::OK));
        assert_eq!(get("/metrics", &defaults), Some(StatusCode::FORBIDDEN));
    }
}
