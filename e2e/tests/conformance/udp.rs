//! The UDPRoute tests: datagrams to the route's backends (by weight, the oldest route of a
//! listener), parentRefs by port and section, reference grants, and routes that do not
//! resolve or attach. (The echo answers with its pod, named after its Deployment, which the
//! suite's tests name as the Service: the pod's prefix stands for the suite's `service`.)

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

/// The infra key of `name`.
fn key(name: &str) -> String {
    format!("{INFRA}/{name}")
}

/// Waits until a datagram to `gateway`'s `port` is answered by a pod of `backend`.
async fn echoed_by(world: &World, gateway: &str, port: u16, backend: &str) {
    fairlead_e2e::until(
        &format!("{gateway}:{port} echoed by {backend}"),
        async || {
            let pod = world.udp_pod(gateway, port).await?;
            pod.starts_with(&format!("{backend}-")).then_some(())
        },
    )
    .await;
}

/// UDPRouteInvalidBackendRefNonexistent, UDPRouteInvalidCrossNamespaceBackendRef and
/// UDPRouteNotAllowedByListeners: a backend that does not exist or needs a grant leaves the
/// route ResolvedRefs=False for the reason; a route on a TLS listener is not allowed there.
pub(crate) async fn udp_route_invalid(world: &World) {
    unresolved_or_unattached(
        world,
        "UDPRoute",
        &[
            (
                "udproute-invalid-backendref-nonexistent.yaml",
                "udp-gateway-invalid-backend",
                "udp-route-invalid-backend-ref-nonexistent",
                ("ResolvedRefs", "False", "BackendNotFound"),
            ),
            (
                "udproute-invalid-cross-namespace-backend-ref.yaml",
                "udp-gateway-invalid-cross-namespace-backend-ref",
                "udp-route-invalid-cross-namespace-backend-ref",
                ("ResolvedRefs", "False", "RefNotPermitted"),
            ),
            (
                "udproute-not-allowed-by-listeners.yaml",
                "udproute-tls-only-gateway",
                "udproute-not-allowed-by-listeners",
                ("Accepted", "False", "NotAllowedByListeners"),
            ),
        ],
    )
    .await;
}

/// UDPRouteMultipleRoutesAttachment: of two routes on one UDP listener both are accepted and
/// counted, but every datagram goes to the older one's backend.
pub(crate) async fn udp_route_multiple_routes_attachment(world: &World) {
    let gateway = key("udp-multi-route-attach-gateway");
    let gateway = gateway.as_str();
    oldest_route_serves(
        world,
        (
            "UDPRoute",
            "udproute-multiple-routes-attachment.yaml",
            "udp-multi-route-attach-gateway",
            "udp",
        ),
        ("udproute-attach-older", "udp-attach-backend-1"),
        ("udproute-attach-newer", "udp-attach-backend-2", 8080),
        (20, move || world.udp_pod(gateway, 5301)),
    )
    .await;
}

/// UDPRouteParentRefAttachAllListeners and UDPRouteParentRefPortAndSectionName: a parentRef
/// with neither port nor section attaches to every UDP listener (each counting it); one with
/// a port, a section or both to that listener only.
pub(crate) async fn udp_route_parent_refs(world: &World) {
    let yaml = manifest("udproute-parentref-attach-all-listeners.yaml");
    world.apply_test(&yaml).await;
    let gateway = key("udp-attach-all-listeners-gateway");
    world
        .route_condition(
            "UDPRoute",
            &key("udp-route-attach-all"),
            &gateway,
            ("Accepted", "True", "Accepted"),
        )
        .await;
    for (listener, port) in [("udp-1", 5310), ("udp-2", 5311), ("udp-3", 5312)] {
        for condition in [("Accepted", "True", ""), ("ResolvedRefs", "True", "")] {
            world
                .condition("Gateway", &gateway, Some(listener), condition)
                .await;
        }
        world.attached_routes(&gateway, listener, 1).await;
        echoed_by(world, &gateway, port, "udp-echo-attach-all").await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("udproute-parentref-port-and-section-name.yaml");
    world.apply_test(&yaml).await;
    let gateway = key("udp-multi-listener-gateway");
    for (route, port, backend) in [
        ("udp-route-by-port", 5300, "udp-echo-by-port"),
        ("udp-route-by-section", 5301, "udp-echo-by-section"),
        (
            "udp-route-by-section-and-port",
            5302,
            "udp-echo-by-section-and-port",
        ),
    ] {
        world
            .route_condition(
                "UDPRoute",
                &key(route),
                &gateway,
                ("Accepted", "True", "Accepted"),
            )
            .await;
        echoed_by(world, &gateway, port, backend).await;
    }
    world.delete(&yaml).await;
}

/// UDPRouteReferenceGrant: a grant lets the route reach a backend of another namespace
/// (its datagrams echoed); without it the route is ResolvedRefs=False (RefNotPermitted).
pub(crate) async fn udp_route_reference_grant(world: &World) {
    let gateway = key("udp-gateway-reference-grant");
    let route = key("udp-route-reference-grant");
    let yaml = manifest("udproute-reference-grant.yaml");
    world.apply_test(&yaml).await;
    world
        .route_condition(
            "UDPRoute",
            &route,
            &gateway,
            ("ResolvedRefs", "True", "ResolvedRefs"),
        )
        .await;
    echoed_by(world, &gateway, 5300, "udp-echo-reference-grant").await;
    world
        .delete(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ReferenceGrant\nmetadata:\n  \
             name: udp-reference-grant\n  namespace: gateway-conformance-app-backend\n",
        )
        .await;
    world
        .route_condition(
            "UDPRoute",
            &route,
            &gateway,
            ("ResolvedRefs", "False", "RefNotPermitted"),
        )
        .await;
    world.delete(&yaml).await;
}

/// UDPRoute: a DNS query through the Gateway's UDP listener is answered by the
/// route's CoreDNS.
pub(crate) async fn udp_route_simple(world: &World) {
    let gateway = key("udp-gateway");
    let yaml = world
        .routes_accepted(
            "udproute-simple.yaml",
            "UDPRoute",
            &[&key("udp-coredns")],
            &gateway,
        )
        .await;
    let address = world.gateway(&gateway, 5300);
    // foo.bar.com A IN, id 0x2a2a, recursion desired.
    let mut query = vec![0x2a, 0x2a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["foo", "bar", "com"] {
        query.push(3);
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    fairlead_e2e::until("a DNS answer through the Gateway", async || {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.ok()?;
        socket.connect(&address).await.ok()?;
        socket.send(&query).await.ok()?;
        let mut answer = vec![0u8; 512];
        let n = tokio::time::timeout(std::time::Duration::from_secs(2), socket.recv(&mut answer))
            .await
            .ok()?
            .ok()?;
        (n > 12 && answer[..2] == query[..2] && answer[2] & 0x80 != 0).then_some(())
    })
    .await;
    world.delete(&yaml).await;
}
