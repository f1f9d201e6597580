//! The edge's shared vocabulary, the one crate every room of the edge may depend on: the
//! Gateway API objects (and the core objects they point at) as the translator and the graph
//! read them (`input`), the `alb.network.deckhouse.io/*` route annotations read into typed
//! values (`annotations`) and the htpasswd users one of them names (`htpasswd`), the table of
//! kinds the edge watches (`kinds`), what an ALB instance asks of its Gateway's proxies
//! (`instance`), the names and constants the rooms must agree on (`names`), and the encoded
//! Envoy resources the render stage hands the xDS server (`resources`), and a WAF rule set as
//! the SecLang the engine compiles (`seclang`). Plain data and pure functions: no I/O, no
//! Kubernetes client.

pub mod annotations;
pub mod duration;
pub mod htpasswd;
pub mod input;
pub mod instance;
pub mod kinds;
pub mod names;
pub mod resources;
pub mod seclang;

pub use fairlead_key::ObjectKey;
pub use names::CONTROLLER_NAME;
pub use resources::{Encoded, Resources, WithoutGeoip};
