//! Backend references: a route's `backendRefs` resolved to Services and ports, or the reason
//! they cannot be (the spec's `ResolvedRefs` reasons).

use k8s_openapi::api::core::v1::ServicePort;

use crate::refs::Grants;
pub use crate::refs::Unresolved;
use fairlead_edge_model::input::{BackendRef, GATEWAY_GROUP, Input};

/// A resolved backend: one port of one Service; it becomes one Envoy cluster. Its names are
/// shared (`Arc<str>`): a backend is copied into every route share and cluster set that uses
/// it.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// Service namespace.
    pub namespace: std::sync::Arc<str>,
    /// Service name.
    pub service: std::sync::Arc<str>,
    /// Service port.
    pub port: u16,
    /// The Service port's name (EndpointSlice ports carry it).
    pub port_name: std::sync::Arc<str>,
    /// Speaks HTTP/2 without TLS (gRPC, or `appProtocol` h2c/grpc).
    pub http2: bool,
    /// Forwarded as is: behind TLS passthrough (the client's TLS goes through untouched) or
    /// UDP, so no BackendTLSPolicy applies (it would wrap TLS in TLS, or TLS around
    /// datagrams).
    pub opaque: bool,
    /// What the route's annotations change of its cluster ([`crate::upstream`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<std::sync::Arc<crate::upstream::Variant>>,
}

impl Backend {
    /// The Envoy cluster name (`/h2` when it speaks HTTP/2: an HTTPRoute and a GRPCRoute to
    /// the same plain port need two clusters; `/opaque` behind TLS passthrough and for UDP,
    /// which never originate TLS).
    pub fn cluster(&self) -> String {
        // Built by hand rather than with `format!`: every route share names its cluster, and
        // this runs thousands of times per translation.
        use std::fmt::Write as _;
        let mut name =
            String::with_capacity(self.namespace.len() + self.service.len() + 5 + 2 + 3 + 7);
        name.push_str(&self.namespace);
        name.push('/');
        name.push_str(&self.service);
        name.push('/');
        let _ = write!(name, "{}", self.port);
        if self.http2 {
            name.push_str("/h2");
        }
        if self.opaque {
            name.push_str("/opaque");
        }
        if let Some(v) = &self.variant {
            name.push_str(&v.suffix);
        }
        name
    }
}

/// Resolves `backend` of a route of `route_kind` in `route_namespace`; `field` names it in
/// messages (`spec.rules[0].backendRefs[1]`).
pub fn resolve(
    backend: &BackendRef,
    (route_kind, route_namespace): (&str, &str),
    field: &str,
    input: &Input,
    grants: &Grants<'_>,
    http2: bool,
) -> Result<Backend, Unresolved> {
    let group = backend.group.as_deref().unwrap_or_default();
    let kind = backend.kind.as_deref().unwrap_or("Service");
    if !group.is_empty() || kind != "Service" {
        return Err(Unresolved {
            reason: "InvalidKind",
            message: format!("{field}: {group}/{kind} is not a supported backend kind"),
        });
    }
    let namespace = backend.namespace.as_deref().unwrap_or(route_namespace);
    if !grants.allows(
        (GATEWAY_GROUP, route_kind, route_namespace),
        ("", "Service", namespace, &backend.name),
    ) {
        return Err(Unresolved {
            reason: "RefNotPermitted",
            message: format!(
                "{field}: Service {namespace}/{} needs a ReferenceGrant",
                backend.name
            ),
        });
    }
    let service = input
        .service(namespace, &backend.name)
        .ok_or_else(|| Unresolved {
            reason: "BackendNotFound",
            message: format!("{field}: Service {namespace}/{} not found", backend.name),
        })?;
    let Some(port) = backend.port else {
        return Err(Unresolved {
            reason: "BackendNotFound",
            message: format!("{field}.port: required for a Service"),
        });
    };
    let ports: &[ServicePort] = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    let service_port = ports
        .iter()
        .find(|p| p.port == port)
        .ok_or_else(|| Unresolved {
            reason: "BackendNotFound",
            message: format!(
                "{field}.port: Service {namespace}/{} has no port {port}",
                backend.name
            ),
        })?;
    let app = service_port.app_protocol.as_deref().unwrap_or_default();
    Ok(Backend {
        namespace: namespace.into(),
        service: backend.name.as_str().into(),
        port: u16::try_from(port).unwrap_or_default(),
        port_name: service_port.name.as_deref().unwrap_or_default().into(),
        http2: http2 || matches!(app, "kubernetes.io/h2c" | "grpc" | "h2c"),
        opaque: false,
        variant: None,
    })
}
