//! The gRPC side: Aggregated Discovery Service in both variants. Each stream runs as one task
//! that owns its protocol state ([`crate::sotw::Sotw`] or [`crate::delta::Delta`]) and waits
//! on the client's requests and on its node group's snapshots; responses go out through a
//! bounded channel, so a slow client slows only its own stream.

use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::cache::{Cache, Snapshot};
use crate::delta::Delta;
use crate::sotw::{Sotw, Verdict};
use fairlead_key::ObjectKey;

/// What the server reports as streams come, go, push and hear back (metrics, Events).
pub trait Observer: Send + Sync + 'static {
    /// A proxy of `group` connected.
    fn connected(&self, _group: &ObjectKey) {}
    /// A proxy of `group` went away.
    fn disconnected(&self, _group: &ObjectKey) {}
    /// A response of `type_url` went to a proxy of `group`; `latency` is the time since the
    /// snapshot was published, for pushes the proxy did not ask for.
    fn pushed(
        &self,
        _group: &ObjectKey,
        _type_url: &str,
        _resources: usize,
        _latency: Option<std::time::Duration>,
    ) {
    }
    /// A proxy of `group` answered a response.
    fn verdict(&self, _group: &ObjectKey, _verdict: &Verdict) {}
    /// A stream asking for `group` was refused: its client certificate names another
    /// Gateway.
    fn refused(&self, _group: &ObjectKey, _reason: &str) {}
    /// A proxy of `group` started (`true`) or stopped (`false`) being served its Gateway's
    /// listeners without the GeoIP filter, lacking one of the filter's databases.
    fn without_geoip(&self, _group: &ObjectKey, _without: bool) {}
}

/// An observer that reports nothing.
pub struct Quiet;

impl Observer for Quiet {}

/// Several observers, each told everything.
pub struct Observers(pub Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn connected(&self, group: &ObjectKey) {
        self.0.iter().for_each(|o| o.connected(group));
    }
    fn disconnected(&self, group: &ObjectKey) {
        self.0.iter().for_each(|o| o.disconnected(group));
    }
    fn pushed(
        &self,
        group: &ObjectKey,
        type_url: &str,
        resources: usize,
        latency: Option<std::time::Duration>,
    ) {
        self.0
            .iter()
            .for_each(|o| o.pushed(group, type_url, resources, latency));
    }
    fn verdict(&self, group: &ObjectKey, verdict: &Verdict) {
        self.0.iter().for_each(|o| o.verdict(group, verdict));
    }
    fn refused(&self, group: &ObjectKey, reason: &str) {
        self.0.iter().for_each(|o| o.refused(group, reason));
    }
    fn without_geoip(&self, group: &ObjectKey, without: bool) {
        self.0.iter().for_each(|o| o.without_geoip(group, without));
    }
}

/// A proxy's rejection of a configuration, for the Gateway's Events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// `namespace/gateway`.
    pub group: ObjectKey,
    /// The rejected version's type (short name).
    pub type_name: &'static str,
    /// The version.
    pub version: String,
    /// The proxy's reason.
    pub message: String,
}

/// An observer that forwards NACKs (to the loop that turns them into Events).
pub struct NackForwarder(pub mpsc::UnboundedSender<Nack>);

impl Observer for NackForwarder {
    fn verdict(&self, group: &ObjectKey, verdict: &Verdict) {
        if let Verdict::Nack {
            type_url,
            version,
            message,
        } = verdict
        {
            let _ = self.0.send(Nack {
                group: group.clone(),
                type_name: crate::cache::short(type_url),
                version: version.clone(),
                message: message.clone(),
            });
        }
    }
}

/// A verdict as the progress keeps it: the type, and the proxy's reason when it rejected.
fn judged(verdict: &Verdict) -> (&'static str, Option<String>) {
    match verdict {
        Verdict::Ack { type_url, .. } => (crate::cache::short(type_url), None),
        Verdict::Nack {
            type_url, message, ..
        } => (crate::cache::short(type_url), Some(message.clone())),
    }
}

/// The ADS service.
#[derive(Clone)]
pub struct Ads {
    pub(crate) cache: Arc<Cache>,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) closing: CancellationToken,
}

impl Ads {
    /// Serves `cache`, reporting to `observer`.
    pub fn new(cache: Arc<Cache>, observer: Arc<dyn Observer>) -> Self {
        Self {
            cache,
            observer,
            closing: CancellationToken::new(),
        }
    }

    /// Ends every stream (with `UNAVAILABLE`) once `closing` is cancelled: a proxy keeps its
    /// last configuration and reconnects, and the server's graceful shutdown does not wait
    /// for streams that would never end by themselves.
    pub fn closing_on(mut self, closing: CancellationToken) -> Self {
        self.closing = closing;
        self
    }

