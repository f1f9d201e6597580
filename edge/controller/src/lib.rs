//! The ALB's gateway controller: what turns ALB instances into Gateways and running Envoy
//! proxies — the shell around `fairlead_edge_controller_plan`, whose decisions (one instance
//! [`instance`], the Gateway each controls [`instances`], its proxy workload [`workload`],
//! GeoIP's geoproxy and downloads [`geoproxy`], the parts every pod shares [`pods`], what
//! the admission webhooks decide [`admission`]) it re-exports. Here: the Gateway API CRDs and the `d8-alb` GatewayClass ([`crds`]); the
//! per-instance reconciles on kube-runtime's Controller ([`reconcile`]) and what they do for
//! one Gateway ([`realize`], over [`apply`]); the cluster-wide jobs ([`jobs`]): the CA and
//! what it issues ([`certificates`]), Gateways no instance names ([`unmanaged`]; their
//! proxies, when the controller provisions them: [`provision`]),
//! cert-manager's HTTP-01 bridges ([`http01`]), the module's cleanup ([`cleanup`]); the
//! finalizer on instances ([`finalizer`]); the metrics ([`metrics`]); the admission webhooks'
//! server and registration ([`webhook`]); what the
//! controller and the cleanup waiter may do ([`rbac`]); how it starts in a process
//! ([`start`]).

pub mod apply;
pub mod certificates;
pub mod cleanup;
mod context;
pub mod crds;
pub mod finalizer;
pub mod http01;
pub mod ingress2gateway;
mod jobs;
pub mod metrics;
pub mod provision;
pub mod rbac;
mod realize;
pub mod reconcile;
pub mod start;
pub mod unmanaged;
pub mod webhook;

pub use fairlead_edge_controller_plan::{admission, geoproxy, instance, instances, pods, workload};
pub use start::start;
