//! Which Gateway a proxy serves: `node.cluster` is `<namespace>/<gateway>` (what the bootstrap
//! of `fairlead edge bootstrap` and the gateway controller's proxies set), or the node
//! metadata carries `gateway: <namespace>/<gateway>` (for clients whose cluster field is
//! spoken for, such as gRPC's bootstrap); and which GeoIP databases it holds (the node
//! metadata's `geoip_editions`, which `fairlead edge proxy` sets from the files beside it).

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

/// The node metadata key listing the GeoIP editions a proxy holds: a list of edition IDs
/// (or one comma-separated string).
pub const GEOIP_EDITIONS: &str = "geoip_editions";

/// The GeoIP editions a node says it holds (none when it says nothing).
pub fn geoip_editions(node: Option<&Node>) -> std::collections::BTreeSet<String> {
    let Some(value) = node
        .and_then(|n| n.metadata.as_ref())
        .and_then(|m| m.fields.get(GEOIP_EDITIONS))
    else {
        return Default::default();
    };
    let strings: Vec<&str> = match &value.kind {
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .filter_map(|v| match &v.kind {
                Some(Kind::StringValue(s)) => Some(s.as_str()),
                _ => None,
            })
            .collect(),
        Some(Kind::StringValue(s)) => s.split(',').collect(),
        _ => Vec::new(),
    };
    strings
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::{ListValue, Struct, Value};

    fn node(value: Kind) -> Node {
        Node {
            cluster: "d8-alb/public".into(),
            metadata: Some(Struct {
                fields: [(GEOIP_EDITIONS.to_owned(), Value { kind: Some(value) })].into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_editions_a_node_holds_come_as_a_list_or_a_string() {
        let list = node(Kind::ListValue(ListValue {
            values: ["GeoIP2-City", "GeoLite2-ASN"]
                .map(|s| Value {
                    kind: Some(Kind::StringValue(s.into())),
                })
                .to_vec(),
        }));
        let held = geoip_editions(Some(&list));
        assert_eq!(
            held.into_iter().collect::<Vec<_>>(),
            ["GeoIP2-City", "GeoLite2-ASN"]
        );
        let text = node(Kind::StringValue("GeoIP2-City, GeoLite2-ASN,".into()));
        assert_eq!(geoip_editions(Some(&text)).len(), 2);
        assert!(geoip_editions(Some(&Node::default())).is_empty());
        assert!(geoip_editions(None).is_empty());
    }
}
