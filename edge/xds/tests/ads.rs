//! The ADS server over a real gRPC connection (tonic client): a stream is identified by its
//! node, answered, pushed to when its Gateway's snapshot changes, and reports the client's
//! verdicts; a node that names no Gateway is refused.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use fairlead_edge_xds::cache::{CLUSTER, Cache};
use fairlead_edge_xds::server::{Ads, Observer};
use fairlead_edge_xds::sotw::Verdict;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Observer for Recorder {
    fn connected(&self, group: &fairlead_edge_model::ObjectKey) {
        self.0.lock().unwrap().push(format!("connected {group}"));
    }
    fn verdict(&self, group: &fairlead_edge_model::ObjectKey, verdict: &Verdict) {
        let what = match verdict {
            Verdict::Ack { .. } => "ack",
            Verdict::Nack { .. } => "nack",
        };
        self.0.lock().unwrap().push(format!("{what} {group}"));
    }
    fn without_geoip(&self, group: &fairlead_edge_model::ObjectKey, without: bool) {
        self.0
            .lock()
            .unwrap()
            .push(format!("without_geoip {group} {without}"));
    }
}

impl Recorder {
    /// The `without_geoip` reports so far.
    fn without_geoip(&self) -> Vec<String> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|e| e.starts_with("without_geoip"))
            .cloned()
            .collect()
    }
}

async fn serve(cache: Arc<Cache>, observer: Arc<Recorder>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Ads::new(cache, observer).into_service())
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    format!("http://{addr}")
}

fn node(cluster: &str) -> Option<Node> {
    Some(Node {
        id: "test".into(),
        cluster: cluster.into(),
        ..Default::default()
    })
}

async fn next(stream: &mut tonic::Streaming<DiscoveryResponse>) -> DiscoveryResponse {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("a response in time")
        .expect("no stream error")
        .expect("the stream is open")
}

