//! The Gateway API relationship graph: a pure function from the edge's published index
//! (the translator's input) and the world beside it (statuses, ServiceWithHealthchecks,
//! proxy workloads) to typed nodes and named edges with their health, and the pure
//! operations the service and the CLI serve it with — per-user views and filters, diffs,
//! renderings, the traffic overlay's merge.
//!
//! - `id`: node ids (`group/kind/namespace/name[/section]`);
//! - `model`: nodes, edges, health, traffic;
//! - `world` and `certificate`: what is read besides the input;
//! - `build` (with `health`, its rules): the graph;
//! - `filter`, `diff`, `render`, `traffic`: views, changes, JSON/DOT/Mermaid, Prometheus's
//!   numbers on routes and backends;
//! - `json`: each element's JSON, written into documents; `digest`: its digest, kept in
//!   the element for versions;
//! - `status`: a node's status summary, kept as its JSON text once drawn.

mod build;
pub mod certificate;
pub mod diff;
mod digest;
pub mod filter;
pub mod health;
pub mod id;
mod json;
pub mod model;
pub mod render;
pub mod status;
pub mod traffic;
pub mod world;

pub use build::{Memo, build, build_with};
pub use id::NodeId;
pub use model::{Edge, Graph, Health, Node, Relation};
pub use world::World;
