//! The WAF check the control plane is given: in a build with the WAF (cargo feature `waf`)
//! the engine itself, the CRS where Debian's `modsecurity-crs` puts it; otherwise one that
//! refuses every rule set, saying the build lacks the engine — a route asking for the WAF
//! then answers 503 rather than being served without it.

use std::sync::Arc;

use fairlead_edge_translate::waf::Compile;

/// The check of this build.
pub fn check() -> Arc<dyn Compile> {
    #[cfg(feature = "waf")]
    {
        match fairlead_modsecurity::Engine::new(concat!("fairlead ", env!("CARGO_PKG_VERSION"))) {
            Ok(engine) => Arc::new(fairlead_edge_waf::Check::new(
                engine,
                fairlead_edge_waf::Crs::default(),
            )),
            Err(e) => {
                tracing::error!(error = %e, "the WAF engine did not start; routes asking for the WAF answer 503");
                Arc::new(fairlead_edge_translate::waf::Missing)
            }
        }
    }
    #[cfg(not(feature = "waf"))]
    {
        Arc::new(fairlead_edge_translate::waf::Missing)
    }
}
