//! The ALB's render stage: the per-Gateway IR of `fairlead-edge-translate` in, Envoy resources
//! out, encoded as they are built (`fairlead_edge_model::Resources`, what the xDS server
//! serves). Pure, as the translate stage is.
//!
//! One renderer per xDS type (`listener`, `route`, `cluster`, `endpoint`, `secret`) on the
//! building blocks of `envoy` (addresses, sockets, connection managers; the proxy's bootstrap
//! shares them), with `telemetry` (access log, tracing) and `wire` (protobuf fields written one
//! at a time); `proxyless` shapes what gRPC's own xDS clients are served, on request. A
//! [`Pipeline`] runs both stages with a memo of its last run at each stage's boundary, so that
//! the control plane's work after a change costs what the change touches; [`run`] is a
//! one-off.
//!
//! A route-level feature is a module of its own here (its Envoy filter or route
//! configuration) beside one in the translate stage (the decision and its status): `access`
//! (who may pass), `traffic` (rates, buffers, timeouts, rewrites, headers) and `waf` (the
//! web application firewall), enabled per route on the connection managers whose routes ask
//! for them (`features`), and `upstream`
//! (affinity, response header limits, TLS to the backends of a route's own clusters).

pub mod access;
pub mod cluster;
pub mod cors;
pub mod endpoint;
pub mod envoy;
pub mod features;
pub mod listener;
mod memo;
pub mod pb;
pub mod proxyless;
mod resources;
pub mod retry;
pub mod route;
pub mod secret;
pub mod split;
pub mod telemetry;
pub mod traffic;
pub mod upstream;
pub mod waf;
pub mod wire;

use std::collections::BTreeMap;

use fairlead_edge_model::input::Input;
use fairlead_edge_model::{ObjectKey, Resources};
use fairlead_edge_translate::ir;
use fairlead_edge_translate::status::Statuses;

/// What a run of both stages yields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Translation {
    /// Resources per Gateway.
    pub gateways: BTreeMap<ObjectKey, Resources>,
    /// Statuses.
    pub statuses: Statuses,
}

/// The Envoy resources of one Gateway's IR.
pub fn render(ir: &ir::Gateway) -> Resources {
    resources::resources(ir, &mut memo::Forget)
}

/// Translates and renders everything served by `controller_name`.
pub fn run(input: &Input, controller_name: &str) -> Translation {
    let mut gateways = BTreeMap::new();
    let statuses = fairlead_edge_translate::translate(input, controller_name, |key, ir| {
        gateways.insert(key.clone(), render(&ir));
    });
    Translation { gateways, statuses }
}

/// Both stages remembering their last run, for a control plane translating again on every
/// change: a route whose object, Services and ReferenceGrants did not change keeps its
/// translated rules, an Envoy route whose entry did not change keeps its encoding, and a
/// backend whose TLS and EndpointSlices did not change keeps its encoded cluster and
/// endpoints. It gives exactly what [`run`] gives for the same input (tested); only the work
/// differs.
#[derive(Debug, Default)]
pub struct Pipeline {
    translator: fairlead_edge_translate::Translator,
    memo: memo::Memo,
}

impl Pipeline {
    /// A pipeline whose WAF rule sets are checked by `waf` (the WAF engine compiling them).
    pub fn with_waf(waf: std::sync::Arc<dyn fairlead_edge_translate::waf::Compile>) -> Self {
        Self {
            translator: fairlead_edge_translate::Translator::with_waf(waf),
            memo: memo::Memo::default(),
        }
    }

    /// Translates and renders everything served by `controller_name`.
    pub fn run(&mut self, input: &Input, controller_name: &str) -> Translation {
        let mut gateways = BTreeMap::new();
        let memo = &mut self.memo;
        let statuses = self
            .translator
            .translate(input, controller_name, |key, ir| {
                gateways.insert(key.clone(), resources::resources(&ir, memo));
            });
        memo.finish();
        Translation { gateways, statuses }
    }
}
