//! Routes of every kind: a node per route, a `parentRef` edge to each listener it attaches
//! to (with the parent's `Accepted` and its reason), a `backendRef` edge per rule and
//! backend (with its weight and the port's readiness), a `mirror` edge per mirror filter.
//!
//! Which listeners a parent admits is read the way the translator decides it (section name
//! or port, protocol and `allowedRoutes` kinds and namespaces, hostname intersection); the
//! parent's status says whether it accepted the route at all. A parent that did not accept
//! it is drawn as one failing edge to the parent (or to the named listener).

use fairlead_edge_model::input::{
    BackendRef, GATEWAY_GROUP, HttpFilter, Listener, NamespacesFrom, ParentRef, key,
};
use fairlead_edge_translate::attach::namespace_allowed;
use fairlead_edge_translate::hostname::intersect;
use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::Builder;
use super::gateways::parent_id;
use super::memo::{Dep, Table};
use crate::health;
use crate::id::NodeId;
use crate::model::{Edge, Health, Relation, Verdict};
use crate::world::object_id;

/// What the graph reads of a route of any kind.
pub(super) struct Route<'a> {
    /// The object's address (what the memo knows it by).
    at: Dep,
    kind: &'static str,
    meta: &'a ObjectMeta,
    parents: &'a [ParentRef],
    hostnames: &'a [String],
    /// Per rule: backends and filters.
    rules: Vec<(&'a [BackendRef], &'a [HttpFilter])>,
}

impl Route<'_> {
    /// Its node id.
    pub(super) fn id(&self) -> NodeId {
        object_id(self.kind, &key(self.meta))
    }
}

/// The route kinds a listener of `protocol` admits by default.
fn default_kinds(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "HTTP" | "HTTPS" => &["HTTPRoute", "GRPCRoute"],
        "TLS" => &["TLSRoute"],
        "TCP" => &["TCPRoute"],
        "UDP" => &["UDPRoute"],
        _ => &[],
    }
}

impl<'a> Builder<'a> {
    pub(super) fn routes(&mut self) {
        for route in &self.all_routes() {
            let id = route.id();
            let deps = self.route_deps(route, &id);
            self.memoized(Table::Routes, &id, deps, |b| b.route(route));
        }
    }

