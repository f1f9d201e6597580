//! Expressions compiled once per text for the process — CEL rules and schema patterns: a
//! CRD's validation runs on every write of its objects, and compiling the same text on each
//! (the CEL parser, the regex automata) was most of the CPU of an HTTPRoute write. Bounded:
//! after [`MAX`] texts (reached only by creating new rules without end) it starts again.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// How many compiled texts a cache keeps before it starts again: far more than the CRDs and
/// admission policies of a cluster hold.
pub const MAX: usize = 10_000;

/// Compiled values by their text.
pub struct Compiled<T> {
    kept: OnceLock<Mutex<HashMap<String, T>>>,
}

impl<T> Default for Compiled<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Compiled<T> {
    /// An empty cache (for a `static`).
    pub const fn new() -> Self {
        Self {
            kept: OnceLock::new(),
        }
    }
}

impl<T: Clone> Compiled<T> {
    /// The value compiled from `text`: kept from an earlier call, or `compile`d now and kept.
    pub fn get(&self, text: &str, compile: impl FnOnce(&str) -> T) -> T {
        let kept = self.kept.get_or_init(Mutex::default);
        let lock = || kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = lock().get(text) {
            return found.clone();
        }
        let made = compile(text);
        let mut kept = lock();
        if kept.len() >= MAX {
            kept.clear();
        }
        kept.insert(text.to_owned(), made.clone());
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_text_is_compiled_once_until_the_cache_is_full() {
        let cache: Compiled<usize> = Compiled::new();
        let calls = Cell::new(0);
        let compile = |t: &str| {
            calls.set(calls.get() + 1);
            t.len()
        };
        assert_eq!(cache.get("abc", compile), 3);
        assert_eq!(cache.get("abc", compile), 3);
        assert_eq!(calls.get(), 1, "kept");
        for i in 0..MAX {
            cache.get(&i.to_string(), compile);
        }
        assert_eq!(calls.get(), 1 + MAX);
        // Full: started again, so "abc" is compiled anew.
        cache.get("abc", compile);
        assert_eq!(calls.get(), 2 + MAX);
    }
}
