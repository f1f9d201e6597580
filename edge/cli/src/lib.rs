//! `fairlead edge …`, the commands of the ALB's components: flags in, the pod's composition
//! started (`fairlead_compose::pods` for the gateway controller's and the xDS control plane's
//! pods): the xDS control plane (`xds`), the Envoy bootstrap that points a proxy at it
//! (`bootstrap`), the proxy container's supervisor of Envoy (`proxy`), the gateway controller
//! (`controller`), the GeoIP caching proxy and the downloader beside Envoy ([`geoproxy`]), the
//! module's cleanup waiter (`cleanup-wait`), and the module's RBAC (`rbac`).

pub mod geoproxy;
pub mod migrate;
pub mod waf;

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use fairlead_compose::pods;
use fairlead_edge_control_plane::run::{LEASE, Settings};
use fairlead_edge_model::ObjectKey;
use fairlead_kit::lease::LeaseConfig;
use fairlead_kit::shutdown::DEFAULT_DRAIN_DEADLINE;
use fairlead_kit::tls::ServingTls;
use fairlead_kit::{GlobalArgs, Runtime};

/// The edge module's commands.
#[derive(Debug, Subcommand)]
pub enum EdgeCommand {
    /// Run the xDS control plane: Gateway API in, Envoy configuration out over ADS, statuses
    /// written back (by the Lease holder).
    Xds(XdsArgs),
    /// Print an Envoy bootstrap (YAML) for one Gateway, pointing at an xDS server.
    Bootstrap(BootstrapArgs),
    /// Run Envoy for one Gateway, as the proxy container does: bootstrap, supervision,
    /// readiness once the control plane's listeners arrive, graceful drain on SIGTERM.
    Proxy(ProxyArgs),
    /// Run the gateway controller: installs the CRDs and the d8-alb GatewayClass, and turns
    /// ClusterALBInstances and ALBInstances into their Gateways (by the Lease holder).
    Controller(ControllerArgs),
    /// Print the ClusterALBInstance and ALBInstance CRDs (YAML).
    Crd,
    /// Print the components' RBAC (YAML): the alb chart's `templates/rbac.yaml`, from the
    /// rules the components' crates list.
    Rbac,
    /// Issue a client certificate for a proxy of your own, from the gateway controller's CA
    /// (read from its Secret, so this needs that access): `ca.crt`, `tls.crt` and `tls.key`
    /// for `fairlead edge bootstrap --xds-ca/--xds-cert/--xds-key`. The xDS server serves it
    /// only the Gateway it names.
    Certificate(CertificateArgs),
    /// Run the GeoIP caching proxy: MaxMind's databases (or a mirror's) downloaded once per
    /// interval by the Lease holder, checked, kept on disk and served to the proxies'
    /// downloaders.
    Geoproxy(geoproxy::GeoproxyArgs),
    /// Fetch the GeoIP databases beside Envoy: once before it starts (`--mode init`), or
    /// again every interval, replacing newer ones in place (`--mode sidecar`).
    GeoDownloader(geoproxy::DownloaderArgs),
    /// The WAF beside Envoy (routes with `mod-security`): the OWASP Core Rule Set and the
    /// routes' own rules on libmodsecurity, asked by Envoy's `ext_proc` filter over a Unix
    /// socket. Only in a build with the cargo feature `waf`.
    Waf(waf::WafArgs),
    /// Wait until the gateway controller has removed everything it made (the module's
    /// pre-delete hook): marks the module as going, then checks until nothing is left, or
    /// fails after `--timeout` naming what is.
    CleanupWait(CleanupWaitArgs),
    /// Convert ingress-nginx Ingresses (with their Services and DexAuthenticators) to draft
    /// ListenerSets, HTTPRoutes and ReferenceGrants for an ALB instance's Gateway, printed as
    /// YAML with a comment for each thing not carried — what the gateway controller's
    /// `/ingress2gateway` answers.
    Ingress2gateway(migrate::Ingress2gatewayArgs),
}

