//! `ServiceWithHealthchecks` (`network.deckhouse.io/v1alpha1`, short name `swh`): the API types
//! of the health module and the CRD generated from them.
//!
//! Compatible with the Deckhouse resource: the spec is the Service spec plus a required
//! `healthcheck` (initial delay, period, and probes of mode HTTP, TCP or PostgreSQL, each
//! aimed at a target port); the status carries conditions, per-endpoint results,
//! `healthcheckCondition` counts, the load balancer and the cluster IPs. The CRD adds what the
//! Rust types cannot say: list-map keys, and CEL rules that reject a probe whose block does not
//! match its mode.

mod crd;
mod types;

pub use crd::crd;
pub use types::*;

/// The API group.
pub const GROUP: &str = "network.deckhouse.io";
/// The Secret type PostgreSQL probe credentials must have.
pub const POSTGRESQL_CREDENTIALS_TYPE: &str = "network.deckhouse.io/postgresql-credentials";
/// The `endpointslice.kubernetes.io/managed-by` value of the slices the agents write (the
/// Deckhouse value, so a migration adopts and cleans the old slices).
pub const MANAGED_BY: &str = "servicewithhealthchecks";
