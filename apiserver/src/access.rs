//! Who may do what, beside the requests: the users, ServiceAccount tokens (signed and
//! checked), RBAC authorization over the stored roles and bindings, and the audit log. Uses
//! `storage` and `objects`; `serve` authenticates, reviews and admits requests with it.

pub mod audit;
pub mod rbac;
pub mod tokens;
pub mod user;
