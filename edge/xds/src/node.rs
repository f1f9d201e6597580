//! Which Gateway a proxy serves: `node.cluster` is `<namespace>/<gateway>` (what the bootstrap
//! of `fairlead edge bootstrap` and the gateway controller's proxies set), or the node
//! metadata carries `gateway: <namespace>/<gateway>` (for clients whose cluster field is
//! spoken for, such as gRPC's bootstrap).

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use fairlead_key::ObjectKey;

/// Why a node cannot be served.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the node names no Gateway: set node.cluster to <namespace>/<gateway> or node.metadata.gateway"
)]
pub struct NoGateway;

/// The node group of a node: the Gateway it serves.
pub fn group(node: Option<&Node>) -> Result<ObjectKey, NoGateway> {
    let node = node.ok_or(NoGateway)?;
    // A Gateway is namespaced: `name` alone does not name one.
    let gateway = |g: &str| {
        ObjectKey::parse(g)
            .ok()
            .filter(|k| !k.namespace().is_empty())
    };
    if let Some(key) = gateway(&node.cluster) {
        return Ok(key);
    }
    node.metadata
        .as_ref()
        .and_then(|m| m.fields.get("gateway"))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => gateway(s),
            _ => None,
        })
        .ok_or(NoGateway)
}
