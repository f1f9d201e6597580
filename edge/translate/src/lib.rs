//! The ALB's translate stage: Gateway API objects in (`fairlead-edge-model`), per-Gateway
//! intermediate representation and Gateway API statuses out. Pure: no I/O, no clock, no
//! randomness, so the same input always gives the same output (golden tests rely on it, and
//! the xDS server diffs snapshots by content). `fairlead-edge-render` turns the IR into Envoy
//! resources.
//!
//! The stages, one module per stage: `gateway` (listeners, conflicts, certificates) →
//! `http`, `grpc`, `stream` (route rules, matches, filters, precedence) with `backend` and
//! `refs` (references and grants) → `attach` (parentRefs, allowedRoutes, hostnames; route
//! status) → `ir` (per Gateway: listeners, filter chains, virtual hosts, routes, clusters
//! with their TLS — `backend_tls` — and endpoints, certificates). A [`Translator`] runs the
//! same stages with a `memo` of its last translation at the boundary where work repeats
//! (routes → rules), so that the control plane's translation after a change costs what the
//! change touches.
//!
//! A route-level feature is a module of its own here (the decision and its status) beside
//! one in the render stage (its Envoy configuration); `annotations` decides what an
//! HTTPRoute's `alb.network.deckhouse.io/*` annotations ask, `access` who may pass (basic
//! auth), `upstream` what they change of the clusters of its backends, `waf` the web
//! application firewall (`mod-security`) and its rule set.

pub mod access;
pub mod annotations;
pub mod attach;
pub mod backend;
pub mod backend_tls;
mod ca_bundle;
pub mod certificate;
pub mod cors;
pub mod frontend;
pub mod gateway;
pub mod grpc;
pub mod hostname;
pub mod http;
pub mod ir;
pub mod memo;
pub mod refs;
pub mod retry;
mod routes;
pub mod status;
pub mod stream;
pub mod upstream;
pub mod waf;

use std::collections::BTreeMap;
use std::sync::Arc;

use fairlead_edge_model::input::{Address, Input, ParentRef};
use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use refs::Grants;
use routes::{Content, RouteView, Source};
use status::{Condition, GatewayStatus, RouteKey, Statuses};

/// A hash table of the translation's own keys (hostnames, backends, route keys), hashed with
/// `foldhash`: several times faster than the default SipHash on these short keys. Its seed
/// is random per process, and the keys come from the cluster's objects, never from requests.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A set of the translation's own keys, hashed as [`FastMap`].
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Translates everything served by `controller_name`: gives `each` the IR of every Gateway
/// as soon as it is built (one Gateway's IR is not held while the next is built) and returns
/// the statuses.
pub fn translate(
    input: &Input,
    controller_name: &str,
    each: impl FnMut(&ObjectKey, ir::Gateway),
) -> Statuses {
    translate_with(
        input,
        controller_name,
        &mut memo::Forget,
        &waf::Unchecked,
        each,
    )
}

/// The statuses of everything served by `controller_name` (a translation whose IR is not
/// kept).
pub fn statuses(input: &Input, controller_name: &str) -> Statuses {
    translate(input, controller_name, |_, _| {})
}

/// The IR of every Gateway served by `controller_name`, by `namespace/name`.
pub fn intermediate(input: &Input, controller_name: &str) -> BTreeMap<ObjectKey, ir::Gateway> {
    let mut irs = BTreeMap::new();
    translate(input, controller_name, |key, ir| {
        irs.insert(key.clone(), ir);
    });
    irs
}

/// A translator that remembers its last translation, for a control plane translating again
/// on every change: a route whose object, Services and ReferenceGrants did not change keeps
/// its translated rules. It gives exactly what [`translate`] gives for the same input
/// (tested); only the work differs.
#[derive(Debug, Default)]
pub struct Translator {
    memo: memo::Memo,
    waf: Option<Arc<dyn waf::Compile>>,
}

