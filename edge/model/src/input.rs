//! The translator's input: the Gateway API objects (and the core objects they point at) as
//! plain data, with only the fields the translator reads.
//!
//! These are our own types rather than the generated ones of the `gateway-api` crate: one
//! `ParentRef`, `BackendRef` and `HttpFilter` serve every route kind (the generated types repeat
//! each for every place it appears), the same structs read whichever served version an object
//! comes from (`ListenerSet` in `gateway.networking.k8s.io/v1` or `XListenerSet` in
//! `gateway.networking.x-k8s.io/v1alpha1`, `TCPRoute`/`UDPRoute` at v1 or v1alpha2), and values
//! the translator does not know (a filter type, a path match type) stay strings, so that they
//! become a condition on the object rather than a failure to read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use fairlead_key::ObjectKey;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;

/// The Gateway API group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The Gateway API's experimental group (`XListenerSet` before ListenerSets reached v1).
pub const EXPERIMENTAL_GROUP: &str = "gateway.networking.x-k8s.io";

/// A `GatewayClass`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClass {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: GatewayClassSpec,
}

/// `GatewayClass.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    /// The controller that serves the class.
    pub controller_name: String,
}

/// A `Gateway`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: GatewaySpec,
}

/// `Gateway.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// The class.
    pub gateway_class_name: String,
    /// Listeners.
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// Requested addresses.
    #[serde(default)]
    pub addresses: Vec<Address>,
    /// Which namespaces' ListenerSets may attach (none when absent).
    #[serde(default)]
    pub allowed_listeners: Option<AllowedListeners>,
    /// What the Gateway asks of the infrastructure made for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<GatewayInfrastructure>,
    /// TLS settings of the Gateway as a whole (GEP-91, GEP-3155).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<GatewayTls>,
}

/// `Gateway.spec.tls`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    /// How clients' certificates are checked, by port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<FrontendTls>,
    /// What the proxies present to backends that ask for a client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendTlsOfGateway>,
}

/// `Gateway.spec.tls.frontend`: a default for every port, and ports of their own.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTls {
    /// What every port gets unless it has its own.
    #[serde(default)]
    pub default: FrontendTlsConfig,
    /// Ports with their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_port: Vec<FrontendTlsPort>,
}

/// `frontend.perPort[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTlsPort {
    /// The port.
    pub port: i32,
    /// Its settings.
    #[serde(default)]
    pub tls: FrontendTlsConfig,
}

/// `frontend.default` and `perPort[].tls`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTlsConfig {
    /// Client certificate validation; none: clients are not asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<FrontendValidation>,
}

/// `…tls.validation`: the CAs a client certificate must chain to.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrontendValidation {
    /// CA bundles (ConfigMaps with a `ca.crt` key).
    #[serde(default)]
    pub ca_certificate_refs: Vec<ObjectRef>,
    /// `AllowValidOnly` (default) or `AllowInsecureFallback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// `Gateway.spec.tls.backend`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsOfGateway {
    /// The client certificate (a `kubernetes.io/tls` Secret) the proxies present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_ref: Option<ObjectRef>,
}

/// `Gateway.spec.infrastructure`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayInfrastructure {
    /// Labels for the objects made for the Gateway.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the objects made for the Gateway.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Implementation-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<LocalParametersReference>,
}

/// `Gateway.spec.infrastructure.parametersRef`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalParametersReference {
    /// Its API group.
    #[serde(default)]
    pub group: String,
    /// Its kind.
    #[serde(default)]
    pub kind: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// A Gateway address.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Address {
    /// `IPAddress` (default) or `Hostname`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The address; empty when the Gateway asks for an address of the type without naming
    /// one (the implementation assigns it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// `Gateway.spec.allowedListeners`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedListeners {
    /// Namespaces.
    #[serde(default)]
    pub namespaces: Option<NamespacesFrom>,
}

/// `from: Same | All | Selector | None` with its selector.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NamespacesFrom {
    /// Which namespaces.
    #[serde(default)]
    pub from: Option<String>,
    /// The selector of `from: Selector`.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