    /// Every route of the input, of every kind.
    pub(super) fn all_routes(&self) -> Vec<Route<'a>> {
        let input = self.input;
        let mut all: Vec<Route<'a>> = Vec::new();
        for r in &input.http_routes {
            all.push(Route {
                at: Dep::at(Some(r)),
                kind: "HTTPRoute",
                meta: &r.metadata,
                parents: &r.spec.parent_refs,
                hostnames: &r.spec.hostnames,
                rules: r
                    .spec
                    .rules
                    .iter()
                    .map(|rule| (&rule.backend_refs[..], &rule.filters[..]))
                    .collect(),
            });
        }
        for r in &input.grpc_routes {
            all.push(Route {
                at: Dep::at(Some(r)),
                kind: "GRPCRoute",
                meta: &r.metadata,
                parents: &r.spec.parent_refs,
                hostnames: &r.spec.hostnames,
                rules: r
                    .spec
                    .rules
                    .iter()
                    .map(|rule| (&rule.backend_refs[..], &rule.filters[..]))
                    .collect(),
            });
        }
        for (kind, routes) in [
            ("TLSRoute", &input.tls_routes),
            ("TCPRoute", &input.tcp_routes),
            ("UDPRoute", &input.udp_routes),
        ] {
            for r in routes {
                all.push(Route {
                    at: Dep::at(Some(r)),
                    kind,
                    meta: &r.metadata,
                    parents: &r.spec.parent_refs,
                    hostnames: &r.spec.hostnames,
                    rules: r
                        .spec
                        .rules
                        .iter()
                        .map(|rule| (&rule.backend_refs[..], &[][..]))
                        .collect(),
                });
            }
        }
        all
    }

    /// What drawing `route` reads: the route, its status, its parents' listeners, and each
    /// backend's Service with its EndpointSlices.
    pub(super) fn route_deps(&self, route: &Route<'_>, id: &NodeId) -> Vec<Dep> {
        let namespace = route.meta.namespace.as_deref().unwrap_or_default();
        let mut deps = vec![
            route.at.clone(),
            Dep::Status(self.world.statuses.get(id).cloned()),
        ];
        for parent in route.parents {
            let name = parent.name.as_str();
            let parent_namespace = parent.namespace.as_deref().unwrap_or(namespace);
            let named = |m: &ObjectMeta| {
                m.namespace.as_deref() == Some(parent_namespace) && m.name.as_deref() == Some(name)
            };
            deps.push(
                match (
                    parent.group.as_deref().unwrap_or(GATEWAY_GROUP),
                    parent.kind.as_deref().unwrap_or("Gateway"),
                ) {
                    (GATEWAY_GROUP, "Gateway") => Dep::Gateway(
                        self.input
                            .gateways
                            .iter()
                            .find(|g| named(&g.metadata))
                            .cloned(),
                    ),
                    (GATEWAY_GROUP, "ListenerSet") => Dep::ListenerSet(
                        self.input
                            .listener_sets
                            .iter()
                            .find(|s| named(&s.metadata))
                            .cloned(),
                    ),
                    _ => Dep::At(0),
                },
            );
        }
        for (backends, filters) in &route.rules {
            let mirrors = filters
                .iter()
                .filter_map(|f| f.request_mirror.as_ref().map(|m| &m.backend_ref));
            for backend in backends.iter().chain(mirrors) {
                let backend_namespace = backend.namespace.as_deref().unwrap_or(namespace);
                self.service_deps(backend_namespace, &backend.name, &mut deps);
            }
        }
        deps
    }

    pub(super) fn route(&mut self, route: &Route<'_>) {
        let key = key(route.meta);
        let id = object_id(route.kind, &key);
        let status = self.status(&id);
        let node = self.node(&id, route.kind, key.name());
        if !route.hostnames.is_empty() {
            node.status
                .insert("hostnames", route.hostnames.to_vec().into());
        }
        let mut parents = Vec::new();
        let mut parent_statuses = Vec::new();
        for parent in route.parents {
            let entry = parent_entry(status, parent, key.namespace());
            let conditions = health::summarize(entry.and_then(|e| e.get("conditions")));
            parent_statuses.push(serde_json::json!({
                "parentRef": parent,
                "conditions": conditions,
            }));
            parents.push(self.parent(route, &id, &key, parent, &conditions));
        }
        let mut verdict = health::of_parts(&parents, "parents");
        let mut rules = Vec::new();
        for (i, (backends, filters)) in (0u32..).zip(&route.rules) {
            let mut verdicts = Vec::new();
            for backend in *backends {
                let v = self.backend(&id, &key, route.kind, i, backend, Relation::BackendRef);
                if backend.weight.unwrap_or(1) > 0 {
                    verdicts.push(v);
                }
            }
            if !backends.is_empty() && verdicts.is_empty() {
                verdicts.push(Verdict::of(
                    Health::Failing,
                    format!("NoBackends: every backend of rule {i} has weight 0"),
                ));
            }
            for mirror in filters.iter().filter_map(|f| f.request_mirror.as_ref()) {
                // A mirror's failure is its edge's: responses never depend on it.
                self.backend(
                    &id,
                    &key,
                    route.kind,
                    i,
                    &mirror.backend_ref,
                    Relation::Mirror,
                );
            }
            if !verdicts.is_empty() {
                rules.push(health::of_parts(
                    &verdicts,
                    &format!("backends of rule {i}"),
                ));
            }
        }
        verdict.worsen(health::of_parts(&rules, "rules"));
        if let Some(node) = self.graph.nodes.get_mut(&id) {
            let node = crate::model::Node::edit(node);
            node.status.insert("parents", parent_statuses.into());
            node.status.insert("rules", route.rules.len().into());
        }
        self.judge(&id, verdict);
    }

    /// Draws one parentRef of a route; its verdict.
    fn parent(
        &mut self,
        route: &Route<'_>,
        id: &NodeId,
        key: &ObjectKey,
        parent: &ParentRef,
        conditions: &[Value],
    ) -> Verdict {
        let kind = parent.kind.as_deref().unwrap_or("Gateway");
        let namespace = parent.namespace.as_deref().unwrap_or(key.namespace());
        let parent_node = parent_id(kind, namespace, &parent.name);
        let accepted = health::condition(conditions, "Accepted");
        let reason = accepted
            .and_then(|c| c["reason"].as_str())
            .map(str::to_owned);
        let mut verdict = health::conditions(conditions);
        let group = parent.group.as_deref().unwrap_or(GATEWAY_GROUP);
        let listeners = match (group, kind) {
            (GATEWAY_GROUP, "Gateway") => self
                .input
                .gateways
                .iter()
                .find(|g| {
                    g.metadata.namespace.as_deref() == Some(namespace)
                        && g.metadata.name.as_deref() == Some(parent.name.as_str())
                })
                .map(|g| g.spec.listeners.as_slice()),
            (GATEWAY_GROUP, "ListenerSet") => self
                .input
                .listener_sets
                .iter()
                .find(|s| {
                    s.metadata.namespace.as_deref() == Some(namespace)
                        && s.metadata.name.as_deref() == Some(parent.name.as_str())
                })
                .map(|s| s.spec.listeners.as_slice()),
            _ => None,
        };
        let Some(listeners) = listeners else {
            let why = reason.clone().unwrap_or_else(|| "NotFound".into());
            let text = format!("{why}: no {kind} {namespace}/{}", parent.name);
            self.placeholder(&parent_node, kind, &parent.name, text.clone());
            verdict = Verdict::of(Health::Failing, text);
            let mut edge =
                Edge::new(id.clone(), Relation::ParentRef, parent_node).judged(verdict.clone());
            edge.accepted = accepted.map(|c| c["status"] == "True");
            edge.reason = reason.map(Into::into);
            self.edge(edge);
            return verdict;
        };
        let is_accepted = accepted.is_some_and(|c| c["status"] == "True");
        let targets: Vec<NodeId> = if is_accepted {
            listeners
                .iter()
                .filter(|l| admits(self, l, parent, route, namespace, key.namespace()))
                .map(|l| parent_node.section(&l.name))
                .collect()
        } else {
            parent
                .section_name
                .as_ref()
                .filter(|s| listeners.iter().any(|l| &&l.name == s))
                .map(|s| vec![parent_node.section(s)])
                .unwrap_or_default()
        };
        let targets = if targets.is_empty() {
            vec![parent_node]
        } else {
            targets
        };
        for target in targets {
            let mut edge = Edge::new(id.clone(), Relation::ParentRef, target);
            if let Some(port) = parent.port {
                edge.port = Some(port);
            }
            edge.accepted = accepted.map(|c| c["status"] == "True");
            edge.reason = reason.as_deref().map(Into::into);
            self.edge(edge.judged(verdict.clone()));
        }
        if accepted.is_none() {
            verdict = Verdict::of(
                Health::Unknown,
                format!(
                    "NoStatus: {kind} {namespace}/{} has not reported on the route",
                    parent.name
                ),
            );
        }
        verdict
    }
}

