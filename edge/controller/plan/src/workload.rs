//! The proxy workload of a controlling instance, decided without I/O: the objects that run
//! Envoy for its Gateway (all in the Gateway's namespace, owned like the Gateway by every
//! instance naming it, labelled `alb.deckhouse.io/gateway=<gateway>`):
//!
//! - a ServiceAccount `d8-alb-<gateway>`;
//! - a ConfigMap `d8-alb-<gateway>-bootstrap`: Envoy's bootstrap (`envoy.yaml`, rendered by
//!   `fairlead-edge-bootstrap`) and the SDS document of the proxy's client certificate;
//! - the proxies: a DaemonSet for a ClusterALBInstance, a Deployment of two replicas (with
//!   anti-affinity and a PodDisruptionBudget) for an ALBInstance. Container `proxy` runs
//!   `fairlead edge proxy` with that bootstrap, the xDS client certificate from the Secret
//!   [`client_secret`] (issued by the controller's CA), readiness on its health port,
//!   a preStop pause before the drain and a grace period above the drain deadline;
//!   container `kube-rbac-proxy` serves its metrics; every container non-root, all
//!   capabilities dropped, read-only root filesystem, seccomp `RuntimeDefault`;
//! - a LoadBalancer Service `d8-alb-<gateway>-loadbalancer` (inlet `LoadBalancer`), or host
//!   ports on the nodes (inlet `HostPort`).
//!
//! Envoy binds a Gateway port below 1024 at port + 10000 (the translator's
//! `container_port`); the Service's `targetPort` and the pod's `hostPort → containerPort`
//! map the Gateway's ports to those.

use std::collections::BTreeMap;

use fairlead_edge_api::InstanceSpec;
use fairlead_edge_model::instance::{COLLECTOR_CA_KEY, Collector};
use fairlead_edge_model::names::container_port;
use fairlead_key::ObjectKey;
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, Deployment, DeploymentSpec,
    DeploymentStrategy, RollingUpdateDaemonSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, KeyToPath, Lifecycle, LifecycleHandler,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, SecretVolumeSource, Service,
    ServiceAccount, ServicePort, ServiceSpec, SleepAction, Volume, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::instance::{INSTANCE_LABEL, Instance};
use crate::pods::{self, Labels, value};

pub use crate::pods::GATEWAY_LABEL;

/// The proxy container's working directory; the files the bootstrap names are relative to
/// it (so the bootstrap reads the same wherever the volumes are mounted).
const WORKING_DIR: &str = "/etc/fairlead";

/// Where the bootstrap ConfigMap is mounted, under [`WORKING_DIR`].
const BOOTSTRAP_DIR: &str = "bootstrap";

/// Where the xDS client certificate Secret is mounted, under [`WORKING_DIR`].
const XDS_TLS_DIR: &str = "xds-tls";

/// Where the collector's CA Secret is mounted, under [`WORKING_DIR`].
const OTLP_CA_DIR: &str = "otlp-ca";

/// Envoy's admin interface, on the pod's loopback.
const ADMIN_PORT: u16 = 19000;

/// The supervisor's metrics (loopback; kube-rbac-proxy serves them).
const METRICS_PORT: u16 = 19001;

/// The supervisor's health port (`/readyz` for the kubelet).
const HEALTH_PORT: u16 = 19002;

/// The WAF's admin server (metrics, health; loopback).
pub const WAF_ADMIN_PORT: u16 = 19003;

/// kube-rbac-proxy's port in front of the metrics.
pub const RBAC_PROXY_PORT: u16 = 19101;

/// The ports a proxy pod holds for itself, with what each is: a Gateway port whose container
/// port ([`fairlead_edge_model::names::container_port`]) is one of them cannot be served.
pub const OWN_PORTS: &[(u16, &str)] = &[
    (ADMIN_PORT, "Envoy's admin"),
    (METRICS_PORT, "the supervisor's metrics"),
    (HEALTH_PORT, "the supervisor's health"),
    (WAF_ADMIN_PORT, "the WAF's admin"),
    (RBAC_PROXY_PORT, "kube-rbac-proxy's"),
];

/// The longest drain of a stopping proxy, in seconds.
const DRAIN_SECONDS: u64 = 60;

/// The pause before the drain, in seconds: load balancers take the pod out first.
const PRE_STOP_SECONDS: u64 = 5;

/// How the workloads are made (the controller's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The image of the proxy container (`fairlead` with Envoy beside it).
    pub proxy_image: String,
    /// kube-rbac-proxy's image.
    pub rbac_proxy_image: String,
    /// How proxies reach the xDS server: host (the name its certificate carries) and port.
    pub xds: (String, u16),
    /// The trust domain of the proxies' identities (`spiffe://<domain>/ns/<ns>/gateway/<name>`).
    pub trust_domain: String,
    /// How geoproxies are made.
    pub geoproxy: crate::geoproxy::Settings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            proxy_image: "ghcr.io/fairlead/proxy:latest".into(),
            rbac_proxy_image: "quay.io/brancz/kube-rbac-proxy:v0.19.1".into(),
            xds: ("alb-xds.d8-alb.svc".into(), 18000),
            trust_domain: "cluster.local".into(),
            geoproxy: crate::geoproxy::Settings::default(),
        }
    }
}

/// The ClusterRole of the kube-rbac-proxy sidecars (the chart's): they review callers'
/// tokens and ask whether callers may read what they guard.
pub const RBAC_PROXY_ROLE: &str = "d8:alb:rbac-proxy";

/// The ClusterRoleBinding that gives every proxy's ServiceAccount [`RBAC_PROXY_ROLE`], for
/// the kube-rbac-proxy in front of its metrics. The chart makes it without subjects; the
/// controller keeps its subjects (and may change no other binding).
pub const RBAC_PROXY_BINDING: &str = "d8:alb:proxies:rbac-proxy";

