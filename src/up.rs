//! `fairlead up`: the appliance on one machine. It starts the embedded API server (HTTPS on
//! loopback, a CA generated at start, a kubeconfig written for clients), the health module
//! (its CRD, a local Node, the controller and the agent of that node), the edge control plane
//! (the Gateway API CRDs, the `d8-alb` GatewayClass, the xDS server over mutual TLS with a CA
//! of its own, whose files it writes for proxies), applies the manifests of `-f DIR`, and
//! serves the admin endpoints and telemetry of the process.

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

    /// The node the local health agent serves: pods with this `spec.nodeName` are probed.
    #[arg(long, default_value = "local")]
    node_name: String,

    /// Address of the xDS server (ADS) that Envoy and gRPC clients connect to.
    #[arg(long, default_value = "127.0.0.1:18000", env = "FAIRLEAD_XDS_ADDR")]
    xds_addr: SocketAddr,

    /// The Gateway API release channel whose CRDs are installed (upstream's bundle, see
    /// `edge/controller/gateway-api`): `standard`, or `experimental` (adds the `v1alpha2`
    /// route versions and experimental kinds and fields).
    #[arg(long, default_value = "standard")]
    gateway_api_channel: fairlead_edge_controller::crds::Channel,

    /// Run no Envoy per Gateway (for proxies of your own, `fairlead edge bootstrap`): by
    /// default each Gateway of class d8-alb gets a local proxy on a loopback address of its
    /// own (127.0.1.N, in its status.addresses).
    #[arg(long)]
    no_local_proxies: bool,

    /// Apply the manifests (.yaml, .yml, .json) of this directory after start.
    #[arg(short = 'f', long = "filename")]
    manifests: Option<PathBuf>,

    /// Longest wait for in-flight work after SIGTERM/SIGINT, in seconds.
    #[arg(long, default_value_t = 25.0, value_parser = parse_seconds)]
    drain_deadline: f64,
}

/// Installs the ServiceWithHealthchecks CRD and the local Node, and starts the health
/// controller and an agent for that node.
async fn start_health(runtime: &Runtime, client: &kube::Client, node: &str) -> anyhow::Result<()> {
    use fairlead_health::{agent, controller, metrics::HealthMetrics};
    use fairlead_kit::apply::apply;
    use fairlead_kit::lease::LeaseConfig;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    apply(&crds, "fairlead-up", &fairlead_health_api::crd(), None)
        .await
        .context("installing the ServiceWithHealthchecks CRD")?;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let local: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}))?;
    apply(&nodes, "fairlead-up", &local, None)
        .await
        .context("registering the local node")?;

    let metrics = HealthMetrics::new(&runtime.metrics)?;
    let agent_ready = runtime.readiness.register("health-agent");
    let controller_ready = runtime.readiness.register("health-controller");
    let settings = agent::Settings {
        node: node.to_owned(),
        concurrency: 256,
        verbose_status: false,
    };
    runtime.shutdown.spawn(agent::run(
        client.clone(),
        settings,
        metrics.clone(),
        runtime.shutdown.token(),
        move || agent_ready.ready(),
    ));
    let lease = LeaseConfig::new(controller::LEASE, "kube-system", "fairlead-up");
    runtime.shutdown.spawn(controller::run(
        client.clone(),
        lease,
        metrics,
        runtime.shutdown.token(),
        move || controller_ready.ready(),
    ));
    Ok(())
}

/// The xDS server's mutual TLS: a CA, a serving certificate for `localhost` and the server's
/// address (issued at every start), and one client certificate for local proxies. The CA
/// (with its key, `ca.key`) and the proxy's certificate and key are written to `dir`
/// (`ca.crt`, `proxy.crt`, `proxy.key`, for `fairlead edge bootstrap
/// --xds-ca/--xds-cert/--xds-key`) once, and reused at the next start: a proxy bootstrapped
/// before a restart keeps trusting the server, and the server keeps trusting it. The proxy's
/// certificate is issued again when it is due ([`renew_proxy_certificate`]).
fn xds_tls(
    dir: &std::path::Path,
    addr: SocketAddr,
) -> anyhow::Result<(fairlead_kit::pki::Ca, fairlead_edge_xds::serve::XdsTls)> {
    use fairlead_kit::pki::Ca;
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    const NAME: &str = "fairlead-up xds CA";
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let stored = read("ca.crt").zip(read("ca.key"));
    let (ca, fresh) = match &stored {
        Some((cert, key)) => match Ca::restore(NAME, cert, key) {
            Ok(ca) => (ca, false),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the stored xDS CA does not load; generating a new one (proxies bootstrapped before must be bootstrapped again)");
                (Ca::generate(NAME)?, true)
            }
        },
        None => (Ca::generate(NAME)?, true),
    };
    let ip = if addr.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        addr.ip()
    };
    let server = ca.issue_server(&["localhost"], &[ip])?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    if fresh {
        write(&dir.join("ca.key"), ca.key_pem(), 0o600)?;
        write(&dir.join("ca.crt"), ca.cert_pem(), 0o644)?;
    }
    renew_proxy_certificate(dir, &ca)?;
    let tls = fairlead_edge_xds::serve::XdsTls {
        cert_pem: server.cert_pem,
        key_pem: server.key_pem,
        client_ca_pem: Some(ca.cert_pem().to_owned()),
    };
    Ok((ca, tls))
}

