//! Connections as the suite's TCP and TLS checks make them: echo-basic's TCP server's line
//! protocol (its welcome, `PING`, `IS_TLS`, `TEST`) over plain TCP or TLS, and TLS
//! handshakes the Gateway must refuse (no route for the server name).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::tls::Tls;
use crate::echo::TCP_WELCOME;

/// What the TCP echo said: whether it saw TLS, and its `TEST` payload (`pod`, `namespace`,
/// `tls.serverName`, …).
#[derive(Debug)]
pub struct TcpAnswer {
    /// Its answer to `IS_TLS`.
    pub is_tls: bool,
    /// Its answer to `TEST`.
    pub payload: Value,
}

/// One session with the TCP echo behind `address`, over TLS when `tls` says so (offering no
/// ALPN); what failed, if anything did (within 10 s).
pub async fn exchange(address: &str, tls: Option<&Tls<'_>>) -> Result<TcpAnswer, String> {
    let session = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        match tls {
            None => converse(tcp).await,
            Some(tls) => converse(super::tls::connect(address, tls, &[]).await?).await,
        }
    };
    tokio::time::timeout(Duration::from_secs(10), session)
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
}

/// The line protocol over `stream`.
async fn converse<S>(stream: S) -> Result<TcpAnswer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = tokio::io::BufReader::new(read).lines();
    let mut line = async |ask: Option<&str>| -> Result<String, String> {
        if let Some(ask) = ask {
            write
                .write_all(format!("{ask}\n").as_bytes())
                .await
                .map_err(|e| e.to_string())?;
        }
        lines
            .next_line()
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "the connection closed".to_owned())
    };
    let welcome = line(None).await?;
    if format!("{welcome}\n") != TCP_WELCOME {
        return Err(format!("not the TCP echo's welcome: {welcome:?}"));
    }
    if line(Some("PING")).await? != "PONG" {
        return Err("no PONG".to_owned());
    }
    let is_tls = line(Some("IS_TLS")).await? == "true";
    let payload = serde_json::from_str(&line(Some("TEST")).await?).map_err(|e| e.to_string())?;
    Ok(TcpAnswer { is_tls, payload })
}

/// Whether a TLS handshake with `address` asking for `server_name` is refused (the
/// certificate, if any comes, is not checked: only a refusal counts).
pub async fn refused(address: &str, server_name: &str) -> bool {
    let Ok(config) = fairlead_kit::pki::insecure_client_config(&[]) else {
        return false;
    };
    let Ok(name) = rustls_pki_types::ServerName::try_from(server_name.to_owned()) else {
        return false;
    };
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect(address).await.ok()?;
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), handshake).await,
        Ok(None)
    )
}
