//! Probes: one attempt against one pod address, bounded by the probe's timeout, with a
//! failure reason a user can act on (it reaches the resource's status and an Event).
//!
//! A fresh connection per probe, as the kubelet does; nothing is pooled between attempts, so a
//! probe sees what a new client would.

pub mod http;
pub mod postgres;
pub mod tcp;
mod tls;

use std::time::Duration;

/// Why a probe failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailure {
    /// Nothing answered in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The connection was refused or broke.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The TLS handshake failed (certificate, protocol).
    #[error("TLS: {0}")]
    Tls(String),
    /// The HTTP answer was not 2xx.
    #[error("HTTP status {0}")]
    Status(u16),
    /// The HTTP exchange failed.
    #[error("HTTP: {0}")]
    Http(String),
    /// The probe's configuration cannot work (missing Secret, wrong Secret type, bad CA…).
    #[error("{0}")]
    Config(String),
    /// PostgreSQL refused the login or the query.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// The query answered something other than true.
    #[error("query returned {0}, not true")]
    NotTrue(String),
}

/// Runs `attempt` within `timeout`, turning an overrun into [`ProbeFailure::Timeout`].
pub async fn bounded<F, T>(timeout: Duration, attempt: F) -> Result<T, ProbeFailure>
where
    F: std::future::Future<Output = Result<T, ProbeFailure>>,
{
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(Err(ProbeFailure::Timeout(timeout)))
}
