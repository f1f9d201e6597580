//! TCP probe: the connection must be accepted; it is then closed cleanly (FIN, not RST).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::{ProbeFailure, bounded};

/// Connects to `addr` and closes the connection.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<(), ProbeFailure> {
    bounded(timeout, async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| ProbeFailure::Connect(e.to_string()))?;
        let _ = stream.shutdown().await;
        Ok(())
    })
    .await
}
