//! What one translation keeps for the next, so that a change costs in proportion to what it
//! touches: the translated rules of each route, reused while the route, the Services and the
//! ReferenceGrants are the same objects or equal ones (a route whose annotations name a
//! Secret is translated every time). Only work is saved: a memo never
//! changes the output, which the tests check by translating the same inputs with and without
//! one. (The render stage keeps the encodings the same way, on the same [`Generations`].)
//!
//! Each cache keeps what the last translation used and drops the rest, so a deleted route
//! leaves nothing behind.
//!
//! The memo sits at the boundary of the stage where work is repeated: route objects →
//! translated rules (before `attach`). The stages themselves know nothing of it; they ask a
//! [`Recall`], which a [`crate::Translator`]'s memo answers from its last translation and
//! [`Forget`] (a one-off translation) by making the value, paying nothing for keeping it.

use crate::FastMap as Map;
use std::hash::Hash;
use std::sync::Arc;

use fairlead_edge_model::input::{Input, ReferenceGrant, same};
use k8s_openapi::api::core::v1::Service;

use crate::routes::{Outcome, Source, Translated};
use crate::status::RouteKey;

/// What the stage's boundary asks of a memory.
pub(crate) trait Recall {
    /// The translation of the route `key` (kind, namespace, name) from `source`.
    fn route(
        &mut self,
        key: impl FnOnce() -> RouteKey,
        source: &Source,
        make: impl FnOnce() -> Outcome,
    ) -> Arc<Outcome>;
}

/// No memory: every value is made for its one use.
pub(crate) struct Forget;

impl Recall for Forget {
    fn route(
        &mut self,
        _: impl FnOnce() -> RouteKey,
        _: &Source,
        make: impl FnOnce() -> Outcome,
    ) -> Arc<Outcome> {
        Arc::new(make())
    }
}

/// A cache of one translation's results for the next: entries used in this translation are
/// carried over, the rest dropped at [`Generations::next`]. One table, each entry stamped
/// with the translation that last used it: a lookup is one hash of the key.
#[derive(Debug)]
pub struct Generations<K, V> {
    entries: Map<K, (u64, V)>,
    /// The translation under way.
    now: u64,
}

impl<K, V> Default for Generations<K, V> {
    fn default() -> Self {
        Self {
            entries: Map::default(),
            now: 0,
        }
    }
}

impl<K: Hash + Eq, V> Generations<K, V> {
    /// The value of `key` if one was made in this translation, or one from the last that
    /// `valid` accepts; otherwise `make`s it. Either way it is kept for the next translation.
    pub fn get_or_make(
        &mut self,
        key: K,
        valid: impl FnOnce(&V) -> bool,
        make: impl FnOnce() -> V,
    ) -> &V {
        use std::collections::hash_map::Entry as Slot;
        let now = self.now;
        match self.entries.entry(key) {
            // Made in this translation already or kept from the last, unless another object
            // has the key: made again (an input read from files may hold two objects of one
            // key within a translation; a watch cannot).
            Slot::Occupied(o) => {
                let (used, value) = o.into_mut();
                if !valid(value) {
                    *value = make();
                }
                *used = now;
                value
            }
            Slot::Vacant(v) => &v.insert((now, make())).1,
        }
    }

    /// Ends a translation: what it used is what the next one may reuse.
    pub fn next(&mut self) {
        let now = self.now;
        self.entries.retain(|_, (used, _)| *used == now);
        self.now += 1;
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// What a route's translation reads besides the route: the Services (backend ports and
/// protocols) and the ReferenceGrants.
#[derive(Debug, Default)]
pub(crate) struct World {
    /// Services by namespace, then name (two levels, so a lookup by `&str` allocates nothing).
    services: Map<String, Map<String, Arc<Service>>>,
    /// How many distinct Services (namespace and name) there are.
    count: usize,
    grants: Vec<Arc<ReferenceGrant>>,
}

impl World {
    fn of(input: &Input) -> Self {
        let mut services: Map<String, Map<String, Arc<Service>>> = Map::default();
        for s in &input.services {
            services
                .entry(s.metadata.namespace.clone().unwrap_or_default())
                .or_default()
                .insert(s.metadata.name.clone().unwrap_or_default(), s.clone());
        }
        Self {
            count: services.values().map(Map::len).sum(),
            services,
            grants: input.reference_grants.clone(),
        }
    }

    /// Whether `input` has the same Services and ReferenceGrants: as many distinct Services,
    /// each of them one of the remembered ones.
    fn holds_for(&self, input: &Input) -> bool {
        self.count == input.services.len()
            && input.distinct_services() == self.count
            && input.services.iter().all(|s| {
                self.services
                    .get(s.metadata.namespace.as_deref().unwrap_or_default())
                    .and_then(|names| names.get(s.metadata.name.as_deref().unwrap_or_default()))
                    .is_some_and(|old| same(old, s))
            })
            && self.grants.len() == input.reference_grants.len()
            && self
                .grants
                .iter()
                .zip(&input.reference_grants)
                .all(|(a, b)| same(a, b))
    }
}

/// The memo of one [`crate::Translator`].
#[derive(Debug, Default)]
pub(crate) struct Memo {
    world: World,
    /// Translated routes by kind, namespace and name.
    routes: Generations<RouteKey, Translated>,
}

impl Recall for Memo {
    fn route(
        &mut self,
        key: impl FnOnce() -> RouteKey,
        source: &Source,
        make: impl FnOnce() -> Outcome,
    ) -> Arc<Outcome> {
        // A route whose annotations name a Secret is translated again: the memo follows
        // routes, Services and grants, not Secrets.
        let fresh =
            matches!(source, Source::Http(r) if crate::annotations::reads_secrets(&r.metadata));
        self.routes
            .get_or_make(
                key(),
                |old| !fresh && old.source.same(source),
                || Translated {
                    source: source.clone(),
                    outcome: Arc::new(make()),
                },
            )
            .outcome
            .clone()
    }
}

impl Memo {
    /// Starts a translation of `input`: translated routes are kept only while the Services
    /// and ReferenceGrants they were resolved against are the same.
    pub(crate) fn start(&mut self, input: &Input) {
        if !self.world.holds_for(input) {
            self.routes.clear();
            self.world = World::of(input);
        }
    }

    /// Ends a translation.
    pub(crate) fn finish(&mut self) {
        self.routes.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_keeps_what_it_used_and_drops_the_rest() {
        let mut g: Generations<&str, u32> = Generations::default();
        assert_eq!(*g.get_or_make("a", |_| true, || 1), 1);
        assert_eq!(*g.get_or_make("b", |_| true, || 2), 2);
        g.next();
        // Reused when valid, made again when not; "b" unused.
        assert_eq!(*g.get_or_make("a", |_| true, || 10), 1);
        assert_eq!(
            *g.get_or_make("a", |_| true, || 11),
            1,
            "made once per translation"
        );
        assert_eq!(
            *g.get_or_make("a", |_| false, || 12),
            12,
            "another object of the same key: made for it"
        );
        g.next();
        assert_eq!(*g.get_or_make("b", |_| true, || 20), 20, "b was dropped");
        assert_eq!(
            *g.get_or_make("a", |v| *v == 2, || 13),
            13,
            "invalid: made again"
        );
    }
}