/// Whether `listener` of the parent admits `route` through `parent` (section, port, kinds,
/// namespaces, hostnames).
fn admits(
    builder: &Builder<'_>,
    listener: &Listener,
    parent: &ParentRef,
    route: &Route<'_>,
    parent_namespace: &str,
    route_namespace: &str,
) -> bool {
    if parent
        .section_name
        .as_ref()
        .is_some_and(|s| s != &listener.name)
        || parent.port.is_some_and(|p| p != listener.port)
    {
        return false;
    }
    let allowed = listener.allowed_routes.as_ref();
    let kinds = allowed.map(|a| a.kinds.as_slice()).unwrap_or_default();
    let kind_ok = if kinds.is_empty() {
        default_kinds(&listener.protocol).contains(&route.kind)
    } else {
        kinds.iter().any(|k| k.kind == route.kind)
    };
    let same = NamespacesFrom::default();
    let from = allowed.and_then(|a| a.namespaces.as_ref()).unwrap_or(&same);
    let hosts_ok = matches!(route.kind, "HTTPRoute" | "GRPCRoute" | "TLSRoute")
        .then(|| intersect(listener.hostname.as_deref(), route.hostnames))
        .flatten()
        .is_none_or(|hosts| !hosts.is_empty());
    kind_ok && hosts_ok && namespace_allowed(from, parent_namespace, route_namespace, builder.input)
}

/// This route's status entry for `parent` (defaults filled in before comparing).
fn parent_entry<'a>(status: &'a Value, parent: &ParentRef, namespace: &str) -> Option<&'a Value> {
    let text = |v: &Value, field: &str, default: &str| -> String {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    status["parents"].as_array()?.iter().find(|entry| {
        let p = &entry["parentRef"];
        p["name"] == parent.name.as_str()
            && text(p, "group", GATEWAY_GROUP) == parent.group.as_deref().unwrap_or(GATEWAY_GROUP)
            && text(p, "kind", "Gateway") == parent.kind.as_deref().unwrap_or("Gateway")
            && text(p, "namespace", namespace) == parent.namespace.as_deref().unwrap_or(namespace)
            && p.get("sectionName").and_then(Value::as_str) == parent.section_name.as_deref()
            && p.get("port").and_then(Value::as_i64) == parent.port.map(i64::from)
    })
}