    /// As a tonic service.
    pub fn into_service(self) -> AggregatedDiscoveryServiceServer<Self> {
        AggregatedDiscoveryServiceServer::new(self)
    }
}

/// A stream's protocol state, either variant.
pub(crate) trait Protocol: Send + 'static {
    type Request: Send + 'static;
    type Response: Send + 'static;
    fn node(request: &Self::Request) -> Option<&envoy_types::pb::envoy::config::core::v3::Node>;
    fn type_url(response: &Self::Response) -> &str;
    fn resources(response: &Self::Response) -> usize;
    fn on_request(
        &mut self,
        request: &Self::Request,
        snapshot: &crate::cache::Snapshot,
    ) -> (Option<Self::Response>, Option<Verdict>);
    fn on_snapshot(&mut self, snapshot: &crate::cache::Snapshot) -> Vec<Self::Response>;
    /// Whether the client runs `snapshot` (the last one handed to the stream).
    fn settled(&self, snapshot: &crate::cache::Snapshot) -> bool;
}

impl Protocol for Sotw {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    fn node(request: &DiscoveryRequest) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        request.node.as_ref()
    }
    fn type_url(response: &DiscoveryResponse) -> &str {
        &response.type_url
    }
    fn resources(response: &DiscoveryResponse) -> usize {
        response.resources.len()
    }
    fn on_request(
        &mut self,
        request: &DiscoveryRequest,
        snapshot: &crate::cache::Snapshot,
    ) -> (Option<DiscoveryResponse>, Option<Verdict>) {
        Sotw::on_request(self, request, snapshot)
    }
    fn on_snapshot(&mut self, snapshot: &crate::cache::Snapshot) -> Vec<DiscoveryResponse> {
        Sotw::on_snapshot(self, snapshot)
    }
    fn settled(&self, snapshot: &crate::cache::Snapshot) -> bool {
        Sotw::settled(self, snapshot)
    }
}

impl Protocol for Delta {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    fn node(
        request: &DeltaDiscoveryRequest,
    ) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        request.node.as_ref()
    }
    fn type_url(response: &DeltaDiscoveryResponse) -> &str {
        &response.type_url
    }
    fn resources(response: &DeltaDiscoveryResponse) -> usize {
        response.resources.len()
    }
    fn on_request(
        &mut self,
        request: &DeltaDiscoveryRequest,
        snapshot: &crate::cache::Snapshot,
    ) -> (Option<DeltaDiscoveryResponse>, Option<Verdict>) {
        Delta::on_request(self, request, snapshot)
    }
    fn on_snapshot(&mut self, snapshot: &crate::cache::Snapshot) -> Vec<DeltaDiscoveryResponse> {
        Delta::on_snapshot(self, snapshot)
    }
    fn settled(&self, _snapshot: &crate::cache::Snapshot) -> bool {
        Delta::settled(self)
    }
}

