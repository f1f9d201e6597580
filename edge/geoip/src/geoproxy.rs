//! The geoproxy (`fairlead edge geoproxy`): one download point per licence for the whole
//! cluster. The Lease holder asks the source about each edition once per interval (a
//! restart asks again only when the interval has passed since the last time, as the store
//! remembers); other replicas fetch from the geoproxy's Service, which only sends them to
//! replicas that hold every edition (readiness), so none serves an empty directory. Every
//! download is checked before it is kept ([`crate::archive`]); a failure keeps what is held,
//! is retried with backoff, logged, counted and shown as `alb_geoproxy_download_error`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairlead_kit::metrics::{Metrics, MetricsError};
use prometheus::{IntCounterVec, IntGaugeVec};

use crate::edition::Edition;
use crate::http::Http;
use crate::serve::{File, Files};
use crate::source::{Retry, Source, tarball_etag};
use crate::store::Store;
use crate::update::{Outcome, UpdateError, now, update};

/// The `alb_geoproxy_*` families.
#[derive(Clone)]
pub struct GeoproxyMetrics {
    /// Downloads by edition and result (`updated`, `unchanged`, `failed`, `rejected`).
    pub downloads: IntCounterVec,
    /// 1 when the last attempt for the edition failed, else 0 (Deckhouse's meaning).
    pub download_error: IntGaugeVec,
    /// When the held database was built (Unix seconds), by edition.
    pub build_timestamp: IntGaugeVec,
    /// Bytes served.
    pub served: IntCounterVec,
}

/// The results a download is counted under.
pub const RESULTS: [&str; 4] = ["updated", "unchanged", "failed", "rejected"];

impl GeoproxyMetrics {
    /// Registers the families, a series per edition of `editions` from the start.
    pub fn new(metrics: &Metrics, editions: &[Edition]) -> Result<Self, MetricsError> {
        let this = Self {
            downloads: metrics.counter_vec(
                "alb_geoproxy_downloads_total",
                "Attempts to get a GeoIP database from the source, by edition and result (updated, unchanged, failed: the source did not answer with one; rejected: what it sent was not a good database).",
                &["edition", "result"],
            )?,
            download_error: metrics.gauge_vec(
                "alb_geoproxy_download_error",
                "1 when the last attempt to get the edition failed or was rejected, else 0.",
                &["edition"],
            )?,
            build_timestamp: metrics.gauge_vec(
                "alb_geoproxy_database_build_timestamp_seconds",
                "When the database held of the edition was built (Unix time, from its metadata).",
                &["edition"],
            )?,
            served: metrics.counter_vec(
                "alb_geoproxy_served_bytes_total",
                "Bytes of databases served.",
                &[],
            )?,
        };
        for edition in editions {
            for result in RESULTS {
                this.downloads.with_label_values(&[edition.id(), result]);
            }
            this.download_error
                .with_label_values(&[edition.id()])
                .set(0);
        }
        Ok(this)
    }
}

/// What the server and the refresh share.
#[derive(Clone)]
pub struct Shared {
    /// The store.
    pub store: Arc<Mutex<Store>>,
    /// The metrics.
    pub metrics: GeoproxyMetrics,
}

impl Files for Shared {
    fn file(&self, name: &str) -> Option<(std::path::PathBuf, File)> {
        let (edition, tarball) = crate::serve::parse_name(name)?;
        let store = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = store.held(edition)?;
        let (path, etag) = if tarball {
            (store.tarball(edition), tarball_etag(&held.md5))
        } else {
            (store.mmdb(edition), format!("\"{}.mmdb\"", held.md5))
        };
        let len = std::fs::metadata(&path).ok()?.len();
        Some((
            path,
            File {
                len,
                etag,
                modified: held.modified,
            },
        ))
    }

    fn served(&self, bytes: u64) {
        self.metrics
            .served
            .with_label_values(&[] as &[&str])
            .inc_by(bytes);
    }
}

/// How the refresh runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The editions to hold.
    pub editions: Vec<Edition>,
    /// How often the source is asked about each.
    pub interval: Duration,
    /// Where the Lease holder gets them.
    pub source: Source,
    /// Where the other replicas get them (the geoproxy's Service); none: they wait.
    pub peers: Option<String>,
    /// Retries of one attempt.
    pub retry: Retry,
}

