//! The ListenerSet tests: which ListenerSets a Gateway admits, conflicts reported in status,
//! grants, routes through ListenerSets and their parents.

use super::common::*;

/// A listener's conditions when it lost a conflict for `reason`.
pub(crate) fn conflicted(reason: &str) -> [(&str, &str, &str); 3] {
    [
        ("Accepted", "False", reason),
        ("Programmed", "False", reason),
        ("Conflicted", "True", reason),
    ]
}

/// A ListenerSet's conditions: accepted and programmed, or none of its listeners valid.
pub(crate) const SET_SERVED: [(&str, &str, &str); 2] = [
    ("Accepted", "True", ""),
    ("Programmed", "True", "Programmed"),
];

pub(crate) const SET_NOT_VALID: [(&str, &str, &str); 2] = [
    ("Accepted", "False", "ListenersNotValid"),
    ("Programmed", "False", "ListenersNotValid"),
];

/// A ListenerSet, its conditions, and its listeners' conditions.
pub(crate) type SetCheck<'a> = (String, &'a [Wanted<'a>], Vec<(&'a str, &'a [Wanted<'a>])>);

/// ListenerSetHostnameConflict and ListenerSetProtocolConflict: a ListenerSet listener
/// repeating a hostname (or, on the same port, another protocol's class) of the Gateway or
/// of an older ListenerSet is admitted and reported Conflicted, Accepted=False and
/// Programmed=False; a ListenerSet none of whose listeners is valid is not accepted
/// (ListenersNotValid); the others serve, and the Gateway counts them.
pub(crate) async fn listener_set_conflicts(world: &World, conflict: &str) {
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

/// A ListenerSet (`namespace/name`) its Gateway does not admit: Accepted=False and
/// Programmed=False for NotAllowed.
async fn not_allowed(world: &World, set: &str) {
    for condition in [
        ("Accepted", "False", "NotAllowed"),
        ("Programmed", "False", "NotAllowed"),
    ] {
        world.condition("ListenerSet", set, None, condition).await;
    }
}

/// ListenerSetAllowedNamespaceNone, ListenerSetDefaultNotAllowed and
/// ListenerSetAllowedNamespaceSame: a Gateway admits ListenerSets only as its
/// `allowedListeners` says (none by default), counting those it admits.
pub(crate) async fn listener_set_allowed_namespaces(world: &World) {
    for (file, gateway, set) in [
        (
            "listenerset-allowed-namespace-none.yaml",
            "gateway-does-not-allow-listenerset",
            "listenerset-not-allowed",
        ),
        (
            "listenerset-default-not-allowed.yaml",
            "gateway-default-does-not-allow-listenerset",
            "listenerset-default-not-allowed",
        ),
    ] {
        let yaml = manifest(file);
        world.apply(&yaml);
        let gateway = format!("{INFRA}/{gateway}");
        world
            .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
            .await;
        world.attached_listener_sets(&gateway, 0).await;
        not_allowed(world, &format!("{INFRA}/{set}")).await;
        world.delete(&yaml).await;
    }
    let yaml = manifest("listenerset-allowed-namespace-same.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-allows-listenerset-in-same-namespace");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 1).await;
    let set = format!("{INFRA}/listenerset-in-same-namespace");
    conditions(world, "ListenerSet", &set, None, &SET_SERVED).await;
    conditions(
        world,
        "ListenerSet",
        &set,
        Some("listenerset-in-same-namespace-listener"),
        &VALID_LISTENER,
    )
    .await;
    not_allowed(
        world,
        "gateway-api-listenerset-not-allowed-ns/listenerset-in-different-namespace",
    )
    .await;
    world.delete(&yaml).await;
}

