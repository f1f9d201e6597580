//! The TLSRoute tests: TLS passed through by server name to backends that terminate it, or
//! terminated at the Gateway; hostname intersection; references that do not resolve; routes
//! no listener takes; listeners' supported kinds.

use super::common::*;

/// A client of a backend's (or a terminating listener's) TLS: the suite's checks CA trusted,
/// asking for `server_name`.
fn checked<'a>(world: &'a World, server_name: &'a str) -> Tls<'a> {
    Tls {
        server_name,
        trust: world
            .secrets
            .ca_of("gateway-conformance-infra/tls-checks-ca-certificate"),
        client: None,
        http2: false,
    }
}

/// The TCP echo (`tcp-backend`) as seen through a TLS listener: the TLS still on when the
/// Gateway passed it through (with the server name asked for), off when it terminated it.
fn tcp_backend(passed_through: Option<&str>) -> TcpWant<'_> {
    TcpWant {
        is_tls: passed_through.is_some(),
        backend: "tcp-backend",
        namespace: INFRA,
        server_name: passed_through,
    }
}

/// TLSRouteSimpleSameNamespace: a TLS listener passes TLS through to the route's backend,
/// by the route's hostname.
pub(crate) async fn tls_route_simple_same_namespace(world: &World) {
    let gateway = format!("{INFRA}/gateway-tlsroute");
    let yaml = world
        .routes_accepted(
            "tlsroute-simple-same-namespace.yaml",
            "TLSRoute",
            &[&format!("{INFRA}/gateway-conformance-infra-test")],
            &gateway,
        )
        .await;
    world
        .expect_tcp(
            &gateway,
            443,
            Some(checked(world, "abc.example.com")),
            tcp_backend(Some("abc.example.com")),
        )
        .await;
    world.delete(&yaml).await;
}

/// `GET /` over TLS asking for `server_name` through `gateway`'s port 443, answered by the
/// HTTP echo behind the passed-through TLS of `backend`.
async fn passed_to(world: &World, gateway: &str, server_name: &str, backend: &str) {
    world
        .expect(
            gateway,
            443,
            Ask::get("/").over(checked(world, server_name)),
            Want {
                backend: Some(backend),
                namespace: INFRA,
                ..Want::default()
            },
        )
        .await;
}

/// TLSRouteHostnameIntersection: a route serves the intersection of its hostnames with its
/// listener's, the most specific route first; other server names are refused.
pub(crate) async fn tls_route_hostname_intersection(world: &World) {
    let yaml = manifest("tlsroute-hostname-intersection.yaml");
    world.apply_test(&yaml).await;
    let key = |name: &str| format!("{INFRA}/{name}");
    let cases: [(&str, &[&str], &str); 4] = [
        (
            "gw-tlsroute-exact-hostname-x-1",
            &["tlsroute-more-specific-wc-hostname-x-1"],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-more-specific-wc-hostname-x-2",
            &[
                "tlsroute-exact-hostname-x-2",
                "tlsroute-less-specific-wc-hostname-x-2",
            ],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-less-specific-wc-hostname-x-3",
            &[
                "tlsroute-exact-hostname-x-3",
                "tlsroute-more-specific-wc-hostname-x-3",
            ],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-empty-hostname-x-4",
            &[
                "tlsroute-exact-hostname-x-4",
                "tlsroute-less-specific-wc-hostname-x-4",
            ],
            "non.matching.org",
        ),
    ];
    for (n, (gateway, routes, refused)) in cases.into_iter().enumerate() {
        let gateway = key(gateway);
        for route in routes {
            world
                .route_accepted("TLSRoute", &key(route), &gateway)
                .await;
        }
        passed_to(world, &gateway, "abc.example.com", "tls-backend").await;
        if n > 0 {
            passed_to(world, &gateway, "other.example.com", "tls-backend-2").await;
        }
        world.expect_refused(&gateway, 443, refused).await;
    }
    world.delete(&yaml).await;
}

/// TLSRouteInvalidBackendRefNonexistent and TLSRouteInvalidBackendRefUnknownKind: a route
/// whose backend does not resolve is accepted, ResolvedRefs=False for the reason, and its
/// server name refused.
pub(crate) async fn tls_route_invalid_backends(world: &World) {
    for (file, gateway, route, reason) in [
        (
            "tlsroute-invalid-backendref-nonexistent.yaml",
            "gateway-tlsroute-invalid-backend-ref-nonexistent",
            "invalid-backend-ref-nonexistent",
            "BackendNotFound",
        ),
        (
            "tlsroute-invalid-backendref-unknown-kind.yaml",
            "gateway-tlsroute-invalid-backend-ref-unknown-kind",
            "invalid-backend-ref-unknown-kind",
            "InvalidKind",
        ),
    ] {
        let yaml = manifest(file);
        world.apply_test(&yaml).await;
        let (gateway, route) = (format!("{INFRA}/{gateway}"), format!("{INFRA}/{route}"));
        for condition in [("Accepted", "True", ""), ("ResolvedRefs", "False", reason)] {
            world
                .route_condition("TLSRoute", &route, &gateway, condition)
                .await;
        }
        world.expect_refused(&gateway, 443, "example.com").await;
        world.delete(&yaml).await;
    }
}

