//! The downloader beside Envoy (`fairlead edge geo-downloader`), in the proxy's pod: as an
//! init container it fetches every edition from the geoproxy (or the instance's mirror)
//! into the volume Envoy reads before Envoy starts, and fails after bounded retries naming
//! what it could not get (Envoy's GeoIP filter does not load without its files); as a
//! sidecar it asks again every interval with `If-None-Match`, and a newer database replaces
//! the old one by a rename in the same directory, which Envoy's MaxMind provider watches for
//! and reloads without a restart. Every download is checked before it is kept.

use std::time::Duration;

use crate::Edition;
use crate::http::Http;
use std::sync::Mutex;

use crate::source::{Retry, Source};
use crate::store::Store;
use crate::update::{Outcome, lock, update};

/// Why the downloader stopped.
#[derive(Debug, thiserror::Error)]
pub enum DownloaderError {
    /// Editions it could not get, each with the last reason.
    #[error("could not get {}; Envoy's GeoIP filter needs every database it names", .0.iter().map(|(e, why)| format!("{e} ({why})")).collect::<Vec<_>>().join(", "))]
    Missing(Vec<(Edition, String)>),
}

/// Gets every edition of `editions` not held yet, each with `retry`; fails naming those it
/// could not get.
pub async fn init(
    store: &Mutex<Store>,
    http: &Http,
    source: &Source,
    editions: &[Edition],
    retry: Retry,
) -> Result<(), DownloaderError> {
    let mut missing = Vec::new();
    for &edition in editions {
        let held = lock(store).held(edition).is_some();
        if held {
            continue;
        }
        if let Err(why) = update(store, http, source, edition, retry).await {
            tracing::error!(%edition, error = %why, "GeoIP database not downloaded");
            missing.push((edition, why.to_string()));
        } else {
            tracing::info!(%edition, "GeoIP database in place");
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(DownloaderError::Missing(missing))
    }
}

/// Asks about every edition of `editions` every `interval` until `stop`.
pub async fn sidecar(
    store: &Mutex<Store>,
    http: &Http,
    source: &Source,
    editions: &[Edition],
    interval: Duration,
    retry: Retry,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        for &edition in editions {
            match update(store, http, source, edition, retry).await {
                Ok(Outcome::Updated { build_epoch }) => {
                    tracing::info!(%edition, build_epoch, "GeoIP database replaced")
                }
                Ok(Outcome::Unchanged) => tracing::debug!(%edition, "GeoIP database current"),
                Err(why) => {
                    tracing::warn!(%edition, error = %why, "GeoIP database not refreshed; Envoy keeps the one it has")
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