/// [`RBAC_PROXY_BINDING`] for `accounts` (the ServiceAccounts of the proxies, one per
/// Gateway in its namespace, and of the geoproxies).
pub fn rbac_proxy_binding(accounts: impl IntoIterator<Item = ObjectKey>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(RBAC_PROXY_BINDING.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: RBAC_PROXY_ROLE.to_owned(),
        },
        subjects: Some(
            accounts
                .into_iter()
                .map(|a| Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: a.name().to_owned(),
                    namespace: Some(a.namespace().to_owned()),
                    ..Subject::default()
                })
                .collect(),
        ),
    }
}

/// The name of a Gateway's workload, ServiceAccount and PodDisruptionBudget.
pub fn workload_name(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}", gateway.name())
}

/// The Secret with a Gateway's xDS client certificate (`tls.crt`, `tls.key`, `ca.crt`).
pub fn client_secret(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-xds-client", gateway.name())
}

/// The ConfigMap with a Gateway's bootstrap.
pub fn bootstrap_config_map(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-bootstrap", gateway.name())
}

/// The LoadBalancer Service of a Gateway.
pub fn load_balancer_service(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-loadbalancer", gateway.name())
}

/// The names of one instance's inlet — its proxies (DaemonSet or Deployment, and the
/// disruption budget), its LoadBalancer Service — and what selects its pods. The
/// ServiceAccount, the bootstrap and the client certificate are the Gateway's, shared by
/// every inlet of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// The proxies' workload and disruption budget.
    pub workload: String,
    /// The LoadBalancer Service.
    pub service: String,
    /// The workload's selector (immutable once applied).
    pub selector: Labels,
}

impl Names {
    /// The inlet of the instance controlling `gateway` since it was made: named after the
    /// Gateway ([`workload_name`], [`load_balancer_service`]), its pods selected by Gateway.
    pub fn gateway(gateway: &ObjectKey) -> Self {
        Self {
            workload: workload_name(gateway),
            service: load_balancer_service(gateway),
            selector: pods::selector(gateway, pods::PROXY_APP),
        }
    }

    /// The inlet of `instance`, which shares `gateway` with an older instance (or did, and
    /// keeps its names after taking the Gateway over): `d8-alb-<gateway>-<instance>`, its
    /// pods selected by instance as well.
    pub fn sharing(instance: &Instance, gateway: &ObjectKey) -> Self {
        let workload = format!("d8-alb-{}-{}", gateway.name(), instance.key.name());
        let mut selector = pods::selector(gateway, pods::PROXY_APP);
        selector.insert(INSTANCE_LABEL.to_owned(), instance.label());
        Self {
            service: format!("{workload}-loadbalancer"),
            workload,
            selector,
        }
    }
}

/// The identity a Gateway's proxies present to the xDS server (the URI SAN of their client
/// certificate).
pub fn identity(trust_domain: &str, gateway: &ObjectKey) -> String {
    format!(
        "spiffe://{trust_domain}/ns/{}/gateway/{}",
        gateway.namespace(),
        gateway.name()
    )
}

/// Envoy's log level for Deckhouse's `envoyLogLevel` (`Info` when unset).
pub fn envoy_log_level(spec: &InstanceSpec) -> &'static str {
    match spec.envoy_log_level.as_deref() {
        Some("Trace") => "trace",
        Some("Debug") => "debug",
        Some("Warning") => "warning",
        Some("Error") => "error",
        Some("Critical") => "critical",
        Some("Off") => "off",
        _ => "info",
    }
}

/// One port of an instance: a Gateway listener and how clients reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InletPort {
    /// The listener's (and the Service port's) name.
    pub name: String,
    /// The Gateway listener's port.
    pub listener: u16,
    /// The port clients dial: the Service's port, or the node's host port.
    pub exposed: u16,
    /// `TCP` or `UDP`.
    pub protocol: &'static str,
    /// The Gateway listener's protocol (`HTTP`, `HTTPS`, `TCP`, `UDP`); `None` for a port
    /// that is not a listener of its own (QUIC beside HTTPS).
    pub listener_protocol: Option<&'static str>,
}

/// The ports of `spec`: `d8-http` and `d8-https` unless their port is 0 (and, with
/// `enableHTTP3`, the HTTPS port's UDP twin for QUIC), then the additional ports.
pub fn ports(spec: &InstanceSpec) -> Vec<InletPort> {
    let inlet = spec.inlet.as_ref();
    let load_balancer = inlet.and_then(|i| i.load_balancer.as_ref());
    let host_port = inlet.and_then(|i| i.host_port.as_ref());
    let exposed = |port: Option<i32>, default: u16| match port {
        None => Some(default),
        Some(0) => None,
        Some(p) => u16::try_from(p).ok(),
    };
    // A LoadBalancer's ports default to 80/443 (0 disables); a HostPort inlet serves the
    // ports it names.
    let (http, https) = match (load_balancer, host_port) {
        (_, Some(h)) => (
            h.http_port.and_then(|p| u16::try_from(p).ok()),
            h.https_port.and_then(|p| u16::try_from(p).ok()),
        ),
        (Some(lb), None) => (exposed(lb.http_port, 80), exposed(lb.https_port, 443)),
        (None, None) => (Some(80), Some(443)),
    };
    let mut ports = Vec::new();
    if let Some(exposed) = http {
        ports.push(InletPort {
            name: "d8-http".into(),
            listener: 80,
            exposed,
            protocol: "TCP",
            listener_protocol: Some("HTTP"),
        });
    }
    if let Some(exposed) = https {
        ports.push(InletPort {
            name: "d8-https".into(),
            listener: 443,
            exposed,
            protocol: "TCP",
            listener_protocol: Some("HTTPS"),
        });
        if spec.enable_http3 == Some(true) {
            ports.push(InletPort {
                name: "d8-https-quic".into(),
                listener: 443,
                exposed,
                protocol: "UDP",
                listener_protocol: None,
            });
        }
    }
    for port in inlet
        .and_then(|i| i.additional_ports.as_ref())
        .into_iter()
        .flatten()
    {
        let Ok(number) = u16::try_from(port.port) else {
            continue;
        };
        let (protocol, listener_protocol) = if port.protocol == "UDP" {
            ("UDP", "UDP")
        } else {
            ("TCP", "TCP")
        };
        ports.push(InletPort {
            name: format!("{}-port-{number}", protocol.to_ascii_lowercase()),
            listener: number,
            exposed: number,
            protocol,
            listener_protocol: Some(listener_protocol),
        });
    }
    ports
}