/// Brings `edition` up to date from `source` (with `retry`), counting the attempt.
pub async fn refresh_one(
    shared: &Shared,
    http: &Http,
    source: &Source,
    edition: Edition,
    retry: Retry,
) -> Result<Outcome, UpdateError> {
    let metrics = &shared.metrics;
    let outcome = update(&shared.store, http, source, edition, retry).await;
    let result = match &outcome {
        Ok(Outcome::Updated { build_epoch }) => {
            metrics
                .build_timestamp
                .with_label_values(&[edition.id()])
                .set(i64::try_from(*build_epoch).unwrap_or(i64::MAX));
            "updated"
        }
        Ok(Outcome::Unchanged) => "unchanged",
        Err(UpdateError::Rejected(_)) => "rejected",
        Err(_) => "failed",
    };
    metrics
        .downloads
        .with_label_values(&[edition.id(), result])
        .inc();
    metrics
        .download_error
        .with_label_values(&[edition.id()])
        .set(i64::from(outcome.is_err()));
    outcome
}

/// Whether every edition of `editions` is held.
pub fn complete(shared: &Shared, editions: &[Edition]) -> bool {
    let store = shared
        .store
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    editions.iter().all(|e| store.held(*e).is_some())
}

/// Keeps the editions of `settings` fresh until `stop`: as the Lease holder (or without a
/// Lease) from the source, else from the peers; `ready` once every edition is held.
pub async fn run(
    shared: Shared,
    http: Http,
    settings: Settings,
    leadership: Option<fairlead_kit::lease::Leadership>,
    ready: impl Fn(bool),
    stop: tokio_util::sync::CancellationToken,
) {
    {
        let store = shared
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for edition in &settings.editions {
            if let Some(held) = store.held(*edition) {
                shared
                    .metrics
                    .build_timestamp
                    .with_label_values(&[edition.id()])
                    .set(i64::try_from(held.build_epoch).unwrap_or(i64::MAX));
            }
        }
    }
    let peers = settings.peers.clone().map(|url| Source::Mirror { url });
    loop {
        ready(complete(&shared, &settings.editions));
        let leading = leadership.as_ref().is_none_or(|l| l.is_leader());
        let source = if leading {
            Some(&settings.source)
        } else {
            peers.as_ref()
        };
        let mut next = settings.interval;
        if let Some(source) = source {
            for edition in &settings.editions {
                let due = {
                    let store = shared
                        .store
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    // A replica that is not the holder asks its peers until it has them all,
                    // then at the interval too.
                    store.due(*edition, settings.interval.as_secs(), now())
                };
                if !due {
                    continue;
                }
                let span =
                    tracing::info_span!("geoip.download", edition = %edition, leader = leading);
                let result = tracing::Instrument::instrument(
                    refresh_one(&shared, &http, source, *edition, settings.retry),
                    span,
                )
                .await;
                match result {
                    Ok(Outcome::Updated { build_epoch }) => {
                        tracing::info!(%edition, build_epoch, "GeoIP database updated");
                    }
                    Ok(Outcome::Unchanged) => tracing::debug!(%edition, "GeoIP database current"),
                    Err(e) => {
                        tracing::warn!(%edition, error = %e, "GeoIP database not updated; keeping the one held");
                        // Try again sooner than the interval.
                        next = next.min(settings.retry.max);
                    }
                }
            }
        }
        if !leading && !complete(&shared, &settings.editions) {
            next = next.min(Duration::from_secs(5));
        }
        ready(complete(&shared, &settings.editions));
        let earliest = {
            let store = shared
                .store
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            settings
                .editions
                .iter()
                .filter_map(|e| store.held(*e))
                .map(|h| (h.checked + settings.interval.as_secs()).saturating_sub(now()))
                .min()
                .map(Duration::from_secs)
        };
        if let Some(earliest) = earliest {
            next = next.min(earliest.max(Duration::from_secs(1)));
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(next) => {}
        }
    }
}
