//! The HTTPRoute filter tests: header modifiers (of the rule and of a backend), weights,
//! redirects, rewrites.

use super::common::*;

/// Waits until `GET target` with the headers `sent` is answered by infra-backend-v1, which
/// saw the headers `seen` and none of `unseen`.
async fn expect_v1_sees(
    world: &World,
    target: &str,
    sent: &[(&str, &str)],
    seen: &[(&str, &str)],
    unseen: &[&str],
) {
    world
        .expect(
            SAME_NAMESPACE,
            80,
            Ask::new("GET", sent, target),
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

/// The headers the suite's header-modifying rules are sent (the last one only by some), what
/// the backend must see of them, and what it must not.
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

/// A header case: path, headers sent, headers the backend sees, headers it does not.
pub(crate) type HeaderCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
);

/// HTTPRouteRequestHeaderModifier and HTTPRouteBackendRequestHeaderModifier (the same
/// filters on the rule, then on its backend): set overwrites, add appends, remove removes,
/// names compared without case.
pub(crate) async fn http_route_request_header_modifiers(world: &World) {
    for file in [
        "httproute-request-header-modifier.yaml",
        "httproute-request-header-modifier-backend.yaml",
    ] {
        http_route_request_header_modifier(world, file).await;
    }
}

/// One of [`http_route_request_header_modifiers`].
async fn http_route_request_header_modifier(world: &World, file: &str) {
    let yaml = world
        .routes_accepted(
            file,
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
        expect_v1_sees(world, path, sent, seen, unseen).await;
    }
    world.delete(&yaml).await;
}

/// HTTPRouteWeight: requests spread over the backends as their weights say (70/30/0).
pub(crate) async fn http_route_weight(world: &World) {
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
pub(crate) async fn http_route_request_header_modifier_backend_weights(world: &World) {
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
pub(crate) type ResponseHeaderCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a [(&'a str, &'a [&'a str])],
    &'a [&'a str],
);

/// HTTPRouteResponseHeaderModifier: set, add and remove on the backend's answer, names
/// compared without case; with a request header modifier in the same rule.
pub(crate) async fn http_route_response_header_modifier(world: &World) {
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

/// Applies `file`'s HTTPRoute `route` and checks where its redirects send the client (the
/// redirect is not followed).
pub(crate) async fn redirects(world: &World, file: &str, route: &str, cases: &[RedirectCase<'_>]) {
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

/// HTTPRouteRedirectPath, HTTPRouteRedirectPort, HTTPRouteRedirectScheme,
/// HTTPRouteRedirectHostAndStatus, HTTPRoute303Redirect, HTTPRoute307Redirect and
/// HTTPRoute308Redirect.
pub(crate) async fn http_route_redirects(world: &World) {
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
pub(crate) type RewriteCase<'a> = (
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
pub(crate) async fn rewrites(world: &World, file: &str, route: &str, cases: &[RewriteCase<'_>]) {
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
pub(crate) async fn http_route_rewrites(world: &World) {
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

/// A mirror case: path, headers sent, headers the backend sees, headers it does not, the
/// mirrors' Deployments.
type MirrorCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
    &'a [&'a str],
);

/// Applies `file`'s HTTPRoute `route` and, for each case ([`MirrorCase`]), sends `path` with a request id: answered by
/// infra-backend-v1 as the headers say, and the same request echoed by each mirror.
async fn mirrors(world: &World, file: &str, route: &str, cases: &[MirrorCase<'_>]) {
    let yaml = world
        .routes_accepted(
            file,
            "HTTPRoute",
            &[&format!("{INFRA}/{route}")],
            SAME_NAMESPACE,
        )
        .await;
    for (n, (path, sent, seen, unseen, mirrored_to)) in cases.iter().enumerate() {
        let target = format!("{path}?request-id={}-{n}", std::process::id());
        expect_v1_sees(world, &target, sent, seen, unseen).await;
        for mirror in *mirrored_to {
            fairlead_e2e::until(&format!("{mirror} echoed {target}"), async || {
                fairlead_e2e::echo::echoed_by(INFRA, mirror)
                    .contains(&target)
                    .then_some(())
            })
            .await;
        }
    }
    world.delete(&yaml).await;
}

/// HTTPRouteRequestMirror and HTTPRouteRequestMultipleMirrors: each request is also sent to
/// the mirrors, after the rule's header modifier.
pub(crate) async fn http_route_request_mirrors(world: &World) {
    mirrors(
        world,
        "httproute-request-mirror.yaml",
        "request-mirror",
        &[
            ("/mirror", &[], &[], &[], &["infra-backend-v2"]),
            (
                "/mirror-and-modify-headers",
                &MODIFY[..2],
                MODIFIED,
                REMOVED,
                &["infra-backend-v2"],
            ),
        ],
    )
    .await;
    mirrors(
        world,
        "httproute-request-multiple-mirrors.yaml",
        "request-multiple-mirrors",
        &[
            (
                "/multi-mirror",
                &[],
                &[],
                &[],
                &["infra-backend-v2", "infra-backend-v3"],
            ),
            (
                "/multi-mirror-and-modify-request-headers",
                &MODIFY[..2],
                MODIFIED,
                REMOVED,
                &["infra-backend-v2", "infra-backend-v3"],
            ),
        ],
    )
    .await;
}

/// HTTPRouteRequestPercentageMirror: a mirror with a percentage (or a fraction) gets that
/// share of the requests, within three standard deviations over 500 of them (five tries);
/// every request is answered by the rule's backend, after its header modifier.
pub(crate) async fn http_route_request_percentage_mirror(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-request-percentage-mirror.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/request-percentage-mirror")],
            SAME_NAMESPACE,
        )
        .await;
    let cases: [MirrorShare<'_>; 3] = [
        ("/percent-mirror", &[], &[], &[], 0.20),
        ("/percent-mirror-fraction", &[], &[], &[], 0.50),
        (
            "/percent-mirror-and-modify-headers",
            &MODIFY[..2],
            MODIFIED,
            REMOVED,
            0.35,
        ),
    ];
    for (path, sent, seen, unseen, share) in cases {
        expect_v1_sees(world, path, sent, seen, unseen).await;
        mirrored_share(world, path, sent, share).await;
    }
    world.delete(&yaml).await;
}

/// A percentage mirror's case: path, headers sent, headers the backend sees, headers it does
/// not, the share of requests mirrored.
type MirrorShare<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
    f64,
);

/// Sends 500 requests of `path` (with `sent`), ten at a time, under a request id of their
/// own, and counts those infra-backend-v2 echoed as a mirror; five tries for the count to
/// fall within three standard deviations of `share` (the suite's
/// `testMirroredRequestsDistribution`).
async fn mirrored_share(world: &World, path: &str, sent: &[(&str, &str)], share: f64) {
    const TOTAL: f64 = 500.0;
    let address = world.gateway(SAME_NAMESPACE, 80);
    let (expected, margin) = (TOTAL * share, 3.0 * (TOTAL * share * (1.0 - share)).sqrt());
    let mut counts = Vec::new();
    for attempt in 0..5 {
        let target = format!("{path}?request-id={}-{attempt}", std::process::id());
        for _ in 0..50 {
            let batch = (0..10).map(|_| request(&address, &address, "GET", sent, &target));
            for got in futures::future::join_all(batch).await {
                assert_eq!(got.map(|g| g.status), Some(200), "GET {target}");
            }
        }
        let mirrored = || {
            fairlead_e2e::echo::echoed_by(INFRA, "infra-backend-v2")
                .iter()
                .filter(|t| **t == target)
                .count()
        };
        // Mirrored requests go beside the answers: counted once their number stops growing.
        let mut count = mirrored();
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let now = mirrored();
            if now == count {
                break;
            }
            count = now;
        }
        if (count as f64 - expected).abs() <= margin {
            return;
        }
        counts.push(count);
    }
    panic!(
        "{path}: mirrored {counts:?} of {TOTAL} requests, never within {expected} ± {margin:.1}"
    );
}
