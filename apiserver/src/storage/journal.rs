//! Persistence for `--data-dir`: an append-only journal of committed writes, one JSON line
//! each, flushed to disk (`fdatasync`) before the write is acknowledged. Replaying it rebuilds
//! the objects and the event window, so watches resume across a restart. A torn last line (the
//! process killed mid-append, before the acknowledgement) is dropped on open.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::storage::key::StoreKey;

/// Journal failures.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading or writing the file failed.
    #[error("journal {path}: {source}")]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line in the middle of the journal does not parse: the file is damaged.
    #[error("journal {path}: line {line} is damaged: {source}")]
    Corrupt {
        /// The journal file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// One committed write.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The write's resourceVersion.
    pub rv: u64,
    /// The object's key.
    pub key: StoreKey,
    /// Whether the write removed the object.
    pub deleted: bool,
    /// The object after the write (the last state, for a deletion).
    pub object: Value,
}

/// The journal file of a data directory.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Opens (or creates) `dir/journal.jsonl`.
    pub fn open(dir: &Path) -> Result<Self, JournalError> {
        let path = dir.join("journal.jsonl");
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        Ok(Self { path, file })
    }

    fn io(&self, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Every record, in order; drops a torn last line.
    pub fn replay(&mut self) -> Result<Vec<Record>, JournalError> {
        self.file.seek(SeekFrom::Start(0)).map_err(|e| self.io(e))?;
        let lines: Vec<String> = BufReader::new(&self.file)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|e| self.io(e))?;
        let mut records = Vec::with_capacity(lines.len());
        let mut good_bytes = 0u64;
        for (index, line) in lines.iter().enumerate() {
            match serde_json::from_str::<Record>(line) {
                Ok(record) => {
                    records.push(record);
                    good_bytes += line.len() as u64 + 1;
                }
                Err(source) if index + 1 == lines.len() => {
                    tracing::warn!(
                        path = %self.path.display(),
                        error = %source,
                        "dropping a torn last journal line (a write that was never acknowledged)"
                    );
                    self.file.set_len(good_bytes).map_err(|e| self.io(e))?;
                }
                Err(source) => {
                    return Err(JournalError::Corrupt {
                        path: self.path.clone(),
                        line: index + 1,
                        source,
                    });
                }
            }
        }
        Ok(records)
    }

    /// Appends a record and flushes it to disk.
    pub fn append(&mut self, record: &Record) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(record).expect("records serialize");
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| self.io(e))?;
        self.file.sync_data().map_err(|e| self.io(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(rv: u64) -> Record {
        Record {
            rv,
            key: StoreKey::new("configmaps", "default", &format!("cm{rv}")),
            deleted: false,
            object: json!({"metadata": {"name": format!("cm{rv}")}}),
        }
    }

    #[test]
    fn replays_what_was_appended_and_drops_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(dir.path()).unwrap();
        journal.append(&record(1)).unwrap();
        journal.append(&record(2)).unwrap();
        drop(journal);
        let path = dir.path().join("journal.jsonl");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"rv\":3,\"key\":").unwrap();
        drop(file);

        let mut journal = Journal::open(dir.path()).unwrap();
        let rvs: Vec<u64> = journal.replay().unwrap().iter().map(|r| r.rv).collect();
        assert_eq!(rvs, vec![1, 2]);
        journal.append(&record(3)).unwrap();
        let rvs: Vec<u64> = journal.replay().unwrap().iter().map(|r| r.rv).collect();
        assert_eq!(rvs, vec![1, 2, 3]);
    }

    #[test]
    fn damage_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("journal.jsonl"), "garbage\n{}\n").unwrap();
        let err = Journal::open(dir.path()).unwrap().replay().unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
