//! What the gateway controller's tests share: the embedded API server with the CRDs
//! `crds::install` puts there (the ALB instances', the standard Gateway API bundle, the
//! GatewayClass of `controller`).

/// The embedded API server (loopback endpoints allowed, as in `fairlead up`) and a client,
/// the CRDs installed.
pub async fn cluster(controller: &str) -> (fairlead_apiserver::ApiServer, kube::Client) {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config {
        allow_loopback_endpoints: true,
        ..fairlead_apiserver::Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    fairlead_edge_controller::crds::install(
        &client,
        controller,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await
    .unwrap();
    (server, client)
}
