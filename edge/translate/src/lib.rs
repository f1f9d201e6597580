//! The ALB's translator: Gateway API objects in, per-Gateway Envoy resources and Gateway API
//! statuses out. Pure: no I/O, no clock, no randomness, so the same input always gives the same
//! output (golden tests rely on it, and the xDS server diffs snapshots by content).
//!
//! The pipeline, one module per stage:
//! `model` (input as plain data) → `gateway` (listeners, conflicts, certificates) → `http`,
//! `grpc`, `stream` (route rules, matches, filters, precedence) with `backend` and `refs`
//! (references and grants) → `attach` (parentRefs, allowedRoutes, hostnames; route status)
//! → `ir` (per Gateway: listeners, filter chains, virtual hosts, routes, clusters with their
//! TLS — `backend_tls` — and endpoints, certificates) → one renderer per xDS type
//! (`listener`, `route`, `cluster`, `endpoint`, `secret`, on the building blocks of
//! `envoy`; `wire` encodes as they build). A [`Translator`] runs the same stages with a
//! `memo` of its last translation at the two boundaries where work repeats (routes →
//! rules, IR → encodings), so that the control plane's translation after a change costs
//! what the change touches.

pub mod attach;
pub mod backend;
pub mod backend_tls;
pub mod certificate;
pub mod cluster;
pub mod endpoint;
pub mod envoy;
pub mod gateway;
pub mod grpc;
pub mod hostname;
pub mod http;
pub mod instance;
pub mod ir;
pub mod kinds;
pub mod listener;
mod memo;
pub mod model;
pub mod pb;
pub mod proxyless;
pub mod refs;
mod render;
pub mod route;
mod routes;
pub mod secret;
pub mod status;
pub mod stream;
pub mod telemetry;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use model::{Input, ParentRef};
use refs::Grants;
use routes::{Content, RouteView, Source};
use status::{Condition, GatewayStatus, RouteKey, Statuses};

/// The controller name of GatewayClass `d8-alb`.
pub const CONTROLLER_NAME: &str = "alb.network.deckhouse.io/gateway-controller";

/// One Envoy resource in its wire form: the translator encodes each resource as it builds it,
/// so a translation never holds the (large) decoded messages of a whole Gateway, and the
/// snapshot hashes and serves the bytes as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    /// The resource's name.
    pub name: String,
    /// The encoded message.
    pub bytes: Vec<u8>,
}

impl Encoded {
    /// Encodes `message` named `name`.
    pub fn new<M: prost::Message>(name: impl Into<String>, message: &M) -> Self {
        Self {
            name: name.into(),
            bytes: message.encode_to_vec(),
        }
    }

    /// The message back (for tests, and for the rare resource derived from another).
    pub fn decode<M: prost::Message + Default>(&self) -> Result<M, prost::DecodeError> {
        M::decode(self.bytes.as_slice())
    }
}

/// The Envoy resources of one Gateway (one xDS snapshot), encoded: `Listener`s,
/// `RouteConfiguration`s, `Cluster`s, `ClusterLoadAssignment`s and TLS `Secret`s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resources {
    /// Listeners.
    pub listeners: Vec<Encoded>,
    /// Route configurations.
    pub routes: Vec<Encoded>,
    /// Clusters.
    pub clusters: Vec<Encoded>,
    /// Endpoints (one assignment per cluster).
    pub endpoints: Vec<Encoded>,
    /// TLS secrets.
    pub secrets: Vec<Encoded>,
    /// When the listeners carry Envoy's GeoIP filter: what proxies lacking its databases
    /// are served instead.
    pub without_geoip: Option<WithoutGeoip>,
}

/// The listeners of a Gateway whose instance asks for GeoIP headers, as served to a proxy
/// that does not hold every database the filter opens (Envoy refuses a listener whose
/// database file is missing): the same listeners without the filter, still removing
/// client-sent geolocation headers. The other resources are the same for both.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WithoutGeoip {
    /// The editions a proxy must hold to be served [`Resources::listeners`].
    pub editions: Vec<fairlead_edge_api::geoip::Edition>,
    /// The listeners without the filter.
    pub listeners: Vec<Encoded>,
}

/// What a translation yields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Translation {
    /// Resources per Gateway.
    pub gateways: BTreeMap<ObjectKey, Resources>,
    /// Statuses.
    pub statuses: Statuses,
}

/// Translates everything served by `controller_name`.
pub fn translate(input: &Input, controller_name: &str) -> Translation {
    translate_with(input, controller_name, &mut memo::Forget, |_, _| {})
}