/// TLSRouteInvalidNoMatchingListenerHostname and TLSRouteInvalidNoMatchingListener: routes no
/// listener takes (no hostname in common, an HTTP or HTTPS listener, a section that does not
/// exist) are not accepted by any parent, and the Gateways count no route.
pub(crate) async fn tls_route_not_attached(world: &World) {
    let key = |name: &str| format!("{INFRA}/{name}");
    let yaml = manifest("tlsroute-invalid-no-matching-listener-hostname.yaml");
    world.apply_test(&yaml).await;
    for (route, gateway) in [
        ("tlsroute-hostname-mismatch-1", "gateway-tls-exact-hostname"),
        (
            "tlsroute-hostname-mismatch-2",
            "gateway-tls-wildcard-hostname",
        ),
    ] {
        world
            .route_condition(
                "TLSRoute",
                &key(route),
                &key(gateway),
                ("Accepted", "False", "NoMatchingListenerHostname"),
            )
            .await;
        world.no_accepted_parents("TLSRoute", &key(route)).await;
        world.zero_routes(&key(gateway)).await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("tlsroute-invalid-no-matching-listener.yaml");
    world.apply_test(&yaml).await;
    for (route, gateway, reason) in [
        (
            "tlsroute-not-allowed-protocol-http",
            "gateway-tlsroute-http-only",
            "NotAllowedByListeners",
        ),
        (
            "tlsroute-not-allowed-protocol-https",
            "gateway-tlsroute-https-only",
            "NotAllowedByListeners",
        ),
        (
            "tlsroute-no-matching-section-name",
            "gateway-tlsroute-tls-passthrough-only",
            "NoMatchingParent",
        ),
    ] {
        world
            .route_condition(
                "TLSRoute",
                &key(route),
                &key(gateway),
                ("Accepted", "False", reason),
            )
            .await;
        world.no_accepted_parents("TLSRoute", &key(route)).await;
    }
    for gateway in ["gateway-tlsroute-http-only", "gateway-tlsroute-https-only"] {
        world.zero_routes(&key(gateway)).await;
    }
    world.delete(&yaml).await;
}

/// TLSRouteInvalidReferenceGrant: grants that grant something else leave the backend in
/// another namespace unresolved (RefNotPermitted).
pub(crate) async fn tls_route_invalid_reference_grant(world: &World) {
    let yaml = manifest("tlsroute-invalid-reference-grant.yaml");
    world.apply_test(&yaml).await;
    world
        .route_condition(
            "TLSRoute",
            &format!("{INFRA}/gateway-conformance-infra-test"),
            &format!("{INFRA}/gateway-tlsroute-referencegrant"),
            ("ResolvedRefs", "False", "RefNotPermitted"),
        )
        .await;
    world.delete(&yaml).await;
}

/// TLSRouteListenerPassthroughSupportedKinds and TLSRouteListenerTerminateSupportedKinds: a
/// passthrough listener asked for kinds it cannot take is ResolvedRefs=False
/// (InvalidRouteKinds); a terminating one takes TLSRoutes.
pub(crate) async fn tls_route_listener_kinds(world: &World) {
    let yaml = manifest("tlsroute-listener-passthrough-supported-kinds.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-tlsroute-passthrough-supported-kind");
    world
        .condition(
            "Gateway",
            &gateway,
            Some("tls-passthrough"),
            ("ResolvedRefs", "False", "InvalidRouteKinds"),
        )
        .await;
    world.attached_routes(&gateway, "tls-passthrough", 0).await;
    world.delete(&yaml).await;
    let yaml = manifest("tlsroute-listener-terminate-supported-kinds.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-tlsroute-terminate-supported");
    world
        .condition(
            "Gateway",
            &gateway,
            Some("tls-terminate"),
            ("Accepted", "True", "Accepted"),
        )
        .await;
    world.attached_routes(&gateway, "tls-terminate", 0).await;
    world.delete(&yaml).await;
}

/// TLSRouteTerminateSimpleSameNamespace: a terminating listener forwards the decrypted
/// stream to the route's plain backend.
pub(crate) async fn tls_route_terminate_simple_same_namespace(world: &World) {
    let gateway = format!("{INFRA}/gateway-tlsroute-terminate");
    let yaml = world
        .routes_accepted(
            "tlsroute-terminate-simple-same-namespace.yaml",
            "TLSRoute",
            &[&format!("{INFRA}/tlsroute-terminated-test")],
            &gateway,
        )
        .await;
    world
        .expect_tcp(
            &gateway,
            8443,
            Some(checked(world, "tls.example.com")),
            tcp_backend(None),
        )
        .await;
    world.delete(&yaml).await;
}

/// TLSRouteMixedTerminationSameNamespace: one port terminates TLS for one server name and
/// passes it through for another.
pub(crate) async fn tls_route_mixed_termination_same_namespace(world: &World) {
    let gateway = format!("{INFRA}/gateway-tlsroute-mixed-termination");
    let yaml = world
        .routes_accepted(
            "tlsroute-mixed-termination-same-namespace.yaml",
            "TLSRoute",
            &[
                &format!("{INFRA}/gateway-conformance-mixed-passthroughroute"),
                &format!("{INFRA}/gateway-conformance-mixed-terminateroute"),
            ],
            &gateway,
        )
        .await;
    for listener in ["tls-terminate", "tls-passthrough"] {
        world
            .condition(
                "Gateway",
                &gateway,
                Some(listener),
                ("Accepted", "True", "Accepted"),
            )
            .await;
        world.attached_routes(&gateway, listener, 1).await;
    }
    world
        .expect_tcp(
            &gateway,
            8883,
            Some(checked(world, "tls.example.com")),
            tcp_backend(None),
        )
        .await;
    world
        .expect_tcp(
            &gateway,
            8883,
            Some(checked(world, "abc.example.com")),
            tcp_backend(Some("abc.example.com")),
        )
        .await;
    world.delete(&yaml).await;
}
