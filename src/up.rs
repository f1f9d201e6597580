//! `fairlead up`: the appliance on one machine. It starts the embedded API server (HTTPS on
//! loopback, a CA generated at start, a kubeconfig written for clients), applies the manifests
//! of `-f DIR`, and serves the admin endpoints and telemetry of the process. The components
//! join it as they land.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use fairlead_apiserver::{ApiServer, Config};
use fairlead_kit::{AdminServer, GlobalArgs, Runtime};

/// Options of `fairlead up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9800", env = "FAIRLEAD_ADMIN_ADDR")]
    admin_addr: SocketAddr,

    /// Address of the embedded API server (HTTPS).
    #[arg(long, default_value = "127.0.0.1:6443", env = "FAIRLEAD_API_ADDR")]
    api_addr: SocketAddr,

    /// Where to write the kubeconfig for kubectl and the components.
    #[arg(
        long,
        default_value = ".fairlead/kubeconfig",
        env = "FAIRLEAD_KUBECONFIG"
    )]
    kubeconfig: PathBuf,

    /// Keep the API server's objects here across restarts (in memory when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,

    /// Reject loopback addresses in EndpointSlices, as a real API server does. By default
    /// `fairlead up` accepts 127.0.0.0/8 so local processes can stand in for pods.
    #[arg(long)]
    strict_endpoints: bool,

    /// Apply the manifests (.yaml, .yml, .json) of this directory after start.
    #[arg(short = 'f', long = "filename")]
    manifests: Option<PathBuf>,

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
    let apiserver_ready = runtime.readiness.register("apiserver");
    let admin = AdminServer::bind(
        args.admin_addr,
        runtime.metrics.clone(),
        runtime.readiness.clone(),
        None,
    )
    .await?;
    let admin_addr = admin.local_addr();
    admin.spawn(&runtime.shutdown);

    let server = ApiServer::start(Config {
        addr: args.api_addr,
        data_dir: args.data_dir.clone(),
        allow_loopback_endpoints: !args.strict_endpoints,
        ..Config::default()
    })
    .await
    .context("starting the embedded API server")?;
    server
        .write_kubeconfig(&args.kubeconfig)
        .context("writing the kubeconfig")?;
    if !args.strict_endpoints {
        tracing::warn!(
            "EndpointSlices may carry 127.0.0.0/8 addresses here so local processes can stand in \
             for pods; a real API server rejects them (--strict-endpoints turns this off)"
        );
    }
    if let Some(dir) = &args.manifests {
        let client = server.client().await?;
        let applied = fairlead_apiserver::manifests::apply_dir(&client, server.registry(), dir)
            .await
            .with_context(|| format!("applying the manifests of {}", dir.display()))?;
        tracing::info!(count = applied.len(), objects = ?applied, "manifests applied");
    }
    apiserver_ready.ready();
    tracing::info!(
        api = %server.url(),
        kubeconfig = %args.kubeconfig.display(),
        admin = %admin_addr,
        "fairlead up: running (embedded API server: development and test only); Ctrl-C to stop"
    );
    runtime.shutdown.triggered().await;
    server.shutdown();
    runtime.finish().await;
    tracing::info!("fairlead up: stopped");
    Ok(())
}
