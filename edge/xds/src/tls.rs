//! The xDS server's transport: TLS (mutual when a client CA is given) whose certificate and
//! CA are read again whenever their source changes (a renewed serving certificate needs no
//! restart), and the identity each proxy proves. A proxy's client certificate carries a URI
//! SAN naming its Gateway (`spiffe://<trust domain>/ns/<namespace>/gateway/<name>`);
//! [`authorize`] lets it ask only for that Gateway's configuration. Expired certificates,
//! and certificates of another CA, fail the handshake.

use std::sync::Arc;

use fairlead_key::ObjectKey;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;

/// The TLS of the xDS server: its certificate, and the CA of the proxies' client certificates
/// when it asks for them (mutual TLS).
#[derive(Clone)]
pub struct XdsTls {
    /// Certificate chain, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
    /// CA bundle the clients' certificates must chain to, PEM.
    pub client_ca_pem: Option<String>,
}

impl std::fmt::Debug for XdsTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsTls")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// What the server knows of a connection's peer (in each request's extensions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Whether the peer proved an identity with a client certificate (mutual TLS).
    pub mutual: bool,
    /// The URI SANs of its certificate.
    pub identities: Vec<String>,
}

/// The Gateway a SPIFFE ID of the form `spiffe://<domain>/ns/<namespace>/gateway/<name>`
/// names.
pub fn gateway_of(uri: &str) -> Option<ObjectKey> {
    let path = uri.strip_prefix("spiffe://")?.split_once('/')?.1;
    match path.split('/').collect::<Vec<_>>()[..] {
        ["ns", namespace, "gateway", name] if !namespace.is_empty() && !name.is_empty() => {
            Some(ObjectKey::new(namespace, name))
        }
        _ => None,
    }
}

/// Whether `peer` may receive `gateway`'s configuration: always without mutual TLS (the
/// server warns at start that any client may then name any Gateway), else only when its
/// certificate names that Gateway. The refusal says what the certificate names.
pub fn authorize(peer: Option<&Peer>, gateway: &ObjectKey) -> Result<(), String> {
    let Some(peer) = peer.filter(|p| p.mutual) else {
        return Ok(());
    };
    let named: Vec<ObjectKey> = peer
        .identities
        .iter()
        .filter_map(|uri| gateway_of(uri))
        .collect();
    if named.contains(gateway) {
        return Ok(());
    }
    Err(match named.as_slice() {
        [] => format!(
            "the client certificate names no Gateway (URI SANs: {:?}); a proxy may ask only for the Gateway its certificate names, not {gateway}",
            peer.identities
        ),
        named => format!(
            "the client certificate names Gateway {}; it may not ask for {gateway}",
            named
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// A TLS connection and its peer, as tonic serves it.
pub struct Connection {
    stream: TlsStream<TcpStream>,
    peer: Peer,
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Why TLS material was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM block does not read.
    #[error("the xDS server's {what}: {message}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("the xDS server's TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client CA could not make a verifier.
    #[error("the xDS server's client CA: {0}")]
    Verifier(String),
}

/// The rustls configuration of `tls` (HTTP/2 only).
pub fn server_config(tls: &XdsTls) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let pem = |what: &'static str, e: rustls_pki_types::pem::Error| TlsError::Pem {
        what,
        message: e.to_string(),
    };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| pem("certificate", e))?;
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes()).map_err(|e| pem("key", e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let mut config = match &tls.client_ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.map_err(|e| pem("client CA", e))?)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key)?
        }
        None => builder.with_no_client_auth().with_single_cert(chain, key)?,
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The connections of `listener` after their TLS handshake with the configuration `source`
/// holds at the time (none are taken before it holds one), each with its [`Peer`]. Handshakes
/// run beside the accept loop, so a slow client holds up no other.
pub fn incoming(
    listener: tokio::net::TcpListener,
    mut source: watch::Receiver<Option<XdsTls>>,
) -> tokio_stream::wrappers::ReceiverStream<Result<Connection, std::io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut current: Option<(bool, tokio_rustls::TlsAcceptor)> = None;
        let mut refresh = true;
        // A source whose sender is gone holds its last value for good.
        let mut open = true;
        loop {
            if refresh {
                refresh = false;
                current = match source
                    .borrow_and_update()
                    .as_ref()
                    .map(|tls| server_config(tls).map(|c| (tls.client_ca_pem.is_some(), c.into())))
                {
                    Some(Ok(acceptor)) => {
                        tracing::info!(mutual = acceptor.0, "xDS server certificate loaded");
                        Some(acceptor)
                    }
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "the xDS server's TLS material was refused; keeping what it had");
                        current
                    }
                    None => {
                        tracing::warn!(
                            "the xDS server has no serving certificate yet; connections wait for it"
                        );
                        None
                    }
                };
            }
            let accepted = tokio::select! {
                () = tx.closed() => return,
                changed = source.changed(), if open => {
                    match changed {
                        Ok(()) => refresh = true,
                        Err(_) => open = false,
                    }
                    continue;
                }
                accepted = listener.accept() => accepted,
            };
            let (stream, address) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(error = %e, "accepting an xDS connection");
                    continue;
                }
            };
            let Some((mutual, acceptor)) = current.clone() else {
                tracing::warn!(%address, "an xDS connection before the serving certificate: closed");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            tokio::spawn(async move {
                let handshake = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    acceptor.accept(stream),
                )
                .await;
                let stream = match handshake {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::warn!(%address, error = %e, "an xDS client failed the TLS handshake");
                        return;
                    }
                    Err(_) => {
                        tracing::warn!(%address, "an xDS client's TLS handshake timed out");
                        return;
                    }
                };
                let identities = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|leaf| fairlead_kit::pki::uri_sans(leaf))
                    .unwrap_or_default();
                let _ = tx
                    .send(Ok(Connection {
                        stream,
                        peer: Peer { mutual, identities },
                    }))
                    .await;
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_may_ask_only_for_the_gateway_its_certificate_names() {
        let main = ObjectKey::new("d8-alb", "main");
        assert_eq!(
            gateway_of("spiffe://cluster.local/ns/d8-alb/gateway/main"),
            Some(main.clone())
        );
        assert_eq!(gateway_of("spiffe://cluster.local/ns/d8-alb/sa/main"), None);
        assert_eq!(gateway_of("https://example.com/ns/a/gateway/b"), None);
        let peer = Peer {
            mutual: true,
            identities: vec!["spiffe://cluster.local/ns/d8-alb/gateway/main".into()],
        };
        assert_eq!(authorize(Some(&peer), &main), Ok(()));
        let refused = authorize(Some(&peer), &ObjectKey::new("team", "shop")).unwrap_err();
        assert!(
            refused.contains("names Gateway d8-alb/main") && refused.contains("team/shop"),
            "{refused}"
        );
        let anonymous = Peer {
            mutual: true,
            identities: vec![],
        };
        assert!(
            authorize(Some(&anonymous), &main)
                .unwrap_err()
                .contains("names no Gateway")
        );
        // Without mutual TLS there is no identity to check.
        assert_eq!(authorize(None, &main), Ok(()));
        assert_eq!(authorize(Some(&Peer::default()), &main), Ok(()));
    }
}