/// The labels of everything made for `gateway`'s proxies.
fn labels(instance: &Instance, gateway: &ObjectKey) -> Labels {
    pods::labels(instance, gateway, pods::PROXY_APP)
}

/// Where the proxy container mounts the GeoIP databases, under [`WORKING_DIR`]: Envoy
/// opens them relative to its working directory
/// ([`fairlead_edge_api::geoip::PROXY_DIR`]).
const GEOIP_MOUNT: &str = "/etc/fairlead/geoip";

/// The GeoIP downloader container (`init`: before Envoy starts; else the sidecar).
fn downloader(
    settings: &Settings,
    downloads: &crate::geoproxy::Downloads,
    init: bool,
) -> Container {
    let editions: Vec<&str> = downloads.editions.iter().map(|e| e.id()).collect();
    let mut args = vec![
        "edge".to_owned(),
        "geo-downloader".into(),
        "--mode".into(),
        if init { "init" } else { "sidecar" }.into(),
        "--source".into(),
        downloads.source.clone(),
        "--editions".into(),
        editions.join(","),
        "--dir".into(),
        GEOIP_MOUNT.into(),
    ];
    if !init {
        args.extend([
            "--interval".into(),
            settings.geoproxy.downloader_interval.to_string(),
        ]);
    }
    Container {
        name: if init {
            "geo-downloader-init"
        } else {
            "geo-downloader"
        }
        .to_owned(),
        image: Some(settings.proxy_image.clone()),
        args: Some(args),
        // A City download in hand (about 70 MB) and the database it unpacks to (about
        // 130 MB) at once.
        resources: Some(pods::resources("10m", "32Mi", "512Mi")),
        security_context: Some(pods::hardened()),
        volume_mounts: Some(vec![
            pods::mount("geoip", GEOIP_MOUNT, false),
            pods::mount("tmp", "/tmp", false),
        ]),
        ..Container::default()
    }
}

/// The WAF beside Envoy (`fairlead edge waf`): Envoy asks it over the socket in the shared
/// run directory ([`fairlead_edge_model::names::WAF_SOCKET`]).
fn waf(settings: &Settings) -> Container {
    Container {
        name: "waf".to_owned(),
        image: Some(settings.proxy_image.clone()),
        args: Some(vec![
            "edge".to_owned(),
            "waf".into(),
            "--socket".into(),
            format!(
                "/var/run/fairlead/{}",
                fairlead_edge_model::names::WAF_SOCKET
            ),
            "--admin-addr".into(),
            format!("127.0.0.1:{WAF_ADMIN_PORT}"),
        ]),
        // The CRS compiled once per rule set (tens of MB), requests inspected on every core.
        resources: Some(pods::resources("50m", "64Mi", "512Mi")),
        security_context: Some(pods::hardened()),
        volume_mounts: Some(vec![
            pods::mount("run", "/var/run/fairlead", false),
            pods::mount("tmp", "/tmp", false),
        ]),
        ..Container::default()
    }
}

fn metadata(
    name: &str,
    instance: &Instance,
    gateway: &ObjectKey,
    owners: &[OwnerReference],
) -> ObjectMeta {
    pods::annotated(
        pods::metadata(name, gateway, labels(instance, gateway), owners),
        instance,
    )
}

/// The bootstrap a Gateway's proxies run with.
pub fn bootstrap_spec(
    instance: &Instance,
    gateway: &ObjectKey,
    settings: &Settings,
) -> fairlead_edge_bootstrap::Spec {
    fairlead_edge_bootstrap::Spec {
        gateway: gateway.clone(),
        node_id: None,
        xds_host: settings.xds.0.clone(),
        xds_port: settings.xds.1,
        admin_port: ADMIN_PORT,
        tls: Some(fairlead_edge_bootstrap::Tls {
            ca: format!("{XDS_TLS_DIR}/ca.crt"),
            client: Some(fairlead_edge_bootstrap::ClientCertificate {
                cert: format!("{XDS_TLS_DIR}/tls.crt"),
                key: format!("{XDS_TLS_DIR}/tls.key"),
                sds: format!("{BOOTSTRAP_DIR}/xds-client-sds.json"),
            }),
        }),
        otlp: collector(&instance.spec, gateway).map(|collector| fairlead_edge_bootstrap::Otlp {
            ca_file: collector_ca_secret(&collector)
                .map(|_| format!("{OTLP_CA_DIR}/{}", COLLECTOR_CA_KEY)),
            collector,
        }),
    }
}

/// The collector of `openTelemetry.tracing` (the CRD's rules keep it readable; one that is
/// not sends nowhere, said in the log).
fn collector(spec: &InstanceSpec, gateway: &ObjectKey) -> Option<Collector> {
    fairlead_edge_model::instance::collector(spec, gateway.namespace())
        .inspect_err(|e| tracing::warn!(%gateway, error = %e, "the proxies' spans go nowhere"))
        .ok()
        .flatten()
}

