//! Snapshots and the cache that hands them to streams.
//!
//! A snapshot is everything one Gateway's proxies get: resources by type and name, each with
//! a content hash (the delta protocol's resource version), and a version per type derived from
//! the hashes (the state-of-the-world `version_info`). Versions are content-addressed, so a
//! translation that yields the same resources yields the same versions and pushes nothing.
//!
//! The cache keeps one `tokio::sync::watch` channel per node group (`namespace/gateway`):
//! publishing never waits for streams, and a stream always sees the latest snapshot. A
//! proxy that connects before its Gateway exists waits on an empty snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use envoy_types::pb::google::protobuf::Any;
use fairlead_edge_translate::{Encoded, Resources};
use fairlead_key::ObjectKey;
use prost::{Message, Name};
use sha2::Digest;
use tokio::sync::watch;

/// Type URL of clusters.
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Type URL of endpoints.
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// Type URL of TLS secrets.
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
/// Type URL of listeners.
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// Type URL of route configurations.
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// The order pushes follow, so that nothing refers to what the proxy does not have yet:
/// clusters before the endpoints and listeners that use them, secrets before the listeners
/// that use them, listeners before their route configurations.
pub const ORDER: [&str; 5] = [CLUSTER, ENDPOINT, SECRET, LISTENER, ROUTE];

/// Whether a type is requested by wildcard when a state-of-the-world request names nothing.
pub fn wildcard_type(type_url: &str) -> bool {
    type_url == CLUSTER || type_url == LISTENER
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// One resource, packed, with its content hash.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    /// Name.
    pub name: String,
    /// The resource.
    pub any: Any,
    /// SHA-256 of the encoded resource (hex, first 16 bytes).
    pub hash: String,
}

impl Resource {
    /// Packs `message` named `name`.
    pub fn new<M: Message + Name>(name: &str, message: &M) -> Self {
        Self::encoded(
            M::type_url(),
            Encoded {
                name: name.to_owned(),
                bytes: message.encode_to_vec(),
            },
        )
    }

    /// Packs a resource the translator encoded, of type `type_url`.
    pub fn encoded(type_url: String, resource: Encoded) -> Self {
        let hash = hex(&sha2::Sha256::digest(&resource.bytes)[..16]);
        Self {
            name: resource.name,
            any: Any {
                type_url,
                value: resource.bytes,
            },
            hash,
        }
    }
}

/// Everything one node group gets.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    resources: BTreeMap<&'static str, BTreeMap<String, Arc<Resource>>>,
    versions: BTreeMap<&'static str, String>,
    /// When the cache published it (push latency is measured from here).
    published: Option<std::time::Instant>,
}

/// Snapshots are equal when their content is: the versions are content hashes.
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.versions == other.versions
    }
}

impl Snapshot {
    /// A snapshot of a Gateway's translated resources.
    pub fn new(source: Resources) -> Self {
        Self::after(source, &Self::default())
    }

    /// A snapshot of a Gateway's translated resources, taking from `previous` (the Gateway's
    /// last snapshot) every resource whose bytes are the same, hash included: a change
    /// hashes only what it changed.
    pub fn after(source: Resources, previous: &Snapshot) -> Self {
        let mut resources: BTreeMap<&'static str, BTreeMap<String, Arc<Resource>>> =
            BTreeMap::new();
        for (type_url, list) in [
            (CLUSTER, source.clusters),
            (ENDPOINT, source.endpoints),
            (SECRET, source.secrets),
            (LISTENER, source.listeners),
            (ROUTE, source.routes),
        ] {
            let before = previous.resources.get(type_url);
            let of_type = resources.entry(type_url).or_default();
            for r in list {
                let same = before
                    .and_then(|b| b.get(&r.name))
                    .filter(|old| old.any.value == r.bytes);
                let r = match same {
                    Some(old) => old.clone(),
                    None => Arc::new(Resource::encoded(type_url.to_owned(), r)),
                };
                of_type.insert(r.name.clone(), r);
            }
        }
        let versions = ORDER
            .iter()
            .map(|t| {
                let mut digest = sha2::Sha256::new();
                for (name, r) in resources.get(t).into_iter().flatten() {
                    digest.update(name.as_bytes());
                    digest.update([0]);
                    digest.update(r.hash.as_bytes());
                }
                (*t, hex(&digest.finalize()[..8]))
            })
            .collect();
        Self {
            resources,
            versions,
            published: None,
        }
    }

    /// When the cache published this snapshot.
    pub fn published(&self) -> Option<std::time::Instant> {
        self.published
    }

    /// How many resources of each type it holds.
    pub fn sizes(&self) -> Vec<(&'static str, usize)> {
        ORDER
            .iter()
            .map(|t| (*t, self.resources.get(t).map_or(0, BTreeMap::len)))
            .collect()
    }

    /// The version of a type (the same for the same content).
    pub fn version(&self, type_url: &str) -> String {
        self.versions.get(type_url).cloned().unwrap_or_default()
    }