/// Options of `fairlead edge cleanup-wait`.
#[derive(Debug, Args)]
pub struct CleanupWaitArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// How long to wait, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// Options of `fairlead edge certificate`.
#[derive(Debug, Args)]
pub struct CertificateArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// The Gateway the proxy serves, `namespace/name`.
    #[arg(long, value_parser = gateway)]
    pub gateway: ObjectKey,
    /// Where to write `ca.crt`, `tls.crt` and `tls.key` (the key readable by its owner only).
    #[arg(long)]
    pub dir: std::path::PathBuf,
    /// The trust domain of the identity (as the controller's `--trust-domain`).
    #[arg(long, default_value = "cluster.local")]
    pub trust_domain: String,
    /// How long the certificate is valid, in seconds.
    #[arg(long, default_value_t = 90 * 24 * 3600)]
    pub lifetime: u64,
}

/// Options of `fairlead edge controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:9850")]
    pub admin_addr: SocketAddr,
    /// A health-only server (/healthz, /readyz) for the kubelet's probes, when the admin
    /// server stays on loopback behind kube-rbac-proxy.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// Namespace of the controller's Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "d8-alb")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "fairlead-edge-controller")]
    pub identity: String,
    /// The Gateway API channel installed when the CRDs are missing.
    #[arg(long, default_value = "standard")]
    pub gateway_api_channel: fairlead_edge_controller::crds::Channel,
    /// Where the proxies reach the xDS server, `host:port` (its serving certificate names
    /// the host).
    #[arg(long, default_value = "alb-xds.d8-alb.svc:18000")]
    pub xds_address: String,
    /// The proxy image (`fairlead` with Envoy beside it).
    #[arg(
        long,
        env = "FAIRLEAD_PROXY_IMAGE",
        default_value = "ghcr.io/fairlead/proxy:latest"
    )]
    pub proxy_image: String,
    /// kube-rbac-proxy's image, in front of the proxies' metrics.
    #[arg(long, default_value = "quay.io/brancz/kube-rbac-proxy:v0.19.1")]
    pub kube_rbac_proxy_image: String,
    /// The trust domain of the proxies' identities
    /// (`spiffe://<domain>/ns/<namespace>/gateway/<name>`).
    #[arg(long, default_value = "cluster.local")]
    pub trust_domain: String,
    /// How long the certificates the controller issues are valid, in seconds (renewed at
    /// two thirds).
    #[arg(long, default_value_t = 90 * 24 * 3600)]
    pub certificate_lifetime: u64,
    /// Bridge cert-manager's HTTP-01 solver routes through Ingresses of this class (the
    /// module's `migrations.http01CertificateSolverBridging`; off without it).
    #[arg(long)]
    pub http01_bridging_ingress_class: Option<String>,
    /// Address of the admission webhooks' server (TLS, certificate from the controller's CA).
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,
    /// Serve the ingress-nginx converter (`POST /ingress2gateway`) here: the module's
    /// `migrations.ingress2Gateway.enabled` (Deckhouse's port is 8082); off without it.
    #[arg(long)]
    pub ingress2gateway_addr: Option<SocketAddr>,
    /// The Service the API server reaches the webhooks through, `namespace/name` (the
    /// serving certificate names it; the chart makes it).
    #[arg(long, value_parser = gateway, default_value = "d8-alb/alb-gateway-controller")]
    pub webhook_service: ObjectKey,
    /// That Service's port.
    #[arg(long, default_value_t = 443)]
    pub webhook_service_port: u16,
    /// The users whose changes to managed Gateways are admitted, besides the cluster's
    /// garbage collector and namespace controller (repeatable; by default the controller's
    /// ServiceAccount, which its requests carry).
    #[arg(long = "managed-gateway-editor", default_values_t = [fairlead_edge_controller::webhook::CONTROLLER_USER.to_owned()])]
    pub managed_gateway_editors: Vec<String>,
    /// Replicas of each instance's GeoIP geoproxy (the Lease holder downloads, the others
    /// fetch from it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub geoproxy_replicas: u32,
    /// The storage class of the geoproxies' data (a PersistentVolumeClaim per replica, so
    /// a restart does not download again); an emptyDir without one.
    #[arg(long)]
    pub geoproxy_storage_class: Option<String>,
    /// How often a geoproxy asks MaxMind (or its mirror) about each edition, in seconds.
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(60..))]
    pub geoproxy_interval: u64,
    /// How often the proxies' GeoIP downloaders ask the geoproxy (or the mirror) again, in
    /// seconds.
    #[arg(long, default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(10..))]
    pub geo_downloader_interval: u64,
    /// Run proxies for Gateways of class `d8-alb` that no ClusterALBInstance or ALBInstance
    /// names, as the Gateway API provisions a Gateway (a Deployment, Service and
    /// ServiceAccount in its namespace carrying `spec.infrastructure`'s labels and
    /// annotations); by default, as in Deckhouse, only instances get proxies.
    #[arg(long)]
    pub provision_gateways: bool,
    /// Where the relationship graph's API listens: loopback, behind the pod's
    /// kube-rbac-proxy, which alone passes the user headers it trusts.
    #[arg(long, default_value = "127.0.0.1:9446")]
    pub graph_addr: SocketAddr,
    /// Prometheus, for the graph's traffic overlay (none without).
    #[arg(long, env = "FAIRLEAD_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
}

