//! Routes to listeners: a route's `parentRefs` (with `sectionName` and `port`), each listener's
//! `allowedRoutes` (kinds; namespaces Same/All/Selector; a ReferenceGrant `to: ListenerSet`
//! for a ListenerSet's listeners; a ReferenceGrant `to: Gateway` for an ALB instance's
//! additional TCP/UDP ports, from another namespace) and hostname intersection decide
//! where a route attaches; the route's parent status says why it did or did not.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::gateway::Owner;
use crate::gateway::{self, ResolvedListener};
use crate::http;
use crate::refs::Grants;
use crate::routes::{Content, RouteView};
use crate::status::{Condition, RouteKey, RouteParentStatus, Statuses};
use fairlead_edge_model::input::{
    GATEWAY_GROUP, Gateway, Input, Listener, ListenerSet, NamespacesFrom, ParentRef,
};
use fairlead_key::ObjectKey;

/// An HTTP route entry attached to a listener, with the hostnames it serves there (`None` =
/// any).
#[derive(Clone, Debug)]
pub struct Attached {
    /// Hostnames (shared by the entries of one route's placement).
    pub hostnames: Option<std::sync::Arc<[String]>>,
    /// From a GRPCRoute (else an HTTPRoute): the two kinds never share a hostname on one
    /// listener.
    pub grpc: bool,
    /// The entry.
    pub entry: std::sync::Arc<http::Entry>,
}

/// A stream route attached to a listener, with the hostnames (SNI) it serves there.
pub type AttachedStream = (Option<Vec<String>>, std::sync::Arc<crate::stream::Entry>);

/// A Gateway during translation: its listeners and what attached to them.
pub struct GatewayState<'a> {
    /// Its key.
    pub key: ObjectKey,
    /// The Gateway.
    pub gateway: &'a Gateway,
    /// Listeners in precedence order.
    pub listeners: Vec<ResolvedListener>,
    /// HTTP entries per listener (same index as `listeners`).
    pub http: Vec<Vec<Attached>>,
    /// Stream routes per listener, with the hostnames (SNI) served there.
    pub streams: Vec<Vec<AttachedStream>>,
    /// ListenerSets naming this Gateway, in precedence order.
    pub sets: Vec<SetState<'a>>,
    /// The client certificate its proxies present to backends (see
    /// [`gateway::backend_client_certificate`]), decided once for the IR and the status.
    pub client_certificate: Result<Option<ObjectKey>, (&'static str, String)>,
}

/// A ListenerSet that names a Gateway of ours as its parent.
pub struct SetState<'a> {
    /// Its key.
    pub key: ObjectKey,
    /// The ListenerSet.
    pub set: &'a ListenerSet,
    /// Whether the Gateway's `allowedListeners` admits it.
    pub accepted: bool,
}

