//! Compiled rule sets by digest: a set is compiled the first time a digest is asked for and
//! shared by every route (and request) with the same content; a set that does not compile is
//! remembered as such. The sets last asked for are kept ([`KEPT`]), so a ConfigMap that
//! changes often does not grow the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fairlead_edge_model::annotations::waf::RuleSet;
use fairlead_modsecurity::{Engine, Rules};

use fairlead_edge_model::seclang::{Crs, directives};

/// How many compiled sets are kept.
pub const KEPT: usize = 64;

/// A compiled set, or the engine's message.
pub type Compiled = Result<Arc<Rules>, String>;

/// One entry: its last use, and the set once compiled (others asking meanwhile wait).
struct Slot {
    used: u64,
    set: Arc<tokio::sync::OnceCell<Compiled>>,
}

/// The compiled rule sets of the process.
pub struct Sets {
    engine: Arc<Engine>,
    crs: Crs,
    slots: Mutex<(u64, HashMap<String, Slot>)>,
    compiled: prometheus::IntGauge,
}

impl Sets {
    /// Sets compiled by `engine`, the CRS from `crs`; `compiled` counts those held.
    pub fn new(engine: Arc<Engine>, crs: Crs, compiled: prometheus::IntGauge) -> Self {
        Self {
            engine,
            crs,
            slots: Mutex::new((0, HashMap::new())),
            compiled,
        }
    }

    /// The set of `digest`, compiled from `set` (called only the first time) on a blocking
    /// thread.
    pub async fn get(
        &self,
        digest: &str,
        set: impl FnOnce() -> Result<RuleSet, String>,
    ) -> Compiled {
        let cell = {
            let mut guard = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let (clock, slots) = &mut *guard;
            *clock += 1;
            let now = *clock;
            let cell = slots.entry(digest.to_owned()).or_insert_with(|| Slot {
                used: now,
                set: Arc::default(),
            });
            cell.used = now;
            let cell = cell.set.clone();
            if slots.len() > KEPT
                && let Some(oldest) = slots
                    .iter()
                    .min_by_key(|(_, s)| s.used)
                    .map(|(k, _)| k.clone())
            {
                slots.remove(&oldest);
            }
            self.compiled
                .set(i64::try_from(slots.len()).unwrap_or(i64::MAX));
            cell
        };
        cell.get_or_init(|| async {
            let text = match set() {
                Ok(set) => directives(&set, &self.crs),
                Err(e) => return Err(e),
            };
            let engine = self.engine.clone();
            let started = std::time::Instant::now();
            let compiled = tokio::task::spawn_blocking(move || engine.compile(&text))
                .await
                .map_err(|e| format!("compiling: {e}"))?
                .map(Arc::new)
                .map_err(|e| e.to_string());
            match &compiled {
                Ok(_) => tracing::info!(digest, elapsed_ms = started.elapsed().as_millis() as u64, "rule set compiled"),
                Err(e) => tracing::error!(digest, error = %e, "rule set does not compile; its routes answer 503"),
            }
            compiled
        })
        .await
        .clone()
    }
}