impl ControllerArgs {
    /// The controller loop's configuration these flags ask for.
    pub fn config(&self) -> anyhow::Result<fairlead_edge_controller::reconcile::Config> {
        let xds = fairlead_edge_bootstrap::parse_address(&self.xds_address)?;
        Ok(fairlead_edge_controller::reconcile::Config {
            workload: fairlead_edge_controller::workload::Settings {
                proxy_image: self.proxy_image.clone(),
                rbac_proxy_image: self.kube_rbac_proxy_image.clone(),
                xds,
                trust_domain: self.trust_domain.clone(),
                geoproxy: fairlead_edge_controller::geoproxy::Settings {
                    replicas: self.geoproxy_replicas,
                    storage_class: self.geoproxy_storage_class.clone(),
                    interval: self.geoproxy_interval,
                    downloader_interval: self.geo_downloader_interval,
                },
            },
            lifetime: Some(std::time::Duration::from_secs(self.certificate_lifetime)),
            http01_ingress_class: self.http01_bridging_ingress_class.clone(),
            webhook: Some(fairlead_edge_controller::webhook::WebhookService {
                service: self.webhook_service.clone(),
                port: self.webhook_service_port,
            }),
            provision_gateways: self.provision_gateways,
        })
    }
}

/// Options of `fairlead edge proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// A bootstrap the gateway controller rendered (the proxy's ConfigMap, its client
    /// certificate's SDS document beside it), instead of one rendered from the flags below.
    #[arg(long, conflicts_with_all = ["gateway", "xds"])]
    pub bootstrap_file: Option<std::path::PathBuf>,
    /// The bootstrap to render (the SDS document goes to `--work-dir` unless
    /// `--xds-sds-file` says).
    #[command(flatten)]
    pub bootstrap: Option<BootstrapArgs>,
    /// The Envoy binary.
    #[arg(long, env = "FAIRLEAD_ENVOY", default_value = "envoy")]
    pub envoy: std::path::PathBuf,
    /// Where the bootstrap and the SDS document are written.
    #[arg(long, default_value = "/tmp/fairlead-proxy")]
    pub work_dir: std::path::PathBuf,
    /// Envoy's log level.
    #[arg(long, default_value = "info", value_parser = ["trace", "debug", "info", "warning", "error", "critical", "off"])]
    pub envoy_log_level: String,
    /// The supervisor's admin server: /healthz, /readyz (ready once Envoy serves the
    /// control plane's listeners), /metrics, and Envoy's /stats/prometheus.
    #[arg(long, default_value = "0.0.0.0:19001")]
    pub metrics_addr: SocketAddr,
    /// The admin server of the WAF beside Envoy, when the pod runs one: its metrics are
    /// served on the metrics port as /waf/metrics.
    #[arg(long)]
    pub waf_admin_addr: Option<SocketAddr>,
    /// Where Envoy's admin interface listens, instead of the bootstrap's address (loopback
    /// only: the admin can stop Envoy).
    #[arg(long)]
    pub envoy_admin_address: Option<SocketAddr>,
    /// A health-only server (/healthz, /readyz) for the kubelet's probes, when metrics stay
    /// on loopback behind kube-rbac-proxy.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// The longest drain on SIGTERM, in seconds.
    #[arg(long, default_value_t = 60)]
    pub drain_deadline: u64,
    /// Open connections few enough to stop draining early.
    #[arg(long, default_value_t = 0)]
    pub drain_threshold: u64,
    /// The directory of GeoIP databases the downloader keeps beside Envoy: the editions
    /// there when Envoy starts are told to the xDS server, which serves the GeoIP filter
    /// only to proxies holding every database it opens.
    #[arg(long)]
    pub geoip_dir: Option<std::path::PathBuf>,
    /// The pod's own address, to listen on besides the Gateway's address where the
    /// Gateway's listeners bind one (its proxies share it, and a Service reaches each of
    /// them at its own; told to the xDS server in the node metadata).
    #[arg(long)]
    pub pod_address: Option<std::net::IpAddr>,
}