/// Runs one stream until the client leaves, the response channel closes or `closing` is
/// cancelled. A stream whose client certificate names another Gateway than its node asks
/// for is refused (`PERMISSION_DENIED`, [`crate::tls::authorize`]).
pub(crate) async fn serve<P, S>(
    mut protocol: P,
    cache: Arc<Cache>,
    observer: Arc<dyn Observer>,
    closing: CancellationToken,
    peer: Option<crate::tls::Peer>,
    mut requests: S,
    responses: mpsc::Sender<Result<P::Response, Status>>,
) where
    P: Protocol,
    S: futures::Stream<Item = Result<P::Request, Status>> + Unpin + Send + 'static,
{
    let first = match requests.next().await {
        Some(Ok(request)) => request,
        _ => return,
    };
    let group = match crate::node::group(P::node(&first)) {
        Ok(group) => group,
        Err(e) => {
            let _ = responses
                .send(Err(Status::invalid_argument(e.to_string())))
                .await;
            return;
        }
    };
    if let Err(reason) = crate::tls::authorize(peer.as_ref(), &group) {
        tracing::warn!(gateway = %group, %reason, "xDS stream refused");
        observer.refused(&group, &reason);
        let _ = responses.send(Err(Status::permission_denied(reason))).await;
        return;
    }
    observer.connected(&group);
    // Nothing is answered from the empty snapshots of a control plane that has not
    // translated yet: a reconnecting proxy would drop all it holds.
    cache.complete().await;
    // Whether this proxy runs the group's latest configuration, in the cache's tally.
    let mut progress = cache.progress().open(&group);
    // What this proxy is served of its Gateway's snapshots: the form of a GeoIP Gateway's
    // listeners it can load, its own address added to them ([`crate::cache::Tailor`]).
    let mut tailor = crate::cache::Tailor::new(
        crate::node::geoip_editions(P::node(&first)),
        crate::node::pod_address(P::node(&first)),
    );
    // Whether it is served the form without the filter, reported as it changes.
    let mut without = false;
    let mut form = |snapshot: &Arc<Snapshot>| {
        let lacking = snapshot.lacking(&tailor.held);
        if lacking.is_empty() == without {
            without = !without;
            if without {
                tracing::warn!(gateway = %group, lacking = ?lacking, "a proxy lacks GeoIP databases: it is served its listeners without the GeoIP filter, and requests pass without geolocation headers");
            } else {
                tracing::info!(gateway = %group, "a proxy is served its listeners with the GeoIP filter again");
            }
            observer.without_geoip(&group, without);
        }
        tailor.fit(snapshot)
    };
    let mut snapshots = cache.subscribe(&group);
    let mut pending = Some(first);
    // One span per response: a push after a change (`change = true`, with the time since
    // the snapshot was published) or an answer to a request.
    let send = |response: P::Response, published: Option<std::time::Instant>| {
        use tracing::Instrument as _;
        let since = published.map(|at| at.elapsed());
        observer.pushed(
            &group,
            P::type_url(&response),
            P::resources(&response),
            since,
        );
        let span = tracing::info_span!(
            "xds.push",
            group = %group,
            type_url = P::type_url(&response),
            resources = P::resources(&response),
            change = published.is_some(),
            since_publish_ms = since.map(|d| d.as_secs_f64() * 1000.0),
        );
        responses.send(Ok(response)).instrument(span)
    };
    loop {
        if let Some(request) = pending.take() {
            let snapshot = form(&snapshots.borrow_and_update());
            let (response, verdict) = protocol.on_request(&request, &snapshot);
            progress.set(protocol.settled(&snapshot));
            if let Some(verdict) = verdict {
                let (type_name, rejected) = judged(&verdict);
                progress.verdict(type_name, rejected);
                if let Verdict::Nack {
                    type_url,
                    version,
                    message,
                } = &verdict
                {
                    tracing::warn!(group = %group, type_url = %type_url, version = %version, reason = %message, "proxy rejected configuration");
                }
                observer.verdict(&group, &verdict);
            }
            if let Some(response) = response
                && send(response, None).await.is_err()
            {
                break;
            }
            continue;
        }
        tokio::select! {
            () = closing.cancelled() => {
                let _ = responses
                    .send(Err(Status::unavailable("the xDS server is shutting down")))
                    .await;
                break;
            }
            request = requests.next() => match request {
                Some(Ok(request)) => pending = Some(request),
                _ => break,
            },
            changed = snapshots.changed() => {
                if changed.is_err() {
                    break;
                }
                let snapshot = form(&snapshots.borrow_and_update());
                let mut closed = false;
                let responses = protocol.on_snapshot(&snapshot);
                progress.set(protocol.settled(&snapshot));
                for response in responses {
                    if send(response, snapshot.published()).await.is_err() {
                        closed = true;
                        break;
                    }
                }
                if closed {
                    break;
                }
            }
        }
    }
    if without {
        observer.without_geoip(&group, false);
    }
    observer.disconnected(&group);
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;
    type DeltaAggregatedResourcesStream = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(16);
        let peer = request.extensions().get::<crate::tls::Peer>().cloned();
        tokio::spawn(serve(
            Sotw::new(),
            self.cache.clone(),
            self.observer.clone(),
            self.closing.clone(),
            peer,
            request.into_inner(),
            tx,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(16);
        let peer = request.extensions().get::<crate::tls::Peer>().cloned();
        tokio::spawn(serve(
            Delta::new(),
            self.cache.clone(),
            self.observer.clone(),
            self.closing.clone(),
            peer,
            request.into_inner(),
            tx,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// The connections of `listener` as the xDS server takes them: with `TCP_NODELAY`, since a
/// response goes out in several writes and Nagle's algorithm would hold its last segment until
/// the client's delayed ACK (40 ms on Linux), which measured as a 40 ms tail on pushes.
pub fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

#[cfg(test)]
mod tests {
    use super::{Verdict, judged};
    use futures::StreamExt as _;

    #[tokio::test]
    async fn connections_are_taken_without_nagle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("address");
        let mut incoming = super::incoming(listener);
        let _client = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        let accepted = incoming
            .next()
            .await
            .expect("a connection")
            .expect("accepted");
        assert!(accepted.nodelay().expect("reads TCP_NODELAY"));
    }

    #[test]
    fn a_verdict_is_kept_by_type_with_the_reason_of_a_rejection() {
        let refused = "Error adding/updating listener(s) http-80: cannot bind '192.0.2.1:80': Cannot assign requested address";
        let nack = Verdict::Nack {
            type_url: crate::cache::LISTENER.into(),
            version: "3".into(),
            message: refused.into(),
        };
        assert_eq!(judged(&nack), ("listener", Some(refused.to_owned())));
        let ack = Verdict::Ack {
            type_url: crate::cache::SECRET.into(),
            version: "4".into(),
        };
        assert_eq!(judged(&ack), ("secret", None));
    }
}