impl<'a> GatewayState<'a> {
    /// Resolves the listeners of `gateway` and of the ListenerSets it admits, in precedence
    /// order: the Gateway's own, then the ListenerSets oldest first, then by namespace/name.
    pub fn new(gateway: &'a Gateway, input: &'a Input, grants: &Grants<'_>) -> Self {
        let namespace = gateway.metadata.namespace.clone().unwrap_or_default();
        let key = gateway::key(gateway);
        let mut sets: Vec<SetState<'a>> = input
            .listener_sets
            .iter()
            .filter(|s| {
                let parent = &s.spec.parent_ref;
                let set_namespace = s.metadata.namespace.as_deref().unwrap_or_default();
                parent.group.as_deref().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP
                    && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway"
                    && parent.namespace.as_deref().unwrap_or(set_namespace) == key.namespace()
                    && parent.name == key.name()
            })
            .map(|set| {
                let set_namespace = set.metadata.namespace.as_deref().unwrap_or_default();
                let allowed = gateway
                    .spec
                    .allowed_listeners
                    .as_ref()
                    .and_then(|a| a.namespaces.as_ref());
                let accepted = match allowed.and_then(|a| a.from.as_deref()).unwrap_or("None") {
                    "None" => false,
                    from => namespace_allowed(
                        &NamespacesFrom {
                            from: Some(from.to_owned()),
                            selector: allowed.and_then(|a| a.selector.clone()),
                        },
                        &namespace,
                        set_namespace,
                        input,
                    ),
                };
                SetState {
                    key: ObjectKey::new(
                        set_namespace,
                        set.metadata.name.as_deref().unwrap_or_default(),
                    ),
                    set,
                    accepted,
                }
            })
            .collect();
        sets.sort_by_key(|s| {
            (
                s.set
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                s.key.clone(),
            )
        });
        let mut listeners: Vec<(&Listener, Owner)> = gateway
            .spec
            .listeners
            .iter()
            .map(|l| {
                (
                    l,
                    Owner {
                        kind: "Gateway",
                        namespace: namespace.clone(),
                        set: None,
                        generation: gateway.metadata.generation,
                    },
                )
            })
            .collect();
        for s in sets.iter().filter(|s| s.accepted) {
            for l in &s.set.spec.listeners {
                listeners.push((
                    l,
                    Owner {
                        kind: "ListenerSet",
                        namespace: s.set.metadata.namespace.clone().unwrap_or_default(),
                        set: Some(s.key.clone()),
                        generation: s.set.metadata.generation,
                    },
                ));
            }
        }
        let listeners = gateway::resolve(gateway, &listeners, input, grants);
        let http = vec![Vec::new(); listeners.len()];
        let streams = vec![Vec::new(); listeners.len()];
        let client_certificate = gateway::backend_client_certificate(gateway, input, grants);
        Self {
            key,
            gateway,
            listeners,
            http,
            streams,
            sets,
            client_certificate,
        }
    }
}

/// Whether `selector` selects `labels` (matchLabels and matchExpressions).
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

/// Whether a listener with `allowed` namespaces, on a Gateway in `gateway_namespace`, admits
/// a route from `route_namespace`.
pub fn namespace_allowed(
    allowed: &NamespacesFrom,
    gateway_namespace: &str,
    route_namespace: &str,
    input: &Input,
) -> bool {
    match allowed.from.as_deref().unwrap_or("Same") {
        "All" => true,
        "Selector" => allowed
            .selector
            .as_ref()
            .is_some_and(|s| selects(s, &input.namespace_labels(route_namespace))),
        "Same" => gateway_namespace == route_namespace,
        _ => false,
    }
}

/// Whether a ReferenceGrant in a ListenerSet's namespace lets routes of `kind` from
/// `route_namespace`, another namespace, attach to its listener `l` (as Deckhouse's ALB
/// documents for cross-namespace ListenerSets: `from` the route's kind and namespace, `to`
/// the ListenerSet). A route of the ListenerSet's own namespace needs no grant, and gets
/// none: the listener's `allowedRoutes` alone decides for it.
fn granted_set(l: &ResolvedListener, kind: &str, route_namespace: &str, input: &Input) -> bool {
    let Some(set) = l.set.as_ref().filter(|s| s.namespace() != route_namespace) else {
        return false;
    };
    Grants::new(input).allows(
        (GATEWAY_GROUP, kind, route_namespace),
        (GATEWAY_GROUP, "ListenerSet", set.namespace(), set.name()),
    )
}

