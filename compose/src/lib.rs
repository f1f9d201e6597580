//! The compositions: which components run together in a process, and with what. The pods of
//! the charts that hold more than one component (`pods`: the gateway controller with the
//! relationship graph, the xDS control plane with its index), composed from each component's
//! `start`; the alb module's RBAC objects (`rbac`); and `fairlead up` (`up`), which runs every
//! pod in one process against the embedded API server, with the local workload runner for the
//! pods the controllers create.
//!
//! Compositions bind the sockets (they know the addresses) and hand components their
//! listeners; components start on the process's runtime.

pub mod listen;
pub mod pods;
pub mod rbac;
pub mod up;
pub mod waf;
