//! The ALB's WAF (`fairlead edge waf`), a container of a proxy pod whose Gateway has a route
//! with `alb.network.deckhouse.io/mod-security`: Envoy's `ext_proc` filter asks it about each
//! request of such a route over a Unix socket in the pod's run directory, and it answers with
//! the verdict of libmodsecurity running the route's rule set — the OWASP Core Rule Set at
//! the route's paranoia level, the route's ConfigMap rules and its inline directives
//! ([`fairlead_edge_model::seclang`]). Rule sets are compiled once per distinct content and shared by the
//! routes that use it ([`sets`]); the service ([`service`]) sees requests only, never
//! responses, and counts what it does ([`metrics`]). The control plane checks rule sets with
//! the same engine before proxies run them ([`check`]).

pub mod check;
pub mod metrics;
pub mod service;
pub mod sets;

pub use check::Check;
pub use fairlead_edge_model::seclang::Crs;
pub use service::serve;
pub use sets::Sets;
