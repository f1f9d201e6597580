//! The ALB's instance API, `network.deckhouse.io/v1alpha1`: `ClusterALBInstance`
//! (cluster-scoped: a Gateway in `d8-alb`, proxies as a DaemonSet, LoadBalancer or HostPort
//! inlet) and `ALBInstance` (namespaced: a Gateway in its own namespace, proxies as a
//! Deployment behind a LoadBalancer). Their Rust types ([`types`]), what `spec.geoIP` names
//! ([`geoip`]), and the CRDs generated from them with the rules a schema can say ([`crd`]):
//! what the gateway controller reads, and what `fairlead up` and the charts install. Without
//! the default `kube` feature, the specs alone (what the translator reads of an instance).

#[cfg(feature = "kube")]
pub mod crd;
pub mod geoip;
pub mod types;

#[cfg(feature = "kube")]
pub use types::{ALBInstance, ClusterALBInstance};
pub use types::{InstanceSpec, InstanceStatus};

/// The label of a managed Gateway naming its controlling instance, `<kind>.<name>`
/// (`ClusterALBInstance.main`; an ALBInstance's is in the Gateway's namespace).
pub const INSTANCE_LABEL: &str = "alb.deckhouse.io/instance";