/// ListenerSetGatewayParentSectionNameNotFound: a route naming a section of the Gateway that
/// only its ListenerSet has matches no parent; the one through the ListenerSet serves.
pub(crate) async fn listener_set_gateway_parent_section_name_not_found(world: &World) {
    let yaml = manifest("listenerset-gateway-parent-section-name-not-found.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-section-name");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 1).await;
    world
        .route_condition(
            "HTTPRoute",
            &format!("{INFRA}/route-via-gateway"),
            &gateway,
            ("Accepted", "False", "NoMatchingParent"),
        )
        .await;
    expect_all(
        world,
        &gateway,
        &[
            (
                "GET",
                "/goodsection",
                &[("Host", "ls-section-name.com")],
                V1,
            ),
            (
                "GET",
                "/badsection",
                &[("Host", "gw-section.com")],
                NOT_FOUND,
            ),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// ListenerSetReferenceGrant: a ListenerSet's certificate in another namespace needs a grant
/// to the ListenerSet; without one its listener is ResolvedRefs=False (RefNotPermitted) and
/// the ListenerSet, with no valid listener, is not accepted (ListenersNotValid).
pub(crate) async fn listener_set_reference_grant(world: &World) {
    let yaml = manifest("listenerset-reference-grant.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-with-listener-sets-test-reference-grant");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    let granted = format!("{INFRA}/listenerset-with-reference-grant");
    conditions(
        world,
        "ListenerSet",
        &granted,
        None,
        &[("Accepted", "True", ""), ("Programmed", "True", "")],
    )
    .await;
    world
        .condition(
            "ListenerSet",
            &granted,
            Some("listenerset-with-reference-grant-listener"),
            ("ResolvedRefs", "True", ""),
        )
        .await;
    let ungranted = "gateway-api-listener-sets-test-reference-grant-ns/\
                     listenerset-without-reference-grant";
    conditions(world, "ListenerSet", ungranted, None, &SET_NOT_VALID).await;
    world
        .condition(
            "ListenerSet",
            ungranted,
            Some("listenerset-without-reference-grant-listener"),
            ("ResolvedRefs", "False", "RefNotPermitted"),
        )
        .await;
    world.delete(&yaml).await;
}

/// ListenerSetAllowedNamespaceSelector: a Gateway admits the ListenerSets of the namespaces
/// its selector picks, and no others.
pub(crate) async fn listener_set_allowed_namespace_selector(world: &World) {
    let yaml = manifest("listenerset-allowed-namespace-selector.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-allows-listenerset-in-selected-namespace");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 1).await;
    let set = "gateway-api-listenerset-selector-allowed-ns/listenerset-in-selected-namespace";
    conditions(world, "ListenerSet", set, None, &SET_SERVED).await;
    conditions(
        world,
        "ListenerSet",
        set,
        Some("listenerset-in-selected-namespace-listener"),
        &VALID_LISTENER,
    )
    .await;
    not_allowed(
        world,
        "gateway-api-listenerset-selector-not-allowed-ns/listenerset-not-in-selected-namespace",
    )
    .await;
    world.delete(&yaml).await;
}

/// ListenerSetAllowedRoutesSupportedKinds: a ListenerSet listener asked for kinds it cannot
/// take is ResolvedRefs=False (InvalidRouteKinds).
pub(crate) async fn listener_set_allowed_routes_supported_kinds(world: &World) {
    let yaml = manifest("listenerset-allowed-routes-supported-kinds.yaml");
    world.apply(&yaml);
    world
        .condition(
            "Gateway",
            &format!("{INFRA}/gateway-with-listener-sets-test-supported-route-kinds"),
            None,
            ("Accepted", "True", ""),
        )
        .await;
    world
        .condition(
            "ListenerSet",
            &format!("{INFRA}/listenerset-test-allowed-routes-supported-kinds"),
            Some("listener-set-listener-allowed-routes-tls-only"),
            ("ResolvedRefs", "False", "InvalidRouteKinds"),
        )
        .await;
    world.delete(&yaml).await;
}

/// ListenerSetAllowedRoutesNamespaces: each ListenerSet listener takes routes from the
/// namespaces its `allowedRoutes` names (all, its own, a selector's), a route of another
/// namespace than a cross-namespace ListenerSet's is NotAllowedByListeners.
pub(crate) async fn listener_set_allowed_routes_namespaces(world: &World) {
    let yaml = manifest("listenerset-allowed-routes-namespaces.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-with-listener-sets-test-allowed-routes");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 2).await;
    let set = format!("{INFRA}/listenerset-test-allowed-routes-namespaces");
    for route in [
        format!("{INFRA}/route-in-same-namespace"),
        "gateway-api-routes-allowed-ns/route-in-selected-namespace".to_owned(),
        "gateway-api-routes-not-allowed-ns/route-not-in-selected-namespace".to_owned(),
    ] {
        world.route_accepted("HTTPRoute", &route, &set).await;
    }
    let listener = |kind: &str| format!("listener-set-listener-allowed-routes-{kind}");
    let (all, same, selector) = (listener("all"), listener("same"), listener("selector"));
    world
        .listeners(
            "ListenerSet",
            &set,
            &[
                accepted_listener(&all, 3),
                accepted_listener(&same, 1),
                accepted_listener(&selector, 1),
            ],
        )
        .await;
    let host = |kind: &str| format!("{}.com", listener(kind));
    let (all, same, selector) = (host("all"), host("same"), host("selector"));
    let (in_same, in_selected, not_selected) = (
        "/route-in-same-namespace",
        "/route-in-selected-namespace",
        "/route-not-in-selected-namespace",
    );
    expect_hosts(
        world,
        &gateway,
        &[
            (&all, in_same, V1),
            (&all, in_selected, V2),
            (&all, not_selected, V3),
            (&same, in_same, V1),
            (&same, in_selected, NOT_FOUND),
            (&same, not_selected, NOT_FOUND),
            (&selector, in_same, NOT_FOUND),
            (&selector, in_selected, V2),
            (&selector, not_selected, NOT_FOUND),
        ],
    )
    .await;
    let cross = "gateway-api-ls-cross-ns/listenerset-test-allowed-routes-cross-ns";
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-api-ls-cross-ns/route-in-listenerset-namespace",
            cross,
        )
        .await;
    world
        .route_condition(
            "HTTPRoute",
            &format!("{INFRA}/route-in-gateway-namespace"),
            cross,
            ("Accepted", "False", "NotAllowedByListeners"),
        )
        .await;
    let cross_listener = listener("cross-ns-same");
    world
        .listeners(
            "ListenerSet",
            cross,
            &[accepted_listener(&cross_listener, 1)],
        )
        .await;
    let cross_host = host("cross-ns-same");
    expect_hosts(
        world,
        &gateway,
        &[
            (&cross_host, "/route-in-listenerset-namespace", V1),
            (&cross_host, "/route-in-gateway-namespace", NOT_FOUND),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// ListenerSetDualParentRefIndependence: a route naming both a Gateway and its ListenerSet
/// is accepted (or not) by each on its own.
pub(crate) async fn listener_set_dual_parent_ref_independence(world: &World) {
    let yaml = manifest("listenerset-dual-parentref-independence.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-dual-parentref");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 1).await;
    let set = format!("{INFRA}/ls-dual-parentref");
    world
        .listeners(
            "ListenerSet",
            &set,
            &[accepted_listener("ls-dual-parentref-listener", 2)],
        )
        .await;
    let both = format!("{INFRA}/route-dual-parentref-both");
    for parent in [&gateway, &set] {
        world
            .route_condition("HTTPRoute", &both, parent, ("Accepted", "True", ""))
            .await;
    }
    expect_hosts(
        world,
        &gateway,
        &[
            ("gw-dual.com", "/dualboth", V1),
            ("ls-dual.com", "/dualboth", V1),
        ],
    )
    .await;
    let one = format!("{INFRA}/route-dual-parentref-one");
    world
        .route_condition(
            "HTTPRoute",
            &one,
            &gateway,
            ("Accepted", "False", "NoMatchingParent"),
        )
        .await;
    world.route_accepted("HTTPRoute", &one, &set).await;
    expect_hosts(
        world,
        &gateway,
        &[
            ("ls-dual.com", "/dualone", V2),
            ("gw-dual.com", "/dualone", NOT_FOUND),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// ListenerSetHTTPRouting: routes on a Gateway, on its ListenerSets and on sections of
/// either are served on their own listeners' hostnames only.
pub(crate) async fn listener_set_http_routing(world: &World) {
    let yaml = manifest("listenerset-http-routing.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-with-listener-sets-http-routing");
    let key = |name: &str| format!("{INFRA}/{name}");
    for route in [
        "attaches-to-all-listeners",
        "gateway-route",
        "gateway-section-route",
    ] {
        world
            .route_accepted("HTTPRoute", &key(route), &gateway)
            .await;
    }
    world.attached_listener_sets(&gateway, 2).await;
    let set = |n: u8| key(&format!("listener-set-http-routing-{n}"));
    let listener = |n: u8, l: u8| format!("listener-set-http-routing-{n}-listener-{l}");
    for route in [
        "attaches-to-all-listeners",
        "listener-set-http-routing-1-route",
        "listener-set-http-routing-1-section-route",
    ] {
        world
            .route_accepted("HTTPRoute", &key(route), &set(1))
            .await;
    }
    let (l11, l12) = (listener(1, 1), listener(1, 2));
    world
        .listeners(
            "ListenerSet",
            &set(1),
            &[accepted_listener(&l11, 3), accepted_listener(&l12, 2)],
        )
        .await;
    for route in [
        "attaches-to-all-listeners",
        "listener-set-http-routing-2-route",
    ] {
        world
            .route_accepted("HTTPRoute", &key(route), &set(2))
            .await;
    }
    let (l21, l22) = (listener(2, 1), listener(2, 2));
    world
        .listeners(
            "ListenerSet",
            &set(2),
            &[accepted_listener(&l21, 2), accepted_listener(&l22, 2)],
        )
        .await;
    // Each path, and which of the six hosts it is served on (the others: 404).
    let hosts = [
        "gateway-listener-1.com".to_owned(),
        "gateway-listener-2.com".to_owned(),
        format!("{l11}.com"),
        format!("{l12}.com"),
        format!("{l21}.com"),
        format!("{l22}.com"),
    ];
    let paths: [(&str, Then, &[usize]); 6] = [
        ("/route", V1, &[0, 1, 2, 3, 4, 5]),
        ("/gateway-route", V2, &[0, 1]),
        ("/gateway-section-route", V3, &[0]),
        ("/listener-set-http-routing-1-route", V2, &[2, 3]),
        ("/listener-set-http-routing-1-section-route", V3, &[2]),
        ("/listener-set-http-routing-2-route", V2, &[4, 5]),
    ];
    let mut cases = Vec::new();
    for (path, then, served) in paths {
        for (i, host) in hosts.iter().enumerate() {
            let then = if served.contains(&i) { then } else { NOT_FOUND };
            cases.push((host.as_str(), path, then));
        }
    }
    expect_hosts(world, &gateway, &cases).await;
    world.delete(&yaml).await;
}

/// ListenerSetRouteStatusScopedToParentRef: a route's status lists only the parents it
/// names — a route on the Gateway has no entry for the Gateway's ListenerSet, and the other
/// way round.
pub(crate) async fn listener_set_route_status_scoped_to_parent_ref(world: &World) {
    let yaml = manifest("listenerset-route-status-scoped-to-parentref.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-parentref");
    world
        .condition("Gateway", &gateway, None, ("Accepted", "True", ""))
        .await;
    world.attached_listener_sets(&gateway, 1).await;
    let set = format!("{INFRA}/listenerset-parentref");
    world
        .listeners(
            "ListenerSet",
            &set,
            &[accepted_listener("listenerset-parentref-listener", 1)],
        )
        .await;
    let gateway_only = format!("{INFRA}/route-parentref-gwonly");
    world
        .route_condition(
            "HTTPRoute",
            &gateway_only,
            &gateway,
            ("Accepted", "True", ""),
        )
        .await;
    world
        .route_parents("HTTPRoute", &gateway_only, &[("Gateway", &gateway)])
        .await;
    let set_only = format!("{INFRA}/route-parentref-lsonly");
    world.route_accepted("HTTPRoute", &set_only, &set).await;
    world
        .route_parents("HTTPRoute", &set_only, &[("ListenerSet", &set)])
        .await;
    world.delete(&yaml).await;
}
