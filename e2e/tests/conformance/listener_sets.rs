//! The ListenerSet tests: conflicts reported in status.

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