/// Options of `fairlead edge xds`.
#[derive(Debug, Args)]
pub struct XdsArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// Address of the xDS (gRPC) server.
    #[arg(long, default_value = "0.0.0.0:18000")]
    pub xds_addr: SocketAddr,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:4251")]
    pub admin_addr: SocketAddr,
    /// A health-only server (/healthz, /readyz) for the kubelet's probes, when the admin
    /// server stays on loopback behind kube-rbac-proxy.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// The GatewayClass controller name served.
    #[arg(long, default_value = fairlead_edge_model::CONTROLLER_NAME)]
    pub controller_name: String,
    /// Namespace of the status writer's Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "d8-alb")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "fairlead-edge-xds")]
    pub identity: String,
    /// The Secret (`namespace/name`, `kubernetes.io/tls` with `ca.crt`) holding the xDS
    /// server's certificate and the proxies' CA, as the gateway controller issues it
    /// (`d8-alb/alb-xds-tls`); watched, so a renewed certificate is served without a restart.
    #[arg(long, value_parser = gateway, conflicts_with_all = ["tls_cert_file", "insecure"])]
    pub tls_secret: Option<ObjectKey>,
    /// The xDS server's certificate (PEM, read again every 10 s); with `--tls-key-file`, the
    /// server speaks TLS.
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The private key of `--tls-cert-file` (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,
    /// CA bundle (PEM) that proxies' client certificates must chain to (mutual TLS).
    #[arg(long, requires = "tls_cert_file")]
    pub client_ca_file: Option<std::path::PathBuf>,
    /// Serve xDS in plaintext (without TLS flags the server refuses to start).
    #[arg(long, conflicts_with = "tls_cert_file")]
    pub insecure: bool,
}

impl XdsArgs {
    /// Whether the flags name a source of the serving certificate, or `--insecure`.
    fn check_tls(&self) -> anyhow::Result<()> {
        match (&self.tls_secret, &self.tls_cert_file, &self.tls_key_file) {
            (Some(_), _, _) | (None, Some(_), Some(_)) => Ok(()),
            _ if self.insecure => Ok(()),
            _ => anyhow::bail!(
                "the xDS server needs --tls-secret, or --tls-cert-file and --tls-key-file (and --client-ca-file for mutual TLS), or --insecure for plaintext"
            ),
        }
    }

    /// The TLS source the flags ask for: `None` only with `--insecure`.
    fn tls(
        &self,
        client: &kube::Client,
        stop: tokio_util::sync::CancellationToken,
    ) -> anyhow::Result<Option<tokio::sync::watch::Receiver<Option<ServingTls>>>> {
        use fairlead_kit::tls;
        self.check_tls()?;
        match (&self.tls_secret, &self.tls_cert_file, &self.tls_key_file) {
            (Some(secret), _, _) => Ok(Some(tls::watch_secret(
                client.clone(),
                secret.clone(),
                true,
                stop,
            ))),
            (None, Some(cert), Some(key)) => Ok(Some(
                tls::watch_files(cert.clone(), key.clone(), self.client_ca_file.clone(), stop)
                    .context("reading the xDS server's certificate files")?,
            )),
            _ => Ok(None),
        }
    }
}

/// A Gateway named `namespace/name`.
fn gateway(text: &str) -> Result<ObjectKey, String> {
    match ObjectKey::parse(text) {
        Ok(key) if !key.namespace().is_empty() => Ok(key),
        _ => Err(format!("{text:?} is not <namespace>/<name>")),
    }
}