/// Writes `text` to `path` whole, with permission bits `mode`.
fn write(path: &std::path::Path, text: &str, mode: u32) -> anyhow::Result<()> {
    fairlead_kit::files::write_atomically(path, text.as_bytes(), mode)
        .with_context(|| format!("writing {}", path.display()))
}

/// Issues the local proxies' client certificate (`proxy.crt`, `proxy.key` in `dir`) again
/// when there is none, it does not chain to `ca`, or a third of its validity is left. Both
/// are published together (one switch of a link, as a Secret volume does), and Envoy reads
/// them again through its SDS document. Whether it did.
fn renew_proxy_certificate(
    dir: &std::path::Path,
    ca: &fairlead_kit::pki::Ca,
) -> anyhow::Result<bool> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let current = read("proxy.crt").filter(|_| read("proxy.key").is_some());
    if current.is_some_and(|cert| !fairlead_kit::pki::due_for_renewal(ca.cert_pem(), &cert)) {
        return Ok(false);
    }
    let proxy = ca.issue_client("fairlead-up-proxy")?;
    fairlead_kit::files::publish(
        dir,
        &[
            ("proxy.crt", proxy.cert_pem.as_bytes(), 0o644),
            ("proxy.key", proxy.key_pem.as_bytes(), 0o600),
        ],
    )
    .with_context(|| format!("writing the proxy certificate in {}", dir.display()))?;
    tracing::info!(dir = %dir.display(), "issued the local proxies' xDS client certificate");
    Ok(true)
}

/// Checks the proxies' client certificate hourly while `fairlead up` runs, renewing it when
/// due; a failure is logged and tried again at the next check.
fn keep_proxy_certificate(runtime: &Runtime, dir: std::path::PathBuf, ca: fairlead_kit::pki::Ca) {
    let stop = runtime.shutdown.token();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(3600));
        every.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            if let Err(e) = renew_proxy_certificate(&dir, &ca) {
                tracing::error!(dir = %dir.display(), error = %format!("{e:#}"), "renewing the local proxies' xDS client certificate failed; trying again in an hour");
            }
        }
    });
}

