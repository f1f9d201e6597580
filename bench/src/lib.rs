//! `fairlead bench …`: the benchmarks of every component, kept out of the production crates.
//! Each module measures one (the embedded API server, the health module, the gateway
//! controller's work per change, the edge control plane, a real Envoy taking route changes, Envoy's GeoIP filter, the load generators
//! through a real Envoy, the `limit-rps` rate limit beside nginx's) and returns rows of a
//! Markdown table or figures; the figures go to BENCHMARKS.md with the
//! machine and the command.

pub mod apiserver;
pub mod controller;
pub mod edge;
pub mod envoy;
pub mod geoip;
pub mod graph;
pub mod health;
pub mod loadgen;
pub mod nginx;
pub mod process;
pub mod ratelimit;
pub mod scale;
pub mod waf;

use std::time::Duration;

/// An embedded API server started with `config`, the ALB's CRDs and the Gateway API bundle
/// installed, and an admin client of it: the world every edge figure starts from.
pub async fn edge_cluster(
    config: fairlead_apiserver::Config,
) -> anyhow::Result<(fairlead_apiserver::ApiServer, kube::Client)> {
    let server = fairlead_apiserver::ApiServer::start(config).await?;
    let client = server.client().await?;
    fairlead_edge_controller::crds::install(
        &client,
        fairlead_edge_model::CONTROLLER_NAME,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await?;
    Ok((server, client))
}

/// The arguments of `fairlead edge xds` as every edge figure runs it: plaintext xDS on
/// loopback port `xds`, its admin server on `admin`, quiet.
pub fn xds_args(xds: u16, admin: u16) -> Vec<String> {
    [
        "--log-level",
        "error",
        "edge",
        "xds",
        "--insecure",
        "--lease-namespace",
        "default",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([
        "--xds-addr".to_owned(),
        format!("127.0.0.1:{xds}"),
        "--admin-addr".to_owned(),
        format!("127.0.0.1:{admin}"),
    ])
    .collect()
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub metric: String,
    /// The figure.
    pub value: String,
}

/// A process's resident memory: all of it, and the anonymous part (heap and stacks, without
/// the pages of the binary itself), in bytes.
pub fn resident(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kib| kib * 1024)
    };
    Some((field("VmRSS:")?, field("RssAnon:")?))
}

/// The value at rank `p` (0–1) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Renders rows as a Markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| metric | result |\n|---|---|\n");
    for row in rows {
        out.push_str(&format!("| {} | {} |\n", row.metric, row.value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_by_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&sorted, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
