//! The service-with-healthchecks module: the probes, the agent that runs them on every node
//! and publishes EndpointSlices, and the controller that keeps the child Services.
//!
//! ```text
//! probe   TCP, HTTP(S), PostgreSQL against one pod address (I/O)
//! cli     `fairlead health …`
//! ```

pub mod cli;
pub mod probe;