/// A listener of a Gateway or a ListenerSet.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// Name, unique within its Gateway or ListenerSet.
    pub name: String,
    /// Hostname the listener matches (`*.example.com` wildcards allowed).
    #[serde(default)]
    pub hostname: Option<String>,
    /// Port.
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP`.
    pub protocol: String,
    /// TLS settings.
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    /// Which routes may attach.
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
}

/// `listeners[].tls`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (default) or `Passthrough`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Certificates (Secrets of type `kubernetes.io/tls`).
    #[serde(default)]
    pub certificate_refs: Vec<ObjectRef>,
}

/// `listeners[].allowedRoutes`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    /// Namespaces (default `Same`).
    #[serde(default)]
    pub namespaces: Option<NamespacesFrom>,
    /// Route kinds (default: those of the protocol).
    #[serde(default)]
    pub kinds: Vec<GroupKind>,
}

/// A group and kind.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct GroupKind {
    /// Group (default the Gateway API group).
    #[serde(default)]
    pub group: Option<String>,
    /// Kind.
    pub kind: String,
}

/// A reference to an object by group, kind, name and optional namespace.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// Group (core when empty).
    #[serde(default)]
    pub group: Option<String>,
    /// Kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// Name.
    pub name: String,
    /// Namespace (the referrer's when absent).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A `ListenerSet` (GEP-1713).
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSet {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: ListenerSetSpec,
}

/// `ListenerSet.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSetSpec {
    /// The Gateway it extends.
    pub parent_ref: ObjectRef,
    /// Listeners.
    #[serde(default)]
    pub listeners: Vec<Listener>,
}

/// A route's `parentRefs[]` entry.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// Group (default the Gateway API group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind (default `Gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace (default the route's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// A listener name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    /// A listener port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A `backendRefs[]` entry of any route kind.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    /// Group (core when empty).
    #[serde(default)]
    pub group: Option<String>,
    /// Kind (default `Service`).
    #[serde(default)]
    pub kind: Option<String>,
    /// Name.
    pub name: String,
    /// Namespace (default the route's).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Service port.
    #[serde(default)]
    pub port: Option<i32>,
    /// Weight (default 1).
    #[serde(default)]
    pub weight: Option<i32>,
    /// Filters applied to requests sent to this backend (HTTP and gRPC routes).
    #[serde(default)]
    pub filters: Vec<HttpFilter>,
}

/// An `HTTPRoute`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: HttpRouteSpec,
}

/// `HTTPRoute.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    /// Parents.
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// Hostnames.
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// Rules (one `PathPrefix /` rule to nowhere when absent).
    #[serde(default)]
    pub rules: Vec<HttpRule>,
}

/// `HTTPRoute.spec.rules[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRule {
    /// Optional name.
    #[serde(default)]
    pub name: Option<String>,
    /// Matches (one `PathPrefix /` when empty).
    #[serde(default)]
    pub matches: Vec<HttpMatch>,
    /// Filters.
    #[serde(default)]
    pub filters: Vec<HttpFilter>,
    /// Backends.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
    /// Timeouts.
    #[serde(default)]
    pub timeouts: Option<HttpTimeouts>,
    /// Retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<HttpRetry>,
}

/// `rules[].retry` (GEP-1731). Numbers are read as they come, so a value out of range is
/// refused with its field named rather than making the whole route unreadable.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRetry {
    /// The backend's answers retried (400–599); none: only connection errors and timeouts.
    #[serde(default)]
    pub codes: Vec<i64>,
    /// How many times a request is retried (not counting the first try).
    #[serde(default)]
    pub attempts: Option<i64>,
    /// The first pause between tries (a Gateway API duration).
    #[serde(default)]
    pub backoff: Option<String>,
}

/// `rules[].timeouts`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpTimeouts {
    /// The whole request (Gateway API duration, `10s`, `1m30s`, `0s` = none).
    #[serde(default)]
    pub request: Option<String>,
    /// Each try to the backend.
    #[serde(default)]
    pub backend_request: Option<String>,
}

/// `rules[].matches[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpMatch {
    /// Path match (default `PathPrefix /`).
    #[serde(default)]
    pub path: Option<PathMatch>,
    /// Header matches.
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
    /// Query parameter matches.
    #[serde(default)]
    pub query_params: Vec<ValueMatch>,
    /// Method.
    #[serde(default)]
    pub method: Option<String>,
}

/// A path match.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` (default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The value (default `/`).
    #[serde(default)]
    pub value: Option<String>,
}