    /// All resources of a type.
    pub fn all(&self, type_url: &str) -> Vec<Arc<Resource>> {
        self.resources
            .get(type_url)
            .into_iter()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// One resource. A listener named `host:port` that the snapshot does not hold is made
    /// for proxyless gRPC clients (an API listener over the route configuration of that
    /// port), when the Gateway serves plain HTTP on the port, and so are the route
    /// configuration shaped for gRPC that it names and the cluster (with its endpoints) that
    /// fails RPCs ([`fairlead_edge_translate::proxyless`]).
    pub fn get(&self, type_url: &str, name: &str) -> Option<Arc<Resource>> {
        if let Some(r) = self.resources.get(type_url).and_then(|m| m.get(name)) {
            return Some(r.clone());
        }
        use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
        use fairlead_edge_translate::proxyless;
        let routes = self.resources.get(ROUTE);
        match type_url {
            LISTENER => {
                let listener =
                    proxyless::api_listener(name, |n| routes.is_some_and(|r| r.contains_key(n)))?;
                Some(Arc::new(Resource::new(name, &listener)))
            }
            ROUTE => {
                // Derived from the Gateway's own configuration, decoded only when a proxyless
                // client asks.
                let shaped = proxyless::grpc_route_configuration(name, |base| {
                    RouteConfiguration::decode(routes?.get(base)?.any.value.as_slice()).ok()
                })?;
                Some(Arc::new(Resource::new(name, &shaped)))
            }
            CLUSTER if name == proxyless::UNAVAILABLE => Some(Arc::new(Resource::new(
                name,
                &proxyless::unavailable_cluster(),
            ))),
            ENDPOINT if name == proxyless::UNAVAILABLE => Some(Arc::new(Resource::new(
                name,
                &proxyless::unavailable_endpoints(),
            ))),
            _ => None,
        }
    }

    /// The resources of a type a request asks for: all of them for a wildcard, else the named
    /// ones that exist.
    pub fn select(&self, type_url: &str, names: Option<&BTreeSet<String>>) -> Vec<Arc<Resource>> {
        match names {
            None => self.all(type_url),
            Some(names) => names.iter().filter_map(|n| self.get(type_url, n)).collect(),
        }
    }
}

/// Snapshots by node group.
#[derive(Default)]
pub struct Cache {
    groups: RwLock<HashMap<ObjectKey, watch::Sender<Arc<Snapshot>>>>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn sender(&self, group: &ObjectKey) -> watch::Sender<Arc<Snapshot>> {
        if let Some(s) = self
            .groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(group)
        {
            return s.clone();
        }
        self.groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(group.clone())
            .or_insert_with(|| watch::channel(Arc::new(Snapshot::default())).0)
            .clone()
    }

    /// Publishes a group's snapshot; returns whether it differs from the last one (an equal
    /// snapshot wakes nobody).
    pub fn set(&self, group: &ObjectKey, mut snapshot: Snapshot) -> bool {
        self.sender(group).send_if_modified(|current| {
            if **current == snapshot {
                false
            } else {
                snapshot.published = Some(std::time::Instant::now());
                *current = Arc::new(snapshot);
                true
            }
        })
    }

    /// Empties the groups not in `keep` (their Gateways are gone).
    pub fn retain(&self, keep: &BTreeSet<ObjectKey>) {
        let groups: Vec<ObjectKey> = self
            .groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .filter(|g| !keep.contains(*g))
            .cloned()
            .collect();
        for g in groups {
            self.set(&g, Snapshot::default());
        }
    }

    /// Follows a group's snapshots.
    pub fn subscribe(&self, group: &ObjectKey) -> watch::Receiver<Arc<Snapshot>> {
        self.sender(group).subscribe()
    }

    /// The current snapshot of a group.
    pub fn get(&self, group: &ObjectKey) -> Arc<Snapshot> {
        self.sender(group).borrow().clone()
    }
}

/// The short name of a type URL, for labels.
pub fn short(type_url: &str) -> &'static str {
    match type_url {
        CLUSTER => "cluster",
        ENDPOINT => "endpoint",
        SECRET => "secret",
        LISTENER => "listener",
        ROUTE => "route",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(routes: &[(&str, &[u8])]) -> Resources {
        Resources {
            routes: routes
                .iter()
                .map(|(name, bytes)| Encoded {
                    name: (*name).to_owned(),
                    bytes: bytes.to_vec(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_snapshot_after_another_takes_its_unchanged_resources_and_is_the_same_snapshot() {
        let first = Snapshot::new(resources(&[("a", b"1"), ("b", b"2")]));
        let next = resources(&[("a", b"1"), ("b", b"3")]);
        let after = Snapshot::after(next.clone(), &first);
        let fresh = Snapshot::new(next);
        assert!(Arc::ptr_eq(
            &after.get(ROUTE, "a").expect("a"),
            &first.get(ROUTE, "a").expect("a")
        ));
        let b = after.get(ROUTE, "b").expect("b");
        assert_eq!(b.any.value, b"3");
        assert_eq!(*b, *fresh.get(ROUTE, "b").expect("b"));
        assert_eq!(after.version(ROUTE), fresh.version(ROUTE));
        assert_ne!(after.version(ROUTE), first.version(ROUTE));
    }
}
