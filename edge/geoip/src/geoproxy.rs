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

use crate::Edition;
use crate::http::Http;
use crate::serve::{File, Files};
use crate::source::{Retry, Source, tarball_etag};
use crate::store::Store;
use crate::update::{Outcome, UpdateError, lock, now, update};

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
    fn file(&self, name: &str) -> Option<(std::fs::File, File)> {
        let (edition, tarball) = crate::serve::parse_name(name)?;
        let store = lock(&self.store);
        let held = store.held(edition)?;
        let (path, etag) = if tarball {
            (store.tarball(edition), tarball_etag(&held.tarball_md5))
        } else {
            (store.mmdb(edition), format!("\"{}.mmdb\"", held.md5))
        };
        // Opened under the lock: a replacement renames over the path, and this handle keeps
        // the version the entity tag names.
        let opened = std::fs::File::open(&path).ok()?;
        let len = opened.metadata().ok()?.len();
        Some((
            opened,
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
    let store = lock(&shared.store);
    editions.iter().all(|e| store.held(*e).is_some())
}

/// The first wait after a failed attempt (doubled per failure, at most [`FAILED_MAX`]).
pub const FAILED_FIRST: Duration = Duration::from_secs(60);

/// The longest wait after failed attempts.
pub const FAILED_MAX: Duration = Duration::from_secs(3_600);

/// When each edition is next asked about after failures (in memory: a restart asks again).
#[derive(Debug, Default)]
struct Backoff {
    /// Per edition: when next (seconds since the epoch) and the current wait.
    failed: std::collections::BTreeMap<Edition, (u64, Duration)>,
}

impl Backoff {
    fn failed(&mut self, edition: Edition, now: u64, first: Duration) {
        let wait = self
            .failed
            .get(&edition)
            .map_or(first, |(_, wait)| (*wait * 2).min(FAILED_MAX));
        self.failed.insert(edition, (now + wait.as_secs(), wait));
    }

    fn succeeded(&mut self, edition: Edition) {
        self.failed.remove(&edition);
    }

    fn blocked(&self, edition: Edition, now: u64) -> bool {
        self.failed.get(&edition).is_some_and(|(at, _)| now < *at)
    }
}

/// Keeps the editions of `settings` fresh until `stop`: as the Lease holder (or without a
/// Lease) from the source, else from the peers (one attempt each, soon again while an
/// edition is missing); `ready` once every edition is held. An edition that failed is asked
/// again after a doubling wait, never sooner; a change of leadership wakes the loop.
pub async fn run(
    shared: Shared,
    http: Http,
    settings: Settings,
    mut leadership: Option<fairlead_kit::lease::Leadership>,
    ready: impl Fn(bool),
    stop: tokio_util::sync::CancellationToken,
) {
    for edition in &settings.editions {
        let store = lock(&shared.store);
        if let Some(held) = store.held(*edition) {
            shared
                .metrics
                .build_timestamp
                .with_label_values(&[edition.id()])
                .set(i64::try_from(held.build_epoch).unwrap_or(i64::MAX));
        }
    }
    let peers = settings.peers.clone().map(|url| Source::Mirror { url });
    let mut backoff = Backoff::default();
    loop {
        ready(complete(&shared, &settings.editions));
        let leading = leadership.as_ref().is_none_or(|l| l.is_leader());
        let (source, retry, first) = if leading {
            (Some(&settings.source), settings.retry, FAILED_FIRST)
        } else {
            let once = Retry {
                attempts: 1,
                ..settings.retry
            };
            (peers.as_ref(), once, Duration::from_secs(5))
        };
        if let Some(source) = source {
            for edition in &settings.editions {
                let at = now();
                let due = lock(&shared.store).due(*edition, settings.interval.as_secs(), at);
                if !due || backoff.blocked(*edition, at) {
                    continue;
                }
                let span =
                    tracing::info_span!("geoip.download", edition = %edition, leader = leading);
                let result = tracing::Instrument::instrument(
                    refresh_one(&shared, &http, source, *edition, retry),
                    span,
                )
                .await;
                match result {
                    Ok(outcome) => {
                        backoff.succeeded(*edition);
                        if let Outcome::Updated { build_epoch } = outcome {
                            tracing::info!(%edition, build_epoch, "GeoIP database updated");
                        }
                    }
                    Err(e) => {
                        backoff.failed(*edition, now(), first);
                        tracing::warn!(%edition, error = %e, "GeoIP database not updated; keeping the one held");
                    }
                }
            }
        }
        ready(complete(&shared, &settings.editions));
        let at = now();
        let next = {
            let store = lock(&shared.store);
            settings
                .editions
                .iter()
                .map(|e| {
                    let due = store
                        .held(*e)
                        .filter(|h| h.checked != 0)
                        .map_or(at, |h| h.checked + settings.interval.as_secs());
                    let after_failure = backoff.failed.get(e).map_or(0, |(when, _)| *when);
                    due.max(after_failure).saturating_sub(at)
                })
                .min()
                .map_or(settings.interval, Duration::from_secs)
                .max(Duration::from_secs(1))
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(next) => {}
            () = async {
                match leadership.as_mut() {
                    Some(l) if leading => l.lost().await,
                    Some(l) => l.leading().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_edition_waits_doubling_and_is_freed_by_a_success() {
        let mut backoff = Backoff::default();
        backoff.failed(Edition::City, 1_000, FAILED_FIRST);
        assert!(backoff.blocked(Edition::City, 1_059));
        assert!(!backoff.blocked(Edition::City, 1_060));
        backoff.failed(Edition::City, 1_060, FAILED_FIRST);
        assert!(backoff.blocked(Edition::City, 1_060 + 119));
        assert!(!backoff.blocked(Edition::LiteAsn, 1_000));
        for _ in 0..10 {
            backoff.failed(Edition::City, 0, FAILED_FIRST);
        }
        assert_eq!(backoff.failed[&Edition::City].1, FAILED_MAX);
        backoff.succeeded(Edition::City);
        assert!(!backoff.blocked(Edition::City, 0));
    }
}
