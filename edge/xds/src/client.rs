//! A minimal ADS client, for tests and benchmarks that need what a proxy receives: one
//! route configuration, fetched as the proxy of a Gateway would.

use std::time::Duration;

/// Connects to the ADS server at `addr` as a proxy of `gateway` (retrying for a minute while
/// it starts) and waits for the route configuration `name`; returns its virtual hosts.
pub async fn fetch_routes(
    addr: std::net::SocketAddr,
    gateway: &str,
    name: &str,
) -> Result<usize, tonic::Status> {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    use prost::Message as _;

    let mut attempts = 0;
    let mut client = loop {
        match AggregatedDiscoveryServiceClient::connect(format!("http://{addr}")).await {
            Ok(client) => break client,
            Err(e) if attempts >= 600 => return Err(tonic::Status::unavailable(e.to_string())),
            Err(_) => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let request = DiscoveryRequest {
        node: Some(Node {
            id: "bench".into(),
            cluster: gateway.into(),
            ..Default::default()
        }),
        type_url: crate::cache::ROUTE.into(),
        resource_names: vec![name.into()],
        ..Default::default()
    };
    // The request stream stays open while waiting: a closed one ends the server's stream.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let _ = tx.send(request).await;
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    while let Some(response) = responses.message().await? {
        if let Some(any) = response.resources.first() {
            let routes = RouteConfiguration::decode(any.value.as_slice())
                .map_err(|e| tonic::Status::internal(e.to_string()))?;
            return Ok(routes.virtual_hosts.len());
        }
    }
    Err(tonic::Status::aborted(
        "the stream closed before the route configuration came",
    ))
}
