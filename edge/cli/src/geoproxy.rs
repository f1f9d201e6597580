//! `fairlead edge geoproxy` and `fairlead edge geo-downloader`: the wiring of the GeoIP
//! caching proxy and of the downloader beside Envoy. The geoproxy's licence comes from the
//! environment (`MAXMIND_LICENSE_KEY`, and `MAXMIND_ACCOUNT_ID` for MaxMind's current API),
//! which a pod maps from the licence Secret, so the geoproxy needs no right to read Secrets;
//! or it fetches from a mirror; with `--lease` only the Lease holder asks the
//! source, and the other replicas fetch from `--peers`. The downloader fetches from the
//! geoproxy (or the instance's mirror) into the directory Envoy reads.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use fairlead_edge_geoip::Edition;
use fairlead_edge_geoip::geoproxy::Settings;
use fairlead_edge_geoip::source::{LEGACY_HOST, MAXMIND_HOST, Retry, Source};
use fairlead_kit::lease::LeaseConfig;
use fairlead_kit::shutdown::DEFAULT_DRAIN_DEADLINE;
use fairlead_kit::{GlobalArgs, Runtime};

/// Options of `fairlead edge geoproxy`.
#[derive(Debug, Args)]
pub struct GeoproxyArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// The editions to hold, comma-separated (e.g. `GeoIP2-City,GeoLite2-ASN`).
    #[arg(long, value_delimiter = ',', required = true)]
    pub editions: Vec<Edition>,
    /// The data directory (a PersistentVolumeClaim's mount, or an emptyDir).
    #[arg(long, default_value = "/data")]
    pub data_dir: std::path::PathBuf,
    /// How often MaxMind is asked about each edition, in seconds (at least 60).
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(60..))]
    pub interval: u64,
    /// Where the databases are served (`/download/<Edition>.tar.gz`).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub addr: SocketAddr,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub admin_addr: SocketAddr,
    /// A health-only server for the kubelet's probes.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// MaxMind's licence key (without one, `--mirror` is the source).
    #[arg(long, env = "MAXMIND_LICENSE_KEY", hide_env_values = true)]
    pub license_key: Option<LicenseKey>,
    /// MaxMind's account ID (with it, MaxMind's current API; without, its legacy URL).
    #[arg(long, env = "MAXMIND_ACCOUNT_ID")]
    pub account_id: Option<String>,
    /// A mirror serving `<url>/<Edition>.tar.gz`, instead of MaxMind (it wins over a
    /// licence).
    #[arg(long)]
    pub mirror: Option<String>,
    /// MaxMind's update host (its current API).
    #[arg(long, default_value = MAXMIND_HOST)]
    pub maxmind_host: String,
    /// MaxMind's legacy download host.
    #[arg(long, default_value = LEGACY_HOST)]
    pub legacy_host: String,
    /// Elect the downloader with this Lease (in `--lease-namespace`); the others fetch from
    /// `--peers`.
    #[arg(long)]
    pub lease: Option<String>,
    /// Namespace of the Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "d8-alb")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "fairlead-geoproxy")]
    pub identity: String,
    /// Where replicas that do not hold the Lease fetch (the geoproxy's Service:
    /// `http://<service>:8080/download`).
    #[arg(long)]
    pub peers: Option<String>,
}

/// A licence key, never shown (`Debug` prints a placeholder).
#[derive(Clone)]
pub struct LicenseKey(String);

impl std::str::FromStr for LicenseKey {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(Self(text.trim().to_owned()))
    }
}

impl std::fmt::Debug for LicenseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<licence key>")
    }
}

