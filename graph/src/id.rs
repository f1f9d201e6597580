//! Node ids: `group/kind/namespace/name`, with a fifth segment for what lives inside an object
//! (a listener of a Gateway, a port's EndpointSlices of a Service). The core group and a
//! cluster-scoped object's namespace are empty segments, so an id reads back unambiguously
//! (names never hold `/`) and stays the same for as long as the object it names exists — and
//! for its placeholder before it does.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The id of a node. Shared text: the graph's maps, its edges' ends and the builder's memo
/// hold the same allocation, so copying an id costs a reference count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(Arc<str>);

/// Text that is not a node id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a node id (group/kind/namespace/name[/section])")]
pub struct ParseIdError(String);

impl NodeId {
    /// The id of object `name` of `group/kind` in `namespace` (empty when cluster-scoped).
    pub fn new(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self(format!("{group}/{kind}/{namespace}/{name}").into())
    }

    /// The id of `section` inside this node's object (a listener, a port).
    pub fn section(&self, section: &str) -> Self {
        Self(format!("{}/{section}", self.0).into())
    }

    /// Reads an id back.
    pub fn parse(text: &str) -> Result<Self, ParseIdError> {
        let parts: Vec<&str> = text.split('/').collect();
        let well_formed = matches!(parts.len(), 4 | 5)
            && !parts[1].is_empty()
            && !parts[3].is_empty()
            && parts.get(4).is_none_or(|s| !s.is_empty());
        if well_formed {
            Ok(Self(text.into()))
        } else {
            Err(ParseIdError(text.to_owned()))
        }
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The object's namespace (empty when cluster-scoped).
    pub fn namespace(&self) -> &str {
        self.0.split('/').nth(2).unwrap_or_default()
    }

    /// The object's name (a section's object's).
    pub fn name(&self) -> &str {
        self.0.split('/').nth(3).unwrap_or_default()
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for NodeId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_and_name_their_namespace() {
        let gateway = NodeId::new("gateway.networking.k8s.io", "Gateway", "web", "gw");
        assert_eq!(gateway.as_str(), "gateway.networking.k8s.io/Gateway/web/gw");
        assert_eq!(NodeId::parse(gateway.as_str()), Ok(gateway.clone()));
        let listener = gateway.section("https");
        assert_eq!(listener.namespace(), "web");
        assert_eq!(listener.name(), "gw");
        assert_eq!(NodeId::parse(listener.as_str()), Ok(listener));
        let class = NodeId::new("gateway.networking.k8s.io", "GatewayClass", "", "d8-alb");
        assert_eq!(class.namespace(), "");
        assert_eq!(
            NodeId::parse("/Service/default/web").unwrap().namespace(),
            "default"
        );
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in ["", "a/b", "g//ns/n", "g/k/ns/", "g/k/ns/n/", "g/k/ns/n/s/x"] {
            assert!(NodeId::parse(bad).is_err(), "{bad}");
        }
    }
}