impl Translator {
    /// A translator whose WAF rule sets are checked by `waf` (the control plane's engine);
    /// without one they are taken as they are ([`waf::Unchecked`]).
    pub fn with_waf(waf: Arc<dyn waf::Compile>) -> Self {
        Self {
            waf: Some(waf),
            ..Self::default()
        }
    }

    /// Translates everything served by `controller_name`, as [`translate`] does.
    pub fn translate(
        &mut self,
        input: &Input,
        controller_name: &str,
        each: impl FnMut(&ObjectKey, ir::Gateway),
    ) -> Statuses {
        self.memo.start(input);
        let waf: &dyn waf::Compile = self.waf.as_deref().unwrap_or(&waf::Unchecked);
        let statuses = translate_with(input, controller_name, &mut self.memo, waf, each);
        self.memo.finish();
        statuses
    }
}

/// The stages, with `recall` at their memo boundary; `each` is given each Gateway's IR once
/// it is built.
fn translate_with(
    input: &Input,
    controller_name: &str,
    recall: &mut impl memo::Recall,
    waf: &dyn waf::Compile,
    mut each: impl FnMut(&ObjectKey, ir::Gateway),
) -> Statuses {
    let mut statuses = Statuses::default();
    let mut classes = Vec::new();
    for class in &input.gateway_classes {
        if class.spec.controller_name != controller_name {
            continue;
        }
        let name = class.metadata.name.clone().unwrap_or_default();
        statuses.gateway_classes.insert(
            name.clone(),
            vec![Condition::new(
                "Accepted",
                true,
                "Accepted",
                "served by fairlead",
                class.metadata.generation,
            )],
        );
        classes.push(name);
    }
    let grants = refs::Grants::new(input);
    let mut gateways: Vec<attach::GatewayState<'_>> = input
        .gateways
        .iter()
        .filter(|g| classes.contains(&g.spec.gateway_class_name))
        .map(|g| attach::GatewayState::new(g, input, &grants))
        .collect();
    gateways.sort_by(|a, b| a.key.cmp(&b.key));
    let routes = translated_routes(input, &grants, recall, waf);
    let tls = backend_tls::Policies::new(input);
    attach::routes(
        &mut gateways,
        routes,
        (input, &tls),
        controller_name,
        &mut statuses,
    );
    // The backends each Gateway reaches, when some BackendTLSPolicy may report on them.
    let mut reached: Vec<(&ObjectKey, Vec<backend::Backend>)> = Vec::new();
    for g in &gateways {
        statuses.gateways.insert(g.key.clone(), gateway_status(g));
        for set in &g.sets {
            statuses
                .listener_sets
                .insert(set.key.clone(), listener_set_status(g, set));
        }
        let ir = ir::gateway(g, input, &tls);
        if !tls.is_empty() {
            reached.push((&g.key, ir.backends().cloned().collect()));
        }
        each(&g.key, ir);
    }
    statuses.backend_tls_policies = tls.statuses(
        reached
            .iter()
            .map(|(key, backends)| (*key, backends.iter())),
        controller_name,
    );
    statuses
}

