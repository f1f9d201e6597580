//! Readiness of a process: ready only once every registered component has reported ready.
//!
//! Components register at start (so `/readyz` knows they exist before they run) and flip their
//! [`ReadyHandle`] when they can serve; a component that loses what it needs (a watch, a lease)
//! flips it back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The set of components and whether each is ready. Cheap to clone; clones share state.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    components: Arc<Mutex<BTreeMap<String, bool>>>,
}

/// One component's readiness switch, returned by [`Readiness::register`].
#[derive(Clone, Debug)]
pub struct ReadyHandle {
    name: String,
    components: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Creates an empty set: a process with no components is ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a component as not ready yet. Registering a name twice returns a handle to the
    /// same entry and resets it to not ready.
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let name = name.into();
        self.lock().insert(name.clone(), false);
        ReadyHandle {
            name,
            components: self.components.clone(),
        }
    }

    /// The names of the components that have not reported ready, in name order.
    pub fn not_ready(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether every registered component is ready.
    pub fn is_ready(&self) -> bool {
        self.lock().values().all(|ready| *ready)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        self.components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl ReadyHandle {
    /// Marks the component ready.
    pub fn ready(&self) {
        self.set(true);
    }

    /// Marks the component not ready (it lost something it needs to serve).
    pub fn not_ready(&self) {
        self.set(false);
    }

    /// The component's registered name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn set(&self, ready: bool) {
        self.components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.name.clone(), ready);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_component_is() {
        let readiness = Readiness::new();
        assert!(readiness.is_ready(), "nothing registered is ready");
        let a = readiness.register("watcher");
        let b = readiness.register("apiserver");
        assert_eq!(readiness.not_ready(), vec!["apiserver", "watcher"]);
        a.ready();
        assert!(!readiness.is_ready());
        assert_eq!(readiness.not_ready(), vec!["apiserver"]);
        b.ready();
        assert!(readiness.is_ready());
        a.not_ready();
        assert_eq!(readiness.not_ready(), vec!["watcher"]);
        assert_eq!(a.name(), "watcher");
    }
}
