//! Files replaced whole: written to a new file beside the target (created with its final
//! mode, so a private key is never readable by others, even briefly), flushed to disk and
//! renamed over the target. Readers see the old content or the new, never a part; watchers
//! of the directory (Envoy's) see one move. Files that must change together (a certificate
//! and its key) are [`publish`]ed as a Kubernetes Secret volume does: into a new directory,
//! switched to by one rename of a `..data` link.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Replaces `path` with `bytes`, the new file having permission bits `mode`.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let staged = path.with_file_name(format!(".{}.new", name.to_string_lossy()));
    match std::fs::remove_file(&staged) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&staged)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&staged, path)?;
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Replaces the files `(name, bytes, mode)` in `dir` together, as a Secret volume does:
/// they are written to a new directory `..<time>` in `dir`, the link `..data` is switched to
/// it by one rename, and each `dir/<name>` is a link to `..data/<name>`. A reader following
/// the names (Envoy reading a certificate and its key) sees the old set or the new one;
/// earlier sets are removed.
pub fn publish(dir: &Path, files: &[(&str, &[u8], u32)]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let version = format!("..{stamp}");
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(dir.join(&version))?;
    for (name, bytes, mode) in files {
        write_atomically(&dir.join(&version).join(name), bytes, *mode)?;
    }
    let relink = |link: &str, target: &Path| -> std::io::Result<()> {
        let staged = dir.join(format!("{link}.new"));
        match std::fs::remove_file(&staged) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::os::unix::fs::symlink(target, &staged)?;
        std::fs::rename(&staged, dir.join(link))
    };
    relink("..data", Path::new(&version))?;
    for (name, ..) in files {
        let target = Path::new("..data").join(name);
        if std::fs::read_link(dir.join(name)).ok().as_deref() != Some(target.as_path()) {
            relink(name, &target)?;
        }
    }
    std::fs::File::open(dir)?.sync_all()?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("..") && name != version && name != "..data" && !name.ends_with(".new")
        {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// Published files switch together behind one link, replacing plain files of an older
    /// layout, and keep their modes; only the current set is left.
    #[test]
    fn publishes_files_together() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), "plain").unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        for round in ["one", "two"] {
            let (cert, key) = (format!("{round} cert"), format!("{round} key"));
            publish(
                dir.path(),
                &[
                    ("tls.crt", cert.as_bytes(), 0o644),
                    ("tls.key", key.as_bytes(), 0o600),
                ],
            )
            .unwrap();
            assert_eq!((read("tls.crt"), read("tls.key")), (cert, key));
        }
        assert_eq!(
            std::fs::read_link(dir.path().join("tls.key")).unwrap(),
            Path::new("..data/tls.key")
        );
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), 4, "{left:?}");
        assert_eq!(&left[1..], ["..data", "tls.crt", "tls.key"]);
    }

    #[test]
    fn replaces_the_file_whole_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        std::fs::write(&path, "old").unwrap();
        // A staged file left by a crash does not stop the next write.
        std::fs::write(dir.path().join(".key.pem.new"), "half").unwrap();
        write_atomically(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no staged file is left behind");
        assert!(write_atomically(Path::new("/"), b"x", 0o600).is_err());
    }
}
