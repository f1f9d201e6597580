//! Who may pass a route, in Envoy: `whitelist-source-range` is the RBAC HTTP filter's
//! per-route policy allowing only those client addresses (Envoy's `remote_ip`: the address
//! the connection manager settled on under the instance's `originalIPDetection`, never a
//! header a client chose); other clients get 403.

use envoy_types::pb::envoy::config::rbac::v3 as rbac;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3 as http_rbac;
use envoy_types::pb::google::protobuf::Any;

use crate::envoy::cidr;
use crate::pb::any;
use fairlead_edge_model::instance::Cidr;

/// The RBAC filter's name.
pub const RBAC: &str = "envoy.filters.http.rbac";

/// The RBAC filter as a connection manager carries it: no policy of its own (routes bring
/// theirs).
pub fn filter() -> Any {
    any(&http_rbac::Rbac::default())
}

/// The per-route policy of `whitelist-source-range`.
pub fn allowlist(ranges: &[Cidr]) -> Any {
    let policy = rbac::Policy {
        permissions: vec![rbac::Permission {
            rule: Some(rbac::permission::Rule::Any(true)),
        }],
        principals: ranges
            .iter()
            .map(|range| rbac::Principal {
                identifier: Some(rbac::principal::Identifier::RemoteIp(cidr(range))),
            })
            .collect(),
        ..Default::default()
    };
    any(&http_rbac::RbacPerRoute {
        rbac: Some(http_rbac::Rbac {
            rules: Some(rbac::Rbac {
                action: rbac::rbac::Action::Allow as i32,
                policies: [("whitelist-source-range".to_owned(), policy)].into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    })
}
