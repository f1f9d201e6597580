//! The shared runtime of every fairlead component.
//!
//! Every subcommand of the `fairlead` binary (health agent and controller, xDS server, gateway
//! controller, geoproxy, graph API, the `up` appliance) starts the same way:
//!
//! ```text
//! GlobalArgs --Runtime::start--> telemetry (logs, OTLP traces, W3C propagation)
//!                                metrics   (one Prometheus registry, process metrics)
//!                                readiness (components report in; /readyz waits for all)
//!                                shutdown  (SIGTERM/SIGINT, drain deadline, task tracker)
//!            --AdminServer-----> /metrics /healthz /readyz
//! ```
//!
//! Kubernetes parts, used by every controller: leader election on a Lease ([`lease`]),
//! server-side apply that skips writes already in place ([`apply`], over [`fieldset`]), and an
//! Events recorder ([`events`]), the RBAC objects of a module's components ([`rbac`]), a
//! component's own CRDs kept at its version ([`crds`]), and a Service reaching a process on
//! this machine ([`local`]).
//!
//! The modules are independent: a test can use the admin server without telemetry, or the
//! shutdown coordinator without an admin server.

pub mod admin;
#[cfg(feature = "kube")]
pub mod apply;
pub mod cli;
#[cfg(feature = "kube")]
pub mod cluster;
#[cfg(feature = "kube")]
pub mod conditions;
#[cfg(feature = "kube")]
pub mod crds;
#[cfg(feature = "kube")]
pub mod events;
pub mod exchange;
pub mod executables;
#[cfg(feature = "kube")]
pub mod fieldset;
pub mod files;
pub mod http;
#[cfg(feature = "kube")]
pub mod lease;
#[cfg(feature = "kube")]
pub mod local;
pub mod metrics;
pub mod pki;
pub mod process;
pub mod propagation;
pub mod rbac;
pub mod readiness;
pub mod reconcile;
pub mod runtime;
pub mod shutdown;
pub mod socket;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
#[cfg(feature = "kube")]
pub mod tools;
#[cfg(feature = "kube")]
pub mod watch;

pub use admin::AdminServer;
pub use cli::{GlobalArgs, LogFormat};
pub use metrics::Metrics;
pub use readiness::{Readiness, ReadyHandle};
pub use runtime::Runtime;
pub use shutdown::Shutdown;
