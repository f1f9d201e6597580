//! The HTTPRoute matching tests: paths, headers, query parameters, methods, precedence
//! within and across routes, listeners' hostnames and ports, Gateways sharing a route.

use super::common::*;

/// HTTPRouteExactPathMatching.
pub(crate) async fn http_route_exact_path_matching(world: &World) {
    routing(
        world,
        "httproute-exact-path-matching.yaml",
        "exact-matching",
        &[
            ("GET", "/one", &[], V1),
            ("GET", "/two", &[], V2),
            ("GET", "/", &[], NOT_FOUND),
            ("GET", "/one/example", &[], NOT_FOUND),
            ("GET", "/two/", &[], NOT_FOUND),
            ("GET", "/Two", &[], NOT_FOUND),
        ],
    )
    .await;
}

/// HTTPRouteHeaderMatching.
pub(crate) async fn http_route_header_matching(world: &World) {
    routing(
        world,
        "httproute-header-matching.yaml",
        "header-matching",
        &[
            ("GET", "/", &[("Version", "one")], V1),
            ("GET", "/", &[("Version", "two")], V2),
            ("GET", "/", &[("Version", "two"), ("Color", "orange")], V1),
            ("GET", "/", &[("Version", "two"), ("Color", "blue")], V2),
            ("GET", "/", &[("Color", "orange")], NOT_FOUND),
            ("GET", "/", &[("Some-Other-Header", "one")], NOT_FOUND),
            ("GET", "/", &[("Color", "blue")], V1),
            ("GET", "/", &[("Color", "green")], V1),
            ("GET", "/", &[("Color", "red")], V2),
            ("GET", "/", &[("Color", "yellow")], V2),
            ("GET", "/", &[("Color", "purple")], NOT_FOUND),
        ],
    )
    .await;
}

/// HTTPRouteQueryParamMatching.
pub(crate) async fn http_route_query_param_matching(world: &World) {
    routing(
        world,
        "httproute-query-param-matching.yaml",
        "query-param-matching",
        &[
            ("GET", "/?animal=whale", &[], V1),
            ("GET", "/?animal=dolphin", &[], V2),
            ("GET", "/?animal=dolphin&color=blue", &[], V3),
            ("GET", "/?ANIMAL=Whale", &[], V3),
            ("GET", "/?animal=whale&otherparam=irrelevant", &[], V1),
            ("GET", "/?animal=dolphin&color=yellow", &[], V2),
            ("GET", "/?color=blue", &[], NOT_FOUND),
            ("GET", "/?animal=dog", &[], NOT_FOUND),
            ("GET", "/?animal=whaledolphin", &[], NOT_FOUND),
            ("GET", "/", &[], NOT_FOUND),
            ("GET", "/path1?animal=whale", &[], V1),
            ("GET", "/?animal=whale", &[("version", "one")], V2),
            ("GET", "/path2?animal=whale", &[("version", "two")], V3),
            ("GET", "/path3?animal=shark", &[], V1),
            ("GET", "/path4?animal=kraken", &[("version", "three")], V1),
            ("GET", "/?animal=shark", &[], NOT_FOUND),
            ("GET", "/path4?animal=kraken", &[], NOT_FOUND),
            ("GET", "/path5?animal=hydra", &[], V1),
            ("GET", "/?animal=hydra", &[("version", "four")], V3),
        ],
    )
    .await;
}

/// HTTPRouteMethodMatching.
pub(crate) async fn http_route_method_matching(world: &World) {
    routing(
        world,
        "httproute-method-matching.yaml",
        "method-matching",
        &[
            ("POST", "/", &[], V1),
            ("GET", "/", &[], V2),
            ("HEAD", "/", &[], NOT_FOUND),
            ("GET", "/path1", &[], V1),
            ("PUT", "/", &[("version", "one")], V2),
            ("POST", "/path2", &[("version", "two")], V3),
            ("PATCH", "/path3", &[], V1),
            ("DELETE", "/path4", &[("version", "three")], V1),
            ("PUT", "/", &[], NOT_FOUND),
            ("DELETE", "/path4", &[], NOT_FOUND),
            ("PATCH", "/path5", &[], V1),
            ("PATCH", "/", &[("version", "four")], V2),
        ],
    )
    .await;
}