/// A header or query parameter match.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ValueMatch {
    /// `Exact` (default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A filter of an HTTP or gRPC route (rule or backend).
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpFilter {
    /// The filter type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `RequestHeaderModifier`.
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifier>,
    /// `ResponseHeaderModifier`.
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifier>,
    /// `RequestRedirect`.
    #[serde(default)]
    pub request_redirect: Option<RequestRedirect>,
    /// `URLRewrite`.
    #[serde(default)]
    pub url_rewrite: Option<UrlRewrite>,
    /// `RequestMirror`.
    #[serde(default)]
    pub request_mirror: Option<RequestMirror>,
    /// `CORS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<HttpCors>,
}

/// The `CORS` filter (GEP-1767).
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HttpCors {
    /// Origins allowed: `scheme://host[:port]`, a `*` for the leftmost labels, or `*` alone.
    #[serde(default)]
    pub allow_origins: Vec<String>,
    /// Whether credentials may go along.
    #[serde(default)]
    pub allow_credentials: Option<bool>,
    /// Methods allowed (`*`: any).
    #[serde(default)]
    pub allow_methods: Vec<String>,
    /// Request headers allowed (`*`: any).
    #[serde(default)]
    pub allow_headers: Vec<String>,
    /// Response headers a page may read.
    #[serde(default)]
    pub expose_headers: Vec<String>,
    /// Seconds a preflight's answer may be cached.
    #[serde(default)]
    pub max_age: Option<i64>,
}

/// A header modifier.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderModifier {
    /// Overwrite.
    #[serde(default)]
    pub set: Vec<Header>,
    /// Append.
    #[serde(default)]
    pub add: Vec<Header>,
    /// Remove by name.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// The same object, or an equal one (inputs read again from JSON are new objects).
pub fn same<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// The key of an object from its metadata.
pub fn key(meta: &ObjectMeta) -> ObjectKey {
    ObjectKey::new(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl HeaderModifier {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// A header name and value.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// `RequestRedirect`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestRedirect {
    /// `http` or `https`.
    #[serde(default)]
    pub scheme: Option<String>,
    /// Host.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Path.
    #[serde(default)]
    pub path: Option<PathModifier>,
    /// Port.
    #[serde(default)]
    pub port: Option<i32>,
    /// 301 or 302 (default 302).
    #[serde(default)]
    pub status_code: Option<i32>,
}

/// `URLRewrite`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    /// Host.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Path.
    #[serde(default)]
    pub path: Option<PathModifier>,
}

/// A path modifier of a redirect or rewrite.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub type_: String,
    /// For `ReplaceFullPath`.
    #[serde(default)]
    pub replace_full_path: Option<String>,
    /// For `ReplacePrefixMatch`.
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

/// `RequestMirror`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestMirror {
    /// Where to mirror.
    pub backend_ref: BackendRef,
    /// Share of requests mirrored, in percent.
    #[serde(default)]
    pub percent: Option<i32>,
    /// Share of requests mirrored, as a fraction (instead of `percent`).
    #[serde(default)]
    pub fraction: Option<Fraction>,
}

/// `requestMirror.fraction`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Fraction {
    /// Numerator.
    pub numerator: i32,
    /// Denominator (default 100).
    #[serde(default)]
    pub denominator: Option<i32>,
}

/// A `GRPCRoute`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRoute {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: GrpcRouteSpec,
}

/// `GRPCRoute.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    /// Parents.
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// Hostnames.
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// Rules.
    #[serde(default)]
    pub rules: Vec<GrpcRule>,
}

/// `GRPCRoute.spec.rules[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRule {
    /// Matches (everything when empty).
    #[serde(default)]
    pub matches: Vec<GrpcMatch>,
    /// Filters.
    #[serde(default)]
    pub filters: Vec<HttpFilter>,
    /// Backends.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// `GRPCRoute.spec.rules[].matches[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrpcMatch {
    /// Service and method.
    #[serde(default)]
    pub method: Option<GrpcMethodMatch>,
    /// Header matches.
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
}

/// A gRPC method match.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrpcMethodMatch {
    /// `Exact` (default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// Fully qualified service.
    #[serde(default)]
    pub service: Option<String>,
    /// Method.
    #[serde(default)]
    pub method: Option<String>,
}

/// A `TLSRoute`, `TCPRoute` or `UDPRoute`: parents, hostnames (TLS only) and backends.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamRoute {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: StreamRouteSpec,
}

/// The spec of a stream route.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamRouteSpec {
    /// Parents.
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// SNI hostnames (TLSRoute).
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// Rules.
    #[serde(default)]
    pub rules: Vec<StreamRule>,
}

/// A stream route rule.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamRule {
    /// Backends.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// A `ReferenceGrant`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrant {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: ReferenceGrantSpec,
}