/// Options of `fairlead edge bootstrap`.
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    /// The Gateway the proxy serves, `namespace/name`.
    #[arg(long, value_parser = gateway)]
    pub gateway: ObjectKey,
    /// The xDS server, `host:port`.
    #[arg(long)]
    pub xds: String,
    /// The proxy's node id (default: the Gateway's name).
    #[arg(long)]
    pub node_id: Option<String>,
    /// Port of Envoy's admin interface (on 127.0.0.1).
    #[arg(long, default_value_t = 19000)]
    pub admin_port: u16,
    /// CA bundle (file, as Envoy reads it) that the xDS server's certificate must chain to;
    /// without it the proxy speaks plaintext to the xDS server.
    #[arg(long)]
    pub xds_ca: Option<std::path::PathBuf>,
    /// The proxy's client certificate for mutual TLS (file).
    #[arg(long, requires_all = ["xds_ca", "xds_key"])]
    pub xds_cert: Option<std::path::PathBuf>,
    /// The private key of `--xds-cert` (file).
    #[arg(long, requires = "xds_cert")]
    pub xds_key: Option<std::path::PathBuf>,
    /// Where to write the SDS document that hands Envoy `--xds-cert` (default:
    /// `xds-client-sds.json` beside it). Envoy watches both, so a renewed certificate needs
    /// no restart.
    #[arg(long, requires = "xds_cert")]
    pub xds_sds_file: Option<std::path::PathBuf>,
    /// The OTLP/gRPC collector Envoy sends its spans to (`http://host:port`; the standard
    /// variables name it too, as they do for fairlead's own spans); without one, spans are
    /// dropped.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

impl BootstrapArgs {
    /// The bootstrap these arguments ask for; file paths made absolute, so Envoy finds them
    /// from any directory.
    pub fn spec(
        &self,
    ) -> Result<fairlead_edge_bootstrap::Spec, fairlead_edge_bootstrap::BootstrapError> {
        let (xds_host, xds_port) = fairlead_edge_bootstrap::parse_address(&self.xds)?;
        let absolute = |path: &std::path::Path| {
            std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string()
        };
        Ok(fairlead_edge_bootstrap::Spec {
            gateway: self.gateway.clone(),
            node_id: self.node_id.clone(),
            xds_host,
            xds_port,
            admin_port: self.admin_port,
            otlp: self
                .otlp_endpoint
                .clone()
                .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
                .filter(|e| !e.is_empty())
                .map(|e| {
                    fairlead_edge_bootstrap::parse_otlp(&e)
                        .map(|(host, port)| fairlead_edge_bootstrap::Otlp::grpc(host, port))
                })
                .transpose()?,
            tls: self
                .xds_ca
                .as_deref()
                .map(|ca| fairlead_edge_bootstrap::Tls {
                    ca: absolute(ca),
                    client: self.xds_cert.as_deref().zip(self.xds_key.as_deref()).map(
                        |(cert, key)| fairlead_edge_bootstrap::ClientCertificate {
                            cert: absolute(cert),
                            key: absolute(key),
                            sds: absolute(
                                &self
                                    .xds_sds_file
                                    .clone()
                                    .unwrap_or_else(|| cert.with_file_name("xds-client-sds.json")),
                            ),
                        },
                    ),
                }),
        })
    }
}

/// A component's runtime, its client of the Kubernetes API and its admin server on
/// `admin_addr`.
async fn connected(
    global: &GlobalArgs,
    cluster: &fairlead_kit::cluster::ClusterArgs,
    name: &str,
    admin_addr: SocketAddr,
    health_addr: Option<SocketAddr>,
) -> anyhow::Result<(Runtime, kube::Client)> {
    let runtime = Runtime::start(global, name, DEFAULT_DRAIN_DEADLINE)?;
    let client = cluster.client().await?;
    runtime.serve_admin(admin_addr, health_addr, None).await?;
    Ok((runtime, client))
}