/// HTTPRouteMatching: path prefixes by segment, or a header, in one rule.
pub(crate) async fn http_route_matching(world: &World) {
    routing(
        world,
        "httproute-matching.yaml",
        "matching",
        &[
            ("GET", "/", &[], V1),
            ("GET", "/example", &[], V1),
            ("GET", "/", &[("Version", "one")], V1),
            ("GET", "/v2", &[], V2),
            ("GET", "/v2/example", &[], V2),
            ("GET", "/", &[("Version", "two")], V2),
            ("GET", "/v2/", &[], V2),
            ("GET", "/v2example", &[], V1),
            ("GET", "/foo/v2/example", &[], V1),
        ],
    )
    .await;
}

/// HTTPRouteMatchingAcrossRoutes: two routes' rules ordered together, each on its hostnames.
pub(crate) async fn http_route_matching_across_routes(world: &World) {
    const COM: (&str, &str) = ("Host", "example.com");
    const NET: (&str, &str) = ("Host", "example.net");
    routing_on(
        world,
        "httproute-matching-across-routes.yaml",
        SAME_NAMESPACE,
        &["matching-part1", "matching-part2"],
        &[
            ("GET", "/", &[COM], V1),
            ("GET", "/example", &[COM], V1),
            ("GET", "/example", &[NET], V1),
            ("GET", "/example", &[COM, ("Version", "one")], V1),
            ("GET", "/v2", &[COM], V2),
            ("GET", "/v2", &[NET], V1),
            ("GET", "/v2/example", &[COM], V2),
            ("GET", "/", &[COM, ("Version", "two")], V2),
        ],
    )
    .await;
}

/// HTTPRoutePathMatchOrder: exact before prefix, longer prefixes first.
pub(crate) async fn http_route_path_match_order(world: &World) {
    routing(
        world,
        "httproute-path-match-order.yaml",
        "path-matching-order",
        &[
            ("GET", "/match/exact/one", &[], V3),
            ("GET", "/match/exact", &[], V2),
            ("GET", "/match", &[], V1),
            ("GET", "/match/prefix/one/any", &[], V2),
            ("GET", "/match/prefix/any", &[], V1),
            ("GET", "/match/any", &[], V3),
        ],
    )
    .await;
}

/// HTTPRouteListenerHostnameMatching: each listener's routes answer its hostnames only.
pub(crate) async fn http_route_listener_hostname_matching(world: &World) {
    routing_on(
        world,
        "httproute-listener-hostname-matching.yaml",
        &format!("{INFRA}/httproute-listener-hostname-matching"),
        &["backend-v1", "backend-v2", "backend-v3"],
        &[
            ("GET", "/", &[("Host", "bar.com")], V1),
            ("GET", "/", &[("Host", "foo.bar.com")], V2),
            ("GET", "/", &[("Host", "baz.bar.com")], V3),
            ("GET", "/", &[("Host", "boo.bar.com")], V3),
            ("GET", "/", &[("Host", "multiple.prefixes.bar.com")], V3),
            ("GET", "/", &[("Host", "multiple.prefixes.foo.com")], V3),
            ("GET", "/", &[("Host", "foo.com")], NOT_FOUND),
            ("GET", "/", &[("Host", "no.matching.host")], NOT_FOUND),
        ],
    )
    .await;
}

