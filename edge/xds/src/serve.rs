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
    /// The TLS settings were refused.
    #[error("the xDS server's TLS configuration: {0}")]
    Tls(#[from] tonic::transport::Error),
}

/// Serves `cache` on `addr` (over TLS unless `tls` is `None`) in `runtime`, telling `observer`
/// what happens on the streams. Returns the bound address.
pub async fn serve(
    runtime: &Runtime,
    addr: SocketAddr,
    tls: Option<XdsTls>,
    cache: Arc<Cache>,
    observer: Arc<dyn Observer>,
) -> Result<SocketAddr, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let mut builder = tonic::transport::Server::builder();
    match &tls {
        Some(tls) => {
            use tonic::transport::{Certificate, Identity, ServerTlsConfig};
            let mut config =
                ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
            if let Some(ca) = &tls.client_ca_pem {
                config = config.client_ca_root(Certificate::from_pem(ca));
            } else {
                tracing::warn!(
                    "xDS without client certificates (--client-ca-file): any client that reaches the port can name any Gateway and receive its configuration, TLS private keys included"
                );
            }
            builder = builder.tls_config(config)?;
            tracing::info!(addr = %bound, mutual = tls.client_ca_pem.is_some(), "xDS server listening (TLS)");
        }
        None => {
            tracing::warn!(addr = %bound, "xDS server listening in plaintext (--insecure)");
        }
    }
    let server = builder
        .add_routes(crate::services::routes(
            Ads::new(cache, observer).closing_on(runtime.shutdown.token()),
        ))
        .serve_with_incoming_shutdown(
            crate::server::incoming(listener),
            runtime.shutdown.token().cancelled_owned(),
        );
    runtime.shutdown.spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "xDS server failed");
        }
    });
    Ok(bound)
}