/// The Secret of the collector's CA, when it names one.
fn collector_ca_secret(collector: &Collector) -> Option<&str> {
    collector.tls.as_ref()?.ca_secret.as_deref()
}

/// Why the workload could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("rendering the bootstrap of Gateway {gateway}: {source}")]
pub struct RenderError {
    gateway: ObjectKey,
    source: fairlead_edge_bootstrap::BootstrapError,
}

/// A Gateway's proxy workload: what runs Envoy for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The proxies' ServiceAccount.
    pub service_account: ServiceAccount,
    /// Envoy's bootstrap and the SDS document of the proxies' client certificate.
    pub bootstrap: ConfigMap,
    /// The proxies.
    pub proxies: Proxies,
    /// The LoadBalancer Service in front of them (none for host ports).
    pub service: Option<Service>,
}

/// The proxies of a Gateway: on every node for a ClusterALBInstance, two spread replicas
/// with a disruption budget for an ALBInstance or a Gateway the controller provisions.
#[derive(Clone, Debug, PartialEq)]
pub enum Proxies {
    /// A ClusterALBInstance's.
    DaemonSet(Box<DaemonSet>),
    /// An ALBInstance's, or a provisioned Gateway's.
    Deployment(Box<Deployment>, Box<PodDisruptionBudget>),
}

impl Workload {
    /// Whether the proxies take ports on their nodes (a HostPort inlet).
    pub fn host_ports(&self) -> bool {
        let spec = match &self.proxies {
            Proxies::DaemonSet(d) => d.spec.as_ref().map(|s| &s.template),
            Proxies::Deployment(d, _) => d.spec.as_ref().map(|s| &s.template),
        };
        spec.and_then(|t| t.spec.as_ref())
            .and_then(|p| p.containers.first())
            .and_then(|c| c.ports.as_ref())
            .is_some_and(|ports| ports.iter().any(|p| p.host_port.is_some()))
    }

    /// The objects as JSON, in the order they are applied.
    pub fn values(&self) -> Vec<Value> {
        let mut out = vec![value(&self.service_account), value(&self.bootstrap)];
        match &self.proxies {
            Proxies::DaemonSet(d) => out.push(value(d.as_ref())),
            Proxies::Deployment(d, budget) => {
                out.push(value(d.as_ref()));
                out.push(value(budget.as_ref()));
            }
        }
        out.extend(self.service.iter().map(value));
        out
    }
}

/// The objects of `instance`'s proxy workload for `gateway` (ports as [`ports`] says),
/// named after the Gateway ([`Names::gateway`]) and owned by `owners`, its pods downloading
/// the GeoIP databases of `downloads` beside Envoy ([`crate::geoproxy::Plan::downloads`]).
pub fn objects(
    instance: &Instance,
    gateway: &ObjectKey,
    owners: &[OwnerReference],
    downloads: Option<&crate::geoproxy::Downloads>,
    settings: &Settings,
) -> Result<Workload, RenderError> {
    let owners = Owners {
        shared: owners,
        inlet: owners,
    };
    objects_named(
        instance,
        gateway,
        &owners,
        &Names::gateway(gateway),
        downloads,
        settings,
    )
}

/// Who owns a workload's objects: the Gateway's (ServiceAccount, bootstrap) every instance
/// naming it; an inlet's (proxies, disruption budget, Service) its own instance, so they go
/// with it while the Gateway stays.
#[derive(Clone, Copy, Debug)]
pub struct Owners<'a> {
    /// Of the Gateway's objects.
    pub shared: &'a [OwnerReference],
    /// Of the inlet's.
    pub inlet: &'a [OwnerReference],
}

/// [`objects`], with the inlet named `names` and the objects owned as `owners` says.
pub fn objects_named(
    instance: &Instance,
    gateway: &ObjectKey,
    owners: &Owners<'_>,
    names: &Names,
    downloads: Option<&crate::geoproxy::Downloads>,
    settings: &Settings,
) -> Result<Workload, RenderError> {
    let error = |source| RenderError {
        gateway: gateway.clone(),
        source,
    };
    let spec = bootstrap_spec(instance, gateway, settings);
    let client = spec.tls.as_ref().and_then(|t| t.client.as_ref());
    let sds = client
        .map(fairlead_edge_bootstrap::sds_document)
        .transpose()
        .map_err(error)?
        .unwrap_or_default();
    let bootstrap = fairlead_edge_bootstrap::yaml(&spec).map_err(error)?;
    let name = &names.workload;
    let ports = ports(&instance.spec);
    let host_ports = instance
        .spec
        .inlet
        .as_ref()
        .is_some_and(|i| i.type_ == "HostPort");
    let template = pod_template(instance, gateway, &ports, host_ports, downloads, settings);
    let selector = pods::match_labels(names.selector.clone());
    // The Service and the disruption budget select this inlet's pods only (the workload's
    // own selector of an inlet named after the Gateway predates sharing, and is immutable).
    let mut inlet_pods = names.selector.clone();
    inlet_pods.insert(INSTANCE_LABEL.to_owned(), instance.label());
    let proxies = if instance.kind == "ClusterALBInstance" {
        Proxies::DaemonSet(Box::new(DaemonSet {
            metadata: metadata(name, instance, gateway, owners.inlet),
            spec: Some(DaemonSetSpec {
                selector,
                template,
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some("RollingUpdate".to_owned()),
                    rolling_update: Some(RollingUpdateDaemonSet {
                        max_unavailable: Some(IntOrString::Int(1)),
                        ..RollingUpdateDaemonSet::default()
                    }),
                }),
                ..DaemonSetSpec::default()
            }),
            ..DaemonSet::default()
        }))
    } else {
        Proxies::Deployment(
            Box::new(Deployment {
                metadata: metadata(name, instance, gateway, owners.inlet),
                spec: Some(DeploymentSpec {
                    replicas: Some(2),
                    selector: selector.clone(),
                    template,
                    strategy: Some(DeploymentStrategy {
                        type_: Some("RollingUpdate".to_owned()),
                        rolling_update: Some(RollingUpdateDeployment {
                            max_unavailable: Some(IntOrString::Int(0)),
                            max_surge: Some(IntOrString::Int(1)),
                        }),
                    }),
                    ..DeploymentSpec::default()
                }),
                ..Deployment::default()
            }),
            Box::new(PodDisruptionBudget {
                metadata: metadata(name, instance, gateway, owners.inlet),
                spec: Some(PodDisruptionBudgetSpec {
                    max_unavailable: Some(IntOrString::Int(1)),
                    selector: Some(pods::match_labels(inlet_pods.clone())),
                    ..PodDisruptionBudgetSpec::default()
                }),
                ..PodDisruptionBudget::default()
            }),
        )
    };
    Ok(Workload {
        service_account: ServiceAccount {
            metadata: metadata(&workload_name(gateway), instance, gateway, owners.shared),
            ..ServiceAccount::default()
        },
        bootstrap: ConfigMap {
            metadata: metadata(
                &bootstrap_config_map(gateway),
                instance,
                gateway,
                owners.shared,
            ),
            data: Some(BTreeMap::from([
                ("envoy.yaml".to_owned(), bootstrap),
                ("xds-client-sds.json".to_owned(), sds),
            ])),
            ..ConfigMap::default()
        },
        proxies,
        service: (!host_ports).then(|| {
            service(
                instance,
                gateway,
                (&names.service, inlet_pods),
                owners.inlet,
                &ports,
            )
        }),
    })
}

