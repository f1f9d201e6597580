//! The xDS control plane wired together: the xDS server (over TLS, mutual with a client CA)
//! on a listener, and the translation loop feeding its cache, both run on a component
//! runtime. `fairlead edge xds` and `fairlead up` start it.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use fairlead_kit::Runtime;

use crate::cache::Cache;
use crate::metrics::XdsMetrics;
use crate::server::Ads;

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

/// Starts the control plane in `runtime`: the xDS server on `xds_addr` (over TLS unless `tls`
/// is `None`) and the translation loop (readiness `xds` after the first translation). Returns
/// the bound xDS address.
pub async fn start(
    runtime: &Runtime,
    client: kube::Client,
    xds_addr: SocketAddr,
    tls: Option<XdsTls>,
    settings: crate::run::Settings,
) -> anyhow::Result<SocketAddr> {
    let metrics = XdsMetrics::new(&runtime.metrics)?;
    let cache = Arc::new(Cache::new());
    let (nacks_tx, nacks) = tokio::sync::mpsc::unbounded_channel();
    let observer = crate::server::Observers(vec![
        Arc::new(metrics.clone()),
        Arc::new(crate::server::NackForwarder(nacks_tx)),
    ]);
    let listener = tokio::net::TcpListener::bind(xds_addr)
        .await
        .with_context(|| format!("binding the xDS server to {xds_addr}"))?;
    let bound = listener.local_addr()?;
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
            builder = builder
                .tls_config(config)
                .context("the xDS server's TLS configuration")?;
            tracing::info!(addr = %bound, mutual = tls.client_ca_pem.is_some(), "xDS server listening (TLS)");
        }
        None => {
            tracing::warn!(addr = %bound, "xDS server listening in plaintext (--insecure)");
        }
    }
    let stop = runtime.shutdown.token();
    let server = builder
        .add_routes(crate::services::routes(Ads::new(
            cache.clone(),
            Arc::new(observer),
        )))
        .serve_with_incoming_shutdown(
            crate::server::incoming(listener),
            stop.clone().cancelled_owned(),
        );
    runtime.shutdown.spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "xDS server failed");
        }
    });
    let ready = runtime.readiness.register("xds");
    runtime.shutdown.spawn(crate::run::run(
        client,
        cache,
        settings,
        metrics,
        nacks,
        stop,
        move || ready.ready(),
    ));
    Ok(bound)
}