/// Every route of `input`, translated, or as `recall` remembers it when the same route was
/// translated against the same Services and ReferenceGrants before (the first boundary of
/// the pipeline).
fn translated_routes<'a>(
    input: &'a Input,
    grants: &Grants<'_>,
    recall: &mut impl memo::Recall,
    waf: &dyn waf::Compile,
) -> Vec<RouteView<'a>> {
    let http_like = |t: Result<http::Translated, http::Rejected>| {
        t.map(|t| (Content::Http(t.entries), t.unresolved))
    };
    let mut view = |kind: &'static str,
                    metadata: &'a ObjectMeta,
                    parent_refs: &'a [ParentRef],
                    hostnames: &'a [String],
                    source: Source| {
        let key = || RouteKey::new(kind, fairlead_edge_model::input::key(metadata));
        let translated = recall.route(key, &source, || {
            if let Some((i, h)) = hostnames
                .iter()
                .enumerate()
                .find(|(_, h)| !hostname::valid(h))
            {
                return Err(http::Rejected(format!(
                    "spec.hostnames[{i}]: {h:?} is not a hostname (lowercase RFC 1123 labels, optionally behind *.)"
                )));
            }
            match &source {
                Source::Http(r) => http_like(http::translate(r, input, grants, waf)),
                Source::Grpc(r) => http_like(crate::grpc::translate(r, input, grants)),
                Source::Stream(r) => crate::stream::translate(r, kind, input, grants)
                    .map(|(e, u)| (Content::Stream(Arc::new(e)), u)),
            }
        });
        RouteView {
            kind,
            metadata,
            parent_refs,
            hostnames,
            translated,
        }
    };
    let mut routes = Vec::with_capacity(
        input.http_routes.len()
            + input.grpc_routes.len()
            + input.tls_routes.len()
            + input.tcp_routes.len()
            + input.udp_routes.len(),
    );
    for r in &input.http_routes {
        let spec = &r.spec;
        let source = Source::Http(r.clone());
        routes.push(view(
            "HTTPRoute",
            &r.metadata,
            &spec.parent_refs,
            &spec.hostnames,
            source,
        ));
    }
    for r in &input.grpc_routes {
        let spec = &r.spec;
        let source = Source::Grpc(r.clone());
        routes.push(view(
            "GRPCRoute",
            &r.metadata,
            &spec.parent_refs,
            &spec.hostnames,
            source,
        ));
    }
    for (kind, list) in [
        ("TLSRoute", &input.tls_routes),
        ("TCPRoute", &input.tcp_routes),
        ("UDPRoute", &input.udp_routes),
    ] {
        for r in list {
            let spec = &r.spec;
            let source = Source::Stream(r.clone());
            routes.push(view(
                kind,
                &r.metadata,
                &spec.parent_refs,
                &spec.hostnames,
                source,
            ));
        }
    }
    routes
}

