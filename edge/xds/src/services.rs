//! The per-type discovery services (CDS, EDS, LDS, RDS, SDS), for proxies configured with one
//! gRPC stream per type instead of ADS. Each runs the same protocol state as ADS on a stream
//! that carries one type (requests that leave `type_url` empty get the service's), and answers
//! the unary `Fetch*` calls from the current snapshot.

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::cache;
use crate::delta::Delta;
use crate::server::{Ads, serve};
use crate::sotw::Sotw;

/// A request that names its resource type.
trait Typed {
    fn type_url(&mut self) -> &mut String;
}

impl Typed for DiscoveryRequest {
    fn type_url(&mut self) -> &mut String {
        &mut self.type_url
    }
}

impl Typed for DeltaDiscoveryRequest {
    fn type_url(&mut self) -> &mut String {
        &mut self.type_url
    }
}

/// The requests of a per-type stream, with an empty `type_url` read as the service's type.
fn typed<R: Typed + Send + 'static>(
    requests: Streaming<R>,
    type_url: &'static str,
) -> impl futures::Stream<Item = Result<R, Status>> + Unpin + Send + 'static {
    requests.map(move |r| {
        r.map(|mut r| {
            if r.type_url().is_empty() {
                *r.type_url() = type_url.to_owned();
            }
            r
        })
    })
}

impl Ads {
    fn stream_of(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
        type_url: &'static str,
    ) -> ReceiverStream<Result<DiscoveryResponse, Status>> {
        let (tx, rx) = mpsc::channel(16);
        let peer = request.extensions().get::<crate::tls::Peer>().cloned();
        let requests = request.into_inner();
        tokio::spawn(serve(
            Sotw::new(),
            self.cache.clone(),
            self.observer.clone(),
            self.closing.clone(),
            peer,
            typed(requests, type_url),
            tx,
        ));
        ReceiverStream::new(rx)
    }

    fn delta_of(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
        type_url: &'static str,
    ) -> ReceiverStream<Result<DeltaDiscoveryResponse, Status>> {
        let (tx, rx) = mpsc::channel(16);
        let peer = request.extensions().get::<crate::tls::Peer>().cloned();
        let requests = request.into_inner();
        tokio::spawn(serve(
            Delta::new(),
            self.cache.clone(),
            self.observer.clone(),
            self.closing.clone(),
            peer,
            typed(requests, type_url),
            tx,
        ));
        ReceiverStream::new(rx)
    }

    /// A unary fetch: what a first state-of-the-world request would receive.
    fn fetch_of(
        &self,
        request: Request<DiscoveryRequest>,
        type_url: &'static str,
    ) -> Result<DiscoveryResponse, Status> {
        let peer = request.extensions().get::<crate::tls::Peer>().cloned();
        let mut request = request.into_inner();
        let group = crate::node::group(request.node.as_ref())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        crate::tls::authorize(peer.as_ref(), &group).map_err(Status::permission_denied)?;
        if !self.cache.is_complete() {
            return Err(Status::unavailable(
                "the control plane has not translated the cluster yet",
            ));
        }
        request.type_url = type_url.to_owned();
        request.response_nonce.clear();
        let snapshot = crate::cache::Tailor::new(
            crate::node::geoip_editions(request.node.as_ref()),
            crate::node::pod_address(request.node.as_ref()),
        )
        .fit(&self.cache.get(&group));
        let (response, _) = Sotw::new().on_request(&request, &snapshot);
        response.ok_or_else(|| Status::internal("no response for a first request"))
    }
}

/// Implements one per-type discovery service on [`Ads`].
macro_rules! per_type {
    ($module:ident, $server_mod:ident, $trait:ident, $type_url:expr,
     $stream:ident, $stream_ty:ident, $delta:ident, $delta_ty:ident, $fetch:ident) => {
        #[tonic::async_trait]
        impl envoy_types::pb::envoy::service::$module::v3::$server_mod::$trait for Ads {
            type $stream_ty = ReceiverStream<Result<DiscoveryResponse, Status>>;
            type $delta_ty = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;

            async fn $stream(
                &self,
                request: Request<Streaming<DiscoveryRequest>>,
            ) -> Result<Response<Self::$stream_ty>, Status> {
                Ok(Response::new(self.stream_of(request, $type_url)))
            }

            async fn $delta(
                &self,
                request: Request<Streaming<DeltaDiscoveryRequest>>,
            ) -> Result<Response<Self::$delta_ty>, Status> {
                Ok(Response::new(self.delta_of(request, $type_url)))
            }

            async fn $fetch(
                &self,
                request: Request<DiscoveryRequest>,
            ) -> Result<Response<DiscoveryResponse>, Status> {
                self.fetch_of(request, $type_url).map(Response::new)
            }
        }
    };
}

mod impls {
    use super::*;

    per_type!(
        cluster,
        cluster_discovery_service_server,
        ClusterDiscoveryService,
        cache::CLUSTER,
        stream_clusters,
        StreamClustersStream,
        delta_clusters,
        DeltaClustersStream,
        fetch_clusters
    );
    per_type!(
        endpoint,
        endpoint_discovery_service_server,
        EndpointDiscoveryService,
        cache::ENDPOINT,
        stream_endpoints,
        StreamEndpointsStream,
        delta_endpoints,
        DeltaEndpointsStream,
        fetch_endpoints
    );
    per_type!(
        listener,
        listener_discovery_service_server,
        ListenerDiscoveryService,
        cache::LISTENER,
        stream_listeners,
        StreamListenersStream,
        delta_listeners,
        DeltaListenersStream,
        fetch_listeners
    );
    per_type!(
        route,
        route_discovery_service_server,
        RouteDiscoveryService,
        cache::ROUTE,
        stream_routes,
        StreamRoutesStream,
        delta_routes,
        DeltaRoutesStream,
        fetch_routes
    );
    per_type!(
        secret,
        secret_discovery_service_server,
        SecretDiscoveryService,
        cache::SECRET,
        stream_secrets,
        StreamSecretsStream,
        delta_secrets,
        DeltaSecretsStream,
        fetch_secrets
    );
}

/// Every discovery service on one router: ADS and the per-type services.
pub fn routes(ads: Ads) -> tonic::service::Routes {
    use envoy_types::pb::envoy::service as svc;
    tonic::service::Routes::new(ads.clone().into_service())
        .add_service(svc::cluster::v3::cluster_discovery_service_server::ClusterDiscoveryServiceServer::new(ads.clone()))
        .add_service(svc::endpoint::v3::endpoint_discovery_service_server::EndpointDiscoveryServiceServer::new(ads.clone()))
        .add_service(svc::listener::v3::listener_discovery_service_server::ListenerDiscoveryServiceServer::new(ads.clone()))
        .add_service(svc::route::v3::route_discovery_service_server::RouteDiscoveryServiceServer::new(ads.clone()))
        .add_service(svc::secret::v3::secret_discovery_service_server::SecretDiscoveryServiceServer::new(ads))
}