/// On an ALB instance's Gateway, a TCPRoute or UDPRoute from another namespace attaches to an
/// additional port's listener (`tcp-port-N`, `udp-port-N`) only under a ReferenceGrant in the
/// Gateway's namespace (`from` the route, `to` the Gateway), as Deckhouse's ALB documents;
/// the refusal otherwise.
fn additional_port_grant(
    state: &GatewayState<'_>,
    l: &ResolvedListener,
    kind: &str,
    route_namespace: &str,
    input: &Input,
) -> Option<Refusal> {
    let managed = fairlead_edge_model::instance::managed(state.gateway);
    let additional =
        l.set.is_none() && (l.name.starts_with("tcp-port-") || l.name.starts_with("udp-port-"));
    if !managed || !additional || route_namespace == state.key.namespace() {
        return None;
    }
    let granted = Grants::new(input).allows(
        (GATEWAY_GROUP, kind, route_namespace),
        (
            GATEWAY_GROUP,
            "Gateway",
            state.key.namespace(),
            state.key.name(),
        ),
    );
    (!granted).then(|| {
        (
            "NotAllowedByListeners",
            format!(
                "listener {} of Gateway {} takes {kind}s from namespace {route_namespace} only under a ReferenceGrant in namespace {} (to: Gateway {})",
                l.name,
                state.key,
                state.key.namespace(),
                state.key.name()
            ),
        )
    })
}

