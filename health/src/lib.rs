//! The service-with-healthchecks module: the probes, the agent that runs them on every node
//! and publishes EndpointSlices, and the controller that keeps the child Services.
//!
//! ```text
//! probe   TCP, HTTP(S), PostgreSQL against one pod address (I/O)
//! agent   watches, schedules probes, publishes slices and statuses of one node
//! controller  child Services, Ready condition and counts, cleanup (leader-elected)
//! start   each component started in a process (the CLI's pods and `fairlead up` call it)
//! cli     `fairlead health …`
//! ```

pub mod agent;
pub mod cli;
pub mod controller;
pub mod metrics;
pub mod probe;
pub mod rbac;
pub mod start;
