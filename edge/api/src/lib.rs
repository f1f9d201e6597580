//! The ALB's instance API, `network.deckhouse.io/v1alpha1`: `ClusterALBInstance`
//! (cluster-scoped: a Gateway in `d8-alb`, proxies as a DaemonSet, LoadBalancer or HostPort
//! inlet) and `ALBInstance` (namespaced: a Gateway in its own namespace, proxies as a
//! Deployment behind a LoadBalancer). Their Rust types ([`types`]) and the CRDs generated from
//! them with the rules a schema can say ([`crd`]): what the gateway controller reads, and what
//! `fairlead up` and the charts install.

pub mod crd;
pub mod types;

pub use types::{ALBInstance, ClusterALBInstance, InstanceSpec, InstanceStatus};
