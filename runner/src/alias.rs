//! Short paths to pods' files. A Unix socket's path holds at most 107 bytes (`sun_path`),
//! and a container's file under `<dir>/<namespace>_<pod>/containers/<container>/…` outgrows
//! that as soon as `fairlead up` runs in a directory of ordinary depth: Envoy refused the
//! authentication service's `…/var/run/fairlead/auth.sock` at 109 bytes, and the proxy never
//! started. Containers therefore see their pod's directory through a short link,
//! `<temp>/fairlead-<uid>-b<block>/<hash of the directory>`, in a directory of the user's
//! own.

use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// A short link to the pod directory `root` (made when missing), for the runner holding
/// loopback block `block`.
pub fn short(root: &Path, block: u8) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let uid = std::fs::metadata(root)?.uid();
    let base = std::env::temp_dir().join(format!("fairlead-{uid}-b{block}"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)?;
    // Someone else's directory (or a link) there is not ours to put links in.
    let held = std::fs::symlink_metadata(&base)?;
    if !held.is_dir() || held.uid() != uid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of this user", base.display()),
        ));
    }
    let link = base.join(format!("{:08x}", fnv(root)));
    match std::fs::read_link(&link) {
        Ok(target) if target == root => {}
        _ => {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(root, &link)?;
        }
    }
    Ok(link)
}

/// FNV-1a of a path's bytes: stable across runs and builds.
fn fnv(path: &Path) -> u32 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_pod_directory_gets_a_short_path_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir
            .path()
            .join("a-user's/checkout/of/fairlead/.fairlead/pods/d8-alb_d8-alb-public-647867a28b-0");
        let link = short(&deep, 250).unwrap();
        assert!(link.as_os_str().len() < 40, "{}", link.display());
        // A socket deep in the container's tree binds through the link.
        let socket = link.join("containers/proxy/var/run/fairlead/auth.sock");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        assert!(deep.join("containers/proxy/var/run/fairlead").is_dir());
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(
            deep.join("containers/proxy/var/run/fairlead/auth.sock")
                .exists(),
            "the socket is in the pod's directory"
        );
        // Asked again, the same link.
        assert_eq!(short(&deep, 250).unwrap(), link);
    }
}
