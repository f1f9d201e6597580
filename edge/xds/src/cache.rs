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
//!
//! A Gateway whose instance asks for GeoIP headers has listeners in two forms, and so its
//! snapshot carries a second one inside ([`Snapshot::for_node`]): the same resources with
//! the listeners without Envoy's GeoIP filter, for proxies that do not say (in their node
//! metadata, [`crate::node::geoip_editions`]) that they hold every database the filter opens
//! — Envoy refuses a listener whose database is missing. The node group stays the Gateway;
//! each stream picks its form once, from its first request.
//!
//! A proxy that listens on an address of its own besides its Gateway's (its pod's, in its
//! node metadata, [`crate::node::pod_address`]) gets its listeners with that address added
//! ([`Snapshot::also_on`]); the rest of what it is served is the Gateway's.
//!
//! Resources are opaque, already encoded bytes with a name. What is made per request (the
//! shapes of proxyless gRPC clients) comes from a [`Derive`] hook the control plane installs
//! ([`Cache::with_derive`]); the cache knows nothing of what it makes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use envoy_types::pb::google::protobuf::Any;
use fairlead_edge_model::resources::{Derive, Encoded, Held, Resources};
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

/// Resources by type URL, then name.
type ByType = BTreeMap<&'static str, BTreeMap<String, Arc<Resource>>>;

/// What a [`Derive`] reads of a snapshot: its resources' bytes.
struct HeldBy<'a>(&'a ByType);

impl Held for HeldBy<'_> {
    fn get(&self, type_url: &str, name: &str) -> Option<&[u8]> {
        self.0
            .get(type_url)
            .and_then(|m| m.get(name))
            .map(|r| r.any.value.as_slice())
    }
}

/// The hook a snapshot asks for resources it does not hold.
#[derive(Clone)]
struct Hook(Arc<dyn Derive>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derive")
    }
}

/// Everything one node group gets.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    resources: ByType,
    versions: BTreeMap<&'static str, String>,
    /// When the cache published it (push latency is measured from here).
    published: Option<std::time::Instant>,
    /// When the listeners carry the GeoIP filter: the editions a proxy must hold for them,
    /// and what proxies that do not hold them get instead.
    without_geoip: Option<(BTreeSet<String>, Arc<Snapshot>)>,
    /// What makes the resources a client asks for that the snapshot does not hold (the
    /// cache's; not part of the content).
    derive: Option<Hook>,
}

