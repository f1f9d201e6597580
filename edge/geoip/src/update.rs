//! Bringing one edition up to date in a store, as the geoproxy and the downloader both do:
//! ask the source (with retries), check what it sent against what is held, keep it only when
//! it is good and different (the legacy URL and plain mirrors send the same database again).

use std::sync::Mutex;

use crate::Edition;
use crate::archive::{self, ArchiveError};
use crate::http::Http;
use crate::source::{Fetched, Retry, Source};
use crate::store::{Store, md5_hex};

/// What one attempt did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A newer database is held.
    Updated {
        /// Its build epoch.
        build_epoch: u64,
    },
    /// The source had nothing newer.
    Unchanged,
}

/// Why one attempt kept nothing.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The source did not answer with a database.
    #[error(transparent)]
    Fetch(#[from] crate::source::FetchError),
    /// What it sent is not a good database (the one held is kept).
    #[error("rejected: {0}")]
    Rejected(#[from] crate::archive::ArchiveError),
    /// The store could not be written.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The store, even if a thread panicked holding it (its files are each replaced whole).
pub fn lock(store: &Mutex<Store>) -> std::sync::MutexGuard<'_, Store> {
    store
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Asks `source` about `edition` (with `retry`) and keeps what checks out in `store`; an
/// unchanged answer is recorded as asked.
pub async fn update(
    store: &Mutex<Store>,
    http: &Http,
    source: &Source,
    edition: Edition,
    retry: Retry,
) -> Result<Outcome, UpdateError> {
    let held = lock(store).held(edition).cloned();
    let fetched = source.fetch(http, edition, held.as_ref(), retry).await?;
    if let Fetched::New { tarball, modified } = fetched {
        // Unpacking and checking a database takes a while: off the async workers, and
        // without the store (which serves the database held meanwhile).
        let held_epoch = held.as_ref().map(|h| h.build_epoch);
        let (database, tarball) = tokio::task::spawn_blocking(move || {
            archive::validate(edition, &tarball, held_epoch).map(|d| (d, tarball))
        })
        .await
        .map_err(|e| ArchiveError::Corrupt(format!("the check did not finish: {e}")))??;
        if held.is_none_or(|h| h.md5 != md5_hex(&database.mmdb)) {
            let at = now();
            lock(store).keep(&database, Some(&tarball), modified.unwrap_or(at), at)?;
            return Ok(Outcome::Updated {
                build_epoch: database.build_epoch,
            });
        }
    }
    lock(store).checked(edition, now())?;
    Ok(Outcome::Unchanged)
}
