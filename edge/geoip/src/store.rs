//! The databases a geoproxy (or a downloader) holds, in its data directory: per edition
//! `<Edition>.tar.gz` (what is served) and `<Edition>.mmdb` (what Envoy opens), and
//! `state.json` with, per edition, the database's MD5 (what MaxMind's metadata announces),
//! the tarball's (its entity tag), its build epoch, its `Last-Modified` and when the source
//! was last asked; an unreadable state is rebuilt from the tarballs. Every file is
//! replaced whole (written beside, flushed, renamed: Envoy's provider reloads on the move).
//! A restart reads the state and asks the source again only when the interval has passed; a
//! tarball copied in by hand (an air-gapped cluster's preload) is checked and taken when the
//! store opens.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Edition;
use crate::archive::{self, Database};

/// What is held of one edition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// MD5 of the `.mmdb` (hex).
    pub md5: String,
    /// MD5 of the tarball served (hex): its entity tag, the same on every replica that got it
    /// from the same place.
    #[serde(default)]
    pub tarball_md5: String,
    /// When MaxMind built it (seconds since the epoch).
    pub build_epoch: u64,
    /// Its `Last-Modified` (seconds since the epoch): the source's, or when it was taken.
    pub modified: u64,
    /// When the source was last asked about it (seconds since the epoch; 0: never).
    pub checked: u64,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `state.json` does not parse.
    #[error("{path}: {source}")]
    State {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

/// The data directory.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    held: BTreeMap<String, Held>,
}

/// The MD5 of `bytes`, in hex.
pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest as _;
    md5::Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Store {
    /// Opens (making it when missing) the data directory `dir`, taking the tarballs copied
    /// into it by hand that check out; a preloaded tarball that does not is logged and left
    /// unserved.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let state = dir.join("state.json");
        let held = match std::fs::read(&state) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                // The tarballs are checked again below: nothing held is lost.
                tracing::warn!(path = %state.display(), error = %e, "unreadable state; checking the tarballs again");
                BTreeMap::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(io(&state)(e)),
        };
        let mut store = Self {
            dir: dir.to_path_buf(),
            held,
        };
        for edition in Edition::ALL {
            let path = store.tarball(edition);
            let tarball = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    store.held.remove(edition.id());
                    continue;
                }
                Err(e) => return Err(io(&path)(e)),
            };
            let tarball_md5 = md5_hex(&tarball);
            let in_place = store.mmdb(edition).exists()
                && store
                    .held(edition)
                    .is_some_and(|held| held.tarball_md5 == tarball_md5);
            if in_place {
                continue;
            }
            match archive::validate(edition, &tarball, None) {
                Ok(database) => {
                    let modified = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_secs());
                    tracing::info!(%edition, build_epoch = database.build_epoch, "taking a preloaded tarball");
                    store.keep(&database, Some(&tarball), modified, 0)?;
                }
                Err(e) => {
                    tracing::warn!(%edition, path = %path.display(), error = %e, "a tarball in the data directory is not a good database; not served");
                    store.held.remove(edition.id());
                }
            }
        }
        store.save()?;
        Ok(store)
    }

    /// Where the tarball of `edition` is.
    pub fn tarball(&self, edition: Edition) -> PathBuf {
        self.dir.join(edition.tarball())
    }

    /// Where the database of `edition` is.
    pub fn mmdb(&self, edition: Edition) -> PathBuf {
        self.dir.join(edition.mmdb())
    }

    /// What is held of `edition`.
    pub fn held(&self, edition: Edition) -> Option<&Held> {
        self.held.get(edition.id())
    }

    /// Whether the source should be asked about `edition` at `now` (never asked, or
    /// `interval` seconds since).
    pub fn due(&self, edition: Edition, interval: u64, now: u64) -> bool {
        self.held(edition)
            .is_none_or(|held| held.checked == 0 || now.saturating_sub(held.checked) >= interval)
    }

    /// Keeps `database` (its tarball `tarball` as it came, or packed anew), modified at
    /// `modified`, asked at `checked`: the database first, then the tarball, then the state.
    pub fn keep(
        &mut self,
        database: &Database,
        tarball: Option<&[u8]>,
        modified: u64,
        checked: u64,
    ) -> Result<(), StoreError> {
        let edition = database.edition;
        let mmdb = self.mmdb(edition);
        fairlead_kit::files::write_atomically(&mmdb, &database.mmdb, 0o644).map_err(io(&mmdb))?;
        let packed;
        let tarball = match tarball {
            Some(bytes) => bytes,
            None => {
                packed = archive::pack(database).map_err(io(&mmdb))?;
                &packed
            }
        };
        let path = self.tarball(edition);
        fairlead_kit::files::write_atomically(&path, tarball, 0o644).map_err(io(&path))?;
        self.held.insert(
            edition.id().to_owned(),
            Held {
                md5: md5_hex(&database.mmdb),
                tarball_md5: md5_hex(tarball),
                build_epoch: database.build_epoch,
                modified,
                checked,
            },
        );
        self.save()
    }

    /// Records that the source was asked about `edition` at `now` and had nothing newer.
    pub fn checked(&mut self, edition: Edition, now: u64) -> Result<(), StoreError> {
        if let Some(held) = self.held.get_mut(edition.id()) {
            held.checked = now;
        }
        self.save()
    }

    fn save(&self) -> Result<(), StoreError> {
        let path = self.dir.join("state.json");
        let bytes = serde_json::to_vec_pretty(&self.held).map_err(|source| StoreError::State {
            path: path.clone(),
            source,
        })?;
        fairlead_kit::files::write_atomically(&path, &bytes, 0o644).map_err(io(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn city() -> Database {
        let bytes = std::fs::read(format!(
            "{}/tests/data/GeoIP2-City-Test.mmdb",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        archive::check(Edition::City, bytes, None).unwrap()
    }

    #[test]
    fn what_is_kept_survives_a_reopen_and_is_due_after_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        assert!(store.due(Edition::City, 86_400, 1_000));
        store.keep(&city(), None, 500, 1_000).unwrap();
        let store = Store::open(dir.path()).unwrap();
        let held = store.held(Edition::City).unwrap();
        assert_eq!(held.checked, 1_000);
        assert_eq!(held.md5, md5_hex(&city().mmdb));
        assert!(!store.due(Edition::City, 86_400, 1_000 + 86_399));
        assert!(store.due(Edition::City, 86_400, 1_000 + 86_400));
        assert_eq!(
            std::fs::read(store.mmdb(Edition::City)).unwrap(),
            city().mmdb
        );
    }

    #[test]
    fn a_preloaded_tarball_is_taken_and_a_bad_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("GeoIP2-City.tar.gz"),
            archive::pack(&city()).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join("GeoLite2-ASN.tar.gz"), b"garbage").unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.held(Edition::City).unwrap().build_epoch,
            city().build_epoch
        );
        assert!(store.mmdb(Edition::City).exists());
        assert!(store.held(Edition::LiteAsn).is_none());
        assert!(store.due(Edition::City, 86_400, 10), "never asked: due");
    }
}