/// Attaches every translated route, recording the parent statuses.
pub(crate) fn routes(
    gateways: &mut [GatewayState<'_>],
    mut routes: Vec<RouteView<'_>>,
    (input, policies): (&Input, &crate::backend_tls::Policies),
    controller_name: &str,
    statuses: &mut Statuses,
) {
    // Oldest first, then by namespace/name: where routes conflict (an HTTPRoute and a
    // GRPCRoute sharing a hostname on a listener), the one attached first wins.
    routes.sort_by(|a, b| {
        (
            &a.metadata.creation_timestamp,
            &a.metadata.namespace,
            &a.metadata.name,
            a.kind,
        )
            .cmp(&(
                &b.metadata.creation_timestamp,
                &b.metadata.namespace,
                &b.metadata.name,
                b.kind,
            ))
    });
    // Hostnames claimed per (Gateway, listener) by HTTPRoutes [0] and GRPCRoutes [1].
    let mut claims: std::collections::HashMap<(usize, usize), [crate::hostname::Claims; 2]> =
        std::collections::HashMap::new();
    for route in routes {
        let namespace = route.metadata.namespace.clone().unwrap_or_default();
        let name = route.metadata.name.clone().unwrap_or_default();
        let generation = route.metadata.generation;
        let translated = route.translated.as_ref();
        let mut parents = Vec::with_capacity(route.parent_refs.len());
        for parent in route.parent_refs {
            let Some(g) = our_gateway(gateways, parent, &namespace) else {
                continue;
            };
            let state = &mut gateways[g];
            let accepted = match translated {
                Err(http::Rejected(message)) => Condition::new(
                    "Accepted",
                    false,
                    "UnsupportedValue",
                    message.clone(),
                    generation,
                ),
                Ok((content, _)) => {
                    match attach(
                        state,
                        parent,
                        route.kind,
                        &namespace,
                        route.hostnames,
                        input,
                    ) {
                        Ok(mut places) => {
                            let grpc = route.kind == "GRPCRoute";
                            let mut rival = None;
                            if matches!(content, Content::Http(_)) {
                                places.retain(|(listener, hostnames)| {
                                    let claimed = claims.entry((g, *listener)).or_default();
                                    if claimed[usize::from(!grpc)].overlaps(hostnames.as_deref()) {
                                        rival.get_or_insert_with(|| {
                                            state.listeners[*listener].name.clone()
                                        });
                                        return false;
                                    }
                                    claimed[usize::from(grpc)].add(hostnames.as_deref());
                                    true
                                });
                            }
                            for (listener, hostnames) in &places {
                                state.listeners[*listener].attached += 1;
                                match content {
                                    Content::Http(entries) => {
                                        let hostnames: Option<std::sync::Arc<[String]>> =
                                            hostnames.as_deref().map(Into::into);
                                        for entry in entries {
                                            state.http[*listener].push(Attached {
                                                hostnames: hostnames.clone(),
                                                grpc,
                                                entry: entry.clone(),
                                            });
                                        }
                                    }
                                    Content::Stream(entry) => {
                                        state.streams[*listener]
                                            .push((hostnames.clone(), entry.clone()));
                                    }
                                }
                            }
                            match rival {
                                Some(rival) if places.is_empty() => Condition::new(
                                    "Accepted",
                                    false,
                                    "Conflicted",
                                    format!(
                                        "an older {} serves an intersecting hostname on listener {rival}; HTTPRoutes and GRPCRoutes do not share a hostname",
                                        if grpc { "HTTPRoute" } else { "GRPCRoute" }
                                    ),
                                    generation,
                                ),
                                _ => match invalid_waf(content) {
                                    Some(message) => Condition::new(
                                        "Accepted",
                                        false,
                                        crate::waf::INVALID,
                                        message,
                                        generation,
                                    ),
                                    None => Condition::new(
                                        "Accepted",
                                        true,
                                        "Accepted",
                                        "route accepted",
                                        generation,
                                    ),
                                },
                            }
                        }
                        Err((reason, message)) => {
                            Condition::new("Accepted", false, reason, message, generation)
                        }
                    }
                }
            };
            let resolved = match translated.as_ref().ok().and_then(|(_, u)| u.as_ref()) {
                Some(u) => Condition::new(
                    "ResolvedRefs",
                    false,
                    u.reason,
                    u.message.clone(),
                    generation,
                ),
                None => Condition::new(
                    "ResolvedRefs",
                    true,
                    "ResolvedRefs",
                    translated
                        .as_ref()
                        .ok()
                        .and_then(|(content, _)| policy_over_annotation(content, policies))
                        .unwrap_or_else(|| "references resolved".to_owned()),
                    generation,
                ),
            };
            parents.push(RouteParentStatus {
                parent_ref: parent.clone(),
                controller_name: controller_name.to_owned(),
                conditions: vec![accepted, resolved],
            });
        }
        if !parents.is_empty() {
            let key = RouteKey::new(route.kind, ObjectKey::new(namespace, name));
            // The deprecated annotation is documented for HTTPRoutes only.
            let notices = if route.kind == "HTTPRoute" {
                crate::annotations::notices(route.metadata)
            } else {
                Vec::new()
            };
            if !notices.is_empty() {
                statuses.notices.insert(key.clone(), notices);
            }
            statuses.routes.insert(key, parents);
        }
    }
}

/// Why the route's WAF configuration cannot be used, if it cannot: its entries are attached
/// (answering 503) but the route is not accepted.
fn invalid_waf(content: &Content) -> Option<String> {
    let Content::Http(entries) = content else {
        return None;
    };
    entries.first()?.waf.as_ref()?.invalid.clone()
}

/// Where a BackendTLSPolicy decides TLS to a backend whose route also asks for it by
/// `backend-tls-settings`: the policy wins, and the route's status says so.
fn policy_over_annotation(
    content: &Content,
    policies: &crate::backend_tls::Policies,
) -> Option<String> {
    let Content::Http(entries) = content else {
        return None;
    };
    if policies.is_empty() {
        return None;
    }
    entries
        .iter()
        .filter_map(|e| {
            if let http::Action::Forward { backends, .. } = e.action.as_ref() {
                Some(backends)
            } else {
                None
            }
        })
        .flatten()
        .filter_map(|w| w.backend.as_ref())
        .filter(|b| b.variant.as_ref().is_some_and(|v| v.tls.is_some()))
        .find_map(|b| {
            let policy = policies.policy_for(b)?;
            Some(format!(
                "references resolved; BackendTLSPolicy {policy} decides TLS to Service {}/{}, not metadata.annotations[{}backend-tls-settings]",
                b.namespace,
                b.service,
                fairlead_edge_model::annotations::PREFIX
            ))
        })
}

/// The index of the Gateway a parentRef names (directly, or through one of its
/// ListenerSets), when it is one of ours.
fn our_gateway(
    gateways: &[GatewayState<'_>],
    parent: &ParentRef,
    route_namespace: &str,
) -> Option<usize> {
    let group = parent.group.as_deref().unwrap_or(GATEWAY_GROUP);
    let namespace = parent.namespace.as_deref().unwrap_or(route_namespace);
    // Compared in place: this runs for every parentRef of every route.
    let named = |key: &ObjectKey| key.namespace() == namespace && key.name() == parent.name;
    match (group, parent.kind.as_deref().unwrap_or("Gateway")) {
        (GATEWAY_GROUP, "Gateway") => gateways.iter().position(|g| named(&g.key)),
        (GATEWAY_GROUP, "ListenerSet")
        | (fairlead_edge_model::input::EXPERIMENTAL_GROUP, "XListenerSet") => gateways
            .iter()
            .position(|g| g.sets.iter().any(|s| named(&s.key))),
        _ => None,
    }
}

/// A listener index and the hostnames a route serves there (`None` = any).
type Placement = (usize, Option<Vec<String>>);

/// A reason and a message.
type Refusal = (&'static str, String);

/// Where a route attaches on a Gateway: listener indices with the hostnames served there, or
/// the reason it attaches nowhere.
fn attach(
    state: &GatewayState<'_>,
    parent: &ParentRef,
    kind: &str,
    route_namespace: &str,
    hostnames: &[String],
    input: &Input,
) -> Result<Vec<Placement>, Refusal> {
    let through_set =
        matches!(parent.kind.as_deref(), Some("ListenerSet" | "XListenerSet")).then(|| {
            ObjectKey::new(
                parent.namespace.as_deref().unwrap_or(route_namespace),
                parent.name.as_str(),
            )
        });
    let named: Vec<usize> = state
        .listeners
        .iter()
        .enumerate()
        // A route naming the Gateway attaches to its own listeners only; one naming a
        // ListenerSet, to that set's.
        .filter(|(_, l)| l.set == through_set)
        .filter(|(_, l)| parent.section_name.as_deref().is_none_or(|s| s == l.name))
        .filter(|(_, l)| parent.port.is_none_or(|p| i32::from(l.port) == p))
        .map(|(i, _)| i)
        .collect();
    if named.is_empty() {
        return Err((
            "NoMatchingParent",
            "no listener matches the parentRef's sectionName and port".into(),
        ));
    }
    let mut places = Vec::new();
    let mut reason: Option<(&'static str, String)> = None;
    // A listener's own state does not decide attachment (the spec counts routes attached to
    // an invalid listener in its attachedRoutes); an invalid listener is just not served.
    for i in named {
        let l = &state.listeners[i];
        if !l.kinds.iter().any(|k| k.kind == kind) {
            reason.get_or_insert((
                "NotAllowedByListeners",
                format!("listener {} does not accept {kind}", l.name),
            ));
            continue;
        }
        if !namespace_allowed(&l.namespaces, &l.home, route_namespace, input)
            && !granted_set(l, kind, route_namespace, input)
        {
            reason.get_or_insert((
                "NotAllowedByListeners",
                format!(
                    "listener {} does not accept routes from namespace {route_namespace}",
                    l.name
                ),
            ));
            continue;
        }
        if let Some(refused) = additional_port_grant(state, l, kind, route_namespace, input) {
            reason.get_or_insert(refused);
            continue;
        }
        let served = crate::hostname::intersect(l.hostname.as_deref(), hostnames);
        if served.as_ref().is_some_and(Vec::is_empty) {
            reason.get_or_insert((
                "NoMatchingListenerHostname",
                format!("no hostname of the route matches listener {}", l.name),
            ));
            continue;
        }
        places.push((i, served));
    }
    if places.is_empty() {
        Err(reason.unwrap_or((
            "NotAllowedByListeners",
            "no listener admits the route".into(),
        )))
    } else {
        Ok(places)
    }
}