/// Runs the control plane until a shutdown signal, with its admin server.
pub async fn xds(global: &GlobalArgs, args: XdsArgs) -> anyhow::Result<()> {
    args.check_tls()?;
    let (runtime, client) = connected(
        global,
        &args.cluster,
        "fairlead-edge-xds",
        args.admin_addr,
        args.health_addr,
    )
    .await?;
    let tls = args.tls(&client, runtime.shutdown.token())?;
    let settings = Settings {
        controller_name: args.controller_name,
        lease: LeaseConfig::new(LEASE, &args.lease_namespace, &args.identity),
        waf: fairlead_compose::waf::check(),
    };
    let listener = pods::bind("xDS server", args.xds_addr).await?;
    pods::xds(
        &runtime,
        client,
        pods::XdsPod {
            listener,
            tls,
            settings,
            index: None,
        },
    )?;
    runtime.finish().await;
    Ok(())
}

/// Runs Envoy under the supervisor until SIGTERM/SIGINT (then drains it), or fails with
/// Envoy's last lines when Envoy dies.
pub async fn proxy(global: &GlobalArgs, args: ProxyArgs) -> anyhow::Result<()> {
    let bootstrap = match (&args.bootstrap_file, &args.bootstrap) {
        (Some(file), _) => fairlead_edge_proxy::Bootstrap::File(std::path::absolute(file)?),
        (None, Some(flags)) => {
            let mut spec = flags.spec()?;
            if flags.xds_sds_file.is_none()
                && let Some(client) = spec.tls.as_mut().and_then(|tls| tls.client.as_mut())
            {
                client.sds = std::path::absolute(args.work_dir.join("xds-client-sds.json"))?
                    .display()
                    .to_string();
            }
            fairlead_edge_proxy::Bootstrap::Render(Box::new(spec))
        }
        (None, None) => anyhow::bail!(
            "fairlead edge proxy needs --bootstrap-file, or --gateway and --xds to render one"
        ),
    };
    let admin = match args.envoy_admin_address {
        Some(address) if !address.ip().is_loopback() => anyhow::bail!(
            "--envoy-admin-address {address}: Envoy's admin interface stays on a loopback address"
        ),
        Some(address) => address,
        None => bootstrap.admin()?,
    };
    let drain = std::time::Duration::from_secs(args.drain_deadline);
    // The runtime's own drain outlasts Envoy's.
    let runtime = Runtime::start(
        global,
        "fairlead-edge-proxy",
        drain + std::time::Duration::from_secs(10),
    )?;
    let envoy_ready = runtime.readiness.register("envoy");
    runtime
        .serve_admin(
            args.metrics_addr,
            args.health_addr,
            Some(fairlead_edge_proxy::stats_router(
                admin,
                args.waf_admin_addr,
            )),
        )
        .await?;
    let settings = fairlead_edge_proxy::Settings {
        envoy: args.envoy,
        bootstrap,
        admin_address: args.envoy_admin_address,
        // Through `fairlead exec-child`: an Envoy never outlives its supervisor.
        launcher: Some(vec![
            std::env::current_exe()?.into_os_string(),
            "exec-child".into(),
            "--parent".into(),
            fairlead_kit::process::pid().to_string().into(),
            "--".into(),
        ]),
        work_dir: args.work_dir,
        log_level: args.envoy_log_level,
        access_log: None,
        geoip_dir: args.geoip_dir,
        pod_address: args.pod_address,
        drain: fairlead_edge_proxy::drain::Drain {
            deadline: drain,
            threshold: args.drain_threshold,
            ..Default::default()
        },
    };
    let supervised = runtime.shutdown.spawn(fairlead_edge_proxy::run(
        settings,
        runtime.shutdown.token(),
        move |ready| {
            if ready {
                envoy_ready.ready();
            } else {
                envoy_ready.not_ready();
            }
        },
    ));
    let outcome = supervised.await.context("the supervisor task")?;
    if outcome.is_err() {
        runtime.shutdown.trigger();
    }
    runtime.finish().await;
    Ok(outcome?)
}