/// The LoadBalancer Service `name` in front of the proxies `selector` selects.
fn service(
    instance: &Instance,
    gateway: &ObjectKey,
    (name, selector): (&str, Labels),
    owners: &[OwnerReference],
    ports: &[InletPort],
) -> Service {
    let lb = instance
        .spec
        .inlet
        .as_ref()
        .and_then(|i| i.load_balancer.as_ref());
    let mut meta = metadata(name, instance, gateway, owners);
    if let Some(annotations) = lb.and_then(|l| l.service_annotations.as_ref()) {
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(annotations.clone());
    }
    Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            // The client's own address reaches Envoy (acceptRequestsFrom, access logs).
            external_traffic_policy: Some("Local".to_owned()),
            selector: Some(selector),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: Some(p.name.clone()),
                        port: i32::from(p.exposed),
                        target_port: Some(IntOrString::Int(i32::from(container_port(p.listener)))),
                        protocol: Some(p.protocol.to_owned()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            load_balancer_class: lb.and_then(|l| l.load_balancer_class.clone()),
            load_balancer_source_ranges: lb.and_then(|l| l.load_balancer_source_ranges.clone()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The proxy container.
fn proxy(
    instance: &Instance,
    ports: &[InletPort],
    host_ports: bool,
    settings: &Settings,
) -> Container {
    let container_ports = ports
        .iter()
        .map(|p| {
            pods::port(
                &p.name,
                container_port(p.listener),
                p.protocol,
                host_ports.then_some(p.exposed),
            )
        })
        .chain([pods::port("health", HEALTH_PORT, "TCP", None)])
        .collect();
    let args = [
        "edge",
        "proxy",
        "--bootstrap-file",
        &format!("{BOOTSTRAP_DIR}/envoy.yaml"),
        "--envoy-admin-address",
        &format!("127.0.0.1:{ADMIN_PORT}"),
        "--metrics-addr",
        &format!("127.0.0.1:{METRICS_PORT}"),
        "--health-addr",
        &format!("0.0.0.0:{HEALTH_PORT}"),
        "--work-dir",
        "/var/run/fairlead",
        "--envoy-log-level",
        envoy_log_level(&instance.spec),
        "--drain-deadline",
        &DRAIN_SECONDS.to_string(),
        "--pod-address",
        "$(POD_IP)",
    ];
    Container {
        name: "proxy".to_owned(),
        image: Some(settings.proxy_image.clone()),
        working_dir: Some(WORKING_DIR.to_owned()),
        args: Some({
            let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            if instance.waf {
                args.extend([
                    "--waf-admin-addr".to_owned(),
                    format!("127.0.0.1:{WAF_ADMIN_PORT}"),
                ]);
            }
            args
        }),
        env: Some(vec![
            pods::field("POD_NAME", "metadata.name"),
            pods::field("POD_NAMESPACE", "metadata.namespace"),
            pods::field("POD_IP", "status.podIP"),
        ]),
        ports: Some(container_ports),
        readiness_probe: Some(pods::probe("/readyz", HEALTH_PORT, 2, 2)),
        liveness_probe: Some(pods::probe("/healthz", HEALTH_PORT, 10, 3)),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                sleep: Some(SleepAction {
                    seconds: i64::try_from(PRE_STOP_SECONDS).unwrap_or(i64::MAX),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        resources: Some(pods::resources("100m", "128Mi", "1Gi")),
        security_context: Some(pods::hardened()),
        volume_mounts: Some(vec![
            pods::mount("bootstrap", &format!("{WORKING_DIR}/{BOOTSTRAP_DIR}"), true),
            pods::mount("xds-tls", &format!("{WORKING_DIR}/{XDS_TLS_DIR}"), true),
            pods::mount("run", "/var/run/fairlead", false),
            pods::mount("tmp", "/tmp", false),
        ]),
        ..Container::default()
    }
}

/// The proxy pods' template.
fn pod_template(
    instance: &Instance,
    gateway: &ObjectKey,
    ports: &[InletPort],
    host_ports: bool,
    downloads: Option<&crate::geoproxy::Downloads>,
    settings: &Settings,
) -> PodTemplateSpec {
    let mut proxy = proxy(instance, ports, host_ports, settings);
    let rbac_proxy = pods::rbac_proxy(
        &settings.rbac_proxy_image,
        RBAC_PROXY_PORT,
        METRICS_PORT,
        "/metrics,/stats/prometheus,/waf/metrics",
    );
    let mut volumes = vec![
        Volume {
            name: "bootstrap".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: bootstrap_config_map(gateway),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "xds-tls".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(client_secret(gateway)),
                default_mode: Some(0o440),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        pods::empty_dir("run", None, false),
        pods::empty_dir("tmp", Some("16Mi"), true),
    ];
    if let Some(secret) = collector(&instance.spec, gateway)
        .as_ref()
        .and_then(collector_ca_secret)
    {
        volumes.push(Volume {
            name: "otlp-ca".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                items: Some(vec![KeyToPath {
                    key: COLLECTOR_CA_KEY.to_owned(),
                    path: COLLECTOR_CA_KEY.to_owned(),
                    ..KeyToPath::default()
                }]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        if let Some(mounts) = proxy.volume_mounts.as_mut() {
            mounts.push(pods::mount(
                "otlp-ca",
                &format!("{WORKING_DIR}/{OTLP_CA_DIR}"),
                true,
            ));
        }
    }
    let mut init_containers = None;
    let mut sidecars = Vec::new();
    if let Some(downloads) = downloads {
        // The databases before Envoy starts, kept fresh beside it; Envoy learns from the
        // proxy which ones it holds.
        init_containers = Some(vec![downloader(settings, downloads, true)]);
        sidecars.push(downloader(settings, downloads, false));
        if let Some(args) = proxy.args.as_mut() {
            args.extend([
                "--geoip-dir".to_owned(),
                fairlead_edge_api::geoip::PROXY_DIR.to_owned(),
            ]);
        }
        if let Some(mounts) = proxy.volume_mounts.as_mut() {
            mounts.push(pods::mount("geoip", GEOIP_MOUNT, true));
        }
        volumes.push(pods::empty_dir("geoip", Some("1Gi"), false));
    }
    if instance.waf {
        sidecars.push(waf(settings));
    }
    let mut containers = vec![proxy, rbac_proxy];
    containers.extend(sidecars);
    let affinity = (instance.kind != "ClusterALBInstance").then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        label_selector: Some(pods::match_labels(BTreeMap::from([(
                            GATEWAY_LABEL.to_owned(),
                            gateway.name().to_owned(),
                        )]))),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    PodTemplateSpec {
        metadata: Some(pods::annotated(
            ObjectMeta {
                labels: Some(labels(instance, gateway)),
                ..ObjectMeta::default()
            },
            instance,
        )),
        spec: Some(PodSpec {
            service_account_name: Some(workload_name(gateway)),
            termination_grace_period_seconds: Some(
                i64::try_from(PRE_STOP_SECONDS + DRAIN_SECONDS + 15).unwrap_or(i64::MAX),
            ),
            security_context: Some(pods::security()),
            init_containers,
            containers,
            volumes: Some(volumes),
            node_selector: instance
                .spec
                .node_selector
                .clone()
                .map(|s| s.into_iter().collect()),
            tolerations: instance.spec.tolerations.clone(),
            affinity,
            ..PodSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_edge_api::types::{
        AdditionalPort, HostPortInlet, Inlet, LoadBalancerInlet, OpenTelemetry, ServiceRef, Tracing,
    };
    use serde_json::json;

    #[test]
    fn every_proxy_account_may_run_kube_rbac_proxy() {
        let gateways = [
            ObjectKey::new("d8-alb", "public"),
            ObjectKey::new("team", "shop"),
        ];
        let binding = value(&rbac_proxy_binding(
            gateways
                .iter()
                .map(|g| ObjectKey::new(g.namespace(), workload_name(g))),
        ));
        assert_eq!(binding["roleRef"]["name"], RBAC_PROXY_ROLE);
        assert_eq!(
            binding["subjects"],
            json!([
                {"kind": "ServiceAccount", "name": "d8-alb-public", "namespace": "d8-alb"},
                {"kind": "ServiceAccount", "name": "d8-alb-shop", "namespace": "team"}
            ])
        );
        assert_eq!(value(&rbac_proxy_binding([]))["subjects"], json!([]));
    }

    fn instance(kind: &'static str, inlet: Inlet) -> Instance {
        Instance {
            kind,
            key: if kind == "ALBInstance" {
                ObjectKey::new("team", "i")
            } else {
                ObjectKey::cluster("main")
            },
            uid: "uid".into(),
            created: "t".into(),
            generation: 1,
            default: false,
            route_statistics: false,
            own_inlet: false,
            infrastructure: Default::default(),
            waf: false,
            spec: InstanceSpec {
                gateway_name: "public".into(),
                inlet: Some(inlet),
                envoy_log_level: Some("Warning".into()),
                ..Default::default()
            },
        }
    }

    fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
        objects.iter().find(|o| o["kind"] == kind)
    }

    #[test]
    fn a_cluster_instance_behind_a_load_balancer_is_a_daemon_set_and_a_service() {
        let mut i = instance(
            "ClusterALBInstance",
            Inlet {
                type_: "LoadBalancer".into(),
                load_balancer: Some(LoadBalancerInlet {
                    http_port: Some(8080),
                    load_balancer_class: Some("cloud".into()),
                    ..Default::default()
                }),
                additional_ports: Some(vec![AdditionalPort {
                    port: 53,
                    protocol: "UDP".into(),
                }]),
                ..Default::default()
            },
        );
        i.spec.enable_http3 = Some(true);
        let gateway = ObjectKey::new("d8-alb", "public");
        let owners = [i.reference(true)];
        let objects = objects(&i, &gateway, &owners, None, &Settings::default())
            .unwrap()
            .values();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ConfigMap", "DaemonSet", "Service"]
        );
        for o in &objects {
            assert_eq!(o["metadata"]["namespace"], "d8-alb");
            assert_eq!(o["metadata"]["labels"][GATEWAY_LABEL], "public");
            assert_eq!(o["metadata"]["ownerReferences"], json!(owners));
        }
        let service = find(&objects, "Service").unwrap();
        assert_eq!(service["metadata"]["name"], "d8-alb-public-loadbalancer");
        assert_eq!(service["spec"]["loadBalancerClass"], "cloud");
        let ports: Vec<(u64, u64, &str)> = service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["port"].as_u64().unwrap(),
                    p["targetPort"].as_u64().unwrap(),
                    p["protocol"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ports,
            [
                (8080, 10080, "TCP"),
                (443, 10443, "TCP"),
                (443, 10443, "UDP"),
                (53, 10053, "UDP")
            ],
            "Gateway ports below 1024 reach Envoy at + 10000; HTTP/3 adds UDP 443"
        );
        let pod = &find(&objects, "DaemonSet").unwrap()["spec"]["template"];
        assert_eq!(pod["metadata"]["labels"][GATEWAY_LABEL], "public");
        let proxy = &pod["spec"]["containers"][0];
        assert_eq!(proxy["name"], "proxy");
        let args: Vec<&str> = proxy["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[..2], ["edge", "proxy"]);
        assert!(
            args.windows(2)
                .any(|w| w == ["--envoy-log-level", "warning"])
        );
        // The Service's targets are the pods' own addresses: each proxy listens there too.
        assert!(args.windows(2).any(|w| w == ["--pod-address", "$(POD_IP)"]));
        assert!(proxy["env"].as_array().unwrap().contains(
            &json!({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        ));
        let security = &proxy["securityContext"];
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        assert!(
            pod["spec"]["terminationGracePeriodSeconds"]
                .as_u64()
                .unwrap()
                > PRE_STOP_SECONDS + DRAIN_SECONDS
        );
        assert_eq!(proxy["readinessProbe"]["httpGet"]["port"], HEALTH_PORT);
        assert!(
            proxy["ports"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p.get("hostPort").is_none())
        );
        // The bootstrap names the Gateway and reaches the xDS server over mutual TLS.
        let config = find(&objects, "ConfigMap").unwrap();
        let envoy: Value =
            serde_yaml_ng::from_str(config["data"]["envoy.yaml"].as_str().unwrap()).unwrap();
        assert_eq!(envoy["node"]["cluster"], "d8-alb/public");
        assert!(
            config["data"]["xds-client-sds.json"]
                .as_str()
                .unwrap()
                .contains("\"xds-tls/tls.crt\""),
            "paths relative to the working directory"
        );
        assert_eq!(proxy["workingDir"], "/etc/fairlead");
        assert_eq!(
            proxy["volumeMounts"][1]["mountPath"],
            "/etc/fairlead/xds-tls"
        );
        assert_eq!(
            pod["spec"]["volumes"][1]["secret"]["secretName"],
            "d8-alb-public-xds-client"
        );
    }

    #[test]
    fn host_ports_map_the_nodes_ports_to_envoys() {
        let i = instance(
            "ClusterALBInstance",
            Inlet {
                type_: "HostPort".into(),
                host_port: Some(HostPortInlet {
                    http_port: Some(80),
                    https_port: Some(8443),
                }),
                ..Default::default()
            },
        );
        let gateway = ObjectKey::new("d8-alb", "public");
        let objects = objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        assert!(
            find(&objects, "Service").is_none(),
            "no Service for host ports"
        );
        let ports = &find(&objects, "DaemonSet").unwrap()["spec"]["template"]["spec"]["containers"]
            [0]["ports"];
        assert_eq!(
            ports[0],
            json!({"name": "d8-http", "containerPort": 10080, "hostPort": 80, "protocol": "TCP"})
        );
        assert_eq!(
            ports[1],
            json!({"name": "d8-https", "containerPort": 10443, "hostPort": 8443, "protocol": "TCP"})
        );
    }

    #[test]
    fn a_namespaced_instance_is_two_spread_replicas_with_a_disruption_budget() {
        let mut i = instance(
            "ALBInstance",
            Inlet {
                type_: "LoadBalancer".into(),
                ..Default::default()
            },
        );
        i.spec.open_telemetry = Some(OpenTelemetry {
            tracing: Some(Tracing {
                service: Some(ServiceRef {
                    name: "collector".into(),
                    namespace: None,
                }),
                port: Some(4317),
                ..Default::default()
            }),
        });
        let gateway = ObjectKey::new("team", "public");
        let objects = objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ConfigMap",
                "Deployment",
                "PodDisruptionBudget",
                "Service"
            ]
        );
        let deployment = find(&objects, "Deployment").unwrap();
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert!(deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"].is_object());
        assert_eq!(
            find(&objects, "PodDisruptionBudget").unwrap()["spec"]["maxUnavailable"],
            1
        );
        let ports: Vec<&str> = find(&objects, "Service").unwrap()["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            ports,
            ["d8-http", "d8-https"],
            "HTTPS whether or not the platform certificate exists"
        );
        assert_eq!(
            bootstrap_spec(&i, &gateway, &Settings::default()).otlp,
            Some(fairlead_edge_bootstrap::Otlp::grpc(
                "collector.team.svc".into(),
                4317
            )),
            "the collector's Service, in the instance's namespace"
        );
        let pod = &find(&objects, "Deployment").unwrap()["spec"]["template"]["spec"];
        assert!(
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|v| v["name"] != "otlp-ca"),
            "no TLS, no CA volume"
        );
        // With TLS and a CA Secret, the Secret's `cacert` is mounted where the bootstrap
        // reads it.
        let tracing = i
            .spec
            .open_telemetry
            .as_mut()
            .unwrap()
            .tracing
            .as_mut()
            .unwrap();
        tracing.tls = Some(fairlead_edge_api::types::TracingTls {
            sni: None,
            ca_secret_name: Some("otel-ca".into()),
        });
        let otlp = bootstrap_spec(&i, &gateway, &Settings::default())
            .otlp
            .unwrap();
        assert_eq!(otlp.ca_file.as_deref(), Some("otlp-ca/cacert"));
        let with_ca = super::objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        let pod = &find(&with_ca, "Deployment").unwrap()["spec"]["template"]["spec"];
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "otlp-ca")
            .unwrap();
        assert_eq!(volume["secret"]["secretName"], "otel-ca");
        assert_eq!(volume["secret"]["items"][0]["key"], "cacert");
        assert!(
            pod["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "otlp-ca" && m["mountPath"] == "/etc/fairlead/otlp-ca")
        );
    }

    #[test]
    fn geoip_headers_bring_the_downloader_beside_envoy() {
        let mut i = instance(
            "ClusterALBInstance",
            Inlet {
                type_: "LoadBalancer".into(),
                ..Default::default()
            },
        );
        let gateway = ObjectKey::new("d8-alb", "public");
        let plain = objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        let pod = &find(&plain, "DaemonSet").unwrap()["spec"]["template"]["spec"];
        assert!(
            pod.get("initContainers").is_none(),
            "no GeoIP, no downloader"
        );
        i.spec.geo_ip = Some(
            serde_json::from_value(json!({"maxmindMirror": {"url": "http://mirror/geo"},
                "maxmindEditionIDs": ["GeoLite2-City"], "headers": {"country": "x-country"}}))
            .unwrap(),
        );
        let plan = crate::geoproxy::plan(&i, &gateway);
        let geo = objects(
            &i,
            &gateway,
            &[],
            plan.downloads.as_ref(),
            &Settings::default(),
        )
        .unwrap()
        .values();
        let pod = &find(&geo, "DaemonSet").unwrap()["spec"]["template"]["spec"];
        let args = |c: &Value| -> Vec<String> {
            c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect()
        };
        let init = &pod["initContainers"][0];
        assert_eq!(init["name"], "geo-downloader-init");
        assert_eq!(
            args(init)[2..],
            [
                "--mode",
                "init",
                "--source",
                "http://mirror/geo",
                "--editions",
                "GeoLite2-City",
                "--dir",
                GEOIP_MOUNT
            ]
        );
        let sidecar = &pod["containers"][2];
        assert_eq!(sidecar["name"], "geo-downloader");
        assert!(
            args(sidecar).ends_with(&["--interval".into(), "3600".into()]),
            "{:?}",
            args(sidecar)
        );
        let proxy = &pod["containers"][0];
        assert!(
            args(proxy).ends_with(&["--geoip-dir".into(), "geoip".into()]),
            "Envoy's working directory holds geoip/"
        );
        assert_eq!(
            GEOIP_MOUNT,
            format!("{WORKING_DIR}/{}", fairlead_edge_api::geoip::PROXY_DIR)
        );
        for container in [init, sidecar, proxy] {
            assert!(
                container["volumeMounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["name"] == "geoip" && m["mountPath"] == GEOIP_MOUNT)
            );
            assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        }
    }

    #[test]
    fn the_waf_runs_beside_envoy_only_when_a_route_asks() {
        let mut i = instance(
            "ALBInstance",
            Inlet {
                type_: "LoadBalancer".into(),
                ..Default::default()
            },
        );
        let gateway = ObjectKey::new("team", "shop");
        let names = |i: &Instance| -> Vec<String> {
            let objects = objects(i, &gateway, &[], None, &Settings::default())
                .unwrap()
                .values();
            find(&objects, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert!(!names(&i).contains(&"waf".to_owned()), "no route asks");
        i.waf = true;
        assert_eq!(names(&i), ["proxy", "kube-rbac-proxy", "waf"]);
        let with_waf = objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        let pod = &find(&with_waf, "Deployment").unwrap()["spec"]["template"]["spec"];
        let proxy_args = pod["containers"][0]["args"].to_string();
        assert!(
            proxy_args.contains("\"--waf-admin-addr\",\"127.0.0.1:19003\""),
            "the supervisor serves the WAF's metrics: {proxy_args}"
        );
        assert!(
            pod["containers"][1]["args"]
                .to_string()
                .contains("/waf/metrics")
        );
        let objects = objects(&i, &gateway, &[], None, &Settings::default())
            .unwrap()
            .values();
        let waf =
            &find(&objects, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"][2];
        assert_eq!(
            waf["args"].as_array().unwrap()[..4],
            [
                json!("edge"),
                json!("waf"),
                json!("--socket"),
                json!("/var/run/fairlead/waf.sock")
            ]
        );
        assert!(
            waf["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "run" && m["mountPath"] == "/var/run/fairlead"),
            "the socket is in the run directory Envoy's supervisor shares"
        );
    }

    #[test]
    fn log_levels_and_identities() {
        let mut spec = InstanceSpec::default();
        assert_eq!(envoy_log_level(&spec), "info");
        for (deckhouse, envoy) in [("Trace", "trace"), ("Critical", "critical"), ("Off", "off")] {
            spec.envoy_log_level = Some(deckhouse.into());
            assert_eq!(envoy_log_level(&spec), envoy);
        }
        assert_eq!(
            identity("cluster.local", &ObjectKey::new("d8-alb", "main")),
            "spiffe://cluster.local/ns/d8-alb/gateway/main"
        );
    }
}
