//! Patching the last graph instead of building it again: when nothing but routes,
//! EndpointSlices and routes' statuses changed since the last whole build (and that build
//! judged certificates less than a minute ago), only the routes and Services whose inputs
//! changed are drawn again; every other element is the last graph's, untouched. A route or
//! Service drawn again must ask for exactly the Services it asked for before and draw no
//! placeholder (what other parts of the graph share); otherwise the patch is dropped and a
//! whole build runs. The tests build every golden world through both and compare.

use std::sync::Arc;

use fairlead_edge_model::input::Input;
use fairlead_edge_translate::refs::Grants;
use fairlead_key::ObjectKey;

use super::Builder;
use super::memo::{self, Dep, Entry, Op, Table};
use crate::id::NodeId;
use crate::model::Graph;
use crate::world::World;

/// The graph of `input` and `world` as a patch of `memo`'s last build, when it can be one.
pub(super) fn patch(
    input: &Input,
    world: &World,
    now: i64,
    memo: &mut memo::Memo,
    fixed: &[Dep],
) -> Option<Graph> {
    let patchable = memo.take_patchable(fixed, world, now)?;
    let mut builder = Builder {
        input,
        world,
        now: patchable.judged_at,
        grants: Grants::new(input),
        graph: patchable.graph.clone(),
        memo,
        recording: Vec::new(),
        kept_every_unit: true,
    };
    match builder.patch_units() {
        Some(reused) => {
            let mut graph = builder.graph;
            graph.seal();
            let next = memo::Patchable {
                graph: graph.clone(),
                ..patchable
            };
            memo.patched(input, reused, next);
            Some(Graph {
                nodes: graph.nodes,
                edges: graph.edges,
            })
        }
        None => {
            memo.forget();
            None
        }
    }
}

/// A unit to draw again: its id, what it reads now and its last drawing.
struct Dirty {
    id: NodeId,
    deps: Vec<Dep>,
    last: Arc<Entry>,
}

impl Builder<'_> {
    /// Draws again the units whose inputs changed; how many were kept, or `None` when the
    /// graph cannot be patched.
    fn patch_units(&mut self) -> Option<usize> {
        let routes = self.all_routes();
        if routes.len() != self.memo.units(Table::Routes).len() {
            return None;
        }
        let mut dirty_routes = Vec::new();
        for (i, route) in routes.iter().enumerate() {
            let id = route.id();
            let deps = self.route_deps(route, &id);
            let last = self.memo.units(Table::Routes).get(&id)?.clone();
            if !same(&last.deps, &deps) {
                dirty_routes.push((i, Dirty { id, deps, last }));
            }
        }
        let mut dirty_services = Vec::new();
        let services: Vec<(NodeId, Arc<Entry>)> = self
            .memo
            .units(Table::Services)
            .iter()
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
        for (id, last) in services {
            let key = service_key(&id);
            let mut deps = Vec::new();
            self.service_deps(key.namespace(), key.name(), &mut deps);
            if !same(&last.deps, &deps) {
                dirty_services.push(Dirty { id, deps, last });
            }
        }
        let kept = routes.len() + self.memo.units(Table::Services).len()
            - dirty_routes.len()
            - dirty_services.len();
        // Services first: a route's backends read their ports' health.
        for dirty in dirty_services {
            let key = service_key(&dirty.id);
            let service = self.input.service(key.namespace(), key.name())?;
            self.unpatch(&dirty.last);
            let recording = self.record(|b| {
                b.draw_service(&dirty.id, key.namespace(), key.name(), service);
            });
            self.repatch(Table::Services, dirty, recording)?;
        }
        for (i, dirty) in dirty_routes {
            self.unpatch(&dirty.last);
            let recording = self.record(|b| b.route(&routes[i]));
            self.repatch(Table::Routes, dirty, recording)?;
        }
        Some(kept)
    }

    /// Takes out what a unit added when it was last drawn.
    fn unpatch(&mut self, last: &Entry) {
        for node in &last.nodes {
            self.graph.nodes.remove(&node.id);
        }
        for edge in &last.edges {
            self.graph.edges.remove(&edge.id);
        }
    }

    /// What `draw` adds.
    fn record(&mut self, draw: impl FnOnce(&mut Self)) -> memo::Recording {
        self.recording.push(memo::Recording::default());
        draw(self);
        self.recording.pop().unwrap_or_default()
    }

    /// Keeps a unit drawn again; `None` when its requests are not the ones it made before
    /// (what it shares with others changed: a whole build must draw it).
    fn repatch(&mut self, table: Table, dirty: Dirty, recording: memo::Recording) -> Option<()> {
        let services = |ops: &[Op]| -> Option<Vec<NodeId>> {
            ops.iter()
                .map(|op| match op {
                    Op::Service(id) => Some(id.clone()),
                    Op::Placeholder(_) => None,
                })
                .collect()
        };
        if services(&dirty.last.ops)? != services(&recording.ops)? {
            return None;
        }
        self.graph.seal_some(&recording.nodes);
        let nodes = recording
            .nodes
            .iter()
            .filter_map(|n| self.graph.nodes.get(n).cloned())
            .collect();
        let entry = Entry::new(dirty.deps, nodes, recording);
        self.memo.units(table).insert(dirty.id, Arc::new(entry));
        Some(())
    }
}

/// Whether a unit reading `now` reads what it read when it read `last`.
fn same(last: &[Dep], now: &[Dep]) -> bool {
    last.len() == now.len() && last.iter().zip(now).all(|(a, b)| a.same(b))
}

/// The namespace and name of a Service's node id.
fn service_key(id: &NodeId) -> ObjectKey {
    ObjectKey::new(id.namespace(), id.name())
}
