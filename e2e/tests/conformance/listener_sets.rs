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
