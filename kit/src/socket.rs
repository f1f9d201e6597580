//! A Unix socket a service beside Envoy listens on (the authentication service, the WAF): in
//! a directory the pod's containers share, so a socket left by the previous process of the
//! container (a restart) is replaced, not refused.

use std::path::Path;

use tokio_stream::wrappers::UnixListenerStream;

/// The connections to a socket bound at `path`, a stale one there removed first.
pub fn unix_incoming(path: &Path) -> std::io::Result<UnixListenerStream> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    tokio::net::UnixListener::bind(path).map(UnixListenerStream::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_socket_is_replaced() {
        let dir = std::env::temp_dir().join(format!("fairlead-socket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let first = unix_incoming(&path).unwrap();
        drop(first);
        assert!(path.exists(), "a dropped listener leaves its file");
        let _second = unix_incoming(&path).unwrap();
        tokio::net::UnixStream::connect(&path).await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