/// `ReferenceGrant.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantSpec {
    /// Who may refer.
    #[serde(default)]
    pub from: Vec<GrantFrom>,
    /// To what.
    #[serde(default)]
    pub to: Vec<GrantTo>,
}

/// `ReferenceGrant.spec.from[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrantFrom {
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
}

/// `ReferenceGrant.spec.to[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrantTo {
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// One object, or all of the kind when absent.
    #[serde(default)]
    pub name: Option<String>,
}

/// A `BackendTLSPolicy` (GEP-1897): how the proxy speaks TLS to a Service.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicy {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: BackendTlsPolicySpec,
}

/// `BackendTLSPolicy.spec`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicySpec {
    /// The Services (and optionally their ports, by name) the policy applies to.
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetRef>,
    /// How the backend's certificate is checked.
    #[serde(default)]
    pub validation: BackendTlsValidation,
}

/// `targetRefs[]` of a policy: a local object, optionally one section (a Service port name).
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    /// Group (core when empty).
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Section (a Service port name).
    #[serde(default)]
    pub section_name: Option<String>,
}

/// `BackendTLSPolicy.spec.validation`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsValidation {
    /// CA bundles (ConfigMaps with a `ca.crt` key) in the policy's namespace.
    #[serde(default)]
    pub ca_certificate_refs: Vec<ObjectRef>,
    /// `System`: the proxy's trust store instead of `caCertificateRefs`.
    #[serde(default, rename = "wellKnownCACertificates")]
    pub well_known_ca_certificates: Option<String>,
    /// SNI, and the name the certificate must carry unless `subjectAltNames` is given.
    #[serde(default)]
    pub hostname: String,
    /// Names of which the certificate must carry at least one.
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// `subjectAltNames[]`.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubjectAltName {
    /// `Hostname` or `URI`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The DNS name of `type: Hostname`.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The URI of `type: URI` (a SPIFFE ID, say).
    #[serde(default)]
    pub uri: Option<String>,
}

/// Everything the translator reads, as the index holds it.
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// GatewayClasses.
    pub gateway_classes: Vec<Arc<GatewayClass>>,
    /// Gateways.
    pub gateways: Vec<Arc<Gateway>>,
    /// ListenerSets.
    pub listener_sets: Vec<Arc<ListenerSet>>,
    /// HTTPRoutes.
    pub http_routes: Vec<Arc<HttpRoute>>,
    /// GRPCRoutes.
    pub grpc_routes: Vec<Arc<GrpcRoute>>,
    /// TLSRoutes.
    pub tls_routes: Vec<Arc<StreamRoute>>,
    /// TCPRoutes.
    pub tcp_routes: Vec<Arc<StreamRoute>>,
    /// UDPRoutes.
    pub udp_routes: Vec<Arc<StreamRoute>>,
    /// ReferenceGrants.
    pub reference_grants: Vec<Arc<ReferenceGrant>>,
    /// BackendTLSPolicies.
    pub backend_tls_policies: Vec<Arc<BackendTlsPolicy>>,
    /// ConfigMaps (CA bundles of BackendTLSPolicies).
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// Services.
    pub services: Vec<Arc<Service>>,
    /// EndpointSlices.
    pub endpoint_slices: Vec<Arc<EndpointSlice>>,
    /// Secrets (TLS certificates, and those route annotations name).
    pub secrets: Vec<Arc<Secret>>,
    /// Namespaces (for label selectors).
    pub namespaces: Vec<Arc<Namespace>>,
    /// ALB instances (the settings of the Gateways they control).
    pub instances: Vec<Arc<Instance>>,
    /// Services and EndpointSlices by namespace and Service name, built on first use (a
    /// translation looks them up per backend reference; a scan each time is quadratic).
    index: std::sync::OnceLock<Lookup>,
}

/// Positions in [`Input::services`] and [`Input::endpoint_slices`] by namespace and Service
/// name.
#[derive(Clone, Debug, Default)]
struct Lookup {
    /// Namespace → name → position (two levels, so a lookup by `&str` allocates nothing).
    services: std::collections::HashMap<String, std::collections::HashMap<String, usize>>,
    /// Namespace → Service name → positions.
    slices: std::collections::HashMap<String, std::collections::HashMap<String, Vec<usize>>>,
}

