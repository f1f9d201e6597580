//! What the render stage hands the xDS server: one Gateway's Envoy resources, already
//! encoded. The server treats them as opaque bytes with a name; it hashes and serves them as
//! they are.

use fairlead_edge_api::geoip::Edition;

/// One Envoy resource in its wire form: the renderer encodes each resource as it builds it,
/// so a translation never holds the (large) decoded messages of a whole Gateway, and the
/// snapshot hashes and serves the bytes as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    /// The resource's name.
    pub name: String,
    /// The encoded message.
    pub bytes: Vec<u8>,
}

impl Encoded {
    /// Encodes `message` named `name`.
    pub fn new<M: prost::Message>(name: impl Into<String>, message: &M) -> Self {
        Self {
            name: name.into(),
            bytes: message.encode_to_vec(),
        }
    }

    /// The message back (for tests, and for the rare resource derived from another).
    pub fn decode<M: prost::Message + Default>(&self) -> Result<M, prost::DecodeError> {
        M::decode(self.bytes.as_slice())
    }
}

/// The Envoy resources of one Gateway (one xDS snapshot), encoded: `Listener`s,
/// `RouteConfiguration`s, `Cluster`s, `ClusterLoadAssignment`s and TLS `Secret`s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resources {
    /// Listeners.
    pub listeners: Vec<Encoded>,
    /// Route configurations.
    pub routes: Vec<Encoded>,
    /// Clusters.
    pub clusters: Vec<Encoded>,
    /// Endpoints (one assignment per cluster).
    pub endpoints: Vec<Encoded>,
    /// TLS secrets.
    pub secrets: Vec<Encoded>,
    /// When the listeners carry Envoy's GeoIP filter: what proxies lacking its databases
    /// are served instead.
    pub without_geoip: Option<WithoutGeoip>,
}

/// The listeners of a Gateway whose instance asks for GeoIP headers, as served to a proxy
/// that does not hold every database the filter opens (Envoy refuses a listener whose
/// database file is missing): the same listeners without the filter, still removing
/// client-sent geolocation headers. The other resources are the same for both.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WithoutGeoip {
    /// The editions a proxy must hold to be served [`Resources::listeners`].
    pub editions: Vec<Edition>,
    /// The listeners without the filter.
    pub listeners: Vec<Encoded>,
}

/// What a Gateway's snapshot holds, as a [`Derive`] reads it: the encoded resource of a type
/// (its type URL) and name.
pub trait Held {
    /// The resource `name` of `type_url`, encoded, if the snapshot holds it.
    fn get(&self, type_url: &str, name: &str) -> Option<&[u8]>;
}

/// Resources the xDS server makes when a client asks for one its Gateway's snapshot does not
/// hold, from what the snapshot holds (the shapes of proxyless gRPC clients). The control plane
/// installs one; the server knows nothing of what it makes.
pub trait Derive: Send + Sync {
    /// The resource `name` of `type_url` derived from `held`, or `None` when there is none.
    fn derive(&self, type_url: &str, name: &str, held: &dyn Held) -> Option<Encoded>;
}
