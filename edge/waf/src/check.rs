//! The control plane's check of a route's rule set: the WAF engine compiles it (with the CRS
//! from the same place the WAF beside Envoy reads it), so a rule set that does not compile is
//! named in the route's status with the engine's message before any proxy is asked to run it.
//! Verdicts are kept by digest: a translation after an unrelated change compiles nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fairlead_edge_model::annotations::waf::RuleSet;
use fairlead_modsecurity::Engine;

use fairlead_edge_model::seclang::{Crs, directives};

/// How many verdicts are kept.
const KEPT: usize = 256;

/// The engine's check.
pub struct Check {
    engine: Arc<Engine>,
    crs: Crs,
    verdicts: Mutex<HashMap<String, Result<(), String>>>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("crs", &self.crs).finish()
    }
}

impl Check {
    /// A check by `engine`, the CRS from `crs`.
    pub fn new(engine: Arc<Engine>, crs: Crs) -> Self {
        Self {
            engine,
            crs,
            verdicts: Mutex::default(),
        }
    }
}

impl fairlead_edge_translate::waf::Compile for Check {
    fn compile(&self, rules: &RuleSet) -> Result<(), String> {
        let digest = rules.digest();
        if let Some(verdict) = self
            .verdicts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&digest)
        {
            return verdict.clone();
        }
        let verdict = self
            .engine
            .compile(&directives(rules, &self.crs))
            .map(drop)
            .map_err(|e| e.to_string());
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if verdicts.len() >= KEPT {
            verdicts.clear();
        }
        verdicts.insert(digest, verdict.clone());
        verdict
    }
}