/// One object the translator reads, typed (read once, shared by every translation that
/// follows until the object changes).
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    /// A ClusterALBInstance or an ALBInstance.
    Instance(Arc<Instance>),
    /// A GatewayClass.
    GatewayClass(Arc<GatewayClass>),
    /// A Gateway.
    Gateway(Arc<Gateway>),
    /// A ListenerSet (or XListenerSet).
    ListenerSet(Arc<ListenerSet>),
    /// An HTTPRoute.
    HttpRoute(Arc<HttpRoute>),
    /// A GRPCRoute.
    GrpcRoute(Arc<GrpcRoute>),
    /// A TLSRoute.
    TlsRoute(Arc<StreamRoute>),
    /// A TCPRoute.
    TcpRoute(Arc<StreamRoute>),
    /// A UDPRoute.
    UdpRoute(Arc<StreamRoute>),
    /// A ReferenceGrant.
    ReferenceGrant(Arc<ReferenceGrant>),
    /// A BackendTLSPolicy.
    BackendTlsPolicy(Arc<BackendTlsPolicy>),
    /// A ConfigMap.
    ConfigMap(Arc<ConfigMap>),
    /// A Service.
    Service(Arc<Service>),
    /// An EndpointSlice.
    EndpointSlice(Arc<EndpointSlice>),
    /// A Secret.
    Secret(Arc<Secret>),
    /// A Namespace.
    Namespace(Arc<Namespace>),
}

impl Object {
    /// Reads an object given as JSON, by its `kind`; `None` for kinds the translator does not
    /// read.
    pub fn read(object: &serde_json::Value) -> Result<Option<Self>, InputError> {
        fn typed<T: serde::de::DeserializeOwned>(
            object: &serde_json::Value,
        ) -> Result<Arc<T>, serde_json::Error> {
            T::deserialize(object).map(Arc::new)
        }
        let kind = object
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_owned();
        let name = object
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_owned();
        let read = match kind.as_str() {
            "GatewayClass" => typed(object).map(Self::GatewayClass),
            "Gateway" => typed(object).map(Self::Gateway),
            "ListenerSet" | "XListenerSet" => typed(object).map(Self::ListenerSet),
            "HTTPRoute" => typed(object).map(Self::HttpRoute),
            "GRPCRoute" => typed(object).map(Self::GrpcRoute),
            "TLSRoute" => typed(object).map(Self::TlsRoute),
            "TCPRoute" => typed(object).map(Self::TcpRoute),
            "UDPRoute" => typed(object).map(Self::UdpRoute),
            "ReferenceGrant" => typed(object).map(Self::ReferenceGrant),
            "BackendTLSPolicy" => typed(object).map(Self::BackendTlsPolicy),
            "ConfigMap" => typed(object).map(Self::ConfigMap),
            "Service" => typed(object).map(Self::Service),
            "EndpointSlice" => typed(object).map(Self::EndpointSlice),
            "Secret" => typed(object).map(Self::Secret),
            "Namespace" => typed(object).map(Self::Namespace),
            "ClusterALBInstance" | "ALBInstance" => typed(object).map(Self::Instance),
            _ => return Ok(None),
        };
        read.map(Some)
            .map_err(|source| InputError::Object { kind, name, source })
    }
}

/// A ClusterALBInstance or ALBInstance, as the translator reads it (its spec; the status is
/// the controller's).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Instance {
    /// `ClusterALBInstance` or `ALBInstance`.
    pub kind: String,
    /// Its metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What it asks.
    #[serde(default)]
    pub spec: fairlead_edge_api::InstanceSpec,
}

/// An object the input could not take.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not YAML or JSON.
    #[error("document {index}: {source}")]
    Parse {
        /// Position in the stream.
        index: usize,
        /// Why.
        source: serde_yaml_ng::Error,
    },
    /// Readable, but not an object of its kind.
    #[error("{kind} {name}: {source}")]
    Object {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Why.
        source: serde_json::Error,
    },
}

impl Input {
    fn lookup(&self) -> &Lookup {
        self.index.get_or_init(|| {
            let mut lookup = Lookup::default();
            for (i, s) in self.services.iter().enumerate() {
                lookup
                    .services
                    .entry(s.metadata.namespace.clone().unwrap_or_default())
                    .or_default()
                    .insert(s.metadata.name.clone().unwrap_or_default(), i);
            }
            for (i, s) in self.endpoint_slices.iter().enumerate() {
                if let Some(service) = s
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                {
                    lookup
                        .slices
                        .entry(s.metadata.namespace.clone().unwrap_or_default())
                        .or_default()
                        .entry(service.clone())
                        .or_default()
                        .push(i);
                }
            }
            lookup
        })
    }

