//! The Rust types of the instances. Both kinds share [`InstanceSpec`]; a ClusterALBInstance
//! adds `defaultDeckhouseGateway`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
#[cfg(feature = "kube")]
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an instance of either kind says.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    /// The name of the Gateway the instance manages (in `d8-alb` for a ClusterALBInstance, in
    /// the instance's namespace for an ALBInstance). Instances naming one Gateway: the oldest
    /// controls it, the others report a conflict.
    pub gateway_name: String,
    /// How traffic reaches the proxies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inlet: Option<Inlet>,
    /// Client addresses (CIDRs) allowed to connect, by the connection's real address; all when
    /// empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_requests_from: Option<Vec<String>>,
    /// Expect the PROXY protocol from the load balancer in front (not with `enableHTTP3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_proxy_protocol: Option<bool>,
    /// Serve HTTP/3 (QUIC) on the HTTPS port (not with `useProxyProtocol`).
    #[serde(
        default,
        rename = "enableHTTP3",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_http3: Option<bool>,
    /// Take the client's address from a header, when the peer is trusted.
    #[serde(
        default,
        rename = "originalIPDetection",
        skip_serializing_if = "Option::is_none"
    )]
    pub original_ip_detection: Option<OriginalIpDetection>,
    /// The proxies' log level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Trace", "Debug", "Info", "Warning", "Error", "Critical", "Off"]))]
    pub envoy_log_level: Option<String>,
    /// Nodes the proxies run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Taints the proxies tolerate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// An Istio sidecar beside the proxy: accepted, and reported unsupported in status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub istio_sidecar: Option<bool>,
    /// Geolocation headers on requests.
    #[serde(default, rename = "geoIP", skip_serializing_if = "Option::is_none")]
    pub geo_ip: Option<GeoIp>,
    /// Tracing of the proxies' requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OpenTelemetry>,
}

/// How traffic reaches the proxies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inlet {
    /// `LoadBalancer`, or `HostPort` (ClusterALBInstance only). Immutable: a new inlet type is
    /// a new instance with the same `gatewayName`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["LoadBalancer", "HostPort"]))]
    pub type_: String,
    /// The LoadBalancer Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerInlet>,
    /// Ports on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_port: Option<HostPortInlet>,
    /// More ports, each a Gateway listener `tcp-port-<port>` or `udp-port-<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_ports: Option<Vec<AdditionalPort>>,
}

/// The LoadBalancer Service of an inlet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerInlet {
    /// Annotations of the Service (cloud load balancer settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_annotations: Option<BTreeMap<String, String>>,
    /// The Service's `loadBalancerClass`; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,
    /// The HTTP port (default 80; 0 disables the HTTP listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub http_port: Option<i32>,
    /// The HTTPS port (default 443; 0 disables the HTTPS listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub https_port: Option<i32>,
    /// Client ranges (CIDRs) the load balancer admits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_source_ranges: Option<Vec<String>>,
}

/// Ports on the nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPortInlet {
    /// The HTTP port on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub http_port: Option<i32>,
    /// The HTTPS port on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub https_port: Option<i32>,
}

/// One more port of an inlet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalPort {
    /// The port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// `TCP` or `UDP`.
    #[schemars(extend("enum" = ["TCP", "UDP"]))]
    pub protocol: String,
}

/// The client's address from a header, from trusted peers only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OriginalIpDetection {
    /// The header (`X-Forwarded-For`, or one with a single address).
    #[serde(
        default,
        rename = "realIPHeader",
        skip_serializing_if = "Option::is_none"
    )]
    pub real_ip_header: Option<String>,
    /// The peers (CIDRs) whose header is believed.
    #[serde(
        default,
        rename = "setRealIPFrom",
        skip_serializing_if = "Option::is_none"
    )]
    pub set_real_ip_from: Option<Vec<String>>,
}

/// Geolocation of requests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeoIp {
    /// The Secret holding MaxMind's `licenseKey` (and `accountID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_key_secret_ref: Option<SecretRef>,
    /// A mirror of the databases instead of MaxMind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxmind_mirror: Option<Mirror>,
    /// The databases, at most four.
    #[serde(
        default,
        rename = "maxmindEditionIDs",
        skip_serializing_if = "Option::is_none"
    )]
    pub maxmind_edition_ids: Option<Vec<String>>,
    /// Request headers to set, by field (`country`, `city`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// A Secret by name (and namespace, for a ClusterALBInstance).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretRef {
    /// Its name.
    pub name: String,
    /// Its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A database mirror.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Mirror {
    /// Its URL (`<url>/<Edition>.tar.gz` is fetched).
    pub url: String,
}

/// OpenTelemetry settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OpenTelemetry {
    /// Where spans go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Tracing>,
}

