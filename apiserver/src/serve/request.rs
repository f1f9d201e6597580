//! What every handler of a request shares: the server's state, the query, the response body
//! type, and the selectors a list or watch parses (apart from the verbs, `api`, and the
//! watch streams, `watch`, which both use them).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

use crate::objects::errors::ApiError;
use crate::objects::resources::{Registry, ResourceType};
use crate::objects::selectors::{FieldSelector, LabelSelector};
use crate::objects::validation::ValidationOptions;
use crate::storage::store::Store;

/// The response body type.
pub type Body = BoxBody<Bytes, Infallible>;

/// Everything a request needs.
#[derive(Debug)]
pub struct ApiState {
    /// The objects.
    pub store: Arc<Store>,
    /// The served types.
    pub registry: Registry,
    /// Validation switches.
    pub validation: ValidationOptions,
    /// The admin's bearer token.
    pub token: String,
    /// The key ServiceAccount tokens are signed and checked with.
    pub signer: crate::access::tokens::Signer,
    /// Wakes the garbage collector after deletions.
    pub gc: Arc<tokio::sync::Notify>,
    /// Interval of watch bookmarks.
    pub bookmark_interval: std::time::Duration,
    /// Where each request is recorded, if anywhere.
    pub audit: Option<crate::access::audit::AuditLog>,
}

/// Query parameters, first value of each.
pub type Query = HashMap<String, String>;

/// Parsed selectors of a list or watch.
pub fn selectors(
    rt: &ResourceType,
    query: &Query,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(e.0))?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").map_or("", String::as_str),
        &rt.kind,
    )
    .map_err(|e| ApiError::bad_request(e.0))?;
    Ok((labels, fields))
}
