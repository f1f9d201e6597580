//! The embedded Kubernetes API server of fairlead.
//!
//! A single-process development and test API server, **not a production control plane**: it
//! is what `fairlead up` runs and what every integration test runs against, because no real
//! API server can be installed where fairlead is built and tested. Components talk to it with
//! the same `kube::Client` they use in a real cluster, so its fidelity to the Kubernetes API
//! conventions is what makes those tests mean something.
//!
//! Four rooms, each using only those below it (`scripts/module-cycles` holds them to it), and
//! a helper for clients (`manifests`: apply a directory of YAML):
//!
//! ```text
//! serve    HTTPS (server) -> path (route) -> authn -> api (verbs) -> admission; watch,
//!          discovery, openapi, table, reviews, protobuf
//! access   tokens, rbac, audit, user
//! storage  store (rv, events), journal, gc (finalizers, owners)
//! objects  resources, crd / schema / cel, meta, defaults, validation, apply / patch, scale,
//!          selectors, errors — what a verb does to an object
//! ```

pub mod access;
pub mod manifests;
pub mod objects;
pub mod serve;
pub mod storage;

pub use serve::server::{ApiServer, Config, ServerError};
