//! Which Gateway a proxy serves: `node.cluster` is `<namespace>/<gateway>` (what the bootstrap
//! of `fairlead edge bootstrap` and the gateway controller's proxies set), or the node
//! metadata carries `gateway: <namespace>/<gateway>` (for clients whose cluster field is
//! spoken for, such as gRPC's bootstrap).

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;

/// Why a node cannot be served.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the node names no Gateway: set node.cluster to <namespace>/<gateway> or node.metadata.gateway"
)]
pub struct NoGateway;

/// The node group (`namespace/gateway`) of a node.
pub fn group(node: Option<&Node>) -> Result<String, NoGateway> {
    let node = node.ok_or(NoGateway)?;
    let valid = |g: &str| {
        g.split_once('/')
            .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
    };
    if valid(&node.cluster) {
        return Ok(node.cluster.clone());
    }
    let from_metadata = node
        .metadata
        .as_ref()
        .and_then(|m| m.fields.get("gateway"))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        });
    from_metadata.filter(|g| valid(g)).ok_or(NoGateway)
}
