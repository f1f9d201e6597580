//! The xDS server on a listener, over TLS (mutual when a client CA is given), serving a
//! cache until the runtime shuts down.

use std::net::SocketAddr;
use std::sync::Arc;

use fairlead_kit::Runtime;

use crate::cache::Cache;
use crate::server::{Ads, Observer};

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

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("binding the xDS server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

impl XdsTls {
    /// A source that holds `self` for good.
    pub fn fixed(self) -> tokio::sync::watch::Receiver<Option<XdsTls>> {
        tokio::sync::watch::channel(Some(self)).1
    }
}

/// Serves `cache` on `addr` in `runtime`, telling `observer` what happens on the streams:
/// over TLS with what `tls` holds at each handshake (read again whenever it changes), in
/// plaintext when `tls` is `None`. Returns the bound address.
pub async fn serve(
    runtime: &Runtime,
    addr: SocketAddr,
    tls: Option<tokio::sync::watch::Receiver<Option<XdsTls>>>,
    cache: Arc<Cache>,
    observer: Arc<dyn Observer>,
) -> Result<SocketAddr, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let routes =
        crate::services::routes(Ads::new(cache, observer).closing_on(runtime.shutdown.token()));
    let shutdown = runtime.shutdown.token().cancelled_owned();
    let server = tonic::transport::Server::builder().add_routes(routes);
    let served: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>,
    > = match tls {
        Some(source) => {
            let mutual = source
                .borrow()
                .as_ref()
                .is_none_or(|tls| tls.client_ca_pem.is_some());
            if !mutual {
                tracing::warn!(
                    "xDS without client certificates (--client-ca-file): any client that reaches the port can name any Gateway and receive its configuration, TLS private keys included"
                );
            }
            tracing::info!(addr = %bound, "xDS server listening (TLS)");
            Box::pin(
                server
                    .serve_with_incoming_shutdown(crate::tls::incoming(listener, source), shutdown),
            )
        }
        None => {
            tracing::warn!(addr = %bound, "xDS server listening in plaintext (--insecure)");
            Box::pin(
                server.serve_with_incoming_shutdown(crate::server::incoming(listener), shutdown),
            )
        }
    };
    runtime.shutdown.spawn(async move {
        if let Err(e) = served.await {
            tracing::error!(error = %e, "xDS server failed");
        }
    });
    Ok(bound)
}
