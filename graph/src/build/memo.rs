//! What the builder remembers between builds: for each route and each Service it drew, the
//! inputs it read ([`Dep`]) and what it added — its nodes and edges (shared `Arc`s), the
//! placeholders it asked for and the Services it drew. A unit whose inputs are the same
//! objects next time is replayed instead of drawn: its elements are inserted as they were
//! and its requests made again, in the same place of the build, so the graph is the one a
//! fresh build gives (the tests build every golden world both ways).
//!
//! Objects are compared by address: the memo keeps the last build's input, so an object it
//! names cannot be freed and its address taken by another. A Gateway or ListenerSet counts
//! as the same while its listeners are (its status changing does not redraw every route),
//! a status while it is equal. ReferenceGrants and Namespaces are read by many units at
//! once: when any changes, nothing is reused.

use std::collections::HashMap;
use std::sync::Arc;

use fairlead_edge_model::input::{Gateway, Input, ListenerSet};

use super::Draft;
use crate::id::NodeId;
use crate::model::{Edge, Node};
use crate::world::{Check, Workload, World};

/// An input a unit read.
#[derive(Clone, Debug)]
pub(super) enum Dep {
    /// An object, by address (0: none).
    At(usize),
    /// The status a controller wrote.
    Status(Option<Arc<serde_json::Value>>),
    /// A route's parent Gateway (its listeners are what is read).
    Gateway(Option<Arc<Gateway>>),
    /// A route's parent ListenerSet (its listeners are what is read).
    ListenerSet(Option<Arc<ListenerSet>>),
    /// Whose status follows.
    Named(NodeId),
}

impl Dep {
    /// An object's address (for [`Dep::At`]).
    pub(super) fn at<T>(object: Option<&Arc<T>>) -> Self {
        Self::At(object.map_or(0, |o| Arc::as_ptr(o) as usize))
    }

    /// Whether a unit reading `self` reads what it read when it saw `other`.
    pub(super) fn same(&self, other: &Self) -> bool {
        fn both<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>, eq: impl Fn(&T, &T) -> bool) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || eq(a, b),
                _ => false,
            }
        }
        match (self, other) {
            (Self::At(a), Self::At(b)) => a == b,
            (Self::Status(a), Self::Status(b)) => both(a.as_ref(), b.as_ref(), |a, b| a == b),
            (Self::Gateway(a), Self::Gateway(b)) => both(a.as_ref(), b.as_ref(), |a, b| {
                a.spec.listeners == b.spec.listeners
            }),
            (Self::ListenerSet(a), Self::ListenerSet(b)) => both(a.as_ref(), b.as_ref(), |a, b| {
                a.spec.listeners == b.spec.listeners
            }),
            (Self::Named(a), Self::Named(b)) => a == b,
            _ => false,
        }
    }
}

/// A request a unit made of the builder, replayed with it.
#[derive(Clone, Debug)]
pub(super) enum Op {
    /// A placeholder for something referred to and absent (rare: kept out of line).
    Placeholder(Box<Placeholder>),
    /// A Service drawn (once per build, by whichever unit asks first), by its node's id
    /// (shared with the node).
    Service(NodeId),
}

/// A placeholder asked for: node `id` of `kind`, named `name`, missing for `reason`.
#[derive(Clone, Debug)]
pub(super) struct Placeholder {
    pub id: NodeId,
    pub kind: String,
    pub name: String,
    pub reason: String,
}

/// What a unit adds while it is drawn.
#[derive(Debug, Default)]
pub(super) struct Recording {
    /// The nodes it created.
    pub nodes: Vec<NodeId>,
    /// The edges it added.
    pub edges: Vec<Arc<Edge>>,
    /// Its requests.
    pub ops: Vec<Op>,
}

/// One unit's last drawing (boxed slices: kept for as long as the unit is unchanged, they
/// hold no room to grow).
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) deps: Box<[Dep]>,
    /// Its nodes as it left them.
    pub nodes: Box<[Arc<Node>]>,
    /// Its edges.
    pub edges: Box<[Arc<Edge>]>,
    /// Its requests.
    pub ops: Box<[Op]>,
}

impl Entry {
    /// The entry of a unit that read `deps` and added `nodes` and what `recording` holds.
    pub(super) fn new(deps: Vec<Dep>, nodes: Vec<Arc<Node>>, recording: Recording) -> Self {
        Self {
            deps: deps.into(),
            nodes: nodes.into(),
            edges: recording.edges.into(),
            ops: recording.ops.into(),
        }
    }
}

/// Which units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Table {
    /// Routes of every kind.
    Routes,
    /// Services with their ports' EndpointSlices.
    Services,
}

/// The builder's memory (see the module's documentation). Empty, it reuses nothing.
#[derive(Debug, Default)]
pub struct Memo {
    /// The last build's input, keeping alive every object an entry names by address.
    input: Input,
    /// The ReferenceGrants and Namespaces the entries were drawn with, by address.
    shared: Vec<usize>,
    /// The last build's units.
    last: [HashMap<NodeId, Arc<Entry>>; 2],
    /// This build's.
    next: [HashMap<NodeId, Arc<Entry>>; 2],
    /// Units replayed by the last build.
    reused: usize,
    /// What the last whole build left for patching, when it can be patched.
    patchable: Option<Patchable>,
    /// Whether the last build was a patch.
    was_patch: bool,
}

