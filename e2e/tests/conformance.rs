//! The Gateway API conformance suite (v1.6.1 and what followed on its main branch), its tests
//! transcribed — their manifests as data under `conformance/` (each file names its source),
//! their assertions in this file, test by test under the suite's short names — and run
//! through `fairlead up` with one real Envoy per Gateway (`fairlead_e2e::conformance`).

use fairlead_e2e::conformance::{Ask, Redirect, Tls, Want, World, manifest, request, weighted};

const INFRA: &str = "gateway-conformance-infra";
const SAME_NAMESPACE: &str = "gateway-conformance-infra/same-namespace";

/// A fresh `uuid` for the suite's flaky backend: each probe is counted on its own.
fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs the suite's retry cases: for each (path, the flaky backend's query, the statuses
/// wanted), requests with a new `uuid` each until the answer holds.
async fn retries(world: &World, cases: &[(&str, &str, &[u16])]) {
    for (path, query, status) in cases {
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::each(|| format!("{path}?{query}&uuid={}", uuid())),
                Want {
                    status,
                    backend: Some("infra-backend-v3"),
                    namespace: INFRA,
                    ..Want::default()
                },
            )
            .await;
    }
}

/// HTTPRouteSimpleSameNamespace: a route in the Gateway's namespace reaches its backend.
async fn http_route_simple_same_namespace(world: &World) {
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
async fn http_route_cross_namespace(world: &World) {
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

/// HTTPRouteRetry: retried on the codes named, up to `attempts` retries; another code is
/// not retried; the last failure is what the client gets.
async fn http_route_retry(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries"],
            SAME_NAMESPACE,
        )
        .await;
    let three = "/retry/code-500-attempts-3";
    let all = "/retry/code-all-attempts-2";
    retries(
        world,
        &[
            (three, "responseCode=500&succeedAfter=2", &[200]),
            (three, "responseCode=500&succeedAfter=4", &[500]),
            (three, "responseCode=503&succeedAfter=2", &[503]),
            (all, "responseCode=500&succeedAfter=1", &[200]),
            (all, "responseCode=500&succeedAfter=3", &[500]),
            (all, "responseCode=502&succeedAfter=1", &[200]),
            (all, "responseCode=502&succeedAfter=3", &[502]),
            (all, "responseCode=503&succeedAfter=1", &[200]),
            (all, "responseCode=503&succeedAfter=3", &[503]),
            (all, "responseCode=504&succeedAfter=1", &[200]),
            (all, "responseCode=504&succeedAfter=3", &[504]),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRetryConnectionError: without codes, a dropped connection is retried.
async fn http_route_retry_connection_error(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry-connection-error.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries-connection-error"],
            SAME_NAMESPACE,
        )
        .await;
    let path = "/retry/no-status-code-attempts-3";
    retries(
        world,
        &[
            (path, "succeedAfter=2", &[200]),
            (path, "succeedAfter=4", &[500, 503]),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRetryWithTimeouts: a try that outlives `backendRequest` is retried; the retries
/// stay within `request`.
async fn http_route_retry_with_timeouts(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry-with-timeouts.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries-with-timeouts"],
            SAME_NAMESPACE,
        )
        .await;
    let backend = "/retry/backend-request-timeout-200ms";
    let request = "/retry/request-timeout-200ms";
    retries(
        world,
        &[
            (
                backend,
                "responseCode=500&succeedAfter=2&delayRetry=300ms",
                &[200],
            ),
            (
                backend,
                "responseCode=500&succeedAfter=3&delayRetry=300ms",
                &[504],
            ),
            (request, "responseCode=500&succeedAfter=1", &[200]),
            (
                request,
                "responseCode=500&succeedAfter=4&delayRetry=100ms",
                &[504],
            ),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// GatewayInvalidParametersRef: parameters the class does not take are refused.
async fn gateway_invalid_parameters_ref(world: &World) {
    let yaml = manifest("gateway-invalid-parameters-ref.yaml");
    world.apply(&yaml);
    world
        .gateway_condition(
            "gateway-conformance-infra/gateway-invalid-parameters-ref",
            "Accepted",
            "False",
            "InvalidParameters",
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteCORS: preflights answered for allowed origins (exact, a `*` label, any) with the
/// methods, headers, exposed headers, age and credentials the filter names; simple requests
/// get the origin back; other origins get no `access-control-allow-origin`.
async fn http_route_cors(world: &World) {
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

/// UDPRouteWeightedRouting: sessions spread over the backends as their weights say (70/30/0,
/// within 5 points of 500 sessions; ten tries, as the suite allows).
async fn udp_route_weighted_routing(world: &World) {
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

/// A listener's conditions when it is valid (the suite's `generateAcceptedListenerConditions`).
const VALID_LISTENER: [(&str, &str, &str); 3] = [
    ("ResolvedRefs", "True", ""),
    ("Accepted", "True", ""),
    ("Programmed", "True", ""),
];

/// A listener's conditions when it lost a conflict for `reason`.
fn conflicted(reason: &str) -> [(&str, &str, &str); 3] {
    [
        ("Accepted", "False", reason),
        ("Programmed", "False", reason),
        ("Conflicted", "True", reason),
    ]
}

/// A ListenerSet's conditions: accepted and programmed, or none of its listeners valid.
const SET_SERVED: [(&str, &str, &str); 2] = [
    ("Accepted", "True", ""),
    ("Programmed", "True", "Programmed"),
];
const SET_NOT_VALID: [(&str, &str, &str); 2] = [
    ("Accepted", "False", "ListenersNotValid"),
    ("Programmed", "False", "ListenersNotValid"),
];

/// A condition: type, status, reason (empty: any).
type Wanted<'a> = (&'a str, &'a str, &'a str);

/// A ListenerSet, its conditions, and its listeners' conditions.
type SetCheck<'a> = (String, &'a [Wanted<'a>], Vec<(&'a str, &'a [Wanted<'a>])>);

/// Waits for each of `conditions` on the `kind` `key` (its `listener`'s, when named).
async fn conditions(
    world: &World,
    kind: &str,
    key: &str,
    listener: Option<&str>,
    conditions: &[(&str, &str, &str)],
) {
    for condition in conditions {
        world.condition(kind, key, listener, *condition).await;
    }
}

/// ListenerSetHostnameConflict and ListenerSetProtocolConflict: a ListenerSet listener
/// repeating a hostname (or, on the same port, another protocol's class) of the Gateway or
/// of an older ListenerSet is admitted and reported Conflicted, Accepted=False and
/// Programmed=False; a ListenerSet none of whose listeners is valid is not accepted
/// (ListenersNotValid); the others serve, and the Gateway counts them.
async fn listener_set_conflicts(world: &World, conflict: &str) {
    let (file, reason) = match conflict {
        "hostname" => ("listenerset-hostname-conflict.yaml", "HostnameConflict"),
        _ => ("listenerset-protocol-conflict.yaml", "ProtocolConflict"),
    };
    let yaml = manifest(file);
    world.apply(&yaml);
    let key = |name: &str| format!("{INFRA}/{name}");
    let gateway = key(&format!("gateway-with-listenerset-{conflict}-conflict"));
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    for listener in [
        "gateway-listener".to_owned(),
        format!("{conflict}-conflict-with-gateway-listener"),
    ] {
        conditions(world, "Gateway", &gateway, Some(&listener), &VALID_LISTENER).await;
    }
    world.attached_listener_sets(&gateway, 2).await;
    let with_gateway = format!("{conflict}-conflict-with-gateway-listener");
    let with_set = format!("{conflict}-conflict-with-listener-set-listener");
    let lost = conflicted(reason);
    let set = |name: &str| key(&format!("listenerset-with-{conflict}-conflict-with-{name}"));
    let checks: [SetCheck<'_>; 4] = [
        (
            set("gateway-1"),
            &SET_SERVED[..],
            vec![
                ("listener-set-1-listener", &VALID_LISTENER[..]),
                (with_gateway.as_str(), &lost[..]),
                (with_set.as_str(), &VALID_LISTENER[..]),
            ],
        ),
        (
            set("gateway-2"),
            &SET_NOT_VALID[..],
            vec![(with_gateway.as_str(), &lost[..])],
        ),
        (
            set("listener-set-1"),
            &SET_SERVED[..],
            vec![
                ("listener-set-2-listener", &VALID_LISTENER[..]),
                (with_set.as_str(), &lost[..]),
            ],
        ),
        (
            set("listener-set-2"),
            &SET_NOT_VALID[..],
            vec![(with_set.as_str(), &lost[..])],
        ),
    ];
    for (set, set_conditions, listeners) in &checks {
        conditions(world, "ListenerSet", set, None, set_conditions).await;
        for (listener, wanted) in listeners {
            conditions(world, "ListenerSet", set, Some(listener), wanted).await;
        }
    }
    world.delete(&yaml).await;
}

/// What a routing case expects: the infra backend that answers, a backend of another
/// namespace, or a status.
#[derive(Clone, Copy)]
enum Then {
    To(&'static str),
    In(&'static str, &'static str),
    Status(u16),
}

impl Then {
    /// What the suite asks of the answer.
    fn want(&self) -> Want<'_> {
        match self {
            Then::To(backend) => Want {
                backend: Some(*backend),
                namespace: INFRA,
                ..Want::default()
            },
            Then::In(backend, namespace) => Want {
                backend: Some(*backend),
                namespace,
                ..Want::default()
            },
            Then::Status(code) => Want {
                status: std::slice::from_ref(code),
                ..Want::default()
            },
        }
    }
}

/// A routing case: method, path (and query), headers, what it gets.
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    Then,
);

/// Applies the test manifest `file` holding the HTTPRoute `route` on `same-namespace` and
/// runs its routing `cases` ([`routing_on`]).
async fn routing(world: &World, file: &str, route: &str, cases: &[Case]) {
    routing_on(world, file, SAME_NAMESPACE, &[route], cases).await;
}

/// Applies the test manifest `file` holding the HTTPRoutes `routes` (in the infra namespace)
/// on `gateway`, and runs its routing `cases` on the Gateway's port 80 (the suite's
/// `MakeRequestAndExpectEventuallyConsistentResponse` over a table; a `Host` among a case's
/// headers is the request's host), removing the manifests at the end.
async fn routing_on(world: &World, file: &str, gateway: &str, routes: &[&str], cases: &[Case]) {
    let keys: Vec<String> = routes.iter().map(|r| format!("{INFRA}/{r}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let yaml = world
        .routes_accepted(file, "HTTPRoute", &keys, gateway)
        .await;
    expect_all(world, gateway, cases).await;
    world.delete(&yaml).await;
}

/// Runs routing `cases` on `gateway`'s port 80.
async fn expect_all(world: &World, gateway: &str, cases: &[Case]) {
    expect_on(world, gateway, 80, cases).await;
}

/// Runs routing `cases` on `gateway`'s `port`.
async fn expect_on(world: &World, gateway: &str, port: u16, cases: &[Case]) {
    for (method, path, headers, then) in cases {
        let want = then.want();
        world
            .expect(gateway, port, Ask::new(method, headers, path), want)
            .await;
    }
}

const V1: Then = Then::To("infra-backend-v1");
const V2: Then = Then::To("infra-backend-v2");
const V3: Then = Then::To("infra-backend-v3");
const NOT_FOUND: Then = Then::Status(404);

/// HTTPRouteExactPathMatching.
async fn http_route_exact_path_matching(world: &World) {
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
async fn http_route_header_matching(world: &World) {
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
async fn http_route_query_param_matching(world: &World) {
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
async fn http_route_method_matching(world: &World) {
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

/// A header case: path, headers sent, headers the backend sees, headers it does not.
type HeaderCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
);

/// HTTPRouteRequestHeaderModifier: set overwrites, add appends, remove removes, names
/// compared without case.
async fn http_route_request_header_modifier(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-request-header-modifier.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/request-header-modifier"],
            SAME_NAMESPACE,
        )
        .await;
    let cases: [HeaderCase<'_>; 7] = [
        (
            "/set",
            &[("Some-Other-Header", "val")],
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            &[],
        ),
        (
            "/set",
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "some-other-value"),
            ],
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            &[],
        ),
        (
            "/add",
            &[("Some-Other-Header", "val")],
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "add-appends-values"),
            ],
            &[],
        ),
        (
            "/add",
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "some-other-value"),
            ],
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "some-other-value,add-appends-values"),
            ],
            &[],
        ),
        (
            "/remove",
            &[("X-Header-Remove", "val")],
            &[],
            &["X-Header-Remove"],
        ),
        (
            "/multiple",
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("X-Header-Add-3", "header-add-3"),
                ("Another-Header", "another-header-val"),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        (
            "/case-insensitivity",
            &[
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("Another-Header", "another-header-val"),
            ],
            &["x-header-remove", "X-Header-Remove"],
        ),
    ];
    for (path, sent, seen, unseen) in cases {
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::new("GET", sent, path),
                Want {
                    backend: Some("infra-backend-v1"),
                    namespace: INFRA,
                    seen,
                    unseen,
                    ..Want::default()
                },
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteMatching: path prefixes by segment, or a header, in one rule.
async fn http_route_matching(world: &World) {
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
async fn http_route_matching_across_routes(world: &World) {
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
async fn http_route_path_match_order(world: &World) {
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
async fn http_route_listener_hostname_matching(world: &World) {
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
async fn http_route_hostname_intersection(world: &World) {
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

/// The pod of `gateway`'s port 80 that answers `GET /` (`headers` sent), if it answers 200.
async fn answering_pod(world: &World, gateway: &str, headers: &[(&str, &str)]) -> Option<String> {
    let address = world.gateway(gateway, 80);
    let got = request(&address, &address, "GET", headers, "/").await?;
    (got.status == 200).then_some(got.echoed?.pod)
}

/// HTTPRouteWeight: requests spread over the backends as their weights say (70/30/0).
async fn http_route_weight(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-weight.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/weighted-backends")],
            SAME_NAMESPACE,
        )
        .await;
    world
        .expect(SAME_NAMESPACE, 80, Ask::get("/"), Want::default())
        .await;
    weighted(
        || answering_pod(world, SAME_NAMESPACE, &[]),
        &[
            ("infra-backend-v1", 0.7),
            ("infra-backend-v2", 0.3),
            ("infra-backend-v3", 0.0),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRequestHeaderModifierBackendWeights: each backend's own header filter applies to
/// the requests it gets, and only to those.
async fn http_route_request_header_modifier_backend_weights(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-request-header-modifier-backend-weights.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/request-header-modifier-backend-weights")],
            SAME_NAMESPACE,
        )
        .await;
    world
        .expect(SAME_NAMESPACE, 80, Ask::get("/"), Want::default())
        .await;
    let address = world.gateway(SAME_NAMESPACE, 80);
    for _ in 0..100 {
        let got = request(&address, &address, "GET", &[], "/")
            .await
            .expect("an answer");
        let echoed = got.echoed.expect("the backend's echo");
        let set: Vec<&String> = echoed
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("Backend"))
            .flat_map(|(_, values)| values)
            .collect();
        assert_eq!(set.len(), 1, "one Backend header: {echoed:?}");
        assert!(
            echoed.pod.starts_with(set[0].as_str()),
            "the backend's own filter set its name: {echoed:?}"
        );
    }
    world.delete(&yaml).await;
}

/// A response header case: path, request headers, response headers the backend sets (its
/// `X-Echo-Set-Header`), response headers wanted, response headers absent.
type ResponseHeaderCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a [(&'a str, &'a [&'a str])],
    &'a [&'a str],
);

/// HTTPRouteResponseHeaderModifier: set, add and remove on the backend's answer, names
/// compared without case; with a request header modifier in the same rule.
async fn http_route_response_header_modifier(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-response-header-modifier.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/response-header-modifier")],
            SAME_NAMESPACE,
        )
        .await;
    let cases: [ResponseHeaderCase<'_>; 7] = [
        (
            "/set",
            &[],
            "Some-Other-Header:val",
            &[
                ("Some-Other-Header", &["val"]),
                ("X-Header-Set", &["set-overwrites-values"]),
            ],
            &[],
        ),
        (
            "/set",
            &[],
            "Some-Other-Header:val,X-Header-Set:some-other-value",
            &[
                ("Some-Other-Header", &["val"]),
                ("X-Header-Set", &["set-overwrites-values"]),
            ],
            &[],
        ),
        (
            "/add",
            &[],
            "Some-Other-Header:val",
            &[
                ("Some-Other-Header", &["val"]),
                ("X-Header-Add", &["add-appends-values"]),
            ],
            &[],
        ),
        (
            "/add",
            &[],
            "Some-Other-Header:val,X-Header-Add:some-other-value",
            &[
                ("Some-Other-Header", &["val"]),
                ("X-Header-Add", &["some-other-value,add-appends-values"]),
            ],
            &[],
        ),
        (
            "/remove",
            &[],
            "X-Header-Remove:val",
            &[],
            &["X-Header-Remove"],
        ),
        (
            "/multiple",
            &[],
            "X-Header-Set-2:set-val-2,X-Header-Add-2:add-val-2,X-Header-Remove-2:remove-val-2,\
             Another-Header:another-header-val,X-Header-Remove-1:val",
            &[
                ("X-Header-Set-1", &["header-set-1"]),
                ("X-Header-Set-2", &["header-set-2"]),
                ("X-Header-Add-1", &["header-add-1"]),
                ("X-Header-Add-2", &["add-val-2,header-add-2"]),
                ("X-Header-Add-3", &["header-add-3"]),
                ("Another-Header", &["another-header-val"]),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        (
            "/case-insensitivity",
            &[],
            "x-header-set:original-val-set,x-header-add:original-val-add,\
             x-header-remove:original-val-remove,Another-Header:another-header-val",
            &[
                ("X-Header-Set", &["header-set"]),
                ("X-Header-Add", &["original-val-add,header-add"]),
                ("X-Lowercase-Add", &["lowercase-add"]),
                ("X-Mixedcase-Add-1", &["mixedcase-add-1"]),
                ("X-Mixedcase-Add-2", &["mixedcase-add-2"]),
                ("X-Uppercase-Add", &["uppercase-add"]),
                ("Another-Header", &["another-header-val"]),
            ],
            &["x-header-remove", "X-Header-Remove"],
        ),
    ];
    for (path, sent, backend_sets, headers, absent) in cases {
        let mut sent = sent.to_vec();
        sent.push(("X-Echo-Set-Header", backend_sets));
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::new("GET", &sent, path),
                Want {
                    backend: Some("infra-backend-v1"),
                    namespace: INFRA,
                    headers,
                    absent,
                    ..Want::default()
                },
            )
            .await;
    }
    world
        .expect(
            SAME_NAMESPACE,
            80,
            Ask::new(
                "GET",
                &[
                    ("X-Header-Remove", "remove-val"),
                    ("X-Header-Add-Append", "append-val-1"),
                    ("X-Header-Echo", "echo"),
                    (
                        "X-Echo-Set-Header",
                        "X-Header-Set-2:set-val-2,X-Header-Add-2:add-val-2,\
                         X-Header-Remove-2:remove-val-2,Another-Header:another-header-val,\
                         X-Header-Remove-1:remove-val-1,X-Header-Echo:echo",
                    ),
                ],
                "/response-and-request-header-modifiers",
            ),
            Want {
                backend: Some("infra-backend-v1"),
                namespace: INFRA,
                path: Some("/response-and-request-header-modifiers"),
                seen: &[
                    ("X-Header-Add", "header-val-1"),
                    ("X-Header-Set", "set-overwrites-values"),
                    ("X-Header-Add-Append", "append-val-1,header-val-2"),
                    ("X-Header-Echo", "echo"),
                ],
                unseen: &["X-Header-Remove"],
                headers: &[
                    ("X-Header-Set-1", &["header-set-1"]),
                    ("X-Header-Set-2", &["header-set-2"]),
                    ("X-Header-Add-1", &["header-add-1"]),
                    ("X-Header-Add-2", &["add-val-2,header-add-2"]),
                    ("Another-Header", &["another-header-val"]),
                    ("X-Header-Echo", &["echo"]),
                ],
                absent: &["X-Header-Remove-1", "X-Header-Remove-2"],
                ..Want::default()
            },
        )
        .await;
    world.delete(&yaml).await;
}

/// A redirect case: method, path, the status, where it sends the client.
type RedirectCase<'a> = (&'a str, &'a str, u16, Redirect<'a>);

/// Applies `file`'s HTTPRoute `route` and checks where its redirects send the client (the
/// redirect is not followed).
async fn redirects(world: &World, file: &str, route: &str, cases: &[RedirectCase<'_>]) {
    let yaml = world
        .routes_accepted(
            file,
            "HTTPRoute",
            &[&format!("{INFRA}/{route}")],
            SAME_NAMESPACE,
        )
        .await;
    for (method, path, status, redirect) in cases {
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::new(method, &[], path),
                Want {
                    status: std::slice::from_ref(status),
                    redirect: Some(*redirect),
                    ..Want::default()
                },
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// A redirect to `path`.
const fn to_path(path: &str) -> Redirect<'_> {
    Redirect {
        scheme: None,
        host: None,
        port: None,
        path: Some(path),
    }
}

/// A redirect to `host`, with `port`, `scheme` and `path` when given.
const fn to_host<'a>(
    host: Option<&'a str>,
    port: Option<&'a str>,
    scheme: Option<&'a str>,
    path: Option<&'a str>,
) -> Redirect<'a> {
    Redirect {
        scheme,
        host,
        port,
        path,
    }
}

/// HTTPRouteRedirectPath, HTTPRouteRedirectPort, HTTPRouteRedirectScheme,
/// HTTPRouteRedirectHostAndStatus, HTTPRoute303Redirect, HTTPRoute307Redirect and
/// HTTPRoute308Redirect.
async fn http_route_redirects(world: &World) {
    const ORG: Option<&str> = Some("example.org");
    const PORT: Option<&str> = Some("8083");
    const HTTPS: Option<&str> = Some("https");
    redirects(
        world,
        "httproute-redirect-path.yaml",
        "redirect-path",
        &[
            (
                "GET",
                "/original-prefix/lemon",
                302,
                to_path("/replacement-prefix/lemon"),
            ),
            (
                "GET",
                "/full/path/original",
                302,
                to_path("/full-path-replacement"),
            ),
            (
                "GET",
                "/path-and-host",
                302,
                to_host(ORG, None, None, Some("/replacement-prefix")),
            ),
            (
                "GET",
                "/path-and-status",
                301,
                to_path("/replacement-prefix"),
            ),
            (
                "GET",
                "/full-path-and-host",
                302,
                to_host(ORG, None, None, Some("/replacement-full")),
            ),
            (
                "GET",
                "/full-path-and-status",
                301,
                to_path("/replacement-full"),
            ),
        ],
    )
    .await;
    redirects(
        world,
        "httproute-redirect-port.yaml",
        "redirect-port",
        &[
            ("GET", "/port", 302, to_host(None, PORT, None, None)),
            ("GET", "/port-and-host", 302, to_host(ORG, PORT, None, None)),
            (
                "GET",
                "/port-and-status",
                301,
                to_host(None, PORT, None, None),
            ),
            (
                "GET",
                "/port-and-host-and-status",
                302,
                to_host(ORG, PORT, None, None),
            ),
        ],
    )
    .await;
    redirects(
        world,
        "httproute-redirect-scheme.yaml",
        "redirect-scheme",
        &[
            ("GET", "/scheme", 302, to_host(None, None, HTTPS, None)),
            (
                "GET",
                "/scheme-and-host",
                302,
                to_host(ORG, None, HTTPS, None),
            ),
            (
                "GET",
                "/scheme-and-status",
                301,
                to_host(None, None, HTTPS, None),
            ),
            (
                "GET",
                "/scheme-and-host-and-status",
                302,
                to_host(ORG, None, HTTPS, None),
            ),
        ],
    )
    .await;
    redirects(
        world,
        "httproute-redirect-host-and-status.yaml",
        "redirect-host-and-status",
        &[
            (
                "GET",
                "/hostname-redirect",
                302,
                to_host(ORG, None, None, None),
            ),
            (
                "GET",
                "/host-and-status",
                301,
                to_host(ORG, None, None, None),
            ),
        ],
    )
    .await;
    for (file, route, method, path, status) in [
        (
            "httproute-303-redirect.yaml",
            "303-redirect",
            "POST",
            "/see-other",
            303,
        ),
        (
            "httproute-307-redirect.yaml",
            "307-redirect",
            "GET",
            "/temporary",
            307,
        ),
        (
            "httproute-308-redirect.yaml",
            "308-redirect",
            "GET",
            "/permanent",
            308,
        ),
    ] {
        redirects(world, file, route, &[(method, path, status, to_path(path))]).await;
    }
}

/// A rewrite case: path and host asked, headers sent; the backend that answers, the path and
/// host it sees (`None`: the gateway's address), headers it sees and does not.
type RewriteCase<'a> = (
    &'a str,
    Option<&'a str>,
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a str,
    Option<&'a str>,
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
);

/// Applies `file`'s HTTPRoute `route` and checks what its backends see.
async fn rewrites(world: &World, file: &str, route: &str, cases: &[RewriteCase<'_>]) {
    let yaml = world
        .routes_accepted(
            file,
            "HTTPRoute",
            &[&format!("{INFRA}/{route}")],
            SAME_NAMESPACE,
        )
        .await;
    for (path, asked_host, sent, backend, seen_path, seen_host, seen, unseen) in cases {
        let mut sent = sent.to_vec();
        if let Some(h) = asked_host {
            sent.push(("Host", h));
        }
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::new("GET", &sent, path),
                Want {
                    backend: Some(backend),
                    namespace: INFRA,
                    path: Some(seen_path),
                    host: *seen_host,
                    seen,
                    unseen,
                    ..Want::default()
                },
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteRewritePath and HTTPRouteRewriteHost: the prefix or the whole path replaced, the
/// host replaced; with header modifiers in the same rule.
async fn http_route_rewrites(world: &World) {
    const MODIFY: &[(&str, &str)] = &[
        ("X-Header-Remove", "remove-val"),
        ("X-Header-Add-Append", "append-val-1"),
        ("X-Header-Set", "set-val"),
    ];
    const MODIFIED: &[(&str, &str)] = &[
        ("X-Header-Add", "header-val-1"),
        ("X-Header-Add-Append", "append-val-1,header-val-2"),
        ("X-Header-Set", "set-overwrites-values"),
    ];
    const REMOVED: &[&str] = &["X-Header-Remove"];
    const V1: &str = "infra-backend-v1";
    const V2: &str = "infra-backend-v2";
    rewrites(
        world,
        "httproute-rewrite-path.yaml",
        "rewrite-path",
        &[
            ("/prefix/one/two", None, &[], V1, "/one/two", None, &[], &[]),
            (
                "/strip-prefix/three",
                None,
                &[],
                V1,
                "/three",
                None,
                &[],
                &[],
            ),
            ("/strip-prefix", None, &[], V1, "/", None, &[], &[]),
            ("/full/one/two", None, &[], V1, "/one", None, &[], &[]),
            (
                "/full/rewrite-path-and-modify-headers/test",
                None,
                MODIFY,
                V1,
                "/test",
                None,
                MODIFIED,
                REMOVED,
            ),
            (
                "/prefix/rewrite-path-and-modify-headers/one",
                None,
                MODIFY,
                V1,
                "/prefix/one",
                None,
                MODIFIED,
                REMOVED,
            ),
        ],
    )
    .await;
    const REWRITE: Option<&str> = Some("rewrite.example");
    rewrites(
        world,
        "httproute-rewrite-host.yaml",
        "rewrite-host",
        &[
            (
                "/one",
                REWRITE,
                &[],
                V1,
                "/one",
                Some("one.example.org"),
                &[],
                &[],
            ),
            (
                "/two",
                REWRITE,
                &[],
                V2,
                "/two",
                Some("example.org"),
                &[],
                &[],
            ),
            (
                "/rewrite-host-and-modify-headers",
                REWRITE,
                &MODIFY[..2],
                V2,
                "/rewrite-host-and-modify-headers",
                Some("test.example.org"),
                MODIFIED,
                REMOVED,
            ),
        ],
    )
    .await;
}

/// HTTPRouteTimeoutRequest and HTTPRouteTimeoutBackendRequest: a slower answer gets 504, a
/// timeout of 0 none.
async fn http_route_timeouts(world: &World) {
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
async fn http_route_named_rule(world: &World) {
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

const SERVER_ERROR: Then = Then::Status(500);

/// A route of `file`, accepted by `same-namespace` with a reference that does not resolve
/// (ResolvedRefs=False for `reason`): the rules it names answer 500, the others serve.
async fn unresolved(world: &World, file: &str, route: &str, reason: &str, cases: &[Case]) {
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
async fn http_route_unresolved_backends(world: &World) {
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
async fn not_attached(world: &World, file: &str, route: &str, gateway: &str, reason: &str) {
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
async fn http_route_not_attached(world: &World) {
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
async fn http_route_reference_grant(world: &World) {
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

/// HTTPRouteOmittedBackendRefs: a rule without backends (omitted or empty) answers 500.
async fn http_route_omitted_backend_refs(world: &World) {
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

/// HTTPRouteMultipleGateways: a route shared by two Gateways serves on both, beside each
/// Gateway's own.
async fn http_route_multiple_gateways(world: &World) {
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
async fn http_route_listener_port_matching(world: &World) {
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

const HTTPS_GATEWAY: &str = "gateway-conformance-infra/same-namespace-with-https-listener";

/// The suite's requests to `HTTPS_GATEWAY` for `host`: its server name, trusting the
/// listeners' certificate.
fn https_for<'a>(world: &'a World, host: &'a str) -> Tls<'a> {
    Tls {
        server_name: host,
        trust: &world
            .secrets
            .get("gateway-conformance-infra/tls-validity-checks-certificate")
            .cert_pem,
        client: None,
        http2: false,
    }
}

/// HTTPRouteHTTPSListener: routes on an HTTPS listener answer for their hostnames, over TLS
/// with the listener's certificate; other hostnames get 404.
async fn http_route_https_listener(world: &World) {
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
async fn http_route_redirect_port_and_scheme(world: &World) {
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

/// A Gateway's `https` listener, its conditions and no attached route (the suite's
/// `GatewayStatusMustHaveListeners` for one listener).
async fn https_listener(world: &World, gateway: &str, conditions: &[Wanted<'_>]) {
    for condition in conditions {
        world
            .condition("Gateway", gateway, Some("https"), *condition)
            .await;
    }
    world.attached_routes(gateway, "https", 0).await;
}

/// GatewaySecretInvalidReferenceGrant, GatewaySecretMissingReferenceGrant,
/// GatewaySecretReferenceGrantAllInNamespace, GatewaySecretReferenceGrantSpecific and
/// GatewayInvalidTLSConfiguration: a certificate in another namespace is used only with a
/// grant (all Secrets of the namespace, or the one); without one, or with one that grants
/// something else, the listener is ResolvedRefs=False (RefNotPermitted); a certificate
/// reference that does not resolve (missing, another group or kind, malformed) is
/// InvalidCertificateRef.
async fn gateway_certificate_references(world: &World) {
    const NOT_PERMITTED: [Wanted<'_>; 1] = [("ResolvedRefs", "False", "RefNotPermitted")];
    const RESOLVED: [Wanted<'_>; 2] = [
        ("Programmed", "True", "Programmed"),
        ("ResolvedRefs", "True", ""),
    ];
    for (name, conditions) in [
        ("gateway-secret-invalid-reference-grant", &NOT_PERMITTED[..]),
        ("gateway-secret-missing-reference-grant", &NOT_PERMITTED[..]),
        (
            "gateway-secret-reference-grant-all-in-namespace",
            &RESOLVED[..],
        ),
        ("gateway-secret-reference-grant-specific", &RESOLVED[..]),
    ] {
        let yaml = manifest(&format!("{name}.yaml"));
        world.apply(&yaml);
        https_listener(world, &format!("{INFRA}/{name}"), conditions).await;
        world.delete(&yaml).await;
    }
    let yaml = manifest("gateway-invalid-tls-configuration.yaml");
    world.apply(&yaml);
    for name in [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
        "gateway-certificate-malformed-secret",
    ] {
        https_listener(
            world,
            &format!("{INFRA}/{name}"),
            &[("ResolvedRefs", "False", "InvalidCertificateRef")],
        )
        .await;
    }
    world.delete(&yaml).await;
}

/// A client of the suite's frontend-validation tests: the HTTPS listeners' certificate
/// trusted, for `host`, presenting the client certificate of the Secret `client` (none when
/// `None`).
fn client_of<'a>(world: &'a World, host: &'a str, client: Option<&str>) -> Tls<'a> {
    Tls {
        client: client.map(|name| {
            let certified = world.secrets.get(&format!("{INFRA}/{name}"));
            (certified.cert_pem.as_str(), certified.key_pem.as_str())
        }),
        ..https_for(world, host)
    }
}

const DEFAULT_CLIENT: Option<&str> = Some("tls-validity-checks-client-certificate");
const PER_PORT_CLIENT: Option<&str> = Some("tls-validity-checks-per-port-client-certificate");

/// `GET /` of `host` on `gateway`'s `port` with `client`'s certificate answered by `backend`.
async fn served_to(
    world: &World,
    gateway: &str,
    (port, host): (u16, &str),
    client: Option<&str>,
    backend: &str,
) {
    world
        .expect(
            gateway,
            port,
            Ask::get("/").over(client_of(world, host, client)),
            Want {
                backend: Some(backend),
                namespace: INFRA,
                ..Want::default()
            },
        )
        .await;
}

/// GatewayFrontendClientCertificateValidation: a port asks for a client certificate chaining
/// to its CAs (its own per port, or the default); a certificate of another CA is refused.
async fn gateway_with_client_certificate_validation(world: &World) {
    let gateway = format!("{INFRA}/client-validation-default");
    let yaml = world
        .routes_accepted(
            "gateway-with-clientcertificate-validation.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/client-certificate-validation-https-test"),
                &format!("{INFRA}/client-certificate-validation-https-test-no-hostname"),
            ],
            &gateway,
        )
        .await;
    let (default_port, per_port) = ((443, "example.org"), (8443, "second-example.org"));
    served_to(
        world,
        &gateway,
        default_port,
        DEFAULT_CLIENT,
        "infra-backend-v1",
    )
    .await;
    world
        .expect_failure(
            &gateway,
            443,
            Ask::get("/").over(client_of(world, "example.org", PER_PORT_CLIENT)),
        )
        .await;
    served_to(
        world,
        &gateway,
        per_port,
        PER_PORT_CLIENT,
        "infra-backend-v2",
    )
    .await;
    world
        .expect_failure(
            &gateway,
            8443,
            Ask::get("/").over(client_of(world, "second-example.org", DEFAULT_CLIENT)),
        )
        .await;
    world.delete(&yaml).await;
}

/// GatewayFrontendClientCertificateValidationInsecureFallback: with `AllowInsecureFallback`
/// clients with the port's certificate, another's, or none are all served, and the Gateway
/// says so (InsecureFrontendValidationMode).
async fn gateway_client_certificate_insecure_fallback(world: &World) {
    let gateway = format!("{INFRA}/client-validation-insecure-fallback");
    let yaml = world
        .routes_accepted(
            "gateway-with-clientcertificate-validation-insecure-fallback.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/client-cert-validation-insecure-fallback-test"),
                &format!("{INFRA}/client-cert-validation-insecure-fallback-test-no-hostname"),
            ],
            &gateway,
        )
        .await;
    world
        .condition(
            "Gateway",
            &gateway,
            None,
            (
                "InsecureFrontendValidationMode",
                "True",
                "ConfigurationChanged",
            ),
        )
        .await;
    for (port, backend) in [
        ((443, "example.org"), "infra-backend-v1"),
        ((8443, "second-example.org"), "infra-backend-v2"),
    ] {
        for client in [DEFAULT_CLIENT, PER_PORT_CLIENT, None] {
            served_to(world, &gateway, port, client, backend).await;
        }
    }
    world.delete(&yaml).await;
}

/// The conditions of a listener whose CA references do not resolve, for `reason`.
fn no_valid_ca(reason: &str) -> [Wanted<'_>; 3] {
    [
        ("ResolvedRefs", "False", reason),
        ("Accepted", "False", "NoValidCACertificate"),
        ("Programmed", "False", ""),
    ]
}

/// GatewayInvalidFrontendClientCertificateValidation and
/// GatewayFrontendInvalidDefaultClientCertificateValidation: a port whose CA reference does
/// not resolve (missing, another kind, another namespace without a grant) is not accepted and
/// not served; the other ports, and a plain HTTP port, serve.
async fn gateway_invalid_client_certificate_validation(world: &World) {
    let yaml = manifest("gateway-with-invalid-clientcertificate-validation.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-with-invalid-client-cert-validation");
    conditions(world, "Gateway", &gateway, Some("https"), &VALID_LISTENER).await;
    for (listener, reason) in [
        ("https-unresolved", "InvalidCACertificateRef"),
        ("https-invalid-kind", "InvalidCACertificateKind"),
        ("https-grant-missing", "RefNotPermitted"),
    ] {
        conditions(
            world,
            "Gateway",
            &gateway,
            Some(listener),
            &no_valid_ca(reason),
        )
        .await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("gateway-invalid-default-frontend-client-certificate-validation.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/invalid-default-client-validation-config");
    conditions(world, "Gateway", &gateway, Some("http"), &VALID_LISTENER).await;
    expect_all(
        world,
        &gateway,
        &[("GET", "/", &[("Host", "example.org")], V1)],
    )
    .await;
    conditions(
        world,
        "Gateway",
        &gateway,
        Some("https"),
        &no_valid_ca("InvalidCACertificateRef"),
    )
    .await;
    world
        .expect_failure(
            &gateway,
            443,
            Ask::get("/").over(https_for(world, "example.org")),
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteHTTPSListenerDetectMisdirectedRequests: over HTTP/2, a request whose host
/// another HTTPS listener of the port serves than the one its TLS server name picked gets
/// 421; a host of the same listener is served (or 404 without a route).
async fn http_route_https_listener_detect_misdirected_requests(world: &World) {
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

/// The HTTP profile's tests transcribed so far, one world, one after the other (as the suite
/// runs them), each removing its manifests at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_api_conformance_suite_passes_through_real_envoy() {
    let world = World::start().await;
    http_route_simple_same_namespace(&world).await;
    http_route_cross_namespace(&world).await;
    http_route_retry(&world).await;
    http_route_retry_connection_error(&world).await;
    http_route_retry_with_timeouts(&world).await;
    gateway_invalid_parameters_ref(&world).await;
    http_route_cors(&world).await;
    udp_route_weighted_routing(&world).await;
    listener_set_conflicts(&world, "hostname").await;
    listener_set_conflicts(&world, "protocol").await;
    http_route_exact_path_matching(&world).await;
    http_route_header_matching(&world).await;
    http_route_query_param_matching(&world).await;
    http_route_method_matching(&world).await;
    http_route_request_header_modifier(&world).await;
    http_route_matching(&world).await;
    http_route_matching_across_routes(&world).await;
    http_route_path_match_order(&world).await;
    http_route_listener_hostname_matching(&world).await;
    http_route_hostname_intersection(&world).await;
    http_route_weight(&world).await;
    http_route_request_header_modifier_backend_weights(&world).await;
    http_route_response_header_modifier(&world).await;
    http_route_redirects(&world).await;
    http_route_rewrites(&world).await;
    http_route_timeouts(&world).await;
    http_route_named_rule(&world).await;
    http_route_unresolved_backends(&world).await;
    http_route_not_attached(&world).await;
    http_route_reference_grant(&world).await;
    http_route_omitted_backend_refs(&world).await;
    http_route_multiple_gateways(&world).await;
    http_route_listener_port_matching(&world).await;
    http_route_https_listener(&world).await;
    http_route_redirect_port_and_scheme(&world).await;
    gateway_certificate_references(&world).await;
    gateway_with_client_certificate_validation(&world).await;
    gateway_client_certificate_insecure_fallback(&world).await;
    gateway_invalid_client_certificate_validation(&world).await;
    http_route_https_listener_detect_misdirected_requests(&world).await;
}