/// Snapshots are equal when their content is: the versions are content hashes.
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.versions == other.versions && self.without_geoip == other.without_geoip
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
        let mut resources = ByType::new();
        for (type_url, list) in [
            (CLUSTER, source.clusters),
            (ENDPOINT, source.endpoints),
            (SECRET, source.secrets),
            (LISTENER, source.listeners),
            (ROUTE, source.routes),
        ] {
            resources.insert(type_url, reuse(type_url, list, previous));
        }
        let without_geoip = source.without_geoip.map(|variant| {
            let before = previous
                .without_geoip
                .as_ref()
                .map_or(previous, |(_, s)| s.as_ref());
            let mut other = resources.clone();
            other.insert(LISTENER, reuse(LISTENER, variant.listeners, before));
            let editions = variant.editions.iter().map(|e| e.id().to_owned()).collect();
            (editions, Arc::new(Self::of(other, None)))
        });
        Self::of(resources, without_geoip)
    }

    fn of(resources: ByType, without_geoip: Option<(BTreeSet<String>, Arc<Snapshot>)>) -> Self {
        let versions = ORDER
            .iter()
            .map(|t| (*t, version_of(resources.get(t))))
            .collect();
        Self {
            resources,
            versions,
            published: None,
            without_geoip,
            derive: None,
        }
    }

    /// What a proxy holding the GeoIP databases `held` (edition IDs) gets: this snapshot,
    /// or, when its listeners carry the GeoIP filter and the proxy lacks one of the
    /// filter's databases, the same without the filter.
    pub fn for_node(self: &Arc<Self>, held: &BTreeSet<String>) -> Arc<Snapshot> {
        match &self.without_geoip {
            Some((needed, without)) if !needed.is_subset(held) => without.clone(),
            _ => self.clone(),
        }
    }

    /// This snapshot for a proxy that also listens on `address` (its pod's,
    /// [`crate::node::POD_ADDRESS`]): each listener bound to a specific address other than
    /// `address` also binds `address`, on the same port and protocol (an additional
    /// address); a listener on every address already does.
    pub fn also_on(&self, address: std::net::IpAddr) -> Snapshot {
        let mut resources = self.resources.clone();
        if let Some(listeners) = resources.get_mut(LISTENER) {
            for listener in listeners.values_mut() {
                if let Some(changed) = listening_also_on(listener, address) {
                    *listener = Arc::new(changed);
                }
            }
        }
        // Only the listeners' version changes: the others are taken as they are.
        let mut versions = self.versions.clone();
        versions.insert(LISTENER, version_of(resources.get(LISTENER)));
        Snapshot {
            resources,
            versions,
            published: self.published,
            without_geoip: None,
            derive: self.derive.clone(),
        }
    }

    /// The databases of this snapshot's GeoIP filter a proxy holding `held` lacks (none
    /// when it holds them all or the snapshot has no such filter): what
    /// [`Snapshot::for_node`] serves it without.
    pub fn lacking(&self, held: &BTreeSet<String>) -> BTreeSet<String> {
        match &self.without_geoip {
            Some((needed, _)) => needed.difference(held).cloned().collect(),
            None => BTreeSet::new(),
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

    /// One resource: one the snapshot holds, or else one its cache's [`Derive`] makes from
    /// what it holds (a proxyless gRPC client's listener named `host:port`, say).
    pub fn get(&self, type_url: &str, name: &str) -> Option<Arc<Resource>> {
        if let Some(r) = self.resources.get(type_url).and_then(|m| m.get(name)) {
            return Some(r.clone());
        }
        let made = self
            .derive
            .as_ref()?
            .0
            .derive(type_url, name, &HeldBy(&self.resources))?;
        Some(Arc::new(Resource::encoded(type_url.to_owned(), made)))
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

/// What one proxy is served of its Gateway's snapshots: the form the GeoIP databases it
/// holds allow ([`Snapshot::for_node`]), its listeners also on its own address when it has
/// one ([`Snapshot::also_on`]). The last one made is kept: a stream asks for the same
/// snapshot again at every request.
#[derive(Debug, Default)]
pub struct Tailor {
    /// The GeoIP editions the proxy holds.
    pub held: BTreeSet<String>,
    /// The address of its own it also listens on.
    pub pod: Option<std::net::IpAddr>,
    last: Option<(Arc<Snapshot>, Arc<Snapshot>)>,
}

impl Tailor {
    /// The tailor of a proxy holding `held` and listening on `pod` too.
    pub fn new(held: BTreeSet<String>, pod: Option<std::net::IpAddr>) -> Self {
        Self {
            held,
            pod,
            last: None,
        }
    }

    /// What the proxy gets of `snapshot`.
    pub fn fit(&mut self, snapshot: &Arc<Snapshot>) -> Arc<Snapshot> {
        let form = snapshot.for_node(&self.held);
        let Some(pod) = self.pod else {
            return form;
        };
        match &self.last {
            Some((from, made)) if Arc::ptr_eq(from, &form) => made.clone(),
            _ => {
                let made = Arc::new(form.also_on(pod));
                self.last = Some((form, made.clone()));
                made
            }
        }
    }
}

/// Snapshots by node group.
pub struct Cache {
    groups: RwLock<HashMap<ObjectKey, watch::Sender<Arc<Snapshot>>>>,
    derive: Option<Hook>,
    progress: Arc<crate::progress::Progress>,
    /// Whether what is published is the world: false until a control plane's first
    /// translation is in ([`Cache::awaiting_first`], [`Cache::first_published`]).
    complete: watch::Sender<bool>,
}

impl Default for Cache {
    fn default() -> Self {
        Self {
            groups: RwLock::default(),
            derive: None,
            progress: Arc::default(),
            complete: watch::Sender::new(true),
        }
    }
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// This cache, serving no stream until [`Cache::first_published`]: a control plane
    /// started again (its proxies still running what it served before) would otherwise
    /// answer their reconnecting streams from empty snapshots before its first translation,
    /// removing every resource they hold.
    pub fn awaiting_first(self) -> Self {
        self.complete.send_replace(false);
        self
    }

    /// The first translation is published: streams are served.
    pub fn first_published(&self) {
        self.complete.send_replace(true);
    }

    /// Whether streams are served ([`Cache::awaiting_first`]).
    pub fn is_complete(&self) -> bool {
        *self.complete.borrow()
    }

    /// Waits until streams are served.
    pub async fn complete(&self) {
        let mut complete = self.complete.subscribe();
        // The sender lives as long as the cache.
        let _ = complete.wait_for(|c| *c).await;
    }

    /// An empty cache whose snapshots ask `derive` for the resources they do not hold.
    pub fn with_derive(derive: Arc<dyn Derive>) -> Self {
        Self {
            derive: Some(Hook(derive)),
            ..Self::default()
        }
    }

    /// An empty snapshot of this cache.
    fn blank(&self) -> Snapshot {
        Snapshot {
            derive: self.derive.clone(),
            ..Snapshot::default()
        }
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
            .or_insert_with(|| watch::channel(Arc::new(self.blank())).0)
            .clone()
    }

    /// Publishes a group's snapshot; returns whether it differs from the last one (an equal
    /// snapshot wakes nobody).
    pub fn set(&self, group: &ObjectKey, mut snapshot: Snapshot) -> bool {
        self.sender(group).send_if_modified(|current| {
            if **current == snapshot {
                false
            } else {
                let now = Some(std::time::Instant::now());
                snapshot.published = now;
                snapshot.derive.clone_from(&self.derive);
                if let Some((_, without)) = &mut snapshot.without_geoip {
                    let without = Arc::make_mut(without);
                    without.published = now;
                    without.derive.clone_from(&self.derive);
                }
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
            self.set(&g, self.blank());
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

    /// Which subscribers run their group's current snapshot.
    pub fn progress(&self) -> &Arc<crate::progress::Progress> {
        &self.progress
    }
}

/// The resources of `list` (of type `type_url`), taking from `previous` those whose bytes
/// are the same.
fn reuse(
    type_url: &'static str,
    list: Vec<Encoded>,
    previous: &Snapshot,
) -> BTreeMap<String, Arc<Resource>> {
    let before = previous.resources.get(type_url);
    list.into_iter()
        .map(|r| {
            let same = before
                .and_then(|b| b.get(&r.name))
                .filter(|old| old.any.value == r.bytes);
            let r = match same {
                Some(old) => old.clone(),
                None => Arc::new(Resource::encoded(type_url.to_owned(), r)),
            };
            (r.name.clone(), r)
        })
        .collect()
}

/// The version of a type's resources: a digest of their names and hashes.
fn version_of(resources: Option<&BTreeMap<String, Arc<Resource>>>) -> String {
    let mut digest = sha2::Sha256::new();
    for (name, r) in resources.into_iter().flatten() {
        digest.update(name.as_bytes());
        digest.update([0]);
        digest.update(r.hash.as_bytes());
    }
    hex(&digest.finalize()[..8])
}

/// `listener` also bound to `address`, unless it is bound there or to every address already
/// (or is no listener on a socket address). The addition is appended to the encoded
/// listener as its repeated field alone: an encoding followed by another is their merge, so
/// the translator's bytes pass through untouched, fields this crate's protos lack included.
fn listening_also_on(listener: &Resource, address: std::net::IpAddr) -> Option<Resource> {
    use envoy_types::pb::envoy::config::core::v3::{Address, address};
    use envoy_types::pb::envoy::config::listener::v3::{AdditionalAddress, Listener};
    let decoded = Listener::decode(listener.any.value.as_slice()).ok()?;
    let Some(address::Address::SocketAddress(socket)) = decoded.address?.address else {
        return None;
    };
    let bound: std::net::IpAddr = socket.address.parse().ok()?;
    let taken = decoded.additional_addresses.iter().any(|a| {
        matches!(&a.address, Some(Address { address: Some(address::Address::SocketAddress(s)) })
            if s.address.parse() == Ok(address))
    });
    if bound.is_unspecified() || bound == address || taken {
        return None;
    }
    let own = Address {
        address: Some(address::Address::SocketAddress(
            envoy_types::pb::envoy::config::core::v3::SocketAddress {
                address: address.to_string(),
                ..socket
            },
        )),
    };
    let addition = Listener {
        additional_addresses: vec![AdditionalAddress {
            address: Some(own),
            ..AdditionalAddress::default()
        }],
        ..Listener::default()
    };
    let mut bytes = listener.any.value.clone();
    bytes.extend(addition.encode_to_vec());
    Some(Resource::encoded(
        listener.any.type_url.clone(),
        Encoded {
            name: listener.name.clone(),
            bytes,
        },
    ))
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

    /// Makes a route `<name>/copy` from the route `<name>` the snapshot holds.
    struct Copies;

    impl Derive for Copies {
        fn derive(&self, type_url: &str, name: &str, held: &dyn Held) -> Option<Encoded> {
            let base = name.strip_suffix("/copy")?;
            let bytes = held.get(type_url, base)?;
            Some(Encoded {
                name: name.to_owned(),
                bytes: [bytes, b"+"].concat(),
            })
        }
    }

    #[test]
    fn what_a_snapshot_does_not_hold_comes_from_its_caches_hook() {
        let gw = ObjectKey::new("default", "gw");
        let plain = Cache::new();
        plain.set(&gw, Snapshot::new(resources(&[("a", b"1")])));
        assert!(
            plain.get(&gw).get(ROUTE, "a/copy").is_none(),
            "no hook, nothing made"
        );
        let hooked = Cache::with_derive(Arc::new(Copies));
        assert!(
            hooked.get(&gw).get(ROUTE, "a/copy").is_none(),
            "an empty snapshot holds nothing to make it from"
        );
        hooked.set(&gw, Snapshot::new(resources(&[("a", b"1")])));
        let snapshot = hooked.get(&gw);
        let made = snapshot.get(ROUTE, "a/copy").expect("made by the hook");
        assert_eq!(made.any.value, b"1+");
        assert_eq!(made.any.type_url, ROUTE);
        assert_eq!(made.name, "a/copy");
        assert_eq!(
            snapshot
                .select(
                    ROUTE,
                    Some(&BTreeSet::from(["a/copy".to_owned(), "b/copy".to_owned()]))
                )
                .len(),
            1,
            "only what the hook can make"
        );
        assert_eq!(
            *snapshot,
            Snapshot::new(resources(&[("a", b"1")])),
            "the hook is not part of the content"
        );
    }

    fn encoded(name: &str, bytes: &[u8]) -> Encoded {
        Encoded {
            name: name.to_owned(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn a_proxy_lacking_a_geoip_database_gets_the_listeners_without_the_filter() {
        use fairlead_edge_api::geoip::Edition;
        let source = |filtered: &[u8]| Resources {
            listeners: vec![encoded("http-80", filtered)],
            clusters: vec![encoded("default/web/80", b"c")],
            without_geoip: Some(fairlead_edge_model::WithoutGeoip {
                editions: vec![Edition::City, Edition::LiteAsn],
                listeners: vec![encoded("http-80", b"plain")],
            }),
            ..Default::default()
        };
        let snapshot = Arc::new(Snapshot::new(source(b"geoip")));
        let held = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect();
        let full = snapshot.for_node(&held(&["GeoIP2-City", "GeoLite2-ASN", "GeoIP2-ISP"]));
        assert!(
            Arc::ptr_eq(&full, &snapshot),
            "a proxy holding every database"
        );
        assert!(
            snapshot
                .lacking(&held(&["GeoIP2-City", "GeoLite2-ASN"]))
                .is_empty()
        );
        assert_eq!(
            snapshot.lacking(&held(&["GeoIP2-City"])),
            held(&["GeoLite2-ASN"])
        );
        for lacking in [held(&["GeoIP2-City"]), held(&[])] {
            let without = snapshot.for_node(&lacking);
            assert_eq!(
                without.get(LISTENER, "http-80").unwrap().any.value,
                b"plain"
            );
            assert!(
                Arc::ptr_eq(
                    &without.get(CLUSTER, "default/web/80").unwrap(),
                    &snapshot.get(CLUSTER, "default/web/80").unwrap()
                ),
                "the other resources are shared"
            );
            assert_ne!(without.version(LISTENER), snapshot.version(LISTENER));
            assert_eq!(without.version(CLUSTER), snapshot.version(CLUSTER));
        }
        // A change to the listeners without the filter alone is a new snapshot.
        let mut changed = source(b"geoip");
        changed.without_geoip.as_mut().unwrap().listeners = vec![encoded("http-80", b"other")];
        let changed = Snapshot::after(changed, &snapshot);
        assert!(changed != *snapshot);
        assert!(Snapshot::after(source(b"geoip"), &snapshot) == *snapshot);
        // A Gateway without GeoIP serves everyone the same.
        let plain = Arc::new(Snapshot::new(Resources {
            listeners: vec![encoded("http-80", b"plain")],
            ..Default::default()
        }));
        assert!(Arc::ptr_eq(&plain.for_node(&held(&[])), &plain));
    }

    #[test]
    fn a_proxy_with_an_address_of_its_own_gets_its_listeners_bound_there_too() {
        use envoy_types::pb::envoy::config::core::v3::{
            Address, SocketAddress, address, socket_address,
        };
        use envoy_types::pb::envoy::config::listener::v3::Listener;
        let on = |ip: &str, port: u32| Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: ip.into(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
                ..Default::default()
            })),
        };
        let listener = |name: &str, ip: &str, port: u32| Encoded {
            name: name.into(),
            bytes: Listener {
                name: name.into(),
                address: Some(on(ip, port)),
                stat_prefix: name.into(),
                ..Default::default()
            }
            .encode_to_vec(),
        };
        let snapshot = Snapshot::new(Resources {
            listeners: vec![
                listener("http", "127.0.1.1", 80),
                listener("any", "0.0.0.0", 81),
                listener("own", "127.0.3.7", 82),
            ],
            ..resources(&[("r", b"1")])
        });
        let pod: std::net::IpAddr = [127, 0, 3, 7].into();
        let mine = snapshot.also_on(pod);
        let decoded = |name: &str| {
            Listener::decode(mine.get(LISTENER, name).expect(name).any.value.as_slice())
                .expect("a listener")
        };
        let http = decoded("http");
        assert_eq!(
            http.address,
            Some(on("127.0.1.1", 80)),
            "still on the Gateway's"
        );
        assert_eq!(http.stat_prefix, "http", "the rest is untouched");
        let added: Vec<_> = http
            .additional_addresses
            .iter()
            .map(|a| a.address.clone())
            .collect();
        assert_eq!(added, [Some(on("127.0.3.7", 80))]);
        assert!(
            decoded("any").additional_addresses.is_empty(),
            "every address has it"
        );
        assert!(
            decoded("own").additional_addresses.is_empty(),
            "already there"
        );
        assert_ne!(mine.version(LISTENER), snapshot.version(LISTENER));
        assert_eq!(mine.version(ROUTE), snapshot.version(ROUTE));
        assert_eq!(
            mine.also_on(pod).version(LISTENER),
            mine.version(LISTENER),
            "added once"
        );
    }
}