#[tokio::test]
async fn a_stream_is_answered_pushed_to_and_reports_verdicts() {
    let cache = Arc::new(Cache::new());
    cache.set(&gw(), common::snapshot(false));
    let observer = Arc::new(Recorder::default());
    let url = serve(cache.clone(), observer.clone()).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(url)
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    tx.send(DiscoveryRequest {
        node: node("default/gw"),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut responses).await;
    assert_eq!(first.resources.len(), 1);
    tx.send(DiscoveryRequest {
        type_url: CLUSTER.into(),
        version_info: first.version_info.clone(),
        response_nonce: first.nonce.clone(),
        ..Default::default()
    })
    .await
    .unwrap();

    // The ACK is in before the snapshot changes (an ACK that crosses a push carries a stale
    // nonce and is rightly ignored).
    for _ in 0..100 {
        if observer.0.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A new snapshot is pushed without the client asking.
    assert!(cache.set(&gw(), common::snapshot(true)));
    let pushed = next(&mut responses).await;
    assert_eq!(pushed.type_url, CLUSTER);
    assert_eq!(pushed.resources.len(), 2);
    assert_ne!(pushed.version_info, first.version_info);

    // The client rejects it: reported, and not sent again.
    tx.send(DiscoveryRequest {
        type_url: CLUSTER.into(),
        version_info: first.version_info.clone(),
        response_nonce: pushed.nonce.clone(),
        error_detail: Some(RpcStatus {
            code: 3,
            message: "rejected".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    let quiet = tokio::time::timeout(Duration::from_millis(300), responses.message()).await;
    assert!(quiet.is_err(), "nothing is resent after a NACK");
    let seen = observer.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        ["connected default/gw", "ack default/gw", "nack default/gw"]
    );
}

#[tokio::test]
async fn a_node_without_a_gateway_is_refused() {
    let cache = Arc::new(Cache::new());
    let url = serve(cache, Arc::new(Recorder::default())).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(url)
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(1);
    tx.send(DiscoveryRequest {
        node: node("not-a-gateway"),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let status = responses.message().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("node.cluster"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn per_type_services_stream_and_fetch() {
    use envoy_types::pb::envoy::service::cluster::v3::cluster_discovery_service_client::ClusterDiscoveryServiceClient;
    use envoy_types::pb::envoy::service::listener::v3::listener_discovery_service_client::ListenerDiscoveryServiceClient;
    let cache = Arc::new(Cache::new());
    cache.set(&gw(), common::snapshot(true));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(fairlead_edge_xds::services::routes(Ads::new(
                cache.clone(),
                Arc::new(Recorder::default()),
            )))
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    let url = format!("http://{addr}");

    // CDS on its own stream; the request leaves type_url empty, as per-type clients may.
    let mut cds = ClusterDiscoveryServiceClient::connect(url.clone())
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(1);
    tx.send(DiscoveryRequest {
        node: node("default/gw"),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = cds
        .stream_clusters(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let clusters = next(&mut responses).await;
    assert_eq!(clusters.type_url, CLUSTER);
    assert_eq!(clusters.resources.len(), 2);

    // LDS by a unary fetch.
    let mut lds = ListenerDiscoveryServiceClient::connect(url).await.unwrap();
    let listeners = lds
        .fetch_listeners(DiscoveryRequest {
            node: node("default/gw"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listeners.type_url, fairlead_edge_xds::cache::LISTENER);
    assert_eq!(listeners.resources.len(), 1);
    let refused = lds
        .fetch_listeners(DiscoveryRequest {
            node: node("nobody"),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

/// Shutdown ends open streams at once (UNAVAILABLE), so a server's graceful stop does not
/// wait for proxies that would keep their streams forever.
#[tokio::test]
async fn open_streams_end_when_the_server_closes() {
    let cache = Arc::new(Cache::new());
    cache.set(&gw(), common::snapshot(false));
    let closing = tokio_util::sync::CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                Ads::new(cache, Arc::new(Recorder::default()))
                    .closing_on(closing.clone())
                    .into_service(),
            )
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    tx.send(DiscoveryRequest {
        node: node("default/gw"),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    next(&mut responses).await;
    closing.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(2), responses.message())
        .await
        .expect("the stream ends at once, not at a drain deadline");
    let status = ended.expect_err("the stream ends with a status");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
    drop(tx);
}

/// The Gateway the tests configure.
fn gw() -> fairlead_edge_model::ObjectKey {
    fairlead_edge_model::ObjectKey::new("default", "gw")
}

/// A Gateway whose instance asks for GeoIP headers: a proxy that says it holds the City
/// database gets listeners with Envoy's GeoIP filter, one that says nothing gets them
/// without (both remove client-sent geolocation headers), reported to the observer while
/// its stream lasts.
#[tokio::test]
async fn only_proxies_holding_the_databases_get_the_geoip_filter() {
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
    let yaml = common::yaml(false).replace(
        "metadata: {name: gw, namespace: default}",
        "metadata: {name: gw, namespace: default, labels: {alb.deckhouse.io/instance: ClusterALBInstance.main}}",
    ) + "
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: main}
spec:
  gatewayName: gw
  geoIP: {maxmindMirror: {url: 'http://mirror'}, maxmindEditionIDs: [GeoLite2-City], headers: {country: x-country}}
";
    let input = fairlead_edge_model::input::Input::from_yaml(&yaml).unwrap();
    let mut translation = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    let resources = translation.gateways.remove(&gw()).unwrap();
    assert!(resources.without_geoip.is_some());
    let cache = Arc::new(Cache::new());
    cache.set(&gw(), fairlead_edge_xds::cache::Snapshot::new(resources));
    let recorder = Arc::new(Recorder::default());
    let url = serve(cache, recorder.clone()).await;
    let listeners = |held: Option<&str>| {
        let url = url.clone();
        let held = held.map(str::to_owned);
        async move {
            let mut node = node("default/gw").unwrap();
            if let Some(held) = held {
                node.metadata = Some(Struct {
                    fields: [(
                        fairlead_edge_xds::node::GEOIP_EDITIONS.to_owned(),
                        Value {
                            kind: Some(Kind::StringValue(held)),
                        },
                    )]
                    .into(),
                });
            }
            let mut client = AggregatedDiscoveryServiceClient::connect(url)
                .await
                .unwrap();
            let (tx, rx) = mpsc::channel(1);
            tx.send(DiscoveryRequest {
                node: Some(node),
                type_url: fairlead_edge_xds::cache::LISTENER.into(),
                ..Default::default()
            })
            .await
            .unwrap();
            let mut responses = client
                .stream_aggregated_resources(ReceiverStream::new(rx))
                .await
                .unwrap()
                .into_inner();
            let response = next(&mut responses).await;
            let text = String::from_utf8_lossy(&response.resources[0].value).into_owned();
            (
                text.contains("envoy.filters.http.geoip"),
                text.contains("x-country"),
            )
        }
    };
    assert_eq!(
        listeners(Some("GeoLite2-City,GeoLite2-ASN")).await,
        (true, true)
    );
    assert_eq!(recorder.without_geoip(), Vec::<String>::new());
    assert_eq!(
        listeners(None).await,
        (false, true),
        "no filter, the header still removed"
    );
    assert_eq!(listeners(Some("GeoIP2-City")).await, (false, true));
    // Each proxy served without the filter is reported, and reported gone with its stream.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut reports = recorder.without_geoip();
        reports.sort();
        if reports
            == [
                "without_geoip default/gw false",
                "without_geoip default/gw false",
                "without_geoip default/gw true",
                "without_geoip default/gw true",
            ]
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{reports:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A control plane started again, its proxies still holding what it served before: their
/// streams are answered only once its first translation is in, never from the empty
/// snapshots before it (which would take every resource away from them).
#[tokio::test]
async fn nothing_is_served_before_the_first_translation() {
    let cache = Arc::new(Cache::new().awaiting_first());
    let url = serve(cache.clone(), Arc::new(Recorder::default())).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(url)
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    tx.send(DiscoveryRequest {
        node: node("default/gw"),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let quiet = tokio::time::timeout(Duration::from_millis(500), responses.message()).await;
    assert!(quiet.is_err(), "answered before the first translation");
    cache.set(&gw(), common::snapshot(true));
    cache.first_published();
    let first = next(&mut responses).await;
    assert_eq!(first.resources.len(), 2, "the translated snapshot");
}
