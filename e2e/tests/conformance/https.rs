//! The HTTPS listener tests: routes over TLS, redirects from and to HTTPS, misdirected
//! requests.

use super::common::*;

/// HTTPRouteHTTPSListener: routes on an HTTPS listener answer for their hostnames, over TLS
/// with the listener's certificate; other hostnames get 404.
pub(crate) async fn http_route_https_listener(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-https-listener.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/httproute-https-test"),
                &format!("{INFRA}/httproute-https-test-no-hostname"),
            ],
            HTTPS_GATEWAY,
        )
        .await;
    for (host, status, backend) in [
        ("example.org", 200, Some("infra-backend-v1")),
        ("unknown-example.org", 404, None),
        ("second-example.org", 200, Some("infra-backend-v2")),
    ] {
        world
            .expect(
                HTTPS_GATEWAY,
                443,
                Ask::get("/").over(https_for(world, host)),
                Want {
                    status: &[status],
                    backend,
                    namespace: INFRA,
                    ..Want::default()
                },
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteRedirectPortAndScheme: a redirect's port follows its scheme (and the listener's
/// port when neither changes), written only when not the scheme's default.
pub(crate) async fn http_route_redirect_port_and_scheme(world: &World) {
    let yaml = manifest("httproute-redirect-port-and-scheme.yaml");
    world.apply_test(&yaml).await;
    let on_8080 = "gateway-conformance-infra/same-namespace-with-http-listener-on-8080";
    for (route, gateway) in [
        ("http-route-for-listener-on-port-80", SAME_NAMESPACE),
        ("http-route-for-listener-on-port-8080", on_8080),
        ("http-route-for-listener-on-port-443", HTTPS_GATEWAY),
    ] {
        world
            .route_accepted("HTTPRoute", &format!("{INFRA}/{route}"), gateway)
            .await;
    }
    const ORG: Option<&str> = Some("example.org");
    let to = |scheme, port| to_host(ORG, port, Some(scheme), None);
    let cases: [(&str, u16, &str, Redirect<'_>); 15] = [
        (
            SAME_NAMESPACE,
            80,
            "/scheme-nil-and-port-nil",
            to("http", None),
        ),
        (
            SAME_NAMESPACE,
            80,
            "/scheme-nil-and-port-80",
            to("http", None),
        ),
        (
            SAME_NAMESPACE,
            80,
            "/scheme-nil-and-port-8080",
            to("http", Some("8080")),
        ),
        (
            SAME_NAMESPACE,
            80,
            "/scheme-https-and-port-nil",
            to("https", None),
        ),
        (
            SAME_NAMESPACE,
            80,
            "/scheme-https-and-port-443",
            to("https", None),
        ),
        (
            SAME_NAMESPACE,
            80,
            "/scheme-https-and-port-8443",
            to("https", Some("8443")),
        ),
        (
            on_8080,
            8080,
            "/scheme-nil-and-port-nil",
            to("http", Some("8080")),
        ),
        (on_8080, 8080, "/scheme-nil-and-port-80", to("http", None)),
        (
            on_8080,
            8080,
            "/scheme-https-and-port-nil",
            to("https", None),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-nil-and-port-nil",
            to("https", None),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-nil-and-port-443",
            to("https", None),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-nil-and-port-8443",
            to("https", Some("8443")),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-http-and-port-nil",
            to("http", None),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-http-and-port-80",
            to("http", None),
        ),
        (
            HTTPS_GATEWAY,
            443,
            "/scheme-http-and-port-8080",
            to("http", Some("8080")),
        ),
    ];
    for (gateway, port, path, redirect) in cases {
        let ask = Ask::get(path);
        let ask = if port == 443 {
            ask.over(https_for(world, "example.org"))
        } else {
            ask
        };
        world
            .expect(
                gateway,
                port,
                ask,
                Want {
                    status: &[302],
                    redirect: Some(redirect),
                    ..Want::default()
                },
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteHTTPSListenerDetectMisdirectedRequests: over HTTP/2, a request whose host
/// another HTTPS listener of the port serves than the one its TLS server name picked gets
/// 421; a host of the same listener is served (or 404 without a route).
pub(crate) async fn http_route_https_listener_detect_misdirected_requests(world: &World) {
    let routes: Vec<String> = (1..=4)
        .map(|n| format!("{INFRA}/https-listener-detect-misdirected-requests-test-{n}"))
        .collect();
    let routes: Vec<&str> = routes.iter().map(String::as_str).collect();
    let yaml = world
        .routes_accepted(
            "httproute-https-listener-detect-misdirected-requests.yaml",
            "HTTPRoute",
            &routes,
            HTTPS_GATEWAY,
        )
        .await;
    const MISDIRECTED: Then = Then::Status(421);
    let cases = [
        ("example.org", "example.org", V1),
        ("example.org", "second-example.org", MISDIRECTED),
        ("example.org", "unknown-example.org", NOT_FOUND),
        ("second-example.org", "second-example.org", V2),
        ("second-example.org", "example.org", MISDIRECTED),
        ("second-example.org", "unknown-example.org", MISDIRECTED),
        (
            "third-example.wildcard.org",
            "third-example.wildcard.org",
            V3,
        ),
        (
            "third-example.wildcard.org",
            "fith-example.wildcard.org",
            V3,
        ),
        (
            "third-example.wildcard.org",
            "fourth-example.wildcard.org",
            MISDIRECTED,
        ),
        (
            "third-example.wildcard.org",
            "second-example.org",
            MISDIRECTED,
        ),
        (
            "third-example.wildcard.org",
            "unknown-example.org",
            MISDIRECTED,
        ),
        (
            "fourth-example.wildcard.org",
            "fourth-example.wildcard.org",
            V1,
        ),
        (
            "fourth-example.wildcard.org",
            "fith-example.wildcard.org",
            MISDIRECTED,
        ),
        ("unknown-example.org", "example.org", V1),
        ("unknown-example.org", "unknown-example.org", NOT_FOUND),
    ];
    for (server_name, host, then) in cases {
        let headers = [("Host", host)];
        let tls = Tls {
            http2: true,
            ..https_for(world, server_name)
        };
        world
            .expect(
                HTTPS_GATEWAY,
                443,
                Ask::new("GET", &headers, "/detect-misdirected-requests").over(tls),
                then.want(),
            )
            .await;
    }
    world.delete(&yaml).await;
}
