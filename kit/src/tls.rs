//! TLS serving whose certificate changes under a running server: the xDS server and the
//! gateway controller's admission webhooks take their certificate from a source (a watched
//! `kubernetes.io/tls` Secret, or files read again every [`FILE_POLL`]) and use what it holds
//! at each handshake, so a renewed certificate needs no restart. With a client CA the TLS is
//! mutual and each connection carries the identities (URI SANs) its peer proved.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;

/// How often certificate files are read again.
pub const FILE_POLL: Duration = Duration::from_secs(10);

/// How long a client has for its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server's TLS material: its certificate, and the CA of its clients' certificates when it
/// asks for them (mutual TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct ServingTls {
    /// Certificate chain, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
    /// CA bundle the clients' certificates must chain to, PEM.
    pub client_ca_pem: Option<String>,
}

impl std::fmt::Debug for ServingTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingTls")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// What a server knows of a connection's peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Whether the peer proved an identity with a client certificate (mutual TLS).
    pub mutual: bool,
    /// The URI SANs of its certificate.
    pub identities: Vec<String>,
}

/// Why TLS material was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM block does not read.
    #[error("the {what}: {message}")]
    Pem {
        /// Which part.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client CA could not make a verifier.
    #[error("the client CA: {0}")]
    Verifier(String),
}

/// The rustls configuration of `tls`, offering `alpn`.
pub fn server_config(
    tls: &ServingTls,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
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
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// One connection after its handshake.
pub struct Accepted {
    /// The TLS stream.
    pub stream: TlsStream<TcpStream>,
    /// Who the peer proved to be.
    pub peer: Peer,
    /// Where it connected from.
    pub remote: SocketAddr,
}

/// The connections of `listener` after their TLS handshake with the configuration `source`
/// holds at the time (none are taken before it holds one). Handshakes run beside the accept
/// loop, so a slow client holds up no other. `server` names the server in logs.
pub fn incoming(
    listener: tokio::net::TcpListener,
    mut source: watch::Receiver<Option<ServingTls>>,
    alpn: &'static [&'static [u8]],
    server: &'static str,
) -> tokio_stream::wrappers::ReceiverStream<Result<Accepted, std::io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut current: Option<(bool, tokio_rustls::TlsAcceptor)> = None;
        let mut refresh = true;
        // A source whose sender is gone holds its last value for good.
        let mut open = true;
        loop {
            if refresh {
                refresh = false;
                current = match source.borrow_and_update().as_ref().map(|tls| {
                    server_config(tls, alpn).map(|c| (tls.client_ca_pem.is_some(), c.into()))
                }) {
                    Some(Ok(acceptor)) => {
                        tracing::info!(server, mutual = acceptor.0, "serving certificate loaded");
                        Some(acceptor)
                    }
                    Some(Err(e)) => {
                        tracing::error!(server, error = %e, "the TLS material was refused; keeping what it had");
                        current
                    }
                    None => {
                        tracing::warn!(
                            server,
                            "no serving certificate yet; connections are closed until there is one"
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
            let (stream, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(server, error = %e, "accepting a connection");
                    continue;
                }
            };
            let Some((mutual, acceptor)) = current.clone() else {
                tracing::warn!(server, %remote, "a connection before the serving certificate: closed");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                    .await
                {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::warn!(server, %remote, error = %e, "a client failed the TLS handshake");
                        return;
                    }
                    Err(_) => {
                        tracing::warn!(server, %remote, "a client's TLS handshake timed out");
                        return;
                    }
                };
                let identities = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|leaf| crate::pki::uri_sans(leaf))
                    .unwrap_or_default();
                let _ = tx
                    .send(Ok(Accepted {
                        stream,
                        peer: Peer { mutual, identities },
                        remote,
                    }))
                    .await;
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Replaces what `tx` holds with `tls` when it differs; whether it did.
fn offer(tx: &watch::Sender<Option<ServingTls>>, tls: ServingTls) -> bool {
    tx.send_if_modified(|current| {
        if current.as_ref() == Some(&tls) {
            return false;
        }
        *current = Some(tls);
        true
    })
}

/// The TLS material of a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, and `ca.crt` as
/// the client CA), when it holds a certificate and key.
#[cfg(feature = "kube")]
pub fn from_secret(secret: &k8s_openapi::api::core::v1::Secret) -> Option<ServingTls> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .filter(|t| !t.trim().is_empty())
    };
    Some(ServingTls {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        client_ca_pem: text("ca.crt"),
    })
}

/// The serving certificate of the Secret `key`, kept current until `stop` (`None` until the
/// Secret exists). With `client_ca` false, a `ca.crt` in the Secret is not asked of clients.
#[cfg(feature = "kube")]
pub fn watch_secret(
    client: kube::Client,
    key: fairlead_key::ObjectKey,
    client_ca: bool,
    stop: tokio_util::sync::CancellationToken,
) -> watch::Receiver<Option<ServingTls>> {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let (tx, rx) = watch::channel(None);
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client, key.namespace());
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name()));
    tokio::spawn(async move {
        let mut events = std::pin::pin!(
            watcher(api, config)
                .applied_objects()
                .backoff(crate::watch::backoff())
        );
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => match event {
                    Some(Ok(secret)) => match from_secret(&secret) {
                        Some(mut tls) => {
                            if !client_ca {
                                tls.client_ca_pem = None;
                            }
                            offer(&tx, tls);
                        }
                        None => tracing::warn!(secret = %key, "the serving certificate Secret holds no tls.crt and tls.key"),
                    },
                    Some(Err(e)) => tracing::warn!(secret = %key, error = %e, "watching the serving certificate Secret; retrying"),
                    None => return,
                },
            }
        }
    });
    rx
}

/// The serving certificate of files (`cert`, `key`, and the client CA), read now and again
/// every [`FILE_POLL`] until `stop`; an error when they cannot be read now.
pub fn watch_files(
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<watch::Receiver<Option<ServingTls>>> {
    let read = move || -> std::io::Result<ServingTls> {
        Ok(ServingTls {
            cert_pem: std::fs::read_to_string(&cert)?,
            key_pem: std::fs::read_to_string(&key)?,
            client_ca_pem: client_ca
                .as_ref()
                .map(std::fs::read_to_string)
                .transpose()?,
        })
    };
    let (tx, rx) = watch::channel(Some(read()?));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(FILE_POLL) => {}
            }
            match read() {
                Ok(tls) => {
                    offer(&tx, tls);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the serving certificate files; keeping the last ones")
                }
            }
        }
    });
    Ok(rx)
}
