//! What the server keeps in its data directory across restarts so that what clients hold
//! stays good: the ServiceAccount token signing key, the serving CA (a kubeconfig's
//! `certificate-authority-data`) and the admin token. Each is read when its file is there,
//! else made and written once (mode 0600, synced before use); without a data directory it
//! is made and lives in memory.

use std::path::Path;

/// Why a kept file could not be had.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct KeptError {
    /// The file.
    pub file: String,
    /// What went wrong.
    pub reason: String,
}

/// The bytes kept as `file` in `dir`: read, or made by `make` and written.
pub fn kept(
    dir: Option<&Path>,
    file: &str,
    make: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<Vec<u8>, KeptError> {
    let error = |reason: String| KeptError {
        file: dir.map_or_else(|| file.to_owned(), |d| d.join(file).display().to_string()),
        reason,
    };
    let Some(path) = dir.map(|d| d.join(file)) else {
        return make().map_err(error);
    };
    if path.exists() {
        return std::fs::read(&path).map_err(|e| error(e.to_string()));
    }
    let made = make().map_err(error)?;
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut out = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| error(e.to_string()))?;
    out.write_all(&made).map_err(|e| error(e.to_string()))?;
    out.sync_all().map_err(|e| error(e.to_string()))?;
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn made_once_then_read_and_only_its_owner_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = kept(Some(dir.path()), "k", || Ok(b"one".to_vec())).unwrap();
        let again = kept(Some(dir.path()), "k", || Ok(b"two".to_vec())).unwrap();
        assert_eq!(
            (first.as_slice(), again.as_slice()),
            (&b"one"[..], &b"one"[..])
        );
        let mode = std::fs::metadata(dir.path().join("k"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(kept(None, "k", || Ok(b"two".to_vec())).unwrap(), b"two");
        let failed = kept(Some(dir.path()), "m", || Err("no entropy".into())).unwrap_err();
        assert!(failed.to_string().ends_with("/m: no entropy"), "{failed}");
    }
}
