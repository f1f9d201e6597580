//! `fairlead up`: the appliance on one machine. Today it serves the admin endpoints and
//! telemetry of the process; the embedded API server and the components join it as they land.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use fairlead_kit::{AdminServer, GlobalArgs, Runtime};

/// Options of `fairlead up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9800", env = "FAIRLEAD_ADMIN_ADDR")]
    admin_addr: SocketAddr,

    /// Longest wait for in-flight work after SIGTERM/SIGINT, in seconds.
    #[arg(long, default_value_t = 25.0, value_parser = parse_seconds)]
    drain_deadline: f64,
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!("{text:?} is not a non-negative number of seconds")),
    }
}

/// Runs the appliance until SIGTERM/SIGINT.
pub async fn run(global: &GlobalArgs, args: UpArgs) -> anyhow::Result<()> {
    let runtime = Runtime::start(
        global,
        "fairlead-up",
        Duration::from_secs_f64(args.drain_deadline),
    )
    .context("starting the runtime")?;
    let admin = AdminServer::bind(
        args.admin_addr,
        runtime.metrics.clone(),
        runtime.readiness.clone(),
        None,
    )
    .await?;
    let addr = admin.local_addr();
    admin.spawn(&runtime.shutdown);
    tracing::info!(admin = %addr, "fairlead up: running; Ctrl-C to stop");
    runtime.finish().await;
    tracing::info!("fairlead up: stopped");
    Ok(())
}