/// A Gateway's status: its own listeners (not its ListenerSets'), and how many ListenerSets
/// it admits.
fn gateway_status(g: &attach::GatewayState<'_>) -> GatewayStatus {
    let generation = g.gateway.metadata.generation;
    let own: Vec<&gateway::ResolvedListener> =
        g.listeners.iter().filter(|l| l.set.is_none()).collect();
    let valid = own.iter().filter(|l| l.programmed()).count();
    let all_valid = valid == own.len();
    let serving = g.listeners.iter().any(|l| l.programmed());
    let accepted_message = if all_valid {
        "gateway accepted".to_owned()
    } else {
        format!(
            "{} of {} listeners are not valid",
            own.len() - valid,
            own.len()
        )
    };
    let listen = gateway::listen_addresses(g.gateway);
    let refused = gateway::refused(g.gateway);
    let accepted = match &refused {
        Some((reason, problem)) => {
            Condition::new("Accepted", false, reason, problem.clone(), generation)
        }
        None => Condition::new(
            "Accepted",
            valid > 0 || own.is_empty(),
            if all_valid {
                "Accepted"
            } else {
                "ListenersNotValid"
            },
            accepted_message,
            generation,
        ),
    };
    let serving = serving && refused.is_none();
    let mut conditions = vec![
        accepted,
        Condition::new(
            "Programmed",
            serving,
            if serving { "Programmed" } else { "Invalid" },
            match (&refused, serving) {
                (Some((_, problem)), _) => problem.clone(),
                (None, true) => "configuration served over xDS".to_owned(),
                (None, false) => "no valid listener".to_owned(),
            },
            generation,
        ),
        waf::condition(
            g.http
                .iter()
                .flatten()
                .filter(|a| a.entry.waf.as_ref().is_some_and(|w| !w.shut))
                .map(|a| a.entry.name.as_str()),
            generation,
        ),
    ];
    // Said when the Gateway names a client certificate for its backends.
    match &g.client_certificate {
        Ok(None) => {}
        Ok(Some(key)) => conditions.push(Condition::new(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            format!("spec.tls.backend.clientCertificateRef: Secret {key} presented to backends"),
            generation,
        )),
        Err((reason, message)) => conditions.push(Condition::new(
            "ResolvedRefs",
            false,
            reason,
            message.clone(),
            generation,
        )),
    }
    // Said only when it holds: a port serves clients without a valid certificate.
    if frontend::insecure_on(
        g.gateway,
        g.listeners
            .iter()
            .filter(|l| l.programmed() && l.client_validation.is_some())
            .map(|l| l.port),
    ) {
        conditions.push(Condition::new(
            frontend::INSECURE_CONDITION,
            true,
            "ConfigurationChanged",
            "spec.tls.frontend: a port serves clients without a valid certificate \
             (AllowInsecureFallback)",
            generation,
        ));
    }
    GatewayStatus {
        // Where the proxies listen, when the Gateway is given addresses; else (refused) the
        // addresses it asks for by value (one asked for by type only is not assigned then).
        addresses: match &listen {
            Ok(ips) => ips
                .iter()
                .map(|ip| Address {
                    type_: Some("IPAddress".into()),
                    value: ip.to_string(),
                })
                .collect(),
            Err(_) => g
                .gateway
                .spec
                .addresses
                .iter()
                .filter(|a| !a.value.is_empty())
                .cloned()
                .collect(),
        },
        conditions,
        listeners: own.iter().map(|l| l.status()).collect(),
        // Attached: admitted, with a listener that serves (a ListenerSet none of whose
        // listeners is valid is not accepted).
        attached_listener_sets: i32::try_from(
            g.sets
                .iter()
                .filter(|s| {
                    s.accepted
                        && g.listeners
                            .iter()
                            .any(|l| l.set.as_ref() == Some(&s.key) && l.programmed())
                })
                .count(),
        )
        .unwrap_or(i32::MAX),
    }
}

/// A ListenerSet's status: `Accepted=False`/`NotAllowed` when its Gateway's
/// `allowedListeners` does not admit its namespace; else its listeners' statuses.
fn listener_set_status(
    g: &attach::GatewayState<'_>,
    set: &attach::SetState<'_>,
) -> status::ListenerSetStatus {
    let generation = set.set.metadata.generation;
    let mine: Vec<&gateway::ResolvedListener> = g
        .listeners
        .iter()
        .filter(|l| l.set.as_ref() == Some(&set.key))
        .collect();
    let programmed = mine.iter().any(|l| l.programmed());
    let conditions = if set.accepted && programmed {
        vec![
            Condition::new(
                "Accepted",
                true,
                "Accepted",
                "attached to its Gateway",
                generation,
            ),
            Condition::new(
                "Programmed",
                true,
                "Programmed",
                "listeners served",
                generation,
            ),
        ]
    } else if set.accepted {
        // Attached, but none of its listeners is valid (conflicts, references): nothing of
        // it is served.
        let message = "none of its listeners is valid; see their conditions";
        vec![
            Condition::new("Accepted", false, "ListenersNotValid", message, generation),
            Condition::new(
                "Programmed",
                false,
                "ListenersNotValid",
                message,
                generation,
            ),
        ]
    } else {
        let message = format!(
            "Gateway {} does not allow ListenerSets from namespace {} (spec.allowedListeners)",
            g.key,
            set.set.metadata.namespace.as_deref().unwrap_or_default()
        );
        vec![
            Condition::new("Accepted", false, "NotAllowed", message.clone(), generation),
            Condition::new("Programmed", false, "NotAllowed", message, generation),
        ]
    };
    status::ListenerSetStatus {
        conditions,
        listeners: mine.iter().map(|l| l.status()).collect(),
    }
}