/// The IR of every Gateway served by `controller_name` (what [`translate`] renders), by
/// `namespace/name`.
pub fn intermediate(input: &Input, controller_name: &str) -> BTreeMap<ObjectKey, ir::Gateway> {
    let mut irs = BTreeMap::new();
    translate_with(input, controller_name, &mut memo::Forget, |key, ir| {
        irs.insert(key.clone(), ir);
    });
    irs
}

/// A translator that remembers its last translation, for a control plane translating again
/// on every change: a route whose object, Services and ReferenceGrants did not change keeps
/// its translated rules, an Envoy route whose entry did not change keeps its encoding, and a
/// backend whose TLS and EndpointSlices did not change keeps its encoded cluster and
/// endpoints. It gives exactly what [`translate`] gives for the same input (tested); only the
/// work differs.
#[derive(Debug, Default)]
pub struct Translator {
    memo: memo::Memo,
}

impl Translator {
    /// Translates everything served by `controller_name`.
    pub fn translate(&mut self, input: &Input, controller_name: &str) -> Translation {
        self.memo.start(input);
        let translation = translate_with(input, controller_name, &mut self.memo, |_, _| {});
        self.memo.finish();
        translation
    }
}

/// The stages, with `recall` at their memo boundaries; `keep` is given each Gateway's IR once
/// it is rendered (dropped at once otherwise: a Gateway's IR is not held while the next one
/// is built).
fn translate_with(
    input: &Input,
    controller_name: &str,
    recall: &mut impl memo::Recall,
    mut keep: impl FnMut(&ObjectKey, ir::Gateway),
) -> Translation {
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
    let routes = translated_routes(input, &grants, recall);
    attach::routes(&mut gateways, routes, input, controller_name, &mut statuses);
    let tls = backend_tls::Policies::new(input);
    let mut out = Translation::default();
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
        out.gateways
            .insert(g.key.clone(), render::resources(&ir, recall));
        if !tls.is_empty() {
            reached.push((&g.key, ir.backends().cloned().collect()));
        }
        keep(&g.key, ir);
    }
    statuses.backend_tls_policies = tls.statuses(
        reached
            .iter()
            .map(|(key, backends)| (*key, backends.iter())),
        controller_name,
    );
    out.statuses = statuses;
    out
}

/// Every route of `input`, translated, or as `recall` remembers it when the same route was
/// translated against the same Services and ReferenceGrants before (the first boundary of
/// the pipeline).
fn translated_routes<'a>(
    input: &'a Input,
    grants: &Grants<'_>,
    recall: &mut impl memo::Recall,
) -> Vec<RouteView<'a>> {
    let http_like = |t: Result<http::Translated, http::Rejected>| {
        t.map(|t| (Content::Http(t.entries), t.unresolved))
    };
    let mut view = |kind: &'static str,
                    metadata: &'a ObjectMeta,
                    parent_refs: &'a [ParentRef],
                    hostnames: &'a [String],
                    source: Source| {
        let key = || RouteKey::new(kind, crate::model::key(metadata));
        let translated = recall.route(key, &source, || match &source {
            Source::Http(r) => http_like(http::translate(r, input, grants)),
            Source::Grpc(r) => http_like(crate::grpc::translate(r, input, grants)),
            Source::Stream(r) => crate::stream::translate(r, kind, input, grants)
                .map(|(e, u)| (Content::Stream(Arc::new(e)), u)),
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
    let listen = gateway::listen_address(g.gateway);
    let accepted = match &listen {
        Err(problem) => Condition::new(
            "Accepted",
            false,
            "UnsupportedAddress",
            problem.clone(),
            generation,
        ),
        Ok(_) => Condition::new(
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
    let serving = serving && listen.is_ok();
    GatewayStatus {
        // Where the proxies listen, when the Gateway names one address; else what it asks.
        addresses: match &listen {
            Ok(Some(ip)) => vec![model::Address {
                type_: Some("IPAddress".into()),
                value: ip.to_string(),
            }],
            _ => g.gateway.spec.addresses.clone(),
        },
        conditions: vec![
            accepted,
            Condition::new(
                "Programmed",
                serving,
                if serving { "Programmed" } else { "Invalid" },
                match (&listen, serving) {
                    (Err(problem), _) => problem.clone(),
                    (Ok(_), true) => "configuration served over xDS".to_owned(),
                    (Ok(_), false) => "no valid listener".to_owned(),
                },
                generation,
            ),
        ],
        listeners: own.iter().map(|l| l.status()).collect(),
        attached_listener_sets: i32::try_from(g.sets.iter().filter(|s| s.accepted).count())
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
    let conditions = if set.accepted {
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
                programmed,
                if programmed { "Programmed" } else { "Invalid" },
                if programmed {
                    "listeners served"
                } else {
                    "no valid listener"
                },
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