/// Runs the gateway controller's pod (the controller and the relationship graph) until a
/// shutdown signal.
pub async fn controller(global: &GlobalArgs, args: ControllerArgs) -> anyhow::Result<()> {
    use fairlead_edge_controller::{reconcile, start};
    let config = args.config()?;
    let (runtime, client) = connected(
        global,
        &args.cluster,
        "fairlead-edge-controller",
        args.admin_addr,
        args.health_addr,
    )
    .await?;
    let controller = start::Settings {
        controller_name: fairlead_edge_model::CONTROLLER_NAME.to_owned(),
        channel: args.gateway_api_channel,
        // Objects of another storage version would be read wrong: refuse to run, saying why.
        storage_mismatch: start::StorageMismatch::Refuse,
        lease: LeaseConfig::new(reconcile::LEASE, &args.lease_namespace, &args.identity),
        reconcile: config,
        webhook_listener: pods::bind("admission webhooks", args.webhook_addr).await?,
        managed_gateway_editors: args.managed_gateway_editors,
        ingress2gateway_listener: match args.ingress2gateway_addr {
            Some(address) => Some(pods::bind("ingress2gateway", address).await?),
            None => None,
        },
    };
    pods::gateway_controller(
        &runtime,
        client,
        pods::GatewayControllerPod {
            controller,
            graph: pods::cluster_graph(args.graph_addr, args.prometheus_url),
            index: None,
        },
    )
    .await?;
    runtime.finish().await;
    Ok(())
}

/// Issues a proxy's client certificate from the controller's CA into `args.dir`.
pub async fn certificate(args: CertificateArgs) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    let client = args.cluster.client().await?;
    let ca = fairlead_edge_controller::certificates::stored_authority(&client)
        .await?
        .context("the gateway controller has made no CA yet (Secret d8-alb/alb-ca)")?;
    let identity = fairlead_edge_controller::workload::identity(&args.trust_domain, &args.gateway);
    let issued = ca.issue_client_uri(&identity, std::time::Duration::from_secs(args.lifetime))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    fairlead_kit::files::publish(
        &args.dir,
        &[
            ("ca.crt", ca.cert_pem().as_bytes(), 0o644),
            ("tls.crt", issued.cert_pem.as_bytes(), 0o644),
            ("tls.key", issued.key_pem.as_bytes(), 0o600),
        ],
    )
    .with_context(|| format!("writing the certificate into {}", args.dir.display()))?;
    eprintln!(
        "wrote {}/{{ca.crt,tls.crt,tls.key}}: a client certificate for {identity}",
        args.dir.display()
    );
    Ok(())
}

/// Runs an edge command.
pub async fn run(global: &GlobalArgs, command: EdgeCommand) -> anyhow::Result<()> {
    match command {
        EdgeCommand::Xds(args) => xds(global, args).await,
        EdgeCommand::Proxy(args) => proxy(global, args).await,
        EdgeCommand::Controller(args) => controller(global, args).await,
        EdgeCommand::Certificate(args) => certificate(args).await,
        EdgeCommand::Geoproxy(args) => geoproxy::run(global, args).await,
        EdgeCommand::GeoDownloader(args) => geoproxy::downloader(global, args).await,
        EdgeCommand::Waf(args) => waf::run(global, args).await,
        EdgeCommand::CleanupWait(args) => {
            let client = args.cluster.client().await?;
            fairlead_edge_controller::cleanup::wait(
                &client,
                std::time::Duration::from_secs(args.timeout),
                std::time::Duration::from_secs(2),
            )
            .await?;
            eprintln!("the gateway controller removed everything it made");
            Ok(())
        }
        EdgeCommand::Rbac => {
            print!(
                "{}",
                fairlead_kit::rbac::yaml_stream(&fairlead_compose::rbac::objects(
                    fairlead_edge_model::names::CLUSTER_NAMESPACE
                ))?
            );
            Ok(())
        }
        EdgeCommand::Ingress2gateway(args) => migrate::run(&args),
        EdgeCommand::Crd => {
            for crd in fairlead_edge_api::crd::crds() {
                print!("---\n{}", serde_yaml_ng::to_string(&crd)?);
            }
            Ok(())
        }
        EdgeCommand::Bootstrap(args) => {
            let spec = args.spec()?;
            if let Some(client) = spec.tls.as_ref().and_then(|tls| tls.client.as_ref()) {
                let document = fairlead_edge_bootstrap::sds_document(client)?;
                fairlead_kit::files::write_atomically(
                    std::path::Path::new(&client.sds),
                    document.as_bytes(),
                    0o644,
                )
                .with_context(|| format!("writing {}", client.sds))?;
                eprintln!(
                    "wrote {} (the client certificate's SDS document)",
                    client.sds
                );
            }
            print!("{}", fairlead_edge_bootstrap::yaml(&spec)?);
            Ok(())
        }
    }
}
