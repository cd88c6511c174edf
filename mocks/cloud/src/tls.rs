//! A throwaway certificate authority and HTTPS serving for the mocks and the embedded API
//! server.
//!
//! Exists because some real clients refuse plain HTTP (pyvmomi and govc expect
//! `https://…/sdk`; kubeconfigs written for users should carry `certificate-authority-data`),
//! and every server here needs the same three things: a CA generated at start, a serving
//! certificate for `127.0.0.1`/`localhost` signed by it, and an accept loop that hands
//! decrypted connections to an axum [`Router`]. Client certificates signed by the same CA
//! are optional; when one is presented, its chain is verified and the leaf is attached to
//! the request as a [`PeerCertificates`] extension so the server can map it to a user.

use std::io;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::serve::{BoundListener, ServerHandle};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating a certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("building the client-certificate verifier: {0}")]
    Verifier(String),
    #[error(
        "a client certificate can carry at most one group here (got {0}): rcgen's distinguished name holds one organization"
    )]
    TooManyGroups(usize),
}

/// A certificate and its private key, PEM and DER.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Issued {
    fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// Whether the server asks for client certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// Never asks.
    #[default]
    None,
    /// Asks; a client without a certificate is still served (it may use a token), a client
    /// with one must present a chain to this CA.
    Optional,
}

