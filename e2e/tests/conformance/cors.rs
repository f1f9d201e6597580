//! The HTTPRoute CORS test.

use super::common::*;

/// HTTPRouteCORS: preflights answered for allowed origins (exact, a `*` label, any) with the
/// methods, headers, exposed headers, age and credentials the filter names; simple requests
/// get the origin back; other origins get no `access-control-allow-origin`.
pub(crate) async fn http_route_cors(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-cors.yaml",
            "HTTPRoute",
            &[
                "gateway-conformance-infra/cors-multiple-origins-methods-headers",
                "gateway-conformance-infra/cors-wildcard-methods",
                "gateway-conformance-infra/cors-wildcard-origin",
                "gateway-conformance-infra/cors-wildcard-methods-headers",
            ],
            SAME_NAMESPACE,
        )
        .await;
    const PREFLIGHT: &[u16] = &[200, 204];
    const ASKS_1_2: &str = "x-header-1, x-header-2";
    const HEADERS_1_2: &[&str] = &["x-header-1, x-header-2", "x-header-2, x-header-1"];
    const CREDENTIALS: &str = "access-control-allow-credentials";
    let full = |origins: &'static [&'static str]| -> [(&'static str, &'static [&'static str]); 6] {
        [
            ("access-control-allow-origin", origins),
            (
                "access-control-allow-methods",
                &["GET, OPTIONS", "OPTIONS, GET"],
            ),
            ("access-control-allow-headers", HEADERS_1_2),
            (
                "access-control-expose-headers",
                &["x-header-3, x-header-4", "x-header-4, x-header-3"],
            ),
            ("access-control-max-age", &["3600"]),
            (CREDENTIALS, &["true"]),
        ]
    };
    let (to_foo, to_bar, to_xpto) = (
        full(&["https://www.foo.com"]),
        full(&["https://www.bar.com"]),
        full(&["https://xpto.www.bar.com"]),
    );
    let preflight_get = |origin| {
        [
            ("Origin", origin),
            ("access-control-request-method", "GET"),
            ("access-control-request-headers", ASKS_1_2),
        ]
    };
    let (ask_foo, ask_bar, ask_xpto) = (
        preflight_get("https://www.foo.com"),
        preflight_get("https://www.bar.com"),
        preflight_get("https://xpto.www.bar.com"),
    );
    let other_get = [
        ("Origin", "https://foobar.com"),
        ("access-control-request-method", "GET"),
    ];
    let foo_post = [
        ("Origin", "https://www.foo.com"),
        ("access-control-request-method", "POST"),
    ];
    let foobar_put = [
        ("Origin", "https://foobar.com"),
        ("access-control-request-method", "PUT"),
    ];
    let foobar_port_put = [
        ("Origin", "https://foobar.com:12345"),
        ("access-control-request-method", "PUT"),
    ];
    let other_put_1_2 = [
        ("Origin", "https://other.foo.com"),
        ("access-control-request-method", "PUT"),
        ("access-control-request-headers", ASKS_1_2),
    ];
    let other = [("Origin", "https://other.foo.com")];
    let foobar = [("Origin", "https://foobar.com")];
    let foobar_port = [("Origin", "https://foobar.com:12345")];
    let from_infra = |headers, absent| Want {
        backend: Some("infra-backend-v1"),
        namespace: INFRA,
        headers,
        absent,
        ..Want::default()
    };
    let preflight = |headers, absent| Want {
        status: PREFLIGHT,
        headers,
        absent,
        ..Want::default()
    };
    let cases: Vec<(Ask<'_>, Want<'_>)> = vec![
        (
            Ask::new("OPTIONS", &ask_foo, "/cors-1"),
            preflight(&to_foo, &[]),
        ),
        (
            Ask::new("OPTIONS", &ask_bar, "/cors-1"),
            preflight(&to_bar, &[]),
        ),
        (
            Ask::new("OPTIONS", &ask_xpto, "/cors-1"),
            preflight(&to_xpto, &[]),
        ),
        (
            Ask::new("OPTIONS", &other_get, "/cors-1"),
            Want {
                status: &[200, 204, 403],
                absent: &["access-control-allow-origin"],
                ..Want::default()
            },
        ),
        (
            Ask::new("GET", &ask_foo, "/cors-1"),
            from_infra(
                &[("access-control-allow-origin", &["https://www.foo.com"])],
                &[],
            ),
        ),
        (
            Ask::new("GET", &ask_bar, "/cors-1"),
            from_infra(
                &[("access-control-allow-origin", &["https://www.bar.com"])],
                &[],
            ),
        ),
        (
            Ask::new("GET", &other_get, "/cors-1"),
            Want {
                status: &[200],
                absent: &["access-control-allow-origin"],
                ..Want::default()
            },
        ),
        (
            Ask::new("OPTIONS", &foo_post, "/cors-2"),
            preflight(
                &[
                    ("access-control-allow-methods", &["POST", "*"]),
                    ("access-control-allow-origin", &["https://www.foo.com"]),
                ],
                &[CREDENTIALS],
            ),
        ),
        (
            Ask::new("OPTIONS", &foobar_put, "/cors-wildcard-origin"),
            preflight(
                &[
                    ("access-control-allow-origin", &["https://foobar.com", "*"]),
                    ("access-control-allow-methods", &["PUT"]),
                ],
                &[CREDENTIALS],
            ),
        ),
        (
            Ask::new("OPTIONS", &foobar_port_put, "/cors-wildcard-origin"),
            preflight(
                &[
                    (
                        "access-control-allow-origin",
                        &["https://foobar.com:12345", "*"],
                    ),
                    ("access-control-allow-methods", &["PUT"]),
                ],
                &[CREDENTIALS],
            ),
        ),
        (
            Ask::new("PUT", &foobar_port, "/cors-wildcard-origin"),
            from_infra(
                &[(
                    "access-control-allow-origin",
                    &["https://foobar.com:12345", "*"],
                )],
                &[],
            ),
        ),
        (
            Ask::new("PUT", &foobar, "/cors-wildcard-origin"),
            from_infra(
                &[("access-control-allow-origin", &["https://foobar.com", "*"])],
                &[CREDENTIALS],
            ),
        ),
        (
            Ask::new("OPTIONS", &other_put_1_2, "/cors-wildcard-methods-headers"),
            preflight(
                &[
                    ("access-control-allow-origin", &["https://other.foo.com"]),
                    ("access-control-allow-methods", &["PUT"]),
                    ("access-control-allow-headers", HEADERS_1_2),
                    (CREDENTIALS, &["true"]),
                ],
                &[],
            ),
        ),
        (
            Ask::new(
                "OPTIONS",
                &other_put_1_2,
                "/cors-wildcard-methods-headers-unauth",
            ),
            preflight(
                &[
                    (
                        "access-control-allow-origin",
                        &["https://other.foo.com", "*"],
                    ),
                    ("access-control-allow-methods", &["PUT", "*"]),
                    (
                        "access-control-allow-headers",
                        &["x-header-1, x-header-2", "x-header-2, x-header-1", "*"],
                    ),
                ],
                &[CREDENTIALS],
            ),
        ),
        (
            Ask::new("GET", &other, "/cors-wildcard-methods-headers"),
            from_infra(
                &[
                    ("access-control-allow-origin", &["https://other.foo.com"]),
                    (CREDENTIALS, &["true"]),
                ],
                &[],
            ),
        ),
        (
            Ask::new("GET", &other, "/cors-wildcard-methods-headers-unauth"),
            from_infra(
                &[(
                    "access-control-allow-origin",
                    &["https://other.foo.com", "*"],
                )],
                &[CREDENTIALS],
            ),
        ),
    ];
    for (ask, want) in cases {
        world.expect(SAME_NAMESPACE, 80, ask, want).await;
    }
    world.delete(&yaml).await;
}