/// HTTPRouteHostnameIntersection: a route serves the intersection of its hostnames with its
/// listeners'; a route intersecting none is not accepted (NoMatchingListenerHostname) and
/// counted on no listener; a listener without a hostname takes the route's.
pub(crate) async fn http_route_hostname_intersection(world: &World) {
    let yaml = manifest("httproute-hostname-intersection.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/httproute-hostname-intersection");
    for route in [
        "specific-host-matches-listener-specific-host",
        "specific-host-matches-listener-wildcard-host",
        "wildcard-host-matches-listener-specific-host",
        "wildcard-host-matches-listener-wildcard-host",
    ] {
        world
            .route_accepted("HTTPRoute", &format!("{INFRA}/{route}"), &gateway)
            .await;
    }
    expect_all(
        world,
        &gateway,
        &[
            ("GET", "/s1", &[("Host", "very.specific.com")], V1),
            ("GET", "/s1", &[("Host", "very.specific.com:1234")], V1),
            ("GET", "/s1", &[("Host", "non.matching.com")], NOT_FOUND),
            (
                "GET",
                "/s1",
                &[("Host", "foo.nonmatchingwildcard.io")],
                NOT_FOUND,
            ),
            ("GET", "/s1", &[("Host", "foo.wildcard.io")], NOT_FOUND),
            (
                "GET",
                "/non-matching-prefix",
                &[("Host", "very.specific.com")],
                NOT_FOUND,
            ),
            ("GET", "/s2", &[("Host", "foo.wildcard.io")], V2),
            ("GET", "/s2", &[("Host", "bar.wildcard.io")], V2),
            ("GET", "/s2", &[("Host", "foo.bar.wildcard.io")], V2),
            ("GET", "/s2", &[("Host", "non.matching.com")], NOT_FOUND),
            ("GET", "/s2", &[("Host", "wildcard.io")], NOT_FOUND),
            ("GET", "/s2", &[("Host", "very.specific.com")], NOT_FOUND),
            (
                "GET",
                "/non-matching-prefix",
                &[("Host", "foo.wildcard.io")],
                NOT_FOUND,
            ),
            ("GET", "/s3", &[("Host", "very.specific.com")], V3),
            ("GET", "/s3", &[("Host", "non.matching.com")], NOT_FOUND),
            ("GET", "/s3", &[("Host", "foo.specific.com")], NOT_FOUND),
            ("GET", "/s3", &[("Host", "foo.wildcard.io")], NOT_FOUND),
            (
                "GET",
                "/non-matching-prefix",
                &[("Host", "very.specific.com")],
                NOT_FOUND,
            ),
            ("GET", "/s4", &[("Host", "foo.anotherwildcard.io")], V1),
            ("GET", "/s4", &[("Host", "bar.anotherwildcard.io")], V1),
            ("GET", "/s4", &[("Host", "foo.bar.anotherwildcard.io")], V1),
            ("GET", "/s4", &[("Host", "anotherwildcard.io")], NOT_FOUND),
            ("GET", "/s4", &[("Host", "foo.wildcard.io")], NOT_FOUND),
            ("GET", "/s4", &[("Host", "very.specific.com")], NOT_FOUND),
            (
                "GET",
                "/non-matching-prefix",
                &[("Host", "foo.anotherwildcard.io")],
                NOT_FOUND,
            ),
        ],
    )
    .await;
    world
        .route_condition(
            "HTTPRoute",
            &format!("{INFRA}/no-intersecting-hosts"),
            &gateway,
            ("Accepted", "False", "NoMatchingListenerHostname"),
        )
        .await;
    expect_all(
        world,
        &gateway,
        &[
            (
                "GET",
                "/s5",
                &[("Host", "specific.but.wrong.com")],
                NOT_FOUND,
            ),
            ("GET", "/s5", &[("Host", "wildcard.io")], NOT_FOUND),
        ],
    )
    .await;
    for (listener, routes) in [("listener-1", 2), ("listener-2", 1), ("listener-3", 1)] {
        for condition in [("Accepted", "True", ""), ("ResolvedRefs", "True", "")] {
            world
                .condition("Gateway", &gateway, Some(listener), condition)
                .await;
        }
        world.attached_routes(&gateway, listener, routes).await;
    }
    let all = format!("{INFRA}/httproute-hostname-intersection-all");
    world
        .route_accepted(
            "HTTPRoute",
            &format!("{INFRA}/httproute-hostname-intersection-all"),
            &all,
        )
        .await;
    expect_all(
        world,
        &all,
        &[
            ("GET", "/", &[("Host", "first.com")], V2),
            ("GET", "/", &[("Host", "sub.first.com")], V2),
            ("GET", "/", &[("Host", "second.com")], V2),
            ("GET", "/", &[("Host", "sub.second.com")], V2),
            ("GET", "/", &[("Host", "third.com")], NOT_FOUND),
            ("GET", "/", &[("Host", "sub.third.com")], NOT_FOUND),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteMultipleGateways: a route shared by two Gateways serves on both, beside each
/// Gateway's own.
pub(crate) async fn http_route_multiple_gateways(world: &World) {
    let yaml = manifest("httproute-multiple-gateways.yaml");
    world.apply_test(&yaml).await;
    let all = "gateway-conformance-infra/all-namespaces";
    for (gateway, own, backend) in [
        (SAME_NAMESPACE, "same-namespace-dedicated-route", V2),
        (all, "all-namespaces-dedicated-route", V3),
    ] {
        for route in ["multiple-gateways-shared-route", own] {
            world
                .route_accepted("HTTPRoute", &format!("{INFRA}/{route}"), gateway)
                .await;
        }
        expect_all(
            world,
            gateway,
            &[("GET", "/shared", &[], V1), ("GET", "/", &[], backend)],
        )
        .await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteListenerPortMatching: a route bound to a listener's port serves on that port's
/// listeners only, for their hostnames.
pub(crate) async fn http_route_listener_port_matching(world: &World) {
    let gateway = "gateway-conformance-infra/httproute-listener-port-matching";
    let yaml = world
        .routes_accepted(
            "httproute-listener-port-matching.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/backend-v1"),
                &format!("{INFRA}/backend-v2"),
                &format!("{INFRA}/backend-v3"),
            ],
            gateway,
        )
        .await;
    expect_on(
        world,
        gateway,
        80,
        &[("GET", "/", &[("Host", "foo.com")], V1)],
    )
    .await;
    expect_on(
        world,
        gateway,
        8080,
        &[
            ("GET", "/", &[("Host", "foo.com:8080")], V2),
            ("GET", "/", &[("Host", "bar.com:8080")], V2),
        ],
    )
    .await;
    expect_on(
        world,
        gateway,
        8090,
        &[
            ("GET", "/", &[("Host", "foo.com:8090")], V3),
            ("GET", "/", &[("Host", "bar.com:8090")], NOT_FOUND),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// GatewayHTTPListenerIsolation: a host is served by its most specific listener only, with or
/// without the routes' own hostnames intersecting the listeners'.
pub(crate) async fn gateway_http_listener_isolation(world: &World) {
    let cases: [Case; 16] = [
        ("GET", "/empty-hostname", &[("Host", "bar.com")], V1),
        (
            "GET",
            "/wildcard-example-com",
            &[("Host", "bar.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-foo-example-com",
            &[("Host", "bar.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/abc-foo-example-com",
            &[("Host", "bar.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/empty-hostname",
            &[("Host", "bar.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-example-com",
            &[("Host", "bar.example.com")],
            V1,
        ),
        (
            "GET",
            "/wildcard-foo-example-com",
            &[("Host", "bar.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/abc-foo-example-com",
            &[("Host", "bar.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/empty-hostname",
            &[("Host", "bar.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-example-com",
            &[("Host", "bar.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-foo-example-com",
            &[("Host", "bar.foo.example.com")],
            V1,
        ),
        (
            "GET",
            "/abc-foo-example-com",
            &[("Host", "bar.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/empty-hostname",
            &[("Host", "abc.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-example-com",
            &[("Host", "abc.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/wildcard-foo-example-com",
            &[("Host", "abc.foo.example.com")],
            NOT_FOUND,
        ),
        (
            "GET",
            "/abc-foo-example-com",
            &[("Host", "abc.foo.example.com")],
            V1,
        ),
    ];
    let yaml = [
        manifest("gateway-http-listener-isolation.yaml"),
        manifest("gateway-http-listener-isolation-with-hostname-intersection.yaml"),
    ]
    .join("---\n");
    world.apply_test(&yaml).await;
    for suffix in ["", "-with-hostname-intersection"] {
        let gateway = format!("{INFRA}/http-listener-isolation{suffix}");
        for route in [
            "attaches-to-empty-hostname",
            "attaches-to-wildcard-example-com",
            "attaches-to-wildcard-foo-example-com",
            "attaches-to-abc-foo-example-com",
        ] {
            world
                .route_accepted("HTTPRoute", &format!("{INFRA}/{route}{suffix}"), &gateway)
                .await;
        }
        expect_all(world, &gateway, &cases).await;
    }
    world.delete(&yaml).await;
}