/// The client certificate chain a TLS peer presented, leaf first; attached to every request
/// of that connection.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// A certificate authority that lives as long as the process.
pub struct TestCa {
    key: KeyPair,
    params: CertificateParams,
    ca: Issued,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A fresh CA whose subject common name is `name`.
    pub fn generate(name: &str) -> Result<TestCa, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        let ca = Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        };
        Ok(TestCa { key, params, ca })
    }

    /// The CA certificate, PEM (what goes into a kubeconfig or a `ca_file`).
    pub fn ca_pem(&self) -> &str {
        &self.ca.cert_pem
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca.cert_der
    }

    /// Writes the CA certificate as PEM.
    pub fn write_ca_file(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.ca_pem())
    }

    /// A serving certificate for `sans` (DNS names or IP literals).
    pub fn issue_server(&self, sans: &[&str]) -> Result<Issued, TlsError> {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            sans.first().copied().unwrap_or("localhost"),
        );
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate: subject CN = `user`, O = the group (how the Kubernetes API
    /// server maps client certificates to users and groups). At most one group: rcgen's
    /// distinguished name keeps one value per attribute type, so a second would silently
    /// replace the first; more than one is refused instead.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<Issued, TlsError> {
        if groups.len() > 1 {
            return Err(TlsError::TooManyGroups(groups.len()));
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, user);
        for group in groups {
            dn.push(DnType::OrganizationName, *group);
        }
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<Issued, TlsError> {
        let key = KeyPair::generate()?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }

    /// A rustls server configuration serving a fresh certificate for `sans`, offering
    /// HTTP/1.1 over ALPN.
    pub fn server_config(
        &self,
        sans: &[&str],
        client_auth: ClientAuth,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        install_ring_provider();
        let serving = self.issue_server(sans)?;
        let builder = rustls::ServerConfig::builder();
        let builder = match client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            ClientAuth::Optional => {
                let mut roots = RootCertStore::empty();
                roots.add(self.ca.cert_der.clone())?;
                let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| TlsError::Verifier(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(
            vec![serving.cert_der.clone(), self.ca.cert_der.clone()],
            serving.private_key(),
        )?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The serving SANs every local server uses.
pub const LOCAL_SANS: &[&str] = &["127.0.0.1", "localhost"];

/// Installs ring as the process's rustls provider unless one is installed already.
pub fn install_ring_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl BoundListener {
    /// `https://host:port` for clients (an unspecified bind address becomes loopback).
    pub fn base_url_https(&self) -> String {
        self.base_url().replacen("http://", "https://", 1)
    }

    /// Serves `router` over TLS with `config` on the current tokio runtime. A failed
    /// handshake only closes that connection.
    pub fn serve_tls(self, router: Router, config: Arc<rustls::ServerConfig>) -> ServerHandle {
        let (tx, mut rx) = oneshot::channel::<()>();
        let addr = self.local_addr();
        let listener = self.into_listener();
        let acceptor = TlsAcceptor::from(config);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    _ = &mut rx => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((tcp, _peer)) = accepted else {
                    continue;
                };
                // No Nagle: a response leaves as several TLS records (head, body, close
                // notify); with Nagle on, a later record waits for the client's delayed
                // ACK of the earlier one, adding up to 40 ms to a call on Linux. Go's
                // net/http (vcsim, the real API server) sets TCP_NODELAY too.
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let router = router.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let peer = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| PeerCertificates(Arc::new(c.to_vec())));
                    let service = hyper::service::service_fn(move |mut req| {
                        if let Some(peer) = &peer {
                            req.extensions_mut().insert(peer.clone());
                        }
                        let router = router.clone();
                        async move {
                            use tower::ServiceExt;
                            router.oneshot(req.map(axum::body::Body::new)).await
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
                // Reap finished connections so the set does not grow without bound.
                while connections.try_join_next().is_some() {}
            }
            connections.shutdown().await;
        });
        ServerHandle::from_parts(addr, tx, task)
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;

    use super::*;

    #[test]
    fn issues_server_and_client_certificates_signed_by_the_ca() {
        let ca = TestCa::generate("test-ca").expect("ca");
        assert!(ca.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let server = ca.issue_server(LOCAL_SANS).expect("server cert");
        assert!(server.key_pem.contains("PRIVATE KEY"));
        let client = ca
            .issue_client("alice", &["system:masters"])
            .expect("client");
        assert_ne!(client.cert_der, server.cert_der);
        assert!(matches!(
            ca.issue_client("alice", &["a", "b"]),
            Err(TlsError::TooManyGroups(2))
        ));
        ca.server_config(LOCAL_SANS, ClientAuth::Optional)
            .expect("config with client auth");
    }

    #[tokio::test]
    async fn serves_https_that_a_client_trusting_the_ca_accepts() {
        let ca = TestCa::generate("test-ca").expect("ca");
        let config = ca.server_config(LOCAL_SANS, ClientAuth::None).expect("cfg");
        let bound = crate::serve::bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let url = bound.base_url_https();
        assert!(url.starts_with("https://127.0.0.1:"));
        let handle = bound.serve_tls(Router::new().route("/", get(|| async { "hi" })), config);

        let mut roots = RootCertStore::empty();
        roots.add(ca.ca_der().clone()).expect("root");
        let client_config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
        let tcp = tokio::net::TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let mut tls = connector.connect(name, tcp).await.expect("handshake");
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        tls.read_to_end(&mut out).await.ok();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("hi"), "{text}");
        handle.shutdown().await;
    }

    #[tokio::test]
    async fn an_untrusting_client_fails_the_handshake_and_the_server_keeps_serving() {
        let ca = TestCa::generate("test-ca").expect("ca");
        let other = TestCa::generate("other-ca").expect("ca");
        let config = ca.server_config(LOCAL_SANS, ClientAuth::None).expect("cfg");
        let bound = crate::serve::bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let handle = bound.serve_tls(Router::new().route("/", get(|| async { "hi" })), config);
        let mut roots = RootCertStore::empty();
        roots.add(other.ca_der().clone()).expect("root");
        let client_config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
        let tcp = tokio::net::TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        assert!(connector.connect(name.clone(), tcp).await.is_err());
        // Plain garbage instead of a ClientHello is dropped too.
        let mut raw = tokio::net::TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        use tokio::io::AsyncWriteExt;
        raw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.ok();
        drop(raw);
        handle.shutdown().await;
    }
}
