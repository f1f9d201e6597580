//! Who may pass a route, in Envoy: `whitelist-source-range` is the RBAC HTTP filter's
//! per-route policy allowing only those client addresses (Envoy's `remote_ip`: the address
//! the connection manager settled on under the instance's `originalIPDetection`, never a
//! header a client chose); other clients get 403. `basic-auth-secret` is the `ext_authz`
//! filter asking the proxy's authentication service (the cluster
//! [`fairlead_edge_model::names::AUTH_CLUSTER`], which the proxy supervisor gives Envoy) with
//! the route's users in the question's context; under `satisfy: any` the allowlist is an RBAC
//! policy in shadow mode, whose verdict on the client's address (Envoy's own, as for the
//! allowlist) reaches the service in the question's metadata, and lets the request through
//! without credentials. When the service cannot answer, the request gets 503, never the
//! backend.

use envoy_types::pb::envoy::config::rbac::v3 as rbac;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3 as http_rbac;
use envoy_types::pb::google::protobuf::Any;

use crate::pb::{any, duration};
use fairlead_edge_model::instance::Cidr;
use fairlead_edge_translate::access::Guard;

/// The RBAC filter's name.
pub const RBAC: &str = "envoy.filters.http.rbac";

/// The RBAC filter as a connection manager carries it: no policy of its own (routes bring
/// theirs).
pub fn filter() -> Any {
    any(&http_rbac::Rbac::default())
}

/// The per-route policy of `whitelist-source-range`: enforced, or (`shadow`, under
/// `satisfy: any`) only judged, its verdict left in the request's metadata
/// ([`fairlead_edge_model::names::RBAC_VERDICT`]) for the authentication service.
pub fn allowlist(ranges: &[Cidr], shadow: bool) -> Any {
    let policy = crate::envoy::allow_from(ranges, rbac::principal::Identifier::RemoteIp);
    let rules = rbac::Rbac {
        action: rbac::rbac::Action::Allow as i32,
        policies: [("whitelist-source-range".to_owned(), policy)].into(),
        ..Default::default()
    };
    any(&http_rbac::RbacPerRoute {
        rbac: Some(if shadow {
            http_rbac::Rbac {
                shadow_rules: Some(rules),
                ..Default::default()
            }
        } else {
            http_rbac::Rbac {
                rules: Some(rules),
                ..Default::default()
            }
        }),
    })
}

/// The external authorization filter's name (basic auth).
pub const BASIC_AUTH: &str = "envoy.filters.http.ext_authz";

/// The `ext_authz` filter as a connection manager carries it: the proxy's authentication
/// service over gRPC, closed when it cannot answer (503).
pub fn basic_auth_filter() -> Any {
    use envoy_types::pb::envoy::config::core::v3 as core;
    use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3 as ext_authz;
    use envoy_types::pb::envoy::r#type::v3 as types;
    any(&ext_authz::ExtAuthz {
        services: Some(ext_authz::ext_authz::Services::GrpcService(
            core::GrpcService {
                target_specifier: Some(core::grpc_service::TargetSpecifier::EnvoyGrpc(
                    core::grpc_service::EnvoyGrpc {
                        cluster_name: fairlead_edge_model::names::AUTH_CLUSTER.into(),
                        ..Default::default()
                    },
                )),
                timeout: Some(duration(std::time::Duration::from_secs(2))),
                ..Default::default()
            },
        )),
        transport_api_version: core::ApiVersion::V3 as i32,
        failure_mode_allow: false,
        status_on_error: Some(types::HttpStatus {
            code: types::StatusCode::ServiceUnavailable as i32,
        }),
        stat_prefix: "basic_auth".into(),
        metadata_context_namespaces: vec![fairlead_edge_model::names::RBAC_VERDICT.0.to_owned()],
        ..Default::default()
    })
}

/// The per-route question of `guard`: its users, and (`satisfy: any`) whether the
/// allowlist's verdict lets a request through without them, as one JSON context entry
/// ([`fairlead_edge_model::names::AUTH_CONTEXT`]; a protobuf map of one entry encodes the
/// same every time).
pub fn basic_auth(guard: &Guard) -> Option<Any> {
    use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3 as ext_authz;
    let users = guard.users.as_ref()?;
    let question = serde_json::json!({"htpasswd": users, "any": guard.any_from.is_some()});
    Some(any(&ext_authz::ExtAuthzPerRoute {
        r#override: Some(ext_authz::ext_authz_per_route::Override::CheckSettings(
            ext_authz::CheckSettings {
                context_extensions: [(
                    fairlead_edge_model::names::AUTH_CONTEXT.to_owned(),
                    question.to_string(),
                )]
                .into(),
                ..Default::default()
            },
        )),
    }))
}
