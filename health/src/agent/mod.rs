//! The agent (`fairlead health agent`, a DaemonSet): probes the pods of its node and publishes
//! the results as EndpointSlices, one Service port each, and as endpoint statuses.
//!
//! ```text
//! watch SWHs, own pods, typed Secrets, own slices -> targets (health/plan targets.rs)
//!   -> timer heap + bounded probe tasks (engine.rs) -> thresholds
//!   -> what to publish (health/plan publish.rs) -> write slices and statuses only on
//!   change (writer.rs)
//! ```

mod engine;
mod writer;

pub use engine::{Settings, run};
