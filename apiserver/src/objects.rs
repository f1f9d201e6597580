//! What a write does to an object, as the real server decides it: the kinds served
//! (`resources`, `crd`), metadata rules (`meta`), defaults, validation of built-in kinds and
//! CRD schemas (with CEL rules and patterns, compiled once: `compiled`), allocations (cluster IPs, node ports), server-side apply and
//! the other patches, `/scale`, label and field selectors, and API errors as `metav1.Status`.
//! The bottom room: it uses no other.

pub mod allocate;
pub mod apply;
pub mod cel;
pub mod compiled;
pub mod crd;
pub mod defaults;
pub mod errors;
pub mod meta;
pub mod patch;
pub mod resources;
pub mod scale;
pub mod schema;
pub mod selectors;
pub mod validation;