impl GeoproxyArgs {
    /// The source these flags name.
    fn source(&self) -> anyhow::Result<Source> {
        Ok(match (&self.mirror, &self.license_key, &self.account_id) {
            (Some(url), _, _) => Source::Mirror { url: url.clone() },
            (None, Some(key), Some(account)) => Source::MaxMind {
                host: self.maxmind_host.clone(),
                account_id: account.clone(),
                license_key: key.0.clone(),
            },
            (None, Some(key), None) => Source::Legacy {
                host: self.legacy_host.clone(),
                license_key: key.0.clone(),
            },
            (None, None, _) => anyhow::bail!(
                "the geoproxy needs MaxMind's licence (--license-key or MAXMIND_LICENSE_KEY) or --mirror"
            ),
        })
    }
}

/// Runs the geoproxy until a shutdown signal.
pub async fn run(global: &GlobalArgs, args: GeoproxyArgs) -> anyhow::Result<()> {
    let source = args.source()?;
    let runtime = Runtime::start(global, "fairlead-edge-geoproxy", DEFAULT_DRAIN_DEADLINE)?;
    runtime
        .serve_admin(args.admin_addr, args.health_addr, None)
        .await?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let leadership = match &args.lease {
        Some(name) => {
            let client = args.cluster.client().await?;
            let (leadership, _lease) = fairlead_kit::lease::spawn(
                client,
                LeaseConfig::new(name, &args.lease_namespace, &args.identity),
                runtime.shutdown.token(),
            );
            Some(leadership)
        }
        None => None,
    };
    let settings = Settings {
        editions: args.editions,
        interval: Duration::from_secs(args.interval),
        source,
        peers: args.peers,
        retry: Retry::default(),
    };
    fairlead_edge_geoip::start::start(&runtime, listener, &args.data_dir, settings, leadership)?;
    runtime.finish().await;
    Ok(())
}

/// What the downloader does.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// Get every database, then exit (the init container, before Envoy starts).
    Init,
    /// Ask again every interval and replace newer ones in place (the sidecar).
    Sidecar,
}

/// Options of `fairlead edge geo-downloader`.
#[derive(Debug, Args)]
pub struct DownloaderArgs {
    /// Init container or sidecar.
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// Where the databases come from: the geoproxy's `/download` (or the instance's mirror).
    #[arg(long)]
    pub source: String,
    /// The editions, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub editions: Vec<Edition>,
    /// The directory Envoy reads them from (an emptyDir shared with the proxy container).
    #[arg(long, default_value = "/var/run/fairlead/geoip")]
    pub dir: std::path::PathBuf,
    /// How often the sidecar asks again, in seconds (at least 10).
    #[arg(long, default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(10..))]
    pub interval: u64,

    /// How many times the init container tries each edition before it fails.
    #[arg(long, default_value_t = 12)]
    pub attempts: u32,
}

/// Runs the downloader: `init` returns once every database is in place (or fails naming
/// those it could not get); `sidecar` runs until a shutdown signal.
pub async fn downloader(global: &GlobalArgs, args: DownloaderArgs) -> anyhow::Result<()> {
    let runtime = Runtime::start(
        global,
        "fairlead-edge-geo-downloader",
        DEFAULT_DRAIN_DEADLINE,
    )?;
    let store = fairlead_edge_geoip::store::Store::open(&args.dir)
        .with_context(|| format!("opening {}", args.dir.display()))?;
    let store = Mutex::new(store);
    let http =
        fairlead_edge_geoip::http::Http::new(None).context("the HTTPS client's trust store")?;
    let source = Source::Mirror { url: args.source };
    let retry = Retry {
        attempts: args.attempts,
        first: Duration::from_secs(1),
        max: Duration::from_secs(10),
    };
    use fairlead_edge_geoip::downloader;
    let outcome = match args.mode {
        Mode::Init => downloader::init(&store, &http, &source, &args.editions, retry)
            .await
            .map_err(anyhow::Error::from),
        Mode::Sidecar => {
            downloader::sidecar(
                &store,
                &http,
                &source,
                &args.editions,
                Duration::from_secs(args.interval),
                Retry::default(),
                runtime.shutdown.token(),
            )
            .await;
            Ok(())
        }
    };
    runtime.shutdown.trigger();
    runtime.finish().await;
    outcome
}
