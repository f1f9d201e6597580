//! What the first stage after the model yields: every route object translated into its rules
//! (HTTP and gRPC entries, or a stream route's forwarding), with the first reference that
//! did not resolve or why the route is rejected — what `attach` places on listeners and the
//! memo keeps between translations.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::http;
use fairlead_edge_model::input::{GrpcRoute, HttpRoute, ParentRef, StreamRoute};

/// What a route translated into.
#[derive(Debug)]
pub(crate) enum Content {
    /// HTTP route entries (HTTPRoute, GRPCRoute).
    Http(Vec<Arc<http::Entry>>),
    /// A stream route (TLSRoute, TCPRoute, UDPRoute).
    Stream(Arc<crate::stream::Entry>),
}

/// What translating a route gives: its content and the first reference that did not
/// resolve, or why the route is rejected.
pub(crate) type Outcome = Result<(Content, Option<crate::backend::Unresolved>), http::Rejected>;

/// The route object an outcome came from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// An HTTPRoute.
    Http(Arc<HttpRoute>),
    /// A GRPCRoute.
    Grpc(Arc<GrpcRoute>),
    /// A TLSRoute, TCPRoute or UDPRoute.
    Stream(Arc<StreamRoute>),
}

impl Source {
    /// The same route object, or an equal one.
    pub(crate) fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Http(a), Self::Http(b)) => fairlead_edge_model::input::same(a, b),
            (Self::Grpc(a), Self::Grpc(b)) => fairlead_edge_model::input::same(a, b),
            (Self::Stream(a), Self::Stream(b)) => fairlead_edge_model::input::same(a, b),
            _ => false,
        }
    }
}

/// A route's outcome as the memo keeps it, with the object it came from.
#[derive(Debug)]
pub(crate) struct Translated {
    /// The route object.
    pub(crate) source: Source,
    /// Its translation.
    pub(crate) outcome: Arc<Outcome>,
}

/// A route of any kind, translated.
pub(crate) struct RouteView<'a> {
    pub(crate) kind: &'static str,
    pub(crate) metadata: &'a ObjectMeta,
    pub(crate) parent_refs: &'a [ParentRef],
    pub(crate) hostnames: &'a [String],
    pub(crate) translated: Arc<Outcome>,
}
