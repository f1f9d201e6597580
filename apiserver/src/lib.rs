//! The embedded Kubernetes API server of fairlead.
//!
//! A single-process development and test API server, **not a production control plane**: it
//! is what `fairlead up` runs and what every integration test runs against, because no real
//! API server can be installed where fairlead is built and tested. Components talk to it with
//! the same `kube::Client` they use in a real cluster, so its fidelity to the Kubernetes API
//! conventions is what makes those tests mean something.
//!
//! ```text
//! HTTPS (server) -> path (route) -> api (verbs, metadata rules) -> store (rv, events, journal)
//!                                      |-> patch / apply (merge, JSON, strategic, SSA)
//!                                      |-> validation / crd (built-in and CRD checks)
//!                                      '-> watch (streams)      gc (finalizers, owners)
//! ```

pub mod admission;
pub mod allocate;
pub mod api;
pub mod apply;
pub mod audit;
pub mod authn;
pub mod cel;
pub mod crd;
pub mod defaults;
pub mod discovery;
pub mod errors;
pub mod gc;
pub mod journal;
pub mod key;
pub mod local;
pub mod manifests;
pub mod meta;
pub mod openapi;
pub mod openapi_proto;
pub mod patch;
pub mod path;
pub mod protobuf;
pub mod rbac;
pub mod request;
pub mod resources;
pub mod reviews;
pub mod scale;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod store;
pub mod table;
pub mod tokens;
pub mod user;
pub mod validation;
pub mod watch;

pub use server::{ApiServer, Config};