    /// How many distinct Services (by namespace and name) the input holds.
    pub fn distinct_services(&self) -> usize {
        self.lookup()
            .services
            .values()
            .map(std::collections::HashMap::len)
            .sum()
    }

    /// The Service `namespace/name`.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.shared_service(namespace, name).map(AsRef::as_ref)
    }

    /// The Service `namespace/name`, as the input shares it.
    pub fn shared_service(&self, namespace: &str, name: &str) -> Option<&Arc<Service>> {
        let i = self.lookup().services.get(namespace)?.get(name)?;
        self.services.get(*i)
    }

    /// The EndpointSlices of Service `namespace/name`.
    pub fn slices_of(
        &self,
        namespace: &str,
        service: &str,
    ) -> impl Iterator<Item = &Arc<EndpointSlice>> {
        self.lookup()
            .slices
            .get(namespace)
            .and_then(|names| names.get(service))
            .into_iter()
            .flatten()
            .filter_map(|i| self.endpoint_slices.get(*i))
    }

    /// Adds one object given as JSON, by its `kind`; kinds the translator does not read are
    /// ignored (`Ok(false)`).
    pub fn add(&mut self, object: serde_json::Value) -> Result<bool, InputError> {
        Ok(Object::read(&object)?.map(|o| self.push(o)).is_some())
    }

    /// Whether `other` holds the same objects in the same order (each the same or an equal
    /// one: an unchanged object is shared, so this costs a pointer comparison per object).
    pub fn same_objects(&self, other: &Input) -> bool {
        fn all<T: PartialEq>(a: &[Arc<T>], b: &[Arc<T>]) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        all(&self.gateway_classes, &other.gateway_classes)
            && all(&self.gateways, &other.gateways)
            && all(&self.listener_sets, &other.listener_sets)
            && all(&self.http_routes, &other.http_routes)
            && all(&self.grpc_routes, &other.grpc_routes)
            && all(&self.tls_routes, &other.tls_routes)
            && all(&self.tcp_routes, &other.tcp_routes)
            && all(&self.udp_routes, &other.udp_routes)
            && all(&self.reference_grants, &other.reference_grants)
            && all(&self.backend_tls_policies, &other.backend_tls_policies)
            && all(&self.config_maps, &other.config_maps)
            && all(&self.services, &other.services)
            && all(&self.endpoint_slices, &other.endpoint_slices)
            && all(&self.secrets, &other.secrets)
            && all(&self.namespaces, &other.namespaces)
            && all(&self.instances, &other.instances)
    }

    /// Adds one object already read.
    pub fn push(&mut self, object: Object) {
        self.index = std::sync::OnceLock::new();
        match object {
            Object::GatewayClass(o) => self.gateway_classes.push(o),
            Object::Gateway(o) => self.gateways.push(o),
            Object::ListenerSet(o) => self.listener_sets.push(o),
            Object::HttpRoute(o) => self.http_routes.push(o),
            Object::GrpcRoute(o) => self.grpc_routes.push(o),
            Object::TlsRoute(o) => self.tls_routes.push(o),
            Object::TcpRoute(o) => self.tcp_routes.push(o),
            Object::UdpRoute(o) => self.udp_routes.push(o),
            Object::ReferenceGrant(o) => self.reference_grants.push(o),
            Object::BackendTlsPolicy(o) => self.backend_tls_policies.push(o),
            Object::ConfigMap(o) => self.config_maps.push(o),
            Object::Service(o) => self.services.push(o),
            Object::EndpointSlice(o) => self.endpoint_slices.push(o),
            Object::Secret(o) => self.secrets.push(o),
            Object::Namespace(o) => self.namespaces.push(o),
            Object::Instance(o) => self.instances.push(o),
        }
    }

    /// Reads a stream of YAML documents (`---` separated).
    pub fn from_yaml(text: &str) -> Result<Self, InputError> {
        let mut input = Self::default();
        for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let value = serde_json::Value::deserialize(document)
                .map_err(|source| InputError::Parse { index, source })?;
            if value.is_null() {
                continue;
            }
            input.add(value)?;
        }
        Ok(input)
    }

    /// The labels of a namespace (empty when unknown).
    pub fn namespace_labels(&self, name: &str) -> BTreeMap<String, String> {
        self.namespaces
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }
}
