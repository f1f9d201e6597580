//! What one rendering keeps for the next, so that a change costs in proportion to what it
//! touches: the encoding of each Envoy route (reused while its entry is the same: an unchanged
//! route keeps its translated entries, see `fairlead_edge_translate::memo`), and the encoded
//! cluster and endpoints of each backend (while its TLS and its EndpointSlices are the same).
//! Only work is saved: a memo never changes the output, which the tests check by rendering the
//! same inputs with and without one.
//!
//! The memo sits at the boundary IR → encoded resources; the renderers know nothing of it:
//! they ask a [`Recall`], which a [`crate::Pipeline`]'s memo answers from its last rendering
//! and [`Forget`] (a one-off) by making the value.

use std::sync::Arc;

use fairlead_edge_model::input::same;
use fairlead_edge_translate::backend::Backend;
use fairlead_edge_translate::backend_tls::UpstreamTls;
use fairlead_edge_translate::http::Entry;
use fairlead_edge_translate::ir::{Cluster, Drained, Origin, Route};
use fairlead_edge_translate::memo::Generations;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// What the render stage's boundary asks of a memory.
pub(crate) trait Recall {
    /// Gives `write` the encoding of the Envoy route of `route` at `origin`.
    fn encoded_route(
        &mut self,
        route: &Route,
        origin: Origin,
        make: impl FnOnce() -> Vec<u8>,
        write: impl FnOnce(&[u8]),
    );

    /// The encoding of the cluster `c`.
    fn cluster(&mut self, c: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8>;

    /// The encoding of the endpoint assignment of `c`.
    fn endpoints(&mut self, c: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8>;
}

/// No memory: every value is made for its one use.
pub(crate) struct Forget;

impl Recall for Forget {
    fn encoded_route(
        &mut self,
        _: &Route,
        _: Origin,
        make: impl FnOnce() -> Vec<u8>,
        write: impl FnOnce(&[u8]),
    ) {
        write(&make());
    }

    fn cluster(&mut self, _: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        make()
    }

    fn endpoints(&mut self, _: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        make()
    }
}

/// Encoded Envoy routes by entry (its address: the value holds the entry, so the address
/// stays its own) and origin. A route translated again has new entries, which are encoded
/// again; an unchanged route keeps its entries and their encodings.
type EncodedRoutes = Generations<(usize, Origin, Drained), (Arc<Entry>, Vec<u8>)>;

/// Encoded clusters by backend, with the TLS each was made with and (ring hash) how many
/// endpoints its ring was sized for.
type EncodedClusters = Generations<Backend, ((Option<UpstreamTls>, Option<usize>), Vec<u8>)>;

/// Encoded endpoint assignments by backend, with the EndpointSlices each was made from
/// (`None`: failing closed, no endpoints).
type EncodedEndpoints = Generations<Backend, (Option<Vec<Arc<EndpointSlice>>>, Vec<u8>)>;

/// The memo of one [`crate::Pipeline`]'s render stage.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Encoded Envoy routes by entry and origin.
    encoded: EncodedRoutes,
    /// Encoded clusters.
    clusters: EncodedClusters,
    /// Encoded endpoint assignments.
    endpoints: EncodedEndpoints,
}

impl Recall for Memo {
    fn encoded_route(
        &mut self,
        route: &Route,
        origin: Origin,
        make: impl FnOnce() -> Vec<u8>,
        write: impl FnOnce(&[u8]),
    ) {
        let (_, bytes) = self.encoded.get_or_make(
            (Arc::as_ptr(&route.entry) as usize, origin, route.drained),
            |(old, _)| Arc::ptr_eq(old, &route.entry),
            || (route.entry.clone(), make()),
        );
        write(bytes);
    }

    fn cluster(&mut self, c: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        let ring = crate::upstream::ring_endpoints(c);
        let (_, bytes) = self.clusters.get_or_make(
            c.backend.clone(),
            |((tls, sized_for), _)| *tls == c.tls && *sized_for == ring,
            || ((c.tls.clone(), ring), make()),
        );
        bytes.clone()
    }

    fn endpoints(&mut self, c: &Cluster, make: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        let (_, bytes) = self.endpoints.get_or_make(
            c.backend.clone(),
            |(made_from, _)| match (made_from, &c.endpoints) {
                (Some(a), Some(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
                }
                (None, None) => true,
                _ => false,
            },
            || (c.endpoints.clone(), make()),
        );
        bytes.clone()
    }
}

impl Memo {
    /// Ends a rendering of every Gateway: what it used is what the next may reuse.
    pub(crate) fn finish(&mut self) {
        self.encoded.next();
        self.clusters.next();
        self.endpoints.next();
    }
}
