//! `fairlead edge waf`: the WAF beside Envoy in a proxy pod whose Gateway has a route with
//! `mod-security` — the `ext_proc` service on a Unix socket of the pod's run directory, its
//! metrics on the admin server. Only a build with the cargo feature `waf` carries the engine;
//! another refuses to start, saying so.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use fairlead_kit::GlobalArgs;

/// Options of `fairlead edge waf`.
#[derive(Debug, Args)]
pub struct WafArgs {
    /// The Unix socket Envoy asks on (the pod's shared run directory).
    #[arg(long, default_value = "/var/run/fairlead/waf.sock")]
    pub socket: PathBuf,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9105")]
    pub admin_addr: SocketAddr,
    /// A health-only server for the kubelet's probes.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// The OWASP CRS's setup file.
    #[arg(long, default_value = "/etc/modsecurity/crs/crs-setup.conf")]
    pub crs_setup: PathBuf,
    /// The directory of the OWASP CRS's rule files.
    #[arg(long, default_value = "/usr/share/modsecurity-crs/rules")]
    pub crs_rules: PathBuf,
}

/// Runs the WAF until a signal.
#[cfg(feature = "waf")]
pub async fn run(global: &GlobalArgs, args: WafArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::sync::Arc;
    let runtime = fairlead_kit::Runtime::start(
        global,
        "fairlead-edge-waf",
        fairlead_kit::shutdown::DEFAULT_DRAIN_DEADLINE,
    )?;
    let ready = runtime.readiness.register("waf");
    runtime
        .serve_admin(args.admin_addr, args.health_addr, None)
        .await?;
    let metrics = fairlead_edge_waf::metrics::WafMetrics::new(&runtime.metrics)?;
    let engine = fairlead_modsecurity::Engine::new(concat!("fairlead ", env!("CARGO_PKG_VERSION")))
        .context("starting libmodsecurity")?;
    let crs = fairlead_edge_waf::Crs {
        setup: args.crs_setup,
        rules: args.crs_rules,
    };
    tracing::info!(engine = %engine.version(), socket = %args.socket.display(), "the WAF serves Envoy");
    let sets = Arc::new(fairlead_edge_waf::Sets::new(
        engine,
        crs,
        metrics.rule_sets.clone(),
    ));
    let service = fairlead_edge_waf::service::Service::new(sets, metrics);
    let stop = runtime.shutdown.token();
    let socket = args.socket.clone();
    let server = tokio::spawn(fairlead_edge_waf::serve(socket, service, stop));
    ready.ready();
    runtime.finish().await;
    server
        .await?
        .with_context(|| format!("serving on {}", args.socket.display()))
}

/// Refuses to run: this build has no WAF engine.
#[cfg(not(feature = "waf"))]
pub async fn run(_: &GlobalArgs, _: WafArgs) -> anyhow::Result<()> {
    anyhow::bail!(
        "this fairlead is built without the WAF: build it with `cargo build --release --features waf` (needs libmodsecurity-dev; scripts/setup installs it)"
    )
}
