//! The HTTPRoute tests of the basics over plain HTTP: a route in the Gateway's namespace or
//! another, timeouts, named rules, references that do not resolve, routes no listener takes,
//! reference grants, rules without backends, Service types, backends of HTTP/2 and WebSocket.

use super::common::*;

/// HTTPRouteSimpleSameNamespace: a route in the Gateway's namespace reaches its backend.
pub(crate) async fn http_route_simple_same_namespace(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-simple-same-namespace.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/gateway-conformance-infra-test"],
            SAME_NAMESPACE,
        )
        .await;
    world
        .expect(
            SAME_NAMESPACE,
            80,
            Ask::get("/"),
            Want {
                backend: Some("infra-backend-v1"),
                namespace: INFRA,
                ..Want::default()
            },
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteCrossNamespace: a route in a namespace the Gateway's selector admits.
pub(crate) async fn http_route_cross_namespace(world: &World) {
    let gateway = "gateway-conformance-infra/backend-namespaces";
    let yaml = world
        .routes_accepted(
            "httproute-cross-namespace.yaml",
            "HTTPRoute",
            &["gateway-conformance-web-backend/cross-namespace"],
            gateway,
        )
        .await;
    world
        .expect(
            gateway,
            80,
            Ask::get("/"),
            Want {
                backend: Some("web-backend"),
                namespace: "gateway-conformance-web-backend",
                ..Want::default()
            },
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteTimeoutRequest and HTTPRouteTimeoutBackendRequest: a slower answer gets 504, a
/// timeout of 0 none.
pub(crate) async fn http_route_timeouts(world: &World) {
    const OK: Then = Then::Status(200);
    const TIMED_OUT: Then = Then::Status(504);
    routing(
        world,
        "httproute-timeout-request.yaml",
        "request-timeout",
        &[
            ("GET", "/request-timeout", &[], OK),
            ("GET", "/request-timeout?delay=1s", &[], TIMED_OUT),
            ("GET", "/disable-request-timeout?delay=1s", &[], OK),
        ],
    )
    .await;
    routing(
        world,
        "httproute-timeout-backend-request.yaml",
        "backend-request-timeout",
        &[
            ("GET", "/backend-timeout", &[], OK),
            ("GET", "/backend-timeout?delay=1s", &[], TIMED_OUT),
            ("GET", "/disable-backend-timeout?delay=1s", &[], OK),
        ],
    )
    .await;
}

/// HTTPRouteNamedRule: named and unnamed rules side by side.
pub(crate) async fn http_route_named_rule(world: &World) {
    routing(
        world,
        "httproute-named-rule.yaml",
        "http-named-rules",
        &[
            ("GET", "/named", &[], Then::Status(200)),
            ("GET", "/unnamed", &[], Then::Status(200)),
        ],
    )
    .await;
}

/// A route of `file`, accepted by `same-namespace` with a reference that does not resolve
/// (ResolvedRefs=False for `reason`): the rules it names answer 500, the others serve.
pub(crate) async fn unresolved(
    world: &World,
    file: &str,
    route: &str,
    reason: &str,
    cases: &[Case],
) {
    let yaml = manifest(file);
    world.apply_test(&yaml).await;
    let key = format!("{INFRA}/{route}");
    for condition in [("Accepted", "True", ""), ("ResolvedRefs", "False", reason)] {
        world
            .route_condition("HTTPRoute", &key, SAME_NAMESPACE, condition)
            .await;
    }
    expect_all(world, SAME_NAMESPACE, cases).await;
    world.delete(&yaml).await;
}

/// HTTPRouteInvalidBackendRefUnknownKind, HTTPRouteInvalidCrossNamespaceBackendRef,
/// HTTPRouteInvalidNonExistentBackendRef, HTTPRouteInvalidReferenceGrant and
/// HTTPRoutePartiallyInvalidViaInvalidReferenceGrant: a backend that does not resolve makes
/// its rule answer 500 and the route ResolvedRefs=False for the reason.
pub(crate) async fn http_route_unresolved_backends(world: &World) {
    unresolved(
        world,
        "httproute-invalid-backendref-unknown-kind.yaml",
        "invalid-backend-ref-unknown-kind",
        "InvalidKind",
        &[("GET", "/v2", &[], SERVER_ERROR)],
    )
    .await;
    unresolved(
        world,
        "httproute-invalid-cross-namespace-backend-ref.yaml",
        "invalid-cross-namespace-backend-ref",
        "RefNotPermitted",
        &[("GET", "/", &[], SERVER_ERROR)],
    )
    .await;
    unresolved(
        world,
        "httproute-invalid-nonexistent-backendref.yaml",
        "invalid-nonexistent-backend-ref",
        "BackendNotFound",
        &[("GET", "/", &[], SERVER_ERROR)],
    )
    .await;
    unresolved(
        world,
        "httproute-invalid-reference-grant.yaml",
        "reference-grant",
        "RefNotPermitted",
        &[("GET", "/", &[], SERVER_ERROR)],
    )
    .await;
    unresolved(
        world,
        "httproute-partially-invalid-via-invalid-reference-grant.yaml",
        "invalid-reference-grant",
        "RefNotPermitted",
        &[
            ("GET", "/v2", &[], SERVER_ERROR),
            (
                "GET",
                "/",
                &[],
                Then::In("app-backend-v1", "gateway-conformance-app-backend"),
            ),
        ],
    )
    .await;
}

/// A route of `file` that no listener of `gateway` takes (Accepted=False for `reason`): no
/// parent accepts it and the Gateway counts no route.
pub(crate) async fn not_attached(
    world: &World,
    file: &str,
    route: &str,
    gateway: &str,
    reason: &str,
) {
    let yaml = manifest(file);
    world.apply_test(&yaml).await;
    let key = format!("{INFRA}/{route}");
    world
        .route_condition("HTTPRoute", &key, gateway, ("Accepted", "False", reason))
        .await;
    world.no_accepted_parents("HTTPRoute", &key).await;
    world.zero_routes(gateway).await;
    world.delete(&yaml).await;
}

/// HTTPRouteInvalidCrossNamespaceParentRef, HTTPRouteInvalidParentRefNotMatchingListenerPort,
/// HTTPRouteInvalidParentRefNotMatchingSectionName,
/// HTTPRouteInvalidParentRefSectionNameNotMatchingPort and HTTPRouteDisallowedKind.
pub(crate) async fn http_route_not_attached(world: &World) {
    let yaml = manifest("httproute-invalid-cross-namespace-parent-ref.yaml");
    world.apply_test(&yaml).await;
    let key = "gateway-conformance-web-backend/invalid-cross-namespace-parent-ref";
    world
        .route_condition(
            "HTTPRoute",
            key,
            SAME_NAMESPACE,
            ("Accepted", "False", "NotAllowedByListeners"),
        )
        .await;
    world.no_accepted_parents("HTTPRoute", key).await;
    world.zero_routes(SAME_NAMESPACE).await;
    world.delete(&yaml).await;
    for (file, route, gateway, reason) in [
        (
            "httproute-invalid-parentref-not-matching-listener-port.yaml",
            "httproute-listener-not-matching-route-port",
            SAME_NAMESPACE,
            "NoMatchingParent",
        ),
        (
            "httproute-invalid-parentref-not-matching-section-name.yaml",
            "httproute-listener-not-matching-section-name",
            SAME_NAMESPACE,
            "NoMatchingParent",
        ),
        (
            "httproute-invalid-parentref-section-name-not-matching-port.yaml",
            "httproute-listener-section-name-not-matching-port",
            "gateway-conformance-infra/gateway-with-one-not-matching-port-and-section-name-route",
            "NoMatchingParent",
        ),
        (
            "httproute-disallowed-kind.yaml",
            "disallowed-kind",
            "gateway-conformance-infra/tlsroutes-only",
            "NotAllowedByListeners",
        ),
    ] {
        not_attached(world, file, route, gateway, reason).await;
    }
}

/// HTTPRouteReferenceGrant: a grant lets a route reach a Service of another namespace; once
/// the grant is gone, the rule answers 500.
pub(crate) async fn http_route_reference_grant(world: &World) {
    const WEB: Then = Then::In("web-backend", "gateway-conformance-web-backend");
    let yaml = world
        .routes_accepted(
            "httproute-reference-grant.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/reference-grant")],
            SAME_NAMESPACE,
        )
        .await;
    expect_all(world, SAME_NAMESPACE, &[("GET", "/", &[], WEB)]).await;
    world
        .delete(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ReferenceGrant\nmetadata:\n  \
             name: reference-grant\n  namespace: gateway-conformance-web-backend\n",
        )
        .await;
    expect_all(world, SAME_NAMESPACE, &[("GET", "/", &[], SERVER_ERROR)]).await;
    world.delete(&yaml).await;
}

/// HTTPRouteNoBackendRefs: a rule without backends (omitted or empty) answers 500.
pub(crate) async fn http_route_omitted_backend_refs(world: &World) {
    routing(
        world,
        "httproute-omitted-backendrefs.yaml",
        "omitted-backendrefs",
        &[
            ("GET", "/forward", &[], V1),
            ("GET", "/omitted-no-forward", &[], SERVER_ERROR),
            ("GET", "/empty-no-forward", &[], SERVER_ERROR),
        ],
    )
    .await;
}

/// HTTPRouteServiceTypes: backends behind Services with EndpointSlices written by hand, a
/// headless Service, and a headless one with hand-written EndpointSlices all serve.
pub(crate) async fn http_route_service_types(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-service-types.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/service-types")],
            SAME_NAMESPACE,
        )
        .await;
    world
        .fill_endpoint_slices(
            &[
                &format!("{INFRA}/manual-endpointslices-ip4"),
                &format!("{INFRA}/headless-manual-endpointslices-ip4"),
            ],
            &format!("{INFRA}/infra-backend-v1"),
        )
        .await;
    expect_all(
        world,
        SAME_NAMESPACE,
        &[
            ("GET", "/manual-endpointslices", &[], V1),
            ("GET", "/headless-manual-endpointslices", &[], V1),
            ("GET", "/headless", &[], V1),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteBackendProtocolH2C: HTTP/2 with prior knowledge reaches a backend whose Service
/// port says `kubernetes.io/h2c` — over HTTP/2 there too (the suite's backend port speaks
/// only that; this echo speaks both, so what it saw is checked).
pub(crate) async fn http_route_backend_protocol_h2c(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-backend-protocol-h2c.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/backend-protocol-h2c")],
            SAME_NAMESPACE,
        )
        .await;
    world
        .expect(SAME_NAMESPACE, 80, Ask::get("/").h2c(), V1.want())
        .await;
    let address = world.gateway(SAME_NAMESPACE, 80);
    let got = fairlead_e2e::conformance::send(&address, &Ask::get("/").h2c(), "/")
        .await
        .expect("an answer over h2c");
    let proto = got.echoed.map(|e| e.proto);
    assert_eq!(proto.as_deref(), Some("HTTP/2.0"), "the backend's protocol");
    world.delete(&yaml).await;
}

/// HTTPRouteBackendProtocolWebSocket: a WebSocket reaches a backend whose Service port says
/// `kubernetes.io/ws`, its messages echoed.
pub(crate) async fn http_route_backend_protocol_websocket(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-backend-protocol-websocket.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/backend-protocol-ws")],
            SAME_NAMESPACE,
        )
        .await;
    world.expect_websocket(SAME_NAMESPACE, 80).await;
    world.delete(&yaml).await;
}