/// Installs the ALB instance and Gateway API CRDs and the `d8-alb` GatewayClass, and starts
/// the gateway controller, the xDS control plane and, with `proxies` (the directory of the proxies' certificates, and of their
/// bootstraps), a local proxy per Gateway.
async fn start_edge(
    runtime: &Runtime,
    client: &kube::Client,
    xds_addr: SocketAddr,
    tls: fairlead_edge_xds::serve::XdsTls,
    channel: fairlead_edge_controller::crds::Channel,
    proxies: Option<(std::path::PathBuf, std::path::PathBuf)>,
) -> anyhow::Result<SocketAddr> {
    use fairlead_edge_control_plane::run;
    use fairlead_edge_controller::crds;
    let controller = fairlead_edge_translate::CONTROLLER_NAME;
    crds::install(client, controller, channel)
        .await
        .with_context(|| {
            format!(
                "installing the Gateway API CRDs ({} {}) and the d8-alb GatewayClass",
                crds::GATEWAY_API_VERSION,
                channel.name()
            )
        })?;
    let settings = run::Settings {
        controller_name: controller.to_owned(),
        lease: fairlead_kit::lease::LeaseConfig::new(run::LEASE, "kube-system", "fairlead-up"),
    };
    // One index for the process: the translation loop reads it now, the graph and the
    // gateway controller next.
    // A data dir from an older fairlead may hold CRDs of other storage versions: said, not
    // refused (`fairlead edge controller` refuses), so a developer's world still starts.
    if let Err(e) = crds::check_storage_versions(client).await {
        tracing::warn!(error = %e, "the Gateway API CRDs in the data dir are not the ones fairlead needs; objects may be read wrong");
    }
    // The gateway controller: instances become their Gateways.
    runtime
        .shutdown
        .spawn(fairlead_edge_controller::reconcile::run(
            client.clone(),
            None,
            runtime.shutdown.token(),
        ));
    let index = fairlead_edge_index::Index::start(client.clone(), runtime.shutdown.token());
    let bound = fairlead_edge_control_plane::start(
        runtime,
        client.clone(),
        index.clone(),
        xds_addr,
        Some(tls),
        settings,
    )
    .await?;
    if let Some((xds_dir, work_dir)) = proxies {
        crate::local_proxies::start(
            runtime,
            client.clone(),
            &index,
            crate::local_proxies::Config {
                envoy: fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY"),
                xds_port: bound.port(),
                xds_dir,
                work_dir,
                class: crds::GATEWAY_CLASS.to_owned(),
                controller: controller.to_owned(),
                // Where fairlead's own spans go, Envoy's go too.
                otlp: [
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                ]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|e| !e.is_empty()))
                .and_then(|e| {
                    fairlead_edge_bootstrap::parse_otlp(&e)
                        .map_err(
                            |err| tracing::warn!(error = %err, "the local proxies send no spans"),
                        )
                        .ok()
                }),
            },
        );
    }
    Ok(bound)
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
    let client = server.client().await?;
    start_health(&runtime, &client, &args.node_name).await?;
    let xds_dir = args
        .kubeconfig
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("xds");
    let (ca, tls) = xds_tls(&xds_dir, args.xds_addr)?;
    keep_proxy_certificate(&runtime, xds_dir.clone(), ca);
    let proxies_dir = xds_dir.with_file_name("proxies");
    let xds_addr = start_edge(
        &runtime,
        &client,
        args.xds_addr,
        tls,
        args.gateway_api_channel,
        (!args.no_local_proxies).then(|| (xds_dir.clone(), proxies_dir)),
    )
    .await?;
    if let Some(dir) = &args.manifests {
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
        xds = %xds_addr,
        xds_certificates = %xds_dir.display(),
        "fairlead up: running (embedded API server: development and test only); Ctrl-C to stop"
    );
    // The components drain first, while the API server they talk to is still up.
    runtime.finish().await;
    server.shutdown();
    tracing::info!("fairlead up: stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restart keeps the CA and the proxy's certificate, so a proxy bootstrapped before it
    /// still trusts the new serving certificate and is still trusted.
    #[test]
    fn the_xds_ca_and_proxy_certificate_survive_a_restart() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = "127.0.0.1:18000".parse().unwrap();
        let (_, first) = xds_tls(dir.path(), addr).unwrap();
        let files = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let before: Vec<String> = ["ca.crt", "ca.key", "proxy.crt", "proxy.key"]
            .iter()
            .map(|f| files(f))
            .collect();
        let mode = |name: &str| {
            std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!((mode("ca.key"), mode("proxy.key")), (0o600, 0o600));
        let (ca, second) = xds_tls(dir.path(), addr).unwrap();
        let after: Vec<String> = ["ca.crt", "ca.key", "proxy.crt", "proxy.key"]
            .iter()
            .map(|f| files(f))
            .collect();
        assert_eq!(before, after, "nothing is generated again");
        assert_eq!(first.client_ca_pem, second.client_ca_pem);
        assert_ne!(
            first.cert_pem, second.cert_pem,
            "a fresh serving certificate"
        );
        // The new serving certificate chains to the CA written at the first start.
        fairlead_kit::pki::verify_server(&before[0], &second.cert_pem, "localhost").unwrap();

        // A current proxy certificate is kept; one the CA no longer vouches for is renewed.
        assert!(!renew_proxy_certificate(dir.path(), &ca).unwrap());
        let stranger = fairlead_kit::pki::Ca::generate("another CA").unwrap();
        let foreign = stranger.issue_client("fairlead-up-proxy").unwrap();
        std::fs::write(dir.path().join("proxy.crt"), &foreign.cert_pem).unwrap();
        assert!(renew_proxy_certificate(dir.path(), &ca).unwrap());
        assert!(!fairlead_kit::pki::due_for_renewal(
            ca.cert_pem(),
            &files("proxy.crt")
        ));
        assert_eq!(mode("proxy.key"), 0o600);

        // A CA that no longer loads is replaced, and said so.
        std::fs::write(dir.path().join("ca.key"), "broken").unwrap();
        let (_, third) = xds_tls(dir.path(), addr).unwrap();
        assert_ne!(third.client_ca_pem.as_deref(), Some(before[0].as_str()));
        assert_ne!(
            files("proxy.crt"),
            before[2],
            "the proxy is issued again under it"
        );
    }
}
