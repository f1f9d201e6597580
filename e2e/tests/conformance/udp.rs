//! The UDPRoute tests.

use super::common::*;

/// UDPRouteWeightedRouting: sessions spread over the backends as their weights say (70/30/0,
/// within 5 points of 500 sessions; ten tries, as the suite allows).
pub(crate) async fn udp_route_weighted_routing(world: &World) {
    let gateway = "gateway-conformance-infra/udp-weighted-gateway";
    let yaml = world
        .routes_accepted(
            "udproute-weighted-routing.yaml",
            "UDPRoute",
            &["gateway-conformance-infra/udp-weighted-route"],
            gateway,
        )
        .await;
    fairlead_e2e::until("the UDP listener echoes", async || {
        world.udp_pod(gateway, 5300).await
    })
    .await;
    weighted(
        || world.udp_pod(gateway, 5300),
        &[
            ("udp-backend-v1", 0.7),
            ("udp-backend-v2", 0.3),
            ("udp-backend-v3", 0.0),
        ],
    )
    .await;
    world.delete(&yaml).await;
}
