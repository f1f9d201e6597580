//! How the geoproxy starts in a process (`fairlead edge geoproxy`'s pod): its data directory
//! opened, its databases served on the listener the composition binds, and its refresh loop
//! (the Lease holder's downloads, or the peers') with readiness `databases` once every edition
//! is held.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use fairlead_kit::Runtime;
use fairlead_kit::lease::Leadership;

use crate::geoproxy::{self, GeoproxyMetrics, Settings, Shared};
use crate::store::{Store, StoreError};

/// Why the geoproxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its metrics could not be registered.
    #[error("registering the geoproxy's metrics: {0}")]
    Metrics(#[from] fairlead_kit::metrics::MetricsError),
    /// The data directory could not be opened.
    #[error("opening the data directory {dir}: {source}")]
    Store {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        source: StoreError,
    },
    /// The listener's address could not be read.
    #[error("the geoproxy's listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The HTTPS client found no trust store.
    #[error("the HTTPS client's trust store: {0}")]
    Trust(#[source] rustls::Error),
}

/// Starts the geoproxy in `runtime`: serves the databases of `data_dir` on `listener` and keeps
/// them fresh as `settings` says, downloading while `leadership` holds (always without one).
/// Returns where it serves.
pub fn start(
    runtime: &Runtime,
    listener: tokio::net::TcpListener,
    data_dir: &std::path::Path,
    settings: Settings,
    leadership: Option<Leadership>,
) -> Result<SocketAddr, StartError> {
    let bound = listener.local_addr().map_err(StartError::Listener)?;
    let store = Store::open(data_dir).map_err(|source| StartError::Store {
        dir: data_dir.to_path_buf(),
        source,
    })?;
    let shared = Shared {
        store: Arc::new(Mutex::new(store)),
        metrics: GeoproxyMetrics::new(&runtime.metrics, &settings.editions)?,
    };
    let http = crate::http::Http::new(None).map_err(StartError::Trust)?;
    let router = crate::serve::router(shared.clone()).layer(axum::middleware::from_fn(
        fairlead_kit::propagation::http_server_span,
    ));
    let stop = runtime.shutdown.token();
    runtime.shutdown.spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the geoproxy's server failed");
        }
    });
    let ready = runtime.readiness.register("databases");
    runtime.shutdown.spawn(geoproxy::run(
        shared,
        http,
        settings,
        leadership,
        move |complete| {
            if complete {
                ready.ready();
            } else {
                ready.not_ready();
            }
        },
        runtime.shutdown.token(),
    ));
    Ok(bound)
}
