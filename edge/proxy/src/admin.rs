//! Envoy's admin interface on loopback, as the supervisor uses it: liveness and
//! configuration, stats, and the drain and stop commands.

use std::time::Duration;

/// A client of one Envoy's admin interface.
#[derive(Clone, Debug)]
pub struct Admin {
    base: String,
    http: reqwest::Client,
}

impl Admin {
    /// The admin interface at `address` (a loopback address: Envoy's admin never leaves the
    /// pod).
    pub fn new(address: std::net::SocketAddr) -> Self {
        Self {
            base: format!("http://{address}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .expect("a plain HTTP client builds"),
        }
    }

    /// The body of `GET path`, when Envoy answers 200.
    pub async fn get(&self, path: &str) -> Result<String, reqwest::Error> {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }

    /// `POST path` (the admin's commands); whether Envoy took it.
    pub async fn post(&self, path: &str) -> bool {
        self.http
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// A counter or gauge by its exact name (`None` when Envoy does not answer or has no such
    /// stat).
    pub async fn stat(&self, name: &str) -> Option<u64> {
        let text = self
            .get(&format!("/stats?filter=^{}$", name.replace('.', "\\.")))
            .await
            .ok()?;
        parse_stat(&text, name)
    }

    /// Downstream connections open on the proxy's listeners (the admin's own not counted).
    pub async fn active_connections(&self) -> Option<u64> {
        let text = self
            .get("/stats?filter=^listener\\..*\\.downstream_cx_active$")
            .await
            .ok()?;
        Some(sum_listener_connections(&text))
    }

    /// Whether Envoy is live and serves listeners it took from the control plane (an
    /// accepted but empty update, as for a Gateway not translated yet, is not enough): the
    /// proxy can serve what the control plane says.
    pub async fn configured(&self) -> bool {
        self.get("/ready").await.is_ok()
            && self
                .stat("listener_manager.lds.update_success")
                .await
                .is_some_and(|n| n > 0)
            && self
                .stat("listener_manager.total_listeners_active")
                .await
                .is_some_and(|n| n > 0)
    }
}

/// The value of `name` in the admin's plain `/stats` text (`name: value` lines).
fn parse_stat(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (stat, value) = line.split_once(": ")?;
        (stat == name).then(|| value.trim().parse().ok())?
    })
}

/// The sum of `listener.<address>.downstream_cx_active` lines, but the admin listener's and
/// the per-worker breakdowns (`listener.<address>.worker_<n>.…`).
fn sum_listener_connections(text: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(": "))
        .filter(|(stat, _)| {
            stat.starts_with("listener.")
                && stat.ends_with(".downstream_cx_active")
                && !stat.starts_with("listener.admin.")
                && !stat.contains(".worker_")
        })
        .filter_map(|(_, value)| value.trim().parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_read_by_exact_name() {
        let text =
            "listener_manager.lds.update_success: 3\nlistener_manager.lds.update_successes: 9\n";
        assert_eq!(
            parse_stat(text, "listener_manager.lds.update_success"),
            Some(3)
        );
        assert_eq!(parse_stat(text, "server.total_connections"), None);
        assert_eq!(parse_stat("x: y\n", "x"), None);
    }

    #[test]
    fn connections_are_counted_over_the_proxys_listeners() {
        let text = "listener.0.0.0.0_80.downstream_cx_active: 2\n\
                    listener.0.0.0.0_443.downstream_cx_active: 3\n\
                    listener.0.0.0.0_443.worker_0.downstream_cx_active: 3\n\
                    listener.admin.downstream_cx_active: 1\n";
        assert_eq!(sum_listener_connections(text), 5);
    }
}
