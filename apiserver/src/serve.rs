//! The server's front, per request: HTTPS and the kubeconfig (`server`), what a request
//! carries (`request`, `path`), who makes it (`authn`), what is asked rather than stored
//! (`reviews`), validating admission (webhooks and policies), the REST verbs over the store
//! (`api`), watches, discovery and OpenAPI documents, `Table` responses, and the protobuf wire
//! form of built-in kinds. The top room: it uses the three others, none uses it.

pub mod admission;
pub mod api;
pub mod authn;
pub mod discovery;
pub mod openapi;
pub mod openapi_proto;
pub mod path;
pub mod protobuf;
pub mod request;
pub mod reviews;
pub mod server;
pub mod table;
pub mod watch;
