//! Who may pass a route, in Envoy: `whitelist-source-range` is the RBAC HTTP filter's
//! per-route policy allowing only those client addresses (Envoy's `remote_ip`: the address
//! the connection manager settled on under the instance's `originalIPDetection`, never a
//! header a client chose); other clients get 403. `basic-auth-secret` and `auth-url` are the
//! `ext_authz` filter asking the proxy's authentication service (the cluster
//! [`fairlead_edge_model::names::AUTH_CLUSTER`], which the proxy supervisor gives Envoy) with
//! the route's users and external service in the question's context; the service makes
//! `auth-url`'s subrequest itself, as nginx does (a fixed path, `rd` escaped, a 401 turned into
//! the sign-in redirect: what Envoy's own HTTP authorization service cannot say). Under
//! `satisfy: any` the allowlist is an RBAC
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

/// The external authorization filter's name (basic auth, `auth-url`).
pub const AUTHENTICATION: &str = "envoy.filters.http.ext_authz";

/// How long Envoy waits for the authentication service: longer than the service waits for
/// an `auth-url` ([`fairlead_edge_model::names::AUTH_URL_TIMEOUT`]), so its 500 is what a
/// client sees when the external service hangs.
const AUTHENTICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(12);

/// The `ext_authz` filter as a connection manager carries it: the proxy's authentication
/// service over gRPC, closed when it cannot answer (503).
pub fn authentication_filter() -> Any {
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
                timeout: Some(duration(AUTHENTICATION_TIMEOUT)),
                ..Default::default()
            },
        )),
        transport_api_version: core::ApiVersion::V3 as i32,
        failure_mode_allow: false,
        status_on_error: Some(types::HttpStatus {
            code: types::StatusCode::ServiceUnavailable as i32,
        }),
        stat_prefix: "authentication".into(),
        metadata_context_namespaces: vec![fairlead_edge_model::names::RBAC_VERDICT.0.to_owned()],
        ..Default::default()
    })
}

/// The per-route question of `guard`: its users, (`satisfy: any`) whether the allowlist's
/// verdict lets a request through without them, and its external service, as one JSON
/// context entry ([`fairlead_edge_model::names::AUTH_CONTEXT`]; a protobuf map of one entry
/// encodes the same every time).
pub fn authentication(guard: &Guard) -> Option<Any> {
    use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3 as ext_authz;
    if guard.users.is_none() && guard.external.is_none() {
        return None;
    }
    let mut question = serde_json::Map::new();
    if let Some(users) = &guard.users {
        question.insert("htpasswd".into(), users.as_str().into());
        question.insert("any".into(), guard.any_from.is_some().into());
    }
    if let Some(external) = &guard.external {
        question.insert("external".into(), serde_json::to_value(external).ok()?);
    }
    let question = serde_json::Value::Object(question);
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
