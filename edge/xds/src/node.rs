//! Which Gateway a proxy serves: `node.cluster` is `<namespace>/<gateway>` (what the bootstrap
//! of `fairlead edge bootstrap` and the gateway controller's proxies set), or the node
//! metadata carries `gateway: <namespace>/<gateway>` (for clients whose cluster field is
//! spoken for, such as gRPC's bootstrap); and which GeoIP databases it holds (the node
//! metadata's `geoip_editions`, which `fairlead edge proxy` sets from the files beside it);
//! and the address of its own it also listens on (the node metadata's `pod_address`, which
//! `fairlead edge proxy` sets where the proxies of a Gateway share the Gateway's address:
//! `fairlead up`'s local runner, see [`POD_ADDRESS`]).

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

/// The node metadata key naming an address of the proxy's own (its pod's), which every TCP
/// listener bound to a specific address also binds: where the proxies of one Gateway share
/// its address (`fairlead up` binds them all there, with `SO_REUSEPORT`), the pod's own
/// address is what a Service forwards to, so a terminating proxy can be taken out of the
/// Service's targets before it drains — as kube-proxy does with a pod's IP in a cluster.
pub const POD_ADDRESS: &str = "pod_address";

/// The address of its own a node says it listens on too (none when it says nothing, or
/// something that is no IP address).
pub fn pod_address(node: Option<&Node>) -> Option<std::net::IpAddr> {
    match &node?.metadata.as_ref()?.fields.get(POD_ADDRESS)?.kind {
        Some(Kind::StringValue(s)) => s.parse().ok(),
        _ => None,
    }
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

    #[test]
    fn a_pod_address_is_an_ip_address_or_nothing() {
        let pod = |value: &str| Node {
            metadata: Some(Struct {
                fields: [(
                    POD_ADDRESS.to_owned(),
                    Value {
                        kind: Some(Kind::StringValue(value.into())),
                    },
                )]
                .into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            pod_address(Some(&pod("127.0.3.7"))),
            Some([127, 0, 3, 7].into())
        );
        assert_eq!(pod_address(Some(&pod("pod-7"))), None);
        assert_eq!(pod_address(Some(&Node::default())), None);
    }
}