/// What a patch needs of the last whole build (see `patch`): its graph, what its parts
/// other than routes and Services read, and when it judged certificates.
#[derive(Debug)]
pub(super) struct Patchable {
    /// The graph it gave.
    pub graph: Draft,
    /// Every object and status read by the parts that are not units.
    pub fixed: Vec<Dep>,
    /// The ServiceWithHealthchecks read.
    pub checks: Vec<Check>,
    /// The proxy workloads read.
    pub workloads: Vec<Workload>,
    /// When certificate expiry was judged.
    pub judged_at: i64,
}

/// What the parts of a build that are not units read: every object that is not a route or
/// an EndpointSlice, and every status that is not a route's (sorted by id).
pub(super) fn fixed_deps(input: &Input, world: &World) -> Vec<Dep> {
    fn at<T>(list: &[Arc<T>]) -> impl Iterator<Item = Dep> + '_ {
        list.iter().map(|o| Dep::at(Some(o)))
    }
    let mut deps: Vec<Dep> = at(&input.instances)
        .chain(at(&input.gateway_classes))
        .chain(at(&input.gateways))
        .chain(at(&input.listener_sets))
        .chain(at(&input.reference_grants))
        .chain(at(&input.backend_tls_policies))
        .chain(at(&input.config_maps))
        .chain(at(&input.services))
        .chain(at(&input.secrets))
        .chain(at(&input.namespaces))
        .collect();
    deps.push(Dep::At(usize::MAX));
    let mut statuses: Vec<(&NodeId, &Arc<serde_json::Value>)> = world
        .statuses
        .iter()
        .filter(|(id, _)| {
            id.as_str()
                .split('/')
                .nth(1)
                .is_none_or(|kind| !kind.ends_with("Route"))
        })
        .collect();
    statuses.sort_by(|a, b| a.0.cmp(b.0));
    for (id, status) in statuses {
        deps.push(Dep::Named(id.clone()));
        deps.push(Dep::Status(Some(status.clone())));
    }
    deps
}

impl Memo {
    /// Units the last build replayed (or, patching, kept) instead of drawing.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// Whether the last build patched the one before instead of building anew.
    pub fn patched_last(&self) -> bool {
        self.was_patch
    }

    /// Starts a whole build of `input`.
    pub(super) fn begin(&mut self, input: &Input) {
        self.patchable = None;
        self.was_patch = false;
        let shared: Vec<usize> = input
            .reference_grants
            .iter()
            .map(|g| Arc::as_ptr(g) as usize)
            .chain(input.namespaces.iter().map(|n| Arc::as_ptr(n) as usize))
            .collect();
        self.last = std::mem::take(&mut self.next);
        if shared != self.shared {
            self.last = Default::default();
            self.shared = shared;
        }
        self.reused = 0;
    }

    /// Ends a whole build of `input`: what it drew is what the next one can reuse, and
    /// `patchable` what a patch of it needs (none when one of its units could not be kept).
    pub(super) fn end(&mut self, input: &Input, patchable: Option<Patchable>) {
        self.last = Default::default();
        self.input = input.clone();
        self.patchable = patchable;
    }

    /// Takes what patching the last build needs, when it read what `fixed`, `world` and
    /// `now` say the parts that are not units read now.
    pub(super) fn take_patchable(
        &mut self,
        fixed: &[Dep],
        world: &World,
        now: i64,
    ) -> Option<Patchable> {
        let p = self.patchable.as_ref()?;
        // Certificate expiry is judged anew by a whole build at least once a minute.
        let same = now >= p.judged_at
            && now < p.judged_at + 60
            && p.fixed.len() == fixed.len()
            && p.fixed.iter().zip(fixed).all(|(a, b)| a.same(b))
            && p.checks == world.checks
            && p.workloads == world.workloads;
        if same { self.patchable.take() } else { None }
    }

    /// The units of `table` the last build kept, to patch in place.
    pub(super) fn units(&mut self, table: Table) -> &mut HashMap<NodeId, Arc<Entry>> {
        &mut self.next[table as usize]
    }

    /// Ends a patch of the last build for `input`: `reused` units kept as they were.
    pub(super) fn patched(&mut self, input: &Input, reused: usize, patchable: Patchable) {
        self.input = input.clone();
        self.reused = reused;
        self.patchable = Some(patchable);
        self.was_patch = true;
    }

    /// Forgets everything (a patch that could not be finished changed the units).
    pub(super) fn forget(&mut self) {
        *self = Self::default();
    }

    /// The last drawing of unit `id` if it read what `deps` says it reads now.
    pub(super) fn reusable(
        &mut self,
        table: Table,
        id: &NodeId,
        deps: &[Dep],
    ) -> Option<Arc<Entry>> {
        let entry = self.last[table as usize].get(id)?;
        let same =
            entry.deps.len() == deps.len() && entry.deps.iter().zip(deps).all(|(a, b)| a.same(b));
        same.then(|| entry.clone())
    }

    /// Keeps unit `id`'s drawing for the next build (`replayed`: as the last build drew it).
    pub(super) fn keep(&mut self, table: Table, id: NodeId, entry: Arc<Entry>, replayed: bool) {
        self.reused += usize::from(replayed);
        self.next[table as usize].insert(id, entry);
    }
}
