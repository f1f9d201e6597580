//! Pure decisions of the health module (no I/O): from a ServiceWithHealthchecks, the pods of
//! one node and their probe results, the EndpointSlices that node publishes and the endpoint
//! statuses it reports.
//!
//! Per-port semantics, the point of the module: a pod is published for a Service port only
//! while every probe of that port's target port passes; ports without probes follow the pod's
//! Ready condition; a failing probe withdraws the pod from that port alone. Slices carry one
//! port each and are keyed by (resource, node, port, address family, shard of at most
//! [`MAX_ENDPOINTS`]).

pub mod controller;
pub mod publish;
pub mod schedule;
mod slices;
mod status;
pub mod targets;
mod thresholds;

pub use slices::{MAX_ENDPOINTS, NODE_LABEL, Planned, plan_slices, slice_name};
pub use status::{endpoint_status, probe_target_label};
pub use thresholds::Counter;

use std::net::IpAddr;

/// A pod as the planner needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// Pod IPs (one per family).
    pub ips: Vec<IpAddr>,
    /// The kubelet's `Ready` condition.
    pub ready: bool,
    /// Being deleted (has a deletionTimestamp).
    pub terminating: bool,
}

/// The result of one probe of one pod, after thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not decided yet (initial delay, or thresholds not reached from the start).
    Pending,
    /// Passing.
    Passing,
    /// Failing.
    Failing,
}

/// Probe verdicts of one pod, in the order of `spec.healthcheck.probes`.
pub type PodVerdicts = Vec<Verdict>;
