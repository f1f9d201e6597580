//! The Gateway API conformance suite (v1.6.1 and what followed on its main branch), its tests
//! transcribed — their manifests as data under `conformance/` (each file names its source),
//! their assertions in this file, test by test under the suite's short names — and run
//! through `fairlead up` with one real Envoy per Gateway (`fairlead_e2e::conformance`).

use fairlead_e2e::conformance::{Ask, Want, World, manifest};

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
    let want = [
        ("udp-backend-v1", 0.7),
        ("udp-backend-v2", 0.3),
        ("udp-backend-v3", 0.0),
    ];
    let mut last = String::new();
    for _ in 0..10 {
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        // Ten sessions at once (the suite's `concurrentRequests`), fifty times.
        for _ in 0..50 {
            let batch =
                futures::future::join_all((0..10).map(|_| world.udp_pod(gateway, 5300))).await;
            for pod in batch.into_iter().flatten() {
                let backend = pod.rsplitn(3, '-').nth(2).unwrap_or(&pod).to_owned();
                *counts.entry(backend).or_default() += 1;
            }
        }
        let total: usize = counts.values().sum();
        let holds = total == 500
            && want.iter().all(|(backend, share)| {
                let got = *counts.get(*backend).unwrap_or(&0) as f64 / 500.0;
                (got - share).abs() <= 0.05
            });
        if holds {
            world.delete(&yaml).await;
            return;
        }
        last = format!("{counts:?}");
    }
    panic!("UDP sessions never spread 70/30/0 within 5 points; last: {last}");
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

/// What a routing case expects: the infra backend that answers, or a status.
#[derive(Clone, Copy)]
enum Then {
    To(&'static str),
    Status(u16),
}

/// A routing case: method, path (and query), headers, what it gets.
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    Then,
);

/// Applies the test manifest `file` holding the HTTPRoute `route` on `same-namespace` and
/// runs its routing `cases` (the suite's `MakeRequestAndExpectEventuallyConsistentResponse`
/// over a table), removing the manifests at the end.
async fn routing(world: &World, file: &str, route: &str, cases: &[Case]) {
    let yaml = world
        .routes_accepted(
            file,
            "HTTPRoute",
            &[&format!("{INFRA}/{route}")],
            SAME_NAMESPACE,
        )
        .await;
    for (method, path, headers, then) in cases {
        let want = match then {
            Then::To(backend) => Want {
                backend: Some(*backend),
                namespace: INFRA,
                ..Want::default()
            },
            Then::Status(code) => Want {
                status: std::slice::from_ref(code),
                ..Want::default()
            },
        };
        world
            .expect(SAME_NAMESPACE, 80, Ask::new(method, headers, path), want)
            .await;
    }
    world.delete(&yaml).await;
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
}
