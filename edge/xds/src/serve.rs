//! The xDS server on a listener, over TLS (mutual when a client CA is given), serving a
//! cache until the runtime shuts down.

use std::net::SocketAddr;
use std::sync::Arc;

use fairlead_kit::Runtime;

use crate::cache::Cache;
use crate::server::{Ads, Observer};

use fairlead_kit::tls::ServingTls;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listener's address could not be read.
    #[error("the xDS server's listener: {0}")]
    Listener(#[source] std::io::Error),
}

/// Serves `cache` on `listener` (the composition binds it) in `runtime`, telling `observer`
/// what happens on the streams: over TLS with what `tls` holds at each handshake (read again
/// whenever it changes), in plaintext when `tls` is `None`. Returns the listener's address.
pub fn serve(
    runtime: &Runtime,
    listener: tokio::net::TcpListener,
    tls: Option<tokio::sync::watch::Receiver<Option<ServingTls>>>,
    cache: Arc<Cache>,
    observer: Arc<dyn Observer>,
) -> Result<SocketAddr, ServeError> {
    let bound = listener.local_addr().map_err(ServeError::Listener)?;
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
