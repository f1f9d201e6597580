//! The TCPRoute tests: streams to the route's backends (by weight, the oldest route of a
//! listener), parentRefs by port and section, reference grants, and routes that do not
//! resolve or attach.

use super::common::*;

/// The TCP echo `backend` (in `namespace`) over plain TCP.
fn plain<'a>(backend: &'a str, namespace: &'a str) -> TcpWant<'a> {
    TcpWant {
        is_tls: false,
        backend,
        namespace,
        server_name: None,
    }
}

/// The infra key of `name`.
fn key(name: &str) -> String {
    format!("{INFRA}/{name}")
}

/// TCPRouteInvalidBackendRefNonexistent, TCPRouteInvalidCrossNamespaceBackendRef and
/// TCPRouteInvalidNonTCPListener: a backend that does not exist or needs a grant leaves the
/// route ResolvedRefs=False for the reason; a route on an HTTP listener is not allowed there.
pub(crate) async fn tcp_route_invalid(world: &World) {
    unresolved_or_unattached(
        world,
        "TCPRoute",
        &[
            (
                "tcproute-invalid-backendref-nonexistent.yaml",
                "tcp-gateway-invalid-backend",
                "tcp-route-invalid-backend-ref-nonexistent",
                ("ResolvedRefs", "False", "BackendNotFound"),
            ),
            (
                "tcproute-invalid-cross-namespace-backend-ref.yaml",
                "tcp-invalid-cross-namespace-backend-ref-gateway",
                "tcp-invalid-cross-namespace-backend-ref",
                ("ResolvedRefs", "False", "RefNotPermitted"),
            ),
            (
                "tcproute-invalid-non-tcp-listener.yaml",
                "tcp-mixed-protocol-gateway",
                "tcp-route",
                ("Accepted", "False", "NotAllowedByListeners"),
            ),
        ],
    )
    .await;
}

/// TCPRouteMultipleRoutesAttachment: of two routes on one TCP listener both are accepted and
/// counted, but every connection goes to the older one's backend.
pub(crate) async fn tcp_route_multiple_routes_attachment(world: &World) {
    let gateway = key("tcp-multi-route-attach-gateway");
    let gateway = gateway.as_str();
    oldest_route_serves(
        world,
        (
            "TCPRoute",
            "tcproute-multiple-routes-attachment.yaml",
            "tcp-multi-route-attach-gateway",
            "tcp",
        ),
        ("tcproute-attach-older", "tcp-attach-backend-1"),
        ("tcproute-attach-newer", "tcp-attach-backend-2", 3000),
        (100, move || async move {
            let address = world.gateway(gateway, 9310);
            let answer = fairlead_e2e::conformance::tcp::exchange(&address, None)
                .await
                .ok()?;
            answer.payload["pod"].as_str().map(str::to_owned)
        }),
    )
    .await;
}

/// TCPRouteParentRefAttachAll and TCPRouteParentRefPortAndSectionName: a parentRef with
/// neither port nor section attaches to every TCP listener; one with a port, a section or
/// both to that listener only.
pub(crate) async fn tcp_route_parent_refs(world: &World) {
    let yaml = manifest("tcproute-parentref-attach-all.yaml");
    world.apply_test(&yaml).await;
    let gateway = key("tcp-attach-all-gateway");
    world
        .route_condition(
            "TCPRoute",
            &key("tcp-route-attach-all"),
            &gateway,
            ("Accepted", "True", "Accepted"),
        )
        .await;
    for port in [9310, 9311, 9312, 9313] {
        world
            .expect_tcp(&gateway, port, None, plain("tcp-echo-attach-all", INFRA))
            .await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("tcproute-parentref-port-and-section-name.yaml");
    world.apply_test(&yaml).await;
    let gateway = key("tcp-multi-listener-gateway");
    for (route, port, backend) in [
        ("tcp-route-by-port", 9300, "tcp-echo-one"),
        ("tcp-route-by-section", 9301, "tcp-echo-two"),
        ("tcp-route-by-section-and-port", 9302, "tcp-echo-three"),
    ] {
        world
            .route_condition(
                "TCPRoute",
                &key(route),
                &gateway,
                ("Accepted", "True", "Accepted"),
            )
            .await;
        world
            .expect_tcp(&gateway, port, None, plain(backend, INFRA))
            .await;
    }
    world.delete(&yaml).await;
}

/// TCPRouteReferenceGrant: a grant lets the route reach a backend of another namespace;
/// without it the route is ResolvedRefs=False (RefNotPermitted).
pub(crate) async fn tcp_route_reference_grant(world: &World) {
    let gateway = key("tcp-reference-grant-gateway");
    let route = key("tcp-reference-grant");
    let yaml = world
        .routes_accepted(
            "tcproute-reference-grant.yaml",
            "TCPRoute",
            &[&route],
            &gateway,
        )
        .await;
    world
        .expect_tcp(
            &gateway,
            9320,
            None,
            plain(
                "tcp-reference-grant-backend",
                "gateway-conformance-web-backend",
            ),
        )
        .await;
    world
        .delete(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ReferenceGrant\nmetadata:\n  \
             name: tcp-reference-grant\n  namespace: gateway-conformance-web-backend\n",
        )
        .await;
    world
        .route_condition(
            "TCPRoute",
            &route,
            &gateway,
            ("ResolvedRefs", "False", "RefNotPermitted"),
        )
        .await;
    world.delete(&yaml).await;
}

/// TCPRouteWeightedRouting: connections spread over the backends as their weights say.
pub(crate) async fn tcp_route_weighted_routing(world: &World) {
    let gateway = key("tcp-weighted-gateway");
    let yaml = world
        .routes_accepted(
            "tcproute-weighted-routing.yaml",
            "TCPRoute",
            &[&key("tcp-weighted-route")],
            &gateway,
        )
        .await;
    let port = fairlead_e2e::conformance::document(&yaml, "Gateway", "tcp-weighted-gateway")
        ["spec"]["listeners"][0]["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("the listener's port");
    let address = world.gateway(&gateway, port);
    fairlead_e2e::until("the TCP listener answers", async || {
        fairlead_e2e::conformance::tcp::exchange(&address, None)
            .await
            .ok()
    })
    .await;
    weighted(
        || async {
            let answer = fairlead_e2e::conformance::tcp::exchange(&address, None)
                .await
                .ok()?;
            answer.payload["pod"].as_str().map(str::to_owned)
        },
        &[
            ("tcp-backend-v1", 0.7),
            ("tcp-backend-v2", 0.3),
            ("tcp-backend-v3", 0.0),
        ],
    )
    .await;
    world.delete(&yaml).await;
}