/// The collector of the proxies' spans: a Service (with port, protocol, path) or a URL.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tracing {
    /// The collector's Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRef>,
    /// Its port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// `gRPC` or `HTTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["gRPC", "HTTP"]))]
    pub protocol: Option<String>,
    /// The OTLP/HTTP path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The collector's URL, instead of a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// TLS to the collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TracingTls>,
}

/// A Service by name and namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ServiceRef {
    /// Its name.
    pub name: String,
    /// Its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// TLS to the collector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TracingTls {
    /// The name the collector's certificate must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// The Secret with the CA (`cacert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_name: Option<String>,
}

/// What the controller reports of an instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// `Ready`, `Conflict` (naming the instance that controls the Gateway), ….
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The managed Gateway's name (its namespace is `d8-alb` for a ClusterALBInstance, the
    /// instance's own for an ALBInstance), as Deckhouse's documentation reads it with
    /// `jsonpath='{.status.gateway}'`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The `Ready` condition as a boolean: the Gateway programmed and every wanted proxy
    /// ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Every proxy connected to the control plane runs the configuration last translated
    /// for the Gateway (each xDS type ACKed at its version): the Gateway's `Synced`
    /// condition, as a boolean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced: Option<bool>,
    /// This instance's Gateway listeners (`httpPort`/`httpsPort: 0`, `additionalPorts`)
    /// differ from those of the older instance controlling the shared Gateway, and are not
    /// served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_ports: Option<bool>,
    /// The instance whose ports the Gateway has, when `conflictPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_ports_owner: Option<String>,
    /// This instance's client-facing settings (`useProxyProtocol`, `enableHTTP3`,
    /// `acceptRequestsFrom`, `originalIPDetection`, `geoIP`) differ from the controlling
    /// instance's, which the Gateway follows.
    #[serde(
        default,
        rename = "conflictFrontendTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub conflict_frontend_tls: Option<bool>,
    /// The instance whose client-facing settings the Gateway follows, when
    /// `conflictFrontendTLS`.
    #[serde(
        default,
        rename = "conflictFrontendTLSOwner",
        skip_serializing_if = "Option::is_none"
    )]
    pub conflict_frontend_tls_owner: Option<String>,
    /// This instance's settings of the proxies' own connections (`openTelemetry`) differ
    /// from the controlling instance's, which the Gateway follows.
    #[serde(
        default,
        rename = "conflictBackendTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub conflict_backend_tls: Option<bool>,
    /// The instance whose outbound settings the Gateway follows, when `conflictBackendTLS`.
    #[serde(
        default,
        rename = "conflictBackendTLSOwner",
        skip_serializing_if = "Option::is_none"
    )]
    pub conflict_backend_tls_owner: Option<String>,
    /// Where clients reach the Gateway (load balancer ingress or node addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Whether this instance's Gateway is the platform's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_deckhouse_gateway: Option<bool>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A cluster-wide ALB instance: a Gateway in `d8-alb`, its proxies on the nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[cfg_attr(feature = "kube", derive(CustomResource))]
#[cfg_attr(
    feature = "kube",
    kube(
        group = "network.deckhouse.io",
        version = "v1alpha1",
        kind = "ClusterALBInstance",
        plural = "clusteralbinstances",
        singular = "clusteralbinstance",
        shortname = "calbi",
        status = "InstanceStatus",
        printcolumn = r#"{"name": "Gateway", "type": "string", "jsonPath": ".status.gateway"}"#,
        printcolumn = r#"{"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"}"#,
        printcolumn = r#"{"name": "Synced", "type": "boolean", "jsonPath": ".status.synced"}"#,
        printcolumn = r#"{"name": "Inlet", "type": "string", "jsonPath": ".spec.inlet.type"}"#,
        printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterALBInstanceSpec {
    /// The fields both kinds have.
    #[serde(flatten)]
    pub instance: InstanceSpec,
    /// This instance's Gateway is the platform's default (for the platform's web interfaces);
    /// of several, the oldest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_deckhouse_gateway: Option<bool>,
}

/// A namespaced ALB instance: a Gateway in its namespace, its proxies a Deployment behind a
/// LoadBalancer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[cfg_attr(feature = "kube", derive(CustomResource))]
#[cfg_attr(
    feature = "kube",
    kube(
        group = "network.deckhouse.io",
        version = "v1alpha1",
        kind = "ALBInstance",
        plural = "albinstances",
        singular = "albinstance",
        shortname = "albi",
        namespaced,
        status = "InstanceStatus",
        printcolumn = r#"{"name": "Gateway", "type": "string", "jsonPath": ".status.gateway"}"#,
        printcolumn = r#"{"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"}"#,
        printcolumn = r#"{"name": "Synced", "type": "boolean", "jsonPath": ".status.synced"}"#,
        printcolumn = r#"{"name": "Inlet", "type": "string", "jsonPath": ".spec.inlet.type"}"#,
        printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
    )
)]
pub struct ALBInstanceSpec {
    /// The fields both kinds have.
    #[serde(flatten)]
    pub instance: InstanceSpec,
}
