//! The graceful drain of a proxy being stopped: health checks fail first (so load balancers
//! stop sending), listeners drain gracefully (HTTP/1 responses say `Connection: close`, HTTP/2
//! connections get GOAWAY), and Envoy is stopped once its active connections fall to the
//! threshold or the deadline passes, whichever is first.

use std::time::Duration;

use crate::admin::Admin;

/// How a proxy drains.
#[derive(Clone, Debug)]
pub struct Drain {
    /// The longest wait for connections to close.
    pub deadline: Duration,
    /// Connections few enough to stop without waiting further.
    pub threshold: u64,
    /// How often the connections are counted.
    pub poll: Duration,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(60),
            threshold: 0,
            poll: Duration::from_millis(200),
        }
    }
}

/// What a drain ended with.
#[derive(Clone, Debug)]
pub struct Report {
    /// Connections still open when Envoy was told to stop (`None` when Envoy no longer
    /// answered).
    pub connections_left: Option<u64>,
    /// How long the drain took.
    pub waited: Duration,
}

/// Fails health checks, drains listeners and waits (see the module).
pub async fn drain(admin: &Admin, drain: &Drain) -> Report {
    let started = tokio::time::Instant::now();
    if !admin.post("/healthcheck/fail").await {
        tracing::warn!("Envoy did not take /healthcheck/fail");
    }
    if !admin.post("/drain_listeners?graceful").await {
        tracing::warn!("Envoy did not take /drain_listeners?graceful");
    }
    loop {
        let open = admin.active_connections().await;
        let waited = started.elapsed();
        match open {
            Some(n) if n > drain.threshold && waited < drain.deadline => {}
            _ => {
                return Report {
                    connections_left: open,
                    waited,
                };
            }
        }
        tokio::time::sleep(drain.poll).await;
    }
}

/// Stops Envoy: `/quitquitquit`, then a kill if it is still there after five seconds.
pub async fn stop(admin: &Admin, child: &mut tokio::process::Child) {
    if !admin.post("/quitquitquit").await {
        tracing::warn!("Envoy did not take /quitquitquit; killing it");
        let _ = child.start_kill();
    }
    match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(status)) => tracing::info!(%status, "Envoy stopped"),
        Ok(Err(e)) => tracing::warn!(error = %e, "waiting for Envoy"),
        Err(_) => {
            tracing::warn!("Envoy did not stop within 5 s; killing it");
            let _ = child.kill().await;
        }
    }
}
