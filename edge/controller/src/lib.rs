//! The ALB's gateway controller: what turns ALB instances into Gateways and Envoy proxy
//! workloads (webhooks, the CA, cert-manager bridging and cleanup come here too). Today it
//! holds its first job, installing the Gateway API CRDs and the `d8-alb` GatewayClass.

pub mod crds;
