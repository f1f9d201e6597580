//! The ALB's gateway controller: what turns ALB instances into Gateways and Envoy proxy
//! workloads (webhooks, the CA, cert-manager bridging and cleanup come here too). Today: the
//! Gateway API CRDs and the `d8-alb` GatewayClass ([`crds`]), and instances becoming their
//! Gateways — the decisions in [`instances`], the loop in [`reconcile`]. Proxy workloads are
//! next.

pub mod apply;
pub mod certificates;
pub mod cleanup;
pub mod crds;
pub mod http01;
pub mod instance;
pub mod instances;
pub mod metrics;
pub mod reconcile;
pub mod unmanaged;
pub mod workload;
